"""The sentence edits of the counterfactual manipulations (:mod:`verbeval.veridicality.counterfactual`):
word tokens, verb forms, finding the embedding verb and the embedded clause's verb, and the edits
of one premise (and hypothesis): a verb replaced, a to-complement turned into a that-clause and back.

Inserted verbs are inflected with lemminflect to the Penn tag of the word they replace. No
tagger model is available offline, so the tag comes from the word's own forms (lemminflect's
inflection tables) and a few context rules (:func:`context_tag`): after do/modals/``to`` VB,
after have VBN, after be VBG or VBN, else the finite form the word is. Sentences the rules cannot
handle are reported with a reason, never guessed (:class:`Unhandled`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

DO = {"do", "does", "did"}
MODALS = {"can", "could", "may", "might", "must", "shall", "should", "will", "would"}
HAVE = {"have", "has", "had", "having", "'ve", "'d"}
BE = {"be", "is", "are", "am", "was", "were", "been", "being", "'s", "'re", "'m"}
NEGATION = {"not", "n't", "never"}
AUXILIARY_LEMMAS = {"be", "have", "do"}
#: the articles, demonstratives, possessives and 'some' (in DETERMINERS and LOWER_FIRST)
_ARTICLES_AND_POSSESSIVES = {
    "the",
    "a",
    "an",
    "this",
    "that",
    "these",
    "those",
    "his",
    "her",
    "its",
    "their",
    "our",
    "my",
    "your",
    "some",
}
DETERMINERS = {
    *_ARTICLES_AND_POSSESSIVES,
    "any",
    "no",
    "every",
    "each",
    "all",
    "both",
    "either",
    "neither",
    "many",
    "much",
    "several",
    "such",
    "another",
    "other",
    "which",
    "what",
    "whose",
    "to",
    "of",
    "in",
    "on",
    "for",
    "with",
    "by",
    "at",
    "from",
    "as",
    "and",
    "or",
}
# clause openers: a sentence starting with one of these has no subject directly before its main verb
SUBORDINATORS = {
    "when",
    "if",
    "while",
    "although",
    "though",
    "because",
    "after",
    "before",
    "as",
    "since",
    "until",
    "unless",
    "once",
    "whether",
    "where",
    "whereas",
    "so",
    "but",
    "and",
    "or",
    "yet",
    "however",
    "then",
    "also",
    "in",
    "on",
    "at",
    "for",
    "with",
    "by",
    "from",
    "of",
    "to",
}
LOWER_FIRST = {*_ARTICLES_AND_POSSESSIVES, "he", "she", "it", "they", "we", "you", "many", "most", "all", "people"}
DEMONSTRATIVES = {"this", "that", "these", "those"}
WH = {"that", "who", "whom", "whose", "which", "what", "how", "where", "when", "why", "whether", "if"}
PRONOUNS = {
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "who",
    "there",
    "this",
    "that",
    "everyone",
    "someone",
    "nobody",
    "everybody",
    "somebody",
    "anyone",
    "anybody",
}
ACCUSATIVE = {"i": "me", "he": "him", "she": "her", "we": "us", "they": "them", "who": "whom"}
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|'[A-Za-z]+")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int

    @property
    def low(self) -> str:
        return self.text.lower()


class Unhandled(Exception):
    """A sentence a manipulation cannot handle; the message is the reason (reported, not fatal)."""


def tokens(text: str) -> list[Token]:
    """Word tokens with their character spans (punctuation is not a token)."""
    return [Token(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]


# --------------------------------------------------------------------------- verb forms


@cache
def verb_lemmas(word: str) -> tuple[str, ...]:
    """Verb lemmas lemminflect's dictionary knows for ``word`` (no out-of-vocabulary guessing)."""
    from lemminflect import getAllLemmas

    return tuple(getAllLemmas(word.lower(), "VERB").get("VERB", ()))


@cache
def forms(lemma: str) -> dict[str, tuple[str, ...]]:
    """Penn tag -> forms of a verb lemma (VBN falls back to VBD where lemminflect merges them)."""
    from lemminflect import getAllInflections, getInflection

    table = {tag: tuple(v) for tag, v in getAllInflections(lemma, "VERB").items()}
    for tag in ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ"):
        if tag not in table:
            table[tag] = tuple(getInflection(lemma, tag, inflect_oov=True) or ())
    return table


