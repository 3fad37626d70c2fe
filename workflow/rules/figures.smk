# Figures, Table 3 and per-lemma diagnostics of the agreement results, from the shards and the
# aggregates (no model is run). Every figure's data is written as a CSV next to its images; the
# first configured image format goes into the Snakemake report (`snakemake --report report.html`).


include: "figures_common.smk"

rule figure_top_p:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/fig1_top_p.csv",
        images=figure_images("fig1_top_p", "Cutoff curves"),
    params:
        **CUTOFF_FIGURE_PARAMS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/fig1_top_p.log",
    shell:
        "verbeval plot-cutoffs --figure scores-top --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_bottom_p:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/fig2_bottom_p.csv",
        images=figure_images("fig2_bottom_p", "Cutoff curves"),
    params:
        **CUTOFF_FIGURE_PARAMS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/fig2_bottom_p.log",
    shell:
        "verbeval plot-cutoffs --figure scores-bottom --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_prob_counted:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/fig3_prob_counted.csv",
        images=figure_images("fig3_prob_counted", "Cutoff curves"),
    params:
        **CUTOFF_FIGURE_PARAMS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/fig3_prob_counted.log",
    shell:
        "verbeval plot-cutoffs --figure prob-counted --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_invalid:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/fig4_invalid.csv",
        images=figure_images("fig4_invalid", "Cutoff curves"),
    params:
        **CUTOFF_FIGURE_PARAMS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/fig4_invalid.log",
    shell:
        "verbeval plot-cutoffs --figure invalid --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--confidence {params.confidence} --min-contexts {params.min_contexts} --low-n {params.low_n} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_models:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/model_comparison.csv",
        images=figure_images("model_comparison", "Model comparison"),
    params:
        models=",".join(MODELS),
        random_models=RANDOM_MODELS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/model_comparison.log",
    shell:
        "verbeval plot-models --summary {input.summary:q} --groups-file {input.groups_file:q} --models {params.models} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_checkpoints:
    input:
        summary=f"{OUT}/summary_all.csv",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=f"{FIGS}/checkpoints.csv",
        images=figure_images("checkpoints", "Training checkpoints"),
    params:
        args=checkpoint_args,
        confidence=AGR["bootstrap"]["confidence"],
        random_models=RANDOM_MODELS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/checkpoints.log",
    shell:
        "verbeval plot-checkpoints --summary {input.summary:q} --groups-file {input.groups_file:q} {params.args} "
        "--confidence {params.confidence} --csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule lemma_stats:
    input:
        lemmas=f"{OUT}/{{model}}/lemmas.parquet",
        manifest=shard_manifest(OUT),
    output:
        f"{OUT}/{{model}}/lemma_stats.csv",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/lemma_stats.log",
    shell:
        "verbeval lemma-stats --lemmas {input.lemmas:q} --shards {input.manifest:q} --model-name {wildcards.model} "
        "--out {output:q} 2> {log:q}"


rule figure_lemmas:
    input:
        stats=expand(f"{OUT}/{{model}}/lemma_stats.csv", model=MODELS),
    output:
        csv=f"{FIGS}/lemma_accuracy.csv",
        metrics=f"{FIGS}/lemma_metrics.json",
        images=figure_images("lemma_accuracy", "Per-lemma diagnostics"),
        worst_csv=f"{FIGS}/worst_lemmas.csv",
        worst_md=f"{FIGS}/worst_lemmas.md",
        worst_html=report(
            f"{FIGS}/worst_lemmas.html",
            caption="../report/worst_lemmas.rst",
            category="Agreement",
            subcategory="Per-lemma diagnostics",
        ),
    params:
        models=",".join(MODELS),
        worst=FIGCFG["worst_lemmas"],
        bins=FIGCFG["lemma_bins"],
        random_models=RANDOM_MODELS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/lemma_accuracy.log",
    shell:
        "verbeval plot-lemmas --stats {input.stats:q} --models {params.models} --bins {params.bins} "
        "--worst {params.worst} --csv {output.csv:q} --metrics-json {output.metrics:q} --out {output.images:q} "
        "--worst-csv {output.worst_csv:q} --worst-md {output.worst_md:q} --worst-html {output.worst_html:q} 2> {log:q}"


rule table3:
    input:
        templates=f"{OUT}/templates.parquet",
        lemmas=expand(f"{OUT}/{{model}}/lemmas.parquet", model=MODELS),
        manifests=expand(shard_manifest(OUT), model=MODELS),
        tokenizers=[d for m in MODELS.values() for d in model_dir_input(m["id"])],
    output:
        csv=f"{FIGS}/table3_topk.csv",
        md=f"{FIGS}/table3_topk.md",
        html=report(
            f"{FIGS}/table3_topk.html", caption="../report/table3_topk.rst", category="Agreement", subcategory="Tables"
        ),
    params:
        args=table3_args,
        default_groups=",".join(FIGCFG["context_groups"]),
        per_label=FIGCFG["contexts_per_label"],
        random_models=RANDOM_MODELS,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/figures/table3_topk.log",
    shell:
        "verbeval topk-table --templates {input.templates:q} {params.args} --default-groups {params.default_groups} "
        "--per-label {params.per_label} --csv {output.csv:q} --md {output.md:q} --html {output.html:q} 2> {log:q}"
