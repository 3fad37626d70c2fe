"""A job fails alone and in one line (issue 24, item 8) and hub models without network fail at
start-up with the fix (issue 23, item 3)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from conftest import checkout_view, fake_cached
from inprocess import DryRun, DryRunError, dry_run
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources import hub
from verbeval.core.model_sources.source import ModelSource


def test_hub_model_offline_and_not_cached_is_named_with_the_fix(no_hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = hub.hub_problem(ModelSource("org/not-cached"))
    assert problem is not None and "hub model org/not-cached is not in the local Hugging Face cache" in problem
    assert "Connection refused" in problem and "hf download org/not-cached" in problem and "HF_HUB_OFFLINE=1" in problem
    fake_cached(no_hub, "org/cached")
    assert hub.hub_problem(ModelSource("org/cached")) is None  # cached: loads offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE is set" in (hub.hub_problem(ModelSource("org/not-cached")) or "")


def test_check_config_warns_about_hub_ids(
    no_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./models folder here
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models: [{id: models/no-such-model-dir}]\n")
    # the run would stop before any job (hub_start_problem): check-config reaches the same verdict
    assert main(["check-config", str(cfg)]) == 1
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert any(
        ln.startswith("WARNING: ")
        and "models.0.id: 'models/no-such-model-dir' is read as a hub id" in ln
        and "write ./models/no-such-model-dir" in ln
        for ln in err
    ), err
    assert any(
        ln.startswith(
            f"ERROR: {cfg}: models.0.id: hub model models/no-such-model-dir is not in the local Hugging Face cache"
        )
        for ln in err
    ), err
    assert err[-1] == (
        f"verbeval check-config: error: {cfg}: 1 hub model(s) cannot be loaded here (above); a run "
        "of it would stop before any job"
    ), err
    assert "OK" not in captured.out


def test_check_config_ok_for_a_cached_hub_model(
    no_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    fake_cached(no_hub, "org/cached")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models: [{id: org/cached}]\n")
    assert main(["check-config", str(cfg)]) == 0
    assert capsys.readouterr().out == f"{cfg}: OK (1 models)\n"


def _run(wd: Path, args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Snakemake from ``wd``, a view of the checkout (nothing is written into the checkout)."""
    import os

    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=checkout_view(wd), capture_output=True, text=True, env=env
    )


@pytest.mark.e2e
def test_real_run_with_unreachable_hub_model_stops_before_any_job(no_hub: Path, tmp_path: Path) -> None:
    import os

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"results_dir: {tmp_path / 'res'}\nraw_dir: {tmp_path / 'raw'}\nmodels: [{{id: gpt2}}]\n"
        "agreement: {groups: [simple]}\n"
    )
    target = str(tmp_path / "res" / "agreement" / "gpt2" / "lemmas.parquet")
    res = _run(
        tmp_path / "wd",
        [target, "--cores", "1", "--configfile", str(cfg)],
        {"HF_HUB_CACHE": os.environ["HF_HUB_CACHE"], "HF_ENDPOINT": os.environ["HF_ENDPOINT"]},
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert f"{cfg}: models.0.id: hub model gpt2 is not in the local Hugging Face cache" in out, out[-3000:]
    assert "no job was run" in out and not (tmp_path / "raw").exists()  # not even a fetch


def test_a_job_checks_only_its_own_model(tmp_path: Path) -> None:
    """A job run on its own (SLURM, `--mode remote`) re-reads the Snakefile: another model's missing
    folder must not fail it (the main process still checks every model before the DAG)."""
    from snakemake.settings.types import WorkflowSettings
    from snakemake_interface_executor_plugins.settings import ExecMode

    a = tmp_path / "a"
    a.mkdir()
    (a / "config.json").write_text("{}")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"results_dir: {tmp_path / 'res'}\nraw_dir: {tmp_path / 'raw'}\n"
        f"models: [{{id: {a}, name: a}}, {{id: {tmp_path / 'gone'}, name: b}}]\n"
        "agreement: {groups: [simple]}\n"
    )
    target = str(tmp_path / "res" / "agreement" / "a" / "lemmas.parquet")
    wd = checkout_view(tmp_path / "wd")
    with pytest.raises(DryRunError) as err:  # snakemake -n TARGET: the main process
        dry_run(wd, [cfg], targets=[target])
    assert f"models.1.id: model b: local path {tmp_path / 'gone'} does not exist" in str(err.value)
    # snakemake -n --mode remote TARGET: the workflow in the execution mode of a job run on its own
    job = dry_run(wd, [cfg], targets=[target], workflow_settings=WorkflowSettings(exec_mode=ExecMode.REMOTE))
    assert [j["outputs"] for j in job.of("lemmas")] == [[target]], job.stats


