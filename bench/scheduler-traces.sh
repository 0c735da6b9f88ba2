#!/usr/bin/env bash
# Every policy on every trace, with preemption costs on (the simulator's
# defaults: checkpoints every 30 min, 2 min restore): the tables of
# bench/history/scheduler.md, reproduced.
#
#   bench/scheduler-traces.sh            # all tables (a few minutes, release build)
#   KNEE=1 bench/scheduler-traces.sh     # also each VC at its largest saturated size
#   QUICK=1 bench/scheduler-traces.sh    # bounded: Philly VCs only, first 5,000 jobs each
#
# Traces: fixtures/traces (or $TRACES; the same files as /work/shared/fixtures/traces): Philly whole on 48 x 8
# GPUs (as bench/history/scheduler.md), Philly's 6214e9 on 4 x 8 (the
# 32-GPU single-GPU cluster of issue 35), each Philly virtual cluster at
# its saturating size, and Tiresias' 60_job.csv and tf_job.csv on its
# cluster_spec.csv (16 nodes x 4 GPUs; 60_job.csv also at its saturating
# size, with 4-GPU nodes).
#
# Saturating size of a virtual cluster (documented rule, no per-trace
# tuning): the smallest power-of-two GPU count >= the VC's largest job at
# which FIFO's average wait exceeds its average run time (avg JCT - avg
# wait under FIFO); if FIFO never queues that much up to 4,096 GPUs, the
# smallest power of two >= the largest job (marked "unsaturated"). With
# KNEE=1, also the largest power of two (walking up from there) at which
# FIFO is still saturated: the knee, where queueing is moderate. Clusters
# of 8 GPUs or more are N x 8 nodes; smaller ones one node of N GPUs.
#
# After each table a line checks the goal for the `gittins` row against
# `fifo`: avg JCT <= 1.0x (<= 0.5x when saturated), p99 JCT <= 1.2x,
# utilisation within 2 points when saturated, 0 oversubscription.
set -euo pipefail

cd "$(dirname "$0")/.."
TRACES=${TRACES:-fixtures/traces}
PHILLY="$TRACES/philly.csv"
TIRESIAS="$TRACES/tiresias"
POLICIES=fifo,backfill,las,gittins
LIMIT=()
[ -n "${QUICK:-}" ] && LIMIT=(--limit 5000)

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -p joblet --bin joblet >&2
JOBLET=${JOBLET:-$CARGO_TARGET_DIR/release/joblet}
command -v jq >/dev/null || { echo "jq is needed" >&2; exit 1; }

shape() { # GPUs -> NODESxGPUS
  if [ "$1" -ge 8 ]; then echo "$(($1 / 8))x8"; else echo "1x$1"; fi
}

# Whether FIFO saturates: average wait > average run time.
saturated() { # trace cluster [--vc NAME]
  local t=$1 c=$2; shift 2
  "$JOBLET" simulate --trace "$t" --cluster "$c" --policy fifo "${LIMIT[@]}" --json "$@" |
    jq -e '.policies[0] | .queueing_delay.avg_s > (.jct.avg_s - .queueing_delay.avg_s)' >/dev/null
}

goal() { # json file -> one line
  jq -r '
    (.policies | map({(.policy): .}) | add) as $p
    | $p.fifo as $f | $p.gittins as $g
    | ($f.queueing_delay.avg_s > ($f.jct.avg_s - $f.queueing_delay.avg_s)) as $sat
    | ($g.jct.avg_s / $f.jct.avg_s) as $avg
    | ($g.jct.p99_s / $f.jct.p99_s) as $p99
    | (($g.utilisation - $f.utilisation) * 100) as $du
    | [ ($avg <= 1.0 and ((($sat | not)) or $avg <= 0.5)),
        ($p99 <= 1.2),
        ((($sat | not)) or $du >= -2),
        ($g.max_oversubscription == 0) ] as $ok
    | "Goal (gittins vs fifo, FIFO \(if $sat then "saturated" else "not saturated" end)): avg JCT \($avg * 100 | round / 100)x, p99 JCT \($p99 * 100 | round / 100)x, utilisation \($du * 10 | round / 10) points, max oversubscription \($g.max_oversubscription): \(if ($ok | all) then "met" else "NOT met" end)"' "$1"
}

table() { # title trace cluster [args...]
  local title=$1 t=$2 c=$3; shift 3
  local json
  json=$(mktemp)
  echo "### $title"
  echo
  "$JOBLET" simulate --trace "$t" --cluster "$c" --policy "$POLICIES" "${LIMIT[@]}" --json "$@" >"$json"
  "$JOBLET" simulate --trace "$t" --cluster "$c" --policy "$POLICIES" "${LIMIT[@]}" --markdown "$@"
  echo
  echo "$(goal "$json")"
  echo
  rm -f "$json"
}

if [ -z "${QUICK:-}" ]; then
  table "Philly, whole trace, 48 x 8 GPUs" "$PHILLY" 48x8
  table "Philly 6214e9 (99 % single-GPU jobs), 4 x 8 GPUs" "$PHILLY" 4x8 --vc 6214e9
fi

# Virtual clusters, largest first, with their largest job.
tail -n +2 "$PHILLY" | awk -F, '$5 != "" {n[$5]++; if ($3 + 0 > m[$5]) m[$5] = $3 + 0} END {for (v in n) print n[v], v, m[v]}' |
  sort -rn | while read -r jobs vc largest; do
  g=1
  while [ "$g" -lt "$largest" ]; do g=$((g * 2)); done
  first=$g found=
  while [ "$g" -le 4096 ]; do
    if saturated "$PHILLY" "$(shape "$g")" --vc "$vc"; then found=$g; break; fi
    g=$((g * 2))
  done
  if [ -n "$found" ]; then
    table "Philly $vc ($jobs jobs, largest $largest GPUs), $found GPUs: smallest saturated" "$PHILLY" "$(shape "$found")" --vc "$vc"
    if [ -n "${KNEE:-}" ]; then
      knee=$found
      while [ $((knee * 2)) -le 4096 ] && saturated "$PHILLY" "$(shape $((knee * 2)))" --vc "$vc"; do
        knee=$((knee * 2))
      done
      if [ "$knee" != "$found" ]; then
        table "Philly $vc ($jobs jobs, largest $largest GPUs), $knee GPUs: knee (largest saturated)" "$PHILLY" "$(shape "$knee")" --vc "$vc"
      fi
    fi
  else
    table "Philly $vc ($jobs jobs, largest $largest GPUs), $first GPUs: unsaturated" "$PHILLY" "$(shape "$first")" --vc "$vc"
  fi
done

if [ -z "${QUICK:-}" ]; then
  # cluster_spec.csv: 1 switch x 16 nodes x 4 GPUs.
  table "Tiresias 60_job.csv, 16 x 4 GPUs (cluster_spec.csv)" "$TIRESIAS/60_job.csv" 16x4
  # The rule above with cluster_spec.csv's 4-GPU nodes: its largest job
  # has 8 GPUs, and FIFO saturates 2 x 4.
  if saturated "$TIRESIAS/60_job.csv" 2x4; then
    table "Tiresias 60_job.csv, 2 x 4 GPUs: smallest saturated" "$TIRESIAS/60_job.csv" 2x4
  fi
  table "Tiresias tf_job.csv, 16 x 4 GPUs (cluster_spec.csv)" "$TIRESIAS/tf_job.csv" 16x4
fi
