"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
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
        if os.environ.get(REQUIRE_SHARED_ENV):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def ci_rules() -> Iterator[Any]:
    """The workflow parsed with the quick-start configuration (rules only, no DAG; needs no ../shared)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    cwd = Path.cwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:  # type: ignore[arg-type]
            wapi = api.workflow(resource_settings=ResourceSettings(cores=1),
                                config_settings=ConfigSettings(configfiles=[REPO_ROOT / "config/config.yaml",
                                                                            REPO_ROOT / "config/quick.yaml"]),
                                snakefile=REPO_ROOT / "Snakefile", workdir=REPO_ROOT)
            wf = wapi._workflow  # noqa: SLF001 - Snakemake offers no public rule listing
            yield wf
    finally:
        os.chdir(cwd)
