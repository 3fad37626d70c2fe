"""``clams-lexicon``: a language's lexicon and its counts, whichever its source.

English takes the agreement study's own lexicon (``verbeval lexicon``: the refining-tse verb list and
the Giant Verb List inflected by lemminflect) as the one cell ``pres``, so that English CLAMS and
Marvin & Linzen are scored over the same lemmas; Hebrew reads Debian's hspell package (a file the
workflow fetches); French, German and Russian build from their installed, pinned packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.multilingual.lexicons import LEXICON_COLUMNS, _module

#: the English lexicon's provenance (the agreement study's, docs/data.md)
#: the agreement lexicon's ``source`` values -> the verb list they name
ENGLISH_LISTS = {"combined": "refining-tse combined_verb_list.csv", "giant": "Giant Verb List (lemminflect)"}
ENGLISH_SOURCE = {
    "package": "verbeval lexicon",
    "version": "the agreement study's lexicon.parquet",
    "sha256": "",
    "url": "docs/data.md",
    "licence": "MIT (refining-tse); Giant Verb List: see docs/data.md",
    "cells": ["pres"],
}


def english_lexicon(path: str | Path) -> pd.DataFrame:
    """The agreement study's lexicon as the English cell ``pres``."""
    lex = pd.read_parquet(path)
    missing = {"lemma", "sing", "plur"} - set(lex.columns)
    if missing:
        raise VerbevalError(f"{path}: not a verbeval lexicon (no column {', '.join(sorted(missing))})")
    out = lex.assign(cell="pres", source=lex["source"] if "source" in lex else "agreement")
    return out[list(LEXICON_COLUMNS)].astype("str").reset_index(drop=True)


def build_language_lexicon(
    lang: str, *, hspell: str | None = None, english: str | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(lexicon, counts)`` of ``lang``: the table (:data:`LEXICON_COLUMNS`) and what the counts file
    records (its source pinned, lemmas in all and per cell, the source's own count of verb lemmas)."""
    if lang == "en":
        if not english:
            raise VerbevalError("clams-lexicon --language en needs --english (the agreement study's lexicon.parquet)")
        lex, source_count, source = english_lexicon(english), None, dict(ENGLISH_SOURCE)
        lists = sorted({name for s in set(lex["source"]) for k, name in ENGLISH_LISTS.items() if s in (k, "both")})
        source["package"] = f"verbeval lexicon ({' + '.join(lists) or 'the agreement study'})"
    else:
        mod = _module(lang)  # an unknown language: one line naming the known ones
        if lang == "he":
            # downloaded (sha256 checked) into the cache, or the verified copy already there
            hspell = hspell or str(mod.fetch_hspell(mod.cached_deb_path().parent))
            lex, source_count = mod.build_lexicon(hspell), mod.source_lemma_count(hspell)
        else:
            lex, source_count = mod.build_lexicon(), mod.source_lemma_count()
        s = mod.SOURCE
        source = {"package": s.package, "version": s.version, "sha256": s.sha256, "url": s.url,
                  "licence": s.licence, "cells": list(s.cells)}  # fmt: skip
    per_cell = {str(c): int(n) for c, n in lex.groupby("cell", sort=False)["lemma"].nunique().items()}
    counts = {
        "language": lang,
        **source,
        "lemmas": int(lex["lemma"].nunique()),
        "rows": len(lex),
        "lemmas_per_cell": per_cell,
        "source_verb_lemmas": source_count,
    }
    return lex, counts
