"""Users' own minimal pairs: the ``agreement.custom_groups`` entries and their pair files.

:func:`custom_groups` validates the config entries into :class:`CustomGroup` objects,
:func:`check_sha256` checks a file against its pinned digest, and :func:`read_custom_pairs` reads a
JSONL or CSV pair file (a minimal pair or one already split around the verb per record) into the
tables of :mod:`verbeval.agreement.data.template_files`, refusing control characters
(:func:`control_character`), repeated pairs and labels that contradict the verb forms.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from verbeval.agreement.data.minimal_pairs import (
    NUMBERS,
    Number,
    _split_punct,
    _strip_final_period,
    derive_number,
    split_minimal_pair,
    suspicious_pair,
)
from verbeval.agreement.data.template_files import (
    REJECT_COLUMNS,
    TEMPLATE_COLUMNS,
    _check_nonempty,
    _lines,
    _read_text,
    _typed,
    template_row,
)
from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import describe_json_error

log = logging.getLogger(__name__)

#: formats of a user's pair file (``agreement.custom_groups[].format``)
CUSTOM_FORMATS: tuple[str, ...] = ("jsonl", "csv")
#: file extension -> format, when ``format`` is not given
CUSTOM_EXTENSIONS: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
#: the two column sets of a pair file: a minimal pair, or the pair already split around the verb
PAIR_FIELDS: tuple[str, ...] = ("sentence_good", "sentence_bad")
SPLIT_FIELDS: tuple[str, ...] = ("left", "right", "correct", "incorrect", "label")
#: optional in either form (``label`` is optional in the pair form), kept in the table as pair_id/note
OPTIONAL_FIELDS: tuple[str, ...] = ("id", "note", "label")
_ALLOWED_FIELDS = frozenset(PAIR_FIELDS + SPLIT_FIELDS + OPTIONAL_FIELDS)
_GROUP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class CustomGroup:
    """A group of the user's own minimal pairs (one entry of ``agreement.custom_groups``).

    Its rows get ``source`` = ``id`` in the template table; ``sha256`` (lowercase) is checked
    before the file is read when given.
    """

    id: str
    name: str
    path: Path
    format: str
    sha256: str | None = None

    @property
    def source(self) -> str:
        return self.id


def custom_format(path: str | Path, fmt: str | None = None) -> str:
    """``fmt`` if given, else the format of ``path``'s extension (:data:`CUSTOM_EXTENSIONS`).

    Raises:
        VerbevalError: for an unknown ``fmt``, or an unknown extension without ``fmt``.
    """
    if fmt is not None:
        if fmt not in CUSTOM_FORMATS:
            raise VerbevalError(f"{path}: format {fmt!r} is not one of {', '.join(CUSTOM_FORMATS)}")
        return fmt
    found = CUSTOM_EXTENSIONS.get(Path(path).suffix.lower())
    if found is None:
        raise VerbevalError(
            f"{path}: cannot tell the format from the extension "
            f"({', '.join(CUSTOM_EXTENSIONS)}); set format: jsonl or csv"
        )
    return found


def custom_groups(
    entries: Sequence[Mapping[str, Any]], known_groups: Sequence[Mapping[str, Any]] = ()
) -> list[CustomGroup]:
    """Validate ``agreement.custom_groups`` entries (``id``, ``path``, optional ``name``, ``sha256``,
    ``format``, ``description``) into :class:`CustomGroup` objects, in the given order.

    ``known_groups`` are the groups of ``agreement.groups_file``: a custom id may be neither one of
    their ids nor one of their source names. ``name`` defaults to ``id``.

    Raises:
        VerbevalError: naming the entry, for a bad or repeated id, an id that clashes with a paper
            group or source, a sha256 that is not 64 hex digits, an empty path or a bad format.
    """
    taken = {g["id"]: "a group of agreement.groups_file" for g in known_groups}
    taken.update({s: "a source of agreement.groups_file" for g in known_groups for s in g["sources"]})
    out: list[CustomGroup] = []
    for n, entry in enumerate(entries):
        gid = entry.get("id")
        where = f"agreement.custom_groups[{n}]"
        if not isinstance(gid, str) or not _GROUP_ID.fullmatch(gid):
            raise VerbevalError(
                f"{where}: id {gid!r} must be letters, digits, '_' or '-' (not starting with '_' or '-')"
            )
        where = f"{where} ({gid})"
        if gid in taken:
            raise VerbevalError(f"{where}: id {gid!r} is already {taken[gid]}")
        taken[gid] = "another custom group"
        path = entry.get("path")
        if not isinstance(path, (str, Path)) or not str(path):
            raise VerbevalError(f"{where}: 'path' must be a non-empty string")
        sha = entry.get("sha256")
        if sha is not None and (not isinstance(sha, str) or not _SHA256.fullmatch(sha)):
            raise VerbevalError(f"{where}: sha256 {sha!r} is not 64 hexadecimal digits")
        name = entry.get("name") or gid
        try:
            fmt = custom_format(path, entry.get("format"))
        except VerbevalError as exc:
            raise VerbevalError(f"{where}: {exc}") from None
        out.append(CustomGroup(gid, str(name), Path(path), fmt, sha.lower() if sha else None))
    return out


def check_sha256(path: str | Path, expected: str) -> None:
    """Raise InputError naming ``path``, the expected and the actual sha256 when they differ."""
    from verbeval.core.io import sha256_file

    try:
        actual = sha256_file(path)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc}") from None
    if actual != expected.lower():
        raise InputError(
            path,
            f"sha256 mismatch: expected {expected.lower()}, got {actual} (if you changed the "
            "file on purpose, put the new sha256 into agreement.custom_groups)",
        )


def _text_field(obj: Mapping[str, Any], key: str, allow_empty: bool = False) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ValueError(f"empty field {key!r}")
    return value


def _verb_field(obj: Mapping[str, Any], key: str) -> str:
    word = _text_field(obj, key).strip()
    if len(word.split()) != 1:
        raise ValueError(f"field {key!r} must be one word, got {word!r}")
    pre, core, post = _split_punct(word)
    if pre or post or not core:
        raise ValueError(f"field {key!r} has punctuation ({word!r}): put it into left/right")
    return word


def _checked_label(label: Number | None, correct: str, incorrect: str) -> Number:
    """The given label, checked against the one derived from the verb forms when that can be derived."""
    try:
        derived: Number | None = derive_number(correct, incorrect)
        why = ""
    except ValueError as exc:
        derived, why = None, str(exc)
    if label is None:
        if derived is None:
            raise ValueError(f"{why}; give the number of the correct form in a 'label' field (singular or plural)")
        return derived
    if derived is not None and derived != label:
        raise ValueError(
            f"label {label!r} contradicts the verb forms: {correct!r}/{incorrect!r} make the correct form {derived}"
        )
    return label


def _custom_row(obj: Any) -> tuple[str, str, str, str, Number, str, str]:
    """One record of a pair file -> ``(left, right, correct, incorrect, label, pair_id, note)``."""
    if not isinstance(obj, dict):
        raise ValueError("a JSON object is expected")
    unknown = sorted(set(obj) - _ALLOWED_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown field(s) {', '.join(map(repr, unknown))} (expected sentence_good, sentence_bad "
            "or left, right, correct, incorrect, label; optional id, note)"
        )
    split_keys = [k for k in SPLIT_FIELDS if k != "label" and k in obj]
    pair_keys = [k for k in PAIR_FIELDS if k in obj]
    if pair_keys and split_keys:
        raise ValueError(
            f"mixes the two forms ({', '.join(pair_keys + split_keys)}): use sentence_good/"
            "sentence_bad or left/right/correct/incorrect/label"
        )
    raw_label = obj.get("label")
    label: Number | None = None
    if raw_label is not None and raw_label != "":
        if raw_label not in NUMBERS:
            raise ValueError(f"label {raw_label!r} is not singular or plural")
        label = raw_label
    if pair_keys or not split_keys:
        missing = [k for k in PAIR_FIELDS if k not in obj]
        if missing:
            raise ValueError(f"missing field(s): {', '.join(missing)} (or left, right, correct, incorrect, label)")
        good, bad = _text_field(obj, "sentence_good"), _text_field(obj, "sentence_bad")
        left, right, correct, incorrect = split_minimal_pair(good, bad)
        if not left:
            raise ValueError("the verb is the first word: no left context")
    else:
        missing = [k for k in SPLIT_FIELDS if k not in obj or (k == "label" and label is None)]
        if missing:
            raise ValueError(f"missing field(s): {', '.join(missing)}")
        left = " ".join(_text_field(obj, "left").split())
        right = " ".join(_strip_final_period(_text_field(obj, "right", allow_empty=True).split()))
        correct, incorrect = _verb_field(obj, "correct"), _verb_field(obj, "incorrect")
        if correct == incorrect:
            raise ValueError(f"correct and incorrect are the same form ({correct!r})")
    label = _checked_label(label, correct, incorrect)
    pair_id, note = obj.get("id"), obj.get("note")
    if pair_id is None:
        pair_id = ""
    elif isinstance(pair_id, bool) or not isinstance(pair_id, (str, int)):
        raise ValueError(f"field 'id' must be a string or an integer, not {type(pair_id).__name__}")
    if note is None:
        note = ""
    elif not isinstance(note, str):
        raise ValueError(f"field 'note' must be a string, not {type(note).__name__}")
    return left, right, correct, incorrect, label, str(pair_id).strip(), note.strip()


#: characters refused in a pair file: the C0 controls but tab, line feed and carriage return (the
#: formats' whitespace), DEL and the C1 controls but NEL (U+0085, a line break, like U+2028, in
#: Unicode: text inside a JSON string). A NUL or BEL in a sentence is an export or encoding
#: accident that would reach the models' contexts unseen.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f]")
_C0_NAMES = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()
_REMOVE_CONTROL = "remove it (tab and line breaks are the only control characters allowed)"


def control_character(text: str) -> tuple[int, str] | None:
    """``(position, description)`` of the first control character :data:`_CONTROL` refuses in
    ``text`` (position 1-based), e.g. ``(5, "a control character U+0000 (NUL)")``; else None."""
    m = _CONTROL.search(text)
    if m is None:
        return None
    code = ord(m.group())
    name = _C0_NAMES[code] if code < 0x20 else "DEL" if code == 0x7F else "C1 control"
    return m.start() + 1, f"a control character U+{code:04X} ({name})"


def _control_in_fields(obj: Any, kind: str) -> ValueError | None:
    """A ValueError naming the first field (``kind``: field or column) whose value holds a control
    character (a JSON-escaped ``\\u0000`` too), else None."""
    if not isinstance(obj, dict):
        return None
    for key, value in obj.items():
        control = control_character(value) if isinstance(value, str) else None
        if control is not None:
            return ValueError(f"{kind} {key!r}: {control[1]} at character {control[0]}: {_REMOVE_CONTROL}")
    return None


def _escape_controls(raw: str) -> str:
    """``raw`` with each refused control character written as ``\\xNN`` (a rejected row as kept)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", raw)


