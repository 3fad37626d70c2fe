"""Fetching the public data sources listed in ``resources/manifest.yaml``.

Every download is described once, by a :class:`Source` entry of the manifest (URL, accepted
sha256 checksums, format). :func:`fetch_source` copies a source from a local mirror laid out like
the remote hosts (``<mirror>/github.com/<owner>/<repo>/raw/<commit>/<path>``) or downloads it
(``http``, ``https`` and ``file`` URLs), verifying the checksum while it writes. A file whose
checksum does not match is never left at the destination, and neither is a temporary file.

:func:`read_giant_verb_list` parses The Giant Verb List in its plain-text form (the mirror's copy)
or its original PDF form.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from glob import escape as glob_escape
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import yaml
from tqdm import tqdm

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import atomic_open, atomic_path, load_yaml, sha256_file

__all__ = [
    "FORMATS",
    "LIST_FORMATS",
    "Source",
    "content_digest",
    "is_verified",
    "set_aside_unverified",
    "verb_list_bytes",
    "fetch_source",
    "load_manifest",
    "local_filename",
    "mirror_location",
    "read_giant_verb_list",
]

#: Formats a manifest entry may declare; each names the parser that reads the file downstream.
FORMATS: frozenset[str] = frozenset(
    {"ml_jsonl", "blimp_jsonl", "verb_csv", "giant_verb_list", "simverb_tsv", "veridicality_tsv"}
)

#: formats whose manifest checksum pins the parsed list, not the file's bytes (content_digest)
LIST_FORMATS: frozenset[str] = frozenset({"giant_verb_list"})

_REQUIRED_KEYS = ("url", "sha256", "format", "description", "license")
_OPTIONAL_KEYS = ("mirror_path", "archive_member", "verb_index")
_URL_SCHEMES = ("http", "https", "file")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_VERB_RE = re.compile(r"^[a-z][a-z'-]*$")
_PDF_MAGIC = b"%PDF"
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Source:
    """One downloadable file of the manifest.

    ``sha256`` holds every accepted checksum (lowercase hex); a fetched file must match one of
    them. ``mirror_path`` is the file's path inside a data mirror when the mirror does not follow
    the URL layout. ``archive_member`` is set when ``url`` is a zip archive and the source is one
    member of it; the checksums are then those of the member. For a format of
    :data:`LIST_FORMATS` the checksums are those of the normalised list (:func:`content_digest`),
    so that every published form of the list (the original PDF, a text copy) passes, and
    ``verb_index`` is the file of per-verb hashes that counts the verbs added and removed when a
    list differs. ``manifest`` is the manifest file the entry came from (for messages).
    """

    name: str
    url: str
    sha256: tuple[str, ...]
    format: str
    mirror_path: str | None
    description: str
    license: str
    archive_member: str | None = None
    verb_index: Path | None = None
    manifest: str = "the manifest"


# --------------------------------------------------------------------------- manifest


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate mapping keys instead of keeping the last one."""


#: the same on libyaml's C parser (None without it): the manifest is parsed by it, and a manifest it
#: refuses (duplicate keys included) is parsed again by _UniqueKeyLoader for the error (core.io.load_yaml)
_CUniqueKeyLoader: Any = (type("_CUniqueKeyLoader", (yaml.CSafeLoader,), {"__doc__": _UniqueKeyLoader.__doc__})
                          if hasattr(yaml, "CSafeLoader") else None)


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


for _loader in (_UniqueKeyLoader, _CUniqueKeyLoader):
    if _loader is not None:
        _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _manifest_error(path: Path, entry: str | None, reason: str) -> InputError:
    where = f"entry {entry!r}: " if entry is not None else ""
    return InputError(path, f"invalid manifest: {where}{reason}")


