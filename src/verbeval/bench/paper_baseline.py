"""The paper-code oracle: a straightforward re-implementation of the paper's released scoring code.

:class:`PaperBaseline` scores one template row the way the released code does (one forward pass
per row, the vocabulary as a Python dict, a Python sort, Python loops over lemmas and cutoffs). It
serves twice: the baseline part of the benchmark times it against verbeval
(:mod:`verbeval.bench.baseline_ratio`), and ``tests/test_bench.py`` uses it as an independent
reference for the vectorised scores. It lives here, in the installed package, because the
``verbeval bench`` command runs it; the tests import it from here rather than keep a second copy.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch


class PaperBaseline:
    """The paper's approach, written straightforwardly: per template row one forward pass, the
    vocabulary as a Python dict of probabilities, the vocabulary ranked with a Python sort, and
    Python loops over lemmas at every cutoff. Scores follow the definitions in DESIGN.md (with
    float64 sums: Python floats), so they are an independent check of the vectorised code."""

    def __init__(
        self,
        lm: Any,
        lemmas: pd.DataFrame,
        top_cutoffs: Sequence[float],
        bottom_cutoffs: Sequence[float],
        prepend_bos: bool = False,
    ) -> None:
        self.lm, self.top, self.bottom, self.bos = lm, list(top_cutoffs), list(bottom_cutoffs), prepend_bos
        tok = lm.tokenizer
        self.vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
        self.lemmas = [(s, p) for s, p in zip(lemmas["sing_id"], lemmas["plur_id"])]

    def score_row(self, left: str, right: str, plural: bool, correct: str, incorrect: str) -> dict[str, float]:
        from verbeval.agreement.data.eligibility import single_token_ids
        from verbeval.agreement.data.templates import render_context

        lm, tok = self.lm, self.lm.tokenizer
        masked = lm.kind == "masked"
        text = render_context(left, right, cased=lm.cased, masked=masked, mask_token=lm.mask_token)
        ids = tok(text, add_special_tokens=masked)["input_ids"]
        if not masked and self.bos:
            ids = [tok.bos_token_id, *ids]
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits[0]
        pos = ids.index(tok.mask_token_id) if masked else len(ids) - 1
        probs: list[float] = torch.softmax(logits[pos].double(), -1).tolist()
        word_prob = {self.vocab[i]: p for i, p in enumerate(probs)}
        ranked = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
        rank = {self.vocab[i]: r for r, i in enumerate(ranked)}
        cum_top, acc = [], 0.0
        for i in ranked:
            acc += probs[i]
            cum_top.append(acc)
        cum_bottom, acc = [], 0.0
        for i in reversed(ranked):
            acc += probs[i]
            cum_bottom.append(acc)
        res: dict[str, float] = {}
        sing, plur = (single_token_ids(tok, [w])[0] for w in ((incorrect, correct) if plural else (correct, incorrect)))
        if sing >= 0 and plur >= 0:
            ps, pp = word_prob[self.vocab[sing]], word_prob[self.vocab[plur]]
            res["tse"] = float((pp > ps) if plural else (ps > pp))
        else:
            res["tse"] = math.nan
        n = len(probs)
        for side, cutoffs, cum in (("top", self.top, cum_top), ("bottom", self.bottom, cum_bottom)):
            for p in cutoffs:
                if p >= 1.0:
                    r_star, alpha = n, 0.0  # whole vocabulary: pre = post = every rank
                else:
                    r_star = bisect.bisect_left(cum, p)
                    if r_star >= n:
                        r_star, alpha = n, 0.0
                    else:
                        before = cum[r_star - 1] if r_star > 0 else 0.0
                        width = cum[r_star] - before
                        alpha = min(max((p - before) / width, 0.0), 1.0) if width > 0 else 0.0
                pre = self._set_scores(word_prob, rank, plural, side, r_star, n, inclusive=False)
                post = self._set_scores(word_prob, rank, plural, side, r_star, n, inclusive=True)
                for j, metric in enumerate(("ew", "mw", "prob_counted", "prob_counted_forms")):
                    a, b = pre[j], post[j]
                    if metric in ("ew", "mw"):
                        a, b = (b if math.isnan(a) else a), (a if math.isnan(b) else b)
                    res[f"{metric}_{side}@{p:g}"] = a + alpha * (b - a)
        return res

    def _set_scores(
        self,
        word_prob: dict[str, float],
        rank: dict[str, int],
        plural: bool,
        side: str,
        r_star: int,
        n: int,
        inclusive: bool,
    ) -> tuple[float, float, float, float]:
        """EW, MW, counted mass (both forms of every counted lemma, as in the paper's code) and
        the counted forms' mass inside the set, over the ranks before (or up to) ``r_star``."""
        count = ok = num = den = mass = 0.0
        for s_id, p_id in self.lemmas:  # one lemma at a time, as in the paper's code
            s_tok, p_tok = self.vocab[s_id], self.vocab[p_id]
            rs, rp = rank[s_tok], rank[p_tok]
            if side == "bottom":
                rs, rp = n - 1 - rs, n - 1 - rp
            in_s = rs <= r_star if inclusive else rs < r_star
            in_p = rp <= r_star if inclusive else rp < r_star
            if r_star >= n:
                in_s = in_p = True
            ps, pp = word_prob[s_tok], word_prob[p_tok]
            right, wrong = (pp, ps) if plural else (ps, pp)
            if side == "top":
                if not (in_s or in_p):
                    continue
                count += 1
                ok += right > wrong
                mass += ps + pp
                num += right if (in_p if plural else in_s) else 0.0
                den += (ps if in_s else 0.0) + (pp if in_p else 0.0)
            else:
                if not (in_s and in_p):
                    continue
                count += 1
                ok += right > wrong
                mass += ps + pp
                num += right
                den += right + wrong
        ew = ok / count if count else math.nan
        mw = num / den if count and den > 0 else math.nan
        return ew, mw, mass, den
