"""What a model id names (:class:`verbeval.core.model_ids.ModelRef`): path or hub id, its location
and file-system name, and why a local model cannot be loaded, with the exact messages."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from verbeval.core.errors import VerbevalError
from verbeval.core.model_ids import ModelRef


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory with ``models/tiny`` (a saved model), ``models/half`` (no
    config.json), ``models/smol`` (GGUF files only), a file ``afile``, and HOME at ``home/`` holding
    ``home/m`` (a saved model)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for folder in ("models/tiny", "models/half", "models/smol", "home/m"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "models/tiny/config.json").write_text("{}")
    (tmp_path / "home/m/config.json").write_text("{}")
    for name in ("b.gguf", "a.gguf", "c.gguf", "d.gguf"):
        (tmp_path / "models/smol" / name).write_text("x")
    (tmp_path / "afile").write_text("x")
    return tmp_path


def test_a_model_ref_is_a_frozen_value() -> None:
    ref = ModelRef("org/model")
    assert ref == ModelRef("org/model") and hash(ref) == hash(ModelRef("org/model"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.id = "gpt2"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("model_id", "written"),
    [
        ("/abs/m", True),
        ("./m", True),
        ("../m", True),
        ("~/m", True),
        ("~", True),
        ("gpt2", False),
        ("org/model", False),
        ("models/tiny", False),
        (".m", False),
        ("a/b/c", False),
    ],
)
def test_written_as_path(model_id: str, written: bool) -> None:
    assert ModelRef(model_id).written_as_path is written


def test_location_expands_the_home_folder_only(here: Path) -> None:
    assert ModelRef("~/m").location == str(here / "home/m")
    assert ModelRef("~").location == str(here / "home")
    assert ModelRef("./models/tiny").location == "./models/tiny"
    assert ModelRef("org/model").location == "org/model"


def test_is_dir_is_an_existing_local_folder(here: Path) -> None:
    assert ModelRef("models/tiny").is_dir and ModelRef("./models/tiny").is_dir and ModelRef("~/m").is_dir
    assert ModelRef(str(here / "models/half")).is_dir
    assert not ModelRef("afile").is_dir and not ModelRef("./gone").is_dir and not ModelRef("org/model").is_dir


@pytest.mark.parametrize(
    ("model_id", "meant"),
    [
        ("./gone", True),
        ("/nonexistent/m", True),
        ("~/gone", True),
        ("../gone", True),  # written as a path
        ("models/tiny", True),
        ("models/tiny/", True),
        ("afile", False),  # an existing directory (a file is not)
        ("a/b/c", True),
        ("org/model/x", True),  # more than one '/'
        ("models/gone", True),  # A/B with a local A/ folder
        ("org/model", False),
        ("org/model/", False),
        ("gpt2", False),
        ("afile/x", False),  # hub ids
    ],
)
def test_meant_as_path(here: Path, model_id: str, meant: bool) -> None:
    assert ModelRef(model_id).meant_as_path is meant


def test_a_b_is_a_hub_id_until_a_local_a_folder_appears(here: Path) -> None:
    assert not ModelRef("org/model").meant_as_path
    assert ModelRef("org/model").local_problem() is None
    (here / "org").mkdir()
    assert ModelRef("org/model").meant_as_path
    assert ModelRef("org/model").local_problem() == (
        "local path org/model does not exist (read as a path because ./org is a local folder; a hub id is NAME "
        "or ORG/NAME)"
    )


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        ("gpt2", "gpt2"),
        ("org/model", "org--model"),
        ("org/model/", "org--model"),
        ("./models/tiny", "tiny"),
        ("./models/tiny/", "tiny"),
        ("/abs/path/m-1.5", "m-1.5"),
        ("~/m", "m"),
        ("../x y", "x_y"),
        ("models/tiny", "models--tiny"),
        ("a/b/c", "a--b--c"),
        ("org/mödel", "org--m_del"),
    ],
)
def test_name_does_not_depend_on_the_file_system(here: Path, model_id: str, name: str) -> None:
    assert ModelRef(model_id).name == name


def test_loadable_models_and_hub_ids_have_no_problem(here: Path) -> None:
    for model_id in ("models/tiny", "./models/tiny", "~/m", str(here / "models/tiny"), "gpt2", "org/model"):
        assert ModelRef(model_id).local_problem() is None, model_id
        ModelRef(model_id).check_local()
    assert ModelRef("models/half").local_problem(need_config=False) is None  # a tokenizer needs no config.json
    assert ModelRef("models/smol").local_problem(file="a.gguf") is None


@pytest.mark.parametrize(
    ("model_id", "problem"),
    [
        ("./gone", "local path ./gone does not exist"),
        ("~/gone", "local path ~/gone does not exist"),
        ("/nonexistent/m", "local path /nonexistent/m does not exist"),
        ("a/b/c", "local path a/b/c does not exist (read as a path: a hub id has at most one '/')"),
        (
            "models/gone",
            (
                "local path models/gone does not exist (read as a path because ./models is a local folder; "
                "a hub id is NAME or ORG/NAME)"
            ),
        ),
        ("./afile", "local path ./afile is not a directory"),
        (
            "models/half",
            "local model directory models/half has no config.json (not a model saved with save_pretrained)",
        ),
        (
            "models/smol",
            (
                "local model directory models/smol has no config.json but holds GGUF file(s) a.gguf, b.gguf, "
                "c.gguf: list it under models: with gguf_file: <one of them> (docs/models.md); simverb.models "
                "and veridicality.models take only save_pretrained folders and hub ids"
            ),
        ),
    ],
)
def test_local_problem_messages(here: Path, model_id: str, problem: str) -> None:
    assert ModelRef(model_id).local_problem() == problem
    with pytest.raises(VerbevalError) as exc:
        ModelRef(model_id).check_local()
    assert str(exc.value) == f"cannot load model {model_id!r}: {problem}"


def test_gguf_file_replaces_the_config_json_check(here: Path) -> None:
    assert ModelRef("models/smol").local_problem(file="z.gguf") == (
        "local model directory models/smol has no GGUF file z.gguf"
    )
    assert ModelRef("models/tiny").local_problem(file="a.gguf") == (
        "local model directory models/tiny has no GGUF file a.gguf"
    )
    assert ModelRef("./gone").local_problem(file="a.gguf") == "local path ./gone does not exist"
    with pytest.raises(VerbevalError) as exc:
        ModelRef("models/smol").check_local(need_config=False, what="tokenizer for model", file="z.gguf")
    assert str(exc.value) == (
        "cannot load tokenizer for model 'models/smol': local model directory models/smol has no GGUF file z.gguf"
    )
