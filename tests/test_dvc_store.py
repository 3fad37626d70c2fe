"""DVC must never restore a shard store's manifest.json without its shards (issue 23, item 7).

A real ``dvc repro`` on a two-stage pipeline shaped like ``infer`` -> ``aggregate``: the first stage
writes a shard beside its manifest (only the manifest is a DVC output, as in the generated
dvc.yaml), the second reads the shard. After ``rm -rf results`` the first stage must run again
instead of being restored from DVC's run-cache, which brings the manifest back alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from verbeval.workflow.dvc_yaml import STORE_OUT

pytestmark = pytest.mark.skipif(
    shutil.which("dvc") is None or shutil.which("git") is None, reason="needs the dvc and git commands"
)

INFER = (
    "import pathlib, sys; s = pathlib.Path('results/shards'); (s / 'g').mkdir(parents=True, exist_ok=True); "
    "(s / 'g' / '1-of-1.parquet').write_text(pathlib.Path('in.txt').read_text()); "
    "(s / 'manifest.json').write_text('{}')"
)
AGGREGATE = (
    "import pathlib; t = pathlib.Path('results/shards/g/1-of-1.parquet').read_text(); "
    "pathlib.Path('results/summary.txt').write_text(t + pathlib.Path('cut.txt').read_text())"
)


def _pipeline(manifest_out: Any) -> dict[str, Any]:
    py = f"{sys.executable} -c"
    return {
        "stages": {
            "infer": {"cmd": f'{py} "{INFER}"', "deps": ["in.txt"], "outs": [manifest_out]},
            "aggregate": {
                "cmd": f'{py} "{AGGREGATE}"',
                "deps": ["results/shards/manifest.json", "cut.txt"],
                "outs": ["results/summary.txt"],
            },
        }
    }


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)


def _repro_after_results_removed(tmp_path: Path, manifest_out: Any) -> subprocess.CompletedProcess[str]:
    for args in (("git", "init", "-q"), ("dvc", "init", "-q")):
        assert _run(tmp_path, *args).returncode == 0
    (tmp_path / "in.txt").write_text("p=0.5\n")
    (tmp_path / "cut.txt").write_text("cutoff 1\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(_pipeline(manifest_out)))
    first = _run(tmp_path, "dvc", "repro")
    assert first.returncode == 0, first.stderr
    shutil.rmtree(tmp_path / "results")
    (tmp_path / "cut.txt").write_text("cutoff 0.9\n")  # a change that needs aggregate
    return _run(tmp_path, "dvc", "repro")


@pytest.mark.e2e
def test_store_manifest_is_not_restored_without_its_shards(tmp_path: Path) -> None:
    again = _repro_after_results_removed(tmp_path, {"results/shards/manifest.json": dict(STORE_OUT)})
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "results" / "summary.txt").read_text() == "p=0.5\ncutoff 0.9\n"


@pytest.mark.e2e
def test_a_plain_output_shows_the_run_cache_problem(tmp_path: Path) -> None:
    """The control: with the manifest a plain (cached) output, DVC restores it from the run-cache
    and the shard is gone, which is what STORE_OUT prevents."""
    again = _repro_after_results_removed(tmp_path, "results/shards/manifest.json")
    assert (tmp_path / "results" / "shards" / "manifest.json").exists()
    assert not (tmp_path / "results" / "shards" / "g" / "1-of-1.parquet").exists()
    assert again.returncode != 0


#: an inference stage that resumes from the shards it finds (as verbeval's shard store does) and dies
#: (exit 130, as on Ctrl-C) after its shard and before its manifest while the file 'interrupt' exists
RESUMING_INFER = (
    "import pathlib, sys; s = pathlib.Path('results/shards'); shard = s / 'g' / '1-of-1.parquet'; "
    "shard.parent.mkdir(parents=True, exist_ok=True); "
    "log = pathlib.Path('infer.log'); "
    "log.write_text((log.read_text() if log.exists() else '') + ('kept' if shard.exists() else 'computed') + '\\n'); "
    "shard.exists() or shard.write_text(pathlib.Path('in.txt').read_text()); "
    "pathlib.Path('interrupt').exists() and sys.exit(130); "
    "(s / 'manifest.json').write_text('{}')"
)


@pytest.mark.e2e
def test_an_interrupted_repro_resumes_from_its_shards_and_ends_as_an_unbroken_one(tmp_path: Path) -> None:
    """`dvc repro` interrupted inside the inference stage, after a shard and before the manifest: the
    stage failed, so the next `dvc repro` runs it again. The shards are not DVC outputs (only the
    manifest is, as STORE_OUT), so DVC leaves the finished shard in place and the stage keeps it; the
    result is that of an uninterrupted repro, and DVC then reports everything up to date."""
    py = f"{sys.executable} -c"
    pipeline = _pipeline({"results/shards/manifest.json": dict(STORE_OUT)})
    pipeline["stages"]["infer"]["cmd"] = f'{py} "{RESUMING_INFER}"'
    for args in (("git", "init", "-q"), ("dvc", "init", "-q")):
        assert _run(tmp_path, *args).returncode == 0
    (tmp_path / "in.txt").write_text("p=0.5\n")
    (tmp_path / "cut.txt").write_text("cutoff 1\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(pipeline))
    (tmp_path / "interrupt").write_text("")
    broken = _run(tmp_path, "dvc", "repro")
    assert broken.returncode != 0
    assert (tmp_path / "results" / "shards" / "g" / "1-of-1.parquet").exists()
    assert not (tmp_path / "results" / "shards" / "manifest.json").exists()
    assert not (tmp_path / "results" / "summary.txt").exists()
    (tmp_path / "interrupt").unlink()
    again = _run(tmp_path, "dvc", "repro")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "infer.log").read_text() == "computed\nkept\n"  # the shard survived the rerun's start
    assert (tmp_path / "results" / "summary.txt").read_text() == "p=0.5\ncutoff 1\n"
    status = _run(tmp_path, "dvc", "status")
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout
