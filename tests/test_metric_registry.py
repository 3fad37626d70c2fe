"""The metric registry (``verbeval.agreement.scores.registry``): a headline metric is one entry.

The registry is the only module of ``src/`` that lists the headline metrics (TSE, EW, MW) or their
labels; its order is today's column order; every entry names a compute function that exists and has
its card in docs/metrics.md; and a metric added to it (and nowhere else) reaches the summaries,
Table 2, the figures' data, the DVC views, the API and the acquisition curves.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import verbeval
from verbeval.agreement.scores import metrics as metrics_module
from verbeval.agreement.scores import registry
from verbeval.agreement.scores.registry import HEADLINE

PKG = Path(verbeval.__file__).resolve().parent
ROOT = PKG.parents[1]
REGISTRY = PKG / "agreement" / "scores" / "registry.py"
HEADLINE_NAMES = {"tse", "ew", "mw"}

#: the files a new headline metric touches (docs/architecture.md, "Add an agreement metric")
NEW_METRIC_FILES = (
    "src/verbeval/agreement/scores/registry.py",  # its entry
    "src/verbeval/agreement/scores/metrics.py",  # its compute function
    "tests/test_agreement.py",  # its hand-computed cases
    "docs/metrics.md",  # its card
)
#: files the recipe names for a metric only when it applies (a row metric, the lexicon modes, an option)
ONLY_WHEN_IT_APPLIES = (
    "src/verbeval/agreement/scores/aggregate.py",
    "src/verbeval/agreement/lexicon_modes/modes.py",
    "src/verbeval/agreement/cli/",
    "workflow/rules/agreement.smk",
    "workflow/report/*.rst",
    "tests/test_metric_registry.py",
)


# --------------------------------------------------------------------------- one place


def headline_literals(source: str) -> list[int]:
    """Lines of the tuple, list or set literals of exactly the headline metric names (any case, any
    order) and of the dict literals whose keys include all of them (label dicts)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            keys = {k.value.lower() for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if HEADLINE_NAMES <= keys:
                lines.append(node.lineno)
            continue
        else:
            continue
        if len(items) == 3 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items):
            if {e.value.lower() for e in items} == HEADLINE_NAMES:  # type: ignore[attr-defined]
                lines.append(node.lineno)
    return lines


#: the headline tuple in any text (Snakemake rules, templates): quoted names, comma-separated
TEXT_PATTERN = re.compile(r"""["'](tse|TSE)["']\s*,\s*["'](ew|EW)["']\s*,\s*["'](mw|MW)["']""")


def test_the_scan_finds_the_headline_tuple_in_every_spelling() -> None:
    source = textwrap.dedent(
        """
        A = ("tse", "ew", "mw")
        B = ["MW", "EW", "TSE"]
        C = {"tse": "TSE", "ew": "EW", "mw": "MW", "invalid": "invalid"}
        D = ("ew", "mw")
        E = ("tse", "ew", "mw", "prob_counted")
        """
    )
    assert headline_literals(source) == [2, 3, 4]
    assert TEXT_PATTERN.search('for m in ("tse", "ew", "mw"):') and not TEXT_PATTERN.search('("ew", "mw")')


def test_the_registry_is_the_only_place_in_src_that_lists_the_headline_metrics() -> None:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == REGISTRY:
            continue
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}:{n}" for n in headline_literals(text)]
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in TEXT_PATTERN.finditer(text)]
    for path in sorted((ROOT / "workflow").rglob("*")):
        if path.is_file() and path.suffix in {".smk", ".py", ".yaml"} or path.name == "Snakefile":
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in TEXT_PATTERN.finditer(path.read_text())]
    assert found == [], "list the headline metrics through verbeval.agreement.scores.registry"


# --------------------------------------------------------------------------- the entries


