"""``verbeval export --format every-eval-ever`` (verbeval.agreement.report.eee_export, verbeval.core.eee_schemas).

The schemas come from the installed every-eval-ever when there is one (Python >= 3.12), else from its
pinned wheel in the tests' download cache (``$VERBEVAL_CACHE_DIR`` or ``~/.cache/verbeval``), downloaded
with pip when missing (or read from ``$VERBEVAL_WHEEL_DIR``); without pip access the tests that need
them are skipped, saying why (failed under ``VERBEVAL_REQUIRE_SHARED``, as CI runs them). A model's aggregate outputs are made in process from synthetic shards
(tests/test_aggregate.py), so no model runs.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from conftest import _skip_or_fail, cache_dir
from test_aggregate import TSE_ROWS, _aggregate_args, _store
from verbeval.agreement.cli.export import export_groups
from verbeval.agreement.report.eee_export import build_export, model_identity, write_export
from verbeval.cli import main
from verbeval.core import eee_schemas
from verbeval.core.config import config_sha256, load_config
from verbeval.core.eee_schemas import WHEEL_NAME, WHEEL_SHA256, Schemas, check, load_schemas
from verbeval.core.errors import VerbevalError
from verbeval.core.io import sha256_file

META = {
    "model_id": "org/tiny",
    "revision": "abc123",
    "kind": "masked",
    "dtype": "bfloat16",
    "random_init": True,
    "verbeval_version": "test",
}
STAMP = 1764400000


@pytest.fixture(scope="session")
def schema_wheel() -> Path | None:
    """The pinned wheel in the tests' download cache (downloaded once); None when every-eval-ever is
    installed (its schemas are read from the installation)."""
    try:
        metadata.distribution(eee_schemas.DISTRIBUTION)
        return None
    except metadata.PackageNotFoundError:
        pass
    given = Path(os.environ.get("VERBEVAL_WHEEL_DIR") or "/nonexistent") / WHEEL_NAME
    if given.is_file():
        return given  # offline: load_schemas checks its sha256
    folder = cache_dir() / "every-eval-ever"
    wheel = folder / WHEEL_NAME
    if not wheel.is_file() or sha256_file(wheel) != WHEEL_SHA256:
        folder.mkdir(parents=True, exist_ok=True)
        wheel.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"every-eval-ever=={eee_schemas.VERSION}", "--no-deps"]
        cmd += ["--python-version", "3.12", "--only-binary=:all:", "--dest", str(folder), "--quiet"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not wheel.is_file():
            _skip_or_fail(f"no pip access for {WHEEL_NAME} (into {folder}): {done.stderr.strip()[-300:]}")
    return wheel


@pytest.fixture(scope="session")
def schemas(schema_wheel: Path | None) -> Schemas:
    return load_schemas(schema_wheel)


def _templates(tmp_path: Path) -> Path:
    """Template rows of group g1, one per TSE row of the synthetic shards (tse.parquet's ``row``)."""
    n = len(TSE_ROWS)
    frame = pd.DataFrame(
        {
            "group": "g1",
            "left": [f"the author {i}" for i in range(n)],
            "right": ["today ."] * n,
            "correct": ["laughs"] * n,
            "incorrect": ["laugh"] * n,
            "plural": [False] * n,
            "source": [f"t{i % 3}.txt" for i in range(n)],  # three templates (agreement.bootstrap.cluster)
        }
    )
    path = tmp_path / "templates.parquet"
    frame.to_parquet(path)
    return path


@pytest.fixture
def run(tmp_path: Path) -> dict[str, Path]:
    """A model's aggregate outputs (group g1) with the shard manifest, templates and a config."""
    manifest, _ = _store(tmp_path, META)
    assert main(_aggregate_args(tmp_path, manifest)) == 0
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  - id: org/tiny\n    name: tiny\nagreement:\n  bootstrap: {resamples: 10}\n")
    return {"manifest": manifest, "results": tmp_path / "out", "templates": _templates(tmp_path), "config": config}


def _export_args(run: dict[str, Path], out: Path, wheel: Path | None) -> list[str]:
    args = ["export", "--format", "every-eval-ever", "--templates", str(run["templates"]), "--groups", "g1"]
    args += ["--model-name", "tiny", "--manifest", str(run["manifest"]), "--results", str(run["results"])]
    args += ["--configfile", str(run["config"]), "--out-dir", str(out)]
    return args + (["--schemas", str(wheel)] if wheel else [])


def test_export_is_valid_and_holds_the_runs_results_and_rows(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, schemas: Schemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(STAMP))
    out = tmp_path / "export"
    assert main(_export_args(run, out, schema_wheel)) == 0
    (agg_path,) = out.glob("data/verbeval/org/tiny/*.json")
    (samples_path,) = out.glob("data/verbeval/org/tiny/*_samples.jsonl")
    assert samples_path.name == f"{agg_path.stem}_samples.jsonl"
    doc = json.loads(agg_path.read_text())
    rows = [json.loads(line) for line in samples_path.read_text().splitlines()]
    # read back and validated
    check(schemas.aggregate, doc, agg_path.name)
    for row in rows:
        check(schemas.instance, row, samples_path.name)

    assert doc["evaluation_id"] == f"verbeval/org/tiny/{STAMP}" and doc["retrieved_timestamp"] == str(STAMP)
    assert doc["model_info"]["id"] == "org/tiny" and doc["model_info"]["name"] == "tiny"
    details = doc["model_info"]["additional_details"]
    assert (details["revision"], details["dtype"], details["kind"]) == ("abc123", "bfloat16", "masked")
    assert details["random_weights"] == "true"
    library = doc["eval_library"]
    assert library["name"] == "verbeval" and library["version"] == __import__("verbeval").__version__
    assert library["additional_details"]["config_sha256"] == config_sha256(load_config(run["config"]))
    detail = doc["detailed_evaluation_results"]
    assert detail["file_path"] == samples_path.relative_to(out).as_posix()
    assert detail["total_rows"] == len(rows) and detail["checksum"] == sha256_file(samples_path)

    # the results: the summary's TSE, EW and MW at top-p 1, with their CIs and counts
    summary = pd.read_csv(run["results"] / "g1" / "summary.csv")
    got = {r["evaluation_result_id"]: r for r in doc["evaluation_results"]}
    assert list(got) == ["g1/tse", "g1/ew_top@1", "g1/mw_top@1"]
    for rid, metric in (("g1/tse", "tse"), ("g1/ew_top@1", "ew"), ("g1/mw_top@1", "mw")):
        want = summary[(summary["metric"] == metric) & ((summary["cutoff"] == 1) | (metric == "tse"))].iloc[0]
        score = got[rid]["score_details"]
        ci = score["uncertainty"]["confidence_interval"]
        assert (score["score"], ci["lower"], ci["upper"]) == (want["value"], want["ci_low"], want["ci_high"])
        assert ci["confidence_level"] == 0.95 and score["uncertainty"]["num_samples"] == want["n"]
        assert score["uncertainty"]["num_bootstrap_samples"] == 10
        assert score["details"]["n_total"] == str(want["n_total"])
        assert got[rid]["metric_config"]["metric_id"] == f"verbeval.{rid.split('/')[1]}"
    assert got["g1/tse"]["metric_config"]["additional_details"]["definition"] == "docs/metrics.md#definitions"
    assert got["g1/ew_top@1"]["metric_config"]["metric_name"] == "EW (top p = 1)"
    assert got["g1/mw_top@1"]["metric_config"]["metric_parameters"] == {"side": "top", "cutoff": 1.0}

    # the instance rows: tse.parquet's scored rows, then EW and MW per context (scores.parquet)
    tse = pd.read_parquet(run["results"] / "g1" / "tse.parquet").dropna(subset=["tse"])
    tse_rows = [r for r in rows if r["evaluation_result_id"] == "g1/tse"]
    assert [r["sample_id"] for r in tse_rows] == [f"g1/row/{i}" for i in tse["row"]]
    assert [r["evaluation"]["score"] for r in tse_rows] == tse["tse"].tolist()
    assert [float(r["metadata"]["p_sing"]) for r in tse_rows] == tse["p_sing"].tolist()
    assert [float(r["metadata"]["p_plur"]) for r in tse_rows] == tse["p_plur"].tolist()
    assert [r["output"]["raw"] for r in tse_rows] == [["laughs"] if t == 1 else ["laugh"] for t in tse["tse"]]
    assert tse_rows[0]["input"] == {
        "raw": "the author 0 [VERB] today .",
        "reference": ["laughs"],
        "choices": ["laughs", "laugh"],
    }
    scores = pd.read_parquet(run["results"] / "g1" / "scores.parquet")
    for metric in ("ew", "mw"):
        ctx = [r for r in rows if r["evaluation_result_id"] == f"g1/{metric}_top@1"]
        assert [r["sample_id"] for r in ctx] == [f"g1/context/{c}" for c in scores["context_id"]]
        assert [r["evaluation"]["score"] for r in ctx] == scores[f"{metric}_top@1"].tolist()
        assert [r["evaluation"]["is_correct"] for r in ctx] == (scores[f"{metric}_top@1"] > 0.5).tolist()
    assert len(rows) == len(tse) + 2 * len(scores)
    assert {r["evaluation_id"] for r in rows} == {doc["evaluation_id"]}
    assert {r["model_id"] for r in rows} == {"org/tiny"}


def test_groups_all_exports_every_group_of_the_run(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(STAMP))
    named, every = tmp_path / "named", tmp_path / "all"
    assert main(_export_args(run, named, schema_wheel)) == 0
    args = _export_args(run, every, schema_wheel)
    args[args.index("--groups") + 1] = "all"
    assert main(args) == 0
    # the same evaluation: the same two files (the UUID covers the groups)
    files = sorted(p.relative_to(named) for p in named.rglob("*") if p.is_file())
    assert len(files) == 2 and files == sorted(p.relative_to(every) for p in every.rglob("*") if p.is_file())
    assert all((named / f).read_bytes() == (every / f).read_bytes() for f in files)


def test_export_groups_all_is_the_template_tables_groups_in_order() -> None:
    templates = pd.DataFrame({"group": ["simple", "simple", "prep", "blimp", "prep"]})
    assert export_groups("all", templates, "t.parquet") == ["simple", "prep", "blimp"]
    assert export_groups("blimp,simple", templates, "t.parquet") == ["blimp", "simple"]
    with pytest.raises(VerbevalError) as info:
        export_groups("simple,nope", templates, "t.parquet")
    assert str(info.value) == (
        "--groups 'simple,nope': nope: not a group of t.parquet (its groups: simple, prep, blimp, or all for every one)"
    )
    with pytest.raises(VerbevalError, match="no group given"):
        export_groups(",", templates, "t.parquet")


def test_an_unknown_group_is_one_line_and_nothing_is_written(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "export"
    args = _export_args(run, out, schema_wheel)
    args[args.index("--groups") + 1] = "g2"
    assert main(args) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"verbeval export: error: --groups 'g2': g2: not a group of {run['templates']} (its groups: g1, or all for every one)"
    ]
    assert not out.exists()


def _export(run: dict[str, Path]) -> Any:
    return build_export(
        results_dir=run["results"],
        groups=["g1"],
        templates=pd.read_parquet(run["templates"]),
        meta=META,
        model_name="tiny",
        timestamp=STAMP,
    )


def test_the_export_file_names_are_a_uuid4_of_its_content(run: dict[str, Path]) -> None:
    first, again = _export(run), _export(run)
    assert first.uuid == again.uuid and first.samples_text() == again.samples_text()
    assert first.uuid[14] == "4" and first.uuid[19] in "89ab"
    assert first.aggregate_path == f"data/verbeval/org/tiny/{first.uuid}.json"


def test_an_invalid_aggregate_is_refused_with_its_field_and_nothing_is_written(
    run: dict[str, Path], tmp_path: Path, schemas: Schemas
) -> None:
    export = _export(run)
    export.aggregate["model_info"]["additional_details"]["deployment_type"] = "cloud"
    out = tmp_path / "export"
    with pytest.raises(VerbevalError) as info:
        write_export(export, schemas, out)
    assert str(info.value) == (
        f"data/verbeval/org/tiny/{export.uuid}.json: not valid Every Eval Ever 0.3.0: "
        "model_info.additional_details.deployment_type: 'cloud' is not one of "
        "['self_deployed', 'externally_managed', 'unknown']"
    )
    assert not out.exists()


def test_an_invalid_instance_row_is_refused_with_its_line_and_field(
    run: dict[str, Path], tmp_path: Path, schemas: Schemas
) -> None:
    export = _export(run)
    export.samples[1]["evaluation"]["score"] = "high"
    out = tmp_path / "export"
    with pytest.raises(VerbevalError) as info:
        write_export(export, schemas, out)
    assert str(info.value) == (
        f"data/verbeval/org/tiny/{export.uuid}_samples.jsonl:2: not valid Every Eval Ever 0.3.0: "
        "evaluation.score: 'high' is not of type 'number'"
    )
    assert not out.exists()


def _no_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)


