"""Helpers shared by the studies' command lines: argument types, option groups, the output
pre-flight and the help formatters (``verbeval.commands`` assembles the parser).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, Protocol

from verbeval.core.errors import VerbevalError

#: the sections of ``verbeval --help`` (and of the sub-command table of docs/workflow.md), in their
#: order: a command's group (``add(..., group=...)``, declared where the command is) -> the heading
COMMAND_GROUPS = {
    "user": "commands to run yourself",
    "step": "workflow steps (what the Snakemake rules run; each also runs by hand)",
    "maintainer": "maintainers' tools (generated docs, refactor checks)",
}

#: the attribute of a sub-command's parser that holds its group (a key of :data:`COMMAND_GROUPS`)
GROUP_MARK = "verbeval_group"


class Add(Protocol):
    """``add(name, func, help_, more, group=...)``: adds sub-command ``name`` running ``func``; ``help_``
    is its one-line summary, its description adds ``more``; ``group`` (a key of :data:`COMMAND_GROUPS`,
    default ``"step"``) is the section of ``verbeval --help`` that lists it (see :func:`subcommand_adder`)."""

    def __call__(
        self, name: str, func: Callable[[argparse.Namespace], None], help_: str, more: str, *, group: str = "step"
    ) -> argparse.ArgumentParser: ...


def float_list(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def check_outputs(*paths: str | None) -> None:
    """Pre-flight, before a model is loaded: every output's directory can be written to."""
    from verbeval.core.io import check_writable

    check_writable(*paths)


#: the attribute that marks an argparse action as a declared output (:class:`verbeval.core.steps.Output`)
OUTPUT_MARK = "verbeval_output"

#: a path's state: (inode, mtime_ns, size), None when there is nothing
Signature = tuple[int, int, int] | None


