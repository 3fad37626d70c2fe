"""``verbeval run-queue``: a queue of verbeval steps in one warm process.

A checkpoint sweep scores hundreds of revisions of one model, and a GPU box scores several models
on one device. Run as one command per model, each revision pays a Python start, the torch and
transformers imports and its tokenizer's work again, for a forward pass of seconds. The workflow
instead gives each (model entry, chunk of revisions), and a local GPU's queue of models, one job:
this command, with the job's steps as ``--job`` items, each one ordinary ``verbeval`` command line
(``lemmas``, ``run-model``, ``aggregate``, ``lemma-stats``, ``lemma-contexts``; the same options
and the same output files, byte for byte, as when the step runs alone). In one process:

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
  ``verbeval.cli.main()`` without a main guard).

Every step is parsed before the first one runs (a bad item stops the queue before any work). A
failing step stops the queue with its own error, naming the step; the steps already done keep
their outputs, and each model's shard store keeps its finished shards, so a rerun resumes.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing.context
import os
import shlex
import sys
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError

log = logging.getLogger("verbeval")

#: the steps a queue may hold
QUEUE_COMMANDS = ("lemmas", "run-model", "aggregate", "lemma-stats", "lemma-contexts")
#: the steps that read a model's finished shards on the CPU: run beside the next model's forward passes
POST_COMMANDS = ("aggregate", "lemma-stats", "lemma-contexts")

#: builds ``verbeval``'s whole parser (:func:`verbeval.commands.build_parser`, handed down by it:
#: this module is one of the commands it registers)
BuildParser = Callable[[], argparse.ArgumentParser]


def parse_jobs(items: list[str], build_parser: BuildParser, threads: int | None = None) -> list[argparse.Namespace]:
    """Each ``--job`` item parsed by ``verbeval``'s own parser (``build_parser``'s), its configuration
    defaults filled in; ``threads`` replaces the ``--threads`` of every step that has one (the queue
    job's threads). Raises :class:`VerbevalError` naming the item for an unknown step or a bad option."""
    from verbeval.core.cliutil import with_config_defaults

    parser = build_parser()
    jobs = []
    for i, item in enumerate(items, 1):
        try:
            words = shlex.split(item)
        except ValueError as exc:
            raise VerbevalError(f"--job {i}: cannot split {item[:80]!r}: {exc}") from None
        if not words or words[0] not in QUEUE_COMMANDS:
            got = words[0] if words else "nothing"
            raise VerbevalError(f"--job {i}: {got!r} is not a queue step (one of: {', '.join(QUEUE_COMMANDS)})")
        try:
            args = parser.parse_args(words)
        except SystemExit:  # argparse printed the reason
            raise VerbevalError(f"--job {i}: bad options for `verbeval {words[0]}` (see above)") from None
        args = with_config_defaults(args)
        if threads is not None and hasattr(args, "threads"):
            args.threads = threads
            words = [*words, "--threads", str(threads)]  # a worker parses the step again: the same threads
        args.queue_words = words
        jobs.append(args)
    return jobs


def describe(args: argparse.Namespace) -> str:
    """A step as the log names it: its command and model (``run-model toy@step-32``)."""
    who = getattr(args, "model_name", None) or getattr(args, "model", None) or ""
    return f"{args.command} {who}".strip()


def run_queue(jobs: list[argparse.Namespace], build_parser: BuildParser, post_workers: int = 1) -> dict[str, Any]:
    """Run the steps of :func:`parse_jobs` in order; the :data:`POST_COMMANDS` in ``post_workers``
    worker processes (0: in order in this process), which parse their step again from its command
    line (``queue_words``) with ``build_parser``'s parser. Returns timing figures."""
    from verbeval.agreement.cli.inference import load_request
    from verbeval.core import prefetch

    t0 = time.perf_counter()
    prefetch.announce([load_request(a) for a in jobs if a.command == "run-model"])
    pool = _post_pool(post_workers) if post_workers and any(a.command in POST_COMMANDS for a in jobs) else None
    pending: list[tuple[Future[str | None], int, argparse.Namespace]] = []
    n = len(jobs)

    def check(wait: bool) -> None:
        for item in list(pending):
            fut, i, args = item
            if wait or fut.done():
                pending.remove(item)
                error = fut.result()
                if error is not None:
                    raise VerbevalError(f"step {i} of {n} ({describe(args)}): {error}")

    try:
        for i, args in enumerate(jobs, 1):
            check(wait=False)
            if pool is not None and args.command in POST_COMMANDS:
                pending.append((pool.submit(_run_words, args.queue_words, i, n, build_parser), i, args))
            else:
                try:
                    _run_step(args, i, n)
                except VerbevalError as exc:
                    raise VerbevalError(f"step {i} of {n} ({describe(args)}): {exc}") from exc
        check(wait=True)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        prefetch.reset()
    total = time.perf_counter() - t0
    models = sum(a.command == "run-model" for a in jobs)
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
    killer): a worker left behind would wait forever on the pool's call queue, whose both ends it
    holds, keeping its memory and the queue's log open. On Linux the kernel sends SIGKILL when the
    thread that started the worker ends (``PR_SET_PDEATHSIG``; :func:`run_queue` submits, and so
    starts the workers, from the main thread, which ends only with the process); everywhere a daemon
    thread ends the worker within half a second of its parent's death (its parent id changes). The
    pool's resource tracker then ends by itself: every holder of its pipe is gone."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        from verbeval.core.model_sources.pip_package import _PR_SET_PDEATHSIG

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl: the thread below
            pass
    if os.getppid() != parent:  # the parent died before the call: nobody sends the signal
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="verbeval-parent-watch", daemon=True).start()


