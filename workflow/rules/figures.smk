# Figures, Table 3 and per-lemma diagnostics of the agreement results, from the shards and the
# aggregates (no model is run). Every figure's data is written as a CSV next to its images; the
# first configured image format goes into the Snakemake report (`snakemake --report report.html`).


rule figure_cutoffs:
    """Figures 1-4 (fig1_top_p, fig2_bottom_p, fig3_prob_counted, fig4_invalid), one job each.
    Config: models, agreement.top_cutoffs, agreement.bottom_cutoffs, agreement.bootstrap, agreement.figures.formats,
    agreement.figures.min_contexts, agreement.figures.low_n"""
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figures.out}/{{stem}}.csv",
        images=report_first(PLAN.figures.images("{stem}"), "../report/cutoff_figures.rst", "Agreement", "Cutoff curves"),
    wildcard_constraints:
        stem=alternatives(list(PLAN.figures.cutoff_figures)),
    params:
        figure=lambda wc: PLAN.figures.cutoff_figures[wc.stem][0],
        **PLAN.figures.cutoff_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/{{stem}}.log",
    shell:
        "verbeval plot-cutoffs --figure {params.figure} --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_models:
    """Config: models, agreement.figures.formats"""
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figures.out}/model_comparison.csv",
        images=report_first(PLAN.figures.images("model_comparison"), "../report/model_comparison.rst", "Agreement",
                            "Model comparison"),
    params:
        models=",".join(PLAN.figures.comparison_models()),
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/model_comparison.log",
    shell:
        "verbeval plot-models --summary {input.summary:q} --groups-file {input.groups_file:q} --models {params.models} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_checkpoints:
    """Config: models, agreement.bootstrap, agreement.figures.formats, agreement.figures.checkpoints,
    agreement.checkpoint_axis"""
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figures.out}/checkpoints.csv",
        images=report_first(PLAN.figures.images("checkpoints"), "../report/checkpoints.rst", "Agreement",
                            "Training checkpoints"),
    params:
        args=PLAN.figures.checkpoint_args(),
        confidence=PLAN.agreement["bootstrap"]["confidence"],
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/checkpoints.log",
    shell:
        "verbeval plot-checkpoints --summary {input.summary:q} --groups-file {input.groups_file:q} {params.args} "
        "--confidence {params.confidence} --csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule lemma_stats:
    input:
        **PLAN.model_steps.rule_inputs("lemma-stats"),
    output:
        **PLAN.model_steps.rule_outputs("lemma-stats"),
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued()),  # a queued model: its queue_N job (queues.smk)
    params:
        command=lambda wc: PLAN.model_steps.command("lemma-stats", wc.model),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/{{model}}/lemma_stats.log",
    shell:
        "verbeval {params.command} 2> {log:q}"


rule figure_lemmas:
    """Config: models, agreement.figures.formats, agreement.figures.worst_lemmas, agreement.figures.lemma_bins"""
    input:
        stats=PLAN.per_model(f"{PLAN.agreement_dir}/{{model}}/lemma_stats.csv"),
    output:
        csv=f"{PLAN.figures.out}/lemma_accuracy.csv",
        metrics=f"{PLAN.figures.out}/lemma_metrics.json",
        images=report_first(PLAN.figures.images("lemma_accuracy"), "../report/lemma_accuracy.rst", "Agreement",
                            "Per-lemma diagnostics"),
        worst_csv=f"{PLAN.figures.out}/worst_lemmas.csv",
        worst_md=f"{PLAN.figures.out}/worst_lemmas.md",
        worst_html=report(
            f"{PLAN.figures.out}/worst_lemmas.html",
            caption="../report/worst_lemmas.rst",
            category="Agreement",
            subcategory="Per-lemma diagnostics",
        ),
    params:
        models=",".join(PLAN.models),
        worst=PLAN.figures.config["worst_lemmas"],
        bins=PLAN.figures.config["lemma_bins"],
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/lemma_accuracy.log",
    shell:
        "verbeval plot-lemmas --stats {input.stats:q} --models {params.models} --bins {params.bins} "
        "--worst {params.worst} --csv {output.csv:q} --metrics-json {output.metrics:q} --out {output.images:q} "
        "--worst-csv {output.worst_csv:q} --worst-md {output.worst_md:q} --worst-html {output.worst_html:q} 2> {log:q}"


rule table3:
    """Config: models, agreement.figures.contexts, agreement.figures.context_groups,
    agreement.figures.contexts_per_label"""
    input:
        templates=f"{PLAN.agreement_dir}/templates.parquet",
        lemmas=PLAN.per_model(f"{PLAN.agreement_dir}/{{model}}/lemmas.parquet"),
        manifests=PLAN.per_model(PLAN.shard_manifest(PLAN.agreement_dir)),
        tokenizers=PLAN.figures.table3_tokenizers(),
    output:
        csv=f"{PLAN.figures.out}/table3_topk.csv",
        md=f"{PLAN.figures.out}/table3_topk.md",
        html=report(
            f"{PLAN.figures.out}/table3_topk.html", caption="../report/table3_topk.rst", category="Agreement", subcategory="Tables"
        ),
    params:
        args=lambda wc, input: PLAN.figures.table3_args(),  # derived from the inputs: no rerun trigger of its own
        default_groups=",".join(PLAN.figures.config["context_groups"]),
        per_label=PLAN.figures.config["contexts_per_label"],
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/table3_topk.log",
    shell:
        "verbeval topk-table --templates {input.templates:q} {params.args} --default-groups {params.default_groups} "
        "--per-label {params.per_label} --csv {output.csv:q} --md {output.md:q} --html {output.html:q} 2> {log:q}"
