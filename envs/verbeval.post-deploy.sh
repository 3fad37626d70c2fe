#!/usr/bin/env bash
# Snakemake (--sdm conda) runs this in the new environment right after creating it, from the
# workflow's working directory: the repository root. It installs verbeval from there with the extras
# the environment's rules need (their dependencies are in verbeval.yaml). The pip section of the yaml
# cannot name the checkout: Snakemake builds the environment from a copy of the file under
# .snakemake/conda/, where a relative path no longer points at the repository.
set -euo pipefail
if ! grep -q '^name = "verbeval"' pyproject.toml 2>/dev/null; then
    echo "envs/verbeval.post-deploy.sh: no verbeval pyproject.toml in $PWD; run snakemake from the repository root" >&2
    exit 1
fi
python -m pip install --no-deps --editable ".[plots,pdf]"
