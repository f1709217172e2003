"""The progress line of `bench`: drawn on a terminal only, erased around every printed row."""
import io

from pytpp.benchmarks._progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_silent_when_not_a_terminal():
    stream = io.StringIO()
    p = Progress(stream, delay=0)
    p.begin(1, 2, "matmul")
    p.step("matmul fp32 64x64x64")
    p.clear()
    assert stream.getvalue() == ""


def test_line_on_a_terminal_erased_around_rows(capsys):
    stream = Terminal()
    p = Progress(stream, delay=0)
    p.begin(2, 4, "eltwise")
    p.step("relu float32 n=16")
    text = stream.getvalue()
    assert text.startswith("\r\033[K[") and "2/4 eltwise: 1 cases" in text
    assert "relu float32 n=16" in text
    printed = p.printer(print)
    printed("a row")
    assert capsys.readouterr().out == "a row\n"
    # erased before the row, drawn again after it
    assert stream.getvalue()[len(text):].startswith("\r\033[K\r\033[K[")
    p.clear()
    assert stream.getvalue().endswith("\r\033[K")


def test_waits_for_its_delay():
    stream = Terminal()
    p = Progress(stream, delay=3600)
    p.begin(1, 1, "matmul")
    p.step("x")
    assert stream.getvalue() == ""
