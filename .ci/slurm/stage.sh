#!/usr/bin/env bash
# CI stage: the workflow on a real one-node SLURM cluster (docs/workflow.md, "SLURM", "Tested setup").
#   1. install, configure and start the cluster (install.sh, configure.sh, start.sh);
#   2. run CI's smallest configuration (.test/config/small.yaml on .test/config/ci.yaml, into its
#      results_dir, results-ci-small) through the SLURM profile (profiles/slurm, the account set to the
#      CI account), cancelling (scancel) the first inference job once after its first shard is
#      finished: the run must notice within a minute, resubmit it (retries: 1) and the new job must keep
#      the finished shards;
#   3. a one-job run with accounting down, and a job killed for its memory;
#   4. stop the daemons by PID (stop.sh, also on failure).
# Its reference is the local run of the same configuration: `dvc repro pipelines/ci/dvc.yaml` in a clone
# of its own (.ci/run, in the background beside this stage), whose files .ci/run compares byte for byte
# with this run's afterwards. Prints the wall time of the run and the seconds from scancel to the run
# noticing. Root only.
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
CONFIGS=(.test/config/ci.yaml .test/config/small.yaml)
CLUSTER=results-ci-small  # the results_dir of .test/config/small.yaml
rm -rf "$CLUSTER" .snakemake/slurm_logs

bash "$HERE/install.sh"
bash "$HERE/configure.sh"
# the daemons stopped by their PIDs, also when the stage fails
trap 'bash "$HERE/stop.sh"' EXIT
bash "$HERE/start.sh"

# the shipped profile, with the CI account in place of the placeholder
mkdir -p "$D/profile"
sed "s/\"CHANGE-ME\"/\"$SLURM_ACCOUNT_CI\"/" profiles/slurm/config.yaml > "$D/profile/config.yaml"
LOG="$D/snakemake-slurm.log"
t0=$SECONDS
snakemake --workflow-profile "$D/profile" --configfile "${CONFIGS[@]}" \
  --config data_mirror="$SHARED/data" > "$LOG" 2>&1 &
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
# the files the local reference run (.ci/run's dvc repro of the same configuration) must reproduce byte
# for byte, before the runs below touch the results folder (a killed inference job loses its outputs)
(
  cd "$CLUSTER"
  sha256sum agreement/table2.csv agreement/table2.md agreement/summary_all.csv agreement/metrics.json \
    agreement/comparisons.csv agreement/first_gains.csv agreement/precision_audit.csv agreement/metrics/*/*.json \
    agreement/*/lemmas.parquet agreement/*/lemma_stats.csv agreement/*/*/summary.csv agreement/*/*/scores.parquet \
    agreement/*/*/tse.parquet simverb/*/table.csv simverb/*/similarities.parquet simverb/*/agreement_join_summary.csv \
    veridicality/*/signatures.csv
) > "${VERBEVAL_SLURM_SUMS:-$D/sums}"
echo "slurm stage: $(wc -l < "${VERBEVAL_SLURM_SUMS:-$D/sums}") files of the profile run recorded for the byte comparison"

# accounting down (sacct fails, as on a cluster without slurmdbd): the run still sees its jobs end
kill "$(cat "$D/slurmdbd.pid")"
for _ in $(seq 30); do sacct -X -n >/dev/null 2>&1 || break; sleep 1; done
if sacct -X -n >/dev/null 2>&1; then echo "slurm stage: sacct still answers without slurmdbd" >&2; exit 1; fi
t1=$SECONDS
snakemake "$CLUSTER/agreement/tiny-gpt2/lemma_stats.csv" --workflow-profile "$D/profile" --configfile "${CONFIGS[@]}" \
  --config data_mirror="$SHARED/data" --forcerun lemma_stats > "$D/snakemake-nodbd.log" 2>&1 \
  || { echo "slurm stage: the run without accounting failed" >&2; tail -40 "$D/snakemake-nodbd.log" >&2; exit 1; }
echo "slurm stage: a one-job run with slurmdbd stopped ended normally in $((SECONDS - t1)) s"

# a job killed for its memory (OverMemoryKill): the run's last lines name the SLURM reason
# (its rule log holds no error line); a copy of the profile gives infer 50 MB
mkdir -p "$D/profile-mem"
sed "s/    mem_mb: 32000/    mem_mb: 50/" "$D/profile/config.yaml" > "$D/profile-mem/config.yaml"
grep -q "mem_mb: 50$" "$D/profile-mem/config.yaml"
if snakemake "$CLUSTER/agreement/tiny-gpt2/shards/manifest.json" --workflow-profile "$D/profile-mem" --retries 0 \
     --configfile "${CONFIGS[@]}" --config data_mirror="$SHARED/data" \
     --forcerun infer > "$D/snakemake-mem.log" 2>&1; then
  echo "slurm stage: an inference job with 50 MB was not killed" >&2; exit 1
fi
# the summary comes last but for Snakemake's own closing lines (log path, elapsed time, WorkflowError)
tail -n 8 "$D/snakemake-mem.log"
tail -n 8 "$D/snakemake-mem.log" | grep -q "^  infer: .*exceeded memory limit" \
  || { echo "slurm stage: the last lines do not name the memory kill" >&2; tail -40 "$D/snakemake-mem.log" >&2; exit 1; }

echo "slurm stage: profile run ${cluster_s} s (with one cancel and resubmission);" \
     "scancel of job $job noticed after ${noticed} s; stage $SECONDS s"
