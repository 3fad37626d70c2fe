"""Output folders that a command replaces as a whole (``tiny-model``, ``train-toy``, the bench's run
folders): never a folder it did not make, never a file it did not write.

A command builds its folder beside the target and, on success, writes :data:`MARKER` into it: a
record naming the command and every file it wrote, with each file's size and sha256. An existing
folder at the target is replaced only when it is empty, or when every file in it is one the marker
lists, unchanged since the command wrote it (same size, same sha256): a marker alone proves nothing,
and neither does any other record (an older verbeval's ``verbeval_tiny.json``, a bench overlay, a
marker of an older format that listed names only). Whatever the marker says, the working folder and
the folders above it (``.``, ``..``), ``$HOME``, a git repository's root and a folder holding
git-tracked files are never replaced. Anything else is refused with one line naming the folder and
what is in it (:func:`replace_problem`); the workflow's plan asks the same question for
``tiny_models`` and ``toy_models`` before any job runs.

A run folder (:func:`run_folder`: a bench's Snakemake run, filled by child processes) is emptied at
the start of a run and its files recorded, with their hashes, when the run ends, well or not; a run
killed before that (``kill -9``) leaves its files unrecorded, and the folder is then refused like a
user's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from verbeval.core.errors import VerbevalError

#: the record of the command that wrote a folder: ``{"command": ..., "files": {name: {"size": ..., "sha256": ...}}}``
MARKER = ".verbeval-output.json"
#: files the workflow's tools add to a finished output folder, not a user's: Snakemake's mtime
#: carrier of a ``directory()`` output, created after every job that writes one
TOOL_FILES = (".snakemake_timestamp",)
#: the end of every refusal: what the user can do
ADVICE = "move it away or choose another folder"


def _files(folder: Path) -> list[str]:
    """Every file and link below ``folder``, relative, sorted (folders themselves are not listed)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink() or not p.is_dir())


def _shown(names: Sequence[str], limit: int = 3) -> str:
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def _tracked(folder: Path) -> list[str]:
    """The git-tracked files below ``folder`` (none outside a git work tree, or without git)."""
    git = shutil.which("git")
    if git is None:
        return []
    try:
        done = subprocess.run(
            [git, "-C", str(folder), "ls-files", "-z", "--", "."], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]


def _protected(folder: Path) -> str | None:
    """Why ``folder`` (an existing folder) is never replaced, else None."""
    real = folder.resolve()
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        return "it is the working folder or one above it"
    home = Path.home().resolve()
    if real == home or real in home.parents:
        return "it is the home folder or one above it"
    if (real / ".git").exists():
        return "it is the root of a git repository"
    tracked = _tracked(real)
    if tracked:
        return f"it holds files tracked by git ({_shown(tracked)})"
    return None


def _identity(path: Path) -> dict[str, object]:
    """What the marker records of one file: its size and sha256 (a link: its target)."""
    from verbeval.core.io import sha256_file

    if path.is_symlink():
        return {"link": os.readlink(path)}
    return {"size": path.stat().st_size, "sha256": sha256_file(path)}


def _unchanged(path: Path, recorded: object) -> bool:
    """Whether ``path`` is the file the marker recorded (``recorded``): same size and sha256, or the
    same link."""
    if not isinstance(recorded, dict):
        return False
    try:
        if path.is_symlink():
            return recorded.get("link") == os.readlink(path)
        if "sha256" not in recorded or recorded.get("size") != path.stat().st_size:
            return False
        return recorded == _identity(path)
    except OSError:
        return False


def _record(folder: Path, command: str) -> dict[str, object]:
    """The marker of ``command`` for ``folder`` as it is now: every file with its size and sha256."""
    files = [n for n in _files(folder) if n not in (MARKER, *TOOL_FILES)]
    return {"command": command, "files": {n: _identity(folder / n) for n in files}}


def _marker(folder: Path, command: str) -> dict[str, object] | str:
    """The files the marker of ``command`` in ``folder`` records (name: identity), else why there is
    none to trust (as ``<what it is>``)."""
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("command") != command:
        return f"it is not an earlier output of {command}"
    files = record.get("files")
    if not isinstance(files, dict):
        return f"its record of {command} ({MARKER}) is from an older verbeval, which recorded no file hashes"
    return files


def replace_problem(out: str | Path, command: str) -> str | None:
    """Why ``command`` may not replace the folder ``out``, as ``<what it is>`` (no path), else None.

    None also when ``out`` does not exist. Every file in ``out`` must be one that ``command``'s
    marker records, unchanged (:mod:`module docstring <verbeval.core.outfolders>`)."""
    folder = Path(out)
    if not (folder.exists() or folder.is_symlink()):
        return None
    if folder.is_symlink() or not folder.is_dir():
        return "it is not a folder"
    protected = _protected(folder)
    if protected is not None:
        return protected
    present = _files(folder)
    if not present:
        return None
    listed = _marker(folder, command)
    if isinstance(listed, str):
        return f"{listed} (it holds {_shown(present)})"
    present = [n for n in present if n not in (MARKER, *TOOL_FILES)]
    foreign = [n for n in present if n not in listed]
    if foreign:
        return f"it holds files {command} did not write ({_shown(foreign)})"
    changed = [n for n in present if not _unchanged(folder / n, listed[n])]
    if changed:
        return f"it holds files changed since {command} wrote them ({_shown(changed)})"
    return None


def check_replaceable(out: str | Path, command: str, option: str = "--out") -> None:
    """Raise :class:`VerbevalError` (one line naming ``out`` and what is in it) when
    :func:`replace_problem` refuses it."""
    problem = replace_problem(out, command)
    if problem is not None:
        raise VerbevalError(f"{option} {out}: not replaced: {problem}; {ADVICE}")


def replace_folder(built: Path, out: str | Path, command: str) -> Path:
    """Mark ``built`` as ``command``'s output (:data:`MARKER`, each file's size and sha256) and
    rename it onto ``out``, replacing ``out`` only when :func:`replace_problem` allows it (checked
    again here, just before). ``built`` must be on the same file system (beside ``out``). The
    earlier folder is moved aside, then removed."""
    from verbeval.core.io import write_json

    target = Path(out)
    check_replaceable(target, command)
    write_json(built / MARKER, _record(built, command))
    aside = _moved_aside(target)
    built.rename(target)
    _remove(aside)
    return target


def _moved_aside(target: Path) -> Path | None:
    """``target`` (when it exists) renamed to a hidden name beside it, so that its place is free at
    once; None when there is none."""
    if not target.exists():
        return None
    aside = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.rename(target, aside)
    return aside


def _remove(aside: Path | None) -> None:
    """The folder :func:`_moved_aside` put aside, removed (quietly: it is out of the way already)."""
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def run_folder(folder: str | Path, command: str, option: str = "--workdir") -> Iterator[Path]:
    """An empty folder ``folder`` for one run of ``command`` that its children fill (a Snakemake
    run's results, logs and configuration); when the block ends, well or not, every file in it is
    recorded in :data:`MARKER` with its size and sha256, so that the next run may empty it.

    An existing ``folder`` is emptied only when :func:`replace_problem` allows it (empty, or the
    recorded output of an earlier run of ``command``); otherwise :class:`VerbevalError`, one line
    naming it (``option``: the option that chose it)."""
    from verbeval.core.io import write_json

    target = Path(folder)
    check_replaceable(target, command, option)
    _remove(_moved_aside(target))
    target.mkdir(parents=True)
    write_json(target / MARKER, {"command": command, "files": {}})
    try:
        yield target
    finally:
        write_json(target / MARKER, _record(target, command))
