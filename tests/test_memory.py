"""Memory bounded by the work (issue 34): verbeval.core.memory and the batch sizes of its callers.

The fitting arithmetic runs on planted free-memory figures; the callers (run_contexts, the
multi-token forms, the SimVerb vectors) on tiny models with planted figures; one subprocess runs the
real scenario, a batch size of 100000 on a tiny GPT-2 under an address-space limit.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import verbeval.agreement.engine.forward_pass as forward_pass
import verbeval.agreement.lexicon_modes.multitoken as multitoken
from tiny_cache import tiny_model
from verbeval.agreement.engine.encoding import Encoded, encode_contexts
from verbeval.agreement.engine.forward_pass import run_contexts
from verbeval.agreement.engine.shards import ChunkResult
from verbeval.core import memory
from verbeval.core.errors import VerbevalError
from verbeval.core.memory import (
    MB,
    FreeMemory,
    ModelShape,
    available_bytes,
    cgroup_headroom,
    cpu_free,
    fit_batch_size,
    forward_bytes,
    is_oom,
    model_shape,
    per_context_bytes,
    rlimit_headroom,
)
from verbeval.core.models import LoadedModel, load_model

#: the CPU allocator's message for a tensor that cannot be allocated (torch 2.x, Linux)
CPU_ALLOCATOR_MESSAGE = (
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
    "you tried to allocate 40205600000 bytes. Error code 12 (Cannot allocate memory)"
)
#: eight contexts of different lengths (one batch of 8 holds them all)
LEFTS = [
    "the author",
    "the pilots that the guard likes",
    "the farmer next to the guards",
    "the mechanic",
    "the dancers in the big old theatre",
    "the customer who the officers like",
    "the ministers",
    "the skaters that the senators who the pilot likes admire near the old farmhouse",
]
RESULT_FIELDS = ("prob", "cum_above", "cum_below", "topk_ids", "topk_probs", "tse_p", "nonfinite")


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the first cut of a request warned about (the module warns once per process)."""
    monkeypatch.setattr(memory, "_WARNED", set())


@pytest.fixture(scope="module")
def gpt2_path(tokenizer_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory, tokenizer_path("gpt2"), "gpt2", tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="module")
def gpt2(gpt2_path: Path) -> LoadedModel:
    return load_model(str(gpt2_path), device="cpu")


def _inputs(lm: LoadedModel) -> tuple[Encoded, np.ndarray, np.ndarray, np.ndarray]:
    enc = encode_contexts(lm, pd.DataFrame({"left": LEFTS, "right": [""] * len(LEFTS)}))
    forms = np.asarray(lm.tokenizer([" runs", " run", " is", " are"], add_special_tokens=False)["input_ids"]).reshape(
        -1
    )
    return enc, forms, np.arange(len(LEFTS)), np.tile(forms[:2], (len(LEFTS), 1))


def _run(lm: LoadedModel, batch_size: int) -> ChunkResult:
    enc, forms, row_ctx, tse = _inputs(lm)
    return run_contexts(lm, enc, forms, row_ctx, tse, batch_size=batch_size, progress=False)


