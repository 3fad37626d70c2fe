# Multi-token verb forms and lexicon modes (single_token / all / common): every lexicon form scored
# (chain rule for causal LMs, PLL-word-l2r for masked LMs), TSE/EW/MW at p = 1 in three modes.
# Each rule's files, params and log: its record, read by name (LM.<rule>: verbeval.workflow.lexicon_modes).
LM = PLAN.lexicon_modes.rules


rule lexicon_forms:
    input:
        **LM.lexicon_forms.input,
    output:
        **LM.lexicon_forms.output,
    params:
        **LM.lexicon_forms.params,  # version: a rerun trigger, the model's files or commit
    conda:
        "../../envs/verbeval.yaml"
    log:
        LM.lexicon_forms.log,
    shell:
        "verbeval lexicon-forms --model {params.model:q} {params.revision} --lexicon {input.lexicon:q} "
        "--templates {input.templates:q} --out {output.forms:q} 2> {log:q}"


rule lexicon_common:
    input:
        **LM.lexicon_common.input,
    output:
        **LM.lexicon_common.output,
    params:
        **LM.lexicon_common.params,  # random_models: named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        LM.lexicon_common.log,
    shell:
        "verbeval lexicon-common --forms {params.forms} --out {output.common:q} 2> {log:q}"


# the form shards (its input manifest) come from the model's one job, rule infer (models.smk)


rule lexicon_modes:
    input:
        **LM.lexicon_modes.input,
    output:
        **LM.lexicon_modes.output,
    params:
        **LM.lexicon_modes.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        LM.lexicon_modes.log,
    shell:
        "verbeval lexicon-modes --forms {input.forms:q} --common {input.common:q} --model-name {wildcards.model} "
        "--shards {input.manifest:q} --table2-summaries {input.table2:q} {params.settings} "
        "--summary-out {output.summary:q} --lemmas-out {output.lemmas:q} "
        "--diff-out {output.diff:q} --consistency-out {output.consistency:q} 2> {log:q}"


rule lexicon_modes_table:
    input:
        **LM.lexicon_modes_table.input,
    output:
        **LM.lexicon_modes_table.output,
    params:
        **LM.lexicon_modes_table.params,  # random_models: named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        LM.lexicon_modes_table.log,
    shell:
        "verbeval lexicon-modes-table --groups-file {input.groups_file:q} --models {params.models} {params.settings} "
        "--summaries {input.summaries:q} --diffs {input.diffs:q} --forms {params.forms} --common {input.common:q} "
        "--consistency {input.consistency:q} --csv {output.csv:q} --md {output.md:q} --tex {output.tex:q} "
        "--metrics {output.metrics:q} --coverage {output.coverage:q} --diff-csv {output.diff:q} 2> {log:q}"


rule lexicon_modes_page:
    input:
        LM.lexicon_modes_page.input,
    output:
        html=report(LM.lexicon_modes_page.output["html"], caption="../report/lexicon_modes.rst", category="Agreement",
                    subcategory="Lexicon modes"),
    params:
        title="Agreement scores in three lexicon modes",
        **LM.lexicon_modes_page.params,  # random_models: named in the report caption
    conda:
        "../../envs/verbeval.yaml"
    log:
        LM.lexicon_modes_page.log,
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"
