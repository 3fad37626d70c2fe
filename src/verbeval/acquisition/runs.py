"""The acquisition study's queue step as a function of a typed value: ``lemma-contexts``
(:class:`LemmaContextsRun`), called by its command's handler and by the warm queue."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from verbeval.core.cliutil import check_outputs

log = logging.getLogger("verbeval")


@dataclass(frozen=True)
class LemmaContextsRun:
    """``lemma-contexts``: per (group, lemma) the contexts where one model prefers the correct form."""

    lemmas: str
    shards: tuple[str, ...]
    model_name: str
    out: str
    toy: bool = False


def lemma_contexts(run: LemmaContextsRun, session: Any = None) -> None:
    """lemma_contexts.parquet of ``run`` (``session``: unused, a queue step's signature)."""
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_random_init
    from verbeval.agreement.runs import expand_shards
    from verbeval.agreement.scores.lemma_contexts import forms_of, lemma_contexts_from_shards, write_lemma_contexts

    check_outputs(run.out)
    lemmas = pd.read_parquet(run.lemmas)
    random_init = any(manifest_random_init(p) for p in run.shards if p.endswith(".json"))
    table = lemma_contexts_from_shards(expand_shards(list(run.shards)), lemmas)
    meta = {"model": run.model_name, "random_init": random_init, "toy": bool(run.toy), "forms": forms_of(lemmas)}
    write_lemma_contexts(table, run.out, meta)
    log.info(
        "%s: %d groups x %d lemmas, %d contexts -> %s",
        run.model_name,
        table["group"].nunique(),
        table["lemma"].nunique(),
        int(table.groupby("group")["n_contexts"].first().sum()) if len(table) else 0,
        run.out,
    )
