//! The node's executors (`executors:` in the config, see
//! `docs/executors.md`): the native sandbox and the OCI runtimes this node
//! offers, found and probed once at start-up, as the
//! [`ExecutorCatalog`] admission resolves jobs against and the settings a
//! job's shim needs to run it under its runtime ([`NodeExecutors::oci`]).
//!
//! What each runtime can do is asked of the binary, never assumed: its
//! version answers, runsc's flags, platforms and nvproxy's supported
//! drivers (`joblet_oci::runsc`). A GPU job is refused on a runsc that
//! cannot give it its GPU, naming why; it never runs without it.

mod probe;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use joblet_core::executor::{ExecutorCaps, ExecutorCatalog, ExecutorInfo, ExecutorKind, NATIVE};
use joblet_core::{JobId, JobSpec, Network};
use joblet_oci::runsc::{self, RunscFeatures};
use joblet_oci::runtime::{Cli, Runtime};
use joblet_sandbox::oci::OciSettings;

use crate::config::ExecutorsConfig;

/// One OCI runtime of the node.
#[derive(Debug, Clone)]
pub struct OciExecutor {
    pub kind: ExecutorKind,
    pub binary: PathBuf,
    /// `--root`: `executors.state_dir/NAME`.
    pub root: PathBuf,
    /// runsc: what the binary supports, and the platform chosen.
    pub runsc: Option<(RunscFeatures, String)>,
    pub debug_log_dir: Option<PathBuf>,
}

/// The node's executors.
#[derive(Debug, Clone)]
pub struct NodeExecutors {
    pub catalog: Arc<ExecutorCatalog>,
    oci: BTreeMap<String, OciExecutor>,
    /// The host's NVIDIA driver (runsc's nvproxy checks it).
    host_driver: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecutorSetupError {
    #[error("executors.oci.{name}: {problem}")]
    Entry { name: String, problem: String },
    #[error("executors.default: {0}")]
    Default(String),
    #[error("executors.native.users: {0}")]
    Native(String),
}

/// Why a job cannot start on its executor (checked at admission too; the
/// node may have changed since).
#[derive(Debug, thiserror::Error)]
pub enum ExecutorStartError {
    #[error("executor {0:?} is not offered on this node any more")]
    Gone(String),
    #[error("executor {name:?} cannot run this GPU job: {reason}")]
    Gpu { name: String, reason: String },
    #[error("--device: {0}")]
    Cdi(String),
}

fn cli(kind: ExecutorKind) -> Cli {
    match kind {
        ExecutorKind::Crun => Cli::Crun,
        ExecutorKind::Runsc => Cli::Runsc,
        _ => Cli::Runc,
    }
}

impl NodeExecutors {
    /// Only the native sandbox (a node without one runs jobs unisolated,
    /// and offers no OCI runtime: they need root and cgroups as it does).
    pub fn native_only(cfg: &ExecutorsConfig) -> NodeExecutors {
        let mut catalog = ExecutorCatalog::default();
        catalog.executors[0].users = cfg.native.users.clone();
        // Without the sandbox no GPU job runs (its devices could not be
        // isolated).
        catalog.executors[0].caps.gpu = false;
        catalog.executors[0].gpu_unavailable =
            Some("this node runs jobs without the sandbox, so no GPU jobs".into());
        NodeExecutors {
            catalog: Arc::new(catalog),
            oci: BTreeMap::new(),
            host_driver: None,
        }
    }

    /// The executors of a node: with a sandbox, those [`Self::prepare`]
    /// finds; without one only `native` (jobs run unisolated), and a
    /// config that lists OCI runtimes or another default is refused.
    pub fn for_node(
        cfg: &ExecutorsConfig,
        sandbox: bool,
        gpus: bool,
        host_driver: Option<String>,
    ) -> Result<NodeExecutors, ExecutorSetupError> {
        if sandbox {
            return NodeExecutors::prepare(cfg, gpus, host_driver);
        }
        if let Some(name) = cfg.oci.keys().next() {
            return Err(ExecutorSetupError::Entry {
                name: name.clone(),
                problem: "OCI executors run jobs with the node's sandbox settings (cgroups, devices, user); set sandbox.enabled: true, or remove executors.oci".into(),
            });
        }
        if cfg.default != NATIVE {
            return Err(ExecutorSetupError::Default(format!(
                "{:?} needs the sandbox (sandbox.enabled: true); without it only native runs jobs",
                cfg.default
            )));
        }
        Ok(NodeExecutors::native_only(cfg))
    }

