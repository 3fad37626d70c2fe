# Agreement (Newman et al. 2021): templates -> lexicon -> eligible lemmas -> shards -> scores -> Table 2.
# Each rule's files, params and log: its record, read by name (RULE.<rule>; STEP.<rule> for a
# per-model step).


rule lexicon:
    input:
        **RULE.lexicon.input,
    output:
        RULE.lexicon.output,
    params:
        **RULE.lexicon.params,  # manifest: formats only, no rerun trigger
    conda:
        "../../envs/verbeval.yaml"
    log:
        RULE.lexicon.log,
    shell:
        "verbeval lexicon --manifest {params.manifest:q} {params.inputs} --overrides {input.overrides:q} "
        "--out {output:q} 2> {log:q}"


rule templates:
    input:
        **RULE.templates.input,
    output:
        **RULE.templates.output,
    params:
        **RULE.templates.params,  # manifest: formats only, no rerun trigger
    conda:
        "../../envs/verbeval.yaml"
    log:
        RULE.templates.log,
    shell:
        "verbeval templates --manifest {params.manifest:q} --groups-file {input.groups_file:q} {params.groups} "
        "--errata {input.errata:q} {params.inputs} {params.custom} {params.settings} "
        "--out {output.table:q} --rejects {output.rejects:q} --groups-out {output.groups:q} 2> {log:q}"


rule lemmas:
    input:
        **STEP.lemmas.input,
    output:
        **STEP.lemmas.output,
    wildcard_constraints:
        model=alternatives(PLAN.queues.lemma_rule_models),  # a sweep queue's revisions: their queue_N job
    params:
        **STEP.lemmas.params,  # version: a rerun trigger, the model's files or commit
    conda:
        "../../envs/verbeval.yaml"
    log:
        STEP.lemmas.log,
    shell:
        "verbeval lemmas --model {params.model:q} {params.source} --lexicon {input.lexicon:q} --out {output.lemmas:q} "
        "2> {log:q}"


# rule infer (the model's one job: agreement shards and its other accelerator branches): models.smk


rule aggregate:
    input:
        **STEP.aggregate.input,
    output:
        **STEP.aggregate.output,
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued()),  # a queued model: its queue_N job (queues.smk)
    params:
        **STEP.aggregate.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        STEP.aggregate.log,
    shell:
        "verbeval aggregate --templates {input.templates:q} --groups {params.groups:q} --model-name {wildcards.model:q} "
        "--manifest {input.manifest:q} {params.settings} --out-dir {params.out_dir:q} 2> {log:q}"


rule table2:
    input:
        **RULE.table2.input,
    output:
        **wrapped(
            RULE.table2.output,
            {"html": lambda file: report(file, caption="../report/table2.rst", category="Agreement", subcategory="Tables")},
        ),
    params:
        **RULE.table2.params,  # random_models: named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        RULE.table2.log,
    shell:
        "verbeval table --groups-file {input.groups_file:q} --models {params.models} {params.table_models} "
        "--summaries {input.summaries:q} "
        "--errata {input.errata:q} --templates {input.templates:q} {params.settings} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --html {output.html:q} "
        "--all-csv {output.all_csv:q} "
        "--metrics {output.metrics:q} 2> {log:q}"