def _jsonl_records(text: str) -> Iterator[tuple[int, str, Any]]:
    """``(line, raw, object or ValueError)`` of each non-blank line."""
    for lineno, raw in enumerate(_lines(text), start=1):
        if not raw.strip():
            continue
        control = control_character(raw)
        if control is not None:
            obj: Any = ValueError(f"{control[1]} at column {control[0]}: {_REMOVE_CONTROL}")
        else:
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                obj = ValueError(f"invalid JSON ({describe_json_error(exc)})")
        yield lineno, raw, obj


def _csv_records(p: Path, text: str) -> Iterator[tuple[int, str, Any]]:
    """``(first line, raw, {column: value} or ValueError)`` of each record after the header.

    Raises:
        InputError: at line 1 for a missing header, a repeated or unknown column.
    """
    lines = _lines(text)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        return
    except csv.Error as exc:
        raise InputError(p, f"invalid CSV header: {exc}", 1) from None
    for name in header:
        control = control_character(name)
        if control is not None:
            raise InputError(p, f"column name {name!r}: {control[1]} at character {control[0]}: {_REMOVE_CONTROL}", 1)
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise InputError(p, f"repeated column(s) {', '.join(repeated)}", 1)
    unknown = [h for h in header if h not in _ALLOWED_FIELDS]
    if unknown:
        raise InputError(
            p,
            f"unknown column(s) {', '.join(map(repr, unknown))} (expected sentence_good, "
            "sentence_bad or left, right, correct, incorrect, label; optional id, note)",
            1,
        )
    mixed = [h for h in header if h in PAIR_FIELDS or h in SPLIT_FIELDS[:4]]
    if any(h in PAIR_FIELDS for h in mixed) and any(h in SPLIT_FIELDS for h in mixed):
        raise InputError(
            p,
            f"columns mix the two forms ({', '.join(mixed)}): use sentence_good/sentence_bad or "
            "left/right/correct/incorrect/label",
            1,
        )
    if any(h in header for h in PAIR_FIELDS) or not any(h in header for h in SPLIT_FIELDS):
        wanted, other = PAIR_FIELDS, "or left, right, correct, incorrect, label"
    else:
        wanted, other = SPLIT_FIELDS, "or sentence_good, sentence_bad"
    missing = [h for h in wanted if h not in header]
    if missing:
        raise InputError(p, f"missing column(s) {', '.join(missing)} ({other})", 1)
    last = reader.line_num
    while True:
        start = last + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, lines[start - 1] if start <= len(lines) else "", ValueError(f"invalid CSV: {exc}")
            return
        last = reader.line_num
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # a blank line
        raw = "\n".join(lines[start - 1 : last])
        if len(fields) != len(header):
            yield start, raw, ValueError(f"expected {len(header)} fields (as the header), got {len(fields)}")
        else:
            yield start, raw, dict(zip(header, fields))


