"""The in-process API keeps its promises: ``evaluate`` gives a model back exactly as it came (every
submodule's mode, requires_grad), arguments are checked at the door with one line naming them, pairs
whose two forms are one token id are excluded (never scored as errors), and ``AgreementCallback``
checks its folder before training and survives a failed write at a scored step."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from test_callback import GROUPS, Recorder, _trainer, suite  # noqa: F401 - the module's hand-made suite
from tiny_cache import tiny_model
from verbeval.agreement.api.callback import AgreementCallback
from verbeval.agreement.api.evaluation import evaluate
from verbeval.agreement.api.suite import AgreementSuite
from verbeval.core.errors import VerbevalError


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, tokenizer_path: Any) -> tuple[Any, Any]:
    """A tiny GPT-2 (with dropout) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("tiny") / "model")
    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def _modes(model: Any) -> dict[str, bool]:
    return {name: m.training for name, m in model.named_modules()}


@pytest.mark.parametrize("top", [True, False])
def test_evaluate_restores_every_submodules_mode(suite: AgreementSuite, tiny: tuple[Any, Any], top: bool) -> None:  # noqa: F811
    model, tok = tiny
    model.train(top)
    model.transformer.h[0].train(not top)  # one block frozen in eval mode (or the reverse), its dropout with it
    model.transformer.wte.weight.requires_grad_(False)
    before = _modes(model)
    assert before["transformer.h.0.attn.resid_dropout"] is (not top) and before["transformer.h.1"] is top
    evaluate(model, tok, suite, groups=["simple"], resamples=0)
    assert _modes(model) == before
    assert not model.transformer.wte.weight.requires_grad and model.transformer.h[0].ln_1.weight.requires_grad
    model.transformer.wte.weight.requires_grad_(True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "evaluate: batch_size=0: expected a positive integer"),
        ({"batch_size": -3}, "evaluate: batch_size=-3: expected a positive integer"),
        ({"chunks": 0}, "evaluate: chunks=0: expected a positive integer"),
        ({"max_rows": 0}, "evaluate: max_rows=0: expected a positive integer or None"),
        ({"resamples": -1}, "evaluate: resamples=-1: expected an integer >= 0"),
        ({"confidence": 1.5}, "evaluate: confidence=1.5: expected a number between 0 and 1 (exclusive)"),
        ({"groups": [3]}, "evaluate: groups=[3]: expected a group id or a list of group ids"),
    ],
)
def test_evaluate_checks_its_arguments(
    suite: AgreementSuite,  # noqa: F811
    tiny: tuple[Any, Any],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    model, tok = tiny
    with pytest.raises(VerbevalError) as err:
        evaluate(model, tok, suite, **kwargs)
    assert str(err.value) == message


def test_a_group_string_is_one_group_and_bad_tables_are_named(suite: AgreementSuite, tiny: tuple[Any, Any]) -> None:  # noqa: F811
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    model, tok = tiny
    res = evaluate(model, tok, suite, groups="simple", resamples=0)
    assert list(res.per_group["group"]) == ["simple"]
    assert suite.select("obj_rel_within").group_ids == ["obj_rel_within"]
    with torch.device("meta"):
        empty = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2))
    with pytest.raises(VerbevalError) as err:
        evaluate(empty, tok, suite)
    assert str(err.value).startswith("evaluate: model: ") and "on the meta device (weights not loaded)" in str(
        err.value
    )
    with pytest.raises(VerbevalError) as err:
        AgreementSuite(suite.templates.drop(columns=["plural", "left"]), suite.lexicon, suite.groups)
    assert str(err.value) == (
        "AgreementSuite: templates has no column(s) left, plural; it needs group, source, left, right, correct, "
        "incorrect, plural"
    )


