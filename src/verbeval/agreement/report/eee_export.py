"""One model's agreement results in the Every Eval Ever schema (:mod:`verbeval.core.eee_schemas`).

The datastore layout of every-eval-ever 0.3.0 is ``data/<benchmark>/<developer>/<model>/<uuid>.json``
(the aggregate) beside ``<uuid>_samples.jsonl`` (the instance rows, one JSON object a line), the
aggregate naming its companion in ``detailed_evaluation_results``. :func:`build_export` makes both
from what ``verbeval aggregate`` wrote for each group (summary.csv, tse.parquet, scores.parquet), the
template rows and the model's shard manifest; :func:`write_export` validates every document against
the schemas, then writes the two files together (both or neither; nothing when a document is invalid).

Per group, one result per headline metric (:data:`verbeval.agreement.scores.registry.HEADLINE`:
TSE, and EW and MW at top-p 1, as Table 2 reports them), each with its bootstrap CI and counts. The
instance rows: one per scored TSE row (its sentence pair, the form the model preferred, correct or
not) and one per context for EW and for MW at top-p 1 (its score; correct when above 0.5). Each
interval is labelled with the settings of the run that drew it, which ``aggregate`` records in
summary.csv (:data:`verbeval.agreement.scores.aggregate.INTERVAL_SETTINGS`, ``cluster``).

The UUID is derived from the evaluation (model, groups, the config's hash, the results and instance
rows; not the time), so exporting the same results again writes the same two files: it replaces the
earlier export (:func:`write_export` checks that the files it replaces are that export) instead of
adding a second evaluation.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verbeval import __version__
from verbeval.agreement.scores.registry import HEADLINE, Metric
from verbeval.core.config import config_sha256
from verbeval.core.errors import VerbevalError

__all__ = [
    "Export",
    "build_export",
    "check_run_config",
    "config_sha256",
    "model_identity",
    "run_settings",
    "write_export",
]

#: the datastore's benchmark folder of verbeval's results
BENCHMARK = "verbeval"
#: where the metrics are defined (the export names it)
METRICS_DOC = "docs/metrics.md#definitions"
#: the cutoff of the exported EW and MW: top-p 1, the whole vocabulary (Table 2's)
TOP_P = 1.0


def result_id(metric: Metric) -> str:
    """The metric's part of an ``evaluation_result_id``: ``tse``, ``ew_top@1``, ``mw_top@1``."""
    return f"{metric.name}_top@{TOP_P:g}" if metric.cutoff_curves else metric.name


@dataclass(frozen=True)
class Export:
    """One model's export: the aggregate document, its instance rows and where they go."""

    folder: str  #: ``data/<benchmark>/<developer>/<model>`` (relative to the output folder)
    uuid: str
    aggregate: dict[str, Any]
    samples: list[dict[str, Any]]

    @property
    def aggregate_path(self) -> str:
        return f"{self.folder}/{self.uuid}.json"

    @property
    def samples_path(self) -> str:
        return f"{self.folder}/{self.uuid}_samples.jsonl"

    def samples_text(self) -> str:
        return _jsonl(self.samples)


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    """``rows`` as JSON Lines (sorted keys): the samples file's bytes."""
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)


def model_identity(model_id: str, model_name: str) -> tuple[str, str, str]:
    """``(id, developer folder, model folder)`` of the datastore (``model_info.id`` in HuggingFace form):
    a hub id ``ORG/NAME`` as it is; a hub id without an organisation (``gpt2``) under ``huggingface``;
    a local model as ``local/<model name>``."""
    from verbeval.core.model_ids import ModelRef

    if not ModelRef(model_id).meant_as_path:
        if model_id.count("/") == 1:
            org, name = model_id.split("/")
            return model_id, org, name
        if "/" not in model_id:
            return model_id, "huggingface", model_id
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name).strip("._") or "model"
    return f"local/{safe}", "local", safe


def _uuid4_of(text: str) -> str:
    """A UUID of version 4's form (the datastore's file names) derived from ``text``."""
    return str(uuid.UUID(bytes=hashlib.sha256(text.encode("utf-8")).digest()[:16], version=4))


