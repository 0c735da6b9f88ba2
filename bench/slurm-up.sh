#!/usr/bin/env bash
# Brings up a private single-node Slurm (slurmctld + slurmd + munged) so the
# benchmark can measure `srun true` / `sbatch --wrap true` in the same run.
#
# Everything lives under $SLURM_BENCH_DIR (default /tmp/joblet-bench-slurm):
# config, munge key and socket, state, spool, logs and PID files. Nothing in
# /etc/slurm or /etc/munge is written; clients find our cluster through
# SLURM_CONF, which is the only line printed on stdout:
#     source <(bench/slurm-up.sh | grep '^export ')
# Progress and errors go to stderr. Run as root. Idempotent: a second run
# leaves running daemons alone (restarts them only if the config changed).
# bench/slurm-down.sh undoes it (packages stay installed).
#
# The config mirrors the GPU-FACTS notes ("Measured peers"): select/cons_tres,
# proctrack/cgroup, task/cgroup+affinity, cgroup/v1 with ConstrainDevices=yes
# and an 8-GPU gres on mknod'ed /dev/nvidia[0-7] (char 195:N). Without a
# driver, opening an allowed node gives ENXIO and a denied one EPERM, so the
# device constraint is really enforced and `srun --gres=gpu:1` pays for it.
#
# Environment:
#   SLURM_BENCH_DIR    our directory           (default /tmp/joblet-bench-slurm)
#   SLURM_BENCH_GPUS   fake/real GPUs in gres  (default 8, 0 = no gres)
#   SLURM_BENCH_CTLD_PORT / SLURM_BENCH_SLURMD_PORT
#                      ports (default 16817/16818, off Slurm's 6817/6818 so a
#                      system Slurm on this host is not disturbed)
#   SLURM_BENCH_WAIT   seconds to wait for the node to come up (default 60)
#   SLURM_BENCH_SCHED_PARAMS
#                      SchedulerParameters (default empty = Slurm's defaults).
#                      With the defaults, batch jobs are scheduled at most every
#                      batch_sched_delay=3 s, so with CPUs=2 `sbatch --wrap true`
#                      drains at ~0.8 job/s here (1,000 jobs: ~20 min);
#                      "batch_sched_delay=0" gives ~2 jobs/s (then slurmctld's
#                      1 s background tick is the limit).
set -euo pipefail

DIR="${SLURM_BENCH_DIR:-/tmp/joblet-bench-slurm}"
GPUS="${SLURM_BENCH_GPUS:-8}"
CTLD_PORT="${SLURM_BENCH_CTLD_PORT:-16817}"
SLURMD_PORT="${SLURM_BENCH_SLURMD_PORT:-16818}"
WAIT_S="${SLURM_BENCH_WAIT:-60}"
SCHED_PARAMS="${SLURM_BENCH_SCHED_PARAMS:-}"
MARKER="$DIR/.joblet-bench-slurm"   # proves the directory is ours
CONF="$DIR/etc/slurm.conf"
MUNGE_DIR="$DIR/munge"
MUNGE_SOCK="$MUNGE_DIR/munge.socket.2"

log() { echo "slurm-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# After daemons may have started: also say how to clean up.
die_up() { logs_tail; die "$* (daemons may still run: bench/slurm-down.sh stops them)"; }

# --- preconditions -----------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd, munged as user munge, mknod)"
[[ "$GPUS" =~ ^[0-9]+$ ]] || die "SLURM_BENCH_GPUS must be a number, got '$GPUS'"

# --- packages ----------------------------------------------------------------
# Install only what is missing; `apt-get update` at most once, and only when
# the first install attempt fails (stale or missing package lists).
need_pkgs=()
for bin_pkg in slurmctld:slurmctld slurmd:slurmd srun:slurm-client \
               sbatch:slurm-client sinfo:slurm-client munged:munge mungekey:munge; do
  command -v "${bin_pkg%%:*}" >/dev/null 2>&1 || need_pkgs+=("${bin_pkg#*:}")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  mapfile -t need_pkgs < <(printf '%s\n' "${need_pkgs[@]}" | sort -u)
  log "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" >&2; }
  if ! apt_install; then
    log "apt-get install failed; running apt-get update once and retrying"
    apt-get update -q >&2
    apt_install
  fi
fi
id munge >/dev/null 2>&1 || die "user 'munge' does not exist (the munge package creates it)"

