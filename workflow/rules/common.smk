# Shared set-up: config validation (schema in the package), manifest, groups, models, paths.
import json
import os
import re
import shlex
import sys
from pathlib import Path

from verbeval.core.config import (check_model_paths, checkpoint_models, config_layers, config_origin, model_entries,
                             normalise_model_path, pip_models, select_models, tiny_model_specs,
                             validate_config)
from verbeval.core.errors import VerbevalError
from verbeval.core.fetch import load_manifest, local_filename, mirror_location
from verbeval.core.models import is_local, model_fingerprint
from verbeval.agreement.shardstore import MANIFEST_NAME, incomplete_store
from verbeval.agreement.templates import custom_groups, load_groups


class ConfigError(WorkflowError):
    """A setup error found before any job runs. Snakemake prints its message alone: it is about the
    user's config files (named in the message), not about a line of this file, so no traceback."""

    @property
    def __traceback__(self):
        return None

    @__traceback__.setter
    def __traceback__(self, tb):
        pass


def _config_layers():
    """The user's configuration sources in merge order: the Snakefile's configfile, every
    --configfile, then --config pairs (to name the one that set a bad key)."""
    cli = [str(f) for f in workflow.config_settings.configfiles]
    cli_abs = {str(Path(f).absolute()) for f in cli}
    base = [str(f) for f in workflow.configfiles if str(Path(f).absolute()) not in cli_abs]
    return config_layers(base + cli, dict(workflow.config_settings.config))


CONFIG_LAYERS = _config_layers()


def config_error(keypath, reason):
    """ConfigError '<file that set keypath>: <reason>'."""
    return ConfigError(f"{config_origin(keypath, CONFIG_LAYERS)}: {reason}")


try:
    validate_config(config, layers=CONFIG_LAYERS)
    MANIFEST = load_manifest(config["manifest"])
    ALL_GROUPS = load_groups(config["agreement"]["groups_file"])
    # a local model path that is missing, or a folder without config.json (models, veridicality, simverb)
    check_model_paths(config, layers=CONFIG_LAYERS)
except VerbevalError as exc:
    raise ConfigError(str(exc)) from None

# SLURM (profiles/slurm): the account placeholder must be replaced; a dry run warns, a run stops
# before anything is submitted (onstart below)
SLURM_ACCOUNT_PLACEHOLDER = "CHANGE-ME"


def slurm_account_placeholder():
    """Why the default slurm_account (profile default-resources or --default-resources) is still
    the placeholder, else None."""
    dr = workflow.resource_settings.default_resources
    for arg in getattr(dr, "args", None) or []:
        key, _, value = str(arg).partition("=")
        if key.strip() == "slurm_account" and value.strip().strip("'\"") == SLURM_ACCOUNT_PLACEHOLDER:
            return (f"slurm_account is still {SLURM_ACCOUNT_PLACEHOLDER!r} (default-resources of the SLURM profile, "
                    "profiles/slurm/config.yaml): set it to your SLURM account (see `sacctmgr show assoc user=$USER`)")
    return None


if workflow.is_main_process and slurm_account_placeholder():
    print(f"WARNING: {slurm_account_placeholder()}; a run (not a dry run) stops before submitting any job",
          file=sys.stderr)


onstart:
    _executor = getattr(workflow.executor_plugin, "name", "")
    if _executor == "slurm" and slurm_account_placeholder():
        raise ConfigError(f"{slurm_account_placeholder()}; nothing was submitted")


AGR = config["agreement"]
RAW = config["raw_dir"]
RES = config["results_dir"]
OUT = f"{RES}/agreement"
LOGS = f"{RES}/logs"
MODELS = {m["name"]: m for m in model_entries(config)}
TINY = tiny_model_specs(config)  # models the workflow builds itself (tiny_models.smk)
PIP_MODELS = pip_models(config)  # models assembled from pip packages (pip_models.smk), by folder
# the revisions of models with `revisions:` (each also a model of MODELS), for the checkpoint figure
CHECKPOINTS = checkpoint_models(list(MODELS.values()))
# the models of Table 2 and metrics.json (agreement.table_models; validated above)
TABLE_MODELS = select_models(list(MODELS), AGR["table_models"])
GROUPS = [g for g in ALL_GROUPS if AGR["groups"] is None or g["id"] in AGR["groups"]]
if AGR["groups"] is not None:
    _unknown = sorted(set(AGR["groups"]) - {g["id"] for g in ALL_GROUPS})
    if _unknown:
        raise config_error(["agreement", "groups"], f"agreement.groups: unknown group(s) {_unknown}")
try:
    CUSTOM_GROUPS = custom_groups(AGR["custom_groups"], ALL_GROUPS)
except VerbevalError as exc:
    raise config_error(["agreement", "custom_groups"], str(exc)) from None
_custom_missing = [str(g.path) for g in CUSTOM_GROUPS if not g.path.is_file()]
if _custom_missing:
    raise config_error(["agreement", "custom_groups"], f"agreement.custom_groups: file(s) not found: "
                                                        f"{', '.join(_custom_missing)}")
