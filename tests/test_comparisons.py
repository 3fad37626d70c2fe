"""The plan of the paired comparisons, the precision audit and the flip sets (verbeval.workflow.comparisons),
in process: which pairs a configuration compares, the files and the command lines of their rules."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from test_plan import rule_words
from verbeval.workflow.loading import plan_from_files
from verbeval.workflow.plan import PlanError

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "config" / "config.yaml"


@pytest.fixture()
def in_repo(monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    monkeypatch.chdir(repo_view)


def _extra(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "extra.yaml"
    path.write_text(text)
    return path


def test_the_paper_runs_pairs_and_audit(in_repo: None) -> None:
    """The paper's four models: each compared with the first of Table 2, one job; the audit of all."""
    plan = plan_from_files([BASE])
    c = plan.comparisons
    first = plan.table_models[0]
    assert c.pairs == [("against_first", first, m) for m in plan.table_models[1:]] and len(c.pairs) == 3
    assert c.dtype_runs == []
    out = plan.agreement_dir
    assert c.outputs == [
        f"{out}/comparisons.csv",
        f"{out}/first_gains.csv",
        *(f"{out}/figures/comparisons.{ext}" for ext in plan.figures.config["formats"]),
        f"{out}/comparisons.html",
        f"{out}/precision_audit.csv",
        f"{out}/precision_audit.html",
    ]
    assert set(c.outputs) <= set(plan.all_outputs())
    argv = rule_words("comparisons", c.rules.comparisons)
    assert argv[0] == "compare" and f"--pair=against_first={first},{plan.table_models[1]}" in argv
    assert "--resamples=1000" in argv and "--seed=0" in argv and "--confidence=0.95" in argv
    assert f"{out}/{first}/simple/tse.parquet" in c.rules.comparisons.input
    # the rows of a pair are paired by their template identity: the run's templates are an input
    assert f"--templates={out}/templates.parquet" in argv and f"{out}/templates.parquet" in c.rules.comparisons.input
    audit = rule_words("precision_audit", c.rules.precision_audit)
    one = list(plan.models)[0]  # every model of the run, in order
    assert audit[:2] == ["precision-audit", f"--results={one}={out}/{one}"] and "--fragile-ulps=16.0" in audit
    assert audit[-2:] == ["--out", f"{out}/precision_audit.csv"]


