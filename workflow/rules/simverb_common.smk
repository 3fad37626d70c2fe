# Shared set-up of the SimVerb-3500 rules (simverb.smk): models, split files, paths and outputs.
import shlex

from verbeval.core.models import model_name as _svmodel_name
from verbeval.simverb.similarity import score_bins

SV = config["simverb"]
SVRES = f"{RES}/simverb"
if SV["source"] not in MANIFEST:
    raise config_error(["simverb", "source"], f"simverb.source: {config['manifest']} has no source named {SV['source']!r}")
if config["data_mirror"] and mirror_missing([SV["source"]]):
    raise config_error(["data_mirror"], f"data_mirror {config['data_mirror']}: missing "
                                        f"{mirror_location(MANIFEST[SV['source']], config['data_mirror'])}")


def _split_available(source):
    """An official split file is used when the manifest lists it and, with a mirror, the mirror has it."""
    if source not in MANIFEST:
        return False
    return not config["data_mirror"] or mirror_location(MANIFEST[source], config["data_mirror"]).exists()


try:
    score_bins(SV["bins"])
except VerbevalError as exc:
    raise config_error(["simverb", "bins"], f"simverb.bins: {exc}") from None
SV_SPLITS = {name: src for name, src in sorted(SV["split_sources"].items()) if _split_available(src)}
# an id listed in simverb.models is joined with the agreement model of that id: when several share it
# (the revisions of a swept hub model), the first one without a revision, else the first one
_AGR_BY_ID = {}
for _m in MODELS.values():
    if _m["id"] not in _AGR_BY_ID or (_AGR_BY_ID[_m["id"]]["revision"] and not _m["revision"]):
        _AGR_BY_ID[_m["id"]] = _m
# name -> {id, revision, join}: a model that is also an agreement model keeps its name and is joined
SVMODELS = {}
_SV_SOURCES = ([(_id, _AGR_BY_ID.get(_id)) for _id in SV["models"]] if SV["models"] is not None
               else [(m["id"], m) for m in MODELS.values()])  # null: every agreement model, each revision too
for _id, _m in _SV_SOURCES:
    _name = _m["name"] if _m else _svmodel_name(_id)
    if _name in SVMODELS:
        raise config_error(["simverb", "models"], f"simverb.models: two models named {_name!r}")
    SVMODELS[_name] = {"id": _id, "revision": _m["revision"] if _m else None,
                       "gguf_file": _m["gguf_file"] if _m else None, "join": bool(_m) and SV["agreement_join"],
                       # an agreement model's random_init applies here too; else the folder's marker
                       "random_init": _m["random_init"] if _m else None}


def simverb_random_init(wildcards):
    """``--random-init`` of simverb-score: the agreement model's random_init, else auto."""
    declared = SVMODELS[wildcards.svmodel]["random_init"]
    return "auto" if declared is None else str(declared).lower()


def simverb_random_models(wildcards):
    """The model's name when it is randomly initialised (for the report captions), else ''."""
    m = SVMODELS[wildcards.svmodel]
    return wildcards.svmodel if random_init(m["id"], m["random_init"]) else ""


# SimVerb models scored in their agreement model's own job (models.smk): same id and revision, float32
# weights as simverb-score loads; the others keep their own SimVerb job
SV_IN_INFER = [n for n, m in SVMODELS.items() if n in MODELS and MODELS[n]["id"] == m["id"]
               and MODELS[n]["revision"] == m["revision"] and MODELS[n]["dtype"] == "float32"]
SV_ALONE = [n for n in SVMODELS if n not in SV_IN_INFER]


def simverb_split_args(wildcards, input):
    """--split NAME=PATH options of `verbeval simverb-score`."""
    return " ".join(f"--split {shlex.quote(name + '=' + path)}" for name, path in zip(SV_SPLITS, input.splits))


def simverb_model_args(wildcards):
    m = SVMODELS[wildcards.svmodel]
    args = ["--model", m["id"]] + (["--revision", m["revision"]] if m["revision"] else [])
    args += ["--gguf-file", m["gguf_file"]] if m["gguf_file"] else []
    for frame in SV["frames"]:
        args += ["--frame", frame]
    return " ".join(shlex.quote(a) for a in args)


def simverb_local_model(wildcards):
    return model_dir_input(SVMODELS[wildcards.svmodel]["id"])


def simverb_outputs():
    out = []
    for name, m in SVMODELS.items():
        out += [f"{SVRES}/{name}/{f}" for f in ("similarities.parquet", "verbs.csv", "table.csv", "table.md",
                                                 "table.tex", "simverb_layers.csv", "metrics.json")]
        out += [f"{SVRES}/{name}/{stem}.{ext}" for stem in ("layers", "scatter") for ext in SV["formats"]]
        if m["join"]:
            out += [f"{SVRES}/{name}/agreement_join.csv", f"{SVRES}/{name}/agreement_join_summary.csv"]
    return out
