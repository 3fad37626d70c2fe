"""Hostile model headers stop with one line before any large allocation (issue 34, item 3):
verbeval.core.model_sources.gguf_header on GGUF files and .config_sizes on saved-model config.json files that a
hand edit or damage made lie about their sizes.

The hostile GGUF files are the tiny Llama of ``tests/tinygguf.py`` with one header value changed
(``write_tiny_gguf(header=...)``) or one count or length overwritten in its bytes. Every check and
every command here runs under :func:`bounded_memory`: an allocation of more than 2 GiB beyond what
the process already holds fails (``RLIMIT_DATA``), so a test passes only if nothing large was
allocated, and a check that let a file through fails the test instead of exhausting the machine.

The tests named ``test_cli_*`` go through ``verbeval.cli.main``, where ``verbeval.core.models`` calls
the checks (``check_gguf_header`` in ``ModelSource.gguf_location``, ``check_config_sizes`` in ``ModelSource.resolve``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("gguf")

import tinygguf
from tinygguf import set_array_count, set_header_count, set_string_length, set_tensor_dim, write_tiny_gguf
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources import gguf_header
from verbeval.core.model_sources.config_sizes import check_config_sizes
from verbeval.core.model_sources.gguf_header import check_gguf_header
from verbeval.core.model_sources.source import ModelSource

#: what a check or a command may allocate beyond what the process holds when it starts
HEADROOM = 2 << 30
N_TOKENS = len(tinygguf.vocabulary()[0])


def _data_bytes() -> int | None:
    """The process's data segment size (``VmData``: what ``RLIMIT_DATA`` limits); None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@pytest.fixture()
