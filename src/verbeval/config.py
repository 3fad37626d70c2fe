"""Workflow configuration: JSON-schema validation with defaults, and derived model entries.

The schema (``schemas/config.schema.yaml``) is the single description of every key; the Snakefile
and the CLI both validate through :func:`validate_config`.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import VerbevalError
from .models import model_name

SCHEMA_FILE = "config.schema.yaml"


def schema_path() -> Path:
    return Path(str(resources.files("verbeval") / "schemas" / SCHEMA_FILE))


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(schema_path().read_text())


def _with_defaults(validator_cls: Any) -> Any:
    validate_props = validator_cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_cls, {"properties": set_defaults})


def validate_config(config: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate (in place, filling defaults) and return ``config``.

    Raises :class:`VerbevalError` with a one-line reason naming the offending key.
    """
    validator = _with_defaults(jsonschema.Draft7Validator)(load_schema())
    # two passes: defaults of nested objects are filled on the first
    for _ in range(2):
        errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "<top level>"
        raise VerbevalError(f"{source}: invalid value at {where}: {err.message}")
    entries = model_entries(config)
    names = [m["name"] for m in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise VerbevalError(f"{source}: model names must be unique; duplicated: {', '.join(dupes)} (set `name:`)")
    return config


def load_config(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except OSError as exc:
        raise VerbevalError(f"{p}: cannot read config: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise VerbevalError(f"{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise VerbevalError(f"{p}: config must be a mapping")
    return validate_config(data, str(p))


def model_entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Model entries with ``name`` filled in and the global inference defaults applied."""
    inf = config.get("inference", {})
    out = []
    for m in config.get("models", []):
        entry = {"kind": "auto", "dtype": "float32", "revision": None, "prepend_bos": None, **m}
        entry.setdefault("name", model_name(entry["id"]))
        entry.setdefault("batch_size", inf.get("batch_size", "auto"))
        out.append(entry)
    return out
