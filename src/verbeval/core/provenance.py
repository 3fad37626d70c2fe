"""Whether a model is randomly initialised, and how its numbers are labelled as such.

A random model's TSE/EW/MW are about 0.5 and look like real numbers; every output that shows them
says so (``docs/workflow.md``, "Randomly initialised models"). verbeval never guesses this from a
name. A model is random when:

* its config entry says ``random_init: true`` (``random_init: false`` says it is not, whatever its
  folder holds); else
* it is a local folder holding :data:`RANDOM_INIT_MARKER`, the record ``verbeval tiny-model``
  (:func:`verbeval.core.tiny_models.make_tiny_model`) has written into every model it built since the
  first verbeval version (architecture, seed, layers, hidden size, tokenizer): tiny models built by
  older versions are recognised too.

A hub id, a pip-packaged or GGUF checkpoint is never random unless its entry says so. The inference
job records the answer in its shard manifest (``meta.random_init``); the aggregates carry it on as
the ``random_init`` column of ``summary.csv`` / ``summary_all.csv`` and ``lemma_stats.csv``, which
the tables and figures read. Every other data file says it too: :func:`with_random_init` adds the
``random_init`` column to a table before it is written as a CSV, :func:`with_random_field` the field
to a JSON file's per-model records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: the record of a model built by ``verbeval tiny-model`` (its presence marks the model as random)
RANDOM_INIT_MARKER = "verbeval_tiny.json"
#: the mark after a random model's name in tables (explained by :func:`random_note`)
RANDOM_MARK = "†"
#: how a random model is named in figure titles and legends
RANDOM_SUFFIX = " (random init)"


def _folder(model_id: str | Path) -> Path:
    return Path(os.path.expanduser(str(model_id)))


def random_init_record(model_dir: str | Path) -> dict[str, Any] | None:
    """The marker's content (arch, seed, layers, hidden, tokenizer) when ``model_dir`` is a folder
    holding :data:`RANDOM_INIT_MARKER`, else None (also for hub ids). An unreadable marker still
    marks the model: the record is then ``{}``."""
    marker = _folder(model_dir) / RANDOM_INIT_MARKER
    if not marker.is_file():
        return None
    try:
        body = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def is_random_init(model_dir: str | Path) -> bool:
    """True when ``model_dir`` is a local folder holding :data:`RANDOM_INIT_MARKER`."""
    return random_init_record(model_dir) is not None


def resolve_random_init(model_id: str | Path, declared: bool | None = None) -> bool:
    """The config's ``random_init`` when it is set (True or False), else :func:`is_random_init`."""
    return bool(declared) if declared is not None else is_random_init(model_id)


def random_flags(frame: Any, column: str = "random_init", by: str = "model") -> dict[str, bool]:
    """``{model: random}`` from a table (pandas DataFrame) with a ``model`` and a ``random_init``
    column (summaries, lemma statistics; booleans, or their text as read back from a CSV); a model
    is random when any of its rows says so. A table without the column (written by an older
    verbeval) marks nothing."""
    if column not in getattr(frame, "columns", ()):
        return {}
    flags = frame[column]
    if flags.dtype != bool:
        flags = flags.astype(str).str.strip().str.lower().isin(["true", "1", "1.0", "yes"])
    return {str(k): bool(v) for k, v in flags.groupby(frame[by].astype(str), sort=False).any().items()}


def with_random_init(frame: Any, random: bool | Mapping[str, bool], by: str = "model") -> Any:
    """``frame`` (a pandas DataFrame about to be written as a data file) with a boolean
    ``random_init`` column, so that the file says which of its numbers are a random model's:
    ``random`` is the one flag of a per-model file, or ``{model: random}`` looked up in the ``by``
    column (a model it lacks: False). The column is added last, or overwritten in place."""
    if isinstance(random, Mapping):
        flags = [bool(random.get(str(m), False)) for m in frame[by]]
    else:
        flags = [bool(random)] * len(frame)
    return frame.assign(random_init=flags)


def with_random_field(entries: Mapping[str, Any], random: Mapping[str, bool]) -> dict[str, Any]:
    """``{model: {..., "random_init": bool}}`` from ``{model: {...}}`` (a JSON file's per-model
    records, keyed by the record's own fields, not by groups): ``random`` as in
    :func:`with_random_init`."""
    return {m: {**entry, "random_init": bool(random.get(m, False))} for m, entry in entries.items()}


def marked(name: str, random: bool) -> str:
    """A table header's model name: ``name†`` for a random model."""
    return f"{name}{RANDOM_MARK}" if random else name


def display_name(name: str, random: bool) -> str:
    """A figure's model name: ``name (random init)`` for a random model."""
    return f"{name}{RANDOM_SUFFIX}" if random else name


def random_note(names: Iterable[str], mark: str = RANDOM_MARK) -> str | None:
    """The note under a table or figure naming its random models (``† randomly initialised, so the
    numbers are meaningless: a, b.``; without ``mark`` a sentence), or None when there is none."""
    names = list(names)
    if not names:
        return None
    body = f"randomly initialised, so the numbers are meaningless: {', '.join(names)}."
    return f"{mark} {body}" if mark else body[0].upper() + body[1:]


#: the key under which a per-model table (SimVerb similarities, veridicality predictions) records it:
#: pandas ``DataFrame.attrs``, which Parquet files keep
FRAME_ATTR = "random_init"


def tag_frame(frame: Any, random: bool) -> Any:
    """``frame`` with ``attrs["random_init"]`` set (kept by :func:`verbeval.core.io.write_parquet`)."""
    frame.attrs[FRAME_ATTR] = bool(random)
    return frame


def frame_random(frame: Any) -> bool:
    """Whether a table read back from Parquet was written for a random model (no record: False)."""
    return bool(getattr(frame, "attrs", {}).get(FRAME_ATTR, False))
