# Figures, Table 3 and per-lemma diagnostics of the agreement results, from the shards and the
# aggregates (no model is run). Every figure's data is written as a CSV next to its images; the
# first configured image format goes into the Snakemake report (`snakemake --report report.html`).


rule figure_top_p:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/fig1_top_p.csv",
        images=report_first(PLAN.figure_images("fig1_top_p"), "../report/fig1_top_p.rst", "Agreement",
                            "Cutoff curves"),
    params:
        **PLAN.cutoff_figure_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/fig1_top_p.log",
    shell:
        "verbeval plot-cutoffs --figure scores-top --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_bottom_p:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/fig2_bottom_p.csv",
        images=report_first(PLAN.figure_images("fig2_bottom_p"), "../report/fig2_bottom_p.rst", "Agreement",
                            "Cutoff curves"),
    params:
        **PLAN.cutoff_figure_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/fig2_bottom_p.log",
    shell:
        "verbeval plot-cutoffs --figure scores-bottom --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_prob_counted:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/fig3_prob_counted.csv",
        images=report_first(PLAN.figure_images("fig3_prob_counted"), "../report/fig3_prob_counted.rst", "Agreement",
                            "Cutoff curves"),
    params:
        **PLAN.cutoff_figure_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/fig3_prob_counted.log",
    shell:
        "verbeval plot-cutoffs --figure prob-counted --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_invalid:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/fig4_invalid.csv",
        images=report_first(PLAN.figure_images("fig4_invalid"), "../report/fig4_invalid.rst", "Agreement",
                            "Cutoff curves"),
    params:
        **PLAN.cutoff_figure_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/fig4_invalid.log",
    shell:
        "verbeval plot-cutoffs --figure invalid --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_models:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/model_comparison.csv",
        images=report_first(PLAN.figure_images("model_comparison"), "../report/model_comparison.rst", "Agreement",
                            "Model comparison"),
    params:
        models=",".join(PLAN.models),
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/model_comparison.log",
    shell:
        "verbeval plot-models --summary {input.summary:q} --groups-file {input.groups_file:q} --models {params.models} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_checkpoints:
    input:
        summary=f"{PLAN.out}/summary_all.csv",
        groups_file=PLAN.run_groups_file,
    output:
        csv=f"{PLAN.figs}/checkpoints.csv",
        images=report_first(PLAN.figure_images("checkpoints"), "../report/checkpoints.rst", "Agreement",
                            "Training checkpoints"),
    params:
        args=PLAN.checkpoint_args(),
        confidence=PLAN.agr["bootstrap"]["confidence"],
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
        lemmas=f"{PLAN.out}/{{model}}/lemmas.parquet",
        manifest=PLAN.shard_manifest(PLAN.out),
    output:
        f"{PLAN.out}/{{model}}/lemma_stats.csv",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/{{model}}/lemma_stats.log",
    shell:
        "verbeval lemma-stats --lemmas {input.lemmas:q} --shards {input.manifest:q} --model-name {wildcards.model} "
        "--out {output:q} 2> {log:q}"


rule figure_lemmas:
    input:
        stats=PLAN.per_model(f"{PLAN.out}/{{model}}/lemma_stats.csv"),
    output:
        csv=f"{PLAN.figs}/lemma_accuracy.csv",
        metrics=f"{PLAN.figs}/lemma_metrics.json",
        images=report_first(PLAN.figure_images("lemma_accuracy"), "../report/lemma_accuracy.rst", "Agreement",
                            "Per-lemma diagnostics"),
        worst_csv=f"{PLAN.figs}/worst_lemmas.csv",
        worst_md=f"{PLAN.figs}/worst_lemmas.md",
        worst_html=report(
            f"{PLAN.figs}/worst_lemmas.html",
            caption="../report/worst_lemmas.rst",
            category="Agreement",
            subcategory="Per-lemma diagnostics",
        ),
    params:
        models=",".join(PLAN.models),
        worst=PLAN.figcfg["worst_lemmas"],
        bins=PLAN.figcfg["lemma_bins"],
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
    input:
        templates=f"{PLAN.out}/templates.parquet",
        lemmas=PLAN.per_model(f"{PLAN.out}/{{model}}/lemmas.parquet"),
        manifests=PLAN.per_model(PLAN.shard_manifest(PLAN.out)),
        tokenizers=PLAN.table3_tokenizers(),
    output:
        csv=f"{PLAN.figs}/table3_topk.csv",
        md=f"{PLAN.figs}/table3_topk.md",
        html=report(
            f"{PLAN.figs}/table3_topk.html", caption="../report/table3_topk.rst", category="Agreement", subcategory="Tables"
        ),
    params:
        args=lambda wc, input: PLAN.table3_args(),  # derived from the inputs: no rerun trigger of its own
        default_groups=",".join(PLAN.figcfg["context_groups"]),
        per_label=PLAN.figcfg["contexts_per_label"],
        random_models=PLAN.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/table3_topk.log",
    shell:
        "verbeval topk-table --templates {input.templates:q} {params.args} --default-groups {params.default_groups} "
        "--per-label {params.per_label} --csv {output.csv:q} --md {output.md:q} --html {output.html:q} 2> {log:q}"
