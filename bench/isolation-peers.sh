#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted backticks/$@ are meant literally (markdown labels, sh -c scripts)
# Measures the start-to-exit latency of `true` in the isolation tools that
# joblet's sandbox is compared with, so BENCHMARKS.md can show them beside
# joblet-bench's `rnx job run --follow -- true` row from the same run:
#   - bubblewrap: `bwrap --unshare-all` with a read-only /usr;
#   - crun and runc: `crun run` / `runc run` of one minimal OCI bundle
#     (static busybox rootfs, read-only, no terminal, `/bin/true`).
# A `fork/exec true` row, timed by the same harness, lets the reader line
# this table up with joblet-bench's own fork/exec row.
#
# Each command is timed like joblet-bench times `rnx`: wall time of the
# whole process from spawn to exit (python3 `time.perf_counter()` around
# `subprocess.run`, stdio to /dev/null), after PEERS_WARMUP untimed runs;
# median = sorted[n/2], p90 = sorted[n*9/10], as in joblet-bench.
#
# crun 1.8 refuses hybrid cgroups (v1 controllers plus a cgroup2 hierarchy
# at /sys/fs/cgroup/unified). On such a host crun runs inside a private
# mount namespace where /sys/fs/cgroup/unified is unmounted (the host's
# mounts are not touched). The `crun run` row is timed *inside* one such
# namespace, so it holds crun alone, as on a pure-v1 or pure-v2 host where
# crun needs no wrapper. Two more rows make the wrapper explicit: the
# wrapper alone (`unshare … sh -c 'umount … && exec /bin/true'`) and
# `crun run` with the wrapper paid on every run.
#
# Usage: bench/isolation-peers.sh    (as root)
#   PEERS_RUNS   (default 50)  timed runs per command
#   PEERS_WARMUP (default 3)   untimed runs before them (at least 1; the first
#                              one's stderr becomes the reason of a failed row)
#   PEERS_PAUSE_MS (default 50) the pause before each run of the paced `crun
#                              run` row (joblet-bench's paced rnx row uses
#                              BENCH_PAUSE_MS, same default); 0 skips the row
#   PEERS_DIR    (default ${TMPDIR:-/tmp}/joblet-bench-peers) our scratch dir
# Installs what is missing of bubblewrap, crun, runc, busybox-static with
# apt-get (`apt-get update` only if the install fails; never removes a
# package). Prints the markdown table on stdout, progress on stderr. A peer
# that cannot run gets a "failed: <reason>" row; exit status is 0 only if
# at least bwrap was measured. Cleans up its directory, containers and
# cgroups on exit; a re-run first clears what an interrupted run left.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

RUNS="${PEERS_RUNS:-50}"
WARMUP="${PEERS_WARMUP:-3}"
PAUSE_MS="${PEERS_PAUSE_MS:-50}"
DIR="${PEERS_DIR:-${TMPDIR:-/tmp}/joblet-bench-peers}"
MARKER="$DIR/.joblet-bench-peers" # proves the directory is ours
PREFIX="joblet-peers-"            # every container id (and so cgroup) we create starts with this
UNIFIED=/sys/fs/cgroup/unified    # hybrid layout's cgroup2 mount

