"""Counterfactual manipulations of the verb veridicality data (Ross & Pavlick 2019, section 6.3).

Each item's premise (``sentence`` in the positive environment, ``neg_sentence`` in the negative
one) is edited, and an NLI model's 3-way distribution on the edited pair is compared with its
distribution on the original pair by the KL divergence KL(original || manipulated).

Manipulations (one name each, used in every output):

``main_verb_matched``
    the clause-embedding verb is replaced by another dataset verb that takes the same complement
    type (``to`` or ``that``);
``main_verb_mismatched``
    ... by a dataset verb that takes only the *other* complement type;
``complement_verb``
    the verb of the embedded clause is replaced by another complement verb observed in the data,
    in the premise *and* in the hypothesis (so the pair stays aligned);
``to_that``
    a to-complement becomes a that-clause: ``He tried to stop the car.`` -> ``He tried that he
    stopped the car.`` (the clause is the hypothesis, with the premise's subject);
``that_to``
    a that-clause becomes an infinitival complement with the clause's subject as object (ECM):
    ``The doctor believed that the theory was correct.`` -> ``The doctor believed the theory to be
    correct.``

Inserted verbs are inflected with lemminflect to the Penn tag of the word they replace. No
tagger model is available offline, so the tag comes from the word's own forms (lemminflect's
inflection tables) and a few context rules (:func:`context_tag`): after do/modals/``to`` VB,
after have VBN, after be VBG or VBN, else the finite form the word is. Sentences the rules cannot
handle are reported with a reason, never guessed (:class:`Unhandled`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verbeval.core.errors import VerbevalError
from verbeval.core.tables import format_rows, latex_row, latex_tabular, markdown_table, number, tex_escape

MAIN_MANIPULATIONS = ("main_verb_matched", "main_verb_mismatched", "complement_verb")
SWAP_MANIPULATIONS = ("to_that", "that_to")
MANIPULATIONS = (*MAIN_MANIPULATIONS, *SWAP_MANIPULATIONS)
PAIR_COLUMNS = ["manipulation", "index", "task", "verb", "signature", "environment", "sample", "replaced",
                "replacement", "premise", "hypothesis"]
UNHANDLED_COLUMNS = ["manipulation", "index", "task", "verb", "environment", "reason", "premise"]
KL_COLUMNS = ["n", "mean_kl", "median_kl"]

DO = {"do", "does", "did"}
MODALS = {"can", "could", "may", "might", "must", "shall", "should", "will", "would"}
HAVE = {"have", "has", "had", "having", "'ve", "'d"}
BE = {"be", "is", "are", "am", "was", "were", "been", "being", "'s", "'re", "'m"}
NEGATION = {"not", "n't", "never"}
AUXILIARY_LEMMAS = {"be", "have", "do"}
DETERMINERS = {"the", "a", "an", "this", "that", "these", "those", "his", "her", "its", "their", "our", "my",
               "your", "some", "any", "no", "every", "each", "all", "both", "either", "neither", "many", "much",
               "several", "such", "another", "other", "which", "what", "whose", "to", "of", "in", "on", "for",
               "with", "by", "at", "from", "as", "and", "or"}
# clause openers: a sentence starting with one of these has no subject directly before its main verb
SUBORDINATORS = {"when", "if", "while", "although", "though", "because", "after", "before", "as", "since",
                 "until", "unless", "once", "whether", "where", "whereas", "so", "but", "and", "or", "yet",
                 "however", "then", "also", "in", "on", "at", "for", "with", "by", "from", "of", "to"}
LOWER_FIRST = {"he", "she", "it", "they", "we", "you", "the", "a", "an", "this", "that", "these", "those",
               "his", "her", "its", "their", "our", "my", "your", "some", "many", "most", "all", "people"}
DEMONSTRATIVES = {"this", "that", "these", "those"}
WH = {"that", "who", "whom", "whose", "which", "what", "how", "where", "when", "why", "whether", "if"}
PRONOUNS = {"i", "you", "he", "she", "it", "we", "they", "who", "there", "this", "that", "everyone", "someone",
            "nobody", "everybody", "somebody", "anyone", "anybody"}
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


@lru_cache(maxsize=None)
def verb_lemmas(word: str) -> tuple[str, ...]:
    """Verb lemmas lemminflect's dictionary knows for ``word`` (no out-of-vocabulary guessing)."""
    from lemminflect import getAllLemmas

    return tuple(getAllLemmas(word.lower(), "VERB").get("VERB", ()))


