#!/usr/bin/env bash
# A whole Joblet cluster on one machine: 3 etcd members and N `joblet server`
# nodes with simulated GPUs, each in a network namespace of its own, joined
# by veth pairs to a bridge in a hub namespace this script creates. Nothing
# listens outside those namespaces. Used by hand and by the cluster tests
# (crates/joblet-e2e/src/cluster.rs). Run as root, after `cargo build
# --workspace` (target/debug: joblet, rnx, libnvidia_ml.so).
#
#   scripts/dev-cluster.sh up [--nodes 3] [--dir DIR] [--tag TAG] [--gpus a100]
#   scripts/dev-cluster.sh rnx n1 node list
#   scripts/dev-cluster.sh partition n2; scripts/dev-cluster.sh heal n2
#   scripts/dev-cluster.sh down
#
# `usage` (or -h) prints every subcommand. Everything of one cluster lives
# under DIR: `cluster.env` (KEY=VALUE, sourceable: namespaces, IPs, pids,
# state dirs, config paths), each member's log, data and config. `down`
# kills only what this cluster started (recorded pids, checked against
# their start time; processes inside its namespaces; its nodes' shims and
# jobs), unmounts only what its nodes mounted below DIR, removes its nodes'
# cgroups and its namespaces, and is idempotent.
#
# Why `nsenter --net` and not `ip netns exec` to start processes: `ip netns
# exec` also gives the command a private mount namespace with a fresh /sys,
# in which /sys/fs/cgroup is empty, and a daemon there could not create its
# jobs' cgroups. `nsenter --net=/run/netns/NS` switches the network
# namespace only. (`ip netns exec NS rnx ...` works fine for rnx.)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/dev-cluster.sh"
BIN="${JBC_BIN:-$ROOT/target/debug}"
SUBNET="${JBC_SUBNET:-10.77.0}"
NODE_PORT=50051
DEFAULT_DIR="${JBC_DIR:-/tmp/joblet-dev-cluster}"
export ETCDCTL_API=3

