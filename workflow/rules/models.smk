# One job per model for all of its accelerator work (docs/performance.md, "One model load per model"):
# rule infer loads an agreement model once and writes its agreement shards, its multi-token form shards
# (agreement.multitoken) and its SimVerb-3500 embeddings (a SimVerb model at float32: PLAN.simverb.in_infer);
# infer_no_simverb is the same job for the agreement models without a SimVerb branch. The shard
# stores resume shard by shard; the SimVerb outputs are flagged update (Snakemake keeps them) and
# `verbeval run-model` recomputes them only when their stamp shows changed inputs or settings.


rule infer:
    input:
        **STEP.infer.input,  # with the SimVerb data and split files
    output:
        **{k: update(v) if k in ("sims", "verbs") else v for k, v in STEP.infer.output.items()},
    params:
        **STEP.infer.params,  # version: a rerun trigger, the model's files or commit
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued(PLAN.simverb.in_infer)),  # a queued model: its queue_N job
    threads: config["inference"]["threads"]
    resources:
        # 0 for a job on this machine's CPU (PLAN.gpu_resource): CPU jobs of two models run side by side
        gpu=lambda wc: PLAN.model.gpus(wc.model, jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        STEP.infer.log,
    shell:
        "verbeval run-model --model {params.model:q} {params.source} {params.model_settings} "
        "--random-init {params.random_init:q} --templates {input.templates:q} --lemmas {input.lemmas:q} "
        "--groups {params.groups:q} {params.settings} {params.branches} --no-progress {params.nonfinite} "
        "--manifest {output.manifest:q} 2> {log:q}"


use rule infer as infer_no_simverb with:
    input:
        **STEP.infer_no_simverb.input,
    output:
        **STEP.infer_no_simverb.output,
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued([m for m in PLAN.models if m not in PLAN.simverb.in_infer])),
