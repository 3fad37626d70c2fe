# Multi-token verb forms and lexicon modes (single_token / all / common): every lexicon form scored
# (chain rule for causal LMs, PLL-word-l2r for masked LMs), TSE/EW/MW at p = 1 in three modes.


rule lexicon_forms:
    input:
        lexicon=f"{PLAN.agreement_dir}/lexicon.parquet",
        templates=f"{PLAN.agreement_dir}/templates.parquet",
        model=lambda wc: PLAN.model.local_model(wc.model),
    output:
        **PLAN.lexicon_modes_rule_outputs("lexicon_forms"),
    params:
        model=lambda wc: PLAN.models[wc.model]["id"],
        version=lambda wc: PLAN.model.version(wc.model),
        revision=lambda wc: PLAN.model.source_options(wc.model),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/lexicon_modes/{{model}}/forms.log",
    shell:
        "verbeval lexicon-forms --model {params.model:q} {params.revision} --lexicon {input.lexicon:q} "
        "--templates {input.templates:q} --out {output.forms:q} 2> {log:q}"


rule lexicon_common:
    input:
        forms=PLAN.per_model(f"{PLAN.lexicon_modes_dir}/{{model}}/forms.parquet"),
    output:
        **PLAN.lexicon_modes_rule_outputs("lexicon_common"),
    params:
        forms=PLAN.forms_options(),
        random_models=PLAN.model.random_models,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/lexicon_modes/common.log",
    shell:
        "verbeval lexicon-common --forms {params.forms} --out {output.common:q} 2> {log:q}"


# the form shards (shard_manifest(LMOUT)) come from the model's one job, rule infer (models.smk)


rule lexicon_modes:
    input:
        forms=f"{PLAN.lexicon_modes_dir}/{{model}}/forms.parquet",
        common=f"{PLAN.lexicon_modes_dir}/common.parquet",
        manifest=PLAN.shard_manifest(PLAN.lexicon_modes_dir),
        table2=PLAN.per_group(f"{PLAN.agreement_dir}/{{model}}/{{group}}/summary.csv", PLAN.multitoken_groups),
    output:
        **PLAN.lexicon_modes_rule_outputs("lexicon_modes"),
    params:
        settings=PLAN.settings("lexicon-modes"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/lexicon_modes/{{model}}/modes.log",
    shell:
        "verbeval lexicon-modes --forms {input.forms:q} --common {input.common:q} --model-name {wildcards.model} "
        "--shards {input.manifest:q} --table2-summaries {input.table2:q} {params.settings} "
        "--summary-out {output.summary:q} --lemmas-out {output.lemmas:q} "
        "--diff-out {output.diff:q} --consistency-out {output.consistency:q} 2> {log:q}"


rule lexicon_modes_table:
    input:
        summaries=PLAN.per_model(f"{PLAN.lexicon_modes_dir}/{{model}}/summary.csv"),
        diffs=PLAN.per_model(f"{PLAN.lexicon_modes_dir}/{{model}}/lemma_differences.csv"),
        consistency=PLAN.per_model(f"{PLAN.lexicon_modes_dir}/{{model}}/consistency.csv"),
        forms=PLAN.per_model(f"{PLAN.lexicon_modes_dir}/{{model}}/forms.parquet"),
        common=f"{PLAN.lexicon_modes_dir}/common.parquet",
        groups_file=PLAN.run_groups_file,
    output:
        **PLAN.lexicon_modes_rule_outputs("lexicon_modes_table"),
    params:
        models=",".join(PLAN.models),
        settings=PLAN.settings("lexicon-modes-table"),
        forms=PLAN.forms_options(),
        random_models=PLAN.model.random_models,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/lexicon_modes/table.log",
    shell:
        "verbeval lexicon-modes-table --groups-file {input.groups_file:q} --models {params.models} {params.settings} "
        "--summaries {input.summaries:q} --diffs {input.diffs:q} --forms {params.forms} --common {input.common:q} "
        "--consistency {input.consistency:q} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} "
        "--metrics {output.metrics:q} --coverage {output.coverage:q} --diff-csv {output.diff:q} 2> {log:q}"


rule lexicon_modes_page:
    input:
        f"{PLAN.lexicon_modes_dir}/table.csv",
    output:
        **PLAN.lexicon_modes_rule_outputs(
            "lexicon_modes_page",
            html=lambda file: report(
                file, caption="../report/lexicon_modes.rst", category="Agreement", subcategory="Lexicon modes"
            ),
        ),
    params:
        title="Agreement scores in three lexicon modes",
        random_models=PLAN.model.random_models,  # named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/lexicon_modes/page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"
