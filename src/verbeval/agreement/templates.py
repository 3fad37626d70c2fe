"""Agreement templates: reading minimal pairs, normalising them into one table, rendering contexts.

A template row is a minimal pair ``sentence_good`` / ``sentence_bad`` that differs in exactly one
whitespace token, the verb. The normalised table (:data:`TEMPLATE_COLUMNS`) holds, per row, the
left and right context around the verb, the correct and incorrect verb forms and the number
(``singular`` / ``plural``) of the correct verb.

Two published formats are understood (users' own pairs: :func:`read_custom_pairs`):

``ml_jsonl``
    Marvin & Linzen (2018) templates as released with Newman et al. (2021): one JSON object per
    line with ``sentence_good``, ``sentence_bad`` and ``label`` (-1 = singular, -2 = plural; e.g.
    "the authors laugh" carries -2).
``blimp_jsonl``
    The original BLiMP release (Warstadt et al. 2020): ``sentence_good`` and ``sentence_bad``,
    no number label. The label is derived from the two verb forms by :func:`derive_number`.
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
from typing import Any, Literal

import numpy as np
import pandas as pd
import yaml
from lemminflect import getAllLemmas, getInflection, getLemma

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import describe_json_error, load_yaml

log = logging.getLogger(__name__)

Number = Literal["singular", "plural"]
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
}
#: Column name -> dtype of the table of rejected rows.
REJECT_COLUMNS: dict[str, str] = {"source": "str", "line": "int64", "reason": "str", "raw": "str"}

FORMATS: tuple[str, ...] = ("ml_jsonl", "blimp_jsonl")
NUMBERS: tuple[Number, Number] = ("singular", "plural")

#: Number label of the refining-tse release.
ML_LABELS: dict[int, Number] = {-1: "singular", -2: "plural"}

# Punctuation stripped from around the differing word (the apostrophe is part of "isn't").
_WORD_PUNCT = ".,;:!?\"()[]{}"

# Closed-class verb forms whose number does not follow the regular -s pattern.
_CLOSED_CLASS: dict[str, Number] = {
    "is": "singular", "was": "singular", "am": "singular",
    "isn't": "singular", "wasn't": "singular",
    "are": "plural", "were": "plural", "aren't": "plural", "weren't": "plural",
    "has": "singular", "hasn't": "singular", "have": "plural", "haven't": "plural",
    "does": "singular", "doesn't": "singular", "do": "plural", "don't": "plural",
}


# --------------------------------------------------------------------------- minimal pairs


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
        raise InputError(p, f"not {exc.encoding.removesuffix('-sig').upper()} text: byte 0x{data[exc.start]:02x} at "
                            f"column {column} ({exc.reason}); save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
                         line) from None


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only (``\\r\\n`` too): ``str.splitlines`` also splits at U+2028 and
    other characters that JSON allows inside a string."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _strip_final_period(tokens: list[str]) -> list[str]:
    """Drop a sentence-final period, whether attached to the last word or a token of its own."""
    if tokens and tokens[-1] == ".":
        return tokens[:-1]
    if tokens and tokens[-1].endswith("."):
        return [*tokens[:-1], tokens[-1][:-1]]
    return tokens


def _split_punct(word: str) -> tuple[str, str, str]:
    """Split ``word`` into (leading punctuation, core, trailing punctuation)."""
    core = word.strip(_WORD_PUNCT)
    if not core:
        return word, "", ""
    start = word.index(core)
    return word[:start], core, word[start + len(core):]


def split_minimal_pair(good: str, bad: str) -> tuple[str, str, str, str]:
    """Split a minimal pair into ``(left, right, correct, incorrect)``.

    Both sentences are whitespace-tokenised and a sentence-final period is removed. They must have
    the same number of tokens and differ in exactly one token, the verb; punctuation around that
    token is stripped from the verb forms (it must be the same in both sentences and is kept in
    the context: a leading mark ends ``left``, a trailing one starts ``right``). ``right`` is
    ``''`` when the verb is the last word.

    Raises:
        ValueError: with the reason when the sentences are identical, differ in more than one
            word, have different lengths, or the differing word is empty or carries different
            punctuation.
    """
    g = _strip_final_period(good.split())
    b = _strip_final_period(bad.split())
    if not g or not b:
        raise ValueError("empty sentence")
    if len(g) != len(b):
        raise ValueError(f"different lengths ({len(g)} vs {len(b)} words)")
    diff = [i for i, (x, y) in enumerate(zip(g, b)) if x != y]
    if not diff:
        raise ValueError("sentences are identical")
    if len(diff) > 1:
        words = ", ".join(f"{g[i]!r}/{b[i]!r}" for i in diff)
        raise ValueError(f"sentences differ in more than one word ({words})")
    i = diff[0]
    g_pre, correct, g_post = _split_punct(g[i])
    b_pre, incorrect, b_post = _split_punct(b[i])
    if not correct or not incorrect:
        raise ValueError(f"differing word is only punctuation ({g[i]!r}/{b[i]!r})")
    if (g_pre, g_post) != (b_pre, b_post):
        raise ValueError(f"sentences differ in punctuation ({g[i]!r}/{b[i]!r})")
    if correct == incorrect:
        raise ValueError(f"sentences differ only in punctuation ({g[i]!r}/{b[i]!r})")
    left_tokens = g[:i]
    right_tokens = g[i + 1:]
    if g_pre:
        left_tokens = [*left_tokens, g_pre]
    if g_post:
        right_tokens = [g_post, *right_tokens]
    return " ".join(left_tokens), " ".join(right_tokens), correct, incorrect


# --------------------------------------------------------------------------- number of a verb form


def _regular_number(correct: str, incorrect: str) -> set[Number]:
    """Numbers consistent with lemminflect for an open-class verb pair (empty when none fits)."""
    lemmas: set[str] = set()
    for word in (correct, incorrect):
        found = getAllLemmas(word, upos="VERB").get("VERB", ())
        lemmas.update(found or getLemma(word, upos="VERB", lemmatize_oov=True))
    decisions: set[Number] = set()
    for lemma in sorted(lemmas):
        third = set(getInflection(lemma, tag="VBZ"))
        base = set(getInflection(lemma, tag="VB")) | set(getInflection(lemma, tag="VBP")) | {lemma}
        base -= third
        if correct in third and incorrect in base:
            decisions.add("singular")
        elif correct in base and incorrect in third:
            decisions.add("plural")
    return decisions


def derive_number(correct: str, incorrect: str) -> Number:
    """Number of ``correct`` in a subject-verb agreement pair whose other member is ``incorrect``.

    Forms of *be*, *have* and *do* (including the negative contractions ``isn't``, ``wasn't``,
    ``aren't``, ``weren't``, ``hasn't``, ``haven't``, ``doesn't``, ``don't``) are looked up in a
    table; tense may differ between the two (``was``/``are``). For any other verb the correct
    form is singular iff it is the third-person-singular present (VBZ) of a lemma of the pair and
    the incorrect form is that lemma's base/non-3rd-person present (VB/VBP), and plural for the
    converse (lemmas and inflections from lemminflect).

    Raises:
        ValueError: when the number cannot be decided (both forms have the same number, a form
            is not a present-tense verb form of the other's lemma, or lemmas disagree).
    """
    c, i = correct.lower(), incorrect.lower()
    if c == i:
        raise ValueError(f"cannot derive number: identical forms {correct!r}/{incorrect!r}")
    nc, ni = _CLOSED_CLASS.get(c), _CLOSED_CLASS.get(i)
    if nc is not None or ni is not None:
        if nc is None or ni is None:
            raise ValueError(
                f"cannot derive number: {correct!r}/{incorrect!r} mixes an auxiliary with another verb"
            )
        if nc == ni:
            raise ValueError(f"cannot derive number: {correct!r} and {incorrect!r} are both {nc}")
        return nc
    decisions = _regular_number(c, i)
    if len(decisions) == 1:
        return decisions.pop()
    if not decisions:
        raise ValueError(
            f"cannot derive number: {correct!r}/{incorrect!r} is not a third-person-singular/"
            "plural present pair of one verb"
        )
    raise ValueError(f"cannot derive number: {correct!r}/{incorrect!r} is ambiguous")


# --------------------------------------------------------------------------- reading files


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
                rejects.append({"source": source, "line": lineno, "reason": f"flagged erratum, dropped: {err.reason}",
                                "raw": raw})
                continue
        try:
            left, right, correct, incorrect, label = _parse_row(raw, fmt)
        except ValueError as exc:
            if not skip_bad_rows:
                raise InputError(p, str(exc), lineno) from None
            rejects.append({"source": source, "line": lineno, "reason": str(exc), "raw": raw})
            continue
        rows.append({
            "group": group, "source": source, "line": lineno, "left": left, "right": right,
            "correct": correct, "incorrect": incorrect, "label": label,
            "plural": label == "plural", "pair_id": "", "note": "",
        })
    if known:
        missing = sorted(set(known) - seen)
        if missing:
            raise InputError(p, f"errata list names line(s) {missing} that the file does not have")
        flagged = {k for k, e in known.items() if e.action == "flag"}
        if flagged and not drop_flagged:
            log.warning("%s: kept %d flagged erratum row(s) (agreement.drop_flagged_errata drops them)", p, len(flagged))
    if rejects:
        log.warning("%s: skipped %d row(s) (%d known errata)", p, len(rejects), len(known))
    _check_nonempty(p, rows, rejects, skip_bad_rows, source, group)
    return _typed(rows, TEMPLATE_COLUMNS), _typed(rejects, REJECT_COLUMNS)


def _check_nonempty(p: Path, rows: list[dict[str, Any]], rejects: list[dict[str, Any]], skip_bad_rows: bool,
                    source: str, group: str) -> None:
    """A file that yields no row is an error (a warning under ``skip_bad_rows``)."""
    if rows:
        return
    if rejects:
        first = rejects[0]
        reason = (f"no usable template rows: all {len(rejects)} row(s) rejected "
                  f"(first, line {first['line']}: {first['reason']})")
    else:
        reason = "no template rows: the file is empty"
    if not skip_bad_rows:
        raise InputError(p, reason)
    log.warning("%s: %s; source %r contributes nothing to group %r (skip_bad_rows)", p, reason, source, group)


# --------------------------------------------------------------------------- users' own minimal pairs

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
        raise VerbevalError(f"{path}: cannot tell the format from the extension "
                            f"({', '.join(CUSTOM_EXTENSIONS)}); set format: jsonl or csv")
    return found


def custom_groups(entries: Sequence[Mapping[str, Any]], known_groups: Sequence[Mapping[str, Any]] = ()
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
            raise VerbevalError(f"{where}: id {gid!r} must be letters, digits, '_' or '-' (not starting with "
                                "'_' or '-')")
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
        raise InputError(path, f"sha256 mismatch: expected {expected.lower()}, got {actual} (if you changed the "
                               "file on purpose, put the new sha256 into agreement.custom_groups)")


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
        raise ValueError(f"label {label!r} contradicts the verb forms: {correct!r}/{incorrect!r} make the correct "
                         f"form {derived}")
    return label


#: words after which a differing word is a noun or adjective, not the finite verb of an agreement pair
_DETERMINERS = frozenset("a an the this that these those each every some any no my your his her its our their "
                         "several many few both all".split())


def suspicious_pair(left: str, correct: str, incorrect: str, label_given: bool) -> str | None:
    """Why a custom pair's differing word may not be its verb (``"the dog runs"/"the dogs runs"``),
    else None: it follows a determiner, or its number could not be derived from the forms and
    rests on the given label alone."""
    before = left.split()[-1].lower() if left.split() else ""
    if before in _DETERMINERS:
        return f"the differing word {correct!r}/{incorrect!r} follows {before!r}: a noun, not the verb?"
    if label_given:
        try:
            derive_number(correct, incorrect)
        except ValueError:
            return f"{correct!r}/{incorrect!r} is not a verb pair verbeval knows (the label alone gives the number)"
    return None


def _custom_row(obj: Any) -> tuple[str, str, str, str, Number, str, str]:
    """One record of a pair file -> ``(left, right, correct, incorrect, label, pair_id, note)``."""
    if not isinstance(obj, dict):
        raise ValueError("a JSON object is expected")
    unknown = sorted(set(obj) - _ALLOWED_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))} (expected sentence_good, sentence_bad "
                         "or left, right, correct, incorrect, label; optional id, note)")
    split_keys = [k for k in SPLIT_FIELDS if k != "label" and k in obj]
    pair_keys = [k for k in PAIR_FIELDS if k in obj]
    if pair_keys and split_keys:
        raise ValueError(f"mixes the two forms ({', '.join(pair_keys + split_keys)}): use sentence_good/"
                         "sentence_bad or left/right/correct/incorrect/label")
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
_C0_NAMES = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC "
             "FS GS RS US").split()
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
        raise InputError(p, f"unknown column(s) {', '.join(map(repr, unknown))} (expected sentence_good, "
                            "sentence_bad or left, right, correct, incorrect, label; optional id, note)", 1)
    mixed = [h for h in header if h in PAIR_FIELDS or h in SPLIT_FIELDS[:4]]
    if any(h in PAIR_FIELDS for h in mixed) and any(h in SPLIT_FIELDS for h in mixed):
        raise InputError(p, f"columns mix the two forms ({', '.join(mixed)}): use sentence_good/sentence_bad or "
                            "left/right/correct/incorrect/label", 1)
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
        raw = "\n".join(lines[start - 1:last])
        if len(fields) != len(header):
            yield start, raw, ValueError(f"expected {len(header)} fields (as the header), got {len(fields)}")
        else:
            yield start, raw, dict(zip(header, fields))


def read_custom_pairs(
    path: str | Path,
    fmt: str,
    source: str,
    group: str,
    skip_bad_rows: bool = False,
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
        rows.append({
            "group": group, "source": source, "line": lineno, "left": left, "right": right,
            "correct": correct, "incorrect": incorrect, "label": label, "plural": label == "plural",
            "pair_id": pair_id, "note": note,
        })
    if rejects:
        log.warning("%s: skipped %d row(s)", p, len(rejects))
    if doubtful:
        lines = ", ".join(str(n) for n, _ in doubtful[:10]) + (", ..." if len(doubtful) > 10 else "")
        log.warning("%s:%d: %s (%d pair(s) like this, line(s) %s): check that the word that differs is the verb",
                    p, doubtful[0][0], doubtful[0][1], len(doubtful), lines)
    _check_nonempty(p, rows, rejects, skip_bad_rows, source, group)
    return _typed(rows, TEMPLATE_COLUMNS), _typed(rejects, REJECT_COLUMNS)


def run_groups(groups: Sequence[Mapping[str, Any]], custom: Sequence[CustomGroup] = ()) -> list[dict[str, Any]]:
    """The groups of a run in table order: ``groups`` (from the groups file), then the custom ones."""
    out = [{"id": g["id"], "name": g["name"], "sources": list(g["sources"])} for g in groups]
    return out + [{"id": c.id, "name": c.name, "sources": [c.source]} for c in custom]


def write_groups(path: str | Path, groups: Sequence[Mapping[str, Any]]) -> None:
    """Write ``groups`` as a groups file that :func:`load_groups` reads (atomically)."""
    from verbeval.core.io import write_text

    head = "# The agreement groups of this run, in table order (verbeval templates --groups-out).\n"
    write_text(path, head + yaml.safe_dump({"groups": [dict(g) for g in groups]}, sort_keys=False,
                                           allow_unicode=True))


# --------------------------------------------------------------------------- subsampling


def _subsample_positions(labels: np.ndarray, k: int) -> np.ndarray:
    """Evenly spaced positions out of ``len(labels)``, swapping in any label left out."""
    n = len(labels)
    if k >= n:
        return np.arange(n)
    chosen = np.unique(np.rint(np.linspace(0, n - 1, k)).astype(np.int64))
    for value in pd.unique(labels):
        if (labels[chosen] == value).any():
            continue
        positions = np.flatnonzero(labels == value)
        wanted = int(positions[len(positions) // 2])
        # Replace the chosen row nearest to ``wanted`` whose label stays represented.
        counts = pd.Series(labels[chosen]).value_counts()
        replaceable = np.flatnonzero(counts.reindex(labels[chosen]).to_numpy() > 1)
        if replaceable.size == 0:
            continue  # k smaller than the number of labels: nothing can be swapped
        victim = replaceable[np.argmin(np.abs(chosen[replaceable] - wanted))]
        chosen[victim] = wanted
        chosen = np.sort(chosen)
    return chosen


def subsample(df: pd.DataFrame, max_rows_per_source: int | None) -> pd.DataFrame:
    """Deterministically keep at most ``max_rows_per_source`` rows of each source.

    Per source (in order of first appearance), rows are picked at evenly spaced positions
    (``np.linspace`` over the row positions, rounded, unique). If a label of the source is then
    missing, its middle row replaces the nearest picked row of an over-represented label, so that
    both labels stay represented whenever ``max_rows_per_source >= 2``. ``None`` keeps all rows.
    Row order is preserved; the index is reset.
    """
    if max_rows_per_source is None:
        return df.reset_index(drop=True)
    if isinstance(max_rows_per_source, bool) or int(max_rows_per_source) < 1:
        raise ValueError(f"max_rows_per_source must be a positive integer or None, not {max_rows_per_source!r}")
    k = int(max_rows_per_source)
    keep: list[np.ndarray] = []
    sources = df["source"].to_numpy()
    labels = df["label"].to_numpy()
    for source in pd.unique(sources):
        positions = np.flatnonzero(sources == source)
        keep.append(positions[_subsample_positions(labels[positions], k)])
    if not keep:
        return df.reset_index(drop=True)
    return df.iloc[np.sort(np.concatenate(keep))].reset_index(drop=True)


# --------------------------------------------------------------------------- groups and the table


#: group ids and source names of a groups file (as the config schema's ``identifier``)
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def load_groups(path: str | Path) -> list[dict[str, Any]]:
    """Read ``agreement_groups.yaml``: a list of ``{id, name, sources}`` in table order.

    Raises:
        InputError: when the file is missing, not YAML, or a group lacks an id/name/sources, has
            an empty or non-string entry, or an id or source repeats.
    """
    p = Path(path)
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except yaml.YAMLError as exc:
        raise InputError(p, f"invalid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list) or not data["groups"]:
        raise InputError(p, "expected a mapping with a non-empty list under 'groups'")
    groups: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_sources: dict[str, str] = {}
    for n, entry in enumerate(data["groups"], start=1):
        where = f"group #{n}"
        if not isinstance(entry, dict):
            raise InputError(p, f"{where}: expected a mapping")
        unknown = set(entry) - {"id", "name", "sources"}
        if unknown:
            raise InputError(p, f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        gid, name, sources = entry.get("id"), entry.get("name"), entry.get("sources")
        if not isinstance(gid, str) or not gid:
            raise InputError(p, f"{where}: 'id' must be a non-empty string")
        where = f"group {gid!r}"
        if not _IDENTIFIER.fullmatch(gid):
            raise InputError(p, f"{where}: an id may hold only letters, digits, '.', '_' and '-' "
                                "(it reaches file names and shell commands)")
        if gid in seen_ids:
            raise InputError(p, f"{where}: duplicate id")
        if not isinstance(name, str) or not name:
            raise InputError(p, f"{where}: 'name' must be a non-empty string")
        if not isinstance(sources, list) or not sources:
            raise InputError(p, f"{where}: 'sources' must be a non-empty list")
        for s in sources:
            if not isinstance(s, str) or not s:
                raise InputError(p, f"{where}: source names must be non-empty strings")
            if not _IDENTIFIER.fullmatch(s):
                raise InputError(p, f"{where}: source {s!r}: a source name may hold only letters, digits, "
                                    "'.', '_' and '-' (it reaches file names and shell commands)")
            if s in seen_sources:
                raise InputError(p, f"{where}: source {s!r} is already in group {seen_sources[s]!r}")
            seen_sources[s] = gid
        seen_ids.add(gid)
        groups.append({"id": gid, "name": name, "sources": list(sources)})
    return groups


ERRATA_COLUMNS = ("source", "line", "action", "reason")
#: the earlier format, without ``action`` (every row is ``reject``); still read
ERRATA_COLUMNS_V1 = ("source", "line", "reason")
#: ``reject``: the row is always rejected (not a usable pair); ``flag``: a usable pair with a known
#: problem (e.g. an ungrammatical sentence marked good), kept unless ``agreement.drop_flagged_errata``
ERRATA_ACTIONS = ("reject", "flag")


@dataclass(frozen=True)
class Erratum:
    action: str  # one of ERRATA_ACTIONS
    reason: str


def load_errata(path: str | Path) -> dict[str, dict[int, Erratum]]:
    """Known-bad rows of the published template files: CSV ``source,line,action,reason``.

    Line numbers refer to the exact file pinned by its sha256 in the manifest. ``action`` is
    ``reject`` or ``flag`` (:data:`ERRATA_ACTIONS`); a file in the earlier ``source,line,reason``
    format is read with every row ``reject``.
    """
    p = Path(path)
    try:
        df = pd.read_csv(p, dtype={"source": str, "line": "Int64", "action": str, "reason": str}, comment="#")
    except (OSError, ValueError) as exc:
        raise InputError(p, f"cannot read errata list: {exc}") from None
    if tuple(df.columns) == ERRATA_COLUMNS_V1:
        df.insert(2, "action", "reject")
    if tuple(df.columns) != ERRATA_COLUMNS:
        raise InputError(p, f"expected columns {','.join(ERRATA_COLUMNS)}, got {','.join(map(str, df.columns))}")
    out: dict[str, dict[int, Erratum]] = {}
    for i, r in enumerate(df.itertuples(index=False), start=2):
        if pd.isna(r.line) or int(r.line) < 1 or not isinstance(r.source, str) or not isinstance(r.reason, str):
            raise InputError(p, "each erratum needs a source, a line >= 1 and a reason", i)
        if r.action not in ERRATA_ACTIONS:
            raise InputError(p, f"action must be one of {', '.join(ERRATA_ACTIONS)}, not {r.action!r}", i)
        if int(r.line) in out.get(r.source, {}):
            raise InputError(p, f"duplicate erratum for {r.source} line {int(r.line)}", i)
        out.setdefault(r.source, {})[int(r.line)] = Erratum(str(r.action), r.reason)
    return out


def flagged_errata(errata: Mapping[str, Mapping[int, Erratum]], sources: Sequence[str] | None = None) -> pd.DataFrame:
    """The ``flag`` errata (``source, line, reason``) of ``sources`` (all when None), in file order."""
    recs = [{"source": s, "line": line, "reason": e.reason}
            for s, rows in errata.items() if sources is None or s in sources
            for line, e in sorted(rows.items()) if e.action == "flag"]
    return pd.DataFrame(recs, columns=["source", "line", "reason"]).astype({"line": "int64"})


def build_template_table(
    inputs: Mapping[str, tuple[str | Path, str]],
    groups: Sequence[Mapping[str, Any]],
    skip_bad_rows: bool = False,
    max_rows_per_source: int | None = None,
    errata: Mapping[str, Mapping[int, str | Erratum]] | None = None,
    drop_flagged: bool = False,
    custom: Sequence[CustomGroup] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every source of ``groups``, then every ``custom`` group's file; return ``(table, rejects)``.

    ``inputs`` maps a source name to ``(path, format)``. Rows are concatenated in group order, then
    the group's source order, then line order; each source is subsampled with
    :func:`subsample` first. The custom groups come last, each one source (its file, checked
    against its sha256 when given, read by :func:`read_custom_pairs`, subsampled alike). Inputs
    that no group uses are ignored (logged).

    Raises:
        VerbevalError: when a group names a source missing from ``inputs`` or with an unknown
            format, a custom id repeats a group id, or a group ends up with no row at all (even with
            ``skip_bad_rows``: its inference could not run); InputError from
            :func:`read_template_file`, :func:`read_custom_pairs` and :func:`check_sha256`.
    """
    ids = [g["id"] for g in groups] + [c.id for c in custom]
    if len(set(ids)) != len(ids):
        raise VerbevalError(f"repeated group id(s) {sorted({i for i in ids if ids.count(i) > 1})}")
    tables: list[pd.DataFrame] = []
    rejects: list[pd.DataFrame] = []
    used: set[str] = set()
    for group in groups:
        n_group_rows = 0
        for source in group["sources"]:
            if source not in inputs:
                raise VerbevalError(f"group {group['id']!r}: no input file for source {source!r}")
            path, fmt = inputs[source]
            if fmt not in FORMATS:
                raise VerbevalError(f"source {source!r}: format {fmt!r} is not a template format")
            rows, bad = read_template_file(path, fmt, source, group["id"], skip_bad_rows,  # type: ignore[arg-type]
                                           (errata or {}).get(source), drop_flagged)
            tables.append(subsample(rows, max_rows_per_source))
            rejects.append(bad)
            used.add(source)
            n_group_rows += len(rows)
        if n_group_rows == 0:
            files = ", ".join(str(inputs[src][0]) for src in group["sources"])
            raise VerbevalError(f"group {group['id']!r} has no template rows: every source file is empty or "
                                f"rejected ({files})")
    for c in custom:
        if c.sha256:
            check_sha256(c.path, c.sha256)
        rows, bad = read_custom_pairs(c.path, c.format, c.source, c.id, skip_bad_rows)
        if rows.empty:
            raise VerbevalError(f"group {c.id!r} has no template rows: {c.path} is empty or every row is rejected")
        tables.append(subsample(rows, max_rows_per_source))
        rejects.append(bad)
    unused = sorted(set(inputs) - used)
    if unused:
        log.info("inputs not in any agreement group, ignored: %s", ", ".join(unused))
    table = pd.concat(tables, ignore_index=True) if tables else _empty(TEMPLATE_COLUMNS)
    rej = pd.concat(rejects, ignore_index=True) if rejects else _empty(REJECT_COLUMNS)
    return table.astype(TEMPLATE_COLUMNS), rej.astype(REJECT_COLUMNS)


# --------------------------------------------------------------------------- rendering


def render_context(
    left: str,
    right: str,
    *,
    cased: bool,
    masked: bool,
    mask_token: str | None = None,
) -> str:
    """The text a model sees for a template row.

    A masked LM sees ``"{left} {mask} {right}."`` (``"{left} {mask}."`` when ``right`` is empty);
    a causal LM sees ``left`` alone, without a period, and predicts the next token. For cased
    models the first character is capitalised; uncased models get the text as is.

    Raises:
        ValueError: when ``masked`` and ``mask_token`` is missing.
    """
    if masked:
        if not mask_token:
            raise ValueError("a masked LM context needs the tokenizer's mask token")
        parts = [p for p in (left, mask_token, right) if p]
        text = " ".join(parts) + "."
    else:
        text = left
    if cased and text:
        text = text[0].upper() + text[1:]
    return text
