"""``precision-audit``: the ties and fragile decisions of a run's models, from their aggregates and
shards (one job for every model: the workflow's DAG does not grow with a sweep's revisions)."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.cli.common import verified_shards
from verbeval.agreement.engine.shardstore import manifest_meta
from verbeval.agreement.steps import PRECISION_AUDIT
from verbeval.core.cliutil import Add, split_pair
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import GROUPS, MODEL_NAME, Option, add_options

log = logging.getLogger("verbeval")

#: ``comparison.csv``'s ``kind`` for a tf32 run whose matrix products were float32 (its shards' ``matmul``:
#: run on a CPU) against a float32 run: the flip set of two float32 runs, not a finding about TF32
TF32_ON_CPU = "tf32 on CPU = float32"


def cmd_precision_audit(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shards import check_lemma_set
    from verbeval.agreement.engine.shardstore import listed_shards
    from verbeval.agreement.report.comparisons import read_random_init
    from verbeval.agreement.scores.chunk_scores import read_chunk_audit
    from verbeval.agreement.scores.precision import AUDIT_COLUMNS, audit_model
    from verbeval.core.errors import InputError
    from verbeval.core.io import write_csv

    named = {
        opt: dict(split_pair(x, f"--{opt}", "PATH") for x in getattr(a, opt)) for opt in ("results", "shards", "lemmas")
    }
    models = list(named["results"])
    for opt in ("shards", "lemmas"):
        if set(named[opt]) != set(models):
            raise VerbevalError(f"--{opt} must name the models of --results ({', '.join(models)})")
    groups = [g for g in a.groups.split(",") if g]
    frames = []
    for m in models:
        row_tse = {}
        for g in groups:
            path = f"{named['results'][m]}/{g}/tse.parquet"
            try:
                row_tse[g] = pd.read_parquet(path)
            except (OSError, ValueError) as e:
                raise InputError(
                    path, f"not readable ({str(e).splitlines()[0]}): run `verbeval aggregate` first"
                ) from None
        n_lemmas = check_lemma_set(named["shards"][m], named["lemmas"][m])
        shards = verified_shards(named["shards"][m], groups, a.keep_bad_shards)
        # each shard's EW decisions as its forward job counted them (else audit_model reads the shard)
        listed = listed_shards(named["shards"][m], groups)
        counted = {str(s.path): c for s in listed if (c := read_chunk_audit(s, a.fragile_ulps))}
        frames.append(
            audit_model(
                m, row_tse, shards, n_lemmas, a.fragile_ulps, random_init=read_random_init(named["results"][m], groups),
                counted=counted,
            )
        )  # fmt: skip
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(AUDIT_COLUMNS))
    write_csv(rows, a.out, float_format="%.10g")
    log.info(
        "%d models: %d ties, %d fragile decisions -> %s", len(models), rows["ties"].sum(), rows["fragile"].sum(), a.out
    )


def register_precision_audit(add: Add) -> None:
    s = add(
        "precision-audit",
        cmd_precision_audit,
        "the ties and fragile decisions of each model per group (TSE rows, per-lemma EW decisions), from its "
        "stored probabilities (no forward pass)",
        "docs/metrics.md, 'Ties and fragile decisions'. Run by the rule precision_audit.",
    )
    add_options(s, *PRECISION_AUDIT.inputs, GROUPS, *PRECISION_AUDIT.settings)
    _keep_bad_shards(s)
    add_options(s, PRECISION_AUDIT.file("--out"))


def cmd_flip_set(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shards import check_lemma_set
    from verbeval.agreement.report.comparisons import read_random_init, read_results, with_flags
    from verbeval.agreement.scores.paired import compare_groups
    from verbeval.agreement.scores.precision import flip_set
    from verbeval.agreement.steps import BOOTSTRAP
    from verbeval.core.bootstrap import warn_few_resamples
    from verbeval.core.io import write_csv

    groups = [g for g in a.groups.split(",") if g]
    check_dtype_runs(a.reference_shards, a.other_shards, a.dtype)
    # a tf32 run on a CPU against float32 (either side): two float32 runs
    as_float32 = {_computed_in(manifest_meta(m)) for m in (a.reference_shards, a.other_shards)} == {"float32"}
    tse, scores, shards = {}, {}, {}
    for side, results, manifest in (
        ("reference", a.reference_results, a.reference_shards),
        ("other", a.other_results, a.other_shards),
    ):
        check_lemma_set(manifest, a.lemmas)
        tse[side], scores[side] = read_results(results, groups, full_tse=True)
        shards[side] = verified_shards(manifest, groups, a.keep_bad_shards)
    lemmas = pd.read_parquet(a.lemmas, columns=["lemma"])["lemma"].tolist()
    flips = flip_set((tse["reference"], shards["reference"]), (tse["other"], shards["other"]), lemmas)
    flips.insert(0, "model", a.model_name)
    random_init = read_random_init(a.reference_results, groups)
    flips.insert(1, "random_init", random_init)
    flips.insert(2, "dtype", a.dtype)
    write_csv(flips, a.flips, float_format="%.10g")
    other = f"{a.model_name}@{a.dtype}"
    warn_few_resamples(a.resamples, a.confidence, len(groups), BOOTSTRAP[0].key)  # the groups' corrected intervals
    moves = compare_groups(
        a.model_name,
        other,
        {g: (tse["reference"][g], tse["other"][g]) for g in groups},
        {g: (scores["reference"][g], scores["other"][g]) for g in groups},
        resamples=a.resamples,
        seed=a.seed,
        confidence=a.confidence,
    )
    kind = TF32_ON_CPU if as_float32 else "dtype"
    write_csv(with_flags(moves, kind, [a.model_name, other] if random_init else []), a.comparison, float_format="%.10g")
    if as_float32:
        log.warning(
            "%s in %s: %s (both runs' matrix products were float32): %d decisions flipped, no finding about TF32 -> %s",
            a.model_name, a.dtype, TF32_ON_CPU, len(flips), a.flips,
        )  # fmt: skip
    else:
        log.info("%s in %s: %d decisions flipped -> %s", a.model_name, a.dtype, len(flips), a.flips)


def _computed_in(meta: dict[str, object]) -> object:
    """The precision a run's matrix products had: its shards' ``matmul`` (a tf32 run), else its dtype."""
    return meta.get("matmul", meta.get("dtype"))


def check_dtype_runs(reference: str, other: str, dtype: str) -> None:
    """That the two shard manifests of ``flip-set`` are one model (``model_id``, ``revision``), the
    ``other`` in ``dtype`` and the ``reference`` in another dtype."""
    from verbeval.core.errors import MismatchError

    ref, oth = manifest_meta(reference), manifest_meta(other)
    for key in ("model_id", "revision"):
        if ref.get(key) != oth.get(key):
            raise MismatchError(
                f"{other}: {key} {oth.get(key)!r}, but the reference run {reference} has {ref.get(key)!r}: "
                "a flip set compares one model in two dtypes"
            )
    if oth.get("dtype") != dtype:
        raise MismatchError(f"{other}: shards in {oth.get('dtype')}, not --dtype {dtype}")
    if ref.get("dtype") == dtype:
        raise MismatchError(f"{reference}: the reference run is in {dtype} too: a flip set compares two dtypes")


def _keep_bad_shards(s: argparse.ArgumentParser) -> None:
    add_options(
        s,
        Option(
            "--keep-bad-shards",
            "leave a damaged shard in place (default: move it to <name>.corrupt and remove its manifest, "
            "so a rerun recomputes it)",
            action="store_true",
        ),
    )


def register_flip_set(add: Add) -> None:
    from verbeval.agreement.steps import FLIP_SET

    s = add(
        "flip-set",
        cmd_flip_set,
        "the decisions a run of a model in another dtype decides the other way (TSE rows, per-lemma EW), and how "
        "far TSE, EW and MW move per group (a paired comparison)",
        "docs/metrics.md, 'Ties and fragile decisions'. Run by the rule flip_set (agreement.precision_audit.dtypes).",
    )
    add_options(
        s,
        MODEL_NAME.but(help="the model's name"),
        Option("--dtype", "the other run's dtype (its name in the outputs)", required=True),
    )
    add_options(s, *FLIP_SET.inputs, GROUPS, *FLIP_SET.settings)
    _keep_bad_shards(s)
    add_options(s, *FLIP_SET.outputs)