# the paper's groups (GROUPS, from manifest sources), then the user's own (CUSTOM_GROUPS, local files)
GROUP_IDS = [g["id"] for g in GROUPS] + [g.id for g in CUSTOM_GROUPS]
# the run's groups as a groups file (written by the templates rule): what the tables and figures show
RUN_GROUPS_FILE = f"{OUT}/groups.yaml"
SOURCES = list(dict.fromkeys([s for g in GROUPS for s in g["sources"]] + AGR["verb_lists"]))
for _src in SOURCES:
    if _src not in MANIFEST:
        raise ConfigError(f"{config['manifest']}: no source named {_src!r}")
# fail before any job starts: a mirror without a needed file
if config["data_mirror"]:
    _missing = [str(mirror_location(MANIFEST[s], config["data_mirror"])) for s in SOURCES
                if not mirror_location(MANIFEST[s], config["data_mirror"]).exists()]
    if _missing:
        raise config_error(["data_mirror"], f"data_mirror {config['data_mirror']}: missing {len(_missing)} file(s), "
                                            f"e.g. {_missing[0]}")


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    group="|".join(GROUP_IDS),


def raw_path(name):
    """Where the fetched copy of manifest source `name` lives."""
    return f"{RAW}/{name}/{local_filename(MANIFEST[name])}"


def custom_group_options(groups):
    """`verbeval templates` options of the custom groups (agreement.custom_groups)."""
    opts = []
    for g in groups:
        opts.append(f"--custom-group={g.id}={g.path}")
        if g.name != g.id:
            opts.append(f"--custom-name={g.id}={g.name}")
        if g.sha256:
            opts.append(f"--custom-sha256={g.id}={g.sha256}")
        opts.append(f"--custom-format={g.id}={g.format}")
    return " ".join(shlex.quote(o) for o in opts)


def shard_manifest(root):
    """The manifest of a model's shard store under ``root`` (the output of its inference job); the
    shards beside it are not job outputs, so a failed job's clean-up never deletes finished ones."""
    return f"{root}/{{model}}/shards/{MANIFEST_NAME}"


def mark_incomplete_stores(root):
    """A store whose manifest lists a shard that is gone (or changed size) is out of date: its
    manifest is removed so that the model's inference job runs again. That job keeps every intact
    shard (its journal still lists them) and computes only the missing ones."""
    for name in MODELS:
        manifest = shard_manifest(root).format(model=name)
        why = incomplete_store(manifest)
        if why:
            print(f"{manifest}: {why}; removed the manifest: the inference job of {name} will run again "
                  "and recompute what is missing", file=sys.stderr)
            os.remove(manifest)


mark_incomplete_stores(OUT)


def revision_option(wc):
    """``--revision`` and ``--gguf-file`` of a model (those it has)."""
    m = MODELS[wc.model]
    opts = (["--revision", m["revision"]] if m["revision"] else []) + (["--gguf-file", m["gguf_file"]]
                                                                       if m["gguf_file"] else [])
    return shlex.join(opts)


def device_map_option(wc):
    """``--device-map`` of a model split across devices (config ``device_map``), else nothing."""
    dm = MODELS[wc.model]["device_map"]
    if dm is None:
        return ""
    return f"--device-map {shlex.quote(dm if isinstance(dm, str) else json.dumps(dm))}"


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
    built = TINY.get(normalise_model_path(m["id"]))
    if built is not None:  # built by the workflow (tiny_model, deterministic), so its recipe, not its files
        return f"tiny_model {json.dumps(built, sort_keys=True)}"
    if m["pip"] is not None:  # assembled by rule pip_model and checked against this sha256
        return f"gguf-sha256:{m['pip']['sha256']}"
    if m["name"] not in _FINGERPRINTS:
        _FINGERPRINTS[m["name"]] = model_fingerprint(m["id"], m["revision"], m["gguf_file"])
    return _FINGERPRINTS[m["name"]]


def model_dir_input(model_id):
    """A local model directory is an input (a DVC dependency too; the output of rule tiny_model for a
    model the workflow builds); a hub model is not."""
    path = normalise_model_path(model_id)
    return [path] if is_local(model_id) or path in TINY or path in PIP_MODELS else []


def local_model_input(wc):
    return model_dir_input(MODELS[wc.model]["id"])


def cutoffs(key):
    return ",".join(f"{p:g}" for p in AGR[key])


def agreement_outputs():
    return [
        f"{OUT}/table2.csv",
        f"{OUT}/table2.md",
        f"{OUT}/table2.tex",
        f"{OUT}/table2.html",
        f"{OUT}/summary_all.csv",
        f"{OUT}/metrics.json",
    ] + expand(f"{OUT}/{{model}}/lemmas.parquet", model=MODELS) + expand(
        shard_manifest(OUT), model=MODELS
    ) + expand(
        # every per-group output is a target: one deleted alone is regenerated
        f"{OUT}/{{model}}/{{group}}/{{name}}", model=MODELS, group=GROUP_IDS,
        name=["scores.parquet", "tse.parquet", "summary.csv"]
    )
