#!/usr/bin/env bash
# Benchmarks for BENCHMARKS.md: builds release binaries, brings up a
# single-node Slurm (bench/slurm-up.sh) so it is measured in the same run,
# measures bwrap / crun / runc (bench/isolation-peers.sh), and prints
# markdown tables. Run it as root on an otherwise idle machine.
#   bench/run.sh [--no-slurm]
#   BENCH_RUNS (default 100)        latency runs per command
#   BENCH_JOBS (default 1000)       jobs per joblet throughput test
#   BENCH_SLURM_JOBS (default 200)  sbatch jobs (Slurm drains ~2 jobs/s here)
# Slurm runs with batch_sched_delay=0 (its default 3 s delay would make it
# ~2.5x slower still); override with SLURM_BENCH_SCHED_PARAMS.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p joblet -p joblet-sandbox -p rnx -p joblet-e2e --bins
if [ "${1:-}" != "--no-slurm" ]; then
  export SLURM_BENCH_SCHED_PARAMS="${SLURM_BENCH_SCHED_PARAMS-batch_sched_delay=0}"
  out=$(bench/slurm-up.sh) || { echo "bench: Slurm did not come up (see above); use --no-slurm to skip it" >&2; exit 1; }
  eval "$(grep '^export ' <<<"$out")"
  trap 'bench/slurm-down.sh' EXIT
fi
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r), $(date -u +%F); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
./target/release/joblet-bench
echo
echo "### Isolation peers (same run; compare with the rnx row above, which runs the full sandbox)"
echo
bench/isolation-peers.sh
