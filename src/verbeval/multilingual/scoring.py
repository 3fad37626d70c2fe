"""One model on every language of the study, in one process: the agreement study's own steps, per cell.

EW and MW of a context are taken over the eligible lemmas of its row's cell (a language's contrast:
``pres``; Russian ``past_m``/``past_f``/``past_n``; Hebrew ``m``/``f``). The agreement engine scores
every context of a run over one lemma set, so each (language, cell) is one run of its steps: the
cell's rows (``templates.parquet``), its eligible lemmas (:func:`verbeval.agreement.data.eligibility.eligible_lemmas`,
``lemmas.parquet``), its shard store (:func:`verbeval.agreement.runs.run_shards`) and its per-group
scores (:func:`verbeval.agreement.runs.aggregate`), under ``<out>/<language>/<cell>/``. The model is
loaded once for all of them. The rows of no cell (:data:`~verbeval.multilingual.templates.CELL_NONE`)
and of a cell without an eligible lemma get their own run for TSE; their contexts have no EW or MW.

:func:`combine` then pools each group's cells: the contexts of every cell with lemmas (EW, MW) and the
rows of every cell (TSE), summarised with the agreement study's :func:`~verbeval.agreement.scores.aggregate.summarise`
(bootstrap intervals over contexts; TSE's Wilson interval) into ``<out>/<language>/<group>/summary.csv``
and the model's ``summary_all.csv``; ``eligible.csv`` counts each cell's lexicon lemmas, eligible
lemmas, rows and rows with a TSE.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from verbeval.agreement.steps import AGGREGATE
from verbeval.core.model_runs import ModelRun
from verbeval.core.session import Session
from verbeval.multilingual.templates import CELL_NONE

log = logging.getLogger("verbeval")

#: the columns of ``eligible.csv``
ELIGIBLE_COLUMNS = ("model", "language", "cell", "lexicon_lemmas", "eligible_lemmas", "rows", "rows_with_tse")
#: the columns of ``contexts.parquet``: each scored context's EW and MW at top p = 1 (the comparisons' data)
CONTEXT_COLUMNS: dict[str, str] = {
    "model": "str", "group": "str", "cell": "str", "context_id": "int64", "ew": "float64", "mw": "float64"
}  # fmt: skip
#: the directory of a cell's TSE-only run (rows of no cell, or of a cell without an eligible lemma)
TSE_ONLY = "tse_only"


@dataclass(frozen=True)
class ClamsScoreRun:
    """``clams-score``: one model on every language of ``templates``.

    ``lexicons``: language -> lexicon parquet; ``out_dir``: the model's folder. The aggregate settings
    default to the agreement study's (:data:`verbeval.agreement.steps.AGGREGATE`); intervals resample
    contexts (``cluster`` ``context``)."""

    templates: str
    lexicons: Mapping[str, str]
    model_name: str
    out_dir: str
    n_chunks: int = 1
    progress: bool = True
    top_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(AGGREGATE.default("top_cutoffs")))
    bottom_cutoffs: tuple[float, ...] = field(default_factory=lambda: tuple(AGGREGATE.default("bottom_cutoffs")))
    resamples: int = field(default_factory=lambda: AGGREGATE.default("resamples"))
    seed: int = field(default_factory=lambda: AGGREGATE.default("seed"))
    confidence: float = field(default_factory=lambda: AGGREGATE.default("confidence"))


def summary_path(out_dir: str | Path) -> Path:
    """A model's ``summary_all.csv`` under its folder."""
    return Path(out_dir) / "summary_all.csv"


def contexts_path(out_dir: str | Path) -> Path:
    """A model's ``contexts.parquet`` under its folder."""
    return Path(out_dir) / "contexts.parquet"


def eligible_path(out_dir: str | Path) -> Path:
    """A model's ``eligible.csv`` under its folder."""
    return Path(out_dir) / "eligible.csv"


@dataclass(frozen=True)
class CellRun:
    """One (language, cell) run: its rows, its lexicon lemmas and folder."""

    language: str
    cell: str
    rows: pd.DataFrame
    lexicon_lemmas: int
    lemmas: pd.DataFrame
    folder: Path
    scored: bool  # EW and MW taken (False: TSE only)


