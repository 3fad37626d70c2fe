# Phase 1: fetch every manifest source (or copy it from the offline mirror), checking its sha256.
# Every path in a shell command is quoted ({output:q}, shlex.quote), so results_dir may contain spaces.
import shlex


rule fetch:
    output:
        f"{RAW}/{{name}}/{{filename}}",
    params:
        manifest=config["manifest"],
        mirror=f"--mirror {shlex.quote(config['data_mirror'])}" if config["data_mirror"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/fetch/{{name}}/{{filename}}.log",
    wildcard_constraints:
        name="|".join(MANIFEST),
    shell:
        "verbeval fetch --manifest {params.manifest:q} --name {wildcards.name} --out {output:q} {params.mirror} 2> {log:q}"
