"""Readers of the published agreement template files, and the columns of the template table.

The normalised table (:data:`TEMPLATE_COLUMNS`) holds, per row, the left and right context around
the verb, the correct and incorrect verb forms and the number (``singular`` / ``plural``) of the
correct verb, and the row's lexical items (:mod:`verbeval.agreement.data.items`); rejected rows go
to a table with :data:`REJECT_COLUMNS`.

Two published formats are understood (users' own pairs: :mod:`verbeval.agreement.data.custom_pairs`):

``ml_jsonl``
    Marvin & Linzen (2018) templates as released with Newman et al. (2021): one JSON object per
    line with ``sentence_good``, ``sentence_bad`` and ``label`` (-1 = singular, -2 = plural; e.g.
    "the authors laugh" carries -2).
``blimp_jsonl``
    The original BLiMP release (Warstadt et al. 2020): ``sentence_good`` and ``sentence_bad``,
    no number label. The label is derived from the two verb forms by
    :func:`verbeval.agreement.data.minimal_pairs.derive_number`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from verbeval.agreement.data.errata import Erratum
from verbeval.agreement.data.items import ml_subject, verb_lemma
from verbeval.agreement.data.minimal_pairs import Number, derive_number, split_minimal_pair
from verbeval.core.errors import InputError
from verbeval.core.io import describe_json_error

log = logging.getLogger(__name__)

TemplateFormat = Literal["ml_jsonl", "blimp_jsonl"]

#: Column name -> dtype of the normalised template table, in order.
TEMPLATE_COLUMNS: dict[str, str] = {
    "group": "str",
    "source": "str",
    "line": "int64",
    "left": "str",
    "right": "str",
    "correct": "str",
    "incorrect": "str",
    "label": "str",
    "plural": "bool",
    "pair_id": "str",
    "note": "str",
    "subject_item": "str",
    "verb_item": "str",
}
#: Column name -> dtype of the table of rejected rows.
REJECT_COLUMNS: dict[str, str] = {"source": "str", "line": "int64", "reason": "str", "raw": "str"}

FORMATS: tuple[str, ...] = ("ml_jsonl", "blimp_jsonl")

#: Number label of the refining-tse release.
ML_LABELS: dict[int, Number] = {-1: "singular", -2: "plural"}


# --------------------------------------------------------------------------- reading files


def template_row(
    group: str,
    source: str,
    line: int,
    left: str,
    right: str,
    correct: str,
    incorrect: str,
    label: str,
    pair_id: str = "",
    note: str = "",
    subject_item: str = "",
) -> dict[str, object]:
    """One row of the template table (its columns in order; ``plural`` from ``label``, ``verb_item``
    from the two forms: :mod:`verbeval.agreement.data.items`)."""
    return {
        "group": group,
        "source": source,
        "line": line,
        "left": left,
        "right": right,
        "correct": correct,
        "incorrect": incorrect,
        "label": label,
        "plural": label == "plural",
        "pair_id": pair_id,
        "note": note,
        "subject_item": subject_item,
        "verb_item": verb_lemma(correct, incorrect),
    }


def _read_text(p: Path, encoding: str) -> str:
    """The whole file, or :class:`InputError` naming it (missing, unreadable, not ``encoding``)."""
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except OSError as exc:
        raise InputError(p, f"cannot read file: {exc.strerror or exc}") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            p,
            f"not {exc.encoding.removesuffix('-sig').upper()} text: byte 0x{data[exc.start]:02x} at "
            f"column {column} ({exc.reason}); save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
            line,
        ) from None


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only (``\\r\\n`` too): ``str.splitlines`` also splits at U+2028 and
    other characters that JSON allows inside a string."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _empty(columns: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in columns.items()})


def _typed(records: list[dict[str, Any]], columns: Mapping[str, str]) -> pd.DataFrame:
    if not records:
        return _empty(columns)
    df = pd.DataFrame.from_records(records, columns=list(columns))
    return df.astype(dict(columns))


def _parse_row(raw: str, fmt: str) -> tuple[str, str, str, str, Number]:
    """Parse one JSON line into ``(left, right, correct, incorrect, label)``; ValueError if bad."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({describe_json_error(exc)})") from None
    if not isinstance(obj, dict):
        raise ValueError("a JSON object is expected")
    missing = [k for k in ("sentence_good", "sentence_bad") if k not in obj]
    if fmt == "ml_jsonl" and "label" not in obj:
        missing.append("label")
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    good, bad = obj["sentence_good"], obj["sentence_bad"]
    if not isinstance(good, str) or not isinstance(bad, str):
        raise ValueError("sentence_good and sentence_bad must be strings")
    left, right, correct, incorrect = split_minimal_pair(good, bad)
    if not left:
        raise ValueError("the verb is the first word: no left context")
    if fmt == "ml_jsonl":
        raw_label = obj["label"]
        if isinstance(raw_label, bool) or not isinstance(raw_label, int) or raw_label not in ML_LABELS:
            raise ValueError(f"unknown label {raw_label!r} (expected -1 singular or -2 plural)")
        label = ML_LABELS[raw_label]
    else:
        label = derive_number(correct, incorrect)
    return left, right, correct, incorrect, label


