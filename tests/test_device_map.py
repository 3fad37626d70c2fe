"""Models split across devices (config ``models[].device_map``, ``--device-map``) with accelerate.

On a CPU-only machine a real split is CPU modules plus modules offloaded to disk: accelerate's hooks
then load those weights for each forward pass, as they move activations between GPUs in a split
over several GPUs. The split model must give the same numbers as the whole one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from test_inference import LEXICON, template_frame
from verbeval.agreement.data.eligibility import eligible_lemmas
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.inference import infer_chunk
from verbeval.agreement.lexicon_modes.multitoken import form_logprobs, form_token_ids
from verbeval.cli import build_parser
from verbeval.core.cliutil import with_config_defaults
from verbeval.core.config import validate_config
from verbeval.core.devices import check_device_map, parse_device_map
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, load_model
from verbeval.core.tiny_models import make_tiny_model

#: every module of the tiny GPT-2 (2 layers) placed: the second block and the final norm on disk
GPT2_MAP = {
    "transformer.wte": "cpu",
    "transformer.wpe": "cpu",
    "transformer.drop": "cpu",
    "transformer.h.0": "cpu",
    "transformer.h.1": "disk",
    "transformer.ln_f": "disk",
    "lm_head": "cpu",
}
#: the tiny BERT MLM: the first encoder layer on disk
BERT_MAP = {"bert.embeddings": "cpu", "bert.encoder.layer.0": "disk", "bert.encoder.layer.1": "cpu", "cls": "cpu"}


def _sharpened(tokenizer: Path, arch: str, out: Path) -> Path:
    """A tiny model whose (tied) output embeddings are scaled so its distributions are peaked, saved
    so that the whole and the split model load the same weights."""
    path = make_tiny_model(tokenizer, arch, out)
    cls = AutoModelForMaskedLM if arch == "bert" else AutoModelForCausalLM
    model = cls.from_pretrained(str(path))
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(30.0)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module", params=["causal", "masked"])
def pair(
    request: pytest.FixtureRequest,
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[LoadedModel, LoadedModel]:
    """(whole, split) loads of one tiny model."""
    arch, tok, dmap = (
        ("gpt2", tokenizer_path("gpt2"), GPT2_MAP) if request.param == "causal" else ("bert", wordpiece_path, BERT_MAP)
    )
    path = _sharpened(tok, arch, tmp_path_factory.mktemp(arch))
    whole = load_model(str(path), device="cpu")
    split = load_model(str(path), device="cpu", device_map=dict(dmap))
    return whole, split


def _offloaded(model: torch.nn.Module) -> list[str]:
    """Parameters that are not resident (offloaded: accelerate loads them for each forward pass)."""
    return [n for n, p in model.named_parameters() if p.device.type == "meta"]


def test_the_split_is_real(pair: tuple[LoadedModel, LoadedModel]) -> None:
    whole, split = pair
    assert whole.device_map is None and _offloaded(whole.model) == []
    expected = GPT2_MAP if split.kind == "causal" else BERT_MAP
    assert split.device_map == expected
    assert split.device == torch.device("cpu")  # the input embeddings' device
    offloaded = _offloaded(split.model)
    disk = [m for m, d in expected.items() if d == "disk"]
    assert offloaded and all(any(n.startswith(m + ".") for m in disk) for n in offloaded)
    assert hasattr(split.model, "_hf_hook")  # accelerate dispatched the model


def _shard_arrays(path: Path) -> dict[str, np.ndarray]:
    t = pq.read_table(path)
    return {
        name: np.asarray(t[name].combine_chunks().flatten().to_numpy(zero_copy_only=False))
        if hasattr(t[name].combine_chunks(), "flatten")
        else t[name].to_numpy()
        for name in t.column_names
    }


def test_split_shards_equal_whole(pair: tuple[LoadedModel, LoadedModel], tmp_path: Path) -> None:
    whole, split = pair
    templates = template_frame()
    lemmas = eligible_lemmas(LEXICON, whole.tokenizer)
    meta = {}
    arrays = {}
    for name, lm in (("whole", whole), ("split", split)):
        out = tmp_path / f"{name}.parquet"
        meta[name] = infer_chunk(lm, templates, lemmas, "g1", 0, 1, out, batch_size=5, progress=False)
        arrays[name] = _shard_arrays(out)
    assert arrays["whole"].keys() == arrays["split"].keys()
    for key, a in arrays["whole"].items():
        np.testing.assert_array_equal(a, arrays["split"][key], err_msg=key)
    assert meta["whole"] == meta["split"]
    # the numbers are not trivial: far from uniform, and defined TSE probabilities
    p = np.asarray(arrays["whole"]["topk_probs"], dtype=float)
    assert (
        p.max() > 1000 / len(whole.tokenizer)
        and np.isfinite(np.asarray(arrays["whole"]["tse_p_sing"], dtype=float)).any()
    )


def test_split_multi_token_forms_equal_whole(pair: tuple[LoadedModel, LoadedModel]) -> None:
    whole, split = pair
    ctx = template_frame().query("group == 'g1'").drop_duplicates(["left", "right"]).head(4)
    forms = form_token_ids(whole.tokenizer, ["laughs", "swims", "understands", "is"])
    assert max(len(f) for f in forms) > 1
    a = form_logprobs(whole, encode_contexts(whole, ctx), forms, batch_size=2, progress=False)
    b = form_logprobs(split, encode_contexts(split, ctx), forms, batch_size=2, progress=False)
    assert (a < 0).all() and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- options and config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("none", None),
        ("auto", "auto"),
        ("balanced_low_0", "balanced_low_0"),
        (
            '{"model.embed_tokens": 0, "model.layers.0": "cuda:1", "lm_head": "cpu", "model.norm": "disk"}',
            {"model.embed_tokens": 0, "model.layers.0": "cuda:1", "lm_head": "cpu", "model.norm": "disk"},
        ),
    ],
)
def test_parse_device_map(text: str | None, expected: Any) -> None:
    assert parse_device_map(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("everywhere", "neither one of"),
        ('{"lm_head": "gpu"}', "a device is a GPU index"),
        ('{"lm_head": -1}', "a device is a GPU index"),
        ("{}", "neither one of"),
        ('{"a": 0', "invalid JSON"),
    ],
)
def test_parse_device_map_rejects(text: str, reason: str) -> None:
    with pytest.raises(VerbevalError, match=reason):
        parse_device_map(text)


def test_cli_device_map_option(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["infer", "--model", "m", "--templates", "t", "--lemmas", "l", "--groups", "g", "--manifest", "x"]
    # the schema's default (models[].device_map), read when the command runs
    assert with_config_defaults(build_parser().parse_args(base)).device_map is None
    assert build_parser().parse_args([*base, "--device-map", '{"lm_head": 1}']).device_map == {"lm_head": 1}
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--device-map", "everywhere"])
    assert "--device-map" in capsys.readouterr().err


def _config(**model: Any) -> dict[str, Any]:
    return {"models": [{"id": "meta-llama/Llama-3.1-70B", **model}]}


def test_config_model_defaults_and_values() -> None:
    cfg = validate_config(_config())
    assert cfg["models"][0]["device_map"] is None and cfg["models"][0]["gpus"] == 1
    cfg = validate_config(_config(dtype="bfloat16", device_map="auto", gpus=4))
    assert cfg["models"][0]["gpus"] == 4 and check_device_map(cfg["models"][0]["device_map"]) == "auto"
    validate_config(_config(device_map={"model.layers.0": 0, "lm_head": "cuda:3"}, gpus=4))
    # a cluster or machine without GPUs (profiles/slurm-cpu): no GPU resource at all
    assert validate_config(_config(gpus=0))["models"][0]["gpus"] == 0
    cfg = validate_config({**_config(), "inference": {"gpus": 0, "device": "cpu"}})
    assert cfg["inference"]["gpus"] == 0 and validate_config(_config())["inference"]["gpus"] == 1


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ({"gpus": 4}, "without a device_map would use only one GPU"),
        ({"gpus": -1, "device_map": "auto"}, "models.0.gpus"),
        ({"device_map": "everywhere"}, "models.0.device_map"),
        ({"device_map": {"lm_head": "gpu"}}, "models.0.device_map"),
    ],
)
def test_config_rejects(model: dict[str, Any], reason: str) -> None:
    with pytest.raises(VerbevalError, match=reason):
        validate_config(_config(**model), source="cfg.yaml")