def declared_outputs(command: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The paths given to ``command``'s declared outputs (:data:`OUTPUT_MARK`) in ``args``, in
    declaration order (a list option's each)."""
    paths: list[str] = []
    for action in command._actions:
        if getattr(action, OUTPUT_MARK, False):
            value = getattr(args, action.dest, None)
            for v in value if isinstance(value, (list, tuple)) else [value]:
                if v is not None and str(v) not in paths:
                    paths.append(str(v))
    return paths


def signature(path: str) -> Signature:
    """``path``'s (inode, mtime_ns, size): an atomic write (a rename) or a folder's new entry changes it."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def interrupted_line(command: str, before: dict[str, Signature]) -> str:
    """What a command interrupted by Ctrl-C says: which of its outputs (``before``: their states
    when it started) it wrote. A file written is complete (every output is written atomically); a
    folder it changed may not be; the others were not written."""
    import os

    if not before:
        return f"verbeval {command}: interrupted"
    changed = [p for p, sig in before.items() if (now := signature(p)) is not None and now != sig]
    complete = [p for p in changed if not os.path.isdir(p)]
    partial = [p for p in changed if os.path.isdir(p)]
    unwritten = [p for p in before if p not in changed]
    if len(complete) == len(before):
        verb = "is" if len(complete) == 1 else "are"
        return f"verbeval {command}: interrupted after every output was written: {', '.join(complete)} {verb} complete"
    if not changed:
        return f"verbeval {command}: interrupted before any output was written ({', '.join(unwritten)}); run it again"
    parts = []
    if complete:
        parts.append(f"{', '.join(complete)} {'is' if len(complete) == 1 else 'are'} complete")
    if partial:
        parts.append(f"{', '.join(partial)} {'was' if len(partial) == 1 else 'were'} written to, perhaps not whole")
    parts.append(f"{', '.join(unwritten)} {'was' if len(unwritten) == 1 else 'were'} not written")
    return f"verbeval {command}: interrupted: {'; '.join(parts)}; run it again"


def split_pair(item: str, option: str, what: str = "VALUE") -> tuple[str, str]:
    """One ``NAME=VALUE`` argument of ``option`` -> (name, value); both must be non-empty."""
    name, sep, value = item.partition("=")
    if not sep or not name or not value:
        raise VerbevalError(f"{option} {item!r}: expected NAME={what}")
    return name, value


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help when it has a default worth stating: not for
    required options, flags, empty or unset defaults (a configuration key's too: a flag, a null
    default), list defaults (their help states them) or help that already names ``%(default)s``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_ = action.help or ""
        default = action.default
        if (
            "%(default)" in help_
            or action.required
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or isinstance(default, list)
            or (isinstance(default, ConfigDefault) and (action.nargs == 0 or default.value is None))
        ):
            return help_
        if not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return help_
        return help_ + " (default: %(default)s)"


class TopHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """The top-level help: description and epilog kept as written; the sub-commands are listed by
    :func:`verbeval.core.clidoc.list_by_group`'s sections, not as one list under ``COMMAND``."""

    def add_argument(self, action: argparse.Action) -> None:
        if not isinstance(action, argparse._SubParsersAction):
            super().add_argument(action)


class ConfigDefault:
    """The default of an option that mirrors configuration key ``key`` (dotted, ``models[].dtype`` for a
    key of a list's items): the schema's default (:func:`verbeval.core.config.schema_default`), the one
    place it is written, converted by ``form`` to the option's own form (e.g. a list to ``A,B``).

    It is read when it is used: :func:`subcommand_adder`'s commands replace it by :attr:`value` before
    they run (when the option was not given), and the help shows it; ``verbeval`` starts without
    reading the schema. ``tests/test_cli.py`` checks every option's against the schema (value, type,
    choices) and finds options that repeat a configuration default instead."""

    def __init__(self, key: str, form: Callable[[Any], Any] | None = None) -> None:
        self.key = key
        self.form = form

    @property
    def value(self) -> Any:
        from verbeval.core.schema import schema_default

        value = schema_default(self.key)
        return self.form(value) if self.form is not None else value

    def __str__(self) -> str:
        """As the help shows it and the option takes it (a list comma-separated)."""
        value = self.value
        if isinstance(value, (list, tuple)):
            return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        return str(value)

    def __repr__(self) -> str:
        return f"ConfigDefault({self.key!r})"


def with_config_defaults(a: argparse.Namespace) -> argparse.Namespace:
    """``a`` with every option left at a :class:`ConfigDefault` set to its value."""
    for name, value in vars(a).items():
        if isinstance(value, ConfigDefault):
            setattr(a, name, value.value)
    return a


def format_list(text: str) -> list[str]:
    """``--formats``: comma-separated figure formats (png, pdf, svg)."""
    from verbeval.core.plots import FORMATS

    items = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in FORMATS]
    if not items or bad:
        raise argparse.ArgumentTypeError(f"expected comma-separated formats among {', '.join(FORMATS)}, got {text!r}")
    return items


def optional_bool(text: str) -> bool | None:
    """``true``/``false``/``auto`` (None) of an option such as ``--prepend-bos`` or ``--random-init``."""
    t = text.lower()
    if t in ("auto", "none", "null", ""):
        return None
    if t in ("true", "yes", "1"):
        return True
    if t in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true, false or auto, got {text!r}")


def random_init_option(s: argparse.ArgumentParser) -> None:
    """``--random-init`` of a command that loads a model (verbeval.core.provenance)."""
    s.add_argument(
        "--random-init",
        type=optional_bool,
        default=None,
        help="whether the model is randomly initialised (recorded with the outputs; the tables and "
        "figures label it): true, false or auto (a local folder holding verbeval_tiny.json, "
        "written by verbeval tiny-model) (default: auto)",
    )


def subcommand_adder(sub: argparse._SubParsersAction) -> Add:
    """The ``add`` function each study's ``register`` receives, adding sub-commands to ``sub``."""

    def add(
        name: str, func: Callable[[argparse.Namespace], None], help_: str, more: str, *, group: str = "step"
    ) -> argparse.ArgumentParser:
        """A sub-command: ``help_`` is its one-line summary; its description adds ``more``; ``group``
        its section of the top-level help (:data:`COMMAND_GROUPS`)."""
        if group not in COMMAND_GROUPS:
            raise ValueError(f"sub-command {name}: group {group!r} is not one of {', '.join(COMMAND_GROUPS)}")
        sp = sub.add_parser(
            name, help=help_, description=f"{help_[:1].upper()}{help_[1:]}. {more}", formatter_class=HelpFormatter
        )
        sp.set_defaults(func=lambda a: func(with_config_defaults(a)))
        setattr(sp, GROUP_MARK, group)
        return sp

    return add


GGUF_HELP = (
    "a GGUF file in the --model folder or hub repository to load (transformers dequantises it; "
    "default: none, a saved model)"
)


def model_source_options(s: argparse.ArgumentParser, what: str) -> None:
    """``--model``, ``--revision``, ``--gguf-file`` and ``--sha256`` of a command that loads one model
    (``what`` ends the help of ``--model``: "hub id or local path <what>"): the words of
    :meth:`verbeval.core.model_sources.source.ModelSource.options`, read back by
    :meth:`~verbeval.core.model_sources.source.ModelSource.from_options`."""
    s.add_argument("--model", required=True, help=f"hub id or local path {what}")
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--gguf-file", help=GGUF_HELP)
    s.add_argument(
        "--sha256",
        type=sha256_arg,
        default=None,
        help="the sha256 the --gguf-file must have: a file with another one is refused before it is read "
        "(default: the sha256 recorded beside a pip model's file, else not checked)",
    )


def sha256_arg(text: str) -> str:
    """``--sha256``: 64 hexadecimal digits (returned in lower case)."""
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise argparse.ArgumentTypeError(f"expected 64 hexadecimal digits, got {text!r}")
    return text.lower()


def named_model_source_options(s: argparse.ArgumentParser) -> None:
    """``--model NAME=ID``, ``--revision NAME=REV`` and ``--gguf-file NAME=FILE`` of a command that
    loads the tokenizers of several models (``verbeval topk-table``): the words of
    :meth:`verbeval.core.model_sources.source.ModelSource.named_options`, read back by
    :meth:`~verbeval.core.model_sources.source.ModelSource.from_named_options`."""
    s.add_argument(
        "--model",
        action="append",
        default=[],
        required=True,
        metavar="NAME=ID",
        help="model name and hub id or path (for its tokenizer); repeat per model, in column order",
    )
    s.add_argument(
        "--revision",
        action="append",
        default=[],
        metavar="NAME=REV",
        help="hub revision of a model's tokenizer (branch, tag or commit); repeatable",
    )
    s.add_argument(
        "--gguf-file",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a model's GGUF file in its --model folder or repository (its tokenizer is read from it); repeatable",
    )
