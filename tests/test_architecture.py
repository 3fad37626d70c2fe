"""The package layout of docs/architecture.md: who may import whom, and a light command line.

Every import of every module under src/verbeval (module level and inside functions, relative ones
resolved) is read with ``ast`` and checked against :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import verbeval

PKG = Path(verbeval.__file__).resolve().parent

#: layer of each sub-package -> the layers it may import (besides the standard library, third-party
#: packages and ``verbeval`` itself, which holds only ``__version__``). The top-level modules
#: (cli, __main__, commands, model_run, model_queue, queue_cli) assemble the layers and may import any of them.
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "agreement": {"core", "agreement"},
    "acquisition": {"core", "agreement", "acquisition"},
    "simverb": {"core", "simverb"},
    "veridicality": {"core", "veridicality"},
    "multilingual": {"core", "agreement", "multilingual"},
    "bench": {"core", "agreement", "acquisition", "workflow", "bench"},
    "workflow": {"core", "agreement", "acquisition", "simverb", "veridicality", "multilingual", "workflow"},
}
TOP = {"cli", "__main__", "commands", "model_run", "model_queue", "queue_cli"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every import in ``source`` (a module named ``module``), at any
    depth; ``from X import y`` gives ``X.y`` (``y`` may be a module or a name in ``X``)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def layer(dotted: str) -> str | None:
    """The sub-package (or top-level module) of ``verbeval`` that ``dotted`` lies in; None for
    other packages and for ``verbeval.__version__``."""
    parts = dotted.split(".")
    if parts[0] != "verbeval" or len(parts) < 2 or parts[1] == "__version__":
        return None
    return parts[1]


def modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def violations() -> list[str]:
    bad = []
    for path in modules():
        name = module_name(path)
        own = layer(name) if name != "verbeval" else None
        if own is None or own in TOP:
            continue
        assert own in ALLOWED, f"{path}: sub-package {own!r} has no entry in ALLOWED (and docs/architecture.md)"
        for line, target in imported_modules(path.read_text(), name, path.name == "__init__.py"):
            other = layer(target)
            if other is not None and other not in ALLOWED[own]:
                bad.append(f"{path.relative_to(PKG)}:{line}: {own} imports {target}")
    return bad


def test_import_parser_sees_relative_and_function_level_imports() -> None:
    source = "import os\nfrom .metrics import score_logits\n\ndef f():\n    from ...core.io import write_text\n"
    assert imported_modules(source, "verbeval.agreement.scores.aggregate") == [
        (1, "os"),
        (2, "verbeval.agreement.scores.metrics.score_logits"),
        (5, "verbeval.core.io.write_text"),
    ]
    assert imported_modules("from . import cli\n", "verbeval.simverb", is_package=True) == [(1, "verbeval.simverb.cli")]
    assert layer("verbeval.agreement.scores.metrics.score_logits") == "agreement"
    assert layer("verbeval.__version__") is None and layer("numpy.linalg") is None


def test_every_layer_imports_only_what_it_may() -> None:
    assert len(modules()) > 40
    assert violations() == []


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """``module -> {imported module: line}`` over ``sources`` (``module -> (source, is_package)``):
    every import at any depth (:func:`imported_modules`, ``if TYPE_CHECKING:`` ones included), each
    resolved to the longest of ``sources``' modules that it names (``from X import y``: ``X.y`` when
    that is a module, else ``X``); imports of other packages left out."""
    graph: dict[str, dict[str, int]] = {}
    for name, (source, is_package) in sources.items():
        edges = graph.setdefault(name, {})
        for line, target in imported_modules(source, name, is_package):
            parts = target.split(".")
            found = next(
                (".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in sources), None
            )
            if found is not None and found != name:
                edges.setdefault(found, line)
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The modules of each import cycle (a strongly connected component of ``graph`` with more than one
    module, Tarjan's algorithm), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def cycle_path(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """One shortest cycle through ``component``'s first module, each import with its line:
    ``a -> b (a:12) -> a (b:3)``."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    queue = [start]
    while queue and start not in previous:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w in members and w not in previous:
                previous[w] = v
                queue.append(w)
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(previous[path[-1]])
    path.reverse()
    return path[0] + "".join(f" -> {b} ({a}:{graph[a][b]})" for a, b in zip(path, path[1:]))


