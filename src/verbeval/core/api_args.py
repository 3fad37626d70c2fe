"""Arguments of the in-process API checked at the door: one :class:`VerbevalError` line naming the
function, the argument and what it expected, before any work (the API's functions call these)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from verbeval.core.errors import VerbevalError


def _fail(where: str, name: str, value: Any, expected: str) -> VerbevalError:
    return VerbevalError(f"{where}: {name}={value!r}: expected {expected}")


def positive_int(where: str, name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` when it is an integer >= 1 (or None with ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise _fail(where, name, value, "a positive integer" + (" or None" if optional else ""))
    return int(value)


def non_negative_int(where: str, name: str, value: Any) -> int:
    """``value`` when it is an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise _fail(where, name, value, "an integer >= 0")
    return int(value)


def open_unit(where: str, name: str, value: Any) -> float:
    """``value`` when it is a number strictly between 0 and 1 (a confidence level)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < 1:
        raise _fail(where, name, value, "a number between 0 and 1 (exclusive)")
    return float(value)


def one_of(where: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` when it is one of ``choices`` (a setting's choices, e.g. ``agreement.bootstrap.cluster``'s)."""
    if not isinstance(value, str) or value not in choices:
        raise _fail(where, name, value, f"one of {', '.join(choices)}")
    return value


def group_ids(where: str, name: str, value: Any) -> list[str] | None:
    """A list of group ids: None stays None, one string is one group (not read letter by letter)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not all(isinstance(g, str) for g in value):
        raise _fail(where, name, value, "a group id or a list of group ids")
    return list(value)


def plain_name(where: str, name: str, value: Any) -> str:
    """``value`` when it can name a file in a folder: non-empty, no path separator, not ``.`` or ``..``, no NUL."""
    if (
        not isinstance(value, str)
        or value in ("", ".", "..")
        or any(c in value for c in ("/", "\\", "\0"))
        or value != value.strip()
    ):
        raise _fail(where, name, value, "a plain file name (no '/', not '.' or '..')")
    return value


def columns(where: str, name: str, frame: Any, required: Sequence[str]) -> None:
    """``frame`` (a DataFrame) has every column of ``required``."""
    present = set(getattr(frame, "columns", ()))
    missing = [c for c in required if c not in present]
    if missing:
        raise VerbevalError(f"{where}: {name} has no column(s) {', '.join(missing)}; it needs {', '.join(required)}")


def loaded_model(where: str, model: Any) -> None:
    """``model`` (a torch module) has parameters, none of them on the meta device (weights not loaded)."""
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    if not params:
        raise VerbevalError(f"{where}: model={type(model).__name__}: expected a torch model with parameters")
    meta = sum(1 for p in params if p.device.type == "meta")
    if meta:
        raise VerbevalError(
            f"{where}: model: {meta} of its {len(params)} parameters are on the meta device (weights not "
            "loaded); load the model's weights first"
        )
