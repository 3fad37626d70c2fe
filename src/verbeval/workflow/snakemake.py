"""What the Snakefile asks of Snakemake's ``workflow`` object, as functions of it (tested with a
stand-in object): the configuration layers, forced reruns, the SLURM start checks and the failure
summary of ``onerror``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.core.cluster import resource_problems
from verbeval.core.config import Layer, config_layers
from verbeval.core.failures import failure_summary

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
    when the DAG is prepared: ``workflow._prepare_dag`` is wrapped on this one workflow object.
    ``tests/test_workflow.py`` checks the effect on real Snakemake (a dry run schedules the job)."""
    targets = frozenset(targets)
    prepare = getattr(workflow, "_prepare_dag", None)
    if not targets or prepare is None:
        return

    def prepare_with_forced(*args: Any, **kwargs: Any) -> Any:
        settings = workflow.dag_settings
        settings.forcerun = frozenset(settings.forcerun) | targets
        return prepare(*args, **kwargs)

    workflow._prepare_dag = prepare_with_forced


def _default_resource_args(workflow: Any) -> list[str]:
    dr = workflow.resource_settings.default_resources
    return [str(a) for a in getattr(dr, "args", None) or []]


def slurm_account_placeholder(workflow: Any) -> str | None:
    """Why the default slurm_account (profile default-resources or --default-resources) is still
    the placeholder, else None."""
    for arg in _default_resource_args(workflow):
        key, _, value = arg.partition("=")
        if key.strip() == "slurm_account" and value.strip().strip("'\"") == SLURM_ACCOUNT_PLACEHOLDER:
            return (f"slurm_account is still {SLURM_ACCOUNT_PLACEHOLDER!r} (default-resources of the SLURM profile, "
                    "profiles/slurm/config.yaml): set it to your SLURM account (see `sacctmgr show assoc user=$USER`)")
    return None


def cluster_resource_problems(workflow: Any) -> list[str]:
    """What the resources in force lack for a cluster run (verbeval.core.cluster): a command-line
    --default-resources or --set-resources replaces the profile's whole list."""
    default_keys = [a.partition("=")[0].strip() for a in _default_resource_args(workflow)]
    overwrite = workflow.resource_settings.overwrite_resources or {}
    gpu_rules = [r.name for r in workflow.rules if "gpu" in r.resources]
    return resource_problems(default_keys, overwrite, gpu_rules)


def start_problem(workflow: Any) -> str | None:
    """Why a cluster run must not submit anything (the SLURM executor only), else None."""
    if getattr(workflow.executor_plugin, "name", "") != "slurm":
        return None
    problem = slurm_account_placeholder(workflow)
    if problem:
        return f"{problem}; nothing was submitted"
    problems = cluster_resource_problems(workflow)
    return "; ".join(problems) + "; nothing was submitted" if problems else None


def hub_start_problem(plan: Any, jobs: Sequence[tuple[str, Mapping[str, str]]]) -> str | None:
    """Why a hub model that these jobs (rule name, wildcards) load cannot be loaded here (not
    cached, and no network or HF_HUB_OFFLINE), naming the file and key that set it; None when every
    one can. ``onstart`` asks it for the jobs a real run is about to do (a dry run loads nothing)."""
    from verbeval.core.config import config_origin, hub_problems

    for keypath, reason in hub_problems(plan.config, plan.needed_model_ids(jobs)):
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
    return [f"verbeval: {len(causes)} failed job(s), the cause of each (its log in brackets):",
            *(f"  {line}" for line in causes)]
