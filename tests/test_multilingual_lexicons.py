"""The verb lexicons of the multilingual study (verbeval.multilingual.lexicons): French, German and
Russian, each built from its pinned package (the ``multilingual`` extra). No network, nothing
written; the CLAMS verb pairs below are copied by hand from the CLAMS evaluation sets (the data
mirror's ``clams/raw/<commit>/{fr,de,ru}_evalset/*.txt``), so the tests need no ../shared."""

from __future__ import annotations

import importlib
from importlib import metadata

import pandas as pd
import pytest

from verbeval.core.errors import VerbevalError
from verbeval.multilingual import lexicons
from verbeval.multilingual.lexicons import (
    LANGUAGE_MODULES,
    LEXICON_COLUMNS,
    language_lexicon,
    language_source,
    pair_forms,
)

LANGS = ("fr", "de", "ru")

# rows, lemmas and the source's own verb count, measured on the pinned releases (a build that
# differs has changed: another release, or the module's rules)
SIZES = {
    # DELA: 12,014 one-word verb lemmas, of which 11,940 have both P3s and P3p
    "fr": {"rows": 12_008, "lemmas": 11_940, "source": 12_014},
    # console-conjugator: 7,073 infinitives; separable and multi-word verbs left out
    "de": {"rows": 5_175, "lemmas": 5_165, "source": 7_073},
    # OpenCorpora via pymorphy3: 30,937 infinitives; every lemma kept
    "ru": {"rows": 109_689, "lemmas": 30_812, "source": 30_937},
}
RU_CELLS = {"past_f": 30_871, "past_m": 30_983, "past_n": 30_870, "pres": 16_965}

# (lemma, sing, plur, cell), checked by hand against a grammar
HAND_CHECKED = {
    "fr": [
        ("être", "est", "sont", "pres"),
        ("avoir", "a", "ont", "pres"),
        ("aller", "va", "vont", "pres"),
        ("faire", "fait", "font", "pres"),
        ("pouvoir", "peut", "peuvent", "pres"),
        ("vouloir", "veut", "veulent", "pres"),
        ("manger", "mange", "mangent", "pres"),
        ("savoir", "sait", "savent", "pres"),
        ("venir", "vient", "viennent", "pres"),
        ("prendre", "prend", "prennent", "pres"),
        ("payer", "paie", "paient", "pres"),
        ("payer", "paye", "payent", "pres"),
    ],
    "de": [
        ("sein", "ist", "sind", "pres"),
        ("haben", "hat", "haben", "pres"),
        ("werden", "wird", "werden", "pres"),
        ("können", "kann", "können", "pres"),
        ("mögen", "mag", "mögen", "pres"),
        ("wissen", "weiß", "wissen", "pres"),
        ("lieben", "liebt", "lieben", "pres"),
        ("nehmen", "nimmt", "nehmen", "pres"),
        ("laufen", "läuft", "laufen", "pres"),
        ("tun", "tut", "tun", "pres"),
        ("aalen", "aalt", "aalen", "pres"),  # reflexive: "er aalt sich"
        ("backen", "bäckt", "backen", "pres"),  # both spellings of the table
        ("backen", "backt", "backen", "pres"),
    ],
    "ru": [
        ("ждать", "ждёт", "ждут", "pres"),
        ("ждать", "ждал", "ждали", "past_m"),
        ("ждать", "ждала", "ждали", "past_f"),
        ("ждать", "ждало", "ждали", "past_n"),
        ("быть", "был", "были", "past_m"),
        ("быть", "была", "были", "past_f"),
        ("быть", "было", "были", "past_n"),
        ("идти", "идёт", "идут", "pres"),
        ("идти", "шёл", "шли", "past_m"),
        ("идти", "шла", "шли", "past_f"),
        ("есть", "ест", "едят", "pres"),
        ("хотеть", "хочет", "хотят", "pres"),
        ("мочь", "может", "могут", "pres"),
        ("мочь", "мог", "могли", "past_m"),
        ("бежать", "бежит", "бегут", "pres"),
        ("жениться", "женится", "женятся", "pres"),
        ("написать", "написало", "написали", "past_n"),
    ],
}

# (sing, plur, cell): the verb pairs of the CLAMS sets, the first word that differs between a True
# sentence and its False twin (all of them that are verbs; Russian's other differing words are
# adjectives: большой/большие, маленький/маленькие, молодой/молодые, старый/старые)
CLAMS_PAIRS = {
    "fr": [
        ("est", "sont", "pres"),
        ("a", "ont", "pres"),
        ("admire", "admirent", "pres"),
        ("aime", "aiment", "pres"),
        ("connaît", "connaissent", "pres"),
        ("déménage", "déménagent", "pres"),
        ("déteste", "détestent", "pres"),
        ("parle", "parlent", "pres"),
        ("préfère", "préfèrent", "pres"),
        ("retourne", "retournent", "pres"),
        ("écrit", "écrivent", "pres"),
        ("évite", "évitent", "pres"),
    ],
    "de": [
        ("ist", "sind", "pres"),
        ("hasst", "hassen", "pres"),
        ("lacht", "lachen", "pres"),
        ("mag", "mögen", "pres"),
        ("schreibt", "schreiben", "pres"),
        ("schwimmt", "schwimmen", "pres"),
        ("sieht", "sehen", "pres"),
        ("spricht", "sprechen", "pres"),
        ("verehrt", "verehren", "pres"),
        ("vermeidet", "vermeiden", "pres"),
    ],
    "ru": [
        ("говорит", "говорят", "pres"),
        ("ждал", "ждали", "past_m"),
        ("занимается", "занимаются", "pres"),
        ("знает", "знают", "pres"),
        ("ищет", "ищут", "pres"),
        ("любит", "любят", "pres"),
        ("пишет", "пишут", "pres"),
        ("понимает", "понимают", "pres"),
        ("предпочитает", "предпочитают", "pres"),
        ("хочет", "хотят", "pres"),
        ("читает", "читают", "pres"),
    ],
}


