"""Sub-commands of the veridicality study: NLI predictions, Table 5 and the scatter, counterfactuals and KL."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

from verbeval.core.cliutil import Add, check_outputs, random_init_option
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import INFERENCE_THREADS, MODEL_NAME, Input, Option, Output, add_options
from verbeval.veridicality.steps import (
    VERIDICALITY_COUNTERFACTUALS,
    VERIDICALITY_KL,
    VERIDICALITY_PREDICT,
    VERIDICALITY_TABLE,
)

log = logging.getLogger("verbeval")


def _nli_settings(a: argparse.Namespace, branch: str) -> dict[str, object]:
    """What an NLI branch's outputs depend on besides their input file (the key of their stamp)."""
    from verbeval import __version__
    from verbeval.core.models import model_fingerprint

    source = ModelSource.from_options(a)
    return {
        "branch": branch,
        "verbeval": __version__,
        "model": source.id,
        "revision": source.revision,
        "model_version": model_fingerprint(source),
        "batch_size": a.batch_size,
    }


def _run_branch(outputs: list[str], key: str, what: str, compute: Callable[[], None]) -> None:
    """``compute`` (which writes ``outputs``) unless their stamp shows them up to date for ``key``."""
    from verbeval.core import stamps

    if stamps.is_current(outputs, key):
        log.info("%s: %s up to date (same inputs and settings): kept", what, ", ".join(outputs))
        return
    stamps.clear_stamp(outputs)
    compute()
    stamps.write_stamp(outputs, key)


def _predict_originals(a: argparse.Namespace, nli: tuple[Any, Any, Any]) -> None:
    from verbeval.core.io import write_parquet
    from verbeval.core.provenance import resolve_random_init, tag_frame
    from verbeval.veridicality.data import read_dataset
    from verbeval.veridicality.predict import model_predictions

    data = read_dataset(a.data)
    preds = model_predictions(data, *nli[:2], a.batch_size, nli[2])
    write_parquet(tag_frame(preds, resolve_random_init(a.model, a.random_init)), a.out)
    log.info("veridicality %s: %d items -> %d predictions -> %s", a.model, len(data), len(preds), a.out)


def _predict_counterfactuals(a: argparse.Namespace, pairs_path: str, out: str, nli: tuple[Any, Any, Any]) -> None:
    import pandas as pd

    from verbeval.core.io import write_parquet
    from verbeval.veridicality.predict import score_nli

    pairs = pd.read_parquet(pairs_path)
    model, tok, device = nli
    probs = score_nli(model, tok, pairs["premise"].tolist(), pairs["hypothesis"].tolist(), a.batch_size, device)
    res = pd.concat([pairs[["manipulation", "index", "task", "signature", "environment", "sample"]], probs], axis=1)
    write_parquet(res, out)
    log.info("counterfactual predictions of %s: %d pairs -> %s", a.model, len(res), out)


def _load_nli(a: argparse.Namespace) -> tuple[Any, Any, Any]:
    import torch

    from verbeval.veridicality.predict import load_nli

    torch.set_num_threads(a.threads)
    return load_nli(ModelSource.from_options(a), a.device)


def cmd_veridicality_predict(a: argparse.Namespace) -> None:
    check_outputs(a.out, a.counterfactual_out)
    from verbeval.veridicality.data import PSEUDO_MODEL

    if bool(a.counterfactual_pairs) != bool(a.counterfactual_out):
        raise VerbevalError("--counterfactual-pairs and --counterfactual-out go together")
    if a.model == PSEUDO_MODEL:
        if a.counterfactual_pairs:
            raise VerbevalError(
                f"{PSEUDO_MODEL} has only the released probabilities of the original sentences; "
                "counterfactuals need a real NLI model"
            )
        from verbeval.core.io import write_parquet
        from verbeval.veridicality.data import pseudo_model_predictions, read_dataset

        data = read_dataset(a.data)
        preds = pseudo_model_predictions(data)
        write_parquet(preds, a.out)
        log.info("veridicality %s: %d items -> %d predictions -> %s", a.model, len(data), len(preds), a.out)
        return
    from verbeval.core.stamps import branch_key

    nli = _load_nli(a)  # once for both branches
    _run_branch(
        [a.out],
        branch_key(_nli_settings(a, "predictions"), [a.data]),
        f"veridicality {a.model}",
        lambda: _predict_originals(a, nli),
    )
    if a.counterfactual_pairs:
        _run_branch(
            [a.counterfactual_out],
            branch_key(_nli_settings(a, "counterfactuals"), [a.counterfactual_pairs]),
            f"counterfactuals {a.model}",
            lambda: _predict_counterfactuals(a, a.counterfactual_pairs, a.counterfactual_out, nli),
        )


def cmd_veridicality_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv, write_text
    from verbeval.core.provenance import display_name, frame_random, with_random_init
    from verbeval.veridicality.report import plot_scatter, to_latex, to_markdown
    from verbeval.veridicality.statistics import signature_table

    preds = pd.read_parquet(a.predictions)
    random = frame_random(preds)
    name = display_name(a.model_name, random)  # a random model says so in every title
    t = signature_table(preds)
    write_csv(with_random_init(t, random), a.csv, float_format="%.6f")
    write_text(a.md, to_markdown(t, name))
    write_text(a.tex, to_latex(t, name))
    if a.scatter_csv:
        from verbeval.veridicality.report import scatter_data

        write_csv(with_random_init(scatter_data(preds), random), a.scatter_csv, float_format="%.6f")
    if a.figure:
        from verbeval.core.plots import save_figure

        save_figure(plot_scatter(preds, name), a.figure)
    log.info("veridicality table of %s (%d rows) -> %s, %s, %s", a.model_name, len(t), a.csv, a.md, a.tex)


