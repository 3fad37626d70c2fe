"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder with the data mirror and tokenizers (``$VERBEVAL_SHARED`` or ``../shared``).

    Fails (rather than skips) when it is missing, so that a CI run without the mirror cannot
    pass silently.
    """
    path = Path(os.environ.get("VERBEVAL_SHARED", REPO_ROOT.parent / "shared"))
    if not path.is_dir():
        pytest.fail(
            f"shared data folder {path} not found; set VERBEVAL_SHARED to the folder that holds "
            "data/ (the source mirror) and tokenizers/",
            pytrace=False,
        )
    return path
