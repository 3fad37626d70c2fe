"""Every use of Snakemake's private API, in one module (Snakemake is pinned ``<10``, pyproject.toml).

Snakemake's public API (``snakemake.api``) runs and lints a workflow, but lists neither its parsed
rules nor its planned jobs, and has no hook between installing a run's DAG settings and preparing
the DAG. What verbeval needs of them goes through three functions here:

* :func:`parsed_workflow`: the ``Workflow`` object of a Snakefile parsed with a configuration (its
  ``rules``, ``config``): ``WorkflowApi._workflow``;
* :func:`build_dag`: that workflow's DAG of jobs, built as ``snakemake -n`` builds it
  (``Workflow._prepare_dag``, ``Workflow._build_dag``); ``verbeval dvc-yaml`` reads every job of it,
  the tests' in-process dry runs (``tests/inprocess.py``) the jobs that would run;
* :func:`before_dag`: a function run just before the DAG is prepared, with the run's settings in
  force (wraps ``Workflow._prepare_dag``): the forced reruns of :func:`verbeval.workflow.snakemake.force_rerun`;
* :func:`exact_producer`: a rule whose outputs are all plain paths (a queue job's hundreds of
  per-revision files) answers ``Rule.is_producer`` by a set lookup instead of one regular-expression
  match per output, for every file the DAG resolves.

:data:`PRIVATE_API` names each private attribute; ``tests/test_snakemake_internals.py`` checks them against
the installed Snakemake (and runs all three functions on a two-rule Snakefile), so a Snakemake
release that changes one fails there, by name, rather than in a workflow run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: the private attributes used here: (owner, attribute, the parameters it must accept)
PRIVATE_API: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("snakemake.api.WorkflowApi", "_workflow", ()),
    ("snakemake.workflow.Workflow", "_prepare_dag", ("forceall", "ignore_incomplete", "lock_warn_only", "nolock")),
    ("snakemake.workflow.Workflow", "_build_dag", ()),
    ("snakemake.rules.Rule", "is_producer", ("requested_output",)),
)


@contextmanager
def parsed_workflow(
    snakefile: str | Path,
    workdir: str | Path,
    *,
    configfiles: Sequence[str | Path] = (),
    config: Mapping[str, Any] | None = None,
    dag_settings: Any = None,
    resource_settings: Any = None,
    workflow_settings: Any = None,
) -> Iterator[Any]:
    """Snakemake's ``Workflow`` of ``snakefile`` parsed in ``workdir`` with ``--configfile
    CONFIGFILES --config KEY=VALUE...`` (``config``: the pairs, parsed), inside Snakemake's API
    context (quiet). ``dag_settings`` (Snakemake's DAGSettings) are installed as a run installs
    them, for :func:`build_dag`; ``resource_settings`` default to one core. The working directory
    is restored on exit."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, WorkflowSettings

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:  # type: ignore[arg-type]
            wapi = api.workflow(
                resource_settings=resource_settings or ResourceSettings(cores=1),
                workflow_settings=workflow_settings or WorkflowSettings(),
                config_settings=ConfigSettings(
                    configfiles=[Path(c).resolve() for c in configfiles], config=dict(config or {})
                ),
                snakefile=Path(snakefile).resolve(),
                workdir=Path(workdir).resolve(),
            )
            if dag_settings is not None:
                wapi.dag(dag_settings)  # parses the Snakefile and installs the settings on its workflow
            yield wapi._workflow  # private: no public access to the parsed workflow
    finally:
        os.chdir(cwd)


def build_dag(workflow: Any, *, forceall: bool, ignore_incomplete: bool, nolock: bool = False) -> Any:
    """The DAG of ``workflow`` (from :func:`parsed_workflow` with ``dag_settings``), built as
    ``snakemake -n`` builds it: its ``jobs`` (every job of the targets), ``needrun_jobs()`` and
    ``reason(job)``."""
    workflow._prepare_dag(forceall=forceall, ignore_incomplete=ignore_incomplete, lock_warn_only=True, nolock=nolock)
    workflow._build_dag()
    return workflow.dag


def before_dag(workflow: Any, hook: Callable[[], None]) -> bool:
    """Run ``hook`` each time just before ``workflow`` prepares its DAG, when the run's DAG settings
    (``workflow.dag_settings``) are in force: Snakemake parses the Snakefile before it installs them,
    so a change made at parse time would be overwritten. False when ``workflow`` has no such step
    (a stand-in object)."""
    prepare = getattr(workflow, "_prepare_dag", None)
    if prepare is None:
        return False

    def prepare_after_hook(*args: Any, **kwargs: Any) -> Any:
        hook()
        return prepare(*args, **kwargs)

    workflow._prepare_dag = prepare_after_hook
    return True


def exact_producer(rule: Any) -> bool:
    """Make ``rule`` (Snakemake's ``Rule``) answer ``is_producer(path)`` by a set lookup when every
    product (outputs, log, benchmark) is a plain path: the same answer as Snakemake's per-output
    regular-expression match, which for a queue job's hundreds of outputs made a 1,000-revision dry
    run spend most of its time there. False (nothing changed) for a rule with wildcards."""
    if rule.has_wildcards():
        return False
    products = frozenset(str(p) for p in rule.products())
    rule.is_producer = products.__contains__
    return True
