"""A workflow step declared once (verbeval.core.steps): its options, command line, DVC params and
API defaults derive from the declaration, and a test fails when one of them is written twice."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from dataclasses import replace
from pathlib import Path

import pytest

import verbeval
from verbeval.core.cliutil import ConfigDefault
from verbeval.core.config import schema_default, schema_entry
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import MODEL_NAME, Input, Output, Setting, Step, bootstrap_settings, option_text
from verbeval.workflow.model_steps import STEP_FILES
from verbeval.workflow.steps import declared_steps, steps_modules

PKG = Path(verbeval.__file__).resolve().parent
RULES = sorted((PKG.parents[1] / "workflow" / "rules").glob("*.smk"))


def _parser(command: str) -> argparse.ArgumentParser:
    from verbeval.cli import build_parser

    return build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]


def _rule_blocks() -> dict[str, str]:
    """Each rule's text in workflow/rules/*.smk, by name."""
    blocks: dict[str, str] = {}
    for path in RULES:
        parts = re.split(r"^[ \t]*(?:use rule \w+ as |rule )(\w+)", path.read_text(), flags=re.M)
        blocks.update({parts[i]: parts[i + 1] for i in range(1, len(parts), 2)})
    return blocks


def test_a_step_gives_its_options_command_line_keys_and_defaults() -> None:
    step = Step(
        "demo",
        settings=(Setting("agreement.top_cutoffs", "--top-cutoffs", str), *bootstrap_settings("simverb.bootstrap")),
        keys=("models", "simverb.bootstrap.seed"),
    )
    config = {
        "agreement": {"top_cutoffs": [0.5, 1.0]},
        "simverb": {"bootstrap": {"resamples": 7, "seed": 3, "confidence": 0.9}},
    }
    assert step.argv(config) == ["--top-cutoffs=0.5,1", "--resamples=7", "--seed=3", "--confidence=0.9"]
    assert step.config_keys() == (
        "models",
        "simverb.bootstrap.seed",
        "agreement.top_cutoffs",
        "simverb.bootstrap.resamples",
        "simverb.bootstrap.confidence",
    )
    assert step.default("resamples") == schema_default("simverb.bootstrap.resamples")
    assert option_text([1e-6, 0.5]) == "1e-06,0.5" and option_text(3) == "3"
    p = argparse.ArgumentParser()
    step.add_options(p)
    defaults = {a.dest: a.default for a in p._actions if isinstance(a.default, ConfigDefault)}
    assert {d: c.key for d, c in defaults.items()} == {s.dest: s.key for s in step.settings}
    with pytest.raises(KeyError, match="no setting 'nope'"):
        step.default("nope")


@pytest.mark.parametrize("step", declared_steps(), ids=lambda s: s.command)
def test_each_declared_setting_is_a_schema_key_and_its_commands_option(step: Step) -> None:
    """Every setting names a configuration key with a default, and the command's option takes that
    default from the schema (a ConfigDefault of the same key: never a second literal)."""
    actions = {a.dest: a for a in _parser(step.command)._actions}
    for s in step.settings:
        assert schema_entry(s.key) is not None and "default" in schema_entry(s.key), s.key
        default = actions[s.dest].default
        assert isinstance(default, ConfigDefault) and default.key == s.key, (step.command, s.option)
    for key in step.keys:
        assert schema_entry(key) is not None, key


def test_no_declared_setting_is_written_a_second_time() -> None:
    """No module of src/ names a declared setting's configuration key in a string of its own (an
    option's ConfigDefault, a plan's lookup): each setting's key is written in its step only."""
    declared = {s.key for step in declared_steps() for s in step.settings}
    # the steps modules, and core's (the settings several studies share: INFERENCE_DEVICE)
    modules = {PKG.parent / (name.replace(".", "/") + ".py") for name in [*steps_modules(), "verbeval.core.steps"]}
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path in modules:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in declared:
                found.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.value}")
    assert found == []