def test_without_schemas_the_export_says_how_to_get_them(
    run: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_distribution(monkeypatch)
    out = tmp_path / "export"
    assert main(_export_args(run, out, None)) == 1
    assert capsys.readouterr().err.splitlines() == [
        "verbeval export: error: no Every Eval Ever 0.3.0 schemas: every-eval-ever is not installed; install them "
        "with pip install 'verbeval[export]' (Python >= 3.12), or download the wheel with pip download "
        "every-eval-ever==0.3.0 --no-deps --python-version 3.12 --only-binary=:all: -d ~/.cache/verbeval/every-eval-ever "
        "and pass --schemas ~/.cache/verbeval/every-eval-ever/every_eval_ever-0.3.0-py3-none-any.whl"
    ]
    assert not out.exists()


def test_another_wheel_is_refused(run: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("every_eval_ever/schemas/eval.schema.json", "{}")
    out = tmp_path / "export"
    assert main(_export_args(run, out, other)) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"verbeval export: error: --schemas {other}: sha256 {sha256_file(other)} is not that of "
        f"{WHEEL_NAME} ({WHEEL_SHA256})"
    ]
    assert not out.exists()


class _Dist:
    """An installed distribution as importlib.metadata gives it: its version and its files' locations."""

    def __init__(self, root: Path, version: str) -> None:
        self.root, self.version = root, version

    def locate_file(self, path: str) -> Path:
        return self.root / path


def test_the_schemas_are_read_from_an_installed_distribution_without_importing_it(
    schemas: Schemas, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "site-packages"
    for member, schema in (("eval", schemas.aggregate), ("instance_level_eval", schemas.instance)):
        path = root / "every_eval_ever" / "schemas" / f"{member}.schema.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(schema))
    (root / "every_eval_ever" / "__init__.py").write_text("raise ImportError('imported')\n")
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(root, "0.3.0"))
    found = load_schemas()
    assert (found.aggregate, found.instance, found.source) == (
        schemas.aggregate,
        schemas.instance,
        "every-eval-ever 0.3.0 (installed)",
    )
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(root, "0.4.0"))
    with pytest.raises(VerbevalError) as info:
        load_schemas()
    assert str(info.value).startswith(
        "every-eval-ever 0.4.0 (installed): the export follows the schemas of 0.3.0; install them with "
    )


