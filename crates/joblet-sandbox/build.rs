//! Links `joblet-shim` for a fast start: it is started for every job (and
//! a job without a warm sandbox starts it a second time, as the sandbox
//! init), so its process start is part of each job's CPU cost, and of a
//! waiting job's latency when the node starts jobs back to back. The
//! settings and what they save are described in
//! `build-support/fast_start.rs`; they apply to that binary only, not to
//! this package's test binaries. The daemon (`joblet`), which starts once
//! per node and loads NVML with `dlopen`, keeps the target's defaults.

include!("../../build-support/fast_start.rs");

fn main() {
    link_for_fast_start("joblet-shim");
}
