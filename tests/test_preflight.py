"""Failures that must stop the workflow before any job starts, and model-version invalidation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from verbeval.core.models import model_fingerprint

from conftest import checkout_view


def _dry_run(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(config)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(cfg), "--cores", "1"],
                          cwd=checkout_view(tmp_path / "wd"), capture_output=True, text=True, env=env)


@pytest.mark.parametrize("config, reason", [
    # (an empty raw_dir of its own: a verified raw copy needs no mirror file, docs/data.md)
    ("models: [{id: gpt2}]\ndata_mirror: /nonexistent-mirror\nraw_dir: TMP/raw\n",
     "data_mirror /nonexistent-mirror: missing 21 file(s), e.g. /nonexistent-mirror/github.com/"),
    ("models: [{id: ./models/does-not-exist}]\n", "model does-not-exist: local path ./models/does-not-exist does not exist"),
    ("models: [{id: gpt2}]\nagreement: {chunk: 3}\n", "invalid value at agreement: Additional properties are not allowed ('chunk'"),
    ("models: [{id: gpt2}]\nagreement: {groups: [simple, nope]}\n", "agreement.groups: unknown group(s) ['nope']"),
])
def test_bad_setup_fails_before_any_job(tmp_path: Path, config: str, reason: str) -> None:
    res = _dry_run(tmp_path, config.replace("TMP", str(tmp_path)))
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert reason in out, out[-2000:]
    assert "Job stats" not in out  # no DAG was scheduled


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
    assert model_fingerprint("org/model", commit) == f"hub:{commit}"
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path))
    assert model_fingerprint("org/model") == "hub:main"  # not cached: the revision name
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(commit)
    assert model_fingerprint("org/model") == f"hub:{commit}"


@pytest.mark.e2e
def test_changed_local_model_reruns_its_jobs(tmp_path: Path, tokenizer_path: Callable[[str], Path], data_dir: Path) -> None:
    from verbeval.core.models import make_tiny_model

    model = tmp_path / "tiny-gpt2"
    make_tiny_model(tokenizer_path("gpt2"), "gpt2", model, seed=0)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"""
data_mirror: {data_dir}
raw_dir: {tmp_path / 'raw'}
results_dir: {tmp_path / 'results'}
models: [{{id: {model}, name: tiny}}]
""")
    target = str(tmp_path / "results" / "agreement" / "tiny" / "lemmas.parquet")
    cmd = [sys.executable, "-m", "snakemake", target, "--cores", "1", "--configfile", str(cfg)]
    wd = checkout_view(tmp_path / "wd")
    done = subprocess.run(cmd, cwd=wd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    again = subprocess.run(cmd + ["-n"], cwd=wd, capture_output=True, text=True)
    assert "Nothing to be done" in again.stdout + again.stderr
    for f in model.iterdir():
        f.touch()  # new times, same contents: nothing to recompute (the fingerprint is a content hash)
    touched = subprocess.run(cmd + ["-n"], cwd=wd, capture_output=True, text=True)
    assert "Nothing to be done" in touched.stdout + touched.stderr, (touched.stdout + touched.stderr)[-2000:]
    # another checkpoint of the same architecture, copied over it with preserved times (cp -p): same
    # names, sizes, mtimes and safetensors header, other weights
    other = tmp_path / "other"
    make_tiny_model(tokenizer_path("gpt2"), "gpt2", other, seed=1)
    for f in other.iterdir():
        st = (model / f.name).stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        shutil.copy2(f, model / f.name)
    assert (model / "model.safetensors").stat().st_mtime_ns == (other / "model.safetensors").stat().st_mtime_ns
    changed = subprocess.run(cmd + ["-n"], cwd=wd, capture_output=True, text=True)
    out = changed.stdout + changed.stderr
    assert "rule lemmas:" in out and "Nothing to be done" not in out, out[-2000:]
