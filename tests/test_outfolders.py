"""Output folders a command replaces (verbeval.core.outfolders): a user's files are never deleted.

``tiny-model`` and ``train-toy`` replace their ``--out`` folder only when it is their own earlier
output; the workflow's plan refuses a ``tiny_models``/``toy_models`` ``out`` they could not replace."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.outfolders import ADVICE, MARKER, check_replaceable, replace_folder, replace_problem
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


def test_a_record_alone_never_vouches_for_a_folder(tmp_path: Path) -> None:
    """Issue 51: an older verbeval's record (a toy checkpoint's verbeval_toy.json, a tiny model's
    verbeval_tiny.json, a marker that listed names only) never makes a folder replaceable."""
    old = tmp_path / "old"
    (old / "step-4").mkdir(parents=True)
    (old / "step-4" / "verbeval_toy.json").write_text("{}")
    (old / "thesis.tex").write_text("mine")
    assert replace_problem(old, "train-toy") == (
        "it is not an earlier output of train-toy (it holds step-4/verbeval_toy.json, thesis.tex)"
    )
    with pytest.raises(VerbevalError):
        check_replaceable(old, "train-toy")
    names_only = tmp_path / "names"
    names_only.mkdir()
    (names_only / "config.json").write_text("{}")
    (names_only / MARKER).write_text('{"command": "tiny-model", "files": ["config.json"]}')
    assert replace_problem(names_only, "tiny-model") == (
        f"its record of tiny-model ({MARKER}) is from an older verbeval, which recorded no file hashes "
        f"(it holds {MARKER}, config.json)"
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    (run / MARKER).write_text('{"command": "bench", "files": "all"}')  # an older run folder's record
    assert replace_problem(run, "bench") is not None
    assert (old / "thesis.tex").read_text() == "mine" and (run / "notes.txt").read_text() == "mine"


def test_a_file_changed_since_the_command_wrote_it_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    replace_folder(_built(tmp_path, "config.json", "w/weights.bin"), out, "tiny-model")
    record = json.loads((out / MARKER).read_text())
    assert record == {
        "command": "tiny-model",
        "files": {
            "config.json": {"size": 11, "sha256": hashlib.sha256(b"config.json").hexdigest()},
            "w/weights.bin": {"size": 13, "sha256": hashlib.sha256(b"w/weights.bin").hexdigest()},
        },
    }
    (out / "config.json").write_text("config.jsoX")  # the user's edit, same size
    assert replace_problem(out, "tiny-model") == "it holds files changed since tiny-model wrote them (config.json)"
    (out / "config.json").write_text('{"user": 1}\n')
    assert replace_problem(out, "tiny-model") == "it holds files changed since tiny-model wrote them (config.json)"
    (out / "config.json").write_text("config.json")  # back as written
    assert replace_problem(out, "tiny-model") is None
    (out / "w" / "weights.bin").unlink()  # a file removed since: nothing of the user's is lost
    assert replace_problem(out, "tiny-model") is None
    (out / "w" / "weights.bin").symlink_to(out / "config.json")  # a link where a file was
    assert replace_problem(out, "tiny-model") == ("it holds files changed since tiny-model wrote them (w/weights.bin)")


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
    capsys.readouterr()  # the builds' output
    # a user's edit of the built model is never replaced
    with open(tmp_path / "model" / "config.json", "a") as fh:
        fh.write(" ")
    assert main([*args, "--out", "model"]) == 1
    assert _err_lines(capsys) == [
        "verbeval tiny-model: error: --out model: not replaced: it holds files changed since tiny-model wrote "
        "them (config.json); move it away or choose another folder"
    ]
    # issue 51: an older verbeval's record beside a user's files vouches for nothing
    (tmp_path / "c4" / "data").mkdir(parents=True)
    (tmp_path / "c4" / "verbeval_tiny.json").write_text("{}")
    (tmp_path / "c4" / "thesis.tex").write_text("mine")
    (tmp_path / "c4" / "data" / "d.csv").write_text("1\n")
    assert main([*args, "--out", "c4"]) == 1
    assert _err_lines(capsys) == [
        "verbeval tiny-model: error: --out c4: not replaced: it is not an earlier output of tiny-model "
        "(it holds data/d.csv, thesis.tex, verbeval_tiny.json); move it away or choose another folder"
    ]
    assert (tmp_path / "c4" / "thesis.tex").read_text() == "mine"
    assert (tmp_path / "c4" / "data" / "d.csv").read_text() == "1\n"


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
    # issue 51: a checkpoint's record of an older verbeval beside a user's file vouches for nothing
    (tmp_path / "toy" / "step-1").mkdir(parents=True)
    (tmp_path / "toy" / "step-1" / "verbeval_toy.json").write_text("{}")
    (tmp_path / "toy" / "thesis.tex").write_text("mine")
    assert main([*args, "--out", "toy"]) == 1
    assert _err_lines(capsys) == [
        "verbeval train-toy: error: --out toy: not replaced: it is not an earlier output of train-toy "
        "(it holds step-1/verbeval_toy.json, thesis.tex); move it away or choose another folder"
    ]
    assert (tmp_path / "toy" / "thesis.tex").read_text() == "mine"


# ---------------------------------------------------------------- the workflow's plan


@pytest.mark.parametrize("section", ["tiny_models", "toy_models"])
def test_plan_refuses_an_out_holding_a_users_files(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path
) -> None:
    monkeypatch.chdir(repo_view)
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
    # issue 51: an older verbeval's record beside the user's file vouches for nothing
    record = "verbeval_tiny.json" if section == "tiny_models" else "step-1/verbeval_toy.json"
    (tmp_path / "mine" / record).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "mine" / record).write_text("{}")
    with pytest.raises(PlanError) as err:
        plan_from_files([BASE, extra])
    shown = "data.csv, step-1/verbeval_toy.json" if section == "toy_models" else "data.csv, verbeval_tiny.json"
    assert str(err.value).endswith(f"it is not an earlier output of {command} (it holds {shown}); {ADVICE}")
    assert (tmp_path / "mine" / "data.csv").read_text() == "1\n"
    shutil.rmtree(tmp_path / "mine")
    (tmp_path / "mine").mkdir()  # an empty folder is the command's to fill
    plan_from_files([BASE, extra])


def test_plan_refuses_a_tracked_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path) -> None:
    monkeypatch.chdir(repo_view)
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"tiny_models:\n  - {{out: {REPO / 'resources'}, arch: gpt2}}\n")  # the checkout's own folder
    with pytest.raises(
        PlanError, match=rf"tiny_models\.0\.out {REPO}/resources: the workflow would replace it: it holds "
    ):
        plan_from_files([BASE, extra])


# ---------------------------------------------------------------- the bench's run folders


def test_the_bench_empties_only_its_own_run_folder(tmp_path: Path) -> None:
    from verbeval.bench.workflow_runs import bench_folder

    run = tmp_path / "results-bench" / "workflow"
    with bench_folder(run) as got:
        assert got == run and [p.name for p in run.iterdir()] == [MARKER]
        (run / "results" / "agreement").mkdir(parents=True)  # what its Snakemake run writes there
        (run / "results" / "agreement" / "table2.csv").write_text("model\n")
    assert list(json.loads((run / MARKER).read_text())["files"]) == ["results/agreement/table2.csv"]
    with bench_folder(run):  # its own earlier run folder: emptied
        assert [p.name for p in run.iterdir()] == [MARKER]
    # a file added after the run ended is the user's: the folder is kept
    (run / "notes.txt").write_text("mine")
    with pytest.raises(VerbevalError) as err:
        with bench_folder(run):
            pass
    assert str(err.value) == (
        f"--workdir {run}: not replaced: it holds files bench did not write (notes.txt); {ADVICE}"
    )
    # issue 51: a user's own workflow run folder that looks like the bench's (results/agreement/,
    # a config) is never emptied
    mine = tmp_path / "mine" / "workflow"
    (mine / "results" / "agreement" / "gpt2-xl").mkdir(parents=True)
    (mine / "results" / "agreement" / "gpt2-xl" / "table2.csv").write_text("model\n")
    (mine / "my-config.yaml").write_text("models: []\n")
    (mine / "bench-config.yaml").write_text("models: []\n")
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(VerbevalError) as err:
        with bench_folder(mine):
            pass
    assert str(err.value) == (
        f"--workdir {mine}: not replaced: it is not an earlier output of bench (it holds bench-config.yaml, "
        f"my-config.yaml, notes.txt and 1 more); {ADVICE}"
    )
    assert (mine / "notes.txt").read_text() == "mine"
    assert (mine / "results" / "agreement" / "gpt2-xl" / "table2.csv").is_file()
    assert not list(mine.parent.glob(".workflow.old-*"))
    # a run killed before it recorded its files (kill -9): its folder is refused like a user's
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / MARKER).write_text('{"command": "bench", "files": {}}')
    (killed / "results.csv").write_text("x")
    assert replace_problem(killed, "bench") == "it holds files bench did not write (results.csv)"


def test_the_bench_refuses_a_users_run_folder_before_any_work(tmp_path: Path) -> None:
    from verbeval.bench.runner import run_bench, run_folders

    assert run_folders(tmp_path, ("sweep", "snakemake"), (2, 8), 1000) == [
        tmp_path / "snakemake",
        tmp_path / "sweep" / "n2",
        tmp_path / "sweep" / "n8",
        tmp_path / "sweep" / "plan",
        tmp_path / "sweep" / "dry1000",
    ]
    assert run_folders(tmp_path, ("aggregation",), (2,), 0) == [tmp_path / "workflow"]
    mine = tmp_path / "workflow"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(VerbevalError) as err:
        run_bench(out=tmp_path / "bench.json", quick=True, config="x.yaml", shared=tmp_path, workdir=tmp_path)
    assert str(err.value) == (
        f"--workdir {mine}: not replaced: it is not an earlier output of bench (it holds notes.txt); {ADVICE}"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workflow"]  # nothing built, nothing written


def test_bench_hashes_keeps_a_users_folder_at_a_copys_place(tmp_path: Path) -> None:
    from verbeval.bench.output_hashes import run_one

    copy = tmp_path / "work" / "old" / "config_quick.yaml"
    copy.mkdir(parents=True)
    (copy / "thesis.tex").write_text("mine")
    with pytest.raises(VerbevalError) as err:
        run_one(REPO, "config/quick.yaml", copy, cores=1, config_values=(), shared=tmp_path, patterns=())
    assert str(err.value) == (
        f"--workdir {copy}: not replaced: it is not an earlier output of bench-hashes (it holds thesis.tex); {ADVICE}"
    )
    assert (copy / "thesis.tex").read_text() == "mine"
