"""Snakemake in process: what ``snakemake -n`` schedules, without starting a Snakemake process.

The fast tier asks the workflow which jobs would run (and why) through Snakemake's API in this
pytest process: the Snakefile is parsed and the DAG built exactly as ``snakemake -n`` does, with
the workflow's own start-up checks (a bad setup raises :class:`DryRunError` with the one line the
command prints). Real runs stay in the end-to-end tier (``-m e2e``).
"""

from __future__ import annotations

import os
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


def dry_run(workdir: str | Path, configfiles: Sequence[str | Path] = (), config: Mapping[str, Any] | None = None,
            targets: Iterable[str] = (), forcerun: Iterable[str] = (), snakefile: Path = SNAKEFILE,
            resource_settings: Any = None, workflow_settings: Any = None) -> DryRun:
    """``snakemake -n -s SNAKEFILE --directory WORKDIR --configfile FILES --config KEY=VALUE ...
    [TARGETS]`` in process; the jobs it would run. ``config``: the ``--config`` pairs, parsed.
    ``resource_settings`` (Snakemake's ResourceSettings: --cores, a profile's default and per-rule
    resources) and ``workflow_settings`` (e.g. ``exec_mode=ExecMode.REMOTE``, a job run on its own)
    default to one core and the main process."""
    from snakemake.api import SnakemakeApi
    from snakemake.exceptions import WorkflowError
    from snakemake.settings.types import (ConfigSettings, DAGSettings, OutputSettings, ResourceSettings,
                                          WorkflowSettings)

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:  # type: ignore[arg-type]
            wapi = api.workflow(resource_settings=resource_settings or ResourceSettings(cores=1),
                                workflow_settings=workflow_settings or WorkflowSettings(),
                                config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles],
                                                               config=dict(config or {})),
                                snakefile=Path(snakefile).resolve(), workdir=Path(workdir).resolve())
            dapi = wapi.dag(DAGSettings(targets=frozenset(targets), forcerun=frozenset(forcerun)))
            wf = wapi._workflow  # noqa: SLF001 - Snakemake offers no public needrun listing
            wf.dag_settings = dapi.dag_settings
            wf._prepare_dag(forceall=False, ignore_incomplete=False, lock_warn_only=True, nolock=True)  # noqa: SLF001
            wf._build_dag()  # noqa: SLF001
            jobs = [{"rule": j.rule.name, "wildcards": {k: str(v) for k, v in j.wildcards.items()},
                     "cmd": " ".join(j.shellcmd.split()) if j.shellcmd else "", "threads": j.threads,
                     "outputs": [str(f) for f in j.output], "inputs": [str(f) for f in j.input],
                     "resources": {k: v for k, v in j.resources.items() if not k.startswith("_")},
                     "reason": str(wf.dag.reason(j))}
                    for j in wf.dag.needrun_jobs()]
    except WorkflowError as exc:
        raise DryRunError(str(exc).strip()) from None
    finally:
        os.chdir(cwd)
    return DryRun(sorted(jobs, key=lambda j: (j["rule"], sorted(j["wildcards"].items()))))
