"""Table-rendering helpers shared by the studies' Markdown/LaTeX writers."""

from __future__ import annotations


def tex_escape(s: str) -> str:
    """``s`` with the characters LaTeX treats specially (\\ & % _ # $) escaped."""
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        s = s.replace(a, b)
    return s
