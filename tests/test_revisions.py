"""Training-checkpoint sweeps: ``models[].revisions`` expansion, the checkpoint figure, the Table 2
filter (``agreement.table_models`` / ``verbeval table --table-models``) and the DAG of a sweep of
three local tiny checkpoints."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO_ROOT as REPO
from conftest import checkout_view, fake_cached
from inprocess import dry_run
from verbeval.agreement.report.figures import checkpoint_curves
from verbeval.cli import main
from verbeval.core.config import validate_config
from verbeval.core.errors import VerbevalError
from verbeval.core.model_checks import check_model_paths
from verbeval.core.model_entries import expand_revisions, model_entries, parse_seen, parse_step, select_models


def _error(cfg: dict[str, Any]) -> str:
    with pytest.raises(VerbevalError) as exc:
        validate_config(copy.deepcopy(cfg), "cfg.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("cfg.yaml: ")
    return msg


# --------------------------------------------------------------------------- config expansion


@pytest.mark.parametrize(
    "label, step",
    [
        ("step1000", 1000),
        ("step0", 0),
        ("step1000-tokens4B", 1000),
        ("stage1-step5000-tokens21B", 5000),
        ("global_step250", 250),
        ("checkpoint-1500", 1500),
        ("Step12", 12),
        ("main", None),
        ("v1.0", None),
        ("0123456789abcdef0123456789abcdef01234567", None),
        ("mystep12", None),
        ("step", None),
    ],
)
def test_parse_step(label: str, step: int | None) -> None:
    assert parse_step(label) == step


def test_hub_revisions_expand_into_one_model_each() -> None:
    cfg = validate_config(
        {
            "models": [
                {
                    "id": "EleutherAI/pythia-160m",
                    "revisions": [
                        "step1000",
                        {"revision": "step143000"},
                        {"revision": "main", "step": 150000, "name": "final"},
                    ],
                    "dtype": "bfloat16",
                    "batch_size": 8,
                    "prepend_bos": False,
                },
                {"id": "gpt2"},
            ]
        }
    )
    entries = model_entries(cfg)
    assert [m["name"] for m in entries] == [
        "EleutherAI--pythia-160m@step1000",
        "EleutherAI--pythia-160m@step143000",
        "final",
        "gpt2",
    ]
    assert [m["revision"] for m in entries] == ["step1000", "step143000", "main", None]
    assert [m.get("step") for m in entries] == [1000, 143000, 150000, None]
    assert [m.get("checkpoint_of") for m in entries] == ["EleutherAI--pythia-160m"] * 3 + [None]
    for m in entries[:3]:  # the entry's settings go to every revision
        assert (m["id"], m["dtype"], m["batch_size"], m["prepend_bos"], m["kind"]) == (
            "EleutherAI/pythia-160m",
            "bfloat16",
            8,
            False,
            "auto",
        )
        assert "revisions" not in m
    assert entries[3] == {
        "id": "gpt2",
        "name": "gpt2",
        "revision": None,
        "kind": "auto",
        "dtype": "float32",
        "prepend_bos": None,
        "batch_size": "auto",
        "device_map": None,
        "gpus": 1,
        "random_init": None,
        "gguf_file": None,
        "pip": None,
    }  # an entry without revisions is unchanged


def test_local_checkpoint_folders_are_model_ids(tmp_path: Path) -> None:
    cfg = validate_config(
        {
            "models": [
                {
                    "id": "my-run",
                    "name": "run",
                    "revisions": [
                        {"path": str(tmp_path / "ckpt-a"), "step": 10},
                        {"path": str(tmp_path / "out" / "checkpoint-200") + "/"},
                        {"path": "./runs/odd name!", "step": 7},
                    ],
                }
            ]
        }
    )
    entries = model_entries(cfg)
    assert [m["id"] for m in entries] == [
        str(tmp_path / "ckpt-a"),
        str(tmp_path / "out" / "checkpoint-200") + "/",
        "./runs/odd name!",
    ]
    assert [m["name"] for m in entries] == ["run@ckpt-a", "run@checkpoint-200", "run@odd_name"]
    assert [m["step"] for m in entries] == [10, 200, 7]
    assert all(m["revision"] is None and m["checkpoint_of"] == "run" for m in entries)


def test_unknown_per_model_keys_are_carried_to_every_revision() -> None:
    entry = {
        "id": "org/m",
        "name": "m",
        "revision": None,
        "device_map": "auto",
        "gpus": 2,
        "revisions": ["step1", {"path": "/ckpt/step2"}],
    }
    out = expand_revisions(entry, 0)
    assert [(m["name"], m["device_map"], m["gpus"]) for m in out] == [("m@step1", "auto", 2), ("m@step2", "auto", 2)]
    assert out[1]["id"] == "/ckpt/step2" and out[0]["id"] == "org/m"


@pytest.mark.parametrize(
    "models, where, reason",
    [
        ([{"id": "m", "revision": "main", "revisions": ["step1"]}], "models.0", "either `revision` or `revisions`"),
        ([{"id": "m", "revisions": [{"revision": "step1", "path": "/x"}]}], "models.0.revisions.0", "exactly one of"),
        ([{"id": "m", "revisions": [{"step": 3}]}], "models.0.revisions.0", "exactly one of"),
        (
            [{"id": "m", "revisions": ["step1", "step2", "step1"]}],
            "models.0.revisions.2",
            "revision 'step1' is listed twice (also item 0)",
        ),
        (
            [{"id": "m", "revisions": [{"path": "/c/step1"}, {"path": "/c/step1/"}]}],
            "models.0.revisions.1",
            "listed twice",
        ),
        (  # one folder spelled through `..`: the plain duplicate's message
            [{"id": "m", "revisions": [{"path": "/c/ckpt/step1"}, {"path": "/c/ckpt/../ckpt/step1/"}]}],
            "models.0.revisions.1",
            "path '/c/ckpt/../ckpt/step1/' is listed twice (also item 0)",
        ),
        (
            [{"id": "m", "revisions": [{"path": "ckpt/step1"}, {"path": "step2"}, {"path": "./ckpt/./step1"}]}],
            "models.0.revisions.2",
            "path './ckpt/./step1' is listed twice (also item 0)",
        ),
        ([{"id": "m", "revisions": ["step1", "main"]}], "models.0.revisions.1", "no training step for revision 'main'"),
        (
            [{"id": "m", "revisions": ["step5", {"revision": "main", "step": 5}]}],
            "models.0.revisions.1",
            "step 5 is also the step of item 0",
        ),
        (
            [{"id": "m", "revisions": [{"revision": "step5", "name": "final"}]}, {"id": "x", "name": "final"}],
            "model names",
            "duplicated: final",
        ),
    ],
)
def test_revision_errors(models: list[dict[str, Any]], where: str, reason: str) -> None:
    msg = _error({"models": models})
    assert f"cfg.yaml: {where}" in msg and reason in msg, msg


def test_a_checkpoint_folder_through_a_link_is_listed_twice(tmp_path: Path) -> None:
    (tmp_path / "ckpt" / "step1").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "ckpt")
    models = [
        {"id": "m", "revisions": [{"path": str(tmp_path / "ckpt/step1")}, {"path": str(tmp_path / "link/step1")}]}
    ]
    assert _error({"models": models}) == (
        f"cfg.yaml: models.0.revisions.1: path '{tmp_path}/link/step1' is listed twice (also item 0)"
    )


def test_schema_errors_of_revisions() -> None:
    assert "models.0.revisions" in _error({"models": [{"id": "m", "revisions": []}]})
    assert "models.0.revisions.0" in _error({"models": [{"id": "m", "revisions": [""]}]})
    msg = _error({"models": [{"id": "m", "revisions": [{"revision": "a", "stp": 3}]}]})
    assert "models.0.revisions.0" in msg and "'stp'" in msg
    assert "models.0.revisions.0.step" in _error(
        {"models": [{"id": "m", "revisions": [{"revision": "a", "step": -1}]}]}
    )
    assert "models.0.revisions.0.name" in _error(
        {"models": [{"id": "m", "revisions": [{"revision": "a", "name": "a b"}]}]}
    )


def test_check_config_counts_each_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str], no_hub: Path) -> None:
    # the hub models as a cache filled in advance leaves them (no hub is reached)
    fake_cached(no_hub, "EleutherAI/pythia-160m", ["step1000", "step2000", "step4000"])
    fake_cached(no_hub, "gpt2")
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(
        "models:\n  - {id: EleutherAI/pythia-160m, revisions: [step1000, step2000, step4000]}\n  - {id: gpt2}\n"
    )
    assert main(["check-config", str(cfg)]) == 0
    assert capsys.readouterr().out.strip() == f"{cfg}: OK (4 models)"


def test_steps_are_optional_without_the_checkpoint_figure() -> None:
    cfg = validate_config(
        {
            "models": [{"id": "m", "revisions": ["main", "v2"]}],
            "agreement": {"figures": {"checkpoints": {"enabled": False}}},
        }
    )
    assert [(m["name"], m["step"]) for m in model_entries(cfg)] == [("m@main", None), ("m@v2", None)]


def test_missing_local_checkpoint_names_its_key(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.json").write_text("{}")
    cfg = validate_config(
        {
            "models": [
                {"id": "gpt2"},
                {
                    "id": "run",
                    "revisions": [{"path": str(tmp_path / "a"), "step": 1}, {"path": str(tmp_path / "b"), "step": 2}],
                },
            ]
        }
    )
    with pytest.raises(
        VerbevalError,
        match=r"^cfg.yaml: models.1.revisions.1.path: model run@b: local path .*/b "
        r"does not exist$",
    ):
        check_model_paths(cfg, "cfg.yaml")


def test_table_models_patterns() -> None:
    names = ["p@step1", "p@step143000", "q@step143000", "gpt2"]
    assert select_models(names, None) == names
    assert select_models(names, ["gpt2", "*@step143000"]) == ["p@step143000", "q@step143000", "gpt2"]
    assert select_models(names, ["p@*"]) == ["p@step1", "p@step143000"]
    with pytest.raises(VerbevalError, match="'r@\\*' matches no model"):
        select_models(names, ["p@*", "r@*"])
    cfg = validate_config(
        {"models": [{"id": "p", "revisions": ["step1", "step2"]}], "agreement": {"table_models": ["*@step2"]}}
    )
    assert cfg["agreement"]["table_models"] == ["*@step2"]
    msg = _error({"models": [{"id": "p", "revisions": ["step1"]}], "agreement": {"table_models": ["p", "p@step9"]}})
    assert msg.startswith("cfg.yaml: agreement.table_models.0: 'p' matches no model (models: p@step1)"), msg
    assert "agreement.table_models" in _error({"models": [{"id": "p"}], "agreement": {"table_models": []}})


# --------------------------------------------------------------------------- the checkpoint figure

GROUPS = [{"id": "simple", "name": "Simple", "sources": ["x"]}, {"id": "blimp", "name": "BLiMP", "sources": ["y"]}]
#: (sweep, model, step) of a synthetic sweep of two models, listed out of step order
CHECKPOINTS = [("p", "p@step100", 100), ("p", "p@step0", 0), ("p", "p@step1000", 1000), ("q", "q@ckpt", 50)]


def _summary() -> pd.DataFrame:
    """summary_all-like rows: TSE and EW/MW at top p = 0.5 and 1 per model and group, with value
    = step / 10000 + an offset per group and metric (so each row is recognisable)."""
    rows = []
    steps = {m: s for _, m, s in CHECKPOINTS}
    for m in [*steps, "other"]:
        for gi, g in enumerate(["simple", "blimp", "prep"]):
            for mi, metric in enumerate(["tse", "ew", "mw"]):
                v = steps.get(m, 5000) / 10000 + 0.1 * gi + 0.01 * mi
                sides = [(np.nan, np.nan)] if metric == "tse" else [("top", 0.5), ("top", 1.0), ("bottom", 0.01)]
                for side, cut in sides:
                    val = v if metric == "tse" or cut == 1.0 else v + 0.3
                    rows.append(
                        {
                            "model": m,
                            "group": g,
                            "metric": metric,
                            "side": side,
                            "cutoff": cut,
                            "value": val,
                            "ci_low": val - 0.02,
                            "ci_high": val + 0.03,
                            "n": 8,
                            "n_total": 10,
                        }
                    )
    return pd.DataFrame(rows)


def test_checkpoint_curves_values() -> None:
    d = checkpoint_curves(_summary(), checkpoints=CHECKPOINTS, groups=GROUPS)
    assert len(d) == 4 * 2 * 3
    assert list(d.columns) == [
        "sweep",
        "step",
        "model",
        "group",
        "group_name",
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "n",
        "n_total",
    ]
    first = d.head(3)  # sweep p, group simple, metric tse, in step order
    assert first[["sweep", "model", "step", "group", "metric"]].values.tolist() == [
        ["p", "p@step0", 0, "simple", "tse"],
        ["p", "p@step100", 100, "simple", "tse"],
        ["p", "p@step1000", 1000, "simple", "tse"],
    ]
    np.testing.assert_allclose(first["value"], [0.0, 0.01, 0.1])
    blimp_mw = d[(d["sweep"] == "p") & (d["group"] == "blimp") & (d["metric"] == "mw")]
    np.testing.assert_allclose(blimp_mw["value"], [0.12, 0.13, 0.22])  # at top p = 1, not 0.5
    np.testing.assert_allclose(blimp_mw["ci_low"], [0.10, 0.11, 0.20])
    np.testing.assert_allclose(blimp_mw["ci_high"], [0.15, 0.16, 0.25])
    assert set(d["group_name"]) == {"Simple", "BLiMP"} and "other" not in set(d["model"])
    assert d[d["sweep"] == "q"]["step"].unique().tolist() == [50]


@pytest.mark.parametrize(
    "checkpoints, reason",
    [
        ([], "no checkpoints"),
        ([("p", "p@step0", 0), ("p", "p@step100", 0)], "two checkpoints at step 0"),
        ([("p", "p@step0", 0), ("q", "p@step0", 1)], "listed as a checkpoint twice"),
        ([("p", "p@step7", 7)], "summary has 0 rows of TSE for model 'p@step7'"),
    ],
)
def test_checkpoint_curves_errors(checkpoints: list[tuple[str, str, int]], reason: str) -> None:
    with pytest.raises(VerbevalError, match=reason):
        checkpoint_curves(_summary(), checkpoints=checkpoints, groups=GROUPS)


def _groups_file(tmp_path: Path) -> Path:
    p = tmp_path / "groups.yaml"
    p.write_text(
        "groups:\n"
        + "".join(f"  - {{id: {g['id']}, name: {g['name']}, sources: [{g['sources'][0]}]}}\n" for g in GROUPS)
    )
    return p


@pytest.mark.parametrize("log_x", [False, True])
def test_plot_checkpoints_cli(tmp_path: Path, log_x: bool) -> None:
    summary = tmp_path / "summary_all.csv"
    _summary().to_csv(summary, index=False)
    csv = tmp_path / "checkpoints.csv"
    images = [tmp_path / "checkpoints.png"] + ([] if log_x else [tmp_path / "checkpoints.pdf"])
    argv = ["-q", "plot-checkpoints", "--summary", str(summary), "--groups-file", str(_groups_file(tmp_path))]
    for sweep, model, step in CHECKPOINTS:
        argv += ["--checkpoint", sweep, model, str(step)]
    argv += ["--confidence", "0.95", "--csv", str(csv), "--out", *map(str, images)] + (["--log-x"] if log_x else [])
    assert main(argv) == 0
    d = pd.read_csv(csv)
    assert len(d) == 24 and set(d["group"]) == {"simple", "blimp"}
    row = d[(d["model"] == "q@ckpt") & (d["group"] == "blimp") & (d["metric"] == "ew")].iloc[0]
    assert (row["sweep"], row["step"]) == ("q", 50)
    assert row["value"] == pytest.approx(0.115) and row["ci_high"] == pytest.approx(0.145)
    assert images[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(p.read_bytes()[:5] == b"%PDF-" for p in images[1:])
    first = [p.read_bytes() for p in [csv, *images]]
    assert main(argv) == 0  # a rerun gives identical files
    assert [p.read_bytes() for p in [csv, *images]] == first
    bad = (
        argv[: argv.index("--checkpoint")]
        + ["--checkpoint", "p", "p@step0", "zero"]
        + argv[argv.index("--confidence") :]
    )
    assert main(bad) == 1


# --------------------------------------------------------------------------- the Table 2 filter


def test_table_filter(tmp_path: Path) -> None:
    s = _summary()
    summaries = []
    for m, part in s.groupby("model", sort=False):
        p = tmp_path / f"{m}.csv"
        part.to_csv(p, index=False)
        summaries.append(str(p))
    out = {k: tmp_path / f"table2.{k}" for k in ("csv", "md", "tex")}
    models = "p@step0,p@step100,p@step1000,q@ckpt,other"

    def run(*extra: str) -> int:
        return main(
            [
                "-q",
                "table",
                "--groups-file",
                str(_groups_file(tmp_path)),
                "--models",
                models,
                *extra,
                "--summaries",
                *summaries,
                "--csv",
                str(out["csv"]),
                "--md",
                str(out["md"]),
                "--tex",
                str(out["tex"]),
                "--all-csv",
                str(tmp_path / "all.csv"),
                "--metrics",
                str(tmp_path / "m.json"),
            ]
        )

    assert run() == 0
    full_all = (tmp_path / "all.csv").read_bytes()
    assert sorted(json.loads((tmp_path / "m.json").read_text())) == sorted(models.split(","))
    assert run("--table-models", "other,*@step1000") == 0
    t = pd.read_csv(out["csv"])
    blocks = [c.split(".")[0] for c in t.columns if c.endswith(".tse")]
    assert blocks == ["p@step1000", "other"]  # --models order, not pattern order
    assert t.loc[t["group"] == "blimp", "p@step1000.tse"].iloc[0] == pytest.approx(0.2)
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert sorted(metrics) == ["other", "p@step1000"]
    assert metrics["other"]["simple"]["mw"] == pytest.approx(0.52)
    assert "p@step1000 TSE" in out["md"].read_text() and "p@step0" not in out["md"].read_text()
    assert (tmp_path / "all.csv").read_bytes() == full_all  # summary_all keeps every model
    assert run("--table-models", "nope*") == 1


# --------------------------------------------------------------------------- the DAG of three local checkpoints


def _stand_in_checkpoints(root: Path, names: list[str]) -> list[Path]:
    """Checkpoint folders ``root/NAME`` holding only a ``config.json`` of ``{}``: what planning reads."""
    folders = [root / name for name in names]
    for folder in folders:
        folder.mkdir()
        (folder / "config.json").write_text("{}\n")
    return folders


def test_three_local_checkpoints_dag(tmp_path: Path) -> None:
    """Three local "checkpoints" under one model's revisions: three lemmas, infer and aggregate jobs,
    Table 2 restricted by agreement.table_models, and the checkpoint figure. Planning reads a local
    model's folder and config.json only (conftest.stand_in_models), so stand-ins do."""
    ckpts = _stand_in_checkpoints(tmp_path, [f"ckpt-{step}" for step in (0, 100, 1000)])
    cfg = {
        "raw_dir": str(tmp_path / "raw"),
        "results_dir": str(tmp_path / "results"),
        "models": [
            {
                "id": "tiny-run",
                "name": "tiny",
                "revisions": [{"path": str(c), "step": s} for c, s in zip(ckpts, (0, 100, 1000))],
            }
        ],
        "agreement": {
            "groups": ["simple"],
            "max_rows_per_source": 5,
            "table_models": ["*@ckpt-1000"],
            "figures": {"checkpoints": {"log_x": True}},
        },
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    wd = checkout_view(tmp_path / "wd")
    run = dry_run(wd, [path])
    stats = run.stats
    # the sweep is one queue job (inference.revisions_per_job): no per-revision job of any step
    assert stats["queue_0"] == 1 and not {"infer", "lemmas", "aggregate", "lemma_stats"} & set(stats)
    assert stats["figure_checkpoints"] == 1 and stats["table2"] == 1
    [queue] = run.of("queue_0")
    assert sorted(o for o in queue["outputs"] if o.endswith("/shards/manifest.json")) == [
        f"{tmp_path}/results/agreement/tiny@ckpt-{s}/shards/manifest.json" for s in (0, 100, 1000)
    ]
    [table2] = run.commands("table2")
    assert "--models tiny@ckpt-0,tiny@ckpt-100,tiny@ckpt-1000 --table-models tiny@ckpt-1000 " in table2
    # the model comparison: one model per entry, the sweep's last revision (table_models is Table 2's only)
    [models] = run.commands("figure_models")
    assert " --models tiny@ckpt-1000 " in models, models
    [figure] = run.of("figure_checkpoints")
    assert (
        "--checkpoint tiny tiny@ckpt-0 0 --checkpoint tiny tiny@ckpt-100 100 --checkpoint tiny tiny@ckpt-1000 1000 "
    ) in figure["cmd"]
    assert " --log-x " in figure["cmd"]
    assert f"{tmp_path}/results/agreement/figures/checkpoints.png" in figure["outputs"]
    # the DVC pipeline of the same config: one stage for the sweep's queue
    from verbeval.workflow.dvc_yaml import dvc_pipeline, workflow_jobs

    stages = dvc_pipeline(workflow_jobs(REPO / "Snakefile", [path], wd), [str(path)], REPO)["stages"]
    assert not [n for n in stages if n.startswith(("infer", "lemmas", "aggregate"))]
    assert f"{tmp_path}/results/agreement/tiny@ckpt-100/simple/summary.csv" in stages["queue_0"]["outs"]
    fig = stages["figure_checkpoints"]
    # an ordinary output: DVC plots are only the per-series views of Figures 1-4 (verbeval.agreement.report.dvc_views)
    assert "plots" not in fig
    assert f"{tmp_path}/results/agreement/figures/checkpoints.csv" in fig["outs"]
    assert fig["params"] == [{str(path): ["models", "agreement.figures.checkpoints"]}]


def test_hub_sweep_dag_scores_every_revision_on_simverb(tmp_path: Path) -> None:
    """Revisions of one hub id are distinct models for SimVerb too (the same id twice used to
    collapse into one SimVerb model name and stop the workflow)."""
    path = tmp_path / "cfg.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "results_dir": str(tmp_path / "results"),
                "models": [
                    {"id": "EleutherAI/pythia-160m", "name": "p", "revisions": ["step1000", "step143000"]},
                    {"id": "gpt2"},
                ],
            }
        )
    )
    run = dry_run(checkout_view(tmp_path / "wd"), [path])
    # SimVerb of each revision runs in that revision's run-model step of the sweep's queue job, from the same load
    assert "simverb_score" not in run.stats and run.stats["infer"] == 1 and run.stats["figure_checkpoints"] == 1
    assert [j["wildcards"]["model"] for j in run.of("infer")] == ["gpt2"]
    [queue] = run.of("queue_0")
    steps = queue_steps(queue["cmd"])
    [late] = [s for s in steps if s[0] == "run-model" and "step143000" in s]
    assert late[:5] == ["run-model", "--model", "EleutherAI/pythia-160m", "--revision", "step143000"]
    assert f"{tmp_path}/results/simverb/p@step1000/similarities.parquet" in queue["outputs"]


