"""A GGUF file read once (verbeval.core.model_sources.gguf_cache): the cached folder gives the same
weights, bit for bit, and the same tokenizer as reading the GGUF file; later loads do not parse the
file; a damaged folder is rebuilt; two jobs at once build it once."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from tinygguf import write_arch_gguf, write_tiny_gguf  # noqa: E402
from verbeval.core.model_sources import gguf_cache  # noqa: E402
from verbeval.core.model_sources.source import ModelSource  # noqa: E402
from verbeval.core.models import load_model, load_tokenizer  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture()
def gguf_dir(tmp_path: Path) -> Path:
    d = tmp_path / "m"
    write_tiny_gguf(d / "tiny.gguf")
    return d


def _direct(folder: Path, name: str, dtype: torch.dtype) -> tuple[dict[str, torch.Tensor], object]:
    """The state dict and tokenizer read from the GGUF file itself, as every job did before the cache."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cfg = AutoConfig.from_pretrained(str(folder), gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name, config=cfg, dtype=dtype)
    if model.dtype != dtype:
        model = model.to(dtype)
    return model.state_dict(), AutoTokenizer.from_pretrained(str(folder), gguf_file=name)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cached_folder_gives_the_gguf_files_weights_bit_for_bit(gguf_dir: Path, _cache: Path, dtype: str) -> None:
    lm = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu", dtype=dtype)
    want, tok = _direct(gguf_dir, "tiny.gguf", getattr(torch, dtype))
    got = lm.model.state_dict()
    assert set(got) == set(want)
    assert all(got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]) for k in want)
    for text in gguf_cache.PROBES:
        assert lm.tokenizer(text)["input_ids"] == tok(text)["input_ids"]
    digest = hashlib.sha256((gguf_dir / "tiny.gguf").read_bytes()).hexdigest()
    folder = _cache / "gguf" / digest
    record = json.loads((folder / gguf_cache.RECORD).read_text())
    assert (
        record["gguf_sha256"] == digest
        and record["gguf_file"] == "tiny.gguf"
        and "quantised checkpoint" in record["note"]
    )
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(record["files"])
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert lm.revision == f"gguf-sha256:{digest}"  # the model's version is still the GGUF file's
    umask = os.umask(0)
    os.umask(umask)  # an ordinary folder under the umask, not a private temporary one
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (folder / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask


def test_later_loads_read_the_folder_not_the_gguf_file(gguf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu").model.state_dict()

    def no_parse(*args: object) -> None:
        raise AssertionError("the GGUF file was parsed again")

    monkeypatch.setattr(gguf_cache, "_read_gguf", no_parse)
    again = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu").model.state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert load_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))(" the dogs")["input_ids"]


def test_a_damaged_folder_is_found_and_rebuilt(gguf_dir: Path, _cache: Path) -> None:
    # cloned: the loaded tensors may map the very file damaged below
    want = {
        k: v.clone()
        for k, v in load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu").model.state_dict().items()
    }
    (folder,) = [p for p in (_cache / "gguf").iterdir() if p.is_dir()]
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # a flipped byte in the last weight
    weights.write_bytes(bytes(data))
    assert "model.safetensors is not the file written there" in (gguf_cache.folder_problem(folder, folder.name) or "")
    got = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu").model.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert gguf_cache.folder_problem(folder, folder.name) is None
    (folder / gguf_cache.RECORD).write_text("{not json")
    assert "record is unreadable" in (gguf_cache.folder_problem(folder, folder.name) or "")
    assert [p.name for p in (_cache / "gguf").iterdir() if p.is_dir()] == [folder.name]  # no temporary left


def test_a_file_the_build_did_not_write_is_found_and_the_folder_rebuilt(
    gguf_dir: Path, _cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file added to the cached folder (here a tokenizer config that would be read as the folder's
    own) is not in its record: the folder is rebuilt, with one warning line, without it."""
    import logging

    load_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))
    (folder,) = [p for p in (_cache / "gguf").iterdir() if p.is_dir()]
    before = sorted(p.name for p in folder.iterdir())
    (folder / "added.json").write_text("{}")
    assert gguf_cache.folder_problem(folder, folder.name) == "added.json was not written there (not in its record)"
    with caplog.at_level(logging.WARNING):
        load_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.endswith(f"the cached folder {folder} is rebuilt: added.json was not written there (not in its record)")
    assert sorted(p.name for p in folder.iterdir()) == before and gguf_cache.folder_problem(folder, folder.name) is None


def test_two_jobs_at_once_build_it_once(gguf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = []
    real_build = gguf_cache._build

    def counted(*args: object) -> None:
        builds.append(1)
        real_build(*args)

    monkeypatch.setattr(gguf_cache, "_build", counted)
    folders: list[Path] = []
    threads = [
        threading.Thread(target=lambda: folders.append(gguf_cache.cached_folder(gguf_dir / "tiny.gguf", "m")))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(set(folders)) == 1 and len(folders) == 3
    assert gguf_cache.folder_problem(folders[0], folders[0].name) is None


def test_a_tokenizer_that_does_not_survive_a_save_is_read_from_the_gguf_file(tmp_path: Path, _cache: Path) -> None:
    """Gemma's tokenizer class fails to rebuild from its saved files: the folder keeps the weights
    and the tokenizer is read from the GGUF file, as before."""
    write_arch_gguf(tmp_path / "g" / "gemma2.gguf", "gemma2")
    tok = load_tokenizer(ModelSource(str(tmp_path / "g"), file="gemma2.gguf"))
    assert tok.convert_ids_to_tokens(tok(" the dogs walk", add_special_tokens=False)["input_ids"]) == [
        "Ġthe",
        "Ġdogs",
        "Ġwalk",
    ]
    (folder,) = [p for p in (_cache / "gguf").iterdir() if p.is_dir()]
    assert not gguf_cache.has_tokenizer(folder) and (folder / "model.safetensors").is_file()
    assert "read from the GGUF file" in json.loads((folder / gguf_cache.RECORD).read_text())["tokenizer"]


def test_the_build_parses_the_gguf_file_once(gguf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers reads the file three times (config, tokenizer, weights): within the build the
    gguf package parses it once (gguf_cache.parsed_once), and its names are put back afterwards; the
    weights are still those of an unshared read (test_cached_folder_gives_the_gguf_files_weights_bit_for_bit)."""
    import gguf

    opened: list[str] = []
    real = gguf.GGUFReader

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: object, mode: str = "r") -> None:
            opened.append(str(path))
            super().__init__(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    name_map = gguf.get_tensor_name_map
    load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    assert opened == [str(gguf_dir / "tiny.gguf")]
    assert gguf.GGUFReader is Counting and gguf.get_tensor_name_map is name_map
    with gguf_cache.parsed_once():  # a failure inside the block restores them too
        with pytest.raises(ZeroDivisionError):
            with gguf_cache.parsed_once():
                assert gguf.GGUFReader is not Counting
                raise ZeroDivisionError
    assert gguf.GGUFReader is Counting


def test_text_jobs_read_the_cached_tokenizer_without_transformers(gguf_dir: Path) -> None:
    """The tokenizing jobs (lemmas, Table 3) read a GGUF model's tokenizer from its cached folder
    with the tokenizers library alone (verbeval.core.fasttok.JsonTokenizer), the same ids, vocabulary and
    single-token decodings as transformers' tokenizer read from that folder."""
    from verbeval.core.fasttok import JsonTokenizer, load_text_tokenizer

    fast = load_text_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))
    ref = load_tokenizer(ModelSource(str(gguf_dir), file="tiny.gguf"))
    assert isinstance(fast, JsonTokenizer) and not isinstance(ref, JsonTokenizer)
    assert fast.get_vocab() == ref.get_vocab()
    for text in gguf_cache.PROBES:
        assert fast(text)["input_ids"] == ref(text)["input_ids"]
    ids = sorted(ref.get_vocab().values())
    assert [fast.decode([i]).strip() for i in ids] == [ref.decode([i]).strip() for i in ids]


def test_a_record_edited_to_match_a_changed_config_is_checked_against_the_gguf_file(
    gguf_dir: Path, _cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    (folder,) = [p for p in (_cache / "gguf").iterdir() if p.is_dir()]
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 2 and cfg["vocab_size"] == 277
    (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 1}))
    record = json.loads((folder / gguf_cache.RECORD).read_text())
    record["files"]["config.json"] = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    (folder / gguf_cache.RECORD).write_text(json.dumps(record))  # the record agrees with the changed file
    assert gguf_cache.folder_problem(folder, folder.name) is None  # consistent with itself
    assert gguf_cache.folder_problem(folder, folder.name, gguf_dir / "tiny.gguf") == (
        "its config.json is not the GGUF file's model: layers 1 (the GGUF file: 2)"
    )
    with caplog.at_level("WARNING"):
        lm = load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    assert lm.model.config.num_hidden_layers == 2  # rebuilt from the GGUF file
    assert "is rebuilt: its config.json is not the GGUF file's model: layers 1 (the GGUF file: 2)" in caplog.text