    /// Finds and probes the runtimes `cfg` names (each must answer) and,
    /// with `detect`, those on `PATH` (offered when they answer).
    /// `gpus`: the node runs GPU jobs; `host_driver`: its NVIDIA driver.
    pub fn prepare(
        cfg: &ExecutorsConfig,
        gpus: bool,
        host_driver: Option<String>,
    ) -> Result<NodeExecutors, ExecutorSetupError> {
        let mut infos = vec![ExecutorInfo {
            name: NATIVE.into(),
            kind: ExecutorKind::Native,
            binary: None,
            version: None,
            caps: ExecutorCaps {
                gpu: gpus,
                ..ExecutorCaps::NATIVE
            },
            gpu_unavailable: (!gpus).then(|| "this node runs no GPU jobs".to_string()),
            users: cfg.native.users.clone(),
        }];
        let mut oci = BTreeMap::new();
        let mut entries: Vec<(String, crate::config::OciExecutorConfig, bool)> = cfg
            .oci
            .iter()
            .map(|(n, e)| (n.clone(), e.clone(), true))
            .collect();
        if cfg.detect {
            for kind in [ExecutorKind::Runc, ExecutorKind::Crun, ExecutorKind::Runsc] {
                let name = kind.as_str();
                let taken = cfg
                    .oci
                    .iter()
                    .any(|(n, e)| n == name || e.kind(n) == Some(kind));
                if !taken && probe::on_path(name).is_some() {
                    entries.push((name.to_string(), Default::default(), false));
                }
            }
        }
        for (name, entry, required) in entries {
            let fail = |problem: String| ExecutorSetupError::Entry {
                name: name.clone(),
                problem,
            };
            let kind = entry.kind(&name).ok_or_else(|| {
                fail("not a runtime joblet drives; expected runc, crun or runsc".into())
            })?;
            let found = match (&entry.binary, probe::on_path(kind.as_str())) {
                (Some(b), _) => Ok(b.clone()),
                (None, Some(b)) => Ok(b),
                (None, None) => Err(format!(
                    "{kind} is not on PATH; install it (Debian: apt-get install {kind}) or give binary:"
                )),
            };
            let probed = found.and_then(|binary| {
                let version = probe::version(&binary)?;
                let runsc = match kind {
                    ExecutorKind::Runsc => {
                        let features = RunscFeatures::probe(&binary).map_err(|e| e.to_string())?;
                        let platform = runsc::choose_platform(&features, entry.platform.as_deref())
                            .map_err(|e| format!("platform: {e}"))?;
                        Some((features, platform))
                    }
                    _ => None,
                };
                Ok((binary, version, runsc))
            });
            let (binary, version, runsc) = match probed {
                Ok(p) => p,
                Err(problem) if required => return Err(fail(problem)),
                Err(problem) => {
                    tracing::warn!(executor = %name, %problem, "a runtime on PATH does not answer; not offered");
                    continue;
                }
            };
            let (caps, gpu_unavailable) =
                caps_of(kind, runsc.as_ref(), gpus, host_driver.as_deref());
            tracing::info!(executor = %name, %kind, binary = %binary.display(), %version, caps = ?caps.names(), "executor offered");
            infos.push(ExecutorInfo {
                name: name.clone(),
                kind,
                binary: Some(binary.display().to_string()),
                version: Some(version),
                caps,
                gpu_unavailable,
                users: entry.users.clone(),
            });
            oci.insert(
                name.clone(),
                OciExecutor {
                    kind,
                    binary,
                    root: cfg.state_dir.join(&name),
                    runsc,
                    debug_log_dir: entry.debug_log_dir.clone(),
                },
            );
        }
        let catalog = ExecutorCatalog {
            default: cfg.default.clone(),
            executors: infos,
        };
        if catalog.get(&cfg.default).is_none() {
            let offered: Vec<&str> = catalog.executors.iter().map(|e| e.name.as_str()).collect();
            return Err(ExecutorSetupError::Default(format!(
                "{:?} is not offered on this node (it offers {}); install it, list it under executors.oci, or pick one of those",
                cfg.default,
                offered.join(", ")
            )));
        }
        Ok(NodeExecutors {
            catalog: Arc::new(catalog),
            oci,
            host_driver,
        })
    }

