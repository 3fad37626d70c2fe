"""Tests for verbeval.core.config: schema validation, defaults, one-line errors, model entries."""

from __future__ import annotations

import copy
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from verbeval.core.config import load_config, load_schema, validate_config
from verbeval.core.errors import VerbevalError
from verbeval.core.model_entries import model_entries

REPO_ROOT = Path(__file__).resolve().parent.parent
MINIMAL: dict[str, Any] = {"models": [{"id": "gpt2"}]}


def _one_line_error(cfg: dict[str, Any]) -> str:
    with pytest.raises(VerbevalError) as exc:
        validate_config(cfg, "cfg.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("cfg.yaml: ")
    return msg


def test_repo_configs_validate() -> None:
    default = load_config(REPO_ROOT / "config" / "config.yaml")
    assert [m["id"] for m in default["models"]] == [
        "bert-large-cased",
        "bert-large-uncased",
        "roberta-large",
        "gpt2-xl",
    ]
    assert default["agreement"]["chunks"] == 4
    ci = load_config(REPO_ROOT / ".test" / "config" / "ci.yaml")
    assert [m["name"] for m in model_entries(ci)] == [
        "tiny-bert-cased",
        "tiny-gpt2",
        "tiny-mistral",
        "tiny-gpt-neox",
        "tiny-olmo2",
    ]
    assert ci["agreement"]["chunks"] == 2 and ci["inference"]["device"] == "cpu"
    assert ci["data_mirror"] is None  # given on the command line or in the environment, never ../shared
    # keys ci.yaml leaves out come from the schema defaults
    assert ci["agreement"]["top_cutoffs"] == default["agreement"]["top_cutoffs"]
    assert ci["agreement"]["bootstrap"]["confidence"] == 0.95
    assert ci["inference"]["top_k"] == 10


def test_defaults_are_filled() -> None:
    cfg = validate_config(copy.deepcopy(MINIMAL))
    agr = cfg["agreement"]
    assert agr["chunks"] == 4
    assert agr["groups"] is None
    assert agr["top_cutoffs"] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 1.0]
    assert agr["bottom_cutoffs"] == [0.5, 0.1, 0.01, 0.001, 0.0001, 0.00001, 0.000001]
    assert agr["bootstrap"] == {"resamples": 1000, "seed": 0, "confidence": 0.95, "cluster": "context"}
    assert cfg["inference"] == {
        "device": "auto",
        "batch_size": "auto",
        "threads": 2,
        "top_k": 10,
        "allow_nonfinite": False,
        "gpus": 1,
        "revisions_per_job": 64,
        "gpu_queue": True,
        "post_workers": 2,
    }
    assert cfg["data_mirror"] is None and cfg["results_dir"] == "results"
    assert cfg["models"][0] == {
        "id": "gpt2",
        "revision": None,
        "kind": "auto",
        "dtype": "float32",
        "prepend_bos": None,
        "device_map": None,
        "gpus": 1,
        "random_init": None,
    }
    # given values are kept; nested defaults are still filled next to them
    cfg = validate_config({"models": [{"id": "gpt2"}], "agreement": {"chunks": 2, "bootstrap": {"seed": 3}}})
    assert cfg["agreement"]["chunks"] == 2
    assert cfg["agreement"]["bootstrap"] == {"resamples": 1000, "seed": 3, "confidence": 0.95, "cluster": "context"}
    # defaults are copies, not shared between configs
    a = validate_config(copy.deepcopy(MINIMAL))
    b = validate_config(copy.deepcopy(MINIMAL))
    a["agreement"]["top_cutoffs"].append(0.99)
    assert b["agreement"]["top_cutoffs"][-1] == 1.0
    assert load_schema()["properties"]["agreement"]["properties"]["top_cutoffs"]["default"][-1] == 1.0


def test_unknown_key() -> None:
    msg = _one_line_error({**MINIMAL, "modles": []})
    assert "<top level>" in msg and "'modles'" in msg
    msg = _one_line_error({**MINIMAL, "agreement": {"chunkz": 3}})
    assert "agreement" in msg and "'chunkz'" in msg
    msg = _one_line_error({"models": [{"id": "gpt2", "revison": "main"}]})
    assert "models.0" in msg and "'revison'" in msg