def test_a_file_in_the_cache_folders_place_and_stale_leftovers_are_removed(gguf_dir: Path, _cache: Path) -> None:
    from verbeval.core.errors import VerbevalError
    from verbeval.core.model_sources.fingerprint import file_sha256

    digest = file_sha256(gguf_dir / "tiny.gguf")
    root = _cache / "gguf"
    root.mkdir(parents=True)
    (root / digest).write_text("a plain file")
    (root / f".{digest[:16]}.stale-999999").mkdir()  # left by a killed build
    (root / f".{digest[:16]}.stale-999999" / "model.safetensors").write_text("x")
    load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    assert sorted(p.name for p in root.iterdir()) == [f".{digest}.lock", digest]
    assert gguf_cache.folder_problem(root / digest, digest, gguf_dir / "tiny.gguf") is None
    # a cache folder that cannot be made: the error names it
    for p in list(root.iterdir()):
        gguf_cache._remove(p)
    root.rmdir()
    root.write_text("a file where the cache folder goes")
    with pytest.raises(VerbevalError) as err:
        load_model(ModelSource(str(gguf_dir), file="tiny.gguf"), device="cpu")
    assert str(err.value) == (
        f"model {str(gguf_dir)!r}: cannot write the GGUF cache folder {root} (for {digest}): {root}: File exists; "
        "set VERBEVAL_CACHE_DIR to a writable folder"
    )
