"""The checkpoint index of an acquisition analysis (``checkpoints.csv``): one row per scored
checkpoint, naming its sweep (``family``), seed, training step and the two files the analysis reads.

Columns: ``model`` (scored model name, as in summary_all.csv), ``family`` (the sweep: the config
entry's ``name``; entries sharing a family are seeds of one model), ``seed`` (label; empty when the
family has one seed), ``step`` (training step, an integer >= 0), ``random_init`` (true/false),
``summary`` (CSV with summary_all.csv's columns holding this model's rows) and ``lemma_contexts``
(its :mod:`verbeval.agreement.scores.lemma_contexts` table); optional ``toy`` (true/false: a toy model,
so labelled in the figures) and ``axis`` (``steps``, ``tokens`` or ``words``: what ``step`` holds, the
same on every row; absent or empty: training steps, with ``tokens`` or ``words`` the tokens or words
seen, and the analysis's AoA is in that unit). Paths are relative to the index file's
folder, or absolute. The training callback writes the same file with :func:`write_checkpoint_index`.

Bad input is one line naming the file (and line) and the cause: no steps, duplicate steps within a
family and seed, a model listed twice, missing files (:func:`read_checkpoint_index`), too few
checkpoints for a fit (:func:`check_fit_ready`), seeds of a family that are not the same model
(:func:`check_family_members`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import write_csv

INDEX_COLUMNS = ("model", "family", "seed", "step", "random_init", "summary", "lemma_contexts")
#: what the ``step`` column holds (optional column ``axis``; absent: steps)
INDEX_AXES = ("steps", "tokens", "words")

_TRUE = {"true", "1", "yes", "1.0"}
_FALSE = {"false", "0", "no", "0.0", ""}


def _flag(text: str, path: Path, line: int) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise InputError(path, f"random_init {text!r} is not true or false", line)


def read_checkpoint_index(path: str | Path) -> pd.DataFrame:
    """The validated index, sorted by family, seed and step; ``summary`` and ``lemma_contexts``
    resolved to paths that exist, ``step`` int, ``random_init`` bool, ``seed`` a string."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such checkpoint index")
    with open(p, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise InputError(p, "empty checkpoint index (no header)")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in INDEX_COLUMNS if c not in header]
    if missing:
        raise InputError(p, f"no column {', '.join(missing)} (expected {','.join(INDEX_COLUMNS)})", 1)
    col = {c: header.index(c) for c in INDEX_COLUMNS}
    records = []
    axes: dict[str, int] = {}
    seen_model: dict[str, int] = {}
    seen_step: dict[tuple[str, str, int], int] = {}
    for i, row in enumerate(rows[1:], start=2):
        if not any(x.strip() for x in row):
            continue
        if len(row) < len(header):
            raise InputError(p, f"{len(row)} fields, the header has {len(header)}", i)
        get = {c: row[col[c]].strip() for c in INDEX_COLUMNS}
        model, family = get["model"], get["family"]
        if not model or not family:
            raise InputError(p, "empty model or family", i)
        if model in seen_model:
            raise InputError(p, f"model {model!r} is listed twice (also line {seen_model[model]})", i)
        seen_model[model] = i
        axis = (row[header.index("axis")].strip() if "axis" in header else "") or "steps"
        if axis not in INDEX_AXES:
            raise InputError(p, f"axis {axis!r} is not one of {', '.join(INDEX_AXES)}", i)
        if axes and axis not in axes:
            other = next(iter(axes))
            raise InputError(p, f"axis {axis}, but line {axes[other]} has axis {other} (one axis per index)", i)
        axes.setdefault(axis, i)
        if not get["step"]:
            raise InputError(p, f"checkpoint {model!r} has no step (every checkpoint needs its training step)", i)
        try:
            step = int(get["step"])
        except ValueError:
            raise InputError(p, f"checkpoint {model!r}: step {get['step']!r} is not an integer", i) from None
        if step < 0:
            raise InputError(p, f"checkpoint {model!r}: step {step} is negative", i)
        key = (family, get["seed"], step)
        if key in seen_step:
            seed = f", seed {get['seed']!r}" if get["seed"] else ""
            raise InputError(
                p, f"family {family!r}{seed} has two checkpoints at step {step} (also line {seen_step[key]})", i
            )
        seen_step[key] = i
        files = {}
        for c in ("summary", "lemma_contexts"):
            if not get[c]:
                raise InputError(p, f"checkpoint {model!r} has no {c} file", i)
            f = Path(get[c])
            f = f if f.is_absolute() else p.parent / f
            if not f.is_file():
                raise InputError(p, f"checkpoint {model!r}: {c} file {f} not found", i)
            files[c] = str(f)
        records.append(
            {
                "model": model,
                "family": family,
                "seed": get["seed"],
                "step": step,
                "random_init": _flag(get["random_init"], p, i),
                **files,
                "toy": _flag(row[header.index("toy")], p, i) if "toy" in header else False,
                "line": i,
            }
        )
    if not records:
        raise InputError(p, "no checkpoints listed")
    df = pd.DataFrame.from_records(records)
    df = df.sort_values(["family", "seed", "step"], kind="stable").reset_index(drop=True)
    df.attrs["path"] = str(p)
    df.attrs["axis"] = next(iter(axes))
    return df


