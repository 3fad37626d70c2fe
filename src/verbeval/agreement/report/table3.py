"""The paper's Table 3, from the shards: the most probable tokens of each model in selected contexts,
each marked as a correct or incorrect verb form for the context's number.

No model is run: shards hold each context's most probable tokens. Only a tokenizer is loaded (to
decode the top-k token ids, find the ids of a row's own verb and render a context as the model
sees it). :func:`select_rows` picks the contexts, :func:`load_model_topk` reads what each model
contributes, :func:`topk_table` makes the long table and :func:`table3_markdown` and
:func:`table3_html` render it.
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
import pyarrow.parquet as pq

from verbeval.agreement.engine.shards import build_contexts, fixed_list_values, read_shard_meta
from verbeval.core.errors import VerbevalError
from verbeval.core.html_report import cell, html_page, row
from verbeval.core.html_report import table as html_table
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.provenance import display_name
from verbeval.core.tables import md_escape


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().lower()


def table3_groups(
    groups: Sequence[str],
    contexts: Sequence[Mapping[str, str]] | None = None,
    default_groups: Sequence[str] | None = None,
) -> list[str]:
    """The groups Table 3 draws its contexts from (and whose shards it reads): those of the explicit
    ``contexts``; otherwise the ``default_groups`` (None: the schema's, ``topk-table
    --default-groups``) that were run (``groups``), or, when none was, the first group that was."""
    run = list(groups)
    if contexts:
        return list(dict.fromkeys(str(c.get("group")) for c in contexts))
    if default_groups is None:
        from verbeval.agreement.steps import TOPK_TABLE

        default_groups = TOPK_TABLE.default("default_groups")
    return [g for g in default_groups if g in run] or run[:1]


def select_rows(
    templates: pd.DataFrame,
    groups: Sequence[str],
    contexts: Sequence[Mapping[str, str]] | None = None,
    default_groups: Sequence[str] | None = None,
    per_label: int | None = None,
) -> pd.DataFrame:
    """The template rows whose contexts go into Table 3.

    ``contexts``: explicit ``{group, left[, right]}`` entries; each selects the first row of
    ``group`` (in template order) whose left (and right, when given) context matches, ignoring case
    and repeated whitespace. Without explicit entries: the first ``per_label`` singular and plural
    rows of each of ``default_groups`` (None: the schema's, as ``per_label``: ``topk-table
    --default-groups``, ``--per-label``) that was run (``groups``); when none of them was run, of
    the first group that was.

    Returns the rows (all template columns) plus ``row`` (position within the group's rows, as in
    the shards) and ``selection`` (0, 1, ... in table order).
    """
    run = list(groups)
    picked: list[pd.DataFrame] = []
    if per_label is None:
        from verbeval.agreement.steps import TOPK_TABLE

        per_label = int(TOPK_TABLE.default("per_label"))

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
            (
                t["context_id"].to_numpy(),
                fixed_list_values(t["topk_ids"], k, np.int32),
                fixed_list_values(t["topk_probs"], k, np.float32),
            )
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
    source: ModelSource,
    shards: Sequence[str | Path],
    lemmas: str | Path,
    tokenizers: Callable[[ModelSource], Any] | None = None,
) -> ModelTopK:
    """Table 3's view of one model: the top-k tokens of its ``shards`` (:func:`read_topk`), and from its
    tokenizer (only the tokenizer is loaded) how to decode token ids, find the ids of verb forms and
    render a context as the model sees it; ``lemmas``: its lemmas.parquet. ``tokenizers``: how the
    tokenizer is loaded (a :class:`verbeval.core.fasttok.TextTokenizers` shared by the models of one
    table loads each tokenizer once); default :func:`verbeval.core.fasttok.load_text_tokenizer`."""
    from verbeval.agreement.data.eligibility import single_token_ids
    from verbeval.agreement.data.templates import render_context
    from verbeval.core.fasttok import load_text_tokenizer

    meta, topk = read_topk(shards)
    tok = (tokenizers or load_text_tokenizer)(source)  # no torch, no transformers where it is safe
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
        lines.append("| rank | " + " | ".join(md_escape(display_name(m, m in random)) for m in models) + " |")
        lines.append("|---:|" + "---|" * len(models))
        ranks = sorted(block["rank"].unique())
        by = {(r.model, r.rank): r for r in block.itertuples(index=False)}
        for k in ranks:
            cells = [
                md_escape(_cell(by[(m, k)].token, by[(m, k)].prob, by[(m, k)].mark)) if (m, k) in by else ""
                for m in models
            ]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        inputs = block.drop_duplicates("model")[["model", "model_input"]]
        lines += (
            [""] + [f"- {md_escape(r.model)} sees: `{r.model_input}`" for r in inputs.itertuples(index=False)] + [""]
        )
    return "\n".join(lines)


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
        rows = [row([cell("rank", head=True)] + [cell(display_name(m, m in random), head=True) for m in models])]
        for k in sorted(block["rank"].unique()):
            cells = [cell(k, num=True)]
            for m in models:
                r = by.get((m, k))
                cells.append(cell() if r is None else cell(_cell(r.token, r.prob, r.mark), cls=r.mark or None))
            rows.append(row(cells))
        body.append(html_table(rows))
        inputs = block.drop_duplicates("model")[["model", "model_input"]]
        body.append(
            "<ul>"
            + "".join(
                f"<li>{html.escape(r.model)} sees: <code>{html.escape(r.model_input)}</code></li>"
                for r in inputs.itertuples(index=False)
            )
            + "</ul>"
        )
    return html_page("Table 3: top tokens in selected contexts", "\n".join(body))
