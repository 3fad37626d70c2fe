"""Sub-commands of the agreement study: lexicon, templates, inference, aggregation, Table 2, figures,
diagnostics, DVC views and the lexicon modes.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verbeval.core.cliutil import (Add, bootstrap_options, check_outputs, float_list, model_pin, model_source_options,
                                   optional_bool, random_init_option, split_pair)
from verbeval.core.errors import VerbevalError

log = logging.getLogger("verbeval")


def _positive_int(text: str) -> int:
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")


#: defaults of plot-cutoffs' --min-contexts / --low-n: verbeval.agreement.figures.DEFAULT_MIN_CONTEXTS and
#: LOW_N_MODES (repeated here so that the CLI starts without importing pandas; a test ties them)
MIN_CONTEXTS_DEFAULT = 10
LOW_N_CHOICES = ("fade", "hide")


def _manifest_inputs(manifest_path: str, items: Sequence[str]) -> dict[str, tuple[Path, str]]:
    """``NAME=PATH`` arguments -> {name: (path, format)}, checked against the manifest."""
    from verbeval.core.manifest import load_manifest

    manifest = load_manifest(manifest_path)
    inputs: dict[str, tuple[Path, str]] = {}
    for item in items:
        name, path = split_pair(item, "--input", "PATH")
        if name not in manifest:
            raise VerbevalError(f"--input {item!r}: {name!r} is not in {manifest_path}")
        inputs[name] = (Path(path), manifest[name].format)
    return inputs


def cmd_lexicon(a: argparse.Namespace) -> None:
    from verbeval.core.verb_list import read_giant_verb_list
    from verbeval.core.io import write_parquet
    from verbeval.agreement.lexicon import build_lexicon

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
        gid, path = split_pair(item, "--custom-group", "PATH")
        if gid in entries:
            raise VerbevalError(f"--custom-group {item!r}: {gid!r} is given twice")
        entries[gid] = {"id": gid, "path": path}
    for option, key, items in (("--custom-name", "name", a.custom_name), ("--custom-sha256", "sha256", a.custom_sha256),
                               ("--custom-format", "format", a.custom_format)):
        for item in items:
            gid, value = split_pair(item, option)
            if gid not in entries:
                raise VerbevalError(f"{option} {item!r}: no --custom-group {gid}=PATH")
            entries[gid][key] = value
    return list(entries.values())


def cmd_templates(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_csv, write_parquet
    from verbeval.agreement.custom_pairs import custom_groups
    from verbeval.agreement.errata import load_errata
    from verbeval.agreement.groups import load_groups, run_groups, write_groups
    from verbeval.agreement.templates import build_template_table

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
    check_outputs(a.out)
    import pandas as pd

    from verbeval.agreement.eligibility import eligible_lemmas
    from verbeval.core.fasttok import load_text_tokenizer
    from verbeval.core.io import write_parquet

    tok = load_text_tokenizer(a.model, a.revision, a.gguf_file, model_pin(a))  # tokenizers alone where safe: no torch import
    lex = pd.read_parquet(a.lexicon)
    elig = eligible_lemmas(lex, tok)
    write_parquet(elig, a.out)
    log.info("%s: %d of %d lemmas eligible (both forms single tokens) -> %s", a.model, len(elig), len(lex), a.out)


def _load_lm(a: argparse.Namespace) -> Any:
    """Load the model of an inference command (``--model --revision --kind --dtype --device --device-map
    --threads``)."""
    import torch

    from verbeval.core.models import load_model

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return load_model(a.model, revision=a.revision, kind=a.kind, dtype=a.dtype, device=a.device,
                      device_map=a.device_map, gguf_file=a.gguf_file, sha256=model_pin(a))


def _batch_size(value: str, lm: Any, cuda_default: int = 512, cpu_default: int = 64) -> int:
    """``--batch-size``: a number, or ``auto`` (512 on CUDA, where large batches keep the GPU busy;
    64 on CPU). Out-of-memory batches are halved either way."""
    if value != "auto":
        return int(value)
    return cuda_default if lm.device.type == "cuda" else cpu_default


def _device_map_arg(text: str) -> Any:
    from verbeval.core.devices import parse_device_map

    try:
        return parse_device_map(text)
    except VerbevalError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--device-map: ")) from None


def _batch_arg(text: str) -> str:
    if text == "auto" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")


def _quarantined(exc: Any, keep: bool, manifest: str | None = None) -> VerbevalError:
    """The error to raise for an unusable shard; unless ``keep``, the file is moved aside first
    (``<name>.corrupt``) and the store's ``manifest`` (when given) removed, so that the next run,
    Snakemake's or ``dvc repro``, runs the model's inference job again: it keeps every intact shard
    and recomputes this one. (A manifest left in place would make every ``dvc repro`` fail here.)"""
    from verbeval.agreement.aggregate import quarantine

    if keep:
        return VerbevalError(f"{exc}: rerun the model's inference job to recompute it")
    done = []
    if Path(exc.path).exists():
        done.append(f"moved it to {quarantine(exc.path)}")
    if manifest is not None and Path(manifest).exists():
        Path(manifest).unlink()
        done.append(f"removed the stale manifest {manifest}")
    what = f"; {' and '.join(done)}" if done else ""
    return VerbevalError(f"{exc}{what}: rerun the workflow (snakemake or dvc repro) to recompute it")


def _expand_shards(items: Sequence[str], keep_bad: bool = False) -> list[str]:
    """Shard paths from shard files and shard-store manifests (``manifest.json``: every shard it
    lists, each checked against the size and sha256 recorded there)."""
    from verbeval.core.errors import ShardError
    from verbeval.agreement.shardstore import manifest_shards

    out: list[str] = []
    for item in items:
        if not item.endswith(".json"):
            out.append(item)
            continue
        try:
            out += [str(p) for paths in manifest_shards(item).values() for p in paths]
        except ShardError as exc:
            raise _quarantined(exc, keep_bad, item) from None
    return out


def _load_checked_lm(a: argparse.Namespace, templates: Any, groups: list[str], extra: int = 0) -> tuple[Any, float]:
    """The model of ``a`` and its load time, once no context of ``groups`` is longer than it reads
    (:func:`verbeval.agreement.lengths.check_context_lengths`): checked before the load from the
    tokenizer and config, or, for a GGUF file (which a tokenizer load would parse a second time),
    right after it and before any forward pass."""
    from verbeval.agreement.lengths import check_context_lengths

    if not a.gguf_file:
        check_context_lengths(a.model, a.revision, a.kind, templates, groups, a.prepend_bos, extra)
    t = time.perf_counter()
    lm = _load_lm(a)
    load_s = time.perf_counter() - t
    if a.gguf_file:  # the loaded model's kind: a GGUF config names no architecture
        check_context_lengths(a.model, a.revision, lm.kind, templates, groups, a.prepend_bos, extra,
                              tokenizer=lm.tokenizer, config=lm.model.config)
    return lm, load_s


def _random_init(a: argparse.Namespace) -> bool:
    """Whether the model of ``a`` is randomly initialised (``--random-init``, else its marker), with a
    warning when it is."""
    from verbeval.core.provenance import resolve_random_init

    random_init = resolve_random_init(a.model, a.random_init)
    if random_init:
        log.warning("%s is randomly initialised: its numbers are meaningless and are labelled so", a.model)
    return random_init


def forms_extra_tokens(forms: Any) -> int:
    """Tokens the longest multi-token form adds to a context beyond its first (forms.parquet)."""
    return (int(forms[["n_sing", "n_plur"]].to_numpy().max()) if len(forms) else 1) - 1


def cmd_infer(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.inference import infer_model

    check_outputs(a.manifest)
    t0 = time.perf_counter()
    templates = pd.read_parquet(a.templates)
    lemmas = pd.read_parquet(a.lemmas)
    groups = [g for g in a.groups.split(",") if g]
    lm, load_s = _load_checked_lm(a, templates, groups)
    random_init = _random_init(a)
    body = infer_model(lm, templates, lemmas, groups, a.n_chunks, a.manifest, batch_size=_batch_size(a.batch_size, lm),
                       top_k=a.top_k, prepend_bos=a.prepend_bos, progress=not a.no_progress,
                       random_init=random_init, allow_nonfinite=a.allow_nonfinite)
    t = body["timing"]
    # total: the whole command, model load included
    log.info("%s: %d shards -> %s; model load %.1f s, %d contexts computed in %.1f s (%.1f contexts/s), "
             "writer busy %.1f s, total %.1f s", a.model, len(body["shards"]), a.manifest, load_s, t["contexts"],
             t["compute_s"], t["contexts_per_s"], t["writer_busy_s"], time.perf_counter() - t0)


def cmd_aggregate(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.aggregate import context_scores, read_shards, row_tse, summarise
    from verbeval.core.errors import ShardError
    from verbeval.core.io import write_csv, write_parquet
    from verbeval.agreement.shardstore import manifest_random_init, manifest_shards

    groups = [g for g in a.groups.split(",") if g]
    out = Path(a.out_dir)
    check_outputs(*[str(out / g / "summary.csv") for g in groups])
    try:
        by_group = manifest_shards(a.manifest, groups)
    except ShardError as exc:
        raise _quarantined(exc, a.keep_bad_shards, a.manifest) from None
    templates = pd.read_parquet(a.templates)
    random_init = manifest_random_init(a.manifest)
    for group in groups:
        try:
            shards = read_shards(by_group[group])
        except ShardError as exc:
            raise _quarantined(exc, a.keep_bad_shards, a.manifest) from None
        if shards.meta["group"] != group:
            raise VerbevalError(f"shards are for group {shards.meta['group']!r}, not {group!r}")
        g = templates[templates["group"] == group].reset_index(drop=True)
        scores = context_scores(shards, a.top_cutoffs, a.bottom_cutoffs)
        tse = row_tse(shards, g)
        summary = summarise(scores, tse, model=a.model_name, group=group, resamples=a.resamples, seed=a.seed,
                            confidence=a.confidence).assign(random_init=random_init)
        if shards.n_nonfinite:  # kept under --allow-nonfinite: Table 2 and metrics.json say so
            summary = summary.assign(n_nonfinite=shards.n_nonfinite)
        write_parquet(scores, out / group / "scores.parquet")
        write_parquet(tse, out / group / "tse.parquet")
        write_csv(summary, out / group / "summary.csv", float_format="%.10g")
        head = summary[summary["metric"] == "tse"].iloc[0]
        log.info("%s / %s: %d contexts, %d rows, TSE %.4f", a.model_name, group, len(scores), len(tse), head["value"])


def cmd_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.agreement.tables import errata_notes, table2, to_html, to_latex, to_markdown, to_metrics
    from verbeval.agreement.errata import flagged_errata, load_errata
    from verbeval.agreement.groups import load_groups

    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    groups = load_groups(a.groups_file)
    present = set(summary["group"])
    groups = [g for g in groups if g["id"] in present]
    models = a.models.split(",")
    if a.table_models is not None:
        from verbeval.core.config import select_models

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
        name, value = split_pair(item, option)
        out[name] = value
    return out


def _run_groups(groups_file: str, present: Sequence[str]) -> list[dict]:
    from verbeval.agreement.groups import load_groups

    present_set = set(present)
    return [g for g in load_groups(groups_file) if g["id"] in present_set]


def _random_in(frame: Any) -> set[str]:
    """The models a summary or lemma-statistics table marks randomly initialised (``random_init``)."""
    from verbeval.core.provenance import random_flags

    return {m for m, r in random_flags(frame).items() if r}


def cmd_lemma_stats(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.diagnostics import lemma_stats
    from verbeval.agreement.shardstore import manifest_random_init
    from verbeval.core.io import write_csv

    lemmas = pd.read_parquet(a.lemmas)
    random_init = any(manifest_random_init(p) for p in a.shards if p.endswith(".json"))
    stats = lemma_stats(_expand_shards(a.shards), lemmas, a.model_name).assign(random_init=random_init)
    write_csv(stats, a.out, float_format="%.10g")
    n = int(stats["n_contexts"].iloc[0]) if len(stats) else 0
    log.info("%s: %d lemmas over %d contexts, mean accuracy %.4f -> %s", a.model_name, len(stats), n,
             stats["accuracy"].mean() if len(stats) else float("nan"), a.out)


def cmd_plot_cutoffs(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.figures import CUTOFF_FIGURES, cutoff_curves
    from verbeval.core.io import write_csv
    from verbeval.agreement.plots import plot_cutoff_curves
    from verbeval.core.plots import save_figure

    spec = CUTOFF_FIGURES[a.figure]
    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = _run_groups(a.groups_file, summary["group"].unique())
    data = cutoff_curves(summary, metrics=spec.metrics, sides=spec.sides, models=models, groups=groups,
                         cutoffs={"top": a.top_cutoffs, "bottom": a.bottom_cutoffs}, min_contexts=a.min_contexts)
    write_csv(data, a.csv, float_format="%.10g")
    save_figure(plot_cutoff_curves(data, spec, models, a.confidence, min_contexts=a.min_contexts,
                                   hide_low_n=a.low_n == "hide", random=_random_in(summary)), a.out)
    log.info("%s: %d points -> %s", spec.stem, len(data), ", ".join([a.csv, *a.out]))


def cmd_plot_models(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.figures import model_comparison
    from verbeval.core.io import write_csv
    from verbeval.agreement.plots import plot_model_comparison
    from verbeval.core.plots import save_figure

    summary = pd.read_csv(a.summary)
    models = a.models.split(",")
    groups = _run_groups(a.groups_file, summary["group"].unique())
    data = model_comparison(summary, models=models, groups=groups)
    write_csv(data, a.csv, float_format="%.10g")
    save_figure(plot_model_comparison(data, models, random=_random_in(summary)), a.out)
    log.info("model comparison (%d models x %d groups) -> %s", len(models), len(groups), ", ".join([a.csv, *a.out]))


def cmd_plot_checkpoints(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.figures import checkpoint_curves
    from verbeval.core.io import write_csv
    from verbeval.agreement.plots import plot_checkpoints
    from verbeval.core.plots import save_figure

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
    save_figure(plot_checkpoints(data, log_x=a.log_x, confidence=a.confidence, random=_random_in(summary)), a.out)
    log.info("checkpoint figure (%d checkpoints x %d groups) -> %s", len(checkpoints), len(groups),
             ", ".join([a.csv, *a.out]))


def cmd_plot_lemmas(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.diagnostics import worst_lemmas, worst_lemmas_html, worst_lemmas_markdown
    from verbeval.agreement.figures import lemma_accuracy, lemma_metrics
    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.agreement.plots import plot_lemma_accuracy
    from verbeval.core.plots import save_figure

    stats = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in a.stats], ignore_index=True)
    models = a.models.split(",")
    data = lemma_accuracy(stats, models, n_bins=a.bins)
    metrics = lemma_metrics(data)
    write_csv(data, a.csv, float_format="%.10g")
    if a.metrics_json:
        write_json(a.metrics_json, metrics)
    save_figure(plot_lemma_accuracy(data, models, metrics, random=_random_in(stats)), a.out)
    worst = worst_lemmas(stats, a.worst, models)
    write_csv(worst, a.worst_csv, float_format="%.10g")
    if a.worst_md:
        write_text(a.worst_md, worst_lemmas_markdown(worst, random=_random_in(stats)))
    if a.worst_html:
        write_text(a.worst_html, worst_lemmas_html(worst, random=_random_in(stats)))
    log.info("lemma diagnostics of %d models -> %s, %s", len(models), ", ".join([a.csv, *a.out]), a.worst_csv)


def cmd_topk_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.diagnostics import ModelTopK, read_topk, select_rows, table3_html, table3_markdown, topk_table
    from verbeval.agreement.eligibility import single_token_ids
    from verbeval.core.io import write_csv, write_text
    from verbeval.core.models import load_tokenizer
    from verbeval.agreement.templates import render_context

    model_ids = _pairs(a.model, "--model")
    revisions = _pairs(a.revision, "--revision")
    gguf_files = _pairs(a.gguf_file, "--gguf-file")
    lemma_paths = _pairs(a.lemmas, "--lemmas")
    from verbeval.agreement.shardstore import manifest_random_init

    shard_paths: dict[str, list[str]] = {}
    random: set[str] = set()
    for item in a.shards:
        name, path = split_pair(item, "--shards", "PATH")
        shard_paths.setdefault(name, []).extend(_expand_shards([path]))
        if path.endswith(".json") and manifest_random_init(path):
            random.add(name)
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
        tok = load_tokenizer(model_id, revisions.get(name), gguf_files.get(name))
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
    write_text(a.md, table3_markdown(table, random))
    if a.html:
        write_text(a.html, table3_html(table, random))
    log.info("Table 3: %d contexts x %d models -> %s, %s", len(selected), len(models), a.csv, a.md)


def cmd_dvc_metrics(a: argparse.Namespace) -> None:
    import json

    from verbeval.agreement.dvc_views import split_metrics
    from verbeval.core.io import write_json

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

    from verbeval.agreement.dvc_views import wide_curves
    from verbeval.agreement.figures import CUTOFF_FIGURES
    from verbeval.core.io import write_csv

    spec = CUTOFF_FIGURES[a.figure]
    if a.side not in spec.sides:
        raise VerbevalError(f"figure {a.figure} has no {a.side}-p side (sides: {', '.join(spec.sides)})")
    curves = pd.read_csv(a.curves, keep_default_na=False, na_values=[""])
    tables = wide_curves(curves, side=a.side, models=a.models.split(","), groups=a.groups.split(","),
                         metrics=spec.metrics, source=a.curves)
    for group, table in tables.items():
        write_csv(table, Path(a.out_dir) / f"{group}.csv", float_format="%.10g")
    log.info("%s (%s-p): %d DVC plot data files -> %s", spec.stem, a.side, len(tables), a.out_dir)


def cmd_lexicon_forms(a: argparse.Namespace) -> None:
    check_outputs(a.out)
    import pandas as pd

    from verbeval.core.io import write_parquet
    from verbeval.agreement.lexicon_modes import form_table
    from verbeval.core.fasttok import load_text_tokenizer

    tok = load_text_tokenizer(a.model, a.revision, a.gguf_file, model_pin(a))  # tokenizers alone where safe: no torch import
    forms = form_table(pd.read_parquet(a.lexicon), pd.read_parquet(a.templates), tok)
    write_parquet(forms, a.out)
    lex = forms[forms["in_lexicon"]]
    log.info("%s: %d lexicon lemmas (%d single-token, %d scorable) + %d template-only verb pairs -> %s", a.model,
             len(lex), int(lex["single_token"].sum()), int(lex["scorable"].sum()), len(forms) - len(lex), a.out)


def cmd_lexicon_common(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_parquet
    from verbeval.agreement.lexicon_modes import common_pairs

    tables = [pd.read_parquet(path) for _, path in (split_pair(x, "--forms", "PATH") for x in a.forms)]
    common = common_pairs(tables)
    write_parquet(common, a.out)
    log.info("common: %d lexicon lemmas single-token in all %d models -> %s", int(common["in_lexicon"].sum()),
             len(tables), a.out)


def cmd_infer_forms(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.lexicon_modes import infer_forms_model

    check_outputs(a.manifest)
    templates, forms = pd.read_parquet(a.templates), pd.read_parquet(a.forms)
    groups = [g for g in a.groups.split(",") if g]
    lm, _ = _load_checked_lm(a, templates, groups, extra=forms_extra_tokens(forms))
    body = infer_forms_model(lm, templates, forms, groups, a.n_chunks,
                             a.manifest, batch_size=a.batch_size, prepend_bos=a.prepend_bos,
                             progress=not a.no_progress, allow_nonfinite=a.allow_nonfinite)
    t = body["timing"]
    log.info("%s: %d form shards -> %s; %d contexts computed in %.1f s (%.2f contexts/s)", a.model,
             len(body["shards"]), a.manifest, t["contexts"], t["compute_s"], t["contexts_per_s"])


def cmd_lexicon_modes(a: argparse.Namespace) -> None:
    import json

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    from verbeval.core.io import write_csv
    from verbeval.agreement.lexicon_modes import (META_KEY, consistency, group_summary, lemma_differences, lemma_scores,
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

    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.agreement.lexicon_modes import coverage_table, modes_table, to_latex, to_markdown, to_metrics

    models = a.models.split(",")
    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    groups = _run_groups(a.groups_file, summary["group"].unique())
    forms = {name: pd.read_parquet(path) for name, path in (split_pair(x, "--forms", "PATH") for x in a.forms)}
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


def _model_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that load a model (see :func:`_load_lm`)."""
    model_source_options(s, "of the language model")
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
    s.add_argument("--allow-nonfinite", action="store_true",
                   help="write contexts whose logits hold NaN or inf (their scores are NaN; each shard and the "
                        "manifest record n_nonfinite) instead of stopping (default: stop, naming the model and group)")