def bounded_memory() -> Iterator[None]:
    """Allocations beyond :data:`HEADROOM` more than the process holds fail (MemoryError or torch's
    RuntimeError) while the test runs; the limit is restored after it. No limit where the platform
    has none (the test still runs)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not Linux
        yield
        return
    used = _data_bytes()
    if used is None:  # pragma: no cover - not Linux
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = used + HEADROOM if hard == resource.RLIM_INFINITY else min(used + HEADROOM, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def test_the_memory_bound_holds(bounded_memory: None) -> None:
    """The bound the other tests rely on: 3 GiB cannot be allocated under it, a little can."""
    import numpy as np

    if _data_bytes() is None:
        pytest.skip("no /proc/self/status: the memory bound is not set on this platform")
    with pytest.raises(MemoryError):
        np.ones(3 << 30, dtype=np.uint8)
    assert np.ones(1 << 20, dtype=np.uint8).sum() == 1 << 20


# ---------------------------------------------------------------------------------------------
# GGUF files


def _header(**values: int) -> Callable[[Path], Path]:
    return lambda p: write_tiny_gguf(p, header=values)


def _truncated(keep: int | None = None) -> Callable[[Path], Path]:
    def make(p: Path) -> Path:
        write_tiny_gguf(p)
        data = p.read_bytes()
        p.write_bytes(data[: keep if keep is not None else len(data) // 2])
        return p

    return make


def _poked(poke: Callable[[Path], Path]) -> Callable[[Path], Path]:
    def make(p: Path) -> Path:
        write_tiny_gguf(p)
        return poke(p)

    return make


#: case -> (how its file is made from the tiny Llama, what the one line says: the field, its value)
HOSTILE_GGUF: dict[str, tuple[Callable[[Path], Path], str]] = {
    "block_count": (
        _header(block_count=1_000_000),
        "llama.block_count is 1000000 but the file holds tensors of 2 blocks (blk.0-blk.1)",
    ),
    "head_count_0": (
        _header(head_count=0),
        "llama.attention.head_count is 0: a model needs at least one attention head",
    ),
    "token_array_count": (
        _poked(lambda p: set_array_count(p, "tokenizer.ggml.tokens", 1 << 40)),
        f"tokenizer.ggml.tokens claims {1 << 40} items",
    ),
    "vocab_size": (
        _header(vocab_size=10**9),
        f"llama.vocab_size is {10**9} but tokenizer.ggml.tokens holds {N_TOKENS} tokens",
    ),
    "embedding_length": (
        _header(embedding_length=1 << 31),
        f"llama.embedding_length is {1 << 31} but tensor token_embd.weight is {tinygguf.HIDDEN} wide",
    ),
    "tensor_shape": (
        _poked(lambda p: set_tensor_dim(p, "token_embd.weight", 1, 10**6)),
        f"tensor token_embd.weight of shape {tinygguf.HIDDEN}x1000000 (F32, {10**6 * tinygguf.HIDDEN * 4} "
        "bytes at byte",
    ),
    "truncated_data": (_truncated(), "tensor token_embd.weight of shape"),
    "truncated_header": (_truncated(200), "GGUF.kv_count is "),  # the entries it counts are cut off
    "kv_count": (_poked(lambda p: set_header_count(p, "kv_count", 1 << 40)), f"GGUF.kv_count is {1 << 40} but the"),
    "tensor_count": (
        _poked(lambda p: set_header_count(p, "tensor_count", 1 << 40)),
        f"GGUF.tensor_count is {1 << 40} but the",
    ),
    "string_length": (
        _poked(lambda p: set_string_length(p, "general.name", 1 << 40)),
        f"general.name is a string of {1 << 40} bytes but only",
    ),
    "head_count_not_dividing": (
        _header(head_count=3),
        f"llama.attention.head_count is 3, which does not divide llama.embedding_length {tinygguf.HIDDEN}",
    ),
    "head_count_kv_0": (_header(head_count_kv=0), "llama.attention.head_count_kv is 0"),
    "head_count_kv_not_dividing": (
        _header(head_count_kv=3),
        f"llama.attention.head_count_kv is 3, which does not divide llama.attention.head_count {tinygguf.HEADS}",
    ),
    "context_length_0": (_header(context_length=0), "llama.context_length is 0; it must be positive"),
}


def _hostile(tmp_path: Path, case: str) -> tuple[Path, str]:
    make, said = HOSTILE_GGUF[case]
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    return make(folder / "m.gguf"), said


@pytest.mark.parametrize("case", sorted(HOSTILE_GGUF))
def test_hostile_gguf_header_is_one_line_naming_the_file_and_field(
    case: str, tmp_path: Path, bounded_memory: None
) -> None:
    path, said = _hostile(tmp_path, case)
    with pytest.raises(VerbevalError) as err:
        check_gguf_header(path, "x")
    msg = str(err.value)
    assert msg.startswith(f"model 'x': {path}: {said}"), msg
    assert "\n" not in msg and msg.endswith("get the file again"), msg


def test_cut_short_file_says_so(tmp_path: Path) -> None:
    """What runs past the end of the file may be a cut download; a tensor larger than the whole file,
    or sizes that disagree, only a damaged header."""
    path, _ = _hostile(tmp_path, "truncated_data")
    with pytest.raises(VerbevalError, match=r"runs past the end of the file \(\d+ bytes\): the file is cut short"):
        check_gguf_header(path, "x")
    data = write_tiny_gguf(tmp_path / "t.gguf").read_bytes()
    cut = data.find(b"tokenizer.ggml.tokens") + 100  # inside the token list
    (tmp_path / "t.gguf").write_bytes(data[:cut])
    with pytest.raises(
        VerbevalError,
        match=rf"tokenizer.ggml.tokens claims {N_TOKENS} items \(string, at least "
        rf"{8 * N_TOKENS} bytes\) but only \d+ bytes are left in the file: the "
        "file is cut short",
    ):
        check_gguf_header(tmp_path / "t.gguf", "x")
    path, _ = _hostile(tmp_path, "tensor_shape")
    with pytest.raises(VerbevalError, match="a damaged or hand-edited header"):
        check_gguf_header(path, "x")


def test_files_that_are_not_gguf_are_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(VerbevalError, match=r"empty.gguf: the file has 0 bytes, fewer than a GGUF header's 24"):
        check_gguf_header(empty, "x")
    text = tmp_path / "text.gguf"
    text.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")  # an LFS pointer
    with pytest.raises(VerbevalError, match=r"text.gguf: the file does not start with the GGUF magic .*not a GGUF"):
        check_gguf_header(text, "x")
    with pytest.raises(VerbevalError, match=r"cannot read the GGUF header \(FileNotFoundError"):
        check_gguf_header(tmp_path / "missing.gguf", "x")


def test_sound_gguf_files_pass(tmp_path: Path, bounded_memory: None) -> None:
    """The tiny Llama and the tiny file of every architecture of tinygguf (gpt2: no head_count_kv
    nor vocab_size; falcon: one key/value head; gemma2/gemma3: a stated head size) pass."""
    check_gguf_header(write_tiny_gguf(tmp_path / "tiny.gguf"), "x")
    for arch in sorted(tinygguf.ARCHS):
        check_gguf_header(tinygguf.write_arch_gguf(tmp_path / f"{arch}.gguf", arch), arch)


def test_the_header_parse_agrees_with_gguf_reader(tmp_path: Path) -> None:
    """Metadata and tensor layout as the gguf package's own reader sees them."""
    import gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    head = gguf_header.read_gguf_header(path)
    reader = gguf.GGUFReader(path)
    assert {t.name: (tuple(int(d) for d in t.shape), t.data_offset, t.n_bytes) for t in reader.tensors} == {
        t.name: (t.dims, t.start, t.n_bytes) for t in head.tensors.values()
    }
    assert head.metadata["llama.block_count"] == tinygguf.LAYERS
    assert head.metadata["tokenizer.ggml.tokens"].count == N_TOKENS == len(reader.fields["tokenizer.ggml.tokens"].data)
    assert set(head.metadata) == {k for k in reader.fields if not k.startswith("GGUF.")}


