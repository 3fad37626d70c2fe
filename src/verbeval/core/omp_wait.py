"""OpenMP threads that spin briefly before they sleep: ``GOMP_SPINCOUNT=3000`` (set before torch loads).

torch's CPU kernels run on libgomp's thread pool (the CPU wheels ship ``libgomp``). A libgomp thread
that finishes a parallel region spins before it sleeps: by default 300,000 spins (``OMP_WAIT_POLICY``
unset), between the forward pass's many small regions and while the main thread does
single-threaded work (the float64 post-processing, the tokenizer, the shard writer). On a machine
whose cores are all busy that spinning takes CPU from the other jobs and from the job's own
threads: the quick BERT's ``run-model`` (2 threads, load 6-10) took 14-16 CPU-s with the default and
10.5 with sleeping threads (``OMP_WAIT_POLICY=PASSIVE``), its contexts 11-17 s of wall against 4.4 s.
Sleeping at once is slower on an idle machine, though (each region then wakes a sleeping thread):
SmolLM2-135M's 1,800 contexts took 15.7-15.9 s passive against 13.4-13.6 s by default. 3,000
spins keep the idle machine's speed (13.5-13.9 s) and most of the saving (36-37 CPU-s against
41; passive 39); 1,000 spins were as slow as passive (docs/performance.md). The numbers are the
same either way: the spin count changes how idle threads wait, not the threads' count nor how work
is split.

:func:`limit_spinning` is called by the ``verbeval`` command (:mod:`verbeval.cli`) before anything
imports torch. It does nothing when ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is already set (set
either to keep your own choice, e.g. ``OMP_WAIT_POLICY=ACTIVE``) or when torch is already imported
(libgomp read the environment when it loaded). Library users who import verbeval themselves are not
affected. An OpenMP runtime other than libgomp ignores the variable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

SPIN_ENV = "GOMP_SPINCOUNT"
POLICY_ENV = "OMP_WAIT_POLICY"
#: libgomp's spins before an idle thread sleeps (its default: 300,000)
SPINS = "3000"


def limit_spinning(
    environ: MutableMapping[str, str] | None = None, modules: Mapping[str, object] | None = None
) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPINS` in ``environ`` (default ``os.environ``) unless it or
    ``OMP_WAIT_POLICY`` is set or torch is already in ``modules`` (default ``sys.modules``); whether
    it was set."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if SPIN_ENV in environ or POLICY_ENV in environ or "torch" in modules:
        return False
    environ[SPIN_ENV] = SPINS
    return True
