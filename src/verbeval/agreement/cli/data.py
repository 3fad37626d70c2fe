"""The data sub-commands: ``lexicon``, ``templates`` and ``lemmas``."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from verbeval.agreement.runs import LemmasRun, lemmas
from verbeval.agreement.steps import LEMMAS, LEXICON, TEMPLATES
from verbeval.core.cliutil import Add, model_source_options, split_pair
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import GROUPS, Option, add_options

log = logging.getLogger("verbeval")


def _manifest_inputs(manifest_path: str, items: Sequence[str]) -> dict[str, tuple[Path, str]]:
    """``NAME=PATH`` arguments -> {name: (path, format)}, checked against the manifest."""
    from verbeval.core.manifest import load_manifest

    manifest = load_manifest(manifest_path)
    inputs: dict[str, tuple[Path, str]] = {}
    for item in items:
        name, path = split_pair(item, "--input", "PATH")
        if name not in manifest:
            raise VerbevalError(f"--input {item!r}: {name!r} is not in {manifest_path}")
        inputs[name] = (Path(path), manifest[name].format)
    return inputs


def cmd_lexicon(a: argparse.Namespace) -> None:
    from verbeval.agreement.data.lexicon import build_lexicon
    from verbeval.core.io import write_parquet
    from verbeval.core.verb_list import read_giant_verb_list

    verb_csvs: list[Path] = []
    giant: list[str] = []
    for name, (path, fmt) in _manifest_inputs(a.manifest, a.input).items():
        if fmt == "verb_csv":
            verb_csvs.append(path)
        elif fmt == "giant_verb_list":
            giant.extend(read_giant_verb_list(path))
        else:
            raise VerbevalError(f"--input {name}: format {fmt!r} is not a verb list (verb_csv or giant_verb_list)")
    if not verb_csvs and not giant:
        raise VerbevalError("no verb list given (--input NAME=PATH)")
    if len(verb_csvs) > 1:
        raise VerbevalError(f"at most one verb_csv list is supported, got {len(verb_csvs)}")
    lex = build_lexicon(verb_csvs[0] if verb_csvs else None, giant or None, Path(a.overrides) if a.overrides else None)
    write_parquet(lex, a.out)
    counts = lex["source"].value_counts().to_dict()
    log.info(
        "lexicon: %d lemmas (%s) -> %s", len(lex), ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), a.out
    )


def register_lexicon(add: Add) -> None:
    s = add(
        "lexicon",
        cmd_lexicon,
        "build the verb lexicon (lemma, 3sg and plural present forms)",
        "Union of the verb lists, de-duplicated on the form pair (docs/data.md). Run by the rule lexicon.",
    )
    LEXICON.add_options(s)


def _custom_entries(a: argparse.Namespace) -> list[dict[str, str]]:
    """``--custom-group ID=PATH`` (+ ``--custom-name/-sha256/-format ID=VALUE``) -> config-like entries."""
    entries: dict[str, dict[str, str]] = {}
    for item in a.custom_group:
        gid, path = split_pair(item, "--custom-group", "PATH")
        if gid in entries:
            raise VerbevalError(f"--custom-group {item!r}: {gid!r} is given twice")
        entries[gid] = {"id": gid, "path": path}
    for option, key, items in (
        ("--custom-name", "name", a.custom_name),
        ("--custom-sha256", "sha256", a.custom_sha256),
        ("--custom-format", "format", a.custom_format),
    ):
        for item in items:
            gid, value = split_pair(item, option)
            if gid not in entries:
                raise VerbevalError(f"{option} {item!r}: no --custom-group {gid}=PATH")
            entries[gid][key] = value
    return list(entries.values())


def cmd_templates(a: argparse.Namespace) -> None:
    from verbeval.agreement.data.custom_pairs import custom_groups
    from verbeval.agreement.data.errata import load_errata
    from verbeval.agreement.data.groups import load_groups, run_groups, write_groups
    from verbeval.agreement.data.templates import build_template_table
    from verbeval.core.io import write_csv, write_parquet

    all_groups = groups = load_groups(a.groups_file)
    if a.groups is not None:
        wanted = [x for x in a.groups.split(",") if x]
        unknown = sorted(set(wanted) - {g["id"] for g in groups})
        if unknown:
            raise VerbevalError(f"unknown agreement group(s) {unknown}; known: {[g['id'] for g in groups]}")
        groups = [g for g in groups if g["id"] in wanted]
    custom = custom_groups(_custom_entries(a), all_groups)
    inputs = _manifest_inputs(a.manifest, a.input)
    errata = load_errata(a.errata) if a.errata else None
    table, rejects = build_template_table(
        inputs, groups, a.skip_bad_rows, a.max_rows_per_source, errata, a.drop_flagged_errata, custom
    )
    write_parquet(table, a.out)
    write_csv(rejects, a.rejects)
    if a.groups_out:
        write_groups(a.groups_out, run_groups(groups, custom))
    for gid, n in table.groupby("group", sort=False).size().items():
        log.info("group %s: %d rows", gid, n)
    log.info("templates: %d rows, %d rejected -> %s", len(table), len(rejects), a.out)


def register_templates(add: Add) -> None:
    s = add(
        "templates",
        cmd_templates,
        "normalise agreement templates into one table",
        "One row per template row of the selected groups and of every --custom-group file; malformed rows are errors (file:line: reason) "
        "unless --skip-bad-rows. Run by the rule templates.",
    )
    add_options(
        s,
        TEMPLATES.file("--manifest"),
        TEMPLATES.file("--groups-file"),
        GROUPS.but(
            required=False,
            help="comma-separated group ids of --groups-file to keep (default: all; --groups= : "
            "none, e.g. to run only --custom-group ones)",
        ),
        TEMPLATES.file("--input"),
        TEMPLATES.file("--out"),
        TEMPLATES.file("--rejects"),
        TEMPLATES.file("--errata"),
        *TEMPLATES.settings,
        TEMPLATES.file("--custom-group"),
        Option(
            "--custom-name",
            "the table row label of a --custom-group (default: its id)",
            action="append",
            default=[],
            metavar="ID=NAME",
        ),
        Option(
            "--custom-sha256",
            "sha256 a --custom-group file must have (checked before it is read)",
            action="append",
            default=[],
            metavar="ID=HEX",
        ),
        Option(
            "--custom-format",
            "jsonl or csv for a --custom-group file (default: from its extension)",
            action="append",
            default=[],
            metavar="ID=FORMAT",
        ),
        TEMPLATES.file("--groups-out"),
    )


def lemmas_run(a: argparse.Namespace) -> LemmasRun:
    """``lemmas``' options as its typed step value."""
    return LemmasRun(ModelSource.from_options(a), a.lexicon, a.out)


def cmd_lemmas(a: argparse.Namespace) -> None:
    lemmas(lemmas_run(a))


def register_lemmas(add: Add) -> None:
    s = add(
        "lemmas",
        cmd_lemmas,
        "eligible lemmas of a model (both forms single tokens)",
        "Only the model's tokenizer is loaded. Run by the rule lemmas, one job per model.",
    )
    model_source_options(s, "(only its tokenizer is loaded)")
    LEMMAS.add_options(s)
