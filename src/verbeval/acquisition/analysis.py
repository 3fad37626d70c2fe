"""The acquisition analysis of a checkpoint sweep: checkpoint index in, every table and figure out.

Reads the index (:mod:`~verbeval.agreement.report.checkpoint_index`), each checkpoint's summary rows and
lemma-contexts table, and writes under the output folder (fixed names, atomically):

* ``curves.csv``: group learning curves (:mod:`~verbeval.acquisition.curves`);
* ``lemma_curves.parquet``: per-lemma shares per checkpoint, per group and pooled;
* ``lemma_aoa.csv``: per family, seed and lemma the AoA with its CI or the reason it has none
  (:mod:`~verbeval.acquisition.fit`), the lemma's frequency, residual and outlier flag
  (:mod:`~verbeval.acquisition.frequency`);
* ``group_aoa.csv``: the AoA of each group (construction): of its EW at top p = 1, i.e. its
  per-context correctness pooled over lemmas, refitted in resamples of its contexts;
* ``aoa_frequency.csv``: per family and seed the Spearman correlation of AoA and frequency with
  its CI, the regression line and the frequency source (library, version);
* ``changepoints.csv`` (:mod:`~verbeval.acquisition.phases`), ``seeds.csv`` (the seed
  band) and ``seed_aoa.csv`` (AoA agreement across seeds; :mod:`~verbeval.acquisition.seeds`);
* ``acquisition.json`` (a summary), ``figures/{curves,aoa_frequency,lemma_heatmap}.<fmt>``.

Reruns are byte-identical: one seeded generator per family seed, sorted rows, floats written with
``%.10g`` as the other CSVs are.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from verbeval.acquisition.curves import (
    SummaryFiles,
    SweepData,
    context_resamples,
    group_curves,
    group_shares,
    headline,
    lemma_curves,
    lemma_shares,
)
from verbeval.acquisition.fit import AOA_COLUMNS, REASONS, aoa_estimates
from verbeval.acquisition.frequency import aoa_frequency, file_zipf, wordfreq_zipf
from verbeval.acquisition.phases import curve_changepoints
from verbeval.acquisition.seeds import seed_aoa_agreement, seed_band
from verbeval.agreement.report.checkpoint_index import check_family_members, check_fit_ready, read_checkpoint_index
from verbeval.agreement.scores.lemma_contexts import read_lemma_contexts
from verbeval.core.io import write_csv, write_json, write_parquet

log = logging.getLogger(__name__)

FLOAT_FORMAT = "%.10g"
OUTPUTS = (
    "curves.csv",
    "lemma_curves.parquet",
    "lemma_aoa.csv",
    "group_aoa.csv",
    "aoa_frequency.csv",
    "changepoints.csv",
    "seeds.csv",
    "seed_aoa.csv",
    "acquisition.json",
)
FIGURES = ("curves", "aoa_frequency", "lemma_heatmap")


def _field(key: str) -> str:
    """An :class:`AcquisitionSettings` field: its configuration key's last part."""
    return key.rsplit(".", 1)[1]


@dataclass(frozen=True)
class AcquisitionSettings:
    """The analysis' parameters: the keys of ``agreement.acquisition`` in the configuration (their
    meaning and defaults are documented there once; :meth:`defaults` reads them)."""

    frequencies: str
    resamples: int
    seed: int
    confidence: float
    min_checkpoints: int
    min_rise: float
    min_r2: float
    changepoint_penalty: float
    outlier_sd: float
    formats: tuple[str, ...]

    @classmethod
    def defaults(cls, **overrides: Any) -> AcquisitionSettings:
        """The schema's defaults (:data:`verbeval.acquisition.steps.ACQUISITION`), with ``overrides``."""
        from verbeval.acquisition.steps import ACQUISITION

        values = {_field(s.key): ACQUISITION.default(s.dest) for s in ACQUISITION.settings}
        values["formats"] = tuple(values["formats"])
        return cls(**{**values, **overrides})

    @classmethod
    def from_options(cls, a: Any) -> AcquisitionSettings:
        """From ``verbeval acquisition``'s parsed options (each setting's option of the step)."""
        from verbeval.acquisition.steps import ACQUISITION

        values = {_field(s.key): getattr(a, s.dest) for s in ACQUISITION.settings}
        values["formats"] = tuple(values["formats"])
        return cls(**values)


