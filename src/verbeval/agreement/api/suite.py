"""The agreement suite of the in-process API: the template table, the lexicon and the groups, loaded
once and scored by :func:`verbeval.agreement.api.evaluation.evaluate` as often as needed.

A suite comes from a finished run (:meth:`AgreementSuite.from_results`: the ``templates.parquet``,
``lexicon.parquet`` and ``groups.yaml`` the workflow wrote) or from the data sources themselves
(:meth:`AgreementSuite.from_sources`: the manifest's files fetched, or copied from a data mirror, and
read by the same code as ``verbeval templates`` and ``verbeval lexicon``). What depends on a
tokenizer (its eligible lemmas, each group's contexts and TSE pair ids) is computed on first use and
kept, so that a training loop scoring the same tokenizer again pays only for the forward passes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from verbeval.agreement.data.groups import load_groups
from verbeval.agreement.data.templates import subsample
from verbeval.core import api_args as args
from verbeval.core.errors import InputError, VerbevalError

log = logging.getLogger(__name__)

__all__ = ["AgreementSuite"]

#: the environment variable naming a data mirror (as ``verbeval fetch`` reads it)
MIRROR_ENV = "VERBEVAL_DATA_MIRROR"
#: the template columns the engine reads (of :data:`verbeval.agreement.data.template_files.TEMPLATE_COLUMNS`)
SUITE_TEMPLATE_COLUMNS = ("group", "source", "left", "right", "correct", "incorrect", "plural")
#: the lexicon columns the engine reads
SUITE_LEXICON_COLUMNS = ("lemma", "sing", "plur")


@dataclass
class AgreementSuite:
    """Template rows, lexicon and groups of an agreement evaluation.

    ``templates``: the template table (``verbeval templates``); ``lexicon``: the verb lexicon
    (``verbeval lexicon``); ``groups``: ``{id, name, sources}`` in table order, those with rows in
    ``templates``; ``origin``: where it was read from (for messages); ``max_rows_per_source``: the
    row cap already applied to every source (None: every row).
    """

    templates: pd.DataFrame
    lexicon: pd.DataFrame
    groups: list[dict[str, Any]]
    origin: str = ""
    max_rows_per_source: int | None = None
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        args.columns("AgreementSuite", "templates", self.templates, SUITE_TEMPLATE_COLUMNS)
        args.columns("AgreementSuite", "lexicon", self.lexicon, SUITE_LEXICON_COLUMNS)
        present = set(self.templates["group"])
        self.groups = [dict(g) for g in self.groups if g["id"] in present]
        if not self.groups:
            raise VerbevalError(f"agreement suite {self.origin}: no group has template rows")

    @property
    def group_ids(self) -> list[str]:
        return [g["id"] for g in self.groups]

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_results(
        cls, results_dir: str | Path, *, groups: Sequence[str] | None = None, max_rows_per_source: int | None = None
    ) -> AgreementSuite:
        """The suite of a finished run: ``templates.parquet``, ``lexicon.parquet`` and ``groups.yaml``
        of ``results_dir/agreement`` (or of ``results_dir`` itself when it is that folder).
        ``groups``: keep these group ids only; ``max_rows_per_source``: keep at most that many rows
        of each source (evenly spaced, as ``agreement.max_rows_per_source`` does)."""
        root = Path(results_dir)
        folder = root / "agreement" if (root / "agreement" / "templates.parquet").is_file() else root
        paths = {n: folder / n for n in ("templates.parquet", "lexicon.parquet", "groups.yaml")}
        for name, path in paths.items():
            if not path.is_file():
                raise InputError(path, f"no {name}: is {root} the results folder of a finished agreement run?")
        suite = cls(
            pd.read_parquet(paths["templates.parquet"]),
            pd.read_parquet(paths["lexicon.parquet"]),
            load_groups(paths["groups.yaml"]),
            origin=str(folder),
        )
        return suite.select(groups, max_rows_per_source)

    @classmethod
    def from_sources(
        cls,
        *,
        manifest: str | Path = "resources/manifest.yaml",
        groups_file: str | Path = "resources/agreement_groups.yaml",
        groups: Sequence[str] | None = None,
        max_rows_per_source: int | None = None,
        verb_lists: Sequence[str] = ("verbs_combined", "giant_verb_list"),
        inflection_overrides: str | Path | None = "resources/inflection_overrides.csv",
        errata: str | Path | None = "resources/template_errata.csv",
        raw_dir: str | Path = "data/raw",
        mirror: str | Path | None = None,
    ) -> AgreementSuite:
        """The suite built from the data sources, as the workflow's ``templates`` and ``lexicon``
        rules build it (the default paths are the repository's, relative to its root; the defaults
        of ``agreement.verb_lists`` and the other config keys). Each source is fetched into
        ``raw_dir/<name>/`` and checked against its sha256 (a verified copy already there is
        kept); with ``mirror`` (default: ``$VERBEVAL_DATA_MIRROR`` when set) it is copied from that
        data mirror instead of downloaded."""
        from verbeval.agreement.data.errata import load_errata
        from verbeval.agreement.data.lexicon import build_lexicon
        from verbeval.agreement.data.templates import build_template_table
        from verbeval.core.fetch import fetch_source
        from verbeval.core.manifest import load_manifest, local_filename
        from verbeval.core.verb_list import read_giant_verb_list

        groups = args.group_ids("AgreementSuite.from_sources", "groups", groups)
        max_rows_per_source = args.positive_int(
            "AgreementSuite.from_sources", "max_rows_per_source", max_rows_per_source, optional=True
        )
        sources = load_manifest(manifest)
        chosen = load_groups(groups_file)
        if groups is not None:
            unknown = sorted(set(groups) - {g["id"] for g in chosen})
            if unknown:
                raise VerbevalError(f"unknown agreement group(s) {unknown}; known: {[g['id'] for g in chosen]}")
            chosen = [g for g in chosen if g["id"] in set(groups)]
        mirror = mirror if mirror is not None else (os.environ.get(MIRROR_ENV) or None)
        needed = list(dict.fromkeys([s for g in chosen for s in g["sources"]] + list(verb_lists)))
        files: dict[str, tuple[Path, str]] = {}
        for name in needed:
            if name not in sources:
                raise VerbevalError(f"{manifest}: no source named {name!r}")
            src = sources[name]
            dest = Path(raw_dir) / name / local_filename(src)
            files[name] = (fetch_source(src, dest, Path(mirror) if mirror else None), src.format)
        table, _ = build_template_table(
            {n: files[n] for n in needed if n not in verb_lists},
            chosen,
            max_rows_per_source=max_rows_per_source,
            errata=load_errata(errata) if errata else None,
        )
        csvs = [files[n][0] for n in verb_lists if files[n][1] == "verb_csv"]
        giant = [v for n in verb_lists if files[n][1] == "giant_verb_list" for v in read_giant_verb_list(files[n][0])]
        lexicon = build_lexicon(csvs[0] if csvs else None, giant or None, inflection_overrides)
        return cls(
            table, lexicon, chosen, origin=f"{manifest} ({groups_file})", max_rows_per_source=max_rows_per_source
        )

    # ------------------------------------------------------------------ narrowing

    def select(self, groups: Sequence[str] | None = None, max_rows_per_source: int | None = None) -> AgreementSuite:
        """This suite narrowed to ``groups`` (ids, in this suite's order; None: all) and to at most
        ``max_rows_per_source`` rows per source (the subsample of ``verbeval templates
        --max-rows-per-source``, :func:`verbeval.agreement.data.templates.subsample`, so that a suite of
        every row gives the rows of a run with ``agreement.max_rows_per_source`` set to it; None: as
        it is).
        Returns ``self`` when nothing changes, so that its per-tokenizer cache is kept."""
        groups = args.group_ids("AgreementSuite.select", "groups", groups)
        max_rows_per_source = args.positive_int(
            "AgreementSuite.select", "max_rows_per_source", max_rows_per_source, optional=True
        )
        if groups is None and (max_rows_per_source is None or max_rows_per_source == self.max_rows_per_source):
            return self
        key = ("select", tuple(groups) if groups is not None else None, max_rows_per_source)
        if key in self._cache:
            return self._cache[key]
        ids = self.group_ids
        if groups is not None:
            unknown = [g for g in groups if g not in ids]
            if unknown:
                raise VerbevalError(f"unknown agreement group(s) {unknown}; this suite has {ids}")
        keep = [g for g in self.groups if groups is None or g["id"] in set(groups)]
        t = self.templates[self.templates["group"].isin([g["id"] for g in keep])]
        cap = self.max_rows_per_source
        if max_rows_per_source is not None:
            t = subsample(t, max_rows_per_source)  # per source, row order kept
            cap = max_rows_per_source if cap is None else min(cap, max_rows_per_source)
        out = AgreementSuite(t.reset_index(drop=True), self.lexicon, keep, self.origin, cap)
        self._cache[key] = out
        return out

    def prepared(self, key: Any, make: Any) -> Any:
        """``make()``, computed once per ``key`` for this suite (eligible lemmas and prepared groups
        per tokenizer, :mod:`verbeval.agreement.api.evaluation`)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]