def queue_steps(cmd: str) -> list[list[str]]:
    """The steps (argument lists after ``verbeval``) of a queue job's ``verbeval run-queue`` command."""
    import shlex

    words = shlex.split(cmd)
    steps = [shlex.split(words[i + 1]) for i, w in enumerate(words) if w == "--job"]
    threads = words[words.index("--threads") + 1]  # run-queue's --threads replaces the steps' own
    return [[threads if k and s[k - 1] == "--threads" else w for k, w in enumerate(s)] for s in steps]


def own_command(cmd: str) -> list[str]:
    """A per-model rule's command as arguments after ``verbeval``, without its log redirection."""
    import shlex

    words = shlex.split(cmd)
    assert words[0] == "verbeval" and words[-2] == "2>"
    return words[1:-2]


def test_queue_steps_are_the_per_model_rules_commands(tmp_path: Path) -> None:
    """Every step of a sweep's queue job is, word for word, the command its own rule runs when the
    sweep is not queued (inference.revisions_per_job: 0, one job per revision and step), so a queue
    writes the same files; and revisions_per_job cuts the sweep into consecutive chunks."""
    ckpts = _stand_in_checkpoints(tmp_path, [f"step-{step}" for step in (10, 20, 30)])
    cfg = {
        "raw_dir": str(tmp_path / "raw"),
        "results_dir": str(tmp_path / "results"),
        "models": [
            {"name": "sw", "kind": "causal", "family": "sw", "revisions": [{"path": str(c)} for c in ckpts]},
            {"id": "gpt2"},
        ],
        "agreement": {"groups": ["simple", "prep"], "max_rows_per_source": 5},
    }
    wd = checkout_view(tmp_path / "wd")
    queued_cfg, alone_cfg = tmp_path / "queued.yaml", tmp_path / "alone.yaml"
    queued_cfg.write_text(yaml.safe_dump({**cfg, "inference": {"revisions_per_job": 2}}))
    alone_cfg.write_text(yaml.safe_dump({**cfg, "inference": {"revisions_per_job": 0}}))
    queued, alone = dry_run(wd, [queued_cfg]), dry_run(wd, [alone_cfg])
    assert queued.stats["queue_0"] == queued.stats["queue_1"] == 1 and queued.stats["infer"] == 1
    assert alone.stats["infer"] == 4 and alone.stats["lemmas"] == 4 and "queue_0" not in alone.stats
    steps = {r: queue_steps(j["cmd"]) for r in ("queue_0", "queue_1") for j in queued.of(r)}
    expected: dict[str, list[list[str]]] = {}
    for rule in ("lemmas", "infer", "aggregate", "lemma_stats"):
        for j in alone.of(rule):
            expected.setdefault(j["wildcards"]["model"], []).append(own_command(j["cmd"]))
    sweep = [f"sw@step-{s}" for s in (10, 20, 30)]
    for rule, names in (("queue_0", sweep[:2]), ("queue_1", sweep[2:])):
        # per revision, in order: lemmas, run-model, aggregate, lemma-stats
        assert [s[0] for s in steps[rule]] == ["lemmas", "run-model", "aggregate", "lemma-stats"] * len(names)
        for k, name in enumerate(names):
            assert sorted(steps[rule][4 * k : 4 * k + 4]) == sorted(expected[name])
    # the queue's outputs are the per-model jobs' outputs
    own_outputs = {
        o for r in ("lemmas", "infer", "aggregate", "lemma_stats") for j in alone.of(r) for o in j["outputs"]
    }
    queue_outputs = {o for r in ("queue_0", "queue_1") for j in queued.of(r) for o in j["outputs"]}
    assert queue_outputs == {o for o in own_outputs if any(f"/{n}/" in o for n in sweep)}


