"""Tests for the ``verbeval`` command line (verbeval.cli.main)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from transformers import AutoTokenizer

from conftest import CI_CONFIG, REPO_ROOT, checkout_view, fake_cached, stand_in_models
from verbeval.agreement.data.eligibility import ELIGIBLE_COLUMNS, eligible_lemmas
from verbeval.cli import build_parser, main
from verbeval.core.clidoc import BEGIN, END, command_groups, documented_commands, subcommands, subparsers
from verbeval.core.cliutil import COMMAND_GROUPS, ConfigDefault, subcommand_adder, with_config_defaults
from verbeval.core.config import load_schema, schema_entry
from verbeval.core.models import load_model


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    cap = capsys.readouterr()
    return cap.out, [line for line in cap.err.splitlines() if line.strip()]


def test_check_config_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_hub: Path
) -> None:
    # local model paths are relative to the working directory: one that holds the CI configuration's
    # models (stand-ins), whatever the checkout holds (a quick start's models/ folder, or none)
    monkeypatch.chdir(checkout_view(tmp_path / "wd", models=stand_in_models(tmp_path / "models")))
    # the paper configuration's hub models, as a cache filled in advance leaves them (no hub is reached)
    for repo in ("bert-large-cased", "bert-large-uncased", "roberta-large", "gpt2-xl"):
        fake_cached(no_hub, repo)
    cfg = REPO_ROOT / "config" / "config.yaml"
    assert main(["check-config", str(cfg)]) == 0
    out, _ = _stderr_lines(capsys)
    assert out == f"{cfg}: OK (4 models)\n"
    assert main(["check-config", str(CI_CONFIG)]) == 0
    assert "OK (5 models)" in capsys.readouterr().out
    # the quick start's models are built by the workflow: not required to exist yet (here a models/
    # folder exists without them)
    assert main(["check-config", str(REPO_ROOT / "config" / "quick.yaml")]) == 0
    assert "OK (2 models)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, needle",
    [
        ("models: [{id: gpt2}]\nagreement: {chunks: four}\n", "agreement.chunks"),
        ("models: [{id: gpt2}]\nunknown_key: 1\n", "'unknown_key'"),
        ("models: [{id: gpt2}, {id: gpt2}]\n", "duplicated: gpt2"),
        ("models: [\n", "invalid YAML"),
    ],
)
def test_check_config_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    assert main(["check-config", str(bad)]) == 1
    out, err = _stderr_lines(capsys)
    assert out == ""
    assert len(err) == 1, err
    assert err[0].startswith("verbeval check-config: error: ") and needle in err[0] and str(bad) in err[0]


def test_check_config_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(tmp_path / "nope.yaml")]) == 1
    _, err = _stderr_lines(capsys)
    assert len(err) == 1 and "nope.yaml" in err[0]


def test_tiny_model(tokenizer_path: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "tiny-gpt2"
    rc = main(
        [
            "-q",
            "tiny-model",
            "--tokenizer",
            str(tokenizer_path("gpt2")),
            "--arch",
            "gpt2",
            "--out",
            str(out),
            "--layers",
            "1",
            "--hidden",
            "16",
            "--seed",
            "3",
        ]
    )
    assert rc == 0
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    info = json.loads((out / "verbeval_tiny.json").read_text())
    assert info == {"arch": "gpt2", "seed": 3, "layers": 1, "hidden": 16, "tokenizer": "gpt2"}
    lm = load_model(str(out), device="cpu")
    assert lm.kind == "causal" and lm.cased
    assert lm.model.config.n_layer == 1 and lm.model.config.n_embd == 16
    assert lm.model.config.vocab_size == len(lm.tokenizer) == 50257


def test_tiny_model_masked(tokenizer_path: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "tiny-bert"
    assert (
        main(
            [
                "-q",
                "tiny-model",
                "--tokenizer",
                str(tokenizer_path("bert-base-uncased")),
                "--arch",
                "bert",
                "--out",
                str(out),
                "--layers",
                "1",
                "--hidden",
                "16",
            ]
        )
        == 0
    )
    lm = load_model(str(out), device="cpu")
    assert lm.kind == "masked" and not lm.cased and lm.mask_token == "[MASK]"


def test_tiny_model_bad_arch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse choices
        main(["tiny-model", "--tokenizer", "x", "--arch", "lstm", "--out", str(tmp_path / "m")])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("tokenizer", ["gpt2", "wordpiece"])
def test_lemmas(tokenizer_path: Callable[[str], Path], wordpiece_path: Path, tmp_path: Path, tokenizer: str) -> None:
    lex = pd.DataFrame(
        {
            "lemma": ["run", "be", "swim", "laugh", "admire", "exist", "elope"],
            "sing": ["runs", "is", "swims", "laughs", "admires", "exists", "elopes"],
            "plur": ["run", "are", "swim", "laugh", "admire", "exist", "elope"],
            "source": "test",
        }
    )
    lex_path = tmp_path / "lexicon.parquet"
    lex.to_parquet(lex_path)
    out = tmp_path / "out" / "lemmas.parquet"
    # wordpiece: bert-base-cased, else bert-base-uncased (the same eligible lemmas here)
    tok_dir = wordpiece_path if tokenizer == "wordpiece" else tokenizer_path(tokenizer)
    assert main(["-q", "lemmas", "--model", str(tok_dir), "--lexicon", str(lex_path), "--out", str(out)]) == 0
    got = pd.read_parquet(out)
    want = eligible_lemmas(lex, AutoTokenizer.from_pretrained(str(tok_dir)))
    assert list(got.columns) == list(ELIGIBLE_COLUMNS)
    assert len(got) == len(want)
    pd.testing.assert_frame_equal(got, want)
    # by hand: swims, admires and elopes are two or more tokens in each vocabulary
    assert got["lemma"].tolist() == ["run", "be", "laugh", "exist"]


def test_lemmas_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lex_path = tmp_path / "lexicon.parquet"
    pd.DataFrame({"lemma": ["run"], "sing": ["runs"], "plur": ["run"]}).to_parquet(lex_path)
    rc = main(
        [
            "lemmas",
            "--model",
            str(tmp_path / "no-such-model"),
            "--lexicon",
            str(lex_path),
            "--out",
            str(tmp_path / "o.parquet"),
        ]
    )
    assert rc == 1
    _, err = _stderr_lines(capsys)
    assert len(err) == 1 and "cannot load tokenizer" in err[0]
    assert not (tmp_path / "o.parquet").exists()


def test_fetch_unknown_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "fetch",
            "--manifest",
            str(REPO_ROOT / "resources" / "manifest.yaml"),
            "--name",
            "no_such_source",
            "--out",
            str(tmp_path / "x"),
            "--mirror",
            str(tmp_path),
        ]
    )
    assert rc == 1
    out, err = _stderr_lines(capsys)
    assert out == ""
    assert len(err) == 1 and err[0].startswith("verbeval fetch: error: ") and "'no_such_source'" in err[0]
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- help and docs


def _sub_parsers() -> dict[str, argparse.ArgumentParser]:
    return subparsers(build_parser())


def test_every_subcommand_and_option_has_help() -> None:
    parser = build_parser()
    missing = [f"{name} (sub-command help)" for name, text in subcommands(parser).items() if not text.strip()]
    for name, sp in subparsers(parser).items():
        if not (sp.description or "").strip():
            missing.append(f"{name} (description)")
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS or not action.help.strip():
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert len(subcommands(parser)) >= 30
    assert missing == [], f"sub-commands or options without help: {missing}"


def test_help_formatter_states_defaults() -> None:
    subs = _sub_parsers()
    text = " ".join(subs["infer"].format_help().split())
    assert "hub id or local path of the language model" in text
    assert "(default: 2)" in text and "(default: float32)" in text and "(default: auto)" in text
    agg = " ".join(subs["aggregate"].format_help().split())
    assert "bootstrap resamples (default: 1000)" in agg
    assert "bootstrap seed (numpy.random.default_rng) (default: 0)" in agg
    # required options, flags, unset and list defaults get no "(default: ...)"
    for name, sp in subs.items():
        out = " ".join(sp.format_help().split())  # every %-expansion in every help string is valid
        assert "(default: None)" not in out and "(default: False)" not in out and "(default: [" not in out, name


# --------------------------------------------------------------------------- defaults of configuration keys

#: options whose default equals a configuration default of the same name without mirroring it
NOT_CONFIG = {
    ("bench", "batch_size"): "the benchmark's own batch size (its own configuration)",
    ("train-toy", "batch_size"): "the toy model's training batch (TrainSpec, docs/toy_model.md), not inference's",
    ("train-toy", "layers"): "the toy model's layers (TrainSpec), not a random tiny model's (tiny_models[].layers)",
}


def _options() -> list[tuple[str, argparse.Action]]:
    return [(name, a) for name, sp in _sub_parsers().items() for a in sp._actions if a.option_strings]


def _schema_defaults(node: dict, defs: dict, found: dict[str, list[object]]) -> dict[str, list[object]]:
    """Every default in the schema below ``node``, by the last part of its key."""
    while "$ref" in node:  # a JSON pointer into the definitions ("#/definitions/bootstrap/properties/seed")
        target: dict = {"definitions": defs}
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    for key, sub in node.get("properties", {}).items():
        if "default" in sub:
            found.setdefault(key, []).append(sub["default"])
        _schema_defaults(sub, defs, found)
    if isinstance(node.get("items"), dict):
        _schema_defaults(node["items"], defs, found)
    return found


def test_options_that_mirror_a_config_key_take_its_schema_default() -> None:
    """Every option that mirrors a configuration key takes the schema's default (ConfigDefault, the
    one place it is written): a default the option itself accepts as text, and the key's choices."""
    mirrored = [(name, a) for name, a in _options() if isinstance(a.default, ConfigDefault)]
    assert len(mirrored) >= 40
    for name, a in mirrored:
        where = f"{name} {a.option_strings[-1]} ({a.default.key})"
        entry = schema_entry(a.default.key)
        assert entry is not None and "default" in entry, where
        value = a.default.value
        assert (a.type or str)(str(a.default)) == value, where  # shown as the option takes it
        if a.choices is not None or "enum" in entry:
            assert set(a.choices or ()) == set(entry.get("enum", ())) and value in a.choices, where
    agg = subparsers(build_parser())["aggregate"].parse_args(
        [
            "--templates",
            "t",
            "--groups",
            "g",
            "--model-name",
            "m",
            "--manifest",
            "x",
            "--top-cutoffs",
            "1",
            "--bottom-cutoffs",
            "0.5",
            "--out-dir",
            "o",
        ]
    )
    assert isinstance(agg.resamples, ConfigDefault)  # resolved when the command runs, the schema read then
    assert (with_config_defaults(agg).resamples, agg.seed, agg.confidence) == (1000, 0, 0.95)


