//! Errors of [`crate::exec`]: what a user or an administrator did that a
//! GPU job cannot run with. Every message names the variable, flag or
//! file at fault, the accepted form, and what to do.

use std::path::PathBuf;

/// Why a GPU job's execution setup cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// `NVIDIA_DRIVER_CAPABILITIES` (or `gpu.driver_capabilities`) holds
    /// an unknown word.
    #[error(
        "NVIDIA_DRIVER_CAPABILITIES: unknown capability `{value}`; accepted: a comma-separated \
         list of {accepted}, or `all` (empty means the default `utility,compute`)"
    )]
    InvalidCapability {
        value: String,
        /// The accepted words, comma-separated.
        accepted: String,
    },

    /// `gpu.sharing` holds an unknown mode.
    #[error("gpu.sharing: unknown mode `{value}`; accepted: exclusive, shared, mps")]
    InvalidSharingMode { value: String },

    /// The ld.so cache could not be read or is not what ldconfig writes.
    #[error(
        "cannot use the ld.so cache {path}: {reason}; regenerate it with `ldconfig` (driver \
         libraries are found through it)"
    )]
    LdCache { path: PathBuf, reason: String },

    /// A user-given `NVIDIA_VISIBLE_DEVICES` is not in an accepted form.
    #[error(
        "NVIDIA_VISIBLE_DEVICES=`{value}`: {reason}; accepted: `all`, `none`, `void`, or a \
         comma-separated list of the job's own GPU indices (0, 1, ...) or GPU UUIDs \
         (GPU-..., MIG-...)"
    )]
    InvalidVisibleDevices { value: String, reason: String },

    /// A user-given `NVIDIA_VISIBLE_DEVICES` names a GPU the job does not
    /// hold.
    #[error(
        "NVIDIA_VISIBLE_DEVICES asks for {requested}, but this job holds GPUs [{held}]; it can \
         only narrow that set, never widen it (ask for more GPUs with --gpu)"
    )]
    OutsideAllocation {
        /// The selector at fault, e.g. `GPU 3` or `GPU-1234...`.
        requested: String,
        /// The job's GPUs as `index: uuid`, comma-separated.
        held: String,
    },

    /// `--cuda=VERSION` is not a version.
    #[error(
        "CUDA libraries not accessible: --cuda=`{value}` is not a CUDA version; use a form \
         like 12.2 or 12.2.140"
    )]
    InvalidCudaVersion { value: String },

    /// The CUDA version asked for needs a newer driver than the node has.
    #[error(
        "CUDA libraries not accessible: CUDA {needed} needs a driver that supports CUDA \
         {needed}, but this node's driver supports up to {driver_max}; ask for \
         --cuda={driver_max} or older, or upgrade the driver"
    )]
    CudaDriverTooOld {
        /// `major.minor` of the toolkit asked for.
        needed: String,
        /// `major.minor` the driver supports at most.
        driver_max: String,
    },

    /// The CUDA version asked for is not installed on the node.
    #[error(
        "CUDA libraries not accessible: CUDA {requested} is not installed on this node \
         (installed: {installed}); ask for one of the installed versions, or have the \
         administrator install it and list its directory in gpu.cuda_paths"
    )]
    CudaNotInstalled {
        requested: String,
        /// `version at path`, comma-separated, or `none`.
        installed: String,
    },
}
