"""Issue 13: every expected fault ends with one line naming its cause, and leaves nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT as REPO
from conftest import checkout_view, fake_cached
from inprocess import DryRunError, dry_run
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.io import atomic_path, check_writable, stale_temporaries, write_text
from verbeval.workflow.loading import plan_from_files
from verbeval.workflow.plan import PlanError

SRC = REPO / "src"


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


# --------------------------------------------------------------------------- 4: temporaries of killed jobs


def _writer(target: Path, ready: Path) -> subprocess.Popen[bytes]:
    """A process that opens ``target`` with atomic_path, writes a little and then hangs."""
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from verbeval.core.io import atomic_path
        with atomic_path({str(target)!r}) as tmp:
            tmp.write_text("partial")
            Path({str(ready)!r}).write_text(str(tmp))
            time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def _wait_for(path: Path) -> str:
    for _ in range(600):
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_killed_writer_leaves_a_temporary_that_the_next_write_removes(tmp_path: Path) -> None:
    target = tmp_path / "out" / "1-of-2.parquet"
    proc = _writer(target, tmp_path / "ready")
    tmp = Path(_wait_for(tmp_path / "ready"))
    assert tmp.name.startswith(".1-of-2.parquet.") and tmp.name.endswith(".tmp")
    assert stale_temporaries(target) == []  # a live writer holds its temporary
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert tmp.exists() and not target.exists()  # what a killed job leaves
    # another target's temporary, in the same folder, is never touched
    other = tmp_path / "out" / ".1-of-2.parquet.x.abcd1234.tmp"
    other.write_text("someone else's")
    assert stale_temporaries(target) == [tmp]
    write_text(target, "complete")
    assert target.read_text() == "complete"
    assert sorted(p.name for p in target.parent.iterdir()) == [other.name, target.name]


def test_a_live_writer_of_the_same_target_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "a.csv"
    proc = _writer(target, tmp_path / "ready")
    try:
        tmp = Path(_wait_for(tmp_path / "ready"))
        write_text(target, "mine")
        assert tmp.exists() and tmp.read_text() == "partial"
    finally:
        proc.kill()
        proc.wait()


def test_failed_block_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- 6: I/O faults are one line


def test_infer_checks_its_output_before_loading_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")
    out = blocker / "agreement" / "m" / "shards" / "manifest.json"
    # the model does not exist either: the output check comes first, before any model is loaded
    rc = main(
        [
            "infer",
            "--model",
            str(tmp_path / "no-model"),
            "--templates",
            "t.parquet",
            "--lemmas",
            "l.parquet",
            "--groups",
            "simple",
            "--n-chunks",
            "1",
            "--manifest",
            str(out),
        ]
    )
    assert rc == 1
    err = _err_lines(capsys)
    assert err == [f"verbeval infer: error: cannot write {out}: {blocker}: is a file, not a directory"]
    assert blocker.read_text().startswith("a file")


@pytest.mark.parametrize(
    "errno_, strerror", [(13, "Permission denied"), (28, "No space left on device"), (30, "Read-only file system")]
)
def test_os_errors_while_writing_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, errno_: int, strerror: str
) -> None:
    import verbeval.core.io as vio

    summary = tmp_path / "summary.csv"
    summary.write_text("model,group,metric,side,cutoff,value,ci_low,ci_high,n,n_total\n")
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(errno_, strerror, str(dst))

    monkeypatch.setattr(vio.os, "replace", failing_replace)
    out = tmp_path / "out" / "common.parquet"
    forms = tmp_path / "forms.parquet"
    import pandas as pd

    pd.DataFrame(
        {
            "lemma": ["walk"],
            "sing": ["walks"],
            "plur": ["walk"],
            "in_lexicon": [True],
            "single_token": [True],
            "scorable": [True],
        }
    ).to_parquet(forms)
    rc = main(["-q", "lexicon-common", "--forms", f"m={forms}", "--out", str(out)])
    monkeypatch.setattr(vio.os, "replace", real_replace)
    err = _err_lines(capsys)
    assert rc == 1
    assert err == [f"verbeval lexicon-common: error: {out}: {strerror}"]
    assert not out.exists() and list(out.parent.iterdir()) == []  # the temporary file was removed


def test_missing_input_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.parquet"
    out = tmp_path / "out.parquet"
    rc = main(["-q", "lexicon-common", "--forms", f"m={missing}", "--out", str(out)])
    assert rc == 1
    err = _err_lines(capsys)
    assert err == [f"verbeval lexicon-common: error: {missing}: No such file or directory"]
    assert not out.exists()


def test_check_writable_names_the_path(tmp_path: Path) -> None:
    check_writable(tmp_path / "new" / "dir" / "x.csv", None)
    assert (tmp_path / "new" / "dir").is_dir() and list((tmp_path / "new" / "dir").iterdir()) == []
    (tmp_path / "f").write_text("")
    with pytest.raises(VerbevalError, match=r"cannot write .*/f/x\.csv: .*/f: is a file, not a directory"):
        check_writable(tmp_path / "f" / "x.csv")


# --------------------------------------------------------------------------- 2: empty template sources


def _ml_file(data_dir: Path, stem: str) -> Path:
    from test_templates import tse_dir

    return tse_dir(data_dir) / "ML" / f"{stem}_all.jsonl"


def _templates(tmp_path: Path, groups: str, files: dict[str, Path], *extra: str) -> tuple[int, Path, Path]:
    out, rejects = tmp_path / "res" / "templates.parquet", tmp_path / "res" / "template_rejects.csv"
    argv = [
        "-q",
        "templates",
        "--manifest",
        str(REPO / "resources" / "manifest.yaml"),
        "--groups-file",
        str(REPO / "resources" / "agreement_groups.yaml"),
        "--groups",
        groups,
        "--out",
        str(out),
        "--rejects",
        str(rejects),
        *extra,
    ]
    for name, path in files.items():
        argv += ["--input", f"{name}={path}"]
    return main(argv), out, rejects


def _head(src: Path, dst: Path, n: int = 6) -> Path:
    dst.write_text("".join(src.read_text().splitlines(keepends=True)[:n]))
    return dst


def test_empty_source_of_a_single_source_group_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "simple_agrmt_all.jsonl"
    empty.write_text("\n\n")
    rc, out, rejects = _templates(tmp_path, "simple", {"ml_simple_agrmt": empty})
    assert rc == 1
    assert _err_lines(capsys) == [f"verbeval templates: error: {empty}: no template rows: the file is empty"]
    assert not (tmp_path / "res").exists() or list((tmp_path / "res").iterdir()) == []


def test_empty_source_of_a_multi_source_group_is_an_error(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    good = _head(_ml_file(data_dir, "vp_coord"), tmp_path / "vp_coord_all.jsonl")
    empty = tmp_path / "long_vp_coord_all.jsonl"
    empty.write_text("")
    files = {"ml_vp_coord": good, "ml_long_vp_coord": empty}
    rc, out, _ = _templates(tmp_path, "vp_coord", files)
    assert rc == 1
    assert _err_lines(capsys) == [f"verbeval templates: error: {empty}: no template rows: the file is empty"]
    assert not out.exists()
    # --skip-bad-rows downgrades it to a warning that names the file; the group keeps its other source
    rc, out, _ = _templates(tmp_path, "vp_coord", files, "--skip-bad-rows")
    assert rc == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        f"{empty}: no template rows: the file is empty; source 'ml_long_vp_coord' contributes nothing to "
        "group 'vp_coord' (skip_bad_rows)" in warnings
    ), warnings
    import pandas as pd

    assert set(pd.read_parquet(out)["source"]) == {"ml_vp_coord"}


def test_all_rejected_single_source_group_fails_even_when_skipping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "simple_agrmt_all.jsonl"
    bad.write_text('{"sentence_good": "The dog runs", "sentence_bad": "The dog runs"}\nnot json\n')
    rc, out, _ = _templates(tmp_path, "simple", {"ml_simple_agrmt": bad}, "--skip-bad-rows")
    assert rc == 1
    err = [line for line in _err_lines(capsys) if "WARNING" not in line]
    assert err == [
        f"verbeval templates: error: group 'simple' has no template rows: every source file is empty "
        f"or rejected ({bad})"
    ]
    assert not out.exists()


# --------------------------------------------------------------------------- 5: paths with spaces, local model paths


def _config(tmp_path: Path, text: str) -> Path:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(text)
    return cfg


def test_paths_with_spaces_are_quoted(tmp_path: Path) -> None:
    import shlex

    cfg = _config(tmp_path, 'results_dir: "results sp"\nraw_dir: "raw sp"\nmodels: [{id: gpt2}]\n')
    # `snakemake -n -p` in process, from an empty working directory: every job is scheduled
    run = dry_run(checkout_view(tmp_path / "wd"), [cfg])
    commands = [job["cmd"] for job in run.jobs if job["cmd"].startswith("verbeval ")]
    seen = set()
    for cmd in commands:
        argv = shlex.split(cmd)
        sub = argv[1]
        if sub not in {
            "fetch",
            "plot-cutoffs",
            "plot-models",
            "lemma-stats",
            "plot-lemmas",
            "topk-table",
            "veridicality-predict",
            "veridicality-table",
            "run-model",
            "simverb-table",
            "simverb-join",
        }:
            continue  # agreement.smk / lexicon_modes.smk
        seen.add(sub)
        log = argv[argv.index("2>") + 1]
        assert log.startswith("results sp/logs/"), cmd
        for opt in ("--out", "--csv", "--summary", "--stats", "--predictions", "--similarities"):
            if opt in argv:
                assert argv[argv.index(opt) + 1].startswith(("results sp/", "raw sp/")), cmd
    # (a model's SimVerb embeddings come from its one job, run-model: docs/performance.md)
    assert {"fetch", "plot-models", "veridicality-predict", "run-model", "topk-table"} <= seen, seen
    assert run.stats["fetch"] == 23 and run.stats["infer"] == 1  # every source fetched into "raw sp", one model
    fetch = run.of("fetch")[0]
    assert fetch["outputs"][0].startswith(f"raw sp/{fetch['wildcards']['name']}/")
    assert f"--out {shlex.quote(fetch['outputs'][0])}" in fetch["cmd"]


@pytest.mark.parametrize(
    "model_id, reason",
    [
        (
            "models/nope-gpt2",
            "local path models/nope-gpt2 does not exist (read as a path because ./models is a local "
            "folder; a hub id is NAME or ORG/NAME)",
        ),
        ("a/b/c", "local path a/b/c does not exist (read as a path: a hub id has at most one '/')"),
        ("./nope", "local path ./nope does not exist"),
    ],
)
def test_check_config_reports_missing_model_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, model_id: str, reason: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    cfg = tmp_path / "my.yaml"
    cfg.write_text(f"models:\n  - id: gpt2\n  - id: {model_id}\n    name: x\n")
    assert main(["check-config", str(cfg)]) == 1
    assert _err_lines(capsys) == [f"verbeval check-config: error: {cfg}: models.1.id: model x: {reason}"]


def test_model_folder_without_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, no_hub: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "half").mkdir(parents=True)
    (tmp_path / "models" / "half" / "tokenizer.json").write_text("{}")
    cfg = tmp_path / "my.yaml"
    cfg.write_text("models: [{id: gpt2}]\nveridicality: {models: [ross-pavlick-2019-bert, models/half]}\n")
    assert main(["check-config", str(cfg)]) == 1
    assert _err_lines(capsys) == [
        f"verbeval check-config: error: {cfg}: veridicality.models.1: veridicality model models/half: local model "
        "directory models/half has no config.json (not a model saved with save_pretrained)"
    ]
    # the same at load time, before transformers' "Unrecognized model ... model_type" message
    from verbeval.core.models import load_model

    with pytest.raises(
        VerbevalError,
        match=r"^cannot load model 'models/half': local model directory models/half "
        r"has no config.json",
    ):
        load_model("models/half")
    # a GGUF folder listed where only save_pretrained folders go: the message says where it belongs
    (tmp_path / "models" / "smol").mkdir()
    (tmp_path / "models" / "smol" / "SmolLM2.Q4_1.gguf").write_bytes(b"GGUF")
    cfg.write_text("models: [{id: gpt2}]\nsimverb: {models: [models/smol]}\n")
    assert main(["check-config", str(cfg)]) == 1
    assert _err_lines(capsys) == [
        f"verbeval check-config: error: {cfg}: simverb.models.0: simverb model models/smol: local model directory "
        "models/smol has no config.json but holds GGUF file(s) SmolLM2.Q4_1.gguf: list it under models: with "
        "gguf_file: <one of them> (docs/models.md); simverb.models and veridicality.models take only "
        "save_pretrained folders and hub ids"
    ]
    # a hub id (one slash, its first part not a local folder) is not checked as a path (here it is in
    # the hub cache; one neither cached nor downloadable is an error: test_model_errors)
    fake_cached(no_hub, "EleutherAI/pythia-70m")
    cfg.write_text("models: [{id: EleutherAI/pythia-70m}]\n")
    assert main(["check-config", str(cfg)]) == 0


def test_workflow_names_the_config_file_and_key(tmp_path: Path) -> None:
    from snakemake.exceptions import format_exception_to_string

    cfg = _config(tmp_path, "models:\n  - id: gpt2\n  - id: checkpoints/nope/gpt2\n    name: nope\n")
    wd = checkout_view(tmp_path / "wd")
    # the Snakefile stops before any DAG is built (`snakemake -n`, in process) with the plan's one line
    with pytest.raises(DryRunError) as err:
        dry_run(wd, [cfg])
    reason = (
        f"{cfg}: models.1.id: model nope: local path checkpoints/nope/gpt2 does not exist (read as a path: a "
        "hub id has at most one '/')"
    )
    assert str(err.value) == reason
    # and Snakemake's console shows that line alone: no traceback, no line of common.smk
    shown = err.value.__context__  # the workflow's exception, as Snakemake caught it
    assert format_exception_to_string(shown, linemaps={}) == f"ConfigError:\n{reason}"
    # a bad value is named by the config file that set it (plan_from_files: the Snakefile's configfile first)
    _config(tmp_path, "models: [{id: gpt2}]\nagreement: {bootstrap: {resamples: -1}}\n")
    with pytest.raises(PlanError) as plan_err:
        plan_from_files([REPO / "config" / "config.yaml", cfg])
    assert str(plan_err.value) == (
        f"{cfg}: invalid value at agreement.bootstrap.resamples: -1 is less than the minimum of 0"
    )
    # a key of config/config.yaml is attributed to it, one given with --config to --config (the
    # Snakefile's layers: what Snakemake read from its command line)
    _config(tmp_path, "models: [{id: gpt2}]\n")
    with pytest.raises(DryRunError) as err:
        dry_run(wd, [cfg], config={"results_dir": [1]})
    assert str(err.value).startswith("--config: invalid value at results_dir: [1] is not of type 'string'"), err.value


# --------------------------------------------------------------------------- 7: errors reach the terminal


def test_download_without_network_suggests_the_mirror(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        textwrap.dedent("""\
        sources:
          ml_x:
            url: http://127.0.0.1:9/data/x_all.jsonl
            sha256: 2d8c8c94734fd725ad3351e5a37691fd58e9ad2e1818787c82095122d7db92bc
            format: ml_jsonl
            description: unreachable
            license: none
        """)
    )
    out = tmp_path / "raw" / "ml_x" / "x_all.jsonl"
    assert main(["-q", "fetch", "--manifest", str(manifest), "--name", "ml_x", "--out", str(out)]) == 1
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].startswith(
        "verbeval fetch: error: source 'ml_x': download of http://127.0.0.1:9/data/x_all.jsonl failed: "
    ), err
    assert err[0].endswith(
        "; without network, read the sources from a local copy: --config data_mirror=DIR (docs/data.md)"
    ), err
    assert not out.exists() and (not out.parent.exists() or list(out.parent.iterdir()) == [])


def test_profiles_show_failed_logs() -> None:
    import yaml

    for profile in ("default", "slurm"):
        cfg = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
        assert cfg.get("show-failed-logs") is True, profile


@pytest.mark.e2e
def test_a_failed_job_prints_its_error_line_on_the_console(tmp_path: Path, data_dir: Path) -> None:
    """A real run (the job's own process fails; the profile's show-failed-logs prints its log)."""
    import shutil

    mirror = tmp_path / "mirror"
    shutil.copytree(data_dir, mirror, symlinks=True, copy_function=os.symlink)
    bad = next(mirror.rglob("combined_verb_list.csv"))
    bad.unlink()
    bad.write_text("not the published file\n")
    target = tmp_path / "raw" / "verbs_combined" / "combined_verb_list.csv"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"models: [{{id: gpt2}}]\ndata_mirror: {mirror}\nraw_dir: {tmp_path / 'raw'}\nresults_dir: {tmp_path / 'res'}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONUNBUFFERED": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "--configfile", str(cfg), "--cores", "1", str(target)],
        cwd=checkout_view(tmp_path / "wd"),
        capture_output=True,
        text=True,
        env=env,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0
    # the profile's show-failed-logs puts the job's one-line error on the console
    assert "verbeval fetch: error: checksum mismatch for source 'verbs_combined'" in out, out[-3000:]
    assert not target.exists() and (not target.parent.exists() or list(target.parent.iterdir()) == [])


# --------------------------------------------------------------------------- issue 34: the workflow's start check


def _run_of(config: dict, outputs: list[str], executor: str = "local") -> SimpleNamespace:
    """A stand-in of Snakemake's workflow object at ``onstart``: its config and the jobs to run."""
    jobs = [SimpleNamespace(output=[out], log=[]) for out in outputs]
    return SimpleNamespace(
        executor_plugin=SimpleNamespace(name=executor), config=config, dag=SimpleNamespace(needrun_jobs=lambda: jobs)
    )


