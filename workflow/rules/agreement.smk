# Agreement (Newman et al. 2021): templates -> lexicon -> eligible lemmas -> shards -> scores -> Table 2.


rule lexicon:
    input:
        lists=[raw_path(s) for s in AGR["verb_lists"]],
        overrides=AGR["inflection_overrides"],
    output:
        f"{OUT}/lexicon.parquet",
    params:
        manifest=Untracked(config["manifest"]),  # formats only: no rerun trigger
        inputs=" ".join(shlex.quote(f"--input={s}={raw_path(s)}") for s in AGR["verb_lists"]),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/lexicon.log",
    shell:
        "verbeval lexicon --manifest {params.manifest:q} {params.inputs} --overrides {input.overrides:q} "
        "--out {output:q} 2> {log:q}"


rule templates:
    input:
        sources=[raw_path(s) for g in GROUPS for s in g["sources"]],
        groups_file=AGR["groups_file"],
        errata=AGR["errata"],
        custom=[str(g.path) for g in CUSTOM_GROUPS],
    output:
        table=f"{OUT}/templates.parquet",
        rejects=f"{OUT}/template_rejects.csv",
        groups=RUN_GROUPS_FILE,
    params:
        manifest=Untracked(config["manifest"]),  # formats only: no rerun trigger
        inputs=" ".join(shlex.quote(f"--input={s}={raw_path(s)}") for g in GROUPS for s in g["sources"]),
        groups=shlex.quote("--groups=" + ",".join(g["id"] for g in GROUPS)),  # empty: custom groups only
        custom=custom_group_options(CUSTOM_GROUPS),
        skip="--skip-bad-rows" if AGR["skip_bad_rows"] else "",
        drop="--drop-flagged-errata" if AGR["drop_flagged_errata"] else "",
        limit=f"--max-rows-per-source {AGR['max_rows_per_source']}" if AGR["max_rows_per_source"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/templates.log",
    shell:
        "verbeval templates --manifest {params.manifest:q} --groups-file {input.groups_file:q} {params.groups} "
        "--errata {input.errata:q} {params.inputs} {params.custom} {params.skip} {params.drop} {params.limit} "
        "--out {output.table:q} --rejects {output.rejects:q} --groups-out {output.groups:q} 2> {log:q}"


rule lemmas:
    input:
        lexicon=f"{OUT}/lexicon.parquet",
        model=local_model_input,
    output:
        f"{OUT}/{{model}}/lemmas.parquet",
    params:
        model=model_param("id"),
        version=model_version,
        revision=revision_option,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/lemmas.log",
    shell:
        "verbeval lemmas --model {params.model:q} {params.revision} --lexicon {input.lexicon:q} --out {output:q} 2> {log:q}"


# rule infer (the model's one job: agreement shards and its other accelerator branches): models.smk


rule aggregate:
    input:
        templates=f"{OUT}/templates.parquet",
        manifest=shard_manifest(OUT),
    output:
        scores=expand(f"{OUT}/{{{{model}}}}/{{group}}/scores.parquet", group=GROUP_IDS),
        tse=expand(f"{OUT}/{{{{model}}}}/{{group}}/tse.parquet", group=GROUP_IDS),
        summary=expand(f"{OUT}/{{{{model}}}}/{{group}}/summary.csv", group=GROUP_IDS),
    params:
        groups=",".join(GROUP_IDS),
        out_dir=lambda wc: f"{OUT}/{wc.model}",
        top=cutoffs("top_cutoffs"),
        bottom=cutoffs("bottom_cutoffs"),
        resamples=AGR["bootstrap"]["resamples"],
        seed=AGR["bootstrap"]["seed"],
        confidence=AGR["bootstrap"]["confidence"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/aggregate.log",
    shell:
        "verbeval aggregate --templates {input.templates:q} --groups {params.groups} --model-name {wildcards.model} "
        "--manifest {input.manifest:q} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--resamples {params.resamples} --seed {params.seed} --confidence {params.confidence} "
        "--out-dir {params.out_dir:q} 2> {log:q}"


rule table2:
    input:
        summaries=expand(f"{OUT}/{{model}}/{{group}}/summary.csv", model=MODELS, group=GROUP_IDS),
        groups_file=RUN_GROUPS_FILE,
        errata=AGR["errata"],
        templates=f"{OUT}/templates.parquet",
    output:
        csv=f"{OUT}/table2.csv",
        md=f"{OUT}/table2.md",
        tex=f"{OUT}/table2.tex",
        html=report(f"{OUT}/table2.html", caption="../report/table2.rst", category="Agreement", subcategory="Tables"),
        all_csv=f"{OUT}/summary_all.csv",
        metrics=f"{OUT}/metrics.json",
    params:
        models=",".join(MODELS),
        table_models=f"--table-models {','.join(TABLE_MODELS)}" if TABLE_MODELS != list(MODELS) else "",
        drop="--drop-flagged-errata" if AGR["drop_flagged_errata"] else "",
        confidence=AGR["bootstrap"]["confidence"],
        random_models=RANDOM_MODELS,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/table2.log",
    shell:
        "verbeval table --groups-file {input.groups_file:q} --models {params.models} {params.table_models} "
        "--summaries {input.summaries:q} "
        "--errata {input.errata:q} --templates {input.templates:q} {params.drop} "
        "--csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} --html {output.html:q} "
        "--confidence {params.confidence} --all-csv {output.all_csv:q} "
        "--metrics {output.metrics:q} 2> {log:q}"
