"""The model entries of a workflow configuration: ``models[]`` with their defaults, each entry's
``revisions`` expanded (one model per checkpoint, with its step and the tokens or words seen read
from its name, on ``agreement.checkpoint_axis``), the pip models and their folders, the
``tiny_models`` the workflow builds, the ``toy_models`` it trains (and their checkpoint folders), and
Table 2's selection (``agreement.table_models``, else one model per entry: a sweep's
``table_revision``). Every bad entry raises :class:`EntryError` naming its key path.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.model_ids import ModelRef
from verbeval.core.schema import schema_entry
from verbeval.core.steps import INFERENCE_BATCH_SIZE


def keypath_text(keypath: Sequence[str | int]) -> str:
    """A configuration key path as the messages name it (``models.0.id``; ``<top level>`` for none)."""
    return ".".join(str(k) for k in keypath) or "<top level>"


class EntryError(VerbevalError):
    """A bad model entry (or ``agreement.table_models``), with the key path it is about."""

    def __init__(self, keypath: Sequence[str | int], reason: str) -> None:
        super().__init__(f"{keypath_text(keypath)}: {reason}")
        self.keypath = list(keypath)
        self.reason = f"{keypath_text(keypath)}: {reason}"


def normalise_model_path(model_id: str) -> str:
    """A model id written as a relative or absolute path, in one spelling (``./m/x/`` -> ``m/x``)."""
    return os.path.normpath(model_id)


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


#: the x axes of a checkpoint sweep (``agreement.checkpoint_axis``): the revision's key, the axis label
CHECKPOINT_AXES = {
    "steps": ("step", "training step"),
    "tokens": ("tokens", "tokens seen"),
    "words": ("words", "words seen"),
}
_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_SEEN = {
    "tokens": re.compile(r"(?:^|[^A-Za-z])tokens[-_]?(\d+(?:\.\d+)?)([KMBT]?)(?![A-Za-z0-9.])", re.IGNORECASE),
    "words": re.compile(r"(?:^|[^A-Za-z])(?:chck|words)[-_]?(\d+(?:\.\d+)?)([KMBT]?)(?![A-Za-z0-9.])", re.IGNORECASE),
}


def parse_seen(label: str, unit: str) -> int | None:
    """The tokens or words (``unit``) seen in a revision or checkpoint folder name, or None.

    ``step1000-tokens4B`` (OLMo) gives 4,000,000,000 tokens; ``chck_10M`` (BabyLM) and ``words10M``
    give 10,000,000 words. Suffixes K, M, B and T (case-insensitive) scale by 10^3, 10^6, 10^9 and
    10^12; a decimal is read when the result is a whole number (``chck_0.5M`` gives 500,000), else
    the name gives None, as does any other name (``main``, a commit hash).
    """
    m = _SEEN[unit].search(label)
    if not m:
        return None
    whole, _, frac = m.group(1).partition(".")
    scale = _SCALE[m.group(2).upper()]
    num, den = int(whole + frac), 10 ** len(frac)
    return num * scale // den if (num * scale) % den == 0 else None


def revision_folder_key(path: str) -> str:
    """A local checkpoint folder in one spelling, to tell two revisions of one folder: ``~`` expanded,
    made absolute and resolved (``..``, ``.``, a trailing ``/`` and symbolic links; the folder need not
    exist yet)."""
    return os.path.realpath(os.path.expanduser(path))


def revision_label(text: str) -> str:
    """A revision or folder name made file-system safe: characters outside ``[A-Za-z0-9._-]`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.rstrip("/")).strip("_") or "_"


def _figure_needs_steps(config: Mapping[str, Any]) -> bool:
    figs = (config.get("agreement") or {}).get("figures") or {}
    return bool((figs.get("checkpoints") or {}).get("enabled", True))


def checkpoint_axis(config: Mapping[str, Any]) -> str:
    """``agreement.checkpoint_axis``: steps (default), tokens or words."""
    return str((config.get("agreement") or {}).get("checkpoint_axis") or "steps")


def expand_revisions(
    entry: dict[str, Any], index: int, needs_step: bool = True, axis: str = "steps"
) -> list[dict[str, Any]]:
    """The models of one ``models[]`` entry: itself, or one model per item of its ``revisions``.

    Every key of the entry (also keys this function does not know) is carried to each revision.
    A revision item is a hub revision string or a mapping with ``revision`` or ``path`` (a local
    checkpoint folder, then the model's id), and optional ``step``, ``tokens``, ``words`` and
    ``name``. Each expanded model gets ``name`` (default ``<name>@<label>``, the label being the
    revision or the folder's last component made file-system safe), ``checkpoint_of`` (the entry's
    name), ``step`` (given, or :func:`parse_step` of the label), ``tokens`` and ``words`` (given, or
    :func:`parse_seen` of the label) and ``in_table`` (whether it is the entry's column block of Table 2
    and the model comparison: the revision ``table_revision`` names, else the last one). With
    ``needs_step``, a revision without a value on ``axis`` (``steps``, ``tokens`` or ``words``,
    :data:`CHECKPOINT_AXES`) or with the value of another revision is an error. Raises
    :class:`EntryError` naming the key.
    """
    items = entry.get("revisions")
    if items is None:
        for key in ("table_revision", "figure_revisions"):
            if entry.get(key) is not None:
                raise EntryError(["models", index, key], f"only an entry with `revisions` has a {key}")
        return [entry]
    where = ["models", index]
    if entry.get("revision") is not None:
        raise EntryError(where, "set either `revision` or `revisions`, not both")
    base = {k: v for k, v in entry.items() if k not in ("revisions", "table_revision", "figure_revisions")}
    base_name = str(base["name"])
    key, unit = CHECKPOINT_AXES[axis]
    out: list[dict[str, Any]] = []
    labels: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    positions: dict[int, int] = {}
    for j, item in enumerate(items):
        at = where + ["revisions", j]
        spec = {"revision": item} if isinstance(item, str) else dict(item)
        if ("revision" in spec) == ("path" in spec):
            raise EntryError(at, "give exactly one of `revision` (a hub revision) and `path` (a local folder)")
        kind, value = ("revision", spec["revision"]) if "revision" in spec else ("path", spec["path"])
        same = (kind, value.rstrip("/") if kind == "revision" else revision_folder_key(value))
        if same in seen:
            raise EntryError(at, f"{kind} {value!r} is listed twice (also item {seen[same]})")
        seen[same] = j
        text = value if kind == "revision" else Path(value.rstrip("/")).name
        label = revision_label(text)
        step = spec.get("step")
        if step is None:
            step = parse_step(text)
        seen_values = {u: spec[u] if spec.get(u) is not None else parse_seen(text, u) for u in ("tokens", "words")}
        position = step if axis == "steps" else seen_values[axis]
        if position is None and needs_step:
            if axis == "steps":
                raise EntryError(
                    at,
                    f"no training step for {kind} {value!r}: set `step:` (it is read only from names "
                    "like step1000, step1000-tokens4B or checkpoint-1000), or turn off "
                    "agreement.figures.checkpoints.enabled",
                )
            names = "like step1000-tokens4B" if axis == "tokens" else "like chck_10M or words10M"
            raise EntryError(
                at,
                f"no {unit} for {kind} {value!r} (agreement.checkpoint_axis is {axis}): set `{key}:` (it is read "
                f"only from names {names}), or set agreement.checkpoint_axis to another axis, or turn off "
                "agreement.figures.checkpoints.enabled",
            )
        if position is not None and needs_step:
            if position in positions:
                what = "step" if axis == "steps" else f"{key} value"
                raise EntryError(
                    at,
                    f"{what} {position} is also the {what} of item {positions[position]}: the checkpoint figure "
                    f"needs one checkpoint per {'step' if axis == 'steps' else key + ' value'}",
                )
            positions[position] = j
        m = {
            **base,
            "name": spec.get("name") or f"{base_name}{REVISION_SEP}{label}",
            "checkpoint_of": base_name,
            "step": step,
            **seen_values,
            "in_table": False,
            "in_figures": False,
        }
        if kind == "revision":
            m["revision"] = value
        else:
            m["id"], m["revision"] = value, None
        out.append(m)
        labels.append(label)
    names = [str(m["name"]) for m in out]
    table = _table_item(entry, index, labels, names)
    out[table]["in_table"] = True
    for j in {0, table, len(out) - 1, *_figure_items(entry, index, labels, names)}:
        out[j]["in_figures"] = True
    return out


def _figure_items(entry: Mapping[str, Any], index: int, labels: list[str], names: list[str]) -> list[int]:
    """The items of an entry's ``revisions`` that ``figure_revisions`` names (revision labels or model
    names), beside the first, the table revision and the last, which are always drawn."""
    where = ["models", index, "figure_revisions"]
    return [
        j
        for k, want in enumerate(entry.get("figure_revisions") or [])
        for j in _named(want, labels, names, [*where, k])
    ]


def _table_item(entry: Mapping[str, Any], index: int, labels: list[str], names: list[str]) -> int:
    """The item of an entry's ``revisions`` that ``table_revision`` names (a revision label, as in
    ``<name>@<label>``, or the revision's model name), the last one when it names none."""
    chosen = entry.get("table_revision")
    if chosen is None:
        return len(labels) - 1
    return _named(chosen, labels, names, ["models", index, "table_revision"])[0]


def _named(want: str, labels: list[str], names: list[str], where: list[Any]) -> list[int]:
    """The items of an entry's revisions whose label or model name is ``want`` (at least one; else
    :class:`EntryError` at ``where``, listing the first labels)."""
    hits = [j for j, (label, name) in enumerate(zip(labels, names)) if want in (label, name)]
    if not hits:
        listed = ", ".join(labels[:6]) + (", ..." if len(labels) > 6 else "")
        raise EntryError(where, f"{want!r} is not one of the entry's revisions ({listed})")
    return hits


def model_entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Model entries with ``name`` filled in and the global inference defaults applied.

    An entry with ``revisions`` becomes one model per revision (:func:`expand_revisions`), in
    the order listed; other entries are returned as they are.
    """
    return [m for _, m in entries_with_keys(config)]


def entries_with_keys(config: dict[str, Any]) -> list[tuple[list[str | int], dict[str, Any]]]:
    """(key path of the model's id, entry) of every model of :func:`model_entries`."""
    inf = config.get("inference", {})
    needs_step = _figure_needs_steps(config)
    axis = checkpoint_axis(config)
    out: list[tuple[list[str | int], dict[str, Any]]] = []
    for i, m in enumerate(config.get("models", [])):
        entry = {**entry_defaults(), **m}
        if entry["pip"] is not None:
            entry["id"] = pip_model_id(config, m, i)
        elif "id" not in m:
            if not _all_paths(m.get("revisions")):
                raise EntryError(
                    ["models", i], "a model needs `id` (hub id or local folder), or `pip` with `name` and `gguf_file`"
                )
            if "name" not in m:
                raise EntryError(["models", i], "a sweep of local checkpoint folders without `id` needs `name`")
            entry["id"] = m["revisions"][0]["path"]  # each revision's folder is its own id
        entry.setdefault("name", ModelRef(entry["id"]).name)
        entry.setdefault("batch_size", inf.get("batch_size", INFERENCE_BATCH_SIZE.default()))
        items = m.get("revisions")
        for j, e in enumerate(expand_revisions(entry, i, needs_step, axis)):
            path_item = items is not None and isinstance(items[j], Mapping) and "path" in items[j]
            out.append((["models", i, "revisions", j, "path"] if path_item else ["models", i, "id"], e))
    return out


def entry_defaults() -> dict[str, Any]:
    """What a ``models`` entry holds for a key it leaves out: the schema's default of each ``models[]``
    key that has one (the one place each is written), and None for ``gguf_file`` and ``pip`` (no
    default: a saved model, no pip package)."""
    keys = schema_entry("models[]")["properties"]  # type: ignore[index]
    return {
        "gguf_file": None,
        "pip": None,
        **{k: copy.deepcopy(v["default"]) for k, v in keys.items() if "default" in v},
    }


def _all_paths(items: Any) -> bool:
    """Whether ``revisions`` lists only local checkpoint folders (``path`` items): then the entry needs no ``id``."""
    return bool(items) and all(isinstance(it, Mapping) and "path" in it for it in items)


def pip_model_id(config: Mapping[str, Any], entry: Mapping[str, Any], index: int) -> str:
    """The folder a ``pip`` model is assembled in, its id: ``<pip_models_dir>/<name>``."""
    for key in ("name", "gguf_file"):
        if key not in entry:
            raise EntryError(["models", index, "pip"], f"a pip model needs `{key}`")
    for key in ("id", "revision", "revisions"):
        if entry.get(key) is not None:
            raise EntryError(["models", index, key], f"a pip model has no `{key}` (its id is <pip_models_dir>/<name>)")
    # a validated config: the schema's default filled in and {results_dir} expanded (verbeval.core.config)
    return f"{normalise_model_path(str(config['pip_models_dir']))}/{entry['name']}"


def pip_models(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The models of a validated config obtained from pip packages, by their folder (their id)."""
    return {normalise_model_path(m["id"]): m for m in model_entries(config) if m.get("pip") is not None}


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


#: the checkpoint folder of a toy model trained by the workflow, below its ``out``: ``step-<N>``
TOY_CHECKPOINT = "step-{step}"


def toy_model_specs(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``toy_models`` the workflow trains (rule train_toy), by normalised output folder (of a
    validated config); ``steps`` defaults to the last checkpoint."""
    specs: dict[str, dict[str, Any]] = {}
    for entry in config.get("toy_models") or []:
        out = normalise_model_path(str(entry["out"]))
        if out in specs or out in tiny_model_specs(config):
            raise VerbevalError(f"toy_models: two entries write {out}")
        spec = dict(entry)
        spec["checkpoints"] = sorted(int(c) for c in entry["checkpoints"])
        if spec.get("steps") is None:
            spec["steps"] = spec["checkpoints"][-1]
        specs[out] = spec
    return specs


def toy_checkpoint_folders(config: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """``{folder: (toy model's out, step)}`` of every checkpoint folder the ``toy_models`` write."""
    return {
        f"{out}/{TOY_CHECKPOINT.format(step=step)}": (out, step)
        for out, spec in toy_model_specs(config).items()
        for step in spec["checkpoints"]
    }


def built_model_folders(config: Mapping[str, Any]) -> set[str]:
    """The model folders the workflow makes itself (tiny, pip and toy checkpoint folders), normalised:
    they need not exist before the run."""
    return set(tiny_model_specs(config)) | set(pip_models(dict(config))) | set(toy_checkpoint_folders(config))


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


def entry_models(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One model name per ``models[]`` entry, in order: an entry without revisions as it is, a swept
    entry's revision marked ``in_table`` (its ``table_revision``, else its last): Table 2's models when
    ``agreement.table_models`` is null, and the model comparison figure's."""
    return [str(m["name"]) for m in entries if m.get("checkpoint_of") is None or m.get("in_table")]


def figure_models(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The models Figures 1-4 and the per-lemma figure draw, in order: every model of an entry without
    revisions, and of a sweep the revisions marked ``in_figures`` (its first, its ``table_revision``,
    its last and those ``figure_revisions`` names), so that a sweep's figures cost what a few models
    cost however many revisions it has. Their data CSVs keep every model."""
    return [str(m["name"]) for m in entries if m.get("checkpoint_of") is None or m.get("in_figures")]


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
