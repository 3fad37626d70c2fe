# Figures, Table 3 and per-lemma diagnostics of the agreement results, from the shards and the
# aggregates (no model is run). Every figure's data is written as a CSV next to its images; the
# first configured image format goes into the Snakemake report (`snakemake --report report.html`).
# Each rule's files, params, log and wildcard constraints: its record, read by name (FIG.<rule>:
# verbeval.workflow.figures.FiguresPlan.rules); the report's outputs: wrapped(outputs, {name: report}).
FIG = PLAN.figures.rules


rule figure_cutoffs:
    """Figures 1-4 (fig1_top_p, fig2_bottom_p, fig3_prob_counted, fig4_invalid), one job each."""
    input:
        **FIG.figure_cutoffs.input,
    output:
        **wrapped(
            FIG.figure_cutoffs.output,
            {
                "images": lambda files: report_first(files, "../report/cutoff_figures.rst", "Agreement",
                                                     "Cutoff curves"),
            },
        ),
    wildcard_constraints:
        **FIG.figure_cutoffs.constraints,
    params:
        **FIG.figure_cutoffs.params,  # random_models: named in the report captions
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.figure_cutoffs.log,
    shell:
        "verbeval plot-cutoffs --figure {params.figure} --summary {input.summary:q} --groups-file {input.groups_file:q} "
        "--models {params.models} {params.draw} {params.settings} --csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_models:
    input:
        **FIG.figure_models.input,
    output:
        **wrapped(
            FIG.figure_models.output,
            {
                "images": lambda files: report_first(files, "../report/model_comparison.rst", "Agreement",
                                                     "Model comparison"),
            },
        ),
    params:
        **FIG.figure_models.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.figure_models.log,
    shell:
        "verbeval plot-models --summary {input.summary:q} --groups-file {input.groups_file:q} --models {params.models} "
        "--csv {output.csv:q} --out {output.images:q} 2> {log:q}"


rule figure_checkpoints:
    input:
        **FIG.figure_checkpoints.input,
    output:
        **wrapped(
            FIG.figure_checkpoints.output,
            {
                "images": lambda files: report_first(files, "../report/checkpoints.rst", "Agreement",
                                                     "Training checkpoints"),
            },
        ),
    params:
        **FIG.figure_checkpoints.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.figure_checkpoints.log,
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
        **FIG.figure_lemmas.input,
    output:
        **wrapped(
            FIG.figure_lemmas.output,
            {
                "images": lambda files: report_first(files, "../report/lemma_accuracy.rst", "Agreement",
                                                     "Per-lemma diagnostics"),
                "worst_html": lambda file: report(file, caption="../report/worst_lemmas.rst", category="Agreement",
                                                  subcategory="Per-lemma diagnostics"),
            },
        ),
    params:
        **FIG.figure_lemmas.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.figure_lemmas.log,
    shell:
        "verbeval plot-lemmas --stats {input.stats:q} --models {params.models} {params.draw} {params.settings} "
        "--csv {output.csv:q} --metrics-json {output.metrics:q} --out {output.images:q} "
        "--worst-csv {output.worst_csv:q} --worst-md {output.worst_md:q} --worst-html {output.worst_html:q} 2> {log:q}"


rule table3:
    input:
        **FIG.table3.input,
    output:
        **wrapped(
            FIG.table3.output,
            {
                "html": lambda file: report(file, caption="../report/table3_topk.rst", category="Agreement",
                                            subcategory="Tables"),
            },
        ),
    params:
        **FIG.table3.params,  # args: derived from the inputs, no rerun trigger of its own
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.table3.log,
    shell:
        "verbeval topk-table --templates {input.templates:q} {params.args} {params.settings} "
        "--csv {output.csv:q} --md {output.md:q} --html {output.html:q} 2> {log:q}"
