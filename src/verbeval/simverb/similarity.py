"""SimVerb-3500 verb similarity (Gerz et al., EMNLP 2016) for the workflow's models.

Every verb gets one vector per *representation*:

* ``static``: the mean of the model's input-embedding rows over the verb's sub-tokens, as the
  verb is tokenised in the first frame (so a byte-level BPE model embeds ``" walk"``, the
  word-initial form, not ``"walk"``);
* ``layer<k>``: the hidden state of layer ``k`` (0 = the embedding layer's output, then one per
  transformer block), averaged over the verb's sub-tokens and then over the frames (neutral
  contexts such as ``"to {verb}"``).

A pair is scored by the cosine of its two verbs' vectors and each representation by Spearman's
rho between cosines and the human ratings (scipy), with a percentile bootstrap CI over pairs
(seeded; every representation of a subset sees the same resamples). A verb is *covered* unless a
sub-token is the tokenizer's unknown token or, with ``multi_token="skip"``, it has more than one
sub-token; a pair is covered when both verbs are. Rho is computed on covered pairs and every row
of the results says how many pairs that was.

Breakdowns follow the paper: by relation label (SYNONYMS, ANTONYMS, HYPER/HYPONYMS, COHYPONYMS,
NONE) and by range of the human rating. :func:`verb_errors` and :func:`agreement_join` relate a
verb's representation quality to the agreement module's per-lemma accuracy.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.tables import tex_escape

#: relation labels of the release, in the order tables show them
RELATIONS = ("SYNONYMS", "ANTONYMS", "HYPER/HYPONYMS", "COHYPONYMS", "NONE")
PAIR_COLUMNS = ["pair", "verb1", "verb2", "score", "relation", "split"]
SIM_COLUMNS = ["pair", "representation", "layer", "single_token", "covered", "cosine"]
VERB_COLUMNS = ["verb", "tokens", "n_tokens", "unknown", "covered"]
TABLE_COLUMNS = ["model", "representation", "layer", "subset", "n_pairs", "n_covered", "coverage", "rho",
                 "ci_low", "ci_high"]
#: the paper's reference points (Gerz et al. 2016)
IAA_PAIRWISE = 0.84
IAA_MEAN = 0.86
BEST_SYSTEM = 0.628
DEFAULT_BINS = (0.0, 2.5, 5.0, 7.5, 10.0)
_VERB = re.compile(r"^[a-z][a-z'-]*$")


# --------------------------------------------------------------------------- data


def read_simverb(path: str | Path) -> pd.DataFrame:
    """Read a SimVerb file (``verb1 TAB verb2 TAB V TAB score TAB relation``, no header).

    Returns columns ``pair`` (0-based row number), ``verb1``, ``verb2``, ``score``, ``relation``
    and ``split`` (empty). Every row is kept, including the one pair the release rates in both
    orders (misspend/pass). Raises :class:`InputError` with the line on any malformed row.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read SimVerb file: {exc}") from exc
    rows: list[tuple[str, str, float, str]] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 5:
            raise InputError(path, f"expected 5 tab-separated fields, got {len(fields)}", lineno)
        v1, v2, pos, score_text, relation = (f.strip() for f in fields)
        for v in (v1, v2):
            if not _VERB.match(v):
                raise InputError(path, f"not a verb: {v!r}", lineno)
        if pos != "V":
            raise InputError(path, f"part of speech {pos!r}, expected 'V'", lineno)
        try:
            score = float(score_text)
        except ValueError:
            raise InputError(path, f"score {score_text!r} is not a number", lineno) from None
        if not 0.0 <= score <= 10.0:
            raise InputError(path, f"score {score} outside [0, 10]", lineno)
        if relation not in RELATIONS:
            raise InputError(path, f"unknown relation {relation!r} (known: {', '.join(RELATIONS)})", lineno)
        if (v1, v2) in seen:
            raise InputError(path, f"pair ({v1}, {v2}) repeats line {seen[(v1, v2)]}", lineno)
        seen[(v1, v2)] = lineno
        rows.append((v1, v2, score, relation))
    if not rows:
        raise InputError(path, "no pairs")
    df = pd.DataFrame(rows, columns=["verb1", "verb2", "score", "relation"])
    df.insert(0, "pair", np.arange(len(df), dtype=np.int64))
    df["split"] = ""
    return df[PAIR_COLUMNS]


