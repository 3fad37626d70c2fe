# SimVerb-3500 verb similarity (Gerz et al. 2016): verb vectors from every model (static input
# embedding and every layer), cosine per pair, Spearman's rho with bootstrap CIs per split,
# relation and rating range, and the join with the agreement module's per-lemma results.


include: "simverb_common.smk"


rule simverb_score:
    input:
        data=raw_path(SV["source"]),
        splits=[raw_path(src) for src in SV_SPLITS.values()],
        model=simverb_local_model,
    output:
        sims=f"{SVRES}/{{svmodel}}/similarities.parquet",
        verbs=f"{SVRES}/{{svmodel}}/verbs.csv",
    params:
        model=simverb_model_args,
        random_init=simverb_random_init,
        splits=simverb_split_args,
        version=lambda wc: model_fingerprint(SVMODELS[wc.svmodel]["id"], SVMODELS[wc.svmodel]["revision"]),
        multi_token=SV["multi_token"],
        batch_size=SV["batch_size"],
        device=config["inference"]["device"],
        threads=config["inference"]["threads"],  # a change reruns the job (the command uses {threads})
    wildcard_constraints:
        svmodel="|".join(map(re.escape, SV_ALONE)) or "(?!x)x",  # the others: rule infer (models.smk)
    threads: config["inference"]["threads"]
    resources:
        gpu=config["inference"]["gpus"],
    conda:
        "../../envs/inference.yaml"
    log:
        f"{LOGS}/simverb/{{svmodel}}/score.log",
    shell:
        "verbeval simverb-score --data {input.data:q} {params.splits} {params.model} "
        "--random-init {params.random_init} --multi-token {params.multi_token} --batch-size {params.batch_size} --device {params.device} "
        "--threads {threads} --out {output.sims:q} --verbs {output.verbs:q} 2> {log:q}"


rule simverb_table:
    input:
        sims=f"{SVRES}/{{svmodel}}/similarities.parquet",
        verbs=f"{SVRES}/{{svmodel}}/verbs.csv",
    output:
        csv=report(f"{SVRES}/{{svmodel}}/table.csv", caption="../report/simverb_table.rst",
                   category="SimVerb-3500", subcategory="{svmodel}"),
        md=f"{SVRES}/{{svmodel}}/table.md",
        tex=f"{SVRES}/{{svmodel}}/table.tex",
        layers_csv=f"{SVRES}/{{svmodel}}/simverb_layers.csv",
        metrics=f"{SVRES}/{{svmodel}}/metrics.json",
        layers=[report(f"{SVRES}/{{svmodel}}/layers.{ext}", caption="../report/simverb_layers.rst",
                       category="SimVerb-3500", subcategory="{svmodel}") if i == 0
                else f"{SVRES}/{{svmodel}}/layers.{ext}" for i, ext in enumerate(SV["formats"])],
        scatter=[report(f"{SVRES}/{{svmodel}}/scatter.{ext}", caption="../report/simverb_scatter.rst",
                        category="SimVerb-3500", subcategory="{svmodel}") if i == 0
                 else f"{SVRES}/{{svmodel}}/scatter.{ext}" for i, ext in enumerate(SV["formats"])],
    params:
        resamples=SV["bootstrap"]["resamples"],
        seed=SV["bootstrap"]["seed"],
        confidence=SV["bootstrap"]["confidence"],
        bins=",".join(f"{b:g}" for b in SV["bins"]),
        random_models=simverb_random_models,  # named in the report captions
    wildcard_constraints:
        svmodel="|".join(map(re.escape, SVMODELS)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/simverb/{{svmodel}}/table.log",
    shell:
        "verbeval simverb-table --similarities {input.sims:q} --verbs {input.verbs:q} --model-name {wildcards.svmodel} "
        "--resamples {params.resamples} --seed {params.seed} --confidence {params.confidence} --bins {params.bins} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --layers-csv {output.layers_csv:q} "
        "--metrics-json {output.metrics:q} --layers-figure {output.layers:q} --scatter-figure {output.scatter:q} 2> {log:q}"


rule simverb_join:
    input:
        sims=f"{SVRES}/{{svmodel}}/similarities.parquet",
        stats=f"{OUT}/{{svmodel}}/lemma_stats.csv",
    output:
        joined=f"{SVRES}/{{svmodel}}/agreement_join.csv",
        summary=f"{SVRES}/{{svmodel}}/agreement_join_summary.csv",
    wildcard_constraints:
        svmodel="|".join(re.escape(n) for n, m in SVMODELS.items() if m["join"]) or "^$",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/simverb/{{svmodel}}/join.log",
    shell:
        "verbeval simverb-join --similarities {input.sims:q} --lemma-stats {input.stats:q} --model-name {wildcards.svmodel} "
        "--out {output.joined:q} --summary {output.summary:q} 2> {log:q}"


rule simverb_all:
    input:
        simverb_outputs(),