    /// The OCI settings of job `id` on executor `name` (`None` for the
    /// native sandbox); `bundle` is where its bundle goes.
    pub fn oci(
        &self,
        name: &str,
        id: &JobId,
        spec: &JobSpec,
        bundle: &Path,
        driver_capabilities: Option<&str>,
    ) -> Result<Option<OciSettings>, ExecutorStartError> {
        if name == NATIVE {
            return Ok(None);
        }
        let Some(e) = self.oci.get(name) else {
            return Err(ExecutorStartError::Gone(name.into()));
        };
        let mut global = Vec::new();
        if let Some((features, platform)) = &e.runsc {
            global.push(format!("--platform={platform}"));
            global.push(match spec.network {
                Network::Host => "--network=host".into(),
                Network::None => "--network=none".into(),
            });
            if let Some(dir) = &e.debug_log_dir {
                global.push("--debug".into());
                global.push(format!("--debug-log={}/{}/", dir.display(), id));
            }
            if spec.resources.gpu_count > 0 {
                let req = runsc::GpuRequest {
                    host_driver: self.host_driver.clone(),
                    driver_capabilities: driver_capabilities.map(str::to_owned),
                    gpu_in_spec: true,
                };
                let args =
                    runsc::gpu_args(features, &req).map_err(|r| ExecutorStartError::Gpu {
                        name: name.into(),
                        reason: r.to_string(),
                    })?;
                global.extend(args);
            }
        }
        let cdi = if spec.devices.is_empty() {
            None
        } else {
            let dirs: Vec<PathBuf> = joblet_oci::cdi::DEFAULT_SPEC_DIRS
                .iter()
                .map(PathBuf::from)
                .collect();
            let edits = cdi_edits(&dirs, &spec.devices)
                .map_err(|e| ExecutorStartError::Cdi(e.to_string()))?;
            Some(edits)
        };
        Ok(Some(OciSettings {
            executor: name.into(),
            runtime: Runtime {
                cli: cli(e.kind),
                binary: e.binary.clone(),
                root: e.root.clone(),
                global,
            },
            bundle: bundle.to_path_buf(),
            cdi,
        }))
    }
}

/// The merged CDI edits of `devices` from the specs in `dirs`; a device
/// that is malformed or not defined there is refused as `devices[i]`, with
/// what the specs define. Admission checks a job's devices with it (see
/// [`check_devices`]), and its start takes their edits.
pub fn cdi_edits(
    dirs: &[PathBuf],
    devices: &[String],
) -> Result<joblet_oci::cdi::ContainerEdits, joblet_core::FieldError> {
    let field = |i: usize, e: &dyn std::fmt::Display| {
        joblet_core::FieldError::new(format!("devices[{i}]"), e.to_string())
    };
    let wanted = devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.parse::<joblet_oci::cdi::CdiDevice>()
                .map_err(|e| field(i, &e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let registry = joblet_oci::cdi::Registry::load(dirs);
    for (i, device) in wanted.iter().enumerate() {
        registry
            .resolve(std::slice::from_ref(device))
            .map_err(|e| field(i, &e))?;
    }
    registry
        .resolve(&wanted)
        .map_err(|e| joblet_core::FieldError::new("devices", e.to_string()))
}

/// Checks at submission that every CDI device a job asks for is defined
/// in the spec directories `dirs` ([`cdi_edits`]).
pub fn check_devices(dirs: &[PathBuf], devices: &[String]) -> Result<(), joblet_core::FieldError> {
    if devices.is_empty() {
        return Ok(());
    }
    cdi_edits(dirs, devices).map(drop)
}

/// What executor `kind` can do on this node.
fn caps_of(
    kind: ExecutorKind,
    runsc: Option<&(RunscFeatures, String)>,
    gpus: bool,
    host_driver: Option<&str>,
) -> (ExecutorCaps, Option<String>) {
    let no_gpus = (!gpus).then(|| "this node runs no GPU jobs".to_string());
    match (kind, runsc) {
        (ExecutorKind::Runsc, Some((features, _))) => {
            let gpu = runsc::gpu_args(
                features,
                &runsc::GpuRequest {
                    host_driver: host_driver.map(str::to_owned),
                    driver_capabilities: None,
                    gpu_in_spec: true,
                },
            );
            let unavailable = no_gpus.or_else(|| gpu.as_ref().err().map(ToString::to_string));
            (
                ExecutorCaps {
                    gpu: unavailable.is_none(),
                    cdi: false,
                    oom_events: true,
                    checkpoint_restore: features.subcommands.contains("checkpoint"),
                    join_netns: false,
                    device_cgroup: false,
                },
                unavailable,
            )
        }
        _ => (
            ExecutorCaps {
                gpu: gpus,
                cdi: true,
                oom_events: true,
                checkpoint_restore: probe::on_path("criu").is_some(),
                join_netns: true,
                device_cgroup: true,
            },
            no_gpus,
        ),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The request's syntax check (joblet-core) and the CDI parser
        /// (joblet-oci) accept exactly the same device names.
        #[test]
        fn the_two_cdi_name_checks_agree(s in "[a-z0-9./=:_ -]{0,12}") {
            let core = joblet_core::executor::split_cdi_name(&s).is_some();
            let oci = s.parse::<joblet_oci::cdi::CdiDevice>().is_ok();
            prop_assert_eq!(core, oci, "{:?}", s);
        }

        #[test]
        fn well_formed_names_agree_too(
            vendor in "[a-z][a-z0-9._-]{0,6}[a-z0-9]",
            class in "[a-z][a-z0-9._-]{0,4}[a-z0-9]",
            name in "[a-z0-9][a-z0-9._:-]{0,4}[a-z0-9]",
        ) {
            let s = format!("{vendor}/{class}={name}");
            prop_assert!(joblet_core::executor::split_cdi_name(&s).is_some(), "{}", s);
            prop_assert!(s.parse::<joblet_oci::cdi::CdiDevice>().is_ok(), "{}", s);
        }
    }
}
