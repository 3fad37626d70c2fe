"""Running ``snakemake`` for a benchmark, and each job's wall time as Snakemake itself records it.

The benchmarks run the workflow as a user does: ``snakemake`` in a subprocess from the current
directory (the repository root), nothing re-typed. Per-job times come from Snakemake's own job
metadata: the run keeps it in a SQLite file of its own (``--persistence-backend db``), whose
``snakemake_metadata`` table has one record per output file with the job's rule, a hash of the
job, its start (when Snakemake started the job) and end (the output file's modification time).
A file of its own holds only this run's jobs, not those of other runs from the same directory.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from verbeval.bench.timing import process_seconds

#: rules whose job imports torch and transformers (loads a model or a tokenizer): the start-up estimate
MODEL_RULES = ("infer", "infer_no_simverb", "simverb_score", "veridicality_predict", "lemmas", "lexicon_forms")


@dataclass(frozen=True)
class Job:
    """One job of a Snakemake run: its rule, outputs, and wall time from its start to its last output."""

    rule: str
    outputs: tuple[str, ...]
    start: float
    end: float

    @property
    def wall_s(self) -> float:
        return max(self.end - self.start, 0.0)  # an output kept from before (update()) ends before the start


@dataclass(frozen=True)
class SnakemakeRun:
    """A finished ``snakemake`` run: its command, wall time (start-up and every job), jobs, and the
    directory it ran in (its jobs' relative output paths are relative to it)."""

    command: list[str]
    cores: int
    wall_s: float
    jobs: list[Job]
    cwd: Path = Path(".")

    def by_rule(self) -> dict[str, dict[str, float]]:
        """Jobs and summed job wall time (s) per rule, rules in order of their first job's start."""
        out: dict[str, dict[str, float]] = {}
        for j in sorted(self.jobs, key=lambda j: j.start):
            d = out.setdefault(j.rule, {"jobs": 0, "wall_s": 0.0})
            d["jobs"] += 1
            d["wall_s"] = round(d["wall_s"] + j.wall_s, 3)
        return out

    def job_writing(self, path: str | Path) -> Job:
        """The job with ``path`` among its outputs (paths compared resolved)."""
        want = Path(path).resolve()
        for j in self.jobs:
            if any((self.cwd / o).resolve() == want for o in j.outputs):
                return j
        raise LookupError(f"no job of this snakemake run wrote {path}")

    def summary(self) -> dict[str, Any]:
        return {
            "command": " ".join(self.command),
            "cores": self.cores,
            "wall_s": round(self.wall_s, 3),
            "jobs": len(self.jobs),
            "by_rule": self.by_rule(),
        }


def snakemake_command(
    *,
    configfiles: Sequence[str | Path],
    targets: Sequence[str] = (),
    cores: int,
    metadata_db: Path,
    config_values: Sequence[str] = (),
) -> list[str]:
    """The ``snakemake`` command line of a benchmark run: the workflow's own Snakefile and profile
    (from the current directory), ``configfiles`` in order, ``config_values`` (``--config
    KEY=VALUE``), and Snakemake's job metadata kept in ``metadata_db``."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        *targets,
        "--cores",
        str(cores),
        "--configfile",
        *(str(c) for c in configfiles),
        *(["--config", *config_values] if config_values else []),
        "--persistence-backend",
        "db",
        "--persistence-backend-db-url",
        f"sqlite:///{metadata_db.resolve()}",
    ]


def job_records(metadata_db: Path) -> list[Job]:
    """The jobs recorded in a run's metadata file: the records of one job's outputs share its
    ``job_hash``; the job starts at the earliest recorded start and ends at the latest output."""
    with sqlite3.connect(f"file:{metadata_db}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT job_hash, rule, target, starttime, endtime FROM snakemake_metadata "
            "WHERE COALESCE(incomplete, 0) = 0 AND endtime IS NOT NULL"
        ).fetchall()
    jobs: dict[Any, dict[str, Any]] = {}
    for job_hash, rule, target, start, end in rows:
        j = jobs.setdefault(job_hash, {"rule": rule, "outputs": [], "start": start, "end": end})
        j["outputs"].append(target)
        j["start"], j["end"] = min(j["start"], start), max(j["end"], end)
    return sorted(
        (Job(j["rule"], tuple(sorted(j["outputs"])), j["start"], j["end"]) for j in jobs.values()),
        key=lambda j: (j.start, j.rule),
    )


def run_snakemake(
    *,
    configfiles: Sequence[str | Path],
    run_dir: Path,
    targets: Sequence[str] = (),
    cores: int,
    config_values: Sequence[str] = (),
    cwd: str | Path | None = None,
) -> SnakemakeRun:
    """Run ``snakemake`` (:func:`snakemake_command`) to its end, its metadata in ``run_dir``
    (created; the caller empties it first for a run from scratch). Raises with the end of
    Snakemake's output if it fails."""
    run_dir.mkdir(parents=True, exist_ok=True)
    db = run_dir / "snakemake-metadata.sqlite"
    cmd = snakemake_command(
        configfiles=configfiles, targets=targets, cores=cores, metadata_db=db, config_values=config_values
    )
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=child_environ())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"snakemake failed ({proc.returncode}): {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return SnakemakeRun(cmd, cores, wall, job_records(db), Path(cwd or Path.cwd()))


