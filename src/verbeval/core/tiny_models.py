"""The tiny-model factory: small randomly initialised LMs (BERT, RoBERTa, GPT-2, a BERT NLI
classifier and Llama, Mistral, GPT-NeoX and OLMo-2 decoders) built on real tokenizers for tests,
CI and benchmarks (``verbeval tiny-model``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError
from verbeval.core.provenance import RANDOM_INIT_MARKER

if TYPE_CHECKING:  # torch is imported by the functions that need it: start-up of model-free commands stays cheap
    import torch


TINY_ARCHS = ("bert", "roberta", "gpt2", "bert-nli", "llama", "mistral", "gpt-neox", "olmo2")
#: the causal architectures of :data:`TINY_ARCHS` beyond GPT-2 and the tokenizer family each is meant for
#: (``docs/models.md``): Llama-2/Mistral on SentencePiece, Pythia/OLMo-1 on GPT-NeoX BPE, OLMo-2 on dolma2
TINY_DECODERS = {
    "llama": "mistral_v1_spm",
    "mistral": "mistral_v1_spm",
    "gpt-neox": "gpt_neox_olmo1",
    "olmo2": "olmo2_dolma2",
}
#: tiny architectures that are masked LMs / classifiers built on a masked-LM tokenizer
MASKED_TINY_ARCHS = ("bert", "roberta", "bert-nli")
#: label names of the tiny NLI classifier (deliberately not in MNLI order: consumers must map by name)
TINY_NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}


def make_tiny_model(
    tokenizer_dir: str | Path,
    arch: str,
    out_dir: str | Path,
    *,
    seed: int = 0,
    layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
) -> Path:
    """Build a tiny randomly initialised LM on a real tokenizer and save it with the tokenizer.

    ``bert-nli`` is a BERT sequence classifier with three labels named in ``id2label``
    (:data:`TINY_NLI_LABELS`), standing in for an MNLI model in the veridicality workflow.
    ``llama``, ``mistral``, ``gpt-neox`` and ``olmo2`` are the decoders of those families
    (:data:`TINY_DECODERS`; ``mistral`` with grouped-query attention, one key/value head), with
    the tokenizer's BOS, EOS and padding ids in their config. The numbers it produces are
    meaningless, but tokenisation, vocabulary size and data are real, which exercises the whole
    workflow at realistic cost without any download. The weights depend only on the arguments
    (seeded): a rebuild writes byte-identical files.
    """
    import torch
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForMaskedLM,
        BertForSequenceClassification,
        GPT2Config,
        GPT2LMHeadModel,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    if arch not in TINY_ARCHS:
        raise VerbevalError(f"unknown tiny architecture {arch!r}; choose one of {TINY_ARCHS}")
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = len(tok)
    torch.manual_seed(seed)
    model: torch.nn.Module
    # the sizes of every encoder (BERT, RoBERTa, the NLI BERT)
    encoder = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
    }
    if arch == "bert":
        model = BertForMaskedLM(BertConfig(**encoder, max_position_embeddings=128))
    elif arch == "roberta":
        model = RobertaForMaskedLM(
            RobertaConfig(
                **encoder,
                max_position_embeddings=130,
                pad_token_id=tok.pad_token_id,
                bos_token_id=tok.bos_token_id,
                eos_token_id=tok.eos_token_id,
            )
        )
    elif arch == "bert-nli":
        model = BertForSequenceClassification(
            BertConfig(
                **encoder,
                max_position_embeddings=512,
                num_labels=len(TINY_NLI_LABELS),
                id2label=dict(TINY_NLI_LABELS),
                label2id={v: k for k, v in TINY_NLI_LABELS.items()},
            )
        )
    elif arch in TINY_DECODERS:
        model = _tiny_decoder(arch, tok, vocab, layers=layers, hidden=hidden, heads=heads)
    else:
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=vocab,
                n_embd=hidden,
                n_layer=layers,
                n_head=heads,
                n_positions=128,
                bos_token_id=tok.bos_token_id,
                eos_token_id=tok.eos_token_id,
            )
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    _keep_tokenizer_class(Path(tokenizer_dir), out)
    (out / RANDOM_INIT_MARKER).write_text(
        json.dumps(
            {"arch": arch, "seed": seed, "layers": layers, "hidden": hidden, "tokenizer": Path(tokenizer_dir).name}
        )
    )
    return out


def _keep_tokenizer_class(src: Path, out: Path) -> None:
    """Write the source folder's ``tokenizer_class`` back into the saved tokenizer_config.json.

    transformers 5 saves a tokenizer loaded as ``PreTrainedTokenizerFast`` as ``TokenizersBackend``,
    a name transformers 4 does not know; and without a class, AutoTokenizer would pick the model
    type's own (``LlamaTokenizer`` for mistral), which rewrites the SentencePiece set-up on load.
    """
    src_cfg, out_cfg = src / "tokenizer_config.json", out / "tokenizer_config.json"
    if not (src_cfg.is_file() and out_cfg.is_file()):
        return
    cls = json.loads(src_cfg.read_text(encoding="utf-8")).get("tokenizer_class")
    saved = json.loads(out_cfg.read_text(encoding="utf-8"))
    if cls and saved.get("tokenizer_class") != cls:
        saved["tokenizer_class"] = cls
        out_cfg.write_text(json.dumps(saved, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _tiny_decoder(arch: str, tok: Any, vocab: int, *, layers: int, hidden: int, heads: int) -> torch.nn.Module:
    """A tiny Llama, Mistral, GPT-NeoX or OLMo-2 causal LM (called after seeding torch)."""
    from transformers import (
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Olmo2Config,
        Olmo2ForCausalLM,
    )

    if hidden % heads or (hidden // heads) % 2:
        raise VerbevalError(f"--hidden {hidden} must be a multiple of 2 x {heads} heads (even rotary head size)")
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    common = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
        "max_position_embeddings": 512,
        **ids,
    }
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**common, num_key_value_heads=heads))
    if arch == "mistral":
        return MistralForCausalLM(MistralConfig(**common, num_key_value_heads=1, sliding_window=None))
    if arch == "gpt-neox":
        return GPTNeoXForCausalLM(GPTNeoXConfig(**common))
    return Olmo2ForCausalLM(Olmo2Config(**common, num_key_value_heads=heads))