# --- our directory -----------------------------------------------------------
# Refuse to take over a non-empty directory we did not create.
if [ -e "$DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  die "$DIR exists, is not empty and was not created by this script; set SLURM_BENCH_DIR"
fi
mkdir -p "$DIR"/{etc,state,spool/slurmd,log,run}
chmod 755 "$DIR"
touch "$MARKER"

# shellcheck source=bench/slurm-pids.sh
source "$(dirname "$0")/slurm-pids.sh"
# Starts "$@" detached (own session, no terminal, output to <log>) and writes
# its PID. setsid execs without forking here (a non-interactive script's
# background job is not a process-group leader), so $! is the daemon itself.
# Waits (up to 2 s) for the exec so a PID check right after sees <comm>.
start_daemon() { # <pidfile> <comm> <logfile> <cmd...>
  local pidfile="$1" comm="$2" logfile="$3"
  shift 3
  setsid "$@" </dev/null >>"$logfile" 2>&1 &
  echo "$!" >"$pidfile"
  for _ in $(seq 20); do pid_alive "$pidfile" "$comm" && return 0; sleep 0.1; done
}
logs_tail() { # last lines of every log we keep, for failure reports
  local f
  for f in "$DIR"/log/*.log; do
    if [ -f "$f" ]; then
      echo "==> $f <=="
      tail -n 20 "$f"
    fi
  done >&2
  return 0
}

# --- munge -------------------------------------------------------------------
# A private munged with its own key and socket, run as user munge. munged
# insists on the key (0600) and its directory being owned by munge and not
# writable by others; the socket directory stays 755 so any user can submit.
mkdir -p "$MUNGE_DIR"
chown munge:munge "$MUNGE_DIR"
chmod 755 "$MUNGE_DIR"
if [ ! -s "$MUNGE_DIR/munge.key" ]; then
  log "creating munge key $MUNGE_DIR/munge.key"
  mungekey --create --keyfile="$MUNGE_DIR/munge.key"
fi
chown munge:munge "$MUNGE_DIR/munge.key"
chmod 600 "$MUNGE_DIR/munge.key"
if ! pid_alive "$DIR/run/munged.pid" munged; then
  log "starting munged (socket $MUNGE_SOCK)"
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
  start_daemon "$DIR/run/munged.pid" munged "$DIR/log/munged-stdio.log" \
    setpriv --reuid=munge --regid=munge --init-groups \
    munged --foreground --socket="$MUNGE_SOCK" --key-file="$MUNGE_DIR/munge.key" \
    --seed-file="$MUNGE_DIR/munged.seed" --pid-file="$MUNGE_DIR/munged.pid"
fi
for _ in $(seq 50); do
  munge -n -S "$MUNGE_SOCK" 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1 && break
  sleep 0.1
done
munge -n -S "$MUNGE_SOCK" 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1 ||
  die_up "munged did not answer on $MUNGE_SOCK"

# --- GPU device nodes --------------------------------------------------------
# mknod /dev/nvidiaN (char 195:N) only where absent, and append each node we
# create to created-devnodes so slurm-down removes exactly those (a real
# driver's nodes are never touched). The list survives repeated ups.
touch "$DIR/created-devnodes"
for ((n = 0; n < GPUS; n++)); do
  node="/dev/nvidia$n"
  if [ ! -e "$node" ]; then
    mknod -m 666 "$node" c 195 "$n"
    grep -qxF "$node" "$DIR/created-devnodes" || echo "$node" >>"$DIR/created-devnodes"
  fi
done

# --- cgroup directories Slurm will create -----------------------------------
# cgroup/v1 makes /sys/fs/cgroup/<controller>/slurm (Debian's build, with
# multiple-slurmd support, names it slurm_<node>). Remember which of these did
# not exist before our first up, so slurm-down can rmdir only those.
HOST="$(hostname -s)"
[ -n "$HOST" ] || die "hostname -s is empty"
if [ ! -e "$DIR/created-cgroups" ]; then
  for c in /sys/fs/cgroup/*/; do
    for name in slurm "slurm_$HOST"; do
      [ -e "$c$name" ] || echo "$c$name"
    done
  done >"$DIR/created-cgroups"
fi

# --- config ------------------------------------------------------------------
gres_types="" node_gres="" sched_line=""
[ -z "$SCHED_PARAMS" ] || sched_line="SchedulerParameters=$SCHED_PARAMS"
if [ "$GPUS" -gt 0 ]; then
  gres_types="GresTypes=gpu"
  node_gres="Gres=gpu:$GPUS"
fi
tmp_conf="$(mktemp -d)"
trap 'rm -rf "$tmp_conf"' EXIT
# Addresses are pinned to 127.0.0.1 so name resolution of the host does not
# matter. SlurmUser=root keeps file ownership simple for a throwaway cluster.
# CR_Core: cores are the consumable resource (memory is not), so two 1-CPU
# jobs run at once on CPUs=2.
cat >"$tmp_conf/slurm.conf" <<EOF
# Written by joblet bench/slurm-up.sh; removed with $DIR.
ClusterName=joblet-bench
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd
SlurmctldPidFile=$DIR/run/slurmctld.ctl.pid
SlurmdPidFile=$DIR/run/slurmd.ctl.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
$sched_line
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
$gres_types
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 $node_gres State=UNKNOWN
PartitionName=bench Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
# cgroup/v1 as measured in GPU-FACTS. This host is hybrid (v1 controllers plus
# a cgroup2 mount at /sys/fs/cgroup/unified holding only hugetlb); v1 works
# as is. The hierarchies are already mounted, so no automount.
cat >"$tmp_conf/cgroup.conf" <<EOF
# Written by joblet bench/slurm-up.sh
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainDevices=yes
EOF
if [ "$GPUS" -gt 0 ]; then
  cat >"$tmp_conf/gres.conf" <<EOF
# Written by joblet bench/slurm-up.sh
AutoDetect=off
Name=gpu File=/dev/nvidia[0-$((GPUS - 1))]
EOF
fi
changed=0
for f in slurm.conf cgroup.conf gres.conf; do
  if [ -e "$tmp_conf/$f" ]; then
    cmp -s "$tmp_conf/$f" "$DIR/etc/$f" || { cp "$tmp_conf/$f" "$DIR/etc/$f"; changed=1; }
  elif [ -e "$DIR/etc/$f" ]; then
    rm -f "$DIR/etc/$f"; changed=1
  fi
done
chmod 644 "$DIR"/etc/*.conf
export SLURM_CONF="$CONF"

# --- daemons -----------------------------------------------------------------
if [ "$changed" -eq 1 ]; then
  # New or different config: running daemons (ours) must pick it up.
  stop_pid "$DIR/run/slurmd.pid" slurmd
  stop_pid "$DIR/run/slurmctld.pid" slurmctld
fi
if ! pid_alive "$DIR/run/slurmctld.pid" slurmctld; then
  # -c: start from a clean state (no jobs recovered from an earlier run).
  log "starting slurmctld (port $CTLD_PORT)"
  start_daemon "$DIR/run/slurmctld.pid" slurmctld "$DIR/log/slurmctld-stdio.log" \
    slurmctld -D -c -f "$CONF"
fi
if ! pid_alive "$DIR/run/slurmd.pid" slurmd; then
  log "starting slurmd (port $SLURMD_PORT, node $HOST)"
  start_daemon "$DIR/run/slurmd.pid" slurmd "$DIR/log/slurmd-stdio.log" \
    slurmd -D -f "$CONF"
fi

# --- wait until usable -------------------------------------------------------
deadline=$((SECONDS + WAIT_S))
state=""
while [ "$SECONDS" -lt "$deadline" ]; do
  pid_alive "$DIR/run/slurmctld.pid" slurmctld || die_up "slurmctld exited"
  pid_alive "$DIR/run/slurmd.pid" slurmd || die_up "slurmd exited"
  state="$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null || true)"
  case "$state" in
    idle | mixed | allocated) break ;;
    down* | drain* | fail*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
case "$state" in
  idle | mixed | allocated) ;;
  *) die_up "node $HOST not idle after ${WAIT_S}s (state '${state:-none}')" ;;
esac
left=$((deadline - SECONDS)); [ "$left" -ge 5 ] || left=5
timeout "$left" srun -N1 -n1 true >&2 || die_up "srun true failed (node state '$state')"
if [ "$GPUS" -gt 0 ]; then
  timeout "$left" srun -N1 -n1 --gres=gpu:1 true >&2 || die_up "srun --gres=gpu:1 true failed"
fi
log "ready: node $HOST $state, srun works; logs in $DIR/log"
echo "export SLURM_CONF=$CONF"
