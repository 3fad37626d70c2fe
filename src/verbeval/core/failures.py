"""The cause of each failed job, for the last lines of a failed run's console output.

Snakemake prints a failed job's error block (and, with ``show-failed-logs``, its logs) long before
the run ends; the verbeval error line then sits far above the end of the output. The workflow's
``onerror`` handler (workflow/rules/common.smk) calls :func:`failure_summary` on Snakemake's own
log file: for every ``Error in rule ...`` block it reads the job's logs in the order Snakemake
lists them (the rule's ``log:`` first, then the SLURM log the executor adds) and keeps one line,
the first of these found in any of them (logs in that order):

1. the last ``verbeval <command>: error: ...`` line;
2. a SLURM line that names why the job was stopped: a memory or time limit first, then a cancel;
3. a signal that ended the job (:func:`signal_cause`): Snakemake's own ``Command '...' died with
   <Signals.SIGKILL: 9>.`` or ``returned non-zero exit status 137.`` just above the job's block
   (or in a SLURM log, where the job's Snakemake writes it), bash's ``Killed`` line, a return code
   of -9; it is said in words: ``killed by signal 9 (SIGKILL: out of memory or killed by a user)``;
4. the last ``...Error: ...`` line of a traceback;
5. else the last line of the first log with text that is no log record of level DEBUG, INFO or
   WARNING and no Python warning (a killed queue's resource tracker warns of leaked semaphores:
   never the cause); then the job's exit status (``exited with status 3; its log has no error
   line``); with neither, Snakemake's own message for the job.

So a rule log that is empty or cut short (a job killed for exceeding its memory) gives way to the
SLURM log, which holds the reason.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
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
#: a job's end by a signal: Python's CalledProcessError (Snakemake's), a return code, bash's words
_DIED = re.compile(r"died with <Signals\.(\w+): (\d+)>")
_STATUS = re.compile(r"(?:exit status|exit code|returncode|return code)[ :=]*(-?\d+)", re.IGNORECASE)
#: bash's report of a child ended by a signal (``bash: line 1:  5649 Killed   python ...``)
_BASH_SIGNAL = {"Killed": 9, "Terminated": 15, "Segmentation fault": 11, "Aborted": 6, "Bus error": 7, "Hangup": 1}
_BASH_LINE = re.compile(
    r"(?:^|: )(?:line \d+: +\d+ )?(" + "|".join(_BASH_SIGNAL) + r")\b(?: \(core dumped\))?(?: {2,}.*)?$"
)
#: Snakemake's line that ends the exception of a failed shell job, just above its ``Error in rule`` block
_COMMAND_END = re.compile(r"' (returned non-zero exit status -?\d+|died with <Signals\.\w+: \d+>)\.$")
#: lines that never name the cause: log records of level DEBUG/INFO/WARNING (verbeval's format and
#: logging's default), Python warnings and the source line ``warnings.warn`` prints under them
_NOISE = re.compile(
    r"^(?:\S+ \S+ (?:DEBUG|INFO|WARNING) |(?:DEBUG|INFO|WARNING):|\S+:\d+: \w*Warning: |warnings\.warn\()"
)
#: what each signal means for a job, in words
_SIGNAL_WORDS = {
    9: "out of memory or killed by a user",
    15: "stopped by Snakemake, the scheduler or a user",
    2: "interrupted (Ctrl-C)",
    1: "its terminal closed",
    6: "aborted",
    11: "a crash",
    7: "a crash",
}
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
    #: how Snakemake says its command ended (``returned non-zero exit status 137``), "" if unknown
    exit: str = ""


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
    #: the command ends Snakemake printed since the last block: (the line, how it ended)
    ends: list[tuple[str, str]] = []
    exits: list[tuple[str, str]] = []
    shell: list[str] = []

    def close() -> None:
        if rule is not None:
            own = _own_exit(exits, shell)
            jobs.append(FailedJob(rule, logs, message, own[1] if own else ""))
            # the others are later blocks' (a job's exception may be printed before another's block)
            ends[:0] = [e for e in exits if e is not own]

    for line in snakemake_log.splitlines():
        header = _ERROR_HEADER.match(line)
        if header:
            close()
            rule, logs, message = header.group(1), (), ""
            exits, ends, shell = ends, [], []
            continue
        if end := _COMMAND_END.search(line):  # no line of a block ends so: it is for the next block
            ends.append((line, end.group(1)))
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
        elif line.startswith(" " * 8) and line.strip() != "(command exited with non-zero exit code)":
            shell.append(line.strip())  # the lines of the ``shell:`` item
    close()
    return jobs


def _own_exit(exits: list[tuple[str, str]], shell: list[str]) -> tuple[str, str] | None:
    """Of the command ends printed above a job's block (and not yet another's), the one of its own
    shell command (the command's last line is in that line); for a job without a shell command (a
    SLURM job's block), the last one; None when there is none."""
    for item in reversed(exits):
        if not shell or shell[-1] in item[0]:
            return item
    return None


def describe_signal(number: int) -> str:
    """A job's end by signal ``number`` in words: ``killed by signal 9 (SIGKILL: out of memory or
    killed by a user)``."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"killed by signal {number}"
    words = _SIGNAL_WORDS.get(number)
    return f"killed by signal {number} ({name}: {words})" if words else f"killed by signal {number} ({name})"


def _signal_of_status(status: int) -> int | None:
    """The signal an exit status stands for: -N (Python's return code), 128+N (a shell's status)."""
    if -64 <= status < 0:
        return -status
    if 128 < status <= 128 + 64:
        return status - 128
    return None


def signal_cause(line: str) -> str | None:
    """The signal that ``line`` says ended a job, in words (:func:`describe_signal`), else None."""
    if m := _DIED.search(line):
        return describe_signal(int(m.group(2)))
    if m := _BASH_LINE.search(line):
        return describe_signal(_BASH_SIGNAL[m.group(1)])
    if (m := _STATUS.search(line)) and (number := _signal_of_status(int(m.group(1)))) is not None:
        return describe_signal(number)
    return None


def _finder(pattern: re.Pattern[str], anywhere: bool = False) -> Callable[[str], str | None]:
    """What ``pattern`` finds in a line (at its start unless ``anywhere``), as the line's cause."""

    def find(line: str) -> str | None:
        m = pattern.search(line) if anywhere else pattern.match(line)
        return m.group(0) if m else None

    return find


#: the causes in order of preference (see the module's docstring), each a line's cause or None
_FINDERS: tuple[Callable[[str], str | None], ...] = (
    _finder(_VERBEVAL_ERROR, anywhere=True),
    _finder(_SLURM_LIMIT),
    _finder(_SLURM_STOP),
    signal_cause,
    _finder(_EXCEPTION),
)


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _match(find: Callable[[str], str | None], lines: list[str]) -> str | None:
    """What ``find`` finds in the last of ``lines`` where it finds something, log records below
    ERROR and warnings left out (an INFO line "out of memory: batch size halved" is no cause)."""
    for ln in reversed(lines):
        if not _NOISE.match(ln) and (found := find(ln)) is not None:
            return found
    return None


def _last_said(lines: list[str]) -> str | None:
    """The last of ``lines`` that is no log record below ERROR and no Python warning (:data:`_NOISE`)."""
    return next((ln for ln in reversed(lines) if not _NOISE.match(ln)), None)


def cause_in_text(text: str) -> str | None:
    """The line of one log that names the failure (see the module's docstring), None for no text."""
    lines = _lines(text)
    if not lines:
        return None
    for find in _FINDERS:
        if (found := _match(find, lines)) is not None:
            return found
    return _last_said(lines) or "no error line (only log records and warnings)"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def job_cause(job: FailedJob, workdir: Path = Path()) -> Cause:
    """The cause of one failed job, read from its logs (see the module's docstring)."""
    texts = [(log, _lines(_read(workdir / log))) for log in job.logs]
    first_log = next((log for log, lines in texts if lines), job.logs[0] if job.logs else None)
    for find in _FINDERS:
        if find is signal_cause and (words := signal_cause(job.exit)) is not None:
            return Cause(job.rule, words, first_log)  # Snakemake's word on the command, before its logs'
        for log, lines in texts:
            if (found := _match(find, lines)) is not None:
                return Cause(job.rule, found[:MAX_CAUSE], log)
    for log, lines in texts:
        if (said := _last_said(lines)) is not None:
            return Cause(job.rule, said[:MAX_CAUSE], log)
    if m := _STATUS.search(job.exit):
        logged = any(lines for _, lines in texts)
        quiet = "its log has no error line" if logged else "its log is empty" if job.logs else "it has no log"
        return Cause(job.rule, f"exited with status {m.group(1)}; {quiet}", first_log)
    if any(lines for _, lines in texts):
        return Cause(job.rule, "its log has no error line (only log records and warnings)", first_log)
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
