"""The ``verbeval`` command line: one sub-command per workflow step.

Every Snakemake rule (and DVC stage) calls exactly one of these with explicit input and output
paths, so any step can also be run by hand. Errors in the input print one line and exit 1.
The parser is built by :func:`verbeval.commands.build_parser` (re-exported here); this module, the
process edge, chooses numpy's sort kernels before anything imports numpy and limits how long torch's idle OpenMP threads
spin (:mod:`verbeval.core.omp_wait`), parses and runs one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from verbeval.core import npy_sort, omp_wait

npy_sort.prefer_avx2_sort()  # first, before anything imports numpy: numpy's sort kernels on AMD Zen 4
omp_wait.limit_spinning()  # before anything imports torch: idle OpenMP threads spin briefly, then sleep

from verbeval.commands import build_parser  # noqa: E402
from verbeval.core import parent_death  # noqa: E402
from verbeval.core.clidoc import subparsers  # noqa: E402
from verbeval.core.cliutil import declared_outputs, interrupted_line, signature  # noqa: E402
from verbeval.core.errors import VerbevalError  # noqa: E402

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if parent_death.requested():  # a workflow job: end with its shell (verbeval.core.parent_death)
        parent_death.end_with_parent()
    # the declared outputs' states now: a Ctrl-C says which of them the command wrote
    outputs = {p: signature(p) for p in declared_outputs(subparsers(parser)[args.command], args)}
    try:
        args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: what the command started (pip, temporaries) was cleaned up on the way out
        print(interrupted_line(args.command, outputs), file=sys.stderr)
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
