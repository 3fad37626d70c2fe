"""Verb veridicality (Ross & Pavlick 2019): NLI models against human judgements of entailment.

Every item is a sentence with a clause-embedding verb, its negation and the embedded complement.
A model is scored on (sentence, complement) in the *positive* environment and on (negated
sentence, complement) in the *negative* one; its score is P(entailment) - P(contradiction). The
verb's signature (e.g. ``+/-``: first symbol positive environment, second negative) predicts the
label: ``+`` entailment, ``-`` contradiction, ``o`` neutral.

Real models (any Hugging Face NLI classifier, labels mapped by *name*) and the pseudo-model
``ross-pavlick-2019-bert`` (the BERT probabilities released with the dataset) produce the same
long predictions table, aggregated by the same :func:`signature_table`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.tables import format_rows, latex_row, latex_tabular, markdown_table, number, tex_escape

PSEUDO_MODEL = "ross-pavlick-2019-bert"
LABELS = ("entailment", "neutral", "contradiction")
ENVIRONMENTS = ("positive", "negative")
SYMBOL_LABELS = {"+": "entailment", "-": "contradiction", "o": "neutral"}
PREDICTION_COLUMNS = [
    "index",
    "verb",
    "signature",
    "environment",
    "p_entailment",
    "p_neutral",
    "p_contradiction",
    "score",
    "human_mean",
]
TABLE_COLUMNS = ["signature", "environment", "n", "accuracy", "pearson", "spearman"]

_TEXT_COLUMNS = [
    "index",
    "task",
    "verb",
    "sentence",
    "neg_sentence",
    "complement",
    "turker_pos_ratings",
    "turker_neg_ratings",
]
_PROB_COLUMNS = [
    f"bert_{env}_{lab}_prob" for env in ("pos", "neg") for lab in ("entailment", "contradiction", "neutral")
]
REQUIRED_COLUMNS = [*_TEXT_COLUMNS, *_PROB_COLUMNS, "signature"]
_SIGNATURE = re.compile(r"^[+\-o]/[+\-o]$")
# label name variants -> canonical name
_LABEL_ALIASES = {
    "entailment": "entailment",
    "entail": "entailment",
    "entailed": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "contradict": "contradiction",
    "contradictory": "contradiction",
    "not_entailment": "contradiction",
}


# --------------------------------------------------------------------------- dataset


def parse_signature(signature: str) -> dict[str, str]:
    """``'+/-'`` -> {'positive': 'entailment', 'negative': 'contradiction'}."""
    s = signature.strip().replace("\u2212", "-")
    if not _SIGNATURE.match(s):
        raise VerbevalError(f"bad signature {signature!r}: expected X/Y with X, Y in +, -, o")
    return {"positive": SYMBOL_LABELS[s[0]], "negative": SYMBOL_LABELS[s[2]]}


def _ratings(text: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if not values or any(not -2 <= v <= 2 for v in values):
        raise ValueError(f"expected comma-separated ratings in [-2, 2], got {text!r}")
    return values


def read_dataset(path: str | Path) -> pd.DataFrame:
    """The released TSV, validated (errors name ``file:line``); adds ``human_pos_mean`` and
    ``human_neg_mean`` (mean turker rating per environment) and normalises the signature."""
    path = Path(path)
    try:
        df = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read as TSV: {exc}") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}", line=1)
    if df.empty:
        raise InputError(path, "no rows")
    out = df[REQUIRED_COLUMNS].copy()
    pos_mean, neg_mean, probs = [], [], {c: [] for c in _PROB_COLUMNS}
    for i, row in enumerate(df.itertuples(index=False)):
        line = i + 2
        r = row._asdict()
        try:
            int(r["index"])
            if not r["verb"].strip() or not r["sentence"].strip() or not r["complement"].strip():
                raise ValueError("empty verb, sentence or complement")
            sig = r["signature"].strip().replace("\u2212", "-")
            parse_signature(sig)
            out.iat[i, REQUIRED_COLUMNS.index("signature")] = sig
            pos_mean.append(float(np.mean(_ratings(r["turker_pos_ratings"]))))
            neg_mean.append(float(np.mean(_ratings(r["turker_neg_ratings"]))))
            for c in _PROB_COLUMNS:
                p = float(r[c])
                if not 0 <= p <= 1:
                    raise ValueError(f"{c} = {p} is not a probability")
                probs[c].append(p)
        except (ValueError, VerbevalError) as exc:
            raise InputError(path, str(exc), line=line) from None
    out["index"] = out["index"].astype(int)
    if out["index"].duplicated().any():
        dup = int(out["index"][out["index"].duplicated()].iloc[0])
        raise InputError(path, f"duplicate index {dup}", line=int(np.flatnonzero(out["index"] == dup)[1]) + 2)
    for c in _PROB_COLUMNS:
        out[c] = probs[c]
    out["human_pos_mean"] = pos_mean
    out["human_neg_mean"] = neg_mean
    return out


def _long_frame(data: pd.DataFrame, probs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per item and environment from per-environment probability frames."""
    parts = []
    for env, human in (("positive", "human_pos_mean"), ("negative", "human_neg_mean")):
        p = probs[env].reset_index(drop=True)
        part = pd.DataFrame(
            {
                "index": data["index"].to_numpy(),
                "verb": data["verb"].to_numpy(),
                "signature": data["signature"].to_numpy(),
                "environment": env,
                "p_entailment": p["p_entailment"].to_numpy(dtype=float),
                "p_neutral": p["p_neutral"].to_numpy(dtype=float),
                "p_contradiction": p["p_contradiction"].to_numpy(dtype=float),
            }
        )
        part["score"] = part["p_entailment"] - part["p_contradiction"]
        part["human_mean"] = data[human].to_numpy(dtype=float)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)[PREDICTION_COLUMNS]


