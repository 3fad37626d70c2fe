"""A model file is what its pin says before anything reads it.

A model file has a *pin* when its sha256 is known in advance: a pip model's (config
``models[].pip.sha256``, passed to the commands as ``--sha256``), and the file of any folder that
``verbeval pip-model`` assembled (its provenance file, :data:`PROVENANCE`, records the sha256 the
file was checked against). Every GGUF file is checked against its pin where it is read
(:meth:`verbeval.core.model_sources.source.ModelSource.gguf_location`), and the workflow checks the pip models' files when
it plans a run (:meth:`verbeval.workflow.repairs.RepairsPlan.changed_pinned_files`): a file changed after it
was assembled (a flipped byte, a truncation, a replacement) is assembled again from its verified
wheels, never loaded.

The check costs one hash per change of the file: digests are cached by (path, size, mtime, inode,
ctime) (:func:`verbeval.core.model_sources.fingerprint.file_sha256`), and a replacement cannot
keep the inode and ctime even when it keeps the size and mtime.
"""

from __future__ import annotations

import json
from pathlib import Path

from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.fingerprint import file_sha256
from verbeval.core.model_sources.pip_package import PROVENANCE


def recorded_pin(path: str | Path) -> str | None:
    """The sha256 the provenance file beside ``path`` records for it (a folder assembled by
    ``verbeval pip-model``), else None. An unreadable provenance file records nothing."""
    p = Path(path)
    try:
        recorded = json.loads((p.parent / PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("gguf_file") != p.name:
        return None
    sha = recorded.get("sha256")
    return str(sha).lower() if isinstance(sha, str) else None


def pin_problem(path: str | Path, pin: str) -> str | None:
    """Why the file at ``path`` is not the one pinned by ``pin`` (missing, or another sha256), else None."""
    p = Path(path)
    if not p.is_file():
        return f"{p} is missing"
    got = file_sha256(p)
    if got != pin.lower():
        return f"{p} has sha256 {got}, pinned {pin.lower()} ({p.stat().st_size} bytes)"
    return None


def check_pinned(path: str | Path, model: str, pin: str | None = None) -> None:
    """VerbevalError (one line: the file, both digests, the fix) unless the file at ``path`` has its
    pin: ``pin`` when given, else the sha256 recorded beside it (:func:`recorded_pin`); a file
    without either is not checked."""
    want = pin or recorded_pin(path)
    if want is None:
        return
    problem = pin_problem(path, want)
    if problem is None:
        return
    folder = Path(path).parent
    fix = (
        f"it changed after it was assembled: delete {folder} and run again (the workflow assembles it "
        "again from its verified wheels)"
        if (folder / PROVENANCE).is_file()
        else "get the file again, or if you trust this file set the pinned sha256 to its sha256"
    )
    raise VerbevalError(f"model {model!r}: {problem}: not loaded; {fix}")
