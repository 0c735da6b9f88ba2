#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted backticks/$vars are meant literally (markdown labels, sh -c scripts)
# GPU job start latency, all in one run on this machine (issue 6, BENCHMARKS.md):
#   - `rnx job run --follow --gpu=1 -- true` end to end against a local
#     joblet daemon (sandbox on) whose 8 GPUs are SIMULATED from a mock-NVML
#     profile (gpu.simulate, served by target/release/libnvidia_ml.so);
#     `rnx job run --follow -- true` on the same daemon as a reference;
#   - Slurm `srun --gres=gpu:1 true` on the private single-node cluster of
#     bench/slurm-up.sh (cgroup v1 ConstrainDevices, 8-GPU gres on mknod'ed
#     /dev/nvidia[0-7], config as in GPU-FACTS "Measured peers"), after a
#     check that its device split is really enforced: inside a 1-GPU job the
#     allocated node opens with ENXIO (allowed, no driver behind it) and
#     every other one fails with EPERM (denied by the devices cgroup);
#   - `crun run` of `true` (static busybox bundle), plus `crun run` with
#     /dev/nvidia0 in the spec and allowed in its device cgroup.
#
# Every command is timed the same way (bench/lib/runlib.py: wall time from
# spawn to exit, stdio to /dev/null, after GPU_BENCH_WARMUP untimed runs;
# median = sorted[n/2], p90 = sorted[n*9/10]; back to back also the mean,
# which a bimodal run's median hides) and all of them INTERLEAVED,
# round by round, by bench/lib/interleave.py (as bench/start-latency.sh
# does): this machine's speed drifts over minutes, which skewed ratios
# between rows timed one after the other. Two ways, in one run:
#   - paced: each start 50 ms after the last (an idle node: what one user's
#     `rnx job run` meets; the daemon's warm sandboxes are ready);
#   - back to back: runs of 10 in a row.
# Before the timed runs, bench/cgroup-migrate.sh (5 samples) probes whether
# this kernel makes a pid written to `cgroup.procs` wait for an RCU grace
# period (its default; crun and Slurm pay it on every start) or not (after
# favordynmods was set once since boot); its verdict is printed last.
# crun 1.8 refuses this host's hybrid cgroup layout, so the harness runs
# inside one private mount namespace with /sys/fs/cgroup/unified unmounted
# (rnx and srun only talk to their daemons from there); it is not counted.
#
# Usage: bench/gpu-start.sh [--no-build] [--no-slurm] [--no-joblet]   (as root)
#   --no-build   use the binaries already in target/release
#   --no-slurm   skip Slurm (no cluster is started)
#   --no-joblet  skip the joblet daemon and its rows
#   GPU_BENCH_ROUNDS  (default 40)  rounds: 40 paced and 400 back-to-back
#                                   runs per command
#   GPU_BENCH_WARMUP  (default 3)   untimed runs before them (>= 1; the first
#                                   one's stderr becomes a failed row's reason)
#   GPU_BENCH_PROFILE (default fixtures/nvml-profiles/mock-nvml-config-a100.yaml,
#                     8 GPUs) the daemon's gpu.simulate
#   GPU_BENCH_DIR     (default ${TMPDIR:-/tmp}/joblet-bench-gpu) our scratch dir
#   SLURM_BENCH_*     passed to bench/slurm-up.sh (SLURM_BENCH_GPUS is forced
#                     to 8; SchedulerParameters default as in bench/run.sh)
# Prints markdown on stdout (machine line, table, Slurm device check, ratios),
# progress on stderr. Exit status 0 only when every row was measured and the
# Slurm device split was confirmed. Cleans up on exit: the daemon it started
# and its cgroups, crun containers it created, the Slurm cluster if this
# script brought it up (bench/slurm-down.sh: daemons, mknod'ed nodes), the
# device nodes it made itself, and its scratch dir.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

BUILD=1 SLURM=1 JOBLET=1
for arg in "$@"; do
  case "$arg" in
    --no-build) BUILD=0 ;;
    --no-slurm) SLURM=0 ;;
    --no-joblet) JOBLET=0 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-start: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

