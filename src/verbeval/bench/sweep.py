"""The ``sweep`` benchmark part: what a checkpoint sweep costs per revision (issue 43).

A checkpoint sweep is one ``models:`` entry with ``revisions:`` (one model per checkpoint). The part
builds ``N`` local checkpoints of a tiny GPT-2 (:data:`SWEEP_SHAPE`, random weights seeded by the
revision's index, the real GPT-2 vocabulary) named ``step-<k>``, writes a configuration that scores
them (:func:`sweep_config`: 2 agreement groups x 100 rows per source, inference on the CPU, SimVerb on
the first checkpoint only, veridicality on its released probabilities only) and runs the workflow's
default target on it from scratch, once per ``N`` (``--sweep-revisions``, default 2, 8, 32):

    snakemake --cores C --configfile WORKDIR/sweep/n<N>/sweep.yaml [--config KEY=VALUE]

(the Snakefile reads config/config.yaml first, so the file holds only what differs).

Every run has its own run folder (``WORKDIR/sweep/n<N>``: results, raw data, Snakemake's job
metadata); the checkpoint folders (inputs, not outputs) are built once under ``WORKDIR/sweep/models``
and shared by the runs (the run at ``N`` reads the first ``N``). The raw data is fetched again in
every run (with ``data_mirror=DIR``, a local copy), so each run is a whole run from scratch.

Reported per run: its wall time, jobs (and per rule, from Snakemake's job metadata,
:mod:`verbeval.bench.snakemake_jobs`), the load before it, and from the inference logs (``infer.log``
of each revision, or any log under ``results/logs``: the parser reads every ``*.log``) each
revision's ``contexts computed in S s`` (forward pass plus scoring, model load excluded) and model
load. Over the runs: the marginal cost of a revision, the least-squares slope of wall time over
``N`` (``marginal_s_per_revision``), and of the job count. Then the dry run (``snakemake -n``) of a
sweep of ``--sweep-dry-run`` revisions (default 1,000): the plan checks that each local model folder
exists and holds ``config.json`` and fingerprints its files, so each of those folders is a cheap
one, ``config.json`` copied and the tokenizer files symlinked from the first checkpoint, no weights
(the dry run's time therefore leaves out hashing real weight files).

``--sweep-size`` sets the checkpoints' shape (:data:`SWEEP_SIZES`): ``tiny`` (the default, above), or a
real size with random weights, distinct per revision (seeded by ``k``, each folder its own files, so
the page cache does not hide reads): ``gpt2-small`` (12 layers, hidden 768, the GPT-2 vocabulary,
0.5 GB per revision) or ``pythia-160m`` (GPT-NeoX, the GPT-NeoX tokenizer). Every size also reports
the plan of the largest sweep (``snakemake -n`` on its real weights) cold and warm
(:func:`bench_plan`), each revision's logged weight load (built by ``from_pretrained`` or swapped into
the module built before: :mod:`verbeval.core.weight_swap`), and, in the bench's own process, a
queue's loads of the first revisions against ``from_pretrained`` and one read of their weight files
(:func:`bench_loads`). Each run has a verbeval cache of its own (``$VERBEVAL_CACHE_DIR``: file hashes).

Snakemake runs with a stand-in ``scontrol`` (``exit 127``) first on ``PATH`` when a ``scontrol`` is
installed (as ``.ci/run`` does): installed SLURM client tools without a controller slow every
``snakemake`` command by about 9 s (docs/performance.md), which would be counted into every run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.bench.snakemake_jobs import SnakemakeRun, check_imports, child_environ, job_records, snakemake_command
from verbeval.bench.sweep_sizes import SWEEP_SIZES
from verbeval.bench.timing import load_1min, load_before
from verbeval.core.model_sources.fingerprint import CACHE_ENV

#: the default size's shape: GPT-2, layers, hidden size, heads (random weights, the real GPT-2 vocabulary)
SWEEP_SHAPE = {k: SWEEP_SIZES["tiny"][k] for k in ("layers", "hidden", "heads")}
#: the sweep's model entry name
SWEEP_NAME = "sweep"
#: the agreement groups the sweep scores, and the rows per template source
SWEEP_GROUPS = ("simple", "sent_comp")
SWEEP_ROWS = 100
#: the default numbers of revisions timed, and of the dry run's sweep
SWEEP_REVISIONS = (2, 8, 32)
SWEEP_DRY_RUN = 1000
#: rules whose jobs load a model and score its contexts: today's ``infer`` and ``infer_no_simverb`` (one
#: job per revision), issue 43's ``queue_<i>`` (one warm process for a chunk of revisions, which also runs
#: their lemmas, aggregation and lemma statistics)
SCORING_RULE = re.compile(r"infer\w*|queue_\d+")

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")


def checkpoint_dir(models_dir: Path, step: int) -> Path:
    return models_dir / f"step-{step}"


def build_checkpoints(tokenizer: Path, models_dir: Path, n: int, size: str = "tiny") -> list[Path]:
    """``models_dir/step-1`` ... ``step-n``: models of ``size`` (:data:`SWEEP_SIZES`, default a tiny
    GPT-2) on ``tokenizer``, the weights of ``step-k`` seeded with ``k`` (each folder its own files);
    a folder already there (``config.json``) is kept."""
    from verbeval.core.tiny_models import make_tiny_model

    shape = SWEEP_SIZES[size]
    out = []
    for k in range(1, n + 1):
        d = checkpoint_dir(models_dir, k)
        if not (d / "config.json").is_file():
            make_tiny_model(
                tokenizer,
                shape["arch"],
                d,
                seed=k,
                layers=shape["layers"],
                hidden=shape["hidden"],
                heads=shape["heads"],
            )
        out.append(d)
    return out


def cheap_checkpoints(template: Path, models_dir: Path, n: int) -> list[Path]:
    """``models_dir/step-1`` ... ``step-n`` for a dry run only: ``template``'s ``config.json`` copied
    and its tokenizer files symlinked, no weights (a dry run reads no weights)."""
    out = []
    for k in range(1, n + 1):
        d = checkpoint_dir(models_dir, k)
        if not (d / "config.json").is_file():
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template / "config.json", d / "config.json")
            for f in _TOKENIZER_FILES:
                if (template / f).exists() and not (d / f).exists():
                    (d / f).symlink_to((template / f).resolve())
        out.append(d)
    return out


def step_of(path: Path) -> int:
    """The training step of a ``step-<k>`` folder."""
    m = re.fullmatch(r"step-(\d+)", Path(path).name)
    if m is None:
        raise ValueError(f"{path}: not a step-<k> folder")
    return int(m.group(1))


def sweep_config(
    checkpoints: Sequence[Path],
    run_dir: Path,
    *,
    groups: Sequence[str] = SWEEP_GROUPS,
    rows: int = SWEEP_ROWS,
    threads: int = 1,
    batch_size: int = 64,
) -> dict[str, Any]:
    """The sweep's configuration (on top of config/config.yaml): one causal model entry with one
    revision per checkpoint (``{path, step}``), CPU inference, ``groups`` x ``rows`` rows per
    source, results and raw data under ``run_dir``, and the other studies kept small: SimVerb-3500
    scored on the first checkpoint only (the default is every revision), veridicality on the
    released probabilities only (the default; no model runs), 200 bootstrap resamples, PNG figures.
    The acquisition analysis keeps its default (``enabled: null``): it runs for a sweep of at least
    ``min_checkpoints`` (4) checkpoints, so the runs of fewer revisions do less work per run."""
    return {
        "results_dir": str(run_dir / "results"),
        "raw_dir": str(run_dir / "raw"),
        "models": [
            {
                "name": SWEEP_NAME,
                "kind": "causal",
                "gpus": 0,
                "revisions": [{"path": str(p), "step": step_of(p)} for p in checkpoints],
            }
        ],
        "inference": {"device": "cpu", "batch_size": batch_size, "threads": threads},
        "agreement": {
            "groups": list(groups),
            "max_rows_per_source": rows,
            "chunks": 1,
            "verb_lists": ["verbs_combined"],
            "bootstrap": {"resamples": 200},
            "figures": {"formats": ["png"]},
        },
        "simverb": {"models": [str(checkpoints[0])], "bootstrap": {"resamples": 200}},
    }


def write_sweep_config(path: Path, config: Mapping[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------ the logs

#: an inference log line (verbeval.agreement.cli.inference, verbeval.model_run): the model, then after
#: the first ";" the optional model load and the contexts computed (forward pass plus scoring)
_COMPUTED = re.compile(
    r"(?P<model>\S+): (?P<what>\d+ (?P<forms>form )?shards) -> [^;]*; "
    r"(?:model load (?P<load>[\d.]+) s, )?(?P<contexts>\d+) contexts computed in (?P<compute>[\d.]+) s"
)
_LOADED = re.compile(r"(?P<model>\S+): model loaded in (?P<load>[\d.]+) s")
#: verbeval.model_run: a model's whole agreement branch (contexts prepared, computed, written)
_BRANCH = re.compile(r"(?P<model>\S+): agreement branch (?P<s>[\d.]+) s")
#: verbeval.core.prefetch: how a model's weights were loaded (on the read-ahead thread or not), and how long it took
_WEIGHTS = re.compile(
    r"(?P<model>\S+): (?:(?P<swapped>weights swapped into the built module)|module built \(from_pretrained\)) "
    r"in (?P<s>[\d.]+) s"
)


@dataclass(frozen=True)
class Computed:
    """One ``... N contexts computed in S s`` line of an inference log."""

    model: str
    kind: str  # "agreement" or "forms" (multi-token forms)
    contexts: int
    compute_s: float
    load_s: float | None
    log: str


def parse_log_lines(lines: Iterable[str], log: str = "") -> tuple[list[Computed], dict[str, float], dict[str, float]]:
    """The ``contexts computed`` lines of a log, each model's ``model loaded in`` time, and each
    model's ``agreement branch`` time (summed over its lines)."""
    computed: list[Computed] = []
    loads: dict[str, float] = {}
    branches: dict[str, float] = {}
    for line in lines:
        m = _COMPUTED.search(line)
        if m is not None:
            computed.append(
                Computed(
                    m["model"],
                    "forms" if m["forms"] else "agreement",
                    int(m["contexts"]),
                    float(m["compute"]),
                    float(m["load"]) if m["load"] is not None else None,
                    log,
                )
            )
            continue
        m = _LOADED.search(line)
        if m is not None:
            loads[m["model"]] = float(m["load"])
            continue
        m = _BRANCH.search(line)
        if m is not None:
            branches[m["model"]] = round(branches.get(m["model"], 0.0) + float(m["s"]), 3)
    return computed, loads, branches


