"""A session: what the steps of one process share while they run (a warm queue, or one command).

A :class:`Session` owns the warm caches (:class:`verbeval.core.warm.WarmCache`: the tokenizer's work,
files' content keys) and the prefetcher (:class:`verbeval.core.prefetch.Prefetcher`: the next model
loaded while the current one computes). ``verbeval run-queue`` makes one for its whole queue and
passes it to each step function; a single command makes its own. Nothing of it outlives the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from verbeval.core.prefetch import LoadRequest, Prefetcher
from verbeval.core.warm import WarmCache, using


@dataclass
class Session:
    """The caches and prefetcher of one queue or command (``with Session() as s:`` closes it)."""

    cache: WarmCache = field(default_factory=WarmCache)
    prefetch: Prefetcher = field(default_factory=Prefetcher)

    @contextmanager
    def active(self) -> Iterator[Session]:
        """Within the block the engine keeps its work on this session's cache
        (:func:`verbeval.core.warm.memo`)."""
        with using(self.cache):
            yield self

    def take(self, request: LoadRequest) -> Any:
        """The loaded model of ``request`` (loaded ahead when announced: :meth:`Prefetcher.take`)."""
        return self.prefetch.take(request)

    def close(self) -> None:
        """Drop any model loaded ahead (the end of a queue)."""
        self.prefetch.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
