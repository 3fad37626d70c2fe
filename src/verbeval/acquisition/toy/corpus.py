"""A synthetic agreement corpus for the toy model: the template grammar filled with planted verbs.

The toy model (:mod:`verbeval.acquisition.toy.training`) learns subject-verb agreement from this
corpus and nothing else, so that a sweep of its checkpoints shows agreement being acquired, on a
CPU, in minutes. Its numbers are a toy model's.

**Lemmas.** :func:`plant_lemmas` picks the planted verbs: every verb pair of the templates (both
forms one word, e.g. ``laugh``/``laughs``, ``is``/``are``; named by their lexicon lemma when the
lexicon has the pair, else by the plural form; BLiMP's pairs are left out by default) and, up to
``n_lemmas``, lexicon lemmas drawn at random (seeded) among the regular ones (lemma = plural form)
whose forms are single words that no template context uses otherwise (so no verb form doubles as a
noun of the templates, e.g. ``guards``). The planted lemmas are put
in a random order (seeded) and the lemma of rank r gets a share proportional to 1 / r^s (Zipf's
law, exponent ``zipf_exponent``) of the corpus's ``n_sentences`` verb slots, at least
``min_count``, by largest remainders: some verbs are frequent, some rare.

**Sentences.** Each template row is a frame: its left context, the verb slot, its right context
and the slot's number (the row's label). :func:`generate_corpus` writes ``n_sentences``
sentences, one per planted verb occurrence: a group drawn with the construction weights (by
default simple agreement frequent, the relative clauses rare:
:data:`verbeval.acquisition.toy.spec.DEFAULT_WEIGHTS`), a frame of that group with the number
wanted (half of a lemma's occurrences are singular, half plural), then

- every noun of the frame that is a subject of the simple group (``the author``, ``the taxi
  drivers``) replaced by a random noun of the same number, so the corpus holds noun combinations
  that the templates do not;
- every other verb of the frame (a form of a template verb pair, e.g. ``likes`` in a subject
  relative clause) replaced by the same-number form of a planted lemma drawn with the planted
  weights;
- the verb slot filled with the correct form of the occurrence's lemma.

So every sentence agrees (the slot's number is the template's label, and substitutions keep every
word's number). The first letter is capitalised and the sentence ends with a period, as a cased
model sees a template (:func:`verbeval.agreement.data.templates.render_context`). Test contexts are
**not** held out: the corpus is built from the same frames, so a simple-agreement context such as
``The author`` (the only shape that group has) recurs in training; what varies is which verbs fill
it, and how often. The toy model is a model of acquisition dynamics, not a generalisation test.

Everything is drawn from ``numpy`` generators seeded with ``seed`` (one for the lemmas, one for the
sentences): the same inputs and seed give the same corpus, byte for byte.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verbeval.acquisition.toy.spec import CorpusSpec
from verbeval.core.errors import VerbevalError

_WORD = re.compile(r"[A-Za-z]+")
_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class ToyCorpus:
    """The corpus and what was planted in it."""

    sentences: list[str]
    #: one row per planted lemma: lemma, sing, plur, rank, planted (verb-slot count), count (every
    #: occurrence of its forms in the corpus), zipf, from_templates; by rank
    lemmas: pd.DataFrame
    #: one row per sentence: group, lemma, label (the slot's number)
    slots: pd.DataFrame


def _is_word(form: str) -> bool:
    return bool(_WORD.fullmatch(form))


def template_verb_pairs(templates: pd.DataFrame, groups: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """The ``(sing, plur)`` verb pairs of the templates of ``groups`` (None: every group but
    ``blimp``) whose forms are both one word, in table order."""
    keep = templates["group"].isin(groups) if groups is not None else templates["group"] != "blimp"
    templates = templates[keep]
    seen: dict[tuple[str, str], None] = {}
    for correct, incorrect, plural in templates[["correct", "incorrect", "plural"]].itertuples(index=False):
        sing, plur = (incorrect, correct) if plural else (correct, incorrect)
        if _is_word(sing) and _is_word(plur) and sing != plur:
            seen[(sing, plur)] = None
    return list(seen)


def _context_words(templates: pd.DataFrame) -> set[str]:
    words: set[str] = set()
    for text in pd.concat([templates["left"], templates["right"]]).tolist():
        words.update(w.lower() for w in _TOKEN.findall(text))
    return words


def zipf_counts(n_lemmas: int, total: int, exponent: float, min_count: int) -> np.ndarray:
    """Counts for ranks 1..n summing to ``total``, proportional to 1 / r^exponent, each at least
    ``min_count`` (largest remainders; ties to the lower rank)."""
    if n_lemmas < 1:
        raise VerbevalError("the toy corpus needs at least one lemma")
    if total < n_lemmas * min_count:
        raise VerbevalError(
            f"{total} sentences cannot give {n_lemmas} lemmas {min_count} occurrences each: "
            f"raise the number of sentences or lower the lemma count"
        )
    weights = 1.0 / np.arange(1, n_lemmas + 1, dtype=np.float64) ** exponent
    free = total - n_lemmas * min_count
    share = free * weights / weights.sum()
    counts = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - counts), kind="stable")
    counts[order[: free - int(counts.sum())]] += 1
    return counts + min_count


def plant_lemmas(lexicon: pd.DataFrame, templates: pd.DataFrame, spec: CorpusSpec) -> pd.DataFrame:
    """The planted lemmas (lemma, sing, plur, rank, planted, from_templates), by rank; see the module
    docstring."""
    for col in ("lemma", "sing", "plur"):
        if col not in lexicon.columns:
            raise VerbevalError(f"the lexicon has no {col!r} column (expected lemma, sing, plur)")
    rng = np.random.default_rng([spec.seed, 1])
    by_pair = {(s, p): lem for lem, s, p in lexicon[["lemma", "sing", "plur"]].itertuples(index=False)}
    rows = [(by_pair.get(pair, pair[1]), *pair, True) for pair in template_verb_pairs(templates, spec.verb_groups)]
    if len(rows) > spec.n_lemmas:
        raise VerbevalError(
            f"the templates have {len(rows)} verb pairs, more than the {spec.n_lemmas} lemmas asked for: "
            "raise the lemma count"
        )
    taken = {r[0] for r in rows} | {f for r in rows for f in r[1:3]}
    context = _context_words(templates)
    pool = [
        (lem, s, p)
        for lem, s, p in lexicon[["lemma", "sing", "plur"]].itertuples(index=False)
        if _is_word(s) and _is_word(p) and s != p and lem == p and lem not in taken
        if s not in taken and p not in taken and s.lower() not in context and p.lower() not in context
    ]
    need = spec.n_lemmas - len(rows)
    if need > len(pool):
        raise VerbevalError(f"the lexicon has {len(pool)} usable lemmas, fewer than the {need} more asked for")
    picked = rng.choice(len(pool), size=need, replace=False) if need else np.array([], dtype=np.int64)
    rows += [(*pool[i], False) for i in sorted(picked.tolist())]
    frame = pd.DataFrame(rows, columns=["lemma", "sing", "plur", "from_templates"])
    if frame["lemma"].duplicated().any():  # two template pairs named alike: name them by their forms
        dup = frame["lemma"].duplicated(keep=False)
        frame.loc[dup, "lemma"] = frame.loc[dup, "sing"] + "/" + frame.loc[dup, "plur"]
    frame = frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)
    frame.insert(3, "rank", np.arange(1, len(frame) + 1, dtype=np.int64))
    frame.insert(4, "planted", zipf_counts(len(frame), spec.n_sentences, spec.zipf_exponent, spec.min_count))
    return frame


def _subject_nouns(templates: pd.DataFrame) -> dict[bool, list[str]]:
    """Nouns of the simple group's contexts (``the X``) by number (True = plural)."""
    nouns: dict[bool, set[str]] = {False: set(), True: set()}
    simple = templates[templates["group"] == "simple"]
    for left, plural in simple[["left", "plural"]].itertuples(index=False):
        head, _, noun = left.partition(" ")
        if head.lower() == "the" and noun and all(_is_word(w) for w in noun.split()):
            nouns[bool(plural)].add(noun)
    both = nouns[False] & nouns[True]  # a noun with one form for both numbers would break agreement
    return {k: sorted(v - both) for k, v in nouns.items()}


