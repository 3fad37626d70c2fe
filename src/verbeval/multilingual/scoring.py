"""One model on every language of the study, in one process: the agreement study's own steps, per cell.

**EW and MW** of a context are taken over the eligible lemmas of its row's cell (a language's contrast:
``pres``; Russian ``past_m``/``past_f``/``past_n``; Hebrew ``m``/``f``), eligible as in English: both
forms single tokens of the model. The agreement engine scores every context of a run over one lemma
set, so each (language, cell) with rows and an eligible lemma is one run of its steps: the cell's rows
(``templates.parquet``), its eligible lemmas (:func:`verbeval.agreement.data.eligibility.eligible_lemmas`,
``lemmas.parquet``), its shard store (:func:`verbeval.agreement.runs.run_shards`) and its per-group
scores (:func:`verbeval.agreement.runs.aggregate`), under ``<out>/<language>/<cell>/``. Rows of no cell
(:data:`~verbeval.multilingual.templates.CELL_NONE`) and of a cell without an eligible lemma have no EW
or MW.

**TSE** is taken for every row, whatever the number of sub-tokens of its two words: each word's
log-probability after the row's prefix by the chain rule over its sub-tokens (exact for a causal LM;
PLL-word-l2r for a masked LM), by the lexicon modes' :func:`verbeval.agreement.lexicon_modes.multitoken.form_logprobs`
(:func:`word_tse`, ``<out>/<language>/tse.parquet``). For two single-token words this is the engine's
TSE decision; for the many words a multilingual vocabulary splits (most Hebrew verbs in Gemma's), it is
the only one there is. The model is loaded once for all of it.

:func:`combine` then pools each group: the contexts of its cells (EW, MW) and its rows (TSE), summarised
with the agreement study's :func:`~verbeval.agreement.scores.aggregate.summarise` (bootstrap intervals
over contexts; TSE's Wilson interval) into ``<out>/<language>/<group>/summary.csv`` and the model's
``summary_all.csv``; ``eligible.csv`` counts each cell's lexicon lemmas, eligible lemmas, rows and rows
whose pair has a word of several sub-tokens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from verbeval.agreement.scores.registry import CUTOFF_METRICS
from verbeval.agreement.steps import AGGREGATE
from verbeval.core.model_runs import ModelRun
from verbeval.core.session import Session
from verbeval.multilingual.templates import CELL_NONE

log = logging.getLogger("verbeval")

#: the columns of ``eligible.csv``
ELIGIBLE_COLUMNS = ("model", "language", "cell", "lexicon_lemmas", "eligible_lemmas", "rows", "rows_multi_token")
#: the columns of a language's ``tse.parquet`` (:func:`word_tse`): each row's TSE and its two words' log-probabilities
TSE_COLUMNS: dict[str, str] = {
    "group": "str", "cell": "str", "row": "int64", "context_id": "int64", "tse": "float64", "logp_correct": "float64",
    "logp_incorrect": "float64", "tokens_correct": "int64", "tokens_incorrect": "int64",
}  # fmt: skip
#: the columns of ``contexts.parquet``: each scored context's EW and MW at top p = 1 (the comparisons' data)
CONTEXT_COLUMNS: dict[str, str] = {
    "model": "str", "group": "str", "cell": "str", "context_id": "int64", **dict.fromkeys(CUTOFF_METRICS, "float64")
}  # fmt: skip


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
    """One (language, cell): its rows, its lexicon's lemma count, its eligible lemmas and folder."""

    language: str
    cell: str
    rows: pd.DataFrame
    lexicon_lemmas: int
    lemmas: pd.DataFrame
    folder: Path

    @property
    def scored(self) -> bool:
        """Whether its EW and MW are taken (rows of a cell with an eligible lemma)."""
        return self.cell != CELL_NONE and not self.lemmas.empty


def plan_cells(
    templates: pd.DataFrame, lexicons: Mapping[str, pd.DataFrame], tokenizer: Any, out: Path
) -> list[CellRun]:
    """Per language, each cell with rows (in the lexicon's cell order), then the rows of no cell; a cell
    without an eligible lemma is kept (its rows counted) but not :attr:`CellRun.scored` (warned)."""
    from verbeval.agreement.data.eligibility import eligible_lemmas

    runs: list[CellRun] = []
    for lang in dict.fromkeys(templates["language"]):
        rows = templates[templates["language"] == lang]
        lex = lexicons[lang]
        for cell in [*dict.fromkeys(lex["cell"]), CELL_NONE]:
            part = rows[rows["cell"] == cell]
            if part.empty:
                continue
            cell_lex = lex[lex["cell"] == cell].reset_index(drop=True)
            lemmas = eligible_lemmas(cell_lex, tokenizer) if len(cell_lex) else cell_lex.iloc[:0]
            if cell != CELL_NONE and lemmas.empty:
                log.warning("%s / %s: none of the cell's %d lemmas has both forms single tokens of this model: its "
                            "%d rows get TSE only (no EW or MW)", lang, cell, cell_lex["lemma"].nunique(), len(part))  # fmt: skip
            runs.append(CellRun(lang, cell, part, int(cell_lex["lemma"].nunique()), lemmas, out / lang / cell))
    return runs