def test_misspelt_key_suggests_the_right_one() -> None:
    msg = _one_line_error({**MINIMAL, "agreemnt": {}})
    assert msg.endswith("('agreemnt' was unexpected) (did you mean `agreement`?)")
    msg = _one_line_error({**MINIMAL, "inference": {"devcie": "cpu"}})
    assert msg.endswith("(did you mean `device`?)")
    assert "did you mean" not in _one_line_error({**MINIMAL, "zzzzzz": 1})  # nothing close: no guess


def test_agreement_settings_that_select_nothing_or_lose_table2() -> None:
    msg = _one_line_error({**MINIMAL, "agreement": {"groups": []}})
    assert msg == (
        "cfg.yaml: agreement.groups: [] selects no group and agreement.custom_groups is empty, so there "
        "is nothing to evaluate: list group ids, or null for all"
    )
    # [] with custom groups runs only those
    validate_config({**MINIMAL, "agreement": {"groups": [], "custom_groups": [{"id": "mine", "path": "p.jsonl"}]}})
    msg = _one_line_error({**MINIMAL, "agreement": {"top_cutoffs": [0.5, 0.9]}})
    assert msg == (
        "cfg.yaml: agreement.top_cutoffs: [0.5, 0.9] lacks 1.0: Table 2 reports EW and MW at top-p 1.0 "
        "(the whole vocabulary); add 1.0"
    )
    validate_config({**MINIMAL, "agreement": {"top_cutoffs": [0.5, 1]}})


def test_wrong_type() -> None:
    msg = _one_line_error({**MINIMAL, "agreement": {"chunks": "four"}})
    assert "agreement.chunks" in msg and "'four'" in msg and "integer" in msg
    msg = _one_line_error({**MINIMAL, "agreement": {"chunks": 0}})
    assert "agreement.chunks" in msg
    msg = _one_line_error({**MINIMAL, "agreement": {"top_cutoffs": [0.5, 1.5]}})
    assert "agreement.top_cutoffs.1" in msg
    msg = _one_line_error({**MINIMAL, "inference": {"batch_size": 1.5}})
    assert "inference.batch_size" in msg
    msg = _one_line_error({"models": [{"id": "gpt2", "dtype": "float64"}]})
    assert "models.0.dtype" in msg and "float64" in msg
    msg = _one_line_error({"models": []})
    assert "models" in msg
    msg = _one_line_error({})
    assert "'models'" in msg


def test_duplicate_model_names() -> None:
    msg = _one_line_error({"models": [{"id": "gpt2"}, {"id": "gpt2", "revision": "abc"}]})
    assert "duplicated: gpt2" in msg and "name" in msg
    msg = _one_line_error({"models": [{"id": "org/m"}, {"id": "other", "name": "org--m"}]})
    assert "duplicated: org--m" in msg
    # distinct explicit names make the same id usable twice
    cfg = validate_config({"models": [{"id": "gpt2"}, {"id": "gpt2", "revision": "abc", "name": "gpt2-abc"}]})
    assert [m["name"] for m in model_entries(cfg)] == ["gpt2", "gpt2-abc"]


