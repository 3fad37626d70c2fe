"""The sub-command table of ``docs/workflow.md``, generated from the ``verbeval`` parser.

The one-line help and the group of each sub-command (where it is registered, ``add(...)``; the
parser: ``src/verbeval/commands.py``) are the single source of the table, grouped as ``verbeval
--help`` lists them: :func:`render_section` writes it between :data:`BEGIN` and :data:`END`, and
``verbeval docs-cli --check`` fails when the file differs, so the documented list always equals
the parser's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from verbeval.core.cliutil import COMMAND_GROUPS, GROUP_MARK
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


def _grouped_choices(parser: argparse.ArgumentParser) -> dict[str, list[argparse.Action]]:
    """``{group: its sub-commands' help entries}`` in :data:`COMMAND_GROUPS` order, each group's in the
    order they were added (a sub-command's group: ``add(..., group=...)``)."""
    action = _subparsers_action(parser)
    groups: dict[str, list[argparse.Action]] = {g: [] for g in COMMAND_GROUPS}
    for choice in action._choices_actions:
        groups[getattr(action.choices[choice.dest], GROUP_MARK, "step")].append(choice)
    return groups


def command_groups(parser: argparse.ArgumentParser) -> list[tuple[str, dict[str, str]]]:
    """``(heading, {name: one-line help})`` of each group of sub-commands, as ``verbeval --help`` lists them."""
    return [
        (COMMAND_GROUPS[g], {a.dest: a.help or "" for a in choices})
        for g, choices in _grouped_choices(parser).items()
        if choices
    ]


def list_by_group(parser: argparse.ArgumentParser) -> None:
    """List ``parser``'s sub-commands in its help under one heading per group (:func:`command_groups`),
    instead of argparse's one list (:class:`verbeval.core.cliutil.TopHelpFormatter` leaves that out).
    Only the help changes: the sections hold argparse's help entries of the sub-commands, not actions."""
    for g, choices in _grouped_choices(parser).items():
        if choices:
            parser.add_argument_group(COMMAND_GROUPS[g])._group_actions.extend(choices)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{name: one-line help}`` of every sub-command, in the order of ``verbeval --help`` (by group)."""
    return {name: help_ for _, commands in command_groups(parser) for name, help_ in commands.items()}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``{name: parser}`` of every sub-command."""
    return dict(_subparsers_action(parser).choices)


def command_table(parser: argparse.ArgumentParser) -> str:
    """Markdown: per group of sub-commands its heading (bold) and a table ``command | what it does``, one
    row per sub-command, in the order of ``verbeval --help``."""
    parts = []
    for heading, commands in command_groups(parser):
        rows = [f"**{heading[:1].upper()}{heading[1:]}**", "", "| command | what it does |", "| --- | --- |"]
        rows += [f"| `{name}` | {help_.replace('|', chr(92) + '|')} |" for name, help_ in commands.items()]
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


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