@lru_cache(maxsize=None)
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
    return text[:tok.start] + new + text[tok.end:]


# --------------------------------------------------------------------------- locating the verbs


def find_main_verb(sentence: str, lemma: str, task: str) -> int:
    """Token index of the embedding verb: a form of ``lemma`` directly followed by ``to``/``that``."""
    toks = tokens(sentence)
    for i, t in enumerate(toks[:-1]):
        nxt = toks[i + 1]
        if nxt.low == task and sentence[t.end:nxt.start].strip() == "" and is_form_of(t.text, lemma):
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
    after = [t for t in ptoks[i + 2:] if t.low == h.low]
    if not after:
        raise Unhandled(f"the complement verb {h.text!r} does not occur after 'that' in the premise")
    return after[0], tag, h, tag


def replace_complement_verb(premise: str, hypothesis: str, lemma: str, task: str,
                            new_lemma: str) -> tuple[str, str, str]:
    """(edited premise, edited hypothesis, replaced word): the embedded verb becomes ``new_lemma``
    in both, each inflected like the word it replaces."""
    p, ptag, h, htag = complement_verb_spans(premise, hypothesis, lemma, task)
    return (_replace(premise, p, inflect(new_lemma, ptag, p.text)),
            _replace(hypothesis, h, inflect(new_lemma, htag, h.text)), h.text)


def _clause_subject(subject: str) -> str:
    """The subject inside a clause: its first word lower-cased when it is a dictionary word (The,
    He, Everyone), kept when it is not (names: Nike, Pilsudski) or is ``I``."""
    from lemminflect import getAllLemmas

    first = subject.split()[0]
    low = first.lower()
    if first != "I" and (low in LOWER_FIRST or getAllLemmas(low)):
        return low + subject[len(first):]
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
    subject = premise[:toks[k].start].strip()
    if not subject or "," in subject or subject.split()[0].lower() in SUBORDINATORS:
        raise Unhandled("the sentence does not start with the main verb's subject")
    if any(t.low in WH or _only_verb(t.low) for t in toks[:k]):
        raise Unhandled("the main verb is inside a subordinate or relative clause")
    if not hypothesis.lower().startswith(subject.lower() + " "):
        raise Unhandled("the hypothesis does not start with the main verb's subject")
    clause = _clause_subject(subject) + hypothesis[len(subject):]
    return premise[:toks[i].end] + " that " + clause


def that_to(premise: str, hypothesis: str, lemma: str) -> str:
    """``S V that NP AUX* VERB ...`` -> ``S V NP(acc.) to <non-finite verb group> ...``."""
    ptoks, htoks = tokens(premise), tokens(hypothesis)
    i = find_main_verb(premise, lemma, "that")
    first, last = clause_verb_group(htoks)
    n = last + 1
    rest = ptoks[i + 2:]
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
    subj = premise[subj_toks[0].start:subj_toks[-1].end] if subj_toks else ""
    if not subj:
        raise Unhandled("the clause has no subject before its verb")
    if len(subj_toks) == 1 and subj.lower() in ACCUSATIVE:
        subj = ACCUSATIVE[subj.lower()]
    tail = premise[rest[n - 1].end:]
    return premise[:ptoks[i].end] + " " + subj + " to " + " ".join(group) + tail


# --------------------------------------------------------------------------- the pairs table


def _rng_choice(pool: Sequence[str], exclude: str, k: int, seed: int, index: int, manipulation: str) -> list[str]:
    candidates = [v for v in pool if v != exclude]
    if not candidates:
        return []
    rng = np.random.default_rng([seed, index, MANIPULATIONS.index(manipulation)])
    picks = rng.choice(len(candidates), size=min(k, len(candidates)), replace=False)
    return [candidates[j] for j in picks]  # in draw order: truncating the list stays unbiased


def verb_pools(data: pd.DataFrame) -> dict[str, list[str]]:
    """Replacement verbs: ``to``/``that`` (dataset verbs by complement type) and ``complement``
    (the base-form verbs right after ``to`` in the to-items, which are unambiguously verbs);
    lemmas, sorted, without be/have/do and modals."""
    pools: dict[str, list[str]] = {}
    for task in ("to", "that"):
        lems = {normalise_lemma(v) for v in data.loc[data["task"] == task, "verb"]}
        pools[task] = sorted(lems - AUXILIARY_LEMMAS)
    comp: set[str] = set()
    for r in data[data["task"] == "to"].itertuples(index=False):
        try:
            p, _, _, _ = complement_verb_spans(r.sentence, r.complement, normalise_lemma(r.verb), r.task)
            comp.update(verb_lemmas(p.low)[:1])
        except Unhandled:
            pass
    pools["complement"] = sorted(comp - AUXILIARY_LEMMAS - MODALS)
    return pools


