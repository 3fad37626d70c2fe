"""Reading the configuration into a plan: Snakemake's merge of ``--configfile`` files and
``--config`` pairs, validation, and the plan (:class:`verbeval.workflow.plan.Plan`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.agreement.data.groups import load_groups
from verbeval.core.config import Layer, config_layers, validate_config
from verbeval.core.errors import VerbevalError
from verbeval.core.manifest import load_manifest
from verbeval.core.model_checks import check_model_paths
from verbeval.workflow.layout import PlanError
from verbeval.workflow.plan import Plan


def build_plan(
    config: dict[str, Any], layers: Sequence[Layer] = (), *, basedir: str | Path | None = None, check_paths: bool = True
) -> Plan:
    """Validate ``config`` (in place: the schema's defaults are filled in) and plan the workflow.

    ``layers`` are the configuration files in merge order (:func:`verbeval.core.config.config_layers`),
    to name the one that set a bad key. ``basedir`` is the repository root: an error about a
    relative path says how to run from elsewhere. ``check_paths``: check that local model folders
    exist (the main Snakemake process; a job run on its own checks only its own model)."""
    try:
        validate_config(config, layers=layers)
        manifest = load_manifest(config["manifest"])
        all_groups = load_groups(config["agreement"]["groups_file"])
        if check_paths:
            check_model_paths(config, layers=layers)
    except PlanError:
        raise
    except VerbevalError as exc:
        raise PlanError(f"{exc}{workdir_hint(basedir)}") from None
    return Plan(config, list(layers), manifest, all_groups)


def merged_config(files: Sequence[str | Path], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration Snakemake builds from ``--configfile`` files and ``--config`` pairs: each
    file's mapping merged into the previous ones key by key (nested mappings too), then the pairs."""
    from verbeval.core.io import load_yaml

    def merge(into: dict[str, Any], new: Mapping[str, Any]) -> None:
        for key, value in new.items():
            if isinstance(value, Mapping) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    config: dict[str, Any] = {}
    for f in files:
        try:
            data = load_yaml(Path(f).read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise PlanError(f"{f}: cannot read config: {exc.strerror or exc}") from None
        if not isinstance(data, Mapping):
            raise PlanError(f"{f}: config must be a mapping")
        merge(config, data)
    merge(config, dict(overrides or {}))
    return config


def plan_from_files(
    files: Sequence[str | Path],
    overrides: Mapping[str, Any] | None = None,
    *,
    basedir: str | Path | None = None,
    check_paths: bool = True,
) -> Plan:
    """:func:`build_plan` of the configuration that ``snakemake --configfile FILES --config
    KEY=VALUE...`` reads (``overrides`` are the ``--config`` pairs, already parsed)."""
    return build_plan(
        merged_config(files, overrides), config_layers(files, overrides), basedir=basedir, check_paths=check_paths
    )


def workdir_hint(basedir: str | Path | None) -> str:
    """Why a relative path is missing when snakemake runs outside the repository: appended to such errors."""
    if basedir is None:
        return ""
    root = Path(basedir).resolve()
    if Path.cwd().resolve() == root or Path("resources").is_dir():
        return ""
    return (
        f"; relative paths are read from the working directory {Path.cwd()}: run the workflow from the "
        f"repository root ({root}), or from elsewhere with -s {root / 'Snakefile'} --directory {root} "
        f"(--configfile paths stay relative to where you are)"
    )