def normalise_lemma(verb: str) -> str:
    """The verb lemma of a dataset ``verb`` entry (``felt`` -> ``feel``, ``saw`` -> ``see``)."""
    lem = verb_lemmas(verb)
    return lem[0] if lem else verb.lower()


def is_form_of(word: str, lemma: str) -> bool:
    w = word.lower()
    return w == lemma or any(w in v for v in forms(lemma).values())


def _previous(toks: Sequence[Token], i: int) -> str | None:
    """The word before ``toks[i]``, skipping negation."""
    j = i - 1
    while j >= 0 and toks[j].low in NEGATION:
        j -= 1
    return toks[j].low if j >= 0 else None


def context_tag(toks: Sequence[Token], i: int, lemma: str) -> str:
    """Penn tag of the verb ``toks[i]`` (a form of ``lemma``) from its forms and the word before it."""
    w = toks[i].low
    table = forms(lemma)
    prev = _previous(toks, i)
    if prev is not None and (prev in DO or prev in MODALS or prev == "to"):
        tag = "VB"
    elif prev is not None and prev in HAVE:
        tag = "VBN"
    elif prev is not None and (prev in BE or prev.endswith("'s")):
        tag = "VBG" if w in table["VBG"] else "VBN"
    elif w in table["VBG"]:
        tag = "VBG"
    elif w in table["VBZ"]:
        tag = "VBZ"
    elif w in table["VBD"]:
        tag = "VBD"
    elif w in table["VBN"]:
        tag = "VBN"
    elif w in table["VBP"] or w in table["VB"] or w == lemma:
        tag = "VBP"
    else:
        raise Unhandled(f"{toks[i].text!r} is no form of {lemma!r}")
    if tag == "VBP":
        return tag
    if w not in table[tag] and not (tag == "VBN" and w in table["VBD"]) and not (tag == "VB" and w == lemma):
        raise Unhandled(f"{toks[i].text!r} is no {tag} form of {lemma!r} (context {prev!r})")
    return tag


def inflect(lemma: str, tag: str, like: str) -> str:
    """``lemma`` in form ``tag`` (first lemminflect spelling), capitalised like ``like``."""
    from lemminflect import getInflection

    out = getInflection(lemma, tag, inflect_oov=True)
    if not out and tag == "VBP":  # lemminflect lists no VBP for a few verbs (dare): it equals VB
        out = getInflection(lemma, "VB", inflect_oov=True)
    if not out:
        raise Unhandled(f"lemminflect has no {tag} form of {lemma!r}")
    form = out[0]
    return form[:1].upper() + form[1:] if like[:1].isupper() else form


def _replace(text: str, tok: Token, new: str) -> str:
    return text[: tok.start] + new + text[tok.end :]


# --------------------------------------------------------------------------- locating the verbs


def find_main_verb(sentence: str, lemma: str, task: str) -> int:
    """Token index of the embedding verb: a form of ``lemma`` directly followed by ``to``/``that``."""
    toks = tokens(sentence)
    for i, t in enumerate(toks[:-1]):
        nxt = toks[i + 1]
        if nxt.low == task and sentence[t.end : nxt.start].strip() == "" and is_form_of(t.text, lemma):
            return i
    raise Unhandled(f"no form of {lemma!r} directly followed by {task!r}")


def chain_start(toks: Sequence[Token], i: int) -> int:
    """First token of the verb group ending at ``toks[i]`` (auxiliaries, modals and negation)."""
    k = i
    while k > 0 and (toks[k - 1].low in DO | MODALS | HAVE | BE | NEGATION or toks[k - 1].low.endswith("n't")):
        k -= 1
    return k


