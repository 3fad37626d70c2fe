"""Error types. Every user-facing failure is a :class:`VerbevalError` with a one-line message."""

from __future__ import annotations

from pathlib import Path


class VerbevalError(Exception):
    """A failure caused by bad input or configuration; the CLI prints it on one line and exits 1."""


class ShardError(VerbevalError):
    """A probability shard that cannot be used (unreadable, truncated, corrupted, old schema)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class MismatchError(VerbevalError, ValueError):
    """Two inputs that must match do not (results scored on other template rows, shards of another
    lemma set or model). Also a :class:`ValueError`, which these failures raised before."""


class InputError(VerbevalError):
    """Bad input data, located at ``path:line`` when the line is known."""

    def __init__(self, path: str | Path, reason: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")