def _dirs_config(tmp_path: Path, results: Path) -> dict:
    return {
        "results_dir": str(results),
        "raw_dir": str(tmp_path / "raw"),
        "pip_models_dir": str(tmp_path / "pip"),
        "tiny_models": [{"out": str(tmp_path / "models" / "bert")}],
    }


def _outputs(results: Path) -> list[str]:
    return [str(results / "agreement" / "templates.parquet"), str(results / "logs" / "agreement" / "templates.log")]


def test_results_dir_under_a_file_is_named_before_any_job(tmp_path: Path) -> None:
    """results_dir that cannot be created (a file in its path; root cannot either): one line, no job."""
    from verbeval.workflow.snakemake import start_problem

    (tmp_path / "f").write_text("")
    results = tmp_path / "f" / "results"
    problem = start_problem(_run_of(_dirs_config(tmp_path, results), _outputs(results)))
    assert problem == (
        f"results_dir {results}: cannot write there ({tmp_path / 'f'} is a file, not a directory): "
        "choose another results_dir or fix its permissions; no job was run"
    )
    # nothing to run there, or a workflow object without a DAG (a dry run's checks): no problem
    assert start_problem(_run_of(_dirs_config(tmp_path, results), [str(tmp_path / "raw" / "x.jsonl")])) is None
    assert list(tmp_path.iterdir()) == [tmp_path / "f"]  # the check created nothing
    # a SLURM run: its own problems first, then this one
    slurm = _run_of(_dirs_config(tmp_path, results), _outputs(results), executor="slurm")
    slurm.resource_settings = SimpleNamespace(
        default_resources=SimpleNamespace(
            args=["slurm_account=lab", "slurm_partition=cpu", "runtime=30", "mem_mb=8000"]
        ),
        overwrite_resources={},
    )
    slurm.rules = []
    assert (start_problem(slurm) or "").startswith(f"results_dir {results}: cannot write there")


