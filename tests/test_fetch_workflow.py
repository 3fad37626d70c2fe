"""The fetch rule under real Snakemake runs: where the bytes came from is no rerun trigger, a failed or
changed run never loses a verified raw copy, a changed manifest entry is fetched again, and switching
to a manifest with identical bytes reruns nothing (issue 23, items 2 and 7)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from verbeval.core.manifest import load_manifest, local_filename, mirror_location

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["verbs_combined", "giant_verb_list"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the `verbeval` CLI
    env["TQDM_DISABLE"] = "1"
    # offline: every download fails at once (a closed local port as the proxy)
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[var] = "http://127.0.0.1:9"
    for var in ("no_proxy", "NO_PROXY", "VERBEVAL_DATA_MIRROR"):
        env.pop(var, None)
    return env


class Run:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.raw = root / "raw"
        self.target = root / "results" / "agreement" / "lexicon.parquet"

    def __call__(self, *config: str) -> subprocess.CompletedProcess[str]:
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO_ROOT / "Snakefile"),
            "--cores",
            "1",
            "--configfile",
            "config/quick.yaml",
            str(self.root / "test.yaml"),
        ]
        if config:
            cmd += ["--config", *config]
        return subprocess.run([*cmd, "--", str(self.target)], cwd=self.root, env=_env(), capture_output=True, text=True)

    def raw_files(self) -> dict[str, bytes]:
        return {
            str(p.relative_to(self.raw)): p.read_bytes()
            for p in sorted(self.raw.rglob("*"))
            if p.is_file() and not p.name.startswith(".")
        }


@pytest.fixture
def run(tmp_path: Path) -> Run:
    for name in ("config", "resources"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    (tmp_path / "test.yaml").write_text(
        yaml.safe_dump(
            {
                "raw_dir": str(tmp_path / "raw"),
                "results_dir": str(tmp_path / "results"),
                "agreement": {"verb_lists": SOURCES},
            }
        )
    )
    return Run(tmp_path)


def _jobs(out: str) -> set[str]:
    return set(re.findall(r"^\s*rule (\w+):", out, flags=re.M)) | set(re.findall(r"^localrule (\w+):", out, re.M))


def test_offline_run_then_plain_run_keeps_every_verified_file(run: Run, data_dir: Path) -> None:
    first = run(f"data_mirror={data_dir}")
    assert first.returncode == 0, first.stderr[-3000:]
    fetched = run.raw_files()
    manifest = load_manifest(REPO_ROOT / "resources" / "manifest.yaml")
    assert set(fetched) == {f"{s}/{local_filename(manifest[s])}" for s in SOURCES}
    inodes = {p: (run.raw / p).stat().st_ino for p in fetched}

    # the README's plain command, offline: where a verified file came from is no reason to fetch it again
    plain = run()
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "Nothing to be done" in plain.stderr, plain.stderr[-3000:]
    # nor another mirror, even one that lacks the files fetched already: they are not needed
    other_mirror = run.root / "other-mirror"
    shutil.copytree(data_dir, other_mirror, copy_function=os.symlink)
    for name in SOURCES:
        mirror_location(manifest[name], other_mirror).unlink()
    other = run(f"data_mirror={other_mirror}")
    assert other.returncode == 0 and "Nothing to be done" in other.stderr, other.stderr[-3000:]
    # nor is the path of a manifest with identical bytes
    alt = run.root / "alt"
    alt.mkdir()
    for f in ("manifest.yaml", "giant_verb_list.verb_index"):
        shutil.copy(REPO_ROOT / "resources" / f, alt / f)
    same = run(f"manifest={alt / 'manifest.yaml'}")
    assert same.returncode == 0 and "Nothing to be done" in same.stderr, same.stderr[-3000:]
    # forced to run again, offline: the fetch keeps the verified copies, needs no network, and succeeds
    forced = subprocess.run(
        [*_cmd(run), "--forcerun", "fetch", "--", str(run.target)],
        cwd=run.root,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert run.raw_files() == fetched
    assert {p: (run.raw / p).stat().st_ino for p in fetched} == inodes  # never deleted or replaced


def _cmd(run: Run) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO_ROOT / "Snakefile"),
        "--cores",
        "1",
        "--configfile",
        "config/quick.yaml",
        str(run.root / "test.yaml"),
    ]


def test_changed_entry_is_fetched_again_and_a_failed_fetch_loses_nothing(run: Run, data_dir: Path) -> None:
    assert run(f"data_mirror={data_dir}").returncode == 0
    fetched = run.raw_files()
    name = "verbs_combined"
    rel = next(p for p in fetched if p.startswith(f"{name}/"))
    # the publisher's update: a new checksum (and URL) in a copy of the manifest; offline it cannot be had
    raw = yaml.safe_load((REPO_ROOT / "resources" / "manifest.yaml").read_text())
    new_sha = "ab" * 32
    raw["sources"][name]["sha256"] = new_sha
    raw["sources"][name]["url"] = raw["sources"][name]["url"].replace("db423f8", "0000000")
    bumped = run.root / "bumped"
    bumped.mkdir()
    (bumped / "manifest.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    shutil.copy(REPO_ROOT / "resources" / "giant_verb_list.verb_index", bumped)
    failed = run(f"manifest={bumped / 'manifest.yaml'}")
    assert failed.returncode != 0
    # the old copy no longer verifies: its fetch job runs and says offline why it failed and what to do;
    # the copy stays as it was (set aside only once a verified copy replaces it), no job read it, and
    # the fetch is forced again at the next start
    assert f"matches no checksum of source '{name}'" in failed.stderr
    log = (run.root / "results" / "logs" / "fetch" / rel).with_name(Path(rel).name + ".log").read_text()
    assert "data_mirror=DIR" in log, log
    assert run.raw_files() == fetched
    assert not [p for p in (run.raw / name).iterdir() if p.name.endswith(".tmp")]  # nothing half-written
    # the other source is untouched
    other = next(p for p in fetched if not p.startswith(f"{name}/"))
    assert run.raw_files()[other] == fetched[other]
    # back on the original manifest, offline: the set-aside copy verifies again and is put back, no download
    back = run()
    assert back.returncode == 0, back.stderr[-3000:]
    assert run.raw_files() == fetched


def test_hand_edited_raw_copy_is_set_aside_and_never_used(run: Run, data_dir: Path) -> None:
    assert run(f"data_mirror={data_dir}").returncode == 0
    fetched = run.raw_files()
    lexicon = run.target.read_bytes()
    rel = next(p for p in fetched if p.startswith("verbs_combined/"))
    edited = fetched[rel].replace(b"abandon", b"abandom", 1)
    assert edited != fetched[rel]
    (run.raw / rel).write_bytes(edited)  # newer than the lexicon: it would be read by the next run
    # a dry run reports it, forces its fetch, and changes no file
    before = _tree(run.root)
    dry = subprocess.run(
        [*_cmd(run), "-n", "--config", f"data_mirror={data_dir}", "--", str(run.target)],
        cwd=run.root,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert f"{run.raw / rel}: matches no checksum of source 'verbs_combined'" in dry.stderr
    assert "fetch" in _jobs(dry.stdout + dry.stderr)
    assert _tree(run.root) == before
    again = run(f"data_mirror={data_dir}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{run.raw / rel}: matches no checksum of source 'verbs_combined'" in again.stderr
    assert "fetch" in _jobs(again.stdout + again.stderr)
    # the fetch job set it aside and fetched a verified copy: the results are those of the verified copy
    files = run.raw_files()
    assert [files[p] for p in files if p.startswith(f"{rel}.unverified-")] == [edited]
    assert files[rel] == fetched[rel]
    assert run.target.read_bytes() == lexicon
    assert "Nothing to be done" in run(f"data_mirror={data_dir}").stderr


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file below ``root`` but Snakemake's bookkeeping: (mtime_ns, bytes)."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".snakemake" not in p.parts
    }


def _clone(tmp_path: Path) -> Path:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    return clone


def test_dvc_on_a_fresh_clone_previews_and_never_loses_a_fetched_file(tmp_path: Path, data_dir: Path) -> None:
    clone = _clone(tmp_path)
    dvc = [sys.executable, "-m", "dvc"]

    def run_dvc(*args: str, mirror: bool = False) -> subprocess.CompletedProcess[str]:
        env = _env()
        if mirror:
            env["VERBEVAL_DATA_MIRROR"] = str(data_dir)
        return subprocess.run([*dvc, *args], cwd=clone, env=env, capture_output=True, text=True)

    # the README's preview works before anything has run (`dvc repro --dry` does not: DVC #9021), and
    # lists the paper pipeline alone (a bare `dvc status` adds pipelines/ci/dvc.yaml's stages)
    status = run_dvc("status", "dvc.yaml")
    assert status.returncode == 0, status.stderr[-2000:]
    assert "fetch--combined_verb_list_csv--verbs_combined:" in status.stdout
    assert "pipelines/ci/dvc.yaml:" not in status.stdout
    dry = run_dvc("repro", "--dry")
    assert dry.returncode != 0
    assert re.search(r"ERROR: failed to reproduce '[^']+': \[Errno 2\] No such file or directory: ", dry.stderr)
    stage = "fetch--combined_verb_list_csv--verbs_combined"
    raw = clone / "data" / "raw" / "verbs_combined" / "combined_verb_list.csv"
    first = run_dvc("repro", "-s", stage, mirror=True)
    assert first.returncode == 0, first.stderr[-2000:]
    data = raw.read_bytes()
    # without the mirror, offline: where the bytes came from is not a dependency
    plain = run_dvc("repro", "-s", stage)
    assert plain.returncode == 0 and "didn't change, skipping" in plain.stdout + plain.stderr, plain.stdout
    # a changed manifest entry is a dependency: it runs, fails offline, and loses nothing (set aside)
    manifest = clone / "resources" / "manifest.yaml"
    original = manifest.read_text()
    entry = yaml.safe_load(original)["sources"]["verbs_combined"]["sha256"]
    manifest.write_text(original.replace(entry, "ab" * 32))
    failed = run_dvc("repro", "-s", stage)
    assert failed.returncode != 0
    assert raw.read_bytes() == data and not list(raw.parent.glob(f"{raw.name}.unverified-*"))
    # back to the original entry, offline: the copy verifies again, no download
    manifest.write_text(original)
    back = run_dvc("repro", "-s", stage)
    assert back.returncode == 0, back.stderr[-2000:]
    assert raw.read_bytes() == data


def _stat_tree(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Every data file below ``root`` (not the ``.verified.json`` caches): (inode, mtime_ns, ctime_ns, bytes)."""
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_ctime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_dvc_repro_between_two_snakemake_runs_reruns_nothing(tmp_path: Path, data_dir: Path) -> None:
    """Snakemake and DVC sharing ``raw_dir`` (as the quick start and the paper's dvc.yaml do): a Snakemake
    run, then `dvc repro` of a stage whose fetch stages keep the verified raw copies, then Snakemake
    again, which has nothing to do. DVC must not replace a raw copy that its stage left as it was
    (a cached output is deleted and copied back from DVC's cache after each run, with a new mtime:
    the generated fetch outputs are ``cache: false``, :data:`verbeval.workflow.dvc_yaml.RAW_OUT`)."""
    from conftest import checkout_view
    from verbeval.workflow.dvc_yaml import dvc_pipeline, render, stage_name, workflow_jobs

    root = checkout_view(tmp_path / "wd")
    for name, results in (("snake.yaml", "results"), ("dvc-run.yaml", "results-dvc")):
        config = {"raw_dir": "raw", "results_dir": results, "agreement": {"verb_lists": SOURCES}}
        (root / name).write_text(yaml.safe_dump(config))
    configs = ["config/config.yaml", "config/quick.yaml", "dvc-run.yaml"]
    jobs = workflow_jobs(root / "Snakefile", [root / c for c in configs], root)
    lexicon = next(j for j in jobs if j.rule == "lexicon")
    jobs = [lexicon, *(j for j in jobs if j.rule == "fetch" and set(j.outputs) & set(lexicon.inputs))]
    assert len(jobs) == 1 + len(SOURCES)
    (root / "dvc.yaml").write_text(render(dvc_pipeline(jobs, configs, root), "(test)"))
    env = {**_env(), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for args in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(args, cwd=root, env=env, check=True)
    snakemake = [sys.executable, "-m", "snakemake", "-s", "Snakefile", "--cores", "1", "--configfile"]
    snakemake += ["config/quick.yaml", "snake.yaml", "--config", f"data_mirror={data_dir}", "--"]
    snakemake += ["results/agreement/lexicon.parquet"]

    first = subprocess.run(snakemake, cwd=root, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    raw = _stat_tree(root / "raw")
    assert len(raw) == len(SOURCES)
    repro = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", stage_name(lexicon)],
        cwd=root,
        env={**env, "VERBEVAL_DATA_MIRROR": str(data_dir)},
        capture_output=True,
        text=True,
    )
    assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
    assert "Running stage 'fetch--" in repro.stdout  # DVC ran the fetch stages: they kept the raw copies
    lexicon_bytes = (root / "results" / "agreement" / "lexicon.parquet").read_bytes()
    assert (root / "results-dvc" / "agreement" / "lexicon.parquet").read_bytes() == lexicon_bytes
    assert _stat_tree(root / "raw") == raw  # neither replaced nor touched
    again = subprocess.run(snakemake, cwd=root, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stderr, again.stderr[-3000:]


@pytest.mark.parametrize("configfile", [False, True])
def test_from_another_working_directory_the_error_says_run_from_the_root(tmp_path: Path, configfile: bool) -> None:
    cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(REPO_ROOT / "Snakefile"), "--cores", "1"]
    if configfile:
        cmd += ["--configfile", str(REPO_ROOT / "config" / "quick.yaml")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        f"working directory {tmp_path}: run the workflow from the repository root ({REPO_ROOT}), "
        f"or from elsewhere with -s {REPO_ROOT / 'Snakefile'} --directory {REPO_ROOT}"
    ) in out, out[-2000:]
    assert (
        "config/config.yaml not found" if not configfile else "resources/manifest.yaml: cannot read manifest"
    ) in out
    assert list(tmp_path.iterdir()) in ([], [tmp_path / ".snakemake"])  # nothing written but Snakemake's own folder


@pytest.mark.e2e
@pytest.mark.parametrize("absolute", [True, False])
def test_the_readme_way_to_run_from_another_directory(tmp_path: Path, absolute: bool) -> None:
    """The README's advice for running from outside the repository: ``-s REPO/Snakefile --directory
    REPO``, with a ``--configfile`` path absolute or relative to where the user is."""
    from conftest import checkout_view

    repo = checkout_view(tmp_path / "repo")  # the checkout as symlinks: Snakemake's .snakemake/ lands here
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = repo / "config" / "quick.yaml" if absolute else Path("..") / "repo" / "config" / "quick.yaml"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--cores",
        "1",
        "-s",
        str(repo / "Snakefile"),
        "--directory",
        str(repo),
        "--configfile",
        str(config),
    ]
    proc = subprocess.run(cmd, cwd=elsewhere, env=_env(), capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert re.search(r"^infer\s+2$", out, re.M), out[-2000:]  # the quick start's two models
    assert list(elsewhere.iterdir()) == []  # nothing written where the user stands
