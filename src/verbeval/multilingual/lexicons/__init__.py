"""Verb lexicons per language: lemmas with the two forms each agreement contrast opposes.

A lexicon is a table of :data:`LEXICON_COLUMNS`: ``lemma``, ``sing`` (the singular form of the
contrast), ``plur`` (the plural form), ``cell`` (which contrast: ``pres`` = third person singular /
plural present; Russian ``past_m``, ``past_f``, ``past_n`` = past singular of that gender / past
plural; Hebrew ``m``, ``f`` = present singular / plural of that gender) and ``source`` (the package
it came from). Each language module (``fr``, ``de``, ``ru``, ``he``) declares its
:class:`LexiconSource` (package, pinned version and sha256, licence) and builds its table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Columns of a language lexicon, in order.
LEXICON_COLUMNS: tuple[str, ...] = ("lemma", "sing", "plur", "cell", "source")


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