def weight_loads(lines: Iterable[str]) -> dict[str, tuple[str, float]]:
    """Each model's weight load of a log (:mod:`verbeval.core.prefetch`): ``swapped`` (into the module
    an earlier revision built) or ``built`` (``from_pretrained``), and its seconds."""
    out: dict[str, tuple[str, float]] = {}
    for line in lines:
        m = _WEIGHTS.search(line)
        if m is not None:
            out[m["model"]] = ("swapped" if m["swapped"] else "built", float(m["s"]))
    return out


def parse_logs(logs_dir: Path) -> tuple[list[Computed], dict[str, float], dict[str, float]]:
    """:func:`parse_log_lines` over every ``*.log`` below ``logs_dir``."""
    computed: list[Computed] = []
    loads: dict[str, float] = {}
    branches: dict[str, float] = {}
    for p in sorted(Path(logs_dir).rglob("*.log")):
        c, ld, br = parse_log_lines(p.read_text(errors="replace").splitlines(), str(p))
        computed += c
        loads.update(ld)
        for k, v in br.items():
            branches[k] = round(branches.get(k, 0.0) + v, 3)
    return computed, loads, branches


def parse_weight_loads(logs_dir: Path) -> dict[str, tuple[str, float]]:
    """:func:`weight_loads` over every ``*.log`` below ``logs_dir``."""
    out: dict[str, tuple[str, float]] = {}
    for p in sorted(Path(logs_dir).rglob("*.log")):
        out.update(weight_loads(p.read_text(errors="replace").splitlines()))
    return out


