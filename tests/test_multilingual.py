"""The multilingual study: CLAMS pairs given their lexicon cells, one model scored per cell and pooled
per group (checked against a float64 reference computed from the model's own logits), the unpaired
comparisons (against scipy), the plan of its rules, and its commands in process.

The pairs are real CLAMS lines (github.com/aaronmueller/clams at 36b5c9a, file and line noted); the
lexicons are planted, so that each row's cell is known. No test reads ../shared.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import fisher_exact, ttest_ind

from verbeval.multilingual.clams import group_id
from verbeval.multilingual.report import compare_languages, english_against_ml, headline, language_groups, overview
from verbeval.multilingual.templates import CELL_NONE, cell_index, clams_templates, uncovered_pairs

REPO = Path(__file__).resolve().parents[1]

#: (language, construction, True sentence, False sentence): real CLAMS pairs
PAIRS = [
    ("fr", "simple_agrmt", "les auteurs sont jeunes", "les auteurs est jeune"),  # fr simple_agrmt.txt 3-4
    ("fr", "simple_agrmt", "l' auteur est jeune", "l' auteur sont jeunes"),
    ("fr", "simple_agrmt", "les auteurs parlent", "les auteurs parle"),
    ("fr", "simple_agrmt", "l' auteur parle", "l' auteur parlent"),
    ("ru", "simple_agrmt", "авторы говорят", "авторы говорит"),  # ru simple_agrmt.txt 1-2
    ("ru", "simple_agrmt", "авторы ждали", "авторы ждал"),  # ru simple_agrmt.txt 3-4: past tense
    ("ru", "simple_agrmt", "автор ждал", "автор ждали"),
    ("ru", "simple_agrmt", "авторы старые", "авторы старый"),  # an adjective: no verb contrast
    ("ru", "simple_agrmt", "автор говорит", "автор говорят"),
]
LEXICONS = {
    "fr": pd.DataFrame(
        {
            "lemma": ["être", "parler", "rire"],
            "sing": ["est", "parle", "rit"],
            "plur": ["sont", "parlent", "rient"],
            "cell": "pres",
            "source": "planted",
        }  # fmt: skip
    ),
    "ru": pd.DataFrame(
        {
            "lemma": ["говорить", "ждать", "ждать", "читать", "читать"],
            "sing": ["говорит", "ждёт", "ждал", "читает", "читал"],
            "plur": ["говорят", "ждут", "ждали", "читают", "читали"],
            "cell": ["pres", "pres", "past_m", "pres", "past_m"],
            "source": "planted",
        }
    ),
}


def _pairs(lang: str) -> pd.DataFrame:
    rows = []
    for n, (lng, c, good, bad) in enumerate(PAIRS):
        if lng != lang:
            continue
        g, b = good.split(), bad.split()
        k = next(i for i, (x, y) in enumerate(zip(g, b)) if x != y)
        rows.append({"group": group_id(lang, c), "source": f"clams_{lang}_{c}", "line": 2 * n + 1,
                     "left": " ".join(g[:k]), "right": " ".join(g[k + 1:]), "correct": g[k], "incorrect": b[k],
                     "differs_after": g[k + 1:] != b[k + 1:], "false_right": " ".join(b[k + 1:])})  # fmt: skip
    return pd.DataFrame(rows)


def _templates() -> pd.DataFrame:
    return pd.concat([clams_templates(_pairs(lang), LEXICONS[lang], lang) for lang in LEXICONS], ignore_index=True)


# --------------------------------------------------------------------------- cells


def test_each_pair_gets_the_cell_and_number_of_its_two_words() -> None:
    t = _templates().set_index(["language", "correct", "incorrect"])
    expect = {
        ("fr", "sont", "est"): ("pres", "plural", "être", True),
        ("fr", "est", "sont"): ("pres", "singular", "être", True),
        ("fr", "parlent", "parle"): ("pres", "plural", "parler", False),
        ("ru", "говорят", "говорит"): ("pres", "plural", "говорить", False),
        ("ru", "ждали", "ждал"): ("past_m", "plural", "ждать", False),
        ("ru", "ждал", "ждали"): ("past_m", "singular", "ждать", False),
        ("ru", "старые", "старый"): (CELL_NONE, "singular", "", False),
    }
    for key, (cell, label, lemma, after) in expect.items():
        row = t.loc[key]
        assert (row["cell"], row["label"], row["verb_item"], bool(row["differs_after"])) == (cell, label, lemma, after)
        assert bool(row["plural"]) == (label == "plural")
    none = t[t["cell"] == CELL_NONE]
    assert list(none["note"]) == ["no lexicon contrast: TSE only"]
    assert uncovered_pairs(_templates()) == {"ru": [("старые", "старый", 1)]}


def test_a_pair_in_two_cells_takes_the_first_cell() -> None:
    lex = pd.DataFrame({"lemma": ["a", "b"], "sing": ["x", "x"], "plur": ["y", "y"], "cell": ["past_f", "pres"],
                        "source": "planted"})  # fmt: skip
    assert cell_index(lex)[("x", "y")] == ("past_f", "singular", "a")
    assert cell_index(lex, ["pres", "past_f"])[("y", "x")] == ("pres", "plural", "b")


# --------------------------------------------------------------------------- one model, every cell


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A tiny random GPT-2 on a word tokenizer of the pairs, scored on both languages."""
    from verbeval.core.model_runs import ModelRun
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.tiny_models import make_tiny_model
    from verbeval.core.wordtok import save_word_tokenizer
    from verbeval.multilingual.scoring import ClamsScoreRun, score_model

    root = tmp_path_factory.mktemp("multilingual")
    templates = _templates()
    templates.to_parquet(root / "templates.parquet")
    words = [*templates["left"], *templates["correct"], *templates["incorrect"], *templates["right"]]
    words += [w for lex in LEXICONS.values() for w in (*lex["sing"], *lex["plur"])]
    (root / "corpus.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    save_word_tokenizer([root / "corpus.txt"], "causal", root / "tok")
    model = make_tiny_model(root / "tok", "gpt2", root / "model", seed=1)
    lexicons = {}
    for lang, lex in LEXICONS.items():
        lex.to_parquet(root / f"{lang}.parquet")
        lexicons[lang] = str(root / f"{lang}.parquet")
    run = ModelRun(ModelSource(str(model)), kind="causal", prepend_bos=False, random_init=True, threads=1)
    score = ClamsScoreRun(str(root / "templates.parquet"), lexicons, "tiny", str(root / "out"), progress=False,
                          resamples=100)  # fmt: skip
    score_model(run, score)
    return SimpleNamespace(root=root, model=model, templates=templates, out=root / "out")


def _reference(model: Path, templates: pd.DataFrame) -> pd.DataFrame:
    """Per row, in float64 from the model's logits after its prefix: TSE, and EW and MW over the
    row's cell's lemmas (NaN for a row of no cell)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    lm = AutoModelForCausalLM.from_pretrained(str(model)).eval()
    out = []
    for r in templates.itertuples(index=False):
        ids = tok(r.left, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = lm(torch.tensor([ids])).logits[0, -1].double()
        probs = torch.softmax(logits, -1).numpy()

        def prob(word: str, p: np.ndarray = probs) -> float:
            return float(p[tok.convert_tokens_to_ids(word)])

        tse = float(prob(r.correct) > prob(r.incorrect))
        ew = mw = math.nan
        if r.cell != CELL_NONE:
            lex = LEXICONS[r.language]
            lex = lex[lex["cell"] == r.cell]
            right = [prob(f) for f in (lex["plur"] if r.plural else lex["sing"])]
            wrong = [prob(f) for f in (lex["sing"] if r.plural else lex["plur"])]
            ew = float(np.mean([a > b for a, b in zip(right, wrong)]))
            mw = sum(right) / (sum(right) + sum(wrong))
        out.append({"group": r.group, "cell": r.cell, "left": r.left, "tse": tse, "ew": ew, "mw": mw})
    return pd.DataFrame(out)


def test_scores_are_those_of_the_rows_cell_lemmas(scored: SimpleNamespace) -> None:
    """TSE per row; EW and MW per context over its cell's lemmas only, averaged over the contexts of
    the group's cells; a row of no cell has TSE and no EW or MW (float64 reference)."""
    ref = _reference(scored.model, scored.templates)
    summary = pd.read_csv(scored.out / "summary_all.csv")
    h = headline(summary)
    for group, part in ref.groupby("group"):
        got = h[h["group"] == group].set_index("metric")["value"]
        assert got["tse"] == pytest.approx(part["tse"].mean())
        # one context per (cell, prefix): the rows of a context share its EW and MW
        ctx = part[part["cell"] != CELL_NONE].drop_duplicates(["cell", "left"])
        assert got["ew"] == pytest.approx(ctx["ew"].mean(), abs=1e-9)
        assert got["mw"] == pytest.approx(ctx["mw"].mean(), abs=1e-5)  # float32 probabilities in the shards
    tse_n = h[(h["metric"] == "tse")].set_index("group")["n"].to_dict()
    assert tse_n == {group_id("fr", "simple_agrmt"): 4, group_id("ru", "simple_agrmt"): 5}


def test_eligible_counts_each_cell(scored: SimpleNamespace) -> None:
    e = pd.read_csv(scored.out / "eligible.csv", keep_default_na=False)
    got = {(r.language, r.cell): (r.lexicon_lemmas, r.eligible_lemmas, r.rows) for r in e.itertuples()}
    # every planted form is a word of the tokenizer: all eligible; ru past_m and pres 2 rows each, the adjective
    # row of no cell (TSE only)
    assert got == {("fr", "pres"): (3, 3, 4), ("ru", "pres"): (3, 3, 2), ("ru", "past_m"): (2, 2, 2),
                   ("ru", "none"): (0, 0, 1)}  # fmt: skip
    assert set(e["rows_multi_token"]) == {0}  # a word-level tokenizer
    contexts = pd.read_parquet(scored.out / "contexts.parquet")
    assert set(contexts["cell"]) == {"pres", "past_m"}


def test_a_rerun_keeps_every_shard_and_writes_the_same_bytes(scored: SimpleNamespace) -> None:
    from verbeval.core.io import sha256_file
    from verbeval.core.model_runs import ModelRun
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.multilingual.scoring import ClamsScoreRun, score_model

    before = {p: sha256_file(p) for p in sorted(scored.out.rglob("*.csv"))}
    run = ModelRun(ModelSource(str(scored.model)), kind="causal", prepend_bos=False, random_init=True, threads=1)
    lexicons = {lang: str(scored.root / f"{lang}.parquet") for lang in LEXICONS}
    score_model(run, ClamsScoreRun(str(scored.root / "templates.parquet"), lexicons, "tiny", str(scored.out),
                                   progress=False, resamples=100))  # fmt: skip
    assert {p: sha256_file(p) for p in sorted(scored.out.rglob("*.csv"))} == before


def test_tables_write_one_table_per_language(scored: SimpleNamespace, tmp_path: Path) -> None:
    from verbeval.multilingual.tables import TableRun, write_tables

    out = tmp_path / "ml"
    write_tables(TableRun((str(scored.out / "summary_all.csv"),), (str(scored.out / "eligible.csv"),),
                          (str(scored.out / "contexts.parquet"),), str(out)))  # fmt: skip
    for lang in ("fr", "ru"):
        md = (out / lang / "table2.md").read_text()
        assert (
            "Simple" in md and "tiny† TSE" in md and re.search(r"\| 0\.\d\d \[0\.\d\d, [01]\.\d\d\] \| \d of \d \|", md)
        )
        assert (out / lang / "fig1_top_p.png").stat().st_size > 0
    assert not (out / "de").exists()
    languages = (out / "languages.md").read_text()
    assert "French TSE / EW / MW" in languages and "Russian TSE / EW / MW" in languages
    assert "† randomly initialised, so the numbers are meaningless: tiny." in languages
    comparisons = pd.read_csv(out / "comparisons.csv")
    assert set(comparisons["metric"]) == {"tse", "ew", "mw"}
    assert "Unpaired" in (out / "comparisons.md").read_text()


# --------------------------------------------------------------------------- comparisons


def _summary(rows: list[tuple[str, str, str, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": m,
                "group": g,
                "metric": k,
                "side": "" if k == "tse" else "top",
                "cutoff": np.nan if k == "tse" else 1.0,
                "value": v,
                "n": n,
            }
            for m, g, k, v, n in rows
        ]  # fmt: skip
    )


def test_languages_are_compared_unpaired_with_the_claim_from_the_holm_p() -> None:
    fr, de = group_id("fr", "simple_agrmt"), group_id("de", "simple_agrmt")
    summary = _summary([("m", fr, "tse", 0.9, 100), ("m", de, "tse", 0.6, 50), ("m", fr, "ew", 0.8, 3),
                        ("m", de, "ew", 0.5, 3), ("m", fr, "mw", 0.7, 3), ("m", de, "mw", 0.6, 3)])  # fmt: skip
    contexts = pd.DataFrame({"model": "m", "group": [fr] * 3 + [de] * 3, "cell": "pres", "context_id": range(6),
                             "ew": [0.9, 0.8, 0.7, 0.5, 0.4, 0.6], "mw": [0.7, 0.71, 0.69, 0.6, 0.61, 0.59]})  # fmt: skip
    got = compare_languages(summary, contexts, ["m"], ["fr", "de"], 0.05).set_index("metric")
    p_tse = fisher_exact([[90, 10], [30, 20]]).pvalue
    p_ew = ttest_ind([0.9, 0.8, 0.7], [0.5, 0.4, 0.6], equal_var=False).pvalue
    p_mw = ttest_ind([0.7, 0.71, 0.69], [0.6, 0.61, 0.59], equal_var=False).pvalue
    assert got.loc["tse", "p_value"] == pytest.approx(p_tse)
    assert got.loc["ew", "p_value"] == pytest.approx(p_ew)
    assert got.loc["mw", "p_value"] == pytest.approx(p_mw)
    # Holm over the model's three rows
    order = sorted([p_tse, p_ew, p_mw])
    adj = np.maximum.accumulate([min(1.0, (3 - i) * p) for i, p in enumerate(order)])
    assert sorted(got["p_holm"]) == pytest.approx(list(adj))
    assert (got["significant"] == (got["p_holm"] < 0.05)).all()
    assert got.loc["tse", "difference"] == pytest.approx(0.3)
    assert set(got["test"]) == {"Fisher exact, unpaired", "Welch t, unpaired"}


def test_english_clams_is_compared_with_the_ml_rows_of_the_same_source() -> None:
    en = group_id("en", "simple_agrmt")
    summary = _summary([("m", en, "tse", 0.75, 40)])
    ml_templates = pd.DataFrame({"group": ["simple", "simple", "simple", "prep"],
                                 "source": ["ml_simple_agrmt", "ml_simple_agrmt", "ml_other", "ml_prep_anim"]})  # fmt: skip
    tse = pd.DataFrame({"row": [0, 1, 2], "tse": [1.0, 0.0, 1.0], "group": "simple"})
    got = english_against_ml(summary, ml_templates, {"m": [tse]}, 0.05)
    assert len(got) == 1
    r = got.iloc[0]
    assert (r["n_a"], r["n_b"], r["value_b"]) == (40, 2, 0.5)  # the ml_other row is not simple_agrmt's
    assert r["p_value"] == pytest.approx(fisher_exact([[30, 10], [1, 1]]).pvalue)


def test_overview_puts_the_languages_side_by_side() -> None:
    fr = group_id("fr", "simple_agrmt")
    md = overview(_summary([("m", fr, "tse", 0.9, 10), ("m", fr, "ew", 0.81, 3), ("m", fr, "mw", 0.5, 3)]), "m",
                  ["fr", "he"])  # fmt: skip
    assert "| Simple | 0.90 / 0.81 / 0.50 | – / – / – |" in md
    assert [g["id"] for g in language_groups("he")][:2] == ["clams-he.simple_agrmt", "clams-he.vp_coord"]


# --------------------------------------------------------------------------- the plan


def _plan(tmp_path: Path, extra: str) -> Any:
    from verbeval.workflow.loading import plan_from_files

    path = tmp_path / "extra.yaml"
    path.write_text(extra)
    return plan_from_files([REPO / "config" / "config.yaml", REPO / "config" / "quick.yaml", path],
                           {"results_dir": str(tmp_path / "res")}, check_paths=False)  # fmt: skip


def test_the_study_is_off_without_languages(repo_view: Path, tmp_path: Path) -> None:
    plan = _plan(tmp_path, "{}\n")
    assert plan.multilingual.outputs == [] and plan.multilingual.models == []
    assert not any("multilingual" in f for f in plan.all_outputs())
    assert plan.multilingual.rules.clams_score.constraints == {"mlmodel": "(?!x)x"}


def test_the_plan_runs_each_model_once_over_every_language(repo_view: Path, tmp_path: Path) -> None:
    from test_plan import rule_words

    plan = _plan(tmp_path, "multilingual:\n  languages: [fr, en]\n  models: [smollm2-135m]\n  max_rows_per_source: 5\n")
    ml = plan.multilingual
    assert ml.models == ["smollm2-135m"]
    res = f"{tmp_path}/res/multilingual"
    assert f"{res}/fr/table2.md" in plan.all_outputs() and f"{res}/comparisons.md" in ml.outputs
    words = rule_words("clams_templates", ml.rules.clams_templates)
    assert "--max-rows-per-source=5" in words and f"--lexicon=fr={res}/lexicons/fr.parquet" in words
    assert sum(w.startswith("--input=clams_fr_") for w in words) == 7
    score = rule_words("clams_score", ml.rules.clams_score, mlmodel="smollm2-135m")
    assert score[0] == "clams-score" and score[score.index("--out-dir") + 1] == f"{res}/models/smollm2-135m"
    assert rule_words("clams_lexicon", ml.rules.clams_lexicon, lang="en")[-4:] == [
        "--out",
        f"{res}/lexicons/en.parquet",
        "--counts",
        f"{res}/lexicons/en.json",
    ]
    assert f"--english={tmp_path}/res/agreement/lexicon.parquet" in rule_words(
        "clams_lexicon", ml.rules.clams_lexicon, lang="en"
    )
    # English against Marvin & Linzen: the smollm2 tse files of the M&L groups
    table = rule_words("clams_table", ml.rules.clams_table)
    assert any(w.startswith("--ml-tse=smollm2-135m=") for w in table)


def test_an_unknown_model_is_a_one_line_error(repo_view: Path, tmp_path: Path) -> None:
    from verbeval.workflow.plan import PlanError

    with pytest.raises(PlanError, match="multilingual.models"):
        _plan(tmp_path, "multilingual:\n  languages: [fr]\n  models: [nope]\n")


def test_word_logprobs_follow_the_chain_rule_over_sub_tokens(scored: SimpleNamespace) -> None:
    """A word of one token: the log-softmax at the context's end; of several (here two or three words of
    the tokenizer standing for one): the sum over its tokens, each after the context and the ones before
    (float64 reference by full forward passes); NaN where no row needs it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verbeval.agreement.engine.encoding import encode_contexts
    from verbeval.core.models import load_model
    from verbeval.multilingual.scoring import word_logprobs

    tok = AutoTokenizer.from_pretrained(str(scored.model))
    ref_lm = AutoModelForCausalLM.from_pretrained(str(scored.model)).eval()
    lm = load_model(str(scored.model), device="cpu", kind="causal")
    contexts = pd.DataFrame({"left": ["les auteurs", "l' auteur", "авторы"], "right": ""})
    words = [[tok.convert_tokens_to_ids(w)] for w in ("sont", "est")]
    words += [tok.convert_tokens_to_ids(["parle", "sont"]), tok.convert_tokens_to_ids(["rit", "est", "parlent"])]
    need = np.ones((3, 4), dtype=bool)
    need[2, 3] = False  # not asked for: not computed
    got = word_logprobs(lm, encode_contexts(lm, contexts, prepend_bos=False), words, need)

    def chain(left: str, word: list[int]) -> float:
        ids = tok(left, add_special_tokens=False)["input_ids"]
        total = 0.0
        for t in word:
            with torch.no_grad():
                logits = ref_lm(torch.tensor([ids])).logits[0, -1].double()
            total += float(torch.log_softmax(logits, -1)[t])
            ids = [*ids, t]
        return total

    for i, left in enumerate(contexts["left"]):
        for j, word in enumerate(words):
            if need[i, j]:
                assert got[i, j] == pytest.approx(chain(left, word), abs=1e-4)
            else:
                assert np.isnan(got[i, j])


# --------------------------------------------------------------------------- the commands, in process


def test_the_lexicon_and_templates_commands(tmp_path: Path) -> None:
    """clams-lexicon (English from an agreement lexicon; French from its pinned package) and
    clams-templates on real CLAMS lines: cells, counts and the JSON of provenance."""
    import json

    from verbeval.cli import main

    english = tmp_path / "lexicon.parquet"
    pd.DataFrame({"lemma": ["laugh", "be"], "sing": ["laughs", "is"], "plur": ["laugh", "are"],
                  "source": ["combined", "both"]}).to_parquet(english)  # fmt: skip
    assert main(["-q", "clams-lexicon", "--language", "en", "--english", str(english),
                 "--out", str(tmp_path / "en.parquet"), "--counts", str(tmp_path / "en.json")]) == 0  # fmt: skip
    counts = json.loads((tmp_path / "en.json").read_text())
    assert counts["lemmas_per_cell"] == {"pres": 2} and counts["source_verb_lemmas"] is None
    assert counts["package"] == "verbeval lexicon (Giant Verb List (lemminflect) + refining-tse combined_verb_list.csv)"
    assert main(["-q", "clams-lexicon", "--language", "fr", "--out", str(tmp_path / "fr.parquet"),
                 "--counts", str(tmp_path / "fr.json")]) == 0  # fmt: skip
    fr = json.loads((tmp_path / "fr.json").read_text())
    assert (fr["package"], fr["version"], fr["lemmas_per_cell"]) == ("dict-fr-AU-DELA", "2021.9.9", {"pres": 11940})
    # en_evalset/simple_agrmt.txt lines 1-4 and fr_evalset/simple_agrmt.txt lines 1-4, verbatim
    en_file, fr_file = tmp_path / "en.txt", tmp_path / "fr.txt"
    en_file.write_text(
        "True\tthe author laughs\nFalse\tthe author laugh\nTrue\tthe author swims\nFalse\tthe author swim"
    )
    fr_file.write_text("True\tles auteurs sont vieux\nFalse\tles auteurs est vieux\n"
                       "True\tles auteurs sont jeunes\nFalse\tles auteurs est jeune\n")  # fmt: skip
    argv = ["-q", "clams-templates", f"--input=clams_en_simple_agrmt={en_file}", f"--input=clams_fr_simple_agrmt={fr_file}",
            f"--lexicon=en={tmp_path / 'en.parquet'}", f"--lexicon=fr={tmp_path / 'fr.parquet'}",
            "--out", str(tmp_path / "t.parquet"), "--cells", str(tmp_path / "cells.csv")]  # fmt: skip
    assert main(argv) == 0
    t = pd.read_parquet(tmp_path / "t.parquet")
    assert list(zip(t["language"], t["correct"], t["cell"], t["label"])) == [
        ("en", "laughs", "pres", "singular"), ("en", "swims", CELL_NONE, "singular"),
        ("fr", "sont", "pres", "plural"), ("fr", "sont", "pres", "plural"),
    ]  # fmt: skip
    assert list(t["differs_after"]) == [False, False, False, True]
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert cells.to_dict("records") == [
        {"language": "en", "group": "clams-en.simple_agrmt", "cell": "pres", "rows": 1},
        {"language": "en", "group": "clams-en.simple_agrmt", "cell": "none", "rows": 1},
        {"language": "fr", "group": "clams-fr.simple_agrmt", "cell": "pres", "rows": 2},
    ]
    # a language without its lexicon: one line, nothing written
    no_fr = [a for a in argv if not a.startswith("--lexicon=fr")]
    no_fr[no_fr.index("--out") + 1] = str(tmp_path / "u.parquet")
    assert main(no_fr) == 1
    assert not (tmp_path / "u.parquet").exists()
