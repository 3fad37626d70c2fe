# DVC views of results the other rules computed (no new numbers; see src/verbeval/agreement/report/dvc_views.py):
# Table 2 as one small {tse, ew, mw} file per model and group (the DVC metrics), and the data of
# Figures 1-4 as one CSV per figure, side and group with a column per model and metric (the DVC
# plots; `dvc plots show` cannot split one file's rows into series). Each rule's files, params, log and
# wildcard constraints: its record, read by name (FIG.<rule>, figures.smk).


rule dvc_metrics:
    input:
        FIG.dvc_metrics.input,
    output:
        **FIG.dvc_metrics.output,
    params:
        **FIG.dvc_metrics.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.dvc_metrics.log,
    shell:
        "verbeval dvc-metrics --metrics {input:q} --models {params.models} --groups {params.groups} "
        "--out-dir {params.out_dir:q} 2> {log:q}"


rule dvc_plot_data:
    input:
        FIG.dvc_plot_data.input,
    output:
        **FIG.dvc_plot_data.output,
    wildcard_constraints:
        **FIG.dvc_plot_data.constraints,
    params:
        **FIG.dvc_plot_data.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        FIG.dvc_plot_data.log,
    shell:
        "verbeval dvc-plot-data --figure {params.figure} --curves {input:q} --side {wildcards.side} "
        "--models {params.models} --groups {params.groups} --out-dir {params.out_dir:q} 2> {log:q}"
