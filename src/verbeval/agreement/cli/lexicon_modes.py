"""The lexicon modes (single_token, all, common): ``lexicon-forms`` to ``lexicon-modes-table``."""

from __future__ import annotations

import argparse
import logging

from verbeval.agreement.cli.common import expand_shards, run_groups
from verbeval.agreement.cli.inference import model_options, model_run, store_options, store_run
from verbeval.agreement.runs import FormsRun, infer_forms
from verbeval.agreement.steps import FORMS_BATCH_SIZE, LEXICON_COMMON, LEXICON_FORMS, LEXICON_MODES, LEXICON_MODES_TABLE
from verbeval.core.cliutil import Add, check_outputs, model_source_options, split_pair
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.steps import MODEL_NAME, MODEL_PREPEND_BOS, Input, Option, add_options

log = logging.getLogger("verbeval")


def cmd_lexicon_forms(a: argparse.Namespace) -> None:
    check_outputs(a.out)
    import pandas as pd

    from verbeval.agreement.lexicon_modes.modes import form_table
    from verbeval.core.fasttok import load_text_tokenizer
    from verbeval.core.io import write_parquet

    tok = load_text_tokenizer(ModelSource.from_options(a))  # tokenizers alone where safe: no torch import
    forms = form_table(pd.read_parquet(a.lexicon), pd.read_parquet(a.templates), tok)
    write_parquet(forms, a.out)
    lex = forms[forms["in_lexicon"]]
    log.info(
        "%s: %d lexicon lemmas (%d single-token, %d scorable) + %d template-only verb pairs -> %s",
        a.model,
        len(lex),
        int(lex["single_token"].sum()),
        int(lex["scorable"].sum()),
        len(forms) - len(lex),
        a.out,
    )


def register_lexicon_forms(add: Add) -> None:
    s = add(
        "lexicon-forms",
        cmd_lexicon_forms,
        "token ids of every lexicon and template verb form of a model, with its single-token flag",
        "Only the tokenizer is loaded. Run by the rule lexicon_forms (with agreement.multitoken.enabled).",
    )
    model_source_options(s, "(only the tokenizer is loaded)")
    LEXICON_FORMS.add_options(s)


