# Paired comparisons of the run's models (comparisons.csv, first_gains.csv, the forest figure) and the
# precision audit (precision_audit.csv: ties and fragile decisions), from the aggregates and shards: no
# model is run. One job each for the whole run (verbeval.workflow.comparisons, PLAN.comparisons).
import shlex


rule comparisons:
    input:
        PLAN.comparisons.compare_inputs(),
    output:
        csv=PLAN.comparisons.files()["csv"],
        first_gains=PLAN.comparisons.files()["first_gains"],
        figure=report_first(PLAN.comparisons.files()["figure"], "../report/comparisons_forest.rst", "Agreement",
                            "Paired comparisons"),
    params:
        command=shlex.join(PLAN.comparisons.compare_argv()),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/comparisons.log",
    shell:
        "verbeval {params.command} 2> {log:q}"


rule comparisons_page:
    input:
        PLAN.comparisons.files()["csv"],
    output:
        report(PLAN.comparisons.files()["page"], caption="../report/comparisons.rst", category="Agreement",
               subcategory="Paired comparisons"),
    params:
        title="Paired comparisons: differences per group (B - A)",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/comparisons_page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


rule precision_audit:
    input:
        PLAN.comparisons.audit_inputs(),
    output:
        **PLAN.comparisons.rule_outputs("precision_audit"),
    params:
        command=shlex.join(PLAN.comparisons.audit_argv()),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/precision_audit.log",
    shell:
        "verbeval {params.command} 2> {log:q}"


rule precision_audit_page:
    input:
        PLAN.comparisons.files()["audit"],
    output:
        report(PLAN.comparisons.files()["audit_page"], caption="../report/precision_audit.rst", category="Agreement",
               subcategory="Precision audit"),
    params:
        title="Ties and fragile decisions per model, group and metric",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/agreement/precision_audit_page.log",
    shell:
        "verbeval report-table --csv {input:q} --title {params.title:q} --out {output:q} 2> {log:q}"


# The flip sets (agreement.precision_audit.dtypes): each model of Table 2 run again in another dtype (its
# own shard store and aggregates under <model>/precision/<dtype>/), then the decisions that flip and how
# far TSE, EW and MW move (verbeval flip-set). Rules of the steps run-model, aggregate and flip-set.
if PLAN.comparisons.dtype_runs:
    _dtype_models, _dtypes = PLAN.comparisons.dtype_alternatives()

    rule precision_infer:
        input:
            templates=PLAN.model_steps.paths("{model}")["templates"],
            lemmas=PLAN.model_steps.paths("{model}")["lemmas"],
            model=lambda wc: PLAN.model.local_model(wc.model),
        output:
            manifest=PLAN.model_steps.variant_paths("{model}", "{dtype}")["manifest"],
        params:
            command=lambda wc, threads: PLAN.model_steps.command("run-model", wc.model, threads, dtype=wc.dtype),
        wildcard_constraints:
            model=alternatives(_dtype_models),
            dtype=alternatives(_dtypes),
        threads: config["inference"]["threads"]
        resources:
            gpu=lambda wc: PLAN.model.gpus(wc.model, jobs_run_here(workflow)),
        conda:
            "../../envs/inference.yaml"
        log:
            f"{PLAN.logs}/agreement/{{model}}/precision_{{dtype}}_infer.log",
        shell:
            "verbeval {params.command} 2> {log:q}"

    rule precision_aggregate:
        input:
            templates=PLAN.model_steps.paths("{model}")["templates"],
            manifest=PLAN.model_steps.variant_paths("{model}", "{dtype}")["manifest"],
        output:
            **{k: PLAN.model_steps.variant_paths("{model}", "{dtype}")[k] for k in ("scores", "tse", "summary")},
        params:
            command=lambda wc: PLAN.model_steps.command("aggregate", wc.model, dtype=wc.dtype),
        wildcard_constraints:
            model=alternatives(_dtype_models),
            dtype=alternatives(_dtypes),
        conda:
            "../../envs/verbeval.yaml"
        log:
            f"{PLAN.logs}/agreement/{{model}}/precision_{{dtype}}_aggregate.log",
        shell:
            "verbeval {params.command} 2> {log:q}"

    rule flip_set:
        input:
            lambda wc: PLAN.comparisons.flip_inputs(wc.model, wc.dtype),
        output:
            flips=PLAN.model_steps.variant_paths("{model}", "{dtype}")["flips"],
            comparison=PLAN.model_steps.variant_paths("{model}", "{dtype}")["comparison"],
        params:
            command=lambda wc: shlex.join(PLAN.comparisons.flip_argv(wc.model, wc.dtype)),
        wildcard_constraints:
            model=alternatives(_dtype_models),
            dtype=alternatives(_dtypes),
        conda:
            "../../envs/verbeval.yaml"
        log:
            f"{PLAN.logs}/agreement/{{model}}/precision_{{dtype}}_flips.log",
        shell:
            "verbeval {params.command} 2> {log:q}"
