"""One-line messages for hostile inputs (issue 23, item 7 'Unclear messages')."""

from __future__ import annotations

import argparse
import errno
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from verbeval.agreement.data.custom_pairs import read_custom_pairs
from verbeval.core.errors import InputError
from verbeval.core.io import atomic_path, describe_os_error


def test_a_latin1_pair_file_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "pairs.csv"
    p.write_bytes(
        "sentence_good,sentence_bad\nthe dog runs,the dog run\nthe caf\xe9 owner runs,the caf\xe9 owner run\n".encode(
            "latin-1"
        )
    )
    with pytest.raises(InputError) as err:
        read_custom_pairs(p, "csv", "mine", "mine")
    assert err.value.line == 3
    assert str(err.value) == (
        f"{p}:3: not UTF-8 text: byte 0xe9 at column 8 (invalid continuation byte); save the "
        "file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
    )


def test_line_separators_inside_json_strings_are_text(tmp_path: Path) -> None:
    p = tmp_path / "pairs.jsonl"
    p.write_text(
        '{"sentence_good": "the dog runs", "sentence_bad": "the dog run", "note": "a\u2028b\u0085c"}\n'
        '{"sentence_good": "the dogs run", "sentence_bad": "the dogs runs"}\n',
        encoding="utf-8",
    )
    rows, rejects = read_custom_pairs(p, "jsonl", "mine", "mine")
    assert rows["line"].tolist() == [1, 2] and rows["note"].tolist() == ["a\u2028b\u0085c", ""]
    assert rows["label"].tolist() == ["singular", "plural"] and rejects.empty


def test_a_pair_differing_in_a_noun_warns_with_its_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = tmp_path / "pairs.jsonl"
    p.write_text(
        '{"sentence_good": "the dog runs", "sentence_bad": "the dog run"}\n'
        '{"sentence_good": "the dogs runs", "sentence_bad": "the dog runs"}\n',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING, logger="verbeval.agreement.data.custom_pairs"):
        rows, _ = read_custom_pairs(p, "jsonl", "mine", "mine")
    assert len(rows) == 2  # kept: a warning, not an error
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{p}:2: the differing word 'dogs'/'dog' follows 'the': a noun, not the verb? (1 pair(s) "
        "like this, line(s) 2): check that the word that differs is the verb"
    ]
    caplog.clear()
    p.write_text('{"sentence_good": "the dog runs", "sentence_bad": "the dog run"}\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="verbeval.agreement.data.custom_pairs"):
        read_custom_pairs(p, "jsonl", "mine", "mine")
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"),
    ],
    ids=["errno", "pyarrow-style"],
)
def test_disk_full_names_the_output(tmp_path: Path, exc: OSError) -> None:
    dest = tmp_path / "out" / "1-of-2.parquet"
    with pytest.raises(OSError) as err:
        with atomic_path(dest) as tmp:
            tmp.write_bytes(b"partial")
            raise exc
    assert describe_os_error(err.value).startswith(f"{dest}: ")
    assert "No space left on device" in describe_os_error(err.value)
    assert not dest.exists() and list(dest.parent.iterdir()) == []  # nothing half-written left


def test_infer_log_total_includes_the_model_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fake clock: loading takes 100 s, the inference body 5 s; 'total' is the whole command."""
    from verbeval.agreement import runs
    from verbeval.agreement.engine import inference, lengths
    from verbeval.core.model_runs import ModelRun
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.core.prefetch import Prefetcher

    clock = [0.0]
    monkeypatch.setattr(runs.time, "perf_counter", lambda: clock[0])

    def load(self: Any, request: Any) -> Any:
        clock[0] += 100.0
        return argparse.Namespace(device=argparse.Namespace(type="cpu"))

    def infer_model(*args: Any, **kw: Any) -> dict[str, Any]:
        clock[0] += 5.0
        return {
            "shards": [],
            "timing": {"contexts": 0, "compute_s": 5.0, "contexts_per_s": 0.0, "writer_busy_s": 0.0, "total_s": 5.0},
        }

    monkeypatch.setattr(Prefetcher, "take", load)
    monkeypatch.setattr(inference, "infer_model", infer_model)
    monkeypatch.setattr(lengths, "check_context_lengths", lambda *a, **kw: None)  # no tokenizer here
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "t.parquet")
    t = str(tmp_path / "t.parquet")
    shards = runs.ShardRun(t, t, ("g",), str(tmp_path / "s" / "manifest.json"), n_chunks=1, top_k=1, progress=False)
    with caplog.at_level(logging.INFO, logger=runs.log.name):
        runs.infer(ModelRun(ModelSource("m"), batch_size="4", random_init=False), shards)
    line = next(r.getMessage() for r in caplog.records if "shards ->" in r.getMessage())
    assert "model load 100.0 s" in line and line.endswith("total 105.0 s")
