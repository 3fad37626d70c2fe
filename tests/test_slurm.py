"""The SLURM profile (profiles/slurm) on the CI configuration, without a cluster.

A dry run with the profile (the slurm executor plugin installed) prints every job's rule, threads,
resources and command; each job's sbatch options are then built by the plugin's own functions
(``get_submit_command``, ``set_gres_string``) from those resources, as a real submission would.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from verbeval.cli import main as verbeval_main
from verbeval.core.config import load_schema

if sys.version_info < (3, 11):  # the plugin's own requirement; from 3.11 on it is in the test extra
    pytest.skip("snakemake-executor-plugin-slurm needs Python >= 3.11", allow_module_level=True)
from snakemake_executor_plugin_slurm.submit_string import get_submit_command  # noqa: E402
from snakemake_executor_plugin_slurm.utils import set_gres_string  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
PROFILE = REPO_ROOT / "profiles" / "slurm"
CPU_PROFILE = REPO_ROOT / "profiles" / "slurm-cpu"
#: the rules that declare a `gpu` resource (workflow/rules/*.smk)
GPU_RULES = {"infer", "infer_no_simverb", "simverb_score", "veridicality_predict"}
THREADS = 3  # inference.threads: not the default, so that a hard-coded number shows


class _Resources(dict):
    """Job resources as the plugin reads them: ``get`` and attribute access."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Job:
    def __init__(self, rule: str, threads: int, resources: dict[str, Any]) -> None:
        self.name = rule
        self.threads = threads
        self.resources = _Resources(resources)

    def is_group(self) -> bool:
        return False


def _value(text: str) -> Any:
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def dry_run_jobs(output: str) -> list[dict[str, Any]]:
    """Every job of a dry run's output: rule, threads (1 unless printed), resources, shell command."""
    jobs: list[dict[str, Any]] = []
    for block in re.split(r"\n(?=\[[A-Z][a-z]{2} [A-Z][a-z]{2} )", output):
        m = re.search(r"^(?:local)?rule (\w+):$", block, re.M)
        if m is None:
            continue
        job: dict[str, Any] = {"rule": m.group(1), "threads": 1, "resources": {}, "shell": ""}
        t = re.search(r"^\s+threads: (\d+)$", block, re.M)
        if t:
            job["threads"] = int(t.group(1))
        r = re.search(r"^\s+resources: (.*)$", block, re.M)
        if r:
            job["resources"] = {k: _value(v) for k, _, v in (item.partition("=") for item in r.group(1).split(", "))}
        s = re.search(r"^Shell command: (.*)$", block, re.M)
        if s:
            job["shell"] = s.group(1)
        jobs.append(job)
    return jobs


def sbatch_options(job: dict[str, Any]) -> str:
    """The sbatch call the plugin builds for a job (account and partition as the executor adds them)."""
    res = job["resources"]
    params = {"run_uuid": "test", "slurm_logfile": "x.log", "comment_str": f"rule_{job['rule']}",
              "account": f"-A {res['slurm_account']}", "partition": f"-p {res['slurm_partition']}", "workdir": None}
    j = _Job(job["rule"], job["threads"], res)
    return get_submit_command(j, params) + set_gres_string(j)


