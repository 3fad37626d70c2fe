"""The DVC pipelines are generated from the Snakemake workflow and must not drift from it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CI_CONFIG, REPO_ROOT, checkout_view, stand_in_models
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.workflow.dvc_yaml import JobSpec, _params, dvc_pipeline, rule_config_keys, stage_name, workflow_jobs

REPO = REPO_ROOT
CI = str(CI_CONFIG.relative_to(REPO))  # .test/config/ci.yaml
SMALL = ".test/config/small.yaml"  # CI's smallest configuration, on ci.yaml: the SLURM stage's and DVC's
PIPELINES = [(["config/config.yaml"], "dvc.yaml"), (["config/config.yaml", CI, SMALL], "pipelines/ci/dvc.yaml")]


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory that reads as the checkout (:func:`conftest.checkout_view`), with the CI
    configuration's local model folders and a copy of the committed pipelines.

    Planning the DAG needs each local model folder to exist with a ``config.json``, so that its
    jobs name it as a dependency (a job checks the model itself when it runs); what these tests check
    (stage names, commands, dependencies, the committed pipelines/ci/dvc.yaml) depends on nothing
    inside it, so the folders are empty stand-ins beside the checkout, not the models .ci/run builds.
    Nothing is written into the checkout.
    """
    root = tmp_path_factory.mktemp("dvc")
    wd = checkout_view(root / "wd", models=stand_in_models(root / "models"))
    for _, out in PIPELINES:
        (wd / out).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / out, wd / out)
    return wd


@pytest.fixture(scope="module")
def ci_jobs(view: Path) -> list[JobSpec]:
    return workflow_jobs(REPO / "Snakefile", [REPO / "config/config.yaml", CI_CONFIG], view)