def clause_verb_group(toks: Sequence[Token]) -> tuple[int, int]:
    """(first, last) token index of the finite verb group of a clause: the first finite verb (or
    modal) that is not the first word and does not follow a determiner (a word that can also be a
    noun or adjective only after a pronoun, or when no unambiguous verb follows), then the
    auxiliaries and verbs that can follow it (VB after do/modals, VBN after have, VBG/VBN after be)."""
    from lemminflect import getAllLemmas

    first = ambiguous = None
    for j in range(1, len(toks)):
        w = toks[j].low
        if toks[j - 1].low in DETERMINERS - DEMONSTRATIVES:
            continue
        if w in MODALS:
            first = j
            break
        lem = verb_lemmas(w)
        if lem and any(w in forms(lm)["VBD"] + forms(lm)["VBZ"] + forms(lm)["VBP"] for lm in lem):
            # a word that is also a noun or adjective (videos, rains) counts at once only after a
            # pronoun; otherwise only when no unambiguous verb follows
            if toks[j - 1].low in PRONOUNS or set(getAllLemmas(w)) <= {"VERB", "AUX"}:
                first = j
                break
            if ambiguous is None:
                ambiguous = j
    if first is None:
        first = ambiguous
    if first is None:
        raise Unhandled("no finite verb found in the clause")
    last = first
    while True:
        nxt_i = last + 1
        while nxt_i < len(toks) and _only_adverb(toks[nxt_i].low):
            nxt_i += 1
        if nxt_i >= len(toks):
            break
        prev, nxt = toks[last].low, toks[nxt_i]
        if nxt.low in NEGATION:
            raise Unhandled("negated clause")
        if prev in DO | MODALS:
            ok = any(nxt.low == lm or nxt.low in forms(lm)["VB"] for lm in verb_lemmas(nxt.low))
        elif prev in HAVE:
            ok = any(nxt.low in forms(lm)["VBN"] + forms(lm)["VBD"] for lm in verb_lemmas(nxt.low))
        elif prev in BE:
            ok = any(nxt.low in forms(lm)["VBG"] + forms(lm)["VBN"] + forms(lm)["VBD"] for lm in verb_lemmas(nxt.low))
        else:
            ok = False
        if not ok:
            break
        last = nxt_i
    return first, last


# --------------------------------------------------------------------------- manipulations


def replace_main_verb(premise: str, lemma: str, task: str, new_lemma: str) -> tuple[str, str]:
    """(edited premise, replaced word): the embedding verb becomes ``new_lemma`` in the same form."""
    toks = tokens(premise)
    i = find_main_verb(premise, lemma, task)
    tag = context_tag(toks, i, lemma)
    return _replace(premise, toks[i], inflect(new_lemma, tag, toks[i].text)), toks[i].text


def complement_verb_spans(premise: str, hypothesis: str, lemma: str, task: str) -> tuple[Token, str, Token, str]:
    """(premise token, its tag, hypothesis token, its tag) of the embedded clause's verb."""
    ptoks, htoks = tokens(premise), tokens(hypothesis)
    i = find_main_verb(premise, lemma, task)
    if task == "to":
        if i + 2 >= len(ptoks):
            raise Unhandled("nothing after 'to'")
        p = ptoks[i + 2]
        lems = [lm for lm in verb_lemmas(p.low) if p.low in forms(lm)["VB"] or p.low == lm]
        if not lems:
            raise Unhandled(f"{p.text!r} after 'to' is not a base-form verb")
        cl = lems[0]
        for h in htoks:
            if cl in verb_lemmas(h.low):
                return p, "VB", h, context_tag(htoks, htoks.index(h), cl)
        raise Unhandled(f"no form of the complement verb {cl!r} in the hypothesis")
    first, last = clause_verb_group(htoks)
    h = htoks[last]
    lems = verb_lemmas(h.low)
    if not lems:
        raise Unhandled(f"{h.text!r} is not a verb")
    tag = context_tag(htoks, last, lems[0])
    after = [t for t in ptoks[i + 2 :] if t.low == h.low]
    if not after:
        raise Unhandled(f"the complement verb {h.text!r} does not occur after 'that' in the premise")
    return after[0], tag, h, tag