def cmd_veridicality_counterfactuals(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_csv, write_parquet
    from verbeval.veridicality.counterfactual import build_pairs, coverage
    from verbeval.veridicality.data import read_dataset

    data = read_dataset(a.data)
    pairs, unhandled = build_pairs(data, samples=a.samples, seed=a.seed)
    cov = coverage(data, pairs, unhandled)
    write_parquet(pairs, a.pairs)
    write_csv(unhandled, a.unhandled)
    write_csv(cov, a.coverage)
    log.info(
        "counterfactuals: %d pairs, %d unhandled (item, environment, manipulation) -> %s, %s",
        len(pairs),
        len(unhandled),
        a.pairs,
        a.unhandled,
    )


def cmd_veridicality_counterfactual_predict(a: argparse.Namespace) -> None:
    check_outputs(a.out)
    from verbeval.veridicality.data import PSEUDO_MODEL

    if a.model == PSEUDO_MODEL:
        raise VerbevalError(
            f"{PSEUDO_MODEL} has only the released probabilities of the original sentences; "
            "counterfactuals need a real NLI model"
        )
    _predict_counterfactuals(a, a.pairs, a.out, _load_nli(a))


def cmd_veridicality_kl(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.core.io import write_csv, write_text
    from verbeval.core.provenance import display_name, frame_random, with_random_init
    from verbeval.veridicality.kl_tables import attach_kl, kl_latex, kl_markdown, table7, table8

    predictions = pd.read_parquet(a.predictions)
    random = frame_random(predictions)
    name = display_name(a.model_name, random)
    scored = attach_kl(predictions, pd.read_parquet(a.counterfactuals))
    for table, title, (csv_path, md_path, tex_path) in (
        (table7(scored), f"Table 7 (KL, verb replacements), {name}", a.table7),
        (table8(scored), f"Table 8 (KL, complement type swap), {name}", a.table8),
    ):
        write_csv(with_random_init(table, random), csv_path, float_format="%.6g")
        write_text(md_path, kl_markdown(table, title))
        write_text(tex_path, kl_latex(table, title))
    log.info("KL tables of %s from %d manipulated pairs -> %s, %s", a.model_name, len(scored), a.table7[0], a.table8[0])


def _nli_options(s: argparse.ArgumentParser) -> None:
    """Options of the commands that run an NLI classifier (the settings: veridicality-predict's)."""
    add_options(
        s,
        Option("--revision", "hub revision: branch, tag or commit (default: the hub's default branch)"),
        *VERIDICALITY_PREDICT.settings,
        INFERENCE_THREADS,
    )


def register(add: Add) -> None:
    """NLI predictions and the per-signature table: ``veridicality-predict``, ``veridicality-table``."""
    s = add(
        "veridicality-predict",
        cmd_veridicality_predict,
        "NLI probabilities on the verb veridicality data (a hub/local NLI model or ross-pavlick-2019-bert)",
        "Both environments (positive, negative) of every item (docs/veridicality.md); with --counterfactual-pairs "
        "the manipulated pairs too, from the same load. Each output is kept when its stamp shows its input and "
        "settings unchanged. Run by the rules veridicality_predict and veridicality_released, one job per model.",
    )
    add_options(
        s,
        VERIDICALITY_PREDICT.file("--data"),
        Option(
            "--model",
            "NLI classifier (hub id or path), or ross-pavlick-2019-bert for the released BERT probabilities",
            required=True,
        ),
    )
    _nli_options(s)
    random_init_option(s)
    add_options(
        s,
        VERIDICALITY_PREDICT.file("--out"),
        VERIDICALITY_PREDICT.file("--counterfactual-pairs"),
        VERIDICALITY_PREDICT.file("--counterfactual-out"),
    )

    s = add(
        "veridicality-table",
        cmd_veridicality_table,
        "per-signature accuracy and correlations (CSV, Markdown, LaTeX) and the human-vs-model scatter",
        "Run by the rule veridicality_table, one job per model.",
    )
    add_options(
        s,
        VERIDICALITY_TABLE.file("--predictions"),
        MODEL_NAME.but(help="model name in the tables and the figure"),
        *VERIDICALITY_TABLE.outputs,
    )


def register_counterfactuals(add: Add) -> None:
    """The manipulated pairs and their KL tables: ``veridicality-counterfactuals`` to ``veridicality-kl``."""
    s = add(
        "veridicality-counterfactuals",
        cmd_veridicality_counterfactuals,
        "manipulated veridicality pairs (verb replacements, to/that swaps) and the sentences left unhandled",
        "Section 6.3 of Ross & Pavlick 2019 (docs/veridicality.md). Run by the rule veridicality_counterfactuals.",
    )
    VERIDICALITY_COUNTERFACTUALS.add_options(s)

    s = add(
        "veridicality-counterfactual-predict",
        cmd_veridicality_counterfactual_predict,
        "NLI probabilities of the manipulated pairs (a real NLI model)",
        "The workflow runs this as part of veridicality-predict (--counterfactual-pairs), from the same load.",
    )
    add_options(
        s,
        Input("--pairs", "manipulated pairs (verbeval veridicality-counterfactuals --pairs)"),
        Option("--model", "NLI classifier (hub id or local path)", required=True),
    )
    _nli_options(s)
    add_options(s, Output("--out", "output: NLI probabilities per manipulated pair (parquet)"))

    s = add(
        "veridicality-kl",
        cmd_veridicality_kl,
        "KL(original || manipulated) tables 7 and 8 (CSV, Markdown, LaTeX)",
        "Run by the rule veridicality_kl, one job per real NLI model.",
    )
    add_options(
        s, *VERIDICALITY_KL.inputs, MODEL_NAME.but(help="model name in the table titles"), *VERIDICALITY_KL.outputs
    )