def src_import_graph() -> dict[str, dict[str, int]]:
    return import_graph({module_name(p): (p.read_text(), p.name == "__init__.py") for p in modules()})


#: import cycles that remain, each allowed only as (part of) the modules listed; any other cycle
#: fails, and an entry that no longer is one too. None is left: the import graph of src/ has no cycle.
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def test_the_import_graph_has_no_cycle() -> None:
    graph = src_import_graph()
    assert len(graph) > 40 and graph["verbeval.model_run"]
    found = import_cycles(graph)
    for component in found:
        print(f"import cycle of {len(component)} modules: {cycle_path(graph, component)}")
    new = [cycle_path(graph, c) for c in found if not any(set(c) <= known for known in KNOWN_CYCLES)]
    assert new == []
    gone = [sorted(known) for known in KNOWN_CYCLES if not any(set(c) <= known for c in found)]
    assert gone == [], "no longer a cycle: remove it from KNOWN_CYCLES"


#: the modules of ``verbeval.workflow`` above the plan: they build it (``loading``) or read a built one
PLAN_READERS = {"verbeval.workflow.loading"}


def test_no_part_of_the_plan_imports_the_whole_plan() -> None:
    """The sub-plans take the layout record (``verbeval.workflow.layout``) and the sub-plans they need;
    of ``verbeval.workflow`` only the modules above the plan import ``verbeval.workflow.plan``."""
    graph = src_import_graph()
    importers = {m for m, edges in graph.items() if "verbeval.workflow.plan" in edges}
    assert sorted(m for m in importers if m.startswith("verbeval.workflow.") and m not in PLAN_READERS) == []
    assert "verbeval.workflow.plan" not in graph["verbeval.workflow.layout"]
    assert set(graph["verbeval.workflow.layout"]).isdisjoint(m for m in graph if m.startswith("verbeval.workflow."))


def test_an_import_cycle_is_found_and_printed() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("from pkg.b import thing\n", False),
        "pkg.b": ("import os\n\ndef f():\n    from . import c\n", False),
        "pkg.c": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n", False),
        "pkg.d": ("from pkg import a\nfrom pkg.d import x\n", False),
    }
    graph = import_graph(sources)
    assert graph == {
        "pkg": {},
        "pkg.a": {"pkg.b": 1},
        "pkg.b": {"pkg.c": 4},
        "pkg.c": {"pkg.a": 3},
        "pkg.d": {"pkg.a": 1},
    }
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert (
        cycle_path(graph, ["pkg.a", "pkg.b", "pkg.c"])
        == "pkg.a -> pkg.b (pkg.a:1) -> pkg.c (pkg.b:4) -> pkg.a (pkg.c:3)"
    )


def test_nothing_below_the_command_line_imports_it() -> None:
    """``verbeval.cli`` is the process edge: only ``python -m verbeval`` imports it (it runs the
    parser of :mod:`verbeval.commands`), and only ``verbeval.cli`` imports ``verbeval.commands`` (the
    commands that parse further, as ``run-queue``'s items, are handed its ``build_parser``). The warm
    queue's engine (``verbeval.model_queue``) imports neither, nor any module that imports them."""
    graph = src_import_graph()
    assert sorted(m for m, edges in graph.items() if "verbeval.cli" in edges) == ["verbeval.__main__"]
    assert sorted(m for m, edges in graph.items() if "verbeval.commands" in edges) == ["verbeval.cli"]
    reached, todo = set(), ["verbeval.model_queue"]
    while todo:
        for nxt in graph.get(todo.pop(), {}):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    assert {"verbeval.cli", "verbeval.commands", "verbeval.queue_cli"} & reached == set()
    # nor does it parse a command line: it is handed typed steps, not a parser
    source = (PKG / "model_queue.py").read_text()
    parsers = [
        t for _, t in imported_modules(source, "verbeval.model_queue") if t.split(".")[0] in ("argparse", "shlex")
    ]
    assert parsers == [] and "build_parser" not in source


