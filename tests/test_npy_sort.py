"""verbeval.core.npy_sort: numpy's AVX2 sort kernels on AMD Zen 4, chosen before numpy loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from verbeval.core import npy_sort as _npy_sort

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu vme avx2 avx512f avx512dq avx512bw

processor\t: 1
vendor_id\t: AuthenticAMD
"""
ZEN3 = ZEN4.replace(" avx512f avx512dq avx512bw", "")
ZEN5 = ZEN4.replace("cpu family\t: 25", "cpu family\t: 26")
INTEL = ZEN4.replace("AuthenticAMD", "GenuineIntel").replace("cpu family\t: 25", "cpu family\t: 6")


@pytest.mark.parametrize(("text", "want"), [(ZEN4, True), (ZEN3, False), (ZEN5, False), (INTEL, False), ("", False)])
def test_is_zen4_reads_vendor_family_and_avx512(text: str, want: bool) -> None:
    assert _npy_sort.is_zen4(text) is want


def test_prefer_avx2_sort_sets_the_variable_only_on_zen4_before_numpy_and_never_over_the_users(tmp_path: Path) -> None:
    zen4, intel = tmp_path / "zen4", tmp_path / "intel"
    zen4.write_text(ZEN4)
    intel.write_text(INTEL)
    env: dict[str, str] = {}
    assert _npy_sort.prefer_avx2_sort(env, zen4, modules={}) is True
    assert env == {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
    kept = {"NPY_DISABLE_CPU_FEATURES": ""}  # the user's own choice, even empty, stays
    assert _npy_sort.prefer_avx2_sort(kept, zen4, modules={}) is False and kept == {"NPY_DISABLE_CPU_FEATURES": ""}
    other: dict[str, str] = {}
    assert _npy_sort.prefer_avx2_sort(other, intel, modules={}) is False and other == {}
    assert _npy_sort.prefer_avx2_sort(other, zen4, modules={"numpy": object()}) is False and other == {}
    assert _npy_sort.prefer_avx2_sort(other, tmp_path / "missing", modules={}) is False and other == {}


def test_numpy_version_is_read_without_importing_numpy() -> None:
    major, minor = (int(x) for x in np.__version__.split(".")[:2])
    assert _npy_sort._numpy_at_least_2_4() is ((major, minor) >= (2, 4))


def test_the_command_line_sets_it_before_anything_imports_numpy() -> None:
    """Importing ``verbeval.cli`` calls :func:`prefer_avx2_sort` once, before anything imports numpy
    (importing npy_sort alone sets nothing)."""
    # a process: the import order from a fresh start (numpy is long imported in pytest's interpreter)
    code = (
        "import sys\n"
        "from verbeval.core import npy_sort\n"
        "calls = []\n"
        "npy_sort.prefer_avx2_sort = lambda: calls.append('numpy' in sys.modules)\n"
        "print(calls)\n"
        "import verbeval.cli\n"
        "print(calls)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[False]"]


def test_a_queue_worker_sets_it_before_it_imports_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A post-worker of ``run-queue`` (a spawned process) chooses the kernels as it starts."""
    from verbeval import model_queue

    calls = []
    monkeypatch.setattr(_npy_sort, "prefer_avx2_sort", lambda: calls.append("set"))
    monkeypatch.setattr(model_queue, "_end_with_parent", lambda parent: calls.append(parent))
    model_queue._init_worker(30, 12345)
    assert calls == [12345, "set"]


_STATS = """
import json, sys, numpy as np, torch
from verbeval.agreement.engine.kernels import form_statistics, probabilities
g = torch.Generator().manual_seed(5)
logits = torch.randn(6, 50_000, generator=g) * 3.0
logits[1] = logits[1].bfloat16().float()
forms = torch.randperm(50_000, generator=g)[:500]
out = form_statistics(probabilities(logits), forms)
print(json.dumps([t.numpy().tobytes().hex() for t in out]))
"""


def test_form_statistics_are_bit_identical_with_and_without_numpys_avx512_kernels() -> None:
    """The kernel numpy picks only changes the speed: the statistics' bytes are the same."""
    runs = []
    for setting in ("", _npy_sort.AVX512_GROUPS):
        # a process each: numpy reads NPY_DISABLE_CPU_FEATURES once, when it is first imported
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": setting}
        out = subprocess.run([sys.executable, "-c", _STATS], capture_output=True, text=True, check=True, env=env)
        runs.append(json.loads(out.stdout))
    assert runs[0] == runs[1]
    assert len(bytes.fromhex(runs[0][1])) == 6 * 500 * 8
    assert np.frombuffer(bytes.fromhex(runs[0][0]), dtype=np.float64).min() > 0