@pytest.fixture(scope="module")
def built() -> dict[str, pd.DataFrame]:
    """Each language's lexicon, built once for the module."""
    return {lang: language_lexicon(lang) for lang in LANGS}


@pytest.mark.parametrize("lang", LANGS)
def test_table_shape_and_size(built, lang):
    df = built[lang]
    assert tuple(df.columns) == LEXICON_COLUMNS
    assert all(pd.api.types.is_string_dtype(df[c]) for c in LEXICON_COLUMNS)
    assert list(df.index) == list(range(len(df)))
    assert len(df) == SIZES[lang]["rows"]
    assert df["lemma"].nunique() == SIZES[lang]["lemmas"]
    assert set(df["cell"]) == set(language_source(lang).cells)
    assert set(df["source"]) == {language_source(lang).requirement}
    assert (df["sing"] != df["plur"]).all()
    assert not df.duplicated(["cell", "sing", "plur"]).any()
    assert (df == df.sort_values(["cell", "lemma", "sing", "plur"]).reset_index(drop=True)).all().all()
    for col in ("lemma", "sing", "plur"):
        assert (df[col] == df[col].str.lower()).all() and (df[col].str.strip() != "").all()
        assert not df[col].str.contains(" ").any()


def test_russian_cells(built):
    assert built["ru"]["cell"].value_counts().to_dict() == RU_CELLS


@pytest.mark.parametrize("lang", LANGS)
def test_build_is_deterministic(built, lang):
    again = language_lexicon(lang)
    assert again.to_csv(index=False).encode() == built[lang].to_csv(index=False).encode()


@pytest.mark.parametrize("lang", LANGS)
def test_source_lemma_count(lang):
    module = importlib.import_module(LANGUAGE_MODULES[lang])
    assert module.source_lemma_count() == SIZES[lang]["source"]


@pytest.mark.parametrize("lang", LANGS)
def test_hand_checked_rows(built, lang):
    rows = set(built[lang][["lemma", "sing", "plur", "cell"]].itertuples(index=False, name=None))
    missing = [r for r in HAND_CHECKED[lang] if r not in rows]
    assert not missing


@pytest.mark.parametrize("lang", LANGS)
def test_clams_verb_pairs_are_in_the_lexicon(built, lang):
    rows = set(built[lang][["sing", "plur", "cell"]].itertuples(index=False, name=None))
    missing = [p for p in CLAMS_PAIRS[lang] if p not in rows]
    assert not missing
    # the direction matters: no CLAMS pair stands the other way round
    assert not [p for p in CLAMS_PAIRS[lang] if (p[1], p[0], p[2]) in rows]


def test_russian_keeps_yo(built):
    """The dictionary's ё stays, as the CLAMS Russian sets write it (режиссёр)."""
    ru = built["ru"]
    assert ((ru["sing"] == "ждёт") & (ru["plur"] == "ждут")).any()
    assert not (ru["sing"] == "ждет").any()


def test_russian_perfective_non_past_left_out(built):
    ru = built["ru"]
    assert not (ru["sing"] == "напишет").any()
    assert ((ru["lemma"] == "написать") & (ru["cell"] == "past_m")).any()


@pytest.mark.parametrize("lang", LANGS)
def test_source_is_pinned(lang):
    source = language_source(lang)
    assert source.language == lang
    assert len(source.sha256) == 64 and int(source.sha256, 16) >= 0
    assert source.url.startswith("https://pypi.org/project/") and source.version in source.url
    assert source.licence
    assert metadata.version(source.package) == source.version


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("installed", ["0.0.1", None])
def test_other_or_missing_release_is_refused(monkeypatch, lang, installed):
    source = language_source(lang)

    def version(name: str) -> str:
        if installed is None:
            raise metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(lexicons.metadata, "version", version)
    module = importlib.import_module(LANGUAGE_MODULES[lang])
    for call in (module.build_lexicon, module.source_lemma_count):
        with pytest.raises(VerbevalError) as err:
            call()
        message = str(err.value)
        assert "\n" not in message
        assert "pip install" in message
        # the first package checked is named with its exact pin
        assert any(f"'{s.requirement}'" in message for s in (source, getattr(module, "ANALYZER", source)))
        assert ("not installed" if installed is None else "is 0.0.1") in message


def test_unknown_language():
    with pytest.raises(VerbevalError, match="no verb lexicon for language 'xx'"):
        language_lexicon("xx")


def test_registry_names_every_language():
    assert set(LANGUAGE_MODULES) >= {"fr", "de", "ru", "he"}
    for lang in LANGS:
        assert LANGUAGE_MODULES[lang] == f"verbeval.multilingual.lexicons.{lang}"


def test_pair_forms():
    assert pair_forms(["mange"], ["mangent"]) == [("mange", "mangent")]
    assert pair_forms(["paie", "paye"], ["paient", "payent"]) == [("paie", "paient"), ("paye", "payent")]
    assert pair_forms(["backt", "bäckt"], ["backen"]) == [("backt", "backen"), ("bäckt", "backen")]
    assert pair_forms([], ["x"]) == []
