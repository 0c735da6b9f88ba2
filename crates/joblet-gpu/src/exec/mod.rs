//! What a GPU job gets at execution time, as pure decisions the daemon
//! carries out: which driver capabilities ([`caps`]), which driver files
//! to bind-mount, found through glibc's ld.so cache ([`ld_cache`],
//! [`driver_files`]), which of its GPUs a user-given
//! `NVIDIA_VISIBLE_DEVICES` leaves visible ([`visible`]), how jobs share a
//! GPU ([`sharing`]), the MIG capability nodes of a slice ([`mig`]) and the
//! environment inside the job ([`env`](mod@env)). The
//! CUDA toolkit choice is [`crate::cuda::select_toolkit`].
//!
//! Nothing here mounts, forks or talks to the daemon; the filesystem is
//! only read (the cache file, symlinks, binary directories, the MIG
//! minors file).

pub mod caps;
pub mod driver_files;
pub mod env;
pub mod error;
pub mod ld_cache;
pub mod mig;
pub mod sharing;
pub mod visible;

pub use caps::{DriverCapabilities, DriverCapability};
pub use driver_files::{all_driver_files, find_driver_files, DriverFiles, DriverLib};
pub use env::{gpu_env, GpuEnv, GpuEnvInput};
pub use error::ExecError;
pub use ld_cache::{parse_ld_cache, read_ld_cache, LdCacheEntry, DEFAULT_LD_CACHE};
pub use mig::{cap_node, MigCapError, MigMinors, MigRef};
pub use sharing::{MpsSettings, SharingMode};
pub use visible::{parse_visible, resolve_visible, JobGpu, Selector, VisibleRequest};
