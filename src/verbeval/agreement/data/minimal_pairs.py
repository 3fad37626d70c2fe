"""Minimal-pair linguistics: splitting a pair around its verb and the number of a verb form.

A minimal pair ``sentence_good`` / ``sentence_bad`` differs in exactly one whitespace token, the
verb: :func:`split_minimal_pair` splits it into the left and right context and the correct and
incorrect verb forms, :func:`derive_number` gives the number (``singular`` / ``plural``) of the
correct form, and :func:`suspicious_pair` says why a user's pair may not differ in its verb.
"""

from __future__ import annotations

from typing import Literal

from lemminflect import getAllLemmas, getInflection, getLemma

Number = Literal["singular", "plural"]
NUMBERS: tuple[Number, Number] = ("singular", "plural")

# Punctuation stripped from around the differing word (the apostrophe is part of "isn't").
_WORD_PUNCT = '.,;:!?"()[]{}'

# Closed-class verb forms whose number does not follow the regular -s pattern.
_CLOSED_CLASS: dict[str, Number] = {
    "is": "singular",
    "was": "singular",
    "am": "singular",
    "isn't": "singular",
    "wasn't": "singular",
    "are": "plural",
    "were": "plural",
    "aren't": "plural",
    "weren't": "plural",
    "has": "singular",
    "hasn't": "singular",
    "have": "plural",
    "haven't": "plural",
    "does": "singular",
    "doesn't": "singular",
    "do": "plural",
    "don't": "plural",
}


# --------------------------------------------------------------------------- minimal pairs


def _strip_final_period(tokens: list[str]) -> list[str]:
    """Drop a sentence-final period, whether attached to the last word or a token of its own."""
    if tokens and tokens[-1] == ".":
        return tokens[:-1]
    if tokens and tokens[-1].endswith("."):
        return [*tokens[:-1], tokens[-1][:-1]]
    return tokens


def _split_punct(word: str) -> tuple[str, str, str]:
    """Split ``word`` into (leading punctuation, core, trailing punctuation)."""
    core = word.strip(_WORD_PUNCT)
    if not core:
        return word, "", ""
    start = word.index(core)
    return word[:start], core, word[start + len(core) :]


def split_minimal_pair(good: str, bad: str) -> tuple[str, str, str, str]:
    """Split a minimal pair into ``(left, right, correct, incorrect)``.

    Both sentences are whitespace-tokenised and a sentence-final period is removed. They must have
    the same number of tokens and differ in exactly one token, the verb; punctuation around that
    token is stripped from the verb forms (it must be the same in both sentences and is kept in
    the context: a leading mark ends ``left``, a trailing one starts ``right``). ``right`` is
    ``''`` when the verb is the last word.

    Raises:
        ValueError: with the reason when the sentences are identical, differ in more than one
            word, have different lengths, or the differing word is empty or carries different
            punctuation.
    """
    g = _strip_final_period(good.split())
    b = _strip_final_period(bad.split())
    if not g or not b:
        raise ValueError("empty sentence")
    if len(g) != len(b):
        raise ValueError(f"different lengths ({len(g)} vs {len(b)} words)")
    diff = [i for i, (x, y) in enumerate(zip(g, b)) if x != y]
    if not diff:
        raise ValueError("sentences are identical")
    if len(diff) > 1:
        words = ", ".join(f"{g[i]!r}/{b[i]!r}" for i in diff)
        raise ValueError(f"sentences differ in more than one word ({words})")
    i = diff[0]
    g_pre, correct, g_post = _split_punct(g[i])
    b_pre, incorrect, b_post = _split_punct(b[i])
    if not correct or not incorrect:
        raise ValueError(f"differing word is only punctuation ({g[i]!r}/{b[i]!r})")
    if (g_pre, g_post) != (b_pre, b_post):
        raise ValueError(f"sentences differ in punctuation ({g[i]!r}/{b[i]!r})")
    if correct == incorrect:
        raise ValueError(f"sentences differ only in punctuation ({g[i]!r}/{b[i]!r})")
    left_tokens = g[:i]
    right_tokens = g[i + 1 :]
    if g_pre:
        left_tokens = [*left_tokens, g_pre]
    if g_post:
        right_tokens = [g_post, *right_tokens]
    return " ".join(left_tokens), " ".join(right_tokens), correct, incorrect


