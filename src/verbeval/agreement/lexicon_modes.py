"""Agreement scores over three lexicon modes: ``single_token``, ``all`` and ``common``.

Built on :mod:`verbeval.agreement.multitoken`, which gives every form of every lexicon lemma (and every
template verb) a log-probability in every context. The three modes differ only in which lemmas
(EW, MW) and which template rows (TSE) count:

* ``single_token``: the model's eligible lemmas (both forms single tokens, the paper's and
  Table 2's set); TSE rows whose two verb forms are single tokens. Equals Table 2 at p = 1.
* ``all``: every lexicon lemma (forms of any length); every TSE row.
* ``common``: the lemmas (and TSE verb pairs) that are single-token for *every* configured model,
  so that models are compared on identical verbs.

EW and MW are at p = 1 (the whole vocabulary, no cutoff): EW = mean over the mode's lemmas of
1[log P(l+) > log P(l-)], MW = sum P(l+) / sum (P(l+) + P(l-)). Every computation is vectorised
over contexts and lemmas.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval import __version__
from verbeval.agreement.eligibility import form_token_ids, single_token_ids, tokenizer_fingerprint
from verbeval.core.bootstrap import bootstrap_means
from verbeval.core.errors import ShardError, VerbevalError
from verbeval.agreement.shards import capped_chunks, check_finite, chunk_range, group_contexts, group_digest
from verbeval.core.io import atomic_path
from verbeval.core.devices import describe_device
from verbeval.core.models import LoadedModel
from verbeval.agreement.shardstore import PlannedShard, run_plan, shard_key, shard_relpath
from verbeval.core.tables import format_number, latex_row, latex_tabular, markdown_table, tex_escape

log = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("single_token", "all", "common")
METRICS: tuple[str, ...] = ("tse", "ew", "mw")
FORMS_SHARD_VERSION = 1
META_KEY = b"verbeval_forms"


# --------------------------------------------------------------------------- verb pairs of a model


def row_pairs(templates: pd.DataFrame) -> pd.DataFrame:
    """(sing, plur) verb forms of each template row (columns ``sing``, ``plur``; same index)."""
    pl = templates["plural"].to_numpy(dtype=bool)
    return pd.DataFrame({"sing": np.where(pl, templates["incorrect"], templates["correct"]).astype(str),
                         "plur": np.where(pl, templates["correct"], templates["incorrect"]).astype(str)},
                        index=templates.index)


def form_table(lexicon: pd.DataFrame, templates: pd.DataFrame, tokenizer: Any) -> pd.DataFrame:
    """Every verb pair a model is scored on, with its token ids.

    Rows: the lexicon lemmas in lexicon order (``in_lexicon`` True), then the template verb pairs
    not in the lexicon, sorted (TSE only). Columns: ``pair, lemma, sing, plur, in_lexicon,
    sing_ids, plur_ids, n_sing, n_plur, single_token, scorable``. ``single_token`` is the
    eligibility test of :func:`verbeval.agreement.eligibility.eligible_lemmas` (both forms single,
    non-unknown, distinct tokens); ``scorable``: no unknown token in either form and the two
    token sequences differ.
    """
    lex = lexicon[["lemma", "sing", "plur"]].astype(str).reset_index(drop=True)
    lex["in_lexicon"] = True
    rp = row_pairs(templates).drop_duplicates()
    known = pd.MultiIndex.from_frame(lex[["sing", "plur"]])
    extra = rp[~pd.MultiIndex.from_frame(rp).isin(known)].sort_values(["sing", "plur"]).reset_index(drop=True)
    extra.insert(0, "lemma", extra["plur"])
    extra["in_lexicon"] = False
    t = pd.concat([lex, extra], ignore_index=True)
    t.insert(0, "pair", np.arange(len(t), dtype=np.int64))
    sing, plur = t["sing"].tolist(), t["plur"].tolist()
    s_ids, p_ids = form_token_ids(tokenizer, sing), form_token_ids(tokenizer, plur)
    t["sing_ids"], t["plur_ids"] = s_ids, p_ids
    t["n_sing"] = np.array([len(x) for x in s_ids], np.int64)
    t["n_plur"] = np.array([len(x) for x in p_ids], np.int64)
    single = single_token_ids(tokenizer, sing + plur)
    ss, sp = single[: len(t)], single[len(t):]
    t["single_token"] = (ss != -1) & (sp != -1) & (ss != sp)
    unk = tokenizer.unk_token_id
    t["scorable"] = [bool(a) and bool(b) and a != b and unk not in a and unk not in b for a, b in zip(s_ids, p_ids)]
    return t


def common_pairs(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """(sing, plur, in_lexicon) pairs that are single-token in every model's form table, sorted."""
    if not tables:
        raise VerbevalError("no form tables given")
    sets = [set(map(tuple, t.loc[t["single_token"], ["sing", "plur"]].to_numpy().tolist())) for t in tables]
    common = set.intersection(*sets)
    ref = tables[0][["sing", "plur", "in_lexicon"]]
    keep = pd.MultiIndex.from_frame(ref[["sing", "plur"]]).isin(list(common)) if common else np.zeros(len(ref), bool)
    return ref[keep].drop_duplicates(["sing", "plur"]).sort_values(["sing", "plur"]).reset_index(drop=True)


