"""The Hebrew verb lexicon: present-tense (בינוני) verbs from Debian's ``hspell`` package.

Hebrew present-tense verbs agree with their subject in number and gender, so the lexicon has two
cells: ``m`` (masculine singular / masculine plural present: ``רוקד`` / ``רוקדים``) and ``f``
(feminine singular / feminine plural present: ``רוקדת`` / ``רוקדות``). Forms are unvocalised, in
hspell's "ktiv male" (full spelling, the standard of the Academy's niqqud-less rules), which is the
spelling of the CLAMS Hebrew sets.

The source is the pinned Debian binary package ``hspell_1.4-3.1_amd64.deb`` (AGPL-3.0-or-later,
debian/copyright), read in pure Python, nothing installed:

* the ``.deb`` is an ``ar`` archive whose ``data.tar.xz`` member holds ``/usr/share/hspell/hebrew.wgz``
  and its companions ``.desc``, ``.stems`` and ``.sizes``, and ``/usr/lib/x86_64-linux-gnu/libhspell.a``;
* ``hebrew.wgz`` (gzip) is hspell's sorted word list in ISO-8859-8, front-coded as hspell's
  ``wunzip.c`` and ``linginfo_init`` (``linginfo.c``) read it: a run of ASCII digits ``n`` means
  "the word so far is complete; drop its last ``n`` letters", any other byte appends a letter;
* ``hebrew.wgz.desc`` (gzip) has one line per word: the word's analyses, two letters each; the pair
  ``c0 c1`` is the index ``(c0 - 'A') + 26 * (c1 - 'A')`` into the ``dmasks`` table
  (``dcode2dmask`` in ``linginfo.c``; the codes are allotted by ``binarize-desc.pl``);
* ``hebrew.wgz.stems`` (gzip) has one line per word: one stem per analysis, three bytes each, the
  base-94 index ``(b0 - 33) + 94 (b1 - 33) + 94² (b2 - 33)`` of the stem in the word list
  (``linginfo_stem2text``; written by ``pack-desc.pl``). A verb's stem is its past third person
  masculine singular (``רקד``), Hebrew's citation form: it is the lexicon's ``lemma``;
* the ``dmasks`` table itself is not a data file: ``binarize-desc.pl`` writes it as the C source
  ``dmask.c``, compiled into ``linginfo.o``. It is read here from the package's ``libhspell.a``
  (an ``ar`` archive; ``linginfo.o`` is an x86-64 ELF object whose symbol ``dmasks`` is an array of
  little-endian ``int`` in ``.data``). A dmask is a bit field (``D_*`` in ``binarize-desc.pl``):
  part of speech, gender, person, number, tense, the possessive/object suffix, construct state
  (סמיכות) and proper noun.

The C sources referred to are hspell's (``wunzip.c``, ``linginfo.c``, ``binarize-desc.pl``,
``pack-desc.pl``; read in the hspell 1.2 sources, github.com/synhershko/hspell). The decoding was
checked against the package's own ``hspell -l`` on 4,000 random words of 1.4-3.1: the same stems
and analyses for every word (``hspell -l`` leaves out infinitive analyses, which need a prefix).

The lexicon keeps the verb analyses in the present tense with one gender, singular or plural,
without construct state or suffix, grouped by stem (seven hand-listed verbs, ``חי`` among them,
whose present forms hspell describes without gender, get it from their spelling:
:func:`genderless_cell`). A stem with several singular (or plural) forms
of one gender pairs each singular with the plural spelled like it (``sing`` + ``ים`` for ``m``;
``sing`` with its final ``ת``/``ה`` replaced by ``ות`` for ``f``), else with every plural form of
the stem; rows whose singular equals their plural are dropped.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import struct
import tarfile
import tempfile
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from verbeval.core.errors import InputError
from verbeval.core.io import sha256_file
from verbeval.core.model_sources.fingerprint import cache_dir
from verbeval.multilingual.lexicons import LEXICON_COLUMNS, LexiconSource

#: The pinned package: Debian's hspell 1.4-3.1 binary package for amd64.
SOURCE = LexiconSource(
    language="he",
    package="debian:hspell",
    version="1.4-3.1",
    sha256="5f15c18904d2e95adb726a1452f19f94fca1d582a1f6f5304f115663b37df58e",
    url="http://deb.debian.org/debian/pool/main/h/hspell/hspell_1.4-3.1_amd64.deb",
    licence="AGPL-3.0-or-later",
    cells=("m", "f"),
)

#: The file name the package is kept under (in the cache, by :func:`fetch_hspell`).
DEB_NAME = "hspell_1.4-3.1_amd64.deb"
#: The cache folder's subfolder the package is kept in (:func:`cached_deb_path`).
CACHE_SUBDIR = "debian"
#: The ``source`` column's value.
SOURCE_LABEL = SOURCE.requirement

#: Paths inside the package's data archive.
WGZ = "usr/share/hspell/hebrew.wgz"
LIBHSPELL = "usr/lib/x86_64-linux-gnu/libhspell.a"
#: The hspell character set.
ENCODING = "iso-8859-8"

# The dmask bit fields, as binarize-desc.pl defines them (D_* there, #defined in dmask.c).
D_NOUN, D_VERB, D_ADJ, D_TYPEMASK = 1, 2, 3, 3
D_MASCULINE, D_FEMININE, D_GENDERMASK = 4, 8, 12
D_GUFBASE, D_GUFMASK = 16, 48
D_NUMBASE, D_NUMMASK = 64, 192
D_TENSEBASE, D_TENSEMASK = 256, 7 * 256
D_OGENDERBASE = 8 * D_TENSEBASE
D_OGUFBASE = 4 * D_OGENDERBASE
D_ONUMBASE = 4 * D_OGUFBASE
D_OMASK = 3 * D_ONUMBASE + 3 * D_OGUFBASE + 3 * D_OGENDERBASE
D_OSMICHUT = 4 * D_ONUMBASE
D_SPECNOUN = 2 * D_OSMICHUT

POS = {D_NOUN: "noun", D_VERB: "verb", D_ADJ: "adj", 0: ""}
NUMBER = {D_NUMBASE: "sg", 2 * D_NUMBASE: "du", 3 * D_NUMBASE: "pl", 0: ""}
TENSE = {
    0: "",
    1 * D_TENSEBASE: "infinitive",
    2 * D_TENSEBASE: "past",
    3 * D_TENSEBASE: "present",
    4 * D_TENSEBASE: "future",
    5 * D_TENSEBASE: "imperative",
    6 * D_TENSEBASE: "binfinitive",
}
GENDER = {0: "", D_MASCULINE: "m", D_FEMININE: "f", D_MASCULINE | D_FEMININE: "mf"}

#: Columns of :func:`read_hspell`: one row per analysis of a word.
ANALYSIS_COLUMNS: tuple[str, ...] = (
    "word", "lemma", "pos", "gender", "person", "number", "tense", "smichut", "suffix", "propn", "dmask"
)  # fmt: skip


def read_ar(data: bytes) -> dict[str, bytes]:
    """The members of a Unix ``ar`` archive (a ``.deb``, a static library), by name.

    GNU names end in ``/``; the symbol index ``/`` and long-name table ``//`` are skipped (the
    members read here have short names).
    """
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    members: dict[str, bytes] = {}
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        if header[58:60] != b"`\n":
            raise ValueError(f"bad ar member header at byte {pos}")
        name = header[0:16].decode("ascii").rstrip()
        size = int(header[48:58].decode("ascii").strip())
        body = data[pos + 60 : pos + 60 + size]
        if len(body) != size:
            raise ValueError(f"ar member {name!r} is truncated")
        if name not in ("/", "//"):
            members[name.rstrip("/")] = body
        pos += 60 + size + (size % 2)
    return members


def read_deb_data(deb: bytes, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """The files ``wanted`` (paths without ``./``) from a ``.deb``'s data archive."""
    members = read_ar(deb)
    tar_name = next((n for n in members if n.startswith("data.tar")), None)
    if tar_name is None:
        raise ValueError("no data.tar member")
    payload = members[tar_name]
    if tar_name == "data.tar.xz":
        payload = lzma.decompress(payload)
    elif tar_name == "data.tar.gz":
        payload = gzip.decompress(payload)
    elif tar_name != "data.tar":
        raise ValueError(f"{tar_name} is not supported (only .xz, .gz or uncompressed)")
    found: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as tar:
        for info in tar:
            name = info.name.removeprefix("./")
            if name in wanted and info.isfile():
                fh = tar.extractfile(info)
                if fh is None:
                    raise ValueError(f"cannot extract {name}")
                found[name] = fh.read()
    missing = [w for w in wanted if w not in found]
    if missing:
        raise ValueError(f"the package has no {', '.join(missing)}")
    return found