def assign_splits(full: pd.DataFrame, splits: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Copy of ``full`` whose ``split`` column names the split file each pair is in.

    A split's pairs are matched to the full set by (verb1, verb2) and must be a subset of it with
    the same rating; splits must not overlap.
    """
    out = full.copy()
    index = {(a, b): i for i, (a, b) in enumerate(zip(full["verb1"], full["verb2"]))}
    split = np.array([""] * len(full), dtype=object)
    for name, part in splits.items():
        for v1, v2, score in zip(part["verb1"], part["verb2"], part["score"]):
            i = index.get((v1, v2))
            if i is None:
                raise VerbevalError(f"split {name!r}: pair ({v1}, {v2}) is not in the full set")
            if not math.isclose(float(full["score"].iat[i]), float(score), abs_tol=1e-9):
                raise VerbevalError(f"split {name!r}: pair ({v1}, {v2}) is rated {score} there but "
                                    f"{full['score'].iat[i]} in the full set")
            if split[i]:
                raise VerbevalError(f"pair ({v1}, {v2}) is in split {split[i]!r} and in split {name!r}")
            split[i] = name
    out["split"] = split
    return out


def score_bins(bins: Sequence[float]) -> list[tuple[float, float, str]]:
    """``[0, 2.5, 5]`` -> [(0, 2.5, '[0, 2.5)'), (2.5, 5, '[2.5, 5]')]: the last bin is closed."""
    edges = [float(b) for b in bins]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise VerbevalError(f"score bins must be at least two increasing edges, got {list(bins)}")
    out = []
    for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
        close = "]" if k == len(edges) - 2 else ")"
        out.append((lo, hi, f"[{lo:g}, {hi:g}{close}"))
    return out


# --------------------------------------------------------------------------- representations


def check_frames(frames: Sequence[str]) -> list[str]:
    """Frames must contain ``{verb}`` exactly once."""
    if not frames:
        raise VerbevalError("at least one frame is needed")
    for f in frames:
        if f.count("{verb}") != 1:
            raise VerbevalError(f"frame {f!r} must contain {{verb}} exactly once")
    return list(frames)


def verb_token_spans(tokenizer: Any, verbs: Sequence[str], frame: str) -> tuple[dict[str, Any], list[list[int]]]:
    """Tokenise ``frame`` with each verb (special tokens included, right-padded); return the
    encoding and, per verb, the positions of the tokens that overlap the verb's characters."""
    prefix = frame.split("{verb}")[0]
    texts = [frame.replace("{verb}", v) for v in verbs]
    if getattr(tokenizer, "pad_token", None) is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    enc = tokenizer(texts, padding=True, return_offsets_mapping=True, return_tensors="np")
    offsets = enc.pop("offset_mapping")
    mask = enc["attention_mask"].astype(bool)
    spans: list[list[int]] = []
    for i, v in enumerate(verbs):
        start, end = len(prefix), len(prefix) + len(v)
        o = offsets[i]
        hit = mask[i] & (o[:, 1] > start) & (o[:, 0] < end) & (o[:, 1] > o[:, 0])
        pos = np.flatnonzero(hit).tolist()
        if not pos:
            raise VerbevalError(f"frame {frame!r}: no token covers the verb {v!r}")
        spans.append(pos)
    return dict(enc), spans


def load_encoder(model_id: str, revision: str | None = None, device: str = "auto",
                 gguf_file: str | None = None) -> tuple[Any, Any, Any]:
    """The base model (no LM head; an LM checkpoint loads its encoder/decoder body), its tokenizer
    and the device, in eval mode. With ``gguf_file``, that GGUF file of the folder or repository
    ``model_id`` (dequantised, float32)."""
    from transformers import AutoModel

    from verbeval.core.models import (check_local_model, gguf_location, load_errors, load_failure, load_tokenizer,
                                      resolve_device, resolve_id)

    check_local_model(model_id, gguf_file=gguf_file)
    tok = load_tokenizer(model_id, revision, gguf_file)
    if not getattr(tok, "is_fast", False):
        raise VerbevalError(f"model {model_id!r}: a fast tokenizer (offset mapping) is needed")
    dev = resolve_device(device)
    try:
        if gguf_file:
            folder, name = gguf_location(model_id, gguf_file, revision)
            model = AutoModel.from_pretrained(folder, gguf_file=name)
        else:
            model = AutoModel.from_pretrained(resolve_id(model_id), revision=revision)
    except load_errors() as exc:
        raise load_failure(model_id, exc) from None
    model.eval().to(dev)
    return model, tok, dev


def fit_verbs(model: Any, tokenizer: Any, verbs: Sequence[str], frames: Sequence[str], batch_size: int,
              device: Any, model_id: str) -> int:
    """``batch_size`` cut to the number of verbs and to what fits in the free memory of ``device``
    (:func:`verbeval.core.memory.fit_batch_size`). A verb's sequence (its longest frame, in tokens)
    needs its forward pass, every layer's hidden states in the model's dtype and as the float64
    copy :func:`verb_vectors` averages, and its float64 input embeddings."""
    from verbeval.core.memory import fit_batch_size, forward_bytes, free_memory, model_shape

    if not verbs:
        return max(1, batch_size)
    texts = [f.replace("{verb}", v) for f in frames for v in verbs]
    width = max(len(ids) for ids in tokenizer(texts)["input_ids"])
    shape = model_shape(model)
    states = (shape.layers + 1) * width * shape.hidden
    per = forward_bytes(shape, width) + states * (shape.act_bytes + 8) + width * shape.hidden * 8
    return fit_batch_size(batch_size, len(verbs), per, free_memory(device), what=model_id, unit="verb",
                          detail=f"{width} tokens, {shape.layers + 1} hidden states of {shape.hidden}")


def verb_vectors(model: Any, tokenizer: Any, verbs: Sequence[str], frames: Sequence[str], batch_size: int = 64,
                 device: Any = "cpu", progress: bool = False, *,
                 model_id: str | None = None) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per-verb token information and vectors.

    Returns the verb table (``verb``, ``tokens`` joined by spaces, ``n_tokens``, ``unknown``; in
    the first frame) and ``{representation: float64 array [V, H]}`` with ``static`` and
    ``layer0`` ... ``layer<L>``. ``batch_size`` verbs per forward pass at most, cut to the number
    of verbs and to what fits in the device's free memory (:func:`fit_verbs`); ``model_id`` names
    the model in that warning or stop (default: its config's name or path).
    """
    import torch
    from tqdm import tqdm

    frames = check_frames(frames)
    batch_size = fit_verbs(model, tokenizer, verbs, frames, batch_size, device,
                           model_id or str(getattr(getattr(model, "config", None), "_name_or_path", "") or "model"))
    emb = model.get_input_embeddings().weight.detach().to(torch.float64).cpu().numpy()
    unk = getattr(tokenizer, "unk_token_id", None)
    sums: np.ndarray | None = None
    static = np.zeros((len(verbs), emb.shape[1]))
    info: list[tuple[str, str, int, bool]] = []
    steps = [(f, s) for f in range(len(frames)) for s in range(0, len(verbs), batch_size)]
    with torch.inference_mode():
        for fi, start in tqdm(steps, desc="simverb", disable=not progress, leave=False):
            batch = list(verbs[start:start + batch_size])
            enc, spans = verb_token_spans(tokenizer, batch, frames[fi])
            ids = enc["input_ids"]
            inputs = {k: torch.as_tensor(v).to(device) for k, v in enc.items()}
            hidden = model(**inputs, output_hidden_states=True).hidden_states
            states = torch.stack([h.to(torch.float64) for h in hidden]).cpu().numpy()  # [L+1, B, T, H]
            if sums is None:
                sums = np.zeros((states.shape[0], len(verbs), states.shape[3]))
            # weights [B, T]: 1/n on the verb's n sub-tokens, 0 elsewhere (mean over sub-tokens)
            weights = np.zeros(ids.shape)
            for j, pos in enumerate(spans):
                weights[j, pos] = 1.0 / len(pos)
            sums[:, start:start + len(batch)] += np.einsum("lbth,bt->lbh", states, weights)
            if fi == 0:
                static[start:start + len(batch)] = np.einsum("bth,bt->bh", emb[ids], weights)
                for j, pos in enumerate(spans):
                    tid = ids[j, pos]
                    toks = tokenizer.convert_ids_to_tokens(tid.tolist())
                    info.append((batch[j], " ".join(toks), len(pos), bool(unk is not None and (tid == unk).any())))
    assert sums is not None
    reps = {"static": static}
    for k in range(sums.shape[0]):
        reps[f"layer{k}"] = sums[k] / len(frames)
    table = pd.DataFrame(info, columns=["verb", "tokens", "n_tokens", "unknown"])
    return table, reps


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (NaN where a vector is zero)."""
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def pair_similarities(pairs: pd.DataFrame, verbs: pd.DataFrame, reps: Mapping[str, np.ndarray],
                      multi_token: str = "mean") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cosine of every pair under every representation (long table, :data:`SIM_COLUMNS`) and the
    verb table with its ``covered`` column."""
    if multi_token not in ("mean", "skip"):
        raise VerbevalError(f"multi_token must be 'mean' or 'skip', got {multi_token!r}")
    verbs = verbs.copy()
    verbs["covered"] = ~verbs["unknown"] & ((verbs["n_tokens"] == 1) | (multi_token == "mean"))
    row = {v: i for i, v in enumerate(verbs["verb"])}
    i1 = pairs["verb1"].map(row).to_numpy()
    i2 = pairs["verb2"].map(row).to_numpy()
    if np.isnan(i1.astype(float)).any() or np.isnan(i2.astype(float)).any():
        raise VerbevalError("a pair's verb has no vector")
    cov = verbs["covered"].to_numpy()
    covered = cov[i1] & cov[i2]
    one = (verbs["n_tokens"] == 1).to_numpy()
    single = one[i1] & one[i2]
    parts = []
    for name, mat in reps.items():
        cos = cosine_rows(mat[i1], mat[i2])
        parts.append(pd.DataFrame({"pair": pairs["pair"].to_numpy(), "representation": name,
                                   "layer": -1 if name == "static" else int(name.removeprefix("layer")),
                                   "single_token": single, "covered": covered & ~np.isnan(cos), "cosine": cos}))
    return pd.concat(parts, ignore_index=True)[SIM_COLUMNS], verbs[VERB_COLUMNS]


# --------------------------------------------------------------------------- statistics


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (scipy.stats.spearmanr, average ranks for ties); NaN for fewer than 2
    points or a constant input."""
    from scipy import stats

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y)[0])


