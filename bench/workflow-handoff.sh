#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $VARS are expanded in the jobs
# How fast a workflow hands on from one job to the next, against one local
# joblet daemon (embedded defaults: full sandbox, warm pool of 2):
#
# - handoff: chains of WORKFLOW_BENCH_JOBS jobs (each requires the one
#   before COMPLETED); each job's shell writes the time (ns) as it starts
#   and as it is about to exit into the run's shared volume. The delay is
#   the next job's start less the job's end, as the jobs saw them (so it
#   holds the shell's exit, the daemon's handoff and the next job's whole
#   start), and as the daemon recorded them (started_ms − ended_ms, ms
#   resolution: the handoff itself). One chain's jobs run 0.3 s, as a
#   pipeline's steps run long enough for the node's warm sandboxes to be
#   refilled; the other's end at once, so each start meets the refill
#   (2 cores). The goal: under 10 ms median; upstream Joblet polled
#   dependencies every 5 s.
# - beside it, in the same run: the plain job start, `rnx job run --follow
#   -- true` from spawn to exit, paced (50 ms apart).
# - validation: `rnx workflow validate` of a generated 10,000-job DAG (the
#   file read and checked by rnx, then by the node, every job's request
#   against the node too), and the same file's `Workflow::parse` alone
#   (`cargo bench -p joblet-workflow --bench validate` times that with
#   criterion). The goal: under 100 ms.
#
# Usage: bench/workflow-handoff.sh [--no-build]   (as root)
#   WORKFLOW_BENCH_JOBS   (default 40) jobs in the chain
#   WORKFLOW_BENCH_ROUNDS (default 20) plain starts and validations
#   WORKFLOW_BENCH_DIR    (default ${TMPDIR:-/tmp}/joblet-bench-workflow) scratch dir
#   WORKFLOW_BENCH_BIN    (default target/release) joblet, joblet-shim, rnx: another build to compare
# Prints markdown on stdout, progress on stderr. Cleans up on exit: the
# daemon, its cgroups, its volumes and its scratch directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/workflow-handoff.sh [--no-build]" >&2; exit 2 ;;
  esac
done
JOBS="${WORKFLOW_BENCH_JOBS:-40}"
ROUNDS="${WORKFLOW_BENCH_ROUNDS:-20}"
DIR="${WORKFLOW_BENCH_DIR:-${TMPDIR:-/tmp}/joblet-bench-workflow}"
MARKER="$DIR/.joblet-bench-workflow"
CGROUP_BASE="joblet-wfbench-$$"
UNIFIED=/sys/fs/cgroup/unified
BIN="${WORKFLOW_BENCH_BIN:-$ROOT/target/release}"

log() { echo "workflow-handoff: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, volumes)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] && [ "$JOBS" -ge 2 ] || die "WORKFLOW_BENCH_JOBS must be 2 or more, got '$JOBS'"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "WORKFLOW_BENCH_ROUNDS must be a positive number, got '$ROUNDS'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to time the runs (Debian: python3)"

# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh" # start/stop_joblet_daemon, remove_cgroups_named

if [ "$BUILD" = 1 ]; then
  log "building joblet and rnx (release)"
  cargo build --release --locked -p joblet -p joblet-sandbox -p rnx >&2
fi
for f in joblet joblet-shim rnx; do
  [ -x "$BIN/$f" ] || die "$BIN/$f missing: run without --no-build"
done

DAEMON_PID=""
STATE="$DIR/state"
cleanup() {
  stop_joblet_daemon
  remove_cgroups_named "$CGROUP_BASE"
  rm -f "/run/joblet/cgroup-$CGROUP_BASE.lock"
  # The runs' shared volumes outlive the daemon by design; not the bench's.
  if [ -d "$STATE/volumes" ]; then
    findmnt -rno TARGET | grep "^$STATE/volumes/" | while read -r m; do umount "$m" || true; done
  fi
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set WORKFLOW_BENCH_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR/chain" "$DIR/big"
touch "$MARKER"

cat >"$DIR/joblet-config.yml" <<YAML
# Written by joblet bench/workflow-handoff.sh; removed with $DIR.
server:
  address: "127.0.0.1:0"
  state_dir: "$STATE"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: "$CGROUP_BASE"
YAML
log "starting joblet daemon"
start_joblet_daemon "$BIN" "$DIR/joblet-config.yml" "$STATE" "$DIR/joblet.log" ||
  die "the daemon did not start: $(tail -n 5 "$DIR/joblet.log")"
RNX=("$BIN/rnx" --config "$STATE/rnx-config.yml")

python3 - "$DIR" "$JOBS" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
for kind, work in (("long", "sleep 0.3; "), ("short", "")):
    step = (f's=$(date +%s%N); {work}echo "$JOBLET_WORKFLOW_JOB $s $(date +%s%N)" '
            '>> "$JOBLET_WORKFLOW_SHARED/times"')
    with open(f"{d}/chain/{kind}.yaml", "w") as f:
        f.write(f"name: handoff-{kind}\njobs:\n")
        for i in range(n):
            f.write(f"  j{i:03d}:\n    command: sh\n    args: [\"-c\", '{step}']\n")
            if i:
                f.write(f"    requires: [{{j{i-1:03d}: COMPLETED}}]\n")
        # The last job prints the times the others left.
        f.write(f"  report:\n    command: sh\n    args: [\"-c\", 'cat \"$JOBLET_WORKFLOW_SHARED/times\"']\n"
                f"    requires: [{{j{n-1:03d}: COMPLETED}}]\n")
# 10,000 jobs: 100 layers of 100, each job requiring two of the layer
# before (the shape of crates/joblet-workflow's validation bench).
with open(f"{d}/big/big.yaml", "w") as f:
    f.write("name: ten-thousand\njobs:\n")
    for layer in range(100):
        for k in range(100):
            f.write(f"  l{layer}-j{k}:\n    command: \"true\"\n")
            if layer:
                a, b = k, (k + 37) % 100
                f.write(f"    requires: [{{l{layer-1}-j{a}: COMPLETED}}, {{l{layer-1}-j{b}: ANY}}]\n")
PY

for kind in long short; do
  log "running the $kind chain of $JOBS jobs"
  id="$("${RNX[@]}" --json workflow run "$DIR/chain/$kind.yaml" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
  for _ in $(seq 600); do
    state="$("${RNX[@]}" --json workflow status "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')"
    case "$state" in PENDING|RUNNING) sleep 0.2 ;; *) break ;; esac
  done
  [ "$state" = COMPLETED ] || die "the $kind chain ended $state: $("${RNX[@]}" workflow status "$id")"
  "${RNX[@]}" --json workflow status "$id" >"$DIR/$kind-status.json"
  report_job="$(python3 -c 'import json,sys; print([j for j in json.load(open(sys.argv[1]))["jobs"] if j["name"]=="report"][0]["job_id"])' "$DIR/$kind-status.json")"
  "${RNX[@]}" job log "$report_job" >"$DIR/$kind-times"
