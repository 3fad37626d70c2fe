"""Benchmarks (docs/performance.md): workflow phases, aggregation, inference throughput and the
paper-style baseline.

Holds: runner (the benchmarks) and cli (the ``bench`` sub-command).

May import: ``verbeval.core`` and ``verbeval.agreement`` (it times the agreement pipeline); never the
top-level ``verbeval.cli``: the in-process command line it runs is passed in by the ``bench``
sub-command.
"""