#: the agreement study's sub-packages by concern, lowest first: each may import only those before it
#: (and ``agreement.steps``, its step declarations)
AGREEMENT_CONCERNS = ("data", "engine", "scores", "report", "lexicon_modes", "api", "cli")
#: the modules that may declare command-line options (``add_argument``): each study's ``cli``, the
#: top-level commands, and core's option helpers (``cliutil``, ``steps``: a setting's option)
OPTION_MODULES = re.compile(r"(^|/)cli(\.py|/)|^(commands|model_run|queue_cli)\.py$|^core/(cliutil|steps)\.py$")
#: the modules that may draw (import matplotlib or seaborn): ``plots``, ``*_plots`` and ``report``
DRAWING_MODULES = re.compile(r"(^|/|_)(plots|report)\.py$")


def mixed_concerns(paths: list[Path], root: Path = PKG) -> list[str]:
    """Each module (``paths``, below package folder ``root``) that reaches beyond its concern: an
    agreement sub-package importing a later one, options declared outside a command-line module,
    drawing outside a plots or report module."""
    bad = []
    for path in paths:
        rel = path.relative_to(root)
        parts = rel.parts
        own = parts[1] if len(parts) > 2 and parts[0] == "agreement" and parts[1] in AGREEMENT_CONCERNS else None
        source = path.read_text()
        name = ".".join(["verbeval", *rel.with_suffix("").parts])
        for line, target in imported_modules(source, name, path.name == "__init__.py"):
            t = target.split(".")
            if own and t[:2] == ["verbeval", "agreement"] and len(t) > 2 and t[2] in AGREEMENT_CONCERNS:
                if AGREEMENT_CONCERNS.index(t[2]) > AGREEMENT_CONCERNS.index(own):
                    bad.append(f"{rel}:{line}: {own} imports {target}")
            if t[0] in ("matplotlib", "seaborn") and not DRAWING_MODULES.search(str(rel)):
                bad.append(f"{rel}:{line}: draws ({target}) outside a plots or report module")
        if "add_argument(" in source and not OPTION_MODULES.search(str(rel)):
            bad.append(f"{rel}: declares command-line options outside a cli module")
    return bad


def test_no_module_mixes_two_concerns() -> None:
    """The agreement sub-packages are layers (data, engine, scores, report, lexicon_modes, api, cli);
    options are declared in cli modules only, figures drawn in plots/report modules only (and HTML
    tables built by core.html_report only: tests/test_report_tables.py)."""
    assert mixed_concerns(modules()) == []


def test_a_module_mixing_concerns_is_reported(tmp_path: Path) -> None:
    engine = tmp_path / "agreement" / "engine" / "planted.py"
    scores = tmp_path / "agreement" / "scores" / "planted.py"
    report = tmp_path / "agreement" / "report" / "plots.py"
    texts = {
        engine: "from verbeval.agreement.report.tables import table2\nfrom ..data import templates\n",
        scores: "import matplotlib.pyplot as plt\n\ndef f(s):\n    s.add_argument('--x')\n",
        report: "import seaborn\nfrom verbeval.agreement.scores import metrics\n",
    }
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert mixed_concerns(list(texts), root=tmp_path) == [
        "agreement/engine/planted.py:1: engine imports verbeval.agreement.report.tables.table2",
        "agreement/scores/planted.py:1: draws (matplotlib.pyplot) outside a plots or report module",
        "agreement/scores/planted.py: declares command-line options outside a cli module",
    ]


def test_a_study_importing_another_is_reported(tmp_path: Path) -> None:
    """The check fails on a forbidden edge (here: core importing the agreement study)."""
    bad = "def f():\n    from verbeval.agreement.report.figures import CUTOFF_FIGURES\n"
    targets = [layer(t) for _, t in imported_modules(bad, "verbeval.core.config")]
    assert targets == ["agreement"] and "agreement" not in ALLOWED["core"]