def replace_complement_verb(
    premise: str, hypothesis: str, lemma: str, task: str, new_lemma: str
) -> tuple[str, str, str]:
    """(edited premise, edited hypothesis, replaced word): the embedded verb becomes ``new_lemma``
    in both, each inflected like the word it replaces."""
    p, ptag, h, htag = complement_verb_spans(premise, hypothesis, lemma, task)
    return (
        _replace(premise, p, inflect(new_lemma, ptag, p.text)),
        _replace(hypothesis, h, inflect(new_lemma, htag, h.text)),
        h.text,
    )


def _clause_subject(subject: str) -> str:
    """The subject inside a clause: its first word lower-cased when it is a dictionary word (The,
    He, Everyone), kept when it is not (names: Nike, Pilsudski) or is ``I``."""
    from lemminflect import getAllLemmas

    first = subject.split()[0]
    low = first.lower()
    if first != "I" and (low in LOWER_FIRST or getAllLemmas(low)):
        return low + subject[len(first) :]
    return subject


def _only_adverb(word: str) -> bool:
    from lemminflect import getAllLemmas

    lem = getAllLemmas(word)
    return word not in NEGATION and bool(lem) and set(lem) == {"ADV"}


def _only_verb(word: str) -> bool:
    from lemminflect import getAllLemmas

    lem = getAllLemmas(word)
    return bool(lem) and set(lem) <= {"VERB", "AUX"}


def to_that(premise: str, hypothesis: str, lemma: str) -> str:
    """``S V to VP ...`` -> ``S V that <hypothesis with S as its subject>``."""
    toks = tokens(premise)
    i = find_main_verb(premise, lemma, "to")
    tag = context_tag(toks, i, lemma)
    k = chain_start(toks, i)
    if tag == "VBG" and not any(t.low in BE for t in toks[k:i]):
        raise Unhandled("the main verb is a participle (no finite clause to embed under)")
    subject = premise[: toks[k].start].strip()
    if not subject or "," in subject or subject.split()[0].lower() in SUBORDINATORS:
        raise Unhandled("the sentence does not start with the main verb's subject")
    if any(t.low in WH or _only_verb(t.low) for t in toks[:k]):
        raise Unhandled("the main verb is inside a subordinate or relative clause")
    if not hypothesis.lower().startswith(subject.lower() + " "):
        raise Unhandled("the hypothesis does not start with the main verb's subject")
    clause = _clause_subject(subject) + hypothesis[len(subject) :]
    return premise[: toks[i].end] + " that " + clause


def that_to(premise: str, hypothesis: str, lemma: str) -> str:
    """``S V that NP AUX* VERB ...`` -> ``S V NP(acc.) to <non-finite verb group> ...``."""
    ptoks, htoks = tokens(premise), tokens(hypothesis)
    i = find_main_verb(premise, lemma, "that")
    first, last = clause_verb_group(htoks)
    n = last + 1
    rest = ptoks[i + 2 :]
    if len(rest) < n or [t.low for t in rest[:n]] != [t.low for t in htoks[:n]]:
        raise Unhandled("the clause after 'that' does not start like the hypothesis")
    group = [t.text for t in rest[first:n]]  # the premise's spelling, adverbs kept
    if group[0].lower() in MODALS:
        group = group[1:]
    verbs = [j for j, w in enumerate(group) if not _only_adverb(w.lower())]
    if len(verbs) > 1 and group[verbs[0]].lower() in DO:  # do-support: 'did leave' -> 'leave'
        del group[verbs[0]]
        verbs = [j for j, w in enumerate(group) if not _only_adverb(w.lower())]
    if not verbs:
        raise Unhandled("the clause's verb group is a bare modal")
    h0 = verbs[0]
    head = verb_lemmas(group[h0])
    if not head:
        raise Unhandled(f"{group[h0]!r} is not a verb")
    group[h0] = inflect(head[0], "VB", group[h0])
    subj_toks = rest[:first]
    subj = premise[subj_toks[0].start : subj_toks[-1].end] if subj_toks else ""
    if not subj:
        raise Unhandled("the clause has no subject before its verb")
    if len(subj_toks) == 1 and subj.lower() in ACCUSATIVE:
        subj = ACCUSATIVE[subj.lower()]
    tail = premise[rest[n - 1].end :]
    return premise[: ptoks[i].end] + " " + subj + " to " + " ".join(group) + tail
