"""The key reference of ``docs/config.md``, generated from the configuration schema.

The schema (``schemas/config.schema.yaml``) is the one place each key's type, default and
description is written: :func:`render` rewrites every section of the document between a
``BEGIN verbeval docs-config KEY`` and an ``END verbeval docs-config KEY`` marker line with a table of
the keys under ``KEY`` (``top-level`` for the whole configuration), and ``verbeval docs-config
--check`` fails when the file differs. A key under a section's key that has a section of its own
(``models[].revisions[]`` under ``models[]``) is listed there, and every key is listed exactly once.
Keys are dotted paths, ``[]`` standing for the items of a list (as in
:func:`verbeval.core.config.schema_entry`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from verbeval.core.errors import InputError

#: the key of the section holding the top-level keys
TOP = "top-level"
_BEGIN = re.compile(r"^<!-- BEGIN verbeval docs-config (\S+):.*-->$", re.MULTILINE)
_SCHEMA = "src/verbeval/schemas/config.schema.yaml"


def begin_marker(key: str) -> str:
    """The line that opens the generated table of the keys under ``key``."""
    return (
        f"<!-- BEGIN verbeval docs-config {key}: generated from the descriptions and defaults in {_SCHEMA}; "
        "run `verbeval docs-config` after changing them -->"
    )


def end_marker(key: str) -> str:
    """The line that closes the generated table of the keys under ``key``."""
    return f"<!-- END verbeval docs-config {key} -->"


def _resolved(node: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (``#/definitions/NAME``, or a pointer below one) merged in, its own keys winning."""
    from verbeval.core.schema import ref_target

    out = dict(node)
    while "$ref" in out:
        target = ref_target(schema, out.pop("$ref"))
        out = {**target, **out}
    return out