def mode_masks(forms: pd.DataFrame, common: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per pair of ``forms``: whether it counts in each mode (bool arrays aligned with ``forms``)."""
    in_common = pd.MultiIndex.from_frame(forms[["sing", "plur"]]).isin(
        pd.MultiIndex.from_frame(common[["sing", "plur"]])) if len(common) else np.zeros(len(forms), bool)
    scorable = forms["scorable"].to_numpy(bool)
    return {"single_token": forms["single_token"].to_numpy(bool), "all": scorable,
            "common": np.asarray(in_common, bool) & scorable}


def forms_hash(forms: pd.DataFrame) -> str:
    payload = forms[["sing", "plur"]].to_csv(index=False) + json.dumps(
        [[int(x) for x in a] + [-1] + [int(x) for x in b] for a, b in zip(forms["sing_ids"], forms["plur_ids"])])
    return hashlib.sha256(payload.encode()).hexdigest()


# --------------------------------------------------------------------------- inference shards


def infer_forms_chunk(
    lm: LoadedModel,
    templates: pd.DataFrame,
    forms: pd.DataFrame,
    group: str,
    chunk: int,
    n_chunks: int,
    out: str | Path,
    *,
    batch_size: int = 256,
    prepend_bos: bool | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Log-probability of both forms of every pair of ``forms`` in every context of one chunk.

    Contexts and chunks are those of :func:`verbeval.agreement.inference.infer_chunk`. The shard holds, per
    context, ``logp`` (``2 * n_pairs`` float64, pair-major, singular then plural) and the template
    rows (``rows``) with their pair index (``row_pair``). The workflow runs
    :func:`infer_forms_model` (every group and chunk of a model in one process).
    """
    fp = tokenizer_fingerprint(lm.tokenizer)
    prepared = group_contexts(templates, group, lm.kind)
    write = _forms_chunk(lm, group, prepared, forms, chunk, n_chunks, fp, forms_hash(forms), batch_size=batch_size,
                         prepend_bos=prepend_bos, progress=progress)
    return write(Path(out))


def _forms_chunk(lm: LoadedModel, group: str, prepared: tuple[pd.DataFrame, pd.DataFrame, np.ndarray],
                 forms: pd.DataFrame, chunk: int, n_chunks: int, fingerprint: str, forms_sha: str, *,
                 batch_size: int, prepend_bos: bool | None, progress: bool,
                 bar: Any = None, allow_nonfinite: bool = False) -> Callable[[Path], dict[str, Any]]:
    """Compute one chunk of a group prepared once (:func:`group_contexts`); returns the function
    that writes its shard."""
    from verbeval.agreement.inference import encode_contexts
    from verbeval.agreement.multitoken import form_logprobs

    g, contexts, row_context = prepared
    start, stop = chunk_range(len(contexts), n_chunks, chunk)
    chunk_ctx = contexts.iloc[start:stop].reset_index(drop=True)
    in_chunk = (row_context >= start) & (row_context < stop)
    rows = np.flatnonzero(in_chunk)
    pair_of = pd.Series(forms["pair"].to_numpy(), index=pd.MultiIndex.from_frame(forms[["sing", "plur"]]))
    pair_of = pair_of[~pair_of.index.duplicated()]
    rp = row_pairs(g.iloc[rows])
    row_pair = pair_of.reindex(pd.MultiIndex.from_frame(rp)).to_numpy()
    if np.isnan(row_pair.astype(float)).any():
        raise VerbevalError("a template verb pair is missing from the form table (stale forms.parquet?)")
    seqs = [list(x) for pair in zip(forms["sing_ids"], forms["plur_ids"]) for x in pair]
    encoded = encode_contexts(lm, chunk_ctx, prepend_bos)
    log.debug("%s %s chunk %d/%d: %d contexts, %d forms on %s", lm.model_id, group, chunk + 1, n_chunks,
              len(chunk_ctx), len(seqs), describe_device(lm.device))
    logp = form_logprobs(lm, encoded, seqs, batch_size=batch_size, progress=progress and bar is None,
                         desc=f"forms {group} {chunk + 1}/{n_chunks}")
    if bar is not None:
        bar.update(len(chunk_ctx))
    n_bad = int((~np.isfinite(logp).all(axis=1)).sum()) if logp.size else 0
    check_finite(lm.model_id, group, chunk, n_chunks, n_bad, len(chunk_ctx), allow_nonfinite)
    rctx = row_context[rows]
    order = np.lexsort((rows, rctx))
    offsets = np.append(np.searchsorted(rctx[order], chunk_ctx["context_id"].to_numpy(), side="left"),
                        len(order)).astype(np.int32)

    def lists(values: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, type=typ))

    meta = {
        "model_id": lm.model_id, "revision": lm.revision, "kind": lm.kind, "dtype": lm.dtype,
        "tokenizer_fingerprint": fingerprint, "forms_sha256": forms_sha,
        "prepend_bos": encoded.bos, "n_pairs": len(forms), "group": group, "chunk": chunk, "n_chunks": n_chunks,
        "context_start": start, "context_stop": stop, "n_group_contexts": len(contexts), "n_contexts": len(chunk_ctx),
        "n_rows": len(rows), "schema_version": FORMS_SHARD_VERSION, "verbeval_version": __version__,
        "method": "chain-rule" if lm.kind == "causal" else "pll-word-l2r",
        **({"n_nonfinite": n_bad} if n_bad else {}),
    }

    def write(out: Path) -> dict[str, Any]:
        width = logp.shape[1]
        table = pa.table({
            "context_id": pa.array(chunk_ctx["context_id"].to_numpy(), pa.int64()),
            "plural": pa.array(chunk_ctx["plural"].to_numpy(dtype=bool)),
            "logp": pa.FixedSizeListArray.from_arrays(pa.array(logp.reshape(-1), pa.float64()), width),
            "rows": lists(rows[order].astype(np.int64), pa.int64()),
            "row_pair": lists(row_pair[order].astype(np.int64), pa.int64()),
        })
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})
        with atomic_path(out) as tmp:
            pq.write_table(table, tmp, compression="zstd", use_dictionary=["context_id", "plural"],
                           use_byte_stream_split=["logp.list.element"])
        return meta

    return write


