"""The word-level tokenizer of the quick-start tiny models (verbeval.core.wordtok) and the tiny_models
config key that has the workflow build them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from verbeval.agreement.data.eligibility import eligible_lemmas
from verbeval.cli import main
from verbeval.core.config import validate_config
from verbeval.core.errors import VerbevalError
from verbeval.core.model_checks import check_model_paths
from verbeval.core.model_entries import tiny_model_specs
from verbeval.core.wordtok import build_word_tokenizer, corpus_texts, vocabulary, word_counts


@pytest.fixture
def corpus(tmp_path: Path) -> list[Path]:
    lexicon = pd.DataFrame(
        {
            "lemma": ["walk", "run", "be"],
            "sing": ["walks", "runs", "is"],
            "plur": ["walk", "run", "are"],
            "freq": [3, 2, 1],
        }
    )
    templates = pd.DataFrame(
        {
            "left": ["The author that the guards like", "The authors"],
            "right": [".", "."],
            "correct": ["laughs", "laugh"],
            "line": [1, 2],
        }
    )
    lexicon.to_parquet(tmp_path / "lexicon.parquet")
    templates.to_parquet(tmp_path / "templates.parquet")
    (tmp_path / "simverb.txt").write_text("take\tremove\tV\t6.81\tSYNONYMS\nwalk\ttrail\tV\t4.81\tCOHYPONYMS\n")
    return [tmp_path / "lexicon.parquet", tmp_path / "templates.parquet", tmp_path / "simverb.txt"]


def test_words_are_split_like_bert_and_counted() -> None:
    assert word_counts(["The guards like it.", "the guards, again"]) == Counter(
        {"The": 1, "the": 1, "guards": 2, "like": 1, "it": 1, ".": 1, ",": 1, "again": 1}
    )


def test_vocabulary_order_is_specials_then_count_then_alphabet() -> None:
    vocab = vocabulary(Counter({"b": 2, "a": 2, "c": 5, "[UNK]": 9}), ["[PAD]", "[UNK]"])
    assert vocab == {"[PAD]": 0, "[UNK]": 1, "c": 2, "a": 3, "b": 4}
    assert list(vocabulary(Counter({"b": 2, "a": 2, "c": 5}), ["<unk>"], max_words=2)) == ["<unk>", "c", "a"]


def test_corpus_reads_parquet_strings_and_text_lines(corpus: list[Path]) -> None:
    texts = list(corpus_texts(corpus[1]))
    assert texts == ["The author that the guards like", "The authors", ".", ".", "laughs", "laugh"]
    assert list(corpus_texts(corpus[2]))[0] == "take\tremove\tV\t6.81\tSYNONYMS\n"


def test_corpus_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(VerbevalError, match="nope.txt: corpus file not found"):
        list(corpus_texts(tmp_path / "nope.txt"))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(VerbevalError, match=r"latin1.txt: not UTF-8 text"):
        list(corpus_texts(tmp_path / "latin1.txt"))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(VerbevalError, match="hold no words"):
        build_word_tokenizer([tmp_path / "empty.txt"], "causal")


def test_causal_style_adds_nothing_and_every_form_is_one_token(corpus: list[Path]) -> None:
    tok = build_word_tokenizer(corpus, "causal")
    ids = tok("The authors laugh .")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["The", "authors", "laugh", "."]
    assert tok("zebra")["input_ids"] == [tok.unk_token_id]
    assert tok.bos_token == tok.eos_token == "<|endoftext|>"
    lexicon = pd.read_parquet(corpus[0])
    eligible = eligible_lemmas(lexicon, tok)
    assert sorted(eligible["lemma"]) == ["be", "run", "walk"]
    assert tok.convert_ids_to_tokens(eligible.sort_values("lemma")["sing_id"].tolist()) == ["is", "runs", "walks"]


def test_masked_style_is_bert_like(corpus: list[Path]) -> None:
    tok = build_word_tokenizer(corpus, "masked")
    assert tok.convert_ids_to_tokens(tok("The authors", "laugh")["input_ids"]) == [
        "[CLS]",
        "The",
        "authors",
        "[SEP]",
        "laugh",
        "[SEP]",
    ]
    assert tok.mask_token == "[MASK]" and tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == list(
        ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    )
    assert len(eligible_lemmas(pd.read_parquet(corpus[0]), tok)) == 3


def test_tiny_model_command_is_deterministic_and_atomic(corpus: list[Path], tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "models" / "quick"
    args = ["-q", "tiny-model", "--word-corpus", *map(str, corpus), "--arch", "gpt2", "--out", str(out)]
    assert main(args) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(args) == 0  # rebuilt over the old folder
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert sorted(p.name for p in out.parent.iterdir()) == ["quick"]  # no temporary folder left
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert (
        model.config.vocab_size
        == len(tok)
        == 2
        + len(
            word_counts(  # <unk>, <|endoftext|>
                t for p in corpus for t in corpus_texts(p)
            )
        )
    )
    # a failed build (no words) leaves the existing model untouched and no temporary folder
    (tmp_path / "empty.txt").write_text("")
    assert (
        main(["-q", "tiny-model", "--word-corpus", str(tmp_path / "empty.txt"), "--arch", "gpt2", "--out", str(out)])
        == 1
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert sorted(p.name for p in out.parent.iterdir()) == ["quick"]


def test_tiny_models_config_key(tmp_path: Path) -> None:
    cfg = validate_config(
        {"tiny_models": [{"out": "./models/q/b/", "arch": "bert"}], "models": [{"id": "models/q/b"}]}, "quick.yaml"
    )
    assert tiny_model_specs(cfg) == {
        "models/q/b": {
            "out": "./models/q/b/",
            "arch": "bert",
            "tokenizer": "words",
            "seed": 0,
            "layers": 2,
            "hidden": 32,
        }
    }
    check_model_paths(cfg)  # built by the workflow: not required to exist yet
    cfg["models"].append({"id": "models/q/missing"})
    with pytest.raises(VerbevalError, match=r"models\.1\.id.*models/q/missing"):
        check_model_paths(cfg)
    with pytest.raises(VerbevalError, match="two entries write models/q/b"):
        tiny_model_specs(
            {"tiny_models": [{"out": "models/q/b", "arch": "bert"}, {"out": "models/q/b/", "arch": "gpt2"}]}
        )
    with pytest.raises(VerbevalError, match=r"tiny_models\.0\.arch"):
        validate_config({"tiny_models": [{"out": "m", "arch": "t5"}], "models": [{"id": "gpt2"}]}, "quick.yaml")


def test_a_template_tables_lexical_items_are_not_corpus_text(tmp_path: Path) -> None:
    """templates.parquet's item columns (their words are the sentences' own, or lemmas such as "be")
    stay out of a vocabulary built from the table: the quick start's tiny BERT keeps the vocabulary of
    the sentences alone, whatever the table annotates."""
    from verbeval.agreement.data.template_files import TEMPLATE_COLUMNS
    from verbeval.core.wordtok import ANNOTATION_COLUMNS

    assert {"subject_item", "verb_item"} <= set(TEMPLATE_COLUMNS) and ANNOTATION_COLUMNS <= set(TEMPLATE_COLUMNS)
    rows = {"left": ["the authors"], "right": ["happy"], "subject_item": ["author"], "verb_item": ["be"]}
    plain, annotated = tmp_path / "plain.parquet", tmp_path / "annotated.parquet"
    pd.DataFrame({k: rows[k] for k in ("left", "right")}).to_parquet(plain)
    pd.DataFrame(rows).to_parquet(annotated)
    assert list(corpus_texts(annotated)) == list(corpus_texts(plain)) == ["the authors", "happy"]
