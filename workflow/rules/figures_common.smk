# Shared set-up of the figure rules (figures.smk): paths, the Table 3 groups, output lists and
# the helpers that build the rules' outputs and options.
import shlex

from verbeval.agreement.diagnostics import table3_groups

FIGS = f"{OUT}/figures"
FIGCFG = AGR["figures"]
T3_GROUPS = table3_groups(GROUP_IDS, FIGCFG["contexts"], FIGCFG["context_groups"])
_t3_unknown = [g for g in T3_GROUPS if g not in GROUP_IDS]
if _t3_unknown:
    raise config_error(["agreement", "figures", "contexts"],
                       f"agreement.figures.contexts: group(s) {_t3_unknown} are not run (groups: {GROUP_IDS})")


def figure_images(stem, subcategory):
    """The image files of figure `stem`; the first format is registered in the report."""
    first, *rest = [f"{FIGS}/{stem}.{ext}" for ext in FIGCFG["formats"]]
    shown = report(first, caption=f"../report/{stem}.rst", category="Agreement", subcategory=subcategory)
    return [shown, *rest]


def figure_outputs():
    stems = ["fig1_top_p", "fig2_bottom_p", "fig3_prob_counted", "fig4_invalid", "lemma_accuracy", "model_comparison"]
    return (
        [f"{FIGS}/{s}.{ext}" for s in stems for ext in ["csv", *FIGCFG["formats"]]]
        + [f"{FIGS}/{s}.{ext}" for s in ("table3_topk", "worst_lemmas") for ext in ("csv", "md", "html")]
        + [f"{FIGS}/lemma_metrics.json"]
        + expand(f"{OUT}/{{model}}/lemma_stats.csv", model=MODELS)
        + ([f"{FIGS}/checkpoints.{ext}" for ext in ["csv", *FIGCFG["formats"]]] if CHECKPOINT_FIGURE else [])
    )


# the checkpoint figure: drawn when some model has `revisions:` (and agreement.figures.checkpoints.enabled)
CHECKPOINT_FIGURE = bool(CHECKPOINTS) and FIGCFG["checkpoints"]["enabled"]


def checkpoint_args(wildcards):
    """--checkpoint SWEEP MODEL STEP options of `verbeval plot-checkpoints`, and --log-x."""
    args = []
    for m in CHECKPOINTS:
        args += ["--checkpoint", m["checkpoint_of"], m["name"], str(m["step"])]
    if FIGCFG["checkpoints"]["log_x"]:
        args.append("--log-x")
    return " ".join(shlex.quote(a) for a in args)


def table3_args(wildcards, input):
    """--model/--revision/--gguf-file/--lemmas/--shards/--context options of `verbeval topk-table`."""
    args = []
    for name, m in MODELS.items():
        args += ["--model", f"{name}={m['id']}", "--lemmas", f"{name}={OUT}/{name}/lemmas.parquet"]
        if m["revision"]:
            args += ["--revision", f"{name}={m['revision']}"]
        if m["gguf_file"]:
            args += ["--gguf-file", f"{name}={m['gguf_file']}"]
    args.append("--shards")
    args += [f"{name}={shard_manifest(OUT).format(model=name)}" for name in MODELS]
    for c in FIGCFG["contexts"] or []:
        args += ["--context", c["group"], c["left"], "*" if c["right"] is None else c["right"]]
    return " ".join(shlex.quote(a) for a in args)


CUTOFF_FIGURE_PARAMS = dict(
    models=",".join(MODELS),
    top=cutoffs("top_cutoffs"),
    bottom=cutoffs("bottom_cutoffs"),
    confidence=AGR["bootstrap"]["confidence"],
    min_contexts=FIGCFG["min_contexts"],
    low_n=FIGCFG["low_n"],
)

