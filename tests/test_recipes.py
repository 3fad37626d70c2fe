"""The recipe "Add a study" of docs/architecture.md names every file a new study touches: this test
fails when a study is reached from anywhere else ("Add a setting" is checked by tests/test_steps.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import verbeval
from verbeval.workflow.steps import declared_steps

PKG = Path(verbeval.__file__).resolve().parent
REPO = PKG.parents[1]


def _importers(study: str) -> set[str]:
    """The modules outside ``verbeval.<study>`` that import it."""
    found = set()
    for path in sorted(PKG.rglob("*.py")):
        if path.is_relative_to(PKG / study):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == f"verbeval.{study}" or n.startswith(f"verbeval.{study}.") for n in names):
                found.add(str(path.relative_to(PKG)))
    return found


def test_a_study_is_reached_from_the_places_its_recipe_names() -> None:
    """The acquisition study (the newest) is imported by the parser's registry, its part of the plan,
    the warm queue's command line (``lemma-contexts`` is a queue step) and the registry of declared
    steps; its rules are one included file."""
    assert _importers("acquisition") == {"commands.py", "queue_cli.py", "workflow/acquisition.py"}
    assert 'include: "workflow/rules/acquisition.smk"' in (REPO / "Snakefile").read_text()
    from verbeval.acquisition import steps

    assert set(steps.STEPS) <= set(declared_steps())