def test_no_option_repeats_a_config_default() -> None:
    """An option whose default equals the default of a configuration key of the same name mirrors it:
    it reads it from the schema (ConfigDefault) instead of repeating it."""
    schema = load_schema()
    defaults = _schema_defaults(schema, schema["definitions"], {})
    repeated = []
    for name, a in _options():
        if isinstance(a.default, ConfigDefault) or a.default in (None, False, [], argparse.SUPPRESS):
            continue
        key = a.dest.removeprefix("simverb_").removeprefix("forms_").removeprefix("n_")
        if a.default in defaults.get(key, []) and (name, a.dest) not in NOT_CONFIG:
            repeated.append(f"{name} {a.option_strings[-1]}={a.default!r}")
    assert repeated == []


def _top_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_points_to_workflow_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    out = _top_help(capsys)
    assert "snakemake --cores 8 --resources gpu=1" in out
    for doc in ("docs/workflow.md", "docs/config.md", "docs/metrics.md", "docs/export.md"):
        assert doc in out
    for name in subcommands(build_parser()):
        assert name in out


def _help_sections(out: str) -> dict[str, list[str]]:
    """``{heading: the sub-commands listed under it}`` of the top-level help's sections."""
    sections: dict[str, list[str]] = {}
    heading = None
    for line in out.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            heading = line[:-1]
            sections[heading] = []
        elif heading is not None and line.startswith("  ") and not line.startswith("   "):
            sections[heading].append(line.split()[0])
    return sections


