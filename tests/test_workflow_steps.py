"""The rules that fetch data and build models (fetch, pip_model, tiny_model, train_toy) and those of the
acquisition index and its DVC plots run declared steps (verbeval.workflow.steps,
verbeval.acquisition.steps): no ``Config:`` line, the same DVC params as those lines gave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from verbeval.workflow.dvc_yaml import rule_config_keys
from verbeval.workflow.steps import declared_step

RULES = REPO_ROOT / "workflow" / "rules"

#: each rule's configuration keys as its docstring's ``Config:`` line gave them (the DVC params)
OLD_CONFIG_LINES = {
    "fetch": ("fetch.smk", "fetch", {"raw_dir"}),
    "pip_model": ("pip_models.smk", "pip-model", {"models", "pip_models_dir"}),
    "tiny_model": ("tiny_models.smk", "tiny-model", {"tiny_models"}),
    "train_toy": ("acquisition.smk", "train-toy", {"toy_models"}),
    "acquisition_index": (
        "acquisition.smk",
        "acquisition-index",
        {
            "models",
            "agreement.acquisition.enabled",
            "agreement.acquisition.min_checkpoints",
            "agreement.checkpoint_axis",
        },
    ),
    "dvc_acquisition_plots": ("acquisition.smk", "dvc-acquisition-plots", {"agreement.checkpoint_axis"}),
}


def _rule_block(path: Path, rule: str) -> str:
    parts = re.split(r"^rule (\w+)", path.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))[rule]


@pytest.mark.parametrize("rule", sorted(OLD_CONFIG_LINES))
def test_rule_runs_its_declared_step_with_the_old_dvc_params(rule: str) -> None:
    smk, command, keys = OLD_CONFIG_LINES[rule]
    text = _rule_block(RULES / smk, rule)
    assert "Config:" not in text
    step = declared_step(command)
    assert rule in step.rules
    assert [s.option for s in step.settings if s.option in text] == []  # the plan's settings, not a copy
    params = rule_config_keys(rule)
    assert set(params) == keys and len(params) == len(keys)


def test_acquisition_index_axis_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """``--axis``: agreement.checkpoint_axis, its choices the axes, its default the schema's; the rule
    takes it from its record's settings (``PLAN.acquisition.rules``; the plan's checkpoints no longer carry it)."""
    from verbeval.acquisition.steps import ACQUISITION_INDEX
    from verbeval.cli import build_parser
    from verbeval.core.cliutil import ConfigDefault
    from verbeval.workflow.loading import plan_from_files

    parser = build_parser()._subparsers._group_actions[0].choices["acquisition-index"]  # type: ignore[union-attr]
    axis = parser._option_string_actions["--axis"]
    assert isinstance(axis.default, ConfigDefault) and axis.default.value == "steps"
    assert list(axis.choices) == ["steps", "tokens", "words"]
    assert ACQUISITION_INDEX.config_keys()[-1] == "agreement.checkpoint_axis"
    text = _rule_block(RULES / "acquisition.smk", "acquisition_index")
    assert "**ACQ.acquisition_index.params," in text and "{params.settings} 2> {log:q}" in text

    monkeypatch.chdir(repo_view)
    extra = tmp_path / "words.yaml"
    extra.write_text(
        "models:\n"
        "  - {id: babylm/gpt2-small, name: baby, revisions: [chck_1M, chck_10M, chck_100M, chck_1000M]}\n"
        "agreement: {checkpoint_axis: words}\n"
    )
    plan = plan_from_files([REPO_ROOT / "config" / "config.yaml", extra])
    assert plan.acquisition.rules.acquisition_index.params["settings"] == "--axis=words"
    assert "--axis" not in plan.acquisition.rules.acquisition_index.params["args"]
    default = plan_from_files([REPO_ROOT / "config" / "config.yaml"]).acquisition.rules.acquisition_index
    assert default.params["settings"] == "--axis=steps"


def test_train_toy_seed_default_is_the_schemas() -> None:
    """train-toy's --seed and the API's TrainSpec.seed are toy_models[].seed's default, as --threads is."""
    from verbeval.acquisition.toy.training import TrainSpec
    from verbeval.cli import build_parser
    from verbeval.core.cliutil import ConfigDefault
    from verbeval.core.config import schema_default

    parser = build_parser()._subparsers._group_actions[0].choices["train-toy"]  # type: ignore[union-attr]
    for option in ("--seed", "--threads"):
        default = parser._option_string_actions[option].default
        assert isinstance(default, ConfigDefault) and default.key == f"toy_models[].{option[2:]}"
    assert TrainSpec().seed == schema_default("toy_models[].seed") == 0
