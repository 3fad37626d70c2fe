# Agreement (Newman et al. 2021): templates -> lexicon -> eligible lemmas -> shards -> scores -> Table 2.


rule lexicon:
    """Config: agreement.verb_lists, agreement.inflection_overrides"""
    input:
        lists=[PLAN.raw_path(s) for s in PLAN.agr["verb_lists"]],
        overrides=PLAN.agr["inflection_overrides"],
    output:
        f"{PLAN.out}/lexicon.parquet",
    params:
        manifest=PLAN.manifest_param,  # formats only: no rerun trigger
        inputs=PLAN.source_inputs(PLAN.agr["verb_lists"]),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/lexicon.log",
    shell:
        "verbeval lexicon --manifest {params.manifest:q} {params.inputs} --overrides {input.overrides:q} "
        "--out {output:q} 2> {log:q}"


rule templates:
    """Config: agreement.groups, agreement.custom_groups, agreement.groups_file, agreement.max_rows_per_source,
    agreement.skip_bad_rows, agreement.errata, agreement.drop_flagged_errata"""
    input:
        sources=[PLAN.raw_path(s) for s in PLAN.template_sources],
        groups_file=PLAN.agr["groups_file"],
        errata=PLAN.agr["errata"],
        custom=[str(g.path) for g in PLAN.custom_groups],
    output:
        table=f"{PLAN.out}/templates.parquet",
        rejects=f"{PLAN.out}/template_rejects.csv",
        groups=PLAN.run_groups_file,
    params:
        **PLAN.templates_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/templates.log",
    shell:
        "verbeval templates --manifest {params.manifest:q} --groups-file {input.groups_file:q} {params.groups} "
        "--errata {input.errata:q} {params.inputs} {params.custom} {params.skip} {params.drop} {params.limit} "
        "--out {output.table:q} --rejects {output.rejects:q} --groups-out {output.groups:q} 2> {log:q}"


rule lemmas:
    """Config: models"""
    input:
        lexicon=f"{PLAN.out}/lexicon.parquet",
        model=lambda wc: PLAN.model.local_model(wc.model),
    output:
        f"{PLAN.out}/{{model}}/lemmas.parquet",
    wildcard_constraints:
        model=alternatives(PLAN.queues.lemma_rule_models()),  # a sweep queue's revisions: their queue_N job
    params:
        model=lambda wc: PLAN.models[wc.model]["id"],
        version=lambda wc: PLAN.model.version(wc.model),
        revision=lambda wc: PLAN.model.source_options(wc.model),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/{{model}}/lemmas.log",
    shell:
        "verbeval lemmas --model {params.model:q} {params.revision} --lexicon {input.lexicon:q} --out {output:q} 2> {log:q}"


# rule infer (the model's one job: agreement shards and its other accelerator branches): models.smk


rule aggregate:
    """Config: agreement.groups, agreement.custom_groups, agreement.top_cutoffs, agreement.bottom_cutoffs,
    agreement.bootstrap"""
    input:
        templates=f"{PLAN.out}/templates.parquet",
        manifest=PLAN.shard_manifest(PLAN.out),
    output:
        scores=PLAN.per_group(f"{PLAN.out}/{{model}}/{{group}}/scores.parquet"),
        tse=PLAN.per_group(f"{PLAN.out}/{{model}}/{{group}}/tse.parquet"),
        summary=PLAN.per_group(f"{PLAN.out}/{{model}}/{{group}}/summary.csv"),
    wildcard_constraints:
        model=alternatives(PLAN.queues.unqueued()),  # a queued model: its queue_N job (queues.smk)
    params:
        groups=",".join(PLAN.group_ids),
        out_dir=lambda wc: f"{PLAN.out}/{wc.model}",
        top=PLAN.cutoffs("top_cutoffs"),
        bottom=PLAN.cutoffs("bottom_cutoffs"),
        resamples=PLAN.agr["bootstrap"]["resamples"],
        seed=PLAN.agr["bootstrap"]["seed"],
        confidence=PLAN.agr["bootstrap"]["confidence"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/{{model}}/aggregate.log",
    shell:
        "verbeval aggregate --templates {input.templates:q} --groups {params.groups} --model-name {wildcards.model} "
        "--manifest {input.manifest:q} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--resamples {params.resamples} --seed {params.seed} --confidence {params.confidence} "
        "--out-dir {params.out_dir:q} 2> {log:q}"


rule table2:
    """Config: models, agreement.groups, agreement.custom_groups, agreement.errata, agreement.drop_flagged_errata,
    agreement.bootstrap.confidence, agreement.table_models"""
    input:
        summaries=[f for m in PLAN.models for f in PLAN.per_group(f"{PLAN.out}/{m}/{{group}}/summary.csv")],
        groups_file=PLAN.run_groups_file,
        errata=PLAN.agr["errata"],
        templates=f"{PLAN.out}/templates.parquet",
    output:
        csv=f"{PLAN.out}/table2.csv",
        md=f"{PLAN.out}/table2.md",
        tex=f"{PLAN.out}/table2.tex",
        html=report(f"{PLAN.out}/table2.html", caption="../report/table2.rst", category="Agreement",
                    subcategory="Tables"),
        all_csv=f"{PLAN.out}/summary_all.csv",
        metrics=f"{PLAN.out}/metrics.json",
    params:
        **PLAN.table2_params(),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/table2.log",
    shell:
        "verbeval table --groups-file {input.groups_file:q} --models {params.models} {params.table_models} "
        "--summaries {input.summaries:q} "
        "--errata {input.errata:q} --templates {input.templates:q} {params.drop} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --html {output.html:q} "
        "--confidence {params.confidence} --all-csv {output.all_csv:q} "
        "--metrics {output.metrics:q} 2> {log:q}"
