"""SimVerb-3500's pairs (Gerz et al., EMNLP 2016): reading the release and its official splits, and the
rating ranges (bins) its results are broken down by.

The default rating bins are the configuration schema's (the ``--bins`` setting of
:data:`verbeval.simverb.steps.SIMVERB_TABLE`): :data:`DEFAULT_BINS`
(:func:`verbeval.simverb.statistics.results_table`'s default) and the option's default read them from there. numpy and pandas are imported inside the functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from verbeval.core.errors import InputError, VerbevalError
from verbeval.simverb.steps import SIMVERB_TABLE

if TYPE_CHECKING:
    import pandas as pd

#: relation labels of the release, in the order tables show them
RELATIONS = ("SYNONYMS", "ANTONYMS", "HYPER/HYPONYMS", "COHYPONYMS", "NONE")
PAIR_COLUMNS = ["pair", "verb1", "verb2", "score", "relation", "split"]
#: default edges of the human-rating ranges on the 0-10 scale (the last range is closed): the schema's
DEFAULT_BINS: tuple[float, ...] = tuple(float(b) for b in SIMVERB_TABLE.default("bins"))
_VERB = re.compile(r"^[a-z][a-z'-]*$")


def read_simverb(path: str | Path) -> pd.DataFrame:
    """Read a SimVerb file (``verb1 TAB verb2 TAB V TAB score TAB relation``, no header).

    Returns columns ``pair`` (0-based row number), ``verb1``, ``verb2``, ``score``, ``relation``
    and ``split`` (empty). Every row is kept, including the one pair the release rates in both
    orders (misspend/pass). Raises :class:`InputError` with the line on any malformed row.
    """
    import numpy as np
    import pandas as pd

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read SimVerb file: {exc}") from exc
    rows: list[tuple[str, str, float, str]] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 5:
            raise InputError(path, f"expected 5 tab-separated fields, got {len(fields)}", lineno)
        v1, v2, pos, score_text, relation = (f.strip() for f in fields)
        for v in (v1, v2):
            if not _VERB.match(v):
                raise InputError(path, f"not a verb: {v!r}", lineno)
        if pos != "V":
            raise InputError(path, f"part of speech {pos!r}, expected 'V'", lineno)
        try:
            score = float(score_text)
        except ValueError:
            raise InputError(path, f"score {score_text!r} is not a number", lineno) from None
        if not 0.0 <= score <= 10.0:
            raise InputError(path, f"score {score} outside [0, 10]", lineno)
        if relation not in RELATIONS:
            raise InputError(path, f"unknown relation {relation!r} (known: {', '.join(RELATIONS)})", lineno)
        if (v1, v2) in seen:
            raise InputError(path, f"pair ({v1}, {v2}) repeats line {seen[(v1, v2)]}", lineno)
        seen[(v1, v2)] = lineno
        rows.append((v1, v2, score, relation))
    if not rows:
        raise InputError(path, "no pairs")
    df = pd.DataFrame(rows, columns=["verb1", "verb2", "score", "relation"])
    df.insert(0, "pair", np.arange(len(df), dtype=np.int64))
    df["split"] = ""
    return df[PAIR_COLUMNS]


def assign_splits(full: pd.DataFrame, splits: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Copy of ``full`` whose ``split`` column names the split file each pair is in.

    A split's pairs are matched to the full set by (verb1, verb2) and must be a subset of it with
    the same rating; splits must not overlap.
    """
    import numpy as np

    out = full.copy()
    index = {(a, b): i for i, (a, b) in enumerate(zip(full["verb1"], full["verb2"]))}
    split = np.array([""] * len(full), dtype=object)
    for name, part in splits.items():
        for v1, v2, score in zip(part["verb1"], part["verb2"], part["score"]):
            i = index.get((v1, v2))
            if i is None:
                raise VerbevalError(f"split {name!r}: pair ({v1}, {v2}) is not in the full set")
            if not math.isclose(float(full["score"].iat[i]), float(score), abs_tol=1e-9):
                raise VerbevalError(
                    f"split {name!r}: pair ({v1}, {v2}) is rated {score} there but "
                    f"{full['score'].iat[i]} in the full set"
                )
            if split[i]:
                raise VerbevalError(f"pair ({v1}, {v2}) is in split {split[i]!r} and in split {name!r}")
            split[i] = name
    out["split"] = split
    return out


def score_bins(bins: Sequence[float]) -> list[tuple[float, float, str]]:
    """``[0, 2.5, 5]`` -> [(0, 2.5, '[0, 2.5)'), (2.5, 5, '[2.5, 5]')]: the last bin is closed."""
    edges = [float(b) for b in bins]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise VerbevalError(f"score bins must be at least two increasing edges, got {list(bins)}")
    out = []
    for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
        close = "]" if k == len(edges) - 2 else ")"
        out.append((lo, hi, f"[{lo:g}, {hi:g}{close}"))
    return out
