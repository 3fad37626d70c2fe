"""Generate a DVC pipeline (``dvc.yaml``) from the Snakemake workflow, so the two never drift.

The Snakefile is the only description of the DAG. :func:`workflow_jobs` asks Snakemake for every
job of a configuration (as ``snakemake --forceall -n`` would run them); :func:`dvc_pipeline` turns
each job into a DVC stage with the *same* shell command, its inputs as ``deps``, its outputs as
``outs`` (or ``metrics``/``plots``), and the configuration keys the rule reads as ``params``.
``verbeval dvc-yaml --check`` fails when a committed ``dvc.yaml`` differs from what the workflow
generates.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verbeval.agreement.shardstore import MANIFEST_NAME
from verbeval.core.errors import VerbevalError

#: configuration keys each rule reads (DVC ``params``); every rule of the workflow must be listed
RULE_PARAMS: dict[str, tuple[str, ...]] = {
    # where the bytes come from (data_mirror) and the manifest's path are no dependency of a fetch; its
    # manifest entry's checksums are (MANIFEST_ENTRY_RULES)
    "fetch": ("raw_dir",),
    "tiny_model": ("tiny_models",),
    "pip_model": ("models", "pip_models_dir"),
    "lexicon": ("agreement.verb_lists", "agreement.inflection_overrides"),
    "templates": ("agreement.groups", "agreement.custom_groups", "agreement.groups_file",
                  "agreement.max_rows_per_source", "agreement.skip_bad_rows", "agreement.errata",
                  "agreement.drop_flagged_errata"),
    "lemmas": ("models",),
    # the model's one job (workflow/rules/models.smk): agreement shards, form shards, SimVerb embeddings
    "infer": ("models", "inference", "agreement.groups", "agreement.custom_groups", "agreement.chunks",
              "agreement.multitoken.enabled", "agreement.multitoken.groups", "agreement.multitoken.batch_size",
              "simverb.source", "simverb.split_sources", "simverb.models", "simverb.frames", "simverb.multi_token",
              "simverb.batch_size"),
    "infer_no_simverb": ("models", "inference", "agreement.groups", "agreement.custom_groups", "agreement.chunks",
                         "agreement.multitoken.enabled", "agreement.multitoken.groups",
                         "agreement.multitoken.batch_size", "simverb.models"),
    "aggregate": ("agreement.groups", "agreement.custom_groups", "agreement.top_cutoffs", "agreement.bottom_cutoffs",
                  "agreement.bootstrap"),
    "table2": ("models", "agreement.groups", "agreement.custom_groups", "agreement.errata",
               "agreement.drop_flagged_errata", "agreement.bootstrap.confidence", "agreement.table_models"),
    # figures (workflow/rules/figures.smk)
    "figure_top_p": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                     "agreement.figures.formats", "agreement.figures.min_contexts", "agreement.figures.low_n"),
    "figure_bottom_p": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                        "agreement.figures.formats", "agreement.figures.min_contexts", "agreement.figures.low_n"),
    "figure_prob_counted": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                            "agreement.figures.formats", "agreement.figures.min_contexts", "agreement.figures.low_n"),
    "figure_invalid": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                       "agreement.figures.formats", "agreement.figures.min_contexts", "agreement.figures.low_n"),
    "figure_models": ("models", "agreement.figures.formats"),
    "figure_checkpoints": ("models", "agreement.bootstrap", "agreement.figures.formats",
                           "agreement.figures.checkpoints"),
    "lemma_stats": (),
    "figure_lemmas": ("models", "agreement.figures.formats", "agreement.figures.worst_lemmas",
                      "agreement.figures.lemma_bins"),
    "table3": ("models", "agreement.figures.contexts", "agreement.figures.context_groups",
               "agreement.figures.contexts_per_label"),
    # multi-token forms and lexicon modes (workflow/rules/lexicon_modes.smk)
    "lexicon_forms": ("models",),
    "lexicon_common": ("models",),
    "lexicon_modes": ("agreement.multitoken.groups", "agreement.bootstrap"),
    "lexicon_modes_table": ("models", "agreement.lexicon_mode", "agreement.multitoken.groups"),
    # verb veridicality (workflow/rules/veridicality.smk)
    "veridicality_released": ("veridicality.source",),
    "veridicality_predict": ("veridicality.source", "veridicality.models", "veridicality.batch_size",
                             "veridicality.counterfactual", "inference.device"),
    "veridicality_table": ("veridicality.models", "veridicality.formats"),
    "veridicality_counterfactuals": ("veridicality.source", "veridicality.counterfactual"),
    "veridicality_kl": ("veridicality.models", "veridicality.counterfactual"),
    # SimVerb-3500 (workflow/rules/simverb.smk)
    "simverb_score": ("models", "simverb.source", "simverb.split_sources", "simverb.models", "simverb.frames",
                      "simverb.multi_token", "simverb.batch_size", "inference.device", "inference.threads"),
    "simverb_table": ("simverb.bins", "simverb.bootstrap", "simverb.formats"),
    "simverb_join": ("simverb.agreement_join",),
    "simverb_all": (),
    # DVC views of Table 2 and Figures 1-4 (workflow/rules/dvc_views.smk): the same numbers, reshaped
    "dvc_metrics": ("agreement.table_models",),
    "dvc_plot_data": (),
}

#: the rule whose outputs are the DVC metrics: Table 2 as one ``{tse, ew, mw}`` file per model and
#: group, so that `dvc metrics show` prints a row per model and group (``verbeval.agreement.dvc_views``); the
#: other JSON summaries (metrics.json, lemma_metrics.json, SimVerb, lexicon modes) stay plain outputs
#: that `dvc metrics show FILE` reads on request
METRICS_RULE = "dvc_metrics"

#: the rule whose outputs are the data of Figures 1-4 as DVC plots (top-level ``plots`` in dvc.yaml)
PLOT_DATA_RULE = "dvc_plot_data"

#: other data declared as DVC plots (by file name), one plot per file, each file a single series
PLOTS: dict[str, dict[str, str]] = {
    "veridicality_scatter.csv": {"x": "human_mean", "y": "score", "template": "scatter",
                    "title": "Verb veridicality: mean human rating against model score (Figure 1)"},
    "simverb_layers.csv": {"x": "layer", "y": "rho", "template": "simple",
                           "title": "SimVerb-3500: Spearman's rho per layer (-1 = static)"},
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


def workflow_jobs(snakefile: Path, configfiles: Sequence[Path], workdir: Path) -> list[JobSpec]:
    """Every job of the workflow for these config files, in a stable order (rule, wildcards).

    Relative paths of the configuration (local model folders among them: they must exist, with their
    ``config.json``, for a job to name them as dependencies) are read from ``workdir``, where Snakemake
    also writes its ``.snakemake/``. A setup error of the workflow (a ConfigError of
    ``workflow/rules/common.smk``: a missing mirror file, a bad key) is raised as one
    :class:`VerbevalError` line.
    """
    from snakemake.api import SnakemakeApi
    from snakemake.exceptions import WorkflowError
    from snakemake.io import is_flagged
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:  # type: ignore[arg-type]
            wapi = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles]),
                snakefile=Path(snakefile).resolve(),
                workdir=Path(workdir).resolve(),
            )
            dapi = wapi.dag(DAGSettings(forceall=True))
            wf = wapi._workflow  # noqa: SLF001 - Snakemake offers no public job listing
            wf.dag_settings = dapi.dag_settings
            wf._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)  # noqa: SLF001
            wf._build_dag()  # noqa: SLF001
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
                    if j.rule.name in MANIFEST_ENTRY_RULES else (),
                )
                for j in wf.dag.jobs
            ]
    except WorkflowError as exc:  # its traceback is of no use (common.smk's ConfigError even hides it)
        raise VerbevalError(f"{Path(snakefile)}: {str(exc).strip()}") from None
    finally:
        os.chdir(cwd)
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


def _params(rule: str, configfiles: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, list[str]]]:
    """Each key from the last config file that sets it (later files override earlier ones)."""
    if rule not in RULE_PARAMS:
        raise VerbevalError(f"rule {rule!r} has no entry in verbeval.dvc.RULE_PARAMS (which config keys it reads)")
    by_file: dict[str, list[str]] = {}
    for key in RULE_PARAMS[rule]:
        owner = next((name for name, cfg in reversed(configfiles) if _has_key(cfg, key)), None)
        if owner is not None:
            by_file.setdefault(owner, []).append(key)
    return [{name: keys} for name, keys in by_file.items()]


def _plot_definitions(job: JobSpec, wdir: str | None) -> list[dict[str, Any]]:
    """Top-level DVC plots of one ``dvc_plot_data`` job (a cutoff figure's side): one per group."""
    from verbeval.agreement.dvc_views import plot_definitions
    from verbeval.agreement.figures import CUTOFF_FIGURES

    params = dict(job.params)
    spec = CUTOFF_FIGURES[params["figure"]]
    paths = {Path(o).stem: (posixpath.normpath(posixpath.join(wdir, o)) if wdir else o) for o in job.outputs}
    return plot_definitions(paths, stem=spec.stem, title=spec.title, side=job.wildcards["side"],
                            metrics=spec.metrics, models=params["models"].split(","))


#: a shard store's manifest.json: the shards beside it are not DVC outputs (they are the store's, kept
#: across failed runs), so DVC must never restore the manifest alone: ``persist`` keeps the stage out
#: of DVC's run-cache (a run-cache hit after ``rm -rf results`` or an interrupted repro restored the
#: manifest without its shards, and every later ``aggregate`` failed), ``cache: false`` keeps it out
#: of ``dvc checkout``. The stage reruns whenever the manifest is missing or differs from dvc.lock.
STORE_OUT: dict[str, Any] = {"cache": False, "persist": True}


def dvc_pipeline(jobs: Sequence[JobSpec], configfiles: Sequence[str], root: Path, wdir: str | None = None,
                 declare: bool | None = None) -> dict[str, Any]:
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
        params = _params(job.rule, cfgs)
        for file, key in job.param_keys:
            params.append({file: [key]})
        if params:
            stage["params"] = params
        metrics = list(job.outputs) if declare and job.rule == METRICS_RULE else []
        plots = [o for o in job.outputs if declare and Path(o).name in PLOTS]
        uncached = list(job.outputs) if declare and job.rule == PLOT_DATA_RULE else []
        stores = [o for o in job.outputs if Path(o).name == MANIFEST_NAME and Path(o).parent.name == "shards"]
        outs: list[Any] = [{o: {"persist": True}} if o in job.persist else o for o in job.outputs
                           if o not in metrics and o not in plots and o not in uncached and o not in stores]
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
