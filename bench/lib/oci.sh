# shellcheck shell=bash
# shellcheck disable=SC2016  # the sh -c script is single-quoted on purpose
# OCI-runtime pieces shared by bench/isolation-peers.sh and bench/gpu-start.sh
# (sourced; both time `crun run` of the same bundle, so they build it the same
# way). Needs: UNIFIED (the hybrid layout's cgroup2 mount point), python3.

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
