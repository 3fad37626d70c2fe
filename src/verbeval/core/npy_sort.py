"""numpy's sort on AMD Zen 4: take the AVX2 kernels, not the AVX-512 ones (set before numpy loads).

numpy sorts with x86-simd-sort, whose AVX-512 partition step stores with ``vpcompress`` to memory,
an instruction that AMD's Zen 4 (CPU family 0x19 with AVX-512: EPYC Genoa/Bergamo, Ryzen 7000)
runs in microcode (AMD's optimisation guide; numpy/x86-simd-sort#6, numpy/numpy#32690). There,
``np.sort`` of the 256,000 probabilities of one context took 11.5 ms on the AVX-512 path and 2.1 ms
on the AVX2 one (docs/performance.md), and that sort is most of the per-context work after the
forward pass. numpy chooses its kernels once, when it is first imported, from the environment
variable ``NPY_DISABLE_CPU_FEATURES``; so the ``verbeval`` command (:mod:`verbeval.cli`) and the
warm queue's worker processes call :func:`prefer_avx2_sort` before anything imports numpy; on a
Zen 4 CPU it sets that variable to the AVX-512 feature groups of numpy >= 2.4. The sorted values are the same either way (a sort is exact); only the speed changes.

It does nothing when numpy is already imported, when ``NPY_DISABLE_CPU_FEATURES`` is already set
(set it, even to an empty string, to keep numpy's own choice), on other CPUs, or with a numpy older
than 2.4, whose feature groups have other names. Library users who import verbeval themselves are
not affected; they can set the variable in their own environment.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

#: numpy >= 2.4's CPU feature groups that hold the AVX-512 sort kernels
AVX512_GROUPS = "X86_V4 AVX512_ICL AVX512_SPR"
ENV = "NPY_DISABLE_CPU_FEATURES"


def is_zen4(cpuinfo: str) -> bool:
    """Whether the first processor of ``/proc/cpuinfo`` text is an AMD family 0x19 CPU with AVX-512."""
    block = cpuinfo.split("\n\n", 1)[0]
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == "25"
        and "avx512f" in fields.get("flags", "").split()
    )


def _numpy_at_least_2_4() -> bool:
    """From the installed numpy's ``version.py``, without importing numpy (nor importlib.metadata,
    25 ms of start-up)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return False
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return False
    m = re.search(r'^version\s*(?::\s*str\s*)?=\s*["\'](\d+)\.(\d+)', text, re.MULTILINE)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (2, 4)


def prefer_avx2_sort(
    environ: MutableMapping[str, str] = os.environ,
    cpuinfo: Path = Path("/proc/cpuinfo"),
    modules: Mapping[str, object] = sys.modules,
) -> bool:
    """Set ``NPY_DISABLE_CPU_FEATURES`` for a Zen 4 CPU (see the module); True when it was set."""
    if "numpy" in modules or ENV in environ:
        return False
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as fh:
            head = fh.read(16384)
    except OSError:
        return False
    if not is_zen4(head) or not _numpy_at_least_2_4():
        return False
    environ[ENV] = AVX512_GROUPS
    return True
