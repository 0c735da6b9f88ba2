#!/usr/bin/env bash
# Tears down what bench/slurm-up.sh started: cancels the jobs of our private
# cluster, stops only the daemons whose PIDs slurm-up recorded (slurmd,
# slurmctld, munged), removes the /dev/nvidiaN nodes it mknod'ed and the
# empty Slurm cgroup directories that did not exist before. Packages, the
# munge key and the logs under $SLURM_BENCH_DIR stay (the next up reuses the
# key; logs help explain a bad run). Idempotent: safe to run when nothing is up.
set -euo pipefail

DIR="${SLURM_BENCH_DIR:-/tmp/joblet-bench-slurm}"
MARKER="$DIR/.joblet-bench-slurm"
CONF="$DIR/etc/slurm.conf"

log() { echo "slurm-down: $*" >&2; }

if [ ! -e "$MARKER" ]; then
  log "nothing to do: $DIR was not set up by slurm-up.sh"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { log "ERROR: must run as root"; exit 1; }

# shellcheck source=bench/slurm-pids.sh
source "$(dirname "$0")/slurm-pids.sh"

# Cancel our cluster's jobs first so their slurmstepd processes (which outlive
# slurmd) finish; bounded wait for the queue to drain.
if pid_alive "$DIR/run/slurmctld.pid" slurmctld && [ -e "$CONF" ]; then
  export SLURM_CONF="$CONF"
  mapfile -t jobs < <(timeout 10 squeue -h -o %i 2>/dev/null || true)
  if [ "${#jobs[@]}" -gt 0 ]; then
    log "cancelling ${#jobs[@]} queued/running job(s)"
    timeout 10 scancel --full "${jobs[@]}" >/dev/null 2>&1 || true
    for _ in $(seq 100); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.1
    done
  fi
fi

stop_pid "$DIR/run/slurmd.pid" slurmd
stop_pid "$DIR/run/slurmctld.pid" slurmctld
stop_pid "$DIR/run/munged.pid" munged

# slurmstepd processes outlive slurmd. Any left after the cancel above are
# ours when they hold a file under $DIR open (they inherit slurmd's log fd
# and listen on a socket in our spool dir); kill only those.
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
  for fd in "$p"/fd/*; do
    if [[ "$(readlink "$fd" 2>/dev/null)" == "$DIR"/* ]]; then
      log "warning: slurmstepd ${p#/proc/} of our cluster still running; killing it"
      kill -KILL "${p#/proc/}" 2>/dev/null || true
      break
    fi
  done
done

# Device nodes we created (never pre-existing ones).
if [ -s "$DIR/created-devnodes" ]; then
  while read -r node; do
    # Only a char device 195:N at a /dev/nvidiaN path, as slurm-up made it.
    if [[ "$node" =~ ^/dev/nvidia[0-9]+$ ]] && [ -c "$node" ]; then
      rm -f "$node"
    fi
  done <"$DIR/created-devnodes"
  log "removed device nodes: $(tr '\n' ' ' <"$DIR/created-devnodes")"
fi
rm -f "$DIR/created-devnodes"

# Slurm's v1 cgroup trees that did not exist before our first up; rmdir
# deepest first, which only succeeds on empty (task-free) cgroups.
if [ -s "$DIR/created-cgroups" ]; then
  while read -r cg; do
    if ! [[ "$cg" =~ ^/sys/fs/cgroup/[^/]+/slurm(_[^/]+)?$ ]] || [ ! -d "$cg" ]; then continue; fi
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    if [ -d "$cg" ]; then log "warning: $cg not empty, left in place"; fi
  done <"$DIR/created-cgroups"
fi
rm -f "$DIR/created-cgroups"
log "down"