def test_each_per_model_setting_is_declared_once() -> None:
    """The per-model settings (batch size, kind, dtype, BOS, threads, device map) are declared once,
    in verbeval.core.steps: no other module of src/ names their configuration keys, and every command
    that takes one has the declaration's option (its help, its default the schema's)."""
    from verbeval.core.model_entries import model_entries
    from verbeval.core.steps import (
        INFERENCE_BATCH_SIZE,
        INFERENCE_THREADS,
        MODEL_PREPEND_BOS,
        MODEL_SETTINGS,
        batch_size_on,
    )

    keys = {s.key for s in MODEL_SETTINGS}
    assert keys == {
        "inference.batch_size",
        "inference.threads",
        "models[].kind",
        "models[].dtype",
        "models[].prepend_bos",
        "models[].device_map",
    }
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "core" / "steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in keys:
                found.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.value}")
    assert found == []
    takes = {
        "run-model": MODEL_SETTINGS,
        "infer": MODEL_SETTINGS,
        "infer-forms": tuple(s for s in MODEL_SETTINGS if s is not INFERENCE_BATCH_SIZE),
        "simverb-score": (INFERENCE_THREADS,),
        "veridicality-predict": (INFERENCE_THREADS,),
    }
    for command, settings in takes.items():
        actions = {a.option_strings[0]: a for a in _parser(command)._actions if a.option_strings}
        for s in settings:
            action = actions[s.option]
            assert action.help == s.help and isinstance(action.default, ConfigDefault), (command, s.option)
            assert action.default.key == s.key and schema_entry(s.key) is not None, (command, s.option)
    # the schema's defaults, for the options, a config's entries and the API
    (entry,) = model_entries({"models": [{"id": "gpt2"}]})
    assert {k: entry[k] for k in ("kind", "dtype", "prepend_bos", "device_map", "batch_size")} == {
        "kind": "auto",
        "dtype": "float32",
        "prepend_bos": None,
        "device_map": None,
        "batch_size": "auto",
    }
    assert (batch_size_on(None, "cpu"), batch_size_on("auto", "cuda"), batch_size_on("8", "cuda")) == (64, 512, 8)
    assert "or auto (512 on CUDA, 64 on CPU)" in INFERENCE_BATCH_SIZE.help
    assert MODEL_PREPEND_BOS.model_argv(None) == ["--prepend-bos", "auto"]
    assert MODEL_PREPEND_BOS.model_argv(True) == ["--prepend-bos", "true"]


def test_the_api_takes_the_declared_batch_size() -> None:
    """The engine's and evaluate's batch size defaults to None: inference.batch_size's default on the
    model's device (verbeval.core.steps.batch_size_on), not a literal of their own."""
    from verbeval.agreement.api.evaluation import evaluate
    from verbeval.agreement.engine.forward_pass import run_contexts
    from verbeval.agreement.engine.inference import compute_chunk, infer_chunk, infer_model

    for fn in (compute_chunk, infer_chunk, infer_model, run_contexts, evaluate):
        assert inspect.signature(fn).parameters["batch_size"].default is None, fn.__name__


def test_the_rules_of_declared_steps_hold_no_copy_of_their_settings_or_files() -> None:
    """A declared step's rule names no configuration key (its DVC params are the step's) and no option
    of its settings (the plan derives them); a per-model step's rule writes its command and
    takes its files and params from its record (``STEP.<rule>``, verbeval.workflow.model_steps)."""
    blocks = _rule_blocks()
    per_model = {
        "lemmas": "lemmas",
        "aggregate": "aggregate",
        "lemma_stats": "lemma-stats",
        "lemma_contexts": "lemma-contexts",
    }
    steps = {r: step for step in declared_steps() for r in step.rules}
    assert set(per_model) | {"acquisition"} <= set(steps)
    for rule, step in steps.items():
        text = blocks[rule]
        assert "Config:" not in text, rule
        assert [s.option for s in step.settings if s.option in text] == [], rule
    for rule, command in per_model.items():
        # its command written in the rule, its files and params from the step's record (the words of a
        # queue job's step: tests/test_plan.py, test_each_per_model_rule_runs_the_words_of_its_queue_step)
        text = blocks[rule]
        assert f'"verbeval {command} ' in text and f"**STEP.{rule}.output," in text and command in STEP_FILES, rule
    assert '"verbeval run-model ' in blocks["infer"] and "STEP.infer.output.items()" in blocks["infer"]


