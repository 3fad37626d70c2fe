# The CLAMS sets (Mueller et al. 2020) in English, French, German, Hebrew and Russian, scored TSE, EW and
# MW over each language's own verb lexicon (docs/multilingual.md). Off while multilingual.languages is
# empty: then no rule below has a job. Each rule's files, params and log: its record, read by name
# (ML.<rule>: verbeval.workflow.multilingual.MultilingualPlan.rules); its settings: verbeval.multilingual.steps.
ML = PLAN.multilingual.rules


rule clams_lexicon:
    input:
        unpack(ML.clams_lexicon.input),  # he: the hspell .deb; en: the agreement study's lexicon
    output:
        **ML.clams_lexicon.output,
    params:
        **ML.clams_lexicon.params,
    wildcard_constraints:
        **ML.clams_lexicon.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        ML.clams_lexicon.log,
    shell:
        "verbeval clams-lexicon --language {wildcards.lang} {params.inputs} --out {output.lexicon:q} "
        "--counts {output.counts:q} 2> {log:q}"


rule clams_templates:
    input:
        **ML.clams_templates.input,
    output:
        **ML.clams_templates.output,
    params:
        **ML.clams_templates.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        ML.clams_templates.log,
    shell:
        "verbeval clams-templates {params.inputs} {params.lexicons} {params.settings} --out {output.table:q} "
        "--cells {output.cells:q} 2> {log:q}"


rule clams_score:
    input:
        **ML.clams_score.input,
    output:
        **ML.clams_score.output,
    params:
        **ML.clams_score.params,  # version: a rerun trigger, the model's files or commit
    wildcard_constraints:
        **ML.clams_score.constraints,
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.model.gpus(wc.mlmodel, jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        ML.clams_score.log,
    shell:
        "verbeval clams-score --model {params.model:q} {params.source} {params.model_settings} "
        "--random-init {params.random_init:q} --templates {input.templates:q} {params.lexicons} "
        "--model-name {wildcards.mlmodel} {params.settings} --no-progress --out-dir {params.out_dir:q} "
        "2> {log:q}"


rule clams_table:
    input:
        **ML.clams_table.input,
    output:
        **ML.clams_table.output,
    params:
        **ML.clams_table.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        ML.clams_table.log,
    shell:
        "verbeval clams-table --summaries {input.summaries:q} --eligible {input.eligible:q} "
        "--contexts {input.contexts:q} {params.ml} {params.settings} {params.formats} --out-dir {params.out_dir:q} "
        "2> {log:q}"
