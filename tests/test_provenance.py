"""Randomly initialised models: how verbeval knows (verbeval.core.provenance), what the inference job
records, and that the report captions name them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from verbeval.core.provenance import (
    RANDOM_INIT_MARKER,
    display_name,
    is_random_init,
    marked,
    random_flags,
    random_init_record,
    random_note,
    resolve_random_init,
    with_random_field,
    with_random_init,
)

REPO = Path(__file__).resolve().parent.parent


def test_marker_decides_and_the_config_overrides(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / RANDOM_INIT_MARKER).write_text(json.dumps({"arch": "gpt2", "seed": 3, "tokenizer": "gpt2"}))
    assert RANDOM_INIT_MARKER == "verbeval_tiny.json"  # the name every verbeval version has written
    assert is_random_init(tiny) and not is_random_init(plain)
    assert random_init_record(tiny) == {"arch": "gpt2", "seed": 3, "tokenizer": "gpt2"}
    assert random_init_record(plain) is None
    # hub ids and missing folders are never random by themselves
    assert not is_random_init("HuggingFaceTB/SmolLM2-135M-Instruct") and not is_random_init(tmp_path / "missing")
    # an unreadable marker still marks the model
    (plain / RANDOM_INIT_MARKER).write_text("{not json")
    assert random_init_record(plain) == {} and is_random_init(plain)
    # the config's random_init wins either way
    assert resolve_random_init(tiny) and not resolve_random_init(tiny, False)
    assert resolve_random_init("gpt2", True) and not resolve_random_init("gpt2")


def test_labels() -> None:
    assert marked("m", True) == "m†" and marked("m", False) == "m"
    assert display_name("m", True) == "m (random init)" and display_name("m", False) == "m"
    assert random_note([]) is None
    assert random_note(["a", "b"]) == "† randomly initialised, so the numbers are meaningless: a, b."
    assert random_note(["a"], mark="") == "Randomly initialised, so the numbers are meaningless: a."
    import pandas as pd

    frame = pd.DataFrame({"model": ["a", "a", "b"], "random_init": [False, True, False]})
    assert random_flags(frame) == {"a": True, "b": False}
    assert random_flags(frame.drop(columns="random_init")) == {}  # written by an older verbeval
    # as read back from a CSV with missing values: text and NaN
    text = pd.DataFrame({"model": ["a", "b", "c"], "random_init": ["True", "False", float("nan")]})
    assert random_flags(text) == {"a": True, "b": False, "c": False}


def test_data_files_get_a_random_init_column_and_field() -> None:
    """with_random_init: a last boolean column per row's model (or one flag for a per-model file), in
    place when the table has one; with_random_field: a field in each model's JSON record."""
    import pandas as pd

    frame = pd.DataFrame({"model": ["a", "b", "c"], "value": [0.5, 0.6, 0.7]})
    flagged = with_random_init(frame, {"a": True, "b": False})
    assert list(flagged.columns) == ["model", "value", "random_init"] and flagged["random_init"].dtype == bool
    assert flagged["random_init"].tolist() == [True, False, False]  # c: not listed, not random
    assert "random_init" not in frame.columns  # the caller's table is left as it was
    assert with_random_init(frame[["value"]], True)["random_init"].tolist() == [True] * 3
    again = with_random_init(flagged.assign(n=1), {"b": True})
    assert list(again.columns) == ["model", "value", "random_init", "n"]
    assert again["random_init"].tolist() == [False, True, False]
    assert with_random_init(frame.iloc[:0], True).to_csv(index=False) == "model,value,random_init\n"
    records = {"a": {"n": 1}, "b": {"n": 2}}
    assert with_random_field(records, {"a": True}) == {
        "a": {"n": 1, "random_init": True},
        "b": {"n": 2, "random_init": False},
    }
    assert records == {"a": {"n": 1}, "b": {"n": 2}}


