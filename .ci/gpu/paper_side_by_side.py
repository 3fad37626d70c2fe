"""The paper configuration from scratch on one GPU, another commit's tree and this one side by side in
one call, and the sha256 of every output of both (issue 43: commit 5d1ee78, one infer job per model,
against the GPU queue job).

Run on the GPU machine from the repository root, after `.ci/gpu/run.sh`'s set-up:
    python3 .ci/gpu/paper_side_by_side.py old new
with .gpu/old holding the other tree (`git archive COMMIT src workflow Snakefile config resources
profiles envs pyproject.toml | tar -x -C .gpu/old`), .gpu/shared the data mirror (data/) and the
four tokenizers of config/config.yaml (tokenizers/), and $OUT the folder for the logs and
report.json. The four models are built once at the paper's sizes with random weights
(verbeval.bench.paper_shapes) and both trees run on them. Not part of CI (no GPU there).
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(os.environ["OUT"])
ROOT = Path.cwd().resolve()
sys.path.insert(0, str(ROOT / "src"))
from verbeval.bench.paper_shapes import PAPER_MODELS, build_model, models_config  # noqa: E402

T0 = time.time()
work = Path("/tmp/paperwork")
shared = ROOT / ".gpu" / "shared"
t = time.time()
dirs = {s.name: build_model(s, shared, work / "models") for s in PAPER_MODELS}
(work / "models.yaml").write_text(models_config(dirs))
report = {"build_models_s": round(time.time() - t, 1), "runs": {}}
print("models built", report, flush=True)


def wrapper(tree: Path) -> Path:
    b = work / f"bin-{tree.name}"
    b.mkdir(parents=True, exist_ok=True)
    (b / "verbeval").write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(tree / 'src')!r})\n"
        "from verbeval.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n"
    )
    os.chmod(b / "verbeval", 0o755)
    return b


def hashes(root: Path) -> dict:
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = Path(d) / f
            r = str(p.relative_to(root))
            if "/logs/" in f"/{r}" or r.endswith(".log"):
                continue
            out[r] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


order = sys.argv[1:] or ["old", "new"]
for label in order:
    tree = (ROOT / ".gpu" / "old") if label == "old" else ROOT
    run_dir = work / label
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree / 'src'}:/tmp/site"
    env["PATH"] = f"{wrapper(tree)}:/tmp/site/bin:{env['PATH']}"
    cmd = [
        "snakemake",
        "--cores",
        "8",
        "--configfile",
        "config/config.yaml",
        str(work / "models.yaml"),
        "--config",
        f"results_dir={run_dir}/results",
        f"raw_dir={run_dir}/raw",
        f"data_mirror={shared / 'data'}",
    ]
    t = time.time()
    with open(OUT / f"snakemake-{label}.log", "w") as log:
        rc = subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.time() - t
    text = (OUT / f"snakemake-{label}.log").read_text()
    jobs = text.count("Finished jobid")
    report["runs"][label] = {"rc": rc, "wall_s": round(wall, 1), "jobs_finished": jobs}
    print(label, report["runs"][label], flush=True)
    # the model jobs' logs, for the load / compute lines
    logs = run_dir / "results" / "logs"
    with open(OUT / f"model-logs-{label}.txt", "w") as fh:
        for p in sorted(list(logs.rglob("infer.log")) + list(logs.rglob("queues/*.log"))):
            fh.write(f"==== {p}\n{p.read_text()[-6000:]}\n")
if set(order) == {"old", "new"}:
    a, b = hashes(work / "old" / "results"), hashes(work / "new" / "results")
    diff = sorted(k for k in a if k in b and a[k] != b[k])
    report["hashes"] = {
        "old": len(a),
        "new": len(b),
        "differ": len(diff),
        "only_old": sorted(set(a) - set(b))[:20],
        "only_new": sorted(set(b) - set(a))[:20],
        "differ_files": diff[:40],
    }
    print("hashes", report["hashes"], flush=True)
report["gpu"] = subprocess.run(
    ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
    capture_output=True,
    text=True,
).stdout.strip()
report["total_s"] = round(time.time() - T0, 1)
(OUT / "report.json").write_text(json.dumps(report, indent=1))
# pipeline against the raw forward pass (new tree), if time is left
if time.time() - T0 < 430:
    import pandas as pd

    from verbeval.bench.paper_shapes import _throughput

    agr = work / "new" / "results" / "agreement"
    rows = _throughput(
        {k: v for k, v in dirs.items() if k in ("bert-large-cased", "gpt2-xl")},
        pd.read_parquet(agr / "templates.parquet"),
        pd.read_parquet(agr / "lexicon.parquet"),
        device="cuda",
        n_contexts=4096,
        batch_size=512,
        repeats=1,
    )
    report["throughput"] = rows
    (OUT / "report.json").write_text(json.dumps(report, indent=1))
    print("throughput", rows, flush=True)
print("done", round(time.time() - T0, 1), flush=True)
