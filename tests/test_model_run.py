"""`verbeval run-model` (one load, every branch) against the single-branch commands, and the stamps
that keep an up-to-date branch (verbeval.core.stamps)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from verbeval.agreement.runs import ShardRun
from verbeval.cli import main
from verbeval.core import stamps
from verbeval.core.model_runs import ModelRun
from verbeval.core.model_sources.source import ModelSource

LEXICON = pd.DataFrame(
    {
        "lemma": ["walk", "run", "swim", "eat", "write"],
        "sing": ["walks", "runs", "swims", "eats", "writes"],
        "plur": ["walk", "run", "swim", "eat", "write"],
    }
)
SIMVERB = (
    "\n".join(
        f"{a}\t{b}\tV\t{s}\tSYNONYMS"
        for a, b, s in [("walk", "run", 6.5), ("eat", "swim", 1.2), ("write", "read", 3.3), ("run", "jog", 8.8)]
    )
    + "\n"
)


def _templates() -> pd.DataFrame:
    rows = [
        ("g1", "the dog", "", "walks", "walk", "sing"),
        ("g1", "the dogs", "", "walk", "walk s", "plur"),
        ("g1", "the author that the guards like", "", "writes", "write", "sing"),
        ("g1", "the cats near the door", "", "eat", "eats", "plur"),
    ]
    t = pd.DataFrame(rows, columns=["group", "left", "right", "correct", "incorrect", "label"])
    t["incorrect"] = t["incorrect"].str.replace(" s", "s", regex=False)
    t.insert(1, "source", "test")
    t.insert(2, "line", range(1, len(t) + 1))
    t["plural"] = t["label"] == "plur"
    return t


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_stamps(tmp_path: Path) -> None:
    inp, out = tmp_path / "in.txt", tmp_path / "out.txt"
    inp.write_text("a")
    key = stamps.branch_key({"x": 1}, [inp])
    assert key != stamps.branch_key({"x": 2}, [inp])
    assert not stamps.is_current([out], key)  # no output, no stamp
    out.write_text("result")
    assert not stamps.is_current([out], key)  # no stamp
    stamps.write_stamp([out], key)
    assert stamps.is_current([out], key)
    inp.write_text("b")  # a changed input changes the key
    assert not stamps.is_current([out], stamps.branch_key({"x": 1}, [inp]))
    out.write_text("edited")  # an output that is not the one stamped
    assert not stamps.is_current([out], key)


@pytest.mark.parametrize("arch,tokenizer", [("bert", "wordpiece"), ("gpt2", "gpt2")])
def test_run_model_equals_the_single_branch_commands(
    tokenizer_path: Callable[[str], Path], wordpiece_path: Path, tmp_path: Path, arch: str, tokenizer: str
) -> None:
    model = tmp_path / "model"
    tok = wordpiece_path if tokenizer == "wordpiece" else tokenizer_path(tokenizer)
    assert main(["-q", "tiny-model", "--tokenizer", str(tok), "--arch", arch, "--out", str(model)]) == 0
    tpl, lex, data = tmp_path / "templates.parquet", tmp_path / "lexicon.parquet", tmp_path / "simverb.txt"
    _templates().to_parquet(tpl)
    LEXICON.to_parquet(lex)
    data.write_text(SIMVERB)
    lemmas, forms = tmp_path / "lemmas.parquet", tmp_path / "forms.parquet"
    assert main(["-q", "lemmas", "--model", str(model), "--lexicon", str(lex), "--out", str(lemmas)]) == 0
    assert (
        main(
            [
                "-q",
                "lexicon-forms",
                "--model",
                str(model),
                "--lexicon",
                str(lex),
                "--templates",
                str(tpl),
                "--out",
                str(forms),
            ]
        )
        == 0
    )
    common = [
        "--model",
        str(model),
        "--device",
        "cpu",
        "--threads",
        "1",
        "--templates",
        str(tpl),
        "--n-chunks",
        "2",
        "--no-progress",
    ]
    sep, one = tmp_path / "separate", tmp_path / "one"
    assert (
        main(
            [
                "-q",
                "infer",
                *common,
                "--lemmas",
                str(lemmas),
                "--groups",
                "g1",
                "--batch-size",
                "3",
                "--manifest",
                str(sep / "agr" / "manifest.json"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "infer-forms",
                *common,
                "--forms",
                str(forms),
                "--groups",
                "g1",
                "--batch-size",
                "5",
                "--manifest",
                str(sep / "forms" / "manifest.json"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "simverb-score",
                "--model",
                str(model),
                "--device",
                "cpu",
                "--threads",
                "1",
                "--data",
                str(data),
                "--batch-size",
                "3",
                "--out",
                str(sep / "sims.parquet"),
                "--verbs",
                str(sep / "verbs.csv"),
            ]
        )
        == 0
    )
    run = [
        "-q",
        "run-model",
        *common,
        "--lemmas",
        str(lemmas),
        "--groups",
        "g1",
        "--batch-size",
        "3",
        "--manifest",
        str(one / "agr" / "manifest.json"),
        "--forms",
        str(forms),
        "--forms-groups",
        "g1",
        "--forms-batch-size",
        "5",
        "--forms-manifest",
        str(one / "forms" / "manifest.json"),
        "--simverb-data",
        str(data),
        "--simverb-batch-size",
        "3",
        "--simverb-out",
        str(one / "sims.parquet"),
        "--simverb-verbs",
        str(one / "verbs.csv"),
    ]
    assert main(run) == 0
    shards = sorted(p.relative_to(sep) for p in sep.rglob("*-of-2.parquet"))
    assert len(shards) == 6  # 2 agreement and 2 form shards, and the agreement shards' score files
    for rel in shards:  # the shards' bytes are those of the single-branch commands
        assert _sha(one / rel) == _sha(sep / rel), rel
    for name in ("sims.parquet", "verbs.csv"):
        assert _sha(one / name) == _sha(sep / name), name
    # a rerun keeps the stamped SimVerb outputs (same inputs and settings) and every shard
    before = {p: p.stat().st_mtime_ns for p in [one / "sims.parquet", *(one / r for r in shards)]}
    assert main(run) == 0
    assert {p: p.stat().st_mtime_ns for p in before} == before
    # a changed SimVerb setting recomputes that branch only
    assert main([*run[:-4], "--simverb-multi-token", "skip", *run[-4:]]) == 0
    assert (one / "sims.parquet").stat().st_mtime_ns != before[one / "sims.parquet"]
    assert all((one / r).stat().st_mtime_ns == before[one / r] for r in shards)


def test_a_branch_is_given_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "run-model",
            "--model",
            str(tmp_path),
            "--templates",
            "t",
            "--lemmas",
            "l",
            "--groups",
            "g",
            "--manifest",
            str(tmp_path / "m.json"),
            "--simverb-out",
            str(tmp_path / "s.parquet"),
        ]
    )
    assert rc == 1
    assert "the SimVerb branch needs --simverb-data, --simverb-verbs as well" in capsys.readouterr().err


def test_run_model_log_totals_include_the_model_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fake clock: the load takes 100 s, the agreement branch 5 s. The agreement line's 'total' is what
    the user waited for (load included), as in `verbeval infer` (infer.log; the rule infer runs this)."""
    import argparse
    import logging

    from verbeval import model_run
    from verbeval.agreement.engine import inference

    clock = [0.0]
    monkeypatch.setattr(model_run.time, "perf_counter", lambda: clock[0])

    def load(job: object, session: object) -> argparse.Namespace:
        clock[0] += 100.0
        return argparse.Namespace(device=argparse.Namespace(type="cpu"))

    def infer_model(*args: object, **kw: object) -> dict[str, object]:
        clock[0] += 5.0
        return {
            "shards": ["a", "b"],
            "timing": {"contexts": 40, "compute_s": 4.0, "contexts_per_s": 10.0, "writer_busy_s": 0.5, "total_s": 5.0},
        }

    monkeypatch.setattr(model_run, "_load_checked", load)
    monkeypatch.setattr(inference, "infer_model", infer_model)
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "t.parquet")
    t = str(tmp_path / "t.parquet")
    job = model_run.RunModel(
        ModelRun(ModelSource("m"), batch_size="4", random_init=False),
        ShardRun(t, t, ("g",), str(tmp_path / "s" / "manifest.json"), n_chunks=1, top_k=1, progress=False),
    )
    with caplog.at_level(logging.INFO, logger=model_run.log.name):
        model_run.run_model(job)
    lines = [r.getMessage() for r in caplog.records]
    shards = next(m for m in lines if "shards ->" in m)
    assert "model load 100.0 s, 40 contexts computed in 4.0 s" in shards
    assert shards.endswith("total 105.0 s (load included)")
    assert "m: model loaded in 100.0 s (once for every branch)" in lines
    assert "m: agreement branch 5.0 s" in lines
    assert lines[-1] == "m: every branch in 105.0 s (load included)"


