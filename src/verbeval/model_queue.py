"""``verbeval run-queue``: a queue of verbeval steps in one warm process.

A checkpoint sweep scores hundreds of revisions of one model, and a GPU box scores several models
on one device. Run as one command per model, each revision pays a Python start, the torch and
transformers imports and its tokenizer's work again, for a forward pass of seconds. The workflow
instead gives each (model entry, chunk of revisions), and a local GPU's queue of models, one job:
``verbeval run-queue``, with the job's steps as ``--job`` items, each one ordinary ``verbeval``
command line (``lemmas``, ``run-model``, ``aggregate``, ``lemma-stats``, ``lemma-contexts``; the same
options and the same output files, byte for byte, as when the step runs alone). The command line
(:mod:`verbeval.queue_cli`, the process edge) parses each item once into a typed step
(:class:`QueueStep`: the step's function and its typed record); this module runs those values. In one
process, one :class:`~verbeval.core.session.Session` for the whole queue:

* torch, transformers and pandas are imported once;
* what depends only on a tokenizer (eligible lemmas, the tokenizer fingerprint, each group's
  contexts, TSE ids and encoded batches) is computed once per distinct tokenizer, compared by the
  content of its files (:mod:`verbeval.core.warm`);
* the next model is loaded on a background thread while the current one computes
  (:mod:`verbeval.core.prefetch`);
* the CPU steps after a model's shards (``aggregate``, ``lemma-stats``, ``lemma-contexts``) run in
  ``--post-workers`` worker processes beside the next model's forward passes, so the last model's
  aggregation is all that follows the last forward pass. Processes, not threads: on one H200 the
  paper configuration's aggregations took 53-67 s each as threads of the GPU job (the GIL shared with
  the thread that drives the GPU), against 38-47 s as processes of their own. The workers end with
  the queue process however it ends (``kill -9`` or the OOM killer too), and work however the
  command was started (the ``verbeval`` entry point, ``python -m verbeval``, a script that calls
  ``verbeval.cli.main()`` without a main guard). A worker is sent the pickled :class:`QueueStep`
  (never a command line) and calls its function.

Every step is parsed before the first one runs (a bad item stops the queue before any work). A
failing step stops the queue with its own error, naming the step; the steps already done keep
their outputs, and each model's shard store keeps its finished shards, so a rerun resumes.
"""

from __future__ import annotations

import logging
import multiprocessing.context
import os
import sys
import time
import types
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.prefetch import LoadRequest
from verbeval.core.session import Session

log = logging.getLogger("verbeval")

#: the steps a queue may hold
QUEUE_COMMANDS = ("lemmas", "run-model", "aggregate", "lemma-stats", "lemma-contexts")
#: the steps that read a model's finished shards on the CPU: run beside the next model's forward passes
POST_COMMANDS = ("aggregate", "lemma-stats", "lemma-contexts")


@dataclass(frozen=True)
class QueueStep:
    """One step of a queue as a value: its command (``aggregate``), its function (a module-level
    function of the step's typed record and the session, e.g. :func:`verbeval.agreement.runs.aggregate`),
    its typed record, the model the logs name, and the model load it asks for (``run-model``'s). It
    pickles whole, so a post step is sent to a worker process as it is."""

    command: str
    func: Callable[[Any, Session | None], None]
    args: Any
    model: str = ""
    load: LoadRequest | None = None

    def describe(self) -> str:
        """The step as the log names it: its command and model (``run-model toy@step-32``)."""
        return f"{self.command} {self.model}".strip()

    @property
    def post(self) -> bool:
        """Whether it reads finished shards on the CPU (:data:`POST_COMMANDS`)."""
        return self.command in POST_COMMANDS