def next_token_logprobs(lm: Any, encoded: Any, token_ids: Sequence[int], batch_size: int = 64) -> Any:
    """``[contexts, tokens]`` float64 log-probabilities of ``token_ids`` at each context's target
    position: the engine's batched forward pass (right-padded batches of similar length, the head
    applied at the target only: :func:`verbeval.agreement.engine.forward_pass.target_logits`)."""
    import numpy as np
    import torch

    from verbeval.agreement.engine.forward_pass import _batches, _pad, fit_contexts, padding_id, target_logits

    pad = padding_id(lm.tokenizer)
    out = np.empty((len(encoded.ids), len(token_ids)), dtype=np.float64)
    cols = torch.as_tensor(list(token_ids), dtype=torch.long)
    lengths = np.fromiter((len(s) for s in encoded.ids), dtype=np.int64, count=len(encoded.ids))
    with torch.inference_mode():
        for idx in _batches(lengths, fit_contexts(lm, encoded, batch_size)):
            ids, att = _pad([encoded.ids[i] for i in idx], pad, lm.device)
            tgt = torch.as_tensor(encoded.target[idx], device=lm.device)
            logits = target_logits(lm.model, ids, att, tgt).double()
            out[idx] = torch.log_softmax(logits, dim=-1)[:, cols.to(logits.device)].cpu().numpy()
    return out


def causal_chain_logprobs(lm: Any, encoded: Any, words: list[list[int]], pairs: Any, batch_size: int = 64) -> Any:
    """``[pairs]`` float64 ``log P(word | context)`` of each ``(context, word)`` pair of a causal LM, by
    the chain rule: one sequence per pair (the context, then the word's tokens but its last), batched
    right-padded; the LM head (:func:`verbeval.agreement.lexicon_modes.multitoken._lm_head`) runs only at
    the word's positions."""
    import numpy as np
    import torch

    from verbeval.agreement.engine.encoding import Encoded
    from verbeval.agreement.engine.forward_pass import _batches, _pad, fit_contexts, padding_id
    from verbeval.agreement.lexicon_modes.multitoken import _lm_head

    body, head = _lm_head(lm)
    pad = padding_id(lm.tokenizer)
    seqs = [[*encoded.ids[i], *words[j][:-1]] for i, j in pairs]
    first = np.array([encoded.target[i] for i, _ in pairs], dtype=np.int64)  # position predicting token 1
    out = np.zeros(len(pairs), dtype=np.float64)
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    fit = fit_contexts(lm, Encoded(seqs, lengths - 1), batch_size)
    with torch.inference_mode():
        for idx in _batches(lengths, fit):
            ids, att = _pad([seqs[p] for p in idx], pad, lm.device)
            hidden = body(input_ids=ids, attention_mask=att).last_hidden_state
            rows = np.concatenate([np.full(len(words[pairs[p][1]]), r) for r, p in enumerate(idx)])
            pos = np.concatenate([first[p] + np.arange(len(words[pairs[p][1]])) for p in idx])
            want = torch.as_tensor(np.concatenate([words[pairs[p][1]] for p in idx]), dtype=torch.long)
            h = hidden[torch.as_tensor(rows, device=hidden.device), torch.as_tensor(pos, device=hidden.device)]
            logp = torch.log_softmax(head(h).double(), dim=-1)
            picked = logp[torch.arange(len(want), device=logp.device), want.to(logp.device)].cpu().numpy()
            np.add.at(out, idx[rows], picked)
    return out


