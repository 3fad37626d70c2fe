"""The model families beyond BERT and GPT-2 (docs/models.md), on their real tokenizers.

Tiny random models of the real architectures (Mistral, GPT-NeoX, OLMo-2) are built in-process on
the real tokenizer files of ``$VERBEVAL_SHARED/tokenizers``. The tests check, per family: the BOS
rule; that the ids a causal model is fed for a left context, and the ids of a verb form after it,
are the ones lm-evaluation-harness scores the same text with; the single-token rule in context
for SentencePiece; and one scoring run against the model's own forward pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from conftest import LazyMap
from verbeval.agreement.data.eligibility import eligible_lemmas, form_token_ids, single_token_id, single_token_ids
from verbeval.agreement.data.lexicon import build_lexicon
from verbeval.agreement.data.templates import render_context
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.inference import infer_chunk, prepare_group
from verbeval.agreement.engine.shards import build_contexts
from verbeval.agreement.lexicon_modes.multitoken import causal_form_logprobs
from verbeval.agreement.scores.aggregate import read_shards, row_tse
from verbeval.core.models import LoadedModel, adds_bos, load_model
from verbeval.core.tiny_models import make_tiny_model

REPO_ROOT = Path(__file__).resolve().parent.parent
TSE_COMMIT = "db423f80246ba2d7c2fc602fc514943949cfaf71"
#: family -> (tokenizer folder, tiny architecture)
FAMILIES = {
    "gpt2": ("gpt2", "gpt2"),
    "mistral": ("mistral_v1_spm", "mistral"),
    "gpt-neox": ("gpt_neox_olmo1", "gpt-neox"),
    "olmo2": ("olmo2_dolma2", "olmo2"),
}
NEW = ("mistral", "gpt-neox", "olmo2")
LEFTS = ["the author that the guards like", "the farmers", "the pilot next to the old senators", ""]


@pytest.fixture(scope="module")
def lms(tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, LoadedModel]:
    def make(fam: str) -> LoadedModel:
        tok, arch = FAMILIES[fam]
        return load_model(str(make_tiny_model(tokenizer_path(tok), arch, tmp_path_factory.mktemp(fam))), device="cpu")

    return LazyMap(FAMILIES, make)


@pytest.fixture(scope="module")
def lexicon(data_dir: Path) -> pd.DataFrame:
    csv = (
        data_dir
        / "github.com"
        / "bnewm0609"
        / "refining-tse"
        / "raw"
        / TSE_COMMIT
        / "data"
        / "verbs"
        / "combined_verb_list.csv"
    )
    text = (data_dir / "giant-verb-list" / "giant-verb-list-3250.txt").read_text(encoding="utf-8")
    giant = [line.split()[0] for line in text.splitlines() if line.strip()]
    return build_lexicon(csv, giant, REPO_ROOT / "resources" / "inflection_overrides.csv")


# --------------------------------------------------------------------------- lm-evaluation-harness
# A re-implementation of how lm-evaluation-harness (EleutherAI/lm-evaluation-harness, HEAD
# 4e7e0d47) encodes a loglikelihood request for a causal Hugging Face model:
# * lm_eval/models/huggingface.py, HFLM.tok_encode: ``tokenizer.encode(string, **kw)`` where kw is
#   empty when ``add_bos_token`` is None (the default: the tokenizer's own special tokens), and
#   add_special_tokens=False when the string already starts with the decoded prefix token;
# * lm_eval/api/model.py, TemplateLM._encode_pair: trailing spaces of the context move to the
#   continuation; ``whole = tok_encode(context + continuation)``, ``ctx = tok_encode(context)``,
#   continuation ids = ``whole[len(ctx):]``;
# * TemplateLM.loglikelihood: an empty context becomes ``[prefix_token_id]`` (HFLM.prefix_token_id:
#   the tokenizer's BOS, else its EOS) and the continuation is encoded without special tokens.


def harness_prefix_token(tok: Any) -> int:
    return tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id


def harness_tok_encode(tok: Any, string: str) -> list[int]:
    if string.startswith(tok.decode(harness_prefix_token(tok))):
        return tok.encode(string, add_special_tokens=False)
    return tok.encode(string)


def harness_encode_pair(tok: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    if context == "":
        cont = tok.encode(continuation, add_special_tokens=False)
        prefix = harness_prefix_token(tok)
        return ([prefix], cont) if cont[0] != prefix else (cont[:1], cont[1:])
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation, context = context[-n_spaces:] + continuation, context[:-n_spaces]
    whole, ctx = harness_tok_encode(tok, context + continuation), harness_tok_encode(tok, context)
    return ctx, whole[len(ctx) :]


def _contexts(lefts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"left": lefts, "right": [""] * len(lefts)})


# --------------------------------------------------------------------------- BOS


def test_bos_rule_per_family(lms: dict[str, LoadedModel]) -> None:
    """Mistral's tokenizer adds <s>: prepended; GPT-2 and GPT-NeoX have a BOS (<|endoftext|>) that
    their tokenizer does not add; dolma2 (OLMo-2) has none."""
    got = {f: (adds_bos(lm.tokenizer), lm.tokenizer.bos_token_id, lm.tokenizer.eos_token_id) for f, lm in lms.items()}
    assert got == {
        "gpt2": (False, 50256, 50256),
        "mistral": (True, 1, 2),
        "gpt-neox": (False, 0, 0),
        "olmo2": (False, None, 100257),
    }
    for fam, lm in lms.items():
        enc = encode_contexts(lm, _contexts(LEFTS[:1]))
        assert enc.bos is (fam == "mistral")
        assert (enc.ids[0][0] == 1) is (fam == "mistral")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_causal_context_ids_equal_lm_eval_harness(lms: dict[str, LoadedModel], family: str) -> None:
    """The ids verbeval feeds for a left context are the harness's context ids (BOS + left context
    for Mistral, the left context alone for the others; BOS or EOS alone for an empty context)."""
    lm = lms[family]
    tok = lm.tokenizer
    enc = encode_contexts(lm, _contexts(LEFTS))
    for left, ids, target in zip(LEFTS, enc.ids, enc.target):
        text = render_context(left, "", cased=lm.cased, masked=False)
        ctx, cont = harness_encode_pair(tok, text, " walks")
        assert ids == ctx, (family, left)
        assert target == len(ids) - 1  # the logits there predict the continuation's first token
        if left:  # an empty context has no word before the verb (docs/models.md: not supported)
            assert cont == [single_token_id(tok, "walks")], (family, left)
    assert enc.ids[-1] == [{"gpt2": 50256, "mistral": 1, "gpt-neox": 0, "olmo2": 100257}[family]]
    assert tok.decode(enc.ids[0]).endswith("The author that the guards like")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_form_ids_are_the_harness_continuation_for_every_eligible_lemma(
    lexicon: pd.DataFrame, lms: dict[str, LoadedModel], family: str
) -> None:
    """For every eligible lemma, both forms after a real left context are exactly one token in the
    harness's encoding of context + form, and it is the id eligibility gives; multi-token forms
    are the harness's continuation too. Also the eligible-lemma counts on the real tokenizers."""
    tok = lms[family].tokenizer
    lem = eligible_lemmas(lexicon, tok)
    assert len(lem) == {"gpt2": 1264, "mistral": 553, "gpt-neox": 1103, "olmo2": 1288}[family]
    words = lem["sing"].tolist() + lem["plur"].tolist()
    ids = np.concatenate([lem["sing_id"].to_numpy(), lem["plur_id"].to_numpy()])
    other = lexicon.loc[~lexicon["lemma"].isin(lem["lemma"]), "plur"].head(200).tolist()
    for left in LEFTS[:2]:
        text = render_context(left, "", cased=True, masked=False)
        ctx = harness_tok_encode(tok, text)
        whole = tok([f"{text} {w}" for w in words + other])["input_ids"]
        assert all(w[: len(ctx)] == ctx for w in whole)
        cont = [w[len(ctx) :] for w in whole]
        assert cont[: len(words)] == [[int(i)] for i in ids]
        assert cont[len(words) :] == form_token_ids(tok, other)
        assert any(len(c) > 1 for c in cont[len(words) :])


