//! A stand-in for `joblet sandbox-init` in tests: a binary whose `main`
//! is only the sandbox init.

fn main() {
    joblet_sandbox::init::run_init()
}
