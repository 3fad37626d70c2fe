"""Model-version invalidation: a local model's version is the hash of its files (in the shards; the
plan's rerun trigger is their stat identity, tests/test_fingerprint.py).

(The setup errors that stop the workflow before any job starts are tested in process in
tests/test_plan.py, test_bad_setup_stops_the_plan.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import checkout_view
from inprocess import dry_run
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import model_fingerprint


def test_local_model_fingerprint_follows_its_files(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"1234")
    first = model_fingerprint(str(d))
    assert first.startswith("local-sha256:") and first == model_fingerprint(str(d))
    (d / "model.safetensors").write_bytes(b"12345")  # a new checkpoint
    assert model_fingerprint(str(d)) != first


def test_hub_fingerprint_uses_pinned_or_cached_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert model_fingerprint(ModelSource("org/model", commit)) == f"hub:{commit}"
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path))
    assert model_fingerprint("org/model") == "hub:main"  # not cached: the revision name
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(commit)
    assert model_fingerprint("org/model") == f"hub:{commit}"


@pytest.mark.e2e
def test_changed_local_model_reruns_its_jobs(
    tmp_path: Path, tokenizer_path: Callable[[str], Path], data_dir: Path
) -> None:
    from verbeval.core.tiny_models import make_tiny_model

    model = tmp_path / "tiny-gpt2"
    make_tiny_model(tokenizer_path("gpt2"), "gpt2", model, seed=0)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"""
data_mirror: {data_dir}
raw_dir: {tmp_path / "raw"}
results_dir: {tmp_path / "results"}
models: [{{id: {model}, name: tiny}}]
""")
    target = str(tmp_path / "results" / "agreement" / "tiny" / "lemmas.parquet")
    wd = checkout_view(tmp_path / "wd")
    # the run itself is real (a Snakemake process that records each job's parameters in wd/.snakemake);
    # what would run again afterwards is asked in process, as `snakemake -n TARGET` does
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", target, "--cores", "1", "--configfile", str(cfg)],
        cwd=wd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert dry_run(wd, [cfg], targets=[target]).jobs == []  # nothing to be done
    lemmas = Path(target).read_bytes()
    for f in model.iterdir():
        f.touch()  # new times, same contents: the plan's version (a stat identity, no file read) changes
    touched = dry_run(wd, [cfg], targets=[target])
    assert touched.stats == {"lemmas": 1} and "Params have changed" in touched.jobs[0]["reason"], touched.jobs
    again = subprocess.run(done.args, cwd=wd, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert Path(target).read_bytes() == lemmas and dry_run(wd, [cfg], targets=[target]).jobs == []
    # another checkpoint of the same architecture, copied over it with preserved times (cp -p): same
    # names, sizes, mtimes and safetensors header, other weights
    other = tmp_path / "other"
    make_tiny_model(tokenizer_path("gpt2"), "gpt2", other, seed=1)
    for f in other.iterdir():
        st = (model / f.name).stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        shutil.copy2(f, model / f.name)
    assert (model / "model.safetensors").stat().st_mtime_ns == (other / "model.safetensors").stat().st_mtime_ns
    changed = dry_run(wd, [cfg], targets=[target])
    assert changed.stats == {"lemmas": 1}, changed.jobs
    assert "Params have changed" in changed.jobs[0]["reason"], changed.jobs[0]["reason"]
