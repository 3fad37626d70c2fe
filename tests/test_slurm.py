"""The SLURM profiles (profiles/slurm, profiles/slurm-cpu) on the CI configuration, without a cluster.

The fast tier reads each profile as ``snakemake --workflow-profile PROFILE -n`` does, in process:
Snakemake's own command-line parser (``snakemake.cli.parse_args``, the slurm executor plugin
installed) turns the profile into default and per-rule resources, and the DAG is built with them
through Snakemake's API, as ``tests/inprocess.py`` does; each job's sbatch options are then built by
the plugin's own functions (``get_submit_command``, ``set_gres_string``) from its threads and
resources, as a real submission would. The start checks (account placeholder, command-line
resources replacing the profile's) are ``verbeval.workflow.snakemake``'s functions on a stand-in
workflow object with Snakemake's parsed settings and the workflow's real rules.

The end-to-end tier (``-m e2e``) keeps what needs a Snakemake process: one real ``snakemake
--workflow-profile profiles/slurm -n`` (its jobs are the in-process ones) and real runs with
stand-in SLURM commands (nothing submitted; the local fetch jobs run, a failed submission is named).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string

from conftest import checkout_view, stand_in_models
from inprocess import dry_run
from verbeval.core.config import load_schema
from verbeval.workflow.snakemake import start_problem

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = REPO_ROOT / "Snakefile"
PROFILE = REPO_ROOT / "profiles" / "slurm"
CPU_PROFILE = REPO_ROOT / "profiles" / "slurm-cpu"
#: the rules that declare a `gpu` resource (workflow/rules/*.smk)
GPU_RULES = {"infer", "infer_no_simverb", "precision_infer", "simverb_score", "veridicality_predict", "clams_score"}
THREADS = 3  # inference.threads: not the default, so that a hard-coded number shows
#: the resources a job of the profiles asks SLURM for (compared between the in-process and the real dry run)
SLURM_KEYS = ("slurm_account", "slurm_partition", "runtime", "mem_mb", "gpu", "tasks")


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
    params = {
        "run_uuid": "test",
        "slurm_logfile": "x.log",
        "comment_str": f"rule_{job['rule']}",
        "account": f"-A {res['slurm_account']}",
        "partition": f"-p {res['slurm_partition']}",
        "workdir": None,
    }
    j = _Job(job["rule"], job["threads"], res)
    return get_submit_command(j, params) + set_gres_string(j)


def _env(path_prefix: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bins = [str(Path(sys.executable).parent)] + ([str(path_prefix)] if path_prefix else [])
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    env.setdefault("TQDM_DISABLE", "1")
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A view of the checkout (conftest.checkout_view) running the CI configuration (.test/config/ci.yaml,
    as ``config.yaml``) with a model split over 2 GPUs; its local models are stand-ins (planning and
    scheduling read a model's folder and config.json only, conftest.stand_in_models)."""
    root = tmp_path_factory.mktemp("slurm")
    cfg = yaml.safe_load((REPO_ROOT / ".test" / "config" / "ci.yaml").read_text())
    cfg["inference"]["threads"] = THREADS
    # the CI config's BERT and GPT-2 (its other causal families route exactly like GPT-2)
    cfg["models"] = [m for m in cfg["models"] if m["id"] in ("models/tiny-bert-base-cased", "models/tiny-gpt2")]
    cfg["models"].append(
        {
            "id": "models/tiny-gpt2-split",
            "name": "tiny-gpt2-split",
            "device_map": "auto",
            "gpus": 2,
            "dtype": "bfloat16",
        }
    )
    # a sweep of three checkpoints, two queue jobs (inference.revisions_per_job): each submitted with
    # rule infer's partition, runtime and memory, and its GPUs
    cfg["models"].append(
        {"name": "sweep", "kind": "causal", "revisions": [{"path": f"models/sweep/step-{s}"} for s in (1, 2, 3)]}
    )
    cfg["inference"]["revisions_per_job"] = 2
    # the multilingual study's model job (clams_score) goes where infer goes
    cfg["multilingual"] = {"languages": ["fr"], "models": ["tiny-gpt2"]}
    wd = root / "wd"
    wd.mkdir()
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    models = stand_in_models(root / "models", wd / "config.yaml")
    for s in (1, 2, 3):
        (models / "sweep" / f"step-{s}").mkdir(parents=True)
        (models / "sweep" / f"step-{s}" / "config.json").write_text("{}\n")
    return checkout_view(wd, models=models)


