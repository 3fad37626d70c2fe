"""Generate a DVC pipeline (``dvc.yaml``) from the Snakemake workflow, so the two never drift.

The Snakefile is the only description of the DAG. :func:`workflow_jobs` asks Snakemake for every
job of a configuration (as ``snakemake --forceall -n`` would run them); :func:`dvc_pipeline` turns
each job into a DVC stage with the *same* shell command, its inputs as ``deps``, its outputs as
``outs`` (or ``metrics``/``plots``), and the configuration keys the rule reads as ``params``: those
of the step it runs, declared once (``verbeval.<study>.steps``; :func:`rule_config_keys`).
``verbeval dvc-yaml --check`` fails when a committed ``dvc.yaml`` differs from what the workflow
generates.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verbeval.agreement.engine.shardstore import MANIFEST_NAME
from verbeval.core.errors import VerbevalError


def rule_config_keys(rule: str) -> tuple[str, ...]:
    """The configuration keys of ``rule`` (its stages' DVC ``params``): those of the step it runs
    (:meth:`verbeval.core.steps.Step.config_keys`, :func:`verbeval.workflow.steps.rule_step_keys`);
    :class:`VerbevalError` for a rule that runs no declared step."""
    from verbeval.workflow.steps import rule_step_keys

    keys = rule_step_keys(rule)
    if keys is None:
        raise VerbevalError(
            f"rule {rule!r} runs no declared step: name it in the rules of its step (verbeval.<study>.steps: "
            f"Step(command, settings, keys, rules=(..., {rule!r})))"
        )
    return keys


#: the rule whose outputs are the DVC metrics: Table 2 as one ``{tse, ew, mw}`` file per model and
#: group, so that `dvc metrics show` prints a row per model and group (``verbeval.agreement.report.dvc_views``); the
#: other JSON summaries (metrics.json, lemma_metrics.json, SimVerb, lexicon modes) stay plain outputs
#: that `dvc metrics show FILE` reads on request
METRICS_RULE = "dvc_metrics"

#: the rule whose outputs are the data of Figures 1-4 as DVC plots (top-level ``plots`` in dvc.yaml)
PLOT_DATA_RULE = "dvc_plot_data"

#: the rule whose outputs are the acquisition learning curves as DVC plots (top-level ``plots``)
ACQUISITION_PLOT_RULE = "dvc_acquisition_plots"

#: other data declared as DVC plots (by file name), one plot per file, each file a single series
PLOTS: dict[str, dict[str, str]] = {
    "veridicality_scatter.csv": {
        "x": "human_mean",
        "y": "score",
        "template": "scatter",
        "title": "Verb veridicality: mean human rating against model score (Figure 1)",
    },
    "simverb_layers.csv": {
        "x": "layer",
        "y": "rho",
        "template": "simple",
        "title": "SimVerb-3500: Spearman's rho per layer (-1 = static)",
    },
}


#: rules whose job depends on one manifest entry's accepted checksums (wildcard ``name``): a DVC params
#: dependency on ``sources.<name>.sha256`` of the manifest, so that a changed entry fetches again
MANIFEST_ENTRY_RULES = frozenset({"fetch"})


@dataclass(frozen=True)
class JobSpec:
    rule: str
    wildcards: dict[str, str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    logs: tuple[str, ...]
    cmd: str
    params: tuple[tuple[str, str], ...] = ()  # the rule's named params (strings), as (name, value)
    persist: tuple[str, ...] = ()  # outputs flagged update(): never removed before or after the job (DVC persist)
    param_keys: tuple[tuple[str, str], ...] = ()  # (params file, key) dependencies beside the config's
    config_keys: tuple[str, ...] = ()  # the configuration keys the rule reads (rule_config_keys)


def workflow_jobs(snakefile: Path, configfiles: Sequence[Path], workdir: Path) -> list[JobSpec]:
    """Every job of the workflow for these config files, in a stable order (rule, wildcards).

    Relative paths of the configuration (local model folders among them: they must exist, with their
    ``config.json``, for a job to name them as dependencies) are read from ``workdir``, where Snakemake
    also writes its ``.snakemake/``. A setup error of the workflow (a ConfigError of
    ``workflow/rules/common.smk``: a missing mirror file, a bad key) is raised as one
    :class:`VerbevalError` line.
    """
    from snakemake.exceptions import WorkflowError
    from snakemake.io import is_flagged
    from snakemake.settings.types import DAGSettings

    from verbeval.workflow.snakemake_internals import build_dag, parsed_workflow

    try:
        with parsed_workflow(
            snakefile, workdir, configfiles=configfiles, dag_settings=DAGSettings(forceall=True)
        ) as wf:
            dag = build_dag(wf, forceall=True, ignore_incomplete=True)
            jobs = [
                JobSpec(
                    rule=j.rule.name,
                    wildcards={k: str(v) for k, v in j.wildcards.items()},
                    inputs=tuple(dict.fromkeys(str(f) for f in j.input)),
                    outputs=tuple(str(f) for f in j.output),
                    logs=tuple(str(f) for f in j.log),
                    cmd=" ".join(j.shellcmd.split()) if j.shellcmd else "",
                    params=tuple((k, str(v)) for k, v in j.params.items() if isinstance(v, (str, int, float))),
                    persist=tuple(str(f) for f in j.output if is_flagged(f, "update")),
                    param_keys=((str(wf.config["manifest"]), f"sources.{j.wildcards['name']}.sha256"),)
                    if j.rule.name in MANIFEST_ENTRY_RULES
                    else (),
                    config_keys=rule_config_keys(j.rule.name) if j.shellcmd else (),
                )
                for j in dag.jobs
            ]
    except WorkflowError as exc:  # its traceback is of no use (common.smk's ConfigError even hides it)
        raise VerbevalError(f"{Path(snakefile)}: {str(exc).strip()}") from None
    return sorted(jobs, key=lambda j: (j.rule, sorted(j.wildcards.items()), j.outputs))


def stage_name(job: JobSpec) -> str:
    parts = [job.rule] + [job.wildcards[k] for k in sorted(job.wildcards)]
    return re.sub(r"[^A-Za-z0-9_-]+", "_", "--".join(parts))


def _has_key(cfg: dict[str, Any], dotted: str) -> bool:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _params(keys: Sequence[str], configfiles: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, list[str]]]:
    """Each of ``keys`` from the last config file that sets it (later files override earlier ones)."""
    by_file: dict[str, list[str]] = {}
    for key in keys:
        owner = next((name for name, cfg in reversed(configfiles) if _has_key(cfg, key)), None)
        if owner is not None:
            by_file.setdefault(owner, []).append(key)
    return [{name: keys} for name, keys in by_file.items()]


def _acquisition_plots(job: JobSpec, wdir: str | None) -> list[dict[str, Any]]:
    """Top-level DVC plots of the ``dvc_acquisition_plots`` job: one per group, a series per family,
    seed and metric (its ``--series`` params)."""
    from verbeval.agreement.report.dvc_views import (
        ACQUISITION_METRICS,
        acquisition_plot_definitions,
        acquisition_series,
    )

    words = shlex.split(str(dict(job.params)["series"]))
    pairs = [(words[i + 1], words[i + 2]) for i in range(0, len(words), 3)]
    paths = {Path(o).stem: (posixpath.normpath(posixpath.join(wdir, o)) if wdir else o) for o in job.outputs}
    columns = [acquisition_series(f, s, m) for f, s in pairs for m in ACQUISITION_METRICS]
    x_label = str(dict(job.params).get("x_label", "training step"))  # agreement.checkpoint_axis
    return acquisition_plot_definitions(paths, columns, x_label)


def _plot_definitions(job: JobSpec, wdir: str | None) -> list[dict[str, Any]]:
    """Top-level DVC plots of one ``dvc_plot_data`` job (a cutoff figure's side): one per group."""
    if job.rule != PLOT_DATA_RULE:
        return []
    from verbeval.agreement.report.dvc_views import plot_definitions
    from verbeval.agreement.report.figures import CUTOFF_FIGURES

    params = dict(job.params)
    spec = CUTOFF_FIGURES[params["figure"]]
    paths = {Path(o).stem: (posixpath.normpath(posixpath.join(wdir, o)) if wdir else o) for o in job.outputs}
    return plot_definitions(
        paths,
        stem=spec.stem,
        title=spec.title,
        side=job.wildcards["side"],
        metrics=spec.metrics,
        models=params["models"].split(","),
    )


#: a shard store's manifest.json: the shards beside it are not DVC outputs (they are the store's, kept
#: across failed runs), so DVC must never restore the manifest alone: ``persist`` keeps the stage out
#: of DVC's run-cache (a run-cache hit after ``rm -rf results`` or an interrupted repro restored the
#: manifest without its shards, and every later ``aggregate`` failed), ``cache: false`` keeps it out
#: of ``dvc checkout``. The stage reruns whenever the manifest is missing or differs from dvc.lock.
STORE_OUT: dict[str, Any] = {"cache": False, "persist": True}

#: a fetched raw copy (the output of a :data:`MANIFEST_ENTRY_RULES` job): ``persist``, so that
#: `dvc repro` never removes it before the stage runs (a fetch that fails offline loses nothing), and
#: ``cache: false``, so that DVC never replaces it: after every run of a stage DVC deletes a cached
#: output and copies it back from its cache ("relink"), a new file with a new mtime although
#: `verbeval fetch` kept it as it was, and Snakemake then reran every job that reads it. Its bytes
#: are pinned by the manifest and fetched again from there, so a copy in DVC's cache adds nothing.
RAW_OUT: dict[str, Any] = {"cache": False, "persist": True}


def dvc_pipeline(
    jobs: Sequence[JobSpec],
    configfiles: Sequence[str],
    root: Path,
    wdir: str | None = None,
    declare: bool | None = None,
) -> dict[str, Any]:
    """The ``dvc.yaml`` mapping for ``jobs``.

    ``configfiles`` are the workflow config files (relative to the repository ``root``), used as
    DVC params files; ``wdir`` is the repository root relative to the dvc.yaml, when they differ.
    ``declare``: whether the pipeline declares DVC metrics and plots; by default only a dvc.yaml at
    the repository root does. `dvc metrics show` and `dvc plots show` read every dvc.yaml of the
    repository, so a second pipeline's declarations would mix its rows and plots into the paper's
    and report its files as failing to load until it has run.
    """
    if declare is None:
        declare = wdir is None
    cfgs = [(name, yaml.safe_load((root / name).read_text()) or {}) for name in configfiles]
    stages: dict[str, Any] = {}
    plots_top: list[dict[str, Any]] = []
    for job in jobs:
        if not job.cmd:  # the `all` target has no command
            continue
        log_dirs = sorted({str(Path(p).parent) for p in job.logs})
        cmd = (f"mkdir -p {' '.join(map(shlex.quote, log_dirs))} && " if log_dirs else "") + job.cmd
        stage: dict[str, Any] = {"cmd": cmd}
        if wdir:
            stage["wdir"] = wdir
        if job.inputs:
            stage["deps"] = list(job.inputs)
        params = _params(job.config_keys, cfgs)
        for file, key in job.param_keys:
            params.append({file: [key]})
        if params:
            stage["params"] = params
        metrics = list(job.outputs) if declare and job.rule == METRICS_RULE else []
        plots = [o for o in job.outputs if declare and Path(o).name in PLOTS]
        uncached = list(job.outputs) if declare and job.rule in (PLOT_DATA_RULE, ACQUISITION_PLOT_RULE) else []
        stores = [o for o in job.outputs if Path(o).name == MANIFEST_NAME and Path(o).parent.name == "shards"]
        raw = job.rule in MANIFEST_ENTRY_RULES
        outs: list[Any] = [
            {o: dict(RAW_OUT)} if raw else {o: {"persist": True}} if o in job.persist else o
            for o in job.outputs
            if o not in metrics and o not in plots and o not in uncached and o not in stores
        ]
        outs += [{o: {"cache": False}} for o in uncached]
        outs += [{o: dict(STORE_OUT)} for o in stores]
        if outs:
            stage["outs"] = outs
        if metrics:
            stage["metrics"] = [{m: {"cache": False}} for m in metrics]
        if plots:
            stage["plots"] = [{p: {**PLOTS[Path(p).name], "cache": False}} for p in plots]
        if uncached:
            plots_top += _plot_definitions(job, wdir)
        if uncached and job.rule == ACQUISITION_PLOT_RULE:
            plots_top += _acquisition_plots(job, wdir)
        name = stage_name(job)
        if name in stages:
            raise VerbevalError(f"two jobs map to the DVC stage name {name!r}")
        stages[name] = stage
    # Figures 1-4 in order, top-p before bottom-p, groups in the workflow's order
    plots_top.sort(key=lambda p: (next(iter(p)).split("/")[0], next(iter(p)).split("/")[1] != "top"))
    return {"stages": stages, **({"plots": plots_top} if plots_top else {})}


HEADER = """\
# GENERATED from the Snakemake workflow by `verbeval dvc-yaml {args}`: do not edit.
# Every stage runs the same `verbeval` command as the Snakemake job of the same name.
# CI regenerates this file with --check and fails when it differs from the workflow.
"""


def render(pipeline: dict[str, Any], args: str) -> str:
    body = yaml.safe_dump(pipeline, sort_keys=False, width=10_000, default_flow_style=False)
    return HEADER.format(args=args) + body