def build_pairs(data: pd.DataFrame, samples: int = 1, seed: int = 0,
                manipulations: Iterable[str] = MANIPULATIONS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairs, unhandled) for every item, environment and manipulation.

    ``samples`` replacement verbs per item for the verb replacements (the same verbs in both
    environments, drawn from a generator seeded by (seed, item index, manipulation)).
    """
    manipulations = list(manipulations)
    bad = [m for m in manipulations if m not in MANIPULATIONS]
    if bad:
        raise VerbevalError(f"unknown manipulation(s) {bad}; choose from {MANIPULATIONS}")
    if samples < 1:
        raise VerbevalError("samples must be at least 1")
    pools = verb_pools(data)
    pairs: list[dict[str, Any]] = []
    unhandled: list[dict[str, Any]] = []
    for r in data.itertuples(index=False):
        lemma = normalise_lemma(r.verb)
        other = "that" if r.task == "to" else "to"
        for m in manipulations:
            if m == "to_that" and r.task != "to" or m == "that_to" and r.task != "that":
                continue
            if m == "main_verb_matched":
                news = _rng_choice(pools[r.task], lemma, samples, seed, r.index, m)
            elif m == "main_verb_mismatched":
                news = _rng_choice([v for v in pools[other] if v not in pools[r.task]], lemma, samples, seed,
                                   r.index, m)
            elif m == "complement_verb":
                news = _rng_choice(pools["complement"], "", samples + 1, seed, r.index, m)
            else:
                news = [""]
            for env, premise in (("positive", r.sentence), ("negative", r.neg_sentence)):
                base = {"manipulation": m, "index": r.index, "task": r.task, "verb": r.verb, "environment": env}
                try:
                    if m in SWAP_MANIPULATIONS:
                        fn = to_that if m == "to_that" else that_to
                        rows = [(fn(premise, r.complement, lemma), r.complement, r.verb, "")]
                    elif m == "complement_verb":
                        _, _, h, _ = complement_verb_spans(premise, r.complement, lemma, r.task)
                        own = verb_lemmas(h.low)[:1]
                        chosen = [v for v in news if v not in own][:samples]
                        if not chosen:
                            raise Unhandled("no replacement verb available")
                        rows = []
                        for v in chosen:
                            p2, h2, old = replace_complement_verb(premise, r.complement, lemma, r.task, v)
                            rows.append((p2, h2, old, v))
                    else:
                        if not news:
                            raise Unhandled("no replacement verb available")
                        rows = []
                        for v in news:
                            p2, old = replace_main_verb(premise, lemma, r.task, v)
                            rows.append((p2, r.complement, old, v))
                except Unhandled as exc:
                    unhandled.append({**base, "reason": str(exc), "premise": premise})
                    continue
                for s, (p2, h2, old, new) in enumerate(rows):
                    pairs.append({**base, "signature": r.signature, "sample": s, "replaced": old,
                                  "replacement": new, "premise": p2, "hypothesis": h2})
    pairs_df = pd.DataFrame(pairs, columns=PAIR_COLUMNS)
    pairs_df = pairs_df.sort_values(["manipulation", "index", "environment", "sample"], kind="stable",
                                    ignore_index=True)
    un_df = pd.DataFrame(unhandled, columns=UNHANDLED_COLUMNS).sort_values(
        ["manipulation", "index", "environment"], kind="stable", ignore_index=True)
    return pairs_df, un_df


def coverage(data: pd.DataFrame, pairs: pd.DataFrame, unhandled: pd.DataFrame) -> pd.DataFrame:
    """Per manipulation and environment: eligible items, handled items, unhandled items."""
    rows = []
    for m in MANIPULATIONS:
        task = {"to_that": "to", "that_to": "that"}.get(m)
        eligible = int((data["task"] == task).sum()) if task else len(data)
        for env in ("positive", "negative"):
            handled = pairs[(pairs["manipulation"] == m) & (pairs["environment"] == env)]["index"].nunique()
            bad = int(((unhandled["manipulation"] == m) & (unhandled["environment"] == env)).sum())
            rows.append({"manipulation": m, "environment": env, "items": eligible, "handled": int(handled),
                         "unhandled": bad})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- KL tables


def kl_divergence(p: np.ndarray, q: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Row-wise KL(p || q) in nats; both clipped at ``eps`` and renormalised (float64)."""
    p = np.clip(np.asarray(p, dtype=np.float64), eps, None)
    q = np.clip(np.asarray(q, dtype=np.float64), eps, None)
    p /= p.sum(axis=1, keepdims=True)
    q /= q.sum(axis=1, keepdims=True)
    return np.sum(p * np.log(p / q), axis=1)


