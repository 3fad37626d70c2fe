"""``export``: one model's agreement results in the Every Eval Ever schema (docs/export.md)."""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import TYPE_CHECKING

from verbeval.agreement.steps import EXPORT
from verbeval.core.cliutil import Add
from verbeval.core.steps import GROUPS, MODEL_NAME, Option, add_options

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("verbeval")

#: the formats ``--format`` takes
FORMATS = ("every-eval-ever",)


def export_timestamp() -> int:
    """The export's time (Unix seconds): ``$SOURCE_DATE_EPOCH`` when set (a reproducible export), else now."""
    from verbeval.core.errors import VerbevalError

    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not text:
        return int(time.time())
    if not text.isdigit():
        raise VerbevalError(f"SOURCE_DATE_EPOCH={text!r}: expected Unix seconds")
    return int(text)


def sha256_hex(text: str) -> str:
    """``--config-sha256``'s value: 64 hex digits (lowercase)."""
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text.lower()):
        return text.lower()
    raise argparse.ArgumentTypeError(f"expected a sha256 (64 hex digits), got {text!r}")


#: ``--groups`` for every group of the run
ALL_GROUPS = "all"


def export_groups(spec: str, templates: pd.DataFrame, where: str) -> list[str]:
    """The groups ``--groups`` names (comma-separated), each one of ``templates`` (the run's template
    table, ``where`` its file); :data:`ALL_GROUPS`: every group of it, in its (Table 2's) order."""
    from verbeval.core.errors import VerbevalError

    run = list(dict.fromkeys(templates["group"]))
    if spec.strip() == ALL_GROUPS:
        return run
    groups = [g.strip() for g in spec.split(",") if g.strip()]
    unknown = [g for g in groups if g not in run]
    if unknown or not groups:
        what = f"{', '.join(unknown)}: not a group of {where}" if unknown else "no group given"
        raise VerbevalError(f"--groups {spec!r}: {what} (its groups: {', '.join(run)}, or {ALL_GROUPS} for every one)")
    return groups


def cmd_export(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.engine.shardstore import manifest_meta
    from verbeval.agreement.report.eee_export import build_export, check_run_config, write_export
    from verbeval.core.config import config_sha256, load_config
    from verbeval.core.eee_schemas import load_schemas
    from verbeval.core.errors import VerbevalError

    if a.configfile and a.config_sha256:
        raise VerbevalError("--configfile and --config-sha256 both name the configuration: give one")
    schemas = load_schemas(a.schemas)  # first: no schemas, nothing read
    templates = pd.read_parquet(a.templates)
    groups = export_groups(a.groups, templates, a.templates)
    config_hash = a.config_sha256
    if a.configfile:
        config = load_config(a.configfile)
        check_run_config(a.results, groups, config, a.configfile)
        config_hash = config_sha256(config)
    export = build_export(
        results_dir=a.results,
        groups=groups,
        templates=templates,
        meta=manifest_meta(a.manifest),
        model_name=a.model_name,
        timestamp=export_timestamp(),
        config_hash=config_hash,
    )
    aggregate, samples = write_export(export, schemas, a.out_dir)
    log.info(
        "%s: %d results, %d instance rows, validated against %s -> %s, %s",
        a.model_name,
        len(export.aggregate["evaluation_results"]),
        len(export.samples),
        schemas.source,
        aggregate,
        samples,
    )


def register_export(add: Add) -> None:
    s = add(
        "export",
        cmd_export,
        "one model's agreement results and instance rows in a shared schema (Every Eval Ever 0.3.0)",
        "Per group TSE, EW and MW at top-p 1 with their CIs, and one instance row per scored TSE row and per "
        "context; validated against the schema before anything is written (docs/export.md).",
        group="user",
    )
    add_options(
        s,
        Option("--format", "the schema of the export", required=True, choices=FORMATS),
        EXPORT.file("--templates"),
        GROUPS.but(help=f"comma-separated groups to export, or {ALL_GROUPS}: every group of the run (of --templates)"),
        MODEL_NAME.but(help="model name written into the export"),
        EXPORT.file("--manifest"),
        EXPORT.file("--results"),
        EXPORT.file("--configfile"),
        Option(
            "--config-sha256",
            "the configuration's sha256 as the workflow computes it (its rule passes it; instead of --configfile)",
            type=sha256_hex,
        ),
        EXPORT.file("--schemas"),
        *EXPORT.settings,
        EXPORT.file("--out-dir"),
    )
