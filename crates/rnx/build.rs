//! Links `rnx` for a fast start: a short-lived client whose every command
//! pays its process start. The settings and what they save are described
//! in `build-support/fast_start.rs`.

include!("../../build-support/fast_start.rs");

fn main() {
    link_for_fast_start("rnx");
}
