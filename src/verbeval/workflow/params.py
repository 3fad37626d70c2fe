"""What a rule's params and wildcard constraints are made of (plain values the Snakefile binds)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

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
