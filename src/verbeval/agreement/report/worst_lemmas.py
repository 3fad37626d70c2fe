"""The worst lemmas of each model (:func:`verbeval.agreement.scores.lemma_diagnostics.worst_lemmas`) as a
Markdown table and an HTML page of the report."""

from __future__ import annotations

import html
from collections.abc import Collection

import pandas as pd

from verbeval.core.html_report import cell, html_page, row
from verbeval.core.html_report import table as html_table
from verbeval.core.provenance import display_name
from verbeval.core.tables import md_escape


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
                f"| {r.rank} | {md_escape(r.lemma)} | {md_escape(r.sing)} | {md_escape(r.plur)} | "
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
        head = ("rank", "lemma", "singular", "plural", "wrong / contexts", "accuracy", "mean P", "mean log10 P")
        rows = [row(cell(h, head=True) for h in head)]
        for r in block.itertuples(index=False):
            rows.append(
                row(
                    [
                        cell(r.rank, num=True),
                        cell(r.lemma),
                        cell(r.sing),
                        cell(r.plur),
                        cell(f"{r.n_wrong} / {r.n_contexts}", num=True),
                        cell(f"{r.accuracy:.3f}", num=True),
                        cell(f"{r.mean_prob:.3g}", num=True),
                        cell(f"{r.mean_log10_prob:.2f}", num=True),
                    ]
                )
            )
        body.append(f"<h2>{html.escape(display_name(str(m), m in random))}</h2>" + html_table(rows))
    return html_page("Lemmas most often conjugated wrongly", "\n".join(body))
