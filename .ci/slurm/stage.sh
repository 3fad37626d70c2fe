#!/usr/bin/env bash
# CI stage: the workflow on a real one-node SLURM cluster (docs/workflow.md, "SLURM", "Tested setup").
#   1. install, configure and start the cluster (install.sh, configure.sh, start.sh);
#   2. run .ci/slurm/config.yaml locally (--cores 2; in a clone of the committed tree, in the background
#      from the start, beside step 1 and the profile run), then through the SLURM profile (profiles/slurm,
#      the account set to the CI account), cancelling (scancel) the first inference job once after
#      its first shard is written: the run must notice within a minute, resubmit it (retries: 1)
#      and the new job must keep the finished shards;
#   3. Table 2 (and the other agreement tables) of both runs must be byte-identical;
#   4. stop the daemons by PID (stop.sh, also on failure).
# Prints the wall times of both runs and the seconds from scancel to the run noticing. Root only.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=.ci/slurm
. "$HERE/env.sh"
D="$VERBEVAL_SLURM_DIR"
SHARED="${VERBEVAL_SHARED:-$(cd .. && pwd)/shared}"
for spec in "bert bert-base-cased tiny-bert-base-cased" "gpt2 gpt2 tiny-gpt2"; do
  set -- $spec
  [ -f "models/$3/config.json" ] || verbeval -q tiny-model --tokenizer "$SHARED/tokenizers/$2" --arch "$1" --out "models/$3"
done
CONFIGS=(.test/config/ci.yaml "$HERE/config.yaml")
LOCAL=results-slurm-local
CLUSTER=results-slurm
rm -rf "$CLUSTER" .snakemake/slurm_logs

# The local run (the reference of the byte comparison) needs no cluster: it runs in the background from
# the start, beside the install, the daemons' start and the profile run (those mostly wait: apt, daemons,
# job submission and status polls), in a clone of its own (a second snakemake in this folder would lock
# the same data/raw-ci files), with a stand-in scontrol first on PATH (no SLURM plugin wait, .ci/run).
# Its results are copied to $LOCAL before the comparison.
LOCAL_PID=""
if [ "${VERBEVAL_SLURM_REUSE_LOCAL:-0}" = 1 ] && [ -s "$LOCAL/agreement/table2.csv" ]; then
  local_s="(reused)"  # a developer's shortcut: keep the local run of a previous stage
else
  rm -rf "$LOCAL"
  LOCAL_DIR="$(mktemp -d /tmp/verbeval-slurm-local.XXXXXX)"
  git clone -q . "$LOCAL_DIR/verbeval"
  mkdir -p "$LOCAL_DIR/verbeval/models" "$LOCAL_DIR/bin"
  cp -r models/tiny-bert-base-cased models/tiny-gpt2 "$LOCAL_DIR/verbeval/models/"
  printf '#!/bin/sh\nexit 127\n' > "$LOCAL_DIR/bin/scontrol"
  chmod +x "$LOCAL_DIR/bin/scontrol"
  (
    cd "$LOCAL_DIR/verbeval"
    t1=$SECONDS
    PATH="$LOCAL_DIR/bin:$PATH" snakemake --cores 2 --quiet --configfile "${CONFIGS[@]}" \
      --config data_mirror="$SHARED/data" results_dir="$LOCAL"
    echo "$((SECONDS - t1))" > "$LOCAL_DIR/seconds"
  ) > "$LOCAL_DIR/local.log" 2>&1 &
  LOCAL_PID=$!
fi
# a local run still going when the stage stops (a failed step) is ended: its snakemake first (which ends
# its jobs), then its subshell
stop_local() {
  if [ -n "$LOCAL_PID" ]; then pkill -TERM -P "$LOCAL_PID" 2>/dev/null || true; kill -- "$LOCAL_PID" 2>/dev/null || true; fi
}
trap stop_local EXIT
wait_local() {  # the local run must have ended well; its results become $LOCAL
  [ -n "$LOCAL_PID" ] || return 0
  wait "$LOCAL_PID" || { echo "slurm stage: the local run failed" >&2; tail -60 "$LOCAL_DIR/local.log" >&2; exit 1; }
  LOCAL_PID=""
  cp -r "$LOCAL_DIR/verbeval/$LOCAL" "$LOCAL"
  local_s="$(cat "$LOCAL_DIR/seconds") (in the background)"
  rm -rf "$LOCAL_DIR"
}

bash "$HERE/install.sh"
bash "$HERE/configure.sh"
# the daemons stopped, and a local run still going (the stage failed) ended by its PID
trap 'bash "$HERE/stop.sh"; stop_local' EXIT
bash "$HERE/start.sh"

# the shipped profile, with the CI account in place of the placeholder
mkdir -p "$D/profile"
sed "s/\"CHANGE-ME\"/\"$SLURM_ACCOUNT_CI\"/" profiles/slurm/config.yaml > "$D/profile/config.yaml"
LOG="$D/snakemake-slurm.log"
t0=$SECONDS
snakemake --workflow-profile "$D/profile" --configfile "${CONFIGS[@]}" \
  --config data_mirror="$SHARED/data" results_dir="$CLUSTER" > "$LOG" 2>&1 &
