# Phase 1: fetch every manifest source (or copy it from the offline mirror), checking its sha256.
# Every path in a shell command is quoted ({output:q}, shlex.quote), so results_dir may contain spaces.
#
# A verified raw copy is never lost (docs/data.md, "Fetched files are kept"):
# - the output is update()-flagged: Snakemake neither deletes it before the job runs nor after the
#   job fails (it restores it), and `verbeval fetch` keeps a copy that already verifies and replaces
#   a file only by an atomic rename, so a run from another clone reading it never finds it missing;
# - where the bytes come from (data_mirror, VERBEVAL_DATA_MIRROR) and the manifest's path are
#   Untracked params: switching them reruns nothing. The source's accepted checksums are a param: a
#   changed entry fetches again.
import shlex

from verbeval.core.fetch import set_aside_unverified

# a raw copy that matches no checksum of its (current) manifest entry, edited by hand or pinned by an
# older manifest, is set aside (renamed, never deleted) before the DAG is built, so that it is fetched again
if workflow.is_main_process:
    for _name in MANIFEST:
        _aside = set_aside_unverified(MANIFEST[_name], raw_path(_name))
        if _aside:
            print(f"{raw_path(_name)}: matches no checksum of source {_name!r} in {config['manifest']}; "
                  f"moved to {_aside.name}; a verified copy will be fetched", file=sys.stderr)


rule fetch:
    output:
        update(f"{RAW}/{{name}}/{{filename}}"),
    params:
        sha256=lambda wc: " ".join(MANIFEST[wc.name].sha256),
        manifest=Untracked(config["manifest"]),
        mirror=Untracked(f"--mirror {shlex.quote(config['data_mirror'])}" if config["data_mirror"] else ""),
    conda:
        "../../envs/verbeval.yaml"
    log:
        f"{LOGS}/fetch/{{name}}/{{filename}}.log",
    wildcard_constraints:
        name="|".join(MANIFEST),
    shell:
        "verbeval fetch --manifest {params.manifest:q} --name {wildcards.name} --out {output:q} {params.mirror} "
        "2> {log:q}"