log() { echo "isolation-peers: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- preconditions -----------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "must run as root (crun/runc create namespaces and cgroups)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "PEERS_RUNS must be a positive number, got '$RUNS'"
[[ "$WARMUP" =~ ^[1-9][0-9]*$ ]] || die "PEERS_WARMUP must be at least 1, got '$WARMUP'"
[[ "$PAUSE_MS" =~ ^[0-9]+$ ]] || die "PEERS_PAUSE_MS must be a whole number of milliseconds, got '$PAUSE_MS'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to time the runs (Debian: python3)"

# --- packages ----------------------------------------------------------------
# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh"   # static_busybox, HYBRID, crun_ns, make_bundle, install_missing
install_missing bwrap:bubblewrap crun:crun runc:runc

# --- cgroup layout -----------------------------------------------------------
# --- cleanup (also run first, to clear an interrupted run) -------------------
cleanup() {
  delete_containers "$PREFIX"
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set PEERS_DIR"
fi
cleanup
trap cleanup EXIT
mkdir -p "$DIR"
touch "$MARKER"

# --- timing harness ----------------------------------------------------------
# bench/lib/timeruns.py (shared with the other bench scripts) times each row.
export BENCH_TIME_RUNS="$RUNS" BENCH_TIME_WARMUP="$WARMUP"

rows=()
# measure LABEL [RUNNER...] -- CMD...: RUNNER wraps the harness (crun_ns).
# ROW_PAUSE_MS (default 0): the harness's pause before each run.
measure() {
  local label="$1" line
  shift
  local runner=()
  while [ "$1" != -- ]; do runner+=("$1"); shift; done
  shift
  log "timing $label ($WARMUP warm-up + $RUNS runs)"
  line="$(BENCH_TIME_PAUSE_MS="${ROW_PAUSE_MS:-0}" "${runner[@]}" python3 "$ROOT/bench/lib/timeruns.py" "$label" "$@" 2>"$DIR/harness.err" | tail -n 1)" || true
  if [ -z "$line" ]; then # the runner (e.g. the umount wrapper) failed before the harness
    line="$label"$'\tfailed\t'"$(grep . "$DIR/harness.err" | tail -n 1 | cut -c1-120 || true)"
  fi
  rows+=("$line")
}
fail_row() { rows+=("$1"$'\tfailed\t'"$2"); }

# --- baseline ----------------------------------------------------------------
measure 'fork/exec `true` (same harness)' -- true

# --- bubblewrap --------------------------------------------------------------
# The sandbox of bench/lib/oci.sh's bwrap_sandbox_args (read-only /usr).
BWRAP_LABEL='`bwrap --unshare-all` … `true`'
if command -v bwrap >/dev/null 2>&1; then
  bwrap_sandbox_args
  log "bwrap ${BWRAP_ARGS[*]} true"
  measure "$BWRAP_LABEL" -- bwrap "${BWRAP_ARGS[@]}" true
else
  fail_row "$BWRAP_LABEL" "bwrap not installed"
fi

# --- OCI bundle for crun and runc --------------------------------------------
BUNDLE="$DIR/bundle"
bundle_err=""
if command -v runc >/dev/null 2>&1 || command -v crun >/dev/null 2>&1; then
  # Default spec of whichever runtime is there (both give the same shape).
  spec_tool=runc
  command -v runc >/dev/null 2>&1 || spec_tool=crun
  bundle_err="$(make_bundle "$BUNDLE" "$spec_tool")" || true
else
  bundle_err="neither crun nor runc installed"
fi

# --- crun --------------------------------------------------------------------
CRUN_LABEL='`crun run` (busybox bundle)'
WRAP_CMD=(unshare -m --propagation private sh -c 'umount "$0" && exec "$@"' "$UNIFIED")
if [ "$HYBRID" = 1 ]; then
  CRUN_LABEL='`crun run` (busybox bundle; timed inside one private mount ns, wrapper not counted)'
fi
if [ -n "$bundle_err" ]; then
  fail_row "$CRUN_LABEL" "$bundle_err"
elif ! command -v crun >/dev/null 2>&1; then
  fail_row "$CRUN_LABEL" "crun not installed"
else
  measure "$CRUN_LABEL" crun_ns -- crun run --bundle "$BUNDLE" "${PREFIX}crun-{i}"
  if [ "$PAUSE_MS" -gt 0 ]; then
    ROW_PAUSE_MS="$PAUSE_MS" measure "\`crun run\` (same), each run ${PAUSE_MS} ms after the last" \
      crun_ns -- crun run --bundle "$BUNDLE" "${PREFIX}crunp-{i}"
  fi
  if [ "$HYBRID" = 1 ]; then
    measure '`unshare -m --propagation private` + `umount` wrapper alone (`exec /bin/true`)' \
      -- "${WRAP_CMD[@]}" /bin/true
    measure '`crun run` with that wrapper on every run' \
      -- "${WRAP_CMD[@]}" crun run --bundle "$BUNDLE" "${PREFIX}crunw-{i}"
  fi
fi

# --- runc --------------------------------------------------------------------
RUNC_LABEL='`runc run` (busybox bundle)'
if [ -n "$bundle_err" ]; then
  fail_row "$RUNC_LABEL" "$bundle_err"
elif ! command -v runc >/dev/null 2>&1; then
  fail_row "$RUNC_LABEL" "runc not installed"
else
  measure "$RUNC_LABEL" -- runc run --bundle "$BUNDLE" "${PREFIX}runc-{i}"
fi

# --- table -------------------------------------------------------------------
echo "| peer | median ms | p90 ms |"
echo "|---|---:|---:|"
bwrap_ok=0
for row in "${rows[@]}"; do
  IFS=$'\t' read -r label status a b <<<"$row"
  if [ "$status" = ok ]; then
    echo "| $label | $a | $b |"
    [ "$label" != "$BWRAP_LABEL" ] || bwrap_ok=1
  else
    echo "| $label | failed: ${a//|/\\|} | |"
  fi
done
log "done in ${SECONDS}s"
[ "$bwrap_ok" = 1 ] || { log "bwrap could not be measured"; exit 1; }
