# Multi-token verb forms and lexicon modes (single_token / all / common): every lexicon form scored
# (chain rule for causal LMs, PLL-word-l2r for masked LMs), TSE/EW/MW at p = 1 in three modes.


include: "lexicon_modes_common.smk"


rule lexicon_forms:
    input:
        lexicon=f"{OUT}/lexicon.parquet",
        templates=f"{OUT}/templates.parquet",
        model=local_model_input,
    output:
        f"{LMOUT}/{{model}}/forms.parquet",
    params:
        model=model_param("id"),
        version=model_version,
        revision=revision_option,
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/lexicon_modes/{{model}}/forms.log",
    shell:
        "verbeval lexicon-forms --model {params.model:q} {params.revision} --lexicon {input.lexicon:q} "
        "--templates {input.templates:q} --out {output:q} 2> {log:q}"


rule lexicon_common:
    input:
        forms=expand(f"{LMOUT}/{{model}}/forms.parquet", model=MODELS),
    output:
        f"{LMOUT}/common.parquet",
    params:
        forms=" ".join(shlex.quote(f"{m}={LMOUT}/{m}/forms.parquet") for m in MODELS),
        random_models=RANDOM_MODELS,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/lexicon_modes/common.log",
    shell:
        "verbeval lexicon-common --forms {params.forms} --out {output:q} 2> {log:q}"


# the form shards (shard_manifest(LMOUT)) come from the model's one job, rule infer (models.smk)


rule lexicon_modes:
    input:
        forms=f"{LMOUT}/{{model}}/forms.parquet",
        common=f"{LMOUT}/common.parquet",
        manifest=shard_manifest(LMOUT),
        table2=expand(f"{OUT}/{{{{model}}}}/{{group}}/summary.csv", group=MT_GROUPS),
    output:
        summary=f"{LMOUT}/{{model}}/summary.csv",
        lemmas=f"{LMOUT}/{{model}}/lemmas.csv",
        diff=f"{LMOUT}/{{model}}/lemma_differences.csv",
        consistency=f"{LMOUT}/{{model}}/consistency.csv",
    params:
        resamples=AGR["bootstrap"]["resamples"],
        seed=AGR["bootstrap"]["seed"],
        confidence=AGR["bootstrap"]["confidence"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/lexicon_modes/{{model}}/modes.log",
    shell:
        "verbeval lexicon-modes --forms {input.forms:q} --common {input.common:q} --model-name {wildcards.model} "
        "--shards {input.manifest:q} --table2-summaries {input.table2:q} --resamples {params.resamples} --seed {params.seed} "
        "--confidence {params.confidence} --summary-out {output.summary:q} --lemmas-out {output.lemmas:q} "
        "--diff-out {output.diff:q} --consistency-out {output.consistency:q} 2> {log:q}"


rule lexicon_modes_table:
    input:
        summaries=expand(f"{LMOUT}/{{model}}/summary.csv", model=MODELS),
        diffs=expand(f"{LMOUT}/{{model}}/lemma_differences.csv", model=MODELS),
        consistency=expand(f"{LMOUT}/{{model}}/consistency.csv", model=MODELS),
        forms=expand(f"{LMOUT}/{{model}}/forms.parquet", model=MODELS),
        common=f"{LMOUT}/common.parquet",
        groups_file=RUN_GROUPS_FILE,
    output:
        csv=report(f"{LMOUT}/table.csv", caption="../report/lexicon_modes.rst", category="Agreement",
                   subcategory="Lexicon modes"),
        md=f"{LMOUT}/table.md",
        tex=f"{LMOUT}/table.tex",
        metrics=f"{LMOUT}/metrics.json",
        coverage=f"{LMOUT}/coverage.csv",
        diff=f"{LMOUT}/lemma_differences.csv",
    params:
        models=",".join(MODELS),
        mode=AGR["lexicon_mode"],
        forms=" ".join(shlex.quote(f"{m}={LMOUT}/{m}/forms.parquet") for m in MODELS),
        random_models=RANDOM_MODELS,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/lexicon_modes/table.log",
    shell:
        "verbeval lexicon-modes-table --groups-file {input.groups_file:q} --models {params.models} --mode {params.mode} "
        "--summaries {input.summaries:q} --diffs {input.diffs:q} --forms {params.forms} --common {input.common:q} "
        "--consistency {input.consistency:q} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} "
        "--metrics {output.metrics:q} --coverage {output.coverage:q} --diff-csv {output.diff:q} 2> {log:q}"