def bootstrap_spearman(x: np.ndarray, y: np.ndarray, resamples: int, seed: int, confidence: float,
                       block: int = 200) -> tuple[float, float]:
    """Percentile bootstrap CI of Spearman's rho over pairs, vectorised over resamples.

    Resample ``b`` draws ``n`` pair indices with replacement (``numpy.random.default_rng(seed)``,
    so equal ``n`` and seed give equal resamples); its rho is the Pearson correlation of the
    average ranks (``scipy.stats.rankdata`` along each row), exactly what ``spearmanr`` computes.
    Resamples with a constant column are left out.
    """
    from scipy import stats

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    if n < 2 or resamples <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    rhos = np.empty(resamples)
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        rx = stats.rankdata(x[idx], axis=1)
        ry = stats.rankdata(y[idx], axis=1)
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rhos[start:start + b] = (rx * ry).sum(1) / np.sqrt((rx * rx).sum(1) * (ry * ry).sum(1))
    alpha = (1.0 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanquantile(rhos, [alpha, 1 - alpha])
    return float(lo), float(hi)


def subsets(pairs: pd.DataFrame, bins: Sequence[float] = DEFAULT_BINS,
            single_token: np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
    """(name, boolean mask over ``pairs``) for ``full``, each split present, ``tokens:single`` /
    ``tokens:multi`` (both verbs one sub-token / at least one split into several; when
    ``single_token`` is given), each relation and each rating range."""
    out: list[tuple[str, np.ndarray]] = [("full", np.ones(len(pairs), bool))]
    for name in sorted(s for s in pairs["split"].unique() if s):
        out.append((name, (pairs["split"] == name).to_numpy()))
    if single_token is not None:
        out += [("tokens:single", np.asarray(single_token, bool)), ("tokens:multi", ~np.asarray(single_token, bool))]
    for rel in RELATIONS:
        out.append((f"relation:{rel}", (pairs["relation"] == rel).to_numpy()))
    score = pairs["score"].to_numpy(float)
    ranges = score_bins(bins)
    for k, (lo, hi, label) in enumerate(ranges):
        upper = score <= hi if k == len(ranges) - 1 else score < hi
        out.append((f"range:{label}", (score >= lo) & upper))
    return out


def results_table(pairs: pd.DataFrame, sims: pd.DataFrame, model: str, *, resamples: int = 1000, seed: int = 0,
                  confidence: float = 0.95, bins: Sequence[float] = DEFAULT_BINS) -> pd.DataFrame:
    """One row per representation and subset (:data:`TABLE_COLUMNS`): pairs in the subset,
    covered pairs, coverage, rho on the covered pairs and its bootstrap CI."""
    human = pairs.set_index("pair")["score"]
    rows = []
    reps = list(dict.fromkeys(sims["representation"]))
    first = sims[sims["representation"] == reps[0]].set_index("pair")
    single = first["single_token"].reindex(pairs["pair"]).to_numpy(bool) if "single_token" in sims else None
    for sub, mask in subsets(pairs, bins, single):
        ids = set(pairs["pair"].to_numpy()[mask].tolist())
        for rep in reps:
            s = sims[(sims["representation"] == rep) & sims["pair"].isin(ids)]
            c = s[s["covered"]]
            x, y = c["cosine"].to_numpy(float), human.loc[c["pair"]].to_numpy(float)
            lo, hi = bootstrap_spearman(x, y, resamples, seed, confidence)
            rows.append({"model": model, "representation": rep, "layer": int(s["layer"].iat[0]) if len(s) else -1,
                         "subset": sub, "n_pairs": len(s), "n_covered": len(c),
                         "coverage": len(c) / len(s) if len(s) else float("nan"),
                         "rho": spearman(x, y), "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def best_representation(table: pd.DataFrame) -> str:
    """The representation with the highest full-set rho (the first in table order on a tie)."""
    full = table[table["subset"] == "full"].reset_index(drop=True)
    if full["rho"].isna().all():
        return str(full["representation"].iat[0])
    return str(full["representation"].iat[int(full["rho"].fillna(-np.inf).to_numpy().argmax())])


def verb_errors(pairs: pd.DataFrame, sims: pd.DataFrame) -> pd.DataFrame:
    """Per verb and representation: the covered pairs it occurs in and its mean rank error,
    the mean over those pairs of |percentile rank of the cosine - percentile rank of the human
    rating| (ranks among all covered pairs of that representation, in (0, 1]; 0 is perfect)."""
    from scipy import stats

    human = pairs.set_index("pair")["score"]
    parts = []
    for rep in dict.fromkeys(sims["representation"]):
        c = sims[(sims["representation"] == rep) & sims["covered"]]
        n = len(c)
        if n == 0:
            continue
        err = np.abs(stats.rankdata(c["cosine"].to_numpy(float)) - stats.rankdata(human.loc[c["pair"]].to_numpy(float))) / n
        p = pairs.set_index("pair").loc[c["pair"]]
        long = pd.DataFrame({"verb": np.concatenate([p["verb1"].to_numpy(), p["verb2"].to_numpy()]),
                             "error": np.concatenate([err, err])})
        g = long.groupby("verb", sort=True)["error"].agg(["size", "mean"]).reset_index()
        g.columns = ["verb", "n_pairs", "rank_error"]
        g.insert(1, "representation", rep)
        parts.append(g)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["verb", "representation", "n_pairs", "rank_error"])


JOIN_COLUMNS = ["model", "representation", "layer", "n_verbs", "rho_accuracy", "p_accuracy", "rho_log10_prob",
                "p_log10_prob"]


def agreement_join(errors: pd.DataFrame, lemma_stats: pd.DataFrame, model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Join per-verb rank errors with the agreement module's per-lemma results (``lemma`` =
    SimVerb verb). Returns the joined per-verb rows and, per representation, the number of verbs
    in both and Spearman's rho (with scipy's p-value) of rank error against agreement accuracy and
    against mean log10 probability. A positive rho_accuracy means verbs conjugated *better* are
    represented *worse*; the hypothesis "conjugated badly and represented badly" predicts a
    negative one."""
    from scipy import stats

    need = {"lemma", "accuracy", "mean_log10_prob"}
    if not need <= set(lemma_stats.columns):
        raise VerbevalError(f"lemma statistics lack column(s) {sorted(need - set(lemma_stats.columns))}")
    ls = lemma_stats[["lemma", "accuracy", "mean_log10_prob", "n_contexts"]].rename(columns={"lemma": "verb"})
    joined = errors.merge(ls, on="verb", how="inner").sort_values(["representation", "verb"], kind="stable")
    order = list(dict.fromkeys(errors["representation"]))
    joined["representation"] = pd.Categorical(joined["representation"], order, ordered=True)
    joined = joined.sort_values(["representation", "verb"], kind="stable").reset_index(drop=True)
    joined["representation"] = joined["representation"].astype(str)
    rows = []
    for rep in order:
        j = joined[joined["representation"] == rep]
        res = {"model": model, "representation": rep, "layer": -1 if rep == "static" else int(rep.removeprefix("layer")),
               "n_verbs": len(j)}
        for col, key in (("accuracy", "accuracy"), ("mean_log10_prob", "log10_prob")):
            a, b = j["rank_error"].to_numpy(float), j[col].to_numpy(float)
            ok = ~np.isnan(a) & ~np.isnan(b)
            if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
                res[f"rho_{key}"], res[f"p_{key}"] = float("nan"), float("nan")
            else:
                r = stats.spearmanr(a[ok], b[ok])
                res[f"rho_{key}"], res[f"p_{key}"] = float(r[0]), float(r[1])
        rows.append(res)
    joined.insert(0, "model", model)
    return joined, pd.DataFrame(rows, columns=JOIN_COLUMNS)


# --------------------------------------------------------------------------- reports


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def _rho_ci(r: Any) -> str:
    return f"{_fmt(r.rho)} [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]"


def _main_subsets(table: pd.DataFrame) -> list[str]:
    return [s for s in ("full", "dev", "test") if s in set(table["subset"])]


def coverage_summary(verbs: pd.DataFrame) -> dict[str, int]:
    return {"verbs": len(verbs), "single_token": int((verbs["n_tokens"] == 1).sum()),
            "multi_token": int((verbs["n_tokens"] > 1).sum()), "unknown": int(verbs["unknown"].sum()),
            "covered": int(verbs["covered"].sum())}


def to_markdown(table: pd.DataFrame, model: str, verbs: pd.DataFrame | None = None) -> str:
    """The per-model table: rho [CI] and coverage per representation on full/dev/test, then the
    relation and rating-range breakdowns (rho per representation)."""
    reps = list(dict.fromkeys(table["representation"]))
    main = _main_subsets(table)
    lines = [f"SimVerb-3500, {model}: Spearman's rho (cosine vs human rating) [bootstrap CI]", ""]
    if verbs is not None:
        c = coverage_summary(verbs)
        lines += [f"Verbs: {c['verbs']} ({c['single_token']} single-token, {c['multi_token']} multi-token, "
                  f"{c['unknown']} with an unknown sub-token); covered: {c['covered']}.", ""]
    head = "| Representation | " + " | ".join(f"{s}: pairs | {s}: coverage | {s}: rho [CI]" for s in main) + " |"
    lines += [head, "|---|" + "---:|" * (3 * len(main))]
    for rep in reps:
        cells = []
        for s in main:
            r = table[(table["representation"] == rep) & (table["subset"] == s)].iloc[0]
            cells += [str(r.n_covered), _fmt(r.coverage), _rho_ci(r)]
        lines.append(f"| {rep} | " + " | ".join(cells) + " |")
    if main == ["full"]:
        lines += ["", "The official dev/test split files were not available (manifest entries simverb_500_dev / "
                  "simverb_3000_test); full set only."]
    lines += ["", f"Reference (Gerz et al. 2016): inter-annotator agreement {IAA_PAIRWISE} (pairwise) / "
              f"{IAA_MEAN} (mean); best system in the paper rho = {BEST_SYSTEM} (full set).", ""]
    for prefix, title in (("tokens:", "By tokenisation (single: both verbs one sub-token)"),
                          ("relation:", "By relation"), ("range:", "By human rating range")):
        subs = [s for s in dict.fromkeys(table["subset"]) if s.startswith(prefix)]
        if not subs:
            continue
        first = table[table["representation"] == reps[0]].set_index("subset")
        lines += [f"{title} (rho; covered pairs in the header)", "",
                  "| Representation | " + " | ".join(f"{s.removeprefix(prefix)} (n={first.loc[s, 'n_covered']})"
                                                    for s in subs) + " |",
                  "|---|" + "---:|" * len(subs)]
        for rep in reps:
            t = table[table["representation"] == rep].set_index("subset")
            lines.append(f"| {rep} | " + " | ".join(_fmt(t.loc[s, "rho"]) for s in subs) + " |")
        lines.append("")
    return "\n".join(lines)


def to_latex(table: pd.DataFrame, model: str) -> str:
    """The main table (coverage, rho and CI per representation and split) and the relation
    breakdown, as booktabs tabulars."""
    reps = list(dict.fromkeys(table["representation"]))
    main = _main_subsets(table)
    out = [rf"% SimVerb-3500, {tex_escape(model)}: Spearman's rho [bootstrap CI]",
           r"\begin{tabular}{l" + "rrl" * len(main) + "}", r"\toprule",
           "Representation & " + " & ".join(rf"\multicolumn{{3}}{{c}}{{{s}}}" for s in main) + r" \\",
           " & " + " & ".join(["$n$ & cov. & $\\rho$ [CI]"] * len(main)) + r" \\", r"\midrule"]
    for rep in reps:
        cells = []
        for s in main:
            r = table[(table["representation"] == rep) & (table["subset"] == s)].iloc[0]
            cells += [str(r.n_covered), _fmt(r.coverage), _rho_ci(r)]
        out.append(f"{tex_escape(rep)} & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", ""]
    subs = [s for s in dict.fromkeys(table["subset"]) if s.startswith(("relation:", "range:"))]
    out += [r"\begin{tabular}{l" + "r" * len(subs) + "}", r"\toprule",
            "Representation & " + " & ".join(tex_escape(s.split(":", 1)[1]) for s in subs) + r" \\", r"\midrule"]
    for rep in reps:
        t = table[table["representation"] == rep].set_index("subset")
        out.append(f"{tex_escape(rep)} & " + " & ".join(_fmt(t.loc[s, "rho"]) for s in subs) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def plot_layers(table: pd.DataFrame, model: str) -> Any:
    """Full-set rho (with its CI band) against layer; the static embedding and the paper's
    reference points as horizontal lines."""
    import matplotlib.pyplot as plt

    from verbeval.core.plots import apply_style

    apply_style()
    full = table[table["subset"] == "full"]
    layers = full[full["representation"] != "static"].sort_values("layer")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(layers["layer"], layers["rho"], marker="o", label="contextual (layer)")
    ax.fill_between(layers["layer"], layers["ci_low"], layers["ci_high"], alpha=0.25)
    st = full[full["representation"] == "static"]
    if len(st):
        ax.axhline(float(st["rho"].iat[0]), color="C1", linestyle="-.", label="static input embedding")
    ax.axhline(BEST_SYSTEM, color="0.4", linestyle="--", linewidth=0.8, label=f"best system in paper ({BEST_SYSTEM})")
    ax.axhline(IAA_PAIRWISE, color="0.2", linestyle=":", linewidth=0.8, label=f"inter-annotator ({IAA_PAIRWISE})")
    ax.set_xlabel("layer (0 = embedding output)")
    ax.set_ylabel("Spearman's rho, full set")
    ax.set_xticks(layers["layer"].to_numpy())
    ax.set_title(f"SimVerb-3500: {model}")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    return fig


def plot_scatter(pairs: pd.DataFrame, sims: pd.DataFrame, representation: str, model: str) -> Any:
    """Model cosine against human rating for one representation, coloured by relation."""
    import matplotlib.pyplot as plt

    from verbeval.core.plots import apply_style, palette

    apply_style()
    s = sims[(sims["representation"] == representation) & sims["covered"]].merge(
        pairs[["pair", "score", "relation"]], on="pair")
    colours = palette(list(RELATIONS))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for rel in RELATIONS:
        r = s[s["relation"] == rel]
        ax.scatter(r["score"], r["cosine"], s=6, alpha=0.5, color=colours[rel], label=f"{rel} (n={len(r)})")
    rho = spearman(s["cosine"].to_numpy(float), s["score"].to_numpy(float))
    ax.set_xlabel("human similarity rating (0-10)")
    ax.set_ylabel(f"cosine ({representation})")
    ax.set_xlim(-0.2, 10.2)
    ax.set_title(f"SimVerb-3500: {model}, {representation} (rho = {_fmt(rho)}, n = {len(s)})")
    ax.legend(title="relation", loc="center left", bbox_to_anchor=(1.02, 0.5), markerscale=2, fontsize="small")
    return fig


#: columns of ``simverb_layers.csv`` (a DVC plot: x = layer, y = rho)
LAYER_COLUMNS = ("model", "representation", "layer", "n_covered", "rho", "ci_low", "ci_high")


def layer_curve(table: pd.DataFrame) -> pd.DataFrame:
    """The per-layer figure's data (full set): representation, layer, rho, CI."""
    full = table[table["subset"] == "full"]
    return full[list(LAYER_COLUMNS)].reset_index(drop=True)


# --------------------------------------------------------------------------- one model, end to end


def check_finite_vectors(model_id: str, verbs: Sequence[str], reps: dict[str, np.ndarray]) -> None:
    """Stop when a representation holds NaN or inf (damaged weights): the similarities, and every
    correlation, would otherwise be computed from them silently."""
    bad = {name: int((~np.isfinite(v).all(axis=1)).sum()) for name, v in reps.items()}
    bad = {k: n for k, n in bad.items() if n}
    if bad:
        first = next(iter(bad))
        raise VerbevalError(f"model {model_id!r}: non-finite verb vectors (NaN or inf: are the model's weights "
                            f"damaged?) in {len(bad)} representation(s), first {first}: {bad[first]} of "
                            f"{len(verbs)} verbs; nothing written")


def score_model(pairs: pd.DataFrame, model_id: str, *, revision: str | None = None, gguf_file: str | None = None,
                frames: Sequence[str] = ("to {verb}",), multi_token: str = "mean", batch_size: int = 64,
                device: str = "auto", progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load ``model_id`` (base model, no head) and return the similarities table (pair columns
    plus :data:`SIM_COLUMNS`, sorted by representation order then pair) and the verb table."""
    model, tok, dev = load_encoder(model_id, revision, device, gguf_file)
    return score_loaded(pairs, model, tok, dev, model_id=model_id, frames=frames, multi_token=multi_token, batch_size=batch_size,
                        progress=progress)


def score_loaded(pairs: pd.DataFrame, model: Any, tok: Any, dev: Any, *, model_id: str, frames: Sequence[str] = ("to {verb}",),
                 multi_token: str = "mean", batch_size: int = 64,
                 progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`score_model` on a model already loaded (its base model, no head), e.g. the body of the
    LM an agreement job loaded (``verbeval run-model``)."""
    if not getattr(tok, "is_fast", False):
        raise VerbevalError("SimVerb-3500 needs a fast tokenizer (offset mapping)")
    verbs = sorted(set(pairs["verb1"]) | set(pairs["verb2"]))
    vt, reps = verb_vectors(model, tok, verbs, frames, batch_size, dev, progress, model_id=model_id)
    check_finite_vectors(model_id, verbs, reps)
    sims, vt = pair_similarities(pairs, vt, reps, multi_token)
    sims = pairs.merge(sims, on="pair", how="right", validate="one_to_many")
    return sims[PAIR_COLUMNS + SIM_COLUMNS[1:]], vt


def split_pairs_and_sims(sims: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs table and the long similarities table back from ``similarities.parquet``."""
    missing = [c for c in PAIR_COLUMNS + SIM_COLUMNS if c not in sims.columns]
    if missing:
        raise VerbevalError(f"similarities table lacks column(s) {missing}")
    pairs = sims[PAIR_COLUMNS].drop_duplicates("pair").sort_values("pair").reset_index(drop=True)
    return pairs, sims[SIM_COLUMNS].reset_index(drop=True)
