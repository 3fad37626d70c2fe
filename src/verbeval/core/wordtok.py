"""A word-level tokenizer built from the workflow's own data, for the quick-start tiny models.

The quick start (``config/quick.yaml``) must run anywhere: on a laptop with network access to the
dataset hosts, or offline from a data mirror, and never from a model hub. Its tiny models therefore
cannot use a hub tokenizer. Instead the ``tiny_model`` rule builds a word-level tokenizer from the
text of the data it already has (templates, verb lexicon, SimVerb-3500 pairs, ...): every word of that
text is one token, so every verb form of the lexicon is eligible.

The vocabulary is deterministic: special tokens first, then words by descending count and then
alphabetically, so a rebuild gives byte-identical tokenizer files. Words are split as BERT splits
them (on whitespace and punctuation), case is kept.

Two styles follow the two model kinds:

- ``masked``: ``[PAD] [UNK] [CLS] [SEP] [MASK]``; a text is encoded as ``[CLS] text [SEP]`` (pairs as
  ``[CLS] a [SEP] b [SEP]``), like BERT;
- ``causal``: ``<unk>`` and ``<|endoftext|>`` (BOS = EOS = PAD); nothing is added to a text, like
  GPT-2 in the paper's code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from verbeval.core.errors import VerbevalError

Style = Literal["masked", "causal"]

MASKED_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CAUSAL_SPECIALS = ("<unk>", "<|endoftext|>")


#: Parquet columns that annotate a text rather than hold it: templates.parquet's lexical items
#: (:mod:`verbeval.agreement.data.items`), words taken from the sentences or their lemmas. A
#: vocabulary built from the table leaves them out, so that it is the sentences' words alone.
ANNOTATION_COLUMNS = frozenset({"subject_item", "verb_item"})


def corpus_texts(path: str | Path) -> Iterator[str]:
    """Every text of one corpus file: the string cells of a Parquet file (but its
    :data:`ANNOTATION_COLUMNS`), or the lines of any other file (tab-separated fields count as text
    too; the words are split later)."""
    p = Path(path)
    if not p.is_file():
        raise VerbevalError(f"{p}: corpus file not found")
    if p.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(p)
        for col in frame.columns:
            if col in ANNOTATION_COLUMNS:
                continue
            if pd.api.types.is_object_dtype(frame[col]) or pd.api.types.is_string_dtype(frame[col]):
                yield from (v for v in frame[col].tolist() if isinstance(v, str))
        return
    try:
        with p.open(encoding="utf-8") as fh:
            yield from fh
    except UnicodeDecodeError as exc:
        raise VerbevalError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def word_counts(texts: Iterable[str]) -> Counter[str]:
    """How often each word occurs, words split like BERT (whitespace and punctuation)."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    split = BertPreTokenizer().pre_tokenize_str
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w for w, _ in split(text))
    return counts


def vocabulary(counts: Counter[str], specials: Iterable[str], max_words: int | None = None) -> dict[str, int]:
    """Specials first, then words by descending count, ties alphabetically; at most ``max_words`` words."""
    specials = list(specials)
    words = sorted((w for w in counts if w not in specials), key=lambda w: (-counts[w], w))
    if max_words is not None:
        words = words[:max_words]
    return {tok: i for i, tok in enumerate([*specials, *words])}


def build_word_tokenizer(corpus: Iterable[str | Path], style: Style, *, max_words: int | None = None) -> Any:
    """A ``transformers`` fast tokenizer whose vocabulary is every word of the corpus files."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    counts: Counter[str] = Counter()
    for path in corpus:
        counts.update(word_counts(corpus_texts(path)))
    if not counts:
        raise VerbevalError("the corpus files hold no words: cannot build a tokenizer")
    specials = MASKED_SPECIALS if style == "masked" else CAUSAL_SPECIALS
    vocab = vocabulary(counts, specials, max_words)
    unk = specials[1] if style == "masked" else specials[0]
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if style == "masked":
        cls, sep = vocab["[CLS]"], vocab["[SEP]"]
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=backend,
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    eot = "<|endoftext|>"
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token=eot, eos_token=eot, pad_token=eot
    )


def save_word_tokenizer(
    corpus: Iterable[str | Path], style: Style, out_dir: str | Path, *, max_words: int | None = None
) -> Path:
    """Build (:func:`build_word_tokenizer`) and save the tokenizer to ``out_dir``."""
    tok = build_word_tokenizer(corpus, style, max_words=max_words)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(out)
    return out
