"""The agreement study's data, table, figure, DVC-view and lexicon-mode steps, declared once
(verbeval.agreement.steps): their rules' DVC params are the keys their ``Config:`` lines named, their
options come from the declaration, and each rule's outputs are declared once in the plan."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from verbeval.agreement import steps
from verbeval.core.cliutil import ConfigDefault, HelpFormatter
from verbeval.core.steps import Setting, Step, flag_text
from verbeval.workflow.dvc_yaml import rule_config_keys
from verbeval.workflow.params import output_files, wrapped

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "workflow" / "rules"

#: each rule's ``Config:`` line before its step was declared (its DVC params), written out
OLD_CONFIG_KEYS: dict[str, set[str]] = {
    "figure_cutoffs": {
        "models",
        "agreement.top_cutoffs",
        "agreement.bottom_cutoffs",
        "agreement.bootstrap",
        "agreement.figures.formats",
        "agreement.figures.min_contexts",
        "agreement.figures.low_n",
    },
    "figure_models": {"models", "agreement.figures.formats"},
    "figure_checkpoints": {
        "models",
        "agreement.bootstrap",
        "agreement.figures.formats",
        "agreement.figures.checkpoints",
        "agreement.checkpoint_axis",
    },
    "figure_lemmas": {
        "models",
        "agreement.figures.formats",
        "agreement.figures.worst_lemmas",
        "agreement.figures.lemma_bins",
    },
    "table3": {
        "models",
        "agreement.figures.contexts",
        "agreement.figures.context_groups",
        "agreement.figures.contexts_per_label",
    },
    "dvc_metrics": {"agreement.table_models"},
    "dvc_plot_data": set(),
    "lexicon_forms": {"models"},
    "lexicon_common": {"models"},
    "lexicon_modes": {"agreement.multitoken.groups", "agreement.bootstrap"},
    "lexicon_modes_table": {"models", "agreement.lexicon_mode", "agreement.multitoken.groups"},
    "lexicon": {"agreement.verb_lists", "agreement.inflection_overrides"},
    "templates": {
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.groups_file",
        "agreement.max_rows_per_source",
        "agreement.skip_bad_rows",
        "agreement.errata",
        "agreement.drop_flagged_errata",
    },
    "table2": {
        "models",
        "agreement.groups",
        "agreement.custom_groups",
        "agreement.errata",
        "agreement.drop_flagged_errata",
        "agreement.bootstrap.confidence",
        "agreement.table_models",
    },
}


def _rule_blocks() -> dict[str, str]:
    blocks: dict[str, str] = {}
    for path in sorted(RULES.glob("*.smk")):
        parts = re.split(r"^rule (\w+)", path.read_text(), flags=re.M)
        blocks.update({parts[i]: parts[i + 1] for i in range(1, len(parts), 2)})
    return blocks


@pytest.mark.parametrize("rule", sorted(OLD_CONFIG_KEYS))
def test_a_declared_rule_has_no_config_line_and_keeps_its_dvc_params(rule: str) -> None:
    block = _rule_blocks()[rule]
    assert "Config:" not in block
    keys = rule_config_keys(rule)
    assert set(keys) == OLD_CONFIG_KEYS[rule] and len(keys) == len(set(keys))
    step = next(s for s in steps.STEPS if rule in s.rules)
    if step.settings:  # the rule runs the declared options, none written by hand
        # PLAN.settings(command), or its record's params (PLAN.lexicon_modes.rules: checked in process below)
        assert "{params.settings}" in block
        assert f'PLAN.settings("{step.command}")' in block or f".{rule}.params," in block
        assert [s.option for s in step.settings if s.option in block] == []


def test_shared_settings_are_one_object() -> None:
    """The cutoffs, bootstrap and errata settings are declared once and shared by their steps."""
    assert steps.AGGREGATE.settings[:2] == (steps.TOP_CUTOFFS, steps.BOTTOM_CUTOFFS)
    assert steps.PLOT_CUTOFFS.settings[:3] == (steps.TOP_CUTOFFS, steps.BOTTOM_CUTOFFS, steps.CONFIDENCE)
    assert steps.LEXICON_MODES.settings == steps.BOOTSTRAP == steps.AGGREGATE.settings[2:5]
    assert steps.AGGREGATE.settings[5:] == (steps.CLUSTER,) and steps.COMPARE.settings == (
        *steps.BOOTSTRAP,
        steps.CLUSTER,
    )
    assert steps.CONFIDENCE in steps.TABLE.settings and steps.CONFIDENCE in steps.PLOT_CHECKPOINTS.settings
    assert steps.DROP_FLAGGED_ERRATA in steps.TABLE.settings and steps.DROP_FLAGGED_ERRATA in steps.TEMPLATES.settings


def test_a_flag_and_a_null_setting() -> None:
    """A bool setting is a flag: the bare option when true, nothing when false; a null value gives no
    option (the command's default, the schema's null, holds). Their help states no default."""
    step = Step(
        "demo",
        settings=(
            Setting("agreement.skip_bad_rows", "--skip-bad-rows", bool, "skip"),
            Setting("agreement.max_rows_per_source", "--max-rows-per-source", steps.optional_int, "rows"),
        ),
    )
    on = {"agreement": {"skip_bad_rows": True, "max_rows_per_source": 40}}
    off = {"agreement": {"skip_bad_rows": False, "max_rows_per_source": None}}
    assert step.argv(on) == ["--skip-bad-rows", "--max-rows-per-source=40"]
    assert step.argv(off) == []
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    step.add_options(parser)
    defaults = parser.parse_args([])
    assert isinstance(defaults.skip_bad_rows, ConfigDefault) and defaults.skip_bad_rows.value is False
    assert defaults.max_rows_per_source.value is None
    given = parser.parse_args(["--skip-bad-rows", "--max-rows-per-source=3"])
    assert given.skip_bad_rows is True and given.max_rows_per_source == 3
    assert "(default:" not in parser.format_help()
    assert flag_text("False") is False and flag_text("true") is True
    with pytest.raises(argparse.ArgumentTypeError):
        flag_text("maybe")
    assert steps.optional_int("none") is None and steps.optional_int("7") == 7


def test_named_outputs_expand_in_declaration_order() -> None:
    outputs = {"csv": "out/{stem}.csv", "images": ["out/{stem}.png", "out/{stem}.pdf"], "one": "out/x.json"}
    assert output_files(outputs, stem="fig1") == ["out/fig1.csv", "out/fig1.png", "out/fig1.pdf", "out/x.json"]
    assert output_files(outputs, ["one", "csv"], stem="s") == ["out/x.json", "out/s.csv"]
    assert wrapped(outputs, {"one": lambda f: f"<{f}>"})["one"] == "<out/x.json>"
    with pytest.raises(KeyError, match="no output named"):
        wrapped(outputs, {"html": str})


def test_rule_all_asks_for_the_declared_outputs(monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    """Rule all's figures, DVC views, Table 2 and lexicon-mode files are the rules' declared outputs,
    with their wildcards filled in; the rules' output: names those declarations."""
    from verbeval.workflow.loading import plan_from_files

    monkeypatch.chdir(repo_view)
    plan = plan_from_files([REPO / "config" / "config.yaml", REPO / ".test" / "config" / "ci.yaml"])
    figs = plan.figures
    images = [f"{figs.out}/fig1_top_p.{ext}" for ext in figs.config["formats"]]
    assert figs.outputs[:3] == [f"{figs.out}/fig1_top_p.csv", *images]
    assert set(output_files(figs.rules.table3.output)) <= set(figs.outputs)
    assert plan.all_outputs()[:6] == output_files(plan.rules.table2.output)
    assert set(output_files(figs.rules.dvc_metrics.output)) <= set(figs.dvc_view_outputs)
    assert plan.multitoken_on
    per_model = plan.lexicon_modes.rules.lexicon_modes.output
    for record, step in ((plan.lexicon_modes.rules.lexicon_modes, steps.LEXICON_MODES),
                         (plan.lexicon_modes.rules.lexicon_modes_table, steps.LEXICON_MODES_TABLE),
                         (figs.rules.figure_cutoffs, steps.PLOT_CUTOFFS),
                         (figs.rules.figure_checkpoints, steps.PLOT_CHECKPOINTS),
                         (figs.rules.figure_lemmas, steps.PLOT_LEMMAS), (figs.rules.table3, steps.TOPK_TABLE),
                         (plan.rules.templates, steps.TEMPLATES), (plan.rules.table2, steps.TABLE)):  # fmt: skip
        assert record.params["settings"] == shlex.join(step.argv(plan.config)), step.command
    assert figs.rules.dvc_metrics.input == f"{plan.agreement_dir}/metrics.json" == plan.rules.table2.output["metrics"]
    assert set(output_files(per_model, ["summary"], model=next(iter(plan.models)))) <= set(plan.lexicon_modes.outputs)
    blocks = _rule_blocks()
    for rule in ("figure_cutoffs", "figure_models", "figure_checkpoints", "figure_lemmas", "table3"):
        assert f"FIG.{rule}.output," in blocks[rule], rule  # its record's outputs (PLAN.figures.rules)
    for rule in ("lexicon_forms", "lexicon_common", "lexicon_modes", "lexicon_modes_table", "lexicon_modes_page"):
        assert f"LM.{rule}.output" in blocks[rule], rule  # its record's outputs (PLAN.lexicon_modes.rules)
    assert "RULE.table2.output," in blocks["table2"]
    assert output_files(plan.rules.table2.output) == [  # its record's outputs: rule all's Table 2 files
        f"{plan.agreement_dir}/{name}" for name in ("table2.csv", "table2.md", "table2.tex", "table2.html")
    ] + [f"{plan.agreement_dir}/summary_all.csv", f"{plan.agreement_dir}/metrics.json"]