def test_damaged_safetensors_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "words.txt"
    corpus.write_text("the dog walks\nthe dogs walk\n")
    model = tmp_path / "m"
    assert main(["tiny-model", "--word-corpus", str(corpus), "--arch", "gpt2", "--out", str(model)]) in (0, None)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a truncated download
    # no templates to score (the length check before the load passes): the damaged weights are the error
    pd.DataFrame({c: pd.Series(dtype=str) for c in ("group", "source", "left", "right")}).to_parquet(
        tmp_path / "t.parquet"
    )
    pd.DataFrame({"lemma": pd.Series(dtype=str)}).to_parquet(tmp_path / "l.parquet")
    capsys.readouterr()
    rc = main(
        [
            "infer",
            "--model",
            str(model),
            "--device",
            "cpu",
            "--templates",
            str(tmp_path / "t.parquet"),
            "--lemmas",
            str(tmp_path / "l.parquet"),
            "--groups",
            "simple",
            "--manifest",
            str(tmp_path / "out" / "manifest.json"),
        ]
    )
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith(
        f"verbeval infer: error: cannot load model '{model}': damaged safetensors weights ({weights})"
    ), err[0]
    assert not (tmp_path / "out" / "manifest.json").exists()
    json.loads((model / "config.json").read_text())  # the rest of the model is untouched


def test_unreachable_hub_model_does_not_stop_jobs_that_do_not_load_it(
    no_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the workflow's start check (common.smk, onstart: hub_start_problem) decides for the jobs
    a run would do. The lexicon's jobs load no model, so an unreachable gpt2 does not stop them;
    gpt2's lemmas job does (the real run that stops: test_real_run_with_unreachable_hub_model_stops_before_any_job)."""
    from verbeval.workflow.loading import plan_from_files
    from verbeval.workflow.snakemake import hub_start_problem

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"results_dir: {tmp_path / 'res'}\nraw_dir: {tmp_path / 'raw'}\nmodels: [{{id: gpt2}}]\n"
        "agreement: {groups: [simple], verb_lists: [verbs_combined]}\n"
    )
    wd = checkout_view(tmp_path / "wd")
    monkeypatch.chdir(wd)  # the configuration's relative paths, as the workflow reads them
    plan = plan_from_files([wd / "config" / "config.yaml", cfg])

    def start_check(run: DryRun) -> str | None:
        return hub_start_problem(plan, [(j["rule"], j["wildcards"]) for j in run.jobs])

    lexicon = dry_run(wd, [cfg], targets=[str(tmp_path / "res" / "agreement" / "lexicon.parquet")])
    assert lexicon.stats == {"fetch": 1, "lexicon": 1}, lexicon.stats
    assert start_check(lexicon) is None
    lemmas = dry_run(wd, [cfg], targets=[str(tmp_path / "res" / "agreement" / "gpt2" / "lemmas.parquet")])
    problem = start_check(lemmas) or ""
    assert problem.startswith(f"{cfg}: models.0.id: hub model gpt2 is not in the local Hugging Face cache"), problem
    assert problem.endswith("; no job was run")