done

log "timing $ROUNDS plain starts, paced"
python3 - "$ROUNDS" "${RNX[@]}" >"$DIR/plain.txt" <<'PY'
import subprocess, sys, time
rounds, rnx = int(sys.argv[1]), sys.argv[2:]
for _ in range(3):
    subprocess.run(rnx + ["job", "run", "--follow", "--", "true"], check=True, capture_output=True)
for _ in range(rounds):
    time.sleep(0.05)
    t0 = time.perf_counter()
    subprocess.run(rnx + ["job", "run", "--follow", "--", "true"], check=True, capture_output=True)
    print((time.perf_counter() - t0) * 1000)
PY

log "timing $ROUNDS validations of 10,000 jobs"
python3 - "$ROUNDS" "$DIR/big/big.yaml" "${RNX[@]}" >"$DIR/validate.txt" <<'PY'
import subprocess, sys, time
rounds, big, rnx = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
subprocess.run(rnx + ["workflow", "validate", big], check=True, capture_output=True)
for _ in range(rounds):
    t0 = time.perf_counter()
    subprocess.run(rnx + ["workflow", "validate", big], check=True, capture_output=True)
    print((time.perf_counter() - t0) * 1000)
PY

echo "machine: $(nproc) cores, kernel $(uname -r), $(date -u +%F), commit $(git rev-parse --short HEAD); chain of $JOBS jobs, $ROUNDS rounds"
echo
python3 - "$DIR" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
def row(label, v, fmt):
    print(f"| {label} | {fmt(statistics.median(v))} | {fmt(q(v, .9))} | {fmt(max(v))} | {len(v)} |")
ms2 = lambda x: f"{x:.2f} ms"
ms0 = lambda x: f"{x:.0f} ms"
print("| measure | median | p90 | max | n |")
print("|---|---:|---:|---:|---:|")
medians = {}
for kind, what in (("long", "steps of 0.3 s"), ("short", "steps that end at once")):
    t = {}
    for line in open(f"{d}/{kind}-times"):
        name, start, end = line.split()
        t[name] = (int(start), int(end))
    names = sorted(t)
    seen = [(t[b][0] - t[a][1]) / 1e6 for a, b in zip(names, names[1:])]
    jobs = {j["name"]: j for j in json.load(open(f"{d}/{kind}-status.json"))["jobs"]}
    rec = [jobs[b]["started_unix_ms"] - jobs[a]["ended_unix_ms"] for a, b in zip(names, names[1:])]
    medians[kind] = (statistics.median(seen), statistics.median(rec))
    row(f"{what}: a job's last command → its dependent's first, as the jobs saw it", seen, ms2)
    row(f"{what}: end recorded → dependent's start recorded (the handoff; ms)", rec, ms0)
plain = [float(x) for x in open(f"{d}/plain.txt")]
val = [float(x) for x in open(f"{d}/validate.txt")]
row("plain start, `rnx job run --follow -- true`, paced", plain, ms2)
row("`rnx workflow validate` of 10,000 jobs (read and checked by rnx, then by the node)", val, lambda x: f"{x:.1f} ms")
print()
print(f"0.3 s steps: last command → dependent's first **{medians['long'][0]:.2f} ms** median, "
      f"the handoff **{medians['long'][1]:.0f} ms** (goal: under 10 ms; upstream polled every 5 s); "
      f"steps that end at once: {medians['short'][0]:.2f} ms ({medians['short'][1]:.0f} ms); "
      f"a plain start {statistics.median(plain):.2f} ms; `rnx workflow validate`, 10,000 jobs: {statistics.median(val):.1f} ms")
PY