# --------------------------------------------------------------------------- sweeps named by data seen


@pytest.mark.parametrize(
    "label, unit, value",
    [
        ("chck_1M", "words", 1_000_000),
        ("chck_10M", "words", 10_000_000),
        ("chck_1000M", "words", 1_000_000_000),
        ("chck_0.5M", "words", 500_000),
        ("chck_100K", "words", 100_000),
        ("words2B", "words", 2_000_000_000),
        ("chck_1.0000005K", "words", None),  # not a whole number of words
        ("step1000-tokens4B", "tokens", 4_000_000_000),
        ("stage1-step5000-tokens21B", "tokens", 21_000_000_000),
        ("step1000-tokens4B", "words", None),
        ("chck_10M", "tokens", None),
        ("main", "words", None),
        ("main", "tokens", None),
        ("step1000", "tokens", None),
        ("chck_10Mx", "words", None),
    ],
)
def test_parse_seen(label: str, unit: str, value: int | None) -> None:
    assert parse_seen(label, unit) == value


def test_words_axis_sweep_expands_with_words_seen() -> None:
    cfg = validate_config(
        {
            "models": [
                {
                    "id": "babylm/gpt2",
                    "name": "baby",
                    "revisions": ["chck_1M", "chck_10M", {"revision": "main", "words": 2_000_000_000}],
                }
            ],
            "agreement": {"checkpoint_axis": "words"},
        }
    )
    got = [(m["name"], m["step"], m["tokens"], m["words"]) for m in model_entries(cfg)]
    assert got == [
        ("baby@chck_1M", None, None, 1_000_000),
        ("baby@chck_10M", None, None, 10_000_000),
        ("baby@main", None, None, 2_000_000_000),  # given explicitly
    ]
    olmo = {"id": "allenai/OLMo-1B", "name": "olmo", "revisions": [{"revision": "step1000-tokens4B", "tokens": 5}]}
    [m] = expand_revisions(olmo, 0, axis="tokens")
    assert (m["step"], m["tokens"], m["words"]) == (1000, 5, None)  # an explicit value wins over the name's


