#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted backticks are markdown labels
# What an executor costs a job's start (issue 34): `rnx job run --follow
# --executor=X -- true` against a local joblet daemon (embedded defaults:
# full sandbox, warm pool of 2 for native) for X = native, runc, crun and
# runsc, each OCI one beside the raw runtime running an EQUIVALENT bundle
# (`runc run`, `crun run`, `runsc … run`), all timed INTERLEAVED in one run
# by bench/lib/interleave.py (paced: each start 50 ms after the last; back
# to back: runs of 10 in a row). The goal: joblet adds at most 2 ms to the
# raw runtime's start-to-exit time (medians, same run).
#
# The equivalent bundle is joblet's own: one job per runtime runs first,
# and its `bundle/config.json` (kept after the job, environment values
# blanked) is copied with only what a rerun needs changed: `PATH` given its
# value, `root.path` a fresh empty directory, the `/work` bind pointed at a
# scratch directory (the job's own is gone with the job), and one fixed
# `linux.cgroupsPath` per runtime (/<RAW_BASE>/<runtime>: runs are
# sequential and each runtime removes its leaf on exit, so reusing the path
# works; leaving it out would let runsc skip cgroups altogether). Joblet's
# pid 1 under runc and crun (`/run/joblet/init oci-init -- true`, the
# host's joblet-shim bound in) and its loopback `createRuntime` hook stay,
# as joblet ran them.
#
# crun 1.8 refuses this host's hybrid cgroup layout, so (as in
# start-latency.sh) the harness runs inside one private mount namespace
# with /sys/fs/cgroup/unified unmounted. The daemon and its shims run
# outside it: joblet's runc and runsc see the cgroup2 mount, the raw ones do
# not (joblet hides it from its own crun the same way).
#
# Usage: bench/executors.sh [--no-build]   (as root)
#   EXEC_ROUNDS (default 30)  rounds: 30 paced runs and 300 back-to-back
#                             runs per command
#   EXEC_DIR    (default ${TMPDIR:-/tmp}/joblet-bench-exec) scratch dir
# Prints markdown on stdout, progress on stderr. A runtime that is not
# installed is reported as skipped; one that is installed but whose job or
# raw run fails, as failed. Exit status 0 when native and every installed
# runtime were measured. The last column is what each job's shim.log says
# the shim spent from writing the bundle to the runtime's `run --detach` returning. Cleans up on
# exit, also on failure: the daemon and its cgroups, the containers it and
# the raw runs created (in each runtime's root), the scratch dir.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/executors.sh [--no-build]" >&2; exit 2 ;;
  esac
done
ROUNDS="${EXEC_ROUNDS:-30}"
DIR="${EXEC_DIR:-${TMPDIR:-/tmp}/joblet-bench-exec}"
MARKER="$DIR/.joblet-bench-exec" # proves the directory is ours
PREFIX="joblet-exec-"             # raw container ids (and cgroups named after them)
CGROUP_BASE="joblet-exec-$$"      # the daemon's sandbox.cgroup_base
RAW_BASE="joblet-exec-raw-$$"     # parent of the raw containers' cgroupsPath
CGROUP_LOCK="/run/joblet/cgroup-$CGROUP_BASE.lock"
UNIFIED=/sys/fs/cgroup/unified
BIN="$ROOT/target/release"
RUNTIMES=(runc crun runsc)
# The job's PATH (crates/joblet/src/jobenv.rs DEFAULT_PATH).
JOB_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { echo "executors: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (sandbox, runc, crun, runsc)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "EXEC_ROUNDS must be a positive number, got '$ROUNDS'"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to time the runs (Debian: python3)"

# shellcheck source=bench/lib/oci.sh
source "$ROOT/bench/lib/oci.sh" # crun_ns, install_missing, *_joblet_daemon, cleanup helpers
install_missing runc:runc crun:crun runsc:runsc

if [ "$BUILD" = 1 ]; then
  log "building joblet and rnx (release)"
  cargo build --release --locked -p joblet -p joblet-sandbox -p rnx >&2
fi
for f in joblet joblet-shim rnx; do
  [ -x "$BIN/$f" ] || die "$BIN/$f missing: run without --no-build"
done

STATE="$DIR/joblet"
OCI_STATE="$STATE/oci"       # the daemon's executors.state_dir (a --root per runtime)
RUNSC_ROOT="$DIR/runsc-root" # the raw runsc's --root

# --- cleanup (also run first, to clear an interrupted run) -------------------
# delete_in_root TOOL ROOT PREFIX: `delete --force` of TOOL's containers in
# state root ROOT whose id starts with PREFIX.
delete_in_root() {
  local tool="$1" root="$2" id quiet=-q
  command -v "$tool" >/dev/null 2>&1 && [ -d "$root" ] || return 0
  [ "$tool" != runsc ] || quiet=-quiet
  for id in $("$tool" --root "$root" list "$quiet" 2>/dev/null | grep "^$3" || true); do
    case "$tool" in
      crun) crun_ns crun --root "$root" delete -f "$id" ;;
      runsc) runsc --root "$root" delete -force "$id" ;;
      *) "$tool" --root "$root" delete -f "$id" ;;
    esac >/dev/null 2>&1 || log "WARNING: $tool --root $root delete $id failed"
  done
}
DAEMON_PID=""
cleanup() {
  stop_joblet_daemon
  local rt
  for rt in "${RUNTIMES[@]}"; do delete_in_root "$rt" "$OCI_STATE/$rt" joblet-; done
  delete_in_root runsc "$RUNSC_ROOT" "$PREFIX"
  delete_containers "$PREFIX" # runc's and crun's default roots, and cgroups named $PREFIX*
  remove_cgroups_named "$CGROUP_BASE"
  remove_cgroups_named "$RAW_BASE"
  rm -f "$CGROUP_LOCK"
  if [ -e "$MARKER" ]; then rm -rf "$DIR"; fi
}
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set EXEC_DIR"
fi
cleanup
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DIR" "$STATE" "$RUNSC_ROOT"
touch "$MARKER"