def _compile_words(words: list[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))
    return re.compile(rf"(?<![\w'])(?:{alternatives})(?![\w'])")


def generate_corpus(lexicon: pd.DataFrame, templates: pd.DataFrame, spec: CorpusSpec) -> ToyCorpus:
    """The toy corpus of ``spec`` from the lexicon (lemma, sing, plur) and the template table."""
    if templates.empty:
        raise VerbevalError("the template table is empty: the toy corpus has no frame to fill")
    for name, w in spec.weights.items():
        if not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
            raise VerbevalError(f"construction weight of {name!r} must be a number >= 0, not {w!r}")
    lemmas = plant_lemmas(lexicon, templates, spec)
    rng = np.random.default_rng([spec.seed, 2])
    groups = list(pd.unique(templates["group"]))
    weights = np.array([float(spec.weights.get(g, 1.0)) for g in groups])
    if weights.sum() <= 0:
        raise VerbevalError("every construction weight is 0: the toy corpus has no frame to fill")
    frames = {
        (g, plural): templates[(templates["group"] == g) & (templates["plural"] == plural)][["left", "right"]]
        .to_numpy()
        .tolist()
        for g in groups
        for plural in (False, True)
    }
    # the occurrences: each lemma's planted count, alternately singular and plural, then shuffled
    occ_lemma = np.repeat(np.arange(len(lemmas)), lemmas["planted"].to_numpy())
    occ_plural = np.concatenate([np.arange(n) % 2 == 1 for n in lemmas["planted"].to_numpy()])
    order = rng.permutation(len(occ_lemma))
    occ_lemma, occ_plural = occ_lemma[order], occ_plural[order]
    nouns = _subject_nouns(templates)
    noun_number = {n: pl for pl, ns in nouns.items() for n in ns}
    noun_re = _compile_words(list(noun_number))
    pairs = template_verb_pairs(templates, spec.verb_groups)
    verb_number = {s: False for s, _ in pairs} | {p: True for _, p in pairs}
    verb_re = _compile_words(list(verb_number))
    sing, plur = lemmas["sing"].tolist(), lemmas["plur"].tolist()
    p_lemma = lemmas["planted"].to_numpy() / lemmas["planted"].sum()

    def noun(m: re.Match[str]) -> str:
        choices = nouns[noun_number[m.group(0)]]
        return choices[int(rng.integers(len(choices)))]

    def verb(m: re.Match[str]) -> str:
        i = int(rng.choice(len(sing), p=p_lemma))
        return plur[i] if verb_number[m.group(0)] else sing[i]

    sentences: list[str] = []
    slot_groups: list[str] = []
    for li, plural in zip(occ_lemma.tolist(), occ_plural.tolist(), strict=True):
        usable = np.array([w if frames[(g, plural)] else 0.0 for g, w in zip(groups, weights, strict=True)])
        if usable.sum() <= 0:
            raise VerbevalError(f"no weighted template group has a {'plural' if plural else 'singular'} row")
        g = groups[int(rng.choice(len(groups), p=usable / usable.sum()))]
        left, right = frames[(g, plural)][int(rng.integers(len(frames[(g, plural)])))]
        if noun_re is not None:
            left, right = noun_re.sub(noun, left), noun_re.sub(noun, right)
        if verb_re is not None:
            left, right = verb_re.sub(verb, left), verb_re.sub(verb, right)
        text = " ".join(p for p in (left, plur[li] if plural else sing[li], right) if p) + "."
        sentences.append(text[0].upper() + text[1:])
        slot_groups.append(g)
    slots = pd.DataFrame(
        {
            "group": slot_groups,
            "lemma": lemmas["lemma"].to_numpy()[occ_lemma],
            "label": np.where(occ_plural, "plural", "singular"),
        }
    )
    lemmas = lemmas.assign(**_form_counts(sentences, lemmas))
    return ToyCorpus(sentences=sentences, lemmas=lemmas, slots=slots)


