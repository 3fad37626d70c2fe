"""``verbeval bench-hashes``: do two source trees write byte-identical outputs?

A refactor of the workflow must leave every output byte for byte as it was. This runs each
configuration from scratch with each of two source trees (``--old``, ``--new``: checkouts of the
repository) and compares the sha256 of every file the runs wrote:

* **Each tree runs its own code.** A run happens in a fresh copy of the tree's source files (the
  files ``git ls-files --cached --others --exclude-standard`` lists, uncommitted changes included;
  every file of the tree but ``.git``, ``.venv`` and earlier outputs when it is not a git checkout),
  from that copy (its Snakefile, ``workflow/rules``, ``config/``, ``resources/``), with
  ``PYTHONPATH=<copy>/src``: ``PYTHONPATH`` comes before the venv's editable install on
  ``sys.path``, so this process's Python, the ``verbeval`` console script (its shebang is that
  Python) and every job of the run import the copy's ``verbeval``; the run checks this before it
  starts (:func:`verbeval.bench.snakemake_jobs.check_imports`). One venv (this process's) runs both trees.
* **From scratch, apart.** Each (tree, configuration) has its own copy, so nothing one run wrote
  (results, raw data, built models) is seen by another. What lies outside the copy is shared: the
  data mirror (``--config data_mirror=DIR``), the real tokenizers of ``--shared``, the pip wheels and
  GGUF model cache of ``$VERBEVAL_CACHE_DIR`` (the quick start's SmolLM2 is cached there by its
  sha256, read, not rewritten, by a run that finds it), and the sweep's checkpoint folders
  (generated once, read by both trees).
* **What is compared.** Every file below the copy that is not one of the tree's source files: the
  results folder, the raw data, the models the run built (``tiny_models:``, ``toy_models:``, the
  CI configuration's tiny models built before the run by the copy's tiny-model command, as
  ``.ci/run`` does), but not (:func:`excluded`): Snakemake's own records (``.snakemake/``, the bench's
  ``snakemake-metadata.sqlite``), logs (``*.log`` and every ``logs/`` folder: they hold times),
  ``__pycache__/`` and ``*.pyc`` (written by the imports, not the workflow). No written output was
  found to differ between two runs of one tree (the quick start run twice with the same commit
  reported every file identical, docs/performance.md); ``--exclude GLOB`` leaves out more.

It prints one row per configuration: the files compared (found in both runs), identical,
differing (each path listed), only in the old run, only in the new run; exit code 1 on any difference
or a failed run. The configurations (``--configs``): ``config/acquisition-demo.yaml``,
``config/quick.yaml``, ``.test/config/ci.yaml`` and ``sweep`` (the sweep of
:mod:`verbeval.bench.sweep` with ``--sweep-revisions`` revisions, default 32).
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verbeval.core.io import sha256_file

#: folders whose files are never compared (Snakemake's records, logs, Python's caches)
EXCLUDED_DIRS = frozenset({".snakemake", "logs", "__pycache__", ".git"})
#: file name patterns never compared
EXCLUDED_NAMES = ("*.log", "*.pyc", "snakemake-metadata.sqlite*")
#: the configurations compared by default; ``sweep`` is the bench's sweep, generated once
DEFAULT_CONFIGS = ("config/acquisition-demo.yaml", "config/quick.yaml", ".test/config/ci.yaml", "sweep")
#: the tiny models ``.test/config/ci.yaml`` reads, built as ``.ci/run`` builds them: (out, tokenizer, arch)
CI_TINY_MODELS = (
    ("models/tiny-bert-base-cased", "bert-base-cased", "bert"),
    ("models/tiny-gpt2", "gpt2", "gpt2"),
    ("models/tiny-mistral", "mistral_v1_spm", "mistral"),
    ("models/tiny-gpt-neox", "gpt_neox_olmo1", "gpt-neox"),
    ("models/tiny-olmo2", "olmo2_dolma2", "olmo2"),
    ("models/tiny-bert-nli", "bert-base-uncased", "bert-nli"),
)
#: folders of a tree that are not its source when it is not a git checkout
_NOT_SOURCE = frozenset({".git", ".venv", ".snakemake", "__pycache__", "models", "data", ".pytest_cache"})


def excluded(rel: str, patterns: Sequence[str] = ()) -> bool:
    """Whether the relative path ``rel`` (``/``-separated) is left out of the comparison: below one
    of :data:`EXCLUDED_DIRS`, a name matching :data:`EXCLUDED_NAMES`, or the whole path matching one
    of ``patterns`` (globs)."""
    parts = rel.split("/")
    if any(p in EXCLUDED_DIRS for p in parts[:-1]):
        return True
    if any(fnmatch.fnmatch(parts[-1], g) for g in EXCLUDED_NAMES):
        return True
    return any(fnmatch.fnmatch(rel, g) for g in patterns)


def hash_outputs(root: Path, sources: frozenset[str] = frozenset(), patterns: Sequence[str] = ()) -> dict[str, str]:
    """``{relative path: sha256}`` of every file below ``root`` but the ``sources`` (relative paths)
    and what :func:`excluded` leaves out; symlinks are followed (a dangling one is left out)."""
    root = Path(root)
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel in sources or excluded(rel, patterns) or not p.is_file():
                continue
            out[rel] = sha256_file(p)
    return out


@dataclass
class Comparison:
    """Two runs' output hashes compared."""

    config: str
    identical: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def compared(self) -> int:
        return len(self.identical) + len(self.differing)

    @property
    def same(self) -> bool:
        return self.error is None and not (self.differing or self.only_old or self.only_new)


