//! CDI (Container Device Interface) specs: the files that tell a
//! container runtime (podman, containerd, CRI-O, and Joblet's own OCI
//! runner) what a device named `vendor.com/class=name` means for a
//! container: device nodes, mounts, environment, hooks.
//!
//! - [`name`]: kinds and qualified device names ([`CdiDevice`], what a
//!   `--device` flag takes);
//! - [`spec`]: the file as serde types, read from YAML or JSON;
//! - [`version`]: the lowest `cdiVersion` a spec's fields need;
//! - [`validate`]: whether a spec may be used;
//! - [`generate`]: a spec for a node's GPUs, in `nvidia-ctk cdi
//!   generate`'s shape (without its hooks);
//! - [`registry`]: the specs under `/etc/cdi` and `/var/run/cdi`, and the
//!   edits of the devices a container asks for;
//! - [`apply`]: those edits applied to an OCI runtime spec, reading the
//!   host's device nodes at that moment (fail closed).
//!
//! Pure except where named: [`registry`] reads the spec directories,
//! [`apply::HostNodes`] stats device nodes. No async, no daemon.

pub mod apply;
pub mod generate;
pub mod name;
pub mod registry;
pub mod spec;
pub mod validate;
pub mod version;

pub use apply::{apply, ApplyError, HostNodes, NodeInfo, NodeKind, NodeStat};
pub use generate::{generate, FileMount, Gpu, GpuNode, MigSlice, Node};
pub use name::{CdiDevice, Kind, NameError};
pub use registry::{Registry, RegistryError, DEFAULT_SPEC_DIRS};
pub use spec::{ContainerEdits, Device, DeviceNode, Format, Hook, Mount, Spec, SpecError};
pub use validate::validate;
pub use version::{minimum_version, CdiVersion, Required};
