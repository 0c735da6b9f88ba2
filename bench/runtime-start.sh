#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted backticks are markdown labels
# What a runtime costs a job's start: `rnx job run --follow -- true` in the
# host's tree beside `--runtime=python-3.11` (the job's root is the
# runtime's tree), and `python3 -c pass` in each, against one local joblet
# daemon (embedded defaults: full sandbox, warm pool of 2), timed
# INTERLEAVED by bench/lib/interleave.py (paced: each start 50 ms after the
# last; back to back: runs of 10 in a row). The goal: a runtime job starts
# within 1 ms of a host-root one.
#
# The runtime store is kept between runs (RUNTIME_BENCH_STORE): the first
# run installs python-3.11 from the daemon's catalog (mmdebstrap + uv, about
# a minute here) and reports how long that took.
#
# Usage: bench/runtime-start.sh [--no-build]   (as root)
#   RUNTIME_BENCH_ROUNDS (default 30)  rounds
#   RUNTIME_BENCH_DIR    (default ${TMPDIR:-/tmp}/joblet-bench-runtime) scratch dir
#   RUNTIME_BENCH_STORE  (default /var/tmp/joblet-bench-runtimes) runtime store
# Prints markdown on stdout, progress on stderr. Cleans up on exit: the
# daemon, its cgroups and its scratch directory (not the store).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/runtime-start.sh [--no-build]" >&2; exit 2 ;;
  esac
done
ROUNDS="${RUNTIME_BENCH_ROUNDS:-30}"
DIR="${RUNTIME_BENCH_DIR:-${TMPDIR:-/tmp}/joblet-bench-runtime}"
STORE="${RUNTIME_BENCH_STORE:-/var/tmp/joblet-bench-runtimes}"
MARKER="$DIR/.joblet-bench-runtime"
CGROUP_BASE="joblet-rtbench-$$"
UNIFIED=/sys/fs/cgroup/unified
BIN="$ROOT/target/release"

log() { echo "runtime-start: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, mmdebstrap)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "RUNTIME_BENCH_ROUNDS must be a positive number, got '$ROUNDS'"
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
cleanup() {
  stop_joblet_daemon
  remove_cgroups_named "$CGROUP_BASE"
  rm -f "/run/joblet/cgroup-$CGROUP_BASE.lock"
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set RUNTIME_BENCH_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR" "$STORE"
touch "$MARKER"

STATE="$DIR/state"
cat >"$DIR/joblet-config.yml" <<YAML
# Written by joblet bench/runtime-start.sh; removed with $DIR.
server:
  address: "127.0.0.1:0"
  state_dir: "$STATE"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: "$CGROUP_BASE"
runtimes:
  dir: "$STORE"
YAML
log "starting joblet daemon"
start_joblet_daemon "$BIN" "$DIR/joblet-config.yml" "$STATE" "$DIR/joblet.log" ||
  die "the daemon did not start: $(tail -n 5 "$DIR/joblet.log")"
RNX=("$BIN/rnx" --config "$STATE/rnx-config.yml")

install_note="installed already"
if ! "${RNX[@]}" runtime info python-3.11 --json 2>/dev/null | grep -q '"installed": true'; then
  log "installing python-3.11 (first run with this store)"
  t0=$(date +%s.%N)
  "${RNX[@]}" runtime install python-3.11 >&2
  t1=$(date +%s.%N)
  install_note="installed by this run in $(python3 -c "print(f'{$t1 - $t0:.0f}')") s"
fi
digest="$("${RNX[@]}" runtime info python-3.11 --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["digest"][:19], r["size_bytes"])')"

python3 - "$DIR/spec.json" "$ROUNDS" "$BIN/rnx" "$STATE/rnx-config.yml" <<'PY'
import json, sys
out, rounds, rnx, config = sys.argv[1:]
run = [rnx, "--config", config, "job", "run", "--follow"]
cmds = [
    {"key": "host-true", "argv": run + ["--", "true"]},
    {"key": "rt-true", "argv": run + ["--runtime=python-3.11", "--", "true"]},
    {"key": "host-py", "argv": run + ["--", "python3", "-c", "pass"]},
    {"key": "rt-py", "argv": run + ["--runtime=python-3.11", "--", "python3", "-c", "pass"]},
]
json.dump({"rounds": int(rounds), "block": 10, "pause_ms": 50, "settle_ms": 300,
           "warmup": 3, "commands": cmds}, open(out, "w"))
PY
log "timing $ROUNDS rounds (paced and back to back), interleaved"
echo "machine: $(nproc) cores, kernel $(uname -r), $(date -u +%F), commit $(git rev-parse --short HEAD); python-3.11 $digest bytes ($install_note)"
echo
python3 "$ROOT/bench/lib/interleave.py" "$DIR/spec.json" >"$DIR/results.tsv"

python3 - "$DIR/results.tsv" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]).read().splitlines():
    f = line.split("\t")
    if f[2] == "ok":
        rows[(f[0], f[1])] = (float(f[3]), float(f[4]), float(f[6]))
    else:
        print(f"{f[0]}: failed: {f[3]}")
labels = {
    "host-true": "`rnx job run --follow -- true` (host's tree)",
    "rt-true": "`rnx job run --follow --runtime=python-3.11 -- true`",
    "host-py": "`… -- python3 -c pass` (host's Python)",
    "rt-py": "`… --runtime=python-3.11 -- python3 -c pass`",
}
print("| command | paced: median ms (p90) | back to back: median ms (p90) |")
print("|---|---:|---:|")
for key, label in labels.items():
    cells = [f"{rows[(key, w)][0]:.2f} ({rows[(key, w)][1]:.2f})" if (key, w) in rows else "-"
             for w in ("paced", "back-to-back")]
    print(f"| {label} | {cells[0]} | {cells[1]} |")
print()
for a, b, what, goal in (("rt-true", "host-true", "runtime − host, `true`", " (goal: within 1 ms)"),
                         ("rt-py", "host-py", "runtime − host, `python3 -c pass`", "")):
    if all((k, w) in rows for k in (a, b) for w in ("paced", "back-to-back")):
        d = [rows[(a, w)][0] - rows[(b, w)][0] for w in ("paced", "back-to-back")]
        print(f"{what} (medians): **{d[0]:+.2f} ms paced**, **{d[1]:+.2f} ms back to back**{goal}")
PY
