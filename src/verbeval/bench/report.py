"""The human-readable summary of a bench report (the JSON that ``verbeval bench`` writes), on stdout."""

from __future__ import annotations

from typing import Any


def _fig(value: float | str, spec: str) -> str:
    """A figure formatted with ``spec``; one refused as impossible ("unreliable (load ...)",
    :func:`verbeval.bench.timing.possible`) as that text."""
    return value if isinstance(value, str) else format(value, spec)


def _rules(by_rule: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{k} {v['jobs']}x {v['wall_s']:.1f} s" for k, v in by_rule.items())


def _startup(r: dict[str, Any]) -> str:
    st = r["startup"]
    return (
        f"  start-up: verbeval CLI {st['verbeval_cli_s']:.2f} s per job, torch + transformers import "
        f"{st['import_torch_transformers_s']:.2f} s per model job ({r['model_jobs']} model jobs); "
        f"estimated start-up share of the run {r['startup_share_estimate']:.0%}"
    )


def print_snakemake(sm: dict[str, Any]) -> None:
    print(
        f"snakemake end to end: {sm['wall_s']:.1f} s wall, {sm['jobs']} jobs on {sm['cores']} cores ({sm['command']})"
    )
    print(f"  jobs and summed job wall time per rule: {_rules(sm['by_rule'])}")
    print(_startup(sm))


def print_postprocess(pp: dict[str, Any]) -> None:
    print(f"post-processing after the forward pass (softmax + form statistics; {pp['threads']} CPU threads):")
    for t in pp["results"]:
        print(
            f"  {t['device']:4s} vocab {t['vocab']:7d}, {t['forms']} forms, {t['logits']:8s} logits, "
            f"batch {t['batch_size']}: {t['ms_per_context']:.3f} ms/context ({t['contexts_per_s']:.0f} ctx/s)"
        )


def print_api(api: dict[str, Any]) -> None:
    print(
        f"in-process API (verbeval.agreement.evaluate; {api['max_rows_per_source']} rows per source, "
        f"{api['threads']} CPU threads): suite loaded in {api['suite_s']:.2f} s ({api['suite_cpu_s']:.2f} s CPU)"
    )
    for t in api["results"]:
        print(
            f"  {t['model']} ({t['layers']} layers x {t['hidden']}, random init): {t['groups']} groups, "
            f"{t['contexts']} contexts, {t['rows']} rows: {t['call_s']:.2f} s per call ({t['call_cpu_s']:.2f} s CPU) "
            f"({t['call_with_suite_s']:.2f} s with the suite's loading; first call {t['first_call_s']:.2f} s); "
            f"load {t['load_avg']}"
        )


def print_workflow(wf: dict[str, Any]) -> None:
    print(
        f"workflow (snakemake {wf['target']}): {wf['wall_s']:.1f} s wall, {wf['jobs']} jobs on {wf['cores']} cores, "
        f"{wf['job_s_total']:.1f} s of jobs"
    )
    print(f"  jobs and summed job wall time per rule: {_rules(wf['by_rule'])}")
    for name, m in wf["models"].items():
        rate = m["contexts_per_s_infer_job"]
        print(
            f"  {name}: {m['contexts']} contexts, {m['rows']} rows; inference job {m['infer_job_s']:.1f} s "
            f"({rate if rate is not None else float('nan'):.0f} ctx/s, start-up included), "
            f"aggregation job {m['aggregate_job_s']:.1f} s"
        )
    print(_startup(wf))


def print_aggregation(agg: dict[str, Any]) -> None:
    for name, a in agg.items():
        if isinstance(a, dict):
            print(
                f"aggregation {name} ({agg['workers']} workers): {a['wall_s']:.1f} s wall "
                f"(read {a['read_s']:.1f}, scores {a['scores_s']:.1f}, "
                f"bootstrap {a['bootstrap_s']:.1f} s summed), "
                f"peak RSS {a['peak_rss_mib_per_worker']:.0f} MiB/worker"
            )


def print_throughput(tp: dict[str, Any]) -> None:
    print(f"throughput ({tp['gpu']}):")
    for t in tp["results"]:
        mem = f"{t['peak_gpu_mib']} MiB GPU" if "peak_gpu_mib" in t else f"{t['peak_rss_mib_process']:.0f} MiB RSS"
        print(
            f"  {t['model']:24s} {t['device']:4s} {t['dtype']:8s} bs {t['batch_size']:3d}: pipeline "
            f"{t['pipeline_ctx_per_s']:8.1f} ctx/s, forward {t['forward_head_at_target_ctx_per_s']:8.1f}, raw "
            f"forward {t['forward_raw_ctx_per_s']:8.1f}; "
            f"forward share {_fig(t['forward_share_of_pipeline'], '.2f')}; {mem}"
        )


def print_real(real: dict[str, Any]) -> None:
    for t in real["results"]:
        print(
            f"real model {t['model']} (vocab {t['vocab']}, {t['n_forms']} forms) {t['device']} {t['dtype']} "
            f"bs {t['batch_size']}: pipeline {t['pipeline_ctx_per_s']:.1f} ctx/s, raw forward (head at target) "
            f"{t['forward_ctx_per_s']:.1f} ctx/s, ratio {_fig(t['pipeline_over_forward'], '.2f')}; post-processing "
            f"{_fig(t['postprocess_ms_per_context'], '.2f')} ms/context; load {t['load_avg']}"
        )


def print_baseline(bl: dict[str, Any]) -> None:
    for name, b in bl.items():
        if isinstance(b, dict):
            print(
                f"baseline {name}: {b['baseline_s_per_row'] * 1000:.1f} ms/row x {b['rows_total']} rows = "
                f"{b['baseline_extrapolated_s']:.0f} s vs verbeval {b['verbeval_infer_aggregate_s']:.1f} s: "
                f"{b['speedup']:.0f}x; max |score diff| {b['max_abs_diff_vs_verbeval']:.2g}"
            )


def print_paper(pp: dict[str, Any]) -> None:
    if "skipped" in pp:
        print(f"paper configuration: {pp['skipped']}")
        return
    sm = pp["snakemake"]
    print(
        f"paper configuration ({pp['gpu'] or 'CPU'}; models randomly initialised at the paper's sizes): "
        f"{sm['wall_s']:.1f} s wall, {sm['jobs']} jobs on {sm['cores']} cores"
    )
    print(f"  jobs and summed job wall time per rule: {_rules(sm['by_rule'])}")
    for t in pp["throughput"]:
        print(
            f"  {t['model']:20s} {t['device']:4s} {t['dtype']:8s} bs {t['batch_size']}: pipeline "
            f"{t['pipeline_ctx_per_s']:8.0f} ctx/s, raw forward {t['forward_raw_ctx_per_s']:8.0f} ctx/s, "
            f"pipeline / raw forward {t['pipeline_over_raw_forward']:.2f}"
        )


#: each part's summary, in the order printed
def print_sweep(sw: dict[str, Any]) -> None:
    """The part's summary lines."""
    print(
        f"sweep ({sw['shape']['layers']}-layer GPT-2 h{sw['shape']['hidden']} checkpoints, "
        f"{'+'.join(sw['groups'])} x {sw['rows_per_source']} rows per source, --cores {sw['cores']}):"
    )
    for r in sw["runs"]:
        lg = r["logs"]
        comp = lg["compute_s_per_revision"]
        load = lg["model_load_s_per_revision"]
        print(
            f"  N={r['revisions']:4d}: {r['wall_s']:.1f} s wall, {r['jobs']} jobs ({r['scoring_jobs']} scoring jobs, "
            f"{r['scoring_job_s_per_revision']:.2f} s of scoring job per revision); logs: "
            f"{comp if comp is not None else float('nan'):.2f} s forward + scoring and "
            f"{load if load is not None else float('nan'):.2f} s model load per revision; load {r['load_before']}"
        )
    if sw["marginal_s_per_revision"] is not None:
        print(
            f"  marginal cost {sw['marginal_s_per_revision']:.2f} s wall per revision (least squares over N; "
            f"fixed {sw['fixed_s']:.1f} s), {sw['marginal_jobs_per_revision']:.2f} jobs per revision"
        )
    dr = sw.get("dry_run")
    if dr:
        print(f"  dry run of {dr['revisions']} revisions: {dr['wall_s']:.1f} s, {dr['jobs']} jobs ({dr['folders']})")


PRINTERS = (
    ("snakemake", print_snakemake),
    ("sweep", print_sweep),
    ("paper", print_paper),
    ("postprocess", print_postprocess),
    ("api", print_api),
    ("workflow", print_workflow),
    ("aggregation", print_aggregation),
    ("throughput", print_throughput),
    ("real", print_real),
    ("baseline", print_baseline),
)


def print_report(r: dict[str, Any]) -> None:
    """Human-readable summary of a bench report on stdout: a header, then each part it holds."""
    print(
        f"verbeval bench ({'quick' if r['quick'] else 'full'}); load {r['machine']['load_avg_start']} -> "
        f"{r['machine'].get('load_avg_end')}"
    )
    for part, printer in PRINTERS:
        if r.get(part):
            printer(r[part])