def write_checkpoint_index(df: pd.DataFrame, path: str | Path) -> None:
    """Write an index atomically: the contract's columns (and ``axis`` when ``df`` has it), rows
    sorted by family, seed and step."""
    missing = [c for c in INDEX_COLUMNS if c not in df.columns]
    if missing:
        raise VerbevalError(f"checkpoint index: no column {', '.join(missing)}")
    out = df[list(INDEX_COLUMNS) + (["axis"] if "axis" in df.columns else [])].copy()
    out["seed"] = out["seed"].fillna("").astype(str)
    out["step"] = out["step"].astype("int64")
    out["random_init"] = out["random_init"].astype(bool)
    out = out.sort_values(["family", "seed", "step"], kind="stable")
    write_csv(out, path)


def add_checkpoint(path: str | Path, row: Mapping[str, object]) -> None:
    """Add one checkpoint (``row``: the index columns) to the index at ``path``, replacing a row of
    the same model, creating the file when there is none (what a training callback does at each
    scored step); written with :func:`write_checkpoint_index`."""
    p = Path(path)
    new = pd.DataFrame([{c: row[c] for c in INDEX_COLUMNS}])
    if p.is_file():
        old = pd.read_csv(p, dtype={"seed": str, "model": str, "family": str}, keep_default_na=False)
        new = pd.concat([old[old["model"] != str(row["model"])], new], ignore_index=True)
    write_checkpoint_index(new, p)


def check_fit_ready(index: pd.DataFrame, min_checkpoints: int) -> None:
    """Every family (each seed of it) has at least ``min_checkpoints`` distinct steps."""
    where = index.attrs.get("path", "checkpoint index")
    for (family, seed), g in index.groupby(["family", "seed"], sort=True):
        n = g["step"].nunique()
        if n < min_checkpoints:
            what = f"family {family!r}" + (f", seed {seed!r}," if seed else "")
            raise InputError(
                where,
                f"{what} has {n} checkpoint{'s' if n != 1 else ''} with distinct steps; a sigmoid fit needs at "
                f"least {min_checkpoints} (agreement.acquisition.min_checkpoints)",
            )


def check_family_members(index: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> None:
    """Every checkpoint of a family (all its seeds and steps) is the same model: the same groups,
    lemmas and contexts per group in its lemma-contexts table (``tables``: model -> table). The
    error names the first checkpoint that differs from the family's first one, and how."""
    where = index.attrs.get("path", "checkpoint index")
    for family, g in index.groupby("family", sort=True):
        ref_model = str(g["model"].iloc[0])
        ref = tables[ref_model]
        ref_groups = set(ref["group"])
        ref_lemmas = set(ref["lemma"])
        ref_n = ref.groupby("group")["n_contexts"].first()
        for model in g["model"].iloc[1:]:
            t = tables[str(model)]
            kind = "seed" if g["seed"].nunique() > 1 else "checkpoint"
            groups, lemmas = set(t["group"]), set(t["lemma"])
            diff = []
            if groups != ref_groups:
                diff.append(f"groups {_sym(groups, ref_groups)}")
            if lemmas != ref_lemmas:
                diff.append(f"lemmas {_sym(lemmas, ref_lemmas)}")
            if not diff:
                n = t.groupby("group")["n_contexts"].first()
                bad = [x for x in sorted(ref_groups) if int(n[x]) != int(ref_n[x])]
                if bad:
                    diff.append(f"group {bad[0]!r} has {int(n[bad[0]])} contexts, not {int(ref_n[bad[0]])}")
            if diff:
                raise InputError(
                    where,
                    f"family {family!r}: {kind} {model!r} is not the same model as {ref_model!r} "
                    f"({'; '.join(diff)}); a family's seeds and checkpoints must share groups, lemmas and contexts",
                )


def _sym(have: set[str], ref: set[str]) -> str:
    extra, lack = sorted(have - ref), sorted(ref - have)
    parts = []
    if extra:
        parts.append(f"{len(extra)} extra ({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''})")
    if lack:
        parts.append(f"{len(lack)} missing ({', '.join(lack[:3])}{', ...' if len(lack) > 3 else ''})")
    return " and ".join(parts)
