# Paired comparisons of the run's models (comparisons.csv, first_gains.csv, the forest figure), the
# precision audit (precision_audit.csv: ties and fragile decisions) and, on request, each model's Every Eval
# Ever export, from the aggregates and shards: no model is run. One job each for the whole run (verbeval.workflow.comparisons): each rule reads its
# record by name (CMP.<rule>: input, output, params, log).
CMP = PLAN.comparisons.rules


rule comparisons:
    input:
        CMP.comparisons.input,
    output:
        csv=CMP.comparisons.output["csv"],
        first_gains=CMP.comparisons.output["first_gains"],
        figure=report_first(CMP.comparisons.output["figure"], "../report/comparisons_forest.rst", "Agreement",
                            "Paired comparisons"),
    params:
        **CMP.comparisons.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        CMP.comparisons.log,
    shell:
        "verbeval compare {params.named} --templates={params.templates:q} --groups={params.groups:q} {params.pairs} "
        "{params.settings} --csv {output.csv:q} --first-gains {output.first_gains:q} --figure {output.figure:q} "
        "2> {log:q}"


rule comparisons_page:
    input:
        CMP.comparisons_page.input,
    output:
        report(CMP.comparisons_page.output, caption="../report/comparisons.rst", category="Agreement",
               subcategory="Paired comparisons"),
    params:
        title="Paired comparisons: differences per group (B - A)",
    conda:
        "../../envs/verbeval.yaml"
    log:
        CMP.comparisons_page.log,
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule precision_audit:
    input:
        CMP.precision_audit.input,
    output:
        **CMP.precision_audit.output,
    params:
        **CMP.precision_audit.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        CMP.precision_audit.log,
    shell:
        "verbeval precision-audit {params.named} --groups={params.groups:q} {params.settings} --out {output.audit:q} "
        "2> {log:q}"


rule precision_audit_page:
    input:
        CMP.precision_audit_page.input,
    output:
        report(CMP.precision_audit_page.output, caption="../report/precision_audit.rst", category="Agreement",
               subcategory="Precision audit"),
    params:
        title="Ties and fragile decisions per model, group and metric",
    conda:
        "../../envs/verbeval.yaml"
    log:
        CMP.precision_audit_page.log,
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


# The flip sets (agreement.precision_audit.dtypes): each model of Table 2 run again in another dtype (its
# own shard store and aggregates under <model>/precision/<dtype>/), then the decisions that flip and how
# far TSE, EW and MW move (verbeval flip-set). Rules of the steps run-model, aggregate and flip-set.
if PLAN.comparisons.dtype_runs:
    rule precision_infer:
        input:
            **CMP.precision_infer.input,
        output:
            **CMP.precision_infer.output,
        params:
            **CMP.precision_infer.params,
        wildcard_constraints:
            **CMP.precision_infer.constraints,
        threads: config["inference"]["threads"]
        resources:
            gpu=lambda wc: PLAN.model.gpus(wc.model, jobs_run_here(workflow)),
        conda:
            "../../envs/inference.yaml"
        log:
            CMP.precision_infer.log,
        shell:
            "verbeval run-model --model {params.model:q} {params.source} {params.model_settings} "
            "--random-init {params.random_init:q} --templates {input.templates:q} --lemmas {input.lemmas:q} "
            "--groups {params.groups:q} {params.settings} {params.branches} --no-progress {params.nonfinite} "
            "--manifest {output.manifest:q} 2> {log:q}"

    rule precision_aggregate:
        input:
            **CMP.precision_aggregate.input,
        output:
            **CMP.precision_aggregate.output,
        params:
            **CMP.precision_aggregate.params,
        wildcard_constraints:
            **CMP.precision_aggregate.constraints,
        conda:
            "../../envs/verbeval.yaml"
        log:
            CMP.precision_aggregate.log,
        shell:
            "verbeval aggregate --templates {input.templates:q} --groups {params.groups:q} "
            "--model-name {wildcards.model:q} --manifest {input.manifest:q} {params.settings} "
            "--out-dir {params.out_dir:q} 2> {log:q}"

    rule flip_set:
        input:
            CMP.flip_set.input,
        output:
            **CMP.flip_set.output,
        params:
            **CMP.flip_set.params,
        wildcard_constraints:
            **CMP.flip_set.constraints,
        conda:
            "../../envs/verbeval.yaml"
        log:
            CMP.flip_set.log,
        shell:
            "verbeval flip-set --model-name={wildcards.model:q} --dtype={wildcards.dtype:q} "
            "--reference-results={params.reference_results:q} --reference-shards={params.reference_shards:q} "
            "--other-results={params.other_results:q} --other-shards={params.other_shards:q} "
            "--lemmas={params.lemmas:q} --groups={params.groups:q} {params.settings} "
            "--flips {output.flips:q} --comparison {output.comparison:q} 2> {log:q}"


# Each model's results and instance rows in the Every Eval Ever schema (agreement.export.every_eval_ever;
# docs/export.md), validated before they are written: one job per model.
if PLAN.comparisons.export_on:

    rule export_every_eval_ever:
        input:
            **CMP.export_every_eval_ever.input,
        output:
            export=directory(CMP.export_every_eval_ever.output["export"]),
        params:
            **CMP.export_every_eval_ever.params,
        wildcard_constraints:
            **CMP.export_every_eval_ever.constraints,
        conda:
            "../../envs/verbeval.yaml"
        log:
            CMP.export_every_eval_ever.log,
        shell:
            "verbeval export --format every-eval-ever --templates {input.templates:q} --groups {params.groups:q} "
            "--model-name {wildcards.model:q} --manifest {input.manifest:q} --results {params.results:q} "
            "--config-sha256 {params.config_sha256:q} {params.schemas} {params.settings} "
            "--out-dir {output.export:q} 2> {log:q}"