def elf_symbol(obj: bytes, symbol: str) -> bytes:
    """The bytes of a defined data ``symbol`` in a little-endian ELF64 relocatable object."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ValueError("not a little-endian ELF64 object")
    shoff, shentsize, shnum = (struct.unpack_from("<Q", obj, 0x28)[0], *struct.unpack_from("<HH", obj, 0x3A))
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    for sec in sections:
        if sec[1] != 2:  # SHT_SYMTAB
            continue
        _, _, _, _, off, size, link, _, _, entsize = sec
        stroff = sections[link][4]
        for k in range(size // entsize):
            st_name, _info, _other, shndx, value, st_size = struct.unpack_from("<IBBHQQ", obj, off + k * entsize)
            end = obj.index(b"\0", stroff + st_name)
            if obj[stroff + st_name : end].decode("ascii") == symbol and 0 < shndx < shnum:
                base = sections[shndx][4]
                return obj[base + value : base + value + st_size]
    raise ValueError(f"no symbol {symbol!r}")


def read_dmasks(libhspell: bytes) -> list[int]:
    """The ``dmasks`` table compiled into ``libhspell.a``'s ``linginfo.o``."""
    linginfo = read_ar(libhspell).get("linginfo.o")
    if linginfo is None:
        raise ValueError("libhspell.a has no linginfo.o")
    raw = elf_symbol(linginfo, "dmasks")
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


