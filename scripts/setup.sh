#!/usr/bin/env bash
# System packages the build needs beyond the Rust toolchain: hwloc (NUMA and
# PCI topology, through the hwlocality crate) and libudev (which hwloc's
# Debian build links), and glibc's development files (every link needs its
# start files; `rnx` and `joblet-shim` link its static archives, see
# build-support/fast_start.rs). And the tools the node uses: mmdebstrap
# (a runtime's Debian root), e2fsprogs (mkfs.ext4 for filesystem volumes),
# etcd-server and etcd-client (cluster mode's store; the cluster tests and
# scripts/dev-cluster.sh start their own members), iproute2 (the cluster
# tests' network namespaces), prometheus (a real server and promtool scrape
# the node's /metrics in the metrics tests), chromium (the web console's
# browser tests, driven by Playwright), curl (tests fetch a node's /metrics inside its
# network namespace), runc, crun and runsc (gVisor) (the OCI executors a
# node offers; their tests and bench/executors.sh), podman and
# busybox-static (the CDI test runs a container with the node's generated
# CDI spec), tmux (the interactive-job tests type into a real terminal)
# and uv (a runtime's Python packages; from PyPI, into its own venv under
# /usr/local/lib/joblet-uv, linked as /usr/local/bin/uv, when no uv is on
# PATH). Installs them when missing; does nothing when they are there.
# Called by demo.sh and test.sh, so a fresh Debian/Ubuntu machine needs no
# manual step.
set -euo pipefail
need=()
for pkg in libhwloc-dev libudev-dev pkg-config libc6-dev mmdebstrap e2fsprogs python3-venv etcd-server etcd-client iproute2 prometheus chromium curl runc crun runsc podman busybox-static tmux; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if [ ${#need[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "setup.sh: missing ${need[*]} and no apt-get here: install hwloc (>= 2.0) development files, libudev, glibc's static libraries (libc.a), mmdebstrap, e2fsprogs, python3-venv, etcd (3.4 or later), iproute2, prometheus (2.x, for promtool), chromium, curl, runc, crun, runsc (gVisor), podman and busybox (static) with your package manager" >&2
        exit 1
    fi
    echo "setup.sh: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! command -v uv >/dev/null; then
    echo "setup.sh: installing uv (PyPI) into /usr/local/lib/joblet-uv"
    $SUDO python3 -m venv /usr/local/lib/joblet-uv
    $SUDO /usr/local/lib/joblet-uv/bin/pip install --quiet uv
    $SUDO ln -sf /usr/local/lib/joblet-uv/bin/uv /usr/local/bin/uv
fi
# The Python test tools (NVML clients, schemathesis, Playwright).
"$(dirname "$0")/pytools.sh"
