"""``verbeval run-model``: every accelerator branch of one language model from one load.

The agreement shards (``verbeval infer``), the multi-token form shards (``verbeval infer-forms``,
when ``agreement.multitoken`` is enabled) and the SimVerb-3500 layer embeddings (``verbeval
simverb-score``, when the model is a SimVerb model) each used to be a job of its own that imported
torch and loaded the model again. The rule ``infer`` now runs this one command per model: one
start-up, then each branch in turn over the same :class:`~verbeval.core.models.LoadedModel`
(docs/performance.md, "One model load per model").

Resuming is per branch: the two shard stores keep every finished shard (their journals), and the
SimVerb outputs are kept when their stamp (:mod:`verbeval.core.stamps`) shows that neither their
inputs nor their settings changed, so a job rerun for one branch recomputes only that branch.
The numbers are those of the single-branch commands: the same functions run on the same model
(SimVerb on the LM's base model, which holds the very weights ``AutoModel`` loads).

The step is a function of typed values: :func:`run_model` takes a :class:`RunModel` (the
:class:`~verbeval.core.model_runs.ModelRun`, the agreement :class:`~verbeval.agreement.runs.ShardRun`,
the optional :class:`~verbeval.agreement.runs.FormsRun` and :class:`SimVerbRun`) and the session it runs
in; the command's handler builds the record from its options once (:func:`run_model_job`), the warm
queue from each queued ``run-model``.

This module sits above the studies (like :mod:`verbeval.cli`): it may import each of them.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from verbeval.agreement.cli.inference import (
    context_options,
    model_options,
    model_run,
    shard_options,
    shard_run,
    store_run,
)
from verbeval.agreement.runs import (
    FormsRun,
    ShardRun,
    forms_extra_tokens,
    in_session,
    kept_manifest,
    load_checked_lm,
    run_forms,
    run_shards,
)
from verbeval.agreement.steps import FORMS_BATCH_SIZE, FORMS_FILE, FORMS_GROUPS, FORMS_MANIFEST
from verbeval.core.cliutil import Add, check_outputs
from verbeval.core.model_runs import ModelRun
from verbeval.core.session import Session
from verbeval.core.steps import add_options
from verbeval.simverb import cli as simverb_cli
from verbeval.simverb.steps import SIMVERB_SCORE

log = logging.getLogger("verbeval")


@dataclass(frozen=True)
class SimVerbRun:
    """The SimVerb-3500 branch of a model: its inputs (``splits``: ``NAME=PATH`` items), settings and outputs."""

    data: str
    out: str
    verbs: str
    splits: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()  #: contexts with {verb}; none: ``to {verb}``
    multi_token: str = field(default_factory=lambda: SIMVERB_SCORE.default("multi_token"))
    batch_size: int = field(default_factory=lambda: SIMVERB_SCORE.default("batch_size"))
    progress: bool = True

    @property
    def frame_list(self) -> list[str]:
        return list(self.frames) or ["to {verb}"]

    @property
    def inputs(self) -> list[str]:
        """The files its outputs depend on (the data and the split files)."""
        return [self.data] + [s.partition("=")[2] for s in self.splits]


@dataclass(frozen=True)
class RunModel:
    """``run-model``: one model (``run``), its agreement shards, and its optional form and SimVerb branches."""

    run: ModelRun
    shards: ShardRun
    forms: FormsRun | None = None
    simverb: SimVerbRun | None = None

    @property
    def name(self) -> str:
        return self.run.name


def simverb_settings(run: ModelRun, sv: SimVerbRun) -> dict[str, Any]:
    """What the SimVerb outputs depend on besides their input files (the key of their stamp)."""
    from verbeval import __version__
    from verbeval.core.models import model_fingerprint

    source = run.source
    return {
        "branch": "simverb",
        "verbeval": __version__,
        "model": source.id,
        "revision": source.revision,
        "gguf_file": source.file,
        "random_init": run.random_init,
        "model_version": model_fingerprint(source),
        "dtype": run.dtype,
        "frames": sv.frame_list,
        "multi_token": sv.multi_token,
        "batch_size": sv.batch_size,
        "splits": [s.partition("=")[0] for s in sv.splits],
    }


def _simverb_current(run: ModelRun, sv: SimVerbRun) -> tuple[bool, str]:
    """Whether the SimVerb outputs are up to date by their stamp, and their key."""
    from verbeval.core import stamps

    key = stamps.branch_key(simverb_settings(run, sv), sv.inputs)
    return stamps.is_current([sv.out, sv.verbs], key), key


def _simverb_branch(lm: Any, run: ModelRun, sv: SimVerbRun) -> None:
    from verbeval.core import stamps
    from verbeval.simverb.vectors import score_loaded

    outputs = [sv.out, sv.verbs]
    current, key = _simverb_current(run, sv)
    if current:
        log.info("simverb %s: %s and %s are up to date (same inputs and settings): kept", run.name, *outputs)
        return
    stamps.clear_stamp(outputs)
    pairs = simverb_cli.read_pairs(sv.data, list(sv.splits))
    sims, verbs = score_loaded(
        pairs,
        lm.model.base_model,
        lm.tokenizer,
        lm.device,
        model_id=run.name,
        frames=sv.frame_list,
        multi_token=sv.multi_token,
        batch_size=sv.batch_size,
        progress=sv.progress,
    )
    simverb_cli.write_scores(sims, verbs, len(pairs), run.name, sv.out, sv.verbs, random_init=run.is_random(warn=False))
    stamps.write_stamp(outputs, key)


def _load_checked(job: RunModel, session: Session) -> Any:
    """The model, once no context of its branches is longer than it reads
    (:func:`verbeval.agreement.engine.lengths.check_context_lengths`; the form branch's longest form included)."""
    import pandas as pd

    from verbeval.agreement.engine.lengths import check_context_lengths
    from verbeval.core.warm import read_parquet

    run, shards = job.run, job.shards
    with session.active():
        templates = read_parquet(shards.templates)
    lm, _ = load_checked_lm(run, templates, shards.templates, shards.groups, session)
    if job.forms is not None:
        check_context_lengths(
            run.source,
            lm.kind,
            templates,
            list(job.forms.groups),
            run.prepend_bos,
            forms_extra_tokens(pd.read_parquet(job.forms.forms)),
            tokenizer=lm.tokenizer,
            config=lm.model.config,
        )
    return lm


def _kept(job: RunModel, session: Session) -> bool:
    """Whether every branch of the model is already done and its manifest was written without loading
    it (a queue's revision whose shards a stopped or rerun queue job had finished): the agreement
    store complete (:func:`verbeval.agreement.runs.kept_manifest`), no form branch, and the SimVerb
    outputs, if any, up to date by their stamp."""
    if job.forms is not None:
        return False
    if job.simverb is not None and not _simverb_current(job.run, job.simverb)[0]:
        return False
    body = kept_manifest(job.run, job.shards, session)
    if body is None:
        return False
    job.run.is_random()  # its warning, for a random model
    session.prefetch.skip(job.run.load_request())
    log.info("%s: all %d shards were in the store: manifest %s written, model not loaded", job.name,
             len(body["shards"]), job.shards.manifest)  # fmt: skip
    return True


def run_model(job: RunModel, session: Session | None = None) -> None:
    """Every branch of one model from one load: its agreement shards, then its form shards and its
    SimVerb outputs when ``job`` has them. In a queue, ``session`` is the queue's (its caches and the
    model loaded ahead); else a fresh one."""
    check_outputs(
        job.shards.manifest,
        job.forms.manifest if job.forms else None,
        job.simverb.out if job.simverb else None,
        job.simverb.verbs if job.simverb else None,
    )
    with in_session(session) as s:
        if _kept(job, s):
            return
        t0 = time.perf_counter()
        lm = _load_checked(job, s)
        load_s = time.perf_counter() - t0
        log.info("%s: model loaded in %.1f s (once for every branch)", job.name, load_s)
        branches: list[tuple[str, Any]] = [("agreement", lambda: run_shards(lm, job.run, job.shards, s, load_s))]
        if job.forms is not None:
            forms = job.forms
            branches.append(("multi-token forms", lambda: run_forms(lm, job.run, forms)))
        if job.simverb is not None:
            sv = job.simverb
            branches.append(("SimVerb-3500", lambda: _simverb_branch(lm, job.run, sv)))
        for name, run in branches:
            t1 = time.perf_counter()
            run()
            log.info("%s: %s branch %.1f s", job.name, name, time.perf_counter() - t1)
        log.info("%s: every branch in %.1f s (load included)", job.name, time.perf_counter() - t0)
        s.prefetch.release(lm)  # done with it: the next revision's weights may go into its module


def check_branches(a: argparse.Namespace) -> None:
    """Each optional branch is given whole or not at all."""
    from verbeval.core.errors import VerbevalError

    for name, opts in (
        ("multi-token forms", ("forms", "forms_groups", "forms_manifest")),
        ("SimVerb", ("simverb_data", "simverb_out", "simverb_verbs")),
    ):
        given = [o for o in opts if getattr(a, o)]
        if given and len(given) != len(opts):
            missing = ", ".join("--" + o.replace("_", "-") for o in opts if o not in given)
            raise VerbevalError(f"the {name} branch needs {missing} as well")


def run_model_job(a: argparse.Namespace) -> RunModel:
    """``run-model``'s options as its typed step value (the command line's one conversion)."""
    check_branches(a)
    shards = shard_run(a)
    forms = simverb = None
    if a.forms_manifest:
        forms = store_run(
            FormsRun, a, a.forms, groups=a.forms_groups, manifest=a.forms_manifest, batch_size=a.forms_batch_size
        )
    if a.simverb_out:
        simverb = SimVerbRun(
            a.simverb_data,
            a.simverb_out,
            a.simverb_verbs,
            splits=tuple(a.simverb_split),
            frames=tuple(a.simverb_frame),
            multi_token=a.simverb_multi_token,
            batch_size=a.simverb_batch_size,
            progress=not a.no_progress,
        )
    return RunModel(model_run(a), shards, forms, simverb)


def cmd_run_model(a: argparse.Namespace) -> None:
    run_model(run_model_job(a))


def register(add: Add) -> None:
    """``run-model``."""
    s = add(
        "run-model",
        cmd_run_model,
        "one model, one load: its agreement shards, its multi-token form shards and its SimVerb-3500 "
        "embeddings (each branch resumes on its own)",
        "The branches are those of `verbeval infer`, `infer-forms` and `simverb-score`, with the same results; "
        "the form and SimVerb branches run when their outputs are given. Run by the rule infer, one job per "
        "model (docs/performance.md, 'One model load per model').",
    )
    model_options(s)
    context_options(s)
    shard_options(s.add_argument_group("agreement shards (as verbeval infer)"))
    g = s.add_argument_group("multi-token forms (as verbeval infer-forms; optional)")
    add_options(g, FORMS_FILE, FORMS_GROUPS, FORMS_BATCH_SIZE, FORMS_MANIFEST)
    g = s.add_argument_group("SimVerb-3500 on the model's base model (as verbeval simverb-score; optional)")
    simverb_cli.score_options(g, prefix="simverb-")
