"""The headline metrics, one entry each: TSE, EW and MW, in the order every output lists them.

Each :class:`Metric` says what the rest of verbeval needs to know about a metric, so that no other
module spells the list of headline metrics or their labels:

* ``name``: the ``metric`` value of its summary rows (``summary_all.csv``), the key of its number in
  ``metrics.json`` and the stem of its Table 2 columns (:attr:`Metric.columns`: value and CI).
* ``label``: how tables, figures and legends print it.
* how it is computed: ``compute``, the dotted name of the function that scores it
  (:mod:`verbeval.agreement.scores.metrics`), and ``score_column``, its column in the per-row
  (``tse.parquet``) or per-context (``scores.parquet``) scores of :mod:`verbeval.agreement.scores.aggregate`.
  ``unit``: what its group mean averages, template rows (``row``) or contexts (``context``).
* how it is plotted: ``cutoff_curves`` (scored at every top-p / bottom-p cutoff, drawn against it in
  Figures 1-2, read at top p = 1 for Table 2; :attr:`Metric.score_column` is then the attribute of
  :class:`~verbeval.agreement.scores.metrics.SideScores` and the stem of the per-context columns
  ``<name>_<side>@<cutoff>``), ``axis_label`` and ``chance`` (the dashed line of its panels).
* ``counts``: the count columns Table 2 writes after its CI, each ``(column, summary field)``.
* ``lexicon_modes``: the lexicon-modes study (:mod:`verbeval.agreement.lexicon_modes.modes`)
  computes it in each mode as well.

:data:`HEADLINE` is the registry; its order is the column order of Table 2, ``metrics.json``, the
model comparison, the DVC views and the acquisition curves. Adding a metric: one entry here, its
compute function, its tests and its card in ``docs/metrics.md`` (``docs/architecture.md``,
"Add an agreement metric").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a Table 2 value column's suffix and the summary field it copies, in column order
VALUE_FIELDS: tuple[tuple[str, str], ...] = (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"))


@dataclass(frozen=True)
class Metric:
    """One headline metric (the fields: the module docstring)."""

    name: str
    label: str
    unit: str
    compute: str
    score_column: str
    cutoff_curves: bool
    counts: tuple[tuple[str, str], ...] = ()
    chance: float | None = 0.5
    axis_label: str = ""
    lexicon_modes: bool = False

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """``(column, summary field)`` of its value and bootstrap CI in Table 2 (and
        :attr:`verbeval.agreement.api.evaluation.AgreementResult.per_group`): ``<name>``,
        ``<name>_ci_low``, ``<name>_ci_high``."""
        return tuple((self.name + suffix, field) for suffix, field in VALUE_FIELDS)

    @property
    def headline_label(self) -> str:
        """Its label as Table 2 reads it: ``EW (top p = 1)`` for a metric with cutoff curves."""
        return self.label + (" (top p = 1)" if self.cutoff_curves else "")

    @property
    def y_label(self) -> str:
        """Its axis label in the cutoff figures."""
        return self.axis_label or self.label


#: the registry: one entry per headline metric, in output order
HEADLINE: tuple[Metric, ...] = (
    Metric(
        name="tse",
        label="TSE",
        unit="row",
        compute="verbeval.agreement.scores.metrics.tse_scores",
        score_column="tse",
        cutoff_curves=False,
        counts=(("n_rows", "n"), ("n_rows_total", "n_total")),  # rows with single-token forms / all rows
        lexicon_modes=True,
    ),
    Metric(
        name="ew",
        label="EW",
        unit="context",
        compute="verbeval.agreement.scores.metrics.side_scores",
        score_column="ew",
        cutoff_curves=True,
        counts=(("n_contexts", "n_total"),),
        lexicon_modes=True,
    ),
    Metric(
        name="mw",
        label="MW",
        unit="context",
        compute="verbeval.agreement.scores.metrics.side_scores",
        score_column="mw",
        cutoff_curves=True,
        lexicon_modes=True,
    ),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in HEADLINE}
#: the headline metrics' names, in output order
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: name -> label, in output order
LABELS: dict[str, str] = {m.name: m.label for m in HEADLINE}
#: the headline metrics scored at every cutoff (Figures 1-2), in output order
CUTOFF_METRICS: tuple[str, ...] = tuple(m.name for m in HEADLINE if m.cutoff_curves)
#: the headline metrics the lexicon-modes study computes in each mode
LEXICON_MODE_METRICS: tuple[str, ...] = tuple(m.name for m in HEADLINE if m.lexicon_modes)


def metric(name: str) -> Metric:
    """The registry entry of ``name`` (KeyError naming the known metrics otherwise)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is no headline metric (known: {', '.join(NAMES)})") from None


def label_of(name: str) -> str:
    """The label of a headline metric; any other name upper-cased."""
    return LABELS.get(name, name.upper())


def label_list(names: Iterable[str] = NAMES, conjunction: str = "and") -> str:
    """The labels of ``names`` as prose: ``TSE, EW and MW``, ``EW and MW``, ``TSE, EW or MW``."""
    labels = [label_of(n) for n in names]
    if len(labels) < 2:
        return "".join(labels)
    return f"{', '.join(labels[:-1])} {conjunction} {labels[-1]}"


def headline_rows(summary: Any, *, rtol: float = 1e-05, atol: float = 1e-08) -> Any:
    """Boolean mask of the rows of a summary table (``metric``, ``side``, ``cutoff`` columns) that
    Table 2 reads: every row of a metric without cutoff curves, and the top p = 1 rows of those with
    (``cutoff`` compared to 1 with ``np.isclose``'s ``rtol`` and ``atol``)."""
    plain = [m.name for m in HEADLINE if not m.cutoff_curves]
    at_one = np.isclose(summary["cutoff"].astype(float), 1.0, rtol=rtol, atol=atol)
    return summary["metric"].isin(plain) | (
        summary["metric"].isin(list(CUTOFF_METRICS)) & (summary["side"] == "top") & at_one
    )
