"""Errata of the published template files: known-bad rows to reject or flag.

:func:`load_errata` reads the CSV list (``source,line,action,reason``) of rows of the files pinned
in the manifest; :func:`flagged_errata` tabulates its ``flag`` rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verbeval.core.errors import InputError

ERRATA_COLUMNS = ("source", "line", "action", "reason")
#: the earlier format, without ``action`` (every row is ``reject``); still read
ERRATA_COLUMNS_V1 = ("source", "line", "reason")
#: ``reject``: the row is always rejected (not a usable pair); ``flag``: a usable pair with a known
#: problem (e.g. an ungrammatical sentence marked good), kept unless ``agreement.drop_flagged_errata``
ERRATA_ACTIONS = ("reject", "flag")


@dataclass(frozen=True)
class Erratum:
    action: str  # one of ERRATA_ACTIONS
    reason: str


def load_errata(path: str | Path) -> dict[str, dict[int, Erratum]]:
    """Known-bad rows of the published template files: CSV ``source,line,action,reason``.

    Line numbers refer to the exact file pinned by its sha256 in the manifest. ``action`` is
    ``reject`` or ``flag`` (:data:`ERRATA_ACTIONS`); a file in the earlier ``source,line,reason``
    format is read with every row ``reject``.
    """
    p = Path(path)
    try:
        df = pd.read_csv(p, dtype={"source": str, "line": "Int64", "action": str, "reason": str}, comment="#")
    except (OSError, ValueError) as exc:
        raise InputError(p, f"cannot read errata list: {exc}") from None
    if tuple(df.columns) == ERRATA_COLUMNS_V1:
        df.insert(2, "action", "reject")
    if tuple(df.columns) != ERRATA_COLUMNS:
        raise InputError(p, f"expected columns {','.join(ERRATA_COLUMNS)}, got {','.join(map(str, df.columns))}")
    out: dict[str, dict[int, Erratum]] = {}
    for i, r in enumerate(df.itertuples(index=False), start=2):
        if pd.isna(r.line) or int(r.line) < 1 or not isinstance(r.source, str) or not isinstance(r.reason, str):
            raise InputError(p, "each erratum needs a source, a line >= 1 and a reason", i)
        if r.action not in ERRATA_ACTIONS:
            raise InputError(p, f"action must be one of {', '.join(ERRATA_ACTIONS)}, not {r.action!r}", i)
        if int(r.line) in out.get(r.source, {}):
            raise InputError(p, f"duplicate erratum for {r.source} line {int(r.line)}", i)
        out.setdefault(r.source, {})[int(r.line)] = Erratum(str(r.action), r.reason)
    return out


def flagged_errata(errata: Mapping[str, Mapping[int, Erratum]], sources: Sequence[str] | None = None) -> pd.DataFrame:
    """The ``flag`` errata (``source, line, reason``) of ``sources`` (all when None), in file order."""
    recs = [
        {"source": s, "line": line, "reason": e.reason}
        for s, rows in errata.items()
        if sources is None or s in sources
        for line, e in sorted(rows.items())
        if e.action == "flag"
    ]
    return pd.DataFrame(recs, columns=["source", "line", "reason"]).astype({"line": "int64"})