def weights_figures(loads: Mapping[str, tuple[str, float]]) -> dict[str, Any]:
    """The weight loads of a run (:func:`weight_loads`): how many revisions were built and swapped,
    and the mean seconds of each (None: none, e.g. a tree that does not log them)."""
    out: dict[str, Any] = {}
    for how in ("built", "swapped"):
        secs = [s for h, s in loads.values() if h == how]
        out[f"{how}_revisions"] = len(secs)
        out[f"{how}_load_s_per_revision"] = round(sum(secs) / len(secs), 3) if secs else None
    return out


def per_revision(
    computed: Sequence[Computed], loads: Mapping[str, float], branches: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Per model (revision) of the agreement lines: contexts and compute seconds summed, and its model
    load (the ``model load`` of its line, else its ``model loaded in`` line: in a queue the wait for
    the model read ahead); their means over the revisions, and the mean ``agreement branch`` time of
    those that log one."""
    branches = dict(branches or {})
    models: dict[str, dict[str, Any]] = {}
    for c in computed:
        if c.kind != "agreement":
            continue
        d = models.setdefault(c.model, {"contexts": 0, "compute_s": 0.0, "load_s": None})
        d["contexts"] += c.contexts
        d["compute_s"] = round(d["compute_s"] + c.compute_s, 3)
        if c.load_s is not None:
            d["load_s"] = c.load_s
    for name, d in models.items():
        if d["load_s"] is None and name in loads:
            d["load_s"] = loads[name]
    n = len(models)
    load_values = [d["load_s"] for d in models.values() if d["load_s"] is not None]
    return {
        "revisions_logged": n,
        "compute_s_total": round(sum(d["compute_s"] for d in models.values()), 3),
        "compute_s_per_revision": round(sum(d["compute_s"] for d in models.values()) / n, 3) if n else None,
        "model_load_s_per_revision": round(sum(load_values) / len(load_values), 3) if load_values else None,
        "contexts_per_revision": round(sum(d["contexts"] for d in models.values()) / n, 1) if n else None,
        "agreement_branch_s_per_revision": round(sum(branches.values()) / len(branches), 3) if branches else None,
    }


# ---------------------------------------------------------------------------------------- the fit


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares ``(slope, intercept)`` of ``ys`` over ``xs``; None with fewer than two distinct xs."""
    n = len(xs)
    if n != len(ys) or n < 2 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


# ---------------------------------------------------------------------------------------- running


def no_slurm_environ(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """``env`` with a stand-in ``scontrol`` (``exit 127``, in ``folder``) first on ``PATH`` when a
    ``scontrol`` is installed (the SLURM executor plugin runs it on import; without a controller that
    costs every ``snakemake`` command about 9 s); ``env`` unchanged otherwise."""
    env = dict(env)
    if shutil.which("scontrol", path=env.get("PATH")) is None:
        return env
    folder.mkdir(parents=True, exist_ok=True)
    stand_in = folder / "scontrol"
    stand_in.write_text("#!/bin/sh\nexit 127\n")
    stand_in.chmod(0o755)
    env["PATH"] = os.pathsep.join([str(folder), env.get("PATH", "")])
    return env


def run_timed(cmd: Sequence[str], env: Mapping[str, str], cwd: str | Path | None = None) -> tuple[float, str]:
    """Run ``cmd`` to its end: its wall time and output; raises with the output's end if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=dict(env), cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall, proc.stdout + proc.stderr


def bench_sweep_run(
    checkpoints: Sequence[Path],
    run_dir: Path,
    *,
    cores: int,
    config_values: Sequence[str],
    env: Mapping[str, str],
    threads: int = 1,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """One sweep from scratch in ``run_dir`` (``snakemake`` run from ``cwd``, default here): its figures."""
    from verbeval.bench.workflow_runs import bench_folder

    with bench_folder(run_dir) as run_dir:
        cfg = write_sweep_config(run_dir / "sweep.yaml", sweep_config(checkpoints, run_dir, threads=threads))
        db = run_dir / "snakemake-metadata.sqlite"
        cmd = snakemake_command(configfiles=[cfg], cores=cores, metadata_db=db, config_values=list(config_values))
        load = load_before(f"sweep n={len(checkpoints)}")
        # a cache of its own (file hashes): each run from scratch, whichever tree ran before
        started = time.time()
        wall, _ = run_timed(cmd, {**env, CACHE_ENV: str(run_dir / "cache")}, cwd)
        # the Snakemake report of the run, as a user makes it after the run
        report_s, _ = run_timed([*cmd, "--report", str(run_dir / "report.html")], env, cwd)
    run = SnakemakeRun(cmd, cores, wall, job_records(db), Path(cwd or Path.cwd()))
    scoring = [j for j in run.jobs if SCORING_RULE.fullmatch(j.rule)]
    last_forward = max((j.end for j in scoring), default=started)
    computed, loads, branches = parse_logs(run_dir / "results" / "logs")
    n = len(checkpoints)
    return {
        "revisions": n,
        "load_before": load,
        **run.summary(),
        "scoring_jobs": len(scoring),
        "scoring_job_s_total": round(sum(j.wall_s for j in scoring), 3),
        # Snakemake's job wall times of the model-scoring rules (SCORING_RULE): start-up, model load,
        # scoring and writing, summed over the jobs, per revision (a proxy: a job's wall time is its
        # start to its last output)
        "scoring_job_s_per_revision": round(sum(j.wall_s for j in scoring) / n, 3),
        # from the end of the last scoring job (its last output) to the end of the run: what follows the
        # last forward pass (the last revision's post steps are inside its queue job)
        "after_queue_s": round(started + wall - last_forward, 3),
        # the jobs after the queue per revision: each rule's summed job wall time / revisions
        "post_s_per_revision": {
            rule: round(d["wall_s"] / n, 4) for rule, d in run.by_rule().items() if not SCORING_RULE.fullmatch(rule)
        },
        "report_s": round(report_s, 3),
        # from the logs: forward pass plus scoring per revision (model load excluded)
        "logs": per_revision(computed, loads, branches),
        # from the logs: each revision's weight load, built (from_pretrained) or swapped into a built module
        "weights": weights_figures(parse_weight_loads(run_dir / "results" / "logs")),
        "run_dir": str(run_dir),
    }


def bench_sweep(
    tokenizer: Path,
    workdir: Path,
    *,
    revisions: Sequence[int] = SWEEP_REVISIONS,
    dry_run: int = SWEEP_DRY_RUN,
    cores: int = 2,
    config_values: Sequence[str] = (),
    threads: int = 1,
    tree: Path | None = None,
    size: str = "tiny",
) -> dict[str, Any]:
    """The sweep part (module docstring): a run per number of ``revisions``, the marginal cost of a
    revision, and the dry run of a ``dry_run``-revision sweep (0: none).

    ``tree``: another checkout whose workflow runs (``snakemake`` from its root, its ``verbeval``
    imported through ``PYTHONPATH=<tree>/src``, checked first), e.g. a rework's; default: this one,
    from the current directory. ``size``: the checkpoints' shape (:data:`SWEEP_SIZES`; ``tokenizer``
    is its tokenizer); the checkpoints of each size are built once under ``WORKDIR/sweep/models`` (tiny)
    or ``WORKDIR/sweep/models-<size>``. Besides the runs: the plan (``snakemake -n``) of the largest
    sweep cold and warm (:func:`bench_plan`), and its weight loads in this process (:func:`bench_loads`).
    What it found is printed, a line each."""
    sweep_dir = (Path(workdir) / "sweep").resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    env = no_slurm_environ(child_environ(), sweep_dir / "no-slurm")
    cwd = None
    if tree is not None:
        cwd = Path(tree).resolve()
        env["PYTHONPATH"] = str(cwd / "src")
        check_imports(cwd, env)
    t0 = time.perf_counter()
    models_dir = sweep_dir / ("models" if size == "tiny" else f"models-{size}")
    checkpoints = build_checkpoints(Path(tokenizer), models_dir, max(revisions, default=1), size)
    build_s = time.perf_counter() - t0
    runs = [
        bench_sweep_run(
            checkpoints[:n],
            sweep_dir / f"n{n}",
            cores=cores,
            config_values=config_values,
            env=env,
            threads=threads,
            cwd=cwd,
        )
        for n in revisions
    ]
    xs = [r["revisions"] for r in runs]
    wall_fit = fit_line(xs, [r["wall_s"] for r in runs])
    jobs_fit = fit_line(xs, [r["jobs"] for r in runs])
    figures: dict[str, Any] = {
        "size": size,
        "shape": {**SWEEP_SIZES[size], "tokenizer": str(tokenizer)},
        "weights_bytes_per_revision": weights_bytes(checkpoints[0]),
        "groups": list(SWEEP_GROUPS),
        "rows_per_source": SWEEP_ROWS,
        "cores": cores,
        "threads": threads,
        "tree": str(cwd or Path.cwd()),
        "checkpoints_build_s": round(build_s, 3),
        "runs": runs,
        "marginal_s_per_revision": round(wall_fit[0], 3) if wall_fit else None,
        "fixed_s": round(wall_fit[1], 3) if wall_fit else None,
        "marginal_jobs_per_revision": round(jobs_fit[0], 3) if jobs_fit else None,
    }
    figures["plan"] = bench_plan(checkpoints, sweep_dir / "plan", config_values=config_values, env=env, cwd=cwd)
    figures["loads"] = bench_loads(checkpoints[: min(3, len(checkpoints))])
    if dry_run:
        figures["dry_run"] = bench_dry_run(
            checkpoints[0], sweep_dir, dry_run, config_values=config_values, env=env, cwd=cwd
        )
    for line in report_lines(figures):
        print(f"bench sweep: {line}")
    return figures


def weights_bytes(folder: Path) -> int:
    """The bytes of a checkpoint's weight files (``*.safetensors``, ``*.bin``)."""
    return sum(p.stat().st_size for pattern in ("*.safetensors", "*.bin") for p in Path(folder).glob(pattern))


def bench_plan(
    checkpoints: Sequence[Path],
    plan_dir: Path,
    *,
    config_values: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> dict[str, Any]:
    """``snakemake -n`` of the sweep of ``checkpoints`` (real weights), twice: cold (a fresh verbeval
    cache, ``$VERBEVAL_CACHE_DIR``) and warm (the same cache again)."""
    from verbeval.bench.workflow_runs import bench_folder

    out: dict[str, Any] = {"revisions": len(checkpoints)}
    with bench_folder(plan_dir) as run_dir:
        cfg = write_sweep_config(run_dir / "sweep.yaml", sweep_config(checkpoints, run_dir))
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile", str(cfg)]
        if config_values:
            cmd += ["--config", *config_values]
        plan_env = {**env, CACHE_ENV: str(run_dir / "cache")}
        for when in ("cold", "warm"):
            out[f"{when}_load_before"] = load_1min()
            wall, _ = run_timed(cmd, plan_env, cwd)
            out[f"{when}_s"] = round(wall, 3)
    out["command"] = " ".join(cmd)
    return out


def bench_loads(checkpoints: Sequence[Path]) -> dict[str, Any]:
    """The weight loads of ``checkpoints`` in this process, one after another, as a queue loads them
    (:class:`verbeval.core.prefetch.Prefetcher`, each model released when done: the first built, the
    next ones swapped into its module), against ``from_pretrained`` of each again and the time to
    read its weight files once (1 MiB reads, nothing kept). The files are in the page cache by then
    (the runs read them): these are the loads' costs beyond the disk."""
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.prefetch import LoadRequest, Prefetcher

    rows = []
    prefetch = Prefetcher()
    module = None
    try:
        for folder in checkpoints:
            request = LoadRequest(ModelSource.of(str(folder)), kind="causal", dtype="float32", device="cpu")
            t = time.perf_counter()
            lm = prefetch.take(request)
            queue_s = time.perf_counter() - t
            swapped, module = lm.model is module, lm.model
            prefetch.release(lm)
            del lm
            t = time.perf_counter()
            fresh = request.load()
            build_s = time.perf_counter() - t
            del fresh
            rows.append(
                {
                    "revision": Path(folder).name,
                    "queue_load": "swapped" if swapped else "built",
                    "queue_load_s": round(queue_s, 3),
                    "from_pretrained_s": round(build_s, 3),
                    "read_once_s": round(read_once(folder), 3),
                }
            )
    finally:
        prefetch.close()
    return {"revisions": rows}


def read_once(folder: Path) -> float:
    """Seconds to read a checkpoint's weight files once, 1 MiB at a time (as ``cat FILE > /dev/null``)."""
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    t = time.perf_counter()
    for pattern in ("*.safetensors", "*.bin"):
        for p in sorted(Path(folder).glob(pattern)):
            with open(p, "rb", buffering=0) as f:
                while f.readinto(view):
                    pass
    return time.perf_counter() - t


def report_lines(figures: Mapping[str, Any]) -> list[str]:
    """The part's figures as the lines it prints."""
    lines = [
        f"size {figures['size']}: {figures['weights_bytes_per_revision'] / 1e6:.0f} MB of weights per revision, "
        f"{figures['cores']} cores"
    ]
    for r in figures["runs"]:
        w, logs = r["weights"], r["logs"]
        lines.append(
            f"{r['revisions']} revisions: wall {r['wall_s']:.1f} s (load before {r['load_before']}); per revision: "
            f"forward + scoring {logs['compute_s_per_revision']} s, weights built {w['built_revisions']} x "
            f"{w['built_load_s_per_revision']} s, swapped {w['swapped_revisions']} x {w['swapped_load_s_per_revision']} s"
        )
        lines.append(
            f"  after the last scoring job {r['after_queue_s']} s; report {r['report_s']} s; per rule (s / revision): "
            + ", ".join(f"{k} {v}" for k, v in sorted(r["post_s_per_revision"].items(), key=lambda kv: -kv[1])[:8])
        )
    lines.append(f"marginal wall time per revision: {figures['marginal_s_per_revision']} s")
    plan = figures["plan"]
    lines.append(
        f"plan of {plan['revisions']} revisions (snakemake -n): cold {plan['cold_s']} s, warm {plan['warm_s']} s"
    )
    for row in figures["loads"]["revisions"]:
        lines.append(
            f"{row['revision']} in this process: {row['queue_load']} in {row['queue_load_s']} s; from_pretrained "
            f"{row['from_pretrained_s']} s; reading its weights once {row['read_once_s']} s"
        )
    if "dry_run" in figures:
        lines.append(f"dry run of {figures['dry_run']['revisions']} revisions: {figures['dry_run']['wall_s']} s")
    return lines


def bench_dry_run(
    template: Path,
    sweep_dir: Path,
    n: int,
    *,
    config_values: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> dict[str, Any]:
    """``snakemake -n`` of an ``n``-revision sweep on cheap folders (:func:`cheap_checkpoints`)."""
    folders = cheap_checkpoints(template, sweep_dir / f"dry-models-{n}", n)
    from verbeval.bench.workflow_runs import bench_folder

    with bench_folder(sweep_dir / f"dry{n}") as run_dir:
        cfg = write_sweep_config(run_dir / "sweep.yaml", sweep_config(folders, run_dir))
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile", str(cfg)]
        if config_values:
            cmd += ["--config", *config_values]
        load = load_1min()
        wall, out = run_timed(cmd, env, cwd)
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return {
        "revisions": n,
        "load_before": load,
        "command": " ".join(cmd),
        "wall_s": round(wall, 3),
        "jobs": int(m.group(1)) if m else None,
        "folders": "config.json copied, tokenizer files symlinked, no weights",
    }
