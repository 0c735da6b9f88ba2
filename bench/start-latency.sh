#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted backticks are markdown labels
# Start-to-exit latency of `true` (issue 3): `rnx job run --follow -- true`
# against a local joblet daemon (embedded defaults: full sandbox, warm pool
# of 2, a 1,024 MiB tmpfs /work) beside `crun run` and `runc run` of one
# static-busybox OCI bundle, `bwrap --unshare-all` and fork/exec, all timed
# INTERLEAVED in one run by bench/lib/interleave.py: this machine's speed
# drifts over minutes (crun moved between 8 and 13 ms in one hour), which
# skews ratios between rows timed minutes apart (bench/run.sh's). Two ways:
#   - paced: each start 50 ms after the last, on an idle machine (what one
#     user's `rnx job run` meets; the daemon's warm sandboxes are ready);
#   - back to back: runs of 10 in a row (each start pays for what the last
#     left running: for rnx, the warm sandbox being rebuilt beside it).
# crun 1.8 refuses this host's hybrid cgroup layout, so (as in
# isolation-peers.sh) the harness runs inside one private mount namespace
# with /sys/fs/cgroup/unified unmounted; rnx only talks to its daemon's
# socket from there, bwrap and runc do not mind.
#
# Usage: bench/start-latency.sh [--no-build]   (as root)
#   LATENCY_ROUNDS (default 40)  rounds: 40 paced runs and 400 back-to-back
#                                runs per command
#   LATENCY_DIR    (default ${TMPDIR:-/tmp}/joblet-bench-latency) scratch dir
# Prints markdown on stdout, progress on stderr. Exit status 0 when rnx and
# crun were both measured. Cleans up on exit: the daemon and its cgroups,
# containers it created, its directory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/start-latency.sh [--no-build]" >&2; exit 2 ;;
  esac
done
ROUNDS="${LATENCY_ROUNDS:-40}"
DIR="${LATENCY_DIR:-${TMPDIR:-/tmp}/joblet-bench-latency}"
MARKER="$DIR/.joblet-bench-latency" # proves the directory is ours
PREFIX="joblet-latency-"            # container ids (and so their cgroups)
CGROUP_BASE="joblet-latency-$$"     # the daemon's sandbox.cgroup_base
CGROUP_LOCK="/run/joblet/cgroup-$CGROUP_BASE.lock"
UNIFIED=/sys/fs/cgroup/unified
BIN="$ROOT/target/release"

