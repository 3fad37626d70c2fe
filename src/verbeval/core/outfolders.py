"""Output folders that a command replaces as a whole (``tiny-model``, ``train-toy``): never a folder it did not make.

A command builds its folder beside the target and, on success, writes :data:`MARKER` into it: a
record naming the command and every file it wrote. An existing folder at the target is replaced
only when it is that command's earlier output: empty, or holding the marker (or, for a folder
written before the marker existed, the command's older record, ``legacy``) and no file the marker
does not list. Whatever the marker says, the working folder and the folders above it (``.``,
``..``), ``$HOME``, a git repository's root and a folder holding git-tracked files are never
replaced. Anything else is refused with one line naming the folder and what is in it
(:func:`replace_problem`); the workflow's plan asks the same question for ``tiny_models`` and
``toy_models`` before any job runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from verbeval.core.errors import VerbevalError

#: the record of the command that wrote a folder (``{"command": ..., "files": [...]}``; ``"files": "all"``
#: for a run folder, :func:`fresh_run_folder`)
MARKER = ".verbeval-output.json"
#: the ``files`` of a run folder's marker: everything below it was written by the command's runs
RUN_FOLDER = "all"
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


def _marker_files(folder: Path, command: str) -> list[str] | str | None:
    """The files the marker of ``command`` in ``folder`` lists (:data:`RUN_FOLDER` for a run folder),
    else None (no such marker)."""
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("command") != command:
        return None
    files = record.get("files")
    if files == RUN_FOLDER:
        return RUN_FOLDER
    if not isinstance(files, list):
        return None
    return [str(f) for f in files]


def replace_problem(out: str | Path, command: str, legacy: Sequence[str] = ()) -> str | None:
    """Why ``command`` may not replace the folder ``out``, as ``<what it is>`` (no path), else None.

    None also when ``out`` does not exist. ``legacy``: glob patterns of the records ``command``
    wrote before :data:`MARKER` existed; a folder holding one counts as its earlier output."""
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
    listed = _marker_files(folder, command)
    if listed is None:
        if any(next(folder.glob(pattern), None) is not None for pattern in legacy):
            return None
        return f"it is not an earlier output of {command} (it holds {_shown(present)})"
    if listed == RUN_FOLDER:
        return None
    foreign = [n for n in present if n not in (MARKER, *TOOL_FILES) and n not in set(listed)]
    if foreign:
        return f"it holds files {command} did not write ({_shown(foreign)})"
    return None


def check_replaceable(out: str | Path, command: str, legacy: Sequence[str] = (), option: str = "--out") -> None:
    """Raise :class:`VerbevalError` (one line naming ``out`` and what is in it) when
    :func:`replace_problem` refuses it."""
    problem = replace_problem(out, command, legacy)
    if problem is not None:
        raise VerbevalError(f"{option} {out}: not replaced: {problem}; {ADVICE}")


def replace_folder(built: Path, out: str | Path, command: str, legacy: Sequence[str] = ()) -> Path:
    """Mark ``built`` as ``command``'s output (:data:`MARKER`) and rename it onto ``out``, replacing
    ``out`` only when :func:`replace_problem` allows it (checked again here, just before). ``built``
    must be on the same file system (beside ``out``). The earlier folder is moved aside, then removed."""
    from verbeval.core.io import write_json

    target = Path(out)
    check_replaceable(target, command, legacy)
    write_json(built / MARKER, {"command": command, "files": _files(built)})
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


def fresh_run_folder(folder: str | Path, command: str, legacy: Sequence[str] = (), option: str = "--workdir") -> Path:
    """An empty folder ``folder`` for a run of ``command`` that its children fill (a Snakemake run's
    results, logs and configuration), marked as the command's (:data:`MARKER`, ``"files": "all"``).

    An existing ``folder`` is emptied only when :func:`replace_problem` allows it: empty, or a run
    folder of ``command`` (or holding one of the ``legacy`` records); otherwise
    :class:`VerbevalError`, one line naming it (``option``: the option that chose it)."""
    from verbeval.core.io import write_json

    target = Path(folder)
    check_replaceable(target, command, legacy, option)
    _remove(_moved_aside(target))
    target.mkdir(parents=True)
    write_json(target / MARKER, {"command": command, "files": RUN_FOLDER})
    return target
