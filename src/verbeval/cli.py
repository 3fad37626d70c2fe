"""The ``verbeval`` command line: one sub-command per workflow step.

Every Snakemake rule (and DVC stage) calls exactly one of these with explicit input and output
paths, so any step can also be run by hand. Errors in the input print one line and exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import VerbevalError
from .models import TINY_ARCHS

log = logging.getLogger("verbeval")


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from exc


def _positive_int(text: str) -> int:
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")


#: defaults of plot-cutoffs' --min-contexts / --low-n: verbeval.figures.DEFAULT_MIN_CONTEXTS and
#: LOW_N_MODES (repeated here so that the CLI starts without importing pandas; a test ties them)
MIN_CONTEXTS_DEFAULT = 10
LOW_N_CHOICES = ("fade", "hide")


def _optional_bool(text: str) -> bool | None:
    t = text.lower()
    if t in ("auto", "none", "null", ""):
        return None
    if t in ("true", "yes", "1"):
        return True
    if t in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true, false or auto, got {text!r}")


def _check_outputs(*paths: str | None) -> None:
    """Pre-flight, before a model is loaded: every output's directory can be written to."""
    from .io import check_writable

    check_writable(*paths)


# --------------------------------------------------------------------------- commands


#: a data mirror for `verbeval fetch` without --mirror (how `dvc repro` of dvc.yaml uses one)
MIRROR_ENV = "VERBEVAL_DATA_MIRROR"


def cmd_fetch(a: argparse.Namespace) -> None:
    from .fetch import fetch_source, load_manifest

    manifest = load_manifest(a.manifest)
    if a.name not in manifest:
        raise VerbevalError(f"{a.manifest}: no source named {a.name!r}")
    mirror = a.mirror or os.environ.get(MIRROR_ENV) or None
    path = fetch_source(manifest[a.name], Path(a.out), Path(mirror) if mirror else None)
    log.info("fetched %s -> %s", a.name, path)


def cmd_mirror(a: argparse.Namespace) -> None:
    from .fetch import build_mirror, load_manifest

    manifest = load_manifest(a.manifest)
    names = a.sources or list(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        raise VerbevalError(f"{a.manifest}: no source named {', '.join(map(repr, unknown))}")
    results = build_mirror((manifest[n] for n in names), Path(a.out), timeout=a.timeout)
    for r in results:
        log.info("%-8s %s -> %s%s", r.status, r.name, r.path, f": {r.detail}" if r.detail else "")
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        raise VerbevalError(f"{len(failed)} of {len(results)} sources not mirrored ({', '.join(failed)}); "
                            "the others are in place, rerun to retry the failed ones")
    log.info("mirror %s: %d sources; use it with: snakemake ... --config data_mirror=%s", a.out, len(results), a.out)


def _split_pair(item: str, option: str, what: str = "VALUE") -> tuple[str, str]:
    """One ``NAME=VALUE`` argument of ``option`` -> (name, value); both must be non-empty."""
    name, sep, value = item.partition("=")
    if not sep or not name or not value:
        raise VerbevalError(f"{option} {item!r}: expected NAME={what}")
    return name, value


def _manifest_inputs(manifest_path: str, items: Sequence[str]) -> dict[str, tuple[Path, str]]:
    """``NAME=PATH`` arguments -> {name: (path, format)}, checked against the manifest."""
    from .fetch import load_manifest

    manifest = load_manifest(manifest_path)
    inputs: dict[str, tuple[Path, str]] = {}
    for item in items:
        name, path = _split_pair(item, "--input", "PATH")
        if name not in manifest:
            raise VerbevalError(f"--input {item!r}: {name!r} is not in {manifest_path}")
        inputs[name] = (Path(path), manifest[name].format)
    return inputs


def cmd_lexicon(a: argparse.Namespace) -> None:
    from .fetch import read_giant_verb_list
    from .io import write_parquet
    from .lexicon import build_lexicon

    verb_csvs: list[Path] = []
    giant: list[str] = []
    for name, (path, fmt) in _manifest_inputs(a.manifest, a.input).items():
        if fmt == "verb_csv":
            verb_csvs.append(path)
        elif fmt == "giant_verb_list":
            giant.extend(read_giant_verb_list(path))
        else:
            raise VerbevalError(f"--input {name}: format {fmt!r} is not a verb list (verb_csv or giant_verb_list)")
    if not verb_csvs and not giant:
        raise VerbevalError("no verb list given (--input NAME=PATH)")
    if len(verb_csvs) > 1:
        raise VerbevalError(f"at most one verb_csv list is supported, got {len(verb_csvs)}")
    lex = build_lexicon(verb_csvs[0] if verb_csvs else None, giant or None, Path(a.overrides) if a.overrides else None)
    write_parquet(lex, a.out)
    counts = lex["source"].value_counts().to_dict()
    log.info("lexicon: %d lemmas (%s) -> %s", len(lex), ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), a.out)


def _custom_entries(a: argparse.Namespace) -> list[dict[str, str]]:
    """``--custom-group ID=PATH`` (+ ``--custom-name/-sha256/-format ID=VALUE``) -> config-like entries."""
    entries: dict[str, dict[str, str]] = {}
    for item in a.custom_group:
        gid, path = _split_pair(item, "--custom-group", "PATH")
        if gid in entries:
            raise VerbevalError(f"--custom-group {item!r}: {gid!r} is given twice")
        entries[gid] = {"id": gid, "path": path}
    for option, key, items in (("--custom-name", "name", a.custom_name), ("--custom-sha256", "sha256", a.custom_sha256),
                               ("--custom-format", "format", a.custom_format)):
        for item in items:
            gid, value = _split_pair(item, option)
            if gid not in entries:
                raise VerbevalError(f"{option} {item!r}: no --custom-group {gid}=PATH")
            entries[gid][key] = value
    return list(entries.values())


def cmd_templates(a: argparse.Namespace) -> None:
    from .io import write_csv, write_parquet
    from .templates import build_template_table, custom_groups, load_errata, load_groups, run_groups, write_groups

    all_groups = groups = load_groups(a.groups_file)
    if a.groups is not None:
        wanted = [x for x in a.groups.split(",") if x]
        unknown = sorted(set(wanted) - {g["id"] for g in groups})
        if unknown:
            raise VerbevalError(f"unknown agreement group(s) {unknown}; known: {[g['id'] for g in groups]}")
        groups = [g for g in groups if g["id"] in wanted]
    custom = custom_groups(_custom_entries(a), all_groups)
    inputs = _manifest_inputs(a.manifest, a.input)
    errata = load_errata(a.errata) if a.errata else None
    table, rejects = build_template_table(inputs, groups, a.skip_bad_rows, a.max_rows_per_source, errata,
                                          a.drop_flagged_errata, custom)
    write_parquet(table, a.out)
    write_csv(rejects, a.rejects)
    if a.groups_out:
        write_groups(a.groups_out, run_groups(groups, custom))
    for gid, n in table.groupby("group", sort=False).size().items():
        log.info("group %s: %d rows", gid, n)
    log.info("templates: %d rows, %d rejected -> %s", len(table), len(rejects), a.out)


def cmd_lemmas(a: argparse.Namespace) -> None:
    _check_outputs(a.out)
    import pandas as pd

    from .eligibility import eligible_lemmas
    from .io import write_parquet
    from .models import load_tokenizer

    tok = load_tokenizer(a.model, a.revision)
    lex = pd.read_parquet(a.lexicon)
    elig = eligible_lemmas(lex, tok)
    write_parquet(elig, a.out)
    log.info("%s: %d of %d lemmas eligible (both forms single tokens) -> %s", a.model, len(elig), len(lex), a.out)


def _load_lm(a: argparse.Namespace) -> Any:
    """Load the model of an inference command (``--model --revision --kind --dtype --device --device-map
    --threads``)."""
    import torch

    from .models import load_model

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return load_model(a.model, revision=a.revision, kind=a.kind, dtype=a.dtype, device=a.device,
                      device_map=a.device_map)


def _batch_size(value: str, lm: Any, cuda_default: int = 512, cpu_default: int = 64) -> int:
    """``--batch-size``: a number, or ``auto`` (512 on CUDA, where large batches keep the GPU busy;
    64 on CPU). Out-of-memory batches are halved either way."""
    if value != "auto":
        return int(value)
    return cuda_default if lm.device.type == "cuda" else cpu_default


def _device_map_arg(text: str) -> Any:
    from .models import parse_device_map

    try:
        return parse_device_map(text)
    except VerbevalError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--device-map: ")) from None


def _batch_arg(text: str) -> str:
    if text == "auto" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")


def _quarantined(exc: Any, keep: bool) -> VerbevalError:
    """The error to raise for an unusable shard; unless ``keep``, the file is moved aside first
    (``<name>.corrupt``) so that the next run recomputes it."""
    from .aggregate import quarantine

    if not keep and Path(exc.path).exists():
        moved = quarantine(exc.path)
        return VerbevalError(f"{exc}; moved it to {moved}: rerun the workflow to recompute it")
    return VerbevalError(f"{exc}: rerun the workflow to recompute it")


def _expand_shards(items: Sequence[str], keep_bad: bool = False) -> list[str]:
    """Shard paths from shard files and shard-store manifests (``manifest.json``: every shard it
    lists, each checked against the size and sha256 recorded there)."""
    from .errors import ShardError
    from .shardstore import manifest_shards

    out: list[str] = []
    for item in items:
        if not item.endswith(".json"):
            out.append(item)
            continue
        try:
            out += [str(p) for paths in manifest_shards(item).values() for p in paths]
        except ShardError as exc:
            raise _quarantined(exc, keep_bad) from None
    return out