def word_logprobs(lm: Any, encoded: Any, words: list[list[int]], need: Any, progress: bool = False) -> Any:
    """``[contexts, words]`` chain-rule log-probabilities of ``words`` (token ids) after each context:
    one batched forward pass for the single-token words; for the others, in the contexts where ``need``
    (``[contexts, words]`` bool) asks for them (NaN elsewhere), :func:`causal_chain_logprobs` (a causal
    LM) or :func:`~verbeval.agreement.lexicon_modes.multitoken.form_logprobs` (PLL-word-l2r, a masked LM)."""
    import numpy as np

    from verbeval.agreement.engine.encoding import Encoded
    from verbeval.agreement.lexicon_modes.multitoken import form_logprobs

    n = len(encoded.ids)
    out = np.full((n, len(words)), np.nan)
    single = [j for j, w in enumerate(words) if len(w) == 1]
    multi = np.array([j for j, w in enumerate(words) if len(w) > 1], dtype=np.int64)
    if single:
        out[:, single] = next_token_logprobs(lm, encoded, [words[j][0] for j in single])
    if not len(multi):
        return out
    if lm.kind == "causal":
        ctx, col = np.nonzero(need[:, multi])
        pairs = list(zip(ctx.tolist(), multi[col].tolist()))
        if pairs:
            out[ctx, multi[col]] = causal_chain_logprobs(lm, encoded, words, pairs)
        return out
    ctx = np.flatnonzero(need[:, multi].any(axis=1))
    if len(ctx):
        sub = Encoded([encoded.ids[i] for i in ctx], encoded.target[ctx], encoded.bos)
        out[np.ix_(ctx, multi)] = form_logprobs(lm, sub, [words[j] for j in multi], progress=progress)
    return out


def word_tse(lm: Any, templates: pd.DataFrame, prepend_bos: bool | None, progress: bool = False) -> pd.DataFrame:
    """Every row's TSE (:data:`TSE_COLUMNS`) from its two words' chain-rule log-probabilities after its
    context (module docstring, :func:`word_logprobs`); ``row`` and ``context_id`` index the group's rows
    and distinct contexts (:func:`verbeval.agreement.engine.shards.group_contexts`). A tie counts as
    wrong, as in the engine."""
    import numpy as np

    from verbeval.agreement.data.eligibility import form_token_ids
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.engine.shards import group_contexts

    parts = []
    for group in dict.fromkeys(templates["group"]):
        g, contexts, row_context = group_contexts(templates, group, lm.kind)
        words = list(dict.fromkeys([*g["correct"], *g["incorrect"]]))
        col = {w: i for i, w in enumerate(words)}
        ids = form_token_ids(lm.tokenizer, words)
        c_col = np.array([col[w] for w in g["correct"]], dtype=np.int64)
        i_col = np.array([col[w] for w in g["incorrect"]], dtype=np.int64)
        need = np.zeros((len(contexts), len(words)), dtype=bool)
        need[row_context, c_col] = need[row_context, i_col] = True
        logp = word_logprobs(lm, encode_contexts(lm, contexts, prepend_bos), ids, need, progress)
        right, wrong = logp[row_context, c_col], logp[row_context, i_col]
        n_tok = np.array([len(x) for x in ids], dtype=np.int64)
        parts.append(
            pd.DataFrame(
                {
                    "group": group,
                    "cell": g["cell"].to_numpy(),
                    "row": np.arange(len(g)),
                    "context_id": row_context,
                    "tse": (right > wrong).astype(np.float64),
                    "logp_correct": right,
                    "logp_incorrect": wrong,
                    "tokens_correct": n_tok[c_col],
                    "tokens_incorrect": n_tok[i_col],
                }
            )
        )
    return pd.concat(parts, ignore_index=True).astype(TSE_COLUMNS)


def score_model(run: ModelRun, score: ClamsScoreRun, session: Session | None = None) -> None:
    """Every language of ``score`` with the model of ``run`` loaded once: each scored cell's shards and
    scores (:func:`plan_cells`), every row's TSE (:func:`word_tse`), then :func:`combine`."""
    from verbeval.agreement.runs import AggregateRun, ShardRun, aggregate, in_session, load_checked_lm, run_shards
    from verbeval.core.cliutil import check_outputs
    from verbeval.core.errors import VerbevalError
    from verbeval.core.fasttok import load_text_tokenizer
    from verbeval.core.io import write_parquet

    out = Path(score.out_dir)
    check_outputs(str(summary_path(out)), str(eligible_path(out)), str(contexts_path(out)))
    started = time.perf_counter()
    templates = pd.read_parquet(score.templates)
    lexicons = {lang: pd.read_parquet(path) for lang, path in score.lexicons.items()}
    missing = sorted(set(templates["language"]) - set(lexicons))
    if missing:
        raise VerbevalError(f"{score.templates}: no lexicon given for language(s) {', '.join(missing)}")
    runs = plan_cells(templates, lexicons, load_text_tokenizer(run.source), out)
    random_init = run.is_random()
    with in_session(session) as s:
        groups = list(dict.fromkeys(templates["group"]))
        lm, load_s = load_checked_lm(run, templates, score.templates, groups, s)
        tse_of: dict[str, pd.DataFrame] = {}
        for lang in dict.fromkeys(templates["language"]):
            rows = templates[templates["language"] == lang].reset_index(drop=True)
            t0 = time.perf_counter()
            tse = tse_of[lang] = word_tse(lm, rows, run.prepend_bos, score.progress)
            write_parquet(tse, out / lang / "tse.parquet")
            log.info("%s / %s: TSE of %d rows (%d with a word of several sub-tokens) in %.1f s", score.model_name,
                     lang, len(tse), int(((tse["tokens_correct"] > 1) | (tse["tokens_incorrect"] > 1)).sum()),
                     time.perf_counter() - t0)  # fmt: skip
        for cell in runs:
            if not cell.scored:
                continue
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
    combine(runs, tse_of, score, out, random_init)
    log.info("%s: %d languages in %.1f s -> %s", score.model_name, len(lexicons), time.perf_counter() - started,
             summary_path(out))  # fmt: skip


