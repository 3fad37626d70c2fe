"""verbeval.core.fasttok: the tokenizers-only tokenizer against transformers' AutoTokenizer.

Every tokenizer family of the project, as ``verbeval tiny-model`` saves it (transformers'
``save_pretrained``, so a tokenizer.json beside tokenizer_config.json) and as shipped in
../shared/tokenizers: where :func:`json_tokenizer_problem` accepts a folder, the word ids, the
eligible lemmas of the real verb list, the vocabulary, the unknown token and the byte-level test
must equal transformers' own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
import pytest

from conftest import LazyMap
from verbeval.agreement.data.eligibility import eligible_lemmas, form_token_ids, is_byte_level_bpe
from verbeval.core.fasttok import JsonTokenizer, json_tokenizer_problem, load_text_tokenizer

FAMILIES = [
    "bert-base-cased",
    "bert-base-uncased",
    "roberta-base",
    "gpt2",
    "gpt_neox_olmo1",
    "mistral_v1_spm",
    "olmo2_dolma2",
]
#: words with accents, capitals, hyphens, digits, CJK, apostrophes and a long one
ODD = ["naïve", "Über", "co-operate", "re-enter", "runs2", "日本", "isn't", "Walks", "WALKS", "x" * 40, "déjà", " "]


def _verbs(data_dir: Path) -> pd.DataFrame:
    path = next(data_dir.rglob("combined_verb_list.csv"))
    lex = pd.read_csv(path, keep_default_na=False)
    lex["lemma"] = lex["plur"]
    return lex[["lemma", "sing", "plur"]]


@pytest.fixture(scope="module")
def folders(tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Path]:
    """``"<family> (shared)"``: the real tokenizer's folder; ``"<family> (saved)"``: it as tiny-model saves it."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("saved")

    def get(key: str) -> Path:
        fam, how = key.rsplit(" ", 1)
        src = tokenizer_path(fam)
        if how == "(shared)":
            return src
        AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(root / fam))
        return root / fam

    return LazyMap([f"{fam} {how}" for fam in FAMILIES for how in ("(shared)", "(saved)")], get)