@pytest.mark.parametrize(
    "models, axis, where, reason",
    [
        (
            [{"id": "m", "revisions": ["step1000-tokens4B", "step2000"]}],
            "tokens",
            "models.0.revisions.1",
            "no tokens seen for revision 'step2000' (agreement.checkpoint_axis is tokens): set `tokens:`",
        ),
        (
            [{"id": "m", "revisions": ["chck_1M", "step5"]}],
            "words",
            "models.0.revisions.1",
            "no words seen for revision 'step5' (agreement.checkpoint_axis is words): set `words:` (it is read "
            "only from names like chck_10M or words10M)",
        ),
        (
            [{"id": "m", "revisions": ["chck_1M", {"revision": "main", "words": 1000000}]}],
            "words",
            "models.0.revisions.1",
            "words value 1000000 is also the words value of item 0",
        ),
    ],
)
def test_checkpoint_axis_errors(models: list[dict[str, Any]], axis: str, where: str, reason: str) -> None:
    msg = _error({"models": models, "agreement": {"checkpoint_axis": axis}})
    assert f"cfg.yaml: {where}: " in msg and reason in msg, msg


def test_checkpoint_axis_key_is_validated() -> None:
    msg = _error({"models": [{"id": "m"}], "agreement": {"checkpoint_axis": "epochs"}})
    assert "agreement.checkpoint_axis" in msg and "epochs" in msg, msg
    # the words axis needs no step: a sweep of BabyLM names is valid with it, not with steps
    ok = validate_config({"models": [{"id": "m", "revisions": ["chck_1M"]}], "agreement": {"checkpoint_axis": "words"}})
    assert model_entries(ok)[0]["words"] == 1_000_000
    assert "no training step for revision 'chck_1M'" in _error({"models": [{"id": "m", "revisions": ["chck_1M"]}]})


