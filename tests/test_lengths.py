"""A context longer than the model's positions is named, with the limit, before the model loads."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from test_inference import template_frame
from tiny_cache import tiny_model
from verbeval.agreement.engine.encoding import encode_contexts
from verbeval.agreement.engine.lengths import check_context_lengths, context_lengths, position_limit
from verbeval.core.errors import VerbevalError
from verbeval.core.models import LoadedModel, load_config, load_model


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def tiny(
    request: pytest.FixtureRequest,
    tokenizer_path: Callable[[str], Path],
    wordpiece_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, LoadedModel]:
    tok = wordpiece_path if request.param == "bert" else tokenizer_path("gpt2")
    path = tiny_model(tmp_path_factory, tok, request.param, tmp_path_factory.mktemp(request.param))
    return str(path), load_model(str(path), device="cpu")


def _with_long_pair(words: int) -> pd.DataFrame:
    t = template_frame().assign(source="t.txt", line=np.arange(len(template_frame())) + 1)
    long = {
        "group": "mine",
        "source": "mine.jsonl",
        "line": 7,
        "left": "the dog " + "that the cat sees " * words,
        "right": "today",
        "correct": "runs",
        "incorrect": "run",
        "plural": False,
        "label": "singular",
    }
    return pd.concat([t, pd.DataFrame([long])], ignore_index=True)


def test_lengths_match_what_inference_encodes(tiny: tuple[str, LoadedModel]) -> None:
    _, lm = tiny
    rows = template_frame()
    for bos in [False, True] if lm.kind == "causal" else [False]:
        got = context_lengths(lm.tokenizer, rows, kind=lm.kind, cased=lm.cased, prepend_bos=bos)
        enc = encode_contexts(lm, rows, bos if lm.kind == "causal" else None)
        assert got.tolist() == [len(s) for s in enc.ids]


def test_the_limit_is_the_smaller_of_config_and_tokenizer(tiny: tuple[str, LoadedModel]) -> None:
    path, lm = tiny
    cfg = load_config(path)
    assert position_limit(cfg, lm.tokenizer) == min(cfg.max_position_embeddings, lm.tokenizer.model_max_length)
    assert position_limit(argparse.Namespace(), argparse.Namespace(model_max_length=10**30)) is None


def test_a_too_long_pair_is_named_with_the_limit(tiny: tuple[str, LoadedModel]) -> None:
    path, lm = tiny
    limit = position_limit(load_config(path), lm.tokenizer)
    templates = _with_long_pair(words=40)
    long_row = templates[templates["group"] == "mine"]
    n = int(context_lengths(lm.tokenizer, long_row, kind=lm.kind, cased=lm.cased, prepend_bos=False)[0])
    assert n > limit
    with pytest.raises(VerbevalError) as err:
        check_context_lengths(path, "auto", templates, ["g1", "mine"], False)
    msg = str(err.value)
    assert msg.startswith(
        f"model {path!r} reads at most {limit} positions, but 1 context(s) are longer: the longest "
        f"({n} tokens) is group 'mine', mine.jsonl:7 ('the dog that the cat sees"
    )
    assert msg.endswith("shorten or remove that pair") and "\n" not in msg
    check_context_lengths(path, "auto", templates, ["g1", "g2"], False)  # other groups: fine
    # the scoring's extra tokens (multi-token forms) count too
    fits = _with_long_pair(words=0)
    check_context_lengths(path, "auto", fits, ["mine"], False)
    with pytest.raises(VerbevalError, match="reads at most"):
        check_context_lengths(path, "auto", fits, ["mine"], False, extra=limit)


def test_the_check_is_done_once_per_tokenizer_config_and_templates_file(
    tiny: tuple[str, LoadedModel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine keys the check by the content of its files and its settings (no key: each call checks)."""
    from verbeval.agreement.engine import lengths
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.session import Session

    path, _ = tiny
    templates = _with_long_pair(words=0)
    templates.to_parquet(tmp_path / "templates.parquet")
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(lengths, "check_context_lengths", lambda *a: calls.append(a[3:]))
    source = ModelSource.of(path)
    with Session().active():  # the session keeps the work
        for bos in (False, False, True):
            lengths.check_context_lengths_once(
                source, "auto", templates, str(tmp_path / "templates.parquet"), ["g1"], bos
            )
        assert calls == [(["g1"], False, 0), (["g1"], True, 0)]
        lengths.check_context_lengths_once(source, "auto", templates, str(tmp_path / "missing.parquet"), ["g1"], False)
        assert len(calls) == 3
    # outside a session nothing is kept: each call checks
    lengths.check_context_lengths_once(source, "auto", templates, str(tmp_path / "templates.parquet"), ["g1"], False)
    assert len(calls) == 4


def test_infer_stops_before_loading_the_model(
    tiny: tuple[str, LoadedModel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from verbeval.cli import main
    from verbeval.core.prefetch import Prefetcher

    path, _ = tiny

    def must_not_load(self: Any, request: Any) -> Any:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(Prefetcher, "take", must_not_load)
    _with_long_pair(words=40).to_parquet(tmp_path / "templates.parquet")
    pd.DataFrame({"lemma": ["run"]}).to_parquet(tmp_path / "lemmas.parquet")
    rc = main(
        [
            "infer",
            "--model",
            path,
            "--templates",
            str(tmp_path / "templates.parquet"),
            "--lemmas",
            str(tmp_path / "lemmas.parquet"),
            "--groups",
            "g1,mine",
            "--manifest",
            str(tmp_path / "s" / "manifest.json"),
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    assert rc == 1 and not (tmp_path / "s" / "manifest.json").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"verbeval infer: error: model {path!r} reads at most ")