def unzip_words(wgz: bytes) -> Iterator[bytes]:
    """The words of hspell's front-coded word list (``wunzip.c``)."""
    word = bytearray()
    i, n = 0, len(wgz)
    while i < n:
        c = wgz[i]
        if 48 <= c <= 57:
            yield bytes(word)
            j = i
            while j < n and 48 <= wgz[j] <= 57:
                j += 1
            back = int(wgz[i:j])
            if back > len(word):
                raise ValueError(f"bad back length {back} at byte {i}")
            del word[len(word) - back :]
            i = j
        else:
            word.append(c)
            i += 1
    yield bytes(word)


def decode_dmask(dmask: int) -> tuple[str, str, str, str, str, bool, bool, bool]:
    """(pos, gender, person, number, tense, smichut, suffix, propn) of a dmask."""
    return (
        POS[dmask & D_TYPEMASK],
        GENDER[dmask & D_GENDERMASK],
        str((dmask & D_GUFMASK) // D_GUFBASE or ""),
        NUMBER[dmask & D_NUMMASK],
        TENSE.get(dmask & D_TENSEMASK, "?"),
        bool(dmask & D_OSMICHUT),
        bool(dmask & D_OMASK),
        bool(dmask & D_SPECNOUN),
    )


def decode_hspell(wgz: bytes, desc: bytes, stems: bytes, dmasks: list[int]) -> pd.DataFrame:
    """The analyses of hspell's word list: gunzipped ``hebrew.wgz``, ``.desc`` and ``.stems``.

    One row per (word, analysis), :data:`ANALYSIS_COLUMNS`, in word-list order.
    """
    words = [w.decode(ENCODING) for w in unzip_words(wgz)]
    desc_lines = desc.split(b"\n")
    stem_lines = stems.split(b"\n")
    if desc_lines and desc_lines[-1] == b"":
        desc_lines.pop()
    if stem_lines and stem_lines[-1] == b"":
        stem_lines.pop()
    if not len(words) == len(desc_lines) == len(stem_lines):
        raise ValueError(f"{len(words)} words but {len(desc_lines)} description and {len(stem_lines)} stem lines")
    decoded: dict[int, tuple[str, str, str, str, str, bool, bool, bool]] = {}
    rows: list[tuple[object, ...]] = []
    for index, (word, codes, stem) in enumerate(zip(words, desc_lines, stem_lines, strict=True)):
        if len(codes) % 2 or len(stem) % 3 or len(codes) // 2 != len(stem) // 3:
            raise ValueError(f"word {index}: {len(codes)} description bytes, {len(stem)} stem bytes")
        for k in range(len(codes) // 2):
            code = (codes[2 * k] - 65) + 26 * (codes[2 * k + 1] - 65)
            if not 0 <= code < len(dmasks):
                raise ValueError(f"word {index}: description code {code} is out of range")
            s = stem[3 * k : 3 * k + 3]
            pointer = (s[0] - 33) + 94 * (s[1] - 33) + 94 * 94 * (s[2] - 33)
            if not 0 <= pointer < len(words):
                raise ValueError(f"word {index}: stem pointer {pointer} is out of range")
            dmask = dmasks[code]
            if dmask not in decoded:
                decoded[dmask] = decode_dmask(dmask)
            rows.append((word, words[pointer], *decoded[dmask], dmask))
    frame = pd.DataFrame.from_records(rows, columns=list(ANALYSIS_COLUMNS))
    return frame


def _load(deb_path: str | Path, sha256: str) -> dict[str, bytes]:
    path = Path(deb_path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read the hspell package: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise InputError(path, f"sha256 {digest} is not the pinned {sha256} (hspell {SOURCE.version})")
    wanted = (WGZ, f"{WGZ}.desc", f"{WGZ}.stems", LIBHSPELL)
    try:
        files = read_deb_data(data, wanted)
        return {
            "wgz": gzip.decompress(files[WGZ]),
            "desc": gzip.decompress(files[f"{WGZ}.desc"]),
            "stems": gzip.decompress(files[f"{WGZ}.stems"]),
            "libhspell": files[LIBHSPELL],
        }
    except (ValueError, IndexError, OSError, EOFError, tarfile.TarError, lzma.LZMAError) as exc:
        raise InputError(path, f"not a readable hspell package: {exc}") from exc


def read_hspell(deb_path: str | Path, sha256: str = SOURCE.sha256) -> pd.DataFrame:
    """Every analysis of every word in the hspell ``.deb`` at ``deb_path`` (:data:`ANALYSIS_COLUMNS`).

    The file's sha256 must be ``sha256`` (the pinned package's); a mismatch, or a file that is not
    a readable hspell package, raises :class:`~verbeval.core.errors.InputError`.
    """
    files = _load(deb_path, sha256)
    try:
        return decode_hspell(files["wgz"], files["desc"], files["stems"], read_dmasks(files["libhspell"]))
    except (ValueError, KeyError, IndexError, struct.error, UnicodeDecodeError) as exc:
        raise InputError(deb_path, f"not a readable hspell word list: {exc}") from exc


def genderless_cell(word: str, number: str) -> tuple[str, str] | None:
    """(gender, number) of a present-tense verb form that hspell lists without gender.

    Seven hand-listed verbs (``חי``, ``יכול``, ``יגור``, ``נגל``, ``נמק``, ``נסב``, ``קטן``) have
    present forms described only as ``פ,יחיד,הווה`` / ``פ,רבים,הווה`` (masculine ``חי``, ``חיים``)
    and ``פ,הווה`` (feminine ``חיה``, ``חיות``); their gender and number are read from the spelling.
    """
    if word.endswith("ים"):
        return ("m", "pl")
    if word.endswith("ות"):
        return ("f", "pl")
    if number == "sg":
        return ("m", "sg")
    if number == "" and word.endswith(("ה", "ת")):
        return ("f", "sg")
    return None


def present_forms(analyses: pd.DataFrame) -> pd.DataFrame:
    """The present-tense verb analyses the lexicon uses: bare (no suffix, construct state or proper
    noun), masculine or feminine, singular or plural (:func:`genderless_cell` for the few without
    gender). Columns ``lemma``, ``word``, ``gender``, ``number``."""
    cols = ["lemma", "word", "gender", "number"]
    bare = analyses.loc[
        (analyses["pos"] == "verb")
        & (analyses["tense"] == "present")
        & ~analyses["smichut"]
        & ~analyses["suffix"]
        & ~analyses["propn"],
        cols,
    ]
    regular = bare["gender"].isin(["m", "f"]) & bare["number"].isin(["sg", "pl"])
    repaired = [
        (lemma, word, *cell)
        for lemma, word, gender, number in bare.loc[~regular & (bare["gender"] == "")].itertuples(index=False)
        if (cell := genderless_cell(word, number)) is not None
    ]
    forms = pd.concat([bare.loc[regular], pd.DataFrame(repaired, columns=cols)], ignore_index=True)
    return forms.drop_duplicates().reset_index(drop=True)


#: Final letter forms and their medial forms (a suffix turns a final letter medial).
FINAL_TO_MEDIAL = str.maketrans("ךםןףץ", "כמנפצ")


def regular_plural(sing: str, cell: str) -> str:
    """The plural spelled regularly from a present singular: ``רוקד`` -> ``רוקדים``, ``קונה`` ->
    ``קונים``, ``מאלף`` -> ``מאלפים``; ``רוקדת`` -> ``רוקדות``, ``קונה`` -> ``קונות``, ``מובנית``
    -> ``מובנות``."""
    if cell == "m":
        stem = sing[:-1] if sing.endswith("ה") else sing
        return stem[:-1] + stem[-1:].translate(FINAL_TO_MEDIAL) + "ים"
    for ending in ("ית", "ת", "ה"):
        if sing.endswith(ending) and len(sing) > len(ending):
            return sing[: -len(ending)] + "ות"
    return sing + "ות"


def pair_forms(sings: list[str], plurs: list[str], cell: str) -> list[tuple[str, str]]:
    """The (sing, plur) pairs of one stem and gender (the module docstring's rule)."""
    if len(sings) == 1 or len(plurs) == 1:
        return [(s, p) for s in sings for p in plurs]
    pairs: list[tuple[str, str]] = []
    for s in sings:
        regular = regular_plural(s, cell)
        pairs += [(s, regular)] if regular in plurs else [(s, p) for p in plurs]
    return pairs


def lexicon_from_analyses(analyses: pd.DataFrame) -> pd.DataFrame:
    """The lexicon (:data:`LEXICON_COLUMNS`) from :func:`read_hspell`'s analyses."""
    forms: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: {"sg": set(), "pl": set()})
    for lemma, word, gender, number in present_forms(analyses).itertuples(index=False):
        forms[(lemma, gender)][number].add(word)
    rows = []
    for (lemma, cell), by_number in forms.items():
        sings, plurs = sorted(by_number["sg"]), sorted(by_number["pl"])
        for sing, plur in pair_forms(sings, plurs, cell):
            if sing != plur:
                rows.append((lemma, sing, plur, cell, SOURCE_LABEL))
    table = pd.DataFrame.from_records(rows, columns=list(LEXICON_COLUMNS))
    table["cell"] = pd.Categorical(table["cell"], categories=list(SOURCE.cells), ordered=True)
    table = table.sort_values(["cell", "lemma", "sing", "plur"], kind="stable")
    table = table.drop_duplicates(["cell", "sing", "plur"], keep="first")
    table["cell"] = table["cell"].astype(str)
    return table.astype({c: "str" for c in LEXICON_COLUMNS}).reset_index(drop=True)


def build_lexicon(deb_path: str | Path, sha256: str = SOURCE.sha256) -> pd.DataFrame:
    """The Hebrew verb lexicon (:data:`LEXICON_COLUMNS`, cells ``m`` and ``f``) of the hspell
    ``.deb`` at ``deb_path``, sorted by cell, lemma, sing, plur; unique on (cell, sing, plur)."""
    return lexicon_from_analyses(read_hspell(deb_path, sha256))


def source_lemma_count(deb_path: str | Path, sha256: str = SOURCE.sha256) -> int:
    """How many verb lemmas (distinct stems of verb analyses, any tense) hspell lists."""
    analyses = read_hspell(deb_path, sha256)
    return int(analyses.loc[analyses["pos"] == "verb", "lemma"].nunique())


def cached_deb_path() -> Path:
    """Where the workflow keeps the package: ``$VERBEVAL_CACHE_DIR/debian/<DEB_NAME>`` (default
    ``~/.cache/verbeval``); :func:`fetch_hspell` with its folder puts it there."""
    return cache_dir() / CACHE_SUBDIR / DEB_NAME


def fetch_hspell(dest_dir: str | Path, url: str = SOURCE.url, sha256: str = SOURCE.sha256) -> Path:
    """The pinned hspell ``.deb`` in ``dest_dir``, downloaded from ``url`` unless a verified copy is
    there. The download goes to a temporary file in ``dest_dir``, is checked against ``sha256`` and
    only then renamed into place; a mismatch raises :class:`~verbeval.core.errors.InputError`."""
    dest = Path(dest_dir)
    target = dest / DEB_NAME
    if target.is_file() and sha256_file(target) == sha256:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{DEB_NAME}.", suffix=".part", dir=dest)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            for block in iter(lambda: response.read(1 << 16), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != sha256:
            raise InputError(url, f"downloaded sha256 {digest.hexdigest()} is not the pinned {sha256}")
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o644 & ~umask)  # mkstemp's 0600 is not a cache file's mode
        os.replace(tmp, target)
    except OSError as exc:
        raise InputError(url, f"cannot download the hspell package: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target
