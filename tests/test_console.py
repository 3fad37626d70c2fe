"""Job descriptions on the console: rule all's hundreds of files become the first ones and a count."""

from __future__ import annotations

import logging

from verbeval.core.console import ShortJobInfo, install_short_job_info, shorten_files, shorten_reason


def test_short_lists_are_kept_whole() -> None:
    files = ["results/a.csv", "results/b.csv"]
    assert shorten_files(files, max_chars=100) == files


def test_long_lists_keep_leading_files_and_count_the_rest() -> None:
    files = [f"results/agreement/m{i:03d}/summary.csv" for i in range(400)]
    short = shorten_files(files, max_chars=200)
    assert short[-1] == f"… and {400 - (len(short) - 1)} more files"
    assert short[:-1] == files[: len(short) - 1]
    assert len(", ".join(short[:-1])) <= 200 and len(short) > 2


def test_reason_parts_are_shortened_separately() -> None:
    missing = ", ".join(f"out/{i}.csv" for i in range(300))
    updated = ", ".join(f"in/{i}.csv" for i in range(300))
    reason = f"Missing output files: {missing}; Input files updated by another job: {updated}"
    short = shorten_reason(reason, max_chars=200)
    first, second = short.split("; ")
    assert first.startswith("Missing output files: out/0.csv, out/1.csv") and first.endswith("more files")
    assert second.startswith("Input files updated by another job: in/0.csv") and second.endswith("more files")
    assert len(short) < 500
    assert shorten_reason("Forced execution") == "Forced execution"


def test_filter_rewrites_records_of_the_snakemake_logger_and_installs_once() -> None:
    install_short_job_info("verbeval-test-logger", max_chars=50)
    install_short_job_info("verbeval-test-logger", max_chars=50)
    logger = logging.getLogger("verbeval-test-logger")
    assert sum(isinstance(f, ShortJobInfo) for f in logger.filters) == 1
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger.addHandler(Keep())
    logger.propagate = False
    logger.warning("job", extra={"input": [f"f{i}" for i in range(100)], "output": ["o"], "reason": "Forced execution"})
    (record,) = seen
    assert record.input[-1] == f"… and {100 - (len(record.input) - 1)} more files"  # type: ignore[attr-defined]
    assert record.output == ["o"] and record.reason == "Forced execution"  # type: ignore[attr-defined]
