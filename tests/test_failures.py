"""The last lines of a failed run (verbeval.core.failures) and the cluster resource checks
(verbeval.core.cluster)."""

from __future__ import annotations

from pathlib import Path

from verbeval.core.cluster import REQUIRED_DEFAULTS, resource_problems
from verbeval.core.failures import cause_in_text, failed_jobs, failure_summary

#: two failed jobs as Snakemake 9 writes them to its log (snakemake/logging.py, _format_job_error);
#: the second, a SLURM job killed for its memory, has an empty rule log and a SLURM log
SNAKEMAKE_LOG = """\
[Mon Nov 23 21:40:01 2026]
Error in rule templates:
    message: None
    jobid: 3
    output: results/agreement/templates.parquet
    log: results/logs/agreement/templates.log (check log file(s) for error details)
    shell:
        verbeval templates --out results/agreement/templates.parquet 2> results/logs/agreement/templates.log
        (command exited with non-zero exit code)
Logfile results/logs/agreement/templates.log:
================================================================================
verbeval templates: error: data/pairs.csv:7: not UTF-8; save it as UTF-8
================================================================================

[Mon Nov 23 21:41:07 2026]
Error in rule infer:
    message: SLURM-job '12' failed, SLURM status is: 'FAILED'. Reason: Unknown.
    jobid: 5
    input: results/agreement/templates.parquet
    output: results/agreement/gpt2/shards/manifest.json
    log: results/logs/agreement/gpt2/infer.log, .snakemake/slurm_logs/rule_infer/gpt2/12.log (check log file(s) for error details)
    external_jobid: 12
Shutting down, this might take some time.
Exiting because a job execution failed. Look below for error messages
"""


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_failed_jobs_reads_rule_logs_and_message() -> None:
    jobs = failed_jobs(SNAKEMAKE_LOG)
    assert [j.rule for j in jobs] == ["templates", "infer"]
    assert jobs[0].logs == ("results/logs/agreement/templates.log",)
    assert jobs[1].logs == ("results/logs/agreement/gpt2/infer.log", ".snakemake/slurm_logs/rule_infer/gpt2/12.log")
    assert jobs[1].message.startswith("SLURM-job '12' failed")


def test_summary_names_the_verbeval_error_and_the_slurm_reason_of_an_empty_rule_log(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "results/logs/agreement/templates.log",
        "INFO loading\nverbeval templates: error: data/pairs.csv:7: not UTF-8; save it as UTF-8\n",
    )
    # killed while loading the model: a progress bar, no error line
    _write(tmp_path, "results/logs/agreement/gpt2/infer.log", "Loading weights:   0%|          | 0/28\n")
    _write(
        tmp_path,
        ".snakemake/slurm_logs/rule_infer/gpt2/12.log",
        "host: node1\nBuilding DAG of jobs...\n"
        "slurmstepd: error: Job 12 exceeded memory limit (2100000 > 2048000), being killed\n"
        "slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT 2026-11-23T21:41:00 ***\n",
    )
    assert failure_summary(SNAKEMAKE_LOG, tmp_path) == [
        "templates: verbeval templates: error: data/pairs.csv:7: not UTF-8; save it as UTF-8 "
        "[results/logs/agreement/templates.log]",
        "infer: slurmstepd: error: Job 12 exceeded memory limit (2100000 > 2048000), being killed "
        "[.snakemake/slurm_logs/rule_infer/gpt2/12.log]",
    ]


def test_summary_without_a_cause_line_gives_the_last_line_of_the_first_log(tmp_path: Path) -> None:
    _write(tmp_path, "results/logs/agreement/gpt2/infer.log", "Loading weights:   0%|\n")
    _write(tmp_path, ".snakemake/slurm_logs/rule_infer/gpt2/12.log", "host: node1\nBuilding DAG of jobs...\n")
    assert failure_summary(SNAKEMAKE_LOG, tmp_path)[1] == (
        "infer: Loading weights:   0%| [results/logs/agreement/gpt2/infer.log]"
    )


def test_summary_without_any_log_text_gives_snakemakes_message(tmp_path: Path) -> None:
    lines = failure_summary(SNAKEMAKE_LOG, tmp_path)  # no log file exists
    assert lines[1] == "infer: SLURM-job '12' failed, SLURM status is: 'FAILED'. Reason: Unknown."
    assert lines[0].startswith("templates: None")


def test_a_retried_job_is_listed_once(tmp_path: Path) -> None:
    _write(tmp_path, "results/logs/agreement/templates.log", "verbeval templates: error: bad\n")
    assert failure_summary(SNAKEMAKE_LOG.split("[Mon Nov 23 21:41")[0] * 2, tmp_path) == [
        "templates: verbeval templates: error: bad [results/logs/agreement/templates.log]"
    ]


def test_cause_in_text_prefers_the_verbeval_line_then_slurm_then_the_traceback() -> None:
    assert cause_in_text("") is None and cause_in_text("\n  \n") is None
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad shape\nexit 1\n'
    assert cause_in_text(traceback) == "ValueError: bad shape"
    assert cause_in_text("slurmstepd: error: Job 3 exceeded memory limit\n" + traceback) == (
        "slurmstepd: error: Job 3 exceeded memory limit"
    )
    assert (
        cause_in_text("verbeval infer: error: x.json: missing\n" + traceback)
        == "verbeval infer: error: x.json: missing"
    )
    assert cause_in_text("slurmstepd: error: *** JOB 4 ON n1 CANCELLED AT 2026-11-23T21:41:00 ***\n" + traceback) == (
        "slurmstepd: error: *** JOB 4 ON n1 CANCELLED AT 2026-11-23T21:41:00 ***"
    )
    assert cause_in_text("just a line\nlast line\n") == "last line"


def test_resource_problems() -> None:
    gpu = ["infer", "simverb_score"]
    profile = {"infer": {"slurm_partition": "gpu", "mem_mb": 32000}, "simverb_score": {"slurm_partition": "gpu"}}
    assert resource_problems(["slurm_account", *REQUIRED_DEFAULTS], profile, gpu) == []
    # --set-resources infer:mem_mb=200 replaced the list
    (problem,) = resource_problems(["slurm_account", *REQUIRED_DEFAULTS], {"infer": {"mem_mb": 200}}, gpu)
    assert "no slurm_partition to rule(s) infer, simverb_score" in problem
    # --default-resources slurm_account=X replaced the list
    (problem,) = resource_problems(["slurm_account"], profile, gpu)
    assert problem.startswith("default-resources lack slurm_partition, runtime, mem_mb")
    assert len(resource_problems([], {}, gpu)) == 2
