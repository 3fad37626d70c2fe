"""The ``verbeval`` parser: every sub-command, registered by its study (:func:`build_parser`).

Each study registers its own sub-commands (``verbeval/<study>/cli.py``, ``model_run``,
``queue_cli``); this module assembles them in the order of ``verbeval --help``. The command line
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
from verbeval.core.cliutil import TopHelpFormatter, subcommand_adder
from verbeval.simverb import cli as simverb_cli
from verbeval.veridicality import cli as veridicality_cli
from verbeval.workflow import cli as workflow_cli

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


def build_parser() -> argparse.ArgumentParser:
    from verbeval import __version__

    p = argparse.ArgumentParser(
        prog="verbeval", description=DESCRIPTION, epilog=EPILOG, formatter_class=TopHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"verbeval {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors (stderr)")
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        title="sub-commands (the rule that runs each: docs/workflow.md)",
    )
    add = subcommand_adder(sub)
    core_cli.register_fetch(add)  # fetch, pip-model
    agreement_cli.register(add)  # lexicon ... topk-table
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
    core_cli.register_check_config(add)  # check-config
    bench_cli.register(add)  # bench
    bench_cli.register_hashes(add)  # bench-hashes
    workflow_cli.register_docs_cli(add, build_parser)  # docs-cli
    workflow_cli.register_docs_config(add)  # docs-config
    return p