def _number(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def _summary_row(summary: pd.DataFrame, metric: Metric, where: str) -> pd.Series:
    rows = summary[summary["metric"] == metric.name]
    if metric.cutoff_curves:
        rows = rows[(rows["side"] == "top") & np.isclose(rows["cutoff"].astype(float), TOP_P)]
    if len(rows) != 1:
        at = f" at top-p {TOP_P:g}" if metric.cutoff_curves else ""
        raise VerbevalError(f"{where}: no {metric.name}{at} (aggregate with {TOP_P:g} among --top-cutoffs)")
    return rows.iloc[0]


def run_settings(summary: pd.DataFrame, where: str) -> dict[str, Any]:
    """The ``agreement.bootstrap`` settings a summary's intervals were drawn with: ``resamples`` and
    ``confidence`` (its last columns), ``cluster`` (its column; absent: ``context``). A summary
    without them (an older ``verbeval aggregate``'s) or with several values is a one-line error."""
    from verbeval.agreement.scores.aggregate import INTERVAL_SETTINGS

    missing = [c for c in INTERVAL_SETTINGS if c not in summary.columns]
    if missing:
        raise VerbevalError(
            f"{where}: no {' and '.join(missing)} column, so the intervals' settings are unknown "
            "(written by an older verbeval aggregate): aggregate again"
        )
    clusters = summary["cluster"] if "cluster" in summary.columns else pd.Series(["context"] * len(summary))
    settings: dict[str, Any] = {}
    for name, column in (
        ("resamples", summary["resamples"]),
        ("confidence", summary["confidence"]),
        ("cluster", clusters),
    ):
        values = column.drop_duplicates().tolist()
        if len(values) != 1 or (name != "cluster" and not math.isfinite(float(values[0]))):
            raise VerbevalError(f"{where}: {name} {values}: expected one value for every row")
        settings[name] = values[0]
    return {"resamples": int(settings["resamples"]), "confidence": float(settings["confidence"]),
            "cluster": str(settings["cluster"])}  # fmt: skip


def _summary(where: Path) -> pd.DataFrame:
    return pd.read_csv(where / "summary.csv", keep_default_na=False, na_values=[""])


def check_run_config(results_dir: str | Path, groups: Sequence[str], config: Mapping[str, Any], source: str) -> None:
    """Refuse a configuration (``source``: its file) whose ``agreement.bootstrap`` resamples, confidence
    or cluster is not what each group's summary.csv was aggregated with: its hash would not describe
    the run."""
    boot = (config.get("agreement") or {}).get("bootstrap") or {}
    for group in groups:
        where = Path(results_dir) / group / "summary.csv"
        for name, value in run_settings(_summary(where.parent), str(where)).items():
            given = boot.get(name)
            if given is None or (given != value if name == "cluster" else not math.isclose(float(given), value)):
                raise VerbevalError(
                    f"{source}: agreement.bootstrap.{name} is {given!r}, but {where} was aggregated with {value!r}: "
                    "give the configuration of the run that wrote the results"
                )


def _ci_method(row: pd.Series) -> str:
    """How the summary row's interval was drawn: its ``cluster`` (``agreement.bootstrap.cluster``; a
    summary of the default ``context`` has no such column)."""
    cluster = row.get("cluster")
    if isinstance(cluster, str) and cluster != "context":
        return f"percentile bootstrap, resampling {cluster.replace('_and_', ' and ')} clusters (agreement.bootstrap.cluster)"
    return "percentile bootstrap"


def _result(
    group: str, metric: Metric, row: pd.Series, source: dict[str, Any], settings: Mapping[str, Any]
) -> dict[str, Any] | None:
    value = _number(row["value"])
    if value is None:
        return None
    uncertainty: dict[str, Any] = {"num_samples": int(row["n"])}
    low, high = _number(row["ci_low"]), _number(row["ci_high"])
    if low is not None and high is not None:
        uncertainty["confidence_interval"] = {
            "lower": low,
            "upper": high,
            "confidence_level": float(settings["confidence"]),
            "method": _ci_method(row),
        }
        uncertainty["num_bootstrap_samples"] = int(settings["resamples"])
    config: dict[str, Any] = {
        "evaluation_description": f"verbeval's {metric.headline_label}, a mean over {metric.unit}s ({METRICS_DOC})",
        "metric_id": f"verbeval.{result_id(metric)}",
        "metric_name": metric.headline_label,
        "metric_kind": "accuracy",
        "metric_unit": "proportion",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 1,
        "additional_details": {
            "definition": METRICS_DOC,
            "unit": metric.unit,
            "compute": metric.compute,
            "verbeval_version": __version__,
        },
    }
    if metric.cutoff_curves:
        config["metric_parameters"] = {"side": "top", "cutoff": TOP_P}
    return {
        "evaluation_result_id": f"{group}/{result_id(metric)}",
        "evaluation_name": f"agreement/{group}",
        "source_data": source,
        "metric_config": config,
        "score_details": {
            "score": value,
            "details": {"n": str(int(row["n"])), "n_total": str(int(row["n_total"]))},
            "uncertainty": uncertainty,
        },
    }


def _sample(
    base: Mapping[str, Any], group: str, result: str, sample_id: str, raw: str, reference: str, chosen: str,
    choices: list[str] | None, score: float, correct: bool, metadata: Mapping[str, str],
) -> dict[str, Any]:  # fmt: skip
    return {
        **base,
        "evaluation_name": f"agreement/{group}",
        "evaluation_result_id": f"{group}/{result}",
        "sample_id": sample_id,
        "interaction_type": "single_turn",
        "input": {"raw": raw, "reference": [reference], **({"choices": choices} if choices else {})},
        "output": {"raw": [chosen]},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": chosen,
                "extraction_method": "probability_comparison",
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": score, "is_correct": bool(correct)},
        "metadata": dict(metadata),
    }


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def build_export(
    *,
    results_dir: str | Path,
    groups: Sequence[str],
    templates: pd.DataFrame,
    meta: Mapping[str, Any],
    model_name: str,
    timestamp: int,
    config_hash: str | None = None,
) -> Export:
    """The export of one model: ``results_dir/<group>/`` holds what ``verbeval aggregate`` wrote (its
    summary.csv also the intervals' settings, :func:`run_settings`), ``templates`` the template rows,
    ``meta`` the shard manifest's meta (model id, revision, dtype, kind, random_init), ``config_hash``
    the :func:`config_sha256` of the run's configuration."""
    from verbeval.agreement.engine.shards import build_contexts

    model_id = str(meta.get("model_id") or model_name)
    ident, developer, folder_model = model_identity(model_id, model_name)
    random_init = bool(meta.get("random_init", False))
    details = {"verbeval_version": __version__, "metrics": METRICS_DOC}
    if config_hash:
        details["config_sha256"] = config_hash
    stamp = str(int(timestamp))
    evaluation_id = f"{BENCHMARK}/{ident}/{stamp}"
    folder = f"data/{BENCHMARK}/{developer}/{folder_model}"
    kind = str(meta.get("kind") or "")
    model_details = {
        "deployment_type": "self_deployed",
        "model_availability": "unknown" if ident.startswith("local/") else "open_weights",
        "model_name": model_name,
        "model_source": model_id,
        "revision": str(meta.get("revision") or "unknown"),
        "dtype": str(meta.get("dtype") or "unknown"),
        "kind": kind or "unknown",
        "random_weights": "true" if random_init else "false",
    }
    base = {"schema_version": "0.3.0", "model_id": ident}  # and evaluation_id, once the rows are known
    results: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    root = Path(results_dir)
    for group in groups:
        where = root / group
        summary = _summary(where)
        settings = run_settings(summary, str(where / "summary.csv"))
        tse = pd.read_parquet(where / "tse.parquet")
        scores = pd.read_parquet(where / "scores.parquet")
        g = templates[templates["group"] == group].reset_index(drop=True)
        source = {
            "dataset_name": group,
            "source_type": "other",
            "additional_details": {"template_rows": str(len(g)), "contexts": str(len(scores))},
        }
        for metric in HEADLINE:
            row = _summary_row(summary, metric, str(where / "summary.csv"))
            result = _result(group, metric, row, source, settings)
            if result is not None:
                results.append(result)
        for r in tse.itertuples(index=False):
            if not math.isfinite(r.tse):
                continue  # a form that is not one token: not scored (the summary's n counts the others)
            t = g.iloc[int(r.row)]
            chosen = t["correct"] if r.tse == 1.0 else t["incorrect"]
            samples.append(
                _sample(
                    base, group, "tse", f"{group}/row/{int(r.row)}", _join(t["left"], "[VERB]", t["right"]),
                    str(t["correct"]), str(chosen), [str(t["correct"]), str(t["incorrect"])], float(r.tse),
                    r.tse == 1.0,
                    {"row": str(int(r.row)), "context_id": str(int(r.context_id)), "p_sing": repr(float(r.p_sing)),
                     "p_plur": repr(float(r.p_plur)), "sentence_good": _join(t["left"], t["correct"], t["right"]),
                     "sentence_bad": _join(t["left"], t["incorrect"], t["right"])},
                )
            )  # fmt: skip
        contexts, _ = build_contexts(g, kind or "masked")
        text = dict(
            zip(contexts["context_id"], [_join(a, "[VERB]", b) for a, b in zip(contexts["left"], contexts["right"])])
        )
        for metric in (m for m in HEADLINE if m.cutoff_curves):
            column = f"{metric.score_column}_top@{TOP_P:g}"
            for cid, plural, value in zip(scores["context_id"], scores["plural"], scores[column]):
                if not math.isfinite(value):
                    continue  # no counted lemma in the context
                number = "plural" if plural else "singular"
                other = "singular" if plural else "plural"
                chosen = number if value > 0.5 else (other if value < 0.5 else "tie")
                samples.append(
                    _sample(
                        base, group, result_id(metric), f"{group}/context/{int(cid)}", text.get(int(cid), ""),
                        number, chosen, None, float(value), value > 0.5, {"context_id": str(int(cid))},
                    )
                )  # fmt: skip
    if not results:
        raise VerbevalError(f"{root}: no finite result of {model_name} to export")
    # the evaluation's identity: what was evaluated and what came out, not when it was exported
    identity = {
        "benchmark": BENCHMARK,
        "model_id": ident,
        "model_name": model_name,
        "model": model_details,
        "groups": list(groups),
        "config_sha256": config_hash,
        "results": results,
        "samples_sha256": hashlib.sha256(_jsonl(samples).encode("utf-8")).hexdigest(),
    }
    uid = _uuid4_of(json.dumps(identity, sort_keys=True, ensure_ascii=False))
    details["export_uuid"] = uid
    for sample in samples:
        sample["evaluation_id"] = evaluation_id
    body = _jsonl(samples)
    aggregate = {
        "schema_version": "0.3.0",
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": stamp,
        "source_metadata": {
            "source_name": "verbeval",
            "source_type": "evaluation_run",
            "source_organization_name": "verbeval",
            "evaluator_relationship": "third_party",
            "additional_details": details,
        },
        "eval_library": {"name": "verbeval", "version": __version__, "additional_details": details},
        "model_info": {
            "name": model_name,
            "id": ident,
            "developer": developer,
            "inference_platform": "local",
            "additional_details": model_details,
        },
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": f"{folder}/{uid}_samples.jsonl",
            "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(body.encode("utf-8")).hexdigest(),
            "total_rows": len(samples),
        },
    }
    return Export(folder, uid, aggregate, samples)