def test_tiny_model_is_marked_and_the_inference_manifest_records_it(
    tokenizer_path: Callable[[str], Path], tmp_path: Path
) -> None:
    """verbeval tiny-model writes the marker; infer records meta.random_init (true from the marker,
    false with --random-init false) without changing any shard."""
    import pandas as pd

    from verbeval.cli import main

    model = tmp_path / "tiny"
    assert (
        main(["-q", "tiny-model", "--tokenizer", str(tokenizer_path("gpt2")), "--arch", "gpt2", "--out", str(model)])
        == 0
    )
    assert random_init_record(model) == {"arch": "gpt2", "seed": 0, "layers": 2, "hidden": 32, "tokenizer": "gpt2"}
    templates = pd.DataFrame(
        {
            "group": "g",
            "source": "x",
            "line": [1, 2],
            "left": ["the dog", "the dogs"],
            "right": ["", ""],
            "correct": ["is", "are"],
            "incorrect": ["are", "is"],
            "label": ["singular", "plural"],
            "plural": [False, True],
        }
    )
    templates.to_parquet(tmp_path / "templates.parquet")
    lexicon = pd.DataFrame({"lemma": ["be", "run"], "sing": ["is", "runs"], "plur": ["are", "run"], "source": "test"})
    lexicon.to_parquet(tmp_path / "lexicon.parquet")
    assert (
        main(
            [
                "-q",
                "lemmas",
                "--model",
                str(model),
                "--lexicon",
                str(tmp_path / "lexicon.parquet"),
                "--out",
                str(tmp_path / "lemmas.parquet"),
            ]
        )
        == 0
    )
    manifest = tmp_path / "store" / "manifest.json"
    base = [
        "-q",
        "infer",
        "--model",
        str(model),
        "--device",
        "cpu",
        "--threads",
        "1",
        "--templates",
        str(tmp_path / "templates.parquet"),
        "--lemmas",
        str(tmp_path / "lemmas.parquet"),
        "--groups",
        "g",
        "--n-chunks",
        "1",
        "--no-progress",
        "--manifest",
        str(manifest),
    ]
    assert main(base) == 0
    first = json.loads(manifest.read_text())
    assert first["meta"]["random_init"] is True
    manifest.unlink()
    assert main([*base, "--random-init", "false"]) == 0
    second = json.loads(manifest.read_text())
    assert second["meta"]["random_init"] is False
    assert second["shards"] == first["shards"]  # not part of a shard's key or content


def _caption(name: str, random_models: str) -> str:
    """A report caption rendered as Snakemake renders it (jinja2, then reStructuredText to HTML); ``name``
    is the caption file's stem, or ``FILE:STEM`` for a caption shared by the jobs of one rule (wildcard stem)."""
    import yaml
    from docutils.core import publish_parts
    from jinja2 import Environment

    from verbeval.core.config import validate_config

    config = validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    name, _, stem = name.partition(":")
    snakemake = SimpleNamespace(
        config=config, params=SimpleNamespace(random_models=random_models), wildcards=SimpleNamespace(stem=stem)
    )
    text = (
        Environment(trim_blocks=True, lstrip_blocks=True)
        .from_string((REPO / "workflow" / "report" / f"{name}.rst").read_text())
        .render(snakemake=snakemake)
    )
    return publish_parts(text, writer="html", settings_overrides={"report_level": 2, "halt_level": 2})["body"]


CAPTIONS = [
    "table2",
    "cutoff_figures:fig1_top_p",
    "cutoff_figures:fig2_bottom_p",
    "cutoff_figures:fig3_prob_counted",
    "cutoff_figures:fig4_invalid",
    "model_comparison",
    "checkpoints",
    "lemma_accuracy",
    "worst_lemmas",
    "table3_topk",
    "simverb_table",
    "simverb_layers",
    "simverb_scatter",
    "veridicality_signatures",
    "veridicality_scatter",
    "lexicon_modes",
]


@pytest.mark.parametrize("name", CAPTIONS)
def test_report_captions_name_the_random_models(name: str) -> None:
    html = _caption(name, "quick-bert, quick-gpt2")
    assert "Randomly initialised models, whose numbers are meaningless:</strong> quick-bert, quick-gpt2" in html
    assert "andomly initialised" not in _caption(name, "")


def test_workflow_knows_the_quick_start_models_are_random(ci_rules: object) -> None:
    """config/quick.yaml's tiny BERT is built by the workflow (tiny_models): random before it exists;
    its real SmolLM2 (a pip-packaged GGUF) is not."""
    rules = ci_rules  # type: ignore[assignment]
    expected = "quick-bert"
    for rule in ("table2", "figure_cutoffs", "figure_models", "figure_lemmas", "table3"):
        assert rules.get_rule(rule).params.random_models == expected, rule  # type: ignore[attr-defined]
    assert rules.get_rule("infer").shellcmd.startswith("verbeval run-model --model {params.model:q}")  # type: ignore[attr-defined]
    plan = rules.globals["PLAN"]  # type: ignore[attr-defined]
    for name, flag in (("quick-bert", "auto"), ("smollm2-135m", "auto")):  # auto: the model records it
        argv = plan.model_steps.argv("run-model", name)
        assert argv[argv.index("--random-init") + 1] == flag, name
