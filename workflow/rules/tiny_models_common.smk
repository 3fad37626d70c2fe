# Shared set-up of the tiny_model rule (tiny_models.smk), its inputs and tokenizer option.


def tiny_model_inputs(wc):
    spec = TINY[wc.tiny]
    if spec["tokenizer"] != "words":
        return [spec["tokenizer"]] if is_local(spec["tokenizer"]) else []
    # the word-level tokenizer's vocabulary: every word of the workflow's own data
    return [f"{OUT}/lexicon.parquet", f"{OUT}/templates.parquet",
            raw_path(config["simverb"]["source"]), raw_path(config["veridicality"]["source"])]


def tiny_model_source(wc, input):
    spec = TINY[wc.tiny]
    if spec["tokenizer"] == "words":
        return shlex.join(["--word-corpus", *input])
    return shlex.join(["--tokenizer", spec["tokenizer"]])
