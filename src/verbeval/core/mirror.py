"""Building a data mirror (``verbeval mirror``): :func:`build_mirror` downloads every source of the
manifest (or, with ``from_mirror``, copies it from another mirror) into the layout the workflow's
``data_mirror`` reads (:func:`~verbeval.core.manifest.mirror_location`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verbeval.core.errors import VerbevalError
from verbeval.core.fetch import fetch_source
from verbeval.core.io import atomic_open
from verbeval.core.manifest import LIST_FORMATS, Source, mirror_location
from verbeval.core.verb_list import PDF_MAGIC, read_giant_verb_list
from verbeval.core.verified import digest_or_none

__all__ = ["MirrorResult", "build_mirror"]


@dataclass(frozen=True)
class MirrorResult:
    """What :func:`build_mirror` did with one source: ``fetched``, ``present`` (already in the mirror
    with a matching checksum) or ``failed`` (``detail`` says why)."""

    name: str
    status: str
    path: Path
    detail: str = ""


def build_mirror(
    sources: Iterable[Source], mirror_dir: str | Path, timeout: float = 60, from_mirror: str | Path | None = None
) -> list[MirrorResult]:
    """Download every source into ``mirror_dir``, laid out as the workflow's ``data_mirror`` reads it
    (with ``from_mirror``: copy it from that mirror instead, checked the same way).

    Each file goes to :func:`mirror_location` (the URL's host and path, or the entry's
    ``mirror_path``); for a zip ``archive_member`` the verified member is stored, not the archive;
    a verb list published as a PDF is stored as a text copy of its verbs.
    A file already there with an accepted sha256 is kept (so an interrupted run resumes). A source
    that fails (network, HTTP status, checksum) is reported and the others go on; nothing
    unverified is ever left in the mirror.
    """
    results = []
    for source in sources:
        dest = mirror_location(source, mirror_dir)
        if dest.is_file() and digest_or_none(source, dest) in source.sha256:
            results.append(MirrorResult(source.name, "present", dest))
            continue
        try:
            fetch_source(source, dest, from_mirror, timeout=timeout)
            _pdf_to_text_copy(source, dest)
        except VerbevalError as exc:
            results.append(MirrorResult(source.name, "failed", dest, str(exc)))
        else:
            results.append(MirrorResult(source.name, "fetched", dest))
    return results


def _pdf_to_text_copy(source: Source, path: Path) -> None:
    """A verb list fetched as a PDF is stored in the mirror as a text copy (its verbs in entry order,
    one per line), the form the mirror documents; it passes the same pin
    (:func:`~verbeval.core.verified.content_digest`)."""
    if source.format not in LIST_FORMATS:
        return
    with open(path, "rb") as fh:
        if fh.read(len(PDF_MAGIC)) != PDF_MAGIC:
            return
    verbs = read_giant_verb_list(path)
    with atomic_open(path) as out:
        out.write("".join(f"{v}\n" for v in verbs))