def test_the_registry_keeps_todays_order_labels_and_columns() -> None:
    assert registry.NAMES == ("tse", "ew", "mw")
    assert registry.LABELS == {"tse": "TSE", "ew": "EW", "mw": "MW"}
    assert registry.CUTOFF_METRICS == ("ew", "mw")
    assert registry.LEXICON_MODE_METRICS == ("tse", "ew", "mw")
    assert registry.label_list() == "TSE, EW and MW"
    assert registry.label_list(conjunction="or") == "TSE, EW or MW"
    assert registry.label_list(registry.CUTOFF_METRICS) == "EW and MW"
    assert [m.headline_label for m in HEADLINE] == ["TSE", "EW (top p = 1)", "MW (top p = 1)"]
    # Table 2's column block of one model, in table2.csv's order
    block = [c for m in HEADLINE for c in [col for col, _ in m.columns] + [col for col, _ in m.counts]]
    assert block == [
        "tse",
        "tse_ci_low",
        "tse_ci_high",
        "n_rows",
        "n_rows_total",
        "ew",
        "ew_ci_low",
        "ew_ci_high",
        "n_contexts",
        "mw",
        "mw_ci_low",
        "mw_ci_high",
    ]


def test_every_entry_names_a_compute_function_that_exists_and_its_score_column() -> None:
    side_fields = {f.name for f in dataclasses.fields(metrics_module.SideScores)}
    for m in HEADLINE:
        module, _, name = m.compute.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), m.compute
        assert m.unit in {"row", "context"}
        if m.cutoff_curves:  # per-context columns <name>_<side>@<cutoff> from this SideScores field
            assert m.unit == "context" and m.score_column in side_fields, m
            fields = {f.name for f in dataclasses.fields(metrics_module.AgreementScores)}
            assert {f"{m.name}_top", f"{m.name}_bottom"} <= fields, m
        else:  # a column of the per-row scores (tse.parquet)
            assert m.unit == "row" and m.score_column == "tse", m


def test_every_entry_has_its_card_in_docs_metrics() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    definitions = text.split("## Definitions", 1)[1].split("\n## ", 1)[0]
    for m in HEADLINE:
        assert re.search(rf"^\| \*\*{re.escape(m.label)}\*\*", definitions, re.M), m.label


def test_the_recipe_lists_the_files_a_new_metric_touches() -> None:
    """docs/architecture.md's "Add an agreement metric" names the files of NEW_METRIC_FILES, and
    beyond them only those that apply to some metrics (a metric over rows, the lexicon modes, an option)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    recipe = text.split("### Add an agreement metric", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    named = set(re.findall(r"`((?:src|tests|docs|workflow)/[^`\s]*)`", recipe))
    assert set(NEW_METRIC_FILES) <= named
    assert named - set(NEW_METRIC_FILES) <= set(ONLY_WHEN_IT_APPLIES)
    assert "four files" in recipe and len(NEW_METRIC_FILES) == 4
    for f in NEW_METRIC_FILES:
        assert (ROOT / f).is_file(), f


# --------------------------------------------------------------------------- one entry is enough

NEW_ENTRY = """
    Metric(
        name="xw",
        label="XW",
        unit="context",
        compute="verbeval.agreement.scores.metrics.side_scores",
        score_column="ew",
        cutoff_curves=True,
    ),
)
"""

#: run with the copied package whose registry has the entry above (its scores: EW's, as a stand-in)
PROBE = """
import json
import numpy as np
import pandas as pd
from verbeval.agreement.scores.metrics import FormStats
from verbeval.agreement.scores.aggregate import GroupShards, context_scores, summarise
from verbeval.agreement.report import tables, figures, dvc_views
from verbeval.agreement.api.evaluation import AgreementResult
from verbeval.acquisition.curves import group_curves, headline

rng = np.random.default_rng(0)
n, lemmas = 6, 3
prob = rng.dirichlet(np.ones(2 * lemmas + 2), size=n)[:, : 2 * lemmas].reshape(n, lemmas, 2)
flat = prob.reshape(n, -1)
above = np.stack([[flat[i][flat[i] > v].sum() for v in flat[i]] for i in range(n)]).reshape(n, lemmas, 2)
below = 1.0 - above - prob
shards = GroupShards({}, np.arange(n), np.arange(n) % 2 == 0, FormStats(prob, above, below),
                     np.arange(n), np.arange(n), prob[:, 0, :], np.zeros((n, 1)), np.zeros((n, 1)))
