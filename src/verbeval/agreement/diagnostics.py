"""Per-lemma diagnostics and the qualitative top-k table (the paper's Table 3), from the shards.

No model is run: shards hold every eligible form's probability in every context and each context's
most probable tokens. Only a tokenizer is loaded (to decode the top-k token ids).

Per-lemma statistics (:func:`lemma_stats`), pooled over every context of every group a model was
run on (each distinct context once, as for EW):

* ``n_correct``: contexts where P(correct form) > P(incorrect form), the EW test (a tie is a
  failure); ``n_wrong = n_contexts - n_correct``; ``accuracy = n_correct / n_contexts``.
* ``mean_prob``: mean over contexts of the lemma's in-context probability P(sing) + P(plur).
* ``mean_log10_prob``: mean over contexts of log10(P(sing) + P(plur)); a probability that
  underflowed to 0 in the float32 shard counts as the smallest normal float32 (about 1.2e-38).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from verbeval.agreement.shards import build_contexts, lemma_set_hash, read_shard_meta
from verbeval.core.errors import VerbevalError
from verbeval.core.provenance import display_name

#: probability floor for the log of a lemma's mass (float32 shards underflow to 0 below ~1e-45)
PROB_FLOOR = float(np.finfo(np.float32).tiny)

LEMMA_STATS_COLUMNS = (
    "model",
    "lemma",
    "sing",
    "plur",
    "n_contexts",
    "n_correct",
    "n_wrong",
    "accuracy",
    "mean_prob",
    "mean_log10_prob",
)


def _fixed(col: pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    if width == 0:
        return np.zeros((len(col), 0), dtype)
    flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=dtype).reshape(-1, width)


# --------------------------------------------------------------------------- per-lemma statistics


@dataclass
class LemmaCounts:
    """Running per-lemma sums over contexts (arrays of length L)."""

    n_contexts: int
    n_correct: np.ndarray
    sum_prob: np.ndarray
    sum_log10_prob: np.ndarray

    @classmethod
    def zeros(cls, n_lemmas: int) -> LemmaCounts:
        return cls(0, np.zeros(n_lemmas, np.int64), np.zeros(n_lemmas), np.zeros(n_lemmas))

    def add(self, prob: np.ndarray, plural: np.ndarray) -> None:
        """Add contexts: ``prob`` ``[N, L, 2]`` (singular, plural form), ``plural`` ``[N]`` labels."""
        p = np.asarray(prob, dtype=np.float64)
        pl = np.asarray(plural, dtype=bool)
        if p.ndim != 3 or p.shape[2] != 2 or p.shape[1] != len(self.n_correct) or pl.shape != (p.shape[0],):
            raise ValueError(f"prob must be [N, {len(self.n_correct)}, 2] and plural [N], got {p.shape} and {pl.shape}")
        right = np.where(pl[:, None], p[:, :, 1], p[:, :, 0])
        wrong = np.where(pl[:, None], p[:, :, 0], p[:, :, 1])
        mass = p.sum(axis=2)
        self.n_contexts += p.shape[0]
        self.n_correct += (right > wrong).sum(axis=0)
        self.sum_prob += mass.sum(axis=0)
        self.sum_log10_prob += np.log10(np.maximum(mass, PROB_FLOOR)).sum(axis=0)


def lemma_table(lemmas: pd.DataFrame, counts: LemmaCounts, model: str) -> pd.DataFrame:
    """One row per eligible lemma (``lemmas.parquet`` order) with the columns of :data:`LEMMA_STATS_COLUMNS`."""
    n = counts.n_contexts
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = counts.n_correct / n if n else np.full(len(lemmas), np.nan)
        mean_prob = counts.sum_prob / n if n else np.full(len(lemmas), np.nan)
        mean_log = counts.sum_log10_prob / n if n else np.full(len(lemmas), np.nan)
    return pd.DataFrame(
        {
            "model": model,
            "lemma": lemmas["lemma"].to_numpy(),
            "sing": lemmas["sing"].to_numpy(),
            "plur": lemmas["plur"].to_numpy(),
            "n_contexts": n,
            "n_correct": counts.n_correct,
            "n_wrong": n - counts.n_correct,
            "accuracy": acc,
            "mean_prob": mean_prob,
            "mean_log10_prob": mean_log,
        },
        columns=list(LEMMA_STATS_COLUMNS),
    )


def _check_shard(
    path: str | Path, meta: dict[str, Any], lemmas: pd.DataFrame, lemma_hash: str, ref: dict[str, Any] | None
) -> None:
    if meta.get("n_lemmas") != len(lemmas) or meta.get("lemma_set_sha256") != lemma_hash:
        raise VerbevalError(
            f"{path}: shard was made with a different lemma set than the given lemmas file (stale shard?)"
        )
    if ref is not None:
        for key in ("model_id", "revision", "tokenizer_fingerprint"):
            if meta.get(key) != ref.get(key):
                raise VerbevalError(f"{path}: {key}={meta.get(key)!r} differs from the other shards: {ref.get(key)!r}")


def lemma_stats(shards: Sequence[str | Path], lemmas: pd.DataFrame, model: str) -> pd.DataFrame:
    """Per-lemma accuracy and mean in-context probability of one model, pooled over ``shards``.

    Reads only the ``plural`` and ``prob`` columns, one shard at a time. Every shard must have been
    made with ``lemmas`` (same lemma set) and by the same model; a context that appears in two
    shards (a shard given twice) is an error.
    """
    if not shards:
        raise VerbevalError("no shards given")
    lemma_hash = lemma_set_hash(lemmas)
    counts = LemmaCounts.zeros(len(lemmas))
    ref: dict[str, Any] | None = None
    seen: set[tuple[str, int]] = set()
    for path in shards:
        meta = read_shard_meta(path)
        _check_shard(path, meta, lemmas, lemma_hash, ref)
        ref = ref or meta
        key = (str(meta.get("group")), int(meta.get("chunk", -1)))
        if key in seen:
            raise VerbevalError(f"{path}: chunk {key[1]} of group {key[0]!r} given twice")
        seen.add(key)
        t = pq.read_table(path, columns=["plural", "prob"])
        prob = _fixed(t["prob"], 2 * len(lemmas), np.float32).reshape(t.num_rows, len(lemmas), 2)
        counts.add(prob, t["plural"].to_numpy(zero_copy_only=False))
    return lemma_table(lemmas, counts, model)


# --------------------------------------------------------------------------- Table 3: top-k tokens


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().lower()


def table3_groups(
    groups: Sequence[str],
    contexts: Sequence[Mapping[str, str]] | None = None,
    default_groups: Sequence[str] = ("obj_rel_within", "obj_rel_across"),
) -> list[str]:
    """The groups Table 3 draws its contexts from (and whose shards it reads): those of the explicit
    ``contexts``; otherwise the ``default_groups`` that were run (``groups``), or, when none was,
    the first group that was."""
    run = list(groups)
    if contexts:
        return list(dict.fromkeys(str(c.get("group")) for c in contexts))
    return [g for g in default_groups if g in run] or run[:1]


def select_rows(
    templates: pd.DataFrame,
    groups: Sequence[str],
    contexts: Sequence[Mapping[str, str]] | None = None,
    default_groups: Sequence[str] = ("obj_rel_within", "obj_rel_across"),
    per_label: int = 1,
) -> pd.DataFrame:
    """The template rows whose contexts go into Table 3.

    ``contexts``: explicit ``{group, left[, right]}`` entries; each selects the first row of
    ``group`` (in template order) whose left (and right, when given) context matches, ignoring case
    and repeated whitespace. Without explicit entries: the first ``per_label`` singular and plural
    rows of each of ``default_groups`` that was run (``groups``); when none of them was run, of
    the first group that was.

    Returns the rows (all template columns) plus ``row`` (position within the group's rows, as in
    the shards) and ``selection`` (0, 1, ... in table order).
    """
    run = list(groups)
    picked: list[pd.DataFrame] = []

    def group_rows(g: str) -> pd.DataFrame:
        sub = templates[templates["group"] == g].reset_index(drop=True)
        sub.insert(0, "row", np.arange(len(sub), dtype=np.int64))
        return sub

    if contexts:
        for i, entry in enumerate(contexts):
            g = entry.get("group")
            if g not in run:
                raise VerbevalError(f"Table 3 context #{i + 1}: group {g!r} was not run (groups: {run})")
            sub = group_rows(g)
            hit = sub["left"].map(_norm) == _norm(entry.get("left", ""))
            if entry.get("right") is not None:
                hit &= sub["right"].map(_norm) == _norm(entry["right"])
            if not hit.any():
                raise VerbevalError(
                    f"Table 3 context #{i + 1}: no row of group {g!r} has left context "
                    f"{entry.get('left')!r}"
                    + (f" and right context {entry['right']!r}" if entry.get("right") is not None else "")
                )
            picked.append(sub[hit].iloc[[0]])
    else:
        for g in table3_groups(run, None, default_groups):
            sub = group_rows(g)
            for plural in (False, True):
                picked.append(sub[sub["plural"] == plural].head(per_label))
    out = pd.concat(picked, ignore_index=True) if picked else group_rows("")
    out.insert(0, "selection", np.arange(len(out), dtype=np.int64))
    return out


def display_context(left: str, right: str) -> str:
    """The context as shown in Table 3: ``left ___ right.``"""
    return " ".join(p for p in (left, "___", right) if p) + "."


def form_numbers(
    lemmas: pd.DataFrame, extra_pairs: Sequence[tuple[int, int, str]] = ()
) -> dict[int, dict[str, set[str]]]:
    """token id -> {"sing"/"plur": lemmas having that id as that form}.

    ``extra_pairs``: (singular id, plural id, name) of further verbs (a template row's own verb,
    which need not be an eligible lemma); ids < 0 are ignored.
    """
    out: dict[int, dict[str, set[str]]] = {}
    pairs = list(zip(lemmas["sing_id"].astype(int), lemmas["plur_id"].astype(int), lemmas["lemma"].astype(str)))
    for s, p, name in [*pairs, *extra_pairs]:
        for tid, number in ((int(s), "sing"), (int(p), "plur")):
            if tid >= 0:
                out.setdefault(tid, {}).setdefault(number, set()).add(str(name))
    return out


def mark_tokens(
    ids: Sequence[int], plural: bool, numbers: Mapping[int, Mapping[str, set[str]]]
) -> tuple[list[str], list[str]]:
    """For each token id: ``correct`` (a verb form of the context's number), ``incorrect`` (of the
    other number), ``ambiguous`` (a form of both numbers, e.g. of two different lemmas) or ``""``
    (not a known verb form); and the lemmas it is a form of (``/``-joined)."""
    want, other = ("plur", "sing") if plural else ("sing", "plur")
    marks, names = [], []
    for t in ids:
        entry = numbers.get(int(t), {})
        has_want, has_other = bool(entry.get(want)), bool(entry.get(other))
        marks.append(
            "ambiguous" if has_want and has_other else "correct" if has_want else "incorrect" if has_other else ""
        )
        names.append("/".join(sorted(set().union(*entry.values()))) if entry else "")
    return marks, names


@dataclass
class ModelTopK:
    """What Table 3 needs from one model."""

    name: str
    kind: str  # masked or causal (from the shards)
    topk: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # group -> (context_id, ids [N,k], probs [N,k])
    lemmas: pd.DataFrame
    decode: Callable[[Sequence[int]], list[str]]  # token ids -> display strings
    verb_ids: Callable[[Sequence[str]], np.ndarray]  # words -> single-token ids (-1 if not one token)
    render: Callable[[str, str], str]  # (left, right) -> the text the model sees


TABLE3_COLUMNS = (
    "selection",
    "group",
    "context",
    "label",
    "model",
    "model_input",
    "rank",
    "token_id",
    "token",
    "prob",
    "mark",
    "lemma",
)


def topk_table(selected: pd.DataFrame, templates: pd.DataFrame, models: Sequence[ModelTopK]) -> pd.DataFrame:
    """Long Table 3: one row per (selected context, model, rank) with the token, its probability and
    whether it is a correct or incorrect verb form for the context's label."""
    records: list[dict[str, Any]] = []
    ctx_cache: dict[tuple[str, str], np.ndarray] = {}
    for m in models:
        for _, r in selected.iterrows():
            g = str(r["group"])
            key = (g, m.kind)
            if key not in ctx_cache:
                _, ctx_cache[key] = build_contexts(templates[templates["group"] == g].reset_index(drop=True), m.kind)
            if g not in m.topk:
                raise VerbevalError(f"{m.name}: no shards given for group {g!r}")
            cid = int(ctx_cache[key][int(r["row"])])
            context_ids, ids_all, probs_all = m.topk[g]
            pos = np.flatnonzero(context_ids == cid)
            if len(pos) != 1:
                raise VerbevalError(f"{m.name}: context {cid} of group {g!r} is not in the shards exactly once")
            ids, probs = ids_all[pos[0]], probs_all[pos[0]]
            plural = bool(r["plural"])
            sing, plur = (r["incorrect"], r["correct"]) if plural else (r["correct"], r["incorrect"])
            own = m.verb_ids([str(sing), str(plur)])
            numbers = form_numbers(m.lemmas, [(int(own[0]), int(own[1]), f"{sing}/{plur}")])
            marks, names = mark_tokens(ids, plural, numbers)
            tokens = m.decode([int(t) for t in ids])
            for k, (tid, p, tok, mark, name) in enumerate(zip(ids, probs, tokens, marks, names), start=1):
                records.append(
                    {
                        "selection": int(r["selection"]),
                        "group": g,
                        "context": display_context(str(r["left"]), str(r["right"])),
                        "label": "plural" if plural else "singular",
                        "model": m.name,
                        "model_input": m.render(str(r["left"]), str(r["right"])),
                        "rank": k,
                        "token_id": int(tid),
                        "token": tok,
                        "prob": float(p),
                        "mark": mark,
                        "lemma": name,
                    }
                )
    df = pd.DataFrame.from_records(records, columns=list(TABLE3_COLUMNS))
    order = {m.name: i for i, m in enumerate(models)}
    df["_model_order"] = df["model"].map(order)
    df = df.sort_values(["selection", "_model_order", "rank"], kind="stable")
    return df.drop(columns="_model_order").reset_index(drop=True)


