"""Hub models without network: found before any job, with the fix.

A hub id is loaded by transformers from the local Hugging Face cache or downloaded. Offline and not
cached, each job would fail only after huggingface_hub's retries (about a minute), and without saying
what to do. :func:`hub_problem` tells at start-up, cheaply: the cache is looked up first (no network);
only for a model that is not cached is the hub endpoint probed, once per process, with a short
timeout (or not at all when ``HF_HUB_OFFLINE`` is set).
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verbeval.core.model_sources.source import ModelSource

#: seconds to wait for the hub endpoint at start-up
PROBE_TIMEOUT = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}


def hub_cache() -> Path:
    """The Hugging Face hub cache folder (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else the default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub.constants import HF_HUB_CACHE

    return Path(HF_HUB_CACHE)


def offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set."""
    return any(os.environ.get(v, "").upper() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def is_cached(model_id: str, revision: str | None = None, filename: str = "config.json") -> bool:
    """True when ``filename`` of the hub model (at ``revision``, default main) is in the local cache."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model_id, filename, cache_dir=str(hub_cache()), revision=revision)
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


@functools.lru_cache(maxsize=4)
def unreachable(url: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why ``url`` cannot be reached, or None when it answers (any HTTP status counts as an answer)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{url}: {reason}"


def hub_problem(source: ModelSource) -> str | None:
    """Why the hub model of a source cannot be loaded here (not cached, and offline or the hub
    unreachable), with the fix; None when it is cached or the hub answers."""
    model_id, revision = source.id, source.revision
    if is_cached(model_id, revision, source.file or "config.json"):
        return None
    why = "HF_HUB_OFFLINE is set" if offline() else unreachable(endpoint())
    if why is None:
        return None
    rev = f" --revision {revision}" if revision else ""
    return (
        f"hub model {model_id} is not in the local Hugging Face cache ({hub_cache()}) and cannot be downloaded "
        f"({why}): download it in advance where there is network (`hf download {model_id}{rev}`) into this "
        "cache (or copy the cache here and point HF_HOME or HF_HUB_CACHE at it), then run with HF_HUB_OFFLINE=1; "
        "or use a local folder saved with save_pretrained (docs/models.md, 'Offline use of hub models')"
    )


def read_as_hub_id(model_id: str) -> str | None:
    """A warning for an ``A/B`` id that looks like a relative folder but is read as a hub id (``A``
    is not a folder here) and is not cached; else None."""
    parts = model_id.split("/")
    if len(parts) != 2 or is_cached(model_id):
        return None
    return (
        f"{model_id!r} is read as a hub id (ORG/NAME): there is no ./{parts[0]} folder here; "
        f"write ./{model_id} if you meant a local folder"
    )
