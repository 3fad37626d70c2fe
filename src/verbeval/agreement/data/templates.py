"""The agreement template table: building it from the template and pair files, subsampling it, and
rendering a row's context as model input.

:func:`build_template_table` reads every source of the run's groups
(:mod:`verbeval.agreement.data.template_files`) and every custom group's pair file
(:mod:`verbeval.agreement.data.custom_pairs`) into one table of
:data:`verbeval.agreement.data.template_files.TEMPLATE_COLUMNS`; :func:`subsample` keeps at most a
given number of rows per source; :func:`render_context` gives the text a model sees for a row.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval.agreement.data.custom_pairs import CustomGroup, check_sha256, read_custom_pairs
from verbeval.agreement.data.errata import Erratum
from verbeval.agreement.data.template_files import FORMATS, REJECT_COLUMNS, TEMPLATE_COLUMNS, _empty, read_template_file
from verbeval.core.errors import VerbevalError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- subsampling


def _subsample_positions(labels: np.ndarray, k: int) -> np.ndarray:
    """Evenly spaced positions out of ``len(labels)``, swapping in any label left out."""
    n = len(labels)
    if k >= n:
        return np.arange(n)
    chosen = np.unique(np.rint(np.linspace(0, n - 1, k)).astype(np.int64))
    for value in pd.unique(labels):
        if (labels[chosen] == value).any():
            continue
        positions = np.flatnonzero(labels == value)
        wanted = int(positions[len(positions) // 2])
        # Replace the chosen row nearest to ``wanted`` whose label stays represented.
        counts = pd.Series(labels[chosen]).value_counts()
        replaceable = np.flatnonzero(counts.reindex(labels[chosen]).to_numpy() > 1)
        if replaceable.size == 0:
            continue  # k smaller than the number of labels: nothing can be swapped
        victim = replaceable[np.argmin(np.abs(chosen[replaceable] - wanted))]
        chosen[victim] = wanted
        chosen = np.sort(chosen)
    return chosen


def subsample(df: pd.DataFrame, max_rows_per_source: int | None) -> pd.DataFrame:
    """Deterministically keep at most ``max_rows_per_source`` rows of each source.

    Per source (in order of first appearance), rows are picked at evenly spaced positions
    (``np.linspace`` over the row positions, rounded, unique). If a label of the source is then
    missing, its middle row replaces the nearest picked row of an over-represented label, so that
    both labels stay represented whenever ``max_rows_per_source >= 2``. ``None`` keeps all rows.
    Row order is preserved; the index is reset.
    """
    if max_rows_per_source is None:
        return df.reset_index(drop=True)
    if isinstance(max_rows_per_source, bool) or int(max_rows_per_source) < 1:
        raise ValueError(f"max_rows_per_source must be a positive integer or None, not {max_rows_per_source!r}")
    k = int(max_rows_per_source)
    keep: list[np.ndarray] = []
    sources = df["source"].to_numpy()
    labels = df["label"].to_numpy()
    for source in pd.unique(sources):
        positions = np.flatnonzero(sources == source)
        keep.append(positions[_subsample_positions(labels[positions], k)])
    if not keep:
        return df.reset_index(drop=True)
    return df.iloc[np.sort(np.concatenate(keep))].reset_index(drop=True)


# --------------------------------------------------------------------------- the table


def build_template_table(
    inputs: Mapping[str, tuple[str | Path, str]],
    groups: Sequence[Mapping[str, Any]],
    skip_bad_rows: bool = False,
    max_rows_per_source: int | None = None,
    errata: Mapping[str, Mapping[int, str | Erratum]] | None = None,
    drop_flagged: bool = False,
    custom: Sequence[CustomGroup] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every source of ``groups``, then every ``custom`` group's file; return ``(table, rejects)``.

    ``inputs`` maps a source name to ``(path, format)``. Rows are concatenated in group order, then
    the group's source order, then line order; each source is subsampled with
    :func:`subsample` first. The custom groups come last, each one source (its file, checked
    against its sha256 when given, read by :func:`read_custom_pairs`, subsampled alike). Inputs
    that no group uses are ignored (logged).

    Raises:
        VerbevalError: when a group names a source missing from ``inputs`` or with an unknown
            format, a custom id repeats a group id, or a group ends up with no row at all (even with
            ``skip_bad_rows``: its inference could not run); InputError from
            :func:`read_template_file`, :func:`read_custom_pairs` and :func:`check_sha256`.
    """
    ids = [g["id"] for g in groups] + [c.id for c in custom]
    if len(set(ids)) != len(ids):
        raise VerbevalError(f"repeated group id(s) {sorted({i for i in ids if ids.count(i) > 1})}")
    tables: list[pd.DataFrame] = []
    rejects: list[pd.DataFrame] = []
    used: set[str] = set()
    for group in groups:
        n_group_rows = 0
        for source in group["sources"]:
            if source not in inputs:
                raise VerbevalError(f"group {group['id']!r}: no input file for source {source!r}")
            path, fmt = inputs[source]
            if fmt not in FORMATS:
                raise VerbevalError(f"source {source!r}: format {fmt!r} is not a template format")
            rows, bad = read_template_file(
                path,
                fmt,
                source,
                group["id"],
                skip_bad_rows,  # type: ignore[arg-type]
                (errata or {}).get(source),
                drop_flagged,
            )
            tables.append(subsample(rows, max_rows_per_source))
            rejects.append(bad)
            used.add(source)
            n_group_rows += len(rows)
        if n_group_rows == 0:
            files = ", ".join(str(inputs[src][0]) for src in group["sources"])
            raise VerbevalError(
                f"group {group['id']!r} has no template rows: every source file is empty or rejected ({files})"
            )
    for c in custom:
        if c.sha256:
            check_sha256(c.path, c.sha256)
        rows, bad = read_custom_pairs(c.path, c.format, c.source, c.id, skip_bad_rows)
        if rows.empty:
            raise VerbevalError(f"group {c.id!r} has no template rows: {c.path} is empty or every row is rejected")
        tables.append(subsample(rows, max_rows_per_source))
        rejects.append(bad)
    unused = sorted(set(inputs) - used)
    if unused:
        log.info("inputs not in any agreement group, ignored: %s", ", ".join(unused))
    table = pd.concat(tables, ignore_index=True) if tables else _empty(TEMPLATE_COLUMNS)
    rej = pd.concat(rejects, ignore_index=True) if rejects else _empty(REJECT_COLUMNS)
    return table.astype(TEMPLATE_COLUMNS), rej.astype(REJECT_COLUMNS)


# --------------------------------------------------------------------------- rendering


def render_context(left: str, right: str, *, cased: bool, masked: bool, mask_token: str | None = None) -> str:
    """The text a model sees for a template row.

    A masked LM sees ``"{left} {mask} {right}."`` (``"{left} {mask}."`` when ``right`` is empty);
    a causal LM sees ``left`` alone, without a period, and predicts the next token. For cased
    models the first character is capitalised; uncased models get the text as is.

    Raises:
        ValueError: when ``masked`` and ``mask_token`` is missing.
    """
    if masked:
        if not mask_token:
            raise ValueError("a masked LM context needs the tokenizer's mask token")
        parts = [p for p in (left, mask_token, right) if p]
        text = " ".join(parts) + "."
    else:
        text = left
    if cased and text:
        text = text[0].upper() + text[1:]
    return text