def _command(text: str, start: str) -> list[str]:
    """The words after ``verbeval`` of the first line in ``text`` that begins with ``start`` (indented
    or not), its continuation lines (ending in a backslash) joined and ``#`` comments dropped."""
    found = re.search(rf"^ *{re.escape(start)}", text, re.M)
    assert found, f"no line begins with {start!r}"
    lines = text[found.start() :].splitlines()
    words: list[str] = []
    for line in lines:
        code = line.split(" #")[0].rstrip()
        words += code.rstrip("\\").split()
        if not code.endswith("\\"):
            break
    assert words[0] == "verbeval"
    return words[1:]


def test_top_level_help_lists_commands_by_group_the_quick_start_first(capsys: pytest.CaptureFixture[str]) -> None:
    out = _top_help(capsys)
    parser = build_parser()
    # the first example is the quick start, then an export of one of its models
    examples = [ln.strip() for ln in out.splitlines() if ln.startswith(("  snakemake ", "  verbeval "))]
    assert examples[0] == "snakemake --cores 4 --configfile config/quick.yaml"
    assert examples[1].startswith("verbeval export ")
    # the export example parses as written, and is docs/export.md's (there the wheel's path for WHEEL)
    args = parser.parse_args(_command(out, "verbeval export "))
    assert args.command == "export" and args.groups == "all" and args.configfile == "config/quick.yaml"
    assert args.results == "results-quick/agreement/smollm2-135m" and args.schemas == "WHEEL"
    doc = (REPO_ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    documented = parser.parse_args(_command(doc, "verbeval export "))
    assert documented.schemas.endswith("/every_eval_ever-0.3.0-py3-none-any.whl")
    assert vars(documented) == {**vars(args), "schemas": documented.schemas}

    # one section per group, in COMMAND_GROUPS order: the commands to run yourself before the workflow steps
    sections = _help_sections(out)
    groups = command_groups(parser)
    assert [h for h in sections if h in COMMAND_GROUPS.values()] == [h for h, _ in groups]
    assert [h for h, _ in groups] == list(COMMAND_GROUPS.values())
    for heading, commands in groups:
        assert sections[heading] == list(commands)  # each listed once, under its own group's heading
    user, step, _ = (dict(c) for _, c in groups)
    assert {"check-config", "mirror", "export", "train-toy", "tiny-model", "bench"} <= set(user)
    assert {"fetch", "infer", "aggregate", "table", "run-model", "run-queue"} <= set(step)
    # a command that a rule runs is a workflow step, or a command to run yourself too (export, tiny-model,
    # train-toy); never a maintainers' tool
    rules = " ".join(p.read_text(encoding="utf-8") for p in (REPO_ROOT / "workflow" / "rules").glob("*.smk"))
    run_by_rules = {name for name in subcommands(parser) if re.search(rf"verbeval {re.escape(name)}\b", rules)}
    assert {"fetch", "aggregate", "export", "tiny-model"} <= run_by_rules
    assert run_by_rules <= set(user) | set(step)
    assert out.index("commands to run yourself:") < out.index("workflow steps (")


def test_a_commands_group_is_one_of_the_helps_sections() -> None:
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    add = subcommand_adder(sub)
    add("x", lambda a: None, "a step", "More.")
    add("y", lambda a: None, "a tool", "More.", group="user")
    with pytest.raises(ValueError, match="group 'tools' is not one of user, step, maintainer"):
        add("z", lambda a: None, "a tool", "More.", group="tools")


def test_docs_workflow_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    doc = REPO_ROOT / "docs" / "workflow.md"
    listed = documented_commands(doc.read_text(encoding="utf-8"), doc)
    assert len(listed) == len(set(listed))
    assert set(listed) == set(subcommands(build_parser()))
    # the table is exactly what the generator writes from the help strings
    assert main(["docs-cli", "--doc", str(doc), "--check"]) == 0
    assert capsys.readouterr().out == f"{doc}: up to date ({len(listed)} sub-commands)\n"


def test_docs_cli_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "workflow.md"
    stale = (
        f"# Workflow\n\nbefore\n\n{BEGIN}\n| command | what it does |\n| --- | --- |\n| `fetch` | old |\n{END}\nafter\n"
    )
    doc.write_text(stale)
    assert main(["docs-cli", "--doc", str(doc), "--check"]) == 1
    _, err = _stderr_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"verbeval docs-cli: error: {doc}: ") and "out of date" in err[0]
    assert doc.read_text() == stale  # --check writes nothing
    assert main(["-q", "docs-cli", "--doc", str(doc)]) == 0
    text = doc.read_text()
    parser = build_parser()
    assert text.startswith("# Workflow\n\nbefore\n\n") and text.endswith(f"{END}\nafter\n")
    assert documented_commands(text, doc) == list(subcommands(parser))
    assert "| `veridicality-kl` | KL(original \\|\\| manipulated) tables 7 and 8" in text
    assert main(["docs-cli", "--doc", str(doc), "--check"]) == 0
    capsys.readouterr()
    doc.write_text("# no markers\n")
    assert main(["docs-cli", "--doc", str(doc)]) == 1
    _, err = _stderr_lines(capsys)
    assert len(err) == 1 and f"{doc}: expected exactly one line" in err[0]
    assert doc.read_text() == "# no markers\n"


