"""A sweep's figures cost what a few models cost (issue 63): Figures 1-4 and the per-lemma figure draw a
sweep's first, table and last revisions and its ``figure_revisions``; their CSVs keep every model;
the checks and tokenizer loads behind the tables do not grow with the square of the revisions."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from test_figures import GROUPS, _summary
from test_plan import BASE, _extra
from verbeval.agreement.report.figures import CUTOFF_FIGURES, cutoff_curves, lemma_accuracy
from verbeval.agreement.report.plots import plot_cutoff_curves
from verbeval.agreement.scores.lemma_diagnostics import worst_lemmas
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.fasttok import TextTokenizers
from verbeval.workflow.loading import plan_from_files


@pytest.fixture()
def in_repo(monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """The configuration's relative paths (resources/, the groups file) are read from the repository."""
    monkeypatch.chdir(repo_view)


def _sweep(tmp_path: Path, more: str = "") -> Path:
    steps = ", ".join(f"step{k}" for k in (1, 2, 4, 8, 16, 32))
    return _extra(
        tmp_path,
        "models:\n"
        "  - {id: gpt2, name: plain}\n"
        f"  - {{id: EleutherAI/pythia-70m, name: sw, revisions: [{steps}]{more}}}\n"
        "agreement: {acquisition: {enabled: false}}\n",
        "sweep.yaml",
    )


def test_a_sweep_draws_its_first_table_and_last_revisions_and_the_named_ones(in_repo: None, tmp_path: Path) -> None:
    plan = plan_from_files([BASE, _sweep(tmp_path)])
    rules = plan.figures.rules
    every = "plain,sw@step1,sw@step2,sw@step4,sw@step8,sw@step16,sw@step32"
    for rule in (rules.figure_cutoffs, rules.figure_lemmas):
        assert rule.params["models"] == every  # the data CSV: every model
        assert shlex.split(rule.params["draw"]) == ["--draw", "plain,sw@step1,sw@step32"]
    plan = plan_from_files([BASE, _sweep(tmp_path, ", table_revision: step8, figure_revisions: [step2, sw@step16]")])
    assert shlex.split(plan.figures.rules.figure_cutoffs.params["draw"]) == [
        "--draw",
        "plain,sw@step1,sw@step2,sw@step8,sw@step16,sw@step32",
    ]
    # models without revisions: every model drawn, the command line as before
    plain = _extra(tmp_path, "models: [{id: gpt2, name: a}, {id: gpt2-medium, name: b}]\n", "plain.yaml")
    assert plan_from_files([BASE, plain]).figures.rules.figure_cutoffs.params["draw"] == ""


def test_a_bad_figure_revision_names_its_key(in_repo: None, tmp_path: Path) -> None:
    extra = _sweep(tmp_path, ", figure_revisions: [step3]")
    with pytest.raises(VerbevalError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value) == (
        f"{extra}: models.1.figure_revisions.0: 'step3' is not one of the entry's revisions "
        "(step1, step2, step4, step8, step16, step32)"
    )
    plain = _extra(tmp_path, "models: [{id: gpt2, figure_revisions: [main]}]\n", "plain.yaml")
    with pytest.raises(VerbevalError, match=r"models.0.figure_revisions: only an entry with `revisions`"):
        plan_from_files([BASE, plain])


def _cutoffs_cli(tmp_path: Path, name: str, *extra: str) -> tuple[bytes, bytes]:
    summary, groups = tmp_path / "summary_all.csv", tmp_path / "groups.yaml"
    if not summary.exists():
        _summary().to_csv(summary, index=False)
        groups.write_text(
            "groups:\n"
            + "".join(f"  - {{id: {g['id']}, name: {g['name']}, sources: [{g['sources'][0]}]}}\n" for g in GROUPS)
        )
    csv, png = tmp_path / f"{name}.csv", tmp_path / f"{name}.png"
    argv = ["-q", "plot-cutoffs", "--figure", "scores-top", "--summary", str(summary), "--groups-file", str(groups)]
    argv += ["--models", "m1,m2,m3", *extra, "--top-cutoffs", "0.5,1", "--bottom-cutoffs", "0.01,0.5"]
    assert main([*argv, "--csv", str(csv), "--out", str(png)]) == 0
    return csv.read_bytes(), png.read_bytes()


