"""What a run must repair, found when the plan is built, reading only: a pip model's file that is not
its pinned one, a stale shard store (a listed shard gone or changed) and a raw copy that matches no
checksum of its manifest entry. Each is reported with the file whose job must run (``target``); the
Snakefile forces those jobs (``workflow/rules/common.smk``), and the job that runs repairs it. Built
by :class:`verbeval.workflow.plan.Plan` as ``PLAN.repairs``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verbeval.agreement.engine.shardstore import incomplete_store
from verbeval.core.verified import is_verified
from verbeval.workflow.layout import Layout
from verbeval.workflow.models import ModelsPlan


@dataclass(frozen=True)
class Repair:
    """What a run must repair, found when the plan is built: the file whose job must run (``target``: a
    model's shard manifest, a raw copy, a pip model's folder), the model or source it belongs to
    (``name``), why, and the line that tells the user (``message``)."""

    target: str
    name: str
    why: str
    message: str


class RepairsPlan:
    """The plan's checks of files already there (each reads only and returns what must be repaired)."""

    def __init__(self, layout: Layout, model: ModelsPlan, sources: Sequence[str]) -> None:
        """``sources``: the manifest sources the run reads (their raw copies are checked)."""
        self.layout = layout
        self.model = model
        self.sources = sources

    def changed_pinned_files(self) -> list[Repair]:
        """The pip models whose assembled file is no longer the pinned one (a flipped byte, a
        truncation, a replacement) or is gone from its folder: rule pip_model must assemble them
        again from their verified wheels before any job loads them. Reads only (the digest comes
        from the file-hash cache when the file is unchanged)."""
        from verbeval.core.model_sources.pins import pin_problem
        from verbeval.core.model_sources.source import ModelSource

        found = []
        for folder, m in self.model.pip_models.items():
            if not os.path.isdir(folder):
                continue  # not assembled yet: rule pip_model runs anyway
            source = ModelSource.from_entry(m)
            problem = pin_problem(Path(folder) / str(source.file), str(source.pin))
            if problem:
                found.append(
                    Repair(
                        folder,  # rule pip_model's output
                        m["name"],
                        problem,
                        f"{problem}: model {m['name']!r} is assembled again from its verified wheels (rule "
                        "pip_model) before any job loads it",
                    )
                )
        return found

    def stale_stores(self) -> list[Repair]:
        """The shard stores whose manifest lists a shard that is gone (or changed size): their model's
        inference job must run again; it keeps every intact shard (its journal lists them) and
        computes only the missing ones. Reads only."""
        layout = self.layout
        found = []
        for root in layout.store_roots:
            for name in layout.models:
                manifest = layout.shard_manifest(root).format(model=name)
                why = incomplete_store(manifest)
                if why:
                    found.append(
                        Repair(
                            manifest,  # its model's inference job's output
                            name,
                            why,
                            f"{manifest}: {why}; the inference job of {name} will run again and recompute what is "
                            "missing",
                        )
                    )
        return found

    def unverified_raw(self) -> list[Repair]:
        """The raw copies that match no checksum of their manifest entry (edited by hand, or pinned by
        an older manifest): their fetch jobs must run. Reads only (the verified-copy cache is not
        written)."""
        layout = self.layout
        found = []
        for name in self.sources:
            source, path = layout.manifest[name], layout.raw_path(name)
            if os.path.isfile(path) and not is_verified(source, path, write_cache=False):
                found.append(
                    Repair(
                        path,  # its fetch job's output
                        name,
                        "matches no checksum",
                        f"{path}: matches no checksum of source {name!r} in {layout.config['manifest']}; its fetch "
                        "job will move it aside (renamed, never deleted) and fetch a verified copy",
                    )
                )
        return found
