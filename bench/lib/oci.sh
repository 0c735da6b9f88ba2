# shellcheck shell=bash
# shellcheck disable=SC2016  # the sh -c script is single-quoted on purpose
# Pieces shared by bench/isolation-peers.sh, bench/gpu-start.sh,
# bench/start-latency.sh and bench/daemon-ab.sh: the OCI runtimes, their
# packages and a joblet daemon, with simulated GPUs (sourced; the first three
# time `crun run` of the same bundle, so they build it the same way). Needs: UNIFIED (the hybrid layout's cgroup2 mount point), a
# `log` function, python3.

# static_busybox: prints the path of a static busybox, or fails. The bundle's
# rootfs is just this one file plus an applet symlink.
static_busybox() {
  local bb
  for bb in /usr/bin/busybox /bin/busybox; do
    # ldd fails on a static executable ("not a dynamic executable").
    if [ -x "$bb" ] && ! ldd "$bb" >/dev/null 2>&1; then echo "$bb"; return 0; fi
  done
  return 1
}

# Hybrid = v1 hierarchies under a tmpfs /sys/fs/cgroup plus cgroup2 at
# $UNIFIED; crun 1.8 refuses that layout and needs the cgroup2 mount out of
# its sight.
HYBRID=0
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] && mountpoint -q "$UNIFIED" 2>/dev/null; then
  HYBRID=1
fi

# crun_ns CMD...: runs CMD where crun accepts the cgroup layout (on a hybrid
# host inside a private mount namespace with $UNIFIED unmounted; the host's
# mounts are not touched).
crun_ns() {
  if [ "$HYBRID" = 1 ]; then
    unshare -m --propagation private sh -c 'umount "$0" && exec "$@"' "$UNIFIED" "$@"
  else
    "$@"
  fi
}

# make_bundle DIR SPEC_TOOL: a minimal OCI bundle in DIR running /bin/true
# from a read-only static-busybox rootfs, no terminal, from SPEC_TOOL's
# (crun or runc) default spec. On failure prints why and returns 1.
make_bundle() {
  local dir="$1" tool="$2" bb
  if ! bb="$(static_busybox)"; then
    echo "no static busybox (install busybox-static)"
    return 1
  fi
  mkdir -p "$dir/rootfs/bin"
  cp "$bb" "$dir/rootfs/bin/busybox"
  ln -sf busybox "$dir/rootfs/bin/true"
  if ! (cd "$dir" && "$tool" spec >/dev/null 2>&1); then
    echo "\`$tool spec\` failed"
    return 1
  fi
  python3 - "$dir/config.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    spec = json.load(f)
spec["process"]["terminal"] = False
spec["process"]["args"] = ["/bin/true"]
spec["root"] = {"path": "rootfs", "readonly": True}
with open(path, "w") as f:
    json.dump(spec, f, indent=2)
PY
}

# install_missing BIN:PKG...: apt-get installs the package of every BIN
# that is not on PATH, and busybox-static when there is no static busybox
# (`apt-get update` only if the install fails). Never removes a package
# (--no-remove: busybox-static conflicts with the dynamic busybox); what it
# cannot install is reported through the caller's `log`, and the rows that
# need it then show as failed.
install_missing() {
  local need=() bin_pkg
  for bin_pkg in "$@"; do
    command -v "${bin_pkg%%:*}" >/dev/null 2>&1 || need+=("${bin_pkg#*:}")
  done
  static_busybox >/dev/null || need+=(busybox-static)
  [ "${#need[@]}" -gt 0 ] || return 0
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends --no-remove "${need[@]}" >&2; then
    log "apt-get install failed; running apt-get update once and retrying"
    { apt-get update -q >&2 &&
      apt-get install -y -q --no-install-recommends --no-remove "${need[@]}" >&2; } ||
      log "WARNING: could not install ${need[*]}; the rows that need them will show as failed"
  fi
}

# start_joblet_daemon BIN CONFIG STATE_DIR LOG: starts `BIN/joblet server
# --config CONFIG` (its output to LOG) and waits (30 s at most) until
# STATE_DIR/server.json names it. Sets DAEMON_PID (also when it fails, for
# the caller's cleanup); returns 1 if the daemon did not come up.
start_joblet_daemon() {
  local bin="$1" config="$2" state="$3" logf="$4"
  "$bin/joblet" server --config "$config" </dev/null >"$logf" 2>&1 &
  DAEMON_PID=$!
  for _ in $(seq 600); do
    kill -0 "$DAEMON_PID" 2>/dev/null || return 1
    if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("pid") != int(sys.argv[2]))' \
      "$state/server.json" "$DAEMON_PID" 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  return 1
}

