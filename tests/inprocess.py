"""Snakemake in process: what ``snakemake -n`` schedules, without starting a Snakemake process.

The fast tier asks the workflow which jobs would run (and why) through Snakemake's API in this
pytest process: the Snakefile is parsed and the DAG built exactly as ``snakemake -n`` does, with
the workflow's own start-up checks (a bad setup raises :class:`DryRunError` with the one line the
command prints). Real runs stay in the end-to-end tier (``-m e2e``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = REPO_ROOT / "Snakefile"


class DryRunError(Exception):
    """The workflow refused to plan (a ConfigError or another WorkflowError): the message as printed."""


@dataclass
class DryRun:
    """The jobs a dry run schedules: rule name, wildcards, shell command and reason of each."""

    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, int]:
        """Snakemake's 'Job stats' table: jobs per rule."""
        return dict(Counter(j["rule"] for j in self.jobs))

    def commands(self, rule: str) -> list[str]:
        return [j["cmd"] for j in self.jobs if j["rule"] == rule]

    def of(self, rule: str) -> list[dict[str, Any]]:
        return [j for j in self.jobs if j["rule"] == rule]


def dry_run(
    workdir: str | Path,
    configfiles: Sequence[str | Path] = (),
    config: Mapping[str, Any] | None = None,
    targets: Iterable[str] = (),
    forcerun: Iterable[str] = (),
    snakefile: Path = SNAKEFILE,
    resource_settings: Any = None,
    workflow_settings: Any = None,
) -> DryRun:
    """``snakemake -n -s SNAKEFILE --directory WORKDIR --configfile FILES --config KEY=VALUE ...
    [TARGETS]`` in process; the jobs it would run. ``config``: the ``--config`` pairs, parsed.
    ``resource_settings`` (Snakemake's ResourceSettings: --cores, a profile's default and per-rule
    resources) and ``workflow_settings`` (e.g. ``exec_mode=ExecMode.REMOTE``, a job run on its own)
    default to one core and the main process."""
    from snakemake.exceptions import WorkflowError
    from snakemake.settings.types import DAGSettings

    from verbeval.workflow.snakemake_internals import build_dag, parsed_workflow

    try:
        with parsed_workflow(
            snakefile,
            workdir,
            configfiles=configfiles,
            config=config,
            dag_settings=DAGSettings(targets=frozenset(targets), forcerun=frozenset(forcerun)),
            resource_settings=resource_settings,
            workflow_settings=workflow_settings,
        ) as wf:
            dag = build_dag(wf, forceall=False, ignore_incomplete=False, nolock=True)
            jobs = [
                {
                    "rule": j.rule.name,
                    "wildcards": {k: str(v) for k, v in j.wildcards.items()},
                    "cmd": " ".join(j.shellcmd.split()) if j.shellcmd else "",
                    "threads": j.threads,
                    "outputs": [str(f) for f in j.output],
                    "inputs": [str(f) for f in j.input],
                    "resources": {k: v for k, v in j.resources.items() if not k.startswith("_")},
                    "reason": str(dag.reason(j)),
                }
                for j in dag.needrun_jobs()
            ]
    except WorkflowError as exc:
        raise DryRunError(str(exc).strip()) from None
    return DryRun(sorted(jobs, key=lambda j: (j["rule"], sorted(j["wildcards"].items()))))
