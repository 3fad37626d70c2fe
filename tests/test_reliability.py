"""Issue 13: every expected fault ends with one line naming its cause, and leaves nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verbeval.cli import main
from verbeval.errors import VerbevalError
from verbeval.io import atomic_path, check_writable, stale_temporaries, write_text

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


# --------------------------------------------------------------------------- 4: temporaries of killed jobs


def _writer(target: Path, ready: Path) -> subprocess.Popen[bytes]:
    """A process that opens ``target`` with atomic_path, writes a little and then hangs."""
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from verbeval.io import atomic_path
        with atomic_path({str(target)!r}) as tmp:
            tmp.write_text("partial")
            Path({str(ready)!r}).write_text(str(tmp))
            time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def _wait_for(path: Path) -> str:
    for _ in range(600):
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_killed_writer_leaves_a_temporary_that_the_next_write_removes(tmp_path: Path) -> None:
    target = tmp_path / "out" / "1-of-2.parquet"
    proc = _writer(target, tmp_path / "ready")
    tmp = Path(_wait_for(tmp_path / "ready"))
    assert tmp.name.startswith(".1-of-2.parquet.") and tmp.name.endswith(".tmp")
    assert stale_temporaries(target) == []  # a live writer holds its temporary
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert tmp.exists() and not target.exists()  # what a killed job leaves
    # another target's temporary, in the same folder, is never touched
    other = tmp_path / "out" / ".1-of-2.parquet.x.abcd1234.tmp"
    other.write_text("someone else's")
    assert stale_temporaries(target) == [tmp]
    write_text(target, "complete")
    assert target.read_text() == "complete"
    assert sorted(p.name for p in target.parent.iterdir()) == [other.name, target.name]


def test_a_live_writer_of_the_same_target_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "a.csv"
    proc = _writer(target, tmp_path / "ready")
    try:
        tmp = Path(_wait_for(tmp_path / "ready"))
        write_text(target, "mine")
        assert tmp.exists() and tmp.read_text() == "partial"
    finally:
        proc.kill()
        proc.wait()


def test_failed_block_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