# --- the joblet daemon (embedded defaults but for where it keeps things) -----
cat >"$STATE/joblet-config.yml" <<YAML
# Written by joblet bench/executors.sh; removed with $DIR.
server:
  address: "127.0.0.1:0"
  state_dir: "$STATE/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: "$CGROUP_BASE"
executors:
  state_dir: "$OCI_STATE"
YAML
log "starting joblet daemon"
start_joblet_daemon "$BIN" "$STATE/joblet-config.yml" "$STATE/state" "$STATE/joblet.log" ||
  die "the daemon did not start: $(tail -n 5 "$STATE/joblet.log")"
RNX=("$BIN/rnx" --config "$STATE/state/rnx-config.yml")
JOBS="$STATE/state/jobs"

# --- one job per runtime, and the equivalent bundle from it ------------------
# make_raw_bundle SRC_CONFIG DEST RUNTIME: DEST/config.json from the job's
# SRC_CONFIG, with DEST/rootfs and DEST/work; prints what it changed.
make_raw_bundle() {
  mkdir -p "$2/rootfs" "$2/work"
  python3 - "$1" "$2" "$3" "/$RAW_BASE/$3" "$JOB_PATH" <<'PY'
import json, os, sys
src, dest, runtime, cgroups_path, job_path = sys.argv[1:]
spec = json.load(open(src))
notes = []
proc = spec["process"]
env = proc.get("env") or []
if not any(e.startswith("PATH=") for e in env):
    env.append("PATH=")
proc["env"] = [f"PATH={job_path}" if e.startswith("PATH=") else e for e in env]
args = proc.get("args") or []
if args[-1:] != ["true"]:
    sys.exit(f"the job's process.args are {args!r}, not …true")
spec["root"]["path"] = os.path.join(dest, "rootfs")
for m in spec.get("mounts", []):
    if m.get("type") != "bind" and "bind" not in m.get("options", []) and "rbind" not in m.get("options", []):
        continue
    if m["destination"] == "/work":
        m["source"] = os.path.join(dest, "work")
    elif not os.path.exists(m["source"]):
        # Something of the job's that went with it: an empty stand-in.
        stand_in = os.path.join(dest, "binds", m["destination"].strip("/").replace("/", "_"))
        os.makedirs(stand_in, exist_ok=True)
        notes.append(f"{m['destination']}: {m['source']} gone, an empty dir instead")
        m["source"] = stand_in
hooks = spec.get("hooks") or {}
for phase in list(hooks):
    kept = [h for h in hooks[phase] if os.path.exists(h["path"])]
    for h in hooks[phase]:
        if h not in kept:
            notes.append(f"{phase} hook {h['path']} dropped (missing)")
    if kept:
        hooks[phase] = kept
    else:
        del hooks[phase]
if "hooks" in spec and not hooks:
    del spec["hooks"]
spec.setdefault("linux", {})["cgroupsPath"] = cgroups_path
json.dump(spec, open(os.path.join(dest, "config.json"), "w"), indent=2)
init = f"pid 1 `{' '.join(args[:-1])}`" if args[:-1] else "no joblet pid 1 (`true` is)"
hook_names = ",".join(f"{p}:{os.path.basename(h['path'])}" for p, hs in hooks.items() for h in hs) or "none"
print(f"{init}, hooks {hook_names}" + "".join(f"; {n}" for n in notes))
PY
}

