"""The cause of each failed job, for the last lines of a failed run's console output.

Snakemake prints a failed job's error block (and, with ``show-failed-logs``, its logs) long before
the run ends; the verbeval error line then sits far above the end of the output. The workflow's
``onerror`` handler (workflow/rules/common.smk) calls :func:`failure_summary` on Snakemake's own
log file: for every ``Error in rule ...`` block it reads the job's logs in the order Snakemake
lists them (the rule's ``log:`` first, then the SLURM log the executor adds) and keeps one line,
the first of these found in any of them (logs in that order):

1. the last ``verbeval <command>: error: ...`` line;
2. a SLURM line that names why the job was stopped: a memory or time limit first, then a cancel;
3. the last ``...Error: ...`` line of a traceback;
4. else the last non-empty line of the first log with text; with no log text at all, Snakemake's
   own message for the job.

So a rule log that is empty or cut short (a job killed for exceeding its memory) gives way to the
SLURM log, which holds the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: a verbeval sub-command's one-line error (src/verbeval/cli.py prints it so)
_VERBEVAL_ERROR = re.compile(r"verbeval [\w-]+: error: .*")
#: SLURM's own words for a job stopped for its resources (OverMemoryKill, OOM killer, time limit) ...
_SLURM_LIMIT = re.compile(r".*(exceeded memory limit|oom[-_ ]kill|out of memory|DUE TO TIME LIMIT).*", re.IGNORECASE)
#: ... or from outside (scancel, an admin, preemption), or another slurmstepd error
_SLURM_STOP = re.compile(r".*(CANCELLED|PREEMPTED|slurmstepd: error:).*")
#: the last line of a Python traceback
_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b.*")
_ERROR_HEADER = re.compile(r"^Error in rule (\w+):\s*$")
_LOG_ITEM = re.compile(r"^\s+log: (.*) \(check log file\(s\) for error details\)\s*$")
_MESSAGE_ITEM = re.compile(r"^\s+message: (.*)$")
_WILDCARDS_ITEM = re.compile(r"^\s+wildcards: (.*)$")
#: the most characters of a cause shown (one console line)
MAX_CAUSE = 400


@dataclass(frozen=True)
class FailedJob:
    """One ``Error in rule`` block of Snakemake's log."""

    rule: str
    logs: tuple[str, ...]
    message: str = ""


@dataclass(frozen=True)
class Cause:
    """The line that names why a job failed, and the file it was read from (None: Snakemake's message)."""

    rule: str
    line: str
    source: str | None


def failed_jobs(snakemake_log: str) -> list[FailedJob]:
    """Every failed job's rule, logs and message, in the order of ``snakemake_log`` (its text)."""
    jobs: list[FailedJob] = []
    rule: str | None = None
    logs: tuple[str, ...] = ()
    message = ""

    def close() -> None:
        if rule is not None:
            jobs.append(FailedJob(rule, logs, message))

    for line in snakemake_log.splitlines():
        header = _ERROR_HEADER.match(line)
        if header:
            close()
            rule, logs, message = header.group(1), (), ""
            continue
        if rule is None:
            continue
        if not line.startswith((" ", "\t")) or not line.strip():
            close()
            rule = None
            continue
        if m := _LOG_ITEM.match(line):
            logs = tuple(p for p in m.group(1).split(", ") if p)
        elif m := _MESSAGE_ITEM.match(line):
            message = m.group(1).strip()
    close()
    return jobs


_PATTERNS = (_VERBEVAL_ERROR, _SLURM_LIMIT, _SLURM_STOP, _EXCEPTION)


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _match(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    """The last of ``lines`` that ``pattern`` finds (the verbeval line anywhere in a line)."""
    for ln in reversed(lines):
        m = pattern.search(ln) if pattern is _VERBEVAL_ERROR else pattern.match(ln)
        if m:
            return m.group(0)
    return None


def cause_in_text(text: str) -> str | None:
    """The line of one log that names the failure (see the module's docstring), None for no text."""
    lines = _lines(text)
    if not lines:
        return None
    for pattern in _PATTERNS:
        if (found := _match(pattern, lines)) is not None:
            return found
    return lines[-1]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def job_cause(job: FailedJob, workdir: Path = Path()) -> Cause:
    """The cause of one failed job, read from its logs (see the module's docstring)."""
    texts = [(log, _lines(_read(workdir / log))) for log in job.logs]
    for pattern in _PATTERNS:
        for log, lines in texts:
            if (found := _match(pattern, lines)) is not None:
                return Cause(job.rule, found[:MAX_CAUSE], log)
    for log, lines in texts:
        if lines:
            return Cause(job.rule, lines[-1][:MAX_CAUSE], log)
    return Cause(job.rule, (job.message or "no log text and no message (see the error above)")[:MAX_CAUSE], None)


def failure_summary(snakemake_log: str, workdir: Path = Path()) -> list[str]:
    """One line per failed job (``rule: cause [log file]``), repeats of one job (retries) once."""
    seen: set[tuple[str, str, str | None]] = set()
    lines: list[str] = []
    for job in failed_jobs(snakemake_log):
        cause = job_cause(job, workdir)
        key = (cause.rule, cause.line, cause.source)
        if key in seen:
            continue
        seen.add(key)
        where = f" [{cause.source}]" if cause.source else ""
        lines.append(f"{cause.rule}: {cause.line}{where}")
    return lines
