# Phase 1: fetch every manifest source (or copy it from the offline mirror), checking its sha256.


rule fetch:
    output:
        f"{RAW}/{{name}}/{{filename}}",
    params:
        manifest=config["manifest"],
        mirror=f"--mirror {config['data_mirror']}" if config["data_mirror"] else "",
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/fetch/{{name}}/{{filename}}.log",
    wildcard_constraints:
        name="|".join(MANIFEST),
    shell:
        "verbeval fetch --manifest {params.manifest} --name {wildcards.name} --out {output} {params.mirror} 2> {log}"
