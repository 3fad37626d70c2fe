"""DVC views (verbeval.agreement.report.dvc_views) and what `dvc metrics show` / `dvc plots show` make of the
committed dvc.yaml on small fake outputs (real `dvc` processes: the end-to-end tier, `pytest -m e2e`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from verbeval.agreement.report.dvc_views import split_metrics, wide_curves
from verbeval.agreement.report.figures import CURVE_COLUMNS, CUTOFF_FIGURES
from verbeval.cli import main
from verbeval.core.errors import VerbevalError

REPO = Path(__file__).resolve().parents[1]


def curves(models: list[str], groups: list[str], metrics: list[str], cuts: dict[str, list[float]]) -> pd.DataFrame:
    """Long figure data whose value encodes (model, group, metric, side, cutoff) so that any mix-up shows."""
    rows = []
    for i, m in enumerate(models):
        for j, g in enumerate(groups):
            for k, metric in enumerate(metrics):
                for side, cs in cuts.items():
                    for c in cs:
                        v = 100 * i + 10 * j + k + c / 10 + (0.05 if side == "bottom" else 0.0)
                        rows.append(
                            dict(
                                model=m,
                                group=g,
                                group_name=g.upper(),
                                metric=metric,
                                side=side,
                                cutoff=c,
                                value=v,
                                ci_low=v - 1,
                                ci_high=v + 1,
                                n=5,
                                n_total=6,
                                valid_share=5 / 6,
                                low_n=True,
                            )
                        )
    return pd.DataFrame(rows)[list(CURVE_COLUMNS)]


def test_split_metrics_one_entry_per_model_and_group() -> None:
    metrics = {
        "a": {"g1": {"tse": 0.9, "ew": 0.8, "mw": None}, "g2": {"tse": 0.1, "ew": 0.2, "mw": 0.3}},
        "b": {"g1": {"tse": 0.5, "ew": 0.6, "mw": 0.7}, "g2": {"tse": 0.4, "ew": 0.3, "mw": 0.2}},
    }
    parts = split_metrics(metrics, ["b", "a"], ["g2"])
    assert parts == {("b", "g2"): {"tse": 0.4, "ew": 0.3, "mw": 0.2}, ("a", "g2"): {"tse": 0.1, "ew": 0.2, "mw": 0.3}}
    assert split_metrics(metrics, ["a"], ["g1"])[("a", "g1")]["mw"] is None
    # a random model's numbers say so in every file (and so in `dvc metrics show`); a real model's do not:
    # from metrics.json's group records, and from a file of an older verbeval (the flag beside the groups)
    marked = {m: {g: {**r, "random_init": m == "b"} for g, r in groups.items()} for m, groups in metrics.items()}
    older = {**metrics, "b": {**metrics["b"], "random_init": True}, "a": {**metrics["a"], "random_init": False}}
    for source in (marked, older):
        parts = split_metrics(source, ["a", "b"], ["g1"])
        assert parts[("b", "g1")] == {"tse": 0.5, "ew": 0.6, "mw": 0.7, "random_init": True}
        assert "random_init" not in parts[("a", "g1")]
    with pytest.raises(VerbevalError, match=r"m.json: no model 'c'"):
        split_metrics(metrics, ["c"], ["g1"], source="m.json")
    with pytest.raises(VerbevalError, match=r"model 'a' has no group 'g3'"):
        split_metrics(metrics, ["a"], ["g3"])
    with pytest.raises(VerbevalError, match=r"group 'g1' has no 'ew'"):
        split_metrics({"a": {"g1": {"tse": 1.0}}}, ["a"], ["g1"])


def test_wide_curves_one_column_per_model_and_metric() -> None:
    data = curves(["m1", "m2"], ["g1", "g2"], ["ew", "mw"], {"top": [0.5, 1.0, 0.1], "bottom": [0.01, 0.5]})
    data.loc[
        (data["model"] == "m2") & (data["group"] == "g2") & (data["metric"] == "mw") & (data["cutoff"] == 0.01), "value"
    ] = np.nan  # an undefined score stays empty
    top = wide_curves(data, side="top", models=["m2", "m1"], groups=["g2", "g1"], metrics=["ew", "mw"])
    assert list(top) == ["g2", "g1"]
    t = top["g1"]
    assert list(t.columns) == ["cutoff", "log10_cutoff", "m2 EW", "m2 MW", "m1 EW", "m1 MW"]
    assert t["cutoff"].tolist() == [0.1, 0.5, 1.0]
    np.testing.assert_allclose(t["log10_cutoff"], np.log10([0.1, 0.5, 1.0]))
    np.testing.assert_allclose(t["m2 MW"], [100 + 1 + 0.01, 100 + 1 + 0.05, 100 + 1 + 0.1])
    np.testing.assert_allclose(t["m1 EW"], [0.01, 0.05, 0.1])
    bottom = wide_curves(data, side="bottom", models=["m1", "m2"], groups=["g2"], metrics=["ew", "mw"])["g2"]
    assert bottom["cutoff"].tolist() == [0.01, 0.5]
    np.testing.assert_allclose(bottom["log10_cutoff"], [-2, np.log10(0.5)])
    assert np.isnan(bottom["m2 MW"].iloc[0])
    np.testing.assert_allclose(bottom["m2 EW"], [110 + 0.001 + 0.05, 110 + 0.05 + 0.05])
    np.testing.assert_allclose(bottom["m1 MW"].iloc[1], 10 + 1 + 0.05 + 0.05)


def test_wide_curves_errors() -> None:
    data = curves(["m1", "m2"], ["g1"], ["invalid"], {"top": [0.5, 1.0]})
    with pytest.raises(VerbevalError, match=r"x.csv: no top-p rows for group 'g9'"):
        wide_curves(data, side="top", models=["m1"], groups=["g9"], metrics=["invalid"], source="x.csv")
    with pytest.raises(
        VerbevalError, match=r"model 'm3', group 'g1': 0 invalid \(top\) rows, expected one per cutoff \(2\)"
    ):
        wide_curves(data, side="top", models=["m1", "m3"], groups=["g1"], metrics=["invalid"])
    short = data.drop(index=data.index[(data["model"] == "m2") & (data["cutoff"] == 1.0)])
    with pytest.raises(VerbevalError, match=r"model 'm2', group 'g1': 1 invalid \(top\) rows"):
        wide_curves(short, side="top", models=["m1", "m2"], groups=["g1"], metrics=["invalid"])
    with pytest.raises(VerbevalError, match="duplicate rows for model 'm1'"):
        wide_curves(pd.concat([data, data.iloc[:1]]), side="top", models=["m1"], groups=["g1"], metrics=["invalid"])


def test_cli_writes_the_views(tmp_path: Path) -> None:
    metrics = {"a": {"g1": {"tse": 0.25, "ew": 0.5, "mw": 0.75}}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert (
        main(
            [
                "-q",
                "dvc-metrics",
                "--metrics",
                str(tmp_path / "metrics.json"),
                "--models",
                "a",
                "--groups",
                "g1",
                "--out-dir",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "m/a/g1.json").read_text()) == {"tse": 0.25, "ew": 0.5, "mw": 0.75}
    # the figure's data mark model b random (plot-cutoffs' random_init column): each file says so per model
    data = curves(["a", "b"], ["g1"], ["prob_counted"], {"top": [1.0], "bottom": [0.001, 0.1]})
    data.assign(random_init=data["model"] == "b").to_csv(tmp_path / "c.csv", index=False)
    assert (
        main(
            [
                "-q",
                "dvc-plot-data",
                "--figure",
                "prob-counted",
                "--curves",
                str(tmp_path / "c.csv"),
                "--side",
                "bottom",
                "--models",
                "a,b",
                "--groups",
                "g1",
                "--out-dir",
                str(tmp_path / "p"),
            ]
        )
        == 0
    )
    assert (tmp_path / "p/g1.csv").read_text().splitlines()[:2] == [
        "cutoff,log10_cutoff,a mass counted,b mass counted,a random_init,b random_init",
        "0.001,-3,0.0501,100.0501,False,True",
    ]
    got = pd.read_csv(tmp_path / "p/g1.csv")
    np.testing.assert_allclose(
        got[["cutoff", "log10_cutoff", "a mass counted"]], [[0.001, -3, 0.0501], [0.1, -1, 0.06]]
    )
    assert got["a random_init"].tolist() == [False, False] and got["b random_init"].tolist() == [True, True]
    # a side the figure does not have
    assert (
        main(
            [
                "-q",
                "dvc-plot-data",
                "--figure",
                "scores-top",
                "--curves",
                str(tmp_path / "c.csv"),
                "--side",
                "bottom",
                "--models",
                "a",
                "--groups",
                "g1",
                "--out-dir",
                str(tmp_path / "p"),
            ]
        )
        == 1
    )


def test_root_pipeline_declares_table2_metrics_and_figure_plots() -> None:
    root = yaml.safe_load((REPO / "dvc.yaml").read_text())
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    models = [m["id"] for m in config["models"]]  # the paper's models have no `name`: the id is the name
    declared = [next(iter(m)) for s in root["stages"].values() for m in s.get("metrics", [])]
    groups = [Path(p).stem for p in declared if f"/{models[0]}/" in p]
    assert len(groups) == 10 and "obj_rel_within" in groups
    assert declared == [f"results/agreement/metrics/{m}/{g}.json" for m in models for g in groups]
    plots = {next(iter(p)): next(iter(p.values())) for p in root["plots"]}
    assert len(plots) == sum(len(s.sides) for s in CUTOFF_FIGURES.values()) * len(groups)  # 60
    p = plots["fig1_top_p/top/obj_rel_within"]
    assert p["template"] == "verbeval_lines" and p["x"] == "cutoff" and p["x_label"] == "top-p cutoff"
    assert p["y"] == {
        "results/agreement/figures/dvc/fig1_top_p/top/obj_rel_within.csv": [
            f"{m} {k}" for m in models for k in ("EW", "MW")
        ]
    }
    p = plots["fig4_invalid/bottom/blimp"]
    assert p["x"] == "log10_cutoff"
    assert p["y"] == {"results/agreement/figures/dvc/fig4_invalid/bottom/blimp.csv": [f"{m} invalid" for m in models]}
    assert (REPO / ".dvc/plots/verbeval_lines.json").is_file()
    # every plotted file is an (uncached) output of a stage of this pipeline
    outs = {next(iter(o)) for s in root["stages"].values() for o in s.get("outs", []) if isinstance(o, dict)}
    assert {f for p in plots.values() for f in p["y"]} <= outs
    # the CI pipeline declares neither: `dvc metrics show` / `dvc plots show` see the paper's only
    ci = yaml.safe_load((REPO / "pipelines/ci/dvc.yaml").read_text())
    assert "plots" not in ci and not any("metrics" in s or "plots" in s for s in ci["stages"].values())
    assert any(
        "results-ci-small/agreement/metrics/tiny-gpt2/simple.json" in s.get("outs", []) for s in ci["stages"].values()
    )


def _dvc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    exe = Path(sys.executable).with_name("dvc")
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


@pytest.mark.e2e
def test_dvc_shows_metrics_per_model_and_group_and_one_series_per_model_and_metric(tmp_path: Path) -> None:
    """A git + DVC repository with this repository's two pipelines and fake outputs of the paper's.
    End-to-end tier: real `dvc init`, `dvc metrics show` and `dvc plots show` processes."""
    repo = tmp_path / "repo"
    (repo / "pipelines/ci").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    assert _dvc(repo, "init", "-q").returncode == 0
    shutil.copy(REPO / "dvc.yaml", repo / "dvc.yaml")
    shutil.copy(REPO / "pipelines/ci/dvc.yaml", repo / "pipelines/ci/dvc.yaml")
    shutil.copytree(REPO / ".dvc/plots", repo / ".dvc/plots")
    root = yaml.safe_load((repo / "dvc.yaml").read_text())
    stages = root["stages"]
    cmd = {name: s["cmd"] for name, s in stages.items()}
    models = cmd["dvc_metrics"].split("--models ")[1].split()[0].split(",")
    groups = cmd["dvc_metrics"].split("--groups ")[1].split()[0].split(",")
    rng = np.random.default_rng(1)
    table2 = {
        m: {g: {"tse": float(rng.random()), "ew": float(rng.random()), "mw": float(rng.random())} for g in groups}
        for m in models
    }
    (repo / "metrics.json").write_text(json.dumps(table2))
    assert (
        main(
            [
                "-q",
                "dvc-metrics",
                "--metrics",
                str(repo / "metrics.json"),
                "--models",
                ",".join(models),
                "--groups",
                ",".join(groups),
                "--out-dir",
                str(repo / "results/agreement/metrics"),
            ]
        )
        == 0
    )
    cuts = {"top": [0.5, 1.0], "bottom": [0.001, 0.1]}
    for name, spec in CUTOFF_FIGURES.items():
        data = curves(models, groups, list(spec.metrics), {s: cuts[s] for s in spec.sides})
        data.to_csv(repo / f"{spec.stem}.csv", index=False)
        for side in spec.sides:
            assert (
                main(
                    [
                        "-q",
                        "dvc-plot-data",
                        "--figure",
                        name,
                        "--curves",
                        str(repo / f"{spec.stem}.csv"),
                        "--side",
                        side,
                        "--models",
                        ",".join(models),
                        "--groups",
                        ",".join(groups),
                        "--out-dir",
                        str(repo / f"results/agreement/figures/dvc/{spec.stem}/{side}"),
                    ]
                )
                == 0
            )
    # the other declared plots (one series per file), with their declared columns
    for s in stages.values():
        for p in s.get("plots", []):
            ((path, props),) = p.items()
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame({props["x"]: [0.0, 1.0], props["y"]: [0.5, 0.25]}).to_csv(repo / path, index=False)

    shown = _dvc(repo, "metrics", "show")
    assert shown.returncode == 0, shown.stderr
    assert "failed to load" not in shown.stderr + shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["Path", "ew", "mw", "tse"]
    assert len(lines) == 1 + len(models) * len(groups)
    assert max(map(len, lines)) < 110
    row = next(line for line in lines if line.startswith(f"results/agreement/metrics/{models[2]}/{groups[7]}.json"))
    t2 = table2[models[2]][groups[7]]
    assert [float(x) for x in row.split()[1:]] == pytest.approx([t2["ew"], t2["mw"], t2["tse"]], abs=1e-5)

    shown = _dvc(repo, "plots", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert "failed to load" not in shown.stderr
    out = json.loads(shown.stdout)
    assert not out.get("errors")
    spec = out["data"][f"fig2_bottom_p/bottom/{groups[3]}"][0]["content"]
    assert spec["encoding"]["x"]["field"] == "log10_cutoff"
    assert spec["encoding"]["color"]["field"] == "field" and "loess" not in json.dumps(spec)
    series: dict[str, list[tuple[float, float]]] = {}
    for v in spec["data"]["values"]:
        series.setdefault(v["field"], []).append((float(v["log10_cutoff"]), float(v["dvc_inferred_y_value"])))
    assert sorted(series) == sorted(f"{m} {k}" for m in models for k in ("EW", "MW"))
    i = 1  # models[1], metric mw (k = 1), group 3, bottom side
    np.testing.assert_allclose(
        sorted(series[f"{models[i]} MW"]),
        [(-3.0, 100 * i + 30 + 1 + 0.0001 + 0.05), (-1.0, 100 * i + 30 + 1 + 0.01 + 0.05)],
    )
    assert len(out["data"]) == sum(len(s.sides) for s in CUTOFF_FIGURES.values()) * len(groups) + sum(
        len(s.get("plots", [])) for s in stages.values()
    )

    # the offline HTML template: no script from a CDN
    shown = _dvc(
        repo,
        "plots",
        "show",
        "--html-template",
        str(REPO / "resources/dvc_plots_offline.html"),
        "-o",
        "html",
        f"fig1_top_p/top/{groups[0]}",
    )
    assert shown.returncode == 0, shown.stderr
    page = (repo / "html/index.html").read_text()
    assert "vegaEmbed" in page and '<script src="vega.min.js"></script>' in page and "https://cdn" not in page


def test_a_sweeps_plot_data_are_built_at_once(tmp_path: Path) -> None:
    """A 300-revision sweep's DVC plot data: every series column where it belongs, its random_init flags
    after them, built without inserting a column at a time (which pandas warns about, and which cost
    the square of the revisions: 54 s of a 1,000-revision sweep)."""
    import warnings

    models = [f"s@step-{k}" for k in range(300)]
    data = curves(models, ["g1"], ["ew", "mw"], {"top": [0.5, 1.0]})
    data.assign(random_init=data["model"] == "s@step-7").to_csv(tmp_path / "c.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        wide = wide_curves(data, side="top", models=models, groups=["g1"], metrics=["ew", "mw"])["g1"]
        argv = ["-q", "dvc-plot-data", "--figure", "scores-top", "--curves", str(tmp_path / "c.csv"), "--side"]
        argv += ["top", "--models", ",".join(models), "--groups", "g1", "--out-dir", str(tmp_path / "p")]
        assert main(argv) == 0
    assert list(wide.columns[:4]) == ["cutoff", "log10_cutoff", "s@step-0 EW", "s@step-0 MW"]
    assert wide["s@step-299 MW"].tolist() == [299 * 100 + 1 + 0.05, 299 * 100 + 1 + 0.1]
    written = pd.read_csv(tmp_path / "p/g1.csv")
    assert written.shape == (2, 2 + 600 + 300)
    assert written["s@step-7 random_init"].tolist() == [True, True]
    assert not written["s@step-8 random_init"].any()
