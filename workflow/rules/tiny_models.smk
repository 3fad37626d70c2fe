# Tiny randomly initialised models that the workflow builds itself (config key `tiny_models`; the
# quick start, config/quick.yaml). A model, veridicality or SimVerb entry whose id is one of these
# folders depends on this rule's output, so the model is built before any job loads it.
include: "tiny_models_common.smk"


rule tiny_model:
    input:
        tiny_model_inputs,
    output:
        directory("{tiny}"),
    wildcard_constraints:
        tiny="|".join(map(re.escape, TINY)) or "(?!x)x",
    params:
        source=tiny_model_source,
        arch=lambda wc: TINY[wc.tiny]["arch"],
        seed=lambda wc: TINY[wc.tiny]["seed"],
        layers=lambda wc: TINY[wc.tiny]["layers"],
        hidden=lambda wc: TINY[wc.tiny]["hidden"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/tiny_models/{{tiny}}.log",
    shell:
        "verbeval tiny-model {params.source} --arch {params.arch} --seed {params.seed} --layers {params.layers} "
        "--hidden {params.hidden} --out {output:q} 2> {log:q}"