def _own_earlier_export(export: Export, aggregate: Path, samples: Path) -> None:
    """Refuse to write over a file that is not this evaluation's earlier export (same file names: the
    same evaluation). Its aggregate: verbeval's, naming the same ``export_uuid``; its samples file
    alone (an export stopped between its two renames): verbeval's rows of this model, equal to this
    export's but for their ``evaluation_id`` (the time)."""

    def refuse(path: Path) -> VerbevalError:
        return VerbevalError(
            f"{path}: exists and is not verbeval's earlier export of this evaluation "
            f"(export_uuid {export.uuid}); it is left as it is: move it away to export here"
        )

    if aggregate.exists() or aggregate.is_symlink():
        try:
            doc = json.loads(aggregate.read_text(encoding="utf-8"))
            library = doc["eval_library"]
            ours = library["name"] == "verbeval" and library["additional_details"]["export_uuid"] == export.uuid
        except (OSError, ValueError, TypeError, KeyError):
            ours = False
        if not ours:
            raise refuse(aggregate)
    elif samples.exists() or samples.is_symlink():
        mine = [{k: v for k, v in row.items() if k != "evaluation_id"} for row in export.samples]
        try:
            rows = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
            ours = all(str(r.pop("evaluation_id")).startswith(f"{BENCHMARK}/") for r in rows) and rows == mine
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            ours = False
        if not ours:
            raise refuse(samples)


def write_export(export: Export, schemas: Any, out_dir: str | Path) -> tuple[Path, Path]:
    """Validate ``export`` against ``schemas`` (:class:`verbeval.core.eee_schemas.Schemas`: the
    aggregate, then every instance row), then write its two files under ``out_dir`` together (the
    samples file, then the aggregate; both or neither: :func:`verbeval.core.io.write_texts_together`),
    replacing this evaluation's earlier export; an invalid document, or a file in the way that is not
    that export: one-line error, nothing written. Returns (aggregate, samples) paths."""
    from verbeval.core.eee_schemas import check
    from verbeval.core.io import write_texts_together

    check(schemas.aggregate, export.aggregate, export.aggregate_path)
    for i, sample in enumerate(export.samples, 1):
        check(schemas.instance, sample, f"{export.samples_path}:{i}")
    out = Path(out_dir)
    samples, aggregate = out / export.samples_path, out / export.aggregate_path
    _own_earlier_export(export, aggregate, samples)
    text = json.dumps(export.aggregate, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_texts_together([(samples, export.samples_text()), (aggregate, text)])
    return aggregate, samples