def test_read_only_results_dir_with_its_folders_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system (as root too): the probe's error, checked where the jobs write; a
    folder inside results_dir that alone is read-only is named."""
    import errno
    import tempfile

    from verbeval.core import io as vio
    from verbeval.workflow.snakemake import start_problem

    results = tmp_path / "results"
    for sub in ("agreement", "logs/agreement"):
        (results / sub).mkdir(parents=True)
    read_only = {results}
    real = tempfile.TemporaryFile

    def probe(*args: object, dir: str | Path, **kwargs: object) -> object:
        if Path(dir) in read_only or any(Path(dir).is_relative_to(r) for r in read_only):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(vio.tempfile, "TemporaryFile", probe)
    run = _run_of(_dirs_config(tmp_path, results), _outputs(results))
    assert start_problem(run) == (
        f"results_dir {results}: cannot write there (Read-only file system): choose "
        "another results_dir or fix its permissions; no job was run"
    )
    read_only.clear()
    read_only.add(results / "agreement")
    assert start_problem(run) == (
        f"results_dir {results}: cannot write {results}/agreement (Read-only file "
        "system): choose another results_dir or fix its permissions; no job was run"
    )
    read_only.clear()
    assert start_problem(run) is None
    assert sorted(p.name for p in results.rglob("*")) == ["agreement", "agreement", "logs"]  # no probe left


def test_output_root_under_a_file_is_found_without_writing(tmp_path: Path) -> None:
    """What parsing may ask (a dry run writes nothing): a file or broken link in a configured folder's path."""
    from verbeval.workflow.snakemake import blocked_output_root

    config = _dirs_config(tmp_path, tmp_path / "results")
    assert blocked_output_root(config) is None
    (tmp_path / "raw").write_text("")
    assert blocked_output_root(config) == (
        f"raw_dir {tmp_path}/raw: cannot write there ({tmp_path}/raw is a file, "
        "not a directory): choose another raw_dir"
    )
    (tmp_path / "raw").unlink()
    (tmp_path / "models").symlink_to(tmp_path / "gone")
    assert blocked_output_root(config) == (
        f"tiny_models[0].out {tmp_path}/models/bert: cannot write there ({tmp_path}/models is a broken symbolic "
        "link, not a directory): choose another tiny_models[0].out"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]


