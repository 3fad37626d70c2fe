"""The Giant Verb List's file format: :func:`read_giant_verb_list` parses it in its plain-text form
(the mirror's copy) or its original PDF form (recognised by :data:`PDF_MAGIC`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from verbeval.core.errors import InputError, VerbevalError

__all__ = ["PDF_MAGIC", "read_giant_verb_list"]

_VERB_RE = re.compile(r"^[a-z][a-z'-]*$")
#: the first bytes of a PDF file
PDF_MAGIC = b"%PDF"


def _parse_verb_lines(path: Path, lines: Iterable[tuple[int, str]]) -> list[str]:
    """Keep the lowercased first token of each non-blank line; check it looks like a verb."""
    verbs: dict[str, None] = {}
    for lineno, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        verb = tokens[0].lower()
        if not _VERB_RE.match(verb):
            raise InputError(path, f"not a verb: {tokens[0]!r} (expected [a-z][a-z'-]*)", lineno)
        verbs.setdefault(verb, None)
    return list(verbs)


def _extract_pdf_pages(path: Path) -> list[str]:
    """Text of each page of the PDF at ``path`` (needs the optional ``pypdf`` package)."""
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise VerbevalError(
            f"{path} is a PDF; reading it needs the pypdf package: pip install pypdf (or pip install 'verbeval[pdf]')"
        ) from exc
    try:
        return [page.extract_text() or "" for page in PdfReader(path).pages]
    except Exception as exc:  # pypdf raises a variety of errors on damaged files
        raise InputError(path, f"cannot extract text from PDF: {exc}") from exc


_PDF_ENTRY_RE = re.compile(r"(?<!\S)(\d+)\.\s+(\S+)")


def _pdf_entry_lines(path: Path, pages: list[str]) -> list[tuple[int, str]]:
    """Turn the PDF's numbered entries (``1. abandon 2. abate 1 ...``) into verb lines.

    Mirrors the paper's own scraper (refining-tse ``scripts/create_combined_verb_list.py``): only
    lines of the extracted text that start with an entry number ``<n>.`` are read, and from them
    the token after each ``<n>.`` is the verb. Titles, running headers, page footers and
    footnote legends carry no entry number and are ignored. Entries are ordered by their number;
    if a number occurs more than once (a numbered list in the introduction), the last
    occurrence wins, since the verb list comes after the introduction. The numbers must then run
    1..N without gaps, otherwise the layout is not the one this parser knows.
    Returned pairs are (line number in the joined page text, verb token).
    """
    by_number: dict[int, tuple[int, str]] = {}
    lineno = 0
    for page in pages:
        for line in page.splitlines():
            lineno += 1
            if not re.match(r"\s*\d+\.\s", line):
                continue
            for match in _PDF_ENTRY_RE.finditer(line):
                by_number[int(match.group(1))] = (lineno, match.group(2))
    if not by_number:
        raise InputError(path, "no numbered verb entries ('1. abandon') found in the PDF text")
    numbers = sorted(by_number)
    if numbers != list(range(1, len(numbers) + 1)):
        gaps = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))[:5]
        raise InputError(path, f"PDF verb entries are not numbered 1..N; missing e.g. {gaps}")
    return [by_number[n] for n in numbers]


def read_giant_verb_list(path: str | Path) -> list[str]:
    """Read The Giant Verb List; return its verbs, lowercased, de-duplicated in file order.

    Two forms are accepted:

    * plain text, one verb per line, where lines may carry the PDF's trailing footnote marks
      (``agree 1 RB``, ``be + LV``, ``abhor 2``): the first whitespace token of each non-blank
      line is the verb;
    * the original PDF (recognised by its ``%PDF`` magic bytes), whose text is extracted with
      ``pypdf`` (imported lazily). Its numbered entries are read as described in
      :func:`_pdf_entry_lines`.

    A token that is not a plausible verb (``[a-z][a-z'-]*`` after lowercasing) raises
    :class:`~verbeval.core.errors.InputError` with the path and line number.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(PDF_MAGIC))
    except OSError as exc:
        raise InputError(path, f"cannot read giant verb list: {exc.strerror or exc}") from exc
    if magic == PDF_MAGIC:
        lines = _pdf_entry_lines(path, _extract_pdf_pages(path))
    else:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(path, f"not UTF-8 text and not a PDF: {exc.reason}") from exc
        lines = list(enumerate(text.splitlines(), start=1))
    verbs = _parse_verb_lines(path, lines)
    if not verbs:
        raise InputError(path, "no verbs found")
    return verbs