def _parsed(profile: Path, *argv: str) -> Any:
    """The options of ``snakemake -s SNAKEFILE --workflow-profile PROFILE ARGV``, parsed by Snakemake
    itself: the profile's entries are the defaults of its command-line options."""
    from snakemake.cli import parse_args

    with contextlib.redirect_stderr(io.StringIO()):  # "Using workflow specific profile ..."
        return parse_args(["-s", str(SNAKEFILE), "--workflow-profile", str(profile), *argv])[1]


def profile_dry_run(workdir: Path, profile: Path = PROFILE) -> SimpleNamespace:
    """``snakemake -n --cores 64 --workflow-profile PROFILE --configfile config.yaml`` from
    ``workdir``, in process: ``.jobs``, each job's rule, threads, resources (the profile's defaults
    and per-rule entries applied by Snakemake), shell command and outputs; ``.stderr``, what parsing
    the workflow printed. --cores: a dry run otherwise caps every job's threads at 1 (a submission
    does not)."""
    from snakemake.settings.types import ResourceSettings

    args = _parsed(profile, "-n", "--cores", "64")
    resources = ResourceSettings(
        cores=args.cores,
        nodes=args.jobs,
        default_resources=args.default_resources,
        overwrite_resources=args.set_resources,
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run = dry_run(workdir, [workdir / "config.yaml"], resource_settings=resources)
    jobs = [
        {
            "rule": j["rule"],
            "threads": j["threads"],
            "shell": j["cmd"],
            "resources": j["resources"],
            "outputs": sorted(j["outputs"]),
        }
        for j in run.jobs
    ]
    return SimpleNamespace(jobs=jobs, stderr=err.getvalue())


@pytest.fixture(scope="module")
def slurm_run(workdir: Path) -> SimpleNamespace:
    return profile_dry_run(workdir, PROFILE)


@pytest.fixture(scope="module")
def cpu_run(workdir: Path) -> SimpleNamespace:
    return profile_dry_run(workdir, CPU_PROFILE)


def test_gpu_jobs_go_to_the_gpu_partition_with_their_gpus(slurm_run: SimpleNamespace) -> None:
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    gpu_partition = profile["set-resources"]["infer"]["slurm_partition"]
    cpu_partition = profile["default-resources"]["slurm_partition"]
    assert gpu_partition != cpu_partition
    jobs = slurm_run.jobs
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
    # the sweep's queue jobs (queue_N) go where infer goes
    assert seen_gpu_rules == GPU_RULES | {"queue_0", "queue_1"}
    queues = [j for j in jobs if j["rule"].startswith("queue_")]
    assert [j["resources"]["runtime"] for j in queues] == [profile["set-resources"]["infer"]["runtime"]] * 2
    assert all("--gpus=1" in sbatch_options(j) for j in queues)
    # the profile routes exactly the rules that declare GPUs
    routed = {r for r, v in profile["set-resources"].items() if v.get("slurm_partition") == gpu_partition}
    assert routed == GPU_RULES


def test_a_model_split_over_gpus_asks_for_all_of_them(slurm_run: SimpleNamespace) -> None:
    # the model's one job (every branch of it): rule infer, or infer_no_simverb (no SimVerb branch at bfloat16)
    jobs = {
        m.group(1): j
        for j in slurm_run.jobs
        if j["rule"] in ("infer", "infer_no_simverb")
        and (m := re.search(r"--manifest \S+/([\w.-]+)/shards/manifest\.json", j["shell"]))
    }
    assert jobs["tiny-gpt2-split"]["rule"] == "infer_no_simverb" and jobs["tiny-gpt2"]["rule"] == "infer"
    assert "--simverb-out" in jobs["tiny-gpt2"]["shell"] and "--simverb-out" not in jobs["tiny-gpt2-split"]["shell"]
    split, whole = jobs["tiny-gpt2-split"], jobs["tiny-gpt2"]
    assert split["resources"]["gpu"] == 2 and whole["resources"]["gpu"] == 1
    assert "--device-map auto" in split["shell"] and "--dtype bfloat16" in split["shell"]
    assert "--device-map" not in whole["shell"]
    sbatch = sbatch_options(split)
    assert "--gpus=2" in sbatch and "--ntasks-per-gpu" not in sbatch and "-p gpu" in sbatch


def test_placeholder_account_warns_in_a_dry_run(slurm_run: SimpleNamespace) -> None:
    assert "WARNING: slurm_account is still 'CHANGE-ME'" in slurm_run.stderr


#: the profile's default-resources with an account, repeated on the command line
ACCOUNT = ["--default-resources", "slurm_account=acct", "slurm_partition=cpu", "runtime=30", "mem_mb=8000"]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        # the profile as it is: the account placeholder
        ([], "slurm_account is still 'CHANGE-ME' (default-resources of the SLURM profile"),
        # replaces the profile's whole set-resources: infer would go to the CPU partition asking for GPUs
        (
            [*ACCOUNT, "--set-resources", "infer:mem_mb=200"],
            "set-resources give no slurm_partition to rule(s) clams_score, infer, infer_no_simverb, simverb_score, "
            "veridicality_predict",
        ),
        # replaces the profile's whole default-resources: no partition, time or memory left
        (
            ["--default-resources", "slurm_account=my-account"],
            "default-resources lack slurm_partition, runtime, mem_mb",
        ),
        # the profile's entries repeated with an account: nothing stops the run
        (ACCOUNT, None),
    ],
)
def test_start_checks_of_the_profile_and_command_line_resources(
    ci_rules: Any, option: list[str], expected: str | None
) -> None:
    """What ``onstart`` (common.smk: start_problem) says before the first submission of ``snakemake
    --workflow-profile profiles/slurm OPTION``: Snakemake's parsed resource settings and executor on
    a stand-in workflow object with the workflow's real rules (those declaring `gpu` among them).
    The real run that stops: test_placeholder_account_stops_a_run_before_any_submission (e2e)."""
    args = _parsed(PROFILE, *option)
    assert args.executor == "slurm"
    workflow = SimpleNamespace(
        executor_plugin=SimpleNamespace(name=args.executor),
        rules=ci_rules.rules,
        resource_settings=SimpleNamespace(
            default_resources=args.default_resources, overwrite_resources=args.set_resources
        ),
    )
    problem = start_problem(workflow)
    if expected is None:
        assert problem is None, problem
    else:
        assert problem is not None and expected in problem and problem.endswith("; nothing was submitted"), problem
    # the same settings with the local executor: never stopped
    workflow.executor_plugin = SimpleNamespace(name="local")
    assert start_problem(workflow) is None


