"""The DVC pipelines are generated from the Snakemake workflow and must not drift from it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from verbeval.cli import main
from verbeval.dvc import RULE_PARAMS, JobSpec, _params, dvc_pipeline, stage_name, workflow_jobs

REPO = Path(__file__).resolve().parents[1]
PIPELINES = [
    (["config/config.yaml"], "dvc.yaml"),
    (["config/config.yaml", "config/ci.yaml"], "pipelines/ci/dvc.yaml"),
]


#: the CI configuration's local models as .ci/run builds them (folder, architecture, tokenizer), and a
#: stand-in tokenizer that the tests can rebuild without ../shared (tests/tokenizer_sources.py)
CI_MODELS = (("tiny-bert-base-cased", "bert", "bert-base-cased", "bert-base-uncased"),
             ("tiny-gpt2", "gpt2", "gpt2", "gpt2"),
             ("tiny-mistral", "mistral", "mistral_v1_spm", "gpt2"),
             ("tiny-gpt-neox", "gpt-neox", "gpt_neox_olmo1", "gpt_neox_olmo1"),
             ("tiny-olmo2", "olmo2", "olmo2_dolma2", "olmo2_dolma2"),
             ("tiny-bert-nli", "bert-nli", "bert-base-uncased", "bert-base-uncased"))


@pytest.fixture(scope="module", autouse=True)
def ci_models(tokenizer_or: Callable[[str, str], Path]) -> None:
    """The CI configuration's local models: their directories are DVC dependencies, so they must
    exist when the pipeline is generated (.ci/run makes them the same way).

    What these tests check (stage names, commands, dependencies, the committed pipelines/ci/dvc.yaml)
    depends on the folders' names and existence only, not on the tokenizer inside: without ../shared,
    tiny-bert-base-cased is built on bert-base-uncased and tiny-mistral on gpt2 (their marker file
    says so). A folder already there is kept, unless it was built on a stand-in and the real
    tokenizer can now be had.
    """
    import shutil

    from verbeval.core.models import make_tiny_model
    from verbeval.core.provenance import random_init_record

    for name, arch, real, standin in CI_MODELS:
        out = REPO / "models" / name
        tok = tokenizer_or(real, standin)
        if (out / "config.json").exists():
            built_on = (random_init_record(out) or {}).get("tokenizer")
            if not (built_on == standin != real == tok.name):
                continue
            shutil.rmtree(out)  # a stand-in's files (vocab.json, ...) must not stay beside the real ones
        make_tiny_model(tok, arch, out)


@pytest.fixture(scope="module")
def ci_jobs() -> list[JobSpec]:
    return workflow_jobs(REPO / "Snakefile", [REPO / "config/config.yaml", REPO / "config/ci.yaml"], REPO)


@pytest.mark.parametrize("configs, out", PIPELINES)
def test_committed_pipelines_match_the_workflow(configs: list[str], out: str, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    code = main(["-q", "dvc-yaml", "--configfile", *configs, "--out", out, "--check"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "up to date" in captured.out


def test_check_fails_on_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    stale = tmp_path / "dvc.yaml"
    stale.write_text((REPO / "dvc.yaml").read_text().replace("--resamples 1000", "--resamples 999"))
    code = main(["-q", "dvc-yaml", "--out", str(stale), "--root", str(REPO), "--check"])
    assert code == 1
    assert "out of date with the workflow" in capsys.readouterr().err


def test_every_rule_has_params_and_every_job_a_stage(ci_jobs: list[JobSpec]) -> None:
    rules = {j.rule for j in ci_jobs} - {"all"}
    assert rules <= set(RULE_PARAMS), rules - set(RULE_PARAMS)
    pipeline = dvc_pipeline(ci_jobs, ["config/config.yaml", "config/ci.yaml"], REPO, "../..")
    stages = pipeline["stages"]
    assert len(stages) == len([j for j in ci_jobs if j.rule != "all"])
    # one inference stage per model in the CI configuration (every group and chunk in one process)
    infer = sorted(name for name in stages if name.startswith("infer--"))
    assert infer == ["infer--tiny-bert-cased", "infer--tiny-gpt-neox", "infer--tiny-gpt2", "infer--tiny-mistral",
                     "infer--tiny-olmo2"]


def test_stage_runs_the_snakemake_command(ci_jobs: list[JobSpec]) -> None:
    job = next(j for j in ci_jobs if j.rule == "infer" and j.wildcards == {"model": "tiny-gpt2"})
    stage = dvc_pipeline([job], ["config/config.yaml", "config/ci.yaml"], REPO)["stages"][stage_name(job)]
    assert stage_name(job) == "infer--tiny-gpt2"
    assert stage["cmd"] == "mkdir -p results-ci/logs/agreement/tiny-gpt2 && " + job.cmd
    assert job.cmd.startswith("verbeval run-model --model models/tiny-gpt2 ")
    assert "--no-progress --manifest results-ci/agreement/tiny-gpt2/shards/manifest.json" in job.cmd
    # the one job of the model: its form shards (multitoken on in ci.yaml) and SimVerb embeddings too
    assert "--forms-manifest=results-ci/agreement/lexicon_modes/tiny-gpt2/shards/manifest.json" in job.cmd
    assert "--simverb-out results-ci/simverb/tiny-gpt2/similarities.parquet" in job.cmd
    # the local model directory is a dependency: a new checkpoint reruns the stage
    assert stage["deps"] == ["results-ci/agreement/templates.parquet", "results-ci/agreement/tiny-gpt2/lemmas.parquet",
                             "models/tiny-gpt2", "results-ci/agreement/lexicon_modes/tiny-gpt2/forms.parquet",
                             "data/raw-ci/simverb_3500/SimVerb-3500.txt"]
    # the manifests are the outputs; the shards beside them survive DVC's removal of a stage's outs, and
    # the manifests are neither run-cached nor checked out alone (tests/test_dvc_store.py); the SimVerb
    # outputs are kept across failed runs (update(): DVC persist)
    store = {"cache": False, "persist": True}
    assert stage["outs"] == [{"results-ci/simverb/tiny-gpt2/similarities.parquet": {"persist": True}},
                             {"results-ci/simverb/tiny-gpt2/verbs.csv": {"persist": True}},
                             {"results-ci/agreement/tiny-gpt2/shards/manifest.json": store},
                             {"results-ci/agreement/lexicon_modes/tiny-gpt2/shards/manifest.json": store}]
    # keys set in ci.yaml come from it, the others from config.yaml
    assert stage["params"][0] == {"config/ci.yaml": ["models", "inference", "agreement.chunks",
                                                     "agreement.multitoken.enabled", "agreement.multitoken.groups"]}
    assert stage["params"][1]["config/config.yaml"][:2] == ["agreement.groups", "agreement.custom_groups"]


def test_only_a_root_pipeline_declares_metrics(ci_jobs: list[JobSpec]) -> None:
    jobs = [j for j in ci_jobs if j.rule in ("table2", "dvc_metrics")]
    stages = dvc_pipeline(jobs, ["config/config.yaml", "config/ci.yaml"], REPO)["stages"]
    # Table 2 as one {tse, ew, mw} file per model and group; metrics.json is a plain output
    assert stages["dvc_metrics"]["metrics"][:2] == [{"results-ci/agreement/metrics/tiny-bert-cased/simple.json": {"cache": False}},
                                                    {"results-ci/agreement/metrics/tiny-bert-cased/sent_comp.json": {"cache": False}}]
    assert len(stages["dvc_metrics"]["metrics"]) == 5 * 10 and "outs" not in stages["dvc_metrics"]  # 5 CI models x 10 groups
    assert "results-ci/agreement/metrics.json" in stages["table2"]["outs"] and "metrics" not in stages["table2"]
    # a pipeline in a subdirectory (pipelines/ci) declares none: its outputs are plain outs
    sub = dvc_pipeline(jobs, ["config/config.yaml", "config/ci.yaml"], REPO, "../..")["stages"]
    assert "metrics" not in sub["dvc_metrics"]
    assert sub["dvc_metrics"]["outs"] == [next(iter(m)) for m in stages["dvc_metrics"]["metrics"]]


def test_params_take_each_key_from_the_last_file_that_sets_it() -> None:
    cfgs = [("a.yaml", {"agreement": {"top_cutoffs": [1], "bootstrap": {"seed": 0}}, "models": []}),
            ("b.yaml", {"agreement": {"bootstrap": {"seed": 1}}})]
    assert _params("aggregate", cfgs) == [{"a.yaml": ["agreement.top_cutoffs"]}, {"b.yaml": ["agreement.bootstrap"]}]
    with pytest.raises(Exception, match="no entry in verbeval.dvc.RULE_PARAMS"):
        _params("unknown_rule", cfgs)


def test_root_pipeline_is_valid_yaml_with_paper_models() -> None:
    data = yaml.safe_load((REPO / "dvc.yaml").read_text())
    infer = [n for n in data["stages"] if n.startswith("infer--")]
    assert sorted(infer) == ["infer--bert-large-cased", "infer--bert-large-uncased", "infer--gpt2-xl", "infer--roberta-large"]
    assert any(n.endswith("--gpt2-xl") for n in infer)


def test_figure_data_are_dvc_plots_with_existing_columns(ci_jobs: list[JobSpec]) -> None:
    from verbeval.dvc import PLOTS
    from verbeval.simverb.similarity import LAYER_COLUMNS
    from verbeval.veridicality.nli import SCATTER_COLUMNS

    columns = {"veridicality_scatter.csv": SCATTER_COLUMNS, "simverb_layers.csv": LAYER_COLUMNS}
    for name, spec in PLOTS.items():
        cols = columns[name]
        assert spec["x"] in cols and spec["y"] in cols, name
    stages = dvc_pipeline(ci_jobs, ["config/config.yaml", "config/ci.yaml"], REPO)["stages"]
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
    proc = subprocess.run(["git", "check-ignore", "--no-index", *locks], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == "", f"git ignores {proc.stdout.split()}"