def test_plot_checkpoints_cli_words_axis(tmp_path: Path) -> None:
    """--x-axis words: the CSV's x column is words, the figure's axis says words seen."""
    from verbeval.agreement.report.plots import plot_checkpoints

    summary = tmp_path / "summary_all.csv"
    _summary().to_csv(summary, index=False)
    csv = tmp_path / "checkpoints.csv"
    argv = ["-q", "plot-checkpoints", "--summary", str(summary), "--groups-file", str(_groups_file(tmp_path))]
    words = {"p@step0": 1_000_000, "p@step100": 10_000_000, "p@step1000": 100_000_000, "q@ckpt": 1_000_000_000}
    for sweep, model, _ in CHECKPOINTS:
        argv += ["--checkpoint", sweep, model, str(words[model])]
    argv += ["--x-axis", "words", "--log-x", "--csv", str(csv), "--out", str(tmp_path / "c.png")]
    assert main(argv) == 0
    d = pd.read_csv(csv)
    assert "words" in d.columns and "step" not in d.columns
    assert d.loc[d["model"] == "q@ckpt", "words"].unique().tolist() == [1_000_000_000]
    assert d.loc[d["sweep"] == "p", "words"].drop_duplicates().tolist() == [1_000_000, 10_000_000, 100_000_000]
    data = checkpoint_curves(_summary(), checkpoints=CHECKPOINTS, groups=GROUPS)
    fig = plot_checkpoints(data, log_x=True, x_label="words seen")
    assert fig.axes[0].get_xlabel() == "words seen (symmetric log scale)"  # a checkpoint at 0
    assert "against words seen" in fig._suptitle.get_text()


