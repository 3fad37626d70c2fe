"""A model's tokenizer read with the ``tokenizers`` library alone, for the jobs that only tokenize.

``from transformers import AutoTokenizer`` imports torch and most of transformers (about 2 s of a
short job; docs/performance.md). The eligibility and form-table jobs (``verbeval lemmas``,
``lexicon-forms``) only encode words without special tokens, look up the vocabulary and the unknown
token, and read the backend's pre-tokenizer and normaliser: :class:`JsonTokenizer` offers exactly
those, over the model folder's ``tokenizer.json`` (what transformers' fast tokenizers run too).

It is used only where it is certain to encode as transformers would (:func:`json_tokenizer_problem`):
a local folder with ``tokenizer.json`` whose ``tokenizer_config.json`` does not ask transformers to
rebuild part of the backend (a different ``add_prefix_space``, a BERT normaliser setting that differs
from the file's). Otherwise, and for hub ids, :func:`load_text_tokenizer` falls back to
``AutoTokenizer``. ``tests/test_fasttok.py`` checks both give the same ids, vocabulary and eligible
lemmas for every tokenizer family of the project.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError

if TYPE_CHECKING:
    from verbeval.core.model_sources.source import ModelSource

#: BERT normaliser fields transformers sets from tokenizer_config.json: config key -> normaliser key
_BERT_NORMALIZER_KEYS = {
    "do_lower_case": "lowercase",
    "strip_accents": "strip_accents",
    "tokenize_chinese_chars": "handle_chinese_chars",
}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise VerbevalError(f"{path}: unreadable JSON ({exc})") from exc
    return data if isinstance(data, dict) else {}


def _nodes(node: Any) -> list[dict[str, Any]]:
    """Every component (dict with a ``type``) of a serialised normaliser / pre-tokenizer tree."""
    out: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if "type" in n:
                out.append(n)
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return out


def json_tokenizer_problem(folder: Path) -> str | None:
    """Why :class:`JsonTokenizer` might not encode as transformers would for ``folder``, else None."""
    if not (folder / "tokenizer.json").is_file():
        return "no tokenizer.json"
    cfg = _read_json(folder / "tokenizer_config.json")
    spec = _read_json(folder / "tokenizer.json")
    if "add_prefix_space" in cfg:
        levels = [n for n in _nodes(spec.get("pre_tokenizer")) if "add_prefix_space" in n]
        if not levels or any(n["add_prefix_space"] != cfg["add_prefix_space"] for n in levels):
            return "tokenizer_config.json sets add_prefix_space differently from tokenizer.json"
    bert = [n for n in _nodes(spec.get("normalizer")) if n.get("type") == "BertNormalizer"]
    for key, field in _BERT_NORMALIZER_KEYS.items():
        if key in cfg and (not bert or any(n.get(field) != cfg[key] for n in bert)):
            return f"tokenizer_config.json sets {key} differently from tokenizer.json's normaliser"
    if cfg.get("from_slow") or cfg.get("legacy") is False:
        return "tokenizer_config.json asks for a conversion (from_slow / legacy)"
    return None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


class JsonTokenizer:
    """The part of a transformers fast tokenizer that the tokenizing jobs use, over ``tokenizer.json``."""

    is_fast = True
    SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

    def __init__(self, folder: str | Path) -> None:
        from tokenizers import Tokenizer

        folder = Path(folder)
        self.backend_tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.backend_tokenizer.no_truncation()  # as transformers does for truncation=False, padding=False
        self.backend_tokenizer.no_padding()
        cfg = {**_read_json(folder / "tokenizer_config.json"), **_read_json(folder / "special_tokens_map.json")}
        self.special_tokens_map = {k: t for k in self.SPECIAL_KEYS if (t := _token_text(cfg.get(k))) is not None}
        self.name_or_path = str(folder)

    def __call__(self, text: str | list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        if isinstance(text, str):
            return {"input_ids": self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids}
        encs = self.backend_tokenizer.encode_batch(list(text), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encs]}

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.backend_tokenizer.token_to_id(token)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str | None]:
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    @property
    def unk_token_id(self) -> int | None:
        unk = self.special_tokens_map.get("unk_token")
        return None if unk is None else self.backend_tokenizer.token_to_id(unk)

    @property
    def mask_token(self) -> str | None:
        return self.special_tokens_map.get("mask_token")

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The backend's decoding of ``ids``, special tokens kept unless asked (as transformers does).
        transformers may also tidy the spaces before punctuation (``clean_up_tokenization_spaces``):
        a caller that strips the text of one token (Table 3) gets the same either way
        (``tests/test_fasttok.py`` checks every token of every tokenizer family)."""
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


def load_text_tokenizer(source: ModelSource | str) -> Any:
    """The tokenizer of a model source (or a bare id or folder) for encoding words and decoding single
    tokens: a :class:`JsonTokenizer` for a local folder where it is safe (no torch, no transformers
    import), a GGUF model's too where its cached folder holds the tokenizer
    (:meth:`verbeval.core.model_sources.source.ModelSource.gguf_folder`, once the file is checked
    against its pin; the first job to need it builds that folder), else transformers' ``AutoTokenizer``."""
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.models import load_tokenizer

    source = ModelSource.of(source)
    if source.file:
        from verbeval.core.model_sources.gguf_cache import has_tokenizer

        cached = Path(source.gguf_folder())
        if has_tokenizer(cached) and json_tokenizer_problem(cached) is None:
            return JsonTokenizer(cached)
        return load_tokenizer(source)
    ref = source.ref
    if ref.is_dir and source.revision is None:
        ref.check_local(need_config=False, what="tokenizer for model")
        folder = Path(ref.location)
        if json_tokenizer_problem(folder) is None:
            return JsonTokenizer(folder)
    return load_tokenizer(source)


class TextTokenizers:
    """:func:`load_text_tokenizer` once per tokenizer: sources whose local tokenizer files have the same
    content (:func:`verbeval.core.warm.tokenizer_files_key`, a sha256 over their names and contents,
    never a path or name) share one tokenizer, so a command over a sweep's revisions (Table 3) loads
    one. Hub ids and GGUF models, which no content key identifies, are loaded every time (the
    :class:`verbeval.core.warm.WarmCache` memo of a None key)."""

    def __init__(self) -> None:
        from verbeval.core.warm import WarmCache

        self._cache = WarmCache()

    def __call__(self, source: ModelSource | str) -> Any:
        from verbeval.core.warm import tokenizer_files_key

        return self._cache.memo("text-tokenizer", tokenizer_files_key(source), lambda: load_text_tokenizer(source))