def test_same_ids_and_lemmas_as_transformers(folders: dict[str, Path], data_dir: Path) -> None:
    from transformers import AutoTokenizer

    lex = _verbs(data_dir)
    words = lex["sing"].tolist() + lex["plur"].tolist() + ODD
    fast_used = []
    for name, folder in folders.items():
        if json_tokenizer_problem(folder) is not None:
            continue
        fast_used.append(name)
        ours, ref = JsonTokenizer(folder), AutoTokenizer.from_pretrained(str(folder))
        assert form_token_ids(ours, words) == form_token_ids(ref, words), name
        pd.testing.assert_frame_equal(eligible_lemmas(lex, ours), eligible_lemmas(lex, ref), obj=name)
        assert ours.get_vocab() == ref.get_vocab(), name
        assert ours.unk_token_id == ref.unk_token_id, name
        assert is_byte_level_bpe(ours) == is_byte_level_bpe(ref), name
        assert ours("they walk", add_special_tokens=True)["input_ids"] == ref("they walk")["input_ids"], name
        # Table 3 decodes single tokens and strips them: 3,000 tokens spread over the vocabulary and
        # every special or added one
        vocab = sorted(ref.get_vocab().values())
        ids = sorted({*vocab[:: max(1, len(vocab) // 3000)], *ref.all_special_ids, *ref.added_tokens_decoder})
        assert [ours.decode([i]).strip() for i in ids] == [ref.decode([i]).strip() for i in ids], name
        assert [ours.decode([i]) for i in ids if not ref.decode([i]).strip()] == [
            ref.decode([i]) for i in ids if not ref.decode([i]).strip()
        ], name  # whitespace-only tokens are shown unstripped (repr)
        assert ours.mask_token == getattr(ref, "mask_token", None), name
    # every saved folder (what tiny-model writes) takes the fast path
    assert {n for n in folders if n.endswith("(saved)")} <= set(fast_used)


def test_problems_fall_back(tmp_path: Path, folders: dict[str, Path]) -> None:
    assert json_tokenizer_problem(folders["bert-base-uncased (shared)"]) == "no tokenizer.json"
    saved = folders["bert-base-uncased (saved)"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tokenizer.json").write_bytes((saved / "tokenizer.json").read_bytes())
    (bad / "tokenizer_config.json").write_text('{"do_lower_case": false}')  # the file lowercases
    assert "do_lower_case" in (json_tokenizer_problem(bad) or "")
    assert not isinstance(load_text_tokenizer(str(folders["bert-base-uncased (shared)"])), JsonTokenizer)
    assert isinstance(load_text_tokenizer(str(saved)), JsonTokenizer)


def test_lemmas_imports_neither_torch_nor_transformers(
    folders: dict[str, Path], data_dir: Path, tmp_path: Path
) -> None:
    lexicon = tmp_path / "lexicon.parquet"
    _verbs(data_dir).to_parquet(lexicon)
    code = (
        "import sys; from verbeval.cli import main; "
        f"rc = main(['lemmas', '--model', {str(folders['gpt2 (saved)'])!r}, '--lexicon', {str(lexicon)!r}, "
        f"'--out', {str(tmp_path / 'lemmas.parquet')!r}]); "
        "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    # a process: what a command imports shows only in a fresh interpreter (pytest's has torch loaded)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "False", "False"]


def _imports_after(argv: list[str]) -> list[str]:
    """Run ``verbeval <argv>`` in a fresh interpreter; its exit code and which heavy modules it imported.
    A process, because what a command imports shows only in an interpreter that has not loaded them."""
    code = (
        "import sys; from verbeval.cli import main; "
        f"rc = main({argv!r}); "
        "print(rc, *sorted(m for m in ('torch', 'transformers', 'pandas') if m in sys.modules))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_lexicon_forms_imports_neither_torch_nor_transformers(
    folders: dict[str, Path], data_dir: Path, tmp_path: Path
) -> None:
    # pandas it needs: it reads the lexicon and templates parquet files and writes a DataFrame
    lexicon, templates = tmp_path / "lexicon.parquet", tmp_path / "templates.parquet"
    _verbs(data_dir).to_parquet(lexicon)
    pd.DataFrame(
        {
            "group": "g",
            "left": ["the dog", "the dogs"],
            "right": [".", "."],
            "correct": ["barks", "zorp"],
            "incorrect": ["bark", "zorps"],
            "plural": [False, True],
        }
    ).to_parquet(templates)
    out = tmp_path / "forms.parquet"
    argv = [
        "lexicon-forms",
        "--model",
        str(folders["bert-base-cased (saved)"]),
        "--lexicon",
        str(lexicon),
        "--templates",
        str(templates),
        "--out",
        str(out),
    ]
    assert _imports_after(argv) == ["0", "pandas"]
    assert pd.read_parquet(out)["in_lexicon"].sum() == len(_verbs(data_dir))


def test_fetch_imports_neither_torch_nor_transformers_nor_pandas(tmp_path: Path) -> None:
    import hashlib

    data = tmp_path / "source.jsonl"
    data.write_text('{"sent": "the dog barks"}\n')
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        f"sources:\n  toy:\n    url: {data.as_uri()}\n    sha256: "
        f"'{hashlib.sha256(data.read_bytes()).hexdigest()}'\n    format: ml_jsonl\n"
        "    description: a local file\n    license: MIT\n"
    )
    out = tmp_path / "raw" / "toy.jsonl"
    assert _imports_after(["fetch", "--manifest", str(manifest), "--name", "toy", "--out", str(out)]) == ["0"]
    assert out.read_bytes() == data.read_bytes()
