"""Tests for verbeval.agreement.data.eligibility against the real tokenizers in the shared folder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from transformers import AutoTokenizer

from conftest import LazyMap
from verbeval.agreement.data.eligibility import (
    ELIGIBLE_COLUMNS,
    eligible_lemmas,
    is_byte_level_bpe,
    single_token_id,
    single_token_ids,
    tokenizer_fingerprint,
)
from verbeval.agreement.data.lexicon import build_lexicon

REPO_ROOT = Path(__file__).resolve().parent.parent
TSE_COMMIT = "db423f80246ba2d7c2fc602fc514943949cfaf71"
NAMES = ("bert-base-cased", "bert-base-uncased", "gpt2", "roberta-base", "roberta-large")


@pytest.fixture(scope="module")
def toks(tokenizer_path: Callable[[str], Path]) -> Mapping[str, Any]:
    """The five real tokenizers, each loaded once for the module when a test first uses it."""
    return LazyMap(NAMES, lambda name: AutoTokenizer.from_pretrained(str(tokenizer_path(name))))


@pytest.fixture(scope="module")
def union_lexicon(data_dir: Path) -> pd.DataFrame:
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


def test_is_byte_level_bpe(toks: dict[str, Any]) -> None:
    assert {n: is_byte_level_bpe(t) for n, t in toks.items()} == {
        "bert-base-cased": False,
        "bert-base-uncased": False,
        "gpt2": True,
        "roberta-base": True,
        "roberta-large": True,
    }


def test_is_byte_level_bpe_vocab_fallback() -> None:
    class SlowByteLevel:
        def get_vocab(self) -> dict[str, int]:
            return {"the": 0, "\u0120the": 1}

    class SlowWordPiece:
        def get_vocab(self) -> dict[str, int]:
            return {"the": 0, "##s": 1}

    assert is_byte_level_bpe(SlowByteLevel()) is True
    assert is_byte_level_bpe(SlowWordPiece()) is False


@pytest.mark.parametrize(
    ("name", "word", "expected"),
    [
        ("gpt2", "runs", 4539),
        ("roberta-base", "runs", 1237),
        ("roberta-large", "runs", 1237),
        ("bert-base-cased", "runs", 2326),
        ("bert-base-uncased", "runs", 3216),
        ("gpt2", "writes", 6797),
        ("roberta-base", "writes", 5789),
        ("gpt2", "is", 318),
        ("bert-base-cased", "is", 1110),
        ("bert-base-uncased", "are", 2024),
        # multi-token everywhere: "swims" (swim ##s / Ġswim s), "acculturates"
        ("gpt2", "swims", -1),
        ("roberta-base", "swims", -1),
        ("bert-base-cased", "swims", -1),
        ("bert-base-uncased", "swims", -1),
        ("gpt2", "acculturates", -1),
        ("bert-base-cased", "acculturates", -1),
        # case: "Runs" is Run ##s for cased BERT, lowercased to runs by uncased BERT
        ("bert-base-cased", "Runs", -1),
        ("bert-base-uncased", "Runs", 3216),
    ],
)
def test_single_token_id(toks: dict[str, Any], name: str, word: str, expected: int) -> None:
    assert single_token_id(toks[name], word) == expected


def test_prefix_space_is_encoded_explicitly(toks: dict[str, Any]) -> None:
    """transformers 5 ignores add_prefix_space=True in encode(): 'writes' stays two tokens."""
    gpt2 = toks["gpt2"]
    assert gpt2.encode("writes", add_special_tokens=False, add_prefix_space=True) == [8933, 274]
    assert gpt2.encode(" writes", add_special_tokens=False) == [6797]
    assert gpt2.convert_ids_to_tokens([6797]) == ["\u0120writes"]
    assert single_token_id(gpt2, "writes") == 6797
    # The id is the space-prefixed token, not the word-initial "runs" (48381).
    assert single_token_id(gpt2, "runs") == 4539 != gpt2.encode("runs", add_special_tokens=False)[0]


def test_single_token_ids_batch_matches_single(toks: dict[str, Any]) -> None:
    words = ["runs", "run", "swims", "writes", "is", "are", "co-exists", "haves"]
    for name, tok in toks.items():
        batch = single_token_ids(tok, words)
        assert batch.dtype == np.int64 and batch.shape == (len(words),)
        assert batch.tolist() == [single_token_id(tok, w) for w in words], name
    assert single_token_ids(toks["gpt2"], []).shape == (0,)


def test_unknown_token_is_not_eligible(toks: dict[str, Any]) -> None:
    bert = toks["bert-base-cased"]
    assert bert.encode("\u2603", add_special_tokens=False) == [bert.unk_token_id]  # a snowman is [UNK]
    assert single_token_id(bert, "\u2603") == -1


def test_eligible_lemma_counts_on_union_lexicon(toks: dict[str, Any], union_lexicon: pd.DataFrame) -> None:
    """979 / 1158 / 1264 of 3,557 lemma rows (the paper: 980 / 1159 / 1265 of 3,562).

    The paper's extra lemma is is/are counted twice (as ``be`` and as the csv's ``are``); our
    lexicon de-duplicates on the form pair. See test_paper_counts_when_keyed_by_lemma_name.
    """
    counts = {name: len(eligible_lemmas(union_lexicon, tok)) for name, tok in toks.items()}
    assert counts == {
        "bert-base-cased": 979,
        "bert-base-uncased": 1158,
        "gpt2": 1264,
        "roberta-base": 1264,
        "roberta-large": 1264,
    }


def test_paper_counts_when_keyed_by_lemma_name(toks: dict[str, Any], union_lexicon: pd.DataFrame) -> None:
    with_are = pd.concat(
        [union_lexicon, pd.DataFrame([{"lemma": "are", "sing": "is", "plur": "are", "source": "combined"}])],
        ignore_index=True,
    )
    counts = {
        name: len(eligible_lemmas(with_are, toks[name])) for name in ("bert-base-cased", "bert-base-uncased", "gpt2")
    }
    assert counts == {"bert-base-cased": 980, "bert-base-uncased": 1159, "gpt2": 1265}


def test_eligible_lemmas_columns_order_and_ids(toks: dict[str, Any]) -> None:
    lex = pd.DataFrame(
        {
            "lemma": ["run", "swim", "be", "write", "run2"],
            "sing": ["runs", "swims", "is", "writes", "Runs"],
            "plur": ["run", "swim", "are", "write", "runs"],
            "source": "giant",
        },
        index=[10, 11, 12, 13, 14],
    )
    gpt2 = eligible_lemmas(lex, toks["gpt2"])
    assert list(gpt2.columns) == list(ELIGIBLE_COLUMNS)
    assert gpt2.values.tolist() == [
        ["run", "runs", "run", 4539, 1057],
        ["be", "is", "are", 318, 389],
        ["write", "writes", "write", 6797, 3551],
        ["run2", "Runs", "runs", 44743, 4539],
    ]
    assert gpt2.index.tolist() == [0, 1, 2, 3]
    assert gpt2["sing_id"].dtype == np.int64
    # Uncased BERT maps Runs and runs to the same id: not a usable pair.
    uncased = eligible_lemmas(lex, toks["bert-base-uncased"])
    assert uncased["lemma"].tolist() == ["run", "be", "write"]
    assert uncased.iloc[0][["sing_id", "plur_id"]].tolist() == [3216, 2448]


def test_fingerprint(toks: dict[str, Any]) -> None:
    fp = {name: tokenizer_fingerprint(tok) for name, tok in toks.items()}
    assert all(len(v) == 64 and int(v, 16) >= 0 for v in fp.values())
    assert fp["bert-base-cased"] != fp["bert-base-uncased"]
    assert fp["roberta-base"] == fp["roberta-large"]  # identical vocab.json / merges.txt
    assert fp["gpt2"] != fp["roberta-base"]
    assert len(set(fp.values())) == 4
    assert tokenizer_fingerprint(toks["gpt2"]) == fp["gpt2"]


def test_fingerprint_stable_across_processes(toks: dict[str, Any], tokenizer_path: Callable[[str], Path]) -> None:
    code = (
        "import sys; from transformers import AutoTokenizer; "
        "from verbeval.agreement.data.eligibility import tokenizer_fingerprint; "
        "print(tokenizer_fingerprint(AutoTokenizer.from_pretrained(sys.argv[1])))"
    )
    # a process (another hash seed): shard manifests compare fingerprints written by other runs
    out = subprocess.run(
        [sys.executable, "-c", code, str(tokenizer_path("bert-base-uncased"))],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == tokenizer_fingerprint(toks["bert-base-uncased"])


def test_identical_files_identical_fingerprint(
    tmp_path: Path, tokenizer_path: Callable[[str], Path], toks: dict[str, Any]
) -> None:
    """A copy of the gpt2 folder fingerprints the same; changing one vocabulary entry changes it."""
    import json
    import shutil

    src = tokenizer_path("gpt2")
    copy = tmp_path / "gpt2copy"
    shutil.copytree(src, copy)
    assert tokenizer_fingerprint(AutoTokenizer.from_pretrained(str(copy))) == tokenizer_fingerprint(toks["gpt2"])
    for p in copy.iterdir():
        p.chmod(0o644)
    spec = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    vocab["\u0120runs"], vocab["\u0120run"] = vocab["\u0120run"], vocab["\u0120runs"]
    (copy / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    changed = AutoTokenizer.from_pretrained(str(copy))
    assert changed.convert_tokens_to_ids("\u0120runs") == 1057
    assert tokenizer_fingerprint(changed) != tokenizer_fingerprint(toks["gpt2"])


def test_a_kept_fingerprint_is_the_computed_one_and_a_changed_tokenizer_is_computed_again(
    tokenizer_path: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digests a process keeps (by class, header and the backend's serialisation) are those a
    computation gives: for the same files loaded again, with a special token set, with a token added."""
    from verbeval.agreement.data import eligibility

    computed: list[str] = []
    compute = eligibility._fingerprint

    def counted(tokenizer: Any, header: str) -> str:
        computed.append(type(tokenizer).__name__)
        return compute(tokenizer, header)

    monkeypatch.setattr(eligibility, "_FINGERPRINTS", type(eligibility._FINGERPRINTS)())
    monkeypatch.setattr(eligibility, "_fingerprint", counted)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path("gpt2")))
    first = tokenizer_fingerprint(tok)
    reloaded = AutoTokenizer.from_pretrained(str(tokenizer_path("gpt2")))
    again = tokenizer_fingerprint(reloaded)
    assert again == first and len(computed) == 1  # the second from the kept digest
    assert compute(reloaded, eligibility._fingerprint_header(reloaded)) == again  # which is the computed one
    tok.pad_token = tok.eos_token
    padded = tokenizer_fingerprint(tok)
    tok.add_tokens(["zzqqxx"])
    added = tokenizer_fingerprint(tok)
    assert len(computed) == 3 and len({first, padded, added}) == 3