SMK=$!

# cancel the first inference job once, after its first shard is finished: recorded in that model's
# shard journal (a shard's Parquet file alone may still be waiting for its score file and journal line,
# and another model's shard says nothing of this job)
job=""
for _ in $(seq 1800); do
  kill -0 "$SMK" 2>/dev/null || break
  read -r job model_log < <(squeue -h -t RUNNING -o "%i %k" \
    | awk '$2 ~ /^rule_infer_wildcards_/ {sub(/^rule_infer_wildcards_/, "", $2); print $1, $2; exit}') || true
  if [ -n "$job" ] && [ -s "$CLUSTER/agreement/$model_log/shards/.journal.jsonl" ]; then
    break
  fi
  job=""
  sleep 0.2
done
[ -n "$job" ] || { echo "slurm stage: no running inference job with a finished shard was seen" >&2; tail -50 "$LOG" >&2; exit 1; }
scancel "$job"
t_cancel=$SECONDS
noticed=""
for _ in $(seq 300); do
  if grep -q "SLURM-job '$job' failed" "$LOG"; then noticed=$((SECONDS - t_cancel)); break; fi
  kill -0 "$SMK" 2>/dev/null || break
  sleep 0.2
done
rc=0
wait "$SMK" || rc=$?
cluster_s=$((SECONDS - t0))
if [ "$rc" -ne 0 ]; then echo "slurm stage: the profile run failed (rc $rc)" >&2; tail -80 "$LOG" >&2; exit 1; fi
[ -n "$noticed" ] || { echo "slurm stage: the cancel of job $job was not noticed within 60 s" >&2; exit 1; }
[ "$noticed" -le 60 ] || { echo "slurm stage: the cancel of job $job was noticed after $noticed s (> 60)" >&2; exit 1; }
grep -q "SLURM status is: 'CANCELLED'" "$LOG"
# the resubmitted job kept the shards its cancelled predecessor had finished
infer_log="$CLUSTER/logs/agreement/$model_log/infer.log"
grep -E "shards, [0-9]+ to compute .* [1-9][0-9]* kept" "$infer_log" \
  || { echo "slurm stage: $infer_log: the resubmitted inference job kept no shard" >&2; cat "$infer_log" >&2; exit 1; }

wait_local
for f in table2.csv table2.md summary_all.csv metrics.json; do
  cmp "$LOCAL/agreement/$f" "$CLUSTER/agreement/$f"
done
cmp "$LOCAL"/simverb/tiny-gpt2/table.csv "$CLUSTER"/simverb/tiny-gpt2/table.csv
# accounting down (sacct fails, as on a cluster without slurmdbd): the run still sees its jobs end
kill "$(cat "$D/slurmdbd.pid")"
for _ in $(seq 30); do sacct -X -n >/dev/null 2>&1 || break; sleep 1; done
if sacct -X -n >/dev/null 2>&1; then echo "slurm stage: sacct still answers without slurmdbd" >&2; exit 1; fi
t1=$SECONDS
snakemake "$CLUSTER/agreement/tiny-gpt2/lemma_stats.csv" --workflow-profile "$D/profile" --configfile "${CONFIGS[@]}" \
  --config data_mirror="$SHARED/data" results_dir="$CLUSTER" --forcerun lemma_stats > "$D/snakemake-nodbd.log" 2>&1 \
  || { echo "slurm stage: the run without accounting failed" >&2; tail -40 "$D/snakemake-nodbd.log" >&2; exit 1; }
echo "slurm stage: a one-job run with slurmdbd stopped ended normally in $((SECONDS - t1)) s"

# a job killed for its memory (OverMemoryKill): the run's last lines name the SLURM reason
# (its rule log holds no error line); a copy of the profile gives infer 50 MB
mkdir -p "$D/profile-mem"
sed "s/    mem_mb: 32000/    mem_mb: 50/" "$D/profile/config.yaml" > "$D/profile-mem/config.yaml"
grep -q "mem_mb: 50$" "$D/profile-mem/config.yaml"
if snakemake "$CLUSTER/agreement/tiny-gpt2/shards/manifest.json" --workflow-profile "$D/profile-mem" --retries 0 \
     --configfile "${CONFIGS[@]}" --config data_mirror="$SHARED/data" results_dir="$CLUSTER" \
     --forcerun infer > "$D/snakemake-mem.log" 2>&1; then
  echo "slurm stage: an inference job with 50 MB was not killed" >&2; exit 1
fi
# the summary comes last but for Snakemake's own closing lines (log path, elapsed time, WorkflowError)
tail -n 8 "$D/snakemake-mem.log"
tail -n 8 "$D/snakemake-mem.log" | grep -q "^  infer: .*exceeded memory limit" \
  || { echo "slurm stage: the last lines do not name the memory kill" >&2; tail -40 "$D/snakemake-mem.log" >&2; exit 1; }

echo "slurm stage: local run ${local_s} s, profile run ${cluster_s} s (with one cancel and resubmission);" \
     "scancel of job $job noticed after ${noticed} s; Table 2 byte-identical; stage $SECONDS s"