def read_custom_pairs(
    path: str | Path, fmt: str, source: str, group: str, skip_bad_rows: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a user's own minimal-pair file (JSONL or CSV) into ``(rows, rejects)``.

    Each record is either a minimal pair (``sentence_good``, ``sentence_bad``, optional ``label``)
    split with :func:`split_minimal_pair`, or an already split one (``left``, ``right``,
    ``correct``, ``incorrect``, ``label``); ``label`` is ``singular`` or ``plural``. When the
    number can be derived from the verb forms (:func:`derive_number`) it must agree with a given
    ``label``; when it cannot, ``label`` is required. Optional ``id`` and ``note`` are kept (as
    ``pair_id`` and ``note``). ``line`` is the record's first line in the file (for CSV, the header
    is line 1). The tables are those of :func:`read_template_file`.

    Raises:
        InputError: at ``path:line`` for an invalid record (bad JSON or CSV, a control character
            such as NUL, raw or JSON-escaped; unknown, missing or empty field, both forms mixed,
            sentences that differ in more than one word, a bad or contradicting label, a repeated
            pair or id), unless ``skip_bad_rows`` (the record goes to
            ``rejects``); at ``path:1`` for a bad CSV header; at ``path`` when the file cannot be
            read or yields no row (a warning under ``skip_bad_rows``).
        ValueError: for an unknown ``fmt``.
    """
    if fmt not in CUSTOM_FORMATS:
        raise ValueError(f"unknown pair file format {fmt!r}; expected one of {', '.join(CUSTOM_FORMATS)}")
    p = Path(path)
    text = _read_text(p, "utf-8-sig")  # a CSV saved by a spreadsheet may start with a byte-order mark
    records = _jsonl_records(text) if fmt == "jsonl" else _csv_records(p, text)
    rows: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    seen_pairs: dict[tuple[str, str, str, str], int] = {}
    seen_ids: dict[str, int] = {}
    doubtful: list[tuple[int, str]] = []
    for lineno, raw, obj in records:
        try:
            if isinstance(obj, ValueError):
                raise obj
            control = _control_in_fields(obj, "column" if fmt == "csv" else "field")
            if control is not None:
                raise control
            left, right, correct, incorrect, label, pair_id, note = _custom_row(obj)
            key = (left, right, correct, incorrect)
            if key in seen_pairs:
                raise ValueError(f"duplicate pair: the same as line {seen_pairs[key]}")
            if pair_id and pair_id in seen_ids:
                raise ValueError(f"duplicate id {pair_id!r}: already on line {seen_ids[pair_id]}")
        except ValueError as exc:
            if not skip_bad_rows:
                raise InputError(p, str(exc), lineno) from None
            rejects.append({"source": source, "line": lineno, "reason": str(exc), "raw": _escape_controls(raw)})
            continue
        seen_pairs[key] = lineno
        if pair_id:
            seen_ids[pair_id] = lineno
        why = suspicious_pair(left, correct, incorrect, isinstance(obj, dict) and obj.get("label") is not None)
        if why:
            doubtful.append((lineno, why))
        rows.append(template_row(group, source, lineno, left, right, correct, incorrect, label, pair_id, note))
    if rejects:
        log.warning("%s: skipped %d row(s)", p, len(rejects))
    if doubtful:
        lines = ", ".join(str(n) for n, _ in doubtful[:10]) + (", ..." if len(doubtful) > 10 else "")
        log.warning(
            "%s:%d: %s (%d pair(s) like this, line(s) %s): check that the word that differs is the verb",
            p,
            doubtful[0][0],
            doubtful[0][1],
            len(doubtful),
            lines,
        )
    _check_nonempty(p, rows, rejects, skip_bad_rows, source, group)
    return _typed(rows, TEMPLATE_COLUMNS), _typed(rejects, REJECT_COLUMNS)
