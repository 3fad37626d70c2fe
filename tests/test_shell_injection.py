"""No config string can run a command: every rule's shell command is walked with shell
metacharacters in every config string that reaches it.

Two layers, each tested here:

* identifiers (group ids, manifest source names, the device, hub revisions, a groups file's ids) are
  refused by validation, with a message naming the key;
* free-form strings (paths of models, data, resources and results; SimVerb frames; Table 3
  contexts; Table 2 model patterns) are accepted and must reach ``verbeval`` as one intact argument.
  Every job's command that the workflow renders (an in-process dry run) is read as bash reads it:
  one simple command, nothing that bash would expand, no argument split. The end-to-end tier
  executes each of those commands with bash and a stand-in ``verbeval`` that records its arguments.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inprocess import dry_run
from verbeval.agreement.data.groups import load_groups
from verbeval.core.config import validate_config
from verbeval.core.errors import VerbevalError
from verbeval.core.model_checks import check_model_paths

REPO = Path(__file__).resolve().parents[1]
#: command substitution (both forms), a command separator, a pipe, redirections, a glob and quotes
HOSTILE = "x$(touch PWNED1)`touch PWNED2`;touch PWNED3|cat>PWNED4 *'\"y"


def _string_leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, str):
        yield path
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _string_leaves(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _string_leaves(value, path + (i,))


def _set(cfg: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node: Any = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _quick_config() -> dict[str, Any]:
    cfg = yaml.safe_load((REPO / "config/quick.yaml").read_text())
    cfg["agreement"]["figures"] = {"contexts": [{"group": "simple", "left": "The author", "right": None}]}
    cfg["agreement"]["table_models"] = ["quick-*"]
    return validate_config(cfg)


#: identifiers: refused by validation (the key each refusal must name)
IDENTIFIERS = {
    ("inference", "device"): "inference.device",
    ("agreement", "verb_lists", 0): "agreement.verb_lists.0",
    ("agreement", "figures", "context_groups", 0): "agreement.figures.context_groups.0",
    ("agreement", "figures", "contexts", 0, "group"): "agreement.figures.contexts.0.group",
    ("simverb", "source"): "simverb.source",
    ("veridicality", "source"): "veridicality.source",
    ("simverb", "split_sources", "dev"): "simverb.split_sources.dev",
}


@pytest.mark.parametrize("path", list(IDENTIFIERS), ids=lambda p: ".".join(map(str, p)))
def test_identifiers_with_metacharacters_are_refused_naming_the_key(path: tuple[Any, ...]) -> None:
    cfg = _quick_config()
    _set(cfg, path, HOSTILE)
    with pytest.raises(VerbevalError, match=r"invalid value at " + IDENTIFIERS[path].replace(".", r"\.")):
        validate_config(cfg)


@pytest.mark.parametrize("key", ["groups", "multitoken"])
def test_group_lists_refuse_metacharacters(key: str) -> None:
    cfg = _quick_config()
    if key == "groups":
        cfg["agreement"]["groups"] = ["simple", HOSTILE]
        where = "agreement.groups.1"
    else:
        cfg["agreement"]["multitoken"]["groups"] = [HOSTILE]
        where = "agreement.multitoken.groups.0"
    with pytest.raises(VerbevalError, match=r"invalid value at " + where.replace(".", r"\.")):
        validate_config(cfg)


def test_a_hub_revision_with_metacharacters_is_refused() -> None:
    cfg = _quick_config()
    i = len(cfg["models"])
    cfg["models"].append({"id": "org/model", "name": "m", "revisions": [{"revision": HOSTILE, "step": 1}]})
    with pytest.raises(VerbevalError, match=rf"invalid value at models\.{i}\.revisions\.0\.revision"):
        validate_config(cfg)


@pytest.mark.parametrize("field", ["id", "source"])
def test_a_groups_file_with_metacharacters_is_refused(tmp_path: Path, field: str) -> None:
    data = yaml.safe_load((REPO / "resources/agreement_groups.yaml").read_text())
    if field == "id":
        data["groups"][0]["id"] = "simple$(touch PWNED)"
    else:
        data["groups"][0]["sources"][0] = "ml_simple;touch PWNED"
    path = tmp_path / "groups.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(VerbevalError, match="only letters, digits") as err:
        load_groups(path)
    assert str(path) in str(err.value)


def test_every_string_leaf_is_either_refused_or_left_to_quoting() -> None:
    """A census of the quick configuration's strings: each one with metacharacters is either refused
    by validation (an identifier, a closed choice) or accepted as a free-form string, and every
    accepted one is among those the workflow test below drives through every rule."""
    base = _quick_config()
    accepted = []
    for path in _string_leaves(base):
        cfg = copy.deepcopy(base)
        _set(cfg, path, HOSTILE)
        try:
            validate_config(cfg)
            check_model_paths(cfg)
        except VerbevalError:
            continue
        accepted.append(".".join(str(p) for p in path))
    free_form = {
        "manifest",
        "raw_dir",
        "results_dir",
        "agreement.groups_file",
        "agreement.errata",
        "agreement.inflection_overrides",
        "agreement.figures.contexts.0.left",
        "simverb.frames.0",
        "veridicality.models.0",
        "pip_models_dir",
    }
    # a tiny model's tokenizer reaches its rule through shlex.join (tests/test_wordtok.py builds one);
    # a model's id with metacharacters is no hub id, and as a path it is refused while missing: both
    # are driven through every rule below, as paths that exist
    free_form |= {f"tiny_models.{i}.{key}" for i in range(len(base["tiny_models"])) for key in ("tokenizer", "out")}
    # the acquisition analysis' frequency file: runs only with a checkpoint sweep (not in the quick start);
    # shlex-quoted in its rule's options, tests/test_plan.py::test_acquisition_options_are_quoted
    free_form.add("agreement.acquisition.frequencies")
    assert set(accepted) <= free_form | {"data_mirror"}, sorted(set(accepted) - free_form)


def _hostile_workdir(tmp_path: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """A working directory whose every free-form path holds metacharacters, and its config."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "resources").symlink_to(REPO / "resources")
    res = work / f"res {HOSTILE}"
    res.mkdir()
    for name in ("manifest.yaml", "agreement_groups.yaml", "template_errata.csv", "inflection_overrides.csv"):
        shutil.copy(REPO / "resources" / name, res / name)
    pairs = res / "pairs.jsonl"
    shutil.copy(REPO / "resources/examples/agreement_new_constructions.jsonl", pairs)
    (work / "quick-glob-target").write_text("")  # an unquoted quick-* would expand to this file
    cfg = yaml.safe_load((REPO / "config/quick.yaml").read_text())
    models_dir = f"models/{HOSTILE}"
    # the quick start's tiny BERT is built at {results_dir}/models/bert: under the hostile results_dir below
    assert [t["out"] for t in cfg["tiny_models"]] == ["{results_dir}/models/bert"]
    rel = res.name
    cfg.update({"manifest": f"{rel}/manifest.yaml", "raw_dir": f"raw {HOSTILE}", "results_dir": f"out {HOSTILE}"})
    agr = cfg["agreement"]
    agr.update(
        {
            "groups_file": f"{rel}/agreement_groups.yaml",
            "errata": f"{rel}/template_errata.csv",
            "inflection_overrides": f"{rel}/inflection_overrides.csv",
            "table_models": ["quick-b*"],
            "custom_groups": [{"id": "mine", "path": f"{rel}/pairs.jsonl"}],
            "figures": {"contexts": [{"group": "simple", "left": f"The {HOSTILE}", "right": None}]},
        }
    )
    cfg["simverb"]["frames"] = [f"to {{verb}} {HOSTILE}"]
    # every branch: multi-token forms and lexicon modes, a real (tiny) NLI model with counterfactuals
    agr["multitoken"] = {"enabled": True}
    cfg["tiny_models"].append({"out": f"{models_dir}/nli", "arch": "bert-nli"})
    cfg["veridicality"] = {"models": ["ross-pavlick-2019-bert", f"{models_dir}/nli"]}
    # a model assembled from pip packages, in a folder with metacharacters
    cfg["pip_models_dir"] = f"pip {HOSTILE}"
    cfg["models"].append(
        {
            "name": "pipmodel",
            "gguf_file": "m.gguf",
            "pip": {"sha256": "0" * 64, "parts": [{"package": "pkg", "version": "1.0", "member": "pkg/m.gguf"}]},
        }
    )
    hostile_values = [
        models_dir,
        rel,
        f"raw {HOSTILE}",
        f"out {HOSTILE}",
        f"The {HOSTILE}",
        f"pip {HOSTILE}",
        f"to {{verb}} {HOSTILE}",
    ]
    return work, cfg, hostile_values


