"""One model's agreement results in the Every Eval Ever schema (:mod:`verbeval.core.eee_schemas`).

The datastore layout of every-eval-ever 0.3.0 is ``data/<benchmark>/<developer>/<model>/<uuid>.json``
(the aggregate) beside ``<uuid>_samples.jsonl`` (the instance rows, one JSON object a line), the
aggregate naming its companion in ``detailed_evaluation_results``. :func:`build_export` makes both
from what ``verbeval aggregate`` wrote for each group (summary.csv, tse.parquet, scores.parquet), the
template rows and the model's shard manifest; :func:`write_export` validates every document against
the schemas, then writes the two files (each atomically; nothing when a document is invalid).

Per group, one result per headline metric (:data:`verbeval.agreement.scores.registry.HEADLINE`:
TSE, and EW and MW at top-p 1, as Table 2 reports them), each with its bootstrap CI and counts. The
instance rows: one per scored TSE row (its sentence pair, the form the model preferred, correct or
not) and one per context for EW and for MW at top-p 1 (its score; correct when above 0.5). The UUID is derived from the content (model, groups, the config's
hash, the timestamp), so one export is one file name.
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

__all__ = ["Export", "build_export", "config_sha256", "model_identity", "write_export"]

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


def _ci_method(row: pd.Series) -> str:
    """How the summary row's interval was drawn: its ``cluster`` (``agreement.bootstrap.cluster``; a
    summary of the default ``context`` has no such column)."""
    cluster = row.get("cluster")
    if isinstance(cluster, str) and cluster != "context":
        return f"percentile bootstrap, resampling {cluster.replace('_and_', ' and ')} clusters (agreement.bootstrap.cluster)"
    return "percentile bootstrap"


def _result(
    group: str, metric: Metric, row: pd.Series, source: dict[str, Any], confidence: float, resamples: int
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
            "confidence_level": float(confidence),
            "method": _ci_method(row),
        }
        uncertainty["num_bootstrap_samples"] = int(resamples)
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
    confidence: float,
    resamples: int,
    timestamp: int,
    config_hash: str | None = None,
) -> Export:
    """The export of one model: ``results_dir/<group>/`` holds what ``verbeval aggregate`` wrote,
    ``templates`` the template rows, ``meta`` the shard manifest's meta (model id, revision, dtype,
    kind, random_init), ``config_hash`` the :func:`config_sha256` of the run's configuration."""
    from verbeval.agreement.engine.shards import build_contexts

    model_id = str(meta.get("model_id") or model_name)
    ident, developer, folder_model = model_identity(model_id, model_name)
    random_init = bool(meta.get("random_init", False))
    details = {"verbeval_version": __version__, "metrics": METRICS_DOC}
    if config_hash:
        details["config_sha256"] = config_hash
    stamp = str(int(timestamp))
    evaluation_id = f"{BENCHMARK}/{ident}/{stamp}"
    uid = _uuid4_of(json.dumps([evaluation_id, model_name, list(groups), config_hash]))
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
    base = {"schema_version": "0.3.0", "evaluation_id": evaluation_id, "model_id": ident}
    results: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    root = Path(results_dir)
    for group in groups:
        where = root / group
        summary = pd.read_csv(where / "summary.csv", keep_default_na=False, na_values=[""])
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
            result = _result(group, metric, row, source, confidence, resamples)
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


def write_export(export: Export, schemas: Any, out_dir: str | Path) -> tuple[Path, Path]:
    """Validate ``export`` against ``schemas`` (:class:`verbeval.core.eee_schemas.Schemas`: the
    aggregate, then every instance row), then write its two files under ``out_dir`` (each atomically);
    an invalid document: the validator's error, nothing written. Returns (aggregate, samples) paths."""
    from verbeval.core.eee_schemas import check
    from verbeval.core.io import write_text

    check(schemas.aggregate, export.aggregate, export.aggregate_path)
    for i, sample in enumerate(export.samples, 1):
        check(schemas.instance, sample, f"{export.samples_path}:{i}")
    out = Path(out_dir)
    samples, aggregate = out / export.samples_path, out / export.aggregate_path
    write_text(samples, export.samples_text())
    write_text(aggregate, json.dumps(export.aggregate, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return aggregate, samples