# --------------------------------------------------------------------------- one sweep, one model

GPT2_CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_layer": 2}
BERT_CONFIG = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 28996}


def _checkpoint(folder: Path, config: dict[str, Any], vocab: str = '{"a": 0}') -> str:
    """A checkpoint folder as planning reads it: config.json and a vocabulary file (no weights)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.json").write_text(vocab)
    return str(folder)


def _sweep(paths: list[str], kind: str = "causal") -> dict[str, Any]:
    revisions = [{"path": p, "step": 10 * (i + 1)} for i, p in enumerate(paths)]
    return validate_config({"models": [{"id": "gpt2"}, {"name": "run", "kind": kind, "revisions": revisions}]})


@pytest.mark.parametrize(
    "odd, vocab, why",
    [
        (BERT_CONFIG, '{"a": 0}', "config.json model_type is 'bert', not 'gpt2'"),
        (
            {**GPT2_CONFIG, "architectures": ["GPT2ForSequenceClassification"]},
            '{"a": 0}',
            "config.json architectures is ['GPT2ForSequenceClassification'], not ['GPT2LMHeadModel']",
        ),
        ({**GPT2_CONFIG, "vocab_size": 50258}, '{"a": 0}', "config.json vocab_size is 50258, not 50257"),
        (GPT2_CONFIG, '{"b": 0}', "its tokenizer's vocab.json differs"),
    ],
)
def test_a_sweep_of_another_model_stops_at_planning(
    tmp_path: Path, odd: dict[str, Any], vocab: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny BERT among GPT-2 checkpoints (kind: causal would score it as a causal LM and pair it
    with them): one line naming the entry, the revision and what differs; each config.json read once."""
    import verbeval.core.model_checks as checks

    paths = [_checkpoint(tmp_path / f"a{i}", GPT2_CONFIG) for i in (1, 2)]
    paths.insert(1, _checkpoint(tmp_path / "odd", odd, vocab))
    reads: list[str] = []
    read = checks._sweep_facts
    monkeypatch.setattr(checks, "_sweep_facts", lambda folder: reads.append(folder) or read(folder))
    with pytest.raises(VerbevalError) as err:
        check_model_paths(_sweep(paths), "cfg.yaml")
    assert str(err.value) == (
        f"cfg.yaml: models.1.revisions.1.path: sweep run: revision run@odd is not a checkpoint of the same model "
        f"as run@a1: {why}; one entry's revisions share architecture and tokenizer (list another model as an "
        "entry of its own)"
    )
    assert reads == paths[:2]  # stopped at the odd one: the first two configs read once each


def test_a_sweep_of_one_model_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints of one model pass, each config.json read once and no weights (a damaged weights
    file is not opened); a hub revision, a stand-in config of `{}` and a missing key are not compared."""
    import verbeval.core.model_checks as checks

    paths = [_checkpoint(tmp_path / f"a{i}", GPT2_CONFIG) for i in range(3)]
    for p in paths:
        (Path(p) / "model.safetensors").write_bytes(b"not a safetensors file")
    paths.append(_checkpoint(tmp_path / "stand-in", {}))
    paths.append(_checkpoint(tmp_path / "no-vocab-size", {k: v for k, v in GPT2_CONFIG.items() if k != "vocab_size"}))
    reads: list[str] = []
    read = checks._sweep_facts
    monkeypatch.setattr(checks, "_sweep_facts", lambda folder: reads.append(folder) or read(folder))
    cfg = _sweep(paths)
    cfg["models"][1]["revisions"].append({"revision": "step999"})  # a hub revision: nothing known offline
    cfg["models"][1]["id"] = "org/run"
    check_model_paths(validate_config(cfg), "cfg.yaml")
    assert reads == paths
