"""The data manifest (``resources/manifest.yaml``): :class:`Source`, one downloadable file, and
:func:`load_manifest`, which reads the manifest with a YAML loader that refuses duplicate keys and
validates every entry (keys, URL scheme, format, checksums, relative paths). Also where a source
lives: :func:`mirror_location` (its path inside a data mirror) and :func:`local_filename` (the
name of its fetched copy).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from verbeval.core.errors import InputError, VerbevalError
from verbeval.core.io import load_yaml

__all__ = ["FORMATS", "LIST_FORMATS", "Source", "load_manifest", "local_filename", "mirror_location"]

#: Formats a manifest entry may declare; each names the parser that reads the file downstream.
FORMATS: frozenset[str] = frozenset(
    {"ml_jsonl", "blimp_jsonl", "clams_txt", "verb_csv", "giant_verb_list", "simverb_tsv", "veridicality_tsv"}
)

#: formats whose manifest checksum pins the parsed list, not the file's bytes (core.verified.content_digest)
LIST_FORMATS: frozenset[str] = frozenset({"giant_verb_list"})

_REQUIRED_KEYS = ("url", "sha256", "format", "description", "license")
_OPTIONAL_KEYS = ("mirror_path", "archive_member", "verb_index")
_URL_SCHEMES = ("http", "https", "file")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Source:
    """One downloadable file of the manifest.

    ``sha256`` holds every accepted checksum (lowercase hex); a fetched file must match one of
    them. ``mirror_path`` is the file's path inside a data mirror when the mirror does not follow
    the URL layout. ``archive_member`` is set when ``url`` is a zip archive and the source is one
    member of it; the checksums are then those of the member. For a format of
    :data:`LIST_FORMATS` the checksums are those of the normalised list
    (:func:`~verbeval.core.verified.content_digest`), so that every published form of the list
    (the original PDF, a text copy) passes, and
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate mapping keys instead of keeping the last one."""


#: the same on libyaml's C parser (None without it): the manifest is parsed by it, and a manifest it
#: refuses (duplicate keys included) is parsed again by _UniqueKeyLoader for the error (core.io.load_yaml)
_CUniqueKeyLoader: Any = (
    type("_CUniqueKeyLoader", (yaml.CSafeLoader,), {"__doc__": _UniqueKeyLoader.__doc__})
    if hasattr(yaml, "CSafeLoader")
    else None
)


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
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
        raise _manifest_error(path, name, f"unknown format {entry['format']!r} (known: {', '.join(sorted(FORMATS))})")
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