def test_a_sound_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    check_gguf_header(path, "x")

    def no_parse(*args: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(gguf_header, "_parse", no_parse)
    check_gguf_header(path, "x")  # unchanged: not parsed again
    set_header_count(path, "kv_count", 1 << 40)  # changed (a new modification time): parsed again
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with pytest.raises(VerbevalError, match="AssertionError: parsed again"):
        check_gguf_header(path, "x")


# ---------------------------------------------------------------------------------------------
# saved model folders (config.json and safetensors headers)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama saved by transformers (config.json, model.safetensors) with its tokenizer."""
    from transformers import AutoTokenizer

    d = tmp_path_factory.mktemp("saved")
    write_tiny_gguf(d / "gguf" / "tiny.gguf")
    tinygguf.reference_model().save_pretrained(d / "model")
    AutoTokenizer.from_pretrained(d / "gguf", gguf_file="tiny.gguf").save_pretrained(d / "model")
    return d / "model"


def _edited(saved: Path, tmp_path: Path, **values: object) -> Path:
    """A copy of the saved model with ``values`` set in its config.json."""
    out = tmp_path / "model"
    shutil.copytree(saved, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(values)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


#: case -> (config.json values, what the one line says after the config.json path)
HOSTILE_CONFIG: dict[str, tuple[dict[str, object], str]] = {
    "heads_0": ({"num_attention_heads": 0}, "num_attention_heads is 0: a model needs at least one attention head"),
    "heads_not_dividing": (
        {"num_attention_heads": 5, "num_key_value_heads": 5},
        f"num_attention_heads is 5, which does not divide hidden_size {tinygguf.HIDDEN}",
    ),
    "kv_heads_not_dividing": (
        {"num_key_value_heads": 3},
        f"num_key_value_heads is 3, which does not divide num_attention_heads {tinygguf.HEADS}",
    ),
    "vocab": (
        {"vocab_size": 10**9},
        f"vocab_size is {10**9} but model.safetensors holds model.embed_tokens.weight of {N_TOKENS} rows",
    ),
    "hidden": (
        {"hidden_size": 1 << 31},
        f"hidden_size is {1 << 31} but model.safetensors holds model.embed_tokens.weight of width {tinygguf.HIDDEN}",
    ),
    "layers": (
        {"num_hidden_layers": 1_000_000},
        "num_hidden_layers is 1000000 but model.safetensors holds tensors of 2 layers (model.layers.0-model.layers.1)",
    ),
    "layers_text": ({"num_hidden_layers": "2"}, "num_hidden_layers is '2', not a whole number"),
}


def test_sound_saved_model_passes(saved_model: Path, tmp_path: Path) -> None:
    check_config_sizes(saved_model, "x")
    check_config_sizes(saved_model / "config.json", "x")
    check_config_sizes(tmp_path, "x")  # no config.json: nothing to check (the loader says it is missing)
    check_config_sizes(_edited(saved_model, tmp_path, num_key_value_heads=1), "x")  # multi-query attention


@pytest.mark.parametrize("case", sorted(HOSTILE_CONFIG))
def test_hostile_config_is_one_line_naming_the_file_and_field(
    case: str, saved_model: Path, tmp_path: Path, bounded_memory: None
) -> None:
    values, said = HOSTILE_CONFIG[case]
    model = _edited(saved_model, tmp_path, **values)
    with pytest.raises(VerbevalError) as err:
        check_config_sizes(model, "x")
    msg = str(err.value)
    assert msg.startswith(f"model 'x': {model / 'config.json'}: {said}: a damaged or hand-edited config.json"), msg
    assert "\n" not in msg


def test_layers_are_counted_over_every_safetensors_file(saved_model: Path, tmp_path: Path) -> None:
    """A sharded model: the layers of all its files count; a missing shard is named as such."""
    from safetensors.numpy import load_file, save_file

    model = _edited(saved_model, tmp_path)
    tensors = load_file(model / "model.safetensors")
    (model / "model.safetensors").unlink()
    save_file({k: v for k, v in tensors.items() if "layers.1." not in k}, model / "model-00001-of-00002.safetensors")
    save_file({k: v for k, v in tensors.items() if "layers.1." in k}, model / "model-00002-of-00002.safetensors")
    check_config_sizes(model, "x")
    (model / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(
        VerbevalError,
        match=r"num_hidden_layers is 2 but model-00001-of-00002.safetensors holds "
        r"tensors of 1 layer \(model.layers.0-model.layers.0\).*or missing weight "
        "files",
    ):
        check_config_sizes(model, "x")


def test_malformed_config_json_is_one_line(saved_model: Path, tmp_path: Path) -> None:
    model = _edited(saved_model, tmp_path)
    cfg = model / "config.json"
    for text, said in (
        (
            '{"num_attention_heads": 4,',
            "not valid JSON (Expecting property name enclosed in double quotes at line 1 column 27)",
        ),
        ("[1, 2]", "a JSON list, not an object"),
    ):
        cfg.write_text(text)
        with pytest.raises(VerbevalError) as err:
            check_config_sizes(model, "x")
        assert str(err.value).startswith(f"model 'x': {cfg}: {said}: "), str(err.value)
    cfg.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(VerbevalError, match=r"config.json: not UTF-8 text \(byte 7\)"):
        check_config_sizes(model, "x")


def test_damaged_safetensors_is_left_to_the_loader(saved_model: Path, tmp_path: Path) -> None:
    """A safetensors file whose header cannot be read is not this check's to name: the loader's
    message (``damaged safetensors weights``) names it with the fix."""
    model = _edited(saved_model, tmp_path, num_hidden_layers=1_000_000)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    check_config_sizes(model, "x")


# ---------------------------------------------------------------------------------------------
# through the command line: these need the wiring in verbeval.core.models (module docstring)


def _one_error_line(capsys: pytest.CaptureFixture[str], rc: object, command: str) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 1 and len(err) == 1, (rc, err)
    assert err[0].startswith(f"verbeval {command}: error: "), err[0]
    return err[0].removeprefix(f"verbeval {command}: error: ")


def _run_model(model: Path, out: Path, gguf_file: str | None = None) -> list[str]:
    """run-model arguments with no template to score: the load is the whole job."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({c: pd.Series(dtype=str) for c in ("group", "source", "left", "right")}).to_parquet(out / "t.parquet")
    lemmas = {"lemma": str, "sing": str, "plur": str, "sing_id": "int64", "plur_id": "int64"}
    pd.DataFrame({c: pd.Series(dtype=t) for c, t in lemmas.items()}).to_parquet(out / "l.parquet")
    return [
        "run-model",
        "--model",
        str(model),
        *(["--gguf-file", gguf_file] if gguf_file else []),
        "--device",
        "cpu",
        "--templates",
        str(out / "t.parquet"),
        "--lemmas",
        str(out / "l.parquet"),
        "--groups",
        "simple",
        "--manifest",
        str(out / "res" / "manifest.json"),
        "--no-progress",
    ]


@pytest.mark.parametrize("case", sorted(HOSTILE_GGUF))
def test_cli_lemmas_stops_on_a_hostile_gguf_with_one_line(
    case: str, tmp_path: Path, bounded_memory: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verbeval lemmas`` (the tokenizer alone) stops before transformers reads the file."""
    path, said = _hostile(tmp_path, case)
    capsys.readouterr()
    rc = main(
        [
            "lemmas",
            "--model",
            str(path.parent),
            "--gguf-file",
            path.name,
            "--lexicon",
            str(tmp_path / "lexicon.parquet"),
            "--out",
            str(tmp_path / "out" / "lemmas.parquet"),
        ]
    )
    line = _one_error_line(capsys, rc, "lemmas")
    assert line.startswith(f"model '{path.parent}': {path}: {said}"), line
    assert not (tmp_path / "out" / "lemmas.parquet").exists()


@pytest.mark.parametrize("case", ["block_count", "vocab_size", "embedding_length", "head_count_0"])
def test_cli_run_model_stops_on_a_hostile_gguf_with_one_line(
    case: str, tmp_path: Path, bounded_memory: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``verbeval run-model`` (the whole model): a million blocks are not built, a vocabulary of 10^9
    or a hidden size of 2^31 is named as the header's, not blamed on transformers' defaults."""
    path, said = _hostile(tmp_path, case)
    args = _run_model(path.parent, tmp_path / "job", path.name)
    capsys.readouterr()
    line = _one_error_line(capsys, main(args), "run-model")
    assert line.startswith(f"model '{path.parent}': {path}: {said}"), line
    assert not (tmp_path / "job" / "res" / "manifest.json").exists()


@pytest.mark.parametrize("case", sorted(HOSTILE_CONFIG))
def test_cli_run_model_stops_on_a_hostile_config_with_one_line(
    case: str, saved_model: Path, tmp_path: Path, bounded_memory: None, capsys: pytest.CaptureFixture[str]
) -> None:
    values, said = HOSTILE_CONFIG[case]
    model = _edited(saved_model, tmp_path, **values)
    args = _run_model(model, tmp_path / "job")
    capsys.readouterr()
    line = _one_error_line(capsys, main(args), "run-model")
    assert line.startswith(f"model '{model}': {model / 'config.json'}: {said}"), line
    assert not (tmp_path / "job" / "res" / "manifest.json").exists()


def test_cli_run_model_stops_on_invalid_config_json_with_one_line(
    saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _edited(saved_model, tmp_path)
    (model / "config.json").write_text('{"num_attention_heads": 4,')
    args = _run_model(model, tmp_path / "job")
    capsys.readouterr()
    line = _one_error_line(capsys, main(args), "run-model")
    assert line.startswith(f"model '{model}': {model / 'config.json'}: not valid JSON ("), line


def test_sound_files_still_load(saved_model: Path, tmp_path: Path, bounded_memory: None) -> None:
    """Through the checks' call sites, the tiny model loads as GGUF and as a saved folder (every
    architecture of tinygguf as GGUF: tests/test_gguf.py)."""
    from verbeval.core.models import load_model

    gguf_file = write_tiny_gguf(tmp_path / "g" / "tiny.gguf")
    for model, name in ((gguf_file.parent, gguf_file.name), (saved_model, None)):
        lm = load_model(ModelSource(str(model), file=name), device="cpu")
        assert lm.model.config.num_hidden_layers == tinygguf.LAYERS
