//! The library's process-wide state between `nvmlInit` and `nvmlShutdown`: the loaded node, visible GPUs, state file and event sets.

use std::collections::HashMap;
use std::os::raw::c_void;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::abi::Status;
use crate::config::load_config;
use crate::devnodes::{visible_gpus, Visibility};
use crate::diag;
use crate::energy::{self, EnergyMeter};
use crate::handles::{decode_device, Target};
use crate::model::{Gpu, MigDevice, Node};
use crate::state::{GpuOverride, Refresh, State, StateWatcher};

/// Where the library takes its inputs from (the environment, in practice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub config: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub dev_dir: PathBuf,
}

impl Settings {
    pub fn from_env() -> Self {
        let path = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            config: path("MOCK_NVML_CONFIG"),
            state: path("MOCK_NVML_STATE"),
            dev_dir: path("MOCK_NVML_DEV_DIR").unwrap_or_else(|| PathBuf::from("/dev")),
        }
    }
}

/// One event set: registrations by GPU position and the position in the
/// injected event list up to which events were considered.
#[derive(Debug, Default)]
pub(crate) struct EventSetState {
    pub registered: HashMap<usize, u64>,
    pub cursor: usize,
}

#[derive(Debug)]
pub(crate) struct Runtime {
    refcount: u32,
    pub node: Node,
    /// Positions of the GPUs this caller sees; NVML index = place in here.
    pub visible: Vec<usize>,
    state: StateWatcher,
    pub event_sets: HashMap<u32, EventSetState>,
    pub next_event_set: u32,
    /// Energy counters by GPU position (see `crate::energy`).
    meters: Vec<EnergyMeter>,
}

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<Runtime>> {
    RUNTIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `nvmlInit*`: the first call loads the description named by the
/// environment; later calls only count references, like the driver's.
pub(crate) fn init(function: &str) -> Result<(), Status> {
    let mut guard = lock();
    if let Some(rt) = guard.as_mut() {
        rt.refcount = rt.refcount.saturating_add(1);
        return Ok(());
    }
    let rt = Runtime::start(&Settings::from_env()).map_err(|(status, message)| {
        diag::report(function, &message);
        status
    })?;
    *guard = Some(rt);
    Ok(())
}

/// `nvmlShutdown`: the last matching call drops everything.
pub(crate) fn shutdown() -> Result<(), Status> {
    let mut guard = lock();
    let rt = guard.as_mut().ok_or(Status::Uninitialized)?;
    rt.refcount = rt.refcount.saturating_sub(1);
    if rt.refcount == 0 {
        *guard = None;
    }
    Ok(())
}

pub(crate) fn is_initialized() -> bool {
    lock().is_some()
}

/// Run `f` on the initialised runtime.
pub(crate) fn with<T>(f: impl FnOnce(&mut Runtime) -> Result<T, Status>) -> Result<T, Status> {
    let mut guard = lock();
    let rt = guard.as_mut().ok_or(Status::Uninitialized)?;
    f(rt)
}

/// A device handle resolved against the current model and state.
pub(crate) struct Resolved<'a> {
    pub pos: usize,
    /// NVML index in this caller's view.
    pub index: u32,
    pub gpu: &'a Gpu,
    pub overrides: Option<&'a GpuOverride>,
    /// `Some` for a MIG device handle.
    pub mig: Option<&'a MigDevice>,
}

impl Resolved<'_> {
    /// Refuse a query the fake serves only for whole GPUs.
    pub fn whole_gpu(&self, function: &str) -> Result<(), Status> {
        if self.mig.is_some() {
            diag::unmodelled(function, "not modelled for MIG device handles");
            return Err(Status::NotSupported);
        }
        Ok(())
    }
}

