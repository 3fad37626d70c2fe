"""Timing helpers of the benchmarks: best-of-N timing of a call (device synchronised), a
subprocess's wall time, the load average (and a warning when it exceeds the cores), a figure that
cannot be true refused as "unreliable", and a process's peak memory."""

from __future__ import annotations

import math
import os
import platform
import resource
import subprocess
import sys
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


def load_1min() -> float:
    """The machine's 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def load_before(part: str) -> float:
    """The 1-minute load before the timed part ``part``, with a warning on stderr when it exceeds the
    machine's cores: the part's figures then measure the other work as much as verbeval."""
    load, cores = load_1min(), os.cpu_count() or 1
    if load > cores:
        print(
            f"warning: load {load} exceeds the {cores} cores before the timed part {part}: its figures are not "
            "comparable with those of an idle machine",
            file=sys.stderr,
            flush=True,
        )
    return load


def unreliable(load_start: float, load_end: float) -> str:
    """What a figure that cannot be true is reported as, with the load around its measurement."""
    return f"unreliable (load {load_start} at start, {load_end} at end)"


def possible(
    value: float, *, load_start: float, load_end: float, lowest: float | None = None, highest: float | None = None
) -> float | str:
    """``value`` when it can be true (``lowest <= value <= highest``, each bound optional), else
    :func:`unreliable`: a ratio above 1 whose numerator includes the denominator's work (a pipeline
    faster than its own forward pass) or a negative duration is a measurement spoiled by other
    work on the machine, and is never reported as a number."""
    if (lowest is not None and value < lowest) or (highest is not None and value > highest) or math.isnan(value):
        return unreliable(load_start, load_end)
    return value


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
