"""A process that ends when the process that started it ends (:func:`end_with_parent`).

A job's command runs under the job's shell (``bash -c 'set -euo pipefail; verbeval run-queue ...'``).
When that shell is killed (``kill -9``, a scheduler that stops the shell only), the command is
handed to init and runs on, writing into the results after Snakemake has exited. Two mechanisms end
it instead:

* on Linux, the kernel sends a signal when the parent dies (``prctl(PR_SET_PDEATHSIG)``, set at
  start-up), with a check that the parent is still the one that started the process (it may have
  died before the call: then nobody would send the signal);
* everywhere, a daemon thread that polls ``os.getppid()`` every :data:`POLL_S` seconds and sends the
  signal itself when it changes (the process was handed to init or a subreaper).

The workflow asks every ``verbeval`` command it starts for this through :data:`ENV` (set by
``workflow/rules/common.smk``; :func:`verbeval.cli.main` reads it): a command run by hand is left
alone, so ``verbeval ... &`` or ``disown`` still outlives its shell. ``run-queue``'s post workers end
with the queue process (SIGKILL) however it was started (:mod:`verbeval.model_queue`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

#: the environment variable that binds a ``verbeval`` command to its parent ("1"; the workflow sets it)
ENV = "VERBEVAL_END_WITH_PARENT"
#: ``prctl``'s option: the signal the kernel sends this process when its parent (thread) dies
PR_SET_PDEATHSIG = 1
#: seconds between two looks at the parent's id
POLL_S = 0.5


def requested() -> bool:
    """Whether the environment asks this command to end with its parent (:data:`ENV` is "1")."""
    return os.environ.get(ENV) == "1"


def end_with_parent(signum: int = signal.SIGTERM, parent: int | None = None, kernel: bool = True) -> None:
    """Send this process ``signum`` when ``parent`` (default: the current parent) dies, however it
    dies. ``kernel``: on Linux also ``PR_SET_PDEATHSIG`` (immediate; sent when the parent *thread*
    that started this process ends: call it only where that thread lives as long as its process);
    the polling thread runs in any case. Python's default for SIGTERM ends the process at once; a
    handler the command installs (pip's clean-up) runs first."""
    parent = os.getppid() if parent is None else parent
    if kernel and sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl: the thread below
            pass
    if os.getppid() != parent:  # the parent died before the call: nobody sends the signal
        os.kill(os.getpid(), signum)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        os.kill(os.getpid(), signum)

    threading.Thread(target=watch, name="verbeval-parent-watch", daemon=True).start()
