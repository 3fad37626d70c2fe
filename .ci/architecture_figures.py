"""Print the architecture figures of a source tree (issue 52's targets), to compare two checkouts.

    python .ci/architecture_figures.py [TREE ...]      (default: this checkout)

Each figure is counted from the files alone (nothing is imported):

- add_argument calls in src/ (each ``add_argument(`` written in the code);
- import cycles in src/ (strongly connected components of the import graph, every import counted:
  module level, in functions and under TYPE_CHECKING), and the modules below ``verbeval.cli`` that
  import ``verbeval.cli`` or ``verbeval.commands`` (arrows back up the house);
- methods of the plan: functions defined in the classes of src/verbeval/workflow/ (their properties too);
- names of the plan used in the rule files: distinct ``PLAN.x[.y]`` in workflow/rules/*.smk and Snakefile.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(src: Path) -> dict[str, set[str]]:
    files = {module_name(src, p): p for p in sorted((src / "verbeval").rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    up = up[: len(up) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    graph[mod].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def figures(tree: Path) -> dict[str, object]:
    src = tree / "src"
    code = {p: p.read_text() for p in sorted((src / "verbeval").rglob("*.py"))}
    add_argument = sum(len(re.findall(r"\badd_argument\(", text)) for text in code.values())
    graph = import_graph(src)
    top = {"verbeval.cli", "verbeval.commands", "verbeval.__main__"}
    back_up = sorted(m for m, deps in graph.items() if m not in top and deps & {"verbeval.cli", "verbeval.commands"})
    methods = 0
    for path in sorted((src / "verbeval" / "workflow").glob("*.py")):
        for node in ast.walk(ast.parse(code[path])):
            if isinstance(node, ast.ClassDef):
                methods += sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
    rules = [*sorted((tree / "workflow" / "rules").glob("*.smk")), tree / "Snakefile"]
    names = {n for f in rules for n in re.findall(r"PLAN(?:\.[A-Za-z_]\w*)+", f.read_text())}
    return {
        "add_argument calls in src/": add_argument,
        "import cycles in src/": len(cycles(graph)),
        "modules below the CLI importing it": len(back_up),
        "plan methods (classes of src/verbeval/workflow/)": methods,
        "names of the plan in the rule files": len(names),
    }


def main(argv: list[str]) -> None:
    trees = [Path(t) for t in argv] or [Path(__file__).resolve().parent.parent]
    table = {str(t): figures(t) for t in trees}
    keys = list(next(iter(table.values())))
    print(f"{'figure':52} " + " ".join(f"{str(t)[-24:]:>24}" for t in trees))
    for k in keys:
        print(f"{k:52} " + " ".join(f"{table[str(t)][k]!s:>24}" for t in trees))


if __name__ == "__main__":
    main(sys.argv[1:])
