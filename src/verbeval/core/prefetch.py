"""The next model of a queue read while the current one computes.

``verbeval run-queue`` announces the model loads its jobs will ask for, in order
(:meth:`Prefetcher.announce`, on the queue's session). When a job takes its model (:meth:`Prefetcher.take`), the load of the next announced
model starts on a background thread, so its weights are read (from disk or the hub), built and
moved to the device while the current model computes; the next job then finds it loaded. At most
one model is loaded ahead. A load that fails ahead fails the job that asks for it, with the same
error as a load of its own. A command that runs one model announces nothing and loads as before.

A model whose step is done is released (:meth:`Prefetcher.release`, by ``run-model``): the next
load whose module is built alike (:mod:`verbeval.core.weight_swap`: another revision of the same
model) reads its weights into that module instead of building one with ``from_pretrained``. The
log says per model which it was, and how long it took (``weights swapped into the built module in
S s`` or ``module built in S s``).

Each load seeds torch's generator as a load of its own does (``torch.manual_seed(0)``) on the
thread that runs it: nothing else in a queue draws from that generator while a model computes
(inference runs in eval mode), so a model's weights are the same whether it was loaded ahead or not.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verbeval.core.model_sources.source import ModelSource

log = logging.getLogger("verbeval")


@dataclass(frozen=True)
class LoadRequest:
    """One call of :func:`verbeval.core.models.load_model` (its arguments: the model source and how
    to load it), comparable and hashable."""

    source: ModelSource
    kind: str = "auto"
    dtype: str = "float32"
    device: str = "auto"
    device_map: Any = field(default=None, compare=False, hash=False)
    device_map_key: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "device_map_key", json.dumps(self.device_map, sort_keys=True, default=str))

    def load(self) -> Any:
        import torch

        from verbeval.core.models import load_model

        torch.manual_seed(0)
        return load_model(self.source, kind=self.kind, dtype=self.dtype, device=self.device, device_map=self.device_map)


class Prefetcher:
    """The loads a queue's jobs will ask for, and at most one model loaded ahead on a thread of its
    own. Owned by a session (:class:`verbeval.core.session.Session`); a session that announces
    nothing loads each model when it is taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._upcoming: deque[LoadRequest] = deque()
        self._ahead: dict[LoadRequest, Future[Any]] = {}
        self._pool: ThreadPoolExecutor | None = None
        #: the model of a step that is done (:meth:`release`), with its blueprint: the next load built alike
        #: reads its weights into its module
        self._released: tuple[Any, Any] | None = None
        #: id(loaded model) -> (a weak reference to it, its blueprint): the models this prefetcher loaded
        self._blueprints: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def announce(self, requests: list[LoadRequest]) -> None:
        """The loads the coming jobs will ask for, in order (replaces any earlier announcement)."""
        with self._lock:
            self._upcoming.clear()
            self._upcoming.extend(requests)

    def close(self) -> None:
        """Forget the announcement and drop any model loaded ahead (the end of a queue)."""
        with self._lock:
            self._upcoming.clear()
            pending = list(self._ahead.values())
            self._ahead.clear()
            pool, self._pool = self._pool, None
            self._released = None
            self._blueprints.clear()
        for fut in pending:
            fut.cancel()
        if pool is not None:
            pool.shutdown(wait=True)

    def _claim(self, request: LoadRequest) -> Future[Any] | None:
        """Take ``request`` (and anything announced before it) off the queue; its load begun ahead, if any."""
        with self._lock:
            ahead = self._ahead.pop(request, None)
            if request in self._upcoming:
                while self._upcoming and self._upcoming.popleft() != request:
                    pass
        return ahead

    def skip(self, request: LoadRequest) -> None:
        """``request``'s job needs no model after all (its outputs were complete): drop it from the
        queue, and its model if it was loaded ahead; the next announced load starts."""
        ahead = self._claim(request)
        if ahead is not None:
            ahead.cancel()  # a load under way finishes on its thread; its model is dropped
        self._start_next()

    def take(self, request: LoadRequest) -> Any:
        """The loaded model of ``request``: the one loaded ahead when there is one (waiting for it to
        finish), else loaded now. Then the next announced load starts in the background."""
        ahead = self._claim(request)
        if ahead is not None:
            t = time.perf_counter()
            lm = ahead.result()  # a load that failed ahead raises its own error here
            log.info(
                "%s: loaded ahead, beside the previous model's work (waited %.1f s for it)",
                request.source.id,
                time.perf_counter() - t,
            )
        else:
            lm = self._load(request, self._take_released())
        self._start_next()
        return lm

    def _take_released(self) -> tuple[Any, Any] | None:
        """The released model (and its blueprint), given to the load that starts now (when it starts,
        not when its thread runs: which load may reuse it does not depend on the threads' timing)."""
        with self._lock:
            released, self._released = self._released, None
        return released

    def release(self, lm: Any) -> None:
        """The step that took ``lm`` is done with it: its module may receive the weights of the next
        model built alike (:mod:`verbeval.core.weight_swap`). Nothing may use ``lm`` afterwards."""
        with self._lock:
            ref, bp = self._blueprints.pop(id(lm), (None, None))
            self._released = (bp, lm) if ref is not None and ref() is lm else None

    def _load(self, request: LoadRequest, released: tuple[Any, Any] | None) -> Any:
        """``request``'s model: its weights read into the ``released`` model's module when that was built
        alike (:func:`verbeval.core.weight_swap.swap_weights`), else built by :meth:`LoadRequest.load`.
        The released module is given up either way (a load that does not use it does not keep it alive)."""
        from verbeval.core.weight_swap import blueprint, swap_weights

        bp = blueprint(request)
        t = time.perf_counter()
        lm = None
        if bp is not None and released is not None and released[0] == bp:
            import torch

            torch.manual_seed(0)  # seeded as a load of its own is
            try:
                lm = swap_weights(released[1], request)
            except Exception as exc:  # noqa: BLE001 - a half-written module is dropped; from_pretrained says what is wrong
                why = (str(exc).splitlines() or [type(exc).__name__])[0]
                log.info("%s: weights not swapped (%s): built", request.source.id, why)
            released = None
            if lm is not None:
                log.info(
                    "%s: weights swapped into the built module in %.2f s", request.source.id, time.perf_counter() - t
                )
        if lm is None:
            released = None
            t = time.perf_counter()
            lm = request.load()
            log.info("%s: module built (from_pretrained) in %.2f s", request.source.id, time.perf_counter() - t)
        if bp is not None:
            with self._lock:
                for key in [k for k, (r, _) in self._blueprints.items() if r() is None]:
                    del self._blueprints[key]
                self._blueprints[id(lm)] = (weakref.ref(lm), bp)
        return lm

    def _start_next(self) -> None:
        with self._lock:
            if not self._upcoming or self._ahead:
                return
            nxt = self._upcoming[0]
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verbeval-prefetch")
            released, self._released = self._released, None
            self._ahead[nxt] = self._pool.submit(self._load, nxt, released)
