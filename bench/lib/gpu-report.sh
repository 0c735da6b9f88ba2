# shellcheck shell=bash
# What the real-GPU scripts share: a scratch dir under /var/tmp cleaned up
# on exit (the daemon in $DAEMON stopped, mounts under it unmounted), a
# markdown report of steps, and the torch interpreter to use.
#
# gpu_report_begin NAME OUT_DIR TITLE: checks root, sets OUT, REPORT,
# SCRATCH and DAEMON, installs the cleanup, and starts the report with
# TITLE, the date and the kernel.
gpu_report_begin() {
  REPORT_NAME="$1"
  mkdir -p "$2"; OUT="$(realpath "$2")"
  REPORT="$OUT/report.md"; : >"$REPORT"
  [ "$(id -u)" = 0 ] || { echo "$REPORT_NAME: run as root" >&2; exit 1; }
  SCRATCH="$(mktemp -d "/var/tmp/joblet-$REPORT_NAME.XXXXXX")"
  DAEMON=""
  trap gpu_report_cleanup EXIT
  printf '# %s\n\n%s, %s\n' "$3" "$(date -u +%FT%TZ)" "$(uname -srm)" >>"$REPORT"
}

gpu_report_cleanup() {
  [ -n "$DAEMON" ] && { kill "$DAEMON"; wait "$DAEMON"; }
  findmnt -rno TARGET | grep "^$SCRATCH/" | sort -r | while read -r m; do umount "$m"; done
  rm -rf "$SCRATCH"
}

# step TITLE COMMAND: runs COMMAND with bash (STEP_TIMEOUT seconds, default
# 120), its command line, output and exit status appended to the report.
step() {
  local title="$1"; shift
  printf '\n### %s\n\n```\n$ %s\n' "$title" "$*" >>"$REPORT"
  timeout "${STEP_TIMEOUT:-120}" bash -c "$*" >>"$REPORT" 2>&1
  local rc=$?
  printf '[exit %s]\n```\n' "$rc" >>"$REPORT"
  echo "$REPORT_NAME: $title: exit $rc" >&2
}

# torch_python: PYTHON if set, else the first python3 with torch on PATH
# or in /opt/*/.venv (may stay empty).
torch_python() {
  local p
  [ -n "${PYTHON:-}" ] && return
  for p in "$(command -v python3)" /opt/*/.venv/bin/python3; do
    [ -x "$p" ] && "$p" -c 'import torch' 2>/dev/null && { PYTHON="$p"; return; }
  done
}

# gpu_daemon CGROUP_BASE [MORE_YAML]: starts BIN's joblet on the real GPUs
# with its state under SCRATCH, the runtime store STORE and MORE_YAML
# (top-level sections); its log goes to OUT/daemon.log. Sets DAEMON,
# RNX_CONFIG and R (the rnx to call).
gpu_daemon() {
  cat >"$SCRATCH/joblet-config.yml" <<YAML
server:
  address: "127.0.0.1:0"
  state_dir: "$SCRATCH/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: $1
runtimes:
  dir: "$STORE"
gpu:
  enabled: true
${2:-}
YAML
  "$BIN/joblet" server --config "$SCRATCH/joblet-config.yml" >"$OUT/daemon.log" 2>&1 &
  DAEMON=$!
  for _ in $(seq 1 400); do [ -s "$SCRATCH/state/server.json" ] && break; sleep 0.05; done
  export RNX_CONFIG="$SCRATCH/state/rnx-config.yml"
  R="$BIN/rnx"
}
