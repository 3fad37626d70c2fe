# Set-up on a GPU machine without network (the device tool): the wheels in .whl (snakemake and the
# packages verbeval needs that the machine lacks), then .ci/gpu/paper_side_by_side.py.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
python3 -c "import snakemake, pandas, pyarrow, transformers, torch; print('snakemake', snakemake.__version__, 'pandas', pandas.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)" || exit 1
printf '#!/bin/sh\nexit 127\n' > /tmp/site/bin/scontrol; chmod +x /tmp/site/bin/scontrol
python3 .ci/gpu/paper_side_by_side.py "$@" 2>&1 | tee $OUT/driver.log