def _forms(metas: dict[str, dict[str, Any]], lemmas: list[str]) -> tuple[dict[str, tuple[str, str]], str]:
    """Each lemma's (singular, plural): from the lemma-contexts tables' ``forms`` metadata (``metas``: each
    table's ``attrs["verbeval"]``), else lemminflect (:func:`verbeval.agreement.data.lexicon.inflect`);
    and which it was."""
    known: dict[str, tuple[str, str]] = {}
    for meta in metas.values():
        for lemma, pair in (meta.get("forms") or {}).items():
            known.setdefault(str(lemma), (str(pair[0]), str(pair[1])))
    if all(lemma in known for lemma in lemmas):
        return {lemma: known[lemma] for lemma in lemmas}, "lemmas file"
    from verbeval.agreement.data.lexicon import inflect

    out = {}
    for lemma in lemmas:
        if lemma in known:
            out[lemma] = known[lemma]
            continue
        try:
            out[lemma] = inflect(lemma)
        except ValueError:
            continue
    return out, "lemminflect"


def _flags(index: pd.DataFrame, metas: dict[str, dict[str, Any]]) -> tuple[set[str], set[str]]:
    """Families with a random checkpoint, and families marked toy (index column ``toy`` or the
    lemma-contexts tables' ``toy`` metadata, ``metas``)."""
    random = set(index.loc[index["random_init"], "family"])
    toy = set(index.loc[index["toy"], "family"]) if "toy" in index.columns else set()
    for r in index.itertuples(index=False):
        if metas[r.model].get("toy"):
            toy.add(r.family)
    return random, toy