def test_api_defaults_are_the_schemas() -> None:
    """The in-process API's cutoff and bootstrap defaults are the declared settings' (None: read from
    the schema), not a second literal; the toy model's threads are toy_models[].threads'."""
    from verbeval.acquisition.analysis import AcquisitionSettings
    from verbeval.acquisition.steps import ACQUISITION
    from verbeval.acquisition.toy.training import TrainSpec
    from verbeval.agreement.api.evaluation import evaluate
    from verbeval.agreement.scores.aggregate import summarise
    from verbeval.agreement.scores.metrics import PAPER_BOTTOM_CUTOFFS, PAPER_TOP_CUTOFFS
    from verbeval.agreement.steps import AGGREGATE

    defaults = AcquisitionSettings.defaults()
    assert defaults.resamples == schema_default("agreement.acquisition.resamples")
    assert defaults.formats == tuple(schema_default("agreement.acquisition.formats"))
    assert len(ACQUISITION.settings) == len(vars(defaults))  # every field of the settings is a declared setting
    for fn in (evaluate, summarise):
        params = inspect.signature(fn).parameters
        for s in AGGREGATE.settings:
            if s.dest in params:
                assert params[s.dest].default is None, (fn.__name__, s.dest)
    assert TrainSpec().threads == schema_default("toy_models[].threads") == 2
    # the schema's cutoffs are the paper's (Newman et al. 2021, Figures 1-2)
    assert tuple(AGGREGATE.default("top_cutoffs")) == PAPER_TOP_CUTOFFS
    assert tuple(AGGREGATE.default("bottom_cutoffs")) == PAPER_BOTTOM_CUTOFFS


