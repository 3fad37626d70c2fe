# Tiny randomly initialised models that the workflow builds itself (config key `tiny_models`; the
# quick start, config/quick.yaml). A model, veridicality or SimVerb entry whose id is one of these
# folders depends on this rule's output, so the model is built before any job loads it.


rule tiny_model:
    input:
        lambda wc: PLAN.model.tiny_inputs(wc.tiny),
    output:
        directory("{tiny}"),
    wildcard_constraints:
        tiny=alternatives(list(PLAN.model.tiny)),
    params:
        source=lambda wc, input: PLAN.model.tiny_source(wc.tiny, list(input)),
        arch=lambda wc: PLAN.model.tiny[wc.tiny]["arch"],
        seed=lambda wc: PLAN.model.tiny[wc.tiny]["seed"],
        layers=lambda wc: PLAN.model.tiny[wc.tiny]["layers"],
        hidden=lambda wc: PLAN.model.tiny[wc.tiny]["hidden"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/tiny_models/{{tiny}}.log",
    shell:
        "verbeval tiny-model {params.source} --arch {params.arch} --seed {params.seed} --layers {params.layers} "
        "--hidden {params.hidden} --out {output:q} 2> {log:q}"