def test_configured_pairs_sweeps_and_dtype_runs(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(
        tmp_path,
        "models:\n"
        "  - {name: base, id: gpt2}\n"
        "  - {name: sweep, id: EleutherAI/pythia-70m, revisions: [step1, step2, step3]}\n"
        "agreement:\n"
        "  comparisons: {pairs: [[sweep@step1, base]]}\n"
        "  precision_audit: {dtypes: [bfloat16, float32]}\n",
    )
    plan = plan_from_files([BASE, extra])
    c = plan.comparisons
    assert c.pairs == [
        ("configured", "sweep@step1", "base"),
        ("against_first", "base", "sweep@step3"),
        ("consecutive", "sweep@step1", "sweep@step2"),
        ("consecutive", "sweep@step2", "sweep@step3"),
    ]
    # each Table 2 model in each dtype but its own (float32: theirs)
    assert c.dtype_runs == [("base", "bfloat16"), ("sweep@step3", "bfloat16")]
    steps = plan.model_steps
    run = steps.argv("run-model", "base", dtype="bfloat16")
    assert run[run.index("--dtype") + 1] == "bfloat16"
    assert run[run.index("--manifest") + 1] == f"{plan.agreement_dir}/base/precision/bfloat16/shards/manifest.json"
    assert not any(w.startswith(("--forms=", "--forms-manifest", "--simverb")) for w in run)  # no other branch
    agg = steps.argv("aggregate", "base", dtype="bfloat16")
    assert agg[agg.index("--out-dir") + 1] == f"{plan.agreement_dir}/base/precision/bfloat16"
    # the reruns in another dtype: the words of the step a queue job would run (ModelSteps.argv)
    for rule, command in (("precision_infer", "run-model"), ("precision_aggregate", "aggregate")):
        words = rule_words(rule, getattr(c.rules, rule), model="base", dtype="bfloat16")
        assert words == steps.argv(command, "base", threads=3, dtype="bfloat16")
    flip = rule_words("flip_set", c.rules.flip_set, model="base", dtype="bfloat16")
    assert "--other-results=" + f"{plan.agreement_dir}/base/precision/bfloat16" in flip
    assert f"{plan.agreement_dir}/base/precision/bfloat16/flips.csv" in plan.all_outputs()
    assert shlex.join(flip).startswith("flip-set --model-name=base --dtype=bfloat16 ")


def test_tf32_flip_sets_are_planned_as_bfloat16_ones(in_repo: None, tmp_path: Path) -> None:
    """``precision_audit.dtypes: [tf32]``: each float32 model of Table 2 run again in tf32 (run-model
    --dtype tf32, its own store), aggregated, and its flip set against float32 (flip-set --dtype=tf32)."""
    extra = _extra(
        tmp_path,
        "models:\n  - {name: base, id: gpt2}\n  - {name: t, id: gpt2-medium, dtype: tf32}\n"
        "agreement:\n  precision_audit: {dtypes: [tf32]}\n",
    )
    plan = plan_from_files([BASE, extra])
    c, steps, out = plan.comparisons, plan.model_steps, plan.agreement_dir
    assert c.dtype_runs == [("base", "tf32")]  # t is in tf32 already
    words = rule_words("precision_infer", c.rules.precision_infer, model="base", dtype="tf32")
    assert words == steps.argv("run-model", "base", threads=3, dtype="tf32")
    assert words[words.index("--dtype") + 1] == "tf32"
    assert words[words.index("--manifest") + 1] == f"{out}/base/precision/tf32/shards/manifest.json"
    assert steps.argv("run-model", "t")[steps.argv("run-model", "t").index("--dtype") + 1] == "tf32"
    flip = rule_words("flip_set", c.rules.flip_set, model="base", dtype="tf32")
    assert shlex.join(flip).startswith("flip-set --model-name=base --dtype=tf32 ")
    assert f"--reference-shards={out}/base/shards/manifest.json" in flip
    assert f"--other-shards={out}/base/precision/tf32/shards/manifest.json" in flip
    assert {f"{out}/base/precision/tf32/{f}" for f in ("flips.csv", "comparison.csv")} <= set(plan.all_outputs())


def test_a_pair_of_an_unknown_model_is_a_setup_error(in_repo: None, tmp_path: Path) -> None:
    extra = _extra(tmp_path, "agreement:\n  comparisons: {pairs: [[gpt2-xl, nope]]}\n")
    with pytest.raises(PlanError, match="agreement.comparisons.pairs: 'nope' is not a model of the run"):
        plan_from_files([BASE, extra])


def test_comparisons_off_and_one_model(in_repo: None, tmp_path: Path) -> None:
    off = _extra(tmp_path, "agreement:\n  comparisons: {enabled: false}\n  precision_audit: {enabled: false}\n")
    plan = plan_from_files([BASE, off])
    assert plan.comparisons.pairs == [] and plan.comparisons.outputs == []
    one = _extra(tmp_path, "models:\n  - {name: base, id: gpt2}\n")
    assert plan_from_files([BASE, one]).comparisons.pairs == []


def test_every_eval_ever_exports_are_written_on_request_only(in_repo: None, tmp_path: Path) -> None:
    """``agreement.export.every_eval_ever`` (off by default): one export job per model, its command the
    ``export`` step's words with the workflow's config hash and the configured schema wheel."""
    from verbeval.agreement.cli.export import sha256_hex
    from verbeval.core.config import config_sha256

    assert plan_from_files([BASE]).comparisons.export_on is False
    assert not [f for f in plan_from_files([BASE]).all_outputs() if "every_eval_ever" in f]
    wheel = tmp_path / "every_eval_ever-0.3.0-py3-none-any.whl"
    extra = _extra(tmp_path, f"agreement:\n  export: {{every_eval_ever: true, schemas: {wheel}}}\n")
    plan = plan_from_files([BASE, extra])
    c, out = plan.comparisons, plan.agreement_dir
    assert c.outputs[-len(plan.models) :] == [f"{out}/{m}/every_eval_ever" for m in plan.models]
    assert set(c.outputs) <= set(plan.all_outputs())
    model = list(plan.models)[0]
    words = rule_words("export_every_eval_ever", c.rules.export_every_eval_ever, model=model)
    digest = config_sha256(plan.config)
    assert words == [
        "export", "--format", "every-eval-ever", "--templates", f"{out}/templates.parquet",
        "--groups", ",".join(plan.group_ids), "--model-name", model,
        "--manifest", f"{out}/{model}/shards/manifest.json", "--results", f"{out}/{model}",
        "--config-sha256", digest, "--schemas", str(wheel), "--out-dir", f"{out}/{model}/every_eval_ever",
    ]  # fmt: skip
    assert sha256_hex(digest) == digest
    # the hash covers the run's whole configuration: a clustered run's is another
    clustered = tmp_path / "clustered.yaml"
    clustered.write_text("agreement:\n  bootstrap: {cluster: template}\n")
    other = plan_from_files([BASE, extra, clustered])
    other_words = rule_words("export_every_eval_ever", other.comparisons.rules.export_every_eval_ever, model=model)
    other_digest = other_words[other_words.index("--config-sha256") + 1]
    assert other_digest == config_sha256(other.config) and other_digest != digest
    inputs = c.rules.export_every_eval_ever.input
    assert inputs["schemas"] == str(wheel) and inputs["templates"] == f"{out}/templates.parquet"


def test_template_and_lemma_comparisons_read_every_compared_models_shards_and_lemmas(
    in_repo: None, tmp_path: Path
) -> None:
    """Under agreement.bootstrap.cluster template_and_lemma the rule reads each compared model's shard
    manifest and lemmas.parquet (its inputs, hence the DVC stage's deps) and passes them; under the
    other clusterings its inputs and command line are as before."""
    plans = {
        c: plan_from_files([BASE, _extra(tmp_path, f"agreement:\n  bootstrap: {{cluster: {c}}}\n")])
        for c in ("template", "template_and_lemma")
    }
    c = plans["template_and_lemma"].comparisons
    steps, out = plans["template_and_lemma"].model_steps, plans["template_and_lemma"].agreement_dir
    files = [steps.files(m)[k] for m in c.models for k in ("manifest", "lemmas")]
    plain = plans["template"].comparisons.rules.comparisons
    assert c.rules.comparisons.input == [*plain.input[:-1], *files, f"{out}/templates.parquet"]
    argv = rule_words("comparisons", c.rules.comparisons)
    before = rule_words("comparisons", plain)
    named = [w for m in c.models for w in (f"--shards={m}={steps.files(m)['manifest']}",
                                           f"--lemmas={m}={steps.files(m)['lemmas']}")]  # fmt: skip
    n = len(c.models) + 1  # compare and the --results
    assert argv == [*before[:n], *named, *(w.replace("=template", "=template_and_lemma") for w in before[n:])]
    assert "--cluster=template" in before and not any(w.startswith(("--shards", "--lemmas")) for w in before)
