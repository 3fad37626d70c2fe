"""Verb lexicons per language: lemmas with the two forms each agreement contrast opposes.

A lexicon is a table of :data:`LEXICON_COLUMNS`: ``lemma``, ``sing`` (the singular form of the
contrast), ``plur`` (the plural form), ``cell`` (which contrast: ``pres`` = third person singular /
plural present; Russian ``past_m``, ``past_f``, ``past_n`` = past singular of that gender / past
plural; Hebrew ``m``, ``f`` = present singular / plural of that gender) and ``source`` (the package
it came from). Each language module (``fr``, ``de``, ``ru``, ``he``) declares its
:class:`LexiconSource` (package, pinned version and sha256, licence) and builds its table
(``build_lexicon()``); :func:`language_lexicon` and :func:`language_source` reach them by language
code, importing the module only when asked (each needs its own package, the ``multilingual`` extra).

The helpers here are the ones the language modules share: :func:`require_version` (the installed
package is the pinned release, else one line saying what to ``pip install``), :func:`pair_forms`
(a cell with spelling variants on either side) and :func:`lexicon_frame` (the table, sorted and
deduplicated the same way for every language, so that a build is byte-identical across runs).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError

if TYPE_CHECKING:
    import pandas as pd

#: Columns of a language lexicon, in order.
LEXICON_COLUMNS: tuple[str, ...] = ("lemma", "sing", "plur", "cell", "source")

#: Language code -> the module that builds its lexicon (``en`` is handled by the agreement study).
LANGUAGE_MODULES: dict[str, str] = {
    "fr": "verbeval.multilingual.lexicons.fr",
    "de": "verbeval.multilingual.lexicons.de",
    "ru": "verbeval.multilingual.lexicons.ru",
    "he": "verbeval.multilingual.lexicons.he",
}


@dataclass(frozen=True)
class LexiconSource:
    """Where a language's lexicon comes from, pinned.

    ``package``: the pip distribution (or ``debian:<name>``); ``version`` and ``sha256``: the pinned
    release and the sha256 of its published file (wheel, sdist or .deb); ``url``: where that file
    is published; ``licence``: the licence of the package's data; ``cells``: the contrasts the
    lexicon has, in order.
    """

    language: str
    package: str
    version: str
    sha256: str
    url: str
    licence: str
    cells: tuple[str, ...]

    @property
    def requirement(self) -> str:
        """The exact pip requirement, ``package==version``."""
        return f"{self.package}=={self.version}"


def _module(lang: str) -> ModuleType:
    try:
        name = LANGUAGE_MODULES[lang]
    except KeyError:
        known = ", ".join(sorted(LANGUAGE_MODULES))
        raise VerbevalError(f"no verb lexicon for language {lang!r} (known: {known})") from None
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            raise VerbevalError(f"the verb lexicon of {lang!r} ({name}) is not written yet") from None
        raise


def language_source(lang: str) -> LexiconSource:
    """The pinned source of language ``lang``'s lexicon (its module's ``SOURCE``)."""
    return _module(lang).SOURCE


def language_lexicon(lang: str, *args: Any, **kwargs: Any) -> pd.DataFrame:
    """Language ``lang``'s verb lexicon (:data:`LEXICON_COLUMNS`), built by its module's
    ``build_lexicon`` (with ``args`` and ``kwargs``: Hebrew's takes the hspell package's path)."""
    return _module(lang).build_lexicon(*args, **kwargs)


def require_version(source: LexiconSource, distribution: str | None = None) -> None:
    """Fail with one line unless ``source``'s package (or ``distribution``, the name installed
    under) is installed in exactly the pinned version."""
    try:
        installed = metadata.version(distribution or source.package)
    except metadata.PackageNotFoundError:
        installed = None
    if installed != source.version:
        found = "is not installed" if installed is None else f"is {installed}, not the pinned {source.version}"
        raise VerbevalError(
            f"the {source.language} verb lexicon needs {source.package} {source.version}: it {found};"
            f" pip install '{source.requirement}' (or the extra verbeval[multilingual])"
        )


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def pair_forms(sings: Iterable[str], plurs: Iterable[str]) -> list[tuple[str, str]]:
    """Pair the singular and plural spellings of one cell of one lemma.

    One form on a side pairs with every form of the other. With variants on both sides
    (``paie``/``paye`` - ``paient``/``payent``) each form pairs with the other side's forms that
    share the longest prefix with it, so that ``paie``/``paient`` and ``paye``/``payent`` pair and
    the mixed pairs do not. Sorted, without duplicates.
    """
    s_list, p_list = sorted(set(sings)), sorted(set(plurs))
    pairs: set[tuple[str, str]] = set()
    for s in s_list:
        best = max((_common_prefix(s, p) for p in p_list), default=0)
        pairs.update((s, p) for p in p_list if _common_prefix(s, p) == best)
    for p in p_list:
        best = max((_common_prefix(s, p) for s in s_list), default=0)
        pairs.update((s, p) for s in s_list if _common_prefix(s, p) == best)
    return sorted(pairs)


def lexicon_frame(rows: Iterable[tuple[str, str, str, str]], source: LexiconSource) -> pd.DataFrame:
    """The lexicon table from ``(lemma, sing, plur, cell)`` rows: lowercased, rows whose two forms
    are equal dropped, sorted by cell, lemma, sing, plur, one row per ``(cell, sing, plur)`` (the
    first lemma in that order), index 0..n-1, every column ``str``."""
    import pandas as pd

    seen: set[tuple[str, str, str]] = set()
    kept: list[tuple[str, str, str, str, str]] = []
    label = source.requirement
    ordered = sorted({(cell, lemma.lower(), sing.lower(), plur.lower()) for lemma, sing, plur, cell in rows})
    for cell, lemma, sing, plur in ordered:
        if sing == plur or (cell, sing, plur) in seen:
            continue
        seen.add((cell, sing, plur))
        kept.append((lemma, sing, plur, cell, label))
    return pd.DataFrame(kept, columns=list(LEXICON_COLUMNS), dtype=str)
