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


#: a queue job and a plain job killed with ``kill -9``, as Snakemake 9.27 wrote them to its log (a
#: local run): ``run-queue`` killed (its shell's status 137), then the job's shell itself killed
#: (Python's ``died with <Signals.SIGKILL: 9>``), then a job that exited 3 with an empty log
KILLED_LOG = """\
[Tue Dec  1 22:24:36 2026]
localrule queue_0:
    output: results/agreement/queues/queue_0.json
    log: results/logs/queues/queue_0.log
    jobid: 1
    reason: Missing output files: results/agreement/queues/queue_0.json
    resources: tmpdir=/tmp
RuleException:
CalledProcessError in file "/repo/workflow/rules/queues.smk", line 32:
Command 'set -euo pipefail;  verbeval run-queue --threads 4 --post-workers 1 --job 'run-model --model gpt2' 2> \
results/logs/queues/queue_0.log' returned non-zero exit status 137.
[Tue Dec  1 22:24:36 2026]
Error in rule queue_0:
    message: None
    jobid: 1
    output: results/agreement/queues/queue_0.json
    log: results/logs/queues/queue_0.log (check log file(s) for error details)
    shell:
        verbeval run-queue --threads 4 --post-workers 1 --job 'run-model --model gpt2' 2> results/logs/queues/queue_0.log
        (command exited with non-zero exit code)
RuleException:
CalledProcessError in file "/repo/workflow/rules/queues.smk", line 32:
Command 'set -euo pipefail;  verbeval templates --out t.parquet 2> results/logs/templates.log' returned non-zero \
exit status 3.
RuleException:
CalledProcessError in file "/repo/workflow/rules/queues.smk", line 32:
Command 'set -euo pipefail;  verbeval run-queue --threads 4 --post-workers 1 --job 'run-model --model bert' 2> \
results/logs/queues/queue_1.log' died with <Signals.SIGKILL: 9>.
[Tue Dec  1 22:24:37 2026]
Error in rule queue_1:
    message: None
    jobid: 2
    output: results/agreement/queues/queue_1.json
    log: results/logs/queues/queue_1.log (check log file(s) for error details)
    shell:
        verbeval run-queue --threads 4 --post-workers 1 --job 'run-model --model bert' 2> results/logs/queues/queue_1.log
        (command exited with non-zero exit code)
[Tue Dec  1 22:24:37 2026]
Error in rule templates:
    message: None
    jobid: 3
    output: t.parquet
    log: results/logs/templates.log (check log file(s) for error details)
    shell:
        verbeval templates --out t.parquet 2> results/logs/templates.log
        (command exited with non-zero exit code)
Exiting because a job execution failed. Look above for error messages
"""
#: the log of a queue killed with ``kill -9``, as Python 3.11 leaves it: an INFO line of the queue, a
#: WARNING that mentions "out of memory", then the warning of the pool's resource tracker, which outlives it
KILLED_QUEUE_LOG = """\
2026-12-01 22:24:36,193 INFO verbeval: run-queue: step 1 of 3 (run-model gpt2) done in 4.1 s
2026-12-01 22:24:37,201 WARNING verbeval: out of memory at batch size 512; retrying with 256, and later batches too
/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: \
There appear to be 1 leaked semaphore objects to clean up at shutdown
  warnings.warn('resource_tracker: There appear to be %d '
"""
SIGKILL_WORDS = "killed by signal 9 (SIGKILL: out of memory or killed by a user)"


def test_a_killed_job_is_said_killed_never_an_info_or_warning_line(tmp_path: Path) -> None:
    jobs = failed_jobs(KILLED_LOG)
    assert [(j.rule, j.exit) for j in jobs] == [
        ("queue_0", "returned non-zero exit status 137"),
        ("queue_1", "died with <Signals.SIGKILL: 9>"),  # its own command's end, not templates' printed before it
        ("templates", "returned non-zero exit status 3"),
    ]
    _write(tmp_path, "results/logs/queues/queue_0.log", KILLED_QUEUE_LOG)
    _write(tmp_path, "results/logs/queues/queue_1.log", "INFO:root:loading\n")
    _write(tmp_path, "results/logs/templates.log", "")
    assert failure_summary(KILLED_LOG, tmp_path) == [
        f"queue_0: {SIGKILL_WORDS} [results/logs/queues/queue_0.log]",
        f"queue_1: {SIGKILL_WORDS} [results/logs/queues/queue_1.log]",
        "templates: exited with status 3; its log is empty [results/logs/templates.log]",
    ]
    # without Snakemake's word on the command, still no INFO, WARNING or Python warning line
    alone = "Error in rule queue_0:\n    log: results/logs/queues/queue_0.log (check log file(s) for error details)\n"
    assert failure_summary(alone, tmp_path) == [
        "queue_0: its log has no error line (only log records and warnings) [results/logs/queues/queue_0.log]"
    ]
    assert cause_in_text(KILLED_QUEUE_LOG) == "no error line (only log records and warnings)"


def test_a_signal_in_a_log_is_said_in_words() -> None:
    # bash's line for a child it lost to SIGKILL (from a local run), and a SLURM job's Snakemake
    bash = "/usr/bin/bash: line 1:  5649 Killed                  verbeval run-queue --threads 4 2> q.log\n"
    assert cause_in_text(KILLED_QUEUE_LOG + bash) == SIGKILL_WORDS
    inner = "Command 'set -euo pipefail;  verbeval run-queue --job x 2> q.log' returned non-zero exit status 143.\n"
    assert cause_in_text(KILLED_QUEUE_LOG + inner) == (
        "killed by signal 15 (SIGTERM: stopped by Snakemake, the scheduler or a user)"
    )
    assert cause_in_text("worker ended, returncode -11\n") == "killed by signal 11 (SIGSEGV: a crash)"
    assert cause_in_text("Segmentation fault (core dumped)\n") == "killed by signal 11 (SIGSEGV: a crash)"
    # an ordinary exit status is no signal; a traceback after a kill line is not preferred to it
    assert cause_in_text("returned non-zero exit status 1\nValueError: x\n") == "ValueError: x"
    assert cause_in_text("Killed\nValueError: x\n") == SIGKILL_WORDS
    # a verbeval error line still comes first
    assert cause_in_text("verbeval infer: error: x: missing\nKilled\n") == "verbeval infer: error: x: missing"