_P = ["p_entailment", "p_neutral", "p_contradiction"]


def attach_kl(original: pd.DataFrame, manipulated: pd.DataFrame) -> pd.DataFrame:
    """``manipulated`` (pairs with p_* columns) with ``kl`` = KL(original pair || manipulated pair);
    ``original`` is the predictions table of :mod:`verbeval.veridicality.nli`."""
    orig = original[["index", "environment", *_P]].rename(columns={c: c + "_orig" for c in _P})
    merged = manipulated.merge(orig, on=["index", "environment"], how="left", validate="many_to_one")
    if merged[[c + "_orig" for c in _P]].isna().any().any():
        raise VerbevalError("manipulated pairs without an original prediction (predictions of another dataset?)")
    merged["kl"] = kl_divergence(merged[[c + "_orig" for c in _P]].to_numpy(), merged[_P].to_numpy())
    return merged


def _summary(part: pd.DataFrame) -> dict[str, Any]:
    kl = part["kl"].to_numpy(float)
    return {"n": len(kl), "mean_kl": float(kl.mean()) if len(kl) else float("nan"),
            "median_kl": float(np.median(kl)) if len(kl) else float("nan")}


def table7(scored: pd.DataFrame) -> pd.DataFrame:
    """Mean and median KL per verb replacement, complement type (to, that, all) and environment."""
    rows = []
    for m in MAIN_MANIPULATIONS:
        for task in ("to", "that", "all"):
            for env in ("positive", "negative"):
                sel = (scored["manipulation"] == m) & (scored["environment"] == env)
                if task != "all":
                    sel &= scored["task"] == task
                rows.append({"manipulation": m, "task": task, "environment": env, **_summary(scored[sel])})
    return pd.DataFrame(rows, columns=["manipulation", "task", "environment", *KL_COLUMNS])


def table8(scored: pd.DataFrame) -> pd.DataFrame:
    """Mean and median KL of the complement-type swap per direction, signature and environment."""
    rows = []
    for m in SWAP_MANIPULATIONS:
        part = scored[scored["manipulation"] == m]
        for sig in [*sorted(part["signature"].unique()), "overall"]:
            for env in ("positive", "negative"):
                sel = part["environment"] == env
                if sig != "overall":
                    sel &= part["signature"] == sig
                rows.append({"direction": m, "signature": sig, "environment": env, **_summary(part[sel])})
    return pd.DataFrame(rows, columns=["direction", "signature", "environment", *KL_COLUMNS])


#: the KL columns' format: four decimals, a non-zero value below 0.001 in scientific notation
KL_FORMAT = number(4, tiny_below=1e-3)


def _kl_rows(table: pd.DataFrame) -> list[list[str]]:
    return format_rows(table, dict.fromkeys(("mean_kl", "median_kl"), KL_FORMAT))


def _align(table: pd.DataFrame) -> str:
    """Right for the :data:`KL_COLUMNS`, left for the labels."""
    return "".join("r" if c in KL_COLUMNS else "l" for c in table.columns)


def kl_markdown(table: pd.DataFrame, title: str) -> str:
    """Table 7 or 8 (:func:`table7`, :func:`table8`) as a Markdown pipe table under ``title``."""
    return "\n".join([title, "", *markdown_table(list(table.columns), _kl_rows(table), _align(table))]) + "\n"


def kl_latex(table: pd.DataFrame, title: str) -> str:
    """Table 7 or 8 as a booktabs tabular under a comment line with ``title``; every cell escaped."""
    head = [latex_row([tex_escape(str(c)) for c in table.columns])]
    rows = [latex_row([tex_escape(c) for c in cells]) for cells in _kl_rows(table)]
    return "\n".join([f"% {tex_escape(title)}", *latex_tabular(_align(table), head, rows)]) + "\n"
