"""``compare``: paired comparisons of a run's models from their aggregates (comparisons.csv,
first_gains.csv, the forest figure)."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.steps import COMPARE
from verbeval.core.cliutil import Add, split_pair
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import GROUPS, Option, add_options

log = logging.getLogger("verbeval")


def parse_pair(item: str) -> tuple[str, str, str]:
    """``KIND=A,B`` of ``--pair`` -> ``(kind, a, b)``."""
    from verbeval.agreement.report.comparisons import PAIR_KINDS

    kind, models = split_pair(item, "--pair", "A,B")
    a, sep, b = models.partition(",")
    if kind not in PAIR_KINDS or not sep or not a or not b or "," in b:
        raise VerbevalError(f"--pair {item!r}: expected KIND=A,B with KIND one of {', '.join(PAIR_KINDS)}")
    return kind, a, b


def cmd_compare(a: argparse.Namespace) -> None:
    from verbeval.agreement.report.comparisons import comparisons, first_gains, read_random_init
    from verbeval.agreement.report.forest_plots import forest_figure
    from verbeval.core.io import write_csv

    dirs = dict(split_pair(r, "--results", "DIR") for r in a.results)
    pairs = [parse_pair(p) for p in a.pair]
    unknown = sorted({m for _, x, y in pairs for m in (x, y)} - set(dirs))
    if unknown:
        raise VerbevalError(f"--pair names models without --results: {', '.join(unknown)}")
    templates = {}
    for item in a.templates:
        name, sep, path = item.partition("=")
        if sep and name in dirs:
            templates[name] = path
        else:  # a path (of every model's templates)
            templates.update(dict.fromkeys(dirs, item))
    named = {opt: dict(split_pair(x, f"--{opt}", "PATH") for x in getattr(a, opt)) for opt in ("shards", "lemmas")}
    for opt, paths in named.items():
        if set(paths) - set(dirs):
            raise VerbevalError(f"--{opt} names models without --results: {', '.join(sorted(set(paths) - set(dirs)))}")
    forms = {m: (named["shards"][m], named["lemmas"][m]) for m in named["shards"] if m in named["lemmas"]}
    groups = [g for g in a.groups.split(",") if g]
    random = [m for m in dirs if read_random_init(dirs[m], groups)]
    rows = comparisons(
        pairs,
        dirs,
        groups,
        resamples=a.resamples,
        seed=a.seed,
        confidence=a.confidence,
        random=random,
        templates=templates,
        cluster=a.cluster,
        forms=forms,
    )
    write_csv(rows, a.csv, float_format="%.10g")
    write_csv(first_gains(rows), a.first_gains, float_format="%.10g")
    forest_figure(rows, a.figure, random=random)
    log.info("%d pairs x %d groups -> %s", len(pairs), len(groups), a.csv)


def register_compare(add: Add) -> None:
    s = add(
        "compare",
        cmd_compare,
        "paired comparisons of models on the same rows and contexts: TSE by McNemar's exact test, EW and MW "
        "by a paired bootstrap, corrected across groups",
        "Reads each model's tse.parquet, scores.parquet and summary.csv (its random_init flag; verbeval aggregate), "
        "and under --cluster template_and_lemma its shards and lemmas.parquet. docs/metrics.md, "
        "'Paired comparisons'. Run by the rule comparisons.",
    )
    add_options(
        s,
        *COMPARE.inputs,
        GROUPS.but(help="comma-separated groups to compare"),
        Option(
            "--pair",
            "B compared with A (differences B - A); KIND: configured, against_first or consecutive; repeatable",
            action="append",
            default=[],
            metavar="KIND=A,B",
        ),
        *COMPARE.settings,
        *COMPARE.outputs,
    )
