"""verbeval.agreement.api.callback: AgreementCallback in a real ``transformers`` Trainer (tiny GPT-2,
CPU, a few steps): its scores reach the Trainer's logging (another callback's ``on_log``), its files
hold them, and they equal :func:`verbeval.agreement.api.evaluation.evaluate` on the same model state.

The tiny model is randomly initialised and trained for a few steps: its numbers are meaningless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tiny_cache import tiny_model
from verbeval.agreement.api.callback import AgreementCallback
from verbeval.agreement.api.evaluation import evaluate
from verbeval.agreement.api.suite import AgreementSuite
from verbeval.agreement.report.checkpoint_index import read_checkpoint_index
from verbeval.agreement.scores.lemma_contexts import read_lemma_contexts
from verbeval.core.errors import VerbevalError
from verbeval.core.io import write_csv

GROUPS = ["simple", "obj_rel_within"]


@pytest.fixture(scope="module")
def suite() -> AgreementSuite:
    """A small hand-made suite: two groups, a handful of rows, a few lemmas."""
    rows = []
    for group, subjects in (("simple", ["the author", "the pilot"]), ("obj_rel_within", ["the movie that the guard"])):
        for i, subj in enumerate(subjects * 2):
            plural = bool(i % 2)
            left = subj + ("s" if plural else "")
            sing, plur = ("laughs", "laugh") if i < 2 else ("swims", "swim")
            rows.append(
                {
                    "group": group,
                    "source": f"src_{group}",
                    "line": i + 1,
                    "left": left,
                    "right": "",
                    "correct": plur if plural else sing,
                    "incorrect": sing if plural else plur,
                    "label": "plural" if plural else "singular",
                    "plural": plural,
                }
            )
    templates = pd.DataFrame(rows)
    lexicon = pd.DataFrame(
        {
            "lemma": ["laugh", "swim", "like", "run"],
            "sing": ["laughs", "swims", "likes", "runs"],
            "plur": ["laugh", "swim", "like", "run"],
            "source": "combined",
        }
    )
    groups = [{"id": g, "name": g.replace("_", " "), "sources": [f"src_{g}"]} for g in GROUPS]
    return AgreementSuite(templates, lexicon, groups, origin="test")


class Recorder:
    """Another callback: every ``on_log`` it sees, with whether the model was in train mode then."""

    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        self.logs.append({**(logs or {}), "_step": state.global_step, "_training": kw["model"].training})


def _trainer(model: Any, tok: Any, out: Path, callbacks: list[Any]) -> Any:
    import torch
    from transformers import Trainer, TrainingArguments

    texts = ["the author laughs .", "the authors laugh .", "the pilot swims .", "the pilots swim ."] * 4
    enc = tok(texts, padding="max_length", max_length=8, truncation=True, return_tensors="pt")
    data = [
        {"input_ids": i, "attention_mask": m, "labels": torch.where(m.bool(), i, -100)}
        for i, m in zip(enc["input_ids"], enc["attention_mask"])
    ]
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=100,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        dataloader_num_workers=0,
    )
    return Trainer(model=model, args=args, train_dataset=data, processing_class=tok, callbacks=callbacks)


def test_callback_logs_writes_and_equals_evaluate(
    suite: AgreementSuite, tokenizer_path: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path / "model")
    model, tok = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    tok.pad_token = tok.eos_token
    recorder = Recorder()
    out = tmp_path / "scores"
    cb = AgreementCallback(
        suite, steps=[0, 2, 4], out_dir=out, model_name="tiny", seed=1, random_init=True, resamples=50
    )
    trainer = _trainer(model, tok, tmp_path / "train", [recorder])
    cb.attach(trainer).attach(trainer)  # attached once
    assert sum(c is cb for c in trainer.callback_handler.callbacks) == 1
    trainer.train()

    scored = [entry for entry in recorder.logs if "agreement/simple/tse" in entry]
    assert [e["_step"] for e in scored] == [0, 2, 4]
    assert all(e["_training"] for e in scored[1:])  # the model went back to train mode
    assert set(scored[0]) >= {f"agreement/{g}/{m}" for g in GROUPS for m in ("tse", "ew", "mw")}
    assert [h["step"] for h in trainer.state.log_history if "agreement/simple/ew" in h] == [0, 2, 4]

    # the last step's scores equal evaluate on the trained model (its state after step 4)
    final = evaluate(model, tok, suite, name="tiny@step-4", random_init=True, resamples=50)
    last = scored[-1]
    for key, value in final.log_values().items():
        assert last[key] == pytest.approx(value, abs=0, rel=1e-12)
    pd.testing.assert_frame_equal(final.summary, cb.results[4].summary)
    assert list(cb.results) == [4]  # keep=1: only the last result in memory

    # the files: summary.csv as evaluate writes it, lemma contexts, the checkpoint index
    write_csv(final.summary, tmp_path / "expected.csv", float_format="%.10g")
    assert (out / "tiny@step-4" / "summary.csv").read_text() == (tmp_path / "expected.csv").read_text()
    lc = read_lemma_contexts(out / "tiny@step-4" / "lemma_contexts.parquet")
    pd.testing.assert_frame_equal(lc, final.lemma_contexts)
    assert set(lc["lemma"]) == set(final.lemmas["lemma"]) and len(final.lemmas) >= 2  # GPT-2: " swims" is 2 tokens
    index = read_checkpoint_index(out / "checkpoints.csv")
    assert list(index["step"]) == [0, 2, 4]
    assert list(index["model"]) == ["tiny@step-0", "tiny@step-2", "tiny@step-4"]
    assert set(index["family"]) == {"tiny"} and set(index["seed"]) == {"1"} and index["random_init"].all()
    for rel in list(index["summary"]) + list(index["lemma_contexts"]):
        assert (out / rel).is_file()
    step0 = pd.read_csv(out / "tiny@step-0" / "summary.csv")
    assert not step0.equals(pd.read_csv(out / "tiny@step-4" / "summary.csv"))  # training changed the model


def test_callback_every_and_bad_arguments(suite: AgreementSuite) -> None:
    cb = AgreementCallback(suite, every=3)
    assert [s for s in range(10) if cb.wants(s)] == [3, 6, 9]
    with pytest.raises(VerbevalError, match="either steps"):
        AgreementCallback(suite)
    with pytest.raises(VerbevalError, match="either steps"):
        AgreementCallback(suite, steps=[1], every=2)
    with pytest.raises(VerbevalError, match="cannot be negative"):
        AgreementCallback(suite, steps=[-1])
