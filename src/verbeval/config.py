"""Workflow configuration: JSON-schema validation with defaults, and derived model entries.

The schema (``schemas/config.schema.yaml``) is the single description of every key; the Snakefile
and the CLI both validate through :func:`validate_config`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .errors import VerbevalError
from .models import local_model_problem, model_name

#: (label, content) of one configuration source, in merge order: a config file or ``--config``
Layer = tuple[str, Mapping[str, Any]]

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


def _label(path: str | Path) -> str:
    """A config file as the user would write it: relative to the working directory when inside it."""
    rel = os.path.relpath(os.path.abspath(path))
    return str(path) if rel.startswith("..") else rel


def config_layers(files: Sequence[str | Path], overrides: Mapping[str, Any] | None = None) -> list[Layer]:
    """The sources of a merged configuration in merge order: each file, then ``--config`` pairs."""
    layers: list[Layer] = []
    for f in files:
        try:
            data = yaml.safe_load(Path(f).read_text()) or {}
        except (OSError, yaml.YAMLError):
            data = {}
        layers.append((_label(f), data if isinstance(data, Mapping) else {}))
    if overrides:
        layers.append(("--config", dict(overrides)))
    return layers


def config_origin(keypath: Sequence[str | int], layers: Sequence[Layer], default: str | None = None) -> str:
    """The source that set the value at ``keypath``: the last layer reaching deepest along it.

    Mappings merge and lists replace, so the layer with the longest prefix of ``keypath`` (the last
    one among equals) is the one whose value is in effect. Without any layer setting even its first
    key, ``default`` (or all the layers' names).
    """
    best, depth_best = None, 0
    for label, data in layers:
        node: Any = data
        depth = 0
        for key in keypath:
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                break
            depth += 1
        if depth and depth >= depth_best:
            best, depth_best = label, depth
    return best or default or ", ".join(label for label, _ in layers) or "config"


def _where(keypath: Sequence[str | int]) -> str:
    return ".".join(str(k) for k in keypath) or "<top level>"


def validate_config(config: dict[str, Any], source: str = "config",
                    layers: Sequence[Layer] | None = None) -> dict[str, Any]:
    """Validate (in place, filling defaults) and return ``config``.

    Raises :class:`VerbevalError` with a one-line reason naming the offending key and its source:
    ``source``, or with ``layers`` (the files and ``--config`` merged into ``config``) the one
    that set the key (:func:`config_origin`).
    """
    def origin(keypath: Sequence[str | int]) -> str:
        return config_origin(keypath, layers) if layers else source

    validator = _with_defaults(jsonschema.Draft7Validator)(load_schema())
    # two passes: defaults of nested objects are filled on the first
    for _ in range(2):
        errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        keypath = list(err.absolute_path)
        key_of_origin = keypath
        if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
            extra = sorted(set(map(str, err.instance)) - set(err.schema.get("properties", {})))
            key_of_origin = keypath + extra[:1]
        raise VerbevalError(f"{origin(key_of_origin)}: invalid value at {_where(keypath)}: {err.message}")
    entries = model_entries(config)
    names = [m["name"] for m in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise VerbevalError(f"{origin(['models'])}: model names must be unique; duplicated: {', '.join(dupes)} "
                            "(set `name:`)")
    for i, m in enumerate(entries):
        if m["gpus"] > 1 and m["device_map"] is None:
            raise VerbevalError(f"{origin(['models', i, 'gpus'])}: models[{i}] ({m['name']}): gpus: {m['gpus']} "
                                "without a device_map would use only one GPU; set device_map: auto (or gpus: 1)")
    return config


def model_path_problems(config: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(key path, reason) of every local model of a validated config that cannot be loaded.

    A path that does not exist or is not a directory, or a directory without ``config.json``,
    among ``models``, ``veridicality.models`` and ``simverb.models`` (see
    :func:`verbeval.models.meant_as_path` for when an id is a path). Relative paths are relative
    to the working directory (the workflow's directory).
    """
    problems: list[tuple[list[str | int], str]] = []
    for i, m in enumerate(model_entries(dict(config))):
        problem = local_model_problem(str(m["id"]))
        if problem:
            problems.append((["models", i, "id"], f"model {m['name']}: {problem}"))
    for section in ("veridicality", "simverb"):
        ids = (config.get(section) or {}).get("models") or []
        for j, mid in enumerate(ids):
            if section == "veridicality" and mid == "ross-pavlick-2019-bert":  # veridicality.PSEUDO_MODEL
                continue
            problem = local_model_problem(str(mid))
            if problem:
                problems.append(([section, "models", j], f"{section} model {mid}: {problem}"))
    return problems


def check_model_paths(config: Mapping[str, Any], source: str = "config",
                      layers: Sequence[Layer] | None = None) -> None:
    """Raise :class:`VerbevalError` for the first of :func:`model_path_problems`, naming its key."""
    for keypath, reason in model_path_problems(config):
        where = config_origin(keypath, layers) if layers else source
        raise VerbevalError(f"{where}: {_where(keypath)}: {reason}")


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
        entry = {"kind": "auto", "dtype": "float32", "revision": None, "prepend_bos": None, "device_map": None,
                 "gpus": 1, **m}
        entry.setdefault("name", model_name(entry["id"]))
        entry.setdefault("batch_size", inf.get("batch_size", "auto"))
        out.append(entry)
    return out