def test_the_model_run_built_from_the_options_equals_the_one_the_api_builds(tmp_path: Path) -> None:
    """run-model's options become one typed value at the command line; its defaults are the API's
    (the schema's), every option lands in its field, the source stays one value."""
    from verbeval.agreement.runs import FormsRun
    from verbeval.commands import build_parser
    from verbeval.core.cliutil import with_config_defaults
    from verbeval.model_run import RunModel, SimVerbRun, run_model_job

    def job(*words: str) -> RunModel:
        base = [
            "run-model",
            "--model",
            "m",
            "--templates",
            "t",
            "--lemmas",
            "l",
            "--groups",
            "g1,g2",
            "--manifest",
            "x",
        ]
        return run_model_job(with_config_defaults(build_parser().parse_args([*base, *words])))

    assert job() == RunModel(ModelRun(ModelSource("m")), ShardRun("t", "l", ("g1", "g2"), "x"))
    full = job(
        *("--revision", "step-32", "--kind", "causal", "--dtype", "bfloat16", "--device", "cpu", "--threads", "3"),
        *("--batch-size", "7", "--prepend-bos", "true", "--random-init", "false", "--n-chunks", "5", "--top-k", "2"),
        *("--allow-nonfinite", "--no-progress", "--device-map", '{"": "cpu"}'),
        *("--forms", "f.parquet", "--forms-groups", "g1", "--forms-manifest", "fm", "--forms-batch-size", "9"),
        *("--simverb-data", "sv.txt", "--simverb-out", "so", "--simverb-verbs", "sv.csv", "--simverb-split", "dev=d"),
        *("--simverb-frame", "to {verb}", "--simverb-batch-size", "11"),
    )
    run = ModelRun(
        ModelSource("m", "step-32"),
        kind="causal",
        dtype="bfloat16",
        device="cpu",
        device_map={"": "cpu"},
        threads=3,
        batch_size="7",
        prepend_bos=True,
        random_init=False,
    )
    assert full == RunModel(
        run,
        ShardRun("t", "l", ("g1", "g2"), "x", n_chunks=5, top_k=2, allow_nonfinite=True, progress=False),
        FormsRun("t", "f.parquet", ("g1",), "fm", n_chunks=5, batch_size=9, allow_nonfinite=True, progress=False),
        SimVerbRun("sv.txt", "so", "sv.csv", ("dev=d",), ("to {verb}",), batch_size=11, progress=False),
    )
    assert full.run.load_request().source is full.run.source  # one value from the options to the load


def test_every_per_model_setting_is_a_field_of_the_model_run() -> None:
    """A declared per-model setting (and the device) is a field of ModelRun of its option's name,
    defaulting to the declaration's default: the command line fills it by that name."""
    import dataclasses

    from verbeval.core.steps import INFERENCE_DEVICE, MODEL_SETTINGS

    run = ModelRun(ModelSource("m"))
    fields = {f.name for f in dataclasses.fields(ModelRun)}
    for setting in (*MODEL_SETTINGS, INFERENCE_DEVICE):
        assert setting.dest in fields
    assert {s.dest: getattr(run, s.dest) for s in MODEL_SETTINGS} == {s.dest: s.default() for s in MODEL_SETTINGS}
