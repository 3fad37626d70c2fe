# Shared set-up of the veridicality rules (veridicality.smk): models, paths and the output list.
from verbeval.core.models import model_name as _vmodel_name
from verbeval.veridicality.nli import PSEUDO_MODEL

VER = config["veridicality"]
VCF = VER["counterfactual"]
VRES = f"{RES}/veridicality"
VMODELS = {(m if m == PSEUDO_MODEL else _vmodel_name(m)): m for m in VER["models"]}
# the counterfactual manipulations need a model that scores new sentences: not the pseudo-model
VREAL = {name: m for name, m in VMODELS.items() if m != PSEUDO_MODEL}
if VER["source"] not in MANIFEST:
    raise config_error(["veridicality", "source"],
                       f"veridicality.source: {config['manifest']} has no source named {VER['source']!r}")
if config["data_mirror"] and mirror_missing([VER["source"]]):
    raise config_error(["data_mirror"], f"data_mirror {config['data_mirror']}: missing "
                                        f"{mirror_location(MANIFEST[VER['source']], config['data_mirror'])}")


def veridicality_random_models(wildcards):
    """The model's name when it is randomly initialised (for the report captions), else ''."""
    model = VMODELS[wildcards.vmodel]
    return wildcards.vmodel if model != PSEUDO_MODEL and random_init(model) else ""


def _alternatives(names):
    # a regex matching none of the result directories when `names` is empty
    return "|".join(map(re.escape, names)) or "(?!x)x"


def veridicality_scatter():
    """The scatter images of a model; the first format is registered in the report."""
    first, *rest = [f"{VRES}/{{vmodel}}/scatter.{ext}" for ext in VER["formats"]]
    shown = report(first, caption="../report/veridicality_scatter.rst", category="Veridicality",
                   subcategory="{vmodel}")
    return [shown, *rest]


def veridicality_counterfactuals_on():
    return bool(VCF["enabled"] and VREAL)


def veridicality_outputs():
    out = [f"{VRES}/{m}/{f}" for m in VMODELS
           for f in ["predictions.parquet", "signatures.csv", "signatures.md", "signatures.tex", "veridicality_scatter.csv",
                     *[f"scatter.{ext}" for ext in VER["formats"]]]]
    if veridicality_counterfactuals_on():
        out += [f"{VRES}/counterfactuals/{f}" for f in ("pairs.parquet", "unhandled.csv", "coverage.csv")]
        out += [f"{VRES}/{m}/{f}" for m in VREAL
                for f in ["counterfactual_predictions.parquet",
                          *[f"kl_table{t}.{ext}" for t in (7, 8) for ext in ("csv", "md", "tex")]]]
    return out
