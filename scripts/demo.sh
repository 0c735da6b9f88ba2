#!/usr/bin/env bash
# The project's main job (README "Two commands"): builds joblet and rnx,
# starts a local node with embedded defaults in a throw-away state dir, runs
# a few jobs through the real mTLS API (one shows its sandbox from inside),
# shows status/list/logs, and stops the node. Run as root (the sandbox
# needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root (the job sandbox needs namespaces and cgroups)" >&2; exit 1; }

cargo build --release --locked --bins
BIN="$PWD/target/release"
STATE="$(mktemp -d /tmp/joblet-demo.XXXXXX)"
CONFIG="$STATE/joblet-config.yml"
cat >"$CONFIG" <<YAML
server:
  address: "127.0.0.1:0"        # any free port; the daemon writes the real one into rnx-config.yml
  state_dir: "$STATE/state"
jobs:
  max_running: 4
YAML

"$BIN/joblet" server --config "$CONFIG" >"$STATE/joblet.log" 2>&1 &
DAEMON=$!
cleanup() { kill "$DAEMON" 2>/dev/null || true; wait "$DAEMON" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 300); do [ -s "$STATE/state/server.json" ] && break; sleep 0.05; done
[ -s "$STATE/state/server.json" ] || { cat "$STATE/joblet.log"; exit 1; }
export RNX_CONFIG="$STATE/state/rnx-config.yml"
rnx() { "$BIN/rnx" "$@"; }
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say rnx whoami;                                   rnx whoami
say rnx job run --follow -- sh -c 'echo hello from job \$JOBLET_JOB_ID; uname -sr'
rnx job run --follow -- sh -c 'echo hello from job $JOBLET_JOB_ID; uname -sr'
say "rnx job run -f --max-memory=64 --max-cpu=50 -- sh -c '<what does the sandbox let me see?>'"
rnx job run -f --max-memory=64 --max-cpu=50 -- sh -c '
  echo "I am: $(id)   on host $(hostname)   my pid: $$"
  echo "processes I can see: $(ls /proc | grep -c "^[0-9]")"
  echo "/ holds: $(ls / | tr "\n" " ")"
  echo "/dev holds: $(ls /dev | tr "\n" " ")"
  grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr "\n" " "; echo
  touch /usr/evil 2>&1 || true
  echo "network interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"'
say 'ID=$(rnx job run -e NAME=demo -s TOKEN=s3cret -- sh -c "sleep 1; echo \$NAME done")'
ID=$(rnx job run -e NAME=demo -s TOKEN=s3cret -- sh -c 'sleep 1; echo $NAME done')
echo "$ID"
say rnx job log -f "${ID:0:8}";                   rnx job log -f "${ID:0:8}"
say rnx job status --detail "${ID:0:8}";          rnx job status --detail "${ID:0:8}"
say rnx job run --gpu=1 --gpu-memory=8GB python3 train.py
if rnx job run --gpu=1 --gpu-memory=8GB python3 train.py; then echo "unexpected: GPU job accepted"; exit 1; fi
echo "(expected: this node build has no GPU support yet — no GPU is simulated or used in this demo)"
say rnx job list;                                 rnx job list
printf '\nDemo done. Daemon log: %s/joblet.log, state: %s\n' "$STATE" "$STATE/state"