def keys(schema: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """``(dotted key, its schema ($ref resolved), required)`` of every key of the configuration, in
    schema order, each before the keys under it."""

    def walk(node: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
        node = _resolved(node, schema)
        required = set(node.get("required", ()))
        for name, child in node.get("properties", {}).items():
            key = f"{prefix}.{name}" if prefix else name
            child = _resolved(child, schema)
            yield key, child, name in required
            yield from walk(child, key)
            items = child.get("items")
            if isinstance(items, Mapping):
                yield from walk(items, key + "[]")

    yield from walk(schema, "")


def _owner(key: str, sections: list[str]) -> str:
    """The section listing ``key``: the longest section key above it (``TOP`` above every key)."""
    above = [section for section in sections if section != TOP and key.startswith(section + ".")]
    return max(above, key=len, default=TOP)


_NOUNS = {"string", "integer", "number", "mapping", "list", "identifier"}


def _plural(text: str) -> str:
    """``string or mapping`` -> ``strings or mappings``."""
    parts = []
    for part in text.split(" or "):
        first, _, rest = part.partition(" ")
        parts.append(" ".join(filter(None, [first + "s", rest])) if first in _NOUNS else part)
    return " or ".join(parts)


def _single(kind: str, node: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    if kind in ("integer", "number"):
        low = ("(", node["exclusiveMinimum"]) if "exclusiveMinimum" in node else ("[", node.get("minimum"))
        high = (")", node["exclusiveMaximum"]) if "exclusiveMaximum" in node else ("]", node.get("maximum"))
        if low[1] is not None and high[1] is not None:
            return f"{kind} in {low[0]}{_value(low[1])}, {_value(high[1])}{high[0]}"
        if low[1] is not None:
            return f"{kind} {'>' if low[0] == '(' else '≥'} {_value(low[1])}"
        if high[1] is not None:
            return f"{kind} {'<' if high[0] == ')' else '≤'} {_value(high[1])}"
        return kind
    if kind == "string":
        return f"string matching `{node['pattern']}`" if "pattern" in node else "string"
    if kind == "array":
        text = "list"
        items = node.get("items")
        if isinstance(items, Mapping):
            text += " of " + _plural(type_text(items, schema))
        extra = []
        if "minItems" in node:
            extra.append(f"at least {node['minItems']}")
        if node.get("uniqueItems"):
            extra.append("no repeats")
        return text + (f" ({', '.join(extra)})" if extra else "")
    if kind == "object":
        names, values = node.get("propertyNames"), node.get("additionalProperties")
        if isinstance(names, Mapping) and isinstance(values, Mapping):
            return f"mapping of {_plural(type_text(names, schema))} to {_plural(type_text(values, schema))}"
        return "mapping"
    return kind  # boolean, null


def type_text(node: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """The type of a key as the table shows it: ``integer ≥ 1``, ``list of strings (at least 1)``, ...;
    a ``$ref`` to a definition that is no mapping by its name (``identifier``)."""
    ref = node.get("$ref", "")
    if ref.count("/") == 2 and "properties" not in _resolved(node, schema):
        return ref.rsplit("/", 1)[-1]
    node = _resolved(node, schema)
    if "const" in node:
        return f"`{_value(node['const'])}`"
    if "oneOf" in node:
        return " or ".join(type_text(option, schema) for option in node["oneOf"])
    if "enum" in node:
        text = ", ".join(f"`{_value(v)}`" for v in node["enum"] if v is not None)
        return text + (" or null" if None in node["enum"] else "")
    kinds = node.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    return " or ".join(_single(kind, node, schema) for kind in kinds) or "any"


_PLAIN = re.compile(r"^[A-Za-z0-9_./@-]+$")


def _value(value: Any) -> str:
    """``value`` written as YAML flow: ``null``, ``[png, pdf]``, ``{dev: simverb_500_dev}``, ``0.000001``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        plain = _PLAIN.match(value) and value not in ("null", "true", "false") and not _looks_numeric(value)
        return value if plain else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_value(k)}: {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML text for {value!r}")


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def default_text(node: Mapping[str, Any], required: bool) -> str:
    if "default" in node:
        return f"`{_value(node['default'])}`"
    return "— (required)" if required else "—"


def table(schema: Mapping[str, Any], section: str, sections: list[str]) -> str:
    """The Markdown table ``key | type | default | description`` of the keys ``section`` lists."""
    rows = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for key, node, required in keys(schema):
        if _owner(key, sections) == section:
            rows.append(
                f"| `{key}` | {_cell(type_text(node, schema))} | {_cell(default_text(node, required))} "
                f"| {_cell(node.get('description', ''))} |"
            )
    if len(rows) == 2:
        raise ValueError(f"the configuration schema has no key under {section!r}")
    return "\n".join(rows) + "\n"


def sections(text: str) -> list[str]:
    """The section keys of ``text`` (the ``KEY`` of each BEGIN marker), in order."""
    return _BEGIN.findall(text)


def undescribed(schema: Mapping[str, Any]) -> list[str]:
    """The keys whose schema has no ``description``."""
    return [key for key, node, _ in keys(schema) if not str(node.get("description", "")).strip()]


def render(text: str, schema: Mapping[str, Any], path: str | Path) -> str:
    """``text`` with the table of every section replaced by the one the schema generates."""
    found = sections(text)
    if TOP not in found:
        raise InputError(path, f"no line {begin_marker(TOP)!r}: the top-level keys would be listed nowhere")
    if len(set(found)) != len(found):
        raise InputError(path, f"a docs-config section appears twice: {', '.join(found)}")
    known = {key for key, _, _ in keys(schema)}
    for section in found:
        if section != TOP and section.rstrip("[]") not in known:
            raise InputError(path, f"docs-config section {section!r} is not a key of the configuration schema")
    for section in found:
        begin, end = begin_marker(section), end_marker(section)
        if text.count(begin) != 1 or text.count(end) != 1:
            raise InputError(path, f"expected exactly one line {begin!r} and one line {end!r}")
        start, stop = text.index(begin) + len(begin) + 1, text.index(end)
        if stop < start:
            raise InputError(path, f"the END marker of docs-config section {section!r} comes before its BEGIN marker")
        try:
            generated = table(schema, section, found)
        except ValueError as exc:
            raise InputError(path, str(exc)) from exc
        text = text[:start] + generated + text[stop:]
    return text


def documented_keys(text: str) -> list[str]:
    """The keys listed in the generated tables of ``text`` (first column, in backticks)."""
    names = []
    for section in sections(text):
        start, stop = text.index(begin_marker(section)), text.index(end_marker(section))
        for line in text[start:stop].splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0].startswith("`") and cells[0].endswith("`"):
                names.append(cells[0].strip("`"))
    return names
