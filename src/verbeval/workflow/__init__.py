"""The Snakemake workflow's plan as plain Python, so that every rule's plan is tested in process.

Holds: loading (configuration files to a plan: Snakemake's merge, validation), params (what rule
params and wildcard constraints are made of), plan (from a validated configuration: models, groups, sources, result paths, output lists and
each rule's command options; stale shard stores and unverified raw copies, found without writing),
studies (the SimVerb-3500 and veridicality parts of the plan), snakemake (what the Snakefile asks
of Snakemake's ``workflow`` object: configuration layers, forced reruns, SLURM start checks, the
failure summary). ``workflow/rules/*.smk`` only bind rules to a :class:`~verbeval.workflow.plan.Plan`.

May import: core, agreement, simverb, veridicality, workflow.
"""