def test_every_sub_package_says_what_it_holds_and_may_import() -> None:
    for init in sorted(PKG.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "Holds:" in doc and "May import:" in doc, init
    assert {p.parent.name for p in PKG.glob("*/__init__.py")} == set(ALLOWED)


def _architecture_entries() -> dict[str, str]:
    """docs/architecture.md's package listing: entry (``cli.py``, ``core/``, ``core/model_sources/``,
    ``agreement/cli/``) -> its text (the entry's line and the indented lines that continue it); a
    folder indented under another is keyed by its path."""
    text = (PKG.parents[1] / "docs" / "architecture.md").read_text()
    block = text.split("## Packages and their allowed imports", 1)[1].split("```")[1]
    entries: dict[str, str] = {}
    current = parent = None
    for line in block.splitlines():
        head = line.strip().split(" ", 1)[0]
        indent = len(line) - len(line.lstrip())
        if line.startswith(("  ", "    ")) and (head.endswith("/") or head.endswith(".py")) and indent <= 4:
            if indent == 2:
                parent = head if head.endswith("/") else None
                current = head
            else:
                current = f"{parent}{head}"
            entries[current] = line
        elif current is not None:
            entries[current] += " " + line
    return entries


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def test_the_architecture_doc_and_the_docstrings_list_every_module() -> None:
    """Every module on disk is named in docs/architecture.md's listing of its package and in its
    package's docstring (a top-level module by its file name)."""
    entries = _architecture_entries()
    missing = []
    for init in sorted(PKG.rglob("__init__.py")):
        folder = init.parent
        if folder == PKG:
            names = {f.name for f in folder.glob("*.py")} - {"__init__.py", "__main__.py"}
            missing += [f"docs/architecture.md: {n}" for n in sorted(names) if n not in entries]
            continue
        stems = {f.stem for f in folder.glob("*.py")} - {"__init__"}
        entry = entries.get(f"{folder.relative_to(PKG).as_posix()}/", "")
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing += [
            f"docs/architecture.md {folder.relative_to(PKG).as_posix()}/: {s}" for s in sorted(stems - _words(entry))
        ]
        missing += [f"{init.relative_to(PKG.parent)}: {s}" for s in sorted(stems - _words(doc))]
    assert missing == []


def test_score_logits_keeps_its_public_path() -> None:
    from verbeval.agreement import score_logits
    from verbeval.agreement.scores.metrics import score_logits as defined

    assert score_logits is defined
    import verbeval.agreement as agreement

    with pytest.raises(AttributeError):
        agreement.no_such_name  # noqa: B018


def test_cli_is_a_short_entry_point() -> None:
    assert len((PKG / "cli.py").read_text().splitlines()) < 150


def test_help_imports_neither_torch_nor_pandas() -> None:
    # nor numpy, tqdm or seaborn: every job's start pays what the parser imports (docs/performance.md)
    code = (
        "import sys\nfrom verbeval.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'pandas', 'transformers', 'numpy', 'tqdm', 'seaborn') if m in sys.modules))"
    )
    # a process: what `verbeval --help` imports shows only in a fresh interpreter (pytest's has torch)
    env = {**os.environ, "PYTHONPATH": str(PKG.parent)}  # this checkout's package
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert "usage: verbeval" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_no_test_works_in_the_checkout_itself() -> None:
    """Issue 64: a test that needs the repository as its working directory changes to the session's
    ``repo_view`` (tests/conftest.py), never to the checkout, whose ``models/`` and results a user's
    quick start may have filled (two tests planned ``.test/config/ci.yaml`` against them)."""
    tests = Path(__file__).resolve().parent
    pattern = re.compile(r"chdir\((REPO|REPO_ROOT|Path\(__file__\)[^)]*)\)|cwd=(REPO|REPO_ROOT)\b(?!\s*/)")
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(tests.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and '["git", ' not in line  # git itself reads the checkout's index
    ]
    assert found == [], found