def test_the_figure_draws_the_named_models_and_its_csv_keeps_every_model(tmp_path: Path) -> None:
    csv_all, png_all = _cutoffs_cli(tmp_path, "all")
    csv_two, png_two = _cutoffs_cli(tmp_path, "two", "--draw", "m1,m3")
    csv_every, png_every = _cutoffs_cli(tmp_path, "every", "--draw", "m1,m2,m3")
    assert csv_two == csv_all and csv_every == csv_all
    assert set(pd.read_csv(tmp_path / "two.csv")["model"]) == {"m1", "m2", "m3"}
    assert png_every == png_all  # drawing every model is the figure without --draw, byte for byte
    assert png_two != png_all
    with pytest.raises(AssertionError):  # verbeval plot-cutoffs: error: --draw: m9 not among --models
        _cutoffs_cli(tmp_path, "bad", "--draw", "m1,m9")
    # the figure itself: one panel column per drawn model, the note says what is left out
    data = pd.read_csv(tmp_path / "all.csv")
    spec = CUTOFF_FIGURES["scores-top"]
    fig = plot_cutoff_curves(data[data["model"].isin(["m1", "m3"])], spec, ["m1", "m3"], notes=["Drawn: 2 of 3"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["m1", "m3"]
    assert "Drawn: 2 of 3" in [t.get_text() for t in fig.texts]


def test_cutoff_rows_are_checked_whatever_the_number_of_models() -> None:
    """The one-pass check names the same first missing or duplicated (model, group, metric) as a
    row-by-row reading of the summary would."""
    summary = _summary()
    kw = {"metrics": ["ew", "mw"], "sides": ["top"], "groups": GROUPS, "cutoffs": {"top": [0.5, 1.0], "bottom": []}}
    out = cutoff_curves(summary, models=["m1", "m2", "m3"], **kw)
    assert len(out) == 3 * 2 * 2 * 2  # models x groups x metrics x cutoffs
    gone = summary[~((summary["model"] == "m2") & (summary["group"] == "blimp") & (summary["metric"] == "mw"))]
    gone = gone[~((gone["model"] == "m3") & (gone["metric"] == "ew") & (gone["cutoff"] == 0.5))]
    with pytest.raises(VerbevalError) as err:
        cutoff_curves(gone, models=["m1", "m2", "m3"], **kw)
    assert str(err.value) == (
        "summary has no mw (top) for model 'm2', group 'blimp' at cutoff 0.5 (stale summary? rerun aggregate)"
    )
    with pytest.raises(VerbevalError, match=r"model 'm3', group 'simple' at cutoff 0.5 "):
        cutoff_curves(gone, models=["m1", "m3"], **kw)
    twice = pd.concat([summary, summary[(summary["model"] == "m2") & (summary["cutoff"] == 1.0)]])
    with pytest.raises(VerbevalError) as err:
        cutoff_curves(twice, models=["m1", "m2", "m3"], **kw)
    assert str(err.value) == "summary has duplicate ew (top) rows for model 'm2', group 'simple'"


def _stats(models: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for m in models:
        for lemma in ("be", "go", "run", "see", "walk"):
            n = int(rng.integers(1, 9))
            wrong = int(rng.integers(0, n + 1))
            logp = float(rng.uniform(-6, -1))
            rows.append(
                {
                    "model": m,
                    "lemma": lemma,
                    "sing": lemma + "s",
                    "plur": lemma,
                    "n_contexts": n,
                    "n_wrong": wrong,
                    "accuracy": (n - wrong) / n,
                    "mean_prob": 10**logp,
                    "mean_log10_prob": logp,
                }
            )
    return pd.DataFrame(rows)


def test_lemma_tables_read_each_model_once_in_the_order_asked() -> None:
    stats = _stats(["a", "b", "c"]).sample(frac=1.0, random_state=0)  # rows of the models interleaved
    data = lemma_accuracy(stats, ["c", "a"], n_bins=2)
    assert list(dict.fromkeys(data["model"])) == ["c", "a"]
    for m in ("c", "a"):
        mine = data[data["model"] == m].set_index("lemma")
        want = stats[stats["model"] == m].set_index("lemma")
        assert mine["accuracy"].to_dict() == want["accuracy"].to_dict()
        assert sorted(mine["bin"]) == [0, 0, 0, 1, 1]  # 5 lemmas in 2 bins: ranks 0-2, 3-4
    worst = worst_lemmas(stats, 2, ["b", "zz"])  # a model without rows has none
    assert list(worst["model"]) == ["b", "b"]
    b = stats[stats["model"] == "b"].sort_values(["n_wrong", "lemma"], ascending=[False, True], kind="stable")
    assert list(worst["lemma"]) == list(b["lemma"][:2])
    with pytest.raises(VerbevalError, match=r"no lemma statistics for model\(s\) \['zz'\]"):
        lemma_accuracy(stats, ["a", "zz"])


def test_text_tokenizers_load_each_tokenizer_once_by_content(tokenizer_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gpt2 = tokenizer_path("gpt2")
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (a, b, c):
        shutil.copytree(gpt2, d)
    (c / "tokenizer_config.json").write_text('{"model_max_length": 7}')  # another tokenizer
    tokenizers = TextTokenizers()
    ta, tb, tc = tokenizers(str(a)), tokenizers(str(b)), tokenizers(str(c))
    assert ta is tb  # same files, other folder: one load
    assert tc is not ta
    assert ta(" walks", add_special_tokens=False) == tc(" walks", add_special_tokens=False)


def test_a_figure_names_a_few_of_many_random_revisions() -> None:
    """A note under a figure names every random model of a few, and of a sweep's many the first three,
    the last and how many more (a note of 128 names made the checkpoint figure 20,000 pixels wide)."""
    from verbeval.agreement.report.plots import _random_notes

    few = [f"s@step-{k}" for k in range(1, 9)]
    assert _random_notes(few, set(few)) == [
        "Randomly initialised, so the numbers are meaningless: " + ", ".join(few) + "."
    ]
    many = [f"s@step-{k}" for k in range(1, 129)]
    assert _random_notes(["plain", *many], set(many)) == [
        "Randomly initialised, so the numbers are meaningless: s@step-1, s@step-2, s@step-3, … (124 more) …, "
        "s@step-128."
    ]
    assert _random_notes(many, set()) == []


def test_the_forest_figure_of_a_lone_sweep_says_where_its_comparisons_are(tmp_path: Path) -> None:
    """A run of one sweep has only consecutive pairs, which the forest figure leaves to first_gains.csv:
    it says so instead of drawing empty panels; a pair of models is drawn and returned."""
    from verbeval.agreement.report.forest_plots import forest_figure

    rows = []
    for kind, a, b in (("consecutive", "s@1", "s@2"), ("models", "x", "y")):
        for metric in ("tse", "ew", "mw"):
            for group in ("simple", "all"):
                rows.append(
                    {
                        "kind": kind,
                        "model_a": a,
                        "model_b": b,
                        "group": group,
                        "metric": metric,
                        "difference": 0.1,
                        "ci_low": 0.05,
                        "ci_high": 0.15,
                        "significant": True,
                    }
                )
    rows = pd.DataFrame(rows)
    lone = rows[rows["kind"] == "consecutive"]
    assert forest_figure(lone, [tmp_path / "lone.svg"]) == []
    assert b"first_gains.csv" in (tmp_path / "lone.svg").read_bytes()
    assert forest_figure(rows, [tmp_path / "both.svg"], random=["y"]) == ["y vs x (random init)"]
    assert b"first_gains.csv" not in (tmp_path / "both.svg").read_bytes()
