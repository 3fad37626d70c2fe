"""A model source, one value: :class:`ModelSource`, what names the model to load (its hub id or
local folder, hub revision, GGUF file and the sha256 that file is pinned to) and how it is loaded.

It is built once where a model is named: from a config model entry (:meth:`ModelSource.from_entry`,
the workflow plan), from a command's parsed options (:meth:`ModelSource.from_options`, declared by
:func:`verbeval.core.cliutil.model_source_options`), and is written back as those options
(:meth:`ModelSource.options`, the words of every rule command that loads the model). The loaders
(:mod:`verbeval.core.models`, the SimVerb and veridicality loaders, :mod:`verbeval.core.fasttok`)
take it whole, so a new parameter of a source is added here, to the option helper and to the config
schema, and nowhere else (``docs/architecture.md``, "Adding a model source").
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.model_ids import ModelRef


@dataclass(frozen=True)
class ModelSource:
    """A model to load: ``id`` (hub id or local folder), hub ``revision``, GGUF ``file`` in that folder
    or repository (config ``gguf_file``) and the sha256 ``pin`` of that file (a pip model's
    ``pip.sha256``); frozen, comparable and hashable."""

    id: str
    revision: str | None = None
    file: str | None = None
    pin: str | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def of(cls, source: ModelSource | str) -> ModelSource:
        """``source`` itself, or a bare hub id or local folder (no revision, file or pin) as a source."""
        return source if isinstance(source, ModelSource) else cls(str(source))

    @classmethod
    def from_entry(cls, m: Mapping[str, Any]) -> ModelSource:
        """From a model entry of the config (:func:`verbeval.core.model_entries.model_entries`):
        ``id``, ``revision``, ``gguf_file`` and, for a pip model, ``pip.sha256``."""
        pip = m.get("pip")
        return cls(str(m["id"]), m.get("revision") or None, m.get("gguf_file") or None, pip["sha256"] if pip else None)

    @classmethod
    def from_options(cls, a: argparse.Namespace) -> ModelSource:
        """From the parsed options of :func:`verbeval.core.cliutil.model_source_options` (``--model``,
        ``--revision``, ``--gguf-file``, ``--sha256``; a command without the last two has none). The
        pin needs the file it pins."""
        file, pin = getattr(a, "gguf_file", None), getattr(a, "sha256", None)
        if pin and not file:
            raise VerbevalError("--sha256 pins a GGUF file: give --gguf-file too")
        return cls(a.model, a.revision, file, pin)

    @classmethod
    def from_named_options(cls, a: argparse.Namespace) -> dict[str, ModelSource]:
        """name -> source, from the ``NAME=VALUE`` options of
        :func:`verbeval.core.cliutil.named_model_source_options` (``--model``, ``--revision``,
        ``--gguf-file``; in the order of ``--model``)."""
        from verbeval.core.cliutil import split_pair

        def pairs(items: list[str] | None, option: str) -> dict[str, str]:
            return dict(split_pair(item, option) for item in items or [])

        revisions, files = pairs(a.revision, "--revision"), pairs(a.gguf_file, "--gguf-file")
        return {
            name: cls(model_id, revisions.get(name), files.get(name))
            for name, model_id in pairs(a.model, "--model").items()
        }

    # ------------------------------------------------------------------ command lines

    def options(self, model: bool = False) -> list[str]:
        """The command-line words that carry the source: ``--revision``, ``--gguf-file`` and
        ``--sha256`` (those it has, in that order), after ``--model ID`` with ``model``."""
        return (
            (["--model", self.id] if model else [])
            + (["--revision", self.revision] if self.revision else [])
            + (["--gguf-file", self.file] if self.file else [])
            + (["--sha256", self.pin] if self.pin else [])
        )

    def named_options(self, name: str) -> list[str]:
        """``--revision NAME=REV`` and ``--gguf-file NAME=FILE`` (those it has) of a command that
        names several models (``verbeval topk-table``, which loads only tokenizers: the pin of a pip
        model's file is the one recorded beside it, :func:`verbeval.core.model_sources.pins.check_pinned`)."""
        return (["--revision", f"{name}={self.revision}"] if self.revision else []) + (
            ["--gguf-file", f"{name}={self.file}"] if self.file else []
        )

    def describe(self) -> str:
        """A short name for messages: the id, with its revision and GGUF file when it has them."""
        return self.id + (f"@{self.revision}" if self.revision else "") + (f" ({self.file})" if self.file else "")

    # ------------------------------------------------------------------ loading

    @property
    def ref(self) -> ModelRef:
        """What the id names (:class:`verbeval.core.model_ids.ModelRef`)."""
        return ModelRef(self.id)

    def local_problem(self, need_config: bool = True) -> str | None:
        """Why the local model cannot be loaded, or None (also for hub ids):
        :meth:`verbeval.core.model_ids.ModelRef.local_problem` with the GGUF file."""
        return self.ref.local_problem(need_config, self.file)

    def check_local(self, need_config: bool = True, what: str = "model") -> None:
        """Raise :class:`VerbevalError` when :meth:`local_problem` finds one."""
        self.ref.check_local(need_config, what, self.file)

    def gguf_location(self) -> tuple[str, str]:
        """(folder, file name) of a GGUF model for ``from_pretrained(folder, gguf_file=name)``: the local
        folder, or the hub repository's file in the Hugging Face cache (downloaded once).

        The file is checked against its pin first (:func:`verbeval.core.model_sources.pins.check_pinned`:
        :attr:`pin` when given, else the sha256 recorded beside a pip model's file), then its header
        (:func:`verbeval.core.model_sources.gguf_header.check_gguf_header`): a file that is not the
        pinned one, or whose header states sizes the file does not hold, is never handed to transformers."""
        from verbeval.core.model_sources.gguf import require_gguf, resolve_file
        from verbeval.core.model_sources.gguf_header import check_gguf_header
        from verbeval.core.model_sources.pins import check_pinned

        if not self.file:
            raise VerbevalError(f"model {self.id!r}: no GGUF file")
        require_gguf(self.id)
        ref = self.ref
        path = resolve_file(ref.location, self.file, self.revision, ref.is_dir)
        check_pinned(path, self.id, self.pin)
        check_gguf_header(path, self.id)  # every size in it bounded by the file, before transformers reads it
        return str(path.parent), path.name

    def gguf_folder(self) -> str:
        """The ordinary model folder of a GGUF model, dequantised once and cached
        (:func:`verbeval.core.model_sources.gguf_cache.cached_folder`), once the file is checked
        (:meth:`gguf_location`): what every job reads instead of the GGUF file."""
        from verbeval.core.model_sources.gguf_cache import cached_folder

        folder, name = self.gguf_location()
        return str(cached_folder(Path(folder) / name, self.id))

    def resolve(self) -> tuple[str, dict[str, Any]]:
        """(what to pass to ``from_pretrained``, extra keyword arguments), once its header is checked:
        a GGUF file's by :meth:`gguf_location` (then its cached folder, :meth:`gguf_folder`), a local
        folder's config.json by :func:`verbeval.core.model_sources.config_sizes.check_config_sizes`
        (sizes its weights do not have stop here, before transformers builds anything from them), a
        hub id with its revision."""
        if self.file:
            return self.gguf_folder(), {}
        ref = self.ref
        if ref.is_dir:
            from verbeval.core.model_sources.config_sizes import check_config_sizes

            check_config_sizes(ref.location, self.id)
        return ref.location, {"revision": self.revision}
