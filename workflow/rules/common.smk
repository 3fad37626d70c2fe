# Shared set-up: config validation (schema in the package), manifest, groups, models, paths.
import os
import re
import shlex
import sys

from verbeval.config import validate_config, model_entries
from verbeval.errors import VerbevalError
from verbeval.fetch import load_manifest, local_filename, mirror_location
from verbeval.models import is_local, model_fingerprint, written_as_path
from verbeval.shardstore import MANIFEST_NAME, incomplete_store
from verbeval.templates import load_groups

try:
    validate_config(config, "config")
    MANIFEST = load_manifest(config["manifest"])
    ALL_GROUPS = load_groups(config["agreement"]["groups_file"])
except VerbevalError as exc:
    raise WorkflowError(str(exc)) from None

AGR = config["agreement"]
RAW = config["raw_dir"]
RES = config["results_dir"]
OUT = f"{RES}/agreement"
LOGS = f"{RES}/logs"
MODELS = {m["name"]: m for m in model_entries(config)}
GROUPS = [g for g in ALL_GROUPS if AGR["groups"] is None or g["id"] in AGR["groups"]]
if AGR["groups"] is not None:
    _unknown = sorted(set(AGR["groups"]) - {g["id"] for g in ALL_GROUPS})
    if _unknown:
        raise WorkflowError(f"config: agreement.groups: unknown group(s) {_unknown}")
GROUP_IDS = [g["id"] for g in GROUPS]
SOURCES = list(dict.fromkeys([s for g in GROUPS for s in g["sources"]] + AGR["verb_lists"]))
for _src in SOURCES:
    if _src not in MANIFEST:
        raise WorkflowError(f"{config['manifest']}: no source named {_src!r}")
# fail before any job starts: a mirror without a needed file, or a local model path that is missing
if config["data_mirror"]:
    _missing = [str(mirror_location(MANIFEST[s], config["data_mirror"])) for s in SOURCES
                if not mirror_location(MANIFEST[s], config["data_mirror"]).exists()]
    if _missing:
        raise WorkflowError(f"data_mirror {config['data_mirror']}: missing {len(_missing)} file(s), e.g. {_missing[0]}")
for _m in MODELS.values():
    if written_as_path(_m["id"]) and not is_local(_m["id"]):
        raise WorkflowError(f"model {_m['name']}: local path {_m['id']} does not exist")


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    group="|".join(GROUP_IDS),


def raw_path(name):
    """Where the fetched copy of manifest source `name` lives."""
    return f"{RAW}/{name}/{local_filename(MANIFEST[name])}"


def shard_manifest(root):
    """The manifest of a model's shard store under ``root`` (the output of its inference job); the
    shards beside it are not job outputs, so a failed job's clean-up never deletes finished ones."""
    return f"{root}/{{model}}/shards/{MANIFEST_NAME}"


def mark_incomplete_stores(root):
    """A store whose manifest lists a shard that is gone (or changed size) is out of date: its
    manifest is given an old mtime so that the model's inference job runs again. That job keeps
    every intact shard and computes only the missing ones (nothing is deleted here)."""
    for name in MODELS:
        manifest = shard_manifest(root).format(model=name)
        why = incomplete_store(manifest)
        if why:
            print(f"{manifest}: {why}; the inference job of {name} will run again and recompute it", file=sys.stderr)
            os.utime(manifest, (0, 0))


mark_incomplete_stores(OUT)


def revision_option(wc):
    rev = MODELS[wc.model]["revision"]
    return f"--revision {shlex.quote(rev)}" if rev else ""


def bos_option(wc):
    bos = MODELS[wc.model]["prepend_bos"]
    return "auto" if bos is None else str(bos).lower()


def model_param(key):
    return lambda wc: MODELS[wc.model][key]


_FINGERPRINTS = {}


def model_version(wc):
    """Changes when the model's files (local) or resolved commit (hub) change, so that Snakemake's
    params trigger reruns its eligibility and inference jobs."""
    m = MODELS[wc.model]
    if m["name"] not in _FINGERPRINTS:
        _FINGERPRINTS[m["name"]] = model_fingerprint(m["id"], m["revision"])
    return _FINGERPRINTS[m["name"]]


def local_model_input(wc):
    """A local model directory is an input (a DVC dependency too); a hub model is not."""
    m = MODELS[wc.model]
    return [m["id"]] if is_local(m["id"]) else []


def cutoffs(key):
    return ",".join(f"{p:g}" for p in AGR[key])


def agreement_outputs():
    return [
        f"{OUT}/table2.csv",
        f"{OUT}/table2.md",
        f"{OUT}/table2.tex",
        f"{OUT}/summary_all.csv",
        f"{OUT}/metrics.json",
    ] + expand(f"{OUT}/{{model}}/lemmas.parquet", model=MODELS) + expand(
        shard_manifest(OUT), model=MODELS
    ) + expand(
        # every per-group output is a target: one deleted alone is regenerated
        f"{OUT}/{{model}}/{{group}}/{{name}}", model=MODELS, group=GROUP_IDS,
        name=["scores.parquet", "tse.parquet", "summary.csv"]
    )
