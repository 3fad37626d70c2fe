"""Workflow configuration: its layers (files and ``--config``, and which one set a key), and
JSON-schema validation with defaults.

The schema (``schemas/config.schema.yaml``) is the single description of every key; the Snakefile
and the CLI both validate through :func:`validate_config`. The model entries a configuration
describes are :mod:`verbeval.core.model_entries`; whether each model can be loaded here is
:mod:`verbeval.core.model_checks`.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from verbeval.core.errors import VerbevalError
from verbeval.core.io import load_yaml
from verbeval.core.model_entries import EntryError, check_table_models, keypath_text, model_entries
from verbeval.core.schema import SCHEMA_FILE, load_schema, resolved, schema_default, schema_entry, schema_path

__all__ = ["SCHEMA_FILE", "load_schema", "schema_default", "schema_entry", "schema_path"]

#: (label, content) of one configuration source, in merge order: a config file or ``--config``
Layer = tuple[str, Mapping[str, Any]]


def _with_defaults(validator_cls: Any) -> Any:
    validate_props = validator_cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                sub = resolved(sub)  # a key whose schema is a $ref: the default of what it points at
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
            data = load_yaml(Path(f).read_text()) or {}
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


def validate_config(
    config: dict[str, Any], source: str = "config", layers: Sequence[Layer] | None = None
) -> dict[str, Any]:
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
        hint = ""
        if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
            known = list(err.schema.get("properties", {}))
            extra = sorted(set(map(str, err.instance)) - set(known))
            key_of_origin = keypath + extra[:1]
            hint = did_you_mean(extra[0], known) if extra else ""
        raise VerbevalError(f"{origin(key_of_origin)}: invalid value at {keypath_text(keypath)}: {err.message}{hint}")
    expand_results_dir(config, origin)
    try:
        check_agreement(config)
        entries = model_entries(config)
        check_table_models(config, entries)
    except EntryError as exc:
        raise VerbevalError(f"{origin(exc.keypath)}: {exc.reason}") from None
    names = [m["name"] for m in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise VerbevalError(
            f"{origin(['models'])}: model names must be unique; duplicated: {', '.join(dupes)} (set `name:`)"
        )
    for i, m in enumerate(entries):
        if m["gpus"] > 1 and m["device_map"] is None:
            raise VerbevalError(
                f"{origin(['models', i, 'gpus'])}: models[{i}] ({m['name']}): gpus: {m['gpus']} "
                "without a device_map would use only one GPU; set device_map: auto (or gpus: 1)"
            )
    return config


#: a path of the configuration that starts with it stands in the run's results folder (``results_dir``)
RESULTS_DIR_FIELD = "{results_dir}"


def expand_results_dir(config: dict[str, Any], origin: Any = None) -> None:
    """Replace :data:`RESULTS_DIR_FIELD` in every string of ``config`` (in place) by ``results_dir``: the
    models a run builds (``tiny_models[].out``, ``pip_models_dir``) can live in its results folder, so a
    second results folder never rebuilds the first one's (issue 64). ``results_dir`` itself may not hold it."""
    results_dir = str(config["results_dir"])
    if RESULTS_DIR_FIELD in results_dir:
        where = origin(["results_dir"]) if origin else "config"
        raise VerbevalError(f"{where}: results_dir {results_dir!r} may not contain {RESULTS_DIR_FIELD}")

    def expand(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(RESULTS_DIR_FIELD, results_dir)
        if isinstance(value, dict):
            return {k: v if k == "results_dir" else expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [expand(v) for v in value]
        return value

    config.update(expand(config))


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`` (did you mean `x`?)`` for the closest of ``known`` to a misspelt key, else ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


#: Table 2 reads EW and MW at this top-p cutoff (verbeval.agreement.report.tables.table2)
TABLE2_CUTOFF = 1.0


def check_agreement(config: Mapping[str, Any]) -> None:
    """Agreement settings the schema cannot express; raises :class:`EntryError` naming the key.

    ``agreement.groups: []`` with no ``custom_groups`` selects nothing to evaluate; Table 2 reads
    EW and MW at top-p 1.0, so ``agreement.top_cutoffs`` must include it.
    """
    agr = config.get("agreement") or {}
    if agr.get("groups") == [] and not agr.get("custom_groups"):
        raise EntryError(
            ["agreement", "groups"],
            "[] selects no group and agreement.custom_groups is empty, so "
            "there is nothing to evaluate: list group ids, or null for all",
        )
    cuts = agr.get("top_cutoffs")
    if cuts is not None and not any(abs(float(c) - TABLE2_CUTOFF) < 1e-9 for c in cuts):
        raise EntryError(
            ["agreement", "top_cutoffs"],
            f"{cuts} lacks 1.0: Table 2 reports EW and MW at top-p 1.0 (the whole vocabulary); add 1.0",
        )


def config_sha256(config: Mapping[str, Any]) -> str:
    """sha256 of a validated configuration as canonical JSON (sorted keys, no spaces): the config hash
    an export names (``docs/export.md``)."""
    import hashlib
    import json

    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_config(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = load_yaml(p.read_text()) or {}
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
