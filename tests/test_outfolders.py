"""Output folders a command replaces (verbeval.core.outfolders): a user's files are never deleted.

``tiny-model`` and ``train-toy`` replace their ``--out`` folder only when it is their own earlier
output; the workflow's plan refuses a ``tiny_models``/``toy_models`` ``out`` they could not replace."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.outfolders import MARKER, check_replaceable, replace_folder, replace_problem
from verbeval.workflow.loading import plan_from_files
from verbeval.workflow.plan import PlanError

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "config" / "config.yaml"


def _built(parent: Path, *names: str) -> Path:
    """A folder as a command builds it beside its target: one file per name."""
    built = parent / ".built"
    for name in names:
        (built / name).parent.mkdir(parents=True, exist_ok=True)
        (built / name).write_text(name)
    return built


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


# ---------------------------------------------------------------- the helper


def test_an_earlier_output_is_replaced_and_a_users_folder_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    replace_folder(_built(tmp_path, "a.txt", "sub/b.txt"), out, "tiny-model")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [MARKER, "a.txt", "sub/b.txt"]
    assert replace_problem(out, "tiny-model") is None  # its own output: replaced again
    (out / ".snakemake_timestamp").touch()  # what Snakemake adds to a directory() output after its job
    assert replace_problem(out, "tiny-model") is None
    replace_folder(_built(tmp_path, "c.txt"), out, "tiny-model")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "c.txt"]
    assert not list(tmp_path.glob(".out.old-*"))  # the earlier folder is gone, nothing else left
    # another command's output is not this command's
    assert (
        replace_problem(out, "train-toy")
        == "it is not an earlier output of train-toy (it holds .verbeval-output.json, c.txt)"
    )
    # a file the user put into the command's output
    (out / "notes.md").write_text("mine")
    assert replace_problem(out, "tiny-model") == "it holds files tiny-model did not write (notes.md)"
    with pytest.raises(VerbevalError) as err:
        replace_folder(_built(tmp_path, "d.txt"), out, "tiny-model")
    assert str(err.value) == (
        f"--out {out}: not replaced: it holds files tiny-model did not write (notes.md); "
        "move it away or choose another folder"
    )
    assert (out / "notes.md").read_text() == "mine" and (out / "c.txt").is_file()


def test_protected_folders_are_refused_whatever_the_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / MARKER).write_text('{"command": "tiny-model", "files": []}')
    monkeypatch.chdir(work / "sub")
    assert replace_problem(".", "tiny-model") == "it is the working folder or one above it"
    assert replace_problem("..", "tiny-model") == "it is the working folder or one above it"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert replace_problem(tmp_path / "home", "tiny-model") == "it is the home folder or one above it"
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "data" / "x.csv").write_text("1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "data/x.csv"], check=True)
    (repo / "data" / MARKER).write_text('{"command": "tiny-model", "files": ["x.csv"]}')
    assert replace_problem(repo, "tiny-model") == "it is the root of a git repository"
    assert replace_problem(repo / "data", "tiny-model") == "it holds files tracked by git (x.csv)"
    assert replace_problem(tmp_path / "absent", "tiny-model") is None
    (tmp_path / "empty").mkdir()
    assert replace_problem(tmp_path / "empty", "tiny-model") is None
    (tmp_path / "file").write_text("x")
    assert replace_problem(tmp_path / "file", "tiny-model") == "it is not a folder"


def test_legacy_records_prove_an_older_output(tmp_path: Path) -> None:
    old = tmp_path / "old"
    (old / "step-4").mkdir(parents=True)
    (old / "step-4" / "verbeval_toy.json").write_text("{}")
    assert replace_problem(old, "train-toy") is not None
    assert replace_problem(old, "train-toy", ("step-*/verbeval_toy.json",)) is None
    check_replaceable(old, "train-toy", ("step-*/verbeval_toy.json",))  # no error


# ---------------------------------------------------------------- the commands


def test_tiny_model_keeps_a_users_folder(
    tokenizer_path: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "data.csv").write_text("a,b\n1,2\n")
    args = [
        "tiny-model",
        "--tokenizer",
        str(tokenizer_path("gpt2")),
        "--arch",
        "gpt2",
        "--layers",
        "1",
        "--hidden",
        "8",
    ]
    assert main([*args, "--out", "keep"]) == 1
    assert _err_lines(capsys) == [
        "verbeval tiny-model: error: --out keep: not replaced: it is not an earlier output of tiny-model "
        "(it holds data.csv); move it away or choose another folder"
    ]
    assert (tmp_path / "keep" / "data.csv").read_text() == "a,b\n1,2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]  # nothing built beside it
    assert main([*args, "--out", "."]) == 1
    assert "--out .: not replaced: it is the working folder or one above it" in _err_lines(capsys)[0]
    # its own output is replaced by a rebuild
    assert main(["-q", *args, "--out", "model"]) == 0
    assert main(["-q", *args, "--out", "model", "--seed", "1"]) == 0
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "model" / MARKER).is_file()
    assert '"seed": 1' in (tmp_path / "model" / "verbeval_tiny.json").read_text()


def test_train_toy_refuses_the_working_folder_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_toy_model import _lexicon, _templates

    _templates().to_parquet(tmp_path / "t.parquet")
    _lexicon().to_parquet(tmp_path / "l.parquet")
    (tmp_path / "thesis.tex").write_text("\\chapter{}")
    monkeypatch.chdir(tmp_path)
    args = ["train-toy", "--templates", "t.parquet", "--lexicon", "l.parquet", "--steps", "2", "--no-progress"]
    assert main([*args, "--out", "."]) == 1
    assert _err_lines(capsys) == [
        "verbeval train-toy: error: --out .: not replaced: it is the working folder or one above it; "
        "move it away or choose another folder"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.parquet", "t.parquet", "thesis.tex"]


# ---------------------------------------------------------------- the workflow's plan


@pytest.mark.parametrize("section", ["tiny_models", "toy_models"])
def test_plan_refuses_an_out_holding_a_users_files(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "data.csv").write_text("1\n")
    entry = "{out: TMP/mine, arch: gpt2}" if section == "tiny_models" else "{out: TMP/mine, checkpoints: [2]}"
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"{section}:\n  - {entry}\n".replace("TMP", str(tmp_path)))
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    command = "tiny-model" if section == "tiny_models" else "train-toy"
    assert str(err.value) == (
        f"{extra}: {section}.0.out {tmp_path}/mine: the workflow would replace it: it is not an earlier output "
        f"of {command} (it holds data.csv); move it away or choose another folder"
    )
    assert (tmp_path / "mine" / "data.csv").read_text() == "1\n"
    (tmp_path / "mine" / "data.csv").unlink()  # an empty folder is the command's to fill
    plan_from_files([BASE, extra])


def test_plan_refuses_a_tracked_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    extra = tmp_path / "extra.yaml"
    extra.write_text("tiny_models:\n  - {out: resources, arch: gpt2}\n")
    with pytest.raises(PlanError, match=r"tiny_models\.0\.out resources: the workflow would replace it: it holds "):
        plan_from_files([BASE, extra])


# ---------------------------------------------------------------- the bench's run folders


def test_the_bench_empties_only_its_own_run_folder(tmp_path: Path) -> None:
    from verbeval.bench.workflow_runs import _fresh

    run = tmp_path / "results-bench" / "workflow"
    assert _fresh(run) == run
    assert [p.name for p in run.iterdir()] == [MARKER]
    (run / "results" / "agreement").mkdir(parents=True)  # what its Snakemake run writes there
    (run / "results" / "agreement" / "table2.csv").write_text("model\n")
    _fresh(run)  # its own earlier run folder: emptied
    assert [p.name for p in run.iterdir()] == [MARKER]
    # an earlier bench's folder from before the marker: its overlay proves it
    legacy = tmp_path / "old"
    legacy.mkdir()
    (legacy / "bench-config.yaml").write_text("models: []\n")
    (legacy / "log.txt").write_text("x")
    _fresh(legacy)
    assert [p.name for p in legacy.iterdir()] == [MARKER]
    # a user's folder named as the bench's workdir survives, with one line saying why
    mine = tmp_path / "mine" / "snakemake"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("\\chapter{}")
    with pytest.raises(VerbevalError) as err:
        _fresh(mine)
    assert str(err.value) == (
        f"--workdir {mine}: not replaced: it is not an earlier output of bench (it holds thesis.tex); "
        "move it away or choose another folder"
    )
    assert (mine / "thesis.tex").read_text() == "\\chapter{}"
    assert not list(mine.parent.glob(".snakemake.old-*"))
