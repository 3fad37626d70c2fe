"""What the Snakefile asks of Snakemake's ``workflow`` object, as functions of it (tested with a
stand-in object): the configuration layers, forced reruns, the start checks (SLURM, folders the run
cannot write) and the failure summary of ``onerror``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.core.cluster import resource_problems
from verbeval.core.config import Layer, config_layers
from verbeval.core.failures import failure_summary
from verbeval.workflow.snakemake_internals import before_dag

#: the SLURM profile's account placeholder (profiles/slurm/config.yaml): a dry run warns, a run stops
SLURM_ACCOUNT_PLACEHOLDER = "CHANGE-ME"


def workflow_layers(workflow: Any) -> list[Layer]:
    """The user's configuration sources in merge order: the Snakefile's configfile, every
    --configfile, then --config pairs (to name the one that set a bad key)."""
    cli = [str(f) for f in workflow.config_settings.configfiles]
    cli_abs = {str(Path(f).absolute()) for f in cli}
    base = [str(f) for f in workflow.configfiles if str(Path(f).absolute()) not in cli_abs]
    return config_layers(base + cli, dict(workflow.config_settings.config))


def force_rerun(workflow: Any, targets: Iterable[str]) -> None:
    """Run the jobs of ``targets`` (output files) and what depends on them, as ``--forcerun
    TARGETS`` would, without writing anything at parse time.

    The Snakefile is parsed before Snakemake installs the run's DAG settings (the API replaces
    ``workflow.dag_settings`` after parsing), so the targets are added to the settings in force
    when the DAG is prepared (:func:`verbeval.workflow.snakemake_internals.before_dag`).
    ``tests/test_workflow.py`` checks the effect on real Snakemake (a dry run schedules the job)."""
    targets = frozenset(targets)
    if not targets:
        return

    def add_targets() -> None:
        settings = workflow.dag_settings
        settings.forcerun = frozenset(settings.forcerun) | targets

    before_dag(workflow, add_targets)


def _default_resource_args(workflow: Any) -> list[str]:
    dr = workflow.resource_settings.default_resources
    return [str(a) for a in getattr(dr, "args", None) or []]


def jobs_run_here(workflow: Any) -> bool:
    """Whether the run's jobs run on this machine (:meth:`verbeval.workflow.plan.Plan.gpu_resource`):
    a local executor, and no SLURM default resources in force (a dry run of a SLURM profile runs
    with Snakemake's local dry-run executor, yet shows the jobs the cluster would get). Called when
    a job's resources are evaluated, after Snakemake has installed the run's executor."""
    if not workflow.local_exec:
        return False
    return not any(arg.partition("=")[0].strip().startswith("slurm_") for arg in _default_resource_args(workflow))


def slurm_account_placeholder(workflow: Any) -> str | None:
    """Why the default slurm_account (profile default-resources or --default-resources) is still
    the placeholder, else None."""
    for arg in _default_resource_args(workflow):
        key, _, value = arg.partition("=")
        if key.strip() == "slurm_account" and value.strip().strip("'\"") == SLURM_ACCOUNT_PLACEHOLDER:
            return (
                f"slurm_account is still {SLURM_ACCOUNT_PLACEHOLDER!r} (default-resources of the SLURM profile, "
                "profiles/slurm/config.yaml): set it to your SLURM account (see `sacctmgr show assoc user=$USER`)"
            )
    return None


def cluster_resource_problems(workflow: Any) -> list[str]:
    """What the resources in force lack for a cluster run (verbeval.core.cluster): a command-line
    --default-resources or --set-resources replaces the profile's whole list."""
    default_keys = [a.partition("=")[0].strip() for a in _default_resource_args(workflow)]
    overwrite = workflow.resource_settings.overwrite_resources or {}
    # a queue job (queue_N) is submitted with the set-resources of rule infer (queue_resources)
    gpu_rules = [
        QUEUE_RESOURCES_OF if is_queue_rule(r.name) else r.name for r in workflow.rules if "gpu" in r.resources
    ]
    return resource_problems(default_keys, overwrite, gpu_rules)


#: the rule whose set-resources (partition, runtime, memory) a queue job is submitted with: it runs infer's steps
QUEUE_RESOURCES_OF = "infer"


def is_queue_rule(name: str) -> bool:
    """Whether ``name`` is a queue job's rule (``queue_0``, ``queue_1``, ...: verbeval.workflow.queues)."""
    return name.startswith("queue_") and name[len("queue_") :].isdigit()


def queue_resources(workflow: Any, gpu: Any) -> dict[str, Any]:
    """The resources of a queue job: ``gpu`` (its models' GPUs), and on a cluster rule infer's entries
    of the set-resources in force (a profile's partition, runtime and memory for the GPU jobs, and
    its ``gpu`` where it sets one, as the CPU profile does), since a profile cannot name queue_N."""
    overwrite = workflow.resource_settings.overwrite_resources or {}
    entries = dict(overwrite.get(QUEUE_RESOURCES_OF) or {}).items()
    # Snakemake 9 holds each as a Resource (its value as given in .raw); a rule declares the plain value
    found = {k: getattr(v, "raw", v) for k, v in entries}
    return {"gpu": gpu, **{k: v for k, v in found.items() if not callable(v)}}


def output_roots(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(config key, folder)`` of the folders the workflow writes into, in the order a problem is
    reported: results_dir, raw_dir, pip_models_dir, then each tiny_models[].out and toy_models[].out."""
    roots = [(key, str(config[key])) for key in ("results_dir", "raw_dir", "pip_models_dir") if config.get(key)]
    for section in ("tiny_models", "toy_models"):
        for i, tiny in enumerate(config.get(section) or []):
            if isinstance(tiny, Mapping) and tiny.get("out"):
                roots.append((f"{section}[{i}].out", str(tiny["out"])))
    return roots


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else as it is."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def unwritable_output(config: Mapping[str, Any], outputs: Iterable[str | Path]) -> str | None:
    """One line naming the configured folder (:func:`output_roots`) where these output files
    (and logs) cannot be written, and why; None when every one can.

    Each output's folder is probed (:func:`verbeval.core.io.write_problem`: a file created and
    removed there, or in the nearest existing folder above it), once per folder."""
    from verbeval.core.io import write_problem

    roots = [(key, folder, Path(os.path.abspath(folder))) for key, folder in output_roots(config)]
    problems: dict[Path, tuple[Path, str]] = {}
    checked: set[Path] = set()
    for out in outputs:
        path = Path(os.path.abspath(out))
        if path.parent in checked:
            continue
        checked.add(path.parent)
        problem = write_problem(path.parent)
        if problem is not None:
            problems.setdefault(problem[0], (path, problem[1]))
    if not problems:
        return None

    def owner(path: Path) -> Path | None:  # the innermost configured folder holding the output ``path``
        holding = [absolute for _, _, absolute in roots if _inside(path, absolute)]
        return max(holding, key=lambda a: len(a.parts)) if holding else None

    for key, folder, absolute in roots:
        inside = [(where, reason) for where, (path, reason) in problems.items() if owner(path) == absolute]
        if not inside:
            continue
        # the folder itself (a read-only file system, its permissions) or only a subfolder of it
        own = write_problem(absolute)
        where, reason = inside[0]
        if own is not None or not _inside(where, absolute) or where == absolute:
            there, reason = "there", own[1] if own is not None else reason
        else:
            there = str(Path(folder) / where.relative_to(absolute))
        return f"{key} {folder}: cannot write {there} ({reason}): choose another {key} or fix its permissions"
    where, (path, reason) = next(iter(problems.items()))
    return f"cannot write {_shown(where)} ({reason}), where the run writes {_shown(path)}"


def _not_a_folder(path: Path) -> str | None:
    """What ``path`` is when something other than a directory is there (a file, a broken link)."""
    if path.is_symlink() and not path.exists():
        return "a broken symbolic link"
    return "a file" if path.exists() and not path.is_dir() else None


def blocked_output_root(config: Mapping[str, Any], outputs: Iterable[str | Path] = ()) -> str | None:
    """A configured output folder (:func:`output_roots`) with a file or a broken link in its path,
    or one inside such a folder where one of ``outputs`` (the run's targets) needs a folder, as one
    line; else None. It writes nothing, so parsing can ask it: Snakemake's own DAG inventory fails
    with a traceback (NotADirectoryError) on such a path, before ``onstart``."""
    for key, folder in output_roots(config):
        path = Path(folder)
        blocker = next((a for a in (path, *path.parents) if a.exists() or a.is_symlink()), None)
        what = _not_a_folder(blocker) if blocker is not None else None
        if what is not None:
            return f"{key} {folder}: cannot write there ({blocker} is {what}, not a directory): choose another {key}"
    roots = [(key, folder, os.path.abspath(folder)) for key, folder in output_roots(config)]
    seen: set[str] = set()  # folders looked at (with every folder between them and their root)
    for output in outputs:
        absolute = os.path.abspath(output)
        parent = os.path.dirname(absolute)
        if parent in seen:  # a sweep's outputs share folders: each is looked at once
            continue
        for key, folder, root in roots:
            if not absolute.startswith(root.rstrip(os.sep) + os.sep):
                continue
            # the folders between the root and the output, outermost first (each looked at once)
            chain = []
            here = parent
            while here != root and here not in seen and len(here) > len(root):
                chain.append(here)
                here = os.path.dirname(here)
            for here in reversed(chain):
                seen.add(here)
                what = _not_a_folder(Path(here))
                if what is not None:
                    inner = os.path.relpath(here, root)
                    return (
                        f"{key} {folder}: cannot write {Path(folder) / inner} (it is {what}, where the run "
                        f"needs a folder for {_shown(Path(absolute))}): move it away or choose another {key}"
                    )
            break
    return None


def output_problem(workflow: Any) -> str | None:
    """:func:`unwritable_output` for the outputs and logs of the jobs a real run is about to do
    (``workflow.dag.needrun_jobs()``); None for a workflow object without a DAG."""
    dag, config = getattr(workflow, "dag", None), getattr(workflow, "config", None)
    if dag is None or config is None:
        return None
    outputs = [str(f) for job in dag.needrun_jobs() for f in (*job.output, *job.log)]
    problem = unwritable_output(config, outputs)
    return f"{problem}; no job was run" if problem else None


def start_problem(workflow: Any) -> str | None:
    """Why a run must not start, else None: a cluster run's settings (the SLURM executor only:
    nothing is submitted), then a folder that its jobs cannot write (:func:`output_problem`)."""
    if getattr(workflow.executor_plugin, "name", "") == "slurm":
        problem = slurm_account_placeholder(workflow)
        if problem:
            return f"{problem}; nothing was submitted"
        problems = cluster_resource_problems(workflow)
        if problems:
            return "; ".join(problems) + "; nothing was submitted"
    return output_problem(workflow)


def hub_start_problem(plan: Any, jobs: Sequence[tuple[str, Mapping[str, str]]]) -> str | None:
    """Why a hub model that these jobs (rule name, wildcards) load cannot be loaded here (not
    cached, and no network or HF_HUB_OFFLINE), naming the file and key that set it; None when every
    one can. ``onstart`` asks it for the jobs a real run is about to do (a dry run loads nothing)."""
    from verbeval.core.config import config_origin
    from verbeval.core.model_checks import hub_problems

    for keypath, reason in hub_problems(plan.config, plan.needed_ids(jobs)):
        return f"{config_origin(keypath, plan.layers)}: {'.'.join(map(str, keypath))}: {reason}; no job was run"
    return None


def failure_lines(log: str | Path | Sequence[str | Path] | None) -> list[str]:
    """``onerror``'s summary: the cause of each failed job, from Snakemake's log file(s) of this run
    (a list in Snakemake 9); nothing when there is none."""
    text = ""
    for f in [log] if isinstance(log, (str, Path)) else log or []:
        try:
            text += Path(f).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    causes = failure_summary(text)
    if not causes:
        return []
    return [
        f"verbeval: {len(causes)} failed job(s), the cause of each (its log in brackets):",
        *(f"  {line}" for line in causes),
    ]


def success_lines(plan: Any, workflow: Any, since: float) -> list[str]:
    """What a successful run prints last (``onsuccess``, :func:`verbeval.workflow.run_summary.run_summary`):
    its results folder, Table 2, the warnings of the job logs written since ``since`` (the run's start)
    and the report command with the run's own ``--configfile`` files and ``--config`` pairs."""
    from verbeval.workflow.run_summary import report_command, run_summary

    layout = plan.layout
    table2 = f"{layout.agreement_dir}/table2.csv"
    settings = workflow.config_settings
    report = report_command(list(settings.configfiles), settings.config_args or [], f"{layout.results_dir}/report.html")
    outputs = set(plan.all_outputs())
    languages = plan.multilingual.table_files()["languages"]
    return run_summary(
        layout.results_dir, table2 if table2 in outputs else None, layout.logs, since, report,
        languages if languages in outputs else None,
    )  # fmt: skip
