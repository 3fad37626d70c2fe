# Shared set-up of the multi-token / lexicon-mode rules (lexicon_modes.smk): groups, paths, outputs.

MT = AGR["multitoken"]
LMOUT = f"{OUT}/lexicon_modes"
MT_GROUPS = GROUP_IDS if MT["groups"] is None else [g for g in GROUP_IDS if g in MT["groups"]]
if MT["groups"] is not None:
    _mt_unknown = sorted(set(MT["groups"]) - set(GROUP_IDS))
    if _mt_unknown:
        raise config_error(["agreement", "multitoken", "groups"], f"agreement.multitoken.groups: {_mt_unknown} are not among the run's groups")
if AGR["lexicon_mode"] != "single_token" and not MT["enabled"]:
    raise config_error(["agreement", "lexicon_mode"], f"agreement.lexicon_mode {AGR['lexicon_mode']!r} needs agreement.multitoken.enabled: true")


if MT["enabled"] and MT_GROUPS:
    mark_incomplete_stores(LMOUT)


def lexicon_modes_outputs():
    if not MT["enabled"] or not MT_GROUPS:
        return []
    return [f"{LMOUT}/{f}" for f in ("table.csv", "table.md", "table.tex", "metrics.json", "coverage.csv",
                                     "lemma_differences.csv", "common.parquet")] + [
        f"{LMOUT}/{m}/{f}" for m in MODELS for f in ("summary.csv", "lemmas.csv", "consistency.csv")
    ] + expand(shard_manifest(LMOUT), model=MODELS)
