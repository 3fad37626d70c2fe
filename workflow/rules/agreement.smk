# Agreement (Newman et al. 2021): templates -> lexicon -> eligible lemmas -> shards -> scores -> Table 2.


rule lexicon:
    input:
        lists=[raw_path(s) for s in AGR["verb_lists"]],
        overrides=AGR["inflection_overrides"],
    output:
        f"{OUT}/lexicon.parquet",
    params:
        manifest=config["manifest"],
        inputs=" ".join(f"--input {s}={raw_path(s)}" for s in AGR["verb_lists"]),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/lexicon.log",
    shell:
        "verbeval lexicon --manifest {params.manifest} {params.inputs} --overrides {input.overrides} "
        "--out {output} 2> {log}"


rule templates:
    input:
        sources=[raw_path(s) for g in GROUPS for s in g["sources"]],
        groups_file=AGR["groups_file"],
        errata=AGR["errata"],
    output:
        table=f"{OUT}/templates.parquet",
        rejects=f"{OUT}/template_rejects.csv",
    params:
        manifest=config["manifest"],
        inputs=" ".join(f"--input {s}={raw_path(s)}" for g in GROUPS for s in g["sources"]),
        groups=",".join(GROUP_IDS),
        skip="--skip-bad-rows" if AGR["skip_bad_rows"] else "",
        drop="--drop-flagged-errata" if AGR["drop_flagged_errata"] else "",
        limit=f"--max-rows-per-source {AGR['max_rows_per_source']}" if AGR["max_rows_per_source"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/templates.log",
    shell:
        "verbeval templates --manifest {params.manifest} --groups-file {input.groups_file} --groups {params.groups} "
        "--errata {input.errata} {params.inputs} {params.skip} {params.drop} {params.limit} --out {output.table} --rejects {output.rejects} 2> {log}"


rule lemmas:
    input:
        lexicon=f"{OUT}/lexicon.parquet",
        model=local_model_input,
    output:
        f"{OUT}/{{model}}/lemmas.parquet",
    params:
        model=model_param("id"),
        version=model_version,
        revision=lambda wc: f"--revision {MODELS[wc.model]['revision']}" if MODELS[wc.model]["revision"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/lemmas.log",
    shell:
        "verbeval lemmas --model {params.model} {params.revision} --lexicon {input.lexicon} --out {output} 2> {log}"


rule infer:
    input:
        templates=f"{OUT}/templates.parquet",
        lemmas=f"{OUT}/{{model}}/lemmas.parquet",
        model=local_model_input,
    output:
        f"{OUT}/{{model}}/shards/{{group}}/{{chunk}}.parquet",
    params:
        model=model_param("id"),
        version=model_version,
        revision=lambda wc: f"--revision {MODELS[wc.model]['revision']}" if MODELS[wc.model]["revision"] else "",
        kind=model_param("kind"),
        dtype=model_param("dtype"),
        batch_size=model_param("batch_size"),
        bos=lambda wc: "auto" if MODELS[wc.model]["prepend_bos"] is None else str(MODELS[wc.model]["prepend_bos"]).lower(),
        device=config["inference"]["device"],
        top_k=config["inference"]["top_k"],
        chunk=lambda wc: int(wc.chunk.split("-of-")[0]) - 1,
        n_chunks=AGR["chunks"],
    threads: config["inference"]["threads"]
    resources:
        gpu=1,
    conda:
        "../../envs/inference.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/infer/{{group}}/{{chunk}}.log",
    shell:
        "verbeval infer --model {params.model} {params.revision} --kind {params.kind} --dtype {params.dtype} "
        "--device {params.device} --batch-size {params.batch_size} --threads {threads} --top-k {params.top_k} "
        "--prepend-bos {params.bos} --templates {input.templates} --lemmas {input.lemmas} --group {wildcards.group} "
        "--chunk {params.chunk} --n-chunks {params.n_chunks} --out {output} 2> {log}"


rule aggregate:
    input:
        templates=f"{OUT}/templates.parquet",
        shards=expand(f"{OUT}/{{{{model}}}}/shards/{{{{group}}}}/{{chunk}}.parquet", chunk=CHUNKS),
    output:
        scores=f"{OUT}/{{model}}/{{group}}/scores.parquet",
        tse=f"{OUT}/{{model}}/{{group}}/tse.parquet",
        summary=f"{OUT}/{{model}}/{{group}}/summary.csv",
    params:
        top=cutoffs("top_cutoffs"),
        bottom=cutoffs("bottom_cutoffs"),
        resamples=AGR["bootstrap"]["resamples"],
        seed=AGR["bootstrap"]["seed"],
        confidence=AGR["bootstrap"]["confidence"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/{{model}}/aggregate/{{group}}.log",
    shell:
        "verbeval aggregate --templates {input.templates} --group {wildcards.group} --model-name {wildcards.model} "
        "--shards {input.shards} --top-cutoffs {params.top} --bottom-cutoffs {params.bottom} "
        "--resamples {params.resamples} --seed {params.seed} --confidence {params.confidence} "
        "--scores-out {output.scores} --tse-out {output.tse} --summary-out {output.summary} 2> {log}"


rule table2:
    input:
        summaries=expand(f"{OUT}/{{model}}/{{group}}/summary.csv", model=MODELS, group=GROUP_IDS),
        groups_file=AGR["groups_file"],
        errata=AGR["errata"],
        templates=f"{OUT}/templates.parquet",
    output:
        csv=f"{OUT}/table2.csv",
        md=f"{OUT}/table2.md",
        tex=f"{OUT}/table2.tex",
        all_csv=f"{OUT}/summary_all.csv",
        metrics=f"{OUT}/metrics.json",
    params:
        models=",".join(MODELS),
        drop="--drop-flagged-errata" if AGR["drop_flagged_errata"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/agreement/table2.log",
    shell:
        "verbeval table --groups-file {input.groups_file} --models {params.models} --summaries {input.summaries} "
        "--errata {input.errata} --templates {input.templates} {params.drop} "
        "--csv {output.csv} --md {output.md} --tex {output.tex} --all-csv {output.all_csv} "
        "--metrics {output.metrics} 2> {log}"