def _empty_scores(score: ClamsScoreRun) -> pd.DataFrame:
    """A group's per-context scores with no context: EW and MW undefined (no scored cell)."""
    from verbeval.agreement.scores.aggregate import score_columns

    cols = score_columns(score.top_cutoffs, score.bottom_cutoffs)
    return pd.DataFrame({c: pd.Series([], dtype="int64" if c == "context_id" else "bool" if c == "plural" else "float64")
                         for c in cols})  # fmt: skip


def combine(
    runs: Sequence[CellRun], tse_of: Mapping[str, pd.DataFrame], score: ClamsScoreRun, out: Path, random_init: bool
) -> pd.DataFrame:
    """Each group pooled and summarised (module docstring): ``runs``' per-cell scores, and each language's
    row TSE (``tse_of``, :func:`word_tse`); writes every group's ``summary.csv``, the model's
    ``summary_all.csv``, ``eligible.csv`` and ``contexts.parquet``; returns the summary."""
    from verbeval.agreement.scores.aggregate import summarise, with_interval_settings
    from verbeval.core.io import write_csv, write_parquet

    summaries: list[pd.DataFrame] = []
    counts: list[dict[str, Any]] = []
    contexts: list[pd.DataFrame] = []
    for lang, tse_all in tse_of.items():
        lang_runs = [r for r in runs if r.language == lang]
        for group in dict.fromkeys(tse_all["group"]):
            scores, offset = [], 0
            for r in lang_runs:
                folder = r.folder / "groups" / group
                if not r.scored or not (folder / "scores.parquet").exists():
                    continue  # no EW or MW in this cell, or no row of the group in it
                s = pd.read_parquet(folder / "scores.parquet")
                s = s.assign(context_id=s["context_id"] + offset)  # distinct across the cells
                offset = int(s["context_id"].max()) + 1 if len(s) else offset
                scores.append(s)
                contexts.append(
                    pd.DataFrame(
                        {
                            "model": score.model_name,
                            "group": group,
                            "cell": r.cell,
                            "context_id": s["context_id"].to_numpy(),
                            **{m: s[f"{m}_top@1"].to_numpy() for m in CUTOFF_METRICS},
                        }
                    )
                )
            all_scores = pd.concat(scores, ignore_index=True) if scores else _empty_scores(score)
            tse = tse_all[tse_all["group"] == group].reset_index(drop=True)
            tse = tse.assign(p_sing=float("nan"), p_plur=float("nan"))[["row", "context_id", "tse", "p_sing", "p_plur"]]
            summary = summarise(
                all_scores, tse, model=score.model_name, group=group, resamples=score.resamples,
                seed=score.seed, confidence=score.confidence, cluster="context",
            ).assign(random_init=random_init)  # fmt: skip
            summary = with_interval_settings(summary, score.resamples, score.confidence)
            write_csv(summary, out / lang / group / "summary.csv", float_format="%.10g")
            summaries.append(summary)
        multi = (tse_all["tokens_correct"] > 1) | (tse_all["tokens_incorrect"] > 1)
        for r in lang_runs:
            counts.append(
                {
                    "model": score.model_name,
                    "language": lang,
                    "cell": r.cell,
                    "lexicon_lemmas": r.lexicon_lemmas,
                    "eligible_lemmas": len(r.lemmas) if r.scored else 0,
                    "rows": len(r.rows),
                    "rows_multi_token": int((multi & (tse_all["cell"] == r.cell)).sum()),
                }
            )
    summary_all = pd.concat(summaries, ignore_index=True)
    summary_all = summary_all.sort_values(["model", "group", "metric", "side", "cutoff"], kind="stable")
    write_csv(pd.DataFrame(counts, columns=list(ELIGIBLE_COLUMNS)), eligible_path(out))
    ctx = pd.concat(contexts, ignore_index=True) if contexts else pd.DataFrame(columns=list(CONTEXT_COLUMNS))
    write_parquet(ctx.astype(CONTEXT_COLUMNS), contexts_path(out))
    write_csv(summary_all, summary_path(out), float_format="%.10g")
    return summary_all
