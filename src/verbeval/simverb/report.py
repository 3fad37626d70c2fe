"""The SimVerb-3500 results rendered: the per-model table in Markdown and LaTeX (coverage, rho and CI
per representation and split, then the breakdowns by tokenisation, relation and rating range), the
per-layer figure and the human-vs-model scatter, with the paper's reference points.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from verbeval.core.tables import latex_row, latex_tabular, markdown_table, number, tex_escape
from verbeval.simverb.data import RELATIONS
from verbeval.simverb.statistics import spearman

#: the paper's reference points (Gerz et al. 2016)
IAA_PAIRWISE = 0.84
IAA_MEAN = 0.86
BEST_SYSTEM = 0.628


#: rho, its CI and the coverage: three decimals
_number = number(3)


def _rho_ci(r: Any) -> str:
    return f"{_number(r.rho)} [{_number(r.ci_low)}, {_number(r.ci_high)}]"


def _main_cells(table: pd.DataFrame, rep: str, main: list[str]) -> list[str]:
    """Covered pairs, coverage and rho [CI] of one representation on each main subset."""
    cells = []
    for s in main:
        r = table[(table["representation"] == rep) & (table["subset"] == s)].iloc[0]
        cells += [str(r.n_covered), _number(r.coverage), _rho_ci(r)]
    return cells


def _rhos(table: pd.DataFrame, rep: str, subsets: list[str]) -> list[str]:
    """Rho of one representation on each of ``subsets``."""
    t = table[table["representation"] == rep].set_index("subset")
    return [_number(t.loc[s, "rho"]) for s in subsets]


def _main_subsets(table: pd.DataFrame) -> list[str]:
    return [s for s in ("full", "dev", "test") if s in set(table["subset"])]


def coverage_summary(verbs: pd.DataFrame) -> dict[str, int]:
    return {
        "verbs": len(verbs),
        "single_token": int((verbs["n_tokens"] == 1).sum()),
        "multi_token": int((verbs["n_tokens"] > 1).sum()),
        "unknown": int(verbs["unknown"].sum()),
        "covered": int(verbs["covered"].sum()),
    }


def to_markdown(table: pd.DataFrame, model: str, verbs: pd.DataFrame | None = None) -> str:
    """The per-model table: rho [CI] and coverage per representation on full/dev/test, then the
    relation and rating-range breakdowns (rho per representation)."""
    reps = list(dict.fromkeys(table["representation"]))
    main = _main_subsets(table)
    lines = [f"SimVerb-3500, {model}: Spearman's rho (cosine vs human rating) [bootstrap CI]", ""]
    if verbs is not None:
        c = coverage_summary(verbs)
        lines += [
            f"Verbs: {c['verbs']} ({c['single_token']} single-token, {c['multi_token']} multi-token, "
            f"{c['unknown']} with an unknown sub-token); covered: {c['covered']}.",
            "",
        ]
    head = ["Representation"] + [f"{s}: {what}" for s in main for what in ("pairs", "coverage", "rho [CI]")]
    lines += markdown_table(head, [[rep, *_main_cells(table, rep, main)] for rep in reps], "l" + "rrr" * len(main))
    if main == ["full"]:
        lines += [
            "",
            "The official dev/test split files were not available (manifest entries simverb_500_dev / "
            "simverb_3000_test); full set only.",
        ]
    lines += [
        "",
        f"Reference (Gerz et al. 2016): inter-annotator agreement {IAA_PAIRWISE} (pairwise) / "
        f"{IAA_MEAN} (mean); best system in the paper rho = {BEST_SYSTEM} (full set).",
        "",
    ]
    for prefix, title in (
        ("tokens:", "By tokenisation (single: both verbs one sub-token)"),
        ("relation:", "By relation"),
        ("range:", "By human rating range"),
    ):
        subs = [s for s in dict.fromkeys(table["subset"]) if s.startswith(prefix)]
        if not subs:
            continue
        first = table[table["representation"] == reps[0]].set_index("subset")
        head = ["Representation"] + [f"{s.removeprefix(prefix)} (n={first.loc[s, 'n_covered']})" for s in subs]
        lines += [
            f"{title} (rho; covered pairs in the header)",
            "",
            *markdown_table(head, [[rep, *_rhos(table, rep, subs)] for rep in reps], "l" + "r" * len(subs)),
            "",
        ]
    return "\n".join(lines)


def to_latex(table: pd.DataFrame, model: str) -> str:
    """The main table (coverage, rho and CI per representation and split) and the relation
    breakdown, as booktabs tabulars."""
    reps = list(dict.fromkeys(table["representation"]))
    main = _main_subsets(table)
    head = [
        latex_row(["Representation"] + [rf"\multicolumn{{3}}{{c}}{{{s}}}" for s in main]),
        latex_row([""] + ["$n$ & cov. & $\\rho$ [CI]"] * len(main)),
    ]
    rows = [latex_row([tex_escape(rep), *_main_cells(table, rep, main)]) for rep in reps]
    subs = [s for s in dict.fromkeys(table["subset"]) if s.startswith(("relation:", "range:"))]
    by_subset = [latex_row(["Representation"] + [tex_escape(s.split(":", 1)[1]) for s in subs])]
    sub_rows = [latex_row([tex_escape(rep), *_rhos(table, rep, subs)]) for rep in reps]
    out = [
        rf"% SimVerb-3500, {tex_escape(model)}: Spearman's rho [bootstrap CI]",
        *latex_tabular("l" + "rrl" * len(main), head, rows),
        "",
        *latex_tabular("l" + "r" * len(subs), by_subset, sub_rows),
    ]
    return "\n".join(out) + "\n"


#: at most this many layer ticks on the x axis of :func:`plot_layers` (every layer up to this many)
MAX_LAYER_TICKS = 13


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
    ticks = layers["layer"].to_numpy()
    if len(ticks) <= MAX_LAYER_TICKS:
        ax.set_xticks(ticks)
    else:  # e.g. 31 or 49 layers: every label would run into the next; integer ticks at a readable spacing
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=MAX_LAYER_TICKS, integer=True))
    ax.set_title(f"SimVerb-3500: {model}")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    return fig


def plot_scatter(pairs: pd.DataFrame, sims: pd.DataFrame, representation: str, model: str) -> Any:
    """Model cosine against human rating for one representation, coloured by relation."""
    import matplotlib.pyplot as plt

    from verbeval.core.plots import apply_style, palette

    apply_style()
    s = sims[(sims["representation"] == representation) & sims["covered"]].merge(
        pairs[["pair", "score", "relation"]], on="pair"
    )
    colours = palette(list(RELATIONS))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for rel in RELATIONS:
        r = s[s["relation"] == rel]
        ax.scatter(r["score"], r["cosine"], s=6, alpha=0.5, color=colours[rel], label=f"{rel} (n={len(r)})")
    rho = spearman(s["cosine"].to_numpy(float), s["score"].to_numpy(float))
    ax.set_xlabel("human similarity rating (0-10)")
    ax.set_ylabel(f"cosine ({representation})")
    ax.set_xlim(-0.2, 10.2)
    ax.set_title(f"SimVerb-3500: {model}, {representation} (rho = {_number(rho)}, n = {len(s)})")
    ax.legend(title="relation", loc="center left", bbox_to_anchor=(1.02, 0.5), markerscale=2, fontsize="small")
    return fig