def test_ctrl_c_is_one_line_and_status_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during any command: one line naming the command, no traceback, the shell's status 130."""
    from verbeval.core import cli as core_cli

    def interrupted(a: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(core_cli, "cmd_check_config", interrupted)
    assert main(["check-config", str(tmp_path / "c.yaml")]) == 130
    cap = capsys.readouterr()
    assert cap.err == "verbeval check-config: interrupted\n" and cap.out == ""


def test_ctrl_c_says_which_outputs_were_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that lands after the command wrote its outputs says they are complete (each is
    written atomically); one that lands earlier names what was left unwritten. An output that was
    there before the command started, and that it did not write, is not written."""
    import os

    from verbeval.agreement.cli import data
    from verbeval.core.io import write_csv, write_parquet

    out, rejects = tmp_path / "templates.parquet", tmp_path / "rejects.csv"
    writes: list[str] = []

    def interrupted(a: argparse.Namespace) -> None:
        if "out" in writes:
            write_parquet(pd.DataFrame({"x": [1]}), a.out)
        if "rejects" in writes:
            write_csv(pd.DataFrame({"x": [1]}), a.rejects)
        raise KeyboardInterrupt

    monkeypatch.setattr(data, "cmd_templates", interrupted)
    argv = ["templates", "--manifest", str(tmp_path / "m.yaml"), "--groups-file", str(tmp_path / "g.yaml"),
            "--out", str(out), "--rejects", str(rejects)]  # fmt: skip
    expected = {
        (): f"interrupted before any output was written ({out}, {rejects}); run it again",
        ("out",): f"interrupted: {out} is complete; {rejects} was not written; run it again",
        ("out", "rejects"): f"interrupted after every output was written: {out}, {rejects} are complete",
    }
    for written, line in expected.items():
        writes[:] = written
        for f in (out, rejects):  # an earlier run's outputs: there, but not this run's
            f.write_text("earlier")
            os.utime(f, ns=(1_600_000_000_000_000_000,) * 2)
        assert main(argv) == 130
        assert capsys.readouterr().err == f"verbeval templates: {line}\n"


def test_an_interrupted_folder_output_is_not_said_complete(tmp_path: Path) -> None:
    from verbeval.core.cliutil import interrupted_line, signature

    folder, gone = tmp_path / "out", tmp_path / "never.csv"
    folder.mkdir()
    before = {str(folder): signature(str(folder)), str(gone): signature(str(gone))}
    (folder / "a.csv").write_text("x\n")  # the folder written to: perhaps not whole
    assert interrupted_line("aggregate", before) == (
        f"verbeval aggregate: interrupted: {folder} was written to, perhaps not whole; {gone} was not written; "
        "run it again"
    )
    assert interrupted_line("aggregate", {}) == "verbeval aggregate: interrupted"