def cmd_infer(a: argparse.Namespace) -> None:
    import pandas as pd

    from .inference import infer_model

    _check_outputs(a.manifest)
    t0 = time.perf_counter()
    lm = _load_lm(a)
    load_s = time.perf_counter() - t0
    templates = pd.read_parquet(a.templates)
    lemmas = pd.read_parquet(a.lemmas)
    groups = [g for g in a.groups.split(",") if g]
    body = infer_model(lm, templates, lemmas, groups, a.n_chunks, a.manifest, batch_size=_batch_size(a.batch_size, lm),
                       top_k=a.top_k, prepend_bos=a.prepend_bos, progress=not a.no_progress)
    t = body["timing"]
    log.info("%s: %d shards -> %s; model load %.1f s, %d contexts computed in %.1f s (%.1f contexts/s), "
             "writer busy %.1f s, total %.1f s", a.model, len(body["shards"]), a.manifest, load_s, t["contexts"],
             t["compute_s"], t["contexts_per_s"], t["writer_busy_s"], t["total_s"])


def cmd_aggregate(a: argparse.Namespace) -> None:
    import pandas as pd

    from .aggregate import context_scores, read_shards, row_tse, summarise
    from .errors import ShardError
    from .io import write_csv, write_parquet
    from .shardstore import manifest_shards

    groups = [g for g in a.groups.split(",") if g]
    out = Path(a.out_dir)
    _check_outputs(*[str(out / g / "summary.csv") for g in groups])
    try:
        by_group = manifest_shards(a.manifest, groups)
    except ShardError as exc:
        raise _quarantined(exc, a.keep_bad_shards) from None
    templates = pd.read_parquet(a.templates)
    for group in groups:
        try:
            shards = read_shards(by_group[group])
        except ShardError as exc:
            raise _quarantined(exc, a.keep_bad_shards) from None
        if shards.meta["group"] != group:
            raise VerbevalError(f"shards are for group {shards.meta['group']!r}, not {group!r}")
        g = templates[templates["group"] == group].reset_index(drop=True)
        scores = context_scores(shards, a.top_cutoffs, a.bottom_cutoffs)
        tse = row_tse(shards, g)
        summary = summarise(scores, tse, model=a.model_name, group=group, resamples=a.resamples, seed=a.seed,
                            confidence=a.confidence)
        write_parquet(scores, out / group / "scores.parquet")
        write_parquet(tse, out / group / "tse.parquet")
        write_csv(summary, out / group / "summary.csv", float_format="%.10g")
        head = summary[summary["metric"] == "tse"].iloc[0]
        log.info("%s / %s: %d contexts, %d rows, TSE %.4f", a.model_name, group, len(scores), len(tse), head["value"])