log() { echo "start-latency: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, crun, runc)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "LATENCY_ROUNDS must be a positive number, got '$ROUNDS'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to time the runs (Debian: python3)"

# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh" # crun_ns, make_bundle, install_missing, *_joblet_daemon, cleanup helpers
install_missing bwrap:bubblewrap crun:crun runc:runc

if [ "$BUILD" = 1 ]; then
  log "building joblet and rnx (release)"
  cargo build --release --locked -p joblet -p joblet-sandbox -p rnx >&2
fi
for f in joblet joblet-shim rnx; do
  [ -x "$BIN/$f" ] || die "$BIN/$f missing: run without --no-build"
done

# --- cleanup (also run first, to clear an interrupted run) -------------------
DAEMON_PID=""
cleanup() {
  stop_joblet_daemon
  remove_cgroups_named "$CGROUP_BASE"
  rm -f "$CGROUP_LOCK"
  delete_containers "$PREFIX"
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set LATENCY_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR"
touch "$MARKER"

# --- the joblet daemon (embedded defaults but for where it keeps things) -----
STATE="$DIR/joblet"
mkdir -p "$STATE"
cat >"$STATE/joblet-config.yml" <<YAML
# Written by joblet bench/start-latency.sh; removed with $DIR.
server:
  address: "127.0.0.1:0"
  state_dir: "$STATE/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: "$CGROUP_BASE"
YAML
log "starting joblet daemon"
start_joblet_daemon "$BIN" "$STATE/joblet-config.yml" "$STATE/state" "$STATE/joblet.log" ||
  die "the daemon did not start: $(tail -n 5 "$STATE/joblet.log")"

# --- the OCI bundle ----------------------------------------------------------
BUNDLE="$DIR/bundle"
bundle_err=""
spec_tool=runc
command -v runc >/dev/null 2>&1 || spec_tool=crun
bundle_err="$(make_bundle "$BUNDLE" "$spec_tool")" || true

# --- the run -----------------------------------------------------------------
bwrap_sandbox_args
python3 - "$DIR/spec.json" "$ROUNDS" "$BIN/rnx" "$STATE/state/rnx-config.yml" \
  "$BUNDLE" "$PREFIX" "${BWRAP_ARGS[@]}" <<'PY'
import json, sys
out, rounds, rnx, config, bundle, prefix, *bwrap = sys.argv[1:]
cmds = [
    {"key": "true", "argv": ["true"]},
    {"key": "rnx", "argv": [rnx, "--config", config, "job", "run", "--follow", "--", "true"]},
    {"key": "bwrap", "argv": ["bwrap", *bwrap, "true"]},
    {"key": "crun", "argv": ["crun", "run", "--bundle", bundle, prefix + "crun-{i}"]},
    {"key": "runc", "argv": ["runc", "run", "--bundle", bundle, prefix + "runc-{i}"]},
]
json.dump({"rounds": int(rounds), "block": 10, "pause_ms": 50, "settle_ms": 300,
           "warmup": 3, "commands": cmds}, open(out, "w"))
PY
log "timing $ROUNDS rounds (paced and back to back), interleaved"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r), $(date -u +%F); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
crun_ns python3 "$ROOT/bench/lib/interleave.py" "$DIR/spec.json" >"$DIR/results.tsv"

# --- table -------------------------------------------------------------------
python3 - "$DIR/results.tsv" "$bundle_err" <<'PY'
import sys
results, bundle_err = sys.argv[1], sys.argv[2]
labels = {
    "true": "fork/exec `true`",
    "rnx": "`rnx job run --follow -- true` (full sandbox, warm pool of 2)",
    "bwrap": "`bwrap --unshare-all` … `true`",
    "crun": "`crun run` (busybox bundle)",
    "runc": "`runc run` (busybox bundle)",
}
rows, failed = {}, {}
for line in open(results).read().splitlines():
    f = line.split("\t")
    if f[2] == "ok":
        rows[(f[0], f[1])] = (float(f[3]), float(f[4]), int(f[5]))
    else:
        extra = f" ({bundle_err})" if bundle_err and f[0] in ("crun", "runc") else ""
        failed[f[0]] = f[3] + extra
print("| command | paced: median ms (p90) | back to back: median ms (p90) |")
print("|---|---:|---:|")
for key, label in labels.items():
    if key in failed or (key, "paced") not in rows:
        print(f"| {label} | failed: {failed.get(key, 'not run')} | |")
        continue
    cells = [f"{rows[(key, w)][0]:.2f} ({rows[(key, w)][1]:.2f})" for w in ("paced", "back-to-back")]
    print(f"| {label} | {cells[0]} | {cells[1]} |")
if ("rnx", "paced") in rows and ("crun", "paced") in rows:
    r = [rows[("rnx", w)][0] / rows[("crun", w)][0] for w in ("paced", "back-to-back")]
    n = [rows[("rnx", w)][2] for w in ("paced", "back-to-back")]
    print()
    print(f"rnx ÷ crun (medians): **{r[0]:.2f} paced**, **{r[1]:.2f} back to back** "
          f"(issue 3's target: ≤ 0.8); {n[0]} paced and {n[1]} back-to-back runs per command")
PY
grep -q "^rnx	paced	ok" "$DIR/results.tsv" && grep -q "^crun	paced	ok" "$DIR/results.tsv"
