# Phase 1: fetch every manifest source (or copy it from the offline mirror), checking its sha256.
# Every path in a shell command is quoted ({output:q}, shlex.quote), so results_dir may contain spaces.
#
# A verified raw copy is never lost (docs/data.md, "Fetched files are kept"):
# - the output is update()-flagged: Snakemake neither deletes it before the job runs nor after the
#   job fails (it restores it), and `verbeval fetch` keeps a copy that already verifies and replaces
#   a file only by an atomic rename, so a run from another clone reading it never finds it missing;
# - a copy that matches no checksum of its manifest entry (edited by hand, or pinned by an older
#   manifest) forces its fetch job (common.smk), which moves it aside (renamed, never deleted);
# - where the bytes come from (data_mirror, VERBEVAL_DATA_MIRROR) and the manifest's path are
#   Untracked params: switching them reruns nothing. The source's accepted checksums are a param: a
#   changed entry fetches again.


rule fetch:
    output:
        update(RULE.fetch.output),
    params:
        **RULE.fetch.params,
    conda:
        "../../envs/verbeval.yaml"
    log:
        RULE.fetch.log,
    wildcard_constraints:
        **RULE.fetch.constraints,
    shell:
        "verbeval fetch --manifest {params.manifest:q} --name {wildcards.name} --out {output:q} {params.mirror} "
        "2> {log:q}"
