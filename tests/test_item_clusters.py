"""Clusters by lexical item (``agreement.bootstrap.cluster`` ``subject``, ``verb``, ``subject_and_verb``,
issue 61): the items recovered from literal Marvin & Linzen lines (checked by hand), the fallbacks of
BLiMP and custom rows, planted ground truth for the per-model intervals (a subject effect is seen by
the subject clusters and by no verb cluster, and the crossed pigeonhole's verb counts cancel), and the
paired comparisons (Durkalski's statistic over K subjects is K when every subject leans one row the
same way; over 2 templates it is 2)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, norm

from verbeval.agreement.data.custom_pairs import read_custom_pairs
from verbeval.agreement.data.items import ml_subject, verb_lemma
from verbeval.agreement.data.template_files import TEMPLATE_COLUMNS, read_template_file
from verbeval.agreement.report.comparisons import comparisons
from verbeval.agreement.scores.aggregate import summarise
from verbeval.agreement.scores.item_clusters import cluster_dimensions, row_clusters
from verbeval.agreement.scores.paired import compare_groups, paired_mean_difference
from verbeval.core import count_draws
from verbeval.core.bootstrap import Clusters, mean_of_rows, percentile_ci, stream_seed
from verbeval.core.errors import MismatchError

Z = 1.959964  # the normal 97.5% quantile

#: (sentence_good, sentence_bad, label, subject_item, verb_item): lines of the refining-tse release
#: (data/ML/<file>_all.jsonl), the items read off by hand
ML_LINES = [
    ("the authors laugh", "the authors laughs", -2, "author", "laugh"),  # simple_agrmt
    ("the pilot is tall", "the pilot are tall", -1, "pilot", "be"),  # simple_agrmt, a predicate
    ("the bankers knew the pilot laughs", "the bankers knew the pilot laugh", -1, "pilot", "laugh"),  # sent_comp
    ("the authors laugh and swim", "the authors laugh and swims", -2, "author", "swim"),  # vp_coord: the 2nd verb
    ("the managers are young and swim", "the managers are young and swims", -2, "manager", "swim"),  # vp_coord
    (
        "the teacher is twenty three years old and knows many different foreign languages",
        "the teacher is twenty three years old and know many different foreign languages",
        -1,
        "teacher",
        "know",
    ),  # long_vp_coord
    (
        "the authors to the side of the guards laugh",
        "the authors to the side of the guards laughs",
        -2,
        "author",
        "laugh",
    ),  # prep_anim: the attractor is not the subject  # fmt: skip
    (
        "the surgeon in front of the taxi drivers laughs",
        "the surgeon in front of the taxi drivers laugh",
        -1,
        "surgeon",
        "laugh",
    ),  # prep_anim, a plural attractor  # fmt: skip
    ("the movies from the guards are good", "the movies from the guards is good", -2, "movie", "be"),  # prep_inanim
    (
        "the author that likes the guard laughs",
        "the author that likes the guard laugh",
        -1,
        "author",
        "laugh",
    ),  # subj_rel  # fmt: skip
    (
        "The authors that the guards like laugh.",
        "The authors that the guards like laughs.",
        -2,
        "author",
        "laugh",
    ),  # obj_rel_across_anim  # fmt: skip
    (
        "The movies that the guards like interest people.",
        "The movies that the guards like interests people.",
        -2,
        "movie",
        "interest",
    ),  # obj_rel_across_inanim  # fmt: skip
    (
        "the movies the guards like are good",
        "the movies the guards like is good",
        -2,
        "movie",
        "be",
    ),  # obj_rel_no_comp_across_inanim  # fmt: skip
    (
        "the authors that the guards like laugh",
        "the authors that the guards likes laugh",
        -2,
        "guard",
        "like",
    ),  # obj_rel_within_anim: the embedded subject and verb agree  # fmt: skip
    (
        "the movies the taxi drivers like are good",
        "the movies the taxi drivers likes are good",
        -2,
        "taxi driver",
        "like",
    ),  # obj_rel_no_comp_within_inanim  # fmt: skip
]


def _jsonl(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_the_items_of_literal_marvin_linzen_rows(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "ml.jsonl", [{"sentence_good": g, "sentence_bad": b, "label": lab}
                                          for g, b, lab, _, _ in ML_LINES])  # fmt: skip
    rows, rejects = read_template_file(path, "ml_jsonl", "ml_x", "g")
    assert rejects.empty and list(rows.columns) == list(TEMPLATE_COLUMNS)
    assert list(TEMPLATE_COLUMNS)[-2:] == ["subject_item", "verb_item"]  # appended last: the others keep their bytes
    assert rows["subject_item"].tolist() == [s for *_, s, _ in ML_LINES]
    assert rows["verb_item"].tolist() == [v for *_, v in ML_LINES]


def test_a_row_of_no_known_shape_has_no_subject() -> None:
    assert ml_subject("the dog of my neighbour") == ""  # no Marvin & Linzen template has it
    assert ml_subject("The   Authors") == "author"  # case and spacing aside


def test_verb_lemmas_of_agreement_pairs() -> None:
    assert verb_lemma("laughs", "laugh") == verb_lemma("laugh", "laughs") == "laugh"
    assert verb_lemma("was", "were") == verb_lemma("isn't", "aren't") == "be"
    assert verb_lemma("hasn't", "haven't") == "have" and verb_lemma("does", "do") == "do"
    assert verb_lemma("is", "has") == ""  # two verbs
    assert verb_lemma("sings", "sang") == ""  # not a number pair


def test_blimp_and_custom_rows_have_no_subject_and_fall_back(tmp_path: Path) -> None:
    blimp = _jsonl(tmp_path / "b.jsonl", [
        {"sentence_good": "The sketch of those turtles was bothering Kayla.",
         "sentence_bad": "The sketch of those turtles were bothering Kayla."},
    ])  # fmt: skip
    rows, _ = read_template_file(blimp, "blimp_jsonl", "blimp_x", "blimp")
    assert rows[["subject_item", "verb_item"]].values.tolist() == [["", "be"]]
    custom = _jsonl(tmp_path / "c.jsonl", [
        {"sentence_good": "the birds sing", "sentence_bad": "the birds sings"},
        {"sentence_good": "yesterday the bird sang", "sentence_bad": "yesterday the bird sings", "label": "singular"},
    ])  # fmt: skip
    crows, _ = read_custom_pairs(custom, "jsonl", "mine", "mine")
    assert crows[["subject_item", "verb_item"]].values.tolist() == [["", "sing"], ["", ""]]
    both = pd.concat([rows, crows], ignore_index=True)
    clusters = row_clusters(both)
    # no subject: the row's template (group, tab, source); no verb lemma: its verb pair
    assert clusters["subject"].tolist() == ["blimp\tblimp_x", "mine\tmine", "mine\tmine"]
    assert clusters["verb_item"].tolist() == ["be", "sing", "sang/sings"]


# --------------------------------------------------------------------------- planted ground truth

S, V = 40, 16  # subjects, verbs: one row (and one masked context) per (subject, verb)


def _crossed(effect: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, np.ndarray]:
    """S x V rows of one template, row (s, v) correct iff its subject (``effect`` subject) or its verb
    (``effect`` verb) has an odd index: half the clusters of that dimension all 1, half all 0."""
    s, v = np.repeat(np.arange(S), V), np.tile(np.arange(V), S)
    y = ((s if effect == "subject" else v) % 2).astype(float)
    n = S * V
    templates = pd.DataFrame({"group": "g", "source": "t", "correct": "laughs", "incorrect": "laugh",
                              "subject_item": [f"n{i}" for i in s], "verb_item": [f"v{j}" for j in v]})  # fmt: skip
    tse = pd.DataFrame({"row": range(n), "context_id": range(n), "tse": y})
    scores = pd.DataFrame({"context_id": range(n), "plural": False, "ew_top@1": y, "mw_top@1": 0.5 + y / 4})
    return scores, tse, templates, y


def _interval(frame: pd.DataFrame, metric: str) -> tuple[float, float]:
    row = frame[(frame["metric"] == metric) & (frame["side"].isin(["", "top"]))].iloc[0]
    return float(row["ci_low"]), float(row["ci_high"])


def test_a_subject_effect_is_seen_by_the_subject_clusters_and_by_no_verb_cluster() -> None:
    scores, tse, templates, _ = _crossed("subject")
    kw = {"model": "m", "group": "g", "resamples": 2000, "seed": 3, "confidence": 0.95, "templates_group": templates}
    by = {c: summarise(scores, tse, **kw, cluster=c) for c in ("context", "subject", "verb", "subject_and_verb")}
    lo, hi = _interval(by["subject"], "tse")
    want = 2 * Z * math.sqrt(0.25 / S)  # half the subjects all 1: the SE of a mean of S clusters
    assert hi - lo == pytest.approx(want, rel=1 / S / want + 0.05)  # a lattice step and the Monte Carlo error
    # every verb has half its rows right: no verb resample moves the mean
    lo_v, hi_v = _interval(by["verb"], "tse")
    assert lo_v == pytest.approx(0.5, abs=1e-12) and hi_v == pytest.approx(0.5, abs=1e-12)
    # crossed: the verb counts cancel from a mean that only the subjects move (one row per cell)
    lo_sv, hi_sv = _interval(by["subject_and_verb"], "tse")
    assert (lo_sv, hi_sv) == pytest.approx((lo, hi), abs=1e-12)
    # EW: a context is one subject's, so by subject; under verb, one context at a time (as context)
    assert _interval(by["subject"], "ew") == pytest.approx((lo, hi), abs=1e-12)
    assert _interval(by["verb"], "ew") == _interval(by["context"], "ew")
    assert (by["subject_and_verb"]["cluster"] == "subject_and_verb").all() and "cluster" not in by["context"]


def test_a_verb_effect_under_the_crossed_clustering_is_the_verb_streams_interval() -> None:
    """y depends on the verb alone: under subject_and_verb each resample's mean is the verbs' count-weighted
    mean, the verb counts being dimension 1's stream (``stream_seed(seed, 1)``), recomputed here."""
    scores, tse, templates, _ = _crossed("verb")
    kw = {"model": "m", "group": "g", "resamples": 500, "seed": 5, "confidence": 0.9, "templates_group": templates}
    crossed = summarise(scores, tse, **kw, cluster="subject_and_verb")
    w = count_draws.counts(V, 500, stream_seed(5, 1), 100).astype(float)  # [resamples, V]
    lo, hi = percentile_ci((w @ (np.arange(V) % 2)) / w.sum(1), 0.9)
    assert _interval(crossed, "tse") == pytest.approx((lo, hi), abs=1e-12)
    lo_s, hi_s = _interval(summarise(scores, tse, **kw, cluster="subject"), "tse")
    assert lo_s == pytest.approx(0.5, abs=1e-12) and hi_s == pytest.approx(0.5, abs=1e-12)
    assert cluster_dimensions("subject_and_verb") == ["subject", "verb_item"]