impl Runtime {
    /// Load the description and decide which GPUs this caller sees. Errors
    /// carry the status for `nvmlInit` and the line for stderr.
    pub(crate) fn start(settings: &Settings) -> Result<Self, (Status, String)> {
        let Some(config) = &settings.config else {
            return Err((
                Status::LibraryNotFound,
                "MOCK_NVML_CONFIG is not set; point it at a mock-NVML profile (YAML) or an \
                 `nvidia-smi -q -x` capture (XML)"
                    .to_string(),
            ));
        };
        let node = load_config(config).map_err(|e| (Status::LibraryNotFound, e.to_string()))?;
        let visible = match visible_gpus(&node, &settings.dev_dir) {
            Visibility::Gpus(v) => v,
            Visibility::ControlDenied => {
                return Err((
                    Status::NoPermission,
                    format!(
                        "{} exists but cannot be opened (EPERM/EACCES): no access to the driver",
                        settings.dev_dir.join("nvidiactl").display()
                    ),
                ))
            }
        };
        let now = Instant::now();
        let meters = node
            .gpus
            .iter()
            .map(|g| EnergyMeter::new(g.power.energy_mj.unwrap_or(0), now))
            .collect();
        let mut rt = Self {
            refcount: 1,
            meters,
            node,
            visible,
            state: StateWatcher::new(settings.state.clone()),
            event_sets: HashMap::new(),
            next_event_set: 1,
        };
        rt.refresh_state();
        Ok(rt)
    }

    /// Pick up a changed state file; report a rejected one on stderr.
    /// Energy counters are first brought up to now with the draw in force
    /// until this moment.
    pub fn refresh_state(&mut self) {
        self.advance_meters();
        if let Refresh::Rejected(e) = self.state.refresh() {
            diag::report(
                "MOCK_NVML_STATE",
                &format!("{e}; keeping the previous state"),
            );
        }
    }

    fn advance_meters(&mut self) {
        let now = Instant::now();
        let overrides = &self.state.current().gpus;
        for (pos, (gpu, meter)) in self.node.gpus.iter().zip(&mut self.meters).enumerate() {
            meter.advance(energy::power_mw(gpu, overrides.get(&pos)), now);
        }
    }

    /// Energy counter of the GPU at `pos` in millijoules, as of now.
    pub fn energy_mj(&mut self, pos: usize) -> Option<u64> {
        self.advance_meters();
        self.meters.get(pos).map(EnergyMeter::total_mj)
    }

    pub fn state(&self) -> &State {
        self.state.current()
    }

    /// NVML index of the GPU at `pos`, if this caller sees it.
    pub fn nvml_index(&self, pos: usize) -> Option<u32> {
        self.visible
            .iter()
            .position(|p| *p == pos)
            .and_then(|i| u32::try_from(i).ok())
    }

    /// Resolve a device handle: refresh the state, check the handle names a
    /// visible GPU (and an existing MIG device), and fail with
    /// `GPU_IS_LOST` for a GPU the state marks lost.
    pub fn resolve(&mut self, handle: *mut c_void) -> Result<Resolved<'_>, Status> {
        self.refresh_state();
        let target = decode_device(handle).ok_or(Status::InvalidArgument)?;
        let pos = target.pos();
        let index = self.nvml_index(pos).ok_or(Status::InvalidArgument)?;
        let gpu = self.node.gpus.get(pos).ok_or(Status::InvalidArgument)?;
        let overrides = self.state.current().gpus.get(&pos);
        let mig = match target {
            Target::Gpu { .. } => None,
            Target::Mig { index: slot, .. } => Some(
                gpu.mig
                    .as_ref()
                    .and_then(|m| m.devices.iter().find(|d| d.index == slot))
                    .ok_or(Status::InvalidArgument)?,
            ),
        };
        if overrides.is_some_and(|o| o.lost) {
            return Err(Status::GpuIsLost);
        }
        Ok(Resolved {
            pos,
            index,
            gpu,
            overrides,
            mig,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(config: Option<PathBuf>, dev_dir: PathBuf) -> Settings {
        Settings {
            config,
            state: None,
            dev_dir,
        }
    }

    #[test]
    fn start_explains_a_missing_or_broken_config() {
        let dir = tempfile::tempdir().unwrap();
        let (status, msg) = Runtime::start(&settings(None, dir.path().into())).unwrap_err();
        assert_eq!(status, Status::LibraryNotFound);
        assert!(msg.contains("MOCK_NVML_CONFIG is not set"), "{msg}");

        let bad = dir.path().join("broken.yaml");
        std::fs::write(&bad, "system: [").unwrap();
        let (status, msg) = Runtime::start(&settings(Some(bad), dir.path().into())).unwrap_err();
        assert_eq!(status, Status::LibraryNotFound);
        assert!(msg.contains("broken.yaml"), "{msg}");
    }
}