def verbeval_bin() -> Path:
    """The folder of the ``verbeval`` that runs the bench (its Python's ``bin/``, a venv's or not)."""
    return Path(sys.executable).parent


def child_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with :func:`verbeval_bin` first on ``PATH``: the
    workflow's jobs run ``verbeval`` through ``PATH``, and must run the one being benchmarked, also
    when it was started as ``VENV/bin/verbeval bench`` without the venv activated."""
    env = dict(os.environ if environ is None else environ)
    env["PATH"] = os.pathsep.join([str(verbeval_bin()), *(p for p in env.get("PATH", "").split(os.pathsep) if p)])
    return env


def check_imports(copy: Path, env: Mapping[str, str]) -> None:
    """Raise unless this Python, and the ``verbeval`` console script's, import ``copy``'s package."""
    want = (copy / "src" / "verbeval").resolve()
    script = Path(sys.executable).parent / "verbeval"
    pythons = [sys.executable]
    if script.is_file():
        first = script.read_text(errors="replace").splitlines()[0]
        if first.startswith("#!"):
            pythons.append(first[2:].strip().split()[0])
    for py in dict.fromkeys(pythons):
        got = subprocess.run(
            [py, "-c", "import verbeval, pathlib; print(pathlib.Path(verbeval.__file__).resolve().parent)"],
            capture_output=True,
            text=True,
            env=dict(env),
            check=True,
        ).stdout.strip()
        if Path(got) != want:
            raise RuntimeError(f"{py} imports verbeval from {got}, not from {want}")


@cache
def startup_costs() -> dict[str, float]:
    """What every job pays before its work: the ``verbeval`` command's start (``verbeval
    --version``), and the torch + transformers import of a job that loads a model."""
    verbeval = str(verbeval_bin() / "verbeval")
    return {
        "verbeval_cli_s": round(process_seconds([verbeval, "--version"]), 3),
        "import_torch_transformers_s": round(process_seconds([sys.executable, "-c", "import torch, transformers"]), 3),
    }


def startup_share(run: SnakemakeRun) -> dict[str, Any]:
    """:func:`startup_costs`, the run's model jobs, and the estimated share of the run's core time
    that went to start-ups (every job's CLI start, every model job's imports)."""
    startup = startup_costs()
    model_jobs = sum(1 for j in run.jobs if j.rule in MODEL_RULES)
    share = (len(run.jobs) * startup["verbeval_cli_s"] + model_jobs * startup["import_torch_transformers_s"]) / (
        run.cores * run.wall_s
    )
    return {"startup": startup, "model_jobs": model_jobs, "startup_share_estimate": round(share, 3)}