def test_pairs_of_one_token_id_are_excluded_not_scored(caplog: pytest.LogCaptureFixture) -> None:
    """The docs' toy pattern with verbs missing from the vocabulary: they all encode to the
    undeclared unknown token <eos>, so 'runs' and 'run' are one id."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = "<eos> the author authors laughs laugh".split()
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<eos>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<eos>")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(words), n_embd=16, n_layer=1, n_head=2, n_positions=16))
    rows = [
        {"group": "simple", "source": "s", "left": f"the {n}", "right": "", "correct": c, "incorrect": i, "plural": p}
        for n, p in (("author", False), ("authors", True))
        for c, i in ((("laugh", "laughs") if p else ("laughs", "laugh")), (("run", "runs") if p else ("runs", "run")))
    ]
    lexicon = pd.DataFrame({"lemma": ["laugh", "run"], "sing": ["laughs", "runs"], "plur": ["laugh", "run"]})
    toy = AgreementSuite(pd.DataFrame(rows), lexicon, [{"id": "simple", "name": "Simple", "sources": ["s"]}])
    with caplog.at_level(logging.WARNING):
        res = evaluate(model, tok, toy, name="toy", resamples=0)
    tse = res.row_tse["simple"]
    assert list(tse["row"]) == [0, 1, 2, 3]
    assert np.isnan(tse["tse"].to_numpy()[[1, 3]]).all()  # runs/run: one id, excluded
    assert not np.isnan(tse["tse"].to_numpy()[[0, 2]]).any()  # laughs/laugh: scored
    assert res.per_group["n_rows"].tolist() == [2]
    assert "toy: group simple: 2 of 4 row(s) whose correct and incorrect forms have the same token id" in caplog.text


# ---------------------------------------------------------------- the callback


def test_callback_refuses_an_unwritable_folder_and_a_path_name(suite: AgreementSuite, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "file").write_text("x")
    with pytest.raises(VerbevalError) as err:
        AgreementCallback(suite, steps=[4], out_dir=tmp_path / "file" / "scores")
    assert str(err.value) == (
        f"AgreementCallback: out_dir {tmp_path}/file/scores: cannot write there: {tmp_path}/file is a file, "
        "not a directory"
    )
    for bad in ("../x", "a/b", ".", ""):
        with pytest.raises(VerbevalError, match=r"^AgreementCallback: model_name=.*: expected a plain file name"):
            AgreementCallback(suite, steps=[4], out_dir=tmp_path / "ok", model_name=bad)
    with pytest.raises(VerbevalError, match=r"^AgreementCallback: keep=0: expected a positive integer$"):
        AgreementCallback(suite, steps=[4], keep=0)
    with pytest.raises(VerbevalError, match=r"^AgreementSuite.select: max_rows_per_source=-1: expected a positive"):
        AgreementCallback(suite, steps=[4], max_rows=-1)
    assert not list(tmp_path.parent.glob("x"))  # nothing written outside out_dir


def test_a_failed_write_at_a_scored_step_is_a_warning(
    suite: AgreementSuite,  # noqa: F811
    tokenizer_path: Any,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path / "model")
    model, tok = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    tok.pad_token = tok.eos_token
    out = tmp_path / "scores"
    cb = AgreementCallback(suite, steps=[2, 4], out_dir=out, model_name="toy", resamples=0)
    out.rmdir() if out.exists() else None
    out.write_text("the folder became a file")  # every write at a scored step fails
    recorder = Recorder()
    trainer = _trainer(model, tok, tmp_path / "train", [recorder])
    cb.attach(trainer)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert trainer.state.global_step == 4  # the run went on
    scored = [h["step"] for h in trainer.state.log_history if f"agreement/{GROUPS[0]}/tse" in h]
    assert scored == [2, 4]
    warnings = [r.getMessage() for r in caplog.records if "AgreementCallback" in r.getMessage()]
    assert len(warnings) == 2 and warnings[0].startswith("AgreementCallback: toy@step-2: its tables were not written (")
    assert out.read_text() == "the folder became a file"
