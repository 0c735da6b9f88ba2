#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls exactly this).
# Builds every crate and binary, checks formatting and lints, runs every test.
# Needs only the Rust toolchain: protoc comes from a crate, SQLite is bundled.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (deny warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== build binaries (the end-to-end tests drive target/debug/{joblet,rnx})"
cargo build --workspace --bins --locked
echo "== cargo test"
cargo test --workspace --locked -- --test-threads="${TEST_THREADS:-4}"
