"""The Snakemake workflow's plan as plain Python, so that every rule's plan is tested in process.

Holds: loading (configuration files to a plan: Snakemake's merge, validation), params (what rule
params, wildcard constraints and named outputs are made of), layout (what every part of the plan reads, computed
once: configuration, models, folders, groups, sources), plan (from a validated configuration: the layout and
the sub-plans built on it, each rule's files and command options), models (each model's
sources, options and folders, and the tiny and pip models the workflow builds: ``PLAN.model``),
figures (the figures, Table 3 and the DVC views of Table 2 and Figures 1-4: ``PLAN.figures``), lexicon_modes
(the multi-token forms and the three lexicon modes: ``PLAN.lexicon_modes``), comparisons
(the paired comparisons, the precision audit and the flip sets: ``PLAN.comparisons``), steps (every
declared step), studies
(the SimVerb-3500 and veridicality parts of the plan), multilingual (the CLAMS languages' rules:
``PLAN.multilingual``), acquisition (the acquisition analysis of the checkpoint
sweeps, their families and seeds, and the toy models the workflow trains: ``PLAN.acquisition``), repairs (changed pinned files, stale shard
stores and unverified raw copies, found without writing: ``PLAN.repairs``), queues (the queue jobs:
a sweep's chunks of revisions and a local GPU's models, each one ``verbeval run-queue``: ``PLAN.queues``), snakemake (what the
Snakefile asks of Snakemake's ``workflow`` object: configuration layers, forced reruns, SLURM start
checks, the failure summary, the success summary), run_summary (what a finished run prints last: its
results, Table 2 as text, its jobs' warnings, the report command), snakemake_internals (every use of Snakemake's private API: the parsed workflow,
its DAG, a hook before the DAG is prepared), model_steps (one model's steps, each written once: their files and command lines, which the
per-model rules and the queue jobs run), dvc_yaml (the Snakemake DAG as a dvc.yaml),
report_tables (a CSV table as an HTML page of the Snakemake report) and cli (the sub-commands of the
workflow and repository as a whole: dvc-yaml, docs-cli, docs-config, report-table). ``workflow/rules/*.smk`` only bind rules to a
:class:`~verbeval.workflow.plan.Plan`.

May import: core, agreement, acquisition, simverb, veridicality, multilingual, workflow.
"""
