"""The ``verbeval`` command line: one sub-command per workflow step.

Every Snakemake rule (and DVC stage) calls exactly one of these with explicit input and output
paths, so any step can also be run by hand. Errors in the input print one line and exit 1.
Each study registers its own sub-commands (``verbeval/<study>/cli.py``); this module assembles
them in the order of ``verbeval --help`` and runs one.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from verbeval import model_queue, model_run
from verbeval.acquisition import cli as acquisition_cli
from verbeval.agreement import cli as agreement_cli
from verbeval.bench import cli as bench_cli
from verbeval.core import cli as core_cli
from verbeval.core import npy_sort  # noqa: F401  (first, before numpy loads: numpy's sort kernels on AMD Zen 4)
from verbeval.core.cliutil import TopHelpFormatter, subcommand_adder
from verbeval.core.errors import VerbevalError
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
    model_queue.register(add)  # run-queue
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: what the command started (pip, temporaries) was cleaned up on the way out
        print(f"verbeval {args.command}: interrupted", file=sys.stderr)
        return 130  # the shell's status for a command ended by SIGINT
    except VerbevalError as exc:
        print(f"verbeval {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # permission denied, disk full, missing file, read-only file system, ...
        from verbeval.core.io import describe_os_error

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
        ArrowException = ()  # type: ignore[assignment,misc]
    if isinstance(exc, (ArrowException, pd.errors.EmptyDataError, pd.errors.ParserError)):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"unreadable input: {first}"
    return None


if __name__ == "__main__":
    sys.exit(main())
