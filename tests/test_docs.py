"""Every ```python block of docs/*.md is a doctest, and it runs as written.

Each block runs on its own, with empty globals: it imports and defines every name it uses.
Blocks marked ```cython (or plain ``` diagrams and tables) are not collected.
"""
import doctest
import pathlib
import re

import numpy as np
import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _blocks():
    """(file name, block index, first line number, code) of every ```python block."""
    found = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        for i, match in enumerate(FENCE.finditer(text)):
            line = text.count("\n", 0, match.start(1))   # 0-based line of the block's first line
            found.append((path.name, i, line, match.group(1)))
    return found


BLOCKS = _blocks()


def test_docs_have_python_blocks():
    assert BLOCKS, f"no ```python blocks found under {DOCS}"


@pytest.mark.parametrize("name,index,line,code", BLOCKS,
                         ids=[f"{name}-{index}" for name, index, _, _ in BLOCKS])
def test_docs_block(name, index, line, code):
    assert ">>>" in code, (f"docs/{name} python block {index} (line {line + 1}) is not a doctest: "
                           f"write it as >>> lines with their output, or mark it ```cython / ```")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(code, {}, f"docs/{name}[{index}]", str(DOCS / name), line)
    assert test.examples, f"docs/{name} python block {index} has no examples"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    with np.printoptions(legacy=False):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) failed in docs/{name} block {index}"