# --------------------------------------------------------------------------- number of a verb form


def _regular_number(correct: str, incorrect: str) -> set[Number]:
    """Numbers consistent with lemminflect for an open-class verb pair (empty when none fits)."""
    lemmas: set[str] = set()
    for word in (correct, incorrect):
        found = getAllLemmas(word, upos="VERB").get("VERB", ())
        lemmas.update(found or getLemma(word, upos="VERB", lemmatize_oov=True))
    decisions: set[Number] = set()
    for lemma in sorted(lemmas):
        third = set(getInflection(lemma, tag="VBZ"))
        base = set(getInflection(lemma, tag="VB")) | set(getInflection(lemma, tag="VBP")) | {lemma}
        base -= third
        if correct in third and incorrect in base:
            decisions.add("singular")
        elif correct in base and incorrect in third:
            decisions.add("plural")
    return decisions


def derive_number(correct: str, incorrect: str) -> Number:
    """Number of ``correct`` in a subject-verb agreement pair whose other member is ``incorrect``.

    Forms of *be*, *have* and *do* (including the negative contractions ``isn't``, ``wasn't``,
    ``aren't``, ``weren't``, ``hasn't``, ``haven't``, ``doesn't``, ``don't``) are looked up in a
    table; tense may differ between the two (``was``/``are``). For any other verb the correct
    form is singular iff it is the third-person-singular present (VBZ) of a lemma of the pair and
    the incorrect form is that lemma's base/non-3rd-person present (VB/VBP), and plural for the
    converse (lemmas and inflections from lemminflect).

    Raises:
        ValueError: when the number cannot be decided (both forms have the same number, a form
            is not a present-tense verb form of the other's lemma, or lemmas disagree).
    """
    c, i = correct.lower(), incorrect.lower()
    if c == i:
        raise ValueError(f"cannot derive number: identical forms {correct!r}/{incorrect!r}")
    nc, ni = _CLOSED_CLASS.get(c), _CLOSED_CLASS.get(i)
    if nc is not None or ni is not None:
        if nc is None or ni is None:
            raise ValueError(f"cannot derive number: {correct!r}/{incorrect!r} mixes an auxiliary with another verb")
        if nc == ni:
            raise ValueError(f"cannot derive number: {correct!r} and {incorrect!r} are both {nc}")
        return nc
    decisions = _regular_number(c, i)
    if len(decisions) == 1:
        return decisions.pop()
    if not decisions:
        raise ValueError(
            f"cannot derive number: {correct!r}/{incorrect!r} is not a third-person-singular/"
            "plural present pair of one verb"
        )
    raise ValueError(f"cannot derive number: {correct!r}/{incorrect!r} is ambiguous")


# --------------------------------------------------------------------------- doubtful pairs


#: words after which a differing word is a noun or adjective, not the finite verb of an agreement pair
_DETERMINERS = frozenset(
    "a an the this that these those each every some any no my your his her its our their "
    "several many few both all".split()
)


def suspicious_pair(left: str, correct: str, incorrect: str, label_given: bool) -> str | None:
    """Why a custom pair's differing word may not be its verb (``"the dog runs"/"the dogs runs"``),
    else None: it follows a determiner, or its number could not be derived from the forms and
    rests on the given label alone."""
    before = left.split()[-1].lower() if left.split() else ""
    if before in _DETERMINERS:
        return f"the differing word {correct!r}/{incorrect!r} follows {before!r}: a noun, not the verb?"
    if label_given:
        try:
            derive_number(correct, incorrect)
        except ValueError:
            return f"{correct!r}/{incorrect!r} is not a verb pair verbeval knows (the label alone gives the number)"
    return None
