#!/usr/bin/env bash
# System packages the build needs beyond the Rust toolchain: hwloc (NUMA and
# PCI topology, through the hwlocality crate) and libudev (which hwloc's
# Debian build links), and glibc's development files (every link needs its
# start files; `rnx` and `joblet-shim` link its static archives, see
# build-support/fast_start.rs). Installs them with apt when missing; does
# nothing when they are there. Called by demo.sh and test.sh, so a fresh Debian/Ubuntu
# machine needs no manual step.
set -euo pipefail
need=()
for pkg in libhwloc-dev libudev-dev pkg-config libc6-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
    echo "setup.sh: missing ${need[*]} and no apt-get here: install hwloc (>= 2.0) development files, libudev and glibc's static libraries (libc.a) with your package manager" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "setup.sh: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
