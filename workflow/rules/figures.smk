# Figures, Table 3 and per-lemma diagnostics of the agreement results, from the shards and the
# aggregates (no model is run). Every figure's data is written as a CSV next to its images; the
# first configured image format goes into the Snakemake report (`snakemake --report report.html`).


rule figure_cutoffs:
    """Figures 1-4 (fig1_top_p, fig2_bottom_p, fig3_prob_counted, fig4_invalid), one job each."""
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        **PLAN.figures.rule_outputs(
            "figure_cutoffs",
            images=lambda files: report_first(files, "../report/cutoff_figures.rst", "Agreement", "Cutoff curves"),
        ),
    wildcard_constraints:
        stem=alternatives(list(PLAN.figures.cutoff_figures)),
    params:
        figure=lambda wc: PLAN.figures.cutoff_figures[wc.stem][0],
        **PLAN.figures.cutoff_params(),
        settings=PLAN.settings("plot-cutoffs"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/{{stem}}.log",
    shell:
        "verbeval plot-cutoffs --figure {params.figure} --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} {params.settings} --csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_models:
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        **PLAN.figures.rule_outputs(
            "figure_models",
            images=lambda files: report_first(files, "../report/model_comparison.rst", "Agreement", "Model comparison"),
        ),
    params:
        models=",".join(PLAN.figures.comparison_models()),
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/model_comparison.log",
    shell:
        "verbeval plot-models --summary {input.summary:q} --groups-file {input.groups_file:q} --models {params.models} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_checkpoints:
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        **PLAN.figures.rule_outputs(
            "figure_checkpoints",
            images=lambda files: report_first(files, "../report/checkpoints.rst", "Agreement", "Training checkpoints"),
        ),
    params:
        args=PLAN.figures.checkpoint_args(),
        settings=PLAN.settings("plot-checkpoints"),
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/checkpoints.log",
    shell:
        "verbeval plot-checkpoints --summary {input.summary:q} --groups-file {input.groups_file:q} {params.args} "
        "{params.settings} --csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule lemma_stats:
    input:
        **STEP.lemma_stats.input,
    output:
        **STEP.lemma_stats.output,
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued()),  # a queued model: its queue_N job (queues.smk)
    conda:
        "../../envs/verbeval.yaml"
    log:
        STEP.lemma_stats.log,
    shell:
        "verbeval lemma-stats --lemmas {input.lemmas:q} --shards {input.manifest:q} --model-name {wildcards.model:q} "
        "--out {output.lemma_stats:q} 2> {log:q}"


rule figure_lemmas:
    input:
        stats=PLAN.per_model(f"{PLAN.agreement_dir}/{{model}}/lemma_stats.csv"),
    output:
        **PLAN.figures.rule_outputs(
            "figure_lemmas",
            images=lambda files: report_first(files, "../report/lemma_accuracy.rst", "Agreement", "Per-lemma diagnostics"),
            worst_html=lambda file: report(
                file, caption="../report/worst_lemmas.rst", category="Agreement", subcategory="Per-lemma diagnostics"
            ),
        ),
    params:
        models=",".join(PLAN.models),
        settings=PLAN.settings("plot-lemmas"),
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/lemma_accuracy.log",
    shell:
        "verbeval plot-lemmas --stats {input.stats:q} --models {params.models} {params.settings} "
        "--csv {output.csv:q} --metrics-json {output.metrics:q} --out {output.images:q} "
        "--worst-csv {output.worst_csv:q} --worst-md {output.worst_md:q} --worst-html {output.worst_html:q} 2> {log:q}"


rule table3:
    input:
        templates=f"{PLAN.agreement_dir}/templates.parquet",
        lemmas=PLAN.per_model(f"{PLAN.agreement_dir}/{{model}}/lemmas.parquet"),
        manifests=PLAN.per_model(PLAN.shard_manifest(PLAN.agreement_dir)),
        tokenizers=PLAN.figures.table3_tokenizers(),
    output:
        **PLAN.figures.rule_outputs(
            "table3",
            html=lambda file: report(file, caption="../report/table3_topk.rst", category="Agreement", subcategory="Tables"),
        ),
    params:
        args=lambda wc, input: PLAN.figures.table3_args(),  # derived from the inputs: no rerun trigger of its own
        settings=PLAN.settings("topk-table"),
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/table3_topk.log",
    shell:
        "verbeval topk-table --templates {input.templates:q} {params.args} {params.settings} "
        "--csv {output.csv:q} --md {output.md:q} --html {output.html:q} 2> {log:q}"