def run_acquisition(
    index_path: str | Path, out: str | Path, settings: AcquisitionSettings, figures: bool = True
) -> dict[str, Any]:
    """Run the analysis (module docstring); returns the summary written to ``acquisition.json``.
    ``figures=False`` writes the tables only."""
    out = Path(out)
    index = read_checkpoint_index(index_path)
    check_fit_ready(index, settings.min_checkpoints)
    tables: dict[str, pd.DataFrame] = {}
    metas: dict[str, dict[str, Any]] = {}  # each table's metadata (its forms, toy), kept beside it
    summaries: dict[str, pd.DataFrame] = {}
    summary_files = SummaryFiles()  # summary_all.csv read once, not once per checkpoint
    for r in tqdm(list(index.itertuples(index=False)), desc="checkpoints", unit="ckpt", mininterval=1.0):
        table = read_lemma_contexts(r.lemma_contexts)
        # pandas deep-copies attrs on every operation: a sweep's tables leave theirs here (0.5 s per
        # revision otherwise, most of this command's time)
        metas[r.model], table.attrs = table.attrs.get("verbeval", {}), {}
        tables[r.model] = table
        summaries[r.model] = summary_files.rows(r.summary, r.model)
    check_family_members(index, tables)
    random, toy = _flags(index, metas)

    curves = group_curves(index, summaries)
    lcurves = lemma_curves(index, tables)
    lemma_rows, group_rows = [], []
    sweeps = list(index.groupby(["family", "seed"], sort=True))
    opts = {
        "min_checkpoints": settings.min_checkpoints,
        "min_rise": settings.min_rise,
        "min_r2": settings.min_r2,
        "confidence": settings.confidence,
    }
    for (family, seed), rows in tqdm(sweeps, desc="AoA fits", unit="seed", mininterval=1.0):
        data = SweepData.from_tables(rows, tables)
        ident = {"family": family, "seed": seed, "random_init": bool(rows["random_init"].any())}
        counts = context_resamples(data, settings.resamples, settings.seed)
        point = data.lemma_point()
        boot = lemma_shares(data, counts) if settings.resamples > 0 else None
        est = aoa_estimates(data.steps, point, boot, **opts)
        lemma_rows.append(est.assign(**ident, lemma=data.lemmas, n_contexts=data.n_contexts, final_share=point[:, -1]))
        gpoint = np.stack([data.group_point(g) for g in data.groups])
        gboot = (
            np.stack([group_shares(data, counts, g) for g in data.groups], axis=1) if settings.resamples > 0 else None
        )
        gest = aoa_estimates(data.steps, gpoint, gboot, **opts)
        group_rows.append(
            gest.assign(
                **ident,
                group=data.groups,
                n_contexts=[data.correct[g].shape[1] for g in data.groups],
                final_share=gpoint[:, -1],
            )
        )
    lemma_aoa = pd.concat(lemma_rows, ignore_index=True)
    group_aoa = pd.concat(group_rows, ignore_index=True)

    lemmas = sorted(set(lemma_aoa["lemma"]))
    if settings.frequencies == "wordfreq":
        forms, forms_source = _forms(metas, lemmas)
        freq, info = wordfreq_zipf(forms)
        freq = pd.DataFrame({"lemma": lemmas}).merge(freq, on="lemma", how="left")
        freq["frequency_reason"] = freq["frequency_reason"].fillna("no_forms")
    else:
        freq, info = file_zipf(settings.frequencies, lemmas)
        forms_source = ""
    lemma_aoa = lemma_aoa.merge(freq, on="lemma", how="left")
    freq_rows, residual, outlier = [], np.full(len(lemma_aoa), np.nan), np.full(len(lemma_aoa), "", dtype=object)
    for (family, seed), d in lemma_aoa.groupby(["family", "seed"], sort=True):
        summary, res, flag = aoa_frequency(
            d["aoa_log10_step"].to_numpy(float),
            d["zipf"].to_numpy(float),
            resamples=settings.resamples,
            seed=settings.seed,
            confidence=settings.confidence,
            outlier_sd=settings.outlier_sd,
        )
        pos = d.index.to_numpy()
        residual[pos], outlier[pos] = res, flag
        freq_rows.append(
            {
                "family": family,
                "seed": seed,
                "random_init": bool(d["random_init"].any()),
                **summary,
                "n_missing_frequency": int(d["zipf"].isna().sum()),
                "outlier_sd": settings.outlier_sd,
                "confidence": settings.confidence,
                "source": info["source"],
                "library": info["library"],
                "version": info["version"],
                "wordlist": info["wordlist"],
                "forms": forms_source,
            }
        )
    lemma_aoa = lemma_aoa.assign(residual=residual, outlier=outlier.astype(str))
    lead = ["family", "seed", "random_init"]
    lemma_aoa = lemma_aoa[
        [*lead, "lemma", "n_contexts", "final_share", *AOA_COLUMNS, "zipf", "frequency_reason", "residual", "outlier"]
    ].sort_values(["family", "seed", "lemma"], kind="stable")
    group_aoa = group_aoa[[*lead, "group", "n_contexts", "final_share", *AOA_COLUMNS]].sort_values(
        ["family", "seed", "group"], kind="stable"
    )
    freq_table = pd.DataFrame.from_records(freq_rows)
    heads = headline(curves)
    cps = curve_changepoints(heads, beta=settings.changepoint_penalty, confidence=settings.confidence)
    band = seed_band(curves)
    agree = seed_aoa_agreement(lemma_aoa)

    for name, frame in (
        ("curves.csv", curves),
        ("lemma_aoa.csv", lemma_aoa),
        ("group_aoa.csv", group_aoa),
        ("aoa_frequency.csv", freq_table),
        ("changepoints.csv", cps),
        ("seeds.csv", band),
        ("seed_aoa.csv", agree),
    ):
        write_csv(frame, out / name, float_format=FLOAT_FORMAT)
    write_parquet(lcurves, out / "lemma_curves.parquet")
    summary = {
        "settings": {**asdict(settings), "formats": list(settings.formats)},
        "index": str(index_path),
        "families": sorted(set(index["family"])),
        "random_init_families": sorted(random),
        "toy_families": sorted(toy),
        "n_checkpoints": len(index),
        "n_lemmas": len(lemmas),
        "lemmas_with_aoa": int((lemma_aoa["reason"] == "").sum()),
        "lemma_reasons": {k: int(v) for k, v in lemma_aoa["reason"].value_counts().sort_index().items() if k},
        "group_reasons": {k: int(v) for k, v in group_aoa["reason"].value_counts().sort_index().items() if k},
        "reasons": REASONS,
        "aoa_frequency": [
            {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()} for r in freq_rows
        ],
        "n_changepoints": len(cps),
        "frequency_source": info,
    }
    axis = index.attrs.get("axis", "steps")
    if axis != "steps":  # the index's x axis (its step column holds tokens or words seen), AoA in its unit
        summary["axis"] = axis
    write_json(out / "acquisition.json", summary)
    if figures:
        _figures(out / "figures", settings.formats, heads, lcurves, lemma_aoa, random, toy, settings.confidence, axis)
    log.info(
        "%d checkpoints of %d families: %d of %d lemma AoAs, %d changepoints -> %s",
        len(index),
        len(summary["families"]),
        summary["lemmas_with_aoa"],
        len(lemma_aoa),
        len(cps),
        out,
    )
    return summary


def _figures(
    folder: Path,
    formats: tuple[str, ...],
    heads: pd.DataFrame,
    lcurves: pd.DataFrame,
    lemma_aoa: pd.DataFrame,
    random: set[str],
    toy: set[str],
    confidence: float,
    axis: str = "steps",
) -> None:
    from verbeval.acquisition.plots import figure_paths, plot_aoa_frequency, plot_curves, plot_lemma_heatmap
    from verbeval.core.model_entries import CHECKPOINT_AXES
    from verbeval.core.plots import save_figure

    unit, x_label = CHECKPOINT_AXES[axis]
    save_figure(plot_curves(heads, random, toy, confidence, x_label), figure_paths(str(folder), "curves", formats))
    save_figure(
        plot_aoa_frequency(lemma_aoa, random, toy, unit=unit), figure_paths(str(folder), "aoa_frequency", formats)
    )
    save_figure(
        plot_lemma_heatmap(lcurves, lemma_aoa, random, toy, x_label),
        figure_paths(str(folder), "lemma_heatmap", formats),
    )