def _parse_checksums(path: Path, name: str, value: Any) -> tuple[str, ...]:
    """Normalise the ``sha256`` field (one string or a list of strings) to a tuple of hex digests."""
    values = value if isinstance(value, list) else [value]
    if not values or value is None:
        raise _manifest_error(path, name, "'sha256' must be a checksum or a non-empty list of checksums")
    out: list[str] = []
    for item in values:
        if not isinstance(item, str):
            # e.g. an all-digit checksum that YAML read as a number
            raise _manifest_error(path, name, f"'sha256' value {item!r} must be a (quoted) string")
        digest = item.strip().lower()
        if not _SHA256_RE.match(digest):
            raise _manifest_error(path, name, f"'sha256' value {item!r} is not 64 hexadecimal digits")
        out.append(digest)
    return tuple(dict.fromkeys(out))


def _check_relative_path(path: Path, name: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _manifest_error(path, name, f"{key!r} must be a non-empty string")
    parts = PurePosixPath(value).parts
    if value.startswith("/") or ".." in parts:
        raise _manifest_error(path, name, f"{key!r} must be a relative path without '..': {value!r}")
    return value


def _parse_entry(path: Path, name: Any, entry: Any) -> Source:
    """Validate one manifest entry and build its :class:`Source`."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _manifest_error(path, str(name), "names must match [a-z][a-z0-9_]*")
    if not isinstance(entry, dict):
        raise _manifest_error(path, name, "must be a mapping of keys to values")
    missing = [key for key in _REQUIRED_KEYS if key not in entry]
    if missing:
        raise _manifest_error(path, name, f"missing key(s) {', '.join(missing)}")
    unknown = sorted(set(entry) - set(_REQUIRED_KEYS) - set(_OPTIONAL_KEYS))
    if unknown:
        raise _manifest_error(path, name, f"unknown key(s) {', '.join(map(str, unknown))}")
    for key in ("url", "format", "description", "license"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise _manifest_error(path, name, f"{key!r} must be a non-empty string")
    url = entry["url"].strip()
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in _URL_SCHEMES:
        raise _manifest_error(path, name, f"url {url!r} must use one of {', '.join(_URL_SCHEMES)}")
    if entry["format"] not in FORMATS:
        raise _manifest_error(
            path, name, f"unknown format {entry['format']!r} (known: {', '.join(sorted(FORMATS))})"
        )
    index = _check_relative_path(path, name, "verb_index", entry.get("verb_index"))
    if index is not None and entry["format"] not in LIST_FORMATS:
        raise _manifest_error(path, name, f"'verb_index' is only for the formats {', '.join(sorted(LIST_FORMATS))}")
    return Source(
        name=name,
        url=url,
        sha256=_parse_checksums(path, name, entry["sha256"]),
        format=entry["format"],
        mirror_path=_check_relative_path(path, name, "mirror_path", entry.get("mirror_path")),
        description=entry["description"].strip(),
        license=entry["license"].strip(),
        archive_member=_check_relative_path(path, name, "archive_member", entry.get("archive_member")),
        verb_index=path.parent / index if index is not None else None,
        manifest=str(path),
    )


def load_manifest(path: str | Path) -> dict[str, Source]:
    """Read and validate a manifest file; return its sources by name, in file order.

    Raises :class:`~verbeval.core.errors.InputError` naming the manifest (and the entry) on any
    problem: unreadable or malformed YAML, duplicate names, missing or unknown keys, an unknown
    format, a URL scheme other than http/https/file, or a checksum that is not 64 hex digits.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"cannot read manifest: {exc.strerror or exc}") from exc
    try:
        data = load_yaml(text, _UniqueKeyLoader, _CUniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(path, f"invalid manifest YAML: {problem}", line) from exc
    if not isinstance(data, dict) or not isinstance(data.get("sources"), dict) or not data["sources"]:
        raise _manifest_error(path, None, "expected a non-empty mapping under the top-level key 'sources'")
    return {name: _parse_entry(path, name, entry) for name, entry in data["sources"].items()}


# --------------------------------------------------------------------------- paths


def mirror_location(source: Source, mirror_dir: str | Path) -> Path:
    """Where ``source`` lives inside a mirror directory.

    ``mirror_dir / source.mirror_path`` when the entry sets one; otherwise the URL with its
    scheme (and any query) dropped, e.g. ``https://github.com/o/r/raw/c/p`` maps to
    ``mirror_dir/github.com/o/r/raw/c/p``.
    """
    mirror_dir = Path(mirror_dir)
    if source.mirror_path is not None:
        return mirror_dir / source.mirror_path
    parts = urllib.parse.urlsplit(source.url)
    rel = PurePosixPath(parts.netloc, urllib.parse.unquote(parts.path).lstrip("/"))
    if ".." in rel.parts:
        raise VerbevalError(f"source {source.name!r}: URL {source.url} cannot be mapped into a mirror")
    return mirror_dir.joinpath(*rel.parts)


def local_filename(source: Source) -> str:
    """File name for the fetched copy: basename of ``mirror_path``, else of ``archive_member``,
    else of the URL path (``data/raw/<name>/<local_filename>`` in the workflow)."""
    for candidate in (source.mirror_path, source.archive_member):
        if candidate:
            return PurePosixPath(candidate).name
    name = PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(source.url).path)).name
    if not name:
        raise VerbevalError(f"source {source.name!r}: URL {source.url} has no file name")
    return name