def test_the_pinned_schemas_validate_with_jsonschema_draft7(schemas: Schemas) -> None:
    import jsonschema

    for schema in (schemas.aggregate, schemas.instance):
        assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
        jsonschema.Draft7Validator.check_schema(schema)
    assert os.fspath(eee_schemas.SCHEMA_FILES["aggregate"]).endswith("eval.schema.json")


def test_the_workflows_config_hash_is_named_as_given_and_one_configuration_only(
    run: dict[str, Path],
    tmp_path: Path,
    schema_wheel: Path | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(STAMP))
    args = _export_args(run, tmp_path / "export", schema_wheel)
    both = [*args, "--config-sha256", "AB" * 32]
    assert main(both) == 1
    assert capsys.readouterr().err.splitlines() == [
        "verbeval export: error: --configfile and --config-sha256 both name the configuration: give one"
    ]
    assert not (tmp_path / "export").exists()
    given = [w for w in both if w not in ("--configfile", str(run["config"]))]
    assert main(given) == 0
    (agg,) = (tmp_path / "export").glob("data/verbeval/org/tiny/*.json")
    assert json.loads(agg.read_text())["eval_library"]["additional_details"]["config_sha256"] == "ab" * 32


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("org/tiny", ("org/tiny", "org", "tiny")),
        ("gpt2", ("gpt2", "huggingface", "gpt2")),
        ("./models/tiny-gpt2", ("local/my_tiny", "local", "my_tiny")),
        ("/abs/models/tiny", ("local/my_tiny", "local", "my_tiny")),
        ("a/b/c", ("local/my_tiny", "local", "my_tiny")),
    ],
)
def test_the_datastore_folder_of_a_model(model_id: str, expected: tuple[str, str, str]) -> None:
    """(model_info.id, developer folder, model folder): a hub id as it is, a local model as local/<name>."""
    assert model_identity(model_id, "my tiny") == expected


