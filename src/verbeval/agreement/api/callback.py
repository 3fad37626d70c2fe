"""A ``transformers`` training callback that scores agreement while a model trains.

:class:`AgreementCallback` calls :func:`verbeval.agreement.api.evaluation.evaluate` at chosen training
steps, hands TSE, EW and MW (top p = 1) of every group to the Trainer's own logging
(``Trainer.log``: the console, ``log_history`` and every ``report_to`` logger), and, with an output
folder, writes the per-step tables the acquisition analysis reads: ``<out>/<model>@step-<N>/``
(``summary.csv``, ``lemma_contexts.parquet``, ``table2.csv``) and the index ``<out>/checkpoints.csv``
(:func:`verbeval.agreement.report.checkpoint_index.add_checkpoint`), rewritten atomically after each step.

A ``TrainerCallback`` is not handed the Trainer, so the callback is attached to it:
``AgreementCallback(...).attach(trainer)`` adds it to the trainer's callbacks and lets it call
``trainer.log``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from verbeval.agreement.api.evaluation import AgreementResult, evaluate
from verbeval.agreement.api.suite import AgreementSuite
from verbeval.agreement.report.checkpoint_index import add_checkpoint
from verbeval.core import api_args as args
from verbeval.core.errors import VerbevalError
from verbeval.core.io import describe_os_error, write_problem

log = logging.getLogger(__name__)

__all__ = ["AgreementCallback"]


class AgreementCallback(TrainerCallback):  # type: ignore[misc]
    """Score agreement at ``steps`` (training steps; 0 scores the model before the first step) or
    every ``every`` steps, on ``suite`` narrowed to ``groups`` and ``max_rows`` rows per source.

    ``model_name``: the run's name; each scored step is the model ``<model_name>@step-<N>`` in the
    tables. ``family`` (default: ``model_name``) and ``seed`` (default: none) go into the
    checkpoint index, where runs sharing a family are seeds of one model. ``random_init``: mark the
    numbers as a toy or randomly initialised model's. ``out_dir``: where the per-step tables and
    ``checkpoints.csv`` go (default: nothing written). ``tokenizer``: default, the Trainer's
    ``processing_class``. ``prefix``: the logged names are ``<prefix>/<group>/<tse|ew|mw>``. Further
    keyword arguments go to :func:`~verbeval.agreement.api.evaluation.evaluate` (``batch_size``,
    ``resamples``, ...). Only the main process scores. ``results`` holds the
    :class:`~verbeval.agreement.api.evaluation.AgreementResult` of the last ``keep`` (>= 1) scored steps.
    """

    def __init__(
        self,
        suite: AgreementSuite,
        *,
        steps: Iterable[int] | None = None,
        every: int | None = None,
        out_dir: str | Path | None = None,
        groups: list[str] | None = None,
        max_rows: int | None = None,
        model_name: str = "model",
        family: str | None = None,
        seed: str | int | None = None,
        random_init: bool = False,
        tokenizer: Any = None,
        prefix: str = "agreement",
        keep: int = 1,
        **evaluate_kwargs: Any,
    ) -> None:
        if (steps is None) == (every is None):
            raise VerbevalError("AgreementCallback: give either steps=[...] or every=N")
        if every is not None and every < 1:
            raise VerbevalError(f"AgreementCallback: every={every}: expected a positive number of steps")
        self.steps = None if steps is None else sorted({int(s) for s in steps})
        if self.steps is not None and any(s < 0 for s in self.steps):
            raise VerbevalError(f"AgreementCallback: steps {self.steps}: a step cannot be negative")
        self.every = every
        self.suite = suite.select(groups, max_rows)
        self.model_name = args.plain_name("AgreementCallback", "model_name", model_name)
        self.keep = args.positive_int("AgreementCallback", "keep", keep)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if self.out_dir is not None:  # before any training: not at the first scored step
            problem = write_problem(self.out_dir)
            if problem is not None:
                raise VerbevalError(f"AgreementCallback: out_dir {self.out_dir}: cannot write there: {problem[1]}")
        self.family = family or model_name
        self.seed = "" if seed is None else str(seed)
        self.random_init = random_init
        self.tokenizer = tokenizer
        self.prefix = prefix
        self.evaluate_kwargs = evaluate_kwargs
        self.results: dict[int, AgreementResult] = {}
        self._trainer: Any = None
        self._warned = False
        self._done: set[int] = set()

    def attach(self, trainer: Any) -> AgreementCallback:
        """Add this callback to ``trainer`` (once) and log through its ``log``; returns the callback."""
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self._trainer = trainer
        return self

    def wants(self, step: int) -> bool:
        """Whether ``step`` is a step to score."""
        if self.steps is not None:
            return step in self.steps
        return step > 0 and step % int(self.every) == 0  # type: ignore[arg-type]

    # ------------------------------------------------------------------ TrainerCallback events

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == 0 and self.wants(0):
            self._score(state, kwargs)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.wants(state.global_step) and state.global_step not in self._done:
            self._score(state, kwargs)

    # ------------------------------------------------------------------ scoring

    def _score(self, state: Any, kwargs: dict[str, Any]) -> None:
        if not state.is_world_process_zero:
            return
        step = int(state.global_step)
        tokenizer = self.tokenizer if self.tokenizer is not None else kwargs.get("processing_class")
        if tokenizer is None:
            raise VerbevalError("AgreementCallback: no tokenizer (pass tokenizer=, or the Trainer's processing_class)")
        name = f"{self.model_name}@step-{step}"
        result = evaluate(
            kwargs["model"], tokenizer, self.suite, name=name, random_init=self.random_init, **self.evaluate_kwargs
        )
        self._done.add(step)
        self.results[step] = result
        while len(self.results) > self.keep:
            del self.results[min(self.results)]
        values = result.log_values(self.prefix)
        if self._trainer is not None:
            self._trainer.log(dict(values))
        else:
            state.log_history.append({**values, "step": step})
            if not self._warned:
                log.warning(
                    "AgreementCallback is not attached to a Trainer (callback.attach(trainer)): its scores "
                    "go to state.log_history only, not to the Trainer's loggers"
                )
                self._warned = True
        if self.out_dir is not None:  # after the scores are logged; a failure to write does not stop training
            try:
                self._write(result, step)
            except (OSError, VerbevalError) as exc:
                reason = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
                log.warning("AgreementCallback: %s: its tables were not written (%s); training goes on", name, reason)
        log.info("%s: agreement scored in %.2f s", name, result.seconds)

    def _write(self, result: AgreementResult, step: int) -> None:
        assert self.out_dir is not None
        result.to_files(self.out_dir / result.model)
        row = {
            "model": result.model,
            "family": self.family,
            "seed": self.seed,
            "step": step,
            "random_init": result.random_init,
            "summary": f"{result.model}/summary.csv",
            "lemma_contexts": f"{result.model}/lemma_contexts.parquet",
        }
        add_checkpoint(self.out_dir / "checkpoints.csv", row)
