# SimVerb-3500 verb similarity (Gerz et al. 2016): verb vectors from every model (static input
# embedding and every layer), cosine per pair, Spearman's rho with bootstrap CIs per split,
# relation and rating range, and the join with the agreement module's per-lemma results.
# Each rule's settings and DVC params: verbeval.simverb.steps; its outputs: PLAN.simverb.rule_outputs
# (simverb_reported: common.smk).


rule simverb_score:
    input:
        data=PLAN.simverb.data(),
        splits=PLAN.simverb.split_files(),
        model=lambda wc: PLAN.simverb.local_model(wc.svmodel),
    output:
        **PLAN.simverb.rule_outputs("simverb_score"),
    params:
        model=lambda wc: PLAN.simverb.model_args(wc.svmodel),
        random_init=lambda wc: PLAN.simverb.random_init_option(wc.svmodel),
        splits=lambda wc, input: PLAN.simverb.split_args(list(input.splits)),
        version=lambda wc: PLAN.simverb.version(wc.svmodel),
        settings=PLAN.settings("simverb-score"),
        threads=config["inference"]["threads"],  # a change reruns the job (the command uses {threads})
    wildcard_constraints:
        svmodel=alternatives(PLAN.simverb.alone),  # the others: rule infer (models.smk)
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.gpu_resource(config["inference"]["gpus"], local=jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/score.log",
    shell:
        "verbeval simverb-score --data {input.data:q} {params.splits} {params.model} "
        "--random-init {params.random_init} {params.settings} "
        "--threads {threads} --out {output.sims:q} --verbs {output.verbs:q} 2> {log:q}"


rule simverb_table:
    input:
        **PLAN.simverb.rule_outputs("simverb_score"),
    output:
        **simverb_reported("simverb_table", layers="../report/simverb_layers.rst", scatter="../report/simverb_scatter.rst"),
    params:
        settings=PLAN.settings("simverb-table"),
        random_models=lambda wc: PLAN.simverb.random_models(wc.svmodel),  # named in the report captions
    wildcard_constraints:
        svmodel=alternatives(list(PLAN.simverb.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/table.log",
    shell:
        "verbeval simverb-table --similarities {input.sims:q} --verbs {input.verbs:q} --model-name {wildcards.svmodel} "
        "{params.settings} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --layers-csv {output.layers_csv:q} "
        "--metrics-json {output.metrics:q} --layers-figure {output.layers:q} --scatter-figure {output.scatter:q} 2> {log:q}"


rule simverb_page:
    input:
        PLAN.simverb.pattern("csv"),
    output:
        **simverb_reported("simverb_page", page="../report/simverb_table.rst"),
    params:
        title=lambda wc: f"SimVerb-3500: Spearman rho per representation and subset ({wc.svmodel})",
        random_models=lambda wc: PLAN.simverb.random_models(wc.svmodel),  # named in the report caption
    wildcard_constraints:
        svmodel=alternatives(list(PLAN.simverb.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule simverb_join:
    input:
        sims=PLAN.simverb.pattern("sims"),
        stats=PLAN.model_steps.paths("{svmodel}")["lemma_stats"],
    output:
        **PLAN.simverb.rule_outputs("simverb_join"),
    wildcard_constraints:
        svmodel=alternatives(PLAN.simverb.joined),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/join.log",
    shell:
        "verbeval simverb-join --similarities {input.sims:q} --lemma-stats {input.stats:q} --model-name {wildcards.svmodel} "
        "--out {output.joined:q} --summary {output.summary:q} 2> {log:q}"


rule simverb_all:
    input:
        PLAN.simverb.outputs(),