def read_topk(
    shards: Sequence[str | Path],
) -> tuple[dict[str, Any], dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Top-k columns of a model's shards: (metadata of the first shard, group -> (ids, tokens, probs))."""
    parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    ref: dict[str, Any] | None = None
    for path in shards:
        meta = read_shard_meta(path)
        if ref is not None:
            for key in ("model_id", "revision", "kind", "tokenizer_fingerprint", "top_k"):
                if meta.get(key) != ref.get(key):
                    raise VerbevalError(
                        f"{path}: {key}={meta.get(key)!r} differs from the other shards: {ref.get(key)!r}"
                    )
        ref = ref or meta
        t = pq.read_table(path, columns=["context_id", "topk_ids", "topk_probs"])
        k = int(meta["top_k"])
        parts.setdefault(str(meta["group"]), []).append(
            (t["context_id"].to_numpy(), _fixed(t["topk_ids"], k, np.int32), _fixed(t["topk_probs"], k, np.float32))
        )
    if ref is None:
        raise VerbevalError("no shards given")
    out = {}
    for g, chunks in parts.items():
        cid = np.concatenate([c[0] for c in chunks])
        order = np.argsort(cid, kind="stable")
        out[g] = (
            cid[order],
            np.concatenate([c[1] for c in chunks])[order],
            np.concatenate([c[2] for c in chunks])[order],
        )
    return ref, out


# --------------------------------------------------------------------------- rendering

MARK_SYMBOL = {"correct": "✓", "incorrect": "✗", "ambiguous": "?", "": ""}


def load_model_topk(
    name: str,
    model_id: str,
    shards: Sequence[str | Path],
    lemmas: str | Path,
    revision: str | None = None,
    gguf_file: str | None = None,
) -> ModelTopK:
    """Table 3's view of one model: the top-k tokens of its ``shards`` (:func:`read_topk`), and from its
    tokenizer (only the tokenizer is loaded) how to decode token ids, find the ids of verb forms and
    render a context as the model sees it; ``lemmas``: its lemmas.parquet."""
    from verbeval.agreement.eligibility import single_token_ids
    from verbeval.agreement.templates import render_context
    from verbeval.core.models import load_tokenizer

    meta, topk = read_topk(shards)
    tok = load_tokenizer(model_id, revision, gguf_file)
    masked = meta["kind"] == "masked"
    cased = bool(meta.get("cased"))

    def decode(ids: Sequence[int]) -> list[str]:
        return [tok.decode([i]).strip() or repr(tok.decode([i])) for i in ids]

    def render(left: str, right: str) -> str:
        return render_context(left, right, cased=cased, masked=masked, mask_token=getattr(tok, "mask_token", None))

    return ModelTopK(
        name=name,
        kind=meta["kind"],
        topk=topk,
        lemmas=pd.read_parquet(lemmas),
        decode=decode,
        verb_ids=lambda words: single_token_ids(tok, list(words)),
        render=render,
    )


def _cell(token: str, prob: float, mark: str) -> str:
    sym = MARK_SYMBOL.get(mark, "")
    return f"{token} ({prob:.3g}){' ' + sym if sym else ''}"


def _md_escape(s: str) -> str:
    return s.replace("|", r"\|")


def table3_markdown(table: pd.DataFrame, random: Collection[str] = ()) -> str:
    """Table 3 as Markdown: one block per context, ranks as rows, models as columns (a ``random``,
    randomly initialised, model named so in its header)."""
    lines = [
        "# Table 3: top tokens in selected contexts",
        "",
        "✓ correct verb form for the context's number, ✗ incorrect, ? form of both numbers.",
        "",
    ]
    if table.empty:
        return "\n".join(lines + ["(no contexts selected)", ""])
    models = list(dict.fromkeys(table["model"]))
    for _, block in table.groupby("selection", sort=True):
        first = block.iloc[0]
        lines += [f"## {first['context']} ({first['label']}; {first['group']})", ""]
        lines.append("| rank | " + " | ".join(_md_escape(display_name(m, m in random)) for m in models) + " |")
        lines.append("|---:|" + "---|" * len(models))
        ranks = sorted(block["rank"].unique())
        by = {(r.model, r.rank): r for r in block.itertuples(index=False)}
        for k in ranks:
            cells = [
                _md_escape(_cell(by[(m, k)].token, by[(m, k)].prob, by[(m, k)].mark)) if (m, k) in by else ""
                for m in models
            ]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        inputs = block.drop_duplicates("model")[["model", "model_input"]]
        lines += (
            [""] + [f"- {_md_escape(r.model)} sees: `{r.model_input}`" for r in inputs.itertuples(index=False)] + [""]
        )
    return "\n".join(lines)


def _html_page(title: str, body: str) -> str:
    style = (
        "body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse;margin:0 0 1.5em}"
        "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#f0f0f0}"
        "td.correct{background:#d9f2d9}td.incorrect{background:#f8d7d7}td.ambiguous{background:#fff3cd}"
        "td.num{text-align:right}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def table3_html(table: pd.DataFrame, random: Collection[str] = ()) -> str:
    """Table 3 as a standalone HTML page (for the Snakemake report); see :func:`table3_markdown`."""
    body = [
        "<p>Green: a verb form of the context's number (correct); red: of the other number (incorrect); "
        "yellow: a form of both numbers.</p>"
    ]
    if table.empty:
        body.append("<p>No contexts selected.</p>")
    models = list(dict.fromkeys(table["model"]))
    for _, block in table.groupby("selection", sort=True):
        first = block.iloc[0]
        body.append(
            f"<h2>{html.escape(str(first['context']))} <small>({html.escape(str(first['label']))}; "
            f"{html.escape(str(first['group']))})</small></h2>"
        )
        by = {(r.model, r.rank): r for r in block.itertuples(index=False)}
        rows = [
            "<tr><th>rank</th>"
            + "".join(f"<th>{html.escape(display_name(m, m in random))}</th>" for m in models)
            + "</tr>"
        ]
        for k in sorted(block["rank"].unique()):
            cells = []
            for m in models:
                r = by.get((m, k))
                if r is None:
                    cells.append("<td></td>")
                else:
                    cls = f' class="{r.mark}"' if r.mark else ""
                    cells.append(f"<td{cls}>{html.escape(_cell(r.token, r.prob, r.mark))}</td>")
            rows.append(f'<tr><td class="num">{k}</td>' + "".join(cells) + "</tr>")
        body.append("<table>" + "".join(rows) + "</table>")
        inputs = block.drop_duplicates("model")[["model", "model_input"]]
        body.append(
            "<ul>"
            + "".join(
                f"<li>{html.escape(r.model)} sees: <code>{html.escape(r.model_input)}</code></li>"
                for r in inputs.itertuples(index=False)
            )
            + "</ul>"
        )
    return _html_page("Table 3: top tokens in selected contexts", "\n".join(body))


WORST_COLUMNS = (
    "model",
    "rank",
    "lemma",
    "sing",
    "plur",
    "n_contexts",
    "n_wrong",
    "accuracy",
    "mean_prob",
    "mean_log10_prob",
)


def worst_lemmas(stats: pd.DataFrame, n: int, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Per model, the ``n`` lemmas most often conjugated wrongly (most EW failures; ties in
    alphabetical order of the lemma)."""
    models = list(models) if models is not None else list(dict.fromkeys(stats["model"]))
    parts = []
    for m in models:
        s = stats[stats["model"] == m]
        s = s.sort_values(["n_wrong", "lemma"], ascending=[False, True], kind="stable").head(n)
        s = s.assign(rank=np.arange(1, len(s) + 1))
        parts.append(s)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(WORST_COLUMNS))
    return out[list(WORST_COLUMNS)].reset_index(drop=True)


def worst_lemmas_markdown(worst: pd.DataFrame, random: Collection[str] = ()) -> str:
    """The worst lemmas per model; a ``random`` (randomly initialised) model says so in its heading."""
    lines = ["# Lemmas most often conjugated wrongly", ""]
    for m, block in worst.groupby("model", sort=False):
        lines += [
            f"## {display_name(str(m), m in random)}",
            "",
            "| rank | lemma | singular | plural | wrong / contexts | accuracy | mean P | mean log10 P |",
            "|---:|---|---|---|---:|---:|---:|---:|",
        ]
        for r in block.itertuples(index=False):
            lines.append(
                f"| {r.rank} | {_md_escape(r.lemma)} | {_md_escape(r.sing)} | {_md_escape(r.plur)} | "
                f"{r.n_wrong} / {r.n_contexts} | {r.accuracy:.3f} | {r.mean_prob:.3g} | {r.mean_log10_prob:.2f} |"
            )
        lines.append("")
    return "\n".join(lines)


def worst_lemmas_html(worst: pd.DataFrame, random: Collection[str] = ()) -> str:
    """:func:`worst_lemmas_markdown` as an HTML page."""
    body = [
        "<p>Per model, the eligible lemmas whose correct form was least often more probable than the "
        "incorrect one (EW failures), pooled over all contexts, with the lemma's mean in-context "
        "probability P(singular) + P(plural).</p>"
    ]
    for m, block in worst.groupby("model", sort=False):
        rows = [
            "<tr><th>rank</th><th>lemma</th><th>singular</th><th>plural</th><th>wrong / contexts</th>"
            "<th>accuracy</th><th>mean P</th><th>mean log10 P</th></tr>"
        ]
        for r in block.itertuples(index=False):
            rows.append(
                f'<tr><td class="num">{r.rank}</td><td>{html.escape(str(r.lemma))}</td>'
                f"<td>{html.escape(str(r.sing))}</td><td>{html.escape(str(r.plur))}</td>"
                f'<td class="num">{r.n_wrong} / {r.n_contexts}</td><td class="num">{r.accuracy:.3f}</td>'
                f'<td class="num">{r.mean_prob:.3g}</td><td class="num">{r.mean_log10_prob:.2f}</td></tr>'
            )
        body.append(f"<h2>{html.escape(display_name(str(m), m in random))}</h2><table>" + "".join(rows) + "</table>")
    return _html_page("Lemmas most often conjugated wrongly", "\n".join(body))
