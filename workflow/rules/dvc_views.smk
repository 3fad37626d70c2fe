# DVC views of results the other rules computed (no new numbers; see src/verbeval/agreement/report/dvc_views.py):
# Table 2 as one small {tse, ew, mw} file per model and group (the DVC metrics), and the data of
# Figures 1-4 as one CSV per figure, side and group with a column per model and metric (the DVC
# plots; `dvc plots show` cannot split one file's rows into series).

import os


rule dvc_metrics:
    input:
        PLAN.table2_outputs()["metrics"],
    output:
        **PLAN.figures.rule_outputs("dvc_metrics"),
    params:
        models=",".join(PLAN.table_models),  # the models of metrics.json (agreement.table_models)
        groups=",".join(PLAN.group_ids),
        out_dir=lambda wc, output: os.path.dirname(os.path.dirname(output[0])),  # OUT/metrics
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/dvc_metrics.log",
    shell:
        "verbeval dvc-metrics --metrics {input:q} --models {params.models} --groups {params.groups} "
        "--out-dir {params.out_dir:q} 2> {log:q}"


rule dvc_plot_data:
    input:
        PLAN.figures.rule_outputs("figure_cutoffs")["csv"],
    output:
        **PLAN.figures.rule_outputs("dvc_plot_data"),
    wildcard_constraints:
        stem=alternatives(list(PLAN.figures.cutoff_figures)),
        side="top|bottom",
    params:
        figure=lambda wc: PLAN.figures.cutoff_figures[wc.stem][0],
        models=",".join(PLAN.models),
        groups=",".join(PLAN.group_ids),
        out_dir=lambda wc, output: os.path.dirname(output[0]),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/figures/dvc_{{stem}}_{{side}}.log",
    shell:
        "verbeval dvc-plot-data --figure {params.figure} --curves {input:q} --side {wildcards.side} "
        "--models {params.models} --groups {params.groups} --out-dir {params.out_dir:q} 2> {log:q}"