def test_a_rules_settings_are_the_steps_options_for_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PLAN.settings(command)``: the declared step's options with the configuration's values, one
    shell word each (a rule's ``params.settings``); an undeclared command is an error."""
    from verbeval.workflow.loading import plan_from_files

    monkeypatch.chdir(PKG.parents[1])
    plan = plan_from_files([PKG.parents[1] / "config" / "config.yaml"])
    assert plan.settings("aggregate") == (
        "--top-cutoffs=0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95,0.97,1 "
        "--bottom-cutoffs=0.5,0.1,0.01,0.001,0.0001,1e-05,1e-06 --resamples=1000 --seed=0 --confidence=0.95 "
        "--cluster=context"
    )
    assert plan.settings("report-table") == ""
    with pytest.raises(KeyError, match="no declared step runs 'verbeval nope'"):
        plan.settings("nope")


def test_a_queue_rule_has_the_keys_of_every_step_it_runs() -> None:
    """A queue rule (queue_N) runs the per-model steps: its DVC params are theirs, each key once, none
    inside another (inference.top_k is in inference); a rule named like it but not one is no queue."""
    from verbeval.core.steps import distinct_keys
    from verbeval.workflow.dvc_yaml import rule_config_keys
    from verbeval.workflow.steps import queue_config_keys

    keys = rule_config_keys("queue_12")
    assert keys == queue_config_keys()
    assert {"models", "inference", "agreement.top_cutoffs", "agreement.bootstrap.seed", "simverb.source"} <= set(keys)
    assert "inference.top_k" not in keys and len(keys) == len(set(keys))
    with pytest.raises(VerbevalError, match="rule 'queue_x' runs no declared step"):
        rule_config_keys("queue_x")
    assert distinct_keys(["a", "a.b", "c", "a", "ab"]) == ("a", "c", "ab")


# ------------------------------------------------------------------ files declared once (Input, Output)

#: a rule's placeholder that a file's option takes: the rule's own input, output or params
BOUND = re.compile(r"\{(input|output|params)(\.\w+)?(:q)?\}")


def _shell(block: str) -> str | None:
    """The command of a rule's text (its ``shell:`` string literals joined); None without one."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "shell:":
            words = []
            for more in lines[i + 1 :]:
                if not more.strip().startswith(('"', "'", 'f"')):
                    break
                words.append(more.strip())
            return ast.literal_eval("(" + "\n".join(words) + ")")
    return None


def _option_values(shell: str, option: str) -> list[str]:
    """What follows each ``option`` in ``shell`` (``--out {output:q}`` -> ``{output:q}``)."""
    return re.findall(rf"(?<![\w-]){re.escape(option)}(?:=| +)(\S*)", shell)


def test_a_steps_declared_files_are_its_commands_options() -> None:
    for step in declared_steps():
        actions = {o: a for a in _parser(step.command)._actions for o in a.option_strings}
        for f in step.files:
            action = actions[f.option]
            assert (action.dest, action.required, action.help) == (f.dest, f.required, f.help), (step.command, f)


def test_a_steps_files_are_added_around_its_settings(capsys: pytest.CaptureFixture[str]) -> None:
    """Step.add_options: inputs, settings, outputs, in declaration order; a file is required unless
    declared otherwise; a list default is a new list per parser; Option.but is the same option."""
    split = Input("--split", "a split", action="append", default=[], metavar="NAME=PATH", required=False)
    step = Step(
        "demo",
        settings=(Setting("agreement.top_cutoffs", "--top-cutoffs", str),),
        inputs=(Input("--templates", "the templates"), split),
        outputs=(Output("--out", "output: figures", nargs="+"),),
    )
    p = argparse.ArgumentParser()
    step.add_options(p)
    assert [a.option_strings for a in p._actions[1:]] == [["--templates"], ["--split"], ["--top-cutoffs"], ["--out"]]
    a = p.parse_args(["--templates", "t.parquet", "--out", "a.png", "a.pdf"])
    assert (a.templates, a.split, a.out) == ("t.parquet", [], ["a.png", "a.pdf"])
    assert a.split is not split.default and step.file("--split") is split
    with pytest.raises(SystemExit):
        p.parse_args(["--out", "a.png"])
    assert "the following arguments are required: --templates" in capsys.readouterr().err
    with pytest.raises(KeyError, match="step 'demo' has no file '--csv'"):
        step.file("--csv")
    named = MODEL_NAME.but(help="the model's name")
    assert (named.option, named.required, named.help, named.dest) == (
        "--model-name",
        True,
        "the model's name",
        "model_name",
    )


def _rule_file_problems(steps: tuple[Step, ...], blocks: dict[str, str]) -> list[str]:
    """Each declared file of a step that its rule's shell binds to anything but the rule's own
    input/output/params, and each option the shell binds to an input or output that is no declared
    file of the step (when the step declares its files) or no option of its command."""
    problems = []
    for step in steps:
        options = {o for a in _parser(step.command)._actions for o in a.option_strings}
        files = {f.option for f in step.files}
        for rule in step.rules:
            shell = _shell(blocks[rule]) if rule in blocks else None
            if shell is None:
                continue
            assert f"verbeval {step.command} " in shell, (rule, shell)
            for option in sorted(files):
                problems += [f"{rule}: {option} {v}" for v in _option_values(shell, option) if not BOUND.fullmatch(v)]
            for option, value in re.findall(r"(?<![\w-])(--[\w-]+)(?:=| +)(\{(?:input|output)\b[^}]*\})", shell):
                if option not in options or (files and option not in files):
                    problems.append(f"{rule}: {option} {value} is no declared file of verbeval {step.command}")
    return problems


def test_a_rule_binds_each_declared_file_of_its_step_to_its_own_files() -> None:
    """Every rule that runs a declared step writes its command in its shell (no rule runs a command line
    the plan wrote, ``verbeval {params.command}``), binds each declared file's option there to
    {input.X}, {output.X} or {params.X}, and binds inputs and outputs to no other option: a rule that
    spells a file's option otherwise fails here."""
    blocks = _rule_blocks()
    steps = declared_steps()
    assert [r for r, text in blocks.items() if "{params.command}" in (_shell(text) or "")] == []
    checked = [r for s in steps for r in s.rules if r in blocks and s.files]
    assert len(checked) >= 30, checked
    assert _rule_file_problems(steps, blocks) == []


def test_a_rule_that_spells_a_declared_file_otherwise_is_found() -> None:
    from verbeval.agreement.steps import LEMMAS, LEXICON

    blocks = {
        "lexicon": 'shell:\n    "verbeval lexicon --manifest {params.manifest:q} --output {output:q} 2> {log:q}"\n',
        "lemmas_by_hand": 'shell:\n    "verbeval lemmas --lexicon results/lexicon.parquet --out {output.lemmas:q}"\n',
    }
    assert _rule_file_problems((LEXICON, replace(LEMMAS, rules=("lemmas_by_hand",))), blocks) == [
        "lexicon: --output {output:q} is no declared file of verbeval lexicon",
        "lemmas_by_hand: --lexicon results/lexicon.parquet",
    ]


#: modules that add options by hand: the generic adder, the model source options (core.cliutil: core.steps
#: imports it), the top-level parser; and run-model, infer and run-queue (turned into typed functions in
#: issue 52 by another change: drop them here then)
BY_HAND = {"core/steps.py", "core/cliutil.py", "commands.py"}


def test_no_option_is_added_by_hand_outside_the_generic_adder() -> None:
    """No module adds an option with ``add_argument`` but :data:`BY_HAND`, and none of those a declared
    file's option: a file is an Input or Output."""
    files = {f.option for step in declared_steps() for f in step.files}
    found: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                first = node.args[0] if node.args else None
                option = first.value if isinstance(first, ast.Constant) else ast.unparse(first) if first else ""
                found.setdefault(path.relative_to(PKG).as_posix(), set()).add(str(option))
    assert set(found) <= BY_HAND, sorted(set(found) - BY_HAND)
    by_hand_files = {m: sorted(o & files) for m, o in found.items() if o & files}
    assert by_hand_files == {}
    assert sum(1 for _ in re.finditer(r"\badd_argument\(", "".join(p.read_text() for p in PKG.rglob("*.py")))) <= 150