def infer_forms_model(
    lm: LoadedModel,
    templates: pd.DataFrame,
    forms: pd.DataFrame,
    groups: list[str],
    n_chunks: int,
    manifest: str | Path,
    *,
    batch_size: int = 256,
    prepend_bos: bool | None = None,
    progress: bool = True,
    allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Every form shard of one model in one process (model loaded once; finished shards kept, so
    a killed run resumes), then the store's manifest. See :func:`verbeval.agreement.shardstore.run_plan`.
    A group is cut into at most as many chunks as it has contexts; non-finite log-probabilities stop
    the run unless ``allow_nonfinite`` (:func:`verbeval.agreement.shards.check_finite`)."""

    fp, fsha = tokenizer_fingerprint(lm.tokenizer), forms_hash(forms)
    bos = prepend_bos if lm.kind == "causal" else None
    plan = []
    for group in groups:
        prepared = group_contexts(templates, group, lm.kind)
        g, contexts, _ = prepared
        digest = group_digest(g)
        n = capped_chunks(len(contexts), n_chunks)
        for chunk in range(n):
            def compute(bar: Any, group: str = group, prepared: tuple[Any, ...] = prepared,
                        chunk: int = chunk, n: int = n) -> Callable[[Path], dict[str, Any]]:
                return _forms_chunk(lm, group, prepared, forms, chunk, n, fp, fsha,  # type: ignore[arg-type]
                                    batch_size=batch_size, prepend_bos=prepend_bos, progress=False, bar=bar,
                                    allow_nonfinite=allow_nonfinite)

            key = shard_key({"model_id": lm.model_id, "revision": lm.revision, "kind": lm.kind, "dtype": lm.dtype,
                             "tokenizer_fingerprint": fp, "forms_sha256": fsha, "prepend_bos": bos,
                             "schema_version": FORMS_SHARD_VERSION, "group": group, "group_sha256": digest,
                             "chunk": chunk, "n_chunks": n})
            start, stop = chunk_range(len(contexts), n, chunk)
            plan.append(PlannedShard(shard_relpath(group, chunk, n), key, stop - start, compute))
    meta = {"model_id": lm.model_id, "revision": lm.revision, "kind": lm.kind, "dtype": lm.dtype,
            "tokenizer_fingerprint": fp, "forms_sha256": fsha, "groups": groups, "n_chunks": n_chunks}
    return run_plan(manifest, plan, meta, desc=f"forms {lm.model_id}", progress=progress,
                    allow_nonfinite=allow_nonfinite)


_CONSISTENT = ("model_id", "revision", "kind", "dtype", "tokenizer_fingerprint", "forms_sha256", "prepend_bos",
               "group", "n_chunks", "n_group_contexts", "schema_version")


def form_shards_by_group(paths: Sequence[str | Path]) -> dict[str, list[str]]:
    """Form shard paths by the group their Parquet metadata names (in the order given)."""
    by_group: dict[str, list[str]] = {}
    for path in paths:
        md = pq.read_schema(path).metadata or {}
        if META_KEY not in md:
            raise VerbevalError(f"{path}: not a verbeval form shard")
        by_group.setdefault(json.loads(md[META_KEY])["group"], []).append(str(path))
    return by_group


def read_form_shards(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Concatenate the shards of one (model, group): ``logp [N, P, 2]``, ``plural [N]``,
    ``rows``, ``row_context`` (position in the concatenated contexts) and ``row_pair``."""
    if not paths:
        raise VerbevalError("no shards given")
    metas = []
    for p in paths:
        md = pq.read_schema(p).metadata or {}
        if META_KEY not in md:
            raise ShardError(p, "not a verbeval form shard (no metadata)")
        metas.append(json.loads(md[META_KEY]))
    ref = metas[0]
    for p, m in zip(paths, metas):
        for key in _CONSISTENT:
            if m.get(key) != ref.get(key):
                raise VerbevalError(f"{p}: {key}={m.get(key)!r} differs from {paths[0]} (stale shard?)")
    if sorted(m["chunk"] for m in metas) != list(range(ref["n_chunks"])):
        raise VerbevalError(f"form shards do not cover chunks 0..{ref['n_chunks'] - 1} exactly once")
    logp, plural, rows, rctx, rpair = [], [], [], [], []
    for i in np.argsort([m["chunk"] for m in metas]):
        t = pq.read_table(paths[i])
        if t.num_rows != metas[i]["n_contexts"]:
            raise ShardError(paths[i], "context count differs from its metadata (truncated shard)")
        width = 2 * ref["n_pairs"]
        logp.append(t["logp"].combine_chunks().flatten().to_numpy().reshape(-1, width))
        plural.append(t["plural"].to_numpy(zero_copy_only=False).astype(bool))
        lens = t["rows"].combine_chunks().value_lengths().to_numpy(zero_copy_only=False)
        rows.append(t["rows"].combine_chunks().flatten().to_numpy())
        rpair.append(t["row_pair"].combine_chunks().flatten().to_numpy())
        rctx.append(np.repeat(t["context_id"].to_numpy(), lens))
    lp = np.concatenate(logp)
    if len(lp) != ref["n_group_contexts"]:
        raise VerbevalError(f"form shards hold {len(lp)} contexts, expected {ref['n_group_contexts']}")
    return {"meta": ref, "logp": lp.reshape(len(lp), ref["n_pairs"], 2), "plural": np.concatenate(plural),
            "rows": np.concatenate(rows), "row_context": np.concatenate(rctx), "row_pair": np.concatenate(rpair)}


# --------------------------------------------------------------------------- metrics


def context_mode_scores(logp: np.ndarray, plural: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EW and MW (p = 1) per context over the lemmas where ``mask`` is True.

    ``logp``: ``[N, L, 2]`` (singular, plural) log-probabilities; ``plural``: ``[N]``; ``mask``: ``[L]``.
    A tie counts as wrong. NaN when the mask is empty.
    """
    lp = np.asarray(logp, np.float64)[:, np.asarray(mask, bool)]
    n = lp.shape[0]
    if lp.shape[1] == 0:
        return np.full(n, np.nan), np.full(n, np.nan)
    pl = np.asarray(plural, bool)[:, None]
    right = np.where(pl, lp[:, :, 1], lp[:, :, 0])
    wrong = np.where(pl, lp[:, :, 0], lp[:, :, 1])
    ew = (right > wrong).mean(axis=1)
    shift = np.maximum(right.max(axis=1), wrong.max(axis=1))[:, None]
    num = np.exp(right - shift).sum(axis=1)
    mw = num / (num + np.exp(wrong - shift).sum(axis=1))
    return ew, mw


def row_mode_tse(logp: np.ndarray, plural: np.ndarray, row_context: np.ndarray, row_pair: np.ndarray,
                 pair_mask: np.ndarray) -> np.ndarray:
    """TSE per row (1 / 0 / NaN where the row's pair is outside ``pair_mask``); ``logp`` ``[N, P, 2]``."""
    lp = np.asarray(logp)[row_context, row_pair]  # [R, 2]
    pl = np.asarray(plural, bool)[row_context]
    right = np.where(pl, lp[:, 1], lp[:, 0])
    wrong = np.where(pl, lp[:, 0], lp[:, 1])
    out = (right > wrong).astype(np.float64)
    out[~np.asarray(pair_mask, bool)[row_pair]] = np.nan
    return out


def group_summary(shards: dict[str, Any], masks: dict[str, np.ndarray], n_lexicon: int, *, model: str,
                  group: str, resamples: int, seed: int, confidence: float) -> pd.DataFrame:
    """Long summary of one (model, group): one row per (mode, metric) with value, CI, n, n_total and
    the mode's lemma count."""
    lex_logp = shards["logp"][:, :n_lexicon]
    cols, names = [], []
    for mode in MODES:
        ew, mw = context_mode_scores(lex_logp, shards["plural"], masks[mode][:n_lexicon])
        cols += [ew, mw]
        names += [(mode, "ew"), (mode, "mw")]
    mean, lo, hi = bootstrap_means(np.stack(cols, axis=1), resamples, seed, confidence)
    tse = np.stack([row_mode_tse(shards["logp"], shards["plural"], shards["row_context"], shards["row_pair"],
                                 masks[mode]) for mode in MODES], axis=1)
    t_mean, t_lo, t_hi = bootstrap_means(tse, resamples, seed, confidence)
    recs = []
    n_ctx = lex_logp.shape[0]
    for j, mode in enumerate(MODES):
        n_lem = int(masks[mode][:n_lexicon].sum())
        recs.append({"mode": mode, "metric": "tse", "value": t_mean[j], "ci_low": t_lo[j], "ci_high": t_hi[j],
                     "n": int((~np.isnan(tse[:, j])).sum()), "n_total": len(tse), "n_lemmas": n_lem})
        for metric in ("ew", "mw"):
            k = names.index((mode, metric))
            recs.append({"mode": mode, "metric": metric, "value": mean[k], "ci_low": lo[k], "ci_high": hi[k],
                         "n": int((~np.isnan(cols[k])).sum()), "n_total": n_ctx, "n_lemmas": n_lem})
    df = pd.DataFrame(recs)
    df.insert(0, "group", group)
    df.insert(0, "model", model)
    return df


def lemma_scores(logp: np.ndarray, plural: np.ndarray, forms: pd.DataFrame, masks: dict[str, np.ndarray],
                 model: str) -> pd.DataFrame:
    """Per lexicon lemma over all given contexts: accuracy (EW test) and mean log10 P(sing) + P(plur)."""
    n_lex = int(forms["in_lexicon"].sum())
    lp = np.asarray(logp, np.float64)[:, :n_lex]
    pl = np.asarray(plural, bool)[:, None]
    right = np.where(pl, lp[:, :, 1], lp[:, :, 0])
    wrong = np.where(pl, lp[:, :, 0], lp[:, :, 1])
    lex = forms.iloc[:n_lex]
    n = lp.shape[0]
    correct = (right > wrong).sum(axis=0)
    out = pd.DataFrame({
        "model": model, "lemma": lex["lemma"].to_numpy(), "sing": lex["sing"].to_numpy(), "plur": lex["plur"].to_numpy(),
        "n_sing": lex["n_sing"].to_numpy(), "n_plur": lex["n_plur"].to_numpy(),
        "single_token": masks["single_token"][:n_lex], "common": masks["common"][:n_lex],
        "scorable": masks["all"][:n_lex], "n_contexts": n, "n_correct": correct,
        "accuracy": correct / n if n else np.full(n_lex, np.nan),
        "mean_log10_prob": np.logaddexp(lp[:, :, 0], lp[:, :, 1]).mean(axis=0) / np.log(10) if n else np.nan,
    })
    return out


def lemma_differences(lemmas: pd.DataFrame, *, resamples: int, seed: int, confidence: float) -> pd.DataFrame:
    """Single-token vs multi-token lemmas of one model: mean accuracy (bootstrap CI), mean log10
    probability, and a two-sided Mann-Whitney U test of the accuracies (scipy)."""
    from scipy.stats import mannwhitneyu


    ok = lemmas[lemmas["scorable"]]
    recs: dict[str, Any] = {"model": lemmas["model"].iloc[0] if len(lemmas) else ""}
    sets = {"single": ok[ok["single_token"]], "multi": ok[~ok["single_token"]]}
    for name, s in sets.items():
        m, lo, hi = bootstrap_means(s["accuracy"].to_numpy(float), resamples, seed, confidence)
        recs[f"n_{name}"] = len(s)
        recs[f"acc_{name}"], recs[f"acc_{name}_ci_low"], recs[f"acc_{name}_ci_high"] = m[0], lo[0], hi[0]
        recs[f"log10p_{name}"] = float(s["mean_log10_prob"].mean()) if len(s) else np.nan
    recs["acc_diff"] = recs["acc_multi"] - recs["acc_single"]
    if len(sets["single"]) and len(sets["multi"]):
        res = mannwhitneyu(sets["multi"]["accuracy"], sets["single"]["accuracy"], alternative="two-sided")
        recs["mannwhitney_u"], recs["mannwhitney_p"] = float(res.statistic), float(res.pvalue)
    else:
        recs["mannwhitney_u"] = recs["mannwhitney_p"] = np.nan
    return pd.DataFrame([recs])


def consistency(summary: pd.DataFrame, table2_summaries: pd.DataFrame) -> pd.DataFrame:
    """single_token mode against the single-token pipeline (Table 2 summaries): TSE, EW and MW at top p = 1."""
    ref = table2_summaries[(table2_summaries["metric"] == "tse") |
                           (table2_summaries["metric"].isin(["ew", "mw"]) & (table2_summaries["side"] == "top") &
                            np.isclose(table2_summaries["cutoff"].astype(float), 1.0))]
    ref = ref[["model", "group", "metric", "value", "n"]].rename(columns={"value": "table2", "n": "n_table2"})
    st = summary[summary["mode"] == "single_token"][["model", "group", "metric", "value", "n"]]
    out = st.merge(ref, on=["model", "group", "metric"], how="left")
    out["abs_diff"] = (out["value"] - out["table2"]).abs()
    return out


# --------------------------------------------------------------------------- tables


def modes_table(summary: pd.DataFrame, groups: Sequence[dict], models: Sequence[str]) -> pd.DataFrame:
    """Long-to-wide: one row per (group, model, mode) with TSE, EW, MW, CIs and coverage."""
    recs = []
    for g in groups:
        for m in models:
            for mode in MODES:
                sel = summary[(summary["group"] == g["id"]) & (summary["model"] == m) & (summary["mode"] == mode)]
                if sel.empty:
                    continue
                r: dict[str, Any] = {"group": g["id"], "name": g["name"], "model": m, "mode": mode}
                for metric in METRICS:
                    hit = sel[sel["metric"] == metric].iloc[0]
                    r[metric], r[f"{metric}_ci_low"], r[f"{metric}_ci_high"] = hit["value"], hit["ci_low"], hit["ci_high"]
                    if metric == "tse":
                        r["n_rows"], r["n_rows_total"] = int(hit["n"]), int(hit["n_total"])
                r["n_lemmas"] = int(sel["n_lemmas"].iloc[0])
                recs.append(r)
    return pd.DataFrame(recs)


def to_markdown(table: pd.DataFrame, models: Sequence[str], headline: str) -> str:
    """Groups as rows; per model and mode TSE / EW / MW (headline mode first), lemma counts in the header."""
    order = [headline] + [m for m in MODES if m != headline]
    header = ["Group"]
    for m in models:
        for mode in order:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            n = int(sel["n_lemmas"].iloc[0]) if len(sel) else 0
            header += [f"{m} {mode} ({n}) {k.upper()}" for k in METRICS]
    rows = []
    for gid in dict.fromkeys(table["group"]):
        g = table[table["group"] == gid]
        cells = [str(g["name"].iloc[0])]
        for m in models:
            for mode in order:
                sel = g[(g["model"] == m) & (g["mode"] == mode)]
                cells += [format_number(float(sel[k].iloc[0]) if len(sel) else None) for k in METRICS]
        rows.append(cells)
    return "\n".join(markdown_table(header, rows, "l" + "r" * (len(header) - 1))) + "\n"


def to_latex(table: pd.DataFrame, models: Sequence[str], headline: str) -> str:
    """One block per model: rows are groups, columns TSE/EW/MW for each mode."""
    order = [headline] + [m for m in MODES if m != headline]
    sections: list[list[str]] = []
    for m in models:
        heads = []
        for mode in order:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            n = int(sel["n_lemmas"].iloc[0]) if len(sel) else 0
            heads.append(rf"\multicolumn{{3}}{{c}}{{{tex_escape(mode)} ({n})}}")
        rows = []
        for gid in dict.fromkeys(table["group"]):
            g = table[(table["group"] == gid) & (table["model"] == m)]
            cells = [tex_escape(str(table[table["group"] == gid]["name"].iloc[0]))]
            for mode in order:
                sel = g[g["mode"] == mode]
                cells += [format_number(float(sel[k].iloc[0]) if len(sel) else None) for k in METRICS]
            rows.append(latex_row(cells))
        sections += [[latex_row([rf"\multicolumn{{{1 + 3 * len(order)}}}{{l}}{{\textbf{{{tex_escape(m)}}}}}"]),
                      latex_row([""] + heads), latex_row(["Group"] + ["TSE & EW & MW"] * len(order))], rows]
    return "\n".join(latex_tabular("l" + "ccc" * len(order), *sections)) + "\n"


def to_metrics(table: pd.DataFrame, models: Sequence[str], headline: str,
               coverage: pd.DataFrame) -> dict[str, Any]:
    """``{model: {headline_mode, coverage: {mode: n}, <mode>: {group: {tse, ew, mw}}}}``; NaN -> null."""
    out: dict[str, Any] = {}
    for m in models:
        entry: dict[str, Any] = {"headline_mode": headline}
        cov = coverage[coverage["model"] == m]
        entry["coverage"] = {mode: int(cov[f"n_{mode}"].iloc[0]) for mode in MODES} if len(cov) else {}
        for mode in [headline] + [x for x in MODES if x != headline]:
            sel = table[(table["model"] == m) & (table["mode"] == mode)]
            entry[mode] = {str(r["group"]): {k: (None if np.isnan(r[k]) else float(r[k])) for k in METRICS}
                           for _, r in sel.iterrows()}
        out[m] = entry
    return out


def coverage_table(forms: dict[str, pd.DataFrame], common: pd.DataFrame) -> pd.DataFrame:
    """Lemma coverage per model and mode (lexicon lemmas only)."""
    recs = []
    for m, f in forms.items():
        masks = mode_masks(f, common)
        lex = f["in_lexicon"].to_numpy(bool)
        recs.append({"model": m, "n_lexicon": int(lex.sum()),
                     **{f"n_{mode}": int(masks[mode][lex].sum()) for mode in MODES},
                     "n_multi_token": int(((f["n_sing"] > 1) | (f["n_plur"] > 1))[lex].sum())})
    return pd.DataFrame(recs)
