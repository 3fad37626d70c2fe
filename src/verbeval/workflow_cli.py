"""Sub-commands about the workflow and the repository as a whole: ``dvc-yaml`` and ``docs-cli``."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

from verbeval.core.cliutil import Add
from verbeval.core.errors import VerbevalError

log = logging.getLogger("verbeval")

#: Default of ``docs-cli --doc``.
DOCS_CLI_DEFAULT = "docs/workflow.md"


def cmd_dvc_yaml(a: argparse.Namespace) -> None:
    from verbeval.core.io import write_text
    from verbeval.dvc import dvc_pipeline, render, workflow_jobs

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
    from verbeval.core.io import write_text

    doc = Path(a.doc)
    current = doc.read_text(encoding="utf-8")
    parser = build_parser()
    text = render_section(current, command_table(parser), doc)
    n = len(subcommands(parser))
    if a.check:
        if current != text:
            raise VerbevalError(
                f"{doc}: the sub-command table is out of date with the parser: run "
                f"`verbeval docs-cli{'' if a.doc == DOCS_CLI_DEFAULT else ' --doc ' + a.doc}`"
            )
        print(f"{doc}: up to date ({n} sub-commands)")
        return
    write_text(doc, text)
    log.info("%s: sub-command table (%d sub-commands) written", doc, n)


def register_dvc_yaml(add: Add) -> None:
    """``dvc-yaml``."""
    s = add(
        "dvc-yaml",
        cmd_dvc_yaml,
        "generate (or --check) a dvc.yaml with one stage per Snakemake job",
        "Stages take the jobs' shell commands, inputs, outputs and config params (docs/workflow.md, 'DVC'). "
        "Not a rule; run after changing the workflow or a config file.",
    )
    s.add_argument(
        "--configfile",
        nargs="+",
        default=["config/config.yaml"],
        help="workflow config files, later ones override earlier ones (relative to --root; "
        "default: config/config.yaml)",
    )
    s.add_argument("--out", default="dvc.yaml", help="output: the DVC pipeline file")
    s.add_argument("--root", default=".", help="repository root (where the Snakefile is)")
    s.add_argument(
        "--check", action="store_true", help="fail if --out differs from the generated pipeline (writes nothing)"
    )


def register_docs_cli(add: Add, build_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """``docs-cli``; ``build_parser`` builds the whole parser whose table it writes."""
    s = add(
        "docs-cli",
        lambda a: cmd_docs_cli(a, build_parser),
        "write the sub-command table of docs/workflow.md from the parser's one-line helps (or --check it)",
        "The table sits between two marker lines in the file. Not a rule; run after adding a sub-command or "
        "changing its one-line help.",
    )
    s.add_argument("--doc", default=DOCS_CLI_DEFAULT, help="Markdown file holding the table between the markers")
    s.add_argument(
        "--check",
        action="store_true",
        help="fail if the table in --doc differs from the generated one (writes nothing)",
    )