def read_template_file(
    path: str | Path,
    fmt: TemplateFormat,
    source: str,
    group: str,
    skip_bad_rows: bool = False,
    errata: Mapping[int, str | Erratum] | None = None,
    drop_flagged: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read one template file into ``(rows, rejects)``.

    ``errata`` maps 1-based line numbers of known-bad rows of the published file (see
    :func:`load_errata`) to an :class:`Erratum` (a bare reason string means ``reject``). A
    ``reject`` erratum always goes to ``rejects`` and never stops the run; a ``flag`` erratum (a
    well-formed row with a known problem, e.g. an ungrammatical sentence marked good) is kept,
    as the paper scored it, unless ``drop_flagged``, in which case it goes to ``rejects`` too.

    ``rows`` has the columns of :data:`TEMPLATE_COLUMNS` (``line`` is the 1-based line in the
    file); ``rejects`` has :data:`REJECT_COLUMNS`. Blank lines are ignored.

    Raises:
        InputError: on the first malformed row (invalid JSON, missing fields, identical sentences,
            sentences differing in more than one word or in length, unknown or underivable label),
            located at ``path:line``, unless ``skip_bad_rows``, in which case such rows go to
            ``rejects``. Also when the file cannot be read, and when it yields no row at all (empty,
            or every row rejected), unless ``skip_bad_rows`` (then a warning).
        ValueError: for an unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown template format {fmt!r}; expected one of {', '.join(FORMATS)}")
    p = Path(path)
    text = _read_text(p, "utf-8")
    rows: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    known = {k: (v if isinstance(v, Erratum) else Erratum("reject", v)) for k, v in (errata or {}).items()}
    seen: set[int] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        err = known.get(lineno)
        if err is not None:
            seen.add(lineno)
            if err.action == "reject":
                rejects.append({"source": source, "line": lineno, "reason": f"known erratum: {err.reason}", "raw": raw})
                continue
            if drop_flagged:
                rejects.append(
                    {"source": source, "line": lineno, "reason": f"flagged erratum, dropped: {err.reason}", "raw": raw}
                )
                continue
        try:
            left, right, correct, incorrect, label = _parse_row(raw, fmt)
        except ValueError as exc:
            if not skip_bad_rows:
                raise InputError(p, str(exc), lineno) from None
            rejects.append({"source": source, "line": lineno, "reason": str(exc), "raw": raw})
            continue
        subject = ml_subject(left) if fmt == "ml_jsonl" else ""  # BLiMP: not recovered (docs/data.md)
        rows.append(template_row(group, source, lineno, left, right, correct, incorrect, label, subject_item=subject))
    if known:
        missing = sorted(set(known) - seen)
        if missing:
            raise InputError(p, f"errata list names line(s) {missing} that the file does not have")
        flagged = {k for k, e in known.items() if e.action == "flag"}
        if flagged and not drop_flagged:
            log.warning(
                "%s: kept %d flagged erratum row(s) (agreement.drop_flagged_errata drops them)", p, len(flagged)
            )
    if rejects:
        log.warning("%s: skipped %d row(s) (%d known errata)", p, len(rejects), len(known))
    _check_nonempty(p, rows, rejects, skip_bad_rows, source, group)
    return _typed(rows, TEMPLATE_COLUMNS), _typed(rejects, REJECT_COLUMNS)


def _check_nonempty(
    p: Path, rows: list[dict[str, Any]], rejects: list[dict[str, Any]], skip_bad_rows: bool, source: str, group: str
) -> None:
    """A file that yields no row is an error (a warning under ``skip_bad_rows``)."""
    if rows:
        return
    if rejects:
        first = rejects[0]
        reason = (
            f"no usable template rows: all {len(rejects)} row(s) rejected "
            f"(first, line {first['line']}: {first['reason']})"
        )
    else:
        reason = "no template rows: the file is empty"
    if not skip_bad_rows:
        raise InputError(p, reason)
    log.warning("%s: %s; source %r contributes nothing to group %r (skip_bad_rows)", p, reason, source, group)
