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
