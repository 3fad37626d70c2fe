"""The summary a successful run ends with (verbeval.workflow.run_summary; Snakemake's onsuccess): its
results folder, Table 2 as text with random models marked, its jobs' warnings and the report command."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from verbeval.workflow.run_summary import SHOWN_WARNINGS, job_warnings, report_command, run_summary, table2_lines
from verbeval.workflow.snakemake import success_lines

BOOT = (
    "200 bootstrap resamples leave 0.5 beyond each end of the intervals corrected across 10 groups "
    "(level 99.50%, quantiles 0.25% and 99.75%): set agreement.bootstrap.resamples to at least 4000"
)


def _log(path: Path, text: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_job_warnings_are_this_runs_each_once_in_time_order(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _log(logs / "old.log", "2026-12-02 07:00:00,000 WARNING verbeval: from an earlier run\n", 100.0)
    _log(
        logs / "agreement" / "quick-bert" / "aggregate.log",
        f"2026-12-02 07:32:24,356 WARNING verbeval.core.bootstrap: {BOOT}\n2026-12-02 07:32:24,357 INFO verbeval: ok\n",
        300.0,
    )
    _log(
        logs / "agreement" / "smollm2-135m" / "aggregate.log",
        f"2026-12-02 07:32:25,000 WARNING verbeval.core.bootstrap: {BOOT}\n",
        301.0,
    )
    _log(
        logs / "tiny_models" / "bert.log",
        "/x/torch/nn/modules/module.py:12: UserWarning: a library's warning\n  warnings.warn(\n"
        "2026-12-02 07:31:00,000 WARNING verbeval: models/quick/bert is randomly initialised\n",
        200.0,
    )
    got = job_warnings(logs, since=150.0)
    assert [(w.log, w.message, w.count) for w in got] == [
        ("tiny_models/bert.log", "UserWarning: a library's warning", 1),
        ("tiny_models/bert.log", "models/quick/bert is randomly initialised", 1),
        ("agreement/quick-bert/aggregate.log", BOOT, 2),
    ]
    assert job_warnings(tmp_path / "none", since=0.0) == []


def _table2(path: Path, models: dict[str, bool]) -> Path:
    cols = ["group", "name"]
    for m in models:
        cols += [f"{m}.random_init", f"{m}.tse", f"{m}.tse_ci_low", f"{m}.ew", f"{m}.mw"]
    rows = []
    for i, (g, name) in enumerate([("simple", "Simple"), ("prep", "Across prepositional phrase")]):
        row = [g, name]
        for j, random in enumerate(models.values()):
            row += [str(random), f"{0.986667 - i / 10 - j / 100:.6f}", "0.9", "" if i else "0.860419", "0.5"]
        rows.append(",".join(row))
    path.write_text(",".join(cols) + "\n" + "\n".join(rows) + "\n")
    return path


def test_table2_as_text_marks_random_models(tmp_path: Path) -> None:
    lines = table2_lines(_table2(tmp_path / "table2.csv", {"smollm2-135m": False, "quick-bert": True}))
    assert lines == [
        "                                  smollm2-135m        quick-bert\u2020",
        "Group                          TSE    EW    MW    TSE    EW    MW",
        "Simple                        0.99  0.86  0.50   0.98  0.86  0.50",
        "Across prepositional phrase   0.89     \u2013  0.50   0.88     \u2013  0.50",
        "\u2020 randomly initialised, so the numbers are meaningless: quick-bert.",
    ]
    assert table2_lines(tmp_path / "missing.csv") == []


def test_table2_as_text_shows_six_models_and_names_the_rest(tmp_path: Path) -> None:
    lines = table2_lines(_table2(tmp_path / "table2.csv", {f"m{i}": False for i in range(8)}))
    assert lines[0].split() == [f"m{i}" for i in range(6)]
    assert len(lines[2].split()) == 1 + 18
    assert lines[-1] == f"(and 2 more models: {tmp_path / 'table2.md'})"


def test_report_command_repeats_the_runs_config(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cmd = report_command(
        [tmp_path / "config" / "quick.yaml", "/elsewhere/x.yaml"],
        ["data_mirror=/data/mirror dir"],
        "results-quick/report.html",
    )
    assert cmd == (
        "snakemake --configfile config/quick.yaml --configfile /elsewhere/x.yaml "
        "--config 'data_mirror=/data/mirror dir' --report results-quick/report.html"
    )


def test_the_summary_names_results_table_warnings_and_report(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    table = _table2(tmp_path / "table2.csv", {"smollm2-135m": False, "quick-bert": True})
    for i in range(SHOWN_WARNINGS + 2):
        _log(tmp_path / "logs" / f"job{i}.log", f"2026-12-02 07:00:0{i},000 WARNING verbeval: warning {i}\n", 500.0 + i)
    lines = run_summary("results-quick", str(table), str(tmp_path / "logs"), 400.0, "snakemake --report r.html")
    text = "\n".join(lines)
    assert lines[1] == "verbeval: the run is done; its results are in results-quick/"
    assert f"Table 2 (TSE, EW and MW at p = 1; CIs in {table}, also .md, .tex, .html):" in lines
    assert f"7 warning(s) in this run's job logs (7 different), under {tmp_path / 'logs'}/:" in lines
    assert [ln for ln in lines if ln.startswith("  job")] == [f"  job{i}.log: warning {i}" for i in range(5)]
    assert f"  ... and 2 more: grep -r WARNING {tmp_path / 'logs'}" in lines
    assert lines[-3:] == ["The report (figures and tables in one HTML file):", "  snakemake --report r.html", ""]
    assert "quick-bert\u2020" in text
    none = run_summary("results-quick", None, str(tmp_path / "logs"), 10_000.0, "snakemake --report r.html")
    assert "Table 2" not in "\n".join(none) and f"No warning in this run's job logs ({tmp_path / 'logs'}/)." in none


def test_success_lines_read_the_plan_and_snakemakes_settings(tmp_path: Path, monkeypatch) -> None:
    """onsuccess's call (workflow/rules/common.smk), with stand-ins for the plan and Snakemake's workflow."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "res" / "agreement").mkdir(parents=True)
    _table2(tmp_path / "res" / "agreement" / "table2.csv", {"gpt2": False})
    layout = SimpleNamespace(results_dir="res", agreement_dir="res/agreement", logs="res/logs")
    languages = tmp_path / "res" / "multilingual" / "languages.md"
    languages.parent.mkdir(parents=True)
    languages.write_text("# Agreement across languages\n\n## gpt2\n\n| construction | French TSE / EW / MW |\n"
                         "|---|---|\n| Simple | 0.97 / 0.85 / 0.94 |\n")  # fmt: skip
    multilingual = SimpleNamespace(table_files=lambda: {"languages": "res/multilingual/languages.md"})
    plan = SimpleNamespace(layout=layout, all_outputs=lambda: ["res/agreement/table2.csv"], multilingual=multilingual)
    workflow = SimpleNamespace(
        config_settings=SimpleNamespace(
            configfiles=[tmp_path / "config" / "quick.yaml"], config_args=["data_mirror=/m", "results_dir=res"]
        )
    )
    lines = success_lines(plan, workflow, 0.0)
    assert "Simple                        0.99  0.86  0.50" in lines
    assert (
        "  snakemake --configfile config/quick.yaml --config data_mirror=/m results_dir=res --report res/report.html"
        in lines
    )
    assert not any("CLAMS" in ln for ln in lines)  # a run without the multilingual study
    plan.all_outputs = lambda: ["res/agreement/table2.csv", "res/multilingual/languages.md"]
    lines = success_lines(plan, workflow, 0.0)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Agreement across languages (CLAMS"))
    assert lines[at + 1 : at + 5] == ["## gpt2", "| construction | French TSE / EW / MW |", "|---|---|",
                                      "| Simple | 0.97 / 0.85 / 0.94 |"]  # fmt: skip
    plan.all_outputs = lambda: []  # a run without Table 2 (e.g. SimVerb only) shows none
    assert not any(ln.startswith("Group") for ln in success_lines(plan, workflow, 0.0))