def pseudo_model_predictions(data: pd.DataFrame) -> pd.DataFrame:
    """The predictions table of the BERT model released with the dataset (no model is run)."""
    probs = {
        env: pd.DataFrame({f"p_{lab}": data[f"bert_{short}_{lab}_prob"] for lab in LABELS})
        for env, short in (("positive", "pos"), ("negative", "neg"))
    }
    return _long_frame(data, probs)


# --------------------------------------------------------------------------- real NLI models


def label_index(config: Any) -> dict[str, int]:
    """{'entailment': i, 'neutral': j, 'contradiction': k} from ``config.id2label``, by label name
    (case-insensitive); positional names such as ``LABEL_0`` are refused."""
    id2label = getattr(config, "id2label", None) or {}
    found: dict[str, int] = {}
    for idx, name in id2label.items():
        key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
        if re.fullmatch(r"label_\d+", key):
            raise VerbevalError(
                f"model config id2label {dict(id2label)} has positional label names ({name!r}); the NLI labels "
                "must be named (entailment, neutral, contradiction) - refusing to guess their order"
            )
        canon = _LABEL_ALIASES.get(key)
        if canon is None:
            continue
        if canon in found:
            raise VerbevalError(f"model config id2label {dict(id2label)}: two labels map to {canon!r}")
        found[canon] = int(idx)
    missing = [lab for lab in LABELS if lab not in found]
    if missing:
        raise VerbevalError(
            f"model config id2label {dict(id2label)}: no label named {missing} "
            "(an NLI model fine-tuned on MNLI has entailment, neutral and contradiction)"
        )
    return found