def plan_cells(templates: pd.DataFrame, lexicons: Mapping[str, pd.DataFrame], tokenizer: Any, out: Path) -> list[CellRun]:
    """The runs of one model: per language, each cell with rows and an eligible lemma, then the
    TSE-only run (rows of no cell, and of cells without an eligible lemma) when there are such rows.
    The TSE-only run's lemmas are those of the language's cell with the most eligible lemmas (its
    shards need some; none of their EW or MW is used)."""
    from verbeval.agreement.data.eligibility import eligible_lemmas

    runs: list[CellRun] = []
    for lang in dict.fromkeys(templates["language"]):
        rows = templates[templates["language"] == lang]
        lex = lexicons[lang]
        cells = list(dict.fromkeys(lex["cell"]))
        eligible = {c: eligible_lemmas(lex[lex["cell"] == c].reset_index(drop=True), tokenizer) for c in cells}
        tse_only = rows["cell"] == CELL_NONE
        for cell in cells:
            part = rows[rows["cell"] == cell]
            if part.empty:
                continue
            if eligible[cell].empty:
                log.warning("%s / %s: no lemma of the cell is eligible for this model; its rows get TSE only", lang, cell)
                tse_only |= rows["cell"] == cell
                continue
            n_lex = int((lex["cell"] == cell).sum())
            runs.append(CellRun(lang, cell, part, n_lex, eligible[cell], out / lang / cell, True))
        if tse_only.any():
            best = max(cells, key=lambda c: len(eligible[c]))
            if eligible[best].empty:
                raise_no_lemmas(lang)
            runs.append(CellRun(lang, TSE_ONLY, rows[tse_only], 0, eligible[best], out / lang / TSE_ONLY, False))
    return runs


def raise_no_lemmas(lang: str) -> None:
    from verbeval.core.errors import VerbevalError

    raise VerbevalError(
        f"language {lang!r}: no lemma of its lexicon has both forms single tokens of this model; "
        "EW, MW and this engine's TSE need at least one (drop the language from multilingual.languages)"
    )


def score_model(run: ModelRun, score: ClamsScoreRun, session: Session | None = None) -> None:
    """Every cell run of ``score`` (:func:`plan_cells`) with the model of ``run`` loaded once, then
    :func:`combine`."""
    from verbeval.agreement.runs import AggregateRun, ShardRun, aggregate, in_session, load_checked_lm, run_shards
    from verbeval.core.cliutil import check_outputs
    from verbeval.core.fasttok import load_text_tokenizer
    from verbeval.core.io import write_parquet

    out = Path(score.out_dir)
    check_outputs(str(summary_path(out)), str(eligible_path(out)), str(contexts_path(out)))
    started = time.perf_counter()
    templates = pd.read_parquet(score.templates)
    lexicons = {lang: pd.read_parquet(path) for lang, path in score.lexicons.items()}
    missing = sorted(set(templates["language"]) - set(lexicons))
    if missing:
        from verbeval.core.errors import VerbevalError

        raise VerbevalError(f"{score.templates}: no lexicon given for language(s) {', '.join(missing)}")
    runs = plan_cells(templates, lexicons, load_text_tokenizer(run.source), out)
    with in_session(session) as s:
        groups = list(dict.fromkeys(templates["group"]))
        lm, load_s = load_checked_lm(run, templates, score.templates, groups, s)
        for cell in runs:
            rows = cell.rows.reset_index(drop=True)
            cell_groups = tuple(dict.fromkeys(rows["group"]))
            t_path, l_path = cell.folder / "templates.parquet", cell.folder / "lemmas.parquet"
            write_parquet(rows, t_path)
            write_parquet(cell.lemmas, l_path)
            manifest = str(cell.folder / "shards" / "manifest.json")
            shards = ShardRun(
                str(t_path),
                str(l_path),
                cell_groups,
                manifest,
                n_chunks=score.n_chunks,
                progress=score.progress,
                top_cutoffs=score.top_cutoffs,
                bottom_cutoffs=score.bottom_cutoffs,
            )
            log.info("%s / %s / %s: %d rows, %d eligible lemmas", score.model_name, cell.language, cell.cell,
                     len(rows), len(cell.lemmas))  # fmt: skip
            run_shards(lm, run, shards, s, load_s, templates=rows, lemmas=cell.lemmas)
            aggregate(
                AggregateRun(
                    str(t_path),
                    cell_groups,
                    score.model_name,
                    manifest,
                    str(cell.folder / "groups"),
                    top_cutoffs=score.top_cutoffs,
                    bottom_cutoffs=score.bottom_cutoffs,
                    resamples=score.resamples,
                    seed=score.seed,
                    confidence=score.confidence,
                    cluster="context",
                ),
                s,
            )
    combine(runs, score, out)
    log.info("%s: %d languages, %d cell runs in %.1f s -> %s", score.model_name,
             len(lexicons), len(runs), time.perf_counter() - started, summary_path(out))  # fmt: skip


