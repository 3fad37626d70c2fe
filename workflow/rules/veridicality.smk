# Verb veridicality (Ross & Pavlick 2019): NLI probabilities -> per-signature table and Figure 1;
# counterfactual manipulations (section 6.3) -> KL tables 7 and 8.
# `ross-pavlick-2019-bert` reads the BERT probabilities released with the dataset (no model is run);
# it has no probabilities for new sentences, so the counterfactual rules run for real models only.


rule veridicality_released:
    """Config: veridicality.source"""
    # the released probabilities of the pseudo-model: no model runs, so no GPU (a rule of its own)
    input:
        data=PLAN.veridicality.data(),
    output:
        f"{PLAN.veridicality.res}/{{vmodel}}/predictions.parquet",
    wildcard_constraints:
        vmodel=alternatives(PLAN.veridicality.released),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/{{vmodel}}/predict.log",
    shell:
        "verbeval veridicality-predict --data {input.data:q} --model {wildcards.vmodel} --out {output:q} 2> {log:q}"


rule veridicality_predict:
    """Config: veridicality.source, veridicality.models, veridicality.batch_size, veridicality.counterfactual,
    inference.device"""
    # one job (one load) per real NLI model: the predictions and, with counterfactuals on, those of the
    # manipulated pairs; each output is flagged update and kept while its stamp shows it up to date
    input:
        data=PLAN.veridicality.data(),
        model=lambda wc: PLAN.veridicality.local_model(wc.vmodel),
        **({"pairs": f"{PLAN.veridicality.res}/counterfactuals/pairs.parquet"} if PLAN.veridicality.counterfactuals_on else {}),
    output:
        predictions=update(f"{PLAN.veridicality.res}/{{vmodel}}/predictions.parquet"),
        **({"counterfactuals": update(f"{PLAN.veridicality.res}/{{vmodel}}/counterfactual_predictions.parquet")}
           if PLAN.veridicality.counterfactuals_on else {}),
    params:
        model=lambda wc: PLAN.veridicality.real[wc.vmodel],
        device=config["inference"]["device"],
        batch_size=PLAN.veridicality.config["batch_size"],
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
        "verbeval veridicality-predict --data {input.data:q} --model {params.model:q} --device {params.device} "
        "--batch-size {params.batch_size} --threads {threads} {params.counterfactuals} --out {output.predictions:q} "
        "2> {log:q}"


rule veridicality_table:
    """Config: veridicality.models, veridicality.formats"""
    input:
        f"{PLAN.veridicality.res}/{{vmodel}}/predictions.parquet",
    output:
        csv=f"{PLAN.veridicality.res}/{{vmodel}}/signatures.csv",
        md=f"{PLAN.veridicality.res}/{{vmodel}}/signatures.md",
        tex=f"{PLAN.veridicality.res}/{{vmodel}}/signatures.tex",
        data=f"{PLAN.veridicality.res}/{{vmodel}}/veridicality_scatter.csv",
        figure=report_first(PLAN.veridicality.scatter(), "../report/veridicality_scatter.rst", "Veridicality", "{vmodel}"),
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
    """Config: veridicality.source, veridicality.counterfactual"""
    input:
        PLAN.veridicality.data(),
    output:
        pairs=f"{PLAN.veridicality.res}/counterfactuals/pairs.parquet",
        unhandled=f"{PLAN.veridicality.res}/counterfactuals/unhandled.csv",
        coverage=f"{PLAN.veridicality.res}/counterfactuals/coverage.csv",
    params:
        samples=PLAN.veridicality.cf["samples"],
        seed=PLAN.veridicality.cf["seed"],
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/counterfactuals.log",
    shell:
        "verbeval veridicality-counterfactuals --data {input:q} --samples {params.samples} --seed {params.seed} "
        "--pairs {output.pairs:q} --unhandled {output.unhandled:q} --coverage {output.coverage:q} 2> {log:q}"


# the counterfactual predictions come from rule veridicality_predict (the same load)


rule veridicality_kl:
    """Config: veridicality.models, veridicality.counterfactual"""
    input:
        predictions=f"{PLAN.veridicality.res}/{{vmodel}}/predictions.parquet",
        counterfactuals=f"{PLAN.veridicality.res}/{{vmodel}}/counterfactual_predictions.parquet",
    output:
        t7_csv=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table7.csv",
        t7_md=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table7.md",
        t7_tex=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table7.tex",
        t8_csv=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table8.csv",
        t8_md=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table8.md",
        t8_tex=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table8.tex",
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
        f"{PLAN.veridicality.res}/{{vmodel}}/signatures.csv",
    output:
        report(f"{PLAN.veridicality.res}/{{vmodel}}/signatures_{{vmodel}}.html", caption="../report/veridicality_signatures.rst",
               category="Veridicality", subcategory="{vmodel}"),
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
        t7=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table7.csv",
        t8=f"{PLAN.veridicality.res}/{{vmodel}}/kl_table8.csv",
    output:
        t7=report(f"{PLAN.veridicality.res}/{{vmodel}}/kl_table7_{{vmodel}}.html", caption="../report/veridicality_kl_table7.rst",
                  category="Veridicality", subcategory="{vmodel}"),
        t8=report(f"{PLAN.veridicality.res}/{{vmodel}}/kl_table8_{{vmodel}}.html", caption="../report/veridicality_kl_table8.rst",
                  category="Veridicality", subcategory="{vmodel}"),
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
        unhandled=f"{PLAN.veridicality.res}/counterfactuals/unhandled.csv",
        coverage=f"{PLAN.veridicality.res}/counterfactuals/coverage.csv",
    output:
        unhandled=report(f"{PLAN.veridicality.res}/counterfactuals/unhandled.html",
                         caption="../report/veridicality_unhandled.rst", category="Veridicality",
                         subcategory="Counterfactuals"),
        coverage=report(f"{PLAN.veridicality.res}/counterfactuals/coverage.html", caption="../report/veridicality_coverage.rst",
                        category="Veridicality", subcategory="Counterfactuals"),
    params:
        unhandled="Counterfactuals: sentences a manipulation cannot handle",
        coverage="Counterfactuals: coverage",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/veridicality/counterfactual_pages.log",
    shell:
        "verbeval report-table --csv {input.unhandled:q} {input.coverage:q} --title {params.unhandled:q} "
        "{params.coverage:q} --out {output.unhandled:q} {output.coverage:q} 2> {log:q}"
