"""Exactness of multi-token form scoring (verbeval.agreement.lexicon_modes.multitoken) against naive oracles.

Causal: the trie + shared key/value cache chain rule equals, for every form, the sum of per-step
log-probabilities of one full forward pass over ``context + form`` (no cache, no batching).
Masked: the trie PLL-word-l2r equals a per-form, per-step loop that builds each masked sequence
by hand (Kauf & Ivanova 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tiny_cache import tiny_model
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.lexicon_modes.multitoken import (
    build_causal_trie,
    build_masked_plan,
    causal_form_logprobs,
    form_logprobs,
    form_token_ids,
    masked_form_logprobs,
    trie_size,
)
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, load_model

# 1 token (runs, is), 2 (swims in both vocabularies), 3+ (co-exists, abbreviates), shared prefixes
WORDS = [
    "runs",
    "run",
    "swims",
    "swim",
    "abbreviates",
    "abbreviate",
    "co-exists",
    "is",
    "are",
    "abdicates",
    "abdicate",
    "swimming",
]
CONTEXTS = pd.DataFrame(
    {
        "left": ["the author", "the pilots that the guard likes", "the farmer"],
        "right": ["", "near the park", "every day"],
    }
)


def _sharpen(lm: LoadedModel) -> LoadedModel:
    with torch.no_grad():
        lm.model.get_output_embeddings().weight.mul_(30.0)
    return lm


@pytest.fixture(scope="module")
def causal_lm(tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    path = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("gpt2"))
    return _sharpen(load_model(str(path), device="cpu"))


@pytest.fixture(scope="module")
def masked_lm(wordpiece_path: Path, tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    path = tiny_model(tmp_path_factory, wordpiece_path, "bert", tmp_path_factory.mktemp("bert"))
    return _sharpen(load_model(str(path), device="cpu"))


def naive_causal(lm: LoadedModel, ctx_ids: list[list[int]], forms: list[list[int]]) -> np.ndarray:
    out = np.zeros((len(ctx_ids), len(forms)))
    with torch.no_grad():
        for c, seq in enumerate(ctx_ids):
            for f, toks in enumerate(forms):
                logits = lm.model(input_ids=torch.tensor([seq + toks])).logits[0].double()
                lp = torch.log_softmax(logits, dim=-1)
                out[c, f] = sum(float(lp[len(seq) - 1 + j, t]) for j, t in enumerate(toks))
    return out


def naive_masked(lm: LoadedModel, ctx_ids: list[list[int]], target: np.ndarray, forms: list[list[int]]) -> np.ndarray:
    mask = lm.tokenizer.mask_token_id
    out = np.zeros((len(ctx_ids), len(forms)))
    with torch.no_grad():
        for c, seq in enumerate(ctx_ids):
            m = int(target[c])
            for f, toks in enumerate(forms):
                total = 0.0
                for i, t in enumerate(toks):
                    x = seq[:m] + toks[:i] + [mask] * (len(toks) - i) + seq[m + 1 :]
                    logits = lm.model(input_ids=torch.tensor([x])).logits[0, m + i].double()
                    total += float(torch.log_softmax(logits, dim=-1)[t])
                out[c, f] = total
    return out


def test_form_token_ids_conventions(causal_lm: LoadedModel, masked_lm: LoadedModel) -> None:
    g = form_token_ids(causal_lm.tokenizer, ["runs", "swims"])
    assert [causal_lm.tokenizer.convert_ids_to_tokens(x) for x in g] == [["Ġruns"], ["Ġswim", "s"]]
    b = form_token_ids(masked_lm.tokenizer, ["runs", "swims"])
    assert [masked_lm.tokenizer.convert_ids_to_tokens(x) for x in b] == [["runs"], ["swim", "##s"]]


def test_causal_trie_layout() -> None:
    forms = [[5], [5, 6], [5, 6, 7], [5, 8], [9, 1, 2], [5, 6]]
    t = build_causal_trie(forms)
    # proper prefixes: (5), (5,6), (9), (9,1); maximal rows: (5,6) and (9,1)
    assert t.nodes_per_depth == {1: 2, 2: 2}
    assert sorted(map(tuple, t.rows)) == [(5, 6), (9, 1)]
    assert len(t.step_form) == sum(len(f) for f in forms)
    assert np.flatnonzero(t.step_node == -1).tolist() == [0, 1, 3, 6, 8, 11]
    with pytest.raises(VerbevalError):
        build_causal_trie([[1], []])


@pytest.mark.parametrize("bos", [None, True])
@pytest.mark.parametrize("batch_size", [1, 2, 512])
def test_causal_chain_rule_equals_naive(causal_lm: LoadedModel, bos: bool | None, batch_size: int) -> None:
    forms = form_token_ids(causal_lm.tokenizer, WORDS)
    assert {len(f) for f in forms} >= {1, 2, 3}
    enc = encode_contexts(causal_lm, CONTEXTS, bos)
    assert enc.bos is bool(bos)
    fast = causal_form_logprobs(causal_lm, enc, forms, batch_size=batch_size, progress=False)
    slow = naive_causal(causal_lm, enc.ids, forms)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=2e-5)
    # single-token forms: the float64 log-softmax of the context's own next-token logits (as in
    # the single-token pipeline), up to float32 noise of batch shape and padding)
    single = [i for i, f in enumerate(forms) if len(f) == 1]
    with torch.no_grad():
        for c, seq in enumerate(enc.ids):
            lp = torch.log_softmax(causal_lm.model(input_ids=torch.tensor([seq])).logits[0, -1].double(), dim=-1)
            np.testing.assert_allclose(fast[c, single], lp[[forms[i][0] for i in single]].numpy(), rtol=0, atol=1e-5)
    # a distribution: far from uniform after sharpening, and every value a log-probability
    assert (fast < 0).all() and np.isfinite(fast).all()


def test_causal_chain_rule_is_sum_of_steps(causal_lm: LoadedModel) -> None:
    """log P(a b) = log P(a) + log P(b | a): the prefix [a] scored alone plus the step."""
    enc = encode_contexts(causal_lm, CONTEXTS.iloc[:1], None)
    ab = form_token_ids(causal_lm.tokenizer, ["swims"])[0]
    lp = causal_form_logprobs(causal_lm, enc, [ab, ab[:1]], progress=False)[0]
    with torch.no_grad():
        logits = causal_lm.model(input_ids=torch.tensor([enc.ids[0] + ab[:1]])).logits[0, -1].double()
    step = float(torch.log_softmax(logits, dim=-1)[ab[1]])
    assert lp[0] == pytest.approx(lp[1] + step, abs=2e-5)


def test_masked_plan_layout() -> None:
    p = build_masked_plan([[5], [5, 6], [5, 7], [8, 6], [4]], mask_id=0)
    # k=1: one node (empty prefix); k=2: (), (5,), (8,)
    assert len(p.node_k) == 4
    assert sorted(zip(p.node_k.tolist(), p.node_i.tolist())) == [(1, 0), (2, 0), (2, 1), (2, 1)]


@pytest.mark.parametrize("batch_size", [1, 3, 512])
def test_masked_pll_equals_naive(masked_lm: LoadedModel, batch_size: int) -> None:
    forms = form_token_ids(masked_lm.tokenizer, WORDS)
    assert {len(f) for f in forms} >= {1, 2, 3}
    enc = encode_contexts(masked_lm, CONTEXTS, None)
    fast = masked_form_logprobs(masked_lm, enc, forms, batch_size=batch_size, progress=False)
    slow = naive_masked(masked_lm, enc.ids, enc.target, forms)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=2e-5)
    single = [i for i, f in enumerate(forms) if len(f) == 1]
    with torch.no_grad():  # k = 1: the original one-mask context, float64 softmax
        for c, seq in enumerate(enc.ids):
            logits = masked_lm.model(input_ids=torch.tensor([seq])).logits[0, int(enc.target[c])].double()
            lp = torch.log_softmax(logits, dim=-1)
            np.testing.assert_allclose(fast[c, single], lp[[forms[i][0] for i in single]].numpy(), rtol=0, atol=1e-5)


def test_dispatch_and_trie_size(causal_lm: LoadedModel, masked_lm: LoadedModel) -> None:
    enc = encode_contexts(masked_lm, CONTEXTS.iloc[:1], None)
    forms = form_token_ids(masked_lm.tokenizer, ["runs", "swims"])
    np.testing.assert_array_equal(
        form_logprobs(masked_lm, enc, forms, progress=False),
        masked_form_logprobs(masked_lm, enc, forms, progress=False),
    )
    size = trie_size(form_token_ids(causal_lm.tokenizer, ["swims", "swim", "sweeps"]), "causal")
    assert size["forms_per_length"][1] + size["forms_per_length"].get(2, 0) == 3