def run_queue(steps: list[QueueStep], post_workers: int = 1) -> dict[str, Any]:
    """Run ``steps`` in order, in one :class:`~verbeval.core.session.Session` (its caches; the model
    loads of the ``run-model`` steps announced to its prefetcher); the :data:`POST_COMMANDS` in
    ``post_workers`` worker processes (0: in order in this process), each sent its pickled step.
    Returns timing figures."""
    t0 = time.perf_counter()
    session = Session()
    session.prefetch.announce([s.load for s in steps if s.load is not None])
    pool = _post_pool(post_workers) if post_workers and any(s.post for s in steps) else None
    pending: list[tuple[Future[str | None], int, QueueStep]] = []
    n = len(steps)

    def check(wait: bool) -> None:
        for item in list(pending):
            fut, i, step = item
            if wait or fut.done():
                pending.remove(item)
                error = fut.result()
                if error is not None:
                    raise VerbevalError(f"step {i} of {n} ({step.describe()}): {error}")

    try:
        for i, step in enumerate(steps, 1):
            check(wait=False)
            if pool is not None and step.post:
                pending.append((pool.submit(_run_in_worker, step, i, n), i, step))
            else:
                try:
                    _run_step(step, i, n, session)
                except VerbevalError as exc:
                    raise VerbevalError(f"step {i} of {n} ({step.describe()}): {exc}") from exc
        check(wait=True)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        session.close()
    total = time.perf_counter() - t0
    models = sum(s.command == "run-model" for s in steps)
    log.info("run-queue: %d steps (%d models) in %.1f s", n, models, total)
    return {"steps": n, "models": models, "total_s": total}


def _post_pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes for the post steps: spawned (never forked from a process that may hold CUDA
    and torch's threads), each importing verbeval once and logging to this process's stderr. They
    end with this process however it ends (:func:`_end_with_parent`), and never run this process's
    ``__main__`` (:class:`_WorkerProcess`)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_WorkerContext(),
        initializer=_init_worker,
        initargs=(logging.getLogger().getEffectiveLevel(), os.getpid()),
    )


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned worker that is not told this process's ``__main__``. A spawned child imports the
    parent's main script again (as ``__mp_main__``) unless the preparation data names none
    (``multiprocessing.spawn.get_preparation_data`` reads ``__main__``'s ``__spec__`` and
    ``__file__``); a script that calls ``verbeval.cli.main()`` without a main guard would run the
    queue again in each worker, which fails while the worker starts (``BrokenProcessPool``). The
    workers run only verbeval's functions, so they need nothing from it: while the child is
    launched, ``sys.modules['__main__']`` is a stand-in with the same names but neither attribute
    (the same objects: what another thread pickles from ``__main__`` meanwhile is still found)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802  (multiprocessing's name)
        main = sys.modules["__main__"]
        stand_in = types.ModuleType("__main__")
        stand_in.__dict__.update({k: v for k, v in vars(main).items() if k not in ("__file__", "__spec__")})
        stand_in.__spec__ = None
        sys.modules["__main__"] = stand_in
        try:
            return multiprocessing.context.SpawnProcess._Popen(process_obj)
        finally:
            sys.modules["__main__"] = main


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn context, its processes :class:`_WorkerProcess`."""

    Process = _WorkerProcess


def _init_worker(level: int, parent: int) -> None:
    _end_with_parent(parent)
    from verbeval.core import npy_sort

    npy_sort.prefer_avx2_sort()  # numpy's sort kernels chosen before numpy loads, as the CLI does

    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _end_with_parent(parent: int) -> None:
    """End this worker when the queue process ``parent`` ends, however it ends (``kill -9``, the OOM
    killer, its shell killed): a worker left behind would wait forever on the pool's call queue, whose
    both ends it holds, keeping its memory and the queue's log open. SIGKILL from the kernel when the
    thread that started the worker ends (:func:`run_queue` submits, and so starts the workers, from
    the main thread, which ends only with the process), and from a thread that polls the parent's id
    (:func:`verbeval.core.parent_death.end_with_parent`). The pool's resource tracker then ends by
    itself: every holder of its pipe is gone."""
    import signal

    from verbeval.core.parent_death import end_with_parent

    end_with_parent(signal.SIGKILL, parent)


def _run_in_worker(step: QueueStep, i: int, n: int) -> str | None:
    """A post step in a worker process (sent as its pickled value), run in a session of its own; its
    error as one line (None when it succeeded). An unexpected exception propagates with its traceback."""
    try:
        _run_step(step, i, n, None)
    except VerbevalError as exc:
        return str(exc)
    except OSError as exc:
        from verbeval.core.io import describe_os_error

        return describe_os_error(exc)
    return None


def _run_step(step: QueueStep, i: int, n: int, session: Session | None) -> None:
    t = time.perf_counter()
    step.func(step.args, session)
    log.info("run-queue: step %d of %d (%s) done in %.1f s", i, n, step.describe(), time.perf_counter() - t)
