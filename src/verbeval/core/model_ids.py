"""What a model id names: a local path or a hub id, its file-system friendly name, and why a local
model cannot be loaded.

A hub id is ``NAME`` or ``ORG/NAME``; an id written as a path (``/``, ``./``, ``../``, ``~``) or
naming an existing directory is a local path (:func:`meant_as_path` for the full rule).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from verbeval.core.errors import VerbevalError

PATH_PREFIXES = ("/", "./", "../", "~")


def written_as_path(model_id: str) -> bool:
    """True when ``model_id`` is written as a path (absolute, ``./``, ``../`` or ``~``), not a hub id."""
    return model_id.startswith(PATH_PREFIXES)


def meant_as_path(model_id: str) -> bool:
    """True when ``model_id`` is meant as a local directory rather than a hub id.

    A hub id is ``NAME`` or ``ORG/NAME``. An id is read as a local path when it:

    * is written as a path (:func:`written_as_path`: ``/``, ``./``, ``../``, ``~``);
    * names an existing directory;
    * has more than one ``/`` (no hub id does);
    * is ``A/B`` where ``A`` is an existing local directory (relative to the working directory, i.e.
      the workflow's directory): ``models/tiny-gpt2`` with a ``models/`` folder here, the style of
      ``.test/config/ci.yaml``.

    Anything else is a hub id. Unlike :func:`model_name`, this depends on the file system; it only
    decides whether a missing directory is an error, never what a model is named.
    """
    mid = model_id.rstrip("/")
    if written_as_path(mid) or Path(resolve_id(mid)).is_dir():
        return True
    parts = mid.split("/")
    return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())


def local_model_problem(model_id: str, need_config: bool = True, gguf_file: str | None = None) -> str | None:
    """Why the local model ``model_id`` cannot be loaded, or None (also for hub ids).

    A path (:func:`meant_as_path`) that does not exist, that is not a directory, a directory
    without ``config.json`` (with ``need_config``), or, with ``gguf_file``, a directory without that
    GGUF file (a GGUF file holds its own config and tokenizer).
    """
    p = Path(resolve_id(model_id))
    if p.is_dir():
        if gguf_file:
            return None if (p / gguf_file).is_file() else f"local model directory {model_id} has no GGUF file {gguf_file}"
        if need_config and not (p / "config.json").is_file():
            ggufs = sorted(f.name for f in p.glob("*.gguf"))
            if ggufs:
                return (f"local model directory {model_id} has no config.json but holds GGUF file(s) "
                        f"{', '.join(ggufs[:3])}: list it under models: with gguf_file: <one of them> (docs/models.md); "
                        "simverb.models and veridicality.models take only save_pretrained folders and hub ids")
            return (f"local model directory {model_id} has no config.json "
                    "(not a model saved with save_pretrained)")
        return None
    if not meant_as_path(model_id):
        return None
    if p.exists():
        return f"local path {model_id} is not a directory"
    hint = ""
    if not written_as_path(model_id):
        first = model_id.split("/")[0]
        hint = (f" (read as a path because ./{first} is a local folder; a hub id is NAME or ORG/NAME)"
                if model_id.count("/") == 1 else " (read as a path: a hub id has at most one '/')")
    return f"local path {model_id} does not exist{hint}"


def check_local_model(model_id: str, need_config: bool = True, what: str = "model",
                      gguf_file: str | None = None) -> None:
    """Raise :class:`VerbevalError` when :func:`local_model_problem` finds one."""
    problem = local_model_problem(model_id, need_config, gguf_file)
    if problem:
        raise VerbevalError(f"cannot load {what} {model_id!r}: {problem}")


def model_name(model_id: str) -> str:
    """File-system friendly name of a model, used in result paths.

    A path written as a path (absolute, or starting with ``./``, ``../`` or ``~``) gives its
    basename; anything else is a hub id, ``org/model`` -> ``org--model``. Set ``name:`` in the config
    to choose another. The result does not depend on whether the path exists.
    """
    mid = model_id.rstrip("/")
    if written_as_path(mid):
        base = Path(mid).name
    else:
        base = mid.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)


def resolve_id(model_id: str) -> str:
    """Expand ``~`` in a local path; hub ids are returned unchanged."""
    return os.path.expanduser(model_id) if model_id.startswith("~") else model_id


def is_local(model_id: str) -> bool:
    """True when ``model_id`` names an existing local directory (rather than a hub id)."""
    return Path(resolve_id(model_id)).is_dir()
