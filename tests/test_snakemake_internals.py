"""Snakemake's private API as verbeval uses it (verbeval.workflow.snakemake_internals): a Snakemake
release that renames or changes one of the private attributes fails here, by name."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from verbeval.workflow.snakemake_internals import PRIVATE_API, before_dag, build_dag, parsed_workflow

SNAKEFILE = '''
rule all:
    input: "b.txt"


rule a:
    """Config: x"""
    output: "a.txt"
    shell: "echo a > {output}"


rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cat {input} > {output}"
'''


@pytest.mark.parametrize("owner, name, params", PRIVATE_API, ids=[f"{o}.{n}" for o, n, _ in PRIVATE_API])
def test_the_private_api_is_still_there(owner: str, name: str, params: tuple[str, ...]) -> None:
    module, _, cls = owner.rpartition(".")
    obj = getattr(importlib.import_module(module), cls)
    assert hasattr(obj, name), (
        f"Snakemake {importlib.import_module('snakemake').__version__} has no {owner}.{name}: "
        "verbeval.workflow.snakemake_internals must follow it"
    )
    attr = inspect.getattr_static(obj, name)
    if params:
        missing = set(params) - set(inspect.signature(attr).parameters)
        assert not missing, f"{owner}.{name} no longer takes {sorted(missing)}"


def test_snakemake_is_the_pinned_major_release() -> None:
    import snakemake

    assert int(snakemake.__version__.split(".")[0]) == 9, (
        f"Snakemake {snakemake.__version__}: pyproject.toml pins <10; check snakemake_internals against it"
    )


@pytest.fixture
def two_rules(tmp_path: Path) -> Path:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


def test_parsed_workflow_and_its_dag(two_rules: Path) -> None:
    from snakemake.settings.types import DAGSettings

    cwd = Path.cwd()
    with parsed_workflow(
        two_rules / "Snakefile", two_rules, config={"k": 1}, dag_settings=DAGSettings(forceall=True)
    ) as wf:
        assert {r.name for r in wf.rules} == {"all", "a", "b"}
        assert wf.get_rule("a").docstring == "Config: x" and wf.config == {"k": 1}
        dag = build_dag(wf, forceall=True, ignore_incomplete=True)
        cmds = sorted(" ".join(j.shellcmd.split()) for j in dag.jobs if j.shellcmd)
        assert cmds == ["cat a.txt > b.txt", "echo a > a.txt"]
    assert Path.cwd() == cwd
    assert not (two_rules / "a.txt").exists()  # planned, not run


def test_before_dag_runs_with_the_settings_in_force(two_rules: Path) -> None:
    from snakemake.settings.types import DAGSettings

    for name in ("a.txt", "b.txt"):  # both up to date: nothing would run
        (two_rules / name).write_text("x\n")
    seen = []
    with parsed_workflow(two_rules / "Snakefile", two_rules, dag_settings=DAGSettings()) as wf:

        def force_b() -> None:  # installed by the run after parsing: changed here, they hold
            seen.append(wf.dag_settings.forcerun)
            wf.dag_settings.forcerun = frozenset({"b.txt"})

        assert before_dag(wf, force_b)
        dag = build_dag(wf, forceall=False, ignore_incomplete=False, nolock=True)
        assert [j.rule.name for j in dag.needrun_jobs() if j.shellcmd] == ["b"]
    assert seen == [frozenset()]
    assert not before_dag(object(), force_b)  # a stand-in without the step: nothing to wrap
