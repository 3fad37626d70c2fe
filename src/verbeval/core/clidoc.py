"""The sub-command table of ``docs/workflow.md``, generated from the ``verbeval`` parser.

The one-line help of each sub-command (``src/verbeval/commands.py``) is the single source of the
table: :func:`render_section` writes it between :data:`BEGIN` and :data:`END`, and
``verbeval docs-cli --check`` fails when the file differs, so the documented list always equals
the parser's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from verbeval.core.errors import InputError

BEGIN = (
    "<!-- BEGIN verbeval docs-cli: generated from the help strings in src/verbeval/*/cli.py; "
    "run `verbeval docs-cli` after changing them -->"
)
END = "<!-- END verbeval docs-cli -->"


def _subparsers_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise ValueError(f"{parser.prog} has no sub-commands")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{name: one-line help}`` of every sub-command, in the order they were added."""
    return {a.dest: a.help or "" for a in _subparsers_action(parser)._choices_actions}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``{name: parser}`` of every sub-command."""
    return dict(_subparsers_action(parser).choices)


def command_table(parser: argparse.ArgumentParser) -> str:
    """Markdown table ``command | what it does``, one row per sub-command."""
    rows = ["| command | what it does |", "| --- | --- |"]
    rows += [f"| `{name}` | {help_.replace('|', chr(92) + '|')} |" for name, help_ in subcommands(parser).items()]
    return "\n".join(rows) + "\n"


def _bounds(text: str, path: str | Path) -> tuple[int, int]:
    """Start and end offsets of the generated section (the text between the marker lines)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise InputError(path, f"expected exactly one line {BEGIN!r} and one line {END!r}")
    start = text.index(BEGIN) + len(BEGIN) + 1
    stop = text.index(END)
    if stop < start:
        raise InputError(path, "the END marker of the generated sub-command table comes before its BEGIN marker")
    return start, stop


def render_section(text: str, table: str, path: str | Path) -> str:
    """``text`` with the section between the markers replaced by ``table``."""
    start, stop = _bounds(text, path)
    return text[:start] + table + text[stop:]


def documented_commands(text: str, path: str | Path) -> list[str]:
    """The command names listed in the generated section of ``text`` (first column, in backticks)."""
    start, stop = _bounds(text, path)
    names = []
    for line in text[start:stop].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].startswith("`") and cells[0].endswith("`"):
            names.append(cells[0].strip("`"))
    return names
