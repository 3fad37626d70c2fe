"""What Snakemake prints on the console: job descriptions kept to a readable length.

Snakemake describes every job it runs with its input and output files and the reason it runs. For a
job that collects the whole run (rule ``all``, the report) those are hundreds of files on one line
(16 KB for the quick start), which pushes everything else off the screen. :class:`ShortJobInfo`, a
standard :class:`logging.Filter` on Snakemake's logger, shortens such a list to its first files and
a count (``… and 412 more files``); the files themselves, the DAG and the logs are untouched, and
``snakemake --summary`` still lists every file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

#: the logger Snakemake writes job descriptions to (``snakemake.logging.logger``)
SNAKEMAKE_LOGGER = "snakemake.logging"
#: a field of a job description longer than this many characters is shortened
MAX_FIELD_CHARS = 600
#: the record fields holding file lists (lists of strings) and the free-text reason
_FILE_FIELDS = ("input", "output", "log")
_REASON_SEPARATOR = ": "


def shorten_files(files: Sequence[str], max_chars: int = MAX_FIELD_CHARS) -> list[str]:
    """``files`` as given when ``", ".join(files)`` fits in ``max_chars``; otherwise the leading
    files that fit and a last entry ``… and N more files``."""
    if len(", ".join(files)) <= max_chars:
        return list(files)
    kept: list[str] = []
    used = 0
    for f in files:
        if kept and used + len(f) + 2 > max_chars:
            break
        kept.append(f)
        used += len(f) + 2
    return kept + [f"… and {len(files) - len(kept)} more files"]


def shorten_reason(reason: str, max_chars: int = MAX_FIELD_CHARS) -> str:
    """A Snakemake job reason (``"Missing output files: a, b, …; Input files updated by another
    job: c, d, …"``) with each part's file list shortened as :func:`shorten_files` does."""
    if len(reason) <= max_chars:
        return reason
    parts = []
    for part in reason.split("; "):
        head, sep, tail = part.partition(_REASON_SEPARATOR)
        if sep and ", " in tail:
            part = head + sep + ", ".join(shorten_files(tail.split(", "), max_chars // 2))
        parts.append(part)
    return "; ".join(parts)


class ShortJobInfo(logging.Filter):
    """Shortens the file lists and reason of Snakemake's job descriptions (never drops a record)."""

    def __init__(self, max_chars: int = MAX_FIELD_CHARS) -> None:
        super().__init__()
        self.max_chars = max_chars

    def filter(self, record: logging.LogRecord) -> bool:
        for field in _FILE_FIELDS:
            value = getattr(record, field, None)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                setattr(record, field, shorten_files(value, self.max_chars))
        reason = getattr(record, "reason", None)
        if isinstance(reason, str):
            record.reason = shorten_reason(reason, self.max_chars)
        return True


def install_short_job_info(logger_name: str = SNAKEMAKE_LOGGER, max_chars: int = MAX_FIELD_CHARS) -> None:
    """Add one :class:`ShortJobInfo` to the logger (idempotent: the Snakefile is parsed more than once)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, ShortJobInfo) for f in logger.filters):
        logger.addFilter(ShortJobInfo(max_chars))