ROUNDS="${GPU_BENCH_ROUNDS:-40}"
WARMUP="${GPU_BENCH_WARMUP:-3}"
PROFILE="${GPU_BENCH_PROFILE:-$ROOT/fixtures/nvml-profiles/mock-nvml-config-a100.yaml}"
DIR="${GPU_BENCH_DIR:-${TMPDIR:-/tmp}/joblet-bench-gpu}"
MARKER="$DIR/.joblet-bench-gpu"    # proves the directory is ours
GPUS=8                             # gres size and simulated GPUs
PREFIX="joblet-gpubench-"          # crun container ids (and so their cgroups)
CGROUP_BASE="joblet-gpubench-$$"   # the daemon's sandbox.cgroup_base
CGROUP_LOCK="/run/joblet/cgroup-$CGROUP_BASE.lock"
UNIFIED=/sys/fs/cgroup/unified     # hybrid layout's cgroup2 mount
BIN="$ROOT/target/release"
SLURM_DIR="${SLURM_BENCH_DIR:-/tmp/joblet-bench-slurm}"

log() { echo "gpu-start: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- preconditions -----------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, crun, slurmd, mknod)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "GPU_BENCH_ROUNDS must be a positive number, got '$ROUNDS'"
[[ "$WARMUP" =~ ^[1-9][0-9]*$ ]] || die "GPU_BENCH_WARMUP must be at least 1, got '$WARMUP'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to time the runs (Debian: python3)"
if [ "$JOBLET" = 1 ]; then
  [ -f "$PROFILE" ] || die "GPU_BENCH_PROFILE $PROFILE is not a file (a mock-NVML profile with $GPUS GPUs)"
  n_prof="$(grep -c '^  - index:' "$PROFILE" || true)"
  [ "$n_prof" = "$GPUS" ] || log "WARNING: $PROFILE lists $n_prof GPUs, Slurm's gres has $GPUS"
fi

# --- packages (crun + static busybox; slurm-up.sh installs Slurm) ------------
# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh"   # static_busybox, HYBRID, crun_ns, make_bundle, install_missing, start_joblet_daemon
install_missing crun:crun

# --- build ---------------------------------------------------------------------
if [ "$JOBLET" = 1 ]; then
  if [ "$BUILD" = 1 ]; then
    log "building joblet, rnx and the fake NVML library (release)"
    cargo build --release --locked -p joblet -p joblet-sandbox -p rnx -p fake-nvml >&2
  fi
  for f in joblet rnx libnvidia_ml.so; do
    [ -f "$BIN/$f" ] || die "$BIN/$f missing: run without --no-build (cargo build --release -p joblet -p joblet-sandbox -p rnx -p fake-nvml)"
  done
fi

# --- cleanup (also run first, to clear an interrupted run) -------------------
DAEMON_PID=""
SLURM_STARTED=0
cleanup() {
  local node
  stop_joblet_daemon
  remove_cgroups_named "$CGROUP_BASE"
  rm -f "$CGROUP_LOCK"
  delete_containers "$PREFIX"
  if [ "$SLURM_STARTED" = 1 ]; then
    bench/slurm-down.sh || log "WARNING: bench/slurm-down.sh failed"
    SLURM_STARTED=0
  fi
  # Device nodes this script made itself (never pre-existing or Slurm's).
  if [ -s "$DIR/created-devnodes" ]; then
    while read -r node; do
      if [[ "$node" =~ ^/dev/nvidia[0-9]+$ ]] && [ -c "$node" ]; then rm -f "$node"; fi
    done <"$DIR/created-devnodes"
  fi
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set GPU_BENCH_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR"
touch "$MARKER"

# --- what is timed ---------------------------------------------------------------
# Each row: KEY<TAB>LABEL<TAB>argv as JSON; or a failed row: KEY<TAB>LABEL<TAB>-<TAB>reason.
rows=()
add_row() { # KEY LABEL ARGV...
  local key="$1" label="$2"
  shift 2
  rows+=("$key"$'\t'"$label"$'\t'"$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")")
}
fail_row() { rows+=("$1"$'\t'"$2"$'\t-\t'"$3"); }

# --- Slurm with an 8-GPU gres ------------------------------------------------
SLURM_LABEL='Slurm `srun --gres=gpu:1 true` (cgroup v1, ConstrainDevices=yes)'
split_line="" split_ok=0
if [ "$SLURM" = 1 ]; then
  # shellcheck source=bench/slurm-pids.sh
  source bench/slurm-pids.sh
  if pid_alive "$SLURM_DIR/run/slurmctld.pid" slurmctld; then
    log "a bench Slurm is already up in $SLURM_DIR; reusing it and leaving it up"
  else
    SLURM_STARTED=1
  fi
  export SLURM_BENCH_GPUS="$GPUS"
  export SLURM_BENCH_SCHED_PARAMS="${SLURM_BENCH_SCHED_PARAMS-batch_sched_delay=0}"
  if out="$(bench/slurm-up.sh)"; then
    eval "$(grep '^export ' <<<"$out")"
  else
    fail_row srun "$SLURM_LABEL" "bench/slurm-up.sh failed (see stderr)"
    SLURM=0
  fi
fi
if [ "$SLURM" = 1 ]; then
  # Which GPU the job got, and what opening each node gives inside it.
  probe='echo "gpus=${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-?}}"; n=0
         while [ "$n" -lt '"$GPUS"' ]; do cat /dev/nvidia$n </dev/null 2>&1 >/dev/null; n=$((n + 1)); done; true'
  if split="$(timeout 60 srun -N1 -n1 --gres=gpu:1 sh -c "$probe" 2>&1)"; then
    enxio="$(grep -c 'No such device or address' <<<"$split" || true)"
    eperm="$(grep -c 'Operation not permitted' <<<"$split" || true)"
    allocated="$(sed -n 's/^gpus=//p' <<<"$split" | head -n 1)"
    shown=""
    for n in 0 1; do
      shown+="$(grep -m1 "/dev/nvidia$n:" <<<"$split" | sed 's/^[^:]*: //')"$'; '
    done
    split_line="inside \`srun --gres=gpu:1\` (got GPU ${allocated:-?}): \`cat /dev/nvidia0; cat /dev/nvidia1\` → ${shown%; }; of the $GPUS nodes $enxio opened with ENXIO (allowed), $eperm with EPERM (denied)"
    if [ "$enxio" = 1 ] && [ "$eperm" = $((GPUS - 1)) ]; then
      split_ok=1
      split_line="Slurm device split enforced: $split_line"
    else
      split_line="Slurm device split NOT as expected (want 1 ENXIO, $((GPUS - 1)) EPERM): $split_line"
    fi
  else
    split_line="Slurm device check failed: $(tail -n 1 <<<"$split")"
  fi
  log "$split_line"
fi

# --- device nodes for the simulated GPUs -------------------------------------
# The joblet daemon gets a device dir of its own (gpu.dev_dir; see
# make_sim_gpu_nodes). It goes away with $DIR.
if [ "$JOBLET" = 1 ]; then
  DEVDIR="$DIR/joblet-dev"
  make_sim_gpu_nodes "$DEVDIR" "$GPUS"
fi

# --- joblet daemon with simulated GPUs ---------------------------------------
RNX_GPU_LABEL='`rnx job run --follow --gpu=1 -- true` (sandbox, simulated 8-GPU node)'
RNX_LABEL='`rnx job run --follow -- true` (same daemon, no GPU; reference)'
if [ "$JOBLET" = 1 ]; then
  STATE="$DIR/joblet"
  CONFIG="$STATE/joblet-config.yml"
  mkdir -p "$STATE"
  write_sim_gpu_config "$CONFIG" "$STATE/state" "$CGROUP_BASE" "$PROFILE" "$DEVDIR"
  log "starting joblet daemon (config $CONFIG)"
  if start_joblet_daemon "$BIN" "$CONFIG" "$STATE/state" "$STATE/joblet.log"; then
    export RNX_CONFIG="$STATE/state/rnx-config.yml"
    # The node must serve the simulated GPUs (else --gpu=1 measures nothing real).
    gpu_seen="$("$BIN/rnx" --json gpu status 2>&1 | python3 -c '
import json, sys
try:
    n = json.load(sys.stdin)
    print("%d GPUs, simulated=%s" % (len(n["gpus"]), str(n["simulated"]).lower()))
except Exception as e:
    print(f"unreadable `rnx --json gpu status`: {e}")' || true)"
    log "daemon up (pid $DAEMON_PID): $gpu_seen"
    [ "$gpu_seen" = "$GPUS GPUs, simulated=true" ] ||
      log "WARNING: expected $GPUS simulated GPUs from $PROFILE, the node reports: $gpu_seen"
    add_row rnx_gpu "$RNX_GPU_LABEL" "$BIN/rnx" --config "$RNX_CONFIG" job run --follow --gpu=1 -- true
    add_row rnx "$RNX_LABEL" "$BIN/rnx" --config "$RNX_CONFIG" job run --follow -- true
  else
    reason="daemon did not start: $(grep . "$STATE/joblet.log" | tail -n 1 | cut -c1-160 || true)"
    tail -n 20 "$STATE/joblet.log" >&2 || true
    fail_row rnx_gpu "$RNX_GPU_LABEL" "$reason"
    fail_row rnx "$RNX_LABEL" "$reason"
  fi
fi

# --- crun ------------------------------------------------------------------------
CRUN_LABEL='`crun run` `true` (busybox bundle)'
CRUN_DEV_LABEL='`crun run` `true` with /dev/nvidia0 (spec device + device-cgroup allow c 195:0)'
BUNDLE="$DIR/bundle" BUNDLE_DEV="$DIR/bundle-gpu"
crun_err=""
if ! command -v crun >/dev/null 2>&1; then
  crun_err="crun not installed"
elif crun_err="$(make_bundle "$BUNDLE" crun)"; then
  mkdir -p "$BUNDLE_DEV"
  python3 - "$BUNDLE" "$BUNDLE_DEV" <<'EOF'
import json, os, sys
bundle, bundle_dev = sys.argv[1], sys.argv[2]
with open(os.path.join(bundle, "config.json")) as f:
    spec = json.load(f)
# The same container given one GPU the way an OCI hook would: the node in
# linux.devices (crun creates it) and allowed in the device cgroup; its
# rootfs is the plain bundle's.
spec["root"]["path"] = os.path.join(bundle, "rootfs")
linux = spec.setdefault("linux", {})
linux.setdefault("devices", []).append(
    {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0,
     "fileMode": 0o666, "uid": 0, "gid": 0})
linux.setdefault("resources", {}).setdefault("devices", []).append(
    {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rw"})
with open(os.path.join(bundle_dev, "config.json"), "w") as f:
    json.dump(spec, f, indent=2)
EOF
fi
if [ -n "$crun_err" ]; then
  fail_row crun "$CRUN_LABEL" "$crun_err"
  fail_row crun_dev "$CRUN_DEV_LABEL" "$crun_err"
else
  add_row crun "$CRUN_LABEL" crun run --bundle "$BUNDLE" "${PREFIX}{i}"
  add_row crun_dev "$CRUN_DEV_LABEL" crun run --bundle "$BUNDLE_DEV" "${PREFIX}dev-{i}"
fi
if [ "$SLURM" = 1 ]; then
  add_row srun "$SLURM_LABEL" srun -N1 -n1 --gres=gpu:1 true
fi

# --- the run -------------------------------------------------------------------
printf '%s\n' "${rows[@]}" >"$DIR/rows.tsv"
python3 - "$DIR/rows.tsv" "$DIR/spec.json" "$ROUNDS" "$WARMUP" <<'PY'
import json, sys
rows, out, rounds, warmup = sys.argv[1:]
cmds = []
for line in open(rows).read().splitlines():
    key, _label, argv, *_ = line.split("\t")
    if argv != "-":
        cmds.append({"key": key, "argv": json.loads(argv)})
json.dump({"rounds": int(rounds), "block": 10, "pause_ms": 50, "settle_ms": 300,
           "warmup": int(warmup), "commands": cmds}, open(out, "w"))
PY
# The peers' starts depend on a kernel state that this run cannot change:
# whether a pid written to cgroup.procs waits for an RCU grace period
# (BENCHMARKS.md, method: kernel state; found in bench/history/runs-17-22.md).
# Probe it, and print it beside the numbers.
log "probing the kernel's cgroup migration state (bench/cgroup-migrate.sh, 5 samples)"
if ! CGMIG_SAMPLES=5 "$ROOT/bench/cgroup-migrate.sh" >"$DIR/cgmig.md" 2>&1; then
  echo "kernel state: not probed (bench/cgroup-migrate.sh: $(tail -n 1 "$DIR/cgmig.md"))" >"$DIR/cgmig.md"
fi
log "timing $ROUNDS rounds (paced and back to back), interleaved"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
crun_ns python3 "$ROOT/bench/lib/interleave.py" "$DIR/spec.json" >"$DIR/results.tsv"

# --- report ----------------------------------------------------------------------
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r), $(date -u +%F); load before: $load_before"
echo
echo "### GPU job start: \`true\` with one GPU, interleaved ($ROUNDS paced and $((ROUNDS * 10)) back-to-back runs per command)"
echo
all_ok=1
python3 - "$DIR/rows.tsv" "$DIR/results.tsv" <<'PY' || all_ok=0
import sys
rows_file, results_file = sys.argv[1:]
labels, failed = {}, {}
for line in open(rows_file).read().splitlines():
    key, label, argv, *rest = line.split("\t")
    labels[key] = label
    if argv == "-":
        failed[key] = rest[0] if rest else "not run"
got = {}
for line in open(results_file).read().splitlines():
    f = line.split("\t")
    if f[2] == "ok":
        got[(f[0], f[1])] = (float(f[3]), float(f[4]), float(f[6]))
    else:
        failed[f[0]] = f[3]
print("| command | paced: median ms (p90) | back to back: median ms (p90) | back to back: mean ms |")
print("|---|---:|---:|---:|")
ok = True
for key, label in labels.items():
    if key in failed or (key, "paced") not in got:
        why = failed.get(key, "not run").replace("|", "\\|")
        print(f"| {label} | failed: {why} | | |")
        ok = False
        continue
    cells = [f"{got[(key, w)][0]:.2f} ({got[(key, w)][1]:.2f})" for w in ("paced", "back-to-back")]
    print(f"| {label} | {cells[0]} | {cells[1]} | {got[(key, 'back-to-back')][2]:.2f} |")

def ratio(a, b, way, stat=0):
    if (a, way) in got and (b, way) in got:
        return f"{got[(a, way)][stat] / got[(b, way)][stat]:.2f}"
    return "n/a"

print()
print("| ratio | paced (medians) | back to back (medians) | back to back (means) | goal (issue 6) |")
print("|---|---:|---:|---:|---|")
for label, a, b, goal in [
    ("`rnx --gpu=1` ÷ `crun run`", "rnx_gpu", "crun", "≤ 0.8"),
    ("Slurm `srun --gres=gpu:1` ÷ `rnx --gpu=1`", "srun", "rnx_gpu", "≥ 5"),
    ("`rnx` (no GPU) ÷ `crun run` (reference)", "rnx", "crun", ""),
]:
    print(f"| {label} | {ratio(a, b, 'paced')} | {ratio(a, b, 'back-to-back')} | {ratio(a, b, 'back-to-back', 2)} | {goal} |")
sys.exit(0 if ok else 1)
PY
[ "$HYBRID" = 0 ] || echo "
Timed inside one private mount namespace with $UNIFIED unmounted (crun refuses this hybrid cgroup layout); the wrapper is not counted."
if [ -n "$split_line" ]; then
  echo
  echo "$split_line"
fi
echo
grep '^kernel state' "$DIR/cgmig.md" || echo "kernel state: unknown (bench/cgroup-migrate.sh printed no verdict)"
if [ "$SLURM" = 1 ] && [ "$split_ok" = 0 ]; then all_ok=0; fi
log "done in ${SECONDS}s"
[ "$all_ok" = 1 ] || { log "some rows failed or the Slurm device split was not confirmed (see above)"; exit 1; }