def compare(config: str, old: Mapping[str, str], new: Mapping[str, str]) -> Comparison:
    """The files of both runs, identical or differing, and those of one run only."""
    c = Comparison(config)
    for rel in sorted(set(old) | set(new)):
        if rel not in new:
            c.only_old.append(rel)
        elif rel not in old:
            c.only_new.append(rel)
        elif old[rel] == new[rel]:
            c.identical.append(rel)
        else:
            c.differing.append(rel)
    return c


def table(rows: Sequence[Comparison]) -> str:
    """The comparison table, then every differing or one-sided path."""
    head = ("configuration", "compared", "identical", "differing", "only-in-old", "only-in-new")
    body = [
        (
            r.config,
            str(r.compared),
            str(len(r.identical)),
            str(len(r.differing)),
            str(len(r.only_old)),
            str(len(r.only_new)),
        )
        if r.error is None
        else (r.config, "-", "-", "-", "-", "-")
        for r in rows
    ]
    widths = [max(len(x[i]) for x in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in (head, *body)]
    for r in rows:
        if r.error is not None:
            lines.append(f"{r.config}: run failed: {r.error}")
        for label, paths in (("differs", r.differing), ("only in old", r.only_old), ("only in new", r.only_new)):
            lines += [f"{r.config}: {label}: {p}" for p in paths]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the runs


def source_files(tree: Path) -> list[str]:
    """The relative paths of a tree's source files (module docstring)."""
    tree = Path(tree)
    if (tree / ".git").exists():
        out = subprocess.run(
            ["git", "-C", str(tree), *"ls-files -z --cached --others --exclude-standard".split()],
            capture_output=True,
            check=True,
        ).stdout.decode()
        return sorted(p for p in set(out.split("\0")) if p and (tree / p).is_file())
    found = []
    for dirpath, dirnames, filenames in os.walk(tree):
        rel_dir = Path(dirpath).relative_to(tree)
        top = rel_dir == Path(".")
        dirnames[:] = [
            d
            for d in dirnames
            if d not in {".git", ".venv", "__pycache__", ".snakemake"}
            and not (top and (d in _NOT_SOURCE or d.startswith("results")))
        ]
        found += [(rel_dir / f).as_posix() for f in filenames]
    return sorted(found)


def copy_tree(tree: Path, dest: Path) -> frozenset[str]:
    """A copy of ``tree``'s source files in ``dest`` (an empty folder); their relative paths."""
    files = source_files(tree)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, target, follow_symlinks=False)
    return frozenset(files)


def run_environ(copy: Path, stand_in_dir: Path) -> dict[str, str]:
    """The environment of a run in ``copy``: ``PYTHONPATH=<copy>/src``, this Python's ``bin/`` first on
    ``PATH`` and a stand-in ``scontrol`` before it (:func:`verbeval.bench.sweep.no_slurm_environ`)."""
    from verbeval.bench.snakemake_jobs import child_environ
    from verbeval.bench.sweep import no_slurm_environ

    env = child_environ()
    env["PYTHONPATH"] = str((copy / "src").resolve())
    return no_slurm_environ(env, stand_in_dir)


