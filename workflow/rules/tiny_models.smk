# Tiny randomly initialised models that the workflow builds itself (config key `tiny_models`; the
# quick start, config/quick.yaml). A model, veridicality or SimVerb entry whose id is one of these
# folders depends on this rule's output, so the model is built before any job loads it.


TINY = PLAN.model.rules.tiny_model  # its files, params, log and wildcard constraints, read by name


rule tiny_model:
    input:
        TINY.input,
    output:
        directory(TINY.output),
    wildcard_constraints:
        **TINY.constraints,
    params:
        **TINY.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        TINY.log,
    shell:
        "verbeval tiny-model {params.source} --arch {params.arch} --seed {params.seed} --layers {params.layers} "
        "--hidden {params.hidden} --out {output:q} 2> {log:q}"
