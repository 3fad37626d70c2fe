"""The examples in docstrings and docs run and print what they say they print.

Two kinds, both found by scanning (a new example is tested without a new test):

* every ``>>>`` example in a module of ``src/verbeval`` (doctest);
* every ```` ```python ```` block of ``docs/*.md`` that states its output: the block is followed by
  "prints" and a plain ```` ``` ```` block, or it ends in ``# `` comment lines after its last
  ``print``. Blocks without a stated output (e.g. ones that download a hub model) are only
  syntax-checked.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re

import pytest

from conftest import REPO_ROOT

SRC = REPO_ROOT / "src" / "verbeval"
DOCS = REPO_ROOT / "docs"


def _modules_with_examples() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            rel = path.relative_to(SRC.parent).with_suffix("")
            out.append(".".join(p for p in rel.parts if p != "__init__"))
    return out


def test_there_are_docstring_examples() -> None:
    assert _modules_with_examples(), "no >>> example found under src/verbeval: the scan is broken"


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{module}: '>>>' found in the file but no example collected"
    assert result.failed == 0, f"{module}: {result.failed} of {result.attempted} examples failed (output above)"


_BLOCK = re.compile(r"```python\n(.*?)```(?:\s*\n\s*prints\s*\n\s*```[a-z]*\n(.*?)```)?", re.S)


def _doc_blocks() -> list[tuple[str, str, str | None]]:
    """(id, code, expected output or None) of every python block in docs/*.md."""
    out = []
    for md in sorted(DOCS.glob("*.md")):
        text = md.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            code, printed = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            if printed is None:
                # trailing '# ' comment lines after the last print(...) state the output
                lines = code.rstrip("\n").split("\n")
                tail: list[str] = []
                while lines and lines[-1].startswith("# "):
                    tail.insert(0, lines.pop()[2:])
                if tail and any(ln.lstrip().startswith("print(") for ln in lines):
                    printed = "\n".join(tail) + "\n"
            out.append((f"{md.name}:{line}", code, printed))
    return out


def test_there_are_doc_examples_with_output() -> None:
    assert sum(p is not None for _, _, p in _doc_blocks()) >= 2  # docs/metrics.md's two worked examples


@pytest.mark.parametrize("where, code, printed", _doc_blocks(), ids=[b[0] for b in _doc_blocks()])
def test_doc_examples(where: str, code: str, printed: str | None) -> None:
    compiled = compile(code, where, "exec")
    if printed is None:
        return  # no stated output (it may need a hub model): compiled only
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compiled, {"__name__": "__doc_example__"})
    got = [ln.rstrip() for ln in buf.getvalue().strip("\n").split("\n")]
    want = [ln.rstrip() for ln in printed.strip("\n").split("\n")]
    assert got == want, f"{where}: the example printed\n" + "\n".join(got)