def register(add: Add) -> None:
    """The agreement pipeline: ``lexicon`` to ``topk-table``."""
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
    model_source_options(s, "(only its tokenizer is loaded)")
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
    s.add_argument("--prepend-bos", type=optional_bool, default=None,
                   help="causal LMs: true, false or auto (follow the tokenizer: BOS only if it adds one itself) "
                        "(default: auto)")
    random_init_option(s)
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
    s.add_argument("--top-cutoffs", type=float_list, required=True,
                   help="comma-separated top-p cutoffs (docs/metrics.md), e.g. 0.5,0.9,1")
    s.add_argument("--bottom-cutoffs", type=float_list, required=True,
                   help="comma-separated bottom-p cutoffs (docs/metrics.md), e.g. 0.5,0.01,1e-6")
    bootstrap_options(s)
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
    s.add_argument("--top-cutoffs", type=float_list, required=True,
                   help="comma-separated top-p cutoffs to plot (each must be in --summary)")
    s.add_argument("--bottom-cutoffs", type=float_list, required=True,
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
    s.add_argument("--gguf-file", action="append", default=[], metavar="NAME=FILE",
                   help="a model's GGUF file in its --model folder or repository (its tokenizer is read from it); "
                        "repeatable")
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


def register_dvc_views(add: Add) -> None:
    """``dvc-metrics`` and ``dvc-plot-data``: Table 2 and the cutoff figures as DVC metrics and plots."""
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


def register_lexicon_modes(add: Add) -> None:
    """The lexicon modes (single_token, all, common): ``lexicon-forms`` to ``lexicon-modes-table``."""
    s = add("lexicon-forms", cmd_lexicon_forms,
            "token ids of every lexicon and template verb form of a model, with its single-token flag",
            "Only the tokenizer is loaded. Run by the rule lexicon_forms (with agreement.multitoken.enabled).")
    model_source_options(s, "(only the tokenizer is loaded)")
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
    s.add_argument("--prepend-bos", type=optional_bool, default=None,
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
    bootstrap_options(s)
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
