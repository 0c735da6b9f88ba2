#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls exactly this).
# Builds every crate and binary, checks formatting and lints, runs every test.
# Needs the Rust toolchain; scripts/setup.sh installs hwloc's development
# files with apt if they are missing. protoc comes from a crate, SQLite is
# bundled.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A clean run writes ~4.3 GB under target/; say so up front rather than
# fail half-way with "No space left on device".
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_dir"
free_kb=$(df -Pk "$target_dir" | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt $((5 * 1024 * 1024)) ]; then
    echo "warning: only $((free_kb / 1024)) MB free for $target_dir; a clean build and test run needs ~4.3 GB (free space, or 'cargo clean' an old target)" >&2
fi
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (deny warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== build (the end-to-end tests drive target/debug/{joblet,rnx} and the fake NVML target/debug/libnvidia_ml.so)"
cargo build --workspace --locked
echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast -- --test-threads="${TEST_THREADS:-4}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole run (cargo's last line is often a doc-test
# binary with nothing in it).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i; if ($(i+1) ~ /^ignored;?$/) g += $i } }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
