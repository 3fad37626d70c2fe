"""Tiny models for the tests: each (tokenizer, architecture, sizes, seed) built once per test process
(a pytest-xdist worker) by :func:`verbeval.core.tiny_models.make_tiny_model`, and copied into the
folder each caller names.

``make_tiny_model`` writes byte-identical files for the same arguments (seeded weights; the tests of
tiny-model itself, tests/test_cli.py and tests/test_families.py, build theirs), so the copy is the
folder the caller would have built. A copy, not the folder itself: a test that changes its model's
files changes no other test's. The first build goes to a folder of the session's base temporary
directory, not to a caller's.
"""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path
from typing import Any

import pytest

from verbeval.core.tiny_models import make_tiny_model

_BUILT: dict[tuple[Any, ...], Path] = {}


def tiny_model(
    factory: pytest.TempPathFactory, tokenizer_dir: str | Path, arch: str, out_dir: str | Path, **kw: Any
) -> Path:
    """``make_tiny_model(tokenizer_dir, arch, out_dir, **kw)``: its folder, copied from this process's
    first build with the same arguments."""
    named = inspect.signature(make_tiny_model).bind(tokenizer_dir, arch, out_dir, **kw)
    named.apply_defaults()  # seed=0 and no seed: one key
    sizes = {k: v for k, v in named.arguments.items() if k not in ("tokenizer_dir", "arch", "out_dir")}
    key = (str(Path(tokenizer_dir).resolve()), arch, tuple(sorted(sizes.items())))
    built = _BUILT.get(key)
    if built is None or not built.is_dir():
        built = make_tiny_model(tokenizer_dir, arch, factory.mktemp("tiny-built") / "model", **kw)
        _BUILT[key] = built
    out = Path(out_dir)
    shutil.copytree(built, out, dirs_exist_ok=True)
    return out