def test_the_interval_method_names_the_clustering() -> None:
    """A summary aggregated with agreement.bootstrap.cluster says so in the exported interval's method."""
    from verbeval.agreement.report.eee_export import _ci_method

    assert _ci_method(pd.Series({"value": 0.5})) == "percentile bootstrap"
    assert _ci_method(pd.Series({"cluster": "context"})) == "percentile bootstrap"
    assert _ci_method(pd.Series({"cluster": "template_and_lemma"})) == (
        "percentile bootstrap, resampling template and lemma clusters (agreement.bootstrap.cluster)"
    )


def _reaggregate(run: dict[str, Path], tmp_path: Path, name: str, *options: str) -> Path:
    """The run's shards aggregated again (on the export's templates) with ``options``: the results folder."""
    (tmp_path / name).mkdir()
    args = _aggregate_args(tmp_path / name, run["manifest"])
    args[args.index("--templates") + 1] = str(run["templates"])
    assert main([*args, *options]) == 0
    return tmp_path / name / "out"


def _config(tmp_path: Path, name: str, bootstrap: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"models:\n  - id: org/tiny\n    name: tiny\nagreement:\n  bootstrap: {bootstrap}\n")
    return path


def test_the_intervals_are_labelled_with_the_settings_of_the_run_that_drew_them(
    run: dict[str, Path], tmp_path: Path
) -> None:
    """resamples, confidence and clustering come from summary.csv (its last columns, its cluster
    column), whatever the export is told: the export has no options for them any more."""
    results = _reaggregate(run, tmp_path, "r", "--resamples", "7", "--confidence", "0.8", "--cluster", "template")
    summary = pd.read_csv(results / "g1" / "summary.csv")
    assert list(summary.columns[-2:]) == ["resamples", "confidence"]
    assert set(summary["resamples"]) == {7} and set(summary["confidence"]) == {0.8}
    export = build_export(
        results_dir=results, groups=["g1"], templates=pd.read_parquet(run["templates"]), meta=META,
        model_name="tiny", timestamp=STAMP,
    )  # fmt: skip
    intervals = [r["score_details"]["uncertainty"] for r in export.aggregate["evaluation_results"]]
    labelled = [u for u in intervals if "confidence_interval" in u]
    assert labelled, "no interval to check"
    for u in labelled:
        assert u["num_bootstrap_samples"] == 7 and u["confidence_interval"]["confidence_level"] == 0.8
        assert u["confidence_interval"]["method"] == (
            "percentile bootstrap, resampling template clusters (agreement.bootstrap.cluster)"
        )
    with pytest.raises(SystemExit):  # the labels' former options are gone
        main([*_export_args(run, tmp_path / "export", None), "--resamples", "1000"])