def prepare(config: str, copy: Path, env: Mapping[str, str], shared: Path) -> None:
    """What a configuration needs before its run: the CI configuration's tiny models (``.ci/run``)."""
    if Path(config).as_posix() == ".test/config/ci.yaml":
        for out, tokenizer, arch in CI_TINY_MODELS:  # the copy's command (PYTHONPATH), as .ci/run builds them
            args = f"tiny-model --tokenizer {shlex.quote(str(shared / 'tokenizers' / tokenizer))} --arch {arch} --out {out}"
            subprocess.run(
                [str(Path(sys.executable).parent / "verbeval"), *shlex.split(args)],
                cwd=copy,
                env=dict(env),
                check=True,
                capture_output=True,
            )


def run_one(
    tree: Path,
    config: str,
    copy: Path,
    *,
    cores: int,
    config_values: Sequence[str],
    shared: Path,
    patterns: Sequence[str],
) -> tuple[dict[str, str], float]:
    """Run ``config`` from scratch with ``tree``'s code in ``copy``: the outputs' hashes and the run's
    wall time (snakemake only). ``copy`` is emptied first only when it is an earlier run's copy
    (verbeval.core.outfolders.run_folder), never a user's folder."""
    from verbeval.bench.snakemake_jobs import check_imports  # imports torch (bench.timing): not at `verbeval --help`
    from verbeval.core.outfolders import run_folder

    with run_folder(copy, "bench-hashes") as copy:
        sources = copy_tree(tree, copy)
        env = run_environ(copy, copy.parent / f"{copy.name}-no-slurm")
        check_imports(copy, env)
        prepare(config, copy, env, shared)
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", str(config)]
        if config_values:
            cmd += ["--config", *config_values]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        log = copy.parent / f"{copy.name}.log"
        log.write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(f"snakemake failed ({proc.returncode}) in {copy}; see {log}")
        return hash_outputs(copy, sources, patterns), wall


def sweep_configfile(workdir: Path, shared: Path, revisions: int) -> Path:
    """The sweep's configuration (:mod:`verbeval.bench.sweep`), its checkpoints built once under
    ``workdir/sweep-models``; its results and raw data go to relative folders (``results-sweep``,
    ``data/raw-sweep``), so below each run's copy."""
    from verbeval.bench.sweep import build_checkpoints, sweep_config, write_sweep_config

    checkpoints = build_checkpoints(shared / "tokenizers" / "gpt2", (workdir / "sweep-models").resolve(), revisions)
    cfg = sweep_config(checkpoints, Path("."))
    cfg["results_dir"], cfg["raw_dir"] = "results-sweep", "data/raw-sweep"
    return write_sweep_config((workdir / "sweep.yaml").resolve(), cfg)


def compare_trees(
    old: Path,
    new: Path,
    configs: Sequence[str],
    workdir: Path,
    *,
    cores: int = 2,
    config_values: Sequence[str] = (),
    shared: Path = Path("../shared"),
    sweep_revisions: int = 32,
    patterns: Sequence[str] = (),
) -> list[Comparison]:
    """Every configuration run with each tree and compared (module docstring); wall times printed."""
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for config in configs:
        path = str(sweep_configfile(workdir, shared, sweep_revisions)) if config == "sweep" else config
        slug = config.replace("/", "_").lstrip("._")
        hashes = {}
        try:
            for label, tree in (("old", old), ("new", new)):
                hashes[label], wall = run_one(
                    tree,
                    path,
                    workdir / label / slug,
                    cores=cores,
                    config_values=config_values,
                    shared=shared,
                    patterns=patterns,
                )
                print(f"{config}: {label} ({tree}) {wall:.1f} s, {len(hashes[label])} files", flush=True)
            rows.append(compare(config, hashes["old"], hashes["new"]))
        except (RuntimeError, subprocess.CalledProcessError) as e:
            rows.append(Comparison(config, error=str(e).splitlines()[0]))
    return rows
