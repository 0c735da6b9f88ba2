#!/usr/bin/env bash
# Keystroke round trip through `rnx job run -it`, beside a local terminal.
# One byte written to the terminal rnx runs on (what a terminal emulator
# does for a key press), timed until its echo is back on that terminal:
# rnx's raw stdin -> the daemon's AttachJob stream -> the job shim's
# input.sock -> the job's pty -> the job echoes it (`stty raw -echo; exec
# cat`, as a shell's line editor echoes) -> the shim's relay -> the job's
# log -> the attach stream -> rnx's stdout. The floor: the same echoing
# command on a local pty, no joblet in between. Keys are paced
# (TTY_BENCH_GAP_MS apart, a fast typist's rate) so each is its own round
# trip. The goal: p50 < 5 ms on this project's 2-core machine.
#
# Usage: bench/tty-echo.sh [--no-build]   (as root: the daemon's sandbox)
#   TTY_BENCH_KEYS    (default 500) timed keys per run, after 20 warm-up keys
#   TTY_BENCH_ROUNDS  (default 3) runs of each, interleaved (local, joblet, ...)
#   TTY_BENCH_GAP_MS  (default 10) pause between keys
#   TTY_BENCH_DIR     (default ${TMPDIR:-/tmp}/joblet-bench-tty) scratch dir
#   TTY_BENCH_BIN     (default target/release) joblet, joblet-shim, rnx
# Prints markdown on stdout, progress on stderr. Cleans up on exit: the
# jobs it started, the daemon, its cgroups and its scratch directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/tty-echo.sh [--no-build]" >&2; exit 2 ;;
  esac
done
KEYS="${TTY_BENCH_KEYS:-500}"
ROUNDS="${TTY_BENCH_ROUNDS:-3}"
GAP="${TTY_BENCH_GAP_MS:-10}"
DIR="${TTY_BENCH_DIR:-${TMPDIR:-/tmp}/joblet-bench-tty}"
MARKER="$DIR/.joblet-bench-tty"
CGROUP_BASE="joblet-ttybench-$$"
UNIFIED=/sys/fs/cgroup/unified
BIN="${TTY_BENCH_BIN:-$ROOT/target/release}"

log() { echo "tty-echo: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (the daemon's sandbox)"
[[ "$KEYS" =~ ^[1-9][0-9]*$ ]] || die "TTY_BENCH_KEYS must be a positive number, got '$KEYS'"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "TTY_BENCH_ROUNDS must be a positive number, got '$ROUNDS'"
[[ "$GAP" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "TTY_BENCH_GAP_MS must be a number of milliseconds, got '$GAP'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to drive the terminal (Debian: python3)"

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
RNX=("$BIN/rnx" --config "$STATE/rnx-config.yml")
kill_jobs() {
  # Jobs outlive their daemon by design; this bench's must not.
  [ -n "${DAEMON_PID:-}" ] || return 0
  "${RNX[@]}" job list --json 2>/dev/null |
    python3 -c 'import json,sys; [print(j["id"]) for j in json.load(sys.stdin) if j["state"] in ("RUNNING","QUEUED","PENDING")]' 2>/dev/null |
    while read -r id; do "${RNX[@]}" job kill "$id" >/dev/null 2>&1 || true; done
}
cleanup() {
  kill_jobs
  stop_joblet_daemon
  remove_cgroups_named "$CGROUP_BASE"
  rm -f "/run/joblet/cgroup-$CGROUP_BASE.lock"
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set TTY_BENCH_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR"
touch "$MARKER"

cat >"$DIR/joblet-config.yml" <<YAML
# Written by joblet bench/tty-echo.sh; removed with $DIR.
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

ECHOER='stty raw -echo; echo READY; exec cat'
HARNESS=(python3 "$ROOT/bench/lib/tty_echo.py" --keys "$KEYS" --gap-ms "$GAP")
: >"$DIR/local.jsonl"
: >"$DIR/joblet.jsonl"
for r in $(seq "$ROUNDS"); do
  log "round $r/$ROUNDS: local pty"
  "${HARNESS[@]}" -- sh -c "$ECHOER" >>"$DIR/local.jsonl"
  log "round $r/$ROUNDS: rnx job run -it"
  "${HARNESS[@]}" -- "${RNX[@]}" job run -it -- sh -c "$ECHOER" >>"$DIR/joblet.jsonl"
  kill_jobs
done

python3 - "$DIR" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, statistics, sys, datetime
d, commit = sys.argv[1], sys.argv[2]
def runs(name):
    return [json.loads(l) for l in open(f"{d}/{name}.jsonl") if l.strip()]
local, joblet = runs("local"), runs("joblet")
def med(rs, k):
    return statistics.median(r[k] for r in rs)
print(f"## Keystroke round trip ({datetime.date.today()}, commit {commit})\n")
print("| path | run | keys | p50 ms | p90 ms | p99 ms | max ms |")
print("|---|---|---|---|---|---|---|")
for name, rs in (("local pty (floor)", local), ("`rnx job run -it`", joblet)):
    for i, r in enumerate(rs, 1):
        print(f"| {name} | {i} | {r['samples']} | {r['p50_ms']:.3f} | {r['p90_ms']:.3f} | {r['p99_ms']:.3f} | {r['max_ms']:.3f} |")
print()
p50, p99 = med(joblet, "p50_ms"), med(joblet, "p99_ms")
f50, f99 = med(local, "p50_ms"), med(local, "p99_ms")
print(f"Median of the runs: `rnx job run -it` p50 {p50:.3f} ms, p99 {p99:.3f} ms; "
      f"local pty p50 {f50:.3f} ms, p99 {f99:.3f} ms; "
      f"joblet adds {p50 - f50:.3f} ms at p50. Goal p50 < 5 ms: {'met' if p50 < 5 else 'NOT met'}.")
PY