def test_model_entries_names_and_defaults() -> None:
    cfg = validate_config(
        {
            "models": [
                {"id": "org/model"},
                {"id": "./models/x"},
                {"id": "/abs/path/to/y/"},
                {"id": "../up/z"},
                {"id": "org/model", "name": "mine", "batch_size": 8},
                {"id": "bert-base-cased"},
            ],
            "inference": {"batch_size": 16},
        }
    )
    entries = model_entries(cfg)
    assert [m["name"] for m in entries] == ["org--model", "x", "y", "z", "mine", "bert-base-cased"]
    assert [m["batch_size"] for m in entries] == [16, 16, 16, 16, 8, 16]
    assert entries[0]["kind"] == "auto" and entries[0]["dtype"] == "float32" and entries[0]["revision"] is None
    assert entries[4]["id"] == "org/model"


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(VerbevalError, match="cannot read config") as exc:
        load_config(tmp_path / "missing.yaml")
    assert "\n" not in str(exc.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [\n")
    with pytest.raises(VerbevalError, match=r"bad\.yaml:2: invalid YAML: expected the node content") as exc:
        load_config(bad)
    assert "\n" not in str(exc.value)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(VerbevalError, match="must be a mapping"):
        load_config(lst)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({"models": [{"id": "gpt2"}], "agreement": {"chunks": "x"}}))
    with pytest.raises(VerbevalError, match=rf"{wrong.name}: invalid value at agreement.chunks"):
        load_config(wrong)


def test_dtype_tf32_is_accepted_and_any_other_name_is_the_schemas_error() -> None:
    """``tf32`` (float32 weights, TF32 matrix products) beside float32, float16 and bfloat16, for a model
    and for the precision audit's flip sets; float32 stays the default."""
    cfg = validate_config(
        {
            "models": [{"id": "gpt2", "dtype": "tf32"}, {"id": "x"}],
            "agreement": {"precision_audit": {"dtypes": ["tf32"]}},
        }
    )
    assert [m["dtype"] for m in model_entries(cfg)] == ["tf32", "float32"]
    assert cfg["agreement"]["precision_audit"]["dtypes"] == ["tf32"]
    assert _one_line_error({"models": [{"id": "gpt2", "dtype": "tf16"}]}) == (
        "cfg.yaml: invalid value at models.0.dtype: 'tf16' is not one of ['float32', 'float16', 'bfloat16', 'tf32']"
    )
    assert _one_line_error({**MINIMAL, "agreement": {"precision_audit": {"dtypes": ["TF32"]}}}) == (
        "cfg.yaml: invalid value at agreement.precision_audit.dtypes.0: "
        "'TF32' is not one of ['float32', 'float16', 'bfloat16', 'tf32']"
    )


def test_schema_is_shipped_in_the_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-editable install must carry the config schema (the Snakefile and the CLI load it). The wheel
    is built in process by the hook that ``pip wheel --no-build-isolation`` calls (PEP 517, setuptools)."""
    import logging

    from setuptools import build_meta

    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT / "src", src, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        if (REPO_ROOT / name).exists():
            shutil.copy(REPO_ROOT / name, tmp_path / name)
    dist = tmp_path / "dist"
    dist.mkdir()
    monkeypatch.chdir(tmp_path)  # the hook builds the project in the working directory
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    try:
        wheel = dist / build_meta.build_wheel(str(dist))
    finally:  # setuptools sets the root logger's level (distutils' threshold) and may add handlers
        root.setLevel(level)
        root.handlers[:] = handlers
    assert wheel.name.startswith("verbeval-") and wheel.suffix == ".whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "verbeval/schemas/config.schema.yaml" in names, sorted(n for n in names if not n.endswith(".py"))


def test_a_models_entry_takes_each_default_from_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key a ``models`` entry leaves out gets the schema's default, written only there: a new
    per-model key with a default needs no second default in model_entries."""
    import copy

    from verbeval.core import schema
    from verbeval.core.model_entries import model_entries

    [m] = model_entries({"models": [{"id": "gpt2"}]})
    assert (m["kind"], m["dtype"], m["gpus"], m["revision"], m["prepend_bos"]) == ("auto", "float32", 1, None, None)
    assert (m["gguf_file"], m["pip"], m["batch_size"]) == (None, None, "auto")

    changed = copy.deepcopy(schema._schema())
    props = changed["properties"]["models"]["items"]["properties"]
    props["dtype"]["default"] = "bfloat16"
    props["new_key"] = {"type": "integer", "default": 7}
    changed["properties"]["inference"]["properties"]["batch_size"]["default"] = 32
    monkeypatch.setattr(schema, "_schema", lambda: changed)
    [m] = model_entries({"models": [{"id": "gpt2"}]})
    assert (m["dtype"], m["new_key"], m["batch_size"]) == ("bfloat16", 7, 32)