def _stand_in_slurm(tmp_path: Path) -> tuple[Path, Path]:
    """SLURM's commands as stand-ins that record any call and fail: (their folder, the record)."""
    calls = tmp_path / "calls.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "sinfo", "sacct", "squeue", "scontrol", "sacctmgr", "sshare", "scancel"):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho {tool} "$@" >> {calls}\nexit 1\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir, calls


def _snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, profile: Path = PROFILE
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(SNAKEFILE),
        *args,
        "--directory",
        str(workdir),
        "--workflow-profile",
        str(profile),
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    return subprocess.run(cmd, cwd=workdir, env=env or _env(), capture_output=True, text=True)


@pytest.mark.e2e
def test_the_profiles_dry_run_schedules_the_in_process_jobs(workdir: Path, slurm_run: SimpleNamespace) -> None:
    """The one real ``snakemake --workflow-profile profiles/slurm -n`` (the slurm executor plugin in a
    Snakemake process): the account warning, and the jobs, threads and SLURM resources that the fast
    tier's in-process reading of the profile (profile_dry_run) checks."""
    proc = _snakemake(workdir, "-n", "--cores", "64")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "WARNING: slurm_account is still 'CHANGE-ME'" in proc.stderr

    def seen(jobs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((j["rule"], j["threads"], tuple((k, j["resources"].get(k)) for k in SLURM_KEYS)) for j in jobs)

    printed = dry_run_jobs(out)
    assert len(printed) == len(slurm_run.jobs) > 40
    assert seen(printed) == seen(slurm_run.jobs)


@pytest.mark.e2e
def test_placeholder_account_stops_a_run_before_any_submission(workdir: Path, tmp_path: Path) -> None:
    """A real run: SLURM's commands are stand-ins that record any call; none may be submitted."""
    bin_dir, calls = _stand_in_slurm(tmp_path)
    proc = _snakemake(workdir, "templates", "--forcerun", "templates", env=_env(bin_dir))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "slurm_account is still 'CHANGE-ME'" in out and "nothing was submitted" in out, out[-3000:]
    submitted = calls.read_text() if calls.exists() else ""
    assert "sbatch" not in submitted, submitted


@pytest.mark.e2e
def test_fetch_runs_locally_and_a_failed_submission_is_named_last(
    workdir: Path, tmp_path: Path, data_dir: Path
) -> None:
    """A real run of the lexicon with stand-in SLURM commands: its fetch jobs (local rules) run in
    the Snakemake process and write their files; the lexicon job goes to the cluster, whose
    (stand-in) account check fails; the last lines of the output name that cause."""
    bin_dir, calls = _stand_in_slurm(tmp_path)
    res, raw = tmp_path / "res", tmp_path / "raw"
    proc = _snakemake(
        workdir,
        str(res / "agreement" / "lexicon.parquet"),
        "--config",
        f"results_dir={res}",
        f"raw_dir={raw}",
        f"data_mirror={data_dir}",
        *ACCOUNT,
        env=_env(bin_dir),
    )
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


def test_the_profiles_watch_jobs_with_squeue() -> None:
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
    local = {r.name for r in ci_rules.rules if r.group is None and r.name in ci_rules._localrules}
    assert {"fetch", "table2", "figure_cutoffs", "simverb_table", "dvc_metrics", "dvc_plot_data"} <= local, sorted(
        local
    )
    assert not {"infer", "aggregate", "templates", "lexicon", "lemmas"} & local, sorted(local)
    assert "pip_model" in local  # installs a model with pip: where the network is
    for profile in (PROFILE, CPU_PROFILE):
        settings = yaml.safe_load((profile / "config.yaml").read_text())
        assert settings["slurm-init-seconds-before-status-checks"] <= 10, profile
        assert settings["slurm-jobname-prefix"] == "verbeval", profile  # docs/workflow.md, "Job names"


def test_the_cpu_profile_asks_for_no_gpu(cpu_run: SimpleNamespace) -> None:
    profile = yaml.safe_load((CPU_PROFILE / "config.yaml").read_text())
    cpu_partition = profile["default-resources"]["slurm_partition"]
    jobs = [j for j in cpu_run.jobs if j["rule"] != "all"]
    assert {j["rule"] for j in jobs} >= GPU_RULES
    for job in jobs:
        sbatch = sbatch_options(job)
        where = f"{job['rule']} {sbatch}"
        assert job["resources"]["slurm_partition"] == cpu_partition, where
        assert job["resources"].get("gpu", 0) == 0, where
        assert "--gpus" not in sbatch and "--gres" not in sbatch, where
        assert f"--cpus-per-task={job['threads']}" in sbatch, where
