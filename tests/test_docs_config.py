"""docs/config.md's key tables are generated from the configuration schema (``verbeval docs-config``)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from verbeval.cli import main
from verbeval.core import configdoc
from verbeval.core.config import load_schema, schema_entry

DOC = REPO_ROOT / "docs" / "config.md"


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_docs_config_is_what_the_schema_generates(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/config.md equals what the schema generates: run `verbeval docs-config` after changing the schema."""
    text = DOC.read_text(encoding="utf-8")
    assert configdoc.render(text, load_schema(), DOC) == text, (
        "docs/config.md is out of date: run `verbeval docs-config`"
    )
    assert main(["docs-config", "--doc", str(DOC), "--check"]) == 0
    listed = configdoc.documented_keys(text)
    assert capsys.readouterr().out == f"{DOC}: up to date ({len(listed)} keys)\n"


def test_every_schema_key_is_listed_once_with_its_default() -> None:
    schema = load_schema()
    text = DOC.read_text(encoding="utf-8")
    listed = configdoc.documented_keys(text)
    every = [key for key, _, _ in configdoc.keys(schema)]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(every)
    # the dotted keys are the ones schema_entry (and the options mirroring a key) read
    for key in every:
        assert schema_entry(key) is not None, key
    assert "| `agreement.bootstrap.resamples` | integer ≥ 0 | `1000` |" in text
    assert "| `simverb.bins` | list of numbers in [0, 10] (at least 2) | `[0, 2.5, 5, 7.5, 10]` |" in text
    assert "| `agreement.bottom_cutoffs` | list of numbers in (0, 1] (at least 1) " in text
    assert "`[0.5, 0.1, 0.01, 0.001, 0.0001, 0.00001, 0.000001]`" in text
    assert "| `models` | list of mappings (at least 1) | — (required) |" in text
    assert '| `simverb.frames` | list of strings matching `\\{verb\\}` (at least 1) | `["to {verb}"]` |' in text


def test_every_schema_key_has_a_description() -> None:
    """A key without a `description` in the schema would have an empty row in docs/config.md."""
    assert configdoc.undescribed(load_schema()) == []


def test_a_key_without_description_fails_the_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = copy.deepcopy(load_schema())
    del schema["properties"]["raw_dir"]["description"]
    assert configdoc.undescribed(schema) == ["raw_dir"]
    monkeypatch.setattr("verbeval.core.config.load_schema", lambda: schema)
    assert main(["docs-config", "--doc", str(DOC), "--check"]) == 1
    err = _err_lines(capsys)
    assert err == ["verbeval docs-config: error: the configuration schema has no description of raw_dir"]


def test_docs_config_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "config.md"
    top, models = configdoc.TOP, "models[]"
    stale = (
        f"# Configuration\n\nbefore\n\n{configdoc.begin_marker(top)}\n| key |\n{configdoc.end_marker(top)}\n\n"
        f"## models\n\nprose\n\n{configdoc.begin_marker(models)}\n{configdoc.end_marker(models)}\nafter\n"
    )
    doc.write_text(stale)
    assert main(["docs-config", "--doc", str(doc), "--check"]) == 1
    err = _err_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"verbeval docs-config: error: {doc}: ") and "out of date" in err[0]
    assert doc.read_text() == stale  # --check writes nothing
    assert main(["-q", "docs-config", "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Configuration\n\nbefore\n\n") and text.endswith(
        f"{configdoc.end_marker(models)}\nafter\n"
    )
    assert "\n## models\n\nprose\n\n" in text
    listed = configdoc.documented_keys(text)
    assert "models" in listed and "models[].dtype" in listed and "models[].revisions[].step" in listed
    assert "agreement.chunks" in listed  # no agreement section: listed with the top-level keys
    assert main(["docs-config", "--doc", str(doc), "--check"]) == 0
    capsys.readouterr()
    doc.write_text(f"{configdoc.begin_marker(models)}\n{configdoc.end_marker(models)}\n")
    assert main(["docs-config", "--doc", str(doc)]) == 1
    assert "the top-level keys would be listed nowhere" in _err_lines(capsys)[0]
    doc.write_text(f"{configdoc.begin_marker(top)}\n{configdoc.end_marker(top)}\n{configdoc.begin_marker('nope')}\n")
    assert main(["docs-config", "--doc", str(doc)]) == 1
    assert "'nope' is not a key of the configuration schema" in _err_lines(capsys)[0]


def test_types_and_defaults_as_the_table_writes_them() -> None:
    schema = load_schema()
    assert configdoc.type_text({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, schema) == (
        "number in (0, 1)"
    )
    assert configdoc.type_text({"type": ["integer", "null"], "minimum": 1}, schema) == "integer ≥ 1 or null"
    assert configdoc.type_text({"$ref": "#/definitions/identifier"}, schema) == "identifier"
    assert configdoc.type_text({"type": "array", "items": {"type": ["string", "object"]}}, schema) == (
        "list of strings or mappings"
    )
    assert configdoc.type_text({"enum": ["jsonl", "csv", None]}, schema) == "`jsonl`, `csv` or null"
    assert configdoc.default_text({"default": {"dev": "a", "n": "1"}}, False) == '`{dev: a, n: "1"}`'
    assert configdoc.default_text({}, True) == "— (required)"
    assert configdoc.default_text({"default": 1e-06}, False) == "`0.000001`"