def cmd_lexicon_common(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.lexicon_modes.modes import common_pairs
    from verbeval.core.io import write_parquet

    tables = [pd.read_parquet(path) for _, path in (split_pair(x, "--forms", "PATH") for x in a.forms)]
    common = common_pairs(tables)
    write_parquet(common, a.out)
    log.info(
        "common: %d lexicon lemmas single-token in all %d models -> %s",
        int(common["in_lexicon"].sum()),
        len(tables),
        a.out,
    )


def register_lexicon_common(add: Add) -> None:
    s = add(
        "lexicon-common",
        cmd_lexicon_common,
        "verb pairs single-token in every model (the `common` lexicon mode)",
        "Run by the rule lexicon_common (with agreement.multitoken.enabled).",
    )
    LEXICON_COMMON.add_options(s)


def cmd_infer_forms(a: argparse.Namespace) -> None:
    infer_forms(model_run(a, batch_size=False), store_run(FormsRun, a, a.forms, batch_size=a.batch_size))


def register_infer_forms(add: Add) -> None:
    s = add(
        "infer-forms",
        cmd_infer_forms,
        "log P(form | context) of every verb form of any length: every group and chunk of one model, "
        "shards and their manifest (model loaded once; a killed run resumes)",
        "Chain rule for causal LMs, PLL-word-l2r for masked LMs (docs/metrics.md). The workflow runs the same "
        "branch in rule infer's job (verbeval run-model, with agreement.multitoken.enabled).",
    )
    model_options(s)
    add_options(
        s,
        FORMS_BATCH_SIZE.with_option("--batch-size"),
        MODEL_PREPEND_BOS,
        Input("--templates", "templates.parquet (verbeval templates)"),
        Input("--forms", "the model's forms.parquet (verbeval lexicon-forms)"),
    )
    store_options(s)


def cmd_lexicon_modes(a: argparse.Namespace) -> None:
    import numpy as np
    import pandas as pd

    from verbeval.agreement.lexicon_modes.form_shards import form_shards_by_group, read_form_shards
    from verbeval.agreement.lexicon_modes.modes import (
        consistency,
        group_summary,
        lemma_differences,
        lemma_scores,
        mode_masks,
    )
    from verbeval.core.io import write_csv
    from verbeval.core.provenance import random_flags, with_random_init

    forms = pd.read_parquet(a.forms)
    masks = mode_masks(forms, pd.read_parquet(a.common))
    n_lex = int(forms["in_lexicon"].sum())
    by_group = form_shards_by_group(expand_shards(a.shards))
    summaries, logps, plurals = [], [], []
    for group in sorted(by_group):
        sh = read_form_shards(by_group[group])
        summaries.append(
            group_summary(
                sh,
                masks,
                n_lex,
                model=a.model_name,
                group=group,
                resamples=a.resamples,
                seed=a.seed,
                confidence=a.confidence,
            )
        )
        logps.append(sh["logp"][:, :n_lex])
        plurals.append(sh["plural"])
    summary = pd.concat(summaries, ignore_index=True)
    lemmas = lemma_scores(np.concatenate(logps), np.concatenate(plurals), forms, masks, a.model_name)
    diff = lemma_differences(lemmas, resamples=a.resamples, seed=a.seed, confidence=a.confidence)
    ref = (
        pd.concat([pd.read_csv(p) for p in a.table2_summaries], ignore_index=True)
        if a.table2_summaries
        else pd.DataFrame(columns=["model", "group", "metric", "side", "cutoff", "value", "n"])
    )
    random = random_flags(ref).get(a.model_name, False)  # the model's Table 2 summaries say whether it is random
    write_csv(with_random_init(summary, random), a.summary_out, float_format="%.10g")
    write_csv(with_random_init(lemmas, random), a.lemmas_out, float_format="%.10g")
    write_csv(with_random_init(diff, random), a.diff_out, float_format="%.10g")
    if a.consistency_out:
        cons = consistency(summary, ref)
        write_csv(with_random_init(cons, random), a.consistency_out, float_format="%.10g")
        log.info("single_token mode vs Table 2: max |diff| %.3g", cons["abs_diff"].max())
    log.info("%s: %d groups x 3 modes, %d lemmas -> %s", a.model_name, len(by_group), len(lemmas), a.summary_out)


def register_lexicon_modes(add: Add) -> None:
    s = add(
        "lexicon-modes",
        cmd_lexicon_modes,
        "TSE, EW and MW (p = 1) of one model in the single_token, all and common lexicon modes",
        "Also per-lemma scores and the single- vs multi-token lemma comparison. Run by the rule lexicon_modes, "
        "one job per model (with agreement.multitoken.enabled).",
    )
    add_options(
        s,
        LEXICON_MODES.file("--forms"),
        LEXICON_MODES.file("--common"),
        MODEL_NAME,
        LEXICON_MODES.file("--shards"),
        LEXICON_MODES.file("--table2-summaries"),
        *LEXICON_MODES.settings,
        *LEXICON_MODES.outputs,
    )


def cmd_lexicon_modes_table(a: argparse.Namespace) -> None:
    import pandas as pd

    from verbeval.agreement.lexicon_modes.table import coverage_table, modes_table, to_latex, to_markdown, to_metrics
    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.core.provenance import random_flags, with_random_field, with_random_init
    from verbeval.core.tables import md_escaped_frame

    models = a.models.split(",")
    summary = pd.concat([pd.read_csv(p) for p in a.summaries], ignore_index=True)
    random = random_flags(summary)  # the lexicon-modes summaries' random_init column
    groups = run_groups(a.groups_file, summary["group"].unique())
    forms = {name: pd.read_parquet(path) for name, path in (split_pair(x, "--forms", "PATH") for x in a.forms)}
    coverage = coverage_table({m: forms[m] for m in models}, pd.read_parquet(a.common))
    t = modes_table(summary, groups, models)
    diffs = pd.concat([pd.read_csv(p) for p in a.diffs], ignore_index=True)
    diffs = diffs.drop(columns="random_init", errors="ignore")  # set again from `random` below, not in --md
    write_csv(with_random_init(t, random), a.csv, float_format="%.6f")
    write_csv(with_random_init(coverage, random), a.coverage, float_format="%.6f")
    write_csv(with_random_init(diffs, random), a.diff_csv, float_format="%.6g")
    md = [
        to_markdown(t, models, a.lexicon_mode),
        "",
        "Lemma coverage per mode:",
        "",
        md_escaped_frame(coverage).to_markdown(index=False),
        "",
        "Single-token vs multi-token lemmas (mode all):",
        "",
        md_escaped_frame(diffs).to_markdown(index=False, floatfmt=".4g"),
    ]
    if a.consistency:
        cons = pd.concat([pd.read_csv(p) for p in a.consistency], ignore_index=True)
        md += ["", f"single_token mode vs Table 2 (p = 1): max |difference| = {cons['abs_diff'].max():.3g}"]
    write_text(a.md, "\n".join(md) + "\n")
    write_text(a.tex, to_latex(t, models, a.lexicon_mode))
    write_json(a.metrics, with_random_field(to_metrics(t, models, a.lexicon_mode, coverage), random))
    log.info(
        "lexicon modes (%d groups x %d models x 3 modes) -> %s, %s, %s", len(groups), len(models), a.csv, a.md, a.tex
    )


def register_lexicon_modes_table(add: Add) -> None:
    s = add(
        "lexicon-modes-table",
        cmd_lexicon_modes_table,
        "groups x models x lexicon modes table (CSV, Markdown, LaTeX), coverage and metrics JSON",
        "Run by the rule lexicon_modes_table (with agreement.multitoken.enabled).",
    )
    add_options(
        s,
        LEXICON_MODES_TABLE.file("--groups-file"),
        Option("--models", "comma-separated model names, in column order", required=True),
        *LEXICON_MODES_TABLE.settings,
        LEXICON_MODES_TABLE.file("--summaries"),
        LEXICON_MODES_TABLE.file("--diffs"),
        LEXICON_MODES_TABLE.file("--forms"),
        LEXICON_MODES_TABLE.file("--common"),
        LEXICON_MODES_TABLE.file("--consistency"),
        *LEXICON_MODES_TABLE.outputs,
    )