# make_sim_gpu_nodes DEVDIR COUNT: the device dir of a daemon with COUNT
# simulated GPUs (gpu.dev_dir): nvidiactl (c 195:255), nvidia-uvm (c 4000:0,
# a major no driver owns here, standing in for the one /proc/devices would
# give) and nvidia0..nvidia<COUNT-1> (c 195 N).
make_sim_gpu_nodes() {
  local n
  mkdir -p "$1"
  mknod -m 666 "$1/nvidiactl" c 195 255
  mknod -m 666 "$1/nvidia-uvm" c 4000 0
  for ((n = 0; n < $2; n++)); do
    mknod -m 666 "$1/nvidia$n" c 195 "$n"
  done
}

# write_sim_gpu_config CONFIG STATE_DIR CGROUP_BASE PROFILE DEVDIR: a daemon
# config for start-latency benches: local address, sandbox on, GPUs
# simulated from the mock-NVML PROFILE with nodes in DEVDIR.
write_sim_gpu_config() {
  cat >"$1" <<YAML
# Written by joblet's bench scripts; removed with their scratch dir.
server:
  address: "127.0.0.1:0"
  state_dir: "$2"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
jobs:
  max_running: 4
sandbox:
  enabled: true
  cgroup_base: "$3"
gpu:
  enabled: true
  simulate: "$4"
  dev_dir: "$5"
YAML
}

# stop_joblet_daemon: SIGTERM to DAEMON_PID (if it runs), SIGKILL after
# 10 s, reaped; clears DAEMON_PID.
stop_joblet_daemon() {
  if [ -n "${DAEMON_PID:-}" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    log "stopping joblet daemon (pid $DAEMON_PID)"
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
  DAEMON_PID=""
}

# remove_cgroups_named NAME: once the cgroups below NAME are gone (a
# stopped daemon's warm shims remove their own; 5 s at most), rmdir NAME's
# tree in every hierarchy; a busy one is left in place, with a warning.
remove_cgroups_named() {
  local d
  for _ in $(seq 50); do
    [ -z "$(find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*/$1/*" 2>/dev/null | head -n 1)" ] && break
    sleep 0.1
  done
  for d in /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$d" ] || log "WARNING: cgroup $d not empty, left in place"
  done
}

# delete_containers PREFIX: deletes the crun and runc containers whose id
# starts with PREFIX (`run` without --detach deletes its container when it
# exits; this catches runs killed half-way), then the empty cgroups named
# after them (runc puts them under each hierarchy, relative to its own
# cgroup; rmdir never removes a busy one).
delete_containers() {
  local tool id
  for tool in crun runc; do
    command -v "$tool" >/dev/null 2>&1 || continue
    for id in $("$tool" list -q 2>/dev/null | grep "^$1" || true); do
      if [ "$tool" = crun ]; then crun_ns crun delete -f "$id"; else runc delete -f "$id"; fi \
        >/dev/null 2>&1 || log "WARNING: $tool delete -f $id failed"
    done
  done
  find /sys/fs/cgroup -mindepth 1 -maxdepth 8 -depth -type d -name "${1}*" \
    -exec rmdir {} \; 2>/dev/null || true
}

# bwrap_sandbox_args: sets BWRAP_ARGS to the bubblewrap peer's sandbox:
# every namespace, a read-only /usr, and the top-level dirs recreated as
# they are on the host (symlinks on a merged-/usr system, /bin -> usr/bin;
# read-only binds otherwise), /proc, /dev and a /tmp tmpfs.
bwrap_sandbox_args() {
  local d
  BWRAP_ARGS=(--unshare-all --ro-bind /usr /usr)
  for d in bin sbin lib lib32 lib64 libx32; do
    if [ -L "/$d" ]; then
      BWRAP_ARGS+=(--symlink "$(readlink "/$d")" "/$d")
    elif [ -d "/$d" ]; then
      BWRAP_ARGS+=(--ro-bind "/$d" "/$d")
    fi
  done
  BWRAP_ARGS+=(--proc /proc --dev /dev --tmpfs /tmp)
}
