"""Sub-commands about the workflow and the repository as a whole: ``dvc-yaml``, ``docs-cli``,
``docs-config`` and ``report-table`` (a CSV table as a page of the Snakemake report)."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import Input, Option, Output, add_options

log = logging.getLogger("verbeval")

#: Default of ``docs-cli --doc``.
DOCS_CLI_DEFAULT = "docs/workflow.md"
#: Default of ``docs-config --doc``.
DOCS_CONFIG_DEFAULT = "docs/config.md"


def cmd_dvc_yaml(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_text
    from verbeval.workflow.dvc_yaml import dvc_pipeline, render, workflow_jobs

    out = Path(a.out)
    root = Path(a.root).resolve()
    wdir = os.path.relpath(root, out.resolve().parent)
    jobs = workflow_jobs(root / "Snakefile", [root / c for c in a.configfile], root)
    pipeline = dvc_pipeline(jobs, a.configfile, root, None if wdir == "." else wdir)
    args = " ".join(["--configfile", *a.configfile, "--out", a.out] + (["--root", a.root] if a.root != "." else []))
    text = render(pipeline, args)
    if a.check:
        current = out.read_text() if out.exists() else ""
        if current != text:
            raise VerbevalError(f"{out} is out of date with the workflow: run `verbeval dvc-yaml {args}`")
        print(f"{out}: up to date ({len(pipeline['stages'])} stages)")
        return
    write_text(out, text)
    log.info("%s: %d stages", out, len(pipeline["stages"]))


def cmd_docs_cli(a: argparse.Namespace, build_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """Write or check the sub-command table of ``a.doc``; ``build_parser`` is :func:`verbeval.cli.build_parser`."""
    from verbeval.core.clidoc import command_table, render_section, subcommands

    doc = Path(a.doc)
    current = doc.read_text(encoding="utf-8")
    parser = build_parser()
    text = render_section(current, command_table(parser), doc)
    n = len(subcommands(parser))
    command = f"verbeval docs-cli{'' if a.doc == DOCS_CLI_DEFAULT else ' --doc ' + a.doc}"
    _write_or_check(doc, current, text, a.check, "the sub-command table", "the parser", command, f"{n} sub-commands")


def cmd_docs_config(a: argparse.Namespace) -> None:
    """Write or check the key tables of ``a.doc`` from the configuration schema."""
    from verbeval.core.config import load_schema
    from verbeval.core.configdoc import documented_keys, render, undescribed

    doc = Path(a.doc)
    schema = load_schema()
    missing = undescribed(schema)
    if missing:
        raise VerbevalError(f"the configuration schema has no description of {', '.join(missing)}")
    current = doc.read_text(encoding="utf-8")
    text = render(current, schema, doc)
    n = len(documented_keys(text))
    command = f"verbeval docs-config{'' if a.doc == DOCS_CONFIG_DEFAULT else ' --doc ' + a.doc}"
    _write_or_check(doc, current, text, a.check, "the key tables", "the configuration schema", command, f"{n} keys")


def _write_or_check(
    doc: Path, current: str, text: str, check: bool, what: str, source: str, command: str, count: str
) -> None:
    """Write ``text`` (``what`` of ``doc``, generated from ``source``) to ``doc``; with ``check``, fail
    when ``doc`` differs from it instead (naming ``command``, which regenerates it)."""
    from verbeval.core.io import write_text

    if check:
        if current != text:
            raise VerbevalError(
                f"{doc}: {what} {'is' if what.endswith('table') else 'are'} out of date with {source}: run `{command}`"
            )
        print(f"{doc}: up to date ({count})")
        return
    write_text(doc, text)
    log.info("%s: %s (%s) written", doc, what.removeprefix("the "), count)


def register_dvc_yaml(add: Add) -> None:
    """``dvc-yaml``."""
    s = add(
        "dvc-yaml",
        cmd_dvc_yaml,
        "generate (or --check) a dvc.yaml with one stage per Snakemake job",
        "Stages take the jobs' shell commands, inputs, outputs and config params (docs/workflow.md, 'DVC'). "
        "Not a rule; run after changing the workflow or a config file.",
        group="user",
    )
    add_options(
        s,
        Input(
            "--configfile",
            "workflow config files, later ones override earlier ones (relative to --root; default: config/config.yaml)",
            nargs="+",
            default=["config/config.yaml"],
            required=False,
        ),
        Output("--out", "output: the DVC pipeline file", default="dvc.yaml", required=False),
        Option("--root", "repository root (where the Snakefile is)", default="."),
        Option("--check", "fail if --out differs from the generated pipeline (writes nothing)", action="store_true"),
    )


def cmd_report_table(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_text
    from verbeval.workflow.report_tables import csv_page

    if not len(a.csv) == len(a.title) == len(a.out):
        raise VerbevalError(
            f"{len(a.csv)} --csv, {len(a.title)} --title and {len(a.out)} --out: give one of each per page"
        )
    for csv, title, out in zip(a.csv, a.title, a.out):
        write_text(Path(out), csv_page(Path(csv), title))
        log.info("%s: %s as an HTML page", out, csv)


def register_report_table(add: Add) -> None:
    """``report-table``."""
    s = add(
        "report-table",
        cmd_report_table,
        "write a CSV table as an HTML page of the Snakemake report",
        "Every row and column of the CSV, numbers with 3 decimals (scientific below 0.0001), integers as they are. "
        "Rules simverb_page, veridicality_page, veridicality_kl_pages, veridicality_counterfactual_pages, "
        "lexicon_modes_page: the report shows these pages instead of handing out the CSV files.",
    )
    add_options(
        s,
        Input("--csv", "input: the CSV tables, one per page", nargs="+"),
        Option("--title", "each page's title and heading (in --csv order)", nargs="+", required=True),
        Output("--out", "output: the HTML pages (in --csv order)", nargs="+"),
    )


def register_docs_cli(add: Add, build_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """``docs-cli``; ``build_parser`` builds the whole parser whose table it writes."""
    s = add(
        "docs-cli",
        lambda a: cmd_docs_cli(a, build_parser),
        "write the sub-command table of docs/workflow.md from the parser's one-line helps (or --check it)",
        "The table sits between two marker lines in the file. Not a rule; run after adding a sub-command or "
        "changing its one-line help.",
        group="maintainer",
    )
    add_options(
        s,
        Input("--doc", "Markdown file holding the table between the markers", default=DOCS_CLI_DEFAULT, required=False),
        Option(
            "--check", "fail if the table in --doc differs from the generated one (writes nothing)", action="store_true"
        ),
    )


def register_docs_config(add: Add) -> None:
    """``docs-config``."""
    s = add(
        "docs-config",
        cmd_docs_config,
        "write the key tables of docs/config.md from the config schema's descriptions and defaults (or --check them)",
        "Each table sits between two marker lines naming the key whose keys it lists (top-level, models[], "
        "agreement, ...); every key is listed once. Not a rule; run after changing src/verbeval/schemas/"
        "config.schema.yaml.",
        group="maintainer",
    )
    add_options(
        s,
        Input(
            "--doc", "Markdown file holding the tables between the markers", default=DOCS_CONFIG_DEFAULT, required=False
        ),
        Option(
            "--check",
            "fail if a table in --doc differs from the generated one, or a key has no description (writes nothing)",
            action="store_true",
        ),
    )
