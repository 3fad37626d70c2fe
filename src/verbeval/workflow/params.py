"""What a rule's params, wildcard constraints and named outputs are made of (plain values the Snakefile
binds)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: a regex that matches nothing: the wildcard constraint of a rule with no job in this configuration
NOTHING = "(?!x)x"


class Untracked:
    """A rule param that is no rerun trigger. Snakemake's params trigger compares only params of
    builtin types (its persistence records nothing else), so a change of this value reruns nothing.
    For where the data comes from (data_mirror) and the manifest's path: the bytes are checked
    either way."""

    def __init__(self, value: object) -> None:
        self.value = str(value)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Untracked({self.value!r})"


def alternatives(names: Sequence[str]) -> str:
    """A wildcard constraint matching exactly ``names`` (:data:`NOTHING` when there is none)."""
    return "|".join(map(re.escape, names)) or NOTHING


def quoted(options: Sequence[str]) -> str:
    """Shell words, each quoted."""
    return " ".join(shlex.quote(o) for o in options)


def wrapped(outputs: Mapping[str, Any], wrap: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """A rule's named outputs with ``wrap[name]`` applied to the files of each output it names (the
    rule's ``report(...)``: what the Snakemake report registers)."""
    unknown = sorted(set(wrap) - set(outputs))
    if unknown:
        raise KeyError(f"no output named {unknown} (outputs: {list(outputs)})")
    return {name: wrap[name](files) if name in wrap else files for name, files in outputs.items()}


def output_files(outputs: Mapping[str, Any], names: Sequence[str] | None = None, **wildcards: str) -> list[str]:
    """The files of a rule's named outputs (of ``names``, in that order; default: every one), each
    pattern's ``{wildcard}`` filled in from ``wildcards``: the rule's targets in rule all."""
    found: list[str] = []
    for name in outputs if names is None else names:
        files = outputs[name]
        found += [files] if isinstance(files, str) else list(files)
    for wildcard, value in wildcards.items():
        found = [f.replace(f"{{{wildcard}}}", value) for f in found]
    return found


@dataclass(frozen=True)
class RuleRecord:
    """What a rule reads by name (``**STEP.aggregate.input``, ``PLAN.comparisons.rules.compare.log``): its
    inputs and outputs (a list, or names to patterns; a function of the job's wildcards where a file
    depends on the model), its params (values, and functions of the job's wildcards), its log file and
    its wildcard constraints. The rule's ``shell:`` writes the command with them."""

    input: Any
    output: Any
    log: str
    params: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, str] = field(default_factory=dict)