@pytest.mark.parametrize("configs, out", PIPELINES)
def test_committed_pipelines_match_the_workflow(
    configs: list[str], out: str, view: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(view)  # the checkout's files, a copy of the committed pipeline
    code = main(["-q", "dvc-yaml", "--configfile", *configs, "--out", out, "--check"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "up to date" in captured.out


def test_check_fails_on_drift(
    tmp_path: Path, view: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    stale = tmp_path / "dvc.yaml"
    stale.write_text((REPO / "dvc.yaml").read_text().replace("--resamples 1000", "--resamples 999"))
    code = main(["-q", "dvc-yaml", "--out", str(stale), "--root", str(view), "--check"])
    assert code == 1
    assert "out of date with the workflow" in capsys.readouterr().err


def test_every_rule_runs_one_declared_step(ci_rules: Any) -> None:
    """Each rule with a command runs exactly one declared step (or is a queue of them), whose keys are
    the rule's DVC params, each a key of the configuration schema; a rule of no step is an error."""
    from verbeval.core.config import schema_entry
    from verbeval.workflow.queues import is_queue_rule
    from verbeval.workflow.steps import declared_steps

    rules = [r for r in ci_rules.rules if r.shellcmd]
    assert len(rules) >= 25
    owners: dict[str, list[str]] = {}
    for step in declared_steps():
        for rule in step.rules:
            owners.setdefault(rule, []).append(step.command)
    for rule in rules:
        assert is_queue_rule(rule.name) or len(owners.get(rule.name, [])) == 1, (rule.name, owners.get(rule.name))
        for key in rule_config_keys(rule.name):
            assert schema_entry(key) is not None, (rule.name, key)
        assert "Config:" not in (rule.docstring or "")
    assert rule_config_keys("aggregate") == (
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.top_cutoffs",
        "agreement.bottom_cutoffs",
        "agreement.bootstrap.resamples",
        "agreement.bootstrap.seed",
        "agreement.bootstrap.confidence",
        "agreement.bootstrap.cluster",
    )  # its step's (verbeval.agreement.steps.AGGREGATE)
    assert rule_config_keys("lemma_stats") == ()
    with pytest.raises(VerbevalError, match="rule 'r' runs no declared step"):
        rule_config_keys("r")
    job = JobSpec("r", {}, (), ("out",), (), "cmd", config_keys=("models",))
    cfgs = ["config/config.yaml"]
    assert dvc_pipeline([job], cfgs, REPO)["stages"]["r"]["params"] == [{"config/config.yaml": ["models"]}]


def test_every_job_is_a_stage(ci_jobs: list[JobSpec]) -> None:
    pipeline = dvc_pipeline(ci_jobs, ["config/config.yaml", CI], REPO, "../..")
    stages = pipeline["stages"]
    assert len(stages) == len([j for j in ci_jobs if j.rule != "all"])
    # one inference stage per model in the CI configuration (every group and chunk in one process)
    infer = sorted(name for name in stages if name.startswith("infer--"))
    assert infer == [
        "infer--tiny-bert-cased",
        "infer--tiny-gpt-neox",
        "infer--tiny-gpt2",
        "infer--tiny-mistral",
        "infer--tiny-olmo2",
    ]


def test_stage_runs_the_snakemake_command(ci_jobs: list[JobSpec]) -> None:
    job = next(j for j in ci_jobs if j.rule == "infer" and j.wildcards == {"model": "tiny-gpt2"})
    stage = dvc_pipeline([job], ["config/config.yaml", CI], REPO)["stages"][stage_name(job)]
    assert stage_name(job) == "infer--tiny-gpt2"
    assert stage["cmd"] == "mkdir -p results-ci/logs/agreement/tiny-gpt2 && " + job.cmd
    assert job.cmd.startswith("verbeval run-model --model models/tiny-gpt2 ")
    assert "--no-progress --manifest results-ci/agreement/tiny-gpt2/shards/manifest.json" in job.cmd
    # the one job of the model: its form shards (multitoken on in ci.yaml) and SimVerb embeddings too
    assert "--forms-manifest=results-ci/agreement/lexicon_modes/tiny-gpt2/shards/manifest.json" in job.cmd
    assert "--simverb-out results-ci/simverb/tiny-gpt2/similarities.parquet" in job.cmd
    # the local model directory is a dependency: a new checkpoint reruns the stage
    assert stage["deps"] == [
        "results-ci/agreement/templates.parquet",
        "results-ci/agreement/tiny-gpt2/lemmas.parquet",
        "models/tiny-gpt2",
        "results-ci/agreement/lexicon_modes/tiny-gpt2/forms.parquet",
        "data/raw-ci/simverb_3500/SimVerb-3500.txt",
    ]
    # the manifests are the outputs; the shards beside them survive DVC's removal of a stage's outs, and
    # the manifests are neither run-cached nor checked out alone (tests/test_dvc_store.py); the SimVerb
    # outputs are kept across failed runs (update(): DVC persist)
    store = {"cache": False, "persist": True}
    assert stage["outs"] == [
        {"results-ci/simverb/tiny-gpt2/similarities.parquet": {"persist": True}},
        {"results-ci/simverb/tiny-gpt2/verbs.csv": {"persist": True}},
        {"results-ci/agreement/tiny-gpt2/shards/manifest.json": store},
        {"results-ci/agreement/lexicon_modes/tiny-gpt2/shards/manifest.json": store},
    ]
    # keys set in ci.yaml come from it, the others from config.yaml
    assert stage["params"][0] == {
        CI: ["models", "inference", "agreement.multitoken.enabled", "agreement.multitoken.groups", "agreement.chunks"]
    }
    assert stage["params"][1]["config/config.yaml"][:2] == ["agreement.groups", "agreement.custom_groups"]


def test_a_raw_copy_is_neither_removed_nor_replaced_by_dvc(ci_jobs: list[JobSpec]) -> None:
    """A fetch stage's raw copy is ``persist`` (not removed before the stage runs) and ``cache: false``:
    DVC replaces a cached output by a copy from its cache after every run, with a new mtime, although
    `verbeval fetch` kept it (tests/test_fetch_workflow.py runs it between two Snakemake runs)."""
    job = next(j for j in ci_jobs if j.rule == "fetch" and j.wildcards["name"] == "verbs_combined")
    stage = dvc_pipeline([job], ["config/config.yaml", CI], REPO)["stages"][stage_name(job)]
    assert stage["outs"] == [{"data/raw-ci/verbs_combined/combined_verb_list.csv": {"cache": False, "persist": True}}]
    assert stage["params"][-1] == {"resources/manifest.yaml": ["sources.verbs_combined.sha256"]}


def test_only_a_root_pipeline_declares_metrics(ci_jobs: list[JobSpec]) -> None:
    jobs = [j for j in ci_jobs if j.rule in ("table2", "dvc_metrics")]
    stages = dvc_pipeline(jobs, ["config/config.yaml", CI], REPO)["stages"]
    # Table 2 as one {tse, ew, mw} file per model and group; metrics.json is a plain output
    assert stages["dvc_metrics"]["metrics"][:2] == [
        {"results-ci/agreement/metrics/tiny-bert-cased/simple.json": {"cache": False}},
        {"results-ci/agreement/metrics/tiny-bert-cased/sent_comp.json": {"cache": False}},
    ]
    assert (
        len(stages["dvc_metrics"]["metrics"]) == 5 * 10 and "outs" not in stages["dvc_metrics"]
    )  # 5 CI models x 10 groups
    assert "results-ci/agreement/metrics.json" in stages["table2"]["outs"] and "metrics" not in stages["table2"]
    # a pipeline in a subdirectory (pipelines/ci) declares none: its outputs are plain outs
    sub = dvc_pipeline(jobs, ["config/config.yaml", CI], REPO, "../..")["stages"]
    assert "metrics" not in sub["dvc_metrics"]
    assert sub["dvc_metrics"]["outs"] == [next(iter(m)) for m in stages["dvc_metrics"]["metrics"]]


def test_params_take_each_key_from_the_last_file_that_sets_it() -> None:
    cfgs = [
        ("a.yaml", {"agreement": {"top_cutoffs": [1], "bootstrap": {"seed": 0}}, "models": []}),
        ("b.yaml", {"agreement": {"bootstrap": {"seed": 1}}}),
    ]
    keys = ("agreement.groups", "agreement.top_cutoffs", "agreement.bootstrap")
    assert _params(keys, cfgs) == [{"a.yaml": ["agreement.top_cutoffs"]}, {"b.yaml": ["agreement.bootstrap"]}]


def test_root_pipeline_is_valid_yaml_with_paper_models() -> None:
    data = yaml.safe_load((REPO / "dvc.yaml").read_text())
    infer = [n for n in data["stages"] if n.startswith("infer--")]
    assert sorted(infer) == [
        "infer--bert-large-cased",
        "infer--bert-large-uncased",
        "infer--gpt2-xl",
        "infer--roberta-large",
    ]
    assert any(n.endswith("--gpt2-xl") for n in infer)


def test_figure_data_are_dvc_plots_with_existing_columns(ci_jobs: list[JobSpec]) -> None:
    from verbeval.simverb.statistics import LAYER_COLUMNS
    from verbeval.veridicality.report import SCATTER_COLUMNS
    from verbeval.workflow.dvc_yaml import PLOTS

    columns = {"veridicality_scatter.csv": SCATTER_COLUMNS, "simverb_layers.csv": LAYER_COLUMNS}
    for name, spec in PLOTS.items():
        cols = columns[name]
        assert spec["x"] in cols and spec["y"] in cols, name
    stages = dvc_pipeline(ci_jobs, ["config/config.yaml", CI], REPO)["stages"]
    declared = {Path(next(iter(p))).name for s in stages.values() for p in s.get("plots", [])}
    # the checkpoint figure exists only with revisions (tests/test_revisions.py checks its stage)
    assert declared == set(PLOTS) - {"checkpoints.csv"}


def test_no_dvc_lock_file_is_git_ignored() -> None:
    """DVC refuses to run a pipeline whose dvc.lock git ignores ("'…/dvc.lock' is git-ignored")."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    locks = ["dvc.lock", "pipelines/ci/dvc.lock"]
    # a process: git's own reading of every .gitignore (and info/exclude) is what DVC consults; cheap
    proc = subprocess.run(["git", "check-ignore", "--no-index", *locks], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == "", f"git ignores {proc.stdout.split()}"


def test_a_setup_error_of_the_workflow_is_one_error_line(view: Path, tmp_path: Path) -> None:
    """A ConfigError of the workflow's parse (here: a mirror without the data) reaches `verbeval dvc-yaml`
    as one VerbevalError line, not as Snakemake's exception (whose traceback common.smk hides)."""
    from verbeval.core.errors import VerbevalError

    bad = tmp_path / "bad.yaml"
    bad.write_text(f"data_mirror: /nonexistent-mirror\nraw_dir: {tmp_path / 'raw'}\n")
    with pytest.raises(VerbevalError, match=r"data_mirror /nonexistent-mirror: missing \d+ file\(s\)") as exc:
        workflow_jobs(REPO / "Snakefile", [REPO / "config/config.yaml", bad], view)
    assert "\n" not in str(exc.value)
