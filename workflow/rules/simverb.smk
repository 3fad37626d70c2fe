# SimVerb-3500 verb similarity (Gerz et al. 2016): verb vectors from every model (static input
# embedding and every layer), cosine per pair, Spearman's rho with bootstrap CIs per split,
# relation and rating range, and the join with the agreement module's per-lemma results.
# Each rule's settings and DVC params: verbeval.simverb.steps; its files, params, log and wildcard
# constraints: its record, read by name (SV.<rule>: verbeval.workflow.studies.SimverbPlan.rules; the
# report's outputs: simverb_reported, common.smk).
SV = PLAN.simverb.rules


rule simverb_score:
    input:
        **SV.simverb_score.input,
    output:
        **SV.simverb_score.output,
    params:
        **SV.simverb_score.params,  # version, threads: rerun triggers
    wildcard_constraints:
        **SV.simverb_score.constraints,  # the others: rule infer (models.smk)
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.gpu_resource(config["inference"]["gpus"], local=jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        SV.simverb_score.log,
    shell:
        "verbeval simverb-score --data {input.data:q} {params.splits} {params.model} "
        "--random-init {params.random_init} {params.settings} "
        "--threads {threads} --out {output.sims:q} --verbs {output.verbs:q} 2> {log:q}"


rule simverb_table:
    input:
        **SV.simverb_table.input,
    output:
        **simverb_reported("simverb_table", layers="../report/simverb_layers.rst", scatter="../report/simverb_scatter.rst"),
    params:
        **SV.simverb_table.params,  # random_models: named in the report captions
    wildcard_constraints:
        **SV.simverb_table.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        SV.simverb_table.log,
    shell:
        "verbeval simverb-table --similarities {input.sims:q} --verbs {input.verbs:q} --model-name {wildcards.svmodel} "
        "{params.settings} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --layers-csv {output.layers_csv:q} "
        "--metrics-json {output.metrics:q} --layers-figure {output.layers:q} --scatter-figure {output.scatter:q} 2> {log:q}"


rule simverb_page:
    input:
        SV.simverb_page.input,
    output:
        **simverb_reported("simverb_page", page="../report/simverb_table.rst"),
    params:
        title=lambda wc: f"SimVerb-3500: Spearman rho per representation and subset ({wc.svmodel})",
        **SV.simverb_page.params,  # random_models: named in the report caption
    wildcard_constraints:
        **SV.simverb_page.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        SV.simverb_page.log,
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule simverb_join:
    input:
        **SV.simverb_join.input,
    output:
        **SV.simverb_join.output,
    wildcard_constraints:
        **SV.simverb_join.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        SV.simverb_join.log,
    shell:
        "verbeval simverb-join --similarities {input.sims:q} --lemma-stats {input.stats:q} --model-name {wildcards.svmodel} "
        "--out {output.joined:q} --summary {output.summary:q} 2> {log:q}"


rule simverb_all:
    input:
        PLAN.simverb.outputs,
