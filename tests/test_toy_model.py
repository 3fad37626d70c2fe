"""Tests for the toy model (verbeval.acquisition.toy.corpus, toy_training, ``verbeval train-toy``): the
planted corpus, its grammar, determinism, the checkpoint folders, and (e2e) that the model learns.

Every number the toy model produces is a toy model's. The learning checks use an independent scorer
written here (the logits of the correct and the incorrect verb form at the verb position, straight
from torch), not the verbeval engine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from verbeval.acquisition.toy.corpus import generate_corpus, plant_lemmas, template_verb_pairs, zipf_counts
from verbeval.acquisition.toy.spec import CorpusSpec
from verbeval.acquisition.toy.training import (
    DEFAULT_CHECKPOINTS,
    TOY_RECORD,
    TrainSpec,
    log_spaced,
    parse_checkpoints,
    train_toy,
)
from verbeval.core.errors import VerbevalError
from verbeval.core.outfolders import MARKER

SG = ["author", "pilot", "guard", "chef"]
PL = ["authors", "pilots", "guards", "chefs"]
#: lexicon lemmas of the fixture; 'guard' has forms that are nouns of the templates (never planted)
VERBS = [
    "laugh", "swim", "like", "admire", "jump", "walk", "talk", "sing", "read", "cook",
    "paint", "dance", "shout", "wait", "work", "play", "smile", "guard", "help", "call",
]  # fmt: skip


def _lexicon() -> pd.DataFrame:
    return pd.DataFrame({"lemma": VERBS, "sing": [v + "s" for v in VERBS], "plur": VERBS})


def _row(group: str, left: str, verb: str, plural: bool, right: str = "") -> dict[str, object]:
    good, bad = (verb, verb + "s") if plural else (verb + "s", verb)
    return {"group": group, "left": left, "right": right, "correct": good, "incorrect": bad, "plural": plural}


def _templates() -> pd.DataFrame:
    """simple (the N V), subj_rel (the N that V the N V), obj_rel_across (the N that the N V V),
    obj_rel_within (the N that the N V V, the first verb the slot), one BLiMP row."""
    rows = []
    for n, plural in [*((n, False) for n in SG), *((n, True) for n in PL)]:
        for v in ("laugh", "swim"):
            rows.append(_row("simple", f"the {n}", v, plural))
    for i, (head, plural) in enumerate([*((n, False) for n in SG), *((n, True) for n in PL)]):
        other = (PL + SG)[i]
        rel = "like" if plural else "likes"
        rows.append(_row("subj_rel", f"the {head} that {rel} the {other}", "laugh", plural))
        rel2 = "admire" if other in PL else "admires"
        rows.append(_row("obj_rel_across", f"The {head} that the {other} {rel2}", "swim", plural))
        main = "laugh" if other in PL else "laughs"
        rows.append(_row("obj_rel_within", f"the {other} that the {head}", "admire", plural, main))
        rows.append(_row("obj_rel_within", f"the {other} that the {head}", "like", plural, main))
    rows.append(_row("blimp", "Some boys who left Chad", "shout", True))
    return pd.DataFrame(rows)


SMALL = CorpusSpec(seed=3, n_sentences=400, n_lemmas=12, zipf_exponent=1.5, min_count=4)


# --------------------------------------------------------------------------- the corpus


def test_zipf_counts_sum_rank_order_and_floor() -> None:
    counts = zipf_counts(10, 1000, 1.5, 5)
    assert counts.sum() == 1000 and counts.min() >= 5
    assert (np.diff(counts) <= 0).all()  # rank 1 the most frequent
    assert counts[0] == 5 + round(950 / sum(1 / r**1.5 for r in range(1, 11)))
    with pytest.raises(VerbevalError, match="cannot give 10 lemmas 5 occurrences"):
        zipf_counts(10, 49, 1.5, 5)


def test_planted_lemmas_hold_every_template_pair_and_no_noun_form() -> None:
    lemmas = plant_lemmas(_lexicon(), _templates(), SMALL)
    assert len(lemmas) == 12 and list(lemmas["rank"]) == list(range(1, 13))
    from_templates = set(lemmas.loc[lemmas["from_templates"], "lemma"])
    assert from_templates == {"laugh", "swim", "like", "admire"}  # not BLiMP's 'shout' (verb_groups default)
    assert "guard" not in set(lemmas["lemma"])  # 'guards' is a noun of the templates
    assert template_verb_pairs(_templates(), ("blimp",)) == [("shouts", "shout")]
    with pytest.raises(VerbevalError, match="4 verb pairs, more than the 3 lemmas"):
        plant_lemmas(_lexicon(), _templates(), CorpusSpec(n_lemmas=3))


def test_planted_counts_are_honoured_and_numbers_balanced() -> None:
    corpus = generate_corpus(_lexicon(), _templates(), SMALL)
    assert len(corpus.sentences) == SMALL.n_sentences == len(corpus.slots)
    slot_counts = corpus.slots["lemma"].value_counts()
    planted = corpus.lemmas.set_index("lemma")["planted"]
    assert (slot_counts.reindex(planted.index) == planted).all()
    assert list(planted) == list(zipf_counts(12, 400, 1.5, 4))
    per_label = corpus.slots.groupby(["lemma", "label"]).size().unstack()
    assert ((per_label["plural"] - per_label["singular"]).abs() <= 1).all()
    # count: every occurrence of the forms, at least the verb slots (context verbs add to it)
    counts = corpus.lemmas.set_index("lemma")["count"]
    assert (counts >= planted).all() and counts.sum() > planted.sum()
    words = sum(len(s[:-1].split()) + 1 for s in corpus.sentences)  # + the period
    top = corpus.lemmas.iloc[0]
    assert top["zipf"] == pytest.approx(np.log10(top["count"] / words * 1e9), abs=1e-6)


def test_construction_weights_grade_the_groups() -> None:
    spec = CorpusSpec(seed=1, n_sentences=2000, n_lemmas=12, weights={"simple": 8, "subj_rel": 1, "blimp": 0})
    groups = generate_corpus(_lexicon(), _templates(), spec).slots["group"].value_counts()
    assert "blimp" not in groups
    assert 0.68 < groups["simple"] / 2000 < 0.78  # 8 / (8 + 1 + 1 + 1): groups not named get 1
    assert 0.06 < groups["subj_rel"] / 2000 < 0.12


def _numbers(lemmas: pd.DataFrame) -> dict[str, bool | None]:
    """word -> True for a plural noun or verb form, False for a singular one, None for 'the' and 'that'."""
    table: dict[str, bool | None] = {n: False for n in SG} | {n: True for n in PL} | {"the": None, "that": None}
    return table | dict.fromkeys(lemmas["sing"], False) | dict.fromkeys(lemmas["plur"], True)


def test_every_training_sentence_agrees() -> None:
    corpus = generate_corpus(_lexicon(), _templates(), CorpusSpec(seed=5, n_sentences=600, n_lemmas=12))
    lemmas = corpus.lemmas
    number = _numbers(lemmas)
    forms = lemmas.set_index("lemma")
    checked = {"simple": 0, "subj_rel": 0, "obj_rel_across": 0, "obj_rel_within": 0}
    for sentence, (group, lemma, label) in zip(corpus.sentences, corpus.slots.itertuples(index=False), strict=True):
        assert sentence[0].isupper() and sentence.endswith(".")
        w = sentence[:-1].lower().split()
        form = forms.loc[lemma, "plur" if label == "plural" else "sing"]
        slot = {"obj_rel_within": 5, "blimp": 5}.get(group, -1)
        assert w[slot] == form, sentence  # the verb slot holds the lemma's correct form
        n = [number[x] for x in w] if group != "blimp" else []
        if group == "simple":  # the N V
            assert n[1] == n[2] == (label == "plural"), sentence
        elif group == "subj_rel":  # the N1 that V the N2 V: both verbs agree with N1
            assert n[1] == n[3] == n[6] == (label == "plural"), sentence
        elif group == "obj_rel_across":  # the N1 that the N2 V V: the first with N2, the second with N1
            assert n[4] == n[5] and n[1] == n[6] == (label == "plural"), sentence
        elif group == "obj_rel_within":  # the N1 that the N2 V V: the slot (first) with N2, the second with N1
            assert n[4] == n[5] == (label == "plural") and n[1] == n[6], sentence
        checked[group] = checked.get(group, 0) + 1
    assert min(checked.values()) > 20
    # nouns are recombined: head/attractor pairs that no template row has
    pairs = {(s.split()[1], s.split()[5]) for s in corpus.sentences if " that the " in s}
    assert len(pairs) > 8


def test_corpus_is_deterministic_for_a_seed() -> None:
    a = generate_corpus(_lexicon(), _templates(), SMALL)
    b = generate_corpus(_lexicon(), _templates(), SMALL)
    c = generate_corpus(_lexicon(), _templates(), CorpusSpec(**{**SMALL.__dict__, "seed": 4}))
    assert a.sentences == b.sentences and a.lemmas.equals(b.lemmas)
    assert a.sentences != c.sentences
    assert list(a.lemmas["lemma"]) != list(c.lemmas["lemma"])  # another seed: another ranking


def test_log_spaced_and_parse_checkpoints() -> None:
    assert DEFAULT_CHECKPOINTS == (32, 45, 64, 91, 128, 181, 256, 362, 512)
    assert log_spaced(100) == (32, 45, 64, 91, 100)
    assert log_spaced(10, first=1) == (1, 2, 3, 4, 6, 8, 10)
    assert parse_checkpoints("8, 0,4,4") == (0, 4, 8)
    with pytest.raises(VerbevalError, match="'x' is not a step"):
        parse_checkpoints("4,x")
    with pytest.raises(VerbevalError, match=r"step\(s\) \[9\] outside 0..8"):
        TrainSpec(steps=8, checkpoints=(4, 9)).check()


# --------------------------------------------------------------------------- training


TINY = TrainSpec(seed=7, steps=6, checkpoints=(0, 3, 6), batch_size=8, hidden=16, layers=1, threads=1, corpus=SMALL)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("toy") / "out"
    return train_toy(_templates(), _lexicon(), out, TINY, progress=False)


def test_training_writes_checkpoints_and_records(tiny_run: Path) -> None:
    from verbeval.core.models import load_model

    assert sorted(p.name for p in tiny_run.iterdir()) == [
        MARKER,  # train-toy's own output: the next run may replace it
        "corpus.txt",
        "corpus_frequencies.csv",
        "corpus_lemmas.csv",
        "step-0",
        "step-3",
        "step-6",
        "training.json",
    ]
    assert [p.name for p in tiny_run.parent.iterdir()] == ["out"]  # no temporary folder left
    freq = pd.read_csv(tiny_run / "corpus_frequencies.csv")
    assert list(freq.columns) == ["lemma", "count", "zipf"]
    planted = pd.read_csv(tiny_run / "corpus_lemmas.csv")
    assert list(freq["lemma"][:12]) == list(planted["lemma"]) and list(freq["count"][:12]) == list(planted["count"])
    # then the lexicon lemmas the tokenizer makes eligible without planting them: 'guard' (the noun)
    assert list(freq["lemma"][12:]) == ["guard"] and freq["count"].iloc[12] > 0
    record = json.loads((tiny_run / "training.json").read_text())
    assert record["seed"] == 7 and record["steps"] == 6 and record["checkpoints"] == [0, 3, 6]
    assert record["corpus"]["sentences"] == 400 and "toy model" in record["note"]
    assert set(record["versions"]) >= {"torch", "transformers", "verbeval"}
    toy = json.loads((tiny_run / "step-3" / TOY_RECORD).read_text())
    assert toy["toy_model"] is True and toy["step"] == 3 and toy["seed"] == 7
    loaded = load_model(str(tiny_run / "step-6"), device="cpu")  # a local model path, as the workflow loads it
    assert loaded.kind == "causal" and loaded.cased
    tok = loaded.tokenizer
    for form in ("laughs", "laugh", "admires"):  # every planted form is one token
        ids = tok(" " + form, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] != tok.unk_token_id
    assert _sha(tiny_run / "step-0" / "model.safetensors") != _sha(tiny_run / "step-6" / "model.safetensors")


def test_training_is_deterministic_for_a_seed(tiny_run: Path, tmp_path: Path) -> None:
    again = train_toy(_templates(), _lexicon(), tmp_path / "again", TINY, progress=False)
    for name in ("step-0/model.safetensors", "step-6/model.safetensors", "step-6/tokenizer.json", "corpus.txt"):
        assert _sha(again / name) == _sha(tiny_run / name), name
    for name in ("training.json", "corpus_frequencies.csv", "corpus_lemmas.csv"):
        assert (again / name).read_bytes() == (tiny_run / name).read_bytes(), name


def test_train_toy_command(tmp_path: Path) -> None:
    from verbeval.cli import main

    _templates().to_parquet(tmp_path / "t.parquet")
    _lexicon().to_parquet(tmp_path / "l.parquet")
    (tmp_path / "out").mkdir()  # an earlier output of train-toy (its marker records its files): replaced
    (tmp_path / "out" / "stale.txt").write_text("replaced")
    stale = {"size": 8, "sha256": hashlib.sha256(b"replaced").hexdigest()}
    (tmp_path / "out" / MARKER).write_text(json.dumps({"command": "train-toy", "files": {"stale.txt": stale}}))
    args = ["train-toy", "--templates", str(tmp_path / "t.parquet"), "--lexicon", str(tmp_path / "l.parquet")]
    args += ["--out", str(tmp_path / "out"), "--steps", "2", "--checkpoints", "2", "--sentences", "100"]
    args += ["--lemmas", "8", "--hidden", "16", "--layers", "1", "--weights", "blimp=0", "--no-progress"]
    assert main(args) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir())[-2:] == ["step-2", "training.json"]
    assert not (tmp_path / "out" / "stale.txt").exists()
    record = json.loads((tmp_path / "out" / "training.json").read_text())
    assert record["corpus"]["weights"]["blimp"] == 0 and record["corpus"]["groups"].get("blimp") is None


def test_train_toy_bad_input_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from verbeval.cli import main

    _templates().drop(columns=["plural"]).to_parquet(tmp_path / "t.parquet")
    _lexicon().to_parquet(tmp_path / "l.parquet")
    base = ["train-toy", "--lexicon", str(tmp_path / "l.parquet"), "--out", str(tmp_path / "o")]
    assert main([*base, "--templates", str(tmp_path / "t.parquet")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.parquet" in err[0] and "no column(s) plural" in err[0]
    _templates().to_parquet(tmp_path / "good.parquet")
    assert main([*base, "--templates", str(tmp_path / "good.parquet"), "--weights", "simple=x"]) != 0
    assert "--weights 'simple=x': 'x' is not a number" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- learning (e2e)


def _score(folder: Path, templates: pd.DataFrame, lemmas: pd.DataFrame) -> tuple[dict[str, float], np.ndarray]:
    """An independent scorer: per group, the share of template rows whose correct verb form has the higher
    logit at the verb position; per planted lemma, the same share over the simple group's distinct contexts
    with the lemma's own forms. Straight from torch, not the verbeval engine."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(folder)
    vocab = tok.get_vocab()
    rows = templates[templates["correct"].isin(vocab) & templates["incorrect"].isin(vocab)]
    texts = [left[0].upper() + left[1:] for left in rows["left"]]  # a cased causal LM reads the left context
    distinct = sorted(set(texts))
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in distinct]
    width = max(map(len, ids))
    batch = torch.zeros((len(ids), width), dtype=torch.long)
    mask = torch.zeros_like(batch)
    for i, x in enumerate(ids):
        batch[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(input_ids=batch, attention_mask=mask).logits[torch.arange(len(ids)), mask.sum(1) - 1]
    at = {t: i for i, t in enumerate(distinct)}
    row_at = torch.tensor([at[t] for t in texts])
    good = logits[row_at, torch.tensor([vocab[f] for f in rows["correct"]])]
    bad = logits[row_at, torch.tensor([vocab[f] for f in rows["incorrect"]])]
    hits = pd.Series((good > bad).numpy(), index=rows["group"].to_numpy())
    tse = hits.groupby(level=0).mean().to_dict()
    simple = rows[rows["group"] == "simple"].assign(text=[t for t, g in zip(texts, rows["group"]) if g == "simple"])
    simple = simple.drop_duplicates("text")
    at_simple = logits[torch.tensor([at[t] for t in simple["text"]])]
    sing = at_simple[:, torch.tensor([vocab[f] for f in lemmas["sing"]])]
    plur = at_simple[:, torch.tensor([vocab[f] for f in lemmas["plur"]])]
    plural = torch.tensor(simple["plural"].to_numpy())[:, None]
    per_lemma = torch.where(plural, plur > sing, sing > plur).float().mean(0).numpy()
    return tse, per_lemma


@pytest.mark.e2e
def test_the_toy_model_learns_agreement(acquisition_demo: Any) -> None:
    """The default toy model (seed 0), scored at every default checkpoint by :func:`_score`. It is the
    one the reduced acquisition demo's workflow trains (rule train_toy; conftest's ``acquisition_demo``,
    one training per test session for this test and test_acquisition_workflow.py): the default
    training and corpus settings, on the demo's template table (its six groups, 100 rows a template
    source, every construction across an attractor below among them) and lexicon (the refining-tse
    verb list), saving the default checkpoints besides the demo's.

    Bounds from measured runs of the defaults on the quick start's inputs (100 rows a template source,
    the refining-tse verb list), seeds 0, 1 and 2 (docs/toy_model.md, "What it learns"): simple TSE at
    the first checkpoint (step 32) 0.45 / 0.50 / 0.52, at the last (512) 1.00 in every seed; the first
    step with simple TSE >= 0.75 was 128 / 181 / 181, with each construction across an attractor
    (prep, subj_rel, obj_rel_across, obj_rel_no_comp_across) 256-362 (always at least one checkpoint later); Spearman(planted count, first step with a lemma's accuracy >= 0.75)
    -0.50 / -0.44 / -0.33. Seed 0 is deterministic on one machine; the
    bounds leave room for another machine's rounding and the demo's smaller template table: the first
    checkpoint within 0.15 of chance, the last >= 0.95, every construction across an attractor later
    than simple, Spearman <= -0.3.
    """
    from dataclasses import asdict

    from scipy.stats import spearmanr

    out = acquisition_demo.root / "models" / "toy"
    # the training is the default one (but its threads and the demo's extra checkpoints), seed 0
    record = json.loads((out / "training.json").read_text())
    default = asdict(TrainSpec())
    assert record["seed"] == 0 and record["steps"] == default["steps"] == DEFAULT_CHECKPOINTS[-1]
    assert set(DEFAULT_CHECKPOINTS) <= set(record["checkpoints"])
    train = {k: v for k, v in default.items() if k not in ("corpus", "seed", "checkpoints", "threads")}
    assert {k: v for k, v in record["train"].items() if k != "threads"} == train
    assert {k: record["corpus"][k] for k in default["corpus"] if k != "seed"} == {
        k: dict(v) if k == "weights" else v for k, v in default["corpus"].items() if k != "seed"
    }
    # what it was trained on: the workflow's template table (rule train_toy's input)
    templates = pd.read_parquet(acquisition_demo.out / "templates.parquet")
    lemmas = pd.read_csv(out / "corpus_lemmas.csv")
    steps = list(DEFAULT_CHECKPOINTS)
    scored = [_score(out / f"step-{s}", templates, lemmas) for s in steps]
    tse = pd.DataFrame([t for t, _ in scored], index=steps)
    print(tse.round(3).to_string())  # the toy model's learning curves (a toy model's numbers)
    assert abs(tse["simple"].iloc[0] - 0.5) <= 0.15
    assert tse["simple"].iloc[-1] >= 0.95
    first = {g: next((s for s in steps if tse.loc[s, g] >= 0.75), 2 * steps[-1]) for g in tse.columns}
    # the constructions with an attractor between subject and verb (not the within-relative groups,
    # whose verb agrees with the adjacent embedded subject: also later here, but a local dependency)
    hard = ("prep", "subj_rel", "obj_rel_across", "obj_rel_no_comp_across")
    for g in hard:
        assert first[g] > first["simple"], (g, first)
    acc = np.stack([per_lemma for _, per_lemma in scored])  # steps x lemmas
    reached = [next((s for s, a in zip(steps, acc[:, j]) if a >= 0.75), 2 * steps[-1]) for j in range(acc.shape[1])]
    rho = spearmanr(lemmas["planted"], reached).statistic
    print(f"Spearman(planted count, first step >= 0.75) = {rho:.3f} over {len(reached)} lemmas")
    assert rho <= -0.3  # frequent lemmas are learned earlier
