"""The one name of a data mirror, VERBEVAL_DATA_MIRROR (docs/data.md, "The data mirror"): which
mirror the tests read (``mirror_for_tests``, under the fixture ``data_dir``), and the workflow's plan
reading it where it reads ``data_mirror``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from conftest import SHARED_ENV, DataMirror, mirror_for_tests
from verbeval.core.cli import MIRROR_ENV
from verbeval.workflow.loading import plan_from_files

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared folder holding data/ as VERBEVAL_SHARED, no VERBEVAL_DATA_MIRROR, the cache under tmp_path."""
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.setenv(SHARED_ENV, str(tmp_path / "shared"))
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.setenv("VERBEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VERBEVAL_REQUIRE_SHARED", raising=False)
    return tmp_path


def test_the_tests_read_VERBEVAL_DATA_MIRROR_first(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (env / "mirror").mkdir()
    monkeypatch.setenv(MIRROR_ENV, str(env / "mirror"))
    assert mirror_for_tests(os.environ) == DataMirror(env / "mirror", "VERBEVAL_DATA_MIRROR")


def test_a_VERBEVAL_DATA_MIRROR_that_names_no_folder_fails_instead_of_downloading(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(env / "typo"))
    # a failure, not a skip, even without VERBEVAL_REQUIRE_SHARED; and not the shared folder's data/ either
    with pytest.raises(pytest.fail.Exception) as err:
        mirror_for_tests(os.environ)
    assert err.value.msg == (
        f"VERBEVAL_DATA_MIRROR={env / 'typo'} is no folder: set it to a data mirror built with "
        "`verbeval mirror --out DIR` (docs/data.md, 'The data mirror'), or unset it to let the tests "
        f"download the data into {env / 'cache' / 'mirror'}"
    )
    assert not (env / "cache").exists()  # nothing downloaded


def test_without_it_the_shared_folders_data_then_the_download(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # still read (deprecated as the name of a mirror); an empty VERBEVAL_DATA_MIRROR is unset, as for `verbeval fetch`
    monkeypatch.setenv(MIRROR_ENV, "")
    assert mirror_for_tests(os.environ) == DataMirror(env / "shared" / "data", "VERBEVAL_SHARED/data")
    (env / "shared" / "data").rmdir()
    assert mirror_for_tests(os.environ) is None  # data_dir downloads into the cache


def test_the_session_keeps_VERBEVAL_DATA_MIRROR_from_the_tests_own_runs(session_environ: dict[str, str]) -> None:
    """data_dir reads the variable as the session started; the tests' own runs of verbeval fetch, Snakemake
    and DVC do not see it (those that test it set it themselves)."""
    assert MIRROR_ENV not in os.environ
    assert session_environ.get(SHARED_ENV) == os.environ.get(SHARED_ENV)


def test_the_plan_reads_VERBEVAL_DATA_MIRROR_where_it_reads_data_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_view: Path, data_dir: Path
) -> None:
    """SimVerb's official split files: used when the manifest lists them and the fetch jobs' mirror has
    them, whether data_mirror or $VERBEVAL_DATA_MIRROR names that mirror."""
    monkeypatch.chdir(repo_view)
    manifest = yaml.safe_load((REPO / "resources" / "manifest.yaml").read_text())
    for name, member in (("simverb_500_dev", "SimVerb-500-dev.txt"), ("simverb_3000_test", "SimVerb-3000-test.txt")):
        manifest["sources"][name] = {
            **manifest["sources"]["simverb_3500"],
            "archive_member": f"data/{member}",
            "sha256": "ab" * 32,
            "mirror_path": f"simverb/{member}",
        }
    (tmp_path / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    extra = tmp_path / "extra.yaml"
    extra.write_text(f"models: [{{id: gpt2}}]\nraw_dir: {tmp_path / 'raw'}\nmanifest: {tmp_path / 'manifest.yaml'}\n")
    assert not (data_dir / "simverb" / "SimVerb-500-dev.txt").exists()  # the shared mirror has no split files

    def splits(**config: str) -> dict[str, str]:
        return plan_from_files([REPO / "config" / "config.yaml", extra], config).simverb.splits

    assert splits() == {"dev": "simverb_500_dev", "test": "simverb_3000_test"}  # downloaded: listed is enough
    assert splits(data_mirror=str(data_dir)) == {}
    monkeypatch.setenv(MIRROR_ENV, str(data_dir))
    assert splits() == {}
