# How agreement is acquired over training (agreement.acquisition; planned by
# verbeval.workflow.acquisition, read as ACQ): the toy models the workflow trains itself (toy_models),
# each analysed checkpoint's lemma contexts (from its shards), the checkpoint index of the sweeps
# and the acquisition analysis (learning curves, ages of acquisition, frequency, changepoints, seeds)
# in <results_dir>/agreement/acquisition. A model entry whose revisions are a toy model's checkpoint
# folders depends on rule train_toy's output, so the model is trained before any job loads it.
# Each rule's files, params, log and wildcard constraints: its record, read by name (ACQ.<rule>).
ACQ = PLAN.acquisition.rules


rule train_toy:
    """A toy causal LM trained from scratch on a synthetic agreement corpus (a CPU job)."""
    input:
        **ACQ.train_toy.input,
    output:
        directory(ACQ.train_toy.output),
    wildcard_constraints:
        **ACQ.train_toy.constraints,
    params:
        **ACQ.train_toy.params,
    threads: lambda wc: PLAN.acquisition.toy[wc.toy]["threads"]
    conda:
        "../../envs/inference.yaml"
    log:
        ACQ.train_toy.log,
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
        **ACQ.acquisition_index.input,
    output:
        ACQ.acquisition_index.output,
    params:
        **ACQ.acquisition_index.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        ACQ.acquisition_index.log,
    shell:
        "verbeval acquisition-index --summary {input.summary:q} {params.args} --out {output:q} "
        "{params.settings} 2> {log:q}"


rule acquisition:
    input:
        **ACQ.acquisition.input,
    output:
        tables=ACQ.acquisition.output["tables"],
        curves=report_first(ACQ.acquisition.output["curves"], "../report/acquisition_curves.rst", "Agreement",
                            "Acquisition"),
        aoa=report_first(ACQ.acquisition.output["aoa_frequency"], "../report/acquisition_aoa_frequency.rst",
                         "Agreement", "Acquisition"),
        heatmap=report_first(ACQ.acquisition.output["lemma_heatmap"], "../report/acquisition_lemma_heatmap.rst",
                             "Agreement", "Acquisition"),
    params:
        **ACQ.acquisition.params,  # out_dir: the acquisition folder
        random_models=PLAN.model.random_models,
    conda:
        "../../envs/verbeval.yaml"
    log:
        ACQ.acquisition.log,
    shell:
        "verbeval acquisition --index {input.index:q} {params.options} --out {params.out_dir:q} 2> {log:q}"


rule dvc_acquisition_plots:
    input:
        ACQ.dvc_acquisition_plots.input,
    output:
        ACQ.dvc_acquisition_plots.output,
    params:
        **ACQ.dvc_acquisition_plots.params,  # x_label: the x axis of the DVC plots (dvc.yaml), not of the command
    conda:
        "../../envs/verbeval.yaml"
    log:
        ACQ.dvc_acquisition_plots.log,
    shell:
        "verbeval dvc-acquisition-plots --curves {input:q} {params.series} --groups {params.groups} "
        "--out-dir {params.out_dir:q} 2> {log:q}"