def score_nli(
    model: Any,
    tokenizer: Any,
    premises: Sequence[str],
    hypotheses: Sequence[str],
    batch_size: int = 32,
    device: Any = "cpu",
) -> pd.DataFrame:
    """P(entailment), P(neutral), P(contradiction) per (premise, hypothesis) pair, batched. Non-finite
    probabilities (NaN or inf weights) raise :class:`VerbevalError` naming the model and the first pair."""
    import torch

    if len(premises) != len(hypotheses):
        raise VerbevalError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    idx = label_index(model.config)
    model.eval()
    rows: list[np.ndarray] = []
    with torch.inference_mode():
        for start in range(0, len(premises), batch_size):
            enc = tokenizer(
                list(premises[start : start + batch_size]),
                list(hypotheses[start : start + batch_size]),
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(device)
            logits = model(**enc).logits.float()
            rows.append(torch.softmax(logits, dim=-1).cpu().numpy())
    probs = np.concatenate(rows) if rows else np.zeros((0, model.config.num_labels))
    bad = ~np.isfinite(probs).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        name = getattr(model.config, "_name_or_path", "") or "the NLI model"
        raise VerbevalError(
            f"{name}: {int(bad.sum())} of {len(probs)} premise/hypothesis pairs have non-finite NLI "
            f"probabilities (the first: {premises[first]!r} / {hypotheses[first]!r}); its weights "
            "or inputs hold NaN or inf. Nothing was written"
        )
    return pd.DataFrame({f"p_{lab}": probs[:, idx[lab]] for lab in LABELS})


def load_nli(model_id: str, revision: str | None = None, device: str = "auto") -> tuple[Any, Any, Any]:
    """(model, tokenizer, device) of a Hugging Face NLI classifier, in eval mode; its labels are
    checked by name at once (:func:`label_index`)."""
    from transformers import AutoModelForSequenceClassification

    from verbeval.core.devices import resolve_device
    from verbeval.core.model_ids import ModelRef
    from verbeval.core.models import load_errors, load_failure, load_tokenizer

    ModelRef(model_id).check_local()
    dev = resolve_device(device)
    tok = load_tokenizer(model_id, revision)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(ModelRef(model_id).location, revision=revision)
    except load_errors() as exc:
        raise load_failure(model_id, exc, "NLI model") from None
    label_index(model.config)
    return model.eval().to(dev), tok, dev


def model_predictions(
    data: pd.DataFrame, model: Any, tokenizer: Any, batch_size: int = 32, device: Any = "cpu"
) -> pd.DataFrame:
    """The predictions table of a real NLI model on both environments."""
    hyp = data["complement"].tolist()
    probs = {
        "positive": score_nli(model, tokenizer, data["sentence"].tolist(), hyp, batch_size, device),
        "negative": score_nli(model, tokenizer, data["neg_sentence"].tolist(), hyp, batch_size, device),
    }
    return _long_frame(data, probs)


# --------------------------------------------------------------------------- aggregation


def expected_labels(predictions: pd.DataFrame) -> pd.Series:
    """The label each row's signature predicts in its environment."""
    return pd.Series(
        [parse_signature(s)[e] for s, e in zip(predictions["signature"], predictions["environment"])],
        index=predictions.index,
        dtype=object,
    )


def predicted_labels(predictions: pd.DataFrame) -> pd.Series:
    """The model's argmax label per row."""
    p = predictions[[f"p_{lab}" for lab in LABELS]].to_numpy(dtype=float)
    return pd.Series(np.asarray(LABELS, dtype=object)[p.argmax(axis=1)], index=predictions.index)


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    return float(stats.pearsonr(x, y)[0]), float(stats.spearmanr(x, y)[0])


def _row(signature: str, environment: str, part: pd.DataFrame, correct: pd.Series) -> dict[str, Any]:
    pearson, spearman = _correlations(part["score"].to_numpy(float), part["human_mean"].to_numpy(float))
    return {
        "signature": signature,
        "environment": environment,
        "n": len(part),
        "accuracy": float(correct.loc[part.index].mean()) if len(part) else float("nan"),
        "pearson": pearson,
        "spearman": spearman,
    }


def signature_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """n, accuracy (argmax vs the signature's label), Pearson and Spearman (score vs mean human
    rating) per signature and environment, then ``overall`` per environment."""
    missing = [c for c in PREDICTION_COLUMNS if c not in predictions.columns]
    if missing:
        raise VerbevalError(f"predictions table lacks column(s) {missing}")
    correct = expected_labels(predictions) == predicted_labels(predictions)
    rows = []
    for sig in sorted(predictions["signature"].unique()):
        for env in ENVIRONMENTS:
            part = predictions[(predictions["signature"] == sig) & (predictions["environment"] == env)]
            rows.append(_row(sig, env, part, correct))
    for env in ENVIRONMENTS:
        rows.append(_row("overall", env, predictions[predictions["environment"] == env], correct))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


#: the headings of :data:`TABLE_COLUMNS` in the Markdown file, and the number formats
_HEADER = ["Signature", "Environment", "n", "Accuracy", "Pearson", "Spearman"]
_FORMATS = dict.fromkeys(("accuracy", "pearson", "spearman"), number(3))


def _tex_signature(signature: str) -> str:
    """``+/o`` as ``$+/\\circ$`` (``overall`` as it is)."""
    return signature if signature == "overall" else "$" + signature.replace("o", r"\circ") + "$"


def to_markdown(table: pd.DataFrame, model: str) -> str:
    """The signature table (:func:`signature_table`) as a Markdown pipe table under a title line."""
    rows = format_rows(table[TABLE_COLUMNS], _FORMATS)
    return "\n".join([f"Verb veridicality, {model}", "", *markdown_table(_HEADER, rows, "llrrrr")]) + "\n"


def to_latex(table: pd.DataFrame, model: str) -> str:
    """The signature table as a booktabs tabular (signatures in math mode) under a comment line."""
    head = [latex_row([("$n$" if h == "n" else h) for h in _HEADER])]
    rows = format_rows(table[TABLE_COLUMNS], {**_FORMATS, "signature": _tex_signature})
    out = [rf"% Verb veridicality, {tex_escape(model)}", *latex_tabular("llrrrr", head, map(latex_row, rows))]
    return "\n".join(out) + "\n"


SCATTER_COLUMNS = ["index", "verb", "signature", "environment", "human_mean", "score"]


def scatter_data(predictions: pd.DataFrame) -> pd.DataFrame:
    """The points of Figure 1 (one per item and environment), sorted: the CSV behind the figure."""
    out = predictions[SCATTER_COLUMNS].copy()
    out["environment"] = pd.Categorical(out["environment"], ENVIRONMENTS, ordered=True)
    out = out.sort_values(["signature", "environment", "index"], kind="stable", ignore_index=True)
    out["environment"] = out["environment"].astype(str)
    return out


#: drawing only (never in the CSV): the half-widths of the uniform jitter added to x (mean human
#: rating, in steps of 1/3 for three raters: below half a step, so ratings stay apart) and y (the
#: model score, which saturates at -1 and 1), the seed, and the points' opacity and markers
SCATTER_JITTER = (0.06, 0.04)
SCATTER_SEED = 0
SCATTER_ALPHA = 0.4
SCATTER_MARKERS = {"positive": "o", "negative": "^"}


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser over uint64 (wraps around by design)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def scatter_jitter(
    points: pd.DataFrame, seed: int = SCATTER_SEED, widths: tuple[float, float] = SCATTER_JITTER
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic (dx, dy) offsets, uniform in ±``widths``, one per row of ``points``.

    Each offset is a hash of (``seed``, item ``index``, environment), so a point moves the same
    way whatever the row order, the other rows or the model (an item sits at the same x in every
    model's figure). Used only to draw the scatter."""
    env = points["environment"].map({e: i for i, e in enumerate(ENVIRONMENTS)}).to_numpy(np.int64)
    key = (
        points["index"].to_numpy(np.int64).astype(np.uint64) * np.uint64(4)
        + env.astype(np.uint64) * np.uint64(2)
        + np.uint64(seed) * np.uint64(0x2545F4914F6CDD1D)
    )
    with np.errstate(over="ignore"):
        u = [(_mix64(key + np.uint64(k)) >> np.uint64(11)).astype(np.float64) / float(1 << 53) for k in (0, 1)]
    return (2 * u[0] - 1) * widths[0], (2 * u[1] - 1) * widths[1]


def draw_order(points: pd.DataFrame) -> list[str]:
    """The environments of ``points`` in drawing order: the larger class first, so that the smaller
    one is drawn on top of it; equal classes in :data:`ENVIRONMENTS` order (negative on top)."""
    counts = points["environment"].value_counts()
    present = [e for e in ENVIRONMENTS if counts.get(e, 0) > 0]
    return sorted(present, key=lambda e: -int(counts[e]))  # stable: ties keep ENVIRONMENTS order


def plot_scatter(predictions: pd.DataFrame, model: str) -> Any:
    """Figure 1 of Ross & Pavlick (2019): mean human rating (x) against model score (y), one panel
    per signature, the positive and negative environments in two colours and markers.

    Points are drawn with :data:`SCATTER_ALPHA` and a small deterministic jitter
    (:func:`scatter_jitter`) against the overplotting at integer ratings and scores of ±1; in each
    panel the smaller environment is drawn on top (:func:`draw_order`)."""
    import matplotlib.pyplot as plt

    from verbeval.core.plots import apply_style, palette

    apply_style()
    sigs = sorted(predictions["signature"].unique())
    colours = palette(list(ENVIRONMENTS), kind="environment")
    ncols = min(4, len(sigs))
    nrows = -(-len(sigs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), sharex=True, sharey=True, squeeze=False)
    points = scatter_data(predictions)
    dx, dy = scatter_jitter(points)
    x, y = points["human_mean"].to_numpy(float) + dx, points["score"].to_numpy(float) + dy
    for ax, sig in zip(axes.flat, sigs):
        in_sig = (points["signature"] == sig).to_numpy()
        for rank, env in enumerate(draw_order(points[in_sig])):
            sel = in_sig & (points["environment"] == env).to_numpy()
            ax.scatter(
                x[sel],
                y[sel],
                s=10,
                alpha=SCATTER_ALPHA,
                color=colours[env],
                marker=SCATTER_MARKERS[env],
                linewidths=0,
                label=env,
                zorder=2 + rank,
            )
        ax.axhline(0, color="0.8", lw=0.6, zorder=0)
        ax.axvline(0, color="0.8", lw=0.6, zorder=0)
        ax.set_title(f"{sig}  (n={int(in_sig.sum()) // 2})")
        ax.set_xlim(-2.1, 2.1)
        ax.set_ylim(-1.08, 1.08)
    for ax in axes.flat[len(sigs) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("mean human rating")
    for ax in axes[:, 0]:
        ax.set_ylabel("P(E) − P(C)")
    handles = [
        plt.Line2D([], [], linestyle="", marker=SCATTER_MARKERS[e], color=colours[e], markersize=5)
        for e in ENVIRONMENTS
    ]
    fig.legend(handles, list(ENVIRONMENTS), title="environment", loc="upper right")
    fig.suptitle(
        f"Verb veridicality: {model} (points jittered by up to ±{SCATTER_JITTER[0]:g} in x, "
        f"±{SCATTER_JITTER[1]:g} in y)",
        fontsize="medium",
    )
    return fig
