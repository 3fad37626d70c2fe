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

This module sits above the studies (like :mod:`verbeval.cli`): it may import each of them.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from verbeval.agreement.cli.inference import (
    context_options,
    forms_extra_tokens,
    load_checked_lm,
    model_options,
    run_agreement_branch,
    shard_options,
)
from verbeval.agreement.steps import FORMS_BATCH_SIZE
from verbeval.core.cliutil import Add, check_outputs
from verbeval.simverb import cli as simverb_cli

log = logging.getLogger("verbeval")


def _forms_branch(lm: Any, a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.cli.lexicon_modes import run_forms_branch

    groups = [g for g in a.forms_groups.split(",") if g]
    templates, forms = pd.read_parquet(a.templates), pd.read_parquet(a.forms)
    run_forms_branch(lm, a, templates, forms, groups, a.forms_manifest, a.forms_batch_size)


def simverb_settings(a: argparse.Namespace) -> dict[str, Any]:
    """What the SimVerb outputs depend on besides their input files (the key of their stamp)."""
    from verbeval import __version__
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.models import model_fingerprint

    source = ModelSource.from_options(a)
    return {
        "branch": "simverb",
        "verbeval": __version__,
        "model": source.id,
        "revision": source.revision,
        "gguf_file": source.file,
        "random_init": a.random_init,
        "model_version": model_fingerprint(source),
        "dtype": a.dtype,
        "frames": a.simverb_frame or ["to {verb}"],
        "multi_token": a.simverb_multi_token,
        "batch_size": a.simverb_batch_size,
        "splits": [s.partition("=")[0] for s in a.simverb_split],
    }


def _simverb_branch(lm: Any, a: argparse.Namespace) -> None:
    from verbeval.core import stamps
    from verbeval.core.provenance import resolve_random_init
    from verbeval.simverb.vectors import score_loaded

    outputs = [a.simverb_out, a.simverb_verbs]
    inputs = [a.simverb_data] + [s.partition("=")[2] for s in a.simverb_split]
    key = stamps.branch_key(simverb_settings(a), inputs)
    if stamps.is_current(outputs, key):
        log.info("simverb %s: %s and %s are up to date (same inputs and settings): kept", a.model, *outputs)
        return
    stamps.clear_stamp(outputs)
    pairs = simverb_cli.read_pairs(a.simverb_data, a.simverb_split)
    sims, verbs = score_loaded(
        pairs,
        lm.model.base_model,
        lm.tokenizer,
        lm.device,
        model_id=a.model,
        frames=a.simverb_frame or ["to {verb}"],
        multi_token=a.simverb_multi_token,
        batch_size=a.simverb_batch_size,
        progress=not a.no_progress,
    )
    simverb_cli.write_scores(
        sims,
        verbs,
        len(pairs),
        a.model,
        a.simverb_out,
        a.simverb_verbs,
        random_init=resolve_random_init(a.model, a.random_init),
    )
    stamps.write_stamp(outputs, key)


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


def _load_checked(a: argparse.Namespace) -> Any:
    """The model, once no context of its branches is longer than it reads
    (:func:`verbeval.agreement.engine.lengths.check_context_lengths`; the form branch's longest form included)."""
    import pandas as pd

    from verbeval.agreement.engine.lengths import check_context_lengths
    from verbeval.core.model_sources.source import ModelSource

    templates = pd.read_parquet(a.templates)
    lm, _ = load_checked_lm(a, templates, [g for g in a.groups.split(",") if g])
    if a.forms_manifest:
        check_context_lengths(
            ModelSource.from_options(a),
            lm.kind,
            templates,
            [g for g in a.forms_groups.split(",") if g],
            a.prepend_bos,
            forms_extra_tokens(pd.read_parquet(a.forms)),
            tokenizer=lm.tokenizer,
            config=lm.model.config,
        )
    return lm


def _kept(a: argparse.Namespace) -> bool:
    """Whether every branch of the model is already done and its manifest was written without loading
    it (a queue's revision whose shards a stopped or rerun queue job had finished): the agreement
    store complete (:func:`verbeval.agreement.engine.inference.manifest_if_complete`), no form branch,
    and the SimVerb outputs, if any, up to date by their stamp."""
    import pandas as pd

    from verbeval.agreement.cli.inference import load_request, random_init
    from verbeval.agreement.engine.inference import manifest_if_complete
    from verbeval.core import prefetch, stamps
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.warm import frame_key

    if a.forms_manifest:
        return False
    if a.simverb_out:
        inputs = [a.simverb_data] + [s.partition("=")[2] for s in a.simverb_split]
        if not stamps.is_current([a.simverb_out, a.simverb_verbs], stamps.branch_key(simverb_settings(a), inputs)):
            return False
    random = random_init(a, warn=False)  # warned below when kept, else by the branch that runs
    body = manifest_if_complete(
        ModelSource.from_options(a),
        pd.read_parquet(a.templates),
        pd.read_parquet(a.lemmas),
        [g for g in a.groups.split(",") if g],
        a.n_chunks,
        a.manifest,
        kind=a.kind,
        dtype=a.dtype,
        device_map=a.device_map,
        top_k=a.top_k,
        prepend_bos=a.prepend_bos,
        random_init=random,
        allow_nonfinite=a.allow_nonfinite,
        templates_key=frame_key(a.templates),
    )
    if body is None:
        return False
    random_init(a)  # its warning, for a random model
    prefetch.skip(load_request(a))
    log.info("%s: all %d shards were in the store: manifest %s written, model not loaded", a.model,
             len(body["shards"]), a.manifest)  # fmt: skip
    return True


def cmd_run_model(a: argparse.Namespace) -> None:
    check_branches(a)
    check_outputs(a.manifest, a.forms_manifest, a.simverb_out, a.simverb_verbs)
    if _kept(a):
        return
    t0 = time.perf_counter()
    lm = _load_checked(a)
    load_s = time.perf_counter() - t0
    log.info("%s: model loaded in %.1f s (once for every branch)", a.model, load_s)
    branches = [
        ("agreement", lambda lm, a: run_agreement_branch(lm, a, load_s), True),
        ("multi-token forms", _forms_branch, bool(a.forms_manifest)),
        ("SimVerb-3500", _simverb_branch, bool(a.simverb_out)),
    ]
    for name, run, on in branches:
        if on:
            t1 = time.perf_counter()
            run(lm, a)
            log.info("%s: %s branch %.1f s", a.model, name, time.perf_counter() - t1)
    log.info("%s: every branch in %.1f s (load included)", a.model, time.perf_counter() - t0)


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
    g.add_argument("--forms", help="the model's forms.parquet (verbeval lexicon-forms)")
    g.add_argument("--forms-groups", help="comma-separated template groups of the form shards")
    FORMS_BATCH_SIZE.add_to(g)
    g.add_argument(
        "--forms-manifest",
        help="output: the form store's manifest.json (shards beside it); --n-chunks as for the agreement shards",
    )
    g = s.add_argument_group("SimVerb-3500 on the model's base model (as verbeval simverb-score; optional)")
    simverb_cli.score_options(g, prefix="simverb-")