#: bash's control operators and redirections (split words; outside quotes they end a simple command)
_OPERATORS = set(";&|<>()")
#: what bash expands outside quotes (a substitution, a parameter, a glob); "$" and "`" inside double quotes too
_EXPANDING = set("$`*?[")


def _bash_words(cmd: str) -> list[tuple[str, frozenset[str]]]:
    """``cmd`` split as bash splits a command line: each word's value after quote removal with the
    characters bash would expand in it (empty when the word is literal), and each control operator
    or redirection character as a word of its own (its set holds it). Only single and double quotes
    and backslashes are modelled: enough to read what the workflow renders, whose only quoting is
    shlex's."""
    words: list[tuple[str, frozenset[str]]] = []
    text: list[str] = []
    active: set[str] = set()
    started = False
    quote = ""
    i = 0

    def end() -> None:
        nonlocal started
        if started:
            words.append(("".join(text), frozenset(active)))
        text.clear()
        active.clear()
        started = False

    while i < len(cmd):
        c = cmd[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                text.append(c)
        elif quote == '"':
            if c == '"':
                quote = ""
            elif c == "\\" and i + 1 < len(cmd) and cmd[i + 1] in '$`"\\':
                i += 1
                text.append(cmd[i])
            else:
                if c in "$`":
                    active.add(c)
                text.append(c)
        elif c.isspace():
            end()
        elif c in _OPERATORS:
            end()
            words.append((c, frozenset(c)))
        elif c == "\\":
            i += 1
            text.append(cmd[i])
            started = True
        elif c in "'\"":
            quote = c
            started = True
        else:
            if c in _EXPANDING:
                active.add(c)
            text.append(c)
            started = True
        i += 1
    assert not quote, f"unterminated {quote} quote: {cmd}"
    end()
    return words


def test_bash_words_reads_quotes_as_bash_does() -> None:
    """The reader of the test below: shlex's quoting is literal, what bash would run or expand is not."""
    import shlex

    assert _bash_words(f"verbeval x --out {shlex.quote(HOSTILE)} 2> 'a b'") == [
        ("verbeval", frozenset()),
        ("x", frozenset()),
        ("--out", frozenset()),
        (HOSTILE, frozenset()),
        ("2", frozenset()),
        (">", frozenset(">")),
        ("a b", frozenset()),
    ]
    assert _bash_words('a "$(touch P)" b\\;c') == [
        ("a", frozenset()),
        ("$(touch P)", frozenset("$")),
        ("b;c", frozenset()),
    ]
    assert [w for w, _ in _bash_words("a x;y q*")] == ["a", "x", ";", "y", "q*"]
    assert _bash_words("q*")[0][1] == frozenset("*") and _bash_words("'q*'")[0][1] == frozenset()


def _hostile_config(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    work, cfg, hostile_values = _hostile_workdir(tmp_path)
    cfgfile = tmp_path / "hostile.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return work, cfgfile, hostile_values


def _assert_passed_intact(calls: list[list[str]], hostile_values: list[str]) -> None:
    """What every verbeval call received: each free-form value as one argument, never split."""
    tokens = [t for call in calls for t in call]
    for value in hostile_values:
        assert any(value in t for t in tokens), f"{value!r} never reached verbeval as one argument"
    # the Table 2 model pattern is resolved to model names before it reaches a command
    assert not any("quick-glob-target" in t or "quick-b*" in t for t in tokens)
    assert ["--table-models", "quick-bert"] in [call[i : i + 2] for call in calls for i in range(len(call) - 1)]
    # an argument with metacharacters is never split: every token holding a piece holds all of it
    pieces = [t for t in tokens if "PWNED1" in t]
    # (a model name derived from such a path, sanitised to letters, digits and '._@-', is not a piece,
    # alone or inside a longer argument such as a report page's title)
    split = [t for t in pieces if HOSTILE not in t and re.search(r"[^A-Za-z0-9._@-]PWNED1|PWNED1[^A-Za-z0-9._@-]", t)]
    assert pieces and not split, split[:3]


def test_every_rule_command_passes_free_form_strings_intact(tmp_path: Path) -> None:
    """Every job's shell command, as the in-process dry run renders it, is one ``verbeval ... 2> LOG``
    whose every word is literal to bash: no command substitution, separator, pipe, redirection or
    glob of a config string survives its quoting."""
    work, cfgfile, hostile_values = _hostile_config(tmp_path)
    run = dry_run(work, [cfgfile])
    # (each model's one job, infer, runs its agreement, multi-token form and SimVerb branches)
    assert {
        "infer",
        "lemmas",
        "templates",
        "table2",
        "table3",
        "tiny_model",
        "lexicon_forms",
        "veridicality_predict",
        "veridicality_counterfactuals",
        "pip_model",
    } <= set(run.stats)
    assert run.stats["tiny_model"] == 2 and run.stats["pip_model"] == 2 and run.stats["infer"] == 3

    calls = []
    for job in run.jobs:
        if not job["cmd"]:
            assert job["rule"] == "all", job
            continue
        words = _bash_words(job["cmd"])
        # one simple command: verbeval ARGS 2> LOG, nothing else bash would run, redirect or expand
        assert [w for w, _ in words if w in _OPERATORS] == [">"], (job["rule"], job["cmd"])
        gt = words.index((">", frozenset(">")))
        assert words[0][0] == "verbeval" and words[gt - 1][0] == "2" and gt == len(words) - 2, job["cmd"]
        expanded = [(w, sorted(a)) for w, a in words if a and w not in _OPERATORS]
        assert not expanded, (job["rule"], expanded[:3])
        assert words[-1][0].startswith(f"out {HOSTILE}/logs/"), job["cmd"]  # the log, in results_dir
        calls.append([w for w, _ in words[1 : gt - 1]])
    assert len(calls) == len(run.jobs) - 1
    _assert_passed_intact(calls, hostile_values)


@pytest.mark.e2e
def test_every_rule_command_runs_no_config_string_in_bash(tmp_path: Path) -> None:
    """Each command of the workflow executed by bash, with a stand-in ``verbeval`` that records its
    arguments: no file is created by a config string, and every value arrives intact."""
    from verbeval.workflow.dvc_yaml import workflow_jobs

    work, cfgfile, hostile_values = _hostile_config(tmp_path)
    jobs = workflow_jobs(REPO / "Snakefile", [cfgfile], work)  # (with each job's log files, created below)
    assert {
        "infer",
        "lemmas",
        "templates",
        "table2",
        "table3",
        "tiny_model",
        "lexicon_forms",
        "veridicality_predict",
        "veridicality_counterfactuals",
        "pip_model",
    } <= {j.rule for j in jobs}

    stub = tmp_path / "bin"
    stub.mkdir()
    argv_log = tmp_path / "argv.log"
    (stub / "verbeval").write_text('#!/bin/bash\nprintf "%s\\0" "$@" >> "$ARGV_LOG"\nprintf "\\n\\0" >> "$ARGV_LOG"\n')
    (stub / "verbeval").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}", "ARGV_LOG": str(argv_log)}
    for job in jobs:
        if not job.cmd:
            continue
        for f in job.logs + job.outputs:
            (work / f).parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["bash", "-c", job.cmd], cwd=work, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, (job.rule, job.cmd, proc.stderr)

    assert not [p for p in tmp_path.rglob("PWNED*")], "a config string ran a command"
    calls = [c.split("\0") for c in argv_log.read_text().split("\n\0") if c]
    assert len(calls) == sum(1 for j in jobs if j.cmd)
    _assert_passed_intact(calls, hostile_values)


def test_a_model_id_that_is_neither_a_folder_nor_a_hub_id_is_refused() -> None:
    cfg = _quick_config()
    i = len(cfg["models"])
    cfg["models"].append({"id": "gpt2;touch PWNED", "name": "m"})
    validate_config(cfg)
    with pytest.raises(
        VerbevalError, match=rf"models\.{i}\.id: model m: 'gpt2;touch PWNED' is neither a local folder nor a hub id"
    ):
        check_model_paths(cfg)


@pytest.mark.parametrize("where", ["custom_group_id", "model_name"])
def test_custom_group_ids_and_model_names_with_metacharacters_are_refused(where: str) -> None:
    """Both reach file names and shell commands; the schema refuses them, naming the key (no -x run)."""
    cfg = _quick_config()
    if where == "custom_group_id":
        cfg["agreement"]["custom_groups"] = [{"id": "mine;touch PWNED", "path": "pairs.jsonl"}]
        key = r"agreement\.custom_groups\.0\.id"
    else:
        cfg["models"][0]["name"] = "m$(touch PWNED)"
        key = r"models\.0\.name"
    with pytest.raises(VerbevalError, match=r"invalid value at " + key + r": '.*PWNED.*' does not match"):
        validate_config(cfg)
