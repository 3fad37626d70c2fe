"""The ``verbeval`` parser: every sub-command, registered by its study (:func:`build_parser`).

Each study registers its own sub-commands (``verbeval/<study>/cli.py``, ``model_run``,
``queue_cli``), each declaring its group (``add(..., group=...)``: a command to run yourself, a
workflow step or a maintainers' tool); this module assembles them, and ``verbeval --help`` lists
them by group, in this order within each. The command line
(:mod:`verbeval.cli`, the process edge) parses with it and runs one; the warm queue's command line
(:mod:`verbeval.queue_cli`) is handed :func:`build_parser` to parse its queued steps once into typed
steps.
"""

from __future__ import annotations

import argparse

from verbeval import model_run, queue_cli
from verbeval.acquisition import cli as acquisition_cli
from verbeval.agreement import cli as agreement_cli
from verbeval.bench import cli as bench_cli
from verbeval.core import cli as core_cli
from verbeval.core.clidoc import list_by_group
from verbeval.core.cliutil import TopHelpFormatter, subcommand_adder
from verbeval.multilingual import cli as multilingual_cli
from verbeval.simverb import cli as simverb_cli
from verbeval.veridicality import cli as veridicality_cli
from verbeval.workflow import cli as workflow_cli

DESCRIPTION = """\
verbeval: how language models handle English verbs (subject-verb agreement scored as TSE, EW
and MW after Newman et al. 2021; SimVerb-3500; verb veridicality after Ross & Pavlick 2019).

A Snakemake workflow runs the evaluation, each of its steps one sub-command below. Run it from
the repository root; first the quick start (a few minutes on a CPU, writes results-quick/):

  snakemake --cores 4 --configfile config/quick.yaml

then export a model's results in the Every Eval Ever schema (docs/export.md: WHEEL):

  verbeval export --format every-eval-ever --model-name smollm2-135m --groups all \\
    --templates results-quick/agreement/templates.parquet \\
    --manifest results-quick/agreement/smollm2-135m/shards/manifest.json \\
    --results results-quick/agreement/smollm2-135m --configfile config/quick.yaml \\
    --schemas WHEEL --out-dir results-quick/export

The paper's four models, on a GPU: snakemake --cores 8 --resources gpu=1 (README.md).
`verbeval COMMAND --help` lists a command's options."""

EPILOG = """\
documentation (in the repository):
  docs/workflow.md  every sub-command, the rule that runs it, its inputs and outputs
  docs/config.md    every configuration key of the workflow
  docs/metrics.md   the metric definitions (TSE, EW, MW, cutoffs)
  docs/export.md    the export and its checks"""


def build_parser() -> argparse.ArgumentParser:
    from verbeval import __version__

    p = argparse.ArgumentParser(
        prog="verbeval", description=DESCRIPTION, epilog=EPILOG, formatter_class=TopHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"verbeval {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = subcommand_adder(sub)
    core_cli.register_check_config(add)  # check-config
    core_cli.register_fetch(add)  # fetch, pip-model
    agreement_cli.register(add)  # lexicon ... topk-table, compare ... export
    acquisition_cli.register(add)  # lemma-contexts, acquisition, acquisition-index
    model_run.register(add)  # run-model
    queue_cli.register(add, build_parser)  # run-queue
    core_cli.register_tools(add)  # mirror, tiny-model
    acquisition_cli.register_toy(add)  # train-toy
    agreement_cli.register_dvc_views(add)  # dvc-metrics, dvc-plot-data
    workflow_cli.register_dvc_yaml(add)  # dvc-yaml
    workflow_cli.register_report_table(add)  # report-table
    veridicality_cli.register(add)  # veridicality-predict, veridicality-table
    simverb_cli.register(add)  # simverb-score, simverb-table, simverb-join
    agreement_cli.register_lexicon_modes(add)  # lexicon-forms ... lexicon-modes-table
    veridicality_cli.register_counterfactuals(add)  # veridicality-counterfactuals ... veridicality-kl
    multilingual_cli.register(add)  # clams-lexicon, clams-templates, clams-score, clams-table
    bench_cli.register(add)  # bench
    bench_cli.register_hashes(add)  # bench-hashes
    workflow_cli.register_docs_cli(add, build_parser)  # docs-cli
    workflow_cli.register_docs_config(add)  # docs-config
    list_by_group(p)  # the help's sections: each command's group (add(..., group=...)), in this order within it
    return p
