"""The progress line of `python -m pytpp bench`: on stderr, only when stderr is a terminal.

A full run takes minutes and prints rows in bursts; the line says which benchmark runs, how many
cases it has finished and for how long the run has gone. It appears after a few seconds (short
runs stay as they were), is erased before every printed row and redrawn after it, so a terminal
shows the table intact; redirected stderr (a log file, a pipe, CI) never sees it.
"""
import shutil
import sys
import time


class Progress:
    """A self-erasing status line.

    Parameters
    ----------
    stream : file, optional
        Where the line goes (default ``sys.stderr``); nothing is written unless it is a TTY.
    delay : float
        Seconds of run time before the line first appears.
    """

    def __init__(self, stream=None, delay=3.0):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = delay
        self.start = time.monotonic()
        self.stage, self.index, self.total = "", 0, 0
        self.done, self.last = 0, ""
        self.shown = False

    def begin(self, index, total, name):
        """Benchmark `name`, the `index`-th (from 1) of `total`, starts."""
        self.stage, self.index, self.total = name, index, total
        self.done, self.last = 0, ""
        self.draw()

    def step(self, case):
        """One more case of the current benchmark is done."""
        self.done += 1
        self.last = case
        self.draw()

    def line(self):
        """The status text: a bar over the benchmarks, the current one, its cases, elapsed."""
        width = 20
        filled = width * max(self.index - 1, 0) // max(self.total, 1)
        bar = "#" * filled + "-" * (width - filled)
        elapsed = time.monotonic() - self.start
        text = (f"[{bar}] {self.index}/{self.total} {self.stage}: {self.done} cases, "
                f"{elapsed:.0f} s")
        return text + (f" (last: {self.last})" if self.last else "")

    def draw(self):
        if not self.enabled or time.monotonic() - self.start < self.delay:
            return
        columns = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r\033[K" + self.line()[: columns - 1])
        self.stream.flush()
        self.shown = True

    def clear(self):
        """Erase the line (before other output, and at the end)."""
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False

    def printer(self, out=print):
        """`out` wrapped so that the line is erased before and redrawn after each call."""
        def wrapped(*args, **kwargs):
            self.clear()
            out(*args, **kwargs)
            sys.stdout.flush()
            self.draw()
        return wrapped
