"""The table sub-commands: ``table`` (Table 2) and ``topk-table`` (Table 3)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from verbeval.agreement.cli.common import expand_shards
from verbeval.agreement.steps import TABLE, TOPK_TABLE
from verbeval.core.cliutil import Add, named_model_source_options, split_pair
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import Option, add_options

log = logging.getLogger("verbeval")


def cmd_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.data.errata import flagged_errata, load_errata
    from verbeval.agreement.data.groups import load_groups
    from verbeval.agreement.report.tables import (
        errata_notes,
        table2,
        to_html,
        to_latex,
        to_markdown,
        to_metrics,
        tse_wilson,
    )
    from verbeval.core.io import write_csv, write_json, write_text

    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    groups = load_groups(a.groups_file)
    present = set(summary["group"])
    groups = [g for g in groups if g["id"] in present]
    models = a.models.split(",")
    if a.table_models is not None:
        from verbeval.core.model_entries import select_models

        try:
            models = select_models(models, [x for x in a.table_models.split(",") if x])
        except VerbevalError as exc:
            raise VerbevalError(f"--table-models: {exc}") from None
    t = table2(summary, groups, models)
    notes: list[str] = []
    if a.errata:
        templates = pd.read_parquet(a.templates, columns=["source", "line"]) if a.templates else None
        notes = errata_notes(flagged_errata(load_errata(a.errata)), templates, groups, a.drop_flagged_errata)
    write_csv(t, a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, models, notes=notes))
    write_text(a.tex, to_latex(t, models, notes=notes))
    if a.html:
        write_text(a.html, to_html(t, models, notes=notes, confidence=a.confidence, wilson=tse_wilson(summary)))
    write_json(a.metrics, to_metrics(t, models))
    write_csv(
        summary.sort_values(["model", "group", "metric", "side", "cutoff"], kind="stable"),
        a.all_csv,
        float_format="%.10g",
    )
    log.info("Table 2 (%d groups x %d models) -> %s, %s, %s", len(t), len(models), a.csv, a.md, a.tex)


def register_table(add: Add) -> None:
    s = add(
        "table",
        cmd_table,
        "Table 2 (CSV, Markdown, LaTeX) from per-group summaries",
        "EW and MW are read at top p = 1. Run by the rule table2.",
    )
    add_options(
        s,
        TABLE.file("--groups-file"),
        Option("--models", "comma-separated model names, in column order", required=True),
        Option(
            "--table-models",
            "comma-separated model names or shell-style patterns (e.g. '*@step143000'): Table 2 and "
            "--metrics show only the --models they match, in --models order; --all-csv keeps every "
            "model (default: all)",
            metavar="PATTERNS",
        ),
        TABLE.file("--summaries"),
        *TABLE.outputs,
        TABLE.file("--errata"),
        TABLE.file("--templates"),
        *TABLE.settings,
    )


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` arguments -> {name: value} (in order)."""
    out: dict[str, str] = {}
    for item in items:
        name, value = split_pair(item, option)
        out[name] = value
    return out


def cmd_topk_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.report.table3 import load_model_topk, select_rows, table3_html, table3_markdown, topk_table
    from verbeval.core.fasttok import TextTokenizers
    from verbeval.core.io import write_csv, write_text
    from verbeval.core.provenance import with_random_init

    sources = ModelSource.from_named_options(a)
    lemma_paths = _pairs(a.lemmas, "--lemmas")
    from verbeval.agreement.engine.shardstore import manifest_random_init

    shard_paths: dict[str, list[str]] = {}
    random: set[str] = set()
    for item in a.shards:
        name, path = split_pair(item, "--shards", "PATH")
        shard_paths.setdefault(name, []).extend(expand_shards([path]))
        if path.endswith(".json") and manifest_random_init(path):
            random.add(name)
    for name in sources:
        if name not in lemma_paths:
            raise VerbevalError(f"--lemmas: no lemmas file for model {name!r}")
    templates = pd.read_parquet(a.templates)
    run_groups = list(dict.fromkeys(templates["group"]))
    contexts = [{"group": g, "left": left, "right": None if right == "*" else right} for g, left, right in a.context]
    selected = select_rows(
        templates,
        run_groups,
        contexts or None,
        default_groups=a.default_groups.split(",") if a.default_groups else (),
        per_label=a.per_label,
    )
    tokenizers = TextTokenizers()  # one load per tokenizer (a sweep's revisions share theirs)
    models = [
        load_model_topk(name, source, shard_paths.get(name, []), lemma_paths[name], tokenizers)
        for name, source in sources.items()
    ]
    table = topk_table(selected, templates, models)
    write_csv(with_random_init(table, {name: name in random for name in sources}), a.csv, float_format="%.6g")
    write_text(a.md, table3_markdown(table, random))
    if a.html:
        write_text(a.html, table3_html(table, random))
    log.info("Table 3: %d contexts x %d models -> %s, %s", len(selected), len(models), a.csv, a.md)


def register_topk_table(add: Add) -> None:
    s = add(
        "topk-table",
        cmd_topk_table,
        "Table 3: top-k tokens of selected contexts, correct/incorrect verb forms marked",
        "Reads the top-k tokens stored in the shards; only tokenizers are loaded, to decode token ids. "
        "Run by the rule table3.",
    )
    add_options(s, TOPK_TABLE.file("--templates"))
    named_model_source_options(s)
    add_options(
        s,
        *TOPK_TABLE.inputs[1:],
        Option(
            "--context",
            "a context to show (RIGHT * = any); repeatable. Default: --default-groups",
            nargs=3,
            action="append",
            default=[],
            metavar=("GROUP", "LEFT", "RIGHT"),
        ),
        *TOPK_TABLE.settings,
        *TOPK_TABLE.outputs,
    )