def _run_words(words: list[str], i: int, n: int, build_parser: BuildParser) -> str | None:
    """A post step in a worker process: parsed again from its command line, run; its error as one
    line (None when it succeeded). An unexpected exception propagates with its traceback."""
    [args] = parse_jobs([shlex.join(words)], build_parser)
    try:
        _run_step(args, i, n)
    except VerbevalError as exc:
        return str(exc)
    except OSError as exc:
        from verbeval.core.io import describe_os_error

        return describe_os_error(exc)
    return None


def _run_step(args: argparse.Namespace, i: int, n: int) -> None:
    t = time.perf_counter()
    args.func(args)
    log.info("run-queue: step %d of %d (%s) done in %.1f s", i, n, describe(args), time.perf_counter() - t)


def cmd_run_queue(a: argparse.Namespace, build_parser: BuildParser) -> None:
    if a.post_workers < 0:
        raise VerbevalError(f"--post-workers {a.post_workers}: expected an integer >= 0")
    if a.threads is not None and a.threads < 1:
        raise VerbevalError(f"--threads {a.threads}: expected a positive integer")
    run_queue(parse_jobs(a.job, build_parser, a.threads), build_parser, post_workers=a.post_workers)


def register(add: Add, build_parser: BuildParser) -> None:
    """``run-queue``; ``build_parser`` builds the whole parser that its steps are parsed with."""
    s = add(
        "run-queue",
        lambda a: cmd_run_queue(a, build_parser),
        "a queue of steps (a sweep's revisions, a device's models) in one warm process: one import, "
        "tokenizer work once per tokenizer, the next model loaded while the current one computes",
        "Each --job is one verbeval command line (lemmas, run-model, aggregate, lemma-stats, lemma-contexts), "
        "with the outputs it has when run alone. Run by the workflow's queue jobs, one per (model entry, chunk "
        "of revisions) and one per local GPU (docs/workflow.md, 'Sweeps and queues').",
    )
    s.add_argument(
        "--job",
        action="append",
        required=True,
        metavar="COMMAND_LINE",
        help="one step: a verbeval sub-command and its options, as one shell-quoted string; repeat in order",
    )
    s.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads of every step that takes --threads (replaces theirs: the queue job's threads, as "
        "Snakemake gives them); default: each step's own",
    )
    s.add_argument(
        "--post-workers",
        type=int,
        default=1,
        help="worker processes for the steps that read finished shards (aggregate, lemma-stats, "
        "lemma-contexts), beside the next model's forward passes; 0 runs every step in order (default: 1)",
    )
