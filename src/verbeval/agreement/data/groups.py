"""The agreement groups file: which template sources make up each group, in table order.

:func:`load_groups` reads and checks ``agreement_groups.yaml``; :func:`run_groups` appends a run's
custom groups; :func:`write_groups` writes the run's groups as a file that :func:`load_groups` reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from verbeval.agreement.data.custom_pairs import CustomGroup
from verbeval.core.errors import InputError
from verbeval.core.io import load_yaml

#: group ids and source names of a groups file (as the config schema's ``identifier``)
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _check_identifier(path: str | Path, text: str, what: str) -> None:
    """An id or source name reaches file names and shell commands: ``what`` begins the error."""
    if not _IDENTIFIER.fullmatch(text):
        raise InputError(
            path, f"{what} may hold only letters, digits, '.', '_' and '-' (it reaches file names and shell commands)"
        )


def load_groups(path: str | Path) -> list[dict[str, Any]]:
    """Read ``agreement_groups.yaml``: a list of ``{id, name, sources}`` in table order.

    Raises:
        InputError: when the file is missing, not YAML, or a group lacks an id/name/sources, has
            an empty or non-string entry, or an id or source repeats.
    """
    p = Path(path)
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except yaml.YAMLError as exc:
        raise InputError(p, f"invalid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list) or not data["groups"]:
        raise InputError(p, "expected a mapping with a non-empty list under 'groups'")
    groups: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_sources: dict[str, str] = {}
    for n, entry in enumerate(data["groups"], start=1):
        where = f"group #{n}"
        if not isinstance(entry, dict):
            raise InputError(p, f"{where}: expected a mapping")
        unknown = set(entry) - {"id", "name", "sources"}
        if unknown:
            raise InputError(p, f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        gid, name, sources = entry.get("id"), entry.get("name"), entry.get("sources")
        if not isinstance(gid, str) or not gid:
            raise InputError(p, f"{where}: 'id' must be a non-empty string")
        where = f"group {gid!r}"
        _check_identifier(p, gid, f"{where}: an id")
        if gid in seen_ids:
            raise InputError(p, f"{where}: duplicate id")
        if not isinstance(name, str) or not name:
            raise InputError(p, f"{where}: 'name' must be a non-empty string")
        if not isinstance(sources, list) or not sources:
            raise InputError(p, f"{where}: 'sources' must be a non-empty list")
        for s in sources:
            if not isinstance(s, str) or not s:
                raise InputError(p, f"{where}: source names must be non-empty strings")
            _check_identifier(p, s, f"{where}: source {s!r}: a source name")
            if s in seen_sources:
                raise InputError(p, f"{where}: source {s!r} is already in group {seen_sources[s]!r}")
            seen_sources[s] = gid
        seen_ids.add(gid)
        groups.append({"id": gid, "name": name, "sources": list(sources)})
    return groups


def run_groups(groups: Sequence[Mapping[str, Any]], custom: Sequence[CustomGroup] = ()) -> list[dict[str, Any]]:
    """The groups of a run in table order: ``groups`` (from the groups file), then the custom ones."""
    out = [{"id": g["id"], "name": g["name"], "sources": list(g["sources"])} for g in groups]
    return out + [{"id": c.id, "name": c.name, "sources": [c.source]} for c in custom]


def write_groups(path: str | Path, groups: Sequence[Mapping[str, Any]]) -> None:
    """Write ``groups`` as a groups file that :func:`load_groups` reads (atomically)."""
    from verbeval.core.io import write_text

    head = "# The agreement groups of this run, in table order (verbeval templates --groups-out).\n"
    write_text(path, head + yaml.safe_dump({"groups": [dict(g) for g in groups]}, sort_keys=False, allow_unicode=True))