declare -A SKIP=() BUNDLE_NOTE=() # SKIP: "skipped: why" or "failed: why"
for rt in "${RUNTIMES[@]}"; do
  if ! command -v "$rt" >/dev/null 2>&1; then
    SKIP[$rt]="skipped: $rt is not installed"
    log "$rt: ${SKIP[$rt]}"
    continue
  fi
  log "running one job under $rt for its bundle"
  touch "$DIR/.before-$rt"
  if ! out="$("${RNX[@]}" job run --follow --executor="$rt" -- true 2>&1 </dev/null)"; then
    SKIP[$rt]="failed: \`rnx job run --executor=$rt\`: $(echo "$out" | tail -n 1)"
    log "$rt: ${SKIP[$rt]}"
    continue
  fi
  # The job's bundle: the one config.json written since.
  config="$(find "$JOBS" -mindepth 3 -maxdepth 3 -path '*/bundle/config.json' -newer "$DIR/.before-$rt" 2>/dev/null | head -n 1)"
  if [ -z "$config" ]; then
    SKIP[$rt]="failed: no bundle/config.json of the $rt job under $JOBS"
    log "$rt: ${SKIP[$rt]}"
    continue
  fi
  job="$(basename "$(dirname "$(dirname "$config")")")"
  if ! note="$(make_raw_bundle "$config" "$DIR/bundle-$rt" "$rt" 2>&1)"; then
    SKIP[$rt]="failed: the equivalent bundle: $note"
    log "$rt: ${SKIP[$rt]}"
    continue
  fi
  BUNDLE_NOTE[$rt]="$note"
  log "$rt bundle from job $job: $note"
done

# --- the run -----------------------------------------------------------------
avail=()
for rt in "${RUNTIMES[@]}"; do [ -n "${SKIP[$rt]:-}" ] || avail+=("$rt"); done
python3 - "$DIR/spec.json" "$ROUNDS" "$BIN/rnx" "$STATE/state/rnx-config.yml" \
  "$DIR" "$PREFIX" "$RUNSC_ROOT" "${avail[@]}" <<'PY'
import json, sys
out, rounds, rnx, config, dir, prefix, runsc_root, *avail = sys.argv[1:]
run = [rnx, "--config", config, "job", "run", "--follow"]
raw = {
    "runc": ["runc", "run"],
    "crun": ["crun", "run"],
    "runsc": ["runsc", "--root", runsc_root, "--network=none", "--platform=ptrace", "run"],
}
cmds = [{"key": "native", "argv": run + ["--executor=native", "--", "true"]}]
for rt in avail:
    cmds.append({"key": f"rnx-{rt}", "argv": run + [f"--executor={rt}", "--", "true"]})
    cmds.append({"key": rt, "argv": raw[rt] + ["--bundle", f"{dir}/bundle-{rt}", f"{prefix}{rt}-{{i}}"]})
json.dump({"rounds": int(rounds), "block": 10, "pause_ms": 50, "settle_ms": 300,
           "warmup": 3, "commands": cmds}, open(out, "w"))
PY
log "timing $ROUNDS rounds (paced and back to back), interleaved: native ${avail[*]}"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r), $(date -u +%F); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for rt in "${RUNTIMES[@]}"; do
  if [ -n "${SKIP[$rt]:-}" ]; then
    echo "- $rt: ${SKIP[$rt]}"
  else
    echo "- $rt $("$rt" --version 2>/dev/null | head -n 1 | sed 's/^[a-z]* version //'): joblet's bundle, ${BUNDLE_NOTE[$rt]}; \`linux.cgroupsPath\` /$RAW_BASE/$rt for every raw run"
  fi
done
echo
crun_ns python3 "$ROOT/bench/lib/interleave.py" "$DIR/spec.json" >"$DIR/results.tsv"

