"""GGUF checkpoints as models (verbeval.core.model_sources.gguf): a tiny Llama GGUF written with the
gguf package must load to exactly the model built from the same arrays without GGUF."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from tinygguf import ARCHS, arch_reference_model, reference_model, write_arch_gguf, write_tiny_gguf  # noqa: E402
from verbeval.core.config import validate_config  # noqa: E402
from verbeval.core.errors import VerbevalError  # noqa: E402
from verbeval.core.model_checks import check_model_paths  # noqa: E402
from verbeval.core.model_sources.source import ModelSource  # noqa: E402
from verbeval.core.models import load_model, load_tokenizer, model_fingerprint  # noqa: E402


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("gguf")
    write_tiny_gguf(d / "tiny.gguf")
    return d


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))


def test_gguf_model_equals_the_same_weights_loaded_without_gguf(gguf_dir: Path) -> None:
    lm = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    assert lm.kind == "causal" and lm.cased
    ids = lm.tokenizer(" the dog walks", add_special_tokens=False)["input_ids"]
    assert lm.tokenizer.convert_ids_to_tokens(ids) == ["Ġthe", "Ġdog", "Ġwalks"]  # merges read from the GGUF
    x = torch.tensor([ids])
    with torch.no_grad():
        got, want = lm.model(x).logits, reference_model()(x).logits
    # float32 weights stored unquantised: the same arithmetic, so equal up to float32 rounding
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    digest = hashlib.sha256((gguf_dir / "tiny.gguf").read_bytes()).hexdigest()
    assert lm.revision == f"gguf-sha256:{digest}" == model_fingerprint(ModelSource(str(gguf_dir), file="tiny.gguf"))


#: the class transformers builds from each GGUF architecture (llama.cpp writes Mistral as llama, and
#: transformers reads it as Mistral only when general.name is exactly "mistral", which then fails)
LOADED_AS = {"mistral": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_other_gguf_architectures_equal_the_same_weights_without_gguf(arch: str, tmp_path: Path) -> None:
    """Each architecture written the way llama.cpp's converter writes it (q/k permuted for llama,
    norms + 1 for gemma2/gemma3/nemotron, Conv1D transposed for gpt2, bloom's q/k/v regrouped) loads
    to the transformers model built from the same arrays."""
    write_arch_gguf(tmp_path / "m" / f"{arch}.gguf", arch)
    lm = load_model(ModelSource(str(tmp_path / "m"), file=f"{arch}.gguf"), device="cpu")
    assert lm.kind == "causal"
    want_cls = LOADED_AS.get(arch, ARCHS[arch][1])
    assert type(lm.model).__name__ == want_cls
    ids = lm.tokenizer(" the dogs walk", add_special_tokens=False)["input_ids"]
    assert lm.tokenizer.convert_ids_to_tokens(ids) == ["Ġthe", "Ġdogs", "Ġwalk"]
    x = torch.tensor([ids])
    with torch.no_grad():
        got, want = lm.model(x).logits, arch_reference_model(arch)(x).logits
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_gguf_dtype_is_applied_after_dequantisation(gguf_dir: Path) -> None:
    lm = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu", dtype="bfloat16")
    assert {p.dtype for p in lm.model.parameters()} == {torch.bfloat16}


def test_unsupported_gguf_architecture_is_named(tmp_path: Path) -> None:
    write_tiny_gguf(tmp_path / "bert.gguf", arch="bert")
    with pytest.raises(VerbevalError) as err:
        load_model(ModelSource(str(tmp_path), file="bert.gguf"), device="cpu")
    msg = str(err.value)
    assert "cannot read GGUF architecture 'bert'" in msg and "llama" in msg and "\n" not in msg
    with pytest.raises(VerbevalError, match="cannot read GGUF architecture 'bert'"):  # the lemmas job's way in
        load_tokenizer(ModelSource(str(tmp_path), file="bert.gguf"))


def test_gguf_files_transformers_misreads_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ways transformers fails on a GGUF file of an architecture it lists (docs/models.md, 'GGUF
    architectures tried'), each one line naming the file and the way out, not a traceback."""
    import tinygguf

    # a llama file whose general.name is exactly "mistral" is read as model type mistral (no tensor map)
    write_arch_gguf(tmp_path / "m" / "tiny.gguf", "mistral", name="mistral")
    with pytest.raises(VerbevalError) as err:
        load_model(ModelSource(str(tmp_path / "m"), file="tiny.gguf"), device="cpu")
    msg = str(err.value)
    assert "reads tiny.gguf as model type 'mistral'" in msg and "saved folder" in msg and "\n" not in msg, msg
    # a qwen3 file whose head size is not Qwen3Config's default (128): transformers does not read it
    cfg_name, cls_name, extra = tinygguf.ARCHS["qwen3"]
    monkeypatch.setitem(
        tinygguf.ARCHS, "qwen3", (cfg_name, cls_name, {**extra, "head_dim": tinygguf.HIDDEN // tinygguf.HEADS})
    )
    write_arch_gguf(tmp_path / "q" / "tiny.gguf", "qwen3")
    with pytest.raises(VerbevalError) as err:
        load_model(ModelSource(str(tmp_path / "q"), file="tiny.gguf"), device="cpu")
    msg = str(err.value)
    assert "the config transformers builds from tiny.gguf does not fit its weights" in msg and "\n" not in msg, msg


def test_masked_kind_with_gguf_is_refused(gguf_dir: Path) -> None:
    with pytest.raises(VerbevalError, match="kind masked with a gguf_file"):
        load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), kind="masked", device="cpu")


def test_missing_gguf_package_says_how_to_install(gguf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    with pytest.raises(VerbevalError, match="needs the gguf package: pip install gguf"):
        load_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))


def test_config_checks_the_gguf_file_exists(gguf_dir: Path) -> None:
    ok = validate_config({"models": [{"id": str(gguf_dir), "gguf_file": "tiny.gguf"}]})
    check_model_paths(ok)  # a GGUF folder needs no config.json
    bad = validate_config({"models": [{"id": str(gguf_dir), "gguf_file": "other.gguf"}]})
    with pytest.raises(VerbevalError, match="has no GGUF file other.gguf"):
        check_model_paths(bad)


def test_simverb_encoder_reads_the_gguf_body(gguf_dir: Path) -> None:
    from verbeval.simverb.vectors import load_encoder

    model, tok, _ = load_encoder(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    x = torch.tensor([tok(" the cat runs", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        got = model(x, output_hidden_states=True).hidden_states
        want = reference_model().model(x, output_hidden_states=True).hidden_states
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_gguf_from_a_hub_repository_in_the_cache(
    gguf_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hub id with gguf_file: the file is taken from the Hugging Face cache (offline here)."""
    import shutil

    import huggingface_hub.constants as hf_constants

    commit = "1" * 40
    repo = tmp_path / "hf" / "models--org--tiny-gguf"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(gguf_dir / "tiny.gguf", repo / "snapshots" / commit / "tiny.gguf")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    lm = load_model(ModelSource("org/tiny-gguf", file="tiny.gguf"), device="cpu")
    assert lm.kind == "causal" and lm.revision == f"{commit}/tiny.gguf", lm.revision
    assert model_fingerprint(ModelSource("org/tiny-gguf", file="tiny.gguf")) == f"hub:{commit}/tiny.gguf"
    x = torch.tensor([lm.tokenizer(" the dogs run", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(lm.model(x).logits, reference_model()(x).logits, rtol=1e-5, atol=1e-5)
