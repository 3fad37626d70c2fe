# Agreement (Newman et al. 2021): templates -> lexicon -> eligible lemmas -> shards -> scores -> Table 2.


rule lexicon:
    input:
        lists=[PLAN.raw_path(s) for s in PLAN.agreement["verb_lists"]],
        overrides=PLAN.agreement["inflection_overrides"],
    output:
        f"{PLAN.agreement_dir}/lexicon.parquet",
    params:
        manifest=PLAN.manifest_param,  # formats only: no rerun trigger
        inputs=PLAN.source_inputs(PLAN.agreement["verb_lists"]),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/lexicon.log",
    shell:
        "verbeval lexicon --manifest {params.manifest:q} {params.inputs} --overrides {input.overrides:q} "
        "--out {output:q} 2> {log:q}"


rule templates:
    input:
        sources=[PLAN.raw_path(s) for s in PLAN.template_sources],
        groups_file=PLAN.agreement["groups_file"],
        errata=PLAN.agreement["errata"],
        custom=[str(g.path) for g in PLAN.custom_groups],
    output:
        table=f"{PLAN.agreement_dir}/templates.parquet",
        rejects=f"{PLAN.agreement_dir}/template_rejects.csv",
        groups=PLAN.run_groups_file,
    params:
        **PLAN.templates_params(),
        settings=PLAN.settings("templates"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/templates.log",
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
        model=alternatives(PLAN.queues.lemma_rule_models()),  # a sweep queue's revisions: their queue_N job
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
        summaries=[f for m in PLAN.models for f in PLAN.per_group(f"{PLAN.agreement_dir}/{m}/{{group}}/summary.csv")],
        groups_file=PLAN.run_groups_file,
        errata=PLAN.agreement["errata"],
        templates=f"{PLAN.agreement_dir}/templates.parquet",
    output:
        **PLAN.table2_outputs(
            html=lambda file: report(file, caption="../report/table2.rst", category="Agreement", subcategory="Tables"),
        ),
    params:
        **PLAN.table2_params(),
        settings=PLAN.settings("table"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/table2.log",
    shell:
        "verbeval table --groups-file {input.groups_file:q} --models {params.models} {params.table_models} "
        "--summaries {input.summaries:q} "
        "--errata {input.errata:q} --templates {input.templates:q} {params.settings} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --html {output.html:q} "
        "--all-csv {output.all_csv:q} "
        "--metrics {output.metrics:q} 2> {log:q}"
