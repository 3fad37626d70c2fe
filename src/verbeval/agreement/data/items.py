"""The lexical items of a template row: its subject noun and its verb (``agreement.bootstrap.cluster``
``subject``, ``verb``, ``subject_and_verb``; docs/metrics.md, "Clustered intervals").

``templates.parquet``'s last two columns:

``subject_item``
    The noun the verb agrees with (the agreement controller), singular (``authors`` -> ``author``,
    ``taxi drivers`` -> ``taxi driver``), recovered for the Marvin & Linzen rows (``ml_jsonl``) by
    :func:`ml_subject` from the shape of the left context, which the templates' grammar fixes (Marvin &
    Linzen 2018, ``make_templates.py`` and ``terminals.py``): the head noun after the first ``the``,
    except in a sentential complement (``the mechanics said the authors``) and inside an object
    relative clause (``the authors that the guards [like]``), where it is the embedded subject.
    ``''`` where it is not recovered: every BLiMP and custom row, and a Marvin & Linzen row of no
    known shape.
``verb_item``
    The lemma of the verb pair (``laughs``/``laugh`` -> ``laugh``, ``is``/``are`` -> ``be``,
    ``hasn't``/``haven't`` -> ``have``) for every row whose pair is a present or past agreement pair
    of one verb (:func:`verb_lemma`); ``''`` otherwise (a custom pair such as ``sings``/``sang``).
    A predicate's copula is the item ``be``: ``are tall`` and ``are young`` share one decision for a
    causal LM, which sees only the prefix.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllLemmas, getInflection, getLemma

#: the lemma of the closed-class forms (their number: :mod:`verbeval.agreement.data.minimal_pairs`)
_CLOSED_LEMMA = {
    **dict.fromkeys(("is", "was", "am", "are", "were", "isn't", "wasn't", "aren't", "weren't"), "be"),
    **dict.fromkeys(("has", "have", "hasn't", "haven't"), "have"),
    **dict.fromkeys(("does", "do", "doesn't", "don't"), "do"),
}


@lru_cache(maxsize=4096)
def verb_lemma(correct: str, incorrect: str) -> str:
    """The lemma of an agreement pair's two verb forms (lower case), or ``''`` when they are not the
    third-person-singular and plural form of one verb (the forms of *be*, *have* and *do* from a
    table, tense may differ; any other verb: the lemma whose VBZ form is one of the two and VB/VBP
    form the other, by lemminflect, the first in alphabetical order when several fit)."""
    c, i = correct.lower(), incorrect.lower()
    if c in _CLOSED_LEMMA or i in _CLOSED_LEMMA:
        return _CLOSED_LEMMA[c] if _CLOSED_LEMMA.get(c) == _CLOSED_LEMMA.get(i) else ""
    lemmas: set[str] = set()
    for word in (c, i):
        found = getAllLemmas(word, upos="VERB").get("VERB", ())
        lemmas.update(found or getLemma(word, upos="VERB", lemmatize_oov=True))
    for lemma in sorted(lemmas):
        third = set(getInflection(lemma, tag="VBZ"))
        base = (set(getInflection(lemma, tag="VB")) | set(getInflection(lemma, tag="VBP")) | {lemma}) - third
        if (c in third and i in base) or (c in base and i in third):
            return lemma
    return ""


@lru_cache(maxsize=4096)
def singular_noun(noun: str) -> str:
    """The singular of a (possibly compound) noun: its last word's lemma by lemminflect, the first one
    it gives (``movies`` -> ``movie``, ``taxi drivers`` -> ``taxi driver``)."""
    *head, last = noun.lower().split()
    lemma = getLemma(last, upos="NOUN", lemmatize_oov=True)
    return " ".join([*head, lemma[0] if lemma else last])


# The closed classes of the Marvin & Linzen grammar (terminals.py) that tell its templates apart.
_COMPLEMENT_VERBS = "said|knew|thought"
_PREPOSITIONS = "next to|behind|in front of|to the side of|near|across from|from|by"
_TRANSITIVE = "like|likes|hate|hates|admire|admires|love|loves"

#: ``(template, pattern)``: the full lower-case left context of each Marvin & Linzen template, in the
#: order tried; the group ``s`` is the agreement controller (docs/data.md, "Lexical items")
ML_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("simple_agrmt", r"the (?P<s>\w+)"),
        ("vp_coord", r"the (?P<s>\w+) .+ and"),  # long_vp_coord too: the second verb agrees
        ("sent_comp", rf"the \w+ (?:{_COMPLEMENT_VERBS}) the (?P<s>\w+(?: \w+)?)"),
        ("prep", rf"the (?P<s>\w+) (?:{_PREPOSITIONS}) the \w+(?: \w+)?"),
        ("subj_rel", rf"the (?P<s>\w+) that (?:{_TRANSITIVE}) the \w+(?: \w+)?"),
        ("obj_rel_across", rf"the (?P<s>\w+) (?:that )?the \w+(?: \w+)? (?:{_TRANSITIVE})"),  # no_comp too
        ("obj_rel_within", r"the \w+ (?:that )?the (?P<s>\w+(?: \w+)?)"),  # no_comp too: the embedded verb
    )
)


def ml_subject(left: str) -> str:
    """The singular agreement controller of a Marvin & Linzen row whose context before the verb is
    ``left`` (:data:`ML_SHAPES`, the first that matches all of it), or ``''`` for no known shape."""
    text = " ".join(left.lower().split())
    for _, pattern in ML_SHAPES:
        m = pattern.fullmatch(text)
        if m:
            return singular_noun(m.group("s"))
    return ""
