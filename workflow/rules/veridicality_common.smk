# Shared set-up of the veridicality rules (veridicality.smk): models, paths and the output list.
from verbeval.models import model_name as _vmodel_name
from verbeval.veridicality import PSEUDO_MODEL

VER = config["veridicality"]
VRES = f"{RES}/veridicality"
VMODELS = {(m if m == PSEUDO_MODEL else _vmodel_name(m)): m for m in VER["models"]}
if VER["source"] not in MANIFEST:
    raise WorkflowError(f"{config['manifest']}: no source named {VER['source']!r} (veridicality.source)")
if config["data_mirror"] and not mirror_location(MANIFEST[VER["source"]], config["data_mirror"]).exists():
    raise WorkflowError(f"data_mirror {config['data_mirror']}: missing "
                        f"{mirror_location(MANIFEST[VER['source']], config['data_mirror'])}")


def veridicality_outputs():
    return [f"{VRES}/{m}/{f}" for m in VMODELS
            for f in ["predictions.parquet", "signatures.csv", "signatures.md", "signatures.tex",
                      *[f"scatter.{ext}" for ext in VER["formats"]]]]
