# SimVerb-3500 verb similarity (Gerz et al. 2016): verb vectors from every model (static input
# embedding and every layer), cosine per pair, Spearman's rho with bootstrap CIs per split,
# relation and rating range, and the join with the agreement module's per-lemma results.


rule simverb_score:
    """Config: models, simverb.source, simverb.split_sources, simverb.models, simverb.frames, simverb.multi_token,
    simverb.batch_size, inference.device, inference.threads"""
    input:
        data=PLAN.simverb.data(),
        splits=PLAN.simverb.split_files(),
        model=lambda wc: PLAN.simverb.local_model(wc.svmodel),
    output:
        sims=f"{PLAN.simverb.res}/{{svmodel}}/similarities.parquet",
        verbs=f"{PLAN.simverb.res}/{{svmodel}}/verbs.csv",
    params:
        model=lambda wc: PLAN.simverb.model_args(wc.svmodel),
        random_init=lambda wc: PLAN.simverb.random_init_option(wc.svmodel),
        splits=lambda wc, input: PLAN.simverb.split_args(list(input.splits)),
        version=lambda wc: PLAN.simverb.version(wc.svmodel),
        multi_token=PLAN.simverb.config["multi_token"],
        batch_size=PLAN.simverb.config["batch_size"],
        device=config["inference"]["device"],
        threads=config["inference"]["threads"],  # a change reruns the job (the command uses {threads})
    wildcard_constraints:
        svmodel=alternatives(PLAN.simverb.alone),  # the others: rule infer (models.smk)
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.gpu_resource(config["inference"]["gpus"], local=jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/score.log",
    shell:
        "verbeval simverb-score --data {input.data:q} {params.splits} {params.model} "
        "--random-init {params.random_init} --multi-token {params.multi_token} --batch-size {params.batch_size} --device {params.device} "
        "--threads {threads} --out {output.sims:q} --verbs {output.verbs:q} 2> {log:q}"


rule simverb_table:
    """Config: simverb.bins, simverb.bootstrap, simverb.formats"""
    input:
        sims=f"{PLAN.simverb.res}/{{svmodel}}/similarities.parquet",
        verbs=f"{PLAN.simverb.res}/{{svmodel}}/verbs.csv",
    output:
        csv=f"{PLAN.simverb.res}/{{svmodel}}/table.csv",
        md=f"{PLAN.simverb.res}/{{svmodel}}/table.md",
        tex=f"{PLAN.simverb.res}/{{svmodel}}/table.tex",
        layers_csv=f"{PLAN.simverb.res}/{{svmodel}}/simverb_layers.csv",
        metrics=f"{PLAN.simverb.res}/{{svmodel}}/metrics.json",
        layers=[report(f"{PLAN.simverb.res}/{{svmodel}}/layers.{ext}", caption="../report/simverb_layers.rst",
                       category="SimVerb-3500", subcategory="{svmodel}") if i == 0
                else f"{PLAN.simverb.res}/{{svmodel}}/layers.{ext}" for i, ext in enumerate(PLAN.simverb.config["formats"])],
        scatter=[report(f"{PLAN.simverb.res}/{{svmodel}}/scatter.{ext}", caption="../report/simverb_scatter.rst",
                        category="SimVerb-3500", subcategory="{svmodel}") if i == 0
                 else f"{PLAN.simverb.res}/{{svmodel}}/scatter.{ext}" for i, ext in enumerate(PLAN.simverb.config["formats"])],
    params:
        resamples=PLAN.simverb.config["bootstrap"]["resamples"],
        seed=PLAN.simverb.config["bootstrap"]["seed"],
        confidence=PLAN.simverb.config["bootstrap"]["confidence"],
        bins=",".join(f"{b:g}" for b in PLAN.simverb.config["bins"]),
        random_models=lambda wc: PLAN.simverb.random_models(wc.svmodel),  # named in the report captions
    wildcard_constraints:
        svmodel=alternatives(list(PLAN.simverb.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/table.log",
    shell:
        "verbeval simverb-table --similarities {input.sims:q} --verbs {input.verbs:q} --model-name {wildcards.svmodel} "
        "--resamples {params.resamples} --seed {params.seed} --confidence {params.confidence} --bins {params.bins} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --layers-csv {output.layers_csv:q} "
        "--metrics-json {output.metrics:q} --layers-figure {output.layers:q} --scatter-figure {output.scatter:q} 2> {log:q}"


rule simverb_page:
    input:
        f"{PLAN.simverb.res}/{{svmodel}}/table.csv",
    output:
        report(f"{PLAN.simverb.res}/{{svmodel}}/simverb_{{svmodel}}.html", caption="../report/simverb_table.rst",
               category="SimVerb-3500", subcategory="{svmodel}"),
    params:
        title=lambda wc: f"SimVerb-3500: Spearman rho per representation and subset ({wc.svmodel})",
        random_models=lambda wc: PLAN.simverb.random_models(wc.svmodel),  # named in the report caption
    wildcard_constraints:
        svmodel=alternatives(list(PLAN.simverb.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule simverb_join:
    """Config: simverb.agreement_join"""
    input:
        sims=f"{PLAN.simverb.res}/{{svmodel}}/similarities.parquet",
        stats=f"{PLAN.agreement_dir}/{{svmodel}}/lemma_stats.csv",
    output:
        joined=f"{PLAN.simverb.res}/{{svmodel}}/agreement_join.csv",
        summary=f"{PLAN.simverb.res}/{{svmodel}}/agreement_join_summary.csv",
    wildcard_constraints:
        svmodel=alternatives(PLAN.simverb.joined),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/simverb/{{svmodel}}/join.log",
    shell:
        "verbeval simverb-join --similarities {input.sims:q} --lemma-stats {input.stats:q} --model-name {wildcards.svmodel} "
        "--out {output.joined:q} --summary {output.summary:q} 2> {log:q}"


rule simverb_all:
    input:
        PLAN.simverb.outputs(),
