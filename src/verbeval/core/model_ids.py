"""What a model id names: a local path or a hub id, its file-system friendly name, and why a local
model cannot be loaded, all answered by one :class:`ModelRef`.

A hub id is ``NAME`` or ``ORG/NAME``; an id written as a path (``/``, ``./``, ``../``, ``~``) or
naming an existing directory is a local path (:attr:`ModelRef.meant_as_path` for the full rule).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from verbeval.core.errors import VerbevalError

PATH_PREFIXES = ("/", "./", "../", "~")


@dataclass(frozen=True)
class ModelRef:
    """A model id as written in a config or on a command line, and every answer about it.

    ``ModelRef("./models/tiny").is_dir``, ``ModelRef("org/model").name == "org--model"``,
    ``ModelRef(mid).check_local(what="tokenizer for model")``.
    """

    #: the id exactly as written (a hub id ``NAME`` or ``ORG/NAME``, or a local path)
    id: str

    @property
    def written_as_path(self) -> bool:
        """True when the id is written as a path (absolute, ``./``, ``../`` or ``~``), not a hub id."""
        return self.id.startswith(PATH_PREFIXES)

    @property
    def location(self) -> str:
        """The id with ``~`` expanded in a local path (for ``from_pretrained`` and :class:`Path`);
        hub ids are returned unchanged."""
        return os.path.expanduser(self.id) if self.id.startswith("~") else self.id

    @property
    def is_dir(self) -> bool:
        """True when the id names an existing local directory (rather than a hub id)."""
        return Path(self.location).is_dir()

    @property
    def meant_as_path(self) -> bool:
        """True when the id is meant as a local directory rather than a hub id.

        A hub id is ``NAME`` or ``ORG/NAME``. An id is read as a local path when it:

        * is written as a path (:attr:`written_as_path`: ``/``, ``./``, ``../``, ``~``);
        * names an existing directory;
        * has more than one ``/`` (no hub id does);
        * is ``A/B`` where ``A`` is an existing local directory (relative to the working directory, i.e.
          the workflow's directory): ``models/tiny-gpt2`` with a ``models/`` folder here, the style of
          ``.test/config/ci.yaml``.

        Anything else is a hub id. Unlike :attr:`name`, this depends on the file system; it only
        decides whether a missing directory is an error, never what a model is named.
        """
        trimmed = ModelRef(self.id.rstrip("/"))
        if trimmed.written_as_path or trimmed.is_dir:
            return True
        parts = trimmed.id.split("/")
        return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())

    @property
    def name(self) -> str:
        """File-system friendly name of the model, used in result paths.

        A path written as a path (absolute, or starting with ``./``, ``../`` or ``~``) gives its
        basename; anything else is a hub id, ``org/model`` -> ``org--model``. Set ``name:`` in the config
        to choose another. The result does not depend on whether the path exists.
        """
        trimmed = ModelRef(self.id.rstrip("/"))
        base = Path(trimmed.id).name if trimmed.written_as_path else trimmed.id.replace("/", "--")
        return re.sub(r"[^A-Za-z0-9._-]+", "_", base)

    def local_problem(self, need_config: bool = True, file: str | None = None) -> str | None:
        """Why the local model cannot be loaded, or None (also for hub ids).

        A path (:attr:`meant_as_path`) that does not exist, that is not a directory, a directory
        without ``config.json`` (with ``need_config``), or, with a GGUF ``file``, a directory without that
        GGUF file (a GGUF file holds its own config and tokenizer).
        """
        model_id = self.id
        p = Path(self.location)
        if p.is_dir():
            if file:
                if (p / file).is_file():
                    return None
                return f"local model directory {model_id} has no GGUF file {file}"
            if need_config and not (p / "config.json").is_file():
                ggufs = sorted(f.name for f in p.glob("*.gguf"))
                if ggufs:
                    return (
                        f"local model directory {model_id} has no config.json but holds GGUF file(s) "
                        f"{', '.join(ggufs[:3])}: list it under models: with gguf_file: <one of them> "
                        "(docs/models.md); simverb.models and veridicality.models take only save_pretrained "
                        "folders and hub ids"
                    )
                return f"local model directory {model_id} has no config.json (not a model saved with save_pretrained)"
            return None
        if not self.meant_as_path:
            return None
        if p.exists():
            return f"local path {model_id} is not a directory"
        hint = ""
        if not self.written_as_path:
            first = model_id.split("/")[0]
            hint = (
                f" (read as a path because ./{first} is a local folder; a hub id is NAME or ORG/NAME)"
                if model_id.count("/") == 1
                else " (read as a path: a hub id has at most one '/')"
            )
        return f"local path {model_id} does not exist{hint}"

    def check_local(self, need_config: bool = True, what: str = "model", file: str | None = None) -> None:
        """Raise :class:`VerbevalError` when :meth:`local_problem` finds one (``file``: a GGUF file)."""
        problem = self.local_problem(need_config, file)
        if problem:
            raise VerbevalError(f"cannot load {what} {self.id!r}: {problem}")