def test_a_summary_that_does_not_record_its_intervals_settings_is_refused(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run["results"] / "g1" / "summary.csv"
    pd.read_csv(path).drop(columns=["resamples", "confidence"]).to_csv(path, index=False)
    out = tmp_path / "export"
    assert main(_export_args(run, out, schema_wheel)) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"verbeval export: error: {path}: no resamples and confidence column, so the intervals' settings are "
        "unknown (written by an older verbeval aggregate): aggregate again"
    ]
    assert not out.exists()


def _hash_of(out: Path) -> str:
    (agg,) = out.glob("data/verbeval/org/tiny/*.json")
    return json.loads(agg.read_text())["eval_library"]["additional_details"]["config_sha256"]


def test_a_clustered_and_an_unclustered_run_never_share_a_config_hash(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hash is that of the run's configuration, which must be the one the results were aggregated
    with: a configuration that says otherwise (the clustering, the resamples) is refused."""
    clustered = {**run, "results": _reaggregate(run, tmp_path, "c", "--cluster", "template")}
    clustered["config"] = _config(tmp_path, "clustered", "{resamples: 10, cluster: template}")
    assert main(_export_args(run, tmp_path / "plain", schema_wheel)) == 0
    assert main(_export_args(clustered, tmp_path / "clustered", schema_wheel)) == 0
    plain_hash, clustered_hash = _hash_of(tmp_path / "plain"), _hash_of(tmp_path / "clustered")
    assert plain_hash == config_sha256(load_config(run["config"]))
    assert clustered_hash == config_sha256(load_config(clustered["config"])) != plain_hash
    capsys.readouterr()
    summary = clustered["results"] / "g1" / "summary.csv"
    wrong = {**clustered, "config": run["config"]}  # the unclustered run's configuration
    assert main(_export_args(wrong, tmp_path / "wrong", schema_wheel)) == 1
    default = {**run, "config": _config(tmp_path, "default", "{}")}  # 1,000 resamples; the run drew 10
    assert main(_export_args(default, tmp_path / "wrong", schema_wheel)) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"verbeval export: error: {run['config']}: agreement.bootstrap.cluster is 'context', but {summary} was "
        "aggregated with 'template': give the configuration of the run that wrote the results",
        f"verbeval export: error: {default['config']}: agreement.bootstrap.resamples is 1000, but "
        f"{run['results'] / 'g1' / 'summary.csv'} was aggregated with 10: give the configuration of the run "
        "that wrote the results",
    ]
    assert not (tmp_path / "wrong").exists()


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_exporting_the_same_results_again_replaces_the_earlier_export(
    run: dict[str, Path], tmp_path: Path, schema_wheel: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "export"
    for stamp in (STAMP, STAMP + 60):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", str(stamp))
        assert main(_export_args(run, out, schema_wheel)) == 0
    files = _files(out)
    (agg,) = [name for name in files if name.endswith(".json")]
    assert sorted(files) == [agg, agg.replace(".json", "_samples.jsonl")]  # one evaluation, no leftovers
    doc = json.loads(files[agg])
    assert doc["retrieved_timestamp"] == str(STAMP + 60)
    rows = [json.loads(line) for line in files[agg.replace(".json", "_samples.jsonl")].splitlines()]
    assert {r["evaluation_id"] for r in rows} == {doc["evaluation_id"]} == {f"verbeval/org/tiny/{STAMP + 60}"}
    assert doc["eval_library"]["additional_details"]["export_uuid"] == Path(agg).stem
    # other results of the model (another number of resamples): another evaluation, beside it
    other = {**run, "results": _reaggregate(run, tmp_path, "r7", "--resamples", "7")}
    other["config"] = _config(tmp_path, "r7", "{resamples: 7}")
    assert main(_export_args(other, out, schema_wheel)) == 0
    assert len([name for name in _files(out) if name.endswith(".json")]) == 2
    assert _files(out)[agg] == files[agg]


@pytest.mark.parametrize("failure", ["disk full", "rename"])
def test_an_export_whose_second_file_fails_leaves_nothing_new_and_the_earlier_export_as_it_was(
    run: dict[str, Path], tmp_path: Path, schemas: Schemas, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    out, fresh = tmp_path / "export", tmp_path / "fresh"
    first = _export(run)
    write_export(first, schemas, out)
    before = _files(out)
    again = build_export(
        results_dir=run["results"], groups=["g1"], templates=pd.read_parquet(run["templates"]), meta=META,
        model_name="tiny", timestamp=STAMP + 60,
    )  # fmt: skip
    assert again.uuid == first.uuid and again.aggregate != first.aggregate  # would replace both files
    real_fsync, real_replace = os.fsync, os.replace
    synced: list[int] = []

    def fsync(fd: int) -> None:  # the second file's data does not fit on the disk
        synced.append(fd)
        if len(synced) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:  # the aggregate's rename fails, after the samples file's
        if str(src).endswith(".tmp") and str(dst).endswith(".json"):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(src, dst)

    if failure == "disk full":
        monkeypatch.setattr(os, "fsync", fsync)
    else:
        monkeypatch.setattr(os, "replace", replace)
    for target in (out, fresh):
        synced.clear()
        with pytest.raises(OSError):
            write_export(again, schemas, target)
    monkeypatch.undo()
    assert _files(out) == before  # the earlier export, byte for byte, and nothing beside it
    assert _files(fresh) == {}


def test_a_file_that_is_not_this_evaluations_earlier_export_is_never_replaced(
    run: dict[str, Path], tmp_path: Path, schemas: Schemas
) -> None:
    export, out = _export(run), tmp_path / "export"
    aggregate, samples = out / export.aggregate_path, out / export.samples_path
    aggregate.parent.mkdir(parents=True)
    for foreign in ('{"eval_library": {"name": "verbeval", "additional_details": {}}}', "not json"):
        aggregate.write_text(foreign)
        with pytest.raises(VerbevalError) as info:
            write_export(export, schemas, out)
        assert str(info.value) == (
            f"{aggregate}: exists and is not verbeval's earlier export of this evaluation "
            f"(export_uuid {export.uuid}); it is left as it is: move it away to export here"
        )
        assert aggregate.read_text() == foreign and not samples.exists()
    aggregate.unlink()
    # a samples file alone: this evaluation's (an export stopped between its two renames) is replaced ...
    earlier = build_export(
        results_dir=run["results"], groups=["g1"], templates=pd.read_parquet(run["templates"]), meta=META,
        model_name="tiny", timestamp=STAMP - 60,
    )  # fmt: skip
    samples.write_text(earlier.samples_text())
    write_export(export, schemas, out)
    assert samples.read_text() == export.samples_text() and aggregate.is_file()
    # ... one with other rows is not
    aggregate.unlink()
    edited = earlier.samples_text().replace('"score": 1.0', '"score": 0.0', 1)
    assert edited != earlier.samples_text()
    samples.write_text(edited)
    with pytest.raises(VerbevalError, match="_samples.jsonl: exists and is not verbeval's earlier export"):
        write_export(export, schemas, out)
    assert samples.read_text() == edited and not aggregate.exists()
