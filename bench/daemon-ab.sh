#!/usr/bin/env bash
# A/B of joblet daemons: `rnx job run --follow --gpu=1 -- true` against two
# or more local daemons (sandbox on, 8 GPUs simulated from a mock-NVML
# profile, as bench/gpu-start.sh runs it), all up at once and timed
# INTERLEAVED by bench/lib/interleave.py: paced (each start 50 ms after the
# last) and back to back (runs of GPU_AB_BLOCK in a row). For comparing two
# builds, or one build with its state directory on another filesystem.
#
# Usage: bench/daemon-ab.sh NAME=BINDIR[@PARENT] NAME=BINDIR[@PARENT]...   (as root)
#   BINDIR   a directory holding joblet, joblet-shim, rnx and
#            libnvidia_ml.so (say, a copy of target/release of one commit)
#   PARENT   where the daemon's state directory goes (default: the scratch
#            dir, on whatever filesystem holds it; /dev/shm puts it on tmpfs)
#   GPU_AB_ROUNDS  (default 20)  rounds (each: 1 paced and BLOCK back-to-back runs per daemon)
#   GPU_AB_BLOCK   (default 10)
#   GPU_AB_DIR     (default ${TMPDIR:-/tmp}/joblet-bench-ab) scratch dir
#   GPU_AB_PROFILE (default fixtures/nvml-profiles/mock-nvml-config-a100.yaml)
# Prints one markdown table on stdout. Cleans up on exit: the daemons it
# started, their cgroups and cgroup locks, the device nodes and state dirs
# it made.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
UNIFIED=/sys/fs/cgroup/unified

log() { echo "daemon-ab: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
[ "$#" -ge 2 ] || die "give at least two daemons (NAME=BINDIR[@PARENT]); see --help"
[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, mknod)"
ROUNDS="${GPU_AB_ROUNDS:-20}"
BLOCK="${GPU_AB_BLOCK:-10}"
DIR="${GPU_AB_DIR:-${TMPDIR:-/tmp}/joblet-bench-ab}"
PROFILE="${GPU_AB_PROFILE:-$ROOT/fixtures/nvml-profiles/mock-nvml-config-a100.yaml}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "GPU_AB_ROUNDS must be a positive number, got '$ROUNDS'"
[[ "$BLOCK" =~ ^[1-9][0-9]*$ ]] || die "GPU_AB_BLOCK must be a positive number, got '$BLOCK'"
[ -f "$PROFILE" ] || die "GPU_AB_PROFILE $PROFILE is not a file"
[ ! -e "$DIR" ] || die "$DIR exists; remove it or set GPU_AB_DIR"

# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh" # make_sim_gpu_nodes, write_sim_gpu_config, start/stop_joblet_daemon, remove_cgroups_named

pids=() states=()
cleanup() {
  local i
  for i in "${!pids[@]}"; do
    DAEMON_PID="${pids[$i]}"
    stop_joblet_daemon
    remove_cgroups_named "joblet-ab-$$-$i"
    rm -f "/run/joblet/cgroup-joblet-ab-$$-$i.lock"
  done
  for i in "${!states[@]}"; do rm -rf "${states[$i]}"; done
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
make_sim_gpu_nodes "$DIR/dev" 8

names=() bins=() parents=()
for arg in "$@"; do
  [[ "$arg" =~ ^([A-Za-z0-9_.-]+)=([^@]+)(@(.+))?$ ]] || die "'$arg' is not NAME=BINDIR[@PARENT]"
  name="${BASH_REMATCH[1]}" bin="${BASH_REMATCH[2]}" parent="${BASH_REMATCH[4]:-$DIR}"
  for f in joblet joblet-shim rnx libnvidia_ml.so; do
    [ -f "$bin/$f" ] || die "$bin/$f missing (BINDIR must hold joblet, joblet-shim, rnx, libnvidia_ml.so)"
  done
  [ -d "$parent" ] || die "$parent (the state dir's parent for $name) is not a directory"
  for seen in "${names[@]}"; do [ "$seen" != "$name" ] || die "daemon name '$name' given twice"; done
  names+=("$name") bins+=("$(cd "$bin" && pwd)") parents+=("$parent")
done

commands=()
for i in "${!names[@]}"; do
  state="$(mktemp -d "${parents[$i]}/joblet-ab-$$-$i.XXXXXX")"
  states+=("$state")
  write_sim_gpu_config "$state/config.yml" "$state/state" "joblet-ab-$$-$i" "$PROFILE" "$DIR/dev"
  log "starting ${names[$i]} (${bins[$i]}, state in $state)"
  if ! start_joblet_daemon "${bins[$i]}" "$state/config.yml" "$state/state" "$state/joblet.log"; then
    pids+=("$DAEMON_PID")
    die "${names[$i]} did not start: $(tail -n 1 "$state/joblet.log")"
  fi
  pids+=("$DAEMON_PID")
  commands+=("$(python3 -c 'import json, sys; print(json.dumps({"key": sys.argv[1], "argv": sys.argv[2:]}))' \
    "${names[$i]}" "${bins[$i]}/rnx" --config "$state/state/rnx-config.yml" job run --follow --gpu=1 -- true)")
done

spec="$DIR/spec.json"
python3 - "$spec" "$ROUNDS" "$BLOCK" "${commands[@]}" <<'EOF'
import json, sys
out, rounds, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
json.dump({"rounds": rounds, "block": block, "pause_ms": 50, "settle_ms": 300, "warmup": 3,
           "commands": [json.loads(c) for c in sys.argv[4:]]}, open(out, "w"))
EOF
machine="machine: $(nproc) cores, kernel $(uname -r), $(date -u +%F); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log "timing: $ROUNDS rounds, in each one paced and $BLOCK back-to-back starts per daemon"
python3 "$ROOT/bench/lib/interleave.py" "$spec" >"$DIR/results.tsv"

echo "$machine"
echo
echo "| daemon | paced: median ms (p90) | back to back: median ms (p90) | back to back: mean ms |"
echo "|---|---:|---:|---:|"
for i in "${!names[@]}"; do
  python3 - "${names[$i]}" "${bins[$i]}" "${parents[$i]}" "$DIR/results.tsv" <<'EOF'
import sys
name, bins, parent, results = sys.argv[1:5]
cells = {}
for line in open(results):
    f = line.rstrip("\n").split("\t")
    if f[0] != name:
        continue
    if f[2] != "ok":
        cells["failed"] = f[3]
        continue
    cells[f[1]] = (float(f[3]), float(f[4]), float(f[6]))
if "failed" in cells:
    print(f"| {name} | failed: {cells['failed']} | | |")
else:
    p, b = cells["paced"], cells["back-to-back"]
    print(f"| {name} (`{bins}`, state under `{parent}`) | {p[0]:.2f} ({p[1]:.2f}) | {b[0]:.2f} ({b[1]:.2f}) | {b[2]:.2f} |")
EOF
done