def _word_counts(sentences: list[str]) -> Counter[str]:
    words: Counter[str] = Counter()
    for s in sentences:
        words.update(w.lower() for w in _TOKEN.findall(s))
    return words


def _form_counts(sentences: list[str], lemmas: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every occurrence of each lemma's forms (case-insensitive words, the period a word too) and its
    Zipf frequency: log10 of the occurrences per billion words of the corpus."""
    words = _word_counts(sentences)
    total = sum(words.values())
    count = np.array(
        [
            words[s.lower()] + (words[p.lower()] if p.lower() != s.lower() else 0)
            for s, p in lemmas[["sing", "plur"]].itertuples(index=False)
        ],
        dtype=np.int64,
    )
    with np.errstate(divide="ignore"):
        zipf = np.round(np.log10(count / total * 1e9), 6)
    return {"count": count, "zipf": zipf}


def corpus_frequencies(corpus: ToyCorpus, lexicon: pd.DataFrame) -> pd.DataFrame:
    """``lemma, count, zipf`` of every lemma the toy model's tokenizer makes eligible: the planted
    lemmas, then (by lemma) every other lexicon lemma whose two forms are both words of the corpus
    (a noun such as ``guards`` of the frames, a verb of a BLiMP context), which the scored model
    counts among its lemmas too. Counted as in :attr:`ToyCorpus.lemmas`."""
    words = _word_counts(corpus.sentences)
    planted = set(corpus.lemmas["lemma"])
    others = lexicon[
        ~lexicon["lemma"].isin(planted)
        & (lexicon["sing"] != lexicon["plur"])
        & lexicon["sing"].str.lower().isin(words.keys())
        & lexicon["plur"].str.lower().isin(words.keys())
    ]
    others = others.drop_duplicates("lemma").sort_values("lemma", kind="stable")[["lemma", "sing", "plur"]]
    others = others.assign(**_form_counts(corpus.sentences, others))
    cols = ["lemma", "count", "zipf"]
    return pd.concat([corpus.lemmas[cols], others[cols]], ignore_index=True)