# --------------------------------------------------------------------------- SentencePiece


def test_sentencepiece_form_is_judged_after_a_word(lms: dict[str, LoadedModel], lexicon: pd.DataFrame) -> None:
    tok = lms["mistral"].tokenizer
    walks, walk = tok.convert_tokens_to_ids(["\u2581walks", "\u2581walk"])
    # bare " walks" is two pieces, a lone "▁" and "▁walks"; after a word it is "▁walks"
    assert tok.convert_ids_to_tokens(tok.encode(" walks", add_special_tokens=False)) == ["\u2581", "\u2581walks"]
    assert tok.encode("x walks", add_special_tokens=False)[1:] == [walks]
    assert single_token_id(tok, "walks") == walks and single_token_id(tok, "walk") == walk
    row = eligible_lemmas(lexicon, tok).set_index("lemma").loc["walk"]
    assert (row["sing_id"], row["plur_id"]) == (walks, walk)
    assert form_token_ids(tok, ["swims"]) == [tok.encode("x swims", add_special_tokens=False)[1:]]


def test_sentencepiece_without_dummy_prefix(tokenizer_path: Callable[[str], Path]) -> None:
    """A SentencePiece tokenizer that does not prepend "▁" to the text (Gemma-style) gives the bare
    "walks" as word-initial pieces; in running text it is still "▁walks", and that is the form's id."""
    spec = json.loads((tokenizer_path("mistral_v1_spm") / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)), bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    assert len(tok.encode("walks", add_special_tokens=False)) == 2
    want = tok.convert_tokens_to_ids(["\u2581walks", "\u2581walk", "\u2581runs"])
    assert single_token_ids(tok, ["walks", "walk", "runs"]).tolist() == want


# --------------------------------------------------------------------------- scoring

