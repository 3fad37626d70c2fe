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
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import VerbevalError

#: configuration keys each rule reads (DVC ``params``); every rule of the workflow must be listed
RULE_PARAMS: dict[str, tuple[str, ...]] = {
    "fetch": ("data_mirror", "manifest", "raw_dir"),
    "lexicon": ("agreement.verb_lists", "agreement.inflection_overrides"),
    "templates": ("agreement.groups", "agreement.groups_file", "agreement.max_rows_per_source",
                  "agreement.skip_bad_rows", "agreement.errata", "agreement.drop_flagged_errata"),
    "lemmas": ("models",),
    "infer": ("models", "inference", "agreement.groups", "agreement.chunks"),
    "aggregate": ("agreement.groups", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap"),
    "table2": ("models", "agreement.groups", "agreement.errata", "agreement.drop_flagged_errata"),
    # figures (workflow/rules/figures.smk)
    "figure_top_p": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                     "agreement.figures.formats"),
    "figure_bottom_p": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                        "agreement.figures.formats"),
    "figure_prob_counted": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                            "agreement.figures.formats"),
    "figure_invalid": ("models", "agreement.top_cutoffs", "agreement.bottom_cutoffs", "agreement.bootstrap",
                       "agreement.figures.formats"),
    "figure_models": ("models", "agreement.figures.formats"),
    "lemma_stats": (),
    "figure_lemmas": ("models", "agreement.figures.formats", "agreement.figures.worst_lemmas",
                      "agreement.figures.lemma_bins"),
    "table3": ("models", "agreement.figures.contexts", "agreement.figures.context_groups",
               "agreement.figures.contexts_per_label"),
    # multi-token forms and lexicon modes (workflow/rules/lexicon_modes.smk)
    "lexicon_forms": ("models",),
    "lexicon_common": ("models",),
    "infer_forms": ("models", "inference", "agreement.chunks", "agreement.multitoken.groups",
                    "agreement.multitoken.batch_size"),
    "lexicon_modes": ("agreement.multitoken.groups", "agreement.bootstrap"),
    "lexicon_modes_table": ("models", "agreement.lexicon_mode", "agreement.multitoken.groups"),
    # verb veridicality (workflow/rules/veridicality.smk)
    "veridicality_released": ("veridicality.source",),
    "veridicality_predict": ("veridicality.source", "veridicality.models", "veridicality.batch_size",
                             "inference.device"),
    "veridicality_table": ("veridicality.models", "veridicality.formats"),
    "veridicality_counterfactuals": ("veridicality.source", "veridicality.counterfactual"),
    "veridicality_counterfactual_predict": ("veridicality.models", "veridicality.batch_size",
                                            "veridicality.counterfactual", "inference.device"),
    "veridicality_kl": ("veridicality.models", "veridicality.counterfactual"),
    # SimVerb-3500 (workflow/rules/simverb.smk)
    "simverb_score": ("models", "simverb.source", "simverb.split_sources", "simverb.models", "simverb.frames",
                      "simverb.multi_token", "simverb.batch_size", "inference.device", "inference.threads"),
    "simverb_table": ("simverb.bins", "simverb.bootstrap", "simverb.formats"),
    "simverb_join": ("simverb.agreement_join",),
    "simverb_all": (),
}

#: outputs declared as DVC metrics (not cached, so `dvc metrics show` reads them from the workspace)
METRICS_SUFFIXES = ("metrics.json",)

#: figure data declared as DVC plots (by file name): `dvc plots show` draws them
PLOTS: dict[str, dict[str, str]] = {
    "fig1_top_p.csv": {"x": "cutoff", "y": "value", "title": "EW and MW against top-p cutoff"},
    "fig2_bottom_p.csv": {"x": "cutoff", "y": "value", "title": "EW and MW against bottom-p cutoff"},
    "fig3_prob_counted.csv": {"x": "cutoff", "y": "value", "title": "Probability mass counted"},
    "fig4_invalid.csv": {"x": "cutoff", "y": "value", "title": "Share of invalid contexts"},
    "lemma_accuracy.csv": {"x": "mean_log10_prob", "y": "accuracy", "template": "scatter",
                           "title": "Per-lemma agreement accuracy against mean log10 probability"},
    "model_comparison.csv": {"x": "value", "y": "group", "template": "bar_horizontal",
                             "title": "TSE, EW and MW per group and model"},
    "veridicality_scatter.csv": {"x": "human_mean", "y": "score", "template": "scatter",
                    "title": "Verb veridicality: mean human rating against model score (Figure 1)"},
    "simverb_layers.csv": {"x": "layer", "y": "rho", "title": "SimVerb-3500: Spearman's rho per layer (-1 = static)"},
}


@dataclass(frozen=True)
class JobSpec:
    rule: str
    wildcards: dict[str, str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    logs: tuple[str, ...]
    cmd: str


def workflow_jobs(snakefile: Path, configfiles: Sequence[Path], workdir: Path) -> list[JobSpec]:
    """Every job of the workflow for these config files, in a stable order (rule, wildcards)."""
    from snakemake.api import SnakemakeApi
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
                )
                for j in wf.dag.jobs
            ]
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


def dvc_pipeline(jobs: Sequence[JobSpec], configfiles: Sequence[str], root: Path, wdir: str | None = None) -> dict[str, Any]:
    """The ``dvc.yaml`` mapping for ``jobs``.

    ``configfiles`` are the workflow config files (relative to the repository ``root``), used as
    DVC params files; ``wdir`` is the repository root relative to the dvc.yaml, when they differ.
    """
    cfgs = [(name, yaml.safe_load((root / name).read_text()) or {}) for name in configfiles]
    stages: dict[str, Any] = {}
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
        if params:
            stage["params"] = params
        metrics = [o for o in job.outputs if o.endswith(METRICS_SUFFIXES)]
        plots = [o for o in job.outputs if Path(o).name in PLOTS]
        outs = [o for o in job.outputs if o not in metrics and o not in plots]
        if outs:
            stage["outs"] = outs
        if metrics:
            stage["metrics"] = [{m: {"cache": False}} for m in metrics]
        if plots:
            stage["plots"] = [{p: {**PLOTS[Path(p).name], "cache": False}} for p in plots]
        name = stage_name(job)
        if name in stages:
            raise VerbevalError(f"two jobs map to the DVC stage name {name!r}")
        stages[name] = stage
    return {"stages": stages}


HEADER = """\
# GENERATED from the Snakemake workflow by `verbeval dvc-yaml {args}`: do not edit.
# Every stage runs the same `verbeval` command as the Snakemake job of the same name.
# CI regenerates this file with --check and fails when it differs from the workflow.
"""


def render(pipeline: dict[str, Any], args: str) -> str:
    body = yaml.safe_dump(pipeline, sort_keys=False, width=10_000, default_flow_style=False)
    return HEADER.format(args=args) + body
