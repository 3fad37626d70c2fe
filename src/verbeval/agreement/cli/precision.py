"""``precision-audit``: one model's ties and fragile decisions, from its aggregates and shards."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.steps import PRECISION_AUDIT
from verbeval.core.cliutil import Add

log = logging.getLogger("verbeval")


def cmd_precision_audit(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_shards
    from verbeval.agreement.scores.precision import audit_model
    from verbeval.core.io import write_csv

    groups = [g for g in a.groups.split(",") if g]
    row_tse = {}
    for g in groups:
        path = f"{a.results}/{g}/tse.parquet"
        row_tse[g] = pd.read_parquet(path)
    n_lemmas = len(pd.read_parquet(a.lemmas, columns=["lemma"]))
    shards = manifest_shards(a.shards, groups)
    rows = audit_model(a.model_name, row_tse, shards, n_lemmas, a.fragile_ulps)
    write_csv(rows, a.out, float_format="%.10g")
    log.info("%s: %d ties, %d fragile decisions -> %s", a.model_name, rows["ties"].sum(), rows["fragile"].sum(), a.out)


def register_precision_audit(add: Add) -> None:
    s = add(
        "precision-audit",
        cmd_precision_audit,
        "one model's ties and fragile decisions per group (TSE rows, per-lemma EW decisions), from its stored "
        "probabilities (no forward pass)",
        "docs/metrics.md, 'Ties and fragile decisions'. Run by the rule precision_audit.",
    )
    s.add_argument("--model-name", required=True, help="the model's name in the output")
    s.add_argument("--results", required=True, help="the model's aggregate folder (<DIR>/<group>/tse.parquet)")
    s.add_argument("--shards", required=True, help="the model's shard manifest (manifest.json)")
    s.add_argument("--lemmas", required=True, help="the model's lemmas.parquet (verbeval lemmas)")
    s.add_argument("--groups", required=True, help="comma-separated groups")
    PRECISION_AUDIT.add_options(s)
    s.add_argument("--out", required=True, help="output: precision_audit.csv")
