"""The flip set of a bfloat16 run against a float32 run of the same tiny GPT-2 (random weights: its
numbers mean nothing), through the workflow's own commands in process (lemmas, infer, aggregate),
checked against an independent float64 forward pass written here with plain transformers: the
float32 run decides as float64 does wherever float64's margin is clear, and every decision the
bfloat16 run flips is one whose float64 margin is within bfloat16's rounding."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.engine.shardstore import manifest_shards
from verbeval.agreement.scores.precision import flip_set
from verbeval.cli import main
from verbeval.core.tiny_models import make_tiny_model

GROUPS = ["simple", "sent_comp"]


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_path: Callable[[str], Path], data_dir: Path
) -> dict[str, Any]:
    from conftest import REPO_ROOT
    from verbeval.agreement.api.suite import AgreementSuite
    from verbeval.core.io import write_parquet

    tmp = tmp_path_factory.mktemp("flips")
    suite = AgreementSuite.from_sources(
        manifest=REPO_ROOT / "resources" / "manifest.yaml",
        groups_file=REPO_ROOT / "resources" / "agreement_groups.yaml",
        inflection_overrides=REPO_ROOT / "resources" / "inflection_overrides.csv",
        errata=REPO_ROOT / "resources" / "template_errata.csv",
        groups=GROUPS,
        max_rows_per_source=40,
        raw_dir=tmp / "raw",
        mirror=data_dir,
    )
    write_parquet(suite.templates, tmp / "templates.parquet")
    write_parquet(suite.lexicon, tmp / "lexicon.parquet")
    model = make_tiny_model(tokenizer_path("gpt2"), "gpt2", tmp / "model", seed=3)
    assert main(["-q", "lemmas", "--model", str(model), "--lexicon", str(tmp / "lexicon.parquet"), "--out", str(tmp / "lemmas.parquet")]) == 0  # fmt: skip
    out: dict[str, Any] = {"model": model, "templates": suite.templates, "tmp": tmp}
    for dtype in ("float32", "bfloat16"):
        manifest = tmp / dtype / "shards" / "manifest.json"
        common = ["--templates", str(tmp / "templates.parquet"), "--groups", ",".join(GROUPS)]
        assert main(["-q", "infer", "--model", str(model), "--dtype", dtype, "--device", "cpu", "--threads", "1", *common, "--lemmas", str(tmp / "lemmas.parquet"), "--manifest", str(manifest), "--no-progress"]) == 0  # fmt: skip
        assert main(["-q", "aggregate", *common, "--model-name", dtype, "--manifest", str(manifest), "--out-dir", str(tmp / dtype / "agg")]) == 0  # fmt: skip
        tse = {g: pd.read_parquet(tmp / dtype / "agg" / g / "tse.parquet") for g in GROUPS}
        out[dtype] = (tse, manifest_shards(manifest, GROUPS))
    out["lemmas"] = pd.read_parquet(tmp / "lemmas.parquet")["lemma"].tolist()
    return out


def _float64_margins(model_dir: Path, templates: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    """ln P(correct) - ln P(incorrect) of each TSE row, from a float64 forward pass of the prefix,
    capitalised (GPT-2 is cased; docs/metrics.md) (plain transformers, no BOS: GPT-2's tokenizer adds none)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    lm = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float64).eval()
    out = []
    for r in rows.itertuples():
        t = templates.iloc[r.row]
        ids = tok(t.left[0].upper() + t.left[1:])["input_ids"]
        right, wrong = (tok(" " + w)["input_ids"] for w in (t.correct, t.incorrect))
        with torch.no_grad():
            logp = torch.log_softmax(lm(torch.tensor([ids])).logits[0, -1], -1)
        out.append(float(logp[right[0]] - logp[wrong[0]]) if len(right) == len(wrong) == 1 else np.nan)
    return np.array(out)


def _float64_lemma_margins(
    runs: dict[str, Any], flips: pd.DataFrame, lemmas: pd.DataFrame, templates: pd.DataFrame
) -> np.ndarray:
    """ln P(sing) - ln P(plur) in float64 of each flipped (context, lemma): the context's text is that
    of any of its rows (tse.parquet maps rows to contexts), capitalised."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(runs["model"])
    lm = AutoModelForCausalLM.from_pretrained(runs["model"], torch_dtype=torch.float64).eval()
    out = []
    for f in flips.itertuples():
        rows = runs["float32"][0][f.group]
        row = int(rows.loc[rows["context_id"] == f.context_id, "row"].iloc[0])
        left = templates.iloc[row + int(np.flatnonzero(templates["group"] == f.group)[0])].left
        ids = tok(left[0].upper() + left[1:])["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(lm(torch.tensor([ids])).logits[0, -1], -1)
        out.append(float(logp[lemmas.loc[f.lemma, "sing_id"]] - logp[lemmas.loc[f.lemma, "plur_id"]]))
    return np.array(out)


def test_bfloat16_flips_are_the_decisions_float64_calls_close(runs: dict[str, Any]) -> None:
    flips = flip_set(runs["float32"], runs["bfloat16"], runs["lemmas"])
    group_rows = runs["templates"].reset_index(drop=True)
    for g in GROUPS:
        f32 = runs["float32"][0][g]
        valid = f32["tse"].notna().to_numpy()
        rows = f32[valid].reset_index(drop=True)
        rows = rows.assign(row=rows["row"] + int(np.flatnonzero(group_rows["group"] == g)[0]))
        m64 = _float64_margins(runs["model"], group_rows, rows)
        assert np.isfinite(m64).all()
        # float32 decides as float64 wherever float64's margin is beyond float32 rounding
        clear = np.abs(m64) > 1e-4
        assert ((m64 > 0) == (rows["tse"].to_numpy() == 1.0))[clear].all()
        flipped_rows = set(flips[(flips.group == g) & (flips.metric == "tse")]["row"])
        flipped = np.array([r in flipped_rows for r in f32[valid]["row"]])
        # bfloat16 (8 bits of mantissa) flips only decisions within its rounding of the logits
        assert (np.abs(m64[flipped]) < 0.05).all()
        assert not flipped[np.abs(m64) > 0.05].any()
    # the flip set is what the two runs' shards and rows say, decision by decision
    tse_flips = flips[flips.metric == "tse"]
    for r in tse_flips.itertuples():
        a, b = (runs[d][0][r.group].set_index("row").loc[r.row, "tse"] for d in ("float32", "bfloat16"))
        assert (a == 1.0) == r.correct_reference and (b == 1.0) == r.correct_other and a != b
    assert set(flips.metric) <= {"tse", "ew"}
    # each per-lemma EW flip: float64 calls the lemma's two forms close in that context
    ew = flips[flips.metric == "ew"]
    assert len(ew) >= 20  # this seed's bfloat16 run flips 110 of about 10,000 lemma decisions
    lemmas = pd.read_parquet(runs["tmp"] / "lemmas.parquet").set_index("lemma")
    m64 = _float64_lemma_margins(runs, ew, lemmas, group_rows)
    assert (np.abs(m64) < 0.05).all()
    # and the reference run's margin (float32 spacings) of a flipped decision is small too, never huge
    assert ew["margin_ulps"].min() >= 0 and ew["margin_ulps"].median() < 1e4


def test_flip_set_command_checks_the_real_runs_and_writes_their_flips(runs: dict[str, Any], tmp_path: Path) -> None:
    """``verbeval flip-set`` on the two runs: their manifests are one model in float32 and bfloat16, of
    the lemmas.parquet given (n_lemmas and lemma_set_sha256 match), and it writes the flip set."""
    tmp = runs["tmp"]
    argv = ["-q", "flip-set", "--model-name=m", "--dtype=bfloat16", f"--lemmas={tmp / 'lemmas.parquet'}",
            f"--groups={','.join(GROUPS)}", "--resamples=10", "--flips", str(tmp_path / "flips.csv"),
            "--comparison", str(tmp_path / "comparison.csv")]  # fmt: skip
    for side, dtype in (("reference", "float32"), ("other", "bfloat16")):
        argv += [
            f"--{side}-results={tmp / dtype / 'agg'}",
            f"--{side}-shards={tmp / dtype / 'shards' / 'manifest.json'}",
        ]
    assert main(argv) == 0
    expected = flip_set(runs["float32"], runs["bfloat16"], runs["lemmas"])
    assert len(pd.read_csv(tmp_path / "flips.csv")) == len(expected) > 0


def test_a_tf32_run_on_a_cpu_is_the_float32_run_and_its_flip_set_says_so(
    runs: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same tiny GPT-2 run with ``--dtype tf32`` on this CPU (infer, aggregate, flip-set, as the rules
    precision_infer, precision_aggregate and flip_set run them): its shards say tf32 and hold the float32
    run's probabilities, its log says that a CPU's matrix products are float32, and its flip set against
    float32 is empty and labelled ``tf32 on CPU = float32`` rather than reported as a finding."""
    import logging

    tmp, model = runs["tmp"], runs["model"]
    manifest = tmp_path / "shards" / "manifest.json"
    common = ["--templates", str(tmp / "templates.parquet"), "--groups", ",".join(GROUPS)]
    assert main(["-q", "infer", "--model", str(model), "--dtype", "tf32", "--device", "cpu", "--threads", "1", *common, "--lemmas", str(tmp / "lemmas.parquet"), "--manifest", str(manifest), "--no-progress"]) == 0  # fmt: skip
    assert main(["-q", "aggregate", *common, "--model-name", "tf32", "--manifest", str(manifest), "--out-dir", str(tmp_path / "agg")]) == 0  # fmt: skip
    assert [r.getMessage() for r in caplog.records if r.name == "verbeval.core.models"] == [
        f"{model}: matrix products on a CPU are float32 with tf32: this run's numbers are those of a float32 run"
    ]
    tf32 = manifest_shards(manifest, GROUPS)
    for g in GROUPS:
        for mine, ref in zip(tf32[g], runs["float32"][1][g]):
            a, b = (pd.read_parquet(p, columns=["prob", "cum_above", "cum_below"]) for p in (mine, ref))
            assert all(np.array_equal(np.stack(a[c]), np.stack(b[c])) for c in a.columns)
    caplog.clear()
    argv = ["-q", "flip-set", "--model-name=m", "--dtype=tf32", f"--lemmas={tmp / 'lemmas.parquet'}",
            f"--groups={','.join(GROUPS)}", "--resamples=10", "--flips", str(tmp_path / "flips.csv"),
            "--comparison", str(tmp_path / "comparison.csv"),
            f"--reference-results={tmp / 'float32' / 'agg'}", f"--reference-shards={tmp / 'float32' / 'shards' / 'manifest.json'}",
            f"--other-results={tmp_path / 'agg'}", f"--other-shards={manifest}"]  # fmt: skip
    assert main(argv) == 0
    assert pd.read_csv(tmp_path / "flips.csv").empty
    moves = pd.read_csv(tmp_path / "comparison.csv")
    assert moves["kind"].unique().tolist() == ["tf32 on CPU = float32"] and (moves["difference"] == 0).all()
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [w for w in warned if "flipped" in w] == [  # beside the few resamples' warning
        "m in tf32: tf32 on CPU = float32 (both runs' matrix products were float32): 0 decisions flipped, "
        f"no finding about TF32 -> {tmp_path / 'flips.csv'}"
    ]
