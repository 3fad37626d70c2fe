"""What the toy corpus is built from (:class:`CorpusSpec`): its size, the planted lemma
distribution, the construction weights and the seed; read by :mod:`verbeval.acquisition.toy.corpus`
(which builds it) and :mod:`verbeval.acquisition.toy.training` (which trains on it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: relative frequency of each construction (template group); groups not named here get 1
DEFAULT_WEIGHTS: dict[str, float] = {
    "simple": 8.0,
    "sent_comp": 2.0,
    "vp_coord": 2.0,
    "prep": 2.0,
    "subj_rel": 1.0,
    "obj_rel_across": 1.0,
    "obj_rel_no_comp_across": 1.0,
    "obj_rel_within": 1.0,
    "obj_rel_no_comp_within": 1.0,
    "blimp": 1.0,
}


@dataclass(frozen=True)
class CorpusSpec:
    """What :func:`verbeval.acquisition.toy.corpus.generate_corpus` builds: its size, the planted
    distribution, the construction weights and the seed."""

    seed: int = 0
    n_sentences: int = 16384
    n_lemmas: int = 60
    zipf_exponent: float = 1.5
    min_count: int = 8
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: groups whose template verb pairs are planted (None: every group but BLiMP, whose ~100 pairs
    #: would crowd out the lexicon's lemmas)
    verb_groups: tuple[str, ...] | None = None
