"""verbeval.core.plots imports seaborn without scipy; the style and palettes are those of a plain import."""

import json
import subprocess
import sys

_PROBE = """
import json, sys
{pre}
from verbeval.core import plots
hidden = "scipy.stats" not in sys.modules
plots.apply_style()
import matplotlib.pyplot as plt
rc = {{k: repr(v) for k, v in sorted(plt.rcParams.items())}}
pal = {{k: [list(map(float, c)) for c in plots.palette([str(i) for i in range(12)] if k == "many" else ["a", "b", "c"],
        "group" if k != "model" else "model").values()] for k in ("group", "model", "many")}}
import scipy.stats  # loads as usual afterwards
print(json.dumps({{"hidden": hidden, "rc": rc, "pal": pal, "stats": scipy.stats.norm.cdf(0.0)}}))
"""


def _probe(pre: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(pre=pre)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_seaborn_without_scipy_same_style_and_palettes():
    lean = _probe("")
    plain = _probe("import scipy.stats")  # scipy.stats already loaded: a plain seaborn import
    assert lean["hidden"] is True and plain["hidden"] is False
    assert lean["rc"] == plain["rc"]
    assert lean["pal"] == plain["pal"]
    assert lean["stats"] == plain["stats"] == 0.5


def test_marks_removed_after_import():
    code = (
        "import sys; from verbeval.core import plots; print([m for m in plots.SCIPY_FOR_SEABORN if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
