"""Fetching one source of the manifest (:class:`~verbeval.core.manifest.Source`).

:func:`fetch_source` copies a source from a local mirror laid out like the remote hosts
(``<mirror>/github.com/<owner>/<repo>/raw/<commit>/<path>``) or downloads it (``http``, ``https``
and ``file`` URLs, a member of a zip archive included), verifying the checksum while it writes. A
file whose checksum does not match is never left at the destination, and neither is a temporary
file; a destination that already verifies is kept (:mod:`verbeval.core.verified`).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from tqdm import tqdm

from verbeval.core.errors import VerbevalError
from verbeval.core.io import atomic_path
from verbeval.core.manifest import LIST_FORMATS, Source, mirror_location
from verbeval.core.verified import check_verb_list, is_verified, restore_set_aside, set_aside_unverified

__all__ = ["OFFLINE_HINT", "fetch_source"]

_CHUNK = 1 << 16


def _progress(total: int | None, desc: str) -> tqdm:
    """A byte progress bar on stderr: shown only for a known size, and only on a terminal."""
    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=desc,
        disable=None if total else True,
        file=sys.stderr,
        leave=False,
    )


def _copy_verified(
    source: Source,
    stream: IO[bytes],
    dest: Path,
    origin: str,
    total: int | None = None,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Stream ``stream`` into ``dest`` atomically, checking its checksum against ``source``.

    The bytes go to a temporary file next to ``dest`` (:func:`verbeval.core.io.atomic_path`), which
    is renamed onto ``dest`` only if the checksum matches (an existing ``dest`` is replaced in one
    step, never deleted first); otherwise it is removed and a :class:`VerbevalError` names the
    source, ``origin`` and both checksums. For a list format (:data:`LIST_FORMATS`) a file whose
    bytes match no checksum is parsed and its normalised list checked
    (:func:`~verbeval.core.verified.content_digest`).
    ``before_replace`` runs once the new bytes verified, just before the rename.
    """
    digest = hashlib.sha256()
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as out, _progress(total, source.name) as bar:
            try:
                for block in iter(lambda: stream.read(_CHUNK), b""):
                    digest.update(block)
                    out.write(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException, zipfile.BadZipFile) as exc:
                raise VerbevalError(f"source {source.name!r}: copying from {origin} failed: {exc}") from exc
        actual = digest.hexdigest()
        if actual not in source.sha256 and source.format in LIST_FORMATS:
            check_verb_list(source, tmp, origin)
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
        response = urllib.request.urlopen(request, timeout=timeout)  # the URL's scheme was checked above
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
def _archive_member_stream(source: Source, archive: Path, origin: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """Open ``source.archive_member`` inside the zip file ``archive``."""
    member = source.archive_member
    assert member is not None
    try:
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise VerbevalError(f"source {source.name!r}: archive {origin} has no member {member!r}") from None
            with zf.open(info) as stream:
                yield stream, info.file_size
    except zipfile.BadZipFile as exc:
        raise VerbevalError(f"source {source.name!r}: {origin} is not a valid zip archive: {exc}") from exc


def _fetch_from_mirror(
    source: Source, dest: Path, mirror_dir: Path, before_replace: Callable[[], None] | None = None
) -> None:
    location, stream = _mirror_stream(source, mirror_dir)
    with stream:
        if source.archive_member is not None and zipfile.is_zipfile(location):
            # The mirror holds the archive itself (URL layout) rather than the extracted member.
            with _archive_member_stream(source, location, str(location)) as (member, size):
                _copy_verified(source, member, dest, f"{location}!{source.archive_member}", size, before_replace)
            return
        _copy_verified(source, stream, dest, str(location), location.stat().st_size, before_replace)


def _fetch_from_url(
    source: Source, dest: Path, timeout: float, before_replace: Callable[[], None] | None = None
) -> None:
    if source.archive_member is None:
        with _open_url(source, timeout) as (response, size):
            _copy_verified(source, response, dest, source.url, size, before_replace)
        return
    # Download the archive to a scratch file next to dest, then extract and verify the member.
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as scratch:
        archive = Path(scratch) / "archive.zip"
        with (
            _open_url(source, timeout) as (response, size),
            open(archive, "wb") as out,
            _progress(size, source.name) as bar,
        ):
            try:
                for block in iter(lambda: response.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException) as exc:
                raise VerbevalError(
                    f"source {source.name!r}: download of {source.url} failed: {exc}{OFFLINE_HINT}"
                ) from exc
        with _archive_member_stream(source, archive, source.url) as (member, msize):
            _copy_verified(source, member, dest, f"{source.url}!{source.archive_member}", msize, before_replace)


def fetch_source(source: Source, dest: str | Path, mirror_dir: str | Path | None = None, timeout: float = 60) -> Path:
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
            print(
                f"{dest}: matches no checksum of source {source.name!r} in {source.manifest}; "
                f"moved to {moved.name}, replaced by a verified copy",
                file=sys.stderr,
            )

    if restore_set_aside(source, dest, set_aside):
        return dest
    if mirror_dir is not None:
        _fetch_from_mirror(source, dest, Path(mirror_dir), set_aside)
    else:
        _fetch_from_url(source, dest, timeout, set_aside)
    return dest
