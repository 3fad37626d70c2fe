# Queue jobs (verbeval.workflow.queues): the models scored one after another by one warm
# process, `verbeval run-queue` (docs/workflow.md, "Sweeps and queues"): each chunk of a sweep's
# revisions (inference.revisions_per_job) and, on a run whose jobs run on this machine, the models
# sharing its GPU (inference.gpu_queue). Each step is the command line of the per-model rule it
# replaces (lemmas, infer, aggregate, lemma_stats, lemma_contexts), with the same outputs; those rules
# keep the models that are in no queue. One rule per queue: the DAG grows with sweeps and chunks.
from verbeval.workflow.snakemake import queue_resources


for _queue in PLAN.queues.queues:
    _record = PLAN.queues.record(_queue)  # its files, log and params, read by name

    rule:
        name:
            _queue.rule
        input:
            _record.input,
        output:
            _record.output["steps"],
            [update(f) for f in _record.output["kept"]],
        params:
            **_record.params,
        threads: config["inference"]["threads"]
        resources:
            # its models' GPUs; on a cluster rule infer's partition, runtime and memory (a profile cannot name queue_N)
            **queue_resources(workflow, gpu=lambda wc, q=_queue: PLAN.queues.gpus(q, jobs_run_here(workflow))),
        conda:
            "../../envs/inference.yaml"
        log:
            _record.log,
        shell:
            "verbeval run-queue --threads {threads} --post-workers {params.post_workers} {params.jobs} 2> {log:q}"