usage() {
    cat <<EOF
Usage: scripts/dev-cluster.sh COMMAND [OPTIONS]

A Joblet cluster on this machine: 3 etcd members (e1 e2 e3) and N joblet
nodes (n1 n2 ...) with simulated GPUs, each in its own network namespace
(jbc-TAG-e1, jbc-TAG-n1, ...) joined to a bridge in jbc-TAG-hub. Run as root
after \`cargo build --workspace\`.

Commands:
  up [--nodes N] [--dir DIR] [--tag TAG] [--gpus PROFILE] [--lease-ttl D]
     [--extra-config FILE] [--timeout SECONDS]
        Start etcd, wait until it is healthy, start n1, copy its CA to the
        other nodes, start them, wait for every node's server.json, and
        write DIR/cluster.env. N: 1-50 (default 3); DIR: default
        $DEFAULT_DIR (or \$JBC_DIR); TAG: a-z 0-9 '-', at most 24 (default
        dev); PROFILE: a100 (default), h100, a mock-NVML profile or
        nvidia-smi capture file, or none; D: cluster.lease_ttl (default 3s);
        FILE: YAML merged into every node's config (block style; {node},
        {node_dir} and {dir} are replaced; its keys win over this script's).
        On failure everything started so far is torn down (logs stay in DIR).
  down [--dir DIR] [--purge]
        Kill what the cluster started, remove its nodes' cgroups and mounts
        below DIR, and its namespaces. Idempotent. --purge also removes DIR.
  status [--dir DIR]
        Each member: namespace, address, pid, running/paused/dead,
        partitioned, etcd health.
  rnx [--dir DIR] [--to TARGET] NODE ARGS...
        Run rnx in NODE's namespace with NODE's admin identity
        (DIR/NODE/rnx-config.yml: over TCP and mutual TLS, no local socket),
        against NODE's address or, with --to, against TARGET's.
  etcdctl [--dir DIR] ARGS...
        Run etcdctl (API 3) in the hub namespace against all three members.
  exec [--dir DIR] NAME COMMAND...
        Run COMMAND in NAME's network namespace (NAME: e1-e3, n1..., hub).
  kill [--dir DIR] NAME        SIGKILL the node daemon or etcd member NAME
                               (a node's shims and jobs keep running).
  kill-shims [--dir DIR] NODE  SIGKILL every shim of NODE.
  pause [--dir DIR] NAME       SIGSTOP it;  resume NAME: SIGCONT it.
  partition [--dir DIR] NAME   Cut NAME off the network (its veth down on
                               the hub side);  heal NAME: reconnect it.
  restart [--dir DIR] NAME     Stop NAME if it runs (SIGTERM, SIGKILL after
                               15 s), start it again with the same config and
                               data, and wait until it is ready.

Environment: JBC_DIR (the default DIR), JBC_BIN (binaries, default
$ROOT/target/debug), JBC_SUBNET (first three octets, default 10.77.0),
JBC_RUST_LOG (the daemons' RUST_LOG, default info).
EOF
}

say() { echo "dev-cluster: $*" >&2; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() { # ms -> seconds since then, one decimal
    local d=$(($(now_ms) - $1))
    printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}
die() {
    say "$*"
    exit 1
}

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (network namespaces, cgroups, device nodes): sudo $0 $*"
}

need_tools() {
    local missing=()
    for t in ip nsenter setsid flock timeout etcd etcdctl mknod; do
        command -v "$t" >/dev/null || missing+=("$t")
    done
    [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: install etcd-server, etcd-client and iproute2 (scripts/setup.sh does)"
}

need_binaries() { # $1: gpus (none or a profile)
    local missing=()
    for b in joblet rnx; do
        [ -x "$BIN/$b" ] || missing+=("$BIN/$b")
    done
    if [ "$1" != none ] && [ ! -f "$BIN/libnvidia_ml.so" ]; then
        missing+=("$BIN/libnvidia_ml.so")
    fi
    [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: run \`cargo build --workspace\` first (or point JBC_BIN at the binaries)"
}

# ---------------------------------------------------------------- state --

upper() { echo "$1" | tr '[:lower:]' '[:upper:]'; }

# var NAME FIELD -> value of JBC_<NAME>_<FIELD> (empty if unset)
var() {
    local v="JBC_$(upper "$1")_$2"
    echo "${!v:-}"
}

setvar() { # NAME FIELD VALUE
    printf -v "JBC_$(upper "$1")_$2" '%s' "$3"
}

members() { echo "${JBC_ETCD_MEMBERS//,/ } ${JBC_NODES//,/ }"; }

load_env() {
    [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR (no cluster.env); start one with: $SELF up --dir $DIR"
    # shellcheck disable=SC1091
    . "$DIR/cluster.env"
}

write_env() {
    local tmp="$DIR/cluster.env.tmp" m f
    {
        echo "# Written by scripts/dev-cluster.sh; KEY=VALUE lines (sourceable). Lists are comma-separated."
        for f in TAG DIR BIN ROOT HUB_NS HUB_IP ETCD_MEMBERS ETCD_ENDPOINTS NODES GPUS LEASE_TTL; do
            local v="JBC_$f"
            echo "JBC_$f=${!v:-}"
        done
        for m in $(members); do
            for f in KIND NS IP ADDR PID PID_START LOG DATA STATE CONFIG RNX_CONFIG CGROUP_BASE GPU_DEV GPU_STATE; do
                local v="JBC_$(upper "$m")_$f"
                [ -n "${!v+x}" ] && echo "$v=${!v}"
            done
        done
    } >"$tmp"
    mv "$tmp" "$DIR/cluster.env"
}

lock() {
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock 9
}

starttime() { # pid -> its start time (clock ticks since boot), empty if gone
    local stat rest
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    rest="${stat##*) }"
    # shellcheck disable=SC2086
    set -- $rest
    echo "${20}"
}

pstate() { # pid -> its state letter (R S D T Z ...), empty if gone
    local stat rest
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    rest="${stat##*) }"
    echo "${rest%% *}"
}

# alive NAME: the recorded process still runs (same pid and start time, not a zombie)
alive() {
    local pid start st
    pid="$(var "$1" PID)"
    start="$(var "$1" PID_START)"
    [ -n "$pid" ] || return 1
    [ "$(starttime "$pid")" = "$start" ] || return 1
    st="$(pstate "$pid")"
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

gone() { # pid start -> true once that process is gone or a zombie
    local st
    [ "$(starttime "$1")" = "$2" ] || return 0
    st="$(pstate "$1")"
    [ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}

wait_gone() { # pid start seconds
    local deadline=$((SECONDS + $3))
    while ! gone "$1" "$2"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.05
    done
}

is_member() {
    local m
    for m in $(members); do [ "$m" = "$1" ] && return 0; done
    return 1
}

check_name() {
    is_member "$1" || die "no member '$1' in this cluster (members: $(members))"
}

in_ns() { # NAME-or-hub COMMAND... (network namespace only)
    local ns
    if [ "$1" = hub ]; then ns="$JBC_HUB_NS"; else ns="$(var "$1" NS)"; fi
    shift
    nsenter --net="/run/netns/$ns" -- "$@"
}

etcdctl_hub() { # ARGS... against every member, from the hub
    in_ns hub etcdctl --endpoints="$JBC_ETCD_ENDPOINTS" --dial-timeout=2s --command-timeout=5s "$@"
}

log_tail() { # file [lines]
    [ -f "$1" ] || return 0
    echo "--- last ${2:-40} lines of $1:" >&2
    tail -n "${2:-40}" "$1" >&2
}

# ------------------------------------------------------------ processes --

start_etcd() { # NAME
    local m="$1" ip initial="" e
    ip="$(var "$m" IP)"
    for e in ${JBC_ETCD_MEMBERS//,/ }; do
        initial+="${initial:+,}$e=http://$(var "$e" IP):2380"
    done
    mkdir -p "$DIR/$m"
    echo "=== $(date -Is) starting $m" >>"$(var "$m" LOG)"
    setsid nsenter --net="/run/netns/$(var "$m" NS)" -- etcd \
        --name "$m" --data-dir "$(var "$m" DATA)" \
        --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
        --listen-client-urls "http://$ip:2379,http://127.0.0.1:2379" --advertise-client-urls "http://$ip:2379" \
        --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token "jbc-$JBC_TAG" \
        --auto-compaction-mode=periodic --auto-compaction-retention=1 --pre-vote=true \
        --logger=zap --log-outputs=stderr \
        </dev/null >>"$(var "$m" LOG)" 2>&1 9>&- &
    local pid=$!
    disown "$pid" 2>/dev/null || true
    setvar "$m" PID "$pid"
    setvar "$m" PID_START "$(starttime "$pid")"
    write_env
}

wait_etcd() { # seconds member... (each member's own endpoint healthy)
    local secs="$1" deadline m out
    shift
    deadline=$((SECONDS + secs))
    for m in "$@"; do
        while :; do
            alive "$m" || {
                log_tail "$(var "$m" LOG)"
                die "etcd member $m exited during start-up (log: $(var "$m" LOG))"
            }
            if out="$(in_ns hub etcdctl --endpoints="http://$(var "$m" IP):2379" --dial-timeout=1s --command-timeout=2s endpoint health 2>&1)"; then
                break
            fi
            if [ $SECONDS -ge $deadline ]; then
                log_tail "$(var "$m" LOG)"
                die "etcd member $m not healthy after ${secs}s: $out"
            fi
            sleep 0.2
        done
    done
}

start_node() { # NAME
    local m="$1"
    rm -f "$(var "$m" STATE)/server.json"
    echo "=== $(date -Is) starting $m" >>"$(var "$m" LOG)"
    RUST_LOG="${JBC_RUST_LOG:-info}" setsid nsenter --net="/run/netns/$(var "$m" NS)" -- \
        "$BIN/joblet" server --config "$(var "$m" CONFIG)" \
        </dev/null >>"$(var "$m" LOG)" 2>&1 9>&- &
    local pid=$!
    disown "$pid" 2>/dev/null || true
    setvar "$m" PID "$pid"
    setvar "$m" PID_START "$(starttime "$pid")"
    write_env
}

wait_node() { # NAME seconds: server.json names the daemon's pid; then its rnx config
    local m="$1" deadline=$((SECONDS + $2)) pid json state
    pid="$(var "$m" PID)"
    state="$(var "$m" STATE)"
    while :; do
        json="$(cat "$state/server.json" 2>/dev/null || true)"
        if [[ "$json" =~ \"pid\":\ *([0-9]+) ]] && [ "${BASH_REMATCH[1]}" = "$pid" ] && [ -f "$state/rnx-config.yml" ]; then
            break
        fi
        alive "$m" || {
            log_tail "$(var "$m" LOG)"
            die "joblet node $m exited during start-up (log: $(var "$m" LOG))"
        }
        if [ $SECONDS -ge $deadline ]; then
            log_tail "$(var "$m" LOG)"
            die "joblet node $m did not write $state/server.json within $2s (log: $(var "$m" LOG))"
        fi
        sleep 0.05
    done
    # The admin config without the local socket (so rnx goes over the
    # namespace's network and mutual TLS), at the node's own address.
    sed -e '/^[[:space:]]*socket:/d' \
        -e "s|^\([[:space:]]*address:\).*|\1 \"$(var "$m" ADDR)\"|" \
        "$state/rnx-config.yml" >"$(var "$m" RNX_CONFIG).tmp"
    chmod 600 "$(var "$m" RNX_CONFIG).tmp"
    mv "$(var "$m" RNX_CONFIG).tmp" "$(var "$m" RNX_CONFIG)"
}

start_member() {
    if [ "$(var "$1" KIND)" = etcd ]; then start_etcd "$1"; else start_node "$1"; fi
}

wait_member() { # NAME seconds
    if [ "$(var "$1" KIND)" = etcd ]; then wait_etcd "$2" "$1"; else wait_node "$1" "$2"; fi
}

stop_member() { # NAME: SIGTERM, SIGKILL after 15 s
    local m="$1" pid start
    alive "$m" || return 0
    pid="$(var "$m" PID)"
    start="$(var "$m" PID_START)"
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$start" 15; then
        say "$m did not stop within 15s of SIGTERM; SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" "$start" 10 || die "$m (pid $pid) survives SIGKILL"
    fi
}

kill_member() { # NAME
    local m="$1" pid start
    alive "$m" || {
        say "$m is not running"
        return 0
    }
    pid="$(var "$m" PID)"
    start="$(var "$m" PID_START)"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" "$start" 10 || die "$m (pid $pid) survives SIGKILL"
}

# Pids whose command line names NODE's job dirs (its shims: running, warm
# or orphaned by a killed daemon).
shim_pids() { # NODE
    local jobs p
    jobs="$(var "$1" STATE)/jobs/"
    # grep lists itself too (its own command line names the dir): keep only
    # pids that outlive it.
    for p in $(grep -lsF -- "$jobs" /proc/[0-9]*/cmdline | cut -d/ -f3); do
        [ -d "/proc/$p" ] && echo "$p"
    done
    return 0
}

# Process groups of NODE's jobs ({"pid": N, "start_time": T} in job.pid,
# signalled only while that process still has that start time).
job_pgids() { # NODE
    local f json pid start
    for f in "$(var "$1" STATE)"/jobs/*/job.pid; do
        [ -f "$f" ] || continue
        json="$(cat "$f" 2>/dev/null || true)"
        [[ "$json" =~ \"pid\":\ *([0-9]+) ]] || continue
        pid="${BASH_REMATCH[1]}"
        [[ "$json" =~ \"start_time\":\ *([0-9]+) ]] || continue
        start="${BASH_REMATCH[1]}"
        [ "$(starttime "$pid")" = "$start" ] && echo "$pid"
    done
    return 0
}

cgroup_mounts() {
    awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $5; break } }' /proc/self/mountinfo
}

remove_cgroup_base() { # base
    local mnt d procs p deadline
    for mnt in $(cgroup_mounts); do
        [ -d "$mnt/$1" ] || continue
        # Deepest first; every process still inside is killed.
        while IFS= read -r d; do
            deadline=$((SECONDS + 5))
            while [ -d "$d" ]; do
                if procs="$(cat "$d/cgroup.procs" 2>/dev/null)"; then
                    for p in $procs; do kill -KILL "$p" 2>/dev/null || true; done
                fi
                rmdir "$d" 2>/dev/null && break
                if [ $SECONDS -ge $deadline ]; then
                    say "cannot remove cgroup $d"
                    break
                fi
                sleep 0.05
            done
        done < <(find "$mnt/$1" -depth -type d 2>/dev/null)
    done
    rm -f "/run/joblet/cgroup-$1.lock"
}

# ------------------------------------------------------------- commands --

cmd_up() {
    local nodes=3 tag=dev gpus=a100 extra="" timeout=60
    JBC_LEASE_TTL=3s
    DIR="$DEFAULT_DIR"
    while [ $# -gt 0 ]; do
        case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --dir) DIR="$2"; shift 2 ;;
        --tag) tag="$2"; shift 2 ;;
        --gpus) gpus="$2"; shift 2 ;;
        --lease-ttl) JBC_LEASE_TTL="$2"; shift 2 ;;
        --extra-config) extra="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "up: unknown option '$1' (see $0 usage)" ;;
        esac
    done
    [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 50 ] || die "up: --nodes must be 1 to 50, not '$nodes'"
    [[ "$tag" =~ ^[a-z0-9][a-z0-9-]{0,23}$ ]] || die "up: --tag must be 1 to 24 of a-z, 0-9 and '-', starting with a letter or digit, not '$tag'"
    [[ "$timeout" =~ ^[0-9]+$ ]] || die "up: --timeout is whole seconds, not '$timeout'"
    [[ "$DIR" =~ ^[A-Za-z0-9_./+-]+$ ]] || die "up: --dir must be a path without spaces or quotes, not '$DIR'"
    case "$gpus" in
    none) ;;
    a100 | h100) gpus="$ROOT/fixtures/nvml-profiles/mock-nvml-config-$gpus.yaml" ;;
    *) [ -f "$gpus" ] || die "up: --gpus: no profile file '$gpus' (a100, h100, a file, or none)"
       gpus="$(cd "$(dirname "$gpus")" && pwd)/$(basename "$gpus")" ;;
    esac
    [ -z "$extra" ] || [ -f "$extra" ] || die "up: --extra-config: no file '$extra'"
    need_root up
    need_tools
    need_binaries "$gpus"
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd)"
    lock
    if [ -f "$DIR/cluster.env" ]; then
        die "a cluster is already recorded in $DIR; run \`$SELF down --dir $DIR\` first"
    fi
    if [ -f "$DIR/cluster.env.down" ]; then
        # A cluster that was taken down here before: start afresh.
        rm -rf "$DIR"/e[0-9]* "$DIR"/n[0-9]* "$DIR/cluster.env.down"
    elif [ -n "$(ls -A "$DIR" | grep -vx .lock)" ]; then
        die "$DIR is not empty and holds no cluster of this script; give an empty or new --dir"
    fi
    local ns
    for ns in hub e1 e2 e3 $(seq -f 'n%g' 1 "$nodes"); do
        [ ! -e "/run/netns/jbc-$tag-$ns" ] || die "namespace jbc-$tag-$ns exists already (another cluster with tag $tag?); use another --tag, or \`$SELF down --dir DIR\` for that cluster"
    done

    local t0 i m
    t0="$(now_ms)"
    JBC_TAG="$tag"
    JBC_DIR="$DIR"
    JBC_BIN="$BIN"
    JBC_ROOT="$ROOT"
    JBC_GPUS="$gpus"
    JBC_HUB_NS="jbc-$tag-hub"
    JBC_HUB_IP="$SUBNET.1"
    JBC_ETCD_MEMBERS="e1,e2,e3"
    JBC_ETCD_ENDPOINTS=""
    JBC_NODES=""
    for i in 1 2 3; do
        m="e$i"
        setvar "$m" KIND etcd
        setvar "$m" NS "jbc-$tag-$m"
        setvar "$m" IP "$SUBNET.$((10 + i))"
        setvar "$m" ADDR "$SUBNET.$((10 + i)):2379"
        setvar "$m" LOG "$DIR/$m/etcd.log"
        setvar "$m" DATA "$DIR/$m/data"
        JBC_ETCD_ENDPOINTS+="${JBC_ETCD_ENDPOINTS:+,}http://$SUBNET.$((10 + i)):2379"
    done
    for i in $(seq 1 "$nodes"); do
        m="n$i"
        JBC_NODES+="${JBC_NODES:+,}$m"
        setvar "$m" KIND node
        setvar "$m" NS "jbc-$tag-$m"
        setvar "$m" IP "$SUBNET.$((20 + i))"
        setvar "$m" ADDR "$SUBNET.$((20 + i)):$NODE_PORT"
        setvar "$m" LOG "$DIR/$m/daemon.log"
        setvar "$m" STATE "$DIR/$m/state"
        setvar "$m" CONFIG "$DIR/$m/joblet-config.yml"
        setvar "$m" RNX_CONFIG "$DIR/$m/rnx-config.yml"
        setvar "$m" CGROUP_BASE "jbc-$tag-$m"
        if [ "$gpus" != none ]; then
            setvar "$m" GPU_DEV "$DIR/$m/gpu/dev"
            setvar "$m" GPU_STATE "$DIR/$m/gpu/nvml-state.json"
        fi
    done
    # From here on, a failure tears down what was started.
    write_env
    UP_OK=0
    trap 'up_failed' EXIT
    trap 'exit 130' INT TERM

    # Network: a bridge in the hub; a veth from it into each member's namespace.
    ip netns add "$JBC_HUB_NS"
    ip -n "$JBC_HUB_NS" link set dev lo up
    ip -n "$JBC_HUB_NS" link add name br0 type bridge
    ip -n "$JBC_HUB_NS" addr add "$JBC_HUB_IP/24" dev br0
    ip -n "$JBC_HUB_NS" link set dev br0 up
    for m in $(members); do
        ns="$(var "$m" NS)"
        ip netns add "$ns"
        ip -n "$ns" link set dev lo up
        ip -n "$JBC_HUB_NS" link add name "$m" type veth peer name eth0 netns "$ns"
        ip -n "$JBC_HUB_NS" link set dev "$m" master br0
        ip -n "$JBC_HUB_NS" link set dev "$m" up
        ip -n "$ns" addr add "$(var "$m" IP)/24" dev eth0
        ip -n "$ns" link set dev eth0 up
    done

    # etcd.
    for m in ${JBC_ETCD_MEMBERS//,/ }; do
        mkdir -p "$DIR/$m"
        start_etcd "$m"
    done
    wait_etcd "$timeout" ${JBC_ETCD_MEMBERS//,/ }
    local t_etcd
    t_etcd="$(since "$t0")"

    # Node configs, device nodes, fake NVML state.
    for m in ${JBC_NODES//,/ }; do
        write_node_config "$m" "$extra"
    done
    # n1 first: it creates the cluster's CA, which every other node gets
    # before its first start (each then issues its own server and admin
    # certificates from it).
    start_node n1
    wait_node n1 "$timeout"
    local n1pki
    n1pki="$(var n1 STATE)/pki"
    for m in ${JBC_NODES//,/ }; do
        [ "$m" = n1 ] && continue
        install -d -m 0700 "$(var "$m" STATE)" "$(var "$m" STATE)/pki"
        install -m 0644 "$n1pki/ca.crt" "$(var "$m" STATE)/pki/ca.crt"
        install -m 0600 "$n1pki/ca.key" "$(var "$m" STATE)/pki/ca.key"
        start_node "$m"
    done
    for m in ${JBC_NODES//,/ }; do
        [ "$m" = n1 ] || wait_node "$m" "$timeout"
    done
    UP_OK=1
    trap - EXIT INT TERM
    write_env
    local took
    took="$(since "$t0")"
    cat <<EOF
Cluster $tag is up in ${took}s (etcd healthy after ${t_etcd}s): 3 etcd members, $nodes node(s), GPUs: $gpus
  state:      $DIR/cluster.env   (namespaces, IPs, pids, state dirs, configs)
  etcd:       $JBC_ETCD_ENDPOINTS
EOF
    for m in ${JBC_NODES//,/ }; do
        echo "  $m:         $(var "$m" ADDR)  ns $(var "$m" NS)  log $(var "$m" LOG)"
    done
    cat <<EOF
Use it:
  ip netns exec $(var n1 NS) $BIN/rnx --config $(var n1 RNX_CONFIG) node list
  $SELF rnx --dir $DIR n1 whoami
  $SELF etcdctl --dir $DIR get --prefix /joblet --keys-only
  $SELF status --dir $DIR
  $SELF down --dir $DIR
EOF
}

up_failed() {
    [ "${UP_OK:-0}" = 1 ] && return 0
    say "up failed; tearing down what was started (logs stay in $DIR)"
    do_down || true
}

# Appends KEY: VALUE to SECTION in FILE unless that section sets KEY
# already (block-style YAML: "SECTION:" at column 0, keys indented by two).
yaml_set() { # file section key value
    local tmp="$1.tmp"
    awk -v sec="$2" -v key="$3" -v val="$4" '
        function flush() { if (insec && !found) print "  " key ": " val; insec = 0 }
        /^[^ #][^:]*:/ {
            if (insec) flush()
            if ($0 ~ "^" sec ":[ \t]*(#.*)?$") { insec = 1; found = 0; seen = 1; print; next }
        }
        insec && $0 ~ "^  " key ":" { found = 1 }
        { print }
        END {
            if (insec) flush()
            if (!seen) { print sec ":"; print "  " key ": " val }
        }' "$1" >"$tmp"
    mv "$tmp" "$1"
}

write_node_config() { # NAME extra-file
    local m="$1" cfg eps="" e
    cfg="$(var "$m" CONFIG)"
    mkdir -p "$DIR/$m"
    if [ -n "$2" ]; then
        sed -e "s|{node}|$m|g" -e "s|{node_dir}|$DIR/$m|g" -e "s|{dir}|$DIR|g" "$2" >"$cfg"
        [ -z "$(tail -c1 "$cfg")" ] || echo >>"$cfg"
    else
        : >"$cfg"
    fi
    for e in ${JBC_ETCD_ENDPOINTS//,/ }; do eps+="${eps:+, }\"$e\""; done
    yaml_set "$cfg" server address "\"$(var "$m" ADDR)\""
    yaml_set "$cfg" server state_dir "\"$(var "$m" STATE)\""
    grep -q '^metrics:' "$cfg" || yaml_set "$cfg" metrics address '"127.0.0.1:0"'
    grep -q '^rest:' "$cfg" || yaml_set "$cfg" rest address '"127.0.0.1:0"'
    yaml_set "$cfg" cluster etcd "[$eps]"
    yaml_set "$cfg" cluster node_name "$m"
    yaml_set "$cfg" cluster advertise "\"$(var "$m" ADDR)\""
    yaml_set "$cfg" cluster scheduler true
    yaml_set "$cfg" cluster lease_ttl "$JBC_LEASE_TTL"
    yaml_set "$cfg" sandbox cgroup_base "$(var "$m" CGROUP_BASE)"
    if [ "$JBC_GPUS" != none ]; then
        local dev
        dev="$(var "$m" GPU_DEV)"
        mkdir -p "$dev"
        rm -f "$dev"/nvidia*
        mknod -m 0666 "$dev/nvidiactl" c 195 255
        mknod -m 0666 "$dev/nvidia-uvm" c 4000 0
        mknod -m 0666 "$dev/nvidia-uvm-tools" c 4000 1
        for i in 0 1 2 3 4 5 6 7; do mknod -m 0666 "$dev/nvidia$i" c 195 "$i"; done
        echo '{}' >"$(var "$m" GPU_STATE)"
        yaml_set "$cfg" gpu enabled true
        yaml_set "$cfg" gpu hwloc false
        yaml_set "$cfg" gpu health_interval 200ms
        yaml_set "$cfg" gpu scrub_timeout 1s
        yaml_set "$cfg" gpu simulate "\"$JBC_GPUS\""
        yaml_set "$cfg" gpu simulate_state "\"$(var "$m" GPU_STATE)\""
        yaml_set "$cfg" gpu dev_dir "\"$dev\""
    fi
}

# The teardown proper (cluster.env loaded, lock held).
do_down() {
    local m pid start p ns leftover=0
    # The recorded daemons and members: SIGCONT (a paused one) and SIGKILL.
    for m in $(members); do
        if alive "$m"; then
            pid="$(var "$m" PID)"
            kill -CONT "$pid" 2>/dev/null || true
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    # Every node's shims and jobs (a killed daemon leaves them running).
    for m in ${JBC_NODES//,/ }; do
        for p in $(job_pgids "$m"); do kill -KILL -- "-$p" 2>/dev/null || true; done
        for p in $(shim_pids "$m"); do kill -KILL "$p" 2>/dev/null || true; done
    done
    # Anything else still inside this cluster's namespaces.
    for ns in "$JBC_HUB_NS" $(for m in $(members); do var "$m" NS; done); do
        [ -e "/run/netns/$ns" ] || continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    done
    for m in $(members); do
        pid="$(var "$m" PID)"
        start="$(var "$m" PID_START)"
        [ -n "$pid" ] || continue
        wait_gone "$pid" "$start" 10 || {
            say "$m (pid $pid) survives SIGKILL"
            leftover=1
        }
    done
    local deadline=$((SECONDS + 10))
    for m in ${JBC_NODES//,/ }; do
        while [ -n "$(shim_pids "$m")" ] && [ $SECONDS -lt $deadline ]; do
            for p in $(shim_pids "$m"); do kill -KILL "$p" 2>/dev/null || true; done
            sleep 0.05
        done
    done
    # Mounts the nodes made below DIR (volumes, job work dirs), deepest first.
    local mnt
    while IFS= read -r mnt; do
        umount -l "$mnt" 2>/dev/null || say "cannot unmount $mnt"
    done < <(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2- | uniq)
    for m in ${JBC_NODES//,/ }; do
        remove_cgroup_base "$(var "$m" CGROUP_BASE)"
    done
    for ns in $(for m in $(members); do var "$m" NS; done) "$JBC_HUB_NS"; do
        [ -e "/run/netns/$ns" ] || continue
        ip netns del "$ns" 2>/dev/null || {
            say "cannot delete namespace $ns"
            leftover=1
        }
    done
    for m in $(members); do
        setvar "$m" PID ""
        setvar "$m" PID_START ""
    done
    write_env
    # Gone: `status` and the fault commands find no cluster, `down` has
    # nothing left to do, and `up` may use DIR again.
    [ $leftover = 1 ] || mv "$DIR/cluster.env" "$DIR/cluster.env.down"
    return $leftover
}

cmd_down() {
    local purge=0
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        --purge) purge=1; shift ;;
        *) die "down: unknown argument '$1'" ;;
        esac
    done
    need_root down
    if [ ! -f "$DIR/cluster.env" ]; then
        say "no cluster recorded in $DIR; nothing to do"
        [ $purge = 0 ] || [ ! -d "$DIR" ] || rm -rf "$DIR"
        return 0
    fi
    lock
    load_env
    local rc=0
    do_down || rc=$?
    if [ $purge = 1 ] && [ $rc = 0 ]; then
        exec 9>&-
        rm -rf "$DIR"
    fi
    [ $rc = 0 ] && say "cluster $JBC_TAG is down"
    return $rc
}

cmd_status() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        *) die "status: unknown argument '$1'" ;;
        esac
    done
    need_root status
    load_env
    echo "cluster $JBC_TAG in $DIR (hub $JBC_HUB_NS, $JBC_HUB_IP)"
    printf '%-5s %-5s %-20s %-18s %-8s %s\n' NAME KIND NAMESPACE ADDRESS PID STATE
    local m st link extra
    for m in $(members); do
        if alive "$m"; then
            case "$(pstate "$(var "$m" PID)")" in T | t) st=paused ;; *) st=running ;; esac
        elif [ -e "/run/netns/$(var "$m" NS)" ]; then
            st=dead
        else
            st=down
        fi
        extra=""
        if [ -e "/run/netns/$JBC_HUB_NS" ] && link="$(ip -n "$JBC_HUB_NS" -o link show dev "$m" 2>/dev/null)"; then
            link="${link#*<}"
            [[ ",${link%%>*}," == *,UP,* ]] || extra+=", partitioned"
        fi
        if [ "$(var "$m" KIND)" = etcd ] && [ $st = running ]; then
            if in_ns hub etcdctl --endpoints="http://$(var "$m" IP):2379" --dial-timeout=1s --command-timeout=2s endpoint health >/dev/null 2>&1; then
                extra+=", healthy"
            else
                extra+=", unhealthy"
            fi
        fi
        if [ "$(var "$m" KIND)" = node ] && [ -d "$(var "$m" STATE)" ]; then
            extra+=", $(shim_pids "$m" | wc -l) shim(s)"
        fi
        printf '%-5s %-5s %-20s %-18s %-8s %s\n' "$m" "$(var "$m" KIND)" "$(var "$m" NS)" "$(var "$m" ADDR)" "$(var "$m" PID)" "$st$extra"
    done
}

cmd_rnx() {
    local to=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        --to) to="$2"; shift 2 ;;
        *) break ;;
        esac
    done
    [ $# -ge 1 ] || die "rnx: which node? usage: $0 rnx [--dir DIR] [--to TARGET] NODE ARGS..."
    need_root rnx
    load_env
    local node="$1" cfg
    shift
    check_name "$node"
    [ "$(var "$node" KIND)" = node ] || die "rnx: $node is not a joblet node"
    cfg="$(var "$node" RNX_CONFIG)"
    [ -f "$cfg" ] || die "rnx: no $cfg (has $node started?)"
    if [ -n "$to" ]; then
        check_name "$to"
        [ "$(var "$to" KIND)" = node ] || die "rnx: --to $to is not a joblet node"
        local via="$DIR/$node/rnx-to-$to.yml"
        sed -e "s|^\([[:space:]]*address:\).*|\1 \"$(var "$to" ADDR)\"|" "$cfg" >"$via.tmp"
        chmod 600 "$via.tmp"
        mv "$via.tmp" "$via"
        cfg="$via"
    fi
    exec nsenter --net="/run/netns/$(var "$node" NS)" -- "$BIN/rnx" --config "$cfg" "$@"
}

cmd_etcdctl() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        *) break ;;
        esac
    done
    need_root etcdctl
    load_env
    exec nsenter --net="/run/netns/$JBC_HUB_NS" -- etcdctl --endpoints="$JBC_ETCD_ENDPOINTS" "$@"
}

cmd_exec() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "exec: usage: $0 exec [--dir DIR] NAME COMMAND..."
    need_root exec
    load_env
    local m="$1"
    shift
    [ "$m" = hub ] || check_name "$m"
    if [ "$m" = hub ]; then
        exec nsenter --net="/run/netns/$JBC_HUB_NS" -- "$@"
    fi
    exec nsenter --net="/run/netns/$(var "$m" NS)" -- "$@"
}

# kill / kill-shims / pause / resume / partition / heal / restart NAME
cmd_fault() {
    local what="$1"
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        *) break ;;
        esac
    done
    [ $# -eq 1 ] || die "$what: usage: $0 $what [--dir DIR] NAME"
    need_root "$what"
    load_env
    local m="$1"
    check_name "$m"
    lock
    load_env
    case "$what" in
    kill) kill_member "$m" ;;
    kill-shims)
        [ "$(var "$m" KIND)" = node ] || die "kill-shims: $m is not a joblet node"
        local p n=0
        for p in $(shim_pids "$m"); do
            kill -KILL "$p" 2>/dev/null && n=$((n + 1))
        done
        say "killed $n shim(s) of $m"
        ;;
    pause | resume)
        alive "$m" || die "$what: $m is not running"
        if [ "$what" = pause ]; then kill -STOP "$(var "$m" PID)"; else kill -CONT "$(var "$m" PID)"; fi
        ;;
    partition) ip -n "$JBC_HUB_NS" link set dev "$m" down ;;
    heal) ip -n "$JBC_HUB_NS" link set dev "$m" up ;;
    restart)
        stop_member "$m"
        start_member "$m"
        wait_member "$m" "${JBC_TIMEOUT:-60}"
        ;;
    esac
}

main() {
    DIR="$DEFAULT_DIR"
    [ $# -ge 1 ] || {
        usage >&2
        exit 2
    }
    local cmd="$1"
    shift
    case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    rnx) cmd_rnx "$@" ;;
    etcdctl) cmd_etcdctl "$@" ;;
    exec) cmd_exec "$@" ;;
    kill | kill-shims | pause | resume | partition | heal | restart) cmd_fault "$cmd" "$@" ;;
    usage | help | -h | --help) usage ;;
    *)
        usage >&2
        die "unknown command '$cmd'"
        ;;
    esac
}

main "$@"