# --------------------------------------------------------------------------- fetching


def _copy_verified(
    source: Source, stream: IO[bytes], dest: Path, origin: str, total: int | None = None,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Stream ``stream`` into ``dest`` atomically, checking its checksum against ``source``.

    The bytes go to a temporary file next to ``dest`` (:func:`verbeval.core.io.atomic_path`), which
    is renamed onto ``dest`` only if the checksum matches (an existing ``dest`` is replaced in one
    step, never deleted first); otherwise it is removed and a :class:`VerbevalError` names the
    source, ``origin`` and both checksums. For a list format (:data:`LIST_FORMATS`) a file whose
    bytes match no checksum is parsed and its normalised list checked (:func:`content_digest`).
    ``before_replace`` runs once the new bytes verified, just before the rename.
    """
    digest = hashlib.sha256()
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as out, tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=source.name,
            disable=None if total else True,  # a bar only for a known size, and only on a terminal
            file=sys.stderr,
            leave=False,
        ) as bar:
            try:
                for block in iter(lambda: stream.read(_CHUNK), b""):
                    digest.update(block)
                    out.write(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException, zipfile.BadZipFile) as exc:
                raise VerbevalError(f"source {source.name!r}: copying from {origin} failed: {exc}") from exc
        actual = digest.hexdigest()
        if actual not in source.sha256 and source.format in LIST_FORMATS:
            _check_verb_list(source, tmp, origin)
        elif actual not in source.sha256:
            expected = " or ".join(source.sha256)
            raise VerbevalError(
                f"checksum mismatch for source {source.name!r} from {origin}: "
                f"expected sha256 {expected}, got {actual}; nothing was written. If the publisher changed the "
                f"file and you trust the new version, add its sha256 to the entry's list in {source.manifest}"
            )
        if before_replace is not None:
            before_replace()


def _mirror_stream(source: Source, mirror_dir: Path) -> tuple[Path, IO[bytes]]:
    location = mirror_location(source, mirror_dir)
    if not location.is_file():
        raise VerbevalError(
            f"source {source.name!r}: mirror file {location} does not exist "
            f"(mirror directory {mirror_dir}; expected copy of {source.url})"
        )
    try:
        return location, open(location, "rb")
    except OSError as exc:
        raise VerbevalError(f"source {source.name!r}: cannot read mirror file {location}: {exc}") from exc


#: appended to a download that failed for lack of network (not to an HTTP error status)
OFFLINE_HINT = "; without network, read the sources from a local copy: --config data_mirror=DIR (docs/data.md)"


@contextlib.contextmanager
def _open_url(source: Source, timeout: float) -> Iterator[tuple[IO[bytes], int | None]]:
    """Open ``source.url`` for streaming; yield the response and its size if known."""
    request = urllib.request.Request(source.url, headers={"User-Agent": "verbeval"})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - scheme checked
    except urllib.error.HTTPError as exc:
        raise VerbevalError(
            f"source {source.name!r}: download of {source.url} failed: HTTP {exc.code} {exc.reason}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise VerbevalError(f"source {source.name!r}: download of {source.url} failed: {reason}{OFFLINE_HINT}") from exc
    with response:
        length = response.headers.get("Content-Length") if response.headers else None
        yield response, int(length) if length and length.isdigit() else None


@contextlib.contextmanager
def _archive_member_stream(
    source: Source, archive: Path, origin: str
) -> Iterator[tuple[IO[bytes], int | None]]:
    """Open ``source.archive_member`` inside the zip file ``archive``."""
    member = source.archive_member
    assert member is not None
    try:
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise VerbevalError(
                    f"source {source.name!r}: archive {origin} has no member {member!r}"
                ) from None
            with zf.open(info) as stream:
                yield stream, info.file_size
    except zipfile.BadZipFile as exc:
        raise VerbevalError(f"source {source.name!r}: {origin} is not a valid zip archive: {exc}") from exc


def _fetch_from_mirror(source: Source, dest: Path, mirror_dir: Path,
                       before_replace: Callable[[], None] | None = None) -> None:
    location, stream = _mirror_stream(source, mirror_dir)
    with stream:
        if source.archive_member is not None and zipfile.is_zipfile(location):
            # The mirror holds the archive itself (URL layout) rather than the extracted member.
            with _archive_member_stream(source, location, str(location)) as (member, size):
                _copy_verified(source, member, dest, f"{location}!{source.archive_member}", size, before_replace)
            return
        _copy_verified(source, stream, dest, str(location), location.stat().st_size, before_replace)


def _fetch_from_url(source: Source, dest: Path, timeout: float,
                    before_replace: Callable[[], None] | None = None) -> None:
    if source.archive_member is None:
        with _open_url(source, timeout) as (response, size):
            _copy_verified(source, response, dest, source.url, size, before_replace)
        return
    # Download the archive to a scratch file next to dest, then extract and verify the member.
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as scratch:
        archive = Path(scratch) / "archive.zip"
        with _open_url(source, timeout) as (response, size), open(archive, "wb") as out, tqdm(
            total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=source.name,
            disable=None if size else True, file=sys.stderr, leave=False,
        ) as bar:
            try:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException) as exc:
                raise VerbevalError(
                    f"source {source.name!r}: download of {source.url} failed: {exc}{OFFLINE_HINT}") from exc
        with _archive_member_stream(source, archive, source.url) as (member, msize):
            _copy_verified(source, member, dest, f"{source.url}!{source.archive_member}", msize, before_replace)


def fetch_source(
    source: Source, dest: str | Path, mirror_dir: str | Path | None = None, timeout: float = 60
) -> Path:
    """Fetch ``source`` to ``dest`` and verify its checksum; return ``dest``.

    A ``dest`` that already verifies (:func:`is_verified`) is kept as it is: where a verified
    file came from is no reason to fetch it again, and no network is needed. A ``dest`` that does
    not verify (edited by hand, or pinned by an older manifest) is set aside
    (:func:`set_aside_unverified`, never deleted) only once a verified copy is there to replace it:
    a copy set aside earlier that verifies now, or new bytes that passed their checksum. A fetch
    that fails leaves ``dest`` as it was.

    With ``mirror_dir`` the file is copied from :func:`mirror_location`; otherwise ``source.url``
    is downloaded (http, https or file URL) with a timeout of ``timeout`` seconds per socket
    operation. The bytes are hashed while they are written to a temporary file next to ``dest``,
    which is renamed onto ``dest`` only when the checksum matches one of ``source.sha256``.

    Raises :class:`VerbevalError` on a checksum mismatch (naming the source, where the bytes came
    from, and the expected and actual checksums), on a missing mirror file and on download errors
    (naming the URL and the HTTP status). After a failure there is no new file at ``dest`` and no
    temporary file beside it.
    """
    dest = Path(dest)
    if is_verified(source, dest):
        return dest

    def set_aside() -> None:
        moved = set_aside_unverified(source, dest)
        if moved is not None:
            print(f"{dest}: matches no checksum of source {source.name!r} in {source.manifest}; "
                  f"moved to {moved.name}, replaced by a verified copy", file=sys.stderr)

    if _restore_set_aside(source, dest, set_aside):
        return dest
    if mirror_dir is not None:
        _fetch_from_mirror(source, dest, Path(mirror_dir), set_aside)
    else:
        _fetch_from_url(source, dest, timeout, set_aside)
    return dest


# --------------------------------------------------------------------------- verifying a copy


def verb_list_bytes(verbs: Iterable[str]) -> bytes:
    """The normalised form of a verb list whose sha256 the manifest pins: the distinct lowercased
    verbs, sorted, one per line (so that the PDF and a text copy of one list agree)."""
    return "".join(f"{v}\n" for v in sorted({v.lower() for v in verbs})).encode("utf-8")


def _verb_hash(verb: str) -> str:
    """A verb's entry in a ``verb_index`` file (the first 16 hex digits of its sha256)."""
    return hashlib.sha256(verb.encode("utf-8")).hexdigest()[:16]


def verb_index_lines(verbs: Iterable[str]) -> str:
    """The text of a ``verb_index`` file for ``verbs`` (one hash per line, sorted)."""
    return "".join(f"{h}\n" for h in sorted({_verb_hash(v.lower()) for v in verbs}))


def content_digest(source: Source, path: str | Path) -> str:
    """The checksum of ``path`` that ``source.sha256`` pins: the sha256 of the file's bytes, or for a
    list format (:data:`LIST_FORMATS`) that of its parsed, normalised list (:func:`verb_list_bytes`)."""
    if source.format in LIST_FORMATS:
        return hashlib.sha256(verb_list_bytes(read_giant_verb_list(path))).hexdigest()
    return sha256_file(path)


def _check_verb_list(source: Source, path: Path, origin: str) -> None:
    """Raise one line naming how many verbs were added and removed when the verb list in ``path``
    is not the pinned one."""
    try:
        verbs = set(read_giant_verb_list(path))
    except InputError as exc:
        raise VerbevalError(f"source {source.name!r} from {origin}: not a readable verb list ({exc}); "
                            "nothing was written") from exc
    actual = hashlib.sha256(verb_list_bytes(verbs)).hexdigest()
    if actual in source.sha256:
        return
    index: set[str] | None = None
    if source.verb_index is not None:
        with contextlib.suppress(OSError):
            index = set(source.verb_index.read_text(encoding="utf-8").split())
    if index is None:
        change = f"{len(verbs)} verbs (no verb_index in {source.manifest} to count the verbs added and removed)"
    else:
        kept = sum(_verb_hash(v) in index for v in verbs)
        change = (f"{len(verbs) - kept} verb(s) added, {len(index) - kept} removed "
                  f"({len(verbs)} verbs, the pinned list has {len(index)})")
    raise VerbevalError(
        f"source {source.name!r} from {origin}: the verb list differs from the pinned one: {change}; "
        f"nothing was written. If you trust this list, add its checksum {actual} to the entry's sha256 "
        f"list in {source.manifest}"
    )


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    # ctime cannot be set by a copy that preserves times (cp -p, rsync -a), and changes on every write
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _cache_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified.json")


def cached_content_digest(source: Source, path: str | Path, write_cache: bool = True) -> str:
    """:func:`content_digest` of ``path``, cached beside it under its size, mtime, ctime and inode
    (``.<name>.verified.json``), so that checking an unchanged file costs one ``stat``. With
    ``write_cache=False`` (planning the workflow, which writes no file) a missing or stale cache
    entry is not written."""
    path = Path(path)
    key = _stat_key(path)
    cache = _cache_path(path)
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("stat") == key and cached.get("format") == source.format:
            return str(cached["sha256"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    digest = content_digest(source, path)
    if write_cache and _stat_key(path) == key:  # unchanged while it was read
        with contextlib.suppress(OSError):
            with atomic_open(cache) as fh:
                json.dump({"stat": key, "format": source.format, "sha256": digest}, fh)
    return digest


def is_verified(source: Source, path: str | Path, write_cache: bool = True) -> bool:
    """Whether ``path`` is a file whose checksum (:func:`cached_content_digest`) the manifest accepts."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        return cached_content_digest(source, path, write_cache) in source.sha256
    except (OSError, InputError):
        return False


def _restore_set_aside(source: Source, dest: Path, before_replace: Callable[[], None] | None = None) -> bool:
    """Put back a copy set aside earlier (:func:`set_aside_unverified`, e.g. under another manifest)
    that verifies now: one atomic rename, no download (``before_replace`` runs just before it)."""
    if not dest.parent.is_dir():
        return False
    for candidate in sorted(dest.parent.glob(f"{glob_escape(dest.name)}.unverified-*")):
        if candidate.is_file() and _digest_or_none(source, candidate) in source.sha256:
            if before_replace is not None:
                before_replace()
            os.replace(candidate, dest)
            print(f"{dest}: restored the verified copy {candidate.name}", file=sys.stderr)
            return True
    return False


def set_aside_unverified(source: Source, path: str | Path) -> Path | None:
    """Move a copy of ``source`` at ``path`` that does not verify to
    ``<name>.unverified-<first 12 hex of its sha256>`` beside it (one atomic rename: nothing is
    deleted, and the next fetch writes a verified copy); return where it went, or None if ``path``
    is missing or verifies."""
    path = Path(path)
    if not path.is_file() or is_verified(source, path):
        return None
    target = path.with_name(f"{path.name}.unverified-{sha256_file(path)[:12]}")
    os.replace(path, target)
    with contextlib.suppress(FileNotFoundError):
        _cache_path(path).unlink()
    return target


# --------------------------------------------------------------------------- giant verb list


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
            f"{path} is a PDF; reading it needs the pypdf package: pip install pypdf "
            "(or pip install 'verbeval[pdf]')"
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
            magic = fh.read(len(_PDF_MAGIC))
    except OSError as exc:
        raise InputError(path, f"cannot read giant verb list: {exc.strerror or exc}") from exc
    if magic == _PDF_MAGIC:
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


# --------------------------------------------------------------------------- building a mirror


@dataclass(frozen=True)
class MirrorResult:
    """What :func:`build_mirror` did with one source: ``fetched``, ``present`` (already in the mirror
    with a matching checksum) or ``failed`` (``detail`` says why)."""

    name: str
    status: str
    path: Path
    detail: str = ""


def _digest_or_none(source: Source, path: Path) -> str | None:
    """:func:`content_digest`, or None for an unreadable file (no cache file: a mirror holds only data)."""
    try:
        return content_digest(source, path)
    except (OSError, InputError):
        return None


def build_mirror(sources: Iterable[Source], mirror_dir: str | Path, timeout: float = 60,
                 from_mirror: str | Path | None = None) -> list[MirrorResult]:
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
        if dest.is_file() and _digest_or_none(source, dest) in source.sha256:
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
    one per line), the form the mirror documents; it passes the same pin (:func:`content_digest`)."""
    if source.format not in LIST_FORMATS:
        return
    with open(path, "rb") as fh:
        if fh.read(len(_PDF_MAGIC)) != _PDF_MAGIC:
            return
    verbs = read_giant_verb_list(path)
    with atomic_open(path) as out:
        out.write("".join(f"{v}\n" for v in verbs))