# --------------------------------------------------------------------------- paired comparisons


def _durkalski_interval(a: object, b: object, cluster: object, level: float) -> tuple[float, float]:
    """Durkalski's test as a normal test of b - a, by hand: -sum d / n +- z sqrt(sum d^2) / n over the
    clusters' d_k = (a right, b wrong) - (a wrong, b right)."""
    d: dict[object, int] = {}
    a, b, cluster = list(a), list(b), list(cluster)
    for x, y, k in zip(a, b, cluster):
        d[k] = d.get(k, 0) + int(x == 1 and y == 0) - int(x == 0 and y == 1)
    diff = -sum(d.values()) / len(a)
    half = norm.ppf((1 + level) / 2) * math.sqrt(sum(v * v for v in d.values())) / len(a)
    return diff - half, diff + half


def _paired(k: int, per: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """k subjects of ``per`` rows each, in 2 templates; model b gets one more row right than a in every
    subject (rows 0 of each subject: a wrong, b right), the other rows equal."""
    n = k * per
    subj = np.repeat(np.arange(k), per)
    a = np.ones(n)
    a[::per] = 0.0
    templates = pd.DataFrame({"group": "g", "source": np.where(subj < k // 2, "t0", "t1"), "correct": "laughs",
                              "incorrect": "laugh", "subject_item": [f"n{i}" for i in subj],
                              "verb_item": "laugh"})  # fmt: skip
    ta = pd.DataFrame({"row": range(n), "context_id": range(n), "tse": a})
    tb = ta.assign(tse=1.0)
    return ta, tb, templates


def test_durkalski_over_subjects_can_reject_where_two_templates_cannot() -> None:
    k = 20
    ta, tb, templates = _paired(k, 5)
    scores = pd.DataFrame({"context_id": range(len(ta)), "ew_top@1": ta["tse"], "mw_top@1": 0.5})
    scores_b = scores.assign(**{"ew_top@1": 1.0})
    kw = {"resamples": 400, "seed": 1, "confidence": 0.95, "templates": {"g": row_clusters(templates)}}
    rows = {"g": (ta, tb)}
    by_subject = compare_groups("a", "b", rows, {"g": (scores, scores_b)}, cluster="subject", **kw)
    by_template = compare_groups("a", "b", rows, {"g": (scores, scores_b)}, cluster="template", **kw)
    t_s = by_subject[by_subject.metric == "tse"].iloc[0]
    t_t = by_template[by_template.metric == "tse"].iloc[0]
    # each cluster's b_k - c_k: -1 per subject (chi2 = k^2 / k = k), -k/2 per template (chi2 = 2)
    assert t_s.p_value == pytest.approx(chi2.sf(k, 1), rel=1e-12)
    assert t_t.p_value == pytest.approx(chi2.sf(2, 1), rel=1e-12)
    assert t_s.p_value < 0.05 < t_t.p_value and t_s.cluster == "subject"
    # the interval: Durkalski's own (the test that decides the row), by hand
    assert (t_s.ci_low, t_s.ci_high) == pytest.approx(
        _durkalski_interval(ta["tse"], tb["tse"], templates["subject_item"], 0.95), rel=1e-12
    )
    # EW: the contexts weigh their subjects' counts
    ew = by_subject[by_subject.metric == "ew"].iloc[0]
    n = len(ta)
    clusters = Clusters.of(templates["subject_item"], units=mean_of_rows(np.arange(n), n))
    want = paired_mean_difference(scores[["ew_top@1"]].to_numpy(), scores_b[["ew_top@1"]].to_numpy(), 400, 1,
                                  0.95, clusters=clusters)  # fmt: skip
    assert (ew.ci_low, ew.ci_high) == (want[1][0], want[2][0])


def test_the_pooled_row_shares_a_subject_across_groups() -> None:
    """Two groups with the same 20 subjects: the pooled row draws 20 subject clusters (an item is the same
    in every group), where templates are (group, template) clusters."""
    ta, tb, templates = _paired(20, 5)
    scores = pd.DataFrame({"context_id": range(len(ta)), "ew_top@1": ta["tse"], "mw_top@1": 0.5})
    scores_b = scores.assign(**{"ew_top@1": 1.0})
    rc = row_clusters(templates)
    out = compare_groups("a", "b", {"g1": (ta, tb), "g2": (ta, tb)}, {g: (scores, scores_b) for g in ("g1", "g2")},
                         resamples=300, seed=2, confidence=0.95, cluster="subject",
                         templates={"g1": rc, "g2": rc})  # fmt: skip
    pooled = out[(out.group == "all") & (out.metric == "tse")].iloc[0]
    labels = list(templates["subject_item"]) * 2
    assert Clusters.of(labels).sizes == (20,)
    both = np.concatenate([ta["tse"], ta["tse"]]), np.ones(2 * len(ta))
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(_durkalski_interval(*both, labels, 0.95), rel=1e-12)
    assert pooled.p_value == pytest.approx(chi2.sf((20 * 2) ** 2 / (20 * 2**2), 1), rel=1e-12)  # each d_k = -2


def test_compare_reads_the_items_of_templates_parquet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``verbeval compare``'s reader, in process: the items come from the run's templates.parquet; one
    written before them is refused with one line naming the way out."""
    ta, tb, templates = _paired(10, 4)
    table = templates.assign(line=range(1, len(templates) + 1), left="the x", right="", label="singular",
                             plural=False, pair_id="", note="")  # fmt: skip
    table[list(TEMPLATE_COLUMNS)].to_parquet(tmp_path / "templates.parquet")
    table.drop(columns=["subject_item", "verb_item"]).to_parquet(tmp_path / "old.parquet")
    for name, t in (("a", ta), ("b", tb)):
        (tmp_path / name / "g").mkdir(parents=True)
        t.to_parquet(tmp_path / name / "g" / "tse.parquet")
        pd.DataFrame(
            {"context_id": t["context_id"], "plural": False, "ew_top@1": t["tse"], "mw_top@1": 0.5}
        ).to_parquet(tmp_path / name / "g" / "scores.parquet")
    dirs = {m: tmp_path / m for m in ("a", "b")}
    kw = {"resamples": 200, "seed": 0, "confidence": 0.95}
    with caplog.at_level(logging.WARNING):
        out = comparisons([("configured", "a", "b")], dirs, ["g"], **kw, cluster="verb",
                          templates={m: tmp_path / "templates.parquet" for m in dirs})  # fmt: skip
    # one verb: Durkalski's test and the TSE interval are not defined; EW and MW as under context
    assert "group 'g': 1 verb: a clustered interval needs at least 2 (agreement.bootstrap.cluster), so its TSE " \
           "comparison's test is not defined" in caplog.text  # fmt: skip
    tse = out[out.metric == "tse"].iloc[0]
    assert np.isnan(tse.p_value) and np.isnan(tse.ci_low) and (out["cluster"] == "verb").all()
    plain = comparisons([("configured", "a", "b")], dirs, ["g"], **kw, cluster="context",
                        templates={m: tmp_path / "templates.parquet" for m in dirs})  # fmt: skip
    for m in ("ew", "mw"):
        got, want = out[out.metric == m].iloc[0], plain[plain.metric == m].iloc[0]
        assert (got.ci_low, got.ci_high) == (want.ci_low, want.ci_high)
    out = comparisons([("configured", "a", "b")], dirs, ["g"], **kw, cluster="subject_and_verb",
                      templates={m: tmp_path / "templates.parquet" for m in dirs})  # fmt: skip
    assert out[out.metric == "tse"].iloc[0].p_value == pytest.approx(chi2.sf(10, 1), rel=1e-12)
    with pytest.raises(MismatchError) as e:
        comparisons([("configured", "a", "b")], dirs, ["g"], **kw, cluster="subject",
                    templates={m: tmp_path / "old.parquet" for m in dirs})  # fmt: skip
    assert str(e.value) == (
        "group 'g': agreement.bootstrap.cluster subject needs the rows' subjects (a templates.parquet written "
        "before verbeval recovered them: rerun `verbeval templates`)"
    )