def combine(runs: Sequence[CellRun], score: ClamsScoreRun, out: Path) -> pd.DataFrame:
    """Each group's cells pooled and summarised (module docstring); writes every group's
    ``summary.csv``, the model's ``summary_all.csv`` and ``eligible.csv``; returns the summary."""
    import numpy as np

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.scores.aggregate import summarise, with_interval_settings
    from verbeval.core.io import write_csv, write_parquet

    summaries: list[pd.DataFrame] = []
    counts: list[dict[str, Any]] = []
    contexts: list[pd.DataFrame] = []
    for lang in dict.fromkeys(r.language for r in runs):
        lang_runs = [r for r in runs if r.language == lang]
        random_init = any(manifest_random_init(str(r.folder / "shards" / "manifest.json")) for r in lang_runs)
        groups = list(dict.fromkeys(g for r in lang_runs for g in r.rows["group"]))
        for group in groups:
            scores, tse, offset = [], [], 0
            for r in lang_runs:
                folder = r.folder / "groups" / group
                if not (folder / "tse.parquet").exists():
                    continue  # the group has no row in this cell
                s = pd.read_parquet(folder / "scores.parquet")
                t = pd.read_parquet(folder / "tse.parquet")
                s = s.assign(context_id=s["context_id"] + offset)
                t = t.assign(context_id=t["context_id"] + offset)
                top = int(max(s["context_id"].max() if len(s) else -1, t["context_id"].max() if len(t) else -1))
                offset = max(offset, top + 1)
                if r.scored:
                    scores.append(s)
                    contexts.append(
                        pd.DataFrame(
                            {
                                "model": score.model_name,
                                "group": group,
                                "cell": r.cell,
                                "context_id": s["context_id"].to_numpy(),
                                "ew": s["ew_top@1"].to_numpy(),
                                "mw": s["mw_top@1"].to_numpy(),
                            }
                        )
                    )
                tse.append(t)
            all_scores = pd.concat(scores, ignore_index=True) if scores else None
            all_tse = pd.concat(tse, ignore_index=True)
            if all_scores is None:  # no verb contrast in the group: TSE only, EW and MW NaN
                cols = pd.read_parquet(lang_runs[-1].folder / "groups" / group / "scores.parquet").columns
                all_scores = pd.DataFrame({c: pd.Series([], dtype="float64") for c in cols})
            summary = summarise(
                all_scores, all_tse, model=score.model_name, group=group, resamples=score.resamples,
                seed=score.seed, confidence=score.confidence, cluster="context",
            ).assign(random_init=random_init)  # fmt: skip
            summary = with_interval_settings(summary, score.resamples, score.confidence)
            write_csv(summary, out / lang / group / "summary.csv", float_format="%.10g")
            summaries.append(summary)
        for r in lang_runs:
            tse_rows = []
            for group in dict.fromkeys(r.rows["group"]):
                path = r.folder / "groups" / group / "tse.parquet"
                tse_rows.append(pd.read_parquet(path, columns=["tse"])["tse"].to_numpy())
            defined = int(sum(int((~np.isnan(t)).sum()) for t in tse_rows))
            counts.append(
                {
                    "model": score.model_name,
                    "language": lang,
                    "cell": r.cell,
                    "lexicon_lemmas": r.lexicon_lemmas,
                    "eligible_lemmas": len(r.lemmas) if r.scored else 0,
                    "rows": len(r.rows),
                    "rows_with_tse": defined,
                }
            )
    summary_all = pd.concat(summaries, ignore_index=True)
    summary_all = summary_all.sort_values(["model", "group", "metric", "side", "cutoff"], kind="stable")
    write_csv(pd.DataFrame(counts, columns=list(ELIGIBLE_COLUMNS)), eligible_path(out))
    ctx = pd.concat(contexts, ignore_index=True) if contexts else pd.DataFrame(columns=list(CONTEXT_COLUMNS))
    write_parquet(ctx.astype(CONTEXT_COLUMNS), contexts_path(out))
    write_csv(summary_all, summary_path(out), float_format="%.10g")
    return summary_all