ROWS = [
    ("the author that the guards like", "walks", "walk", False),
    ("the farmers", "walk", "walks", True),
    ("the pilot", "swims", "swim", False),
    ("the author that the guards like", "is", "are", False),
]


def _templates() -> pd.DataFrame:
    df = pd.DataFrame(ROWS, columns=["left", "correct", "incorrect", "plural"])
    df.insert(0, "group", "g")
    df.insert(2, "right", "")
    df["label"] = np.where(df["plural"], "plural", "singular")
    return df


@pytest.mark.parametrize("family", NEW)
def test_tse_ids_and_scores_equal_the_models_own_forward_pass(
    lms: dict[str, LoadedModel], lexicon: pd.DataFrame, family: str, tmp_path: Path
) -> None:
    """TSE target ids are the first continuation token after the left context (harness
    encoding), and the stored probabilities are the softmax of the model's logits for the
    harness's context ids, computed here one context at a time without padding."""
    lm = lms[family]
    tok = lm.tokenizer
    templates = _templates()
    work = prepare_group(lm, templates, "g")
    for (left, correct, incorrect, plural), pair in zip(ROWS, work.tse_ids):
        text = render_context(left, "", cased=lm.cased, masked=False)
        sing, plur = (incorrect, correct) if plural else (correct, incorrect)
        for form, got in zip((sing, plur), pair):
            cont = harness_encode_pair(tok, text, " " + form)[1]
            assert got == (cont[0] if len(cont) == 1 else -1), (family, form)
    lemmas = eligible_lemmas(lexicon[lexicon["lemma"].isin(["walk", "be", "run", "say"])], tok)
    assert len(lemmas) >= 2
    shard = tmp_path / "1-of-1.parquet"
    infer_chunk(lm, templates, lemmas, "g", 0, 1, shard, batch_size=3, progress=False)
    tse = row_tse(read_shards([shard]), templates)
    with torch.inference_mode():
        for r, (left, *_rest) in enumerate(ROWS):
            ctx = harness_encode_pair(tok, render_context(left, "", cased=lm.cased, masked=False), " x")[0]
            probs = torch.softmax(lm.model(input_ids=torch.tensor([ctx])).logits[0, -1].double(), dim=-1).numpy()
            want = np.where(work.tse_ids[r] >= 0, probs[np.clip(work.tse_ids[r], 0, None)], np.nan)
            np.testing.assert_allclose(tse.loc[r, ["p_sing", "p_plur"]].to_numpy(float), want, rtol=1e-5, atol=1e-12)
    assert tse["tse"].notna().sum() >= 3


@pytest.mark.parametrize("family", NEW)
def test_multitoken_chain_rule(lms: dict[str, LoadedModel], family: str) -> None:
    """Multi-token forms on the new architectures' key/value caches: the batched chain rule equals
    log-softmax steps of full forward passes over context + form."""
    lm = lms[family]
    ctx, _ = build_contexts(_templates(), "causal")
    enc = encode_contexts(lm, ctx)
    forms = form_token_ids(lm.tokenizer, ["walks", "swims", "acculturates", "is"])
    assert min(map(len, forms)) == 1 and max(map(len, forms)) > 1
    fast = causal_form_logprobs(lm, enc, forms, batch_size=2, progress=False)
    with torch.inference_mode():
        for c, seq in enumerate(enc.ids):
            for f, form in enumerate(forms):
                logits = lm.model(input_ids=torch.tensor([seq + form[:-1]])).logits[0].double()
                lp = torch.log_softmax(logits[len(seq) - 1 :], dim=-1)
                assert fast[c, f] == pytest.approx(float(lp[torch.arange(len(form)), form].sum()), abs=2e-5)


# --------------------------------------------------------------------------- tiny models


@pytest.mark.parametrize("family", NEW)
def test_tiny_model_config(lms: dict[str, LoadedModel], family: str) -> None:
    lm = lms[family]
    cfg, tok = lm.model.config, lm.tokenizer
    arch = {"mistral": "MistralForCausalLM", "gpt-neox": "GPTNeoXForCausalLM", "olmo2": "Olmo2ForCausalLM"}[family]
    assert cfg.architectures == [arch] and lm.kind == "causal" and lm.cased
    assert cfg.vocab_size == len(tok) == {"mistral": 32000, "gpt-neox": 50280, "olmo2": 100278}[family]
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
    saved = json.loads((Path(lm.model_id) / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert saved["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_tiny_model_rebuild_is_byte_identical(tokenizer_path: Callable[[str], Path], tmp_path: Path) -> None:
    tok = tokenizer_path("gpt_neox_olmo1")
    a, b, c = (make_tiny_model(tok, "gpt-neox", tmp_path / n, seed=s) for n, s in (("a", 0), ("b", 0), ("c", 1)))
    files = sorted(p.name for p in a.iterdir())
    assert "model.safetensors" in files and files == sorted(p.name for p in b.iterdir())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    assert AutoTokenizer.from_pretrained(str(a)).encode("The author walks") == [510, 2488, 16771]
