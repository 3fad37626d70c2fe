# Verb veridicality (Ross & Pavlick 2019): NLI probabilities -> per-signature table and Figure 1;
# counterfactual manipulations (section 6.3) -> KL tables 7 and 8.
# `ross-pavlick-2019-bert` reads the BERT probabilities released with the dataset (no model is run);
# it has no probabilities for new sentences, so the counterfactual rules run for real models only.
# Each rule's settings and DVC params: verbeval.veridicality.steps; its files, params, log and wildcard
# constraints: its record, read by name (VER.<rule>: verbeval.workflow.studies.VeridicalityPlan.rules).
VER = PLAN.veridicality.rules


rule veridicality_released:
    # the released probabilities of the pseudo-model: no model runs, so no GPU (a rule of its own)
    input:
        **VER.veridicality_released.input,
    output:
        **VER.veridicality_released.output,
    wildcard_constraints:
        **VER.veridicality_released.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_released.log,
    shell:
        "verbeval veridicality-predict --data {input.data:q} --model {wildcards.vmodel} --out {output:q} 2> {log:q}"


rule veridicality_predict:
    # one job (one load) per real NLI model: the predictions and, with counterfactuals on, those of the
    # manipulated pairs; each output is flagged update and kept while its stamp shows it up to date
    input:
        **VER.veridicality_predict.input,
    output:
        **{k: update(v) for k, v in VER.veridicality_predict.output.items()},
    params:
        **VER.veridicality_predict.params,
    wildcard_constraints:
        **VER.veridicality_predict.constraints,
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.gpu_resource(config["inference"]["gpus"], local=jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        VER.veridicality_predict.log,
    shell:
        "verbeval veridicality-predict --data {input.data:q} --model {params.model:q} {params.settings} "
        "--threads {threads} {params.counterfactuals} --out {output.predictions:q} 2> {log:q}"


rule veridicality_table:
    input:
        VER.veridicality_table.input,
    output:
        **veridicality_reported("veridicality_table", figure="../report/veridicality_scatter.rst"),
    params:
        **VER.veridicality_table.params,  # random_models: named in the report captions
    wildcard_constraints:
        **VER.veridicality_table.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_table.log,
    shell:
        "verbeval veridicality-table --predictions {input:q} --model-name {wildcards.vmodel} --csv {output.csv:q} "
        "--md {output.md:q} --tex {output.tex:q} --scatter-csv {output.data:q} --figure {output.figure:q} 2> {log:q}"


rule veridicality_counterfactuals:
    input:
        VER.veridicality_counterfactuals.input,
    output:
        **VER.veridicality_counterfactuals.output,
    params:
        **VER.veridicality_counterfactuals.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_counterfactuals.log,
    shell:
        "verbeval veridicality-counterfactuals --data {input:q} {params.settings} "
        "--pairs {output.pairs:q} --unhandled {output.unhandled:q} --coverage {output.coverage:q} 2> {log:q}"


# the counterfactual predictions come from rule veridicality_predict (the same load)


rule veridicality_kl:
    input:
        **VER.veridicality_kl.input,
    output:
        **VER.veridicality_kl.output,
    wildcard_constraints:
        **VER.veridicality_kl.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_kl.log,
    shell:
        "verbeval veridicality-kl --predictions {input.predictions:q} --counterfactuals {input.counterfactuals:q} "
        "--model-name {wildcards.vmodel} --table7 {output.t7_csv:q} {output.t7_md:q} {output.t7_tex:q} "
        "--table8 {output.t8_csv:q} {output.t8_md:q} {output.t8_tex:q} 2> {log:q}"


# the report's pages of the tables above (verbeval report-table): the report shows these, not the CSV files


rule veridicality_page:
    input:
        VER.veridicality_page.input,
    output:
        **veridicality_reported("veridicality_page", page="../report/veridicality_signatures.rst"),
    params:
        title=lambda wc: f"Verb veridicality per signature, Ross & Pavlick 2019 ({wc.vmodel})",
        **VER.veridicality_page.params,  # random_models: named in the report caption
    wildcard_constraints:
        **VER.veridicality_page.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_page.log,
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule veridicality_kl_pages:
    input:
        **VER.veridicality_kl_pages.input,
    output:
        **veridicality_reported("veridicality_kl_pages", t7="../report/veridicality_kl_table7.rst",
                                t8="../report/veridicality_kl_table8.rst"),
    params:
        t7=lambda wc: f"Table 7 (reconstruction): KL divergence after replacing a verb ({wc.vmodel})",
        t8=lambda wc: f"Table 8 (reconstruction): KL divergence after swapping the complement type ({wc.vmodel})",
    wildcard_constraints:
        **VER.veridicality_kl_pages.constraints,
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_kl_pages.log,
    shell:
        "verbeval report-table --csv {input.t7:q} {input.t8:q} --title {params.t7:q} {params.t8:q} "
        "--out {output.t7:q} {output.t8:q} 2> {log:q}"


rule veridicality_counterfactual_pages:
    input:
        **VER.veridicality_counterfactual_pages.input,
    output:
        **veridicality_reported("veridicality_counterfactual_pages", "Counterfactuals",
                                unhandled_page="../report/veridicality_unhandled.rst",
                                coverage_page="../report/veridicality_coverage.rst"),
    params:
        unhandled="Counterfactuals: sentences a manipulation cannot handle",
        coverage="Counterfactuals: coverage",
    conda:
        "../../envs/verbeval.yaml"
    log:
        VER.veridicality_counterfactual_pages.log,
    shell:
        "verbeval report-table --csv {input.unhandled:q} {input.coverage:q} --title {params.unhandled:q} "
        "{params.coverage:q} --out {output.unhandled_page:q} {output.coverage_page:q} 2> {log:q}"
