# Verb veridicality (Ross & Pavlick 2019): NLI probabilities -> per-signature table and Figure 1.
# `ross-pavlick-2019-bert` reads the BERT probabilities released with the dataset (no model is run).


include: "veridicality_common.smk"


rule veridicality_predict:
    input:
        data=raw_path(VER["source"]),
        model=lambda wc: [VMODELS[wc.vmodel]] if is_local(VMODELS[wc.vmodel]) else [],
    output:
        f"{VRES}/{{vmodel}}/predictions.parquet",
    params:
        model=lambda wc: VMODELS[wc.vmodel],
        device=config["inference"]["device"],
        batch_size=VER["batch_size"],
    wildcard_constraints:
        vmodel="|".join(map(re.escape, VMODELS)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/veridicality/{{vmodel}}/predict.log",
    shell:
        "verbeval veridicality-predict --data {input.data} --model {params.model} --device {params.device} "
        "--batch-size {params.batch_size} --out {output} 2> {log}"


rule veridicality_table:
    input:
        f"{VRES}/{{vmodel}}/predictions.parquet",
    output:
        csv=f"{VRES}/{{vmodel}}/signatures.csv",
        md=f"{VRES}/{{vmodel}}/signatures.md",
        tex=f"{VRES}/{{vmodel}}/signatures.tex",
        figure=[f"{VRES}/{{vmodel}}/scatter.{ext}" for ext in VER["formats"]],
    wildcard_constraints:
        vmodel="|".join(map(re.escape, VMODELS)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/veridicality/{{vmodel}}/table.log",
    shell:
        "verbeval veridicality-table --predictions {input} --model-name {wildcards.vmodel} --csv {output.csv} "
        "--md {output.md} --tex {output.tex} --figure {output.figure} 2> {log}"
