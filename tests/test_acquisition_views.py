"""The acquisition curves as DVC plots: the wide per-group tables of `verbeval dvc-acquisition-plots`
and the top-level plots that dvc.yaml declares for them (in process, hand-made curves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verbeval.agreement.report.dvc_views import acquisition_series, wide_acquisition_curves
from verbeval.cli import main
from verbeval.core.errors import VerbevalError
from verbeval.workflow.dvc_yaml import JobSpec, dvc_pipeline

REPO = Path(__file__).resolve().parents[1]


def _curves() -> pd.DataFrame:
    """Two seeds of family toy at steps 1 and 10 (seed 1 lacks step 10 in group prep), one group
    each, TSE, EW and MW at top p = 1 and EW at top p = 0.5 (not plotted)."""
    rows = []
    for seed, steps in (("0", (1, 10)), ("1", (1, 10))):
        for group in ("simple", "prep"):
            for step in steps:
                if seed == "1" and group == "prep" and step == 10:
                    continue
                base = step / 100 + (0.001 if seed == "1" else 0.0) + (0.5 if group == "simple" else 0.0)
                rows.append(("toy", seed, step, group, "tse", "", np.nan, base))
                rows.append(("toy", seed, step, group, "ew", "top", 1.0, base + 0.1))
                rows.append(("toy", seed, step, group, "mw", "top", 1.0, base + 0.2))
                rows.append(("toy", seed, step, group, "ew", "top", 0.5, 9.0))
    return pd.DataFrame(rows, columns=["family", "seed", "step", "group", "metric", "side", "cutoff", "value"])


def test_wide_curves_take_table2_metrics_per_series_and_step() -> None:
    tables = wide_acquisition_curves(_curves(), series=[("toy", "0"), ("toy", "1")], groups=["simple", "prep"])
    simple = tables["simple"]
    assert list(simple.columns) == [
        "step",
        "toy seed 0 TSE",
        "toy seed 0 EW",
        "toy seed 0 MW",
        "toy seed 1 TSE",
        "toy seed 1 EW",
        "toy seed 1 MW",
    ]
    assert simple["step"].tolist() == [1, 10]
    assert simple["toy seed 0 TSE"].tolist() == pytest.approx([0.51, 0.6])
    assert simple["toy seed 1 MW"].tolist() == pytest.approx([0.711, 0.801])  # EW at p = 0.5 (9.0) is not taken
    prep = tables["prep"]
    assert np.isnan(prep.loc[prep["step"] == 10, "toy seed 1 EW"]).all()  # a step a seed lacks stays empty
    assert acquisition_series("pythia", "", "ew") == "pythia EW"
    with pytest.raises(VerbevalError, match="curves: family 'toy', seed '2' has no rows in group 'simple'"):
        wide_acquisition_curves(_curves(), series=[("toy", "2")], groups=["simple"])


def test_the_command_writes_one_file_per_group(tmp_path: Path) -> None:
    curves = tmp_path / "curves.csv"
    _curves().to_csv(curves, index=False)
    out = tmp_path / "dvc"
    args = ["-q", "dvc-acquisition-plots", "--curves", str(curves), "--series", "toy", "0", "--series", "toy", "1"]
    assert main([*args, "--groups", "simple,prep", "--out-dir", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["prep.csv", "simple.csv"]
    assert (out / "simple.csv").read_text().splitlines()[1] == "1,0.51,0.61,0.71,0.511,0.611,0.711"


def test_dvc_yaml_declares_a_plot_per_group() -> None:
    out = "results/agreement/acquisition/dvc"
    job = JobSpec(
        "dvc_acquisition_plots",
        {},
        ("results/agreement/acquisition/curves.csv",),
        (f"{out}/simple.csv", f"{out}/prep.csv"),
        (),
        "verbeval dvc-acquisition-plots ...",
        params=(("series", "--series toy 0 --series toy 1"),),
        config_keys=("models",),
    )
    pipeline = dvc_pipeline([job], ["config/config.yaml"], REPO)
    assert pipeline["stages"]["dvc_acquisition_plots"]["outs"] == [
        {f"{out}/simple.csv": {"cache": False}},
        {f"{out}/prep.csv": {"cache": False}},
    ]
    plots = {k: v for p in pipeline["plots"] for k, v in p.items()}
    assert list(plots) == ["acquisition/simple", "acquisition/prep"]
    assert plots["acquisition/prep"]["x"] == "step"
    assert plots["acquisition/prep"]["y"] == {
        f"{out}/prep.csv": [acquisition_series("toy", s, m) for s in "01" for m in ("tse", "ew", "mw")]
    }
    # a pipeline below the root (the CI one) declares none
    assert "plots" not in dvc_pipeline([job], ["config/config.yaml"], REPO, "../..")
