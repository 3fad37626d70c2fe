# Shared set-up of the model job (models.smk): its optional branches' inputs, outputs and options.

MT_ON = bool(MT["enabled"] and MT_GROUPS)
_INFER_INPUT = {
    "templates": f"{OUT}/templates.parquet",
    "lemmas": f"{OUT}/{{model}}/lemmas.parquet",
    "model": local_model_input,
    **({"forms": f"{LMOUT}/{{model}}/forms.parquet"} if MT_ON else {}),
}
_INFER_OUTPUT = {
    "manifest": shard_manifest(OUT),
    **({"forms_manifest": shard_manifest(LMOUT)} if MT_ON else {}),
}


def run_model_branches(wildcards, input, output):
    """`verbeval run-model` options of the optional branches this job writes (forms, SimVerb)."""
    opts = []
    if MT_ON:
        opts += [f"--forms={input.forms}", f"--forms-groups={','.join(MT_GROUPS)}",
                 f"--forms-batch-size={MT['batch_size']}", f"--forms-manifest={output.forms_manifest}"]
    if "sims" in output.keys():
        opts += ["--simverb-data", input.simverb_data]
        for name, path in zip(SV_SPLITS, input.simverb_splits):
            opts.append(f"--simverb-split={name}={path}")
        for frame in SV["frames"]:
            opts.append(f"--simverb-frame={frame}")
        opts += [f"--simverb-multi-token={SV['multi_token']}", f"--simverb-batch-size={SV['batch_size']}",
                 "--simverb-out", output.sims, "--simverb-verbs", output.verbs]
    return " ".join(shlex.quote(o) for o in opts)
