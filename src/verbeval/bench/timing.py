"""Timing helpers of the benchmarks: best-of-N timing of a call (device synchronised), a
subprocess's wall time, the load average and a process's peak memory."""

from __future__ import annotations

import math
import os
import platform
import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB.

    Linux: ``VmHWM`` of ``/proc/self/status`` (the peak of this process's own memory; unlike
    ``ru_maxrss`` it does not inherit the parent's peak across fork/exec); elsewhere ``ru_maxrss``.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 2**20 if platform.system() == "Darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def load_avg() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (figures are comparable only at similar load)."""
    return [round(x, 2) for x in os.getloadavg()]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_time(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` timed calls of ``fn`` after one warm-up call, the
    device synchronised around each."""
    fn()
    sync(device)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def process_seconds(argv: Sequence[str]) -> float:
    """Wall time of running ``argv`` as a subprocess to its end (its output discarded)."""
    t0 = time.perf_counter()
    subprocess.run(list(argv), check=True, capture_output=True)
    return time.perf_counter() - t0