# ------------------------------------------------------------------ a checkpoint's tensors (issue 61)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny GPT-2 (lm_head tied to wte) and a tiny BERT (decoder tied to the embeddings and
    cls.predictions.bias) on a word-level tokenizer, saved."""
    from verbeval.core.tiny_models import make_tiny_model
    from verbeval.core.wordtok import save_word_tokenizer

    root = tmp_path_factory.mktemp("tensors")
    corpus = root / "corpus.txt"
    corpus.write_text("the dog walks the dogs walk near a door\n")
    out = {}
    for arch, style in (("gpt2", "causal"), ("bert", "masked")):
        tok = save_word_tokenizer([corpus], style, root / f"tok-{arch}")  # type: ignore[arg-type]
        out[arch] = make_tiny_model(tok, arch, root / arch, layers=1, hidden=16)
    return out


def _edited(model: Path, dest: Path, edit: Any) -> Path:
    """A copy of ``model`` whose safetensors file ``edit`` changed (a dict of tensors, in place)."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(model, dest)
    weights = load_file(str(dest / "model.safetensors"))
    edit(weights)
    save_file(weights, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def _logits(folder: Path) -> Any:
    import torch

    from verbeval.core.models import load_model

    lm = load_model(str(folder), device="cpu")
    with torch.no_grad():
        return lm.model(**lm.tokenizer("the dog walks", return_tensors="pt")).logits


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "verbeval" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_a_whole_checkpoint_with_tied_weights_loads_without_a_word(
    tiny_models: dict[str, Path], arch: str, caplog: pytest.LogCaptureFixture
) -> None:
    from safetensors import safe_open

    with safe_open(str(tiny_models[arch] / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    # the tied tensors are saved once: GPT-2's lm_head, BERT's decoder are not in the file
    assert "lm_head.weight" not in keys and "cls.predictions.decoder.weight" not in keys
    with caplog.at_level(logging.INFO, logger="verbeval"):
        _logits(tiny_models[arch])
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    ("arch", "removed", "reported"),
    [
        ("gpt2", ["transformer.h.0.mlp.c_fc.weight"], "transformer.h.0.mlp.c_fc.weight"),
        # both of a tied pair gone (the embeddings, of which the decoder is a view): both named
        ("bert", ["bert.embeddings.word_embeddings.weight"],
         "bert.embeddings.word_embeddings.weight, cls.predictions.decoder.weight"),
    ],
)  # fmt: skip
def test_a_checkpoint_missing_a_tensor_is_refused_naming_it(
    tiny_models: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arch: str,
    removed: list[str],
    reported: str,
) -> None:
    from verbeval.core.models import load_model

    model = _edited(tiny_models[arch], tmp_path / "m", lambda w: [w.pop(k) for k in removed])
    n = reported.count(",") + 1
    message = (
        f"cannot load model '{model}': its checkpoint lacks {n} tensor(s) of the model ({reported}); "
        "scored, they would be random (newly initialised) weights; download or save the model again"
    )
    with pytest.raises(VerbevalError) as refused:
        load_model(str(model), device="cpu")
    assert str(refused.value) == message
    # through a command: one error line, no output written
    pd.DataFrame({c: pd.Series(dtype=str) for c in ("group", "source", "left", "right")}).to_parquet(
        tmp_path / "t.parquet"
    )
    pd.DataFrame({"lemma": pd.Series(dtype=str)}).to_parquet(tmp_path / "l.parquet")
    capsys.readouterr()
    rc = main(["infer", "--model", str(model), "--device", "cpu", "--templates", str(tmp_path / "t.parquet"),
               "--lemmas", str(tmp_path / "l.parquet"), "--groups", "simple",
               "--manifest", str(tmp_path / "out" / "manifest.json")])  # fmt: skip
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("verbeval")]
    assert (rc, err) == (1, [f"verbeval infer: error: {message}"])
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_an_extra_tensor_is_one_warning_and_changes_no_score(
    tiny_models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    def add(w: dict[str, Any]) -> None:
        w["cls.seq_relationship.weight"] = torch.ones(2, 16)
        w["cls.seq_relationship.bias"] = torch.zeros(2)

    model = _edited(tiny_models["bert"], tmp_path / "m", add)
    with caplog.at_level(logging.INFO, logger="verbeval"):
        logits = _logits(model)
    assert _warnings(caplog) == [
        f"{model}: its checkpoint holds 2 tensor(s) the model does not use, ignored "
        "(cls.seq_relationship.bias, cls.seq_relationship.weight)"
    ]
    assert torch.equal(logits, _logits(tiny_models["bert"]))
