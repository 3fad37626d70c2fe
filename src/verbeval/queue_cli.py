"""``verbeval run-queue``'s command line: each ``--job`` item parsed once into a typed step.

The queue's items are the process edge (the workflow's queue rule writes them on its shell line).
Here, in the command-line layer, each is split and parsed by ``verbeval``'s own parser (handed down by
:func:`verbeval.commands.build_parser`: this module is one of the commands it registers), then turned
into its typed record by the same conversion its command's handler uses, and bound to its step
function (:class:`verbeval.model_queue.QueueStep`). :func:`verbeval.model_queue.run_queue` runs those
values; nothing below parses a command line.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable

from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import THREADS, Option, add_options
from verbeval.model_queue import QUEUE_COMMANDS, QueueStep

#: builds ``verbeval``'s whole parser (:func:`verbeval.commands.build_parser`, handed down by it)
BuildParser = Callable[[], argparse.ArgumentParser]


def queue_step(a: argparse.Namespace) -> QueueStep:
    """A parsed queue item (``a``: the options of one of :data:`QUEUE_COMMANDS`) as its typed step."""
    from verbeval.acquisition.cli.analysis import lemma_contexts_run
    from verbeval.acquisition.runs import lemma_contexts
    from verbeval.agreement.cli.aggregate import aggregate_run, lemma_stats_run
    from verbeval.agreement.cli.data import lemmas_run
    from verbeval.agreement.runs import aggregate, lemma_stats, lemmas
    from verbeval.model_run import run_model, run_model_job

    if a.command == "lemmas":
        record = lemmas_run(a)
        return QueueStep(a.command, lemmas, record, record.source.id)
    if a.command == "run-model":
        job = run_model_job(a)
        return QueueStep(a.command, run_model, job, job.name, load=job.run.load_request())
    convert, func = {
        "aggregate": (aggregate_run, aggregate),
        "lemma-stats": (lemma_stats_run, lemma_stats),
        "lemma-contexts": (lemma_contexts_run, lemma_contexts),
    }[a.command]
    return QueueStep(a.command, func, convert(a), a.model_name)


def parse_jobs(items: list[str], build_parser: BuildParser, threads: int | None = None) -> list[QueueStep]:
    """Each ``--job`` item parsed by ``verbeval``'s own parser (``build_parser``'s), its configuration
    defaults filled in, as its typed step; ``threads`` replaces the ``--threads`` of every step that has
    one (the queue job's threads). Raises :class:`VerbevalError` naming the item for an unknown step or
    a bad option, and naming the step (as a failing step is named) for options its step rejects."""
    from verbeval.core.cliutil import with_config_defaults

    parser = build_parser()
    parsed = []
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
        parsed.append(args)
    steps = []
    for i, args in enumerate(parsed, 1):
        try:
            steps.append(queue_step(args))
        except VerbevalError as exc:
            who = getattr(args, "model_name", None) or getattr(args, "model", None) or ""
            raise VerbevalError(f"step {i} of {len(parsed)} ({f'{args.command} {who}'.strip()}): {exc}") from exc
    return steps


def cmd_run_queue(a: argparse.Namespace, build_parser: BuildParser) -> None:
    from verbeval.model_queue import run_queue

    if a.post_workers < 0:
        raise VerbevalError(f"--post-workers {a.post_workers}: expected an integer >= 0")
    if a.threads is not None and a.threads < 1:
        raise VerbevalError(f"--threads {a.threads}: expected a positive integer")
    run_queue(parse_jobs(a.job, build_parser, a.threads), post_workers=a.post_workers)


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
    add_options(
        s,
        Option(
            "--job",
            "one step: a verbeval sub-command and its options, as one shell-quoted string; repeat in order",
            required=True,
            action="append",
            metavar="COMMAND_LINE",
        ),
        THREADS.but(
            help="CPU threads of every step that takes --threads (replaces theirs: the queue job's threads, as "
            "Snakemake gives them); default: each step's own"
        ),
        Option(
            "--post-workers",
            "worker processes for the steps that read finished shards (aggregate, lemma-stats, "
            "lemma-contexts), beside the next model's forward passes; 0 runs every step in order (default: 1)",
            type=int,
            default=1,
        ),
    )
