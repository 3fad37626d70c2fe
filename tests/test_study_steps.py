"""The SimVerb-3500 and veridicality steps, each declared once (verbeval.simverb.steps,
verbeval.veridicality.steps): their rules hold no ``Config:`` line, their DVC params are the keys those
lines listed, their settings reach the commands as options, and rule all's files are the rules' own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from verbeval.core.steps import INFERENCE_DEVICE
from verbeval.simverb.steps import SIMVERB_SCORE
from verbeval.workflow.dvc_yaml import rule_config_keys
from verbeval.workflow.loading import plan_from_files
from verbeval.workflow.steps import declared_steps

REPO = Path(__file__).resolve().parents[1]

#: each rule's configuration keys as its docstring's ``Config:`` line listed them before the steps
#: were declared (the DVC params must stay these; their order may change)
OLD_KEYS = {
    "simverb": {
        "simverb_score": {
            "models",
            "simverb.source",
            "simverb.split_sources",
            "simverb.models",
            "simverb.frames",
            "simverb.multi_token",
            "simverb.batch_size",
            "inference.device",
            "inference.threads",
        },
        "simverb_table": {"simverb.bins", "simverb.bootstrap", "simverb.formats"},
        "simverb_join": {"simverb.agreement_join"},
    },
    "veridicality": {
        "veridicality_released": {"veridicality.source"},
        "veridicality_predict": {
            "veridicality.source",
            "veridicality.models",
            "veridicality.batch_size",
            "veridicality.counterfactual",
            "inference.device",
        },
        "veridicality_table": {"veridicality.models", "veridicality.formats"},
        "veridicality_counterfactuals": {"veridicality.source", "veridicality.counterfactual"},
        "veridicality_kl": {"veridicality.models", "veridicality.counterfactual"},
    },
}


def _rule_blocks(study: str) -> dict[str, str]:
    """Each rule's text in workflow/rules/<study>.smk, by name."""
    parts = re.split(r"^rule (\w+)", (REPO / "workflow" / "rules" / f"{study}.smk").read_text(), flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("study", sorted(OLD_KEYS))
def test_a_studys_rules_take_their_keys_and_settings_from_its_steps(
    study: str, monkeypatch: pytest.MonkeyPatch, repo_view: Path
) -> None:
    """Every rule of the study that runs a step is declared (no Config: line, none of its settings'
    options written in the rule); its DVC params are the old Config: line's keys, each once; its
    settings are its record's (``PLAN.<study>.rules``), the step's options for the configuration."""
    monkeypatch.chdir(repo_view)
    plan = plan_from_files([REPO / "config" / "config.yaml"])
    blocks = _rule_blocks(study)
    steps = {r: s for s in declared_steps() for r in s.rules if r in blocks}
    assert set(steps) == set(OLD_KEYS[study]) | {r for r in blocks if r.endswith("_page") or r.endswith("_pages")}
    for rule, old in OLD_KEYS[study].items():
        text = blocks[rule]
        assert "Config:" not in text, rule
        assert [s.option for s in steps[rule].settings if f"{s.option} " in text] == [], rule
        keys = rule_config_keys(rule)
        assert set(keys) == old and len(keys) == len(old), rule
        if steps[rule].settings and rule not in steps[rule].bare_rules:
            assert "{params.settings}" in text, rule
            if "settings=PLAN.settings(" not in text:  # the rule reads its record's params
                record = getattr(getattr(plan, study).rules, rule)
                assert f".{rule}.params," in text, rule
                assert record.params["settings"] == shlex.join(steps[rule].argv(plan.config)), rule


def test_the_steps_share_the_inference_device() -> None:
    """simverb-score and veridicality-predict take inference.device as one declared setting."""
    from verbeval.veridicality.steps import VERIDICALITY_PREDICT

    assert INFERENCE_DEVICE in SIMVERB_SCORE.settings and INFERENCE_DEVICE in VERIDICALITY_PREDICT.settings


def test_rule_all_asks_for_the_rules_own_files(monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """The studies' outputs for rule all are their rules' output patterns, each model's, in rule all's
    order (the files of each model, then the counterfactuals' and the real NLI models')."""
    from verbeval.workflow.loading import plan_from_files

    monkeypatch.chdir(repo_view)
    plan = plan_from_files([REPO / "config" / "config.yaml", REPO / ".test" / "config" / "ci.yaml"])
    sv, ver = plan.simverb, plan.veridicality
    expected = []
    for m, entry in sv.models.items():
        for rule in sv.RULE_FILES:
            if rule != "simverb_join" or entry["join"]:
                for v in getattr(sv.rules, rule).output.values():
                    expected += [f.replace("{svmodel}", m) for f in ([v] if isinstance(v, str) else v)]
    assert sorted(sv.outputs) == sorted(expected) and len(set(expected)) == len(expected)
    assert sv.outputs[:2] == [f"{sv.res}/tiny-bert-cased/similarities.parquet", f"{sv.res}/tiny-bert-cased/verbs.csv"]
    assert ver.counterfactuals_on
    patterns = [
        f
        for r in ver.RULE_FILES
        for v in getattr(ver.rules, r).output.values()
        for f in ([v] if isinstance(v, str) else v)
    ]
    expanded = {p.replace("{vmodel}", m) for p in patterns for m in ver.models}
    assert set(ver.outputs) <= expanded and len(set(ver.outputs)) == len(ver.outputs)
    assert f"{ver.res}/counterfactuals/coverage.html" in ver.outputs
    assert not any("ross-pavlick-2019-bert/kl_table7" in f for f in ver.outputs)  # the pseudo-model: no KL


def test_simverb_scores_job_takes_the_settings_as_options(tmp_path: Path) -> None:
    """A SimVerb model with a job of its own (rule simverb_score): the command takes the declared
    settings' options with the configuration's values."""
    import yaml

    from conftest import checkout_view
    from inprocess import dry_run

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "results_dir": str(tmp_path / "res"),
                "models": [{"id": "gpt2"}],
                "simverb": {"models": ["bert-base-uncased"], "batch_size": 7, "multi_token": "skip"},
                "inference": {"device": "cpu"},
            }
        )
    )
    run = dry_run(checkout_view(tmp_path / "wd"), [cfg], targets=["simverb_all"])
    [cmd] = run.commands("simverb_score")
    assert " --random-init auto --multi-token=skip --batch-size=7 --device=cpu --threads " in cmd
    assert f"--out {tmp_path}/res/simverb/bert-base-uncased/similarities.parquet " in cmd