def _assert_same(a: ChunkResult, b: ChunkResult) -> None:
    for name in RESULT_FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def _cuts(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages verbeval.core.memory logged (transformers logs its own warnings beside them)."""
    return [r.getMessage() for r in caplog.records if r.name == "verbeval.core.memory"]


def _one_context_bytes(lm: LoadedModel) -> int:
    enc = _inputs(lm)[0]
    return per_context_bytes(
        model_shape(lm.model), max(len(s) for s in enc.ids), vocab_entry_bytes=forward_pass.CPU_VOCAB_BYTES
    )


# --------------------------------------------------------------------------- fitting arithmetic


def test_fit_batch_size_cuts_to_what_fits(caplog: pytest.LogCaptureFixture) -> None:
    free = FreeMemory(100 * MB, "MemAvailable")
    with caplog.at_level(logging.WARNING, logger="verbeval.core.memory"):
        # 80% of 100 MB holds 26 items of 3 MB
        assert fit_batch_size(100000, 1000, 3 * MB, free, what="tiny-gpt2") == 26
        assert fit_batch_size(100000, 1000, 3 * MB, free, what="tiny-gpt2") == 26  # warned once only
        assert fit_batch_size(100000, 1000, 1 * MB, free, what="tiny-gpt2") == 80
    assert _cuts(caplog) == [
        "tiny-gpt2: batch size 100000 cut to 26: about 3.0 MB per context, 100 MB free (MemAvailable)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="verbeval.core.memory"):
        assert fit_batch_size(100000, 10, 3 * MB, free, what="tiny-gpt2") == 10  # never more than the contexts
        assert fit_batch_size(8, 1000, 3 * MB, free, what="tiny-gpt2") == 8  # fits as asked
        assert fit_batch_size(100000, 0, 3 * MB, free, what="tiny-gpt2") == 1
        assert fit_batch_size(0, 5, 3 * MB, free, what="tiny-gpt2") == 1
        assert fit_batch_size(100000, 500, 3 * MB, None, what="tiny-gpt2") == 500  # free memory unknown
        assert fit_batch_size(100000, 500, 0, free, what="tiny-gpt2") == 500
        # more than 80% of what is free, less than all of it: one at a time
        assert fit_batch_size(64, 500, 90 * MB, free, what="tiny-gpt2") == 1
        assert fit_batch_size(64, 500, 4 * MB, FreeMemory(3 * 1024 * MB, "cuda:0"), what="m", unit="verb") == 64
        assert fit_batch_size(1024, 5000, 4 * MB, FreeMemory(3 * 1024 * MB, "cuda:0"), what="m", unit="verb") == 614
    assert _cuts(caplog) == [
        "tiny-gpt2: batch size 64 cut to 1: about 90.0 MB per context, 100 MB free (MemAvailable)",
        "m: batch size 1024 cut to 614: about 4.0 MB per verb, 3072 MB free (cuda:0)",
    ]


def test_fit_batch_size_stops_when_one_item_cannot_fit() -> None:
    with pytest.raises(VerbevalError) as err:
        fit_batch_size(
            100000,
            10,
            3 * MB,
            FreeMemory(2 * MB, "RLIMIT_AS headroom"),
            what="models/tiny-gpt2",
            detail="vocabulary 50257, 14 tokens",
        )
    assert str(err.value) == (
        "models/tiny-gpt2: one context (vocabulary 50257, 14 tokens) needs about 3.0 MB of "
        "memory, but only 2.0 MB is free (RLIMIT_AS headroom); free memory, or run it on a "
        "machine or device with more"
    )
    assert "\n" not in str(err.value)


def test_estimates_from_a_planted_shape() -> None:
    shape = ModelShape(vocab=50257, hidden=32, layers=2, heads=2, act_bytes=4)
    # cache 2*2*14*32, one layer 16*14*32 + 2*2*14*14 elements, float32
    assert forward_bytes(shape, 14) == (2 * 2 * 14 * 32 + 16 * 14 * 32 + 2 * 2 * 14 * 14) * 4 == 38976
    assert forward_bytes(shape, 3, past=11) == (2 * 2 * 14 * 32 + 16 * 3 * 32 + 2 * 2 * 3 * 14) * 4
    assert per_context_bytes(shape, 14, vocab_entry_bytes=9) == 38976 + 50257 * 13
    assert per_context_bytes(shape, 14, vocab_entry_bytes=9, logit_positions=14) == 38976 + 50257 * (4 * 14 + 9)


def test_model_shape_of_a_tiny_gpt2(gpt2: LoadedModel, gpt2_path: Path) -> None:
    assert model_shape(gpt2.model) == ModelShape(vocab=50257, hidden=32, layers=2, heads=2, act_bytes=4)
    assert model_shape(gpt2.model.base_model).vocab == 50257  # no output embeddings: config.vocab_size
    assert model_shape(load_model(str(gpt2_path), device="cpu", dtype="bfloat16").model).act_bytes == 2


# --------------------------------------------------------------------------- free memory


def test_available_bytes_reads_memavailable(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683736 kB\nMemFree:        23935000 kB\nMemAvailable:   24211504 kB\n")
    assert available_bytes(meminfo) == 24211504 * 1024


def test_rlimit_headroom_against_vmsize_and_vmdata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t 4000000 kB\nVmSize:\t 3000000 kB\nVmData:\t  500000 kB\n")
    limits = {
        resource.RLIMIT_AS: (4_000_000 * 1024, resource.RLIM_INFINITY),
        resource.RLIMIT_DATA: (resource.RLIM_INFINITY, resource.RLIM_INFINITY),
    }
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits[which])
    assert rlimit_headroom(status) == [("RLIMIT_AS", 1_000_000 * 1024)]
    limits[resource.RLIMIT_DATA] = (400_000 * 1024, resource.RLIM_INFINITY)  # already over: no room
    assert rlimit_headroom(status) == [("RLIMIT_AS", 1_000_000 * 1024), ("RLIMIT_DATA", 0)]
    limits[resource.RLIMIT_AS] = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    limits[resource.RLIMIT_DATA] = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    assert rlimit_headroom(status) == []


def test_cgroup_headroom(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("0::/slurm/job_7\n")
    folder = tmp_path / "fs" / "slurm" / "job_7"
    folder.mkdir(parents=True)
    (folder / "memory.max").write_text(f"{4096 * MB}\n")
    (folder / "memory.current").write_text(f"{1024 * MB}\n")
    (folder / "memory.stat").write_text(f"anon 123\ninactive_file {512 * MB}\nactive_file 7\n")
    assert cgroup_headroom(proc, tmp_path / "fs") == (4096 - 1024 + 512) * MB
    (folder / "memory.max").write_text("max\n")
    assert cgroup_headroom(proc, tmp_path / "fs") is None
    proc.write_text("4:memory:/process_api/x\n")  # cgroup v1 only
    assert cgroup_headroom(proc, tmp_path / "fs") is None


def test_cpu_free_is_the_smallest_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda: 20_000 * MB)
    monkeypatch.setattr(memory, "rlimit_headroom", lambda: [("RLIMIT_AS", 3_000 * MB), ("RLIMIT_DATA", 5_000 * MB)])
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 4_000 * MB)
    assert cpu_free() == FreeMemory(3_000 * MB, "RLIMIT_AS headroom")
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 1_000 * MB)
    assert cpu_free() == FreeMemory(1_000 * MB, "cgroup memory.max headroom")
    monkeypatch.setattr(memory, "rlimit_headroom", lambda: [])
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: None)
    assert cpu_free() == FreeMemory(20_000 * MB, "MemAvailable")
    assert memory.free_memory("cpu") == FreeMemory(20_000 * MB, "MemAvailable")
    assert memory.free_memory("meta") is None  # not known: nothing is cut


# --------------------------------------------------------------------------- is_oom


def test_is_oom_on_the_cpu_allocators_real_message() -> None:
    with pytest.raises(RuntimeError) as err:
        torch.empty(1 << 60, dtype=torch.uint8)  # an exbibyte: the CPU allocator refuses it
    assert "can't allocate memory" in str(err.value)
    assert is_oom(err.value) and forward_pass.is_oom is is_oom
    with pytest.raises(MemoryError) as np_err:
        np.empty(1 << 60, dtype=np.uint8)
    assert is_oom(np_err.value)
    assert is_oom(MemoryError())
    assert is_oom(RuntimeError(CPU_ALLOCATOR_MESSAGE))
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("expected 2 dimensions"))


# --------------------------------------------------------------------------- run_contexts


def test_huge_batch_size_gives_the_numbers_of_batch_size_8(gpt2: LoadedModel, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        huge = _run(gpt2, 100000)
    assert not _cuts(caplog)  # cut to the 8 contexts there are, silently
    _assert_same(huge, _run(gpt2, 8))


def test_batch_cut_to_planted_free_memory(
    gpt2: LoadedModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    per = _one_context_bytes(gpt2)
    planted = FreeMemory(int(3.5 * per / memory.USABLE_FRACTION), "MemAvailable")  # room for 3 contexts
    monkeypatch.setattr(forward_pass, "free_memory", lambda device: planted)
    sizes: list[int] = []
    original = gpt2.model.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        sizes.append(kwargs["input_ids"].shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(gpt2.model, "forward", forward)
    with caplog.at_level(logging.WARNING):
        cut = _run(gpt2, 100000)
    assert sizes == [3, 3, 2]
    assert _cuts(caplog) == [
        f"{gpt2.model_id}: batch size 100000 cut to 3: about {per / MB:.1f} MB per context, "
        f"{planted.bytes / MB:.1f} MB free (MemAvailable)"
    ]
    monkeypatch.setattr(gpt2.model, "forward", original)
    _assert_same(cut, _run(gpt2, 3))


def test_one_context_that_cannot_fit_stops_before_the_forward(
    gpt2: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    per = _one_context_bytes(gpt2)
    monkeypatch.setattr(forward_pass, "free_memory", lambda device: FreeMemory(per // 2, "RLIMIT_AS headroom"))

    def forward(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the forward pass ran")

    monkeypatch.setattr(gpt2.model, "forward", forward)
    with pytest.raises(VerbevalError) as err:
        _run(gpt2, 100000)
    msg = str(err.value)
    longest = max(len(s) for s in _inputs(gpt2)[0].ids)
    assert msg.startswith(
        f"{gpt2.model_id}: one context (vocabulary 50257, {longest} tokens) needs about "
        f"{per / MB:.1f} MB of memory, but only {per // 2 / MB:.1f} MB is free (RLIMIT_AS headroom)"
    )
    assert "\n" not in msg


@pytest.mark.parametrize("error", ["cpu-allocator", "memory-error"])
def test_oom_backoff_on_cpu(
    gpt2: LoadedModel, monkeypatch: pytest.MonkeyPatch, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    reference = _run(gpt2, 2)
    original = gpt2.model.forward
    seen: list[tuple[int, bool]] = []

    def forward(*args: Any, **kwargs: Any) -> Any:
        n = kwargs["input_ids"].shape[0]
        seen.append((n, n <= 2))
        if n > 2:
            raise RuntimeError(CPU_ALLOCATOR_MESSAGE) if error == "cpu-allocator" else MemoryError()
        return original(*args, **kwargs)

    monkeypatch.setattr(gpt2.model, "forward", forward)
    with caplog.at_level(logging.WARNING, logger="verbeval.agreement.engine.inference"):
        result = _run(gpt2, 8)
    assert seen[0] == (8, False) and (4, False) in seen
    assert sum(n for n, ok in seen if ok) == len(LEFTS)  # every context once, in batches of 2
    _assert_same(result, reference)
    # one warning per cut (8 -> 4 -> 2), not one per batch
    assert [r.getMessage() for r in caplog.records] == [
        "out of memory at batch size 8; retrying with 4, and later batches too",
        "out of memory at batch size 4; retrying with 2, and later batches too",
    ]


def test_oom_backoff_keeps_the_cut_for_later_batches(
    gpt2: LoadedModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Many batches of a size that does not fit: each later batch starts at the size that fits, so
    there is one failed allocation and one warning, not one per batch (a probe saw 1128 warnings)."""
    reference = _run(gpt2, 1)
    original = gpt2.model.forward
    sizes: list[int] = []

    def forward(*args: Any, **kwargs: Any) -> Any:
        n = kwargs["input_ids"].shape[0]
        sizes.append(n)
        if n > 1:
            raise RuntimeError(CPU_ALLOCATOR_MESSAGE)
        return original(*args, **kwargs)

    monkeypatch.setattr(gpt2.model, "forward", forward)
    with caplog.at_level(logging.WARNING, logger="verbeval.agreement.engine.inference"):
        result = _run(gpt2, 2)  # four batches of 2
    assert sizes == [2] + [1] * len(LEFTS)  # one failure, then every context alone
    assert len(caplog.records) == 1
    _assert_same(result, reference)


# --------------------------------------------------------------------------- the other callers


def test_multitoken_rows_cut_to_planted_free_memory(
    gpt2: LoadedModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    enc = _inputs(gpt2)[0]
    forms = multitoken.form_token_ids(gpt2.tokenizer, ["abbreviates", "co-exists", "swims", "abdicates", "swimming"])
    n_rows = len(multitoken.build_causal_trie(forms).rows)
    assert n_rows >= 3
    reference = multitoken.causal_form_logprobs(gpt2, enc, forms, batch_size=2, progress=False)
    np.testing.assert_array_equal(
        multitoken.causal_form_logprobs(gpt2, enc, forms, batch_size=100000, progress=False),
        multitoken.causal_form_logprobs(gpt2, enc, forms, batch_size=n_rows, progress=False),
    )
    monkeypatch.setattr(multitoken, "free_memory", lambda device: FreeMemory(1, "RLIMIT_AS headroom"))
    with pytest.raises(
        VerbevalError, match=r"one trie row \(.*\) needs about .* MB of memory, but only 0.000 MB is free"
    ):
        multitoken.causal_form_logprobs(gpt2, enc, forms, batch_size=100000, progress=False)
    width = max(len(r) for r in multitoken.build_causal_trie(forms).rows)
    per = forward_bytes(model_shape(gpt2.model), width, past=max(len(s) for s in enc.ids)) + width * 50257 * 8
    monkeypatch.setattr(multitoken, "free_memory", lambda device: FreeMemory(int(2.5 * per / 0.8), "MemAvailable"))
    with caplog.at_level(logging.WARNING):
        cut = multitoken.causal_form_logprobs(gpt2, enc, forms, batch_size=100000, progress=False)
    assert [m.split(":")[1] for m in _cuts(caplog)] == [" batch size 100000 cut to 2"]
    np.testing.assert_array_equal(cut, reference)


def test_simverb_verbs_cut_to_planted_free_memory(
    wordpiece_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from verbeval.simverb import vectors

    tok = AutoTokenizer.from_pretrained(wordpiece_path)
    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    ).eval()
    verbs = ["walk", "abduct", "run", "know", "sing"]
    frames = ["to {verb}", "they {verb} ."]
    reference = vectors.verb_vectors(model, tok, verbs, frames, batch_size=2)
    np.testing.assert_array_equal(
        vectors.verb_vectors(model, tok, verbs, frames, batch_size=100000)[1]["layer2"],
        vectors.verb_vectors(model, tok, verbs, frames, batch_size=5)[1]["layer2"],
    )
    # a verb: its forward over the longest frame (7 tokens), 3 hidden states in float32 and float64,
    # its float64 input embeddings
    width = max(len(ids) for ids in tok([f.replace("{verb}", v) for f in frames for v in verbs])["input_ids"])
    per = forward_bytes(model_shape(model), width) + 3 * width * 16 * (4 + 8) + width * 16 * 8
    monkeypatch.setattr(memory, "free_memory", lambda device: FreeMemory(int(2.5 * per / 0.8), "MemAvailable"))
    with caplog.at_level(logging.WARNING):
        table, reps = vectors.verb_vectors(model, tok, verbs, frames, batch_size=100000, model_id="tiny-bert")
    assert [m.split(":")[:2] for m in _cuts(caplog)] == [["tiny-bert", " batch size 100000 cut to 2"]]
    pd.testing.assert_frame_equal(table, reference[0])
    for name, vec in reference[1].items():
        np.testing.assert_array_equal(reps[name], vec, err_msg=name)
    monkeypatch.setattr(memory, "free_memory", lambda device: FreeMemory(per - 1, "MemAvailable"))
    with pytest.raises(
        VerbevalError,
        match=rf"^tiny-bert: one verb \({width} tokens, 3 hidden states of 16\) needs "
        rf"about {per / MB:.3f} MB of memory",
    ):
        vectors.verb_vectors(model, tok, verbs, frames, model_id="tiny-bert")


# --------------------------------------------------------------------------- the real scenario


CHILD = textwrap.dedent("""
    import resource, sys
    import numpy as np, pandas as pd, torch
    from verbeval.core.errors import VerbevalError
    from verbeval.core.models import load_model
    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.agreement.engine.forward_pass import run_contexts

    torch.set_num_threads(1)
    lm = load_model(sys.argv[1], device="cpu")
    lefts = sys.argv[3:]
    enc = encode_contexts(lm, pd.DataFrame({"left": lefts, "right": [""] * len(lefts)}))
    forms = np.asarray(lm.tokenizer([" runs", " run", " is", " are"], add_special_tokens=False)["input_ids"]).reshape(-1)
    args = (lm, enc, forms, np.arange(len(lefts)), np.tile(forms[:2], (len(lefts), 1)))
    # 1.5 GB more address space than the process holds now: 100000 x 50257 float64 (40 GB) cannot be had
    used = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize:")).split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + 1536 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
    try:
        huge = run_contexts(*args, batch_size=100000, progress=False)
    except VerbevalError as exc:
        print(f"verbeval: {exc}", file=sys.stderr)
        sys.exit(1)
    eight = run_contexts(*args, batch_size=8, progress=False)
    np.savez(sys.argv[2], **{k: getattr(huge, k) for k in ("prob", "cum_above", "cum_below", "topk_ids",
                                                           "topk_probs", "tse_p")},
             **{"eight_" + k: getattr(eight, k) for k in ("prob", "cum_above", "cum_below", "topk_ids",
                                                         "topk_probs", "tse_p")})
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc/self/status (Linux)")
def test_batch_size_100000_under_an_address_space_limit(gpt2_path: Path, gpt2: LoadedModel, tmp_path: Path) -> None:
    """A tiny GPT-2 with batch_size 100000 in a process that may map 1.5 GB more: it completes with
    the numbers of batch size 8 (or stops with one line), where a buffer of 100000 vocabulary rows
    (40 GB) ended in a traceback."""
    out = tmp_path / "result.npz"
    env = {
        **os.environ,
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(gpt2_path), str(out), *LEFTS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        assert "Traceback" not in proc.stderr and lines and lines[-1].startswith("verbeval: "), proc.stderr[-3000:]
        assert "needs about" in lines[-1] and "MB is free" in lines[-1], lines[-1]
        return
    got = np.load(out)
    for name in ("prob", "cum_above", "cum_below", "topk_ids", "topk_probs", "tse_p"):
        np.testing.assert_array_equal(got[name], got["eight_" + name], err_msg=name)
    # and the numbers are this process's, within the float32 forward's rounding
    mine = _run(gpt2, 8)
    np.testing.assert_allclose(got["prob"], mine.prob, rtol=1e-4)
    np.testing.assert_allclose(got["tse_p"], mine.tse_p, rtol=1e-4)
