# One job per model for all of its accelerator work (docs/performance.md, "One model load per model"):
# rule infer loads an agreement model once and writes its agreement shards, its multi-token form shards
# (agreement.multitoken) and its SimVerb-3500 embeddings (a SimVerb model at float32: SV_IN_INFER);
# infer_no_simverb is the same job for the agreement models without a SimVerb branch. The shard
# stores resume shard by shard; the SimVerb outputs are flagged update (Snakemake keeps them) and
# `verbeval run-model` recomputes them only when their stamp shows changed inputs or settings.

include: "models_common.smk"


rule infer:
    input:
        **_INFER_INPUT,
        simverb_data=raw_path(SV["source"]),
        simverb_splits=[raw_path(src) for src in SV_SPLITS.values()],
    output:
        **_INFER_OUTPUT,
        sims=update(f"{SVRES}/{{model}}/similarities.parquet"),
        verbs=update(f"{SVRES}/{{model}}/verbs.csv"),
    params:
        model=model_param("id"),
        version=model_version,
        revision=revision_option,
        kind=model_param("kind"),
        dtype=model_param("dtype"),
        device_map=device_map_option,
        batch_size=model_param("batch_size"),
        bos=bos_option,
        random_init=random_init_option,
        device=config["inference"]["device"],
        top_k=config["inference"]["top_k"],
        groups=",".join(GROUP_IDS),
        n_chunks=AGR["chunks"],
        branches=run_model_branches,
        nonfinite="--allow-nonfinite" if config["inference"]["allow_nonfinite"] else "",
    wildcard_constraints:
        model="|".join(map(re.escape, SV_IN_INFER)) or "(?!x)x",
    threads: config["inference"]["threads"]
    resources:
        gpu=model_param("gpus"),
    conda:
        "../../envs/inference.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/infer.log",
    shell:
        "verbeval run-model --model {params.model:q} {params.revision} --kind {params.kind} --dtype {params.dtype} "
        "--device {params.device} {params.device_map} --batch-size {params.batch_size} --threads {threads} "
        "--top-k {params.top_k} --prepend-bos {params.bos} --random-init {params.random_init} "
        "--templates {input.templates:q} --lemmas {input.lemmas:q} --groups {params.groups} "
        "--n-chunks {params.n_chunks} {params.branches} --no-progress {params.nonfinite} "
        "--manifest {output.manifest:q} 2> {log:q}"


use rule infer as infer_no_simverb with:
    input:
        **_INFER_INPUT,
    output:
        **_INFER_OUTPUT,
    wildcard_constraints:
        model="|".join(re.escape(m) for m in MODELS if m not in SV_IN_INFER) or "(?!x)x",
