# Verb veridicality (Ross & Pavlick 2019): NLI probabilities -> per-signature table and Figure 1;
# counterfactual manipulations (section 6.3) -> KL tables 7 and 8.
# `ross-pavlick-2019-bert` reads the BERT probabilities released with the dataset (no model is run);
# it has no probabilities for new sentences, so the counterfactual rules run for real models only.
# Each rule's settings and DVC params: verbeval.veridicality.steps; its outputs: PLAN.veridicality.rule_outputs.


rule veridicality_released:
    # the released probabilities of the pseudo-model: no model runs, so no GPU (a rule of its own)
    input:
        data=PLAN.veridicality.data(),
    output:
        **PLAN.veridicality.rule_outputs("veridicality_released"),
    wildcard_constraints:
        vmodel=alternatives(PLAN.veridicality.released),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/predict.log",
    shell:
        "verbeval veridicality-predict --data {input.data:q} --model {wildcards.vmodel} --out {output:q} 2> {log:q}"


rule veridicality_predict:
    # one job (one load) per real NLI model: the predictions and, with counterfactuals on, those of the
    # manipulated pairs; each output is flagged update and kept while its stamp shows it up to date
    input:
        data=PLAN.veridicality.data(),
        model=lambda wc: PLAN.veridicality.local_model(wc.vmodel),
        **({"pairs": PLAN.veridicality.pattern("pairs")} if PLAN.veridicality.counterfactuals_on else {}),
    output:
        **{k: update(v) for k, v in PLAN.veridicality.rule_outputs("veridicality_predict").items()},
    params:
        model=lambda wc: PLAN.veridicality.real[wc.vmodel],
        settings=PLAN.settings("veridicality-predict"),
        counterfactuals=lambda wc, input, output: PLAN.veridicality.counterfactual_options(input, output),
    wildcard_constraints:
        vmodel=alternatives(list(PLAN.veridicality.real)),
    threads: config["inference"]["threads"]
    resources:
        gpu=lambda wc: PLAN.gpu_resource(config["inference"]["gpus"], local=jobs_run_here(workflow)),
    conda:
        "../../envs/inference.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/predict.log",
    shell:
        "verbeval veridicality-predict --data {input.data:q} --model {params.model:q} {params.settings} "
        "--threads {threads} {params.counterfactuals} --out {output.predictions:q} 2> {log:q}"


rule veridicality_table:
    input:
        PLAN.veridicality.pattern("predictions"),
    output:
        **veridicality_reported("veridicality_table", figure="../report/veridicality_scatter.rst"),
    params:
        random_models=lambda wc: PLAN.veridicality.random_models(wc.vmodel),  # named in the report captions
    wildcard_constraints:
        vmodel=alternatives(list(PLAN.veridicality.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/table.log",
    shell:
        "verbeval veridicality-table --predictions {input:q} --model-name {wildcards.vmodel} --csv {output.csv:q} "
        "--md {output.md:q} --tex {output.tex:q} --scatter-csv {output.data:q} --figure {output.figure:q} 2> {log:q}"


rule veridicality_counterfactuals:
    input:
        PLAN.veridicality.data(),
    output:
        **PLAN.veridicality.rule_outputs("veridicality_counterfactuals"),
    params:
        settings=PLAN.settings("veridicality-counterfactuals"),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/counterfactuals.log",
    shell:
        "verbeval veridicality-counterfactuals --data {input:q} {params.settings} "
        "--pairs {output.pairs:q} --unhandled {output.unhandled:q} --coverage {output.coverage:q} 2> {log:q}"


# the counterfactual predictions come from rule veridicality_predict (the same load)


rule veridicality_kl:
    input:
        predictions=PLAN.veridicality.pattern("predictions"),
        counterfactuals=PLAN.veridicality.pattern("counterfactuals"),
    output:
        **PLAN.veridicality.rule_outputs("veridicality_kl"),
    wildcard_constraints:
        vmodel=alternatives(list(PLAN.veridicality.real)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/kl.log",
    shell:
        "verbeval veridicality-kl --predictions {input.predictions:q} --counterfactuals {input.counterfactuals:q} "
        "--model-name {wildcards.vmodel} --table7 {output.t7_csv:q} {output.t7_md:q} {output.t7_tex:q} "
        "--table8 {output.t8_csv:q} {output.t8_md:q} {output.t8_tex:q} 2> {log:q}"


# the report's pages of the tables above (verbeval report-table): the report shows these, not the CSV files


rule veridicality_page:
    input:
        PLAN.veridicality.pattern("csv"),
    output:
        **veridicality_reported("veridicality_page", page="../report/veridicality_signatures.rst"),
    params:
        title=lambda wc: f"Verb veridicality per signature, Ross & Pavlick 2019 ({wc.vmodel})",
        random_models=lambda wc: PLAN.veridicality.random_models(wc.vmodel),  # named in the report caption
    wildcard_constraints:
        vmodel=alternatives(list(PLAN.veridicality.models)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule veridicality_kl_pages:
    input:
        t7=PLAN.veridicality.pattern("t7_csv"),
        t8=PLAN.veridicality.pattern("t8_csv"),
    output:
        **veridicality_reported("veridicality_kl_pages", t7="../report/veridicality_kl_table7.rst",
                                t8="../report/veridicality_kl_table8.rst"),
    params:
        t7=lambda wc: f"Table 7 (reconstruction): KL divergence after replacing a verb ({wc.vmodel})",
        t8=lambda wc: f"Table 8 (reconstruction): KL divergence after swapping the complement type ({wc.vmodel})",
    wildcard_constraints:
        vmodel=alternatives(list(PLAN.veridicality.real)),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/kl_pages.log",
    shell:
        "verbeval report-table --csv {input.t7:q} {input.t8:q} --title {params.t7:q} {params.t8:q} "
        "--out {output.t7:q} {output.t8:q} 2> {log:q}"


rule veridicality_counterfactual_pages:
    input:
        unhandled=PLAN.veridicality.pattern("unhandled"),
        coverage=PLAN.veridicality.pattern("coverage"),
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
        f"{PLAN.logs}/veridicality/counterfactual_pages.log",
    shell:
        "verbeval report-table --csv {input.unhandled:q} {input.coverage:q} --title {params.unhandled:q} "
        "{params.coverage:q} --out {output.unhandled_page:q} {output.coverage_page:q} 2> {log:q}"