def _env(path_prefix: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bins = [str(Path(sys.executable).parent)] + ([str(path_prefix)] if path_prefix else [])
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    env.setdefault("TQDM_DISABLE", "1")
    return env


@pytest.fixture(scope="module")
def workdir(tokenizer_path: Callable[[str], Path], wordpiece_path: Path, data_dir: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CI configuration (.test/config/ci.yaml) with its tiny models, plus a model split over 2 GPUs."""
    root = tmp_path_factory.mktemp("slurm")
    gpt2, uncased = tokenizer_path("gpt2"), tokenizer_path("bert-base-uncased")
    for arch, tok, name in (("bert", wordpiece_path, "tiny-bert-base-cased"), ("gpt2", gpt2, "tiny-gpt2"),
                            ("bert-nli", uncased, "tiny-bert-nli"), ("gpt2", gpt2, "tiny-gpt2-split")):
        assert verbeval_main(["-q", "tiny-model", "--tokenizer", str(tok), "--arch", arch,
                              "--out", str(root / "models" / name)]) == 0
    cfg = yaml.safe_load((REPO_ROOT / ".test" / "config" / "ci.yaml").read_text())
    cfg["data_mirror"] = str(data_dir)
    cfg["manifest"] = str(REPO_ROOT / "resources" / "manifest.yaml")
    cfg["inference"]["threads"] = THREADS
    # the CI config's BERT and GPT-2 (its other causal families route exactly like GPT-2)
    cfg["models"] = [m for m in cfg["models"] if m["id"] in ("models/tiny-bert-base-cased", "models/tiny-gpt2")]
    cfg["models"].append({"id": "models/tiny-gpt2-split", "name": "tiny-gpt2-split", "device_map": "auto", "gpus": 2,
                          "dtype": "bfloat16"})
    # the repository's resources/ files (defaults relative to the repository) from the working directory
    schema = load_schema()["properties"]
    for section, node in ((None, cfg), ("agreement", cfg.setdefault("agreement", {}))):
        for key, sub in (schema[section]["properties"] if section else schema).items():
            if isinstance(sub.get("default"), str) and (REPO_ROOT / sub["default"]).is_file():
                node.setdefault(key, str(REPO_ROOT / sub["default"]))
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return root


def _snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None,
               profile: Path = PROFILE) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), *args, "--directory", str(workdir),
           "--workflow-profile", str(profile), "--configfile", str(workdir / "config.yaml")]
    return subprocess.run(cmd, cwd=workdir, env=env or _env(), capture_output=True, text=True)


@pytest.fixture(scope="module")
def dry_run(workdir: Path) -> subprocess.CompletedProcess[str]:
    # --cores: a dry run otherwise caps every job's threads at 1 (a submission does not)
    proc = _snakemake(workdir, "-n", "--cores", "64")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_gpu_jobs_go_to_the_gpu_partition_with_their_gpus(dry_run: subprocess.CompletedProcess[str]) -> None:
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    gpu_partition = profile["set-resources"]["infer"]["slurm_partition"]
    cpu_partition = profile["default-resources"]["slurm_partition"]
    assert gpu_partition != cpu_partition
    jobs = dry_run_jobs(dry_run.stdout + dry_run.stderr)
    assert len(jobs) > 40
    seen_gpu_rules = set()
    for job in jobs:
        rule, res = job["rule"], job["resources"]
        if rule == "all":
            continue
        sbatch = sbatch_options(job)
        gpus = res.get("gpu", 0)
        where = f"{rule} {sbatch}"
        if gpus:
            seen_gpu_rules.add(rule)
            assert res["slurm_partition"] == gpu_partition, where
            assert f"--gpus={gpus}" in sbatch, where
            assert "--gres" not in sbatch, where  # one GPU request, not two
            # one task using all its GPUs, not one task per GPU (snakemake-executor-plugin-slurm#316)
            assert "--ntasks-per-gpu" not in sbatch and "--ntasks" not in sbatch, where
        else:
            assert res["slurm_partition"] == cpu_partition, where
            assert "--gpus" not in sbatch and "--gres" not in sbatch, where
        # the CPUs SLURM grants are the threads the command is told to use
        assert f"--cpus-per-task={job['threads']}" in sbatch, where
        m = re.search(r"--threads (\d+)", job["shell"])
        if m:
            assert int(m.group(1)) == job["threads"] == THREADS, where
    assert seen_gpu_rules == GPU_RULES
    # the profile routes exactly the rules that declare GPUs
    routed = {r for r, v in profile["set-resources"].items() if v.get("slurm_partition") == gpu_partition}
    assert routed == GPU_RULES


def test_a_model_split_over_gpus_asks_for_all_of_them(dry_run: subprocess.CompletedProcess[str]) -> None:
    # the model's one job (every branch of it): rule infer, or infer_no_simverb (no SimVerb branch at bfloat16)
    jobs = {m.group(1): j for j in dry_run_jobs(dry_run.stdout + dry_run.stderr)
            if j["rule"] in ("infer", "infer_no_simverb")
            and (m := re.search(r"--manifest \S+/([\w.-]+)/shards/manifest\.json", j["shell"]))}
    assert jobs["tiny-gpt2-split"]["rule"] == "infer_no_simverb" and jobs["tiny-gpt2"]["rule"] == "infer"
    assert "--simverb-out" in jobs["tiny-gpt2"]["shell"] and "--simverb-out" not in jobs["tiny-gpt2-split"]["shell"]
    split, whole = jobs["tiny-gpt2-split"], jobs["tiny-gpt2"]
    assert split["resources"]["gpu"] == 2 and whole["resources"]["gpu"] == 1
    assert "--device-map auto" in split["shell"] and "--dtype bfloat16" in split["shell"]
    assert "--device-map" not in whole["shell"]
    sbatch = sbatch_options(split)
    assert "--gpus=2" in sbatch and "--ntasks-per-gpu" not in sbatch and "-p gpu" in sbatch


def test_placeholder_account_warns_in_a_dry_run(dry_run: subprocess.CompletedProcess[str]) -> None:
    assert "WARNING: slurm_account is still 'CHANGE-ME'" in dry_run.stderr


def _stand_in_slurm(tmp_path: Path) -> tuple[Path, Path]:
    """SLURM's commands as stand-ins that record any call and fail: (their folder, the record)."""
    calls = tmp_path / "calls.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "sinfo", "sacct", "squeue", "scontrol", "sacctmgr", "sshare", "scancel"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {calls}\nexit 1\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir, calls


def test_placeholder_account_stops_a_run_before_any_submission(workdir: Path, tmp_path: Path) -> None:
    """A real run: SLURM's commands are stand-ins that record any call; none may be submitted."""
    bin_dir, calls = _stand_in_slurm(tmp_path)
    proc = _snakemake(workdir, "templates", "--forcerun", "templates", env=_env(bin_dir))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "slurm_account is still 'CHANGE-ME'" in out and "nothing was submitted" in out, out[-3000:]
    submitted = calls.read_text() if calls.exists() else ""
    assert "sbatch" not in submitted, submitted


@pytest.mark.parametrize(("option", "expected"), [
    # replaces the profile's whole set-resources: infer would go to the CPU partition asking for GPUs
    (["--set-resources", "infer:mem_mb=200"], "set-resources give no slurm_partition to rule(s) infer, infer_no_simverb, simverb_score, veridicality_predict"),
    # replaces the profile's whole default-resources: no partition, time or memory left
    (["--default-resources", "slurm_account=my-account"], "default-resources lack slurm_partition, runtime, mem_mb"),
])
def test_command_line_resources_replacing_the_profile_stop_the_run(workdir: Path, tmp_path: Path, option: list[str],
                                                                  expected: str) -> None:
    bin_dir, calls = _stand_in_slurm(tmp_path)
    account = [] if option[0] == "--default-resources" else ["--default-resources", "slurm_account=acct",
                                                              "slurm_partition=cpu", "runtime=30", "mem_mb=8000"]
    proc = _snakemake(workdir, "templates", "--forcerun", "templates", *account, *option, env=_env(bin_dir))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert expected in out and "nothing was submitted" in out, out[-3000:]
    submitted = calls.read_text() if calls.exists() else ""
    assert "sbatch" not in submitted, submitted


def test_fetch_runs_locally_and_a_failed_submission_is_named_last(workdir: Path, tmp_path: Path) -> None:
    """A real run of the lexicon with stand-in SLURM commands: its fetch jobs (local rules) run in
    the Snakemake process and write their files; the lexicon job goes to the cluster, whose
    (stand-in) account check fails; the last lines of the output name that cause."""
    bin_dir, calls = _stand_in_slurm(tmp_path)
    res, raw = tmp_path / "res", tmp_path / "raw"
    proc = _snakemake(workdir, str(res / "agreement" / "lexicon.parquet"), "--config", f"results_dir={res}",
                      f"raw_dir={raw}", "--default-resources", "slurm_account=acct", "slurm_partition=cpu",
                      "runtime=30", "mem_mb=8000", env=_env(bin_dir))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    fetched = sorted(p.parent.name for p in raw.glob("*/*") if p.is_file())
    verb_lists = load_schema()["properties"]["agreement"]["properties"]["verb_lists"]["default"]
    assert fetched == sorted(verb_lists), out[-3000:]
    recorded = calls.read_text()
    assert "sacctmgr" in recorded and "sbatch" not in recorded, recorded  # the lexicon's submission, refused
    assert not (res / "agreement" / "lexicon.parquet").exists()
    tail = out.rstrip().splitlines()[-8:]
    summary = next(i for i, line in enumerate(tail) if line.startswith("verbeval: 1 failed job(s)"))
    assert tail[summary + 1].startswith("  lexicon: ") and "SLURM account 'acct'" in tail[summary + 1], tail


def test_the_profiles_watch_jobs_with_squeue(dry_run: subprocess.CompletedProcess[str]) -> None:
    """sacct hangs the run on a cancelled job ("CANCELLED by 0") and without slurmdbd (plugin 2.8.0);
    the plugin keeps squeue only while MinJobAge (default 300 s) >= 3 x the first status wait."""
    for profile in (PROFILE, CPU_PROFILE):
        settings = yaml.safe_load((profile / "config.yaml").read_text())
        assert settings["slurm-status-command"] == "squeue", profile
        assert 3 * settings["slurm-init-seconds-before-status-checks"] <= 300, profile
        assert settings["retries"] >= 1, profile  # a cancelled (preempted) job is resubmitted


def test_light_rules_are_local_and_the_first_status_wait_is_short(ci_rules: Any) -> None:
    """Issue 24, item 6: the plugin's 40 s wait before the first status check was paid at every level
    of the DAG, and every light rule was a cluster job. Now fetch, the tables, figures and DVC views run
    in the Snakemake process (local rules), the model and aggregation rules are cluster jobs, and the
    first status check comes after at most 10 s."""
    # what a cluster executor runs locally (Snakemake's Workflow.is_local without its local-executor case)
    local = {r.name for r in ci_rules.rules if r.group is None and r.name in ci_rules._localrules}  # noqa: SLF001
    assert {"fetch", "table2", "figure_top_p", "simverb_table", "dvc_metrics", "dvc_plot_data"} <= local, sorted(local)
    assert not {"infer", "aggregate", "templates", "lexicon", "lemmas"} & local, sorted(local)
    assert "pip_model" in local  # installs a model with pip: where the network is
    for profile in (PROFILE, CPU_PROFILE):
        settings = yaml.safe_load((profile / "config.yaml").read_text())
        assert settings["slurm-init-seconds-before-status-checks"] <= 10, profile
        assert settings["slurm-jobname-prefix"] == "verbeval", profile  # docs/workflow.md, "Job names"


@pytest.fixture(scope="module")
def cpu_dry_run(workdir: Path) -> subprocess.CompletedProcess[str]:
    proc = _snakemake(workdir, "-n", "--cores", "64", profile=CPU_PROFILE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_the_cpu_profile_asks_for_no_gpu(cpu_dry_run: subprocess.CompletedProcess[str]) -> None:
    profile = yaml.safe_load((CPU_PROFILE / "config.yaml").read_text())
    cpu_partition = profile["default-resources"]["slurm_partition"]
    jobs = [j for j in dry_run_jobs(cpu_dry_run.stdout + cpu_dry_run.stderr) if j["rule"] != "all"]
    assert {j["rule"] for j in jobs} >= GPU_RULES
    for job in jobs:
        sbatch = sbatch_options(job)
        where = f"{job['rule']} {sbatch}"
        assert job["resources"]["slurm_partition"] == cpu_partition, where
        assert job["resources"].get("gpu", 0) == 0, where
        assert "--gpus" not in sbatch and "--gres" not in sbatch, where
        assert f"--cpus-per-task={job['threads']}" in sbatch, where
