"""The verb lexicon: lemmas with their third-person-singular and plural present forms.

Two sources, as in Newman et al. (2021):

* the refining-tse ``combined_verb_list.csv`` (header ``idx,sing,plur,freq``; COCA + Penn
  Treebank lemmas with their forms). Its ``idx`` column is ``_`` on every row, so lemmas are keyed
  by their forms, never by ``idx``; the lemma of a row is its plural form (so ``is,are`` becomes
  lemma ``are`` unless the Giant Verb List supplies ``be`` for the same forms).
* the Giant Verb List (lemmas only), inflected with lemminflect by :func:`inflect`, corrected by
  ``resources/inflection_overrides.csv`` where lemminflect is wrong.

The forms of the csv are kept as published (the release has a few typos such as ``quizes``;
see the module tests), so that the paper's lexicon is reproduced.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd
from lemminflect import getInflection

from verbeval.core.errors import InputError

#: Output columns of :func:`build_lexicon`, in order.
LEXICON_COLUMNS: tuple[str, ...] = ("lemma", "sing", "plur", "source")

#: The overrides shipped with the repository (``resources/inflection_overrides.csv``).
DEFAULT_OVERRIDES_PATH: Path = Path(__file__).resolve().parents[4] / "resources" / "inflection_overrides.csv"

# A verb form: letters, with internal hyphens or apostrophes (co-exist, x-ray).
_FORM_RE = re.compile(r"^[A-Za-z]+(?:['-][A-Za-z]+)*$")
_GIANT_LABEL = "giant verb list"


def _check_form(form: str) -> str | None:
    """The reason ``form`` is not a valid verb form, or None when it is."""
    if not form:
        return "empty form"
    if not _FORM_RE.match(form):
        return f"invalid verb form {form!r}"
    return None


def load_overrides(path: str | Path) -> dict[str, tuple[str, str]]:
    """Read an overrides csv (``lemma,sing,plur,reason``) into ``{lemma: (sing, plur)}``.

    Raises:
        InputError: at ``path:line`` for a missing column, an invalid form, an empty reason or a
            repeated lemma; or when the file is missing.
    """
    p = Path(path)
    try:
        fh = p.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    out: dict[str, tuple[str, str]] = {}
    with fh:
        reader = csv.DictReader(fh)
        missing = {"lemma", "sing", "plur", "reason"} - set(reader.fieldnames or ())
        if missing:
            raise InputError(p, f"missing column(s): {', '.join(sorted(missing))}", 1)
        for row in reader:
            line = reader.line_num
            lemma, sing, plur = (str(row.get(k) or "").strip() for k in ("lemma", "sing", "plur"))
            for form in (lemma, sing, plur):
                reason = _check_form(form)
                if reason:
                    raise InputError(p, reason, line)
            if not str(row.get("reason") or "").strip():
                raise InputError(p, f"override for {lemma!r} has no reason", line)
            if lemma in out:
                raise InputError(p, f"duplicate override for {lemma!r}", line)
            out[lemma] = (sing, plur)
    return out


def inflect(lemma: str, overrides: Mapping[str, tuple[str, str]] | None = None) -> tuple[str, str]:
    """``(third-person-singular present, plural present)`` of ``lemma``.

    An entry of ``overrides`` wins. Otherwise the first candidate of lemminflect's
    ``getInflection(lemma, 'VBZ')`` and ``getInflection(lemma, 'VBP')``; for *be* the plural is
    ``are`` (not ``am``), and where lemminflect has no VBP for an out-of-vocabulary lemma, the
    plural present is the lemma itself (true of every English verb except *be*).

    Raises:
        ValueError: when lemminflect yields no third-person-singular form.
    """
    if overrides and lemma in overrides:
        return overrides[lemma]
    if lemma == "be":
        return "is", "are"
    third = getInflection(lemma, tag="VBZ")
    if not third:
        raise ValueError(f"lemminflect has no third-person-singular form of {lemma!r}")
    plural = getInflection(lemma, tag="VBP")
    return third[0], (plural[0] if plural else lemma)


def read_verb_csv(path: str | Path) -> pd.DataFrame:
    """Read the refining-tse verb list into ``lemma, sing, plur`` (lemma = plural form).

    The ``idx`` and ``freq`` columns are ignored. Rows keep file order.

    Raises:
        InputError: at ``path:line`` for a missing ``sing``/``plur`` column, an empty or invalid
            form, or a row whose two forms are equal; or when the file is missing.
    """
    p = Path(path)
    try:
        fh = p.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    records: list[tuple[str, str, str]] = []
    with fh:
        reader = csv.DictReader(fh)
        missing = {"sing", "plur"} - set(reader.fieldnames or ())
        if missing:
            raise InputError(p, f"missing column(s): {', '.join(sorted(missing))}", 1)
        for row in reader:
            line = reader.line_num
            if None in row:
                raise InputError(p, "more fields than the header", line)
            sing, plur = (str(row.get(k) or "").strip() for k in ("sing", "plur"))
            for form in (sing, plur):
                reason = _check_form(form)
                if reason:
                    raise InputError(p, reason, line)
            if sing == plur:
                raise InputError(p, f"singular and plural forms are both {sing!r}", line)
            records.append((plur, sing, plur))
    return pd.DataFrame.from_records(records, columns=["lemma", "sing", "plur"]).astype("str")


def inflect_lemmas(lemmas: Iterable[str], overrides: Mapping[str, tuple[str, str]] | None = None) -> pd.DataFrame:
    """Inflect Giant-Verb-List lemmas into ``lemma, sing, plur`` (first occurrence of a lemma kept).

    Raises:
        InputError: naming the list entry (1-based) that is empty or not a verb form.
    """
    records: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for n, raw in enumerate(lemmas, start=1):
        lemma = raw.strip() if isinstance(raw, str) else ""
        reason = _check_form(lemma)
        if reason:
            raise InputError(_GIANT_LABEL, f"entry {n}: {reason}", n)
        if lemma in seen:
            continue
        seen.add(lemma)
        try:
            sing, plur = inflect(lemma, overrides)
        except ValueError as exc:
            raise InputError(_GIANT_LABEL, f"entry {n}: {exc}", n) from None
        records.append((lemma, sing, plur))
    return pd.DataFrame.from_records(records, columns=["lemma", "sing", "plur"]).astype("str")


def build_lexicon(
    verb_csv: str | Path | None, giant_verbs: list[str] | None, overrides: str | Path | None = None
) -> pd.DataFrame:
    """The union lexicon: columns ``lemma, sing, plur, source``.

    ``source`` is ``combined`` (csv only), ``giant`` (Giant Verb List only) or ``both``. Rows are
    de-duplicated on the form pair ``(sing, plur)``; a pair found in both sources takes the Giant
    Verb List's lemma (``be`` rather than ``are``). A lemma with different forms in the two sources
    (the csv's ``quizes`` vs lemminflect's ``quizzes``) keeps both rows. Sorted by lemma, then
    ``sing``, then ``plur``; the index is ``0..n-1``.

    Raises:
        ValueError: when both sources are None.
        InputError: for invalid rows (see :func:`read_verb_csv`, :func:`inflect_lemmas`,
            :func:`load_overrides`).
    """
    if verb_csv is None and giant_verbs is None:
        raise ValueError("build_lexicon needs the verb csv, the giant verb list, or both")
    table = load_overrides(overrides) if overrides is not None else None
    parts: list[pd.DataFrame] = []
    if verb_csv is not None:
        parts.append(read_verb_csv(verb_csv).assign(source="combined"))
    if giant_verbs is not None:
        parts.append(inflect_lemmas(giant_verbs, table).assign(source="giant"))
    # A pair may repeat within one source (two giant lemmas inflecting alike): keep the first.
    parts = [part.drop_duplicates(["sing", "plur"], keep="first") for part in parts]
    both = pd.concat(parts, ignore_index=True)
    counts = both.groupby(["sing", "plur"], sort=False)["source"].transform("nunique")
    # Prefer the giant row (its lemma is the dictionary lemma) when a pair is in both sources.
    both["_rank"] = (both["source"] != "giant").astype("int8")
    both = both.sort_values(["sing", "plur", "_rank"], kind="stable")
    out = both.drop_duplicates(["sing", "plur"], keep="first").copy()
    out.loc[counts.loc[out.index] > 1, "source"] = "both"
    out = out.drop(columns="_rank").sort_values(["lemma", "sing", "plur"], kind="stable")
    return out.reset_index(drop=True)[list(LEXICON_COLUMNS)].astype("str")
