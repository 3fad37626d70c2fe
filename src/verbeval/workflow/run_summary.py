"""What a finished run says last (Snakemake's ``onsuccess``, ``workflow/rules/common.smk``): where its
results are, Table 2 as text with its randomly initialised models marked, the warnings its jobs wrote
to their logs (how many, the first few, where the rest are) and the command that builds the report.
A failed run's summary is ``onerror``'s (:func:`verbeval.workflow.snakemake.failure_lines`)."""

from __future__ import annotations

import csv
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verbeval.agreement.scores.registry import LABELS, NAMES
from verbeval.core.provenance import marked, random_note
from verbeval.core.tables import format_number

#: a warning in a job log: the logging format of every verbeval command (verbeval.core.console), or
#: Python's own ``warnings`` line (``path:line: SomeWarning: message``) from a library
_LOGGED = re.compile(r"^\d{4}-\d\d-\d\d [\d:,.]+ WARNING [\w.]+: (?P<msg>.+)$")
_PYTHON = re.compile(r"^\S+:\d+: (?P<kind>\w*Warning): (?P<msg>.+)$")
#: warnings shown in full; the others are counted, with where to read them
SHOWN_WARNINGS = 5
#: models shown in the console's Table 2 (the table files hold them all)
SHOWN_MODELS = 6
#: a shown warning longer than this is cut (the log holds it whole)
WARNING_CHARS = 300


@dataclass(frozen=True)
class JobWarning:
    """One warning message and the job log (relative to the logs folder) it first appeared in."""

    log: str
    message: str
    count: int = 1


def job_warnings(logs_dir: str | Path, since: float) -> list[JobWarning]:
    """The warnings of the job logs under ``logs_dir`` written at or after ``since`` (a time stamp:
    the run's start), in the order of the logs' times, each message once (with how many times)."""
    root = Path(logs_dir)
    if not root.is_dir():
        return []
    logs = []
    for path in root.rglob("*.log"):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if mtime >= since:
            logs.append((mtime, str(path.relative_to(root)), path))
    seen: dict[str, JobWarning] = {}
    for _, rel, path in sorted(logs):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            m = _LOGGED.match(line) or _PYTHON.match(line)
            if m is None:
                continue
            message = m.group("msg").strip()
            if "kind" in m.groupdict():
                message = f"{m.group('kind')}: {message}"
            old = seen.get(message)
            seen[message] = JobWarning(rel, message) if old is None else JobWarning(old.log, message, old.count + 1)
    return list(seen.values())


def _value(text: str | None) -> str:
    """A cell of ``table2.csv`` as Table 2's files write it (:func:`format_number`: two decimals, a dash if empty)."""
    try:
        return format_number(float(text) if text not in (None, "") else math.nan)
    except ValueError:
        return str(text)


def table2_lines(table2_csv: str | Path) -> list[str]:
    """Table 2 (``table2.csv``) as aligned text: a row per group, the headline metrics per model, a
    randomly initialised model marked and named under the table as in Table 2's files; empty when the file
    is missing or holds no rows."""
    path = Path(table2_csv)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    if not rows:
        return []
    first = f".{NAMES[0]}"
    models = [c[: -len(first)] for c in rows[0] if c.endswith(first)]
    shown = models[:SHOWN_MODELS]
    random = [m for m in models if str(rows[0].get(f"{m}.random_init", "")).lower() == "true"]
    labels = [marked(m, m in random) for m in shown]
    group_w = max(len("Group"), *(len(r.get("name") or r["group"]) for r in rows))
    heads = " ".join(f"{LABELS[k]:>5}" for k in NAMES)  # the headline metrics: 5-wide numbers, a space between
    block_w = [max(len(label), len(heads)) for label in labels]
    lines = [
        " " * group_w + "".join(f"  {label:>{w}}" for label, w in zip(labels, block_w, strict=True)),
        f"{'Group':<{group_w}}" + "".join(f"  {heads:>{w}}" for w in block_w),
    ]
    for r in rows:
        cells = (" ".join(f"{_value(r.get(f'{m}.{k}')):>5}" for k in NAMES) for m in shown)
        lines.append(
            f"{r.get('name') or r['group']:<{group_w}}"
            + "".join(f"  {c:>{w}}" for c, w in zip(cells, block_w, strict=True))
        )
    if len(models) > len(shown):
        lines.append(f"(and {len(models) - len(shown)} more models: {path.with_suffix('.md')})")
    note = random_note(random)  # the note under every table of random models
    if note:
        lines.append(note)
    return lines


def report_command(configfiles: Sequence[str | Path], config_args: Sequence[str], report: str) -> str:
    """The ``snakemake --report`` command of a run with these ``--configfile`` files (shown relative to
    the working directory when under it) and ``--config`` pairs (``KEY=VALUE``, as Snakemake keeps them)."""
    cwd = Path.cwd()
    words = ["snakemake"]
    for f in configfiles:
        p = Path(f)
        words += ["--configfile", str(p.relative_to(cwd)) if p.is_absolute() and p.is_relative_to(cwd) else str(p)]
    if config_args:
        words += ["--config", *config_args]
    words += ["--report", report]
    return shlex.join(words)


def run_summary(
    results_dir: str, table2_csv: str | None, logs_dir: str, since: float, report: str, languages_md: str | None = None
) -> list[str]:
    """The lines a successful run ends with (``report``: the report command, :func:`report_command`;
    ``languages_md``: the multilingual study's side-by-side table, when the run has that study)."""
    lines = ["", f"verbeval: the run is done; its results are in {results_dir}/"]
    table = table2_lines(table2_csv) if table2_csv else []
    if table:
        lines += ["", f"Table 2 (TSE, EW and MW at p = 1; CIs in {table2_csv}, also .md, .tex, .html):", *table]
    if languages_md and Path(languages_md).is_file():
        folder = Path(languages_md).parent
        body = [line for line in Path(languages_md).read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
        lines += ["", f"Agreement across languages (CLAMS; Table 2 of each language with its intervals in "
                  f"{folder}/<lang>/table2.md, the comparisons in {folder}/comparisons.md):", *body]  # fmt: skip
    warnings = job_warnings(logs_dir, since)
    lines.append("")
    if warnings:
        total = sum(w.count for w in warnings)
        lines.append(f"{total} warning(s) in this run's job logs ({len(warnings)} different), under {logs_dir}/:")
        for w in warnings[:SHOWN_WARNINGS]:
            text = w.message if len(w.message) <= WARNING_CHARS else w.message[: WARNING_CHARS - 3] + "..."
            times = f" (x{w.count})" if w.count > 1 else ""
            lines.append(f"  {w.log}: {text}{times}")
        rest = len(warnings) - SHOWN_WARNINGS
        if rest > 0:
            lines.append(f"  ... and {rest} more: grep -r WARNING {shlex.quote(logs_dir)}")
    else:
        lines.append(f"No warning in this run's job logs ({logs_dir}/).")
    lines += ["", "The report (figures and tables in one HTML file):", f"  {report}", ""]
    return lines
