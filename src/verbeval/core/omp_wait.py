"""OpenMP threads that sleep when idle: ``OMP_WAIT_POLICY=PASSIVE`` (set before torch loads).

torch's CPU kernels run on libgomp's thread pool. By default (no ``OMP_WAIT_POLICY``) a libgomp
thread that finishes a parallel region spins, burning its core, before it sleeps; between the
forward pass's many small regions, and while the main thread does single-threaded work (the
float64 post-processing, the tokenizer, the shard writer), the pool's other threads spin. On a
machine whose cores are all busy (the quick start: two model jobs and the small jobs on 2 cores)
that spinning takes CPU from the other jobs and from the model job's own threads: the quick BERT's
``run-model`` took 14-16 CPU-s with spinning threads and 10.5 with sleeping ones, its forward
passes 11-17 s against 4.4 s of wall (2 threads, load 6-10; docs/performance.md). The numbers are
the same either way: the policy changes how idle threads wait, not the threads' count nor how
work is split.

:func:`prefer_passive_wait` is called by the ``verbeval`` command (:mod:`verbeval.cli`) before
anything imports torch. It does nothing when ``OMP_WAIT_POLICY`` is already set (set it, e.g. to
``ACTIVE``, to keep spinning threads) or when torch is already imported (libgomp read the
environment when it loaded). Library users who import verbeval themselves are not affected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

ENV = "OMP_WAIT_POLICY"


def prefer_passive_wait(
    environ: MutableMapping[str, str] | None = None, modules: Mapping[str, object] | None = None
) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` (default ``os.environ``) unless it is set or
    torch is already in ``modules`` (default ``sys.modules``); whether it was set."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if ENV in environ or "torch" in modules:
        return False
    environ[ENV] = "PASSIVE"
    return True