# --- tables ------------------------------------------------------------------
skips=()
for rt in "${RUNTIMES[@]}"; do [ -z "${SKIP[$rt]:-}" ] || skips+=("$rt=${SKIP[$rt]}"); done
python3 - "$DIR/results.tsv" "$JOBS" "${skips[@]}" <<'PY'
import glob, os, re, sys
results, jobs, *skips = sys.argv[1:]
# Runtimes not timed: "skipped: why" (not installed) or "failed: why".
skipped = {k: v.replace("|", "/") for k, v in (s.split("=", 1) for s in skips)}
rows, failed = {}, {}
for line in open(results).read().splitlines():
    f = line.split("\t")
    if f[2] == "ok":
        rows[(f[0], f[1])] = (float(f[3]), float(f[4]), int(f[5]), float(f[6]))
    else:
        failed[f[0]] = f[3]
raw_label = {
    "runc": "`runc run --bundle B`",
    "crun": "`crun run --bundle B`",
    "runsc": "`runsc --network=none --platform=ptrace run --bundle B`",
}
labels = {"native": "`rnx job run --follow --executor=native -- true`"}
for rt in ("runc", "crun", "runsc"):
    labels[f"rnx-{rt}"] = f"`rnx job run --follow --executor={rt} -- true`"
    labels[rt] = raw_label[rt] + " (joblet's bundle)"
WAYS = ("paced", "back-to-back")

def cell(key):
    return [f"{rows[(key, w)][0]:.2f} ({rows[(key, w)][1]:.2f})" for w in WAYS]

print("| command | paced: median ms (p90) | back to back: median ms (p90) |")
print("|---|---:|---:|")
for key, label in labels.items():
    rt = key.removeprefix("rnx-")
    if rt in skipped:
        print(f"| {label} | {skipped[rt].split(':')[0]} | |")
    elif key in failed or (key, "paced") not in rows:
        print(f"| {label} | failed: {failed.get(key, 'not run')} | |")
    else:
        c = cell(key)
        print(f"| {label} | {c[0]} | {c[1]} |")

# What each job's shim.log says the shim spent from writing the bundle to
# the runtime's `run --detach` returning (create and start in one call), per executor.
started = {}
for log in glob.glob(os.path.join(jobs, "*", "shim.log")):
    for line in open(log, errors="replace"):
        if "job started under an OCI runtime" not in line:
            continue
        ex = re.search(r"executor\W+(\w+)", line)
        us = re.search(r"elapsed_us\W+(\d+)", line)
        if ex and us:
            started.setdefault(ex.group(1), []).append(int(us.group(1)) / 1000)

def median(v):
    v = sorted(v)
    return v[len(v) // 2]

print()
print("| executor | joblet − raw runtime, paced (medians) | back to back | goal ≤ 2 ms | the shim's bundle + `run --detach` (shim.log `elapsed_us`, median) |")
print("|---|---:|---:|---|---:|")
ok = True
for rt in ("runc", "crun", "runsc"):
    if rt in skipped:
        print(f"| {rt} | {skipped[rt]} | | | |")
        ok = ok and skipped[rt].startswith("skipped")
        continue
    if (f"rnx-{rt}", "paced") not in rows or (rt, "paced") not in rows:
        print(f"| {rt} | failed | | | |")
        ok = False
        continue
    d = [rows[(f"rnx-{rt}", w)][0] - rows[(rt, w)][0] for w in WAYS]
    verdict = "met" if max(d) <= 2 else "not met"
    s = f"{median(started[rt]):.2f} ms ({len(started[rt])} jobs)" if rt in started else "-"
    print(f"| {rt} | {d[0]:+.2f} ms | {d[1]:+.2f} ms | {verdict} | {s} |")
if ("native", "paced") in rows:
    n = [rows[("native", w)][0] for w in WAYS]
    print(f"| native | {n[0]:.2f} ms (no raw peer: the rnx figure) | {n[1]:.2f} ms | | |")
else:
    ok = False
    print(f"| native | failed: {failed.get('native', 'not run')} | | | |")
if rows:
    n = [next(rows[k][2] for k in rows if k[1] == w) for w in WAYS]
    print()
    print(f"{n[0]} paced and {n[1]} back-to-back runs per command; "
          "joblet − raw is `rnx job run --follow --executor=X -- true` minus `X run` of the same bundle; "
          f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
sys.exit(0 if ok else 1)
PY