def test_dry_run_with_results_dir_under_a_file_is_one_line(tmp_path: Path) -> None:
    """Snakemake's own inventory of the outputs would stop in a NotADirectoryError traceback, in a dry
    run too: parsing stops first, with the one line."""
    (tmp_path / "f").write_text("")
    cfg = _config(tmp_path, f"models: [{{id: gpt2}}]\nresults_dir: {tmp_path / 'f' / 'results'}\n")
    with pytest.raises(DryRunError) as err:
        dry_run(checkout_view(tmp_path / "wd"), [cfg])
    assert str(err.value) == (
        f"results_dir {tmp_path}/f/results: cannot write there ({tmp_path}/f is a file, not a "
        "directory): choose another results_dir"
    )


def test_dry_run_with_a_file_where_results_dir_needs_a_folder_is_one_line(tmp_path: Path) -> None:
    """results_dir is a folder, but results_dir/agreement is a file: Snakemake's inventory of the
    outputs would stop in a NotADirectoryError traceback; parsing stops first, with one line."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "agreement").write_text("")
    cfg = _config(tmp_path, f"models: [{{id: gpt2}}]\nresults_dir: {results}\n")
    with pytest.raises(DryRunError) as err:
        dry_run(checkout_view(tmp_path / "wd"), [cfg])
    assert str(err.value).startswith(
        f"results_dir {results}: cannot write {results}/agreement (it is a file, where "
        f"the run needs a folder for {results}/agreement/"
    ), str(err.value)
    assert str(err.value).endswith("): move it away or choose another results_dir")
    assert sorted(p.name for p in results.iterdir()) == ["agreement"]  # nothing written


def test_tiny_model_folder_and_other_folders_are_named(tmp_path: Path) -> None:
    from verbeval.workflow.snakemake import unwritable_output

    (tmp_path / "blocker").write_text("")
    config = _dirs_config(tmp_path, tmp_path / "results")
    config["tiny_models"] = [{"out": str(tmp_path / "blocker" / "bert")}]
    assert (unwritable_output(config, [str(tmp_path / "blocker" / "bert")]) or "").startswith(
        f"tiny_models[0].out {tmp_path}/blocker/bert: cannot write there "
    )
    assert unwritable_output(config, [str(tmp_path / "blocker" / "x" / "y.csv")]) == (
        f"cannot write {tmp_path}/blocker ({tmp_path}/blocker is a file, not a directory), where the run writes "
        f"{tmp_path}/blocker/x/y.csv"
    )


def test_results_dir_without_write_permission_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import stat
    import tempfile

    from verbeval.core import io as vio
    from verbeval.workflow.snakemake import start_problem

    if os.geteuid() == 0:  # root writes into a 0o500 folder: the probe meets what any other user meets
        real = tempfile.TemporaryFile

        def probe(*args: object, dir: str | Path, **kwargs: object) -> object:
            if not Path(dir).stat().st_mode & stat.S_IWUSR:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(vio.tempfile, "TemporaryFile", probe)
    results = tmp_path / "results"
    (results / "agreement").mkdir(parents=True)
    results.chmod(0o500)
    (results / "agreement").chmod(0o500)
    try:
        problem = start_problem(_run_of(_dirs_config(tmp_path, results), _outputs(results)))
    finally:
        (results / "agreement").chmod(0o700)
        results.chmod(0o700)
    assert problem == (
        f"results_dir {results}: cannot write there (Permission denied): choose another results_dir "
        "or fix its permissions; no job was run"
    )


# --------------------------------------------------------------------------- issue 34: temporary folders


def test_temporary_folder_of_a_dead_process_is_removed_by_the_next_use(tmp_path: Path) -> None:
    from verbeval.core.io import _host, stale_temporary_folders, temporary_folder

    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    host = _host()
    left = tmp_path / f".dl-{dead.pid}@{host}-abcd1234"  # its owner is gone: stale
    alive = tmp_path / f".dl-{os.getpid()}@{host}-abcd1234"  # this process: kept
    remote = tmp_path / f".dl-{dead.pid}@another-host-abcd1234"  # another host's: kept until it is old
    unowned = tmp_path / ".dl-abcd1234"  # an older name without a pid: removed when old
    other = tmp_path / f".dlx-{dead.pid}@{host}-abcd1234"  # another prefix: never
    for d in (left, alive, remote, unowned, other):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "partial").write_bytes(b"x" * 100)
    assert sorted(stale_temporary_folders(tmp_path, ".dl-")) == [left]
    old = time.time() - 2 * 24 * 3600
    for d in (remote, unowned):
        os.utime(d, (old, old))
    assert sorted(stale_temporary_folders(tmp_path, ".dl-")) == sorted([left, remote, unowned])
    with temporary_folder(tmp_path, ".dl-") as tmp:
        assert tmp.name.startswith(f".dl-{os.getpid()}@{host}-") and tmp.is_dir()
        (tmp / "file").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])
    with pytest.raises(RuntimeError), temporary_folder(tmp_path, ".dl-") as tmp:
        raise RuntimeError("boom")
    assert not tmp.exists()


def test_json_error_messages_read_once_at() -> None:
    import json

    from verbeval.core.io import describe_json_error

    def message(text: str, unit: str = "column") -> str:
        with pytest.raises(json.JSONDecodeError) as exc:
            json.loads(text)
        return describe_json_error(exc.value, unit)

    assert message('{"a": "b') == "Unterminated string starting at column 7"
    assert message('{"a": "\x00"}') == "Invalid control character at column 8"
    assert message("{not json") == "Expecting property name enclosed in double quotes at column 2"
    assert message("[1,]", "character") == "Expecting value at character 3"
    assert message('{\n "a": "b', "line") == "Unterminated string starting at line 2 column 7"
