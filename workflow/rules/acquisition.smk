# How agreement is acquired over training (agreement.acquisition; planned by
# verbeval.workflow.acquisition as PLAN.acquisition): the toy models the workflow trains itself (toy_models),
# each analysed checkpoint's lemma contexts (from its shards), the checkpoint index of the sweeps
# and the acquisition analysis (learning curves, ages of acquisition, frequency, changepoints, seeds)
# in <results_dir>/agreement/acquisition. A model entry whose revisions are a toy model's checkpoint
# folders depends on rule train_toy's output, so the model is trained before any job loads it.

import os


rule train_toy:
    """A toy causal LM trained from scratch on a synthetic agreement corpus (a CPU job)."""
    input:
        templates=f"{PLAN.agreement_dir}/templates.parquet",
        lexicon=f"{PLAN.agreement_dir}/lexicon.parquet",
    output:
        directory("{toy}"),
    wildcard_constraints:
        toy=alternatives(list(PLAN.acquisition.toy)),
    params:
        seed=lambda wc: PLAN.acquisition.train_params(wc.toy)["seed"],
        steps=lambda wc: PLAN.acquisition.train_params(wc.toy)["steps"],
        checkpoints=lambda wc: PLAN.acquisition.train_params(wc.toy)["checkpoints"],
        corpus_seed=lambda wc: PLAN.acquisition.train_params(wc.toy)["corpus_seed"],
    threads: lambda wc: PLAN.acquisition.train_params(wc.toy)["threads"]
    conda:
        "../../envs/inference.yaml"
    log:
        f"{PLAN.logs}/toy_models/{{toy}}.log",
    shell:
        "verbeval train-toy --templates {input.templates:q} --lexicon {input.lexicon:q} --seed {params.seed} "
        "{params.corpus_seed} --steps {params.steps} --checkpoints {params.checkpoints} --threads {threads} --no-progress "
        "--out {output:q} 2> {log:q}"


rule lemma_contexts:
    input:
        **STEP.lemma_contexts.input,
    output:
        **STEP.lemma_contexts.output,
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued(PLAN.acquisition.models)),  # a queued model: its queue_N job
    params:
        **STEP.lemma_contexts.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        STEP.lemma_contexts.log,
    shell:
        "verbeval lemma-contexts --lemmas {input.lemmas:q} --shards {input.manifest:q} "
        "--model-name {wildcards.model:q} {params.toy} --out {output.lemma_contexts:q} 2> {log:q}"


rule acquisition_index:
    input:
        summary=f"{PLAN.agreement_dir}/summary_all.csv",
        lemma_contexts=[PLAN.acquisition.lemma_contexts(m) for m in PLAN.acquisition.models],
    output:
        PLAN.acquisition.index,
    params:
        args=PLAN.acquisition.index_args(),
        settings=PLAN.settings("acquisition-index"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/acquisition/checkpoints.log",
    shell:
        "verbeval acquisition-index --summary {input.summary:q} {params.args} --out {output:q} "
        "{params.settings} 2> {log:q}"


rule acquisition:
    input:
        index=PLAN.acquisition.index,
        frequencies=PLAN.acquisition.frequency_inputs(),
    output:
        tables=PLAN.acquisition.table_files(),
        curves=report_first(PLAN.acquisition.images("curves"), "../report/acquisition_curves.rst", "Agreement",
                            "Acquisition"),
        aoa=report_first(PLAN.acquisition.images("aoa_frequency"), "../report/acquisition_aoa_frequency.rst", "Agreement",
                         "Acquisition"),
        heatmap=report_first(PLAN.acquisition.images("lemma_heatmap"), "../report/acquisition_lemma_heatmap.rst",
                             "Agreement", "Acquisition"),
    params:
        options=PLAN.acquisition.analysis_options(),
        out_dir=lambda wc, output: os.path.dirname(output.tables[0]),  # the acquisition folder
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/acquisition/acquisition.log",
    shell:
        "verbeval acquisition --index {input.index:q} {params.options} --out {params.out_dir:q} 2> {log:q}"


rule dvc_acquisition_plots:
    input:
        f"{PLAN.acquisition.out}/curves.csv",
    output:
        PLAN.acquisition.dvc_plot_files(),
    params:
        series=PLAN.acquisition.series_args(),
        x_label=PLAN.acquisition.x_label,  # the x axis of the DVC plots (dvc.yaml), not of the command
        groups=",".join(PLAN.group_ids),
        out_dir=lambda wc, output: os.path.dirname(output[0]),  # acquisition/dvc
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/acquisition/dvc_plots.log",
    shell:
        "verbeval dvc-acquisition-plots --curves {input:q} {params.series} --groups {params.groups} "
        "--out-dir {params.out_dir:q} 2> {log:q}"