def cmd_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_csv, write_json, write_text
    from .tables import errata_notes, table2, to_html, to_latex, to_markdown, to_metrics
    from .templates import flagged_errata, load_errata, load_groups

    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    groups = load_groups(a.groups_file)
    present = set(summary["group"])
    groups = [g for g in groups if g["id"] in present]
    models = a.models.split(",")
    if a.table_models is not None:
        from .config import select_models

        try:
            models = select_models(models, [x for x in a.table_models.split(",") if x])
        except VerbevalError as exc:
            raise VerbevalError(f"--table-models: {exc}") from None
    t = table2(summary, groups, models)
    notes: list[str] = []
    if a.errata:
        templates = pd.read_parquet(a.templates, columns=["source", "line"]) if a.templates else None
        notes = errata_notes(flagged_errata(load_errata(a.errata)), templates, groups, a.drop_flagged_errata)
    write_csv(t, a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, models, notes=notes))
    write_text(a.tex, to_latex(t, models, notes=notes))
    if a.html:
        write_text(a.html, to_html(t, models, notes=notes, confidence=a.confidence))
    write_json(a.metrics, to_metrics(t, models))
    write_csv(summary.sort_values(["model", "group", "metric", "side", "cutoff"], kind="stable"), a.all_csv,
              float_format="%.10g")
    log.info("Table 2 (%d groups x %d models) -> %s, %s, %s", len(t), len(models), a.csv, a.md, a.tex)


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` arguments -> {name: value} (in order)."""
    out: dict[str, str] = {}
    for item in items:
        name, value = _split_pair(item, option)
        out[name] = value
    return out


def _run_groups(groups_file: str, present: Sequence[str]) -> list[dict]:
    from .templates import load_groups

    present_set = set(present)
    return [g for g in load_groups(groups_file) if g["id"] in present_set]


def cmd_lemma_stats(a: argparse.Namespace) -> None:
    import pandas as pd

    from .diagnostics import lemma_stats
    from .io import write_csv

    lemmas = pd.read_parquet(a.lemmas)
    stats = lemma_stats(_expand_shards(a.shards), lemmas, a.model_name)
    write_csv(stats, a.out, float_format="%.10g")
    n = int(stats["n_contexts"].iloc[0]) if len(stats) else 0
    log.info("%s: %d lemmas over %d contexts, mean accuracy %.4f -> %s", a.model_name, len(stats), n,
             stats["accuracy"].mean() if len(stats) else float("nan"), a.out)


def cmd_plot_cutoffs(a: argparse.Namespace) -> None:
    import pandas as pd

    from .figures import CUTOFF_FIGURES, cutoff_curves
    from .io import write_csv
    from .plots import plot_cutoff_curves, save_figure

    spec = CUTOFF_FIGURES[a.figure]
    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = _run_groups(a.groups_file, summary["group"].unique())
    data = cutoff_curves(summary, metrics=spec.metrics, sides=spec.sides, models=models, groups=groups,
                         cutoffs={"top": a.top_cutoffs, "bottom": a.bottom_cutoffs}, min_contexts=a.min_contexts)
    write_csv(data, a.csv, float_format="%.10g")
    save_figure(plot_cutoff_curves(data, spec, models, a.confidence, min_contexts=a.min_contexts,
                                   hide_low_n=a.low_n == "hide"), a.out)
    log.info("%s: %d points -> %s", spec.stem, len(data), ", ".join([a.csv, *a.out]))


def cmd_plot_models(a: argparse.Namespace) -> None:
    import pandas as pd

    from .figures import model_comparison
    from .io import write_csv
    from .plots import plot_model_comparison, save_figure

    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = _run_groups(a.groups_file, summary["group"].unique())
    data = model_comparison(summary, models=models, groups=groups)
    write_csv(data, a.csv, float_format="%.10g")
    save_figure(plot_model_comparison(data, models), a.out)
    log.info("model comparison (%d models x %d groups) -> %s", len(models), len(groups), ", ".join([a.csv, *a.out]))


def cmd_plot_checkpoints(a: argparse.Namespace) -> None:
    import pandas as pd

    from .figures import checkpoint_curves
    from .io import write_csv
    from .plots import plot_checkpoints, save_figure

    checkpoints = []
    for sweep, model, step in a.checkpoint:
        try:
            checkpoints.append((sweep, model, int(step)))
        except ValueError:
            raise VerbevalError(f"--checkpoint {sweep} {model} {step}: the step must be an integer") from None
    summary = pd.read_csv(a.summary)
    groups = _run_groups(a.groups_file, summary["group"].unique())
    data = checkpoint_curves(summary, checkpoints=checkpoints, groups=groups)
    write_csv(data, a.csv, float_format="%.10g")
    save_figure(plot_checkpoints(data, log_x=a.log_x, confidence=a.confidence), a.out)
    log.info("checkpoint figure (%d checkpoints x %d groups) -> %s", len(checkpoints), len(groups),
             ", ".join([a.csv, *a.out]))


def cmd_plot_lemmas(a: argparse.Namespace) -> None:
    import pandas as pd

    from .diagnostics import worst_lemmas, worst_lemmas_html, worst_lemmas_markdown
    from .figures import lemma_accuracy, lemma_metrics
    from .io import write_csv, write_json, write_text
    from .plots import plot_lemma_accuracy, save_figure

    stats = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in a.stats], ignore_index=True)
    models = a.models.split(",")
    data = lemma_accuracy(stats, models, n_bins=a.bins)
    metrics = lemma_metrics(data)
    write_csv(data, a.csv, float_format="%.10g")
    if a.metrics_json:
        write_json(a.metrics_json, metrics)
    save_figure(plot_lemma_accuracy(data, models, metrics), a.out)
    worst = worst_lemmas(stats, a.worst, models)
    write_csv(worst, a.worst_csv, float_format="%.10g")
    if a.worst_md:
        write_text(a.worst_md, worst_lemmas_markdown(worst))
    if a.worst_html:
        write_text(a.worst_html, worst_lemmas_html(worst))
    log.info("lemma diagnostics of %d models -> %s, %s", len(models), ", ".join([a.csv, *a.out]), a.worst_csv)


def cmd_topk_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from .diagnostics import ModelTopK, read_topk, select_rows, table3_html, table3_markdown, topk_table
    from .eligibility import single_token_ids
    from .io import write_csv, write_text
    from .models import load_tokenizer
    from .templates import render_context

    model_ids = _pairs(a.model, "--model")
    revisions = _pairs(a.revision, "--revision")
    lemma_paths = _pairs(a.lemmas, "--lemmas")
    shard_paths: dict[str, list[str]] = {}
    for item in a.shards:
        name, path = _split_pair(item, "--shards", "PATH")
        shard_paths.setdefault(name, []).extend(_expand_shards([path]))
    for name in model_ids:
        if name not in lemma_paths:
            raise VerbevalError(f"--lemmas: no lemmas file for model {name!r}")
    templates = pd.read_parquet(a.templates)
    run_groups = list(dict.fromkeys(templates["group"]))
    contexts = [{"group": g, "left": left, "right": None if right == "*" else right} for g, left, right in a.context]
    selected = select_rows(templates, run_groups, contexts or None,
                           default_groups=a.default_groups.split(",") if a.default_groups else (),
                           per_label=a.per_label)
    models = []
    for name, model_id in model_ids.items():
        meta, topk = read_topk(shard_paths.get(name, []))
        tok = load_tokenizer(model_id, revisions.get(name))
        masked = meta["kind"] == "masked"
        cased = bool(meta.get("cased"))

        def decode(ids: Sequence[int], tok: object = tok) -> list[str]:
            return [tok.decode([i]).strip() or repr(tok.decode([i])) for i in ids]  # type: ignore[attr-defined]

        def render(left: str, right: str, tok: object = tok, masked: bool = masked, cased: bool = cased) -> str:
            return render_context(left, right, cased=cased, masked=masked,
                                  mask_token=getattr(tok, "mask_token", None))

        models.append(ModelTopK(name=name, kind=meta["kind"], topk=topk, lemmas=pd.read_parquet(lemma_paths[name]),
                                decode=decode, verb_ids=lambda words, tok=tok: single_token_ids(tok, list(words)),
                                render=render))
    table = topk_table(selected, templates, models)
    write_csv(table, a.csv, float_format="%.6g")
    write_text(a.md, table3_markdown(table))
    if a.html:
        write_text(a.html, table3_html(table))
    log.info("Table 3: %d contexts x %d models -> %s, %s", len(selected), len(models), a.csv, a.md)


def cmd_tiny_model(a: argparse.Namespace) -> None:
    import shutil
    import tempfile

    from .models import MASKED_TINY_ARCHS, make_tiny_model
    from .wordtok import save_word_tokenizer

    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # built beside the target and renamed into place: a killed build leaves no half-written model
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.tmp-", dir=out.parent) as tmp:
        tokenizer = a.tokenizer
        if a.word_corpus:
            style = "masked" if a.arch in MASKED_TINY_ARCHS else "causal"
            tokenizer = save_word_tokenizer(a.word_corpus, style, Path(tmp) / "tokenizer")
        built = make_tiny_model(tokenizer, a.arch, Path(tmp) / "model", seed=a.seed, layers=a.layers,
                                hidden=a.hidden)
        if out.exists():
            shutil.rmtree(out)
        built.rename(out)
    source = "a word-level tokenizer of " + ", ".join(a.word_corpus) if a.word_corpus else a.tokenizer
    log.info("tiny %s model on %s -> %s", a.arch, source, out)


def cmd_dvc_metrics(a: argparse.Namespace) -> None:
    import json

    from .dvc_views import split_metrics
    from .io import write_json

    try:
        metrics = json.loads(Path(a.metrics).read_text())
    except (OSError, ValueError) as exc:
        raise VerbevalError(f"{a.metrics}: cannot read JSON metrics: {exc}") from exc
    if not isinstance(metrics, dict):
        raise VerbevalError(f"{a.metrics}: expected {{model: {{group: {{tse, ew, mw}}}}}}")
    parts = split_metrics(metrics, a.models.split(","), a.groups.split(","), source=a.metrics)
    for (model, group), values in parts.items():
        write_json(Path(a.out_dir) / model / f"{group}.json", values)
    log.info("%d metrics files (model x group) -> %s", len(parts), a.out_dir)


def cmd_dvc_plot_data(a: argparse.Namespace) -> None:
    import pandas as pd

    from .dvc_views import wide_curves
    from .figures import CUTOFF_FIGURES
    from .io import write_csv

    spec = CUTOFF_FIGURES[a.figure]
    if a.side not in spec.sides:
        raise VerbevalError(f"figure {a.figure} has no {a.side}-p side (sides: {', '.join(spec.sides)})")
    curves = pd.read_csv(a.curves, keep_default_na=False, na_values=[""])
    tables = wide_curves(curves, side=a.side, models=a.models.split(","), groups=a.groups.split(","),
                         metrics=spec.metrics, source=a.curves)
    for group, table in tables.items():
        write_csv(table, Path(a.out_dir) / f"{group}.csv", float_format="%.10g")
    log.info("%s (%s-p): %d DVC plot data files -> %s", spec.stem, a.side, len(tables), a.out_dir)


def cmd_dvc_yaml(a: argparse.Namespace) -> None:
    from .dvc import dvc_pipeline, render, workflow_jobs
    from .io import write_text

    out = Path(a.out)
    root = Path(a.root).resolve()
    wdir = os.path.relpath(root, out.resolve().parent)
    jobs = workflow_jobs(root / "Snakefile", [root / c for c in a.configfile], root)
    pipeline = dvc_pipeline(jobs, a.configfile, root, None if wdir == "." else wdir)
    args = " ".join(["--configfile", *a.configfile, "--out", a.out] + (["--root", a.root] if a.root != "." else []))
    text = render(pipeline, args)
    if a.check:
        current = out.read_text() if out.exists() else ""
        if current != text:
            raise VerbevalError(f"{out} is out of date with the workflow: run `verbeval dvc-yaml {args}`")
        print(f"{out}: up to date ({len(pipeline['stages'])} stages)")
        return
    write_text(out, text)
    log.info("%s: %d stages", out, len(pipeline["stages"]))


def cmd_veridicality_predict(a: argparse.Namespace) -> None:
    _check_outputs(a.out)
    from .io import write_parquet
    from .veridicality import PSEUDO_MODEL, model_predictions, pseudo_model_predictions, read_dataset

    data = read_dataset(a.data)
    if a.model == PSEUDO_MODEL:
        preds = pseudo_model_predictions(data)
    else:
        import torch

        from .veridicality import load_nli

        torch.set_num_threads(a.threads)
        model, tok, device = load_nli(a.model, a.revision, a.device)
        preds = model_predictions(data, model, tok, a.batch_size, device)
    write_parquet(preds, a.out)
    log.info("veridicality %s: %d items -> %d predictions -> %s", a.model, len(data), len(preds), a.out)


def cmd_veridicality_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_csv, write_text
    from .veridicality import plot_scatter, signature_table, to_latex, to_markdown

    preds = pd.read_parquet(a.predictions)
    t = signature_table(preds)
    write_csv(t, a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, a.model_name))
    write_text(a.tex, to_latex(t, a.model_name))
    if a.scatter_csv:
        from .veridicality import scatter_data

        write_csv(scatter_data(preds), a.scatter_csv, float_format="%.6f")
    if a.figure:
        from .plots import save_figure

        save_figure(plot_scatter(preds, a.model_name), a.figure)
    log.info("veridicality table of %s (%d rows) -> %s, %s, %s", a.model_name, len(t), a.csv, a.md, a.tex)


def cmd_simverb_score(a: argparse.Namespace) -> None:
    _check_outputs(a.out, a.verbs)
    import torch

    from .io import write_csv, write_parquet
    from .simverb import assign_splits, read_simverb, score_model

    torch.set_num_threads(a.threads)
    pairs = read_simverb(a.data)
    splits = {name: read_simverb(path) for name, path in (_split_pair(s, "--split", "PATH") for s in a.split)}
    if splits:
        pairs = assign_splits(pairs, splits)
    sims, verbs = score_model(pairs, a.model, revision=a.revision, frames=a.frame or ["to {verb}"],
                              multi_token=a.multi_token, batch_size=a.batch_size, device=a.device)
    write_parquet(sims, a.out)
    write_csv(verbs, a.verbs)
    log.info("simverb %s: %d pairs, %d verbs (%d multi-token, %d covered), %d representations -> %s",
             a.model, len(pairs), len(verbs), int((verbs["n_tokens"] > 1).sum()), int(verbs["covered"].sum()),
             sims["representation"].nunique(), a.out)


def cmd_simverb_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_csv, write_json, write_text
    from .simverb import (best_representation, coverage_summary, layer_curve, plot_layers, plot_scatter,
                          results_table, split_pairs_and_sims, to_latex, to_markdown)

    pairs, sims = split_pairs_and_sims(pd.read_parquet(a.similarities))
    verbs = pd.read_csv(a.verbs, keep_default_na=False)
    t = results_table(pairs, sims, a.model_name, resamples=a.resamples, seed=a.seed, confidence=a.confidence,
                      bins=a.bins)
    write_csv(t, a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, a.model_name, verbs))
    write_text(a.tex, to_latex(t, a.model_name))
    write_csv(layer_curve(t), a.layers_csv, float_format="%.6f")
    best = best_representation(t)
    if a.metrics_json:
        full = t[t["subset"] == "full"]
        write_json(a.metrics_json, {"model": a.model_name, "best_representation": best,
                                    "coverage": coverage_summary(verbs),
                                    "rho_full": {r.representation: round(float(r.rho), 6) for r in full.itertuples()}})
    from .plots import save_figure

    if a.layers_figure:
        save_figure(plot_layers(t, a.model_name), a.layers_figure)
    if a.scatter_figure:
        save_figure(plot_scatter(pairs, sims, best, a.model_name), a.scatter_figure)
    log.info("simverb table of %s (%d rows; best %s) -> %s", a.model_name, len(t), best, a.csv)


def cmd_simverb_join(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_csv
    from .simverb import agreement_join, split_pairs_and_sims, verb_errors

    pairs, sims = split_pairs_and_sims(pd.read_parquet(a.similarities))
    joined, summary = agreement_join(verb_errors(pairs, sims), pd.read_csv(a.lemma_stats), a.model_name)
    write_csv(joined, a.out, float_format="%.6f")
    write_csv(summary, a.summary, float_format="%.6f")
    log.info("simverb x agreement for %s: %d verbs in both -> %s", a.model_name,
             int(summary["n_verbs"].max()) if len(summary) else 0, a.summary)


def cmd_lexicon_forms(a: argparse.Namespace) -> None:
    _check_outputs(a.out)
    import pandas as pd

    from .io import write_parquet
    from .lexicon_modes import form_table
    from .models import load_tokenizer

    tok = load_tokenizer(a.model, a.revision)
    forms = form_table(pd.read_parquet(a.lexicon), pd.read_parquet(a.templates), tok)
    write_parquet(forms, a.out)
    lex = forms[forms["in_lexicon"]]
    log.info("%s: %d lexicon lemmas (%d single-token, %d scorable) + %d template-only verb pairs -> %s", a.model,
             len(lex), int(lex["single_token"].sum()), int(lex["scorable"].sum()), len(forms) - len(lex), a.out)


def cmd_lexicon_common(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_parquet
    from .lexicon_modes import common_pairs

    tables = [pd.read_parquet(path) for _, path in (_split_pair(x, "--forms", "PATH") for x in a.forms)]
    common = common_pairs(tables)
    write_parquet(common, a.out)
    log.info("common: %d lexicon lemmas single-token in all %d models -> %s", int(common["in_lexicon"].sum()),
             len(tables), a.out)


def cmd_infer_forms(a: argparse.Namespace) -> None:
    import pandas as pd

    from .lexicon_modes import infer_forms_model

    _check_outputs(a.manifest)
    lm = _load_lm(a)
    groups = [g for g in a.groups.split(",") if g]
    body = infer_forms_model(lm, pd.read_parquet(a.templates), pd.read_parquet(a.forms), groups, a.n_chunks,
                             a.manifest, batch_size=a.batch_size, prepend_bos=a.prepend_bos,
                             progress=not a.no_progress)
    t = body["timing"]
    log.info("%s: %d form shards -> %s; %d contexts computed in %.1f s (%.2f contexts/s)", a.model,
             len(body["shards"]), a.manifest, t["contexts"], t["compute_s"], t["contexts_per_s"])


def cmd_lexicon_modes(a: argparse.Namespace) -> None:
    import json

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    from .io import write_csv
    from .lexicon_modes import (META_KEY, consistency, group_summary, lemma_differences, lemma_scores,
                                mode_masks, read_form_shards)

    forms = pd.read_parquet(a.forms)
    masks = mode_masks(forms, pd.read_parquet(a.common))
    n_lex = int(forms["in_lexicon"].sum())
    by_group: dict[str, list[str]] = {}
    for path in _expand_shards(a.shards):
        md = pq.read_schema(path).metadata or {}
        if META_KEY not in md:
            raise VerbevalError(f"{path}: not a verbeval form shard")
        by_group.setdefault(json.loads(md[META_KEY])["group"], []).append(path)
    summaries, logps, plurals = [], [], []
    for group in sorted(by_group):
        sh = read_form_shards(by_group[group])
        summaries.append(group_summary(sh, masks, n_lex, model=a.model_name, group=group, resamples=a.resamples,
                                       seed=a.seed, confidence=a.confidence))
        logps.append(sh["logp"][:, :n_lex])
        plurals.append(sh["plural"])
    summary = pd.concat(summaries, ignore_index=True)
    lemmas = lemma_scores(np.concatenate(logps), np.concatenate(plurals), forms, masks, a.model_name)
    diff = lemma_differences(lemmas, resamples=a.resamples, seed=a.seed, confidence=a.confidence)
    write_csv(summary, a.summary_out, float_format="%.10g")
    write_csv(lemmas, a.lemmas_out, float_format="%.10g")
    write_csv(diff, a.diff_out, float_format="%.10g")
    if a.consistency_out:
        ref = pd.concat([pd.read_csv(p) for p in a.table2_summaries], ignore_index=True) if a.table2_summaries \
            else pd.DataFrame(columns=["model", "group", "metric", "side", "cutoff", "value", "n"])
        cons = consistency(summary, ref)
        write_csv(cons, a.consistency_out, float_format="%.10g")
        log.info("single_token mode vs Table 2: max |diff| %.3g", cons["abs_diff"].max())
    log.info("%s: %d groups x 3 modes, %d lemmas -> %s", a.model_name, len(by_group), len(lemmas), a.summary_out)


def cmd_lexicon_modes_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from .io import write_csv, write_json, write_text
    from .lexicon_modes import coverage_table, modes_table, to_latex, to_markdown, to_metrics

    models = a.models.split(",")
    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    groups = _run_groups(a.groups_file, summary["group"].unique())
    forms = {name: pd.read_parquet(path) for name, path in (_split_pair(x, "--forms", "PATH") for x in a.forms)}
    coverage = coverage_table({m: forms[m] for m in models}, pd.read_parquet(a.common))
    t = modes_table(summary, groups, models)
    diffs = pd.concat([pd.read_csv(p) for p in a.diffs], ignore_index=True)
    write_csv(t, a.csv, float_format="%.6f")
    write_csv(coverage, a.coverage, float_format="%.6f")
    write_csv(diffs, a.diff_csv, float_format="%.6g")
    md = [to_markdown(t, models, a.mode), "", "Lemma coverage per mode:", "",
          coverage.to_markdown(index=False), "", "Single-token vs multi-token lemmas (mode all):", "",
          diffs.to_markdown(index=False, floatfmt=".4g")]
    if a.consistency:
        cons = pd.concat([pd.read_csv(p) for p in a.consistency], ignore_index=True)
        md += ["", f"single_token mode vs Table 2 (p = 1): max |difference| = {cons['abs_diff'].max():.3g}"]
    write_text(a.md, "\n".join(md) + "\n")
    write_text(a.tex, to_latex(t, models, a.mode))
    write_json(a.metrics, to_metrics(t, models, a.mode, coverage))
    log.info("lexicon modes (%d groups x %d models x 3 modes) -> %s, %s, %s", len(groups), len(models), a.csv,
             a.md, a.tex)


def cmd_veridicality_counterfactuals(a: argparse.Namespace) -> None:
    from .counterfactual import build_pairs, coverage
    from .io import write_csv, write_parquet
    from .veridicality import read_dataset

    data = read_dataset(a.data)
    pairs, unhandled = build_pairs(data, samples=a.samples, seed=a.seed)
    cov = coverage(data, pairs, unhandled)
    write_parquet(pairs, a.pairs)
    write_csv(unhandled, a.unhandled)
    write_csv(cov, a.coverage)
    log.info("counterfactuals: %d pairs, %d unhandled (item, environment, manipulation) -> %s, %s", len(pairs),
             len(unhandled), a.pairs, a.unhandled)


def cmd_veridicality_counterfactual_predict(a: argparse.Namespace) -> None:
    _check_outputs(a.out)
    import pandas as pd
    import torch

    from .io import write_parquet
    from .veridicality import PSEUDO_MODEL, load_nli, score_nli

    if a.model == PSEUDO_MODEL:
        raise VerbevalError(f"{PSEUDO_MODEL} has only the released probabilities of the original sentences; "
                            "counterfactuals need a real NLI model")
    torch.set_num_threads(a.threads)
    model, tok, device = load_nli(a.model, a.revision, a.device)
    pairs = pd.read_parquet(a.pairs)
    probs = score_nli(model, tok, pairs["premise"].tolist(), pairs["hypothesis"].tolist(), a.batch_size, device)
    out = pd.concat([pairs[["manipulation", "index", "task", "signature", "environment", "sample"]],
                     probs], axis=1)
    write_parquet(out, a.out)
    log.info("counterfactual predictions of %s: %d pairs -> %s", a.model, len(out), a.out)


def cmd_veridicality_kl(a: argparse.Namespace) -> None:
    import pandas as pd

    from .counterfactual import attach_kl, kl_latex, kl_markdown, table7, table8
    from .io import write_csv, write_text

    scored = attach_kl(pd.read_parquet(a.predictions), pd.read_parquet(a.counterfactuals))
    for table, title, (csv_path, md_path, tex_path) in (
            (table7(scored), f"Table 7 (KL, verb replacements), {a.model_name}", a.table7),
            (table8(scored), f"Table 8 (KL, complement type swap), {a.model_name}", a.table8)):
        write_csv(table, csv_path, float_format="%.6g")
        write_text(md_path, kl_markdown(table, title))
        write_text(tex_path, kl_latex(table, title))
    log.info("KL tables of %s from %d manipulated pairs -> %s, %s", a.model_name, len(scored), a.table7[0],
             a.table8[0])


def cmd_check_config(a: argparse.Namespace) -> None:
    from .config import check_model_paths, load_config, model_entries

    cfg = load_config(a.config)
    check_model_paths(cfg, a.config)  # local model folders exist and hold config.json
    print(f"{a.config}: OK ({len(model_entries(cfg))} models)")  # each revision of a sweep counts


def cmd_bench(a: argparse.Namespace) -> None:
    from .bench import run_bench

    shared = a.shared or os.environ.get("VERBEVAL_SHARED", "../shared")
    run_bench(out=a.out, quick=a.quick, config=a.config, shared=shared, workdir=a.workdir, threads=a.threads,
              cpu_batch=a.batch_size, gpu_batch=a.gpu_batch_size, baseline_rows=a.baseline_rows,
              parts=a.parts.split(","), snakemake_config=a.snakemake_config, snakemake_cores=a.snakemake_cores,
              snakemake_extra=a.snakemake_config_values)


def cmd_docs_cli(a: argparse.Namespace) -> None:
    from .clidoc import command_table, render_section, subcommands
    from .io import write_text

    doc = Path(a.doc)
    current = doc.read_text(encoding="utf-8")
    parser = build_parser()
    text = render_section(current, command_table(parser), doc)
    n = len(subcommands(parser))
    if a.check:
        if current != text:
            raise VerbevalError(f"{doc}: the sub-command table is out of date with the parser: run "
                                f"`verbeval docs-cli{'' if a.doc == DOCS_CLI_DEFAULT else ' --doc ' + a.doc}`")
        print(f"{doc}: up to date ({n} sub-commands)")
        return
    write_text(doc, text)
    log.info("%s: sub-command table (%d sub-commands) written", doc, n)


# --------------------------------------------------------------------------- parser

DESCRIPTION = """\
verbeval: how language models handle English verbs (subject-verb agreement scored as TSE, EW
and MW after Newman et al. 2021; SimVerb-3500; verb veridicality after Ross & Pavlick 2019).

The sub-commands are the steps of the Snakemake workflow in the repository: each rule runs one
of them with explicit input and output paths. Run the whole workflow from the repository root:

  snakemake --cores 8 --resources gpu=1

Any step can also be run by hand; `verbeval COMMAND --help` lists its options. A few
sub-commands (tiny models, config checks, generated files, benchmarks) are tools beside the
workflow."""

EPILOG = """\
documentation (in the repository):
  docs/workflow.md  every sub-command, the rule that runs it, its inputs and outputs
  docs/config.md    every configuration key of the workflow
  docs/metrics.md   the metric definitions (TSE, EW, MW, cutoffs)"""

#: Default of ``docs-cli --doc``.
DOCS_CLI_DEFAULT = "docs/workflow.md"


class _HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help when it has a default worth stating: not for
    required options, flags, empty or unset defaults, list defaults (their help states them) or
    help that already names ``%(default)s``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_ = action.help or ""
        default = action.default
        if ("%(default)" in help_ or action.required or default is None or default is False
                or default is argparse.SUPPRESS or isinstance(default, list)):
            return help_
        if not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return help_
        return help_ + " (default: %(default)s)"


class _TopHelpFormatter(argparse.RawDescriptionHelpFormatter, _HelpFormatter):
    """The top-level help: description and epilog kept as written."""


def _model_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that load a model (see :func:`_load_lm`)."""
    s.add_argument("--model", required=True, help="hub id or local path of the language model")
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--kind", default="auto", choices=["auto", "masked", "causal"],
                   help="masked or causal LM; auto reads config.architectures")
    s.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                   help="dtype of the weights (the softmax and all metric arithmetic are float64)")
    s.add_argument("--device", default="auto", help="auto (CUDA if available, else CPU), cpu, cuda or cuda:N")
    s.add_argument("--device-map", type=_device_map_arg, default=None,
                   help="split the model across devices with accelerate (replaces --device): auto, balanced, "
                        "balanced_low_0, sequential, or a JSON object {module: GPU index, cpu, cuda:N or disk}; "
                        "default: none (the whole model on --device)")
    s.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")


def _store_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that write a model's shard store (``infer``, ``infer-forms``)."""
    s.add_argument("--groups", required=True, help="comma-separated template groups to run (ids in --templates)")
    s.add_argument("--n-chunks", type=int, default=4,
                   help="shards per group: contiguous slices of its contexts, the unit of resuming")
    s.add_argument("--manifest", required=True,
                   help="output: the store's manifest.json; shards go to <its folder>/<group>/<k>-of-<n>.parquet")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _bootstrap_options(s: argparse.ArgumentParser) -> None:
    """Bootstrap options of the commands that compute confidence intervals."""
    s.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    s.add_argument("--seed", type=int, default=0, help="bootstrap seed (numpy.random.default_rng)")
    s.add_argument("--confidence", type=float, default=0.95, help="confidence level of the bootstrap CIs")


def _nli_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that run an NLI classifier."""
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--device", default="auto", help="auto (CUDA if available, else CPU), cpu, cuda or cuda:N")
    s.add_argument("--batch-size", type=int, default=32, help="premise-hypothesis pairs per forward pass")
    s.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="verbeval", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=_TopHelpFormatter)
    p.add_argument("--version", action="version", version=f"verbeval {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           title="sub-commands (the rule that runs each: docs/workflow.md)")

    def add(name: str, func: Callable[[argparse.Namespace], None], help_: str, more: str) -> argparse.ArgumentParser:
        """A sub-command: ``help_`` is its one-line summary; its description adds ``more``."""
        sp = sub.add_parser(name, help=help_, description=f"{help_[:1].upper()}{help_[1:]}. {more}",
                            formatter_class=_HelpFormatter)
        sp.set_defaults(func=func)
        return sp

    s = add("fetch", cmd_fetch, "download (or copy from a mirror) one manifest source, verifying its sha256",
            "The file is renamed into place only when its sha256 matches the manifest. "
            "Run by the rule fetch, one job per source.")
    s.add_argument("--manifest", required=True,
                   help="data manifest (YAML: each source's URL, sha256 and format), e.g. resources/manifest.yaml")
    s.add_argument("--name", required=True, help="source name in the manifest")
    s.add_argument("--out", required=True, help="output: the fetched file")
    s.add_argument("--mirror", help="local mirror directory laid out like the download URLs "
                                    "(<mirror>/github.com/<owner>/<repo>/raw/<commit>/<path>, or the entry's "
                                    "mirror_path); default: $VERBEVAL_DATA_MIRROR if set, else download from the URL")

    s = add("lexicon", cmd_lexicon, "build the verb lexicon (lemma, 3sg and plural present forms)",
            "Union of the verb lists, de-duplicated on the form pair (docs/data.md). Run by the rule lexicon.")
    s.add_argument("--manifest", required=True, help="data manifest (YAML); gives the format of each --input source")
    s.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="a fetched verb list, NAME its manifest source (format verb_csv or giant_verb_list, text "
                        "or PDF); repeatable, at most one verb_csv")
    s.add_argument("--overrides", help="CSV lemma,sing,plur,reason: forms that replace the inflector's (lemminflect) "
                                       "for the Giant Verb List (default: none; the workflow passes "
                                       "resources/inflection_overrides.csv)")
    s.add_argument("--out", required=True, help="output: lexicon.parquet (lemma, sing, plur, source)")

    s = add("templates", cmd_templates, "normalise agreement templates into one table",
            "One row per template row of the selected groups and of every --custom-group file; malformed rows are errors (file:line: reason) "
            "unless --skip-bad-rows. Run by the rule templates.")
    s.add_argument("--manifest", required=True, help="data manifest (YAML); gives the format of each --input source")
    s.add_argument("--groups-file", required=True,
                   help="YAML list of agreement groups ({id, name, sources}), e.g. resources/agreement_groups.yaml")
    s.add_argument("--groups", help="comma-separated group ids of --groups-file to keep (default: all; --groups= : "
                                     "none, e.g. to run only --custom-group ones)")
    s.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="a fetched template file, NAME its manifest source; repeatable")
    s.add_argument("--out", required=True,
                   help="output: templates.parquet (group, source, line, left, right, correct, incorrect, label, "
                        "plural)")
    s.add_argument("--rejects", required=True, help="output: CSV of the rows left out (source, line, reason, raw)")
    s.add_argument("--skip-bad-rows", action="store_true",
                   help="malformed rows go to --rejects, and an empty or all-rejected source file is a warning "
                        "(default: either is an error)")
    s.add_argument("--errata", help="CSV (source,line,action,reason) of known-bad rows of the published files: "
                                    "action reject drops the row (to --rejects), flag keeps it")
    s.add_argument("--drop-flagged-errata", action="store_true", help="also drop the errata rows whose action is flag")
    s.add_argument("--max-rows-per-source", type=int, metavar="K",
                   help="keep at most K evenly spaced rows of each source file, both labels kept when K >= 2 "
                        "(default: every row)")
    s.add_argument("--custom-group", action="append", default=[], metavar="ID=PATH",
                   help="a group of your own minimal pairs (JSONL or CSV, docs/data.md), after the groups file's")
    s.add_argument("--custom-name", action="append", default=[], metavar="ID=NAME",
                   help="the table row label of a --custom-group (default: its id)")
    s.add_argument("--custom-sha256", action="append", default=[], metavar="ID=HEX",
                   help="sha256 a --custom-group file must have (checked before it is read)")
    s.add_argument("--custom-format", action="append", default=[], metavar="ID=FORMAT",
                   help="jsonl or csv for a --custom-group file (default: from its extension)")
    s.add_argument("--groups-out",
                   help="output: write the run's groups (selected ones, then custom ones) as a groups file for "
                        "the table and figure commands")

    s = add("lemmas", cmd_lemmas, "eligible lemmas of a model (both forms single tokens)",
            "Only the model's tokenizer is loaded. Run by the rule lemmas, one job per model.")
    s.add_argument("--model", required=True, help="hub id or local path (only its tokenizer is loaded)")
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--lexicon", required=True, help="lexicon.parquet (verbeval lexicon)")
    s.add_argument("--out", required=True, help="output: lemmas.parquet, the eligible lemmas with their token ids")

    s = add("infer", cmd_infer, "one model, every group and chunk: probability shards and their manifest "
                                "(model loaded once; finished shards are kept, so a killed run resumes)",
            "Per context and eligible form: its probability and the mass ranked above and below it; per context "
            "the top-k tokens (docs/workflow.md, 'Inference and shards'). Run by the rule infer, one job per "
            "model (resources: gpu=1).")
    _model_options(s)
    s.add_argument("--batch-size", type=_batch_arg, default="auto",
                   help="contexts per forward pass, or auto (512 on CUDA, 64 on CPU); halved on out-of-memory")
    s.add_argument("--top-k", type=int, default=10, help="top tokens (ids and probabilities) stored per context, "
                                                         "for Table 3")
    s.add_argument("--prepend-bos", type=_optional_bool, default=None,
                   help="causal LMs: true, false or auto (follow the tokenizer: BOS only if it adds one itself) "
                        "(default: auto)")
    s.add_argument("--templates", required=True, help="templates.parquet (verbeval templates)")
    s.add_argument("--lemmas", required=True, help="the model's lemmas.parquet (verbeval lemmas)")
    _store_options(s)

    s = add("aggregate", cmd_aggregate,
            "per-context scores, per-row TSE and per-group summaries (bootstrap CIs) of one model from its shards",
            "Every shard's size and sha256 are checked against the manifest first. Run by the rule aggregate, "
            "one job per model.")
    s.add_argument("--templates", required=True, help="templates.parquet (verbeval templates)")
    s.add_argument("--groups", required=True, help="comma-separated groups to aggregate")
    s.add_argument("--model-name", required=True, help="model name written into the summaries")
    s.add_argument("--manifest", required=True, help="the model's shard manifest (verbeval infer --manifest)")
    s.add_argument("--top-cutoffs", type=_floats, required=True,
                   help="comma-separated top-p cutoffs (docs/metrics.md), e.g. 0.5,0.9,1")
    s.add_argument("--bottom-cutoffs", type=_floats, required=True,
                   help="comma-separated bottom-p cutoffs (docs/metrics.md), e.g. 0.5,0.01,1e-6")
    _bootstrap_options(s)
    s.add_argument("--out-dir", required=True,
                   help="writes <out-dir>/<group>/scores.parquet, tse.parquet and summary.csv")
    s.add_argument("--keep-bad-shards", action="store_true",
                   help="leave an unusable shard in place (default: move it to <name>.corrupt so a rerun recomputes it)")

    s = add("table", cmd_table, "Table 2 (CSV, Markdown, LaTeX) from per-group summaries",
            "EW and MW are read at top p = 1. Run by the rule table2.")
    s.add_argument("--groups-file", required=True, help="agreement groups YAML: row order and group names")
    s.add_argument("--models", required=True, help="comma-separated model names, in column order")
    s.add_argument("--table-models", metavar="PATTERNS",
                   help="comma-separated model names or shell-style patterns (e.g. '*@step143000'): Table 2 and "
                        "--metrics show only the --models they match, in --models order; --all-csv keeps every "
                        "model (default: all)")
    s.add_argument("--summaries", nargs="+", required=True,
                   help="per-group summary.csv files (verbeval aggregate) of every model and group")
    s.add_argument("--csv", required=True, help="output: Table 2 with CIs and counts (CSV)")
    s.add_argument("--md", required=True, help="output: Table 2 in Markdown (two decimals)")
    s.add_argument("--tex", required=True, help="output: Table 2 in LaTeX (two decimals)")
    s.add_argument("--html", help="output: Table 2 as an HTML page with CIs and counts (an item of the Snakemake "
                                  "report)")
    s.add_argument("--confidence", type=float, help="the CIs' level, for the HTML page's text")
    s.add_argument("--all-csv", required=True, help="output: all summaries (every metric and cutoff) in one CSV")
    s.add_argument("--metrics", required=True,
                   help="output: Table 2 as JSON {model: {group: {tse, ew, mw}}} (DVC metrics)")
    s.add_argument("--errata", help="errata CSV: Table 2's notes count its flag rows per group")
    s.add_argument("--templates", help="templates.parquet: how many flag rows are among the scored rows")
    s.add_argument("--drop-flagged-errata", action="store_true", help="the flag rows were dropped (for the notes)")

    s = add("lemma-stats", cmd_lemma_stats,
            "per-lemma agreement accuracy and mean probability of one model from its shards",
            "Pooled over every context of every group; a tie counts as a failure. Run by the rule lemma_stats, "
            "one job per model.")
    s.add_argument("--lemmas", required=True, help="the model's lemmas.parquet (verbeval lemmas)")
    s.add_argument("--shards", nargs="+", required=True,
                   help="the model's shards (any groups), or its shard manifest (every shard it lists)")
    s.add_argument("--model-name", required=True, help="model name written into the model column")
    s.add_argument("--out", required=True, help="output: CSV, one row per eligible lemma")

    s = add("plot-cutoffs", cmd_plot_cutoffs,
            "Figures 1-4: a metric against top-p / bottom-p cutoff, per model and group",
            "Reads only summary_all.csv; writes the figure's data (--csv) and images (--out). Run by the rules "
            "figure_top_p, figure_bottom_p, figure_prob_counted and figure_invalid.")
    s.add_argument("--figure", required=True, choices=["scores-top", "scores-bottom", "prob-counted", "invalid"],
                   help="scores-top (Fig. 1: EW, MW vs top p), scores-bottom (Fig. 2, log axis), "
                        "prob-counted (Fig. 3), invalid (Fig. 4)")
    s.add_argument("--summary", required=True, help="summary_all.csv (verbeval table --all-csv)")
    s.add_argument("--groups-file", required=True, help="agreement groups YAML: group order and names")
    s.add_argument("--models", required=True, help="comma-separated model names, in panel order")
    s.add_argument("--top-cutoffs", type=_floats, required=True,
                   help="comma-separated top-p cutoffs to plot (each must be in --summary)")
    s.add_argument("--bottom-cutoffs", type=_floats, required=True,
                   help="comma-separated bottom-p cutoffs to plot (each must be in --summary)")
    s.add_argument("--confidence", type=float, help="CI level of the summary's bounds, named in the figure "
                                                    "(default: not named)")
    s.add_argument("--min-contexts", type=_positive_int, default=MIN_CONTEXTS_DEFAULT,
                   help="estimates averaged over fewer contexts are flagged low_n in the CSV and faded or hidden "
                        "in the figure (agreement.figures.min_contexts)")
    s.add_argument("--low-n", choices=LOW_N_CHOICES, default="fade",
                   help="fade: draw low_n estimates hollow on a dotted line without CI band; hide: leave them out "
                        "(agreement.figures.low_n)")
    s.add_argument("--csv", required=True, help="output: the data behind the figure (CSV)")
    s.add_argument("--out", nargs="+", required=True, help="output: figure files (.png, .pdf, .svg)")

    s = add("plot-models", cmd_plot_models, "TSE, EW and MW per group, all models side by side",
            "Top p = 1, with the bootstrap CIs of summary_all.csv. Run by the rule figure_models.")
    s.add_argument("--summary", required=True, help="summary_all.csv (verbeval table --all-csv)")
    s.add_argument("--groups-file", required=True, help="agreement groups YAML: group order and names")
    s.add_argument("--models", required=True, help="comma-separated model names")
    s.add_argument("--csv", required=True, help="output: the data behind the figure (CSV)")
    s.add_argument("--out", nargs="+", required=True, help="output: figure files (.png, .pdf, .svg)")

    s = add("plot-checkpoints", cmd_plot_checkpoints,
            "TSE, EW and MW (top p = 1, with CIs) against training step, one panel per group",
            "For models with `revisions:` (docs/config.md). Run by the rule figure_checkpoints.")
    s.add_argument("--summary", required=True, help="summary_all.csv (verbeval table --all-csv)")
    s.add_argument("--groups-file", required=True, help="the groups (Table 2 rows) file: panel titles and order")
    s.add_argument("--checkpoint", nargs=3, action="append", required=True, metavar=("SWEEP", "MODEL", "STEP"),
                   help="a checkpoint: the swept model (one line style each), the checkpoint's model name in the "
                        "summary and its training step; repeat per checkpoint")
    s.add_argument("--log-x", action="store_true", help="logarithmic step axis (symmetric-log when a step is 0)")
    s.add_argument("--confidence", type=float, help="CI level of the summary's bounds, named in the figure (default: not named)")
    s.add_argument("--csv", required=True, help="output: the data behind the figure (CSV)")
    s.add_argument("--out", nargs="+", required=True, help="output: figure files (.png, .pdf, .svg)")

    s = add("plot-lemmas", cmd_plot_lemmas,
            "per-lemma accuracy against log-probability, and the worst-conjugated lemmas",
            "Reads the lemma-stats CSVs of the models. Run by the rule figure_lemmas.")
    s.add_argument("--stats", nargs="+", required=True, help="lemma_stats.csv files (verbeval lemma-stats), one "
                                                             "per model")
    s.add_argument("--models", required=True, help="comma-separated model names, in panel order")
    s.add_argument("--bins", type=int, default=10, help="equal-count probability bins of the trend line")
    s.add_argument("--worst", type=int, default=20, help="lemmas per model in the worst-lemmas table")
    s.add_argument("--csv", required=True, help="output: the data behind the figure (CSV)")
    s.add_argument("--metrics-json", help="output: JSON per model: lemmas, mean accuracy, Spearman correlation")
    s.add_argument("--out", nargs="+", required=True, help="output: figure files (.png, .pdf, .svg)")
    s.add_argument("--worst-csv", required=True, help="output: the worst-lemmas table (CSV)")
    s.add_argument("--worst-md", help="output: the worst-lemmas table in Markdown")
    s.add_argument("--worst-html", help="output: the worst-lemmas table in HTML")

    s = add("topk-table", cmd_topk_table,
            "Table 3: top-k tokens of selected contexts, correct/incorrect verb forms marked",
            "Reads the top-k tokens stored in the shards; only tokenizers are loaded, to decode token ids. "
            "Run by the rule table3.")
    s.add_argument("--templates", required=True, help="templates.parquet (verbeval templates)")
    s.add_argument("--model", action="append", default=[], required=True, metavar="NAME=ID",
                   help="model name and hub id or path (for its tokenizer); repeat per model, in column order")
    s.add_argument("--revision", action="append", default=[], metavar="NAME=REV",
                   help="hub revision of a model's tokenizer (branch, tag or commit); repeatable")
    s.add_argument("--lemmas", action="append", default=[], metavar="NAME=PATH",
                   help="a model's lemmas.parquet; repeatable, one per --model")
    s.add_argument("--shards", nargs="+", default=[], metavar="NAME=PATH",
                   help="a model's shard manifest, or its shards of the selected groups")
    s.add_argument("--context", nargs=3, action="append", default=[], metavar=("GROUP", "LEFT", "RIGHT"),
                   help="a context to show (RIGHT * = any); repeatable. Default: --default-groups")
    s.add_argument("--default-groups", default="obj_rel_within,obj_rel_across",
                   help="without --context: the first rows of each label of these comma-separated groups")
    s.add_argument("--per-label", type=int, default=1, help="without --context: rows per label and group")
    s.add_argument("--csv", required=True, help="output: Table 3, one row per context, model and rank (CSV)")
    s.add_argument("--md", required=True, help="output: Table 3 in Markdown")
    s.add_argument("--html", help="output: Table 3 in HTML")

    s = add("mirror", cmd_mirror, "download every manifest source into an offline mirror (for data_mirror)",
            "Each file is checked against its sha256 and written where `--config data_mirror=DIR` reads it "
            "(docs/data.md, 'Building a mirror'); failed sources are listed and the others kept. Not a rule; "
            "run it on a machine with network access.")
    s.add_argument("--manifest", default="resources/manifest.yaml",
                   help="data manifest (URLs and sha256 of every source)")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="mirror folder; files are laid out as `--config data_mirror=DIR` reads them (docs/data.md)")
    s.add_argument("--sources", nargs="+", metavar="NAME",
                   help="only these manifest sources (default: all); a source already in DIR with a matching "
                        "sha256 is kept")
    s.add_argument("--timeout", type=float, default=60, help="seconds to wait on each network operation")

    s = add("tiny-model", cmd_tiny_model, "save a tiny randomly initialised LM (tests, CI, the quick start)",
            "The model has the tokenizer's full vocabulary; its numbers are meaningless. Used by the tests, "
            "config/ci.yaml, verbeval bench and, through the tiny_model rule, config/quick.yaml.")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer", metavar="DIR_OR_HUB_ID",
                     help="tokenizer to build the model on: a folder with the tokenizer files (e.g. "
                          "../shared/tokenizers/gpt2) or a hub id")
    src.add_argument("--word-corpus", nargs="+", metavar="FILE",
                     help="instead of --tokenizer: build a word-level tokenizer whose vocabulary is every word "
                          "of these files (string columns of .parquet files, lines of any other file); "
                          "used by the quick start, which downloads no model (verbeval.wordtok)")
    s.add_argument("--arch", required=True, choices=list(TINY_ARCHS),
                   help="bert, roberta: masked LMs; gpt2, llama, mistral (grouped-query attention), gpt-neox, "
                        "olmo2: causal LMs (docs/models.md: which tokenizer each family uses); bert-nli: a 3-label "
                        "NLI classifier (labels named in id2label) for the veridicality workflow")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="output folder: model, tokenizer and verbeval_tiny.json (replaced atomically if it exists)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random weights (same seed: identical files)")
    s.add_argument("--layers", type=int, default=2, help="transformer layers")
    s.add_argument("--hidden", type=int, default=32, help="hidden size (2 attention heads)")

    s = add("dvc-metrics", cmd_dvc_metrics,
            "split Table 2's metrics.json into one {tse, ew, mw} file per model and group (DVC metrics)",
            "The numbers are copied, not recomputed; `dvc metrics show` prints one row per model and group "
            "(docs/workflow.md, 'DVC'). Run by the rule dvc_metrics.")
    s.add_argument("--metrics", required=True, help="metrics.json written by `verbeval table`")
    s.add_argument("--models", required=True, help="comma-separated model names (one directory each)")
    s.add_argument("--groups", required=True, help="comma-separated group ids (one file per group)")
    s.add_argument("--out-dir", required=True, help="writes OUT_DIR/<model>/<group>.json")

    s = add("dvc-plot-data", cmd_dvc_plot_data,
            "a cutoff figure's data as one CSV per group with a column per model and metric (DVC plots)",
            "Read by the top-level plots of dvc.yaml (`dvc plots show`, docs/workflow.md, 'DVC'). Run by the "
            "rule dvc_plot_data, one job per figure and side.")
    s.add_argument("--figure", required=True, choices=["scores-top", "scores-bottom", "prob-counted", "invalid"],
                   help="which cutoff figure the data belong to (as in plot-cutoffs)")
    s.add_argument("--curves", required=True, help="the figure's data CSV written by plot-cutoffs --csv")
    s.add_argument("--side", required=True, choices=["top", "bottom"], help="top-p or bottom-p cutoffs")
    s.add_argument("--models", required=True, help="comma-separated model names (columns, in this order)")
    s.add_argument("--groups", required=True, help="comma-separated group ids (one file per group)")
    s.add_argument("--out-dir", required=True, help="writes OUT_DIR/<group>.csv")

    s = add("dvc-yaml", cmd_dvc_yaml, "generate (or --check) a dvc.yaml with one stage per Snakemake job",
            "Stages take the jobs' shell commands, inputs, outputs and config params (docs/workflow.md, 'DVC'). "
            "Not a rule; run after changing the workflow or a config file.")
    s.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                   help="workflow config files, later ones override earlier ones (relative to --root; "
                        "default: config/config.yaml)")
    s.add_argument("--out", default="dvc.yaml", help="output: the DVC pipeline file")
    s.add_argument("--root", default=".", help="repository root (where the Snakefile is)")
    s.add_argument("--check", action="store_true", help="fail if --out differs from the generated pipeline "
                                                        "(writes nothing)")

    s = add("veridicality-predict", cmd_veridicality_predict,
            "NLI probabilities on the verb veridicality data (a hub/local NLI model or ross-pavlick-2019-bert)",
            "Both environments (positive, negative) of every item (docs/veridicality.md). Run by the rule "
            "veridicality_predict, one job per model.")
    s.add_argument("--data", required=True, help="verb_veridicality_evaluation.tsv (Ross & Pavlick 2019)")
    s.add_argument("--model", required=True,
                   help="NLI classifier (hub id or path), or ross-pavlick-2019-bert for the released BERT probabilities")
    _nli_options(s)
    s.add_argument("--out", required=True, help="output: predictions parquet (one row per item and environment)")

    s = add("veridicality-table", cmd_veridicality_table,
            "per-signature accuracy and correlations (CSV, Markdown, LaTeX) and the human-vs-model scatter",
            "Run by the rule veridicality_table, one job per model.")
    s.add_argument("--predictions", required=True, help="predictions.parquet (verbeval veridicality-predict)")
    s.add_argument("--model-name", required=True, help="model name in the tables and the figure")
    s.add_argument("--csv", required=True, help="output: n, accuracy, Pearson, Spearman per signature and "
                                                "environment (CSV)")
    s.add_argument("--md", required=True, help="output: the same table in Markdown")
    s.add_argument("--tex", required=True, help="output: the same table in LaTeX")
    s.add_argument("--scatter-csv", help="output: the points of the scatter figure (CSV, a DVC plot)")
    s.add_argument("--figure", nargs="+", default=[], help="output: scatter figure files (.png, .pdf, .svg)")

    s = add("simverb-score", cmd_simverb_score,
            "SimVerb-3500: cosine of every verb pair under the static embedding and every layer of one model",
            "See docs/simverb.md. Run by the rule simverb_score, one job per model.")
    s.add_argument("--data", required=True, help="SimVerb-3500.txt (the full 3,500-pair file)")
    s.add_argument("--split", action="append", default=[], metavar="NAME=PATH",
                   help="an official split file (dev=SimVerb-500-dev.txt, test=SimVerb-3000-test.txt); repeatable")
    s.add_argument("--model", required=True, help="hub id or local path (any model; loaded without its head)")
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--frame", action="append", default=[],
                   help="context with {verb}, repeatable; layer vectors are averaged over the frames, the static one "
                        "uses the first (default: 'to {verb}')")
    s.add_argument("--multi-token", choices=["mean", "skip"], default="mean",
                   help="mean over a multi-token verb's sub-tokens, or leave its pairs out")
    s.add_argument("--device", default="auto", help="auto (CUDA if available, else CPU), cpu, cuda or cuda:N")
    s.add_argument("--batch-size", type=int, default=64, help="verbs per forward pass")
    s.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    s.add_argument("--out", required=True, help="output: similarities parquet (one row per pair and representation)")
    s.add_argument("--verbs", required=True, help="output: per-verb tokens and coverage (CSV)")

    s = add("simverb-table", cmd_simverb_table,
            "SimVerb-3500: Spearman's rho with bootstrap CIs per representation, split, relation and rating range",
            "Also the per-layer curve and the human-vs-model scatter. Run by the rule simverb_table, one job per "
            "model.")
    s.add_argument("--similarities", required=True, help="similarities parquet (verbeval simverb-score --out)")
    s.add_argument("--verbs", required=True, help="per-verb CSV (verbeval simverb-score --verbs)")
    s.add_argument("--model-name", required=True, help="model name in the tables and figures")
    _bootstrap_options(s)
    s.add_argument("--bins", type=_floats, default=[0.0, 2.5, 5.0, 7.5, 10.0],
                   help="comma-separated rating range edges on the 0-10 scale (default: 0,2.5,5,7.5,10)")
    s.add_argument("--csv", required=True, help="output: rho with CIs per representation and subset (CSV)")
    s.add_argument("--md", required=True, help="output: the table in Markdown")
    s.add_argument("--tex", required=True, help="output: the table in LaTeX")
    s.add_argument("--layers-csv", required=True, help="output: data of the per-layer figure (CSV)")
    s.add_argument("--metrics-json", help="output: JSON with the best representation, verb coverage and rho of "
                                          "every representation on the full set")
    s.add_argument("--layers-figure", nargs="+", default=[], help="output: per-layer figure files (.png, .pdf, .svg)")
    s.add_argument("--scatter-figure", nargs="+", default=[],
                   help="output: human-vs-model scatter files of the best representation (.png, .pdf, .svg)")

    s = add("simverb-join", cmd_simverb_join,
            "SimVerb-3500 x agreement: per-verb rank error against per-lemma agreement accuracy",
            "Run by the rule simverb_join (simverb.agreement_join), one job per model that has agreement results.")
    s.add_argument("--similarities", required=True, help="similarities parquet (verbeval simverb-score --out)")
    s.add_argument("--lemma-stats", required=True, help="lemma_stats.csv of the same model (verbeval lemma-stats)")
    s.add_argument("--model-name", required=True, help="model name written into the outputs")
    s.add_argument("--out", required=True, help="output: per-verb joined rows (CSV)")
    s.add_argument("--summary", required=True, help="output: per-representation correlations (CSV)")

    s = add("lexicon-forms", cmd_lexicon_forms,
            "token ids of every lexicon and template verb form of a model, with its single-token flag",
            "Only the tokenizer is loaded. Run by the rule lexicon_forms (with agreement.multitoken.enabled).")
    s.add_argument("--model", required=True, help="hub id or local path (only the tokenizer is loaded)")
    s.add_argument("--revision", help="hub revision: branch, tag or commit (default: the hub's default branch)")
    s.add_argument("--lexicon", required=True, help="lexicon.parquet (verbeval lexicon)")
    s.add_argument("--templates", required=True, help="templates.parquet: its verb pairs not in the lexicon are "
                                                       "added")
    s.add_argument("--out", required=True, help="output: the model's forms.parquet")

    s = add("lexicon-common", cmd_lexicon_common, "verb pairs single-token in every model (the `common` lexicon mode)",
            "Run by the rule lexicon_common (with agreement.multitoken.enabled).")
    s.add_argument("--forms", nargs="+", required=True, metavar="NAME=PATH",
                   help="each model's forms.parquet (verbeval lexicon-forms)")
    s.add_argument("--out", required=True, help="output: common.parquet")

    s = add("infer-forms", cmd_infer_forms,
            "log P(form | context) of every verb form of any length: every group and chunk of one model, "
            "shards and their manifest (model loaded once; a killed run resumes)",
            "Chain rule for causal LMs, PLL-word-l2r for masked LMs (docs/metrics.md). Run by the rule "
            "infer_forms, one job per model (with agreement.multitoken.enabled).")
    _model_options(s)
    s.add_argument("--batch-size", type=int, default=256, help="trie rows (prefixes / masked sequences) per pass")
    s.add_argument("--prepend-bos", type=_optional_bool, default=None,
                   help="causal LMs: true, false or auto (follow the tokenizer) (default: auto)")
    s.add_argument("--templates", required=True, help="templates.parquet (verbeval templates)")
    s.add_argument("--forms", required=True, help="the model's forms.parquet (verbeval lexicon-forms)")
    _store_options(s)

    s = add("lexicon-modes", cmd_lexicon_modes,
            "TSE, EW and MW (p = 1) of one model in the single_token, all and common lexicon modes",
            "Also per-lemma scores and the single- vs multi-token lemma comparison. Run by the rule lexicon_modes, "
            "one job per model (with agreement.multitoken.enabled).")
    s.add_argument("--forms", required=True, help="the model's forms.parquet (verbeval lexicon-forms)")
    s.add_argument("--common", required=True, help="common.parquet (verbeval lexicon-common)")
    s.add_argument("--model-name", required=True, help="model name written into the outputs")
    s.add_argument("--shards", nargs="+", required=True,
                   help="the model's form shards (all groups), or their manifest (every shard it lists)")
    s.add_argument("--table2-summaries", nargs="*", default=[],
                   help="the single-token pipeline's summary.csv files, compared in --consistency-out")
    _bootstrap_options(s)
    s.add_argument("--summary-out", required=True, help="output: metrics per group and lexicon mode with CIs (CSV)")
    s.add_argument("--lemmas-out", required=True, help="output: per-lemma CSV")
    s.add_argument("--diff-out", required=True, help="output: single- vs multi-token lemma comparison CSV")
    s.add_argument("--consistency-out", help="output: single_token mode vs Table 2 CSV")

    s = add("lexicon-modes-table", cmd_lexicon_modes_table,
            "groups x models x lexicon modes table (CSV, Markdown, LaTeX), coverage and metrics JSON",
            "Run by the rule lexicon_modes_table (with agreement.multitoken.enabled).")
    s.add_argument("--groups-file", required=True, help="agreement groups YAML: row order and group names")
    s.add_argument("--models", required=True, help="comma-separated model names, in column order")
    s.add_argument("--mode", default="single_token", choices=["single_token", "all", "common"],
                   help="headline mode (first in the table, headline_mode in the metrics)")
    s.add_argument("--summaries", nargs="+", required=True, help="each model's summary CSV (lexicon-modes "
                                                                 "--summary-out)")
    s.add_argument("--diffs", nargs="+", required=True, help="each model's lemma comparison CSV (lexicon-modes "
                                                             "--diff-out)")
    s.add_argument("--forms", nargs="+", required=True, metavar="NAME=PATH", help="each model's forms.parquet")
    s.add_argument("--common", required=True, help="common.parquet (verbeval lexicon-common)")
    s.add_argument("--consistency", nargs="*", default=[],
                   help="each model's consistency CSV (lexicon-modes --consistency-out), summarised in --md")
    s.add_argument("--csv", required=True, help="output: the table (CSV)")
    s.add_argument("--md", required=True, help="output: the table, coverage and lemma comparison in Markdown")
    s.add_argument("--tex", required=True, help="output: the table in LaTeX")
    s.add_argument("--metrics", required=True, help="output: JSON of the table and coverage (DVC metrics)")
    s.add_argument("--coverage", required=True, help="output: lemma coverage per model and mode (CSV)")
    s.add_argument("--diff-csv", required=True, help="output: every model's single- vs multi-token comparison (CSV)")

    s = add("veridicality-counterfactuals", cmd_veridicality_counterfactuals,
            "manipulated veridicality pairs (verb replacements, to/that swaps) and the sentences left unhandled",
            "Section 6.3 of Ross & Pavlick 2019 (docs/veridicality.md). Run by the rule "
            "veridicality_counterfactuals.")
    s.add_argument("--data", required=True, help="verb_veridicality_evaluation.tsv")
    s.add_argument("--samples", type=int, default=1, help="replacement verbs per item and manipulation")
    s.add_argument("--seed", type=int, default=0, help="seed of the replacement-verb sampling")
    s.add_argument("--pairs", required=True, help="output: manipulated pairs (parquet)")
    s.add_argument("--unhandled", required=True, help="output: CSV: manipulation, item, environment, reason")
    s.add_argument("--coverage", required=True, help="output: CSV: handled and unhandled items per manipulation")

    s = add("veridicality-counterfactual-predict", cmd_veridicality_counterfactual_predict,
            "NLI probabilities of the manipulated pairs (a real NLI model)",
            "Run by the rule veridicality_counterfactual_predict, one job per real NLI model.")
    s.add_argument("--pairs", required=True, help="manipulated pairs (verbeval veridicality-counterfactuals --pairs)")
    s.add_argument("--model", required=True, help="NLI classifier (hub id or local path)")
    _nli_options(s)
    s.add_argument("--out", required=True, help="output: NLI probabilities per manipulated pair (parquet)")

    s = add("veridicality-kl", cmd_veridicality_kl,
            "KL(original || manipulated) tables 7 and 8 (CSV, Markdown, LaTeX)",
            "Run by the rule veridicality_kl, one job per real NLI model.")
    s.add_argument("--predictions", required=True, help="predictions.parquet of the original pairs")
    s.add_argument("--counterfactuals", required=True, help="predictions of the manipulated pairs")
    s.add_argument("--model-name", required=True, help="model name in the table titles")
    s.add_argument("--table7", nargs=3, required=True, metavar=("CSV", "MD", "TEX"),
                   help="output: Table 7 (verb replacements) as CSV, Markdown and LaTeX")
    s.add_argument("--table8", nargs=3, required=True, metavar=("CSV", "MD", "TEX"),
                   help="output: Table 8 (complement type swap) as CSV, Markdown and LaTeX")

    s = add("check-config", cmd_check_config, "validate a workflow config file against the schema",
            "Also checks that local model folders exist and hold config.json. Prints '<file>: OK (<n> models)'.")
    s.add_argument("config", help="workflow config file (YAML), e.g. config/config.yaml")

    s = add("bench", cmd_bench, "benchmarks: workflow phases, aggregation, inference throughput (CPU/GPU), "
                                "and the paper-style baseline; figures to JSON",
            "See docs/performance.md. Not a rule.")
    s.add_argument("--out", default="results-bench/bench.json", help="output: the figures (JSON)")
    s.add_argument("--quick", action="store_true", help="CI slice: 40 rows per source, two tiny models")
    s.add_argument("--config", default="config/tiny-full.yaml", help="data mirror, groups and cutoffs")
    s.add_argument("--shared", help="shared/ with tokenizers/ (default: $VERBEVAL_SHARED or ../shared)")
    s.add_argument("--workdir", default="results-bench", help="where the benchmark's workflow writes")
    s.add_argument("--threads", type=int, default=1, help="CPU threads (1: as one Snakemake job)")
    s.add_argument("--batch-size", type=int, default=64, help="CPU batch size")
    s.add_argument("--gpu-batch-size", type=int, default=256, help="GPU batch size (throughput part, on CUDA)")
    s.add_argument("--baseline-rows", type=int, help="template rows the baseline runs (default 8 quick, 150 full)")
    s.add_argument("--parts", default="workflow,aggregation,throughput,baseline",
                   help="comma-separated parts: snakemake (the Snakemake run end to end, as a user runs it), "
                        "workflow (in-process phases; aggregation, throughput and baseline read its outputs), "
                        "aggregation, throughput, baseline, postprocess (softmax and form statistics per "
                        "context for 50k, 100k and 256k vocabularies, CPU and CUDA; needs no workflow run)")
    s.add_argument("--snakemake-config", help="config of the snakemake part (default: --config)")
    s.add_argument("--snakemake-cores", type=int, default=2, help="--cores of the snakemake part")
    s.add_argument("--snakemake-config-values", nargs="*", default=[], metavar="KEY=VALUE",
                   help="--config values of the snakemake part (e.g. data_mirror=../shared/data)")

    s = add("docs-cli", cmd_docs_cli,
            "write the sub-command table of docs/workflow.md from the parser's one-line helps (or --check it)",
            "The table sits between two marker lines in the file. Not a rule; run after adding a sub-command or "
            "changing its one-line help.")
    s.add_argument("--doc", default=DOCS_CLI_DEFAULT, help="Markdown file holding the table between the markers")
    s.add_argument("--check", action="store_true", help="fail if the table in --doc differs from the generated one "
                                                        "(writes nothing)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        args.func(args)
    except VerbevalError as exc:
        print(f"verbeval {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # permission denied, disk full, missing file, read-only file system, ...
        from .io import describe_os_error

        print(f"verbeval {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        reason = _unreadable_input(exc)
        if reason is None:
            raise
        print(f"verbeval {args.command}: error: {reason}", file=sys.stderr)
        return 1
    return 0


def _unreadable_input(exc: Exception) -> str | None:
    """One line for an input file that pandas/pyarrow cannot parse (truncated Parquet, empty CSV)."""
    import pandas as pd

    try:
        from pyarrow import ArrowException
    except ImportError:  # pragma: no cover
        ArrowException = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(exc, (ArrowException, pd.errors.EmptyDataError, pd.errors.ParserError)):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"unreadable input: {first}"
    return None


if __name__ == "__main__":
    sys.exit(main())
