"""``verbeval bench-hashes`` (verbeval.bench.output_hashes): which files are compared, how two runs'
hashes are diffed and reported, and that a run imports its own tree's package. No workflow runs here."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verbeval.bench import output_hashes as oh
from verbeval.bench.snakemake_jobs import check_imports


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_excluded_paths() -> None:
    assert oh.excluded("results/logs/agreement/m/infer.log")
    assert oh.excluded("results/logs/fetch/done.txt")  # every file of a logs/ folder
    assert oh.excluded(".snakemake/metadata/abc")
    assert oh.excluded("results/run.log") and oh.excluded("src/verbeval/__pycache__/x.cpython-311.pyc")
    assert oh.excluded("snakemake-metadata.sqlite")
    assert not oh.excluded("results/agreement/table2.csv")
    assert not oh.excluded("models/tiny/config.json")
    assert oh.excluded("results/agreement/figures/fig1.png", ["results/*/figures/*.png"])


def test_planted_runs_compared(tmp_path: Path) -> None:
    """A differing file, a file missing from the new run, one only in the new run; logs, Snakemake's
    records and the tree's own source files are not compared."""
    common = {
        "results/agreement/table2.csv": "a,b\n1,2\n",
        "models/tiny/config.json": "{}",
        "results/logs/agreement/infer.log": "took 1.0 s",
        ".snakemake/log/x.snakemake.log": "run 1",
        "results/agreement/run.log": "t=1",
        "Snakefile": "rule all:",
    }
    _write(tmp_path / "old", {**common, "results/agreement/summary.csv": "x\n1\n", "results/only_old.txt": "o"})
    _write(
        tmp_path / "new",
        {
            **common,
            "results/logs/agreement/infer.log": "took 2.0 s",  # differs, ignored
            ".snakemake/log/x.snakemake.log": "run 2",
            "results/agreement/run.log": "t=2",
            "results/agreement/summary.csv": "x\n2\n",
            "results/only_new.txt": "n",
        },
    )
    sources = frozenset({"Snakefile"})
    old = oh.hash_outputs(tmp_path / "old", sources)
    new = oh.hash_outputs(tmp_path / "new", sources)
    assert sorted(old) == [
        "models/tiny/config.json",
        "results/agreement/summary.csv",
        "results/agreement/table2.csv",
        "results/only_old.txt",
    ]
    assert old["models/tiny/config.json"] == hashlib.sha256(b"{}").hexdigest()
    c = oh.compare("config/quick.yaml", old, new)
    assert c.identical == ["models/tiny/config.json", "results/agreement/table2.csv"]
    assert c.differing == ["results/agreement/summary.csv"]
    assert c.only_old == ["results/only_old.txt"] and c.only_new == ["results/only_new.txt"]
    assert c.compared == 3 and not c.same
    text = oh.table([c, oh.compare("sweep", old, old), oh.Comparison("ci", error="snakemake failed (1)")])
    lines = text.splitlines()
    assert lines[0].split() == ["configuration", "compared", "identical", "differing", "only-in-old", "only-in-new"]
    assert lines[1].split() == ["config/quick.yaml", "3", "2", "1", "1", "1"]
    assert lines[2].split() == ["sweep", "4", "4", "0", "0", "0"]
    assert lines[3].split() == ["ci", "-", "-", "-", "-", "-"]
    assert "config/quick.yaml: differs: results/agreement/summary.csv" in lines
    assert "config/quick.yaml: only in old: results/only_old.txt" in lines
    assert "config/quick.yaml: only in new: results/only_new.txt" in lines
    assert "ci: run failed: snakemake failed (1)" in lines
    assert oh.compare("sweep", old, old).same


def test_symlinks_are_followed_and_dangling_ones_left_out(tmp_path: Path) -> None:
    _write(tmp_path / "target", {"weights.bin": "w"})
    (tmp_path / "run" / "models").mkdir(parents=True)
    (tmp_path / "run" / "models" / "weights.bin").symlink_to(tmp_path / "target" / "weights.bin")
    (tmp_path / "run" / "models" / "gone.bin").symlink_to(tmp_path / "target" / "gone.bin")
    assert oh.hash_outputs(tmp_path / "run") == {"models/weights.bin": hashlib.sha256(b"w").hexdigest()}


def test_a_tree_is_copied_with_its_uncommitted_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _write(tree, {"Snakefile": "x", "src/verbeval/__init__.py": "", ".gitignore": "results*/\n", "gone.txt": "g"})
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    _write(tree, {"new.py": "n", "results-quick/table.csv": "ignored", "Snakefile": "changed"})
    (tree / "gone.txt").unlink()
    assert oh.source_files(tree) == [".gitignore", "Snakefile", "new.py", "src/verbeval/__init__.py"]
    sources = oh.copy_tree(tree, tmp_path / "copy")
    assert sources == frozenset(oh.source_files(tree))
    assert (tmp_path / "copy" / "Snakefile").read_text() == "changed"
    assert not (tmp_path / "copy" / "results-quick").exists()
    # not a git checkout: every file but earlier outputs and environments
    plain = tmp_path / "plain"
    _write(plain, {"Snakefile": "x", "src/a.py": "", ".venv/bin/python": "", "results-ci/t.csv": "", "models/m": ""})
    assert oh.source_files(plain) == ["Snakefile", "src/a.py"]


def test_a_run_imports_its_own_trees_package(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    _write(copy, {"src/verbeval/__init__.py": "__version__ = 'copy'\n"})
    env = oh.run_environ(copy, tmp_path / "stand-in")
    assert env["PYTHONPATH"] == str((copy / "src").resolve())
    assert str(Path(sys.executable).parent) in env["PATH"].split(os.pathsep)[:2]  # after a stand-in scontrol
    check_imports(copy, env)
    with pytest.raises(RuntimeError, match="imports verbeval from"):
        check_imports(tmp_path / "elsewhere", env)


def test_any_difference_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    a = argparse.Namespace(
        shared=None,
        old="o",
        new="n",
        configs=["config/quick.yaml"],
        workdir="w",
        cores=2,
        config_values=[],
        sweep_revisions=32,
        exclude=[],
    )
    from verbeval.bench import cli as bench_cli

    same = [oh.compare("config/quick.yaml", {"a": "1"}, {"a": "1"})]
    monkeypatch.setattr(bench_cli, "compare_trees", lambda *_, **__: same)
    bench_cli.cmd_bench_hashes(a)
    differ = [oh.compare("config/quick.yaml", {"a": "1"}, {"a": "2"})]
    monkeypatch.setattr(bench_cli, "compare_trees", lambda *_, **__: differ)
    with pytest.raises(SystemExit) as e:
        bench_cli.cmd_bench_hashes(a)
    assert e.value.code == 1
    assert "config/quick.yaml: differs: a" in capsys.readouterr().out