scores = context_scores(shards, [0.5, 1.0], [0.5, 1.0])
tse = pd.DataFrame({"tse": (prob[:, 0, 1] > prob[:, 0, 0]).astype(float)})
summary = pd.concat(
    [summarise(scores, tse, model=m, group="g", resamples=10) for m in ("m1", "m2")], ignore_index=True
)
groups = [{"id": "g", "name": "G"}]
t2 = tables.table2(summary, groups, ["m1", "m2"])
comparison = figures.model_comparison(summary, models=["m1", "m2"], groups=groups)
checkpoints = figures.checkpoint_curves(summary, checkpoints=[("s", "m1", 1), ("s", "m2", 2)], groups=groups)
spec = figures.CUTOFF_FIGURES["scores-top"]
curves = figures.cutoff_curves(summary, metrics=spec.metrics, sides=spec.sides, models=["m1"], groups=groups,
                               cutoffs={"top": [0.5, 1.0]}, min_contexts=1)
wide = dvc_views.wide_curves(curves, side="top", models=["m1"], groups=["g"], metrics=spec.metrics)["g"]
index = pd.DataFrame({"family": ["f"], "seed": [""], "step": [1], "model": ["m1"], "random_init": [False]})
acq = headline(group_curves(index, {"m1": summary[summary["model"] == "m1"]}))
result = AgreementResult("m1", groups, summary, t2, pd.DataFrame(), pd.DataFrame(), {}, {})
print(json.dumps({
    "scores": [c for c in scores.columns if c.startswith("xw_")],
    "summary": sorted(set(summary["metric"])),
    "table2": [c for c in t2.columns if c.startswith("m1.")],
    "markdown": tables.to_markdown(t2, ["m1"]).splitlines()[0],
    "latex": tables.to_latex(t2, ["m1"]).count("XW"),
    "html": tables.to_html(t2, ["m1"]).count("<th>XW</th>"),
    "metrics_json": sorted(tables.to_metrics(t2, ["m1"])["m1"]["g"]),
    "dvc_metrics": sorted(dvc_views.split_metrics(tables.to_metrics(t2, ["m1"]), ["m1"], ["g"])[("m1", "g")]),
    "comparison": list(dict.fromkeys(comparison["metric"])),
    "checkpoints": list(dict.fromkeys(checkpoints["metric"])),
    "figure1": [spec.title, list(dict.fromkeys(curves["metric"]))],
    "dvc_plot": list(wide.columns),
    "api": list(result.per_group.columns),
    "acquisition": list(dict.fromkeys(acq["metric"])),
}))
"""


def test_a_metric_added_to_the_registry_reaches_every_output(tmp_path: Path) -> None:
    """A copy of the package whose registry has one more entry (and no other change) scores, tables,
    draws the data of and views the new metric, after the three of today and in registry order."""
    copy = tmp_path / "src" / "verbeval"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    reg = copy / "agreement" / "scores" / "registry.py"
    text = reg.read_text()
    end = "        lexicon_modes=True,\n    ),\n)\n"
    assert text.count(end) == 1
    reg.write_text(text.replace(end, "        lexicon_modes=True,\n    )," + NEW_ENTRY))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src"), "MPLBACKEND": "Agg"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["scores"] == ["xw_top@0.5", "xw_top@1", "xw_bottom@0.5", "xw_bottom@1"]
    assert {"tse", "ew", "mw", "xw"} <= set(got["summary"])
    assert got["table2"][-4:] == ["m1.mw_ci_high", "m1.xw", "m1.xw_ci_low", "m1.xw_ci_high"]
    assert got["markdown"].endswith("| m1 XW |")
    assert got["latex"] == 1 and got["html"] == 1
    assert got["metrics_json"] == ["ew", "mw", "random_init", "tse", "xw"]
    assert got["dvc_metrics"] == ["ew", "mw", "tse", "xw"]
    assert got["comparison"] == got["checkpoints"] == ["tse", "ew", "mw", "xw"]
    assert got["figure1"] == ["EW, MW and XW against top-p cutoff", ["ew", "mw", "xw"]]
    assert got["dvc_plot"] == ["cutoff", "log10_cutoff", "m1 EW", "m1 MW", "m1 XW"]
    assert got["api"][-5:] == ["xw", "xw_ci_low", "xw_ci_high", "n_rows", "n_contexts"]
    assert got["acquisition"] == ["ew", "mw", "tse", "xw"]  # curves.csv: sorted by metric
