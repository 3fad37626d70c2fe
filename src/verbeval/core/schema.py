"""The configuration schema (``schemas/config.schema.yaml``): the one description of every key and
the one definition of each default (:func:`schema_default`). Below :mod:`verbeval.core.config` and
:mod:`verbeval.core.model_entries`, which both read it."""

from __future__ import annotations

import copy
import functools
from importlib import resources
from pathlib import Path
from typing import Any

from verbeval.core.io import load_yaml

SCHEMA_FILE = "config.schema.yaml"


def schema_path() -> Path:
    return Path(str(resources.files("verbeval") / "schemas" / SCHEMA_FILE))


def load_schema() -> dict[str, Any]:
    return load_yaml(schema_path().read_text())


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return load_schema()


def ref_target(schema: Any, ref: str) -> Any:
    """The node of ``schema`` that ``ref`` (a JSON pointer into it: ``#/definitions/NAME``,
    ``#/definitions/NAME/properties/KEY``) points at."""
    node = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def resolved(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (:func:`ref_target`) merged in, its own keys winning."""
    while "$ref" in node:
        target = ref_target(_schema(), node["$ref"])
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def schema_entry(key: str) -> dict[str, Any] | None:
    """The schema of configuration key ``key`` (dotted: ``simverb.bins``; ``models[].dtype`` for a key
    of a list's items), its ``$ref`` resolved; None when the schema has no such key."""
    node: dict[str, Any] | None = _schema()
    for part in key.split("."):
        name, items = (part[:-2], True) if part.endswith("[]") else (part, False)
        node = resolved(node).get("properties", {}).get(name) if node is not None else None
        if node is not None and items:
            node = resolved(node).get("items")
    return None if node is None else resolved(node)


def schema_default(key: str) -> Any:
    """The schema's default of configuration key ``key`` (:func:`schema_entry`): the one definition of
    each default, which the configuration gets when it leaves the key out and ``verbeval``'s options
    that mirror the key take (:class:`verbeval.core.cliutil.ConfigDefault`)."""
    entry = schema_entry(key)
    if entry is None or "default" not in entry:
        raise KeyError(f"the configuration schema has no default for {key!r}")
    return copy.deepcopy(entry["default"])
