//! The fault/load injection state file (`MOCK_NVML_STATE`): its JSON format and a watcher that re-reads it when it changes.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest state file accepted.
const MAX_STATE_BYTES: u64 = 16 << 20;

/// Why a state file was rejected (the previous state stays in force).
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_STATE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error(
        "not valid state JSON at {path}: {source}; see the fake-nvml crate docs for the format"
    )]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("gpus.\"{key}\": keys must be NVML indices such as \"0\"")]
    BadGpuKey { key: String },
    #[error("events[{position}]: an xid event needs `data` (the XID number)")]
    XidWithoutData { position: usize },
}

/// Overrides for one GPU; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuOverride {
    pub temperature_c: Option<u32>,
    pub utilization_gpu_pct: Option<u32>,
    pub utilization_memory_pct: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    /// Frame-buffer memory the driver reserves (`nvmlMemory_v2_t.reserved`).
    pub memory_reserved_bytes: Option<u64>,
    /// Board power draw in milliwatts (`nvmlDeviceGetPowerUsage`); also the
    /// rate the energy counter grows at from the moment it is read.
    pub power_mw: Option<u32>,
    pub graphics_clock_mhz: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub pcie_replay_counter: Option<u32>,
    /// HBM/GDDR temperature (`NVML_FI_DEV_MEMORY_TEMP`).
    pub memory_temperature_c: Option<u32>,
    pub ecc: Option<EccOverride>,
    /// Replaces the compute-process list.
    pub processes: Option<Vec<ProcessOverride>>,
    /// Replaces the graphics-process list.
    pub graphics_processes: Option<Vec<ProcessOverride>>,
    /// Replaces the MPS-client list.
    pub mps_processes: Option<Vec<ProcessOverride>>,
    #[serde(default)]
    pub lost: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccOverride {
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
    pub retired_pages_single: Option<u32>,
    pub retired_pages_double: Option<u32>,
    pub retired_pending: Option<bool>,
    pub remapped_correctable: Option<u32>,
    pub remapped_uncorrectable: Option<u32>,
    pub remapped_pending: Option<bool>,
    pub remapped_failure: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessOverride {
    pub pid: u32,
    pub used_memory_bytes: Option<u64>,
    /// SM utilisation in percent for `nvmlDeviceGetProcessUtilization`; a
    /// process with neither this nor `mem_util_pct` has no sample.
    pub sm_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
}

/// Kind of an injected event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Xid,
    SingleBitEcc,
    DoubleBitEcc,
}

/// One injected event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectedEvent {
    /// Index into the file's device list.
    pub gpu: u32,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub data: Option<u64>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    #[serde(default)]
    gpus: BTreeMap<String, GpuOverride>,
    #[serde(default)]
    events: Vec<InjectedEvent>,
}

/// A parsed state: overrides by file index and the append-only event list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub gpus: HashMap<usize, GpuOverride>,
    pub events: Vec<InjectedEvent>,
}

/// Parse a state file's bytes; `path` only names it in errors.
pub fn parse_state(path: &Path, bytes: &[u8]) -> Result<State, StateError> {
    let file: StateFile = serde_json::from_slice(bytes).map_err(|source| StateError::Json {
        path: path.display().to_string(),
        source,
    })?;
    let mut gpus = HashMap::new();
    for (key, ov) in file.gpus {
        let index = key
            .parse::<usize>()
            .map_err(|_| StateError::BadGpuKey { key: key.clone() })?;
        gpus.insert(index, ov);
    }
    if let Some(position) = file
        .events
        .iter()
        .position(|e| e.kind == EventKind::Xid && e.data.is_none())
    {
        return Err(StateError::XidWithoutData { position });
    }
    Ok(State {
        gpus,
        events: file.events,
    })
}

/// What identifies one version of the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Signature {
    fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Outcome of one [`StateWatcher::refresh`].
#[derive(Debug)]
pub enum Refresh {
    Unchanged,
    Reloaded,
    /// The file changed but was rejected; the previous state stays.
    Rejected(StateError),
}

/// Keeps the current state of an optional state file.
#[derive(Debug, Default)]
pub struct StateWatcher {
    path: Option<PathBuf>,
    seen: Option<Signature>,
    current: State,
}

impl StateWatcher {
    pub fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            seen: None,
            current: State::default(),
        }
    }

    pub fn current(&self) -> &State {
        &self.current
    }

    /// Re-read the file if its signature changed. A missing file means no
    /// overrides; a rejected file keeps the last good state and is reported
    /// once per version.
    pub fn refresh(&mut self) -> Refresh {
        let Some(path) = &self.path else {
            return Refresh::Unchanged;
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.seen.take().is_some() || self.current != State::default() {
                    self.current = State::default();
                    return Refresh::Reloaded;
                }
                return Refresh::Unchanged;
            }
            Err(source) => {
                return self.reject(
                    None,
                    StateError::Read {
                        path: path.clone(),
                        source,
                    },
                )
            }
        };
        let sig = Signature::of(&meta);
        if self.seen == Some(sig) {
            return Refresh::Unchanged;
        }
        if meta.len() > MAX_STATE_BYTES {
            return self.reject(Some(sig), StateError::TooLarge { path: path.clone() });
        }
        let parsed = std::fs::read(path)
            .map_err(|source| StateError::Read {
                path: path.clone(),
                source,
            })
            .and_then(|bytes| parse_state(path, &bytes));
        match parsed {
            Ok(state) => {
                self.seen = Some(sig);
                self.current = state;
                Refresh::Reloaded
            }
            Err(e) => self.reject(Some(sig), e),
        }
    }

    fn reject(&mut self, sig: Option<Signature>, e: StateError) -> Refresh {
        if sig.is_some() && self.seen == sig {
            return Refresh::Unchanged;
        }
        self.seen = sig;
        Refresh::Rejected(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{ "gpus": { "3": { "temperature_c": 95, "utilization_gpu_pct": 80, "utilization_memory_pct": 10,
                   "memory_used_bytes": 1234567,
                   "ecc": {"volatile_corrected": 1, "volatile_uncorrected": 0, "aggregate_corrected": 1, "aggregate_uncorrected": 0,
                           "retired_pages_single": 0, "retired_pages_double": 0, "retired_pending": false,
                           "remapped_correctable": 0, "remapped_uncorrectable": 0, "remapped_pending": false, "remapped_failure": false},
                   "processes": [{"pid": 123, "used_memory_bytes": 1000000}],
                   "lost": false } },
  "events": [ {"gpu": 3, "type": "xid", "data": 79}, {"gpu": 1, "type": "double_bit_ecc"}, {"gpu": 0, "type": "single_bit_ecc"},
              {"gpu": 2, "type": "xid", "data": 31, "gpu_instance_id": 1, "compute_instance_id": 0} ] }"#;

    #[test]
    fn parses_the_documented_example() {
        let s = parse_state(Path::new("s.json"), EXAMPLE.as_bytes()).unwrap();
        let g = &s.gpus[&3];
        assert_eq!(g.temperature_c, Some(95));
        assert_eq!(g.memory_used_bytes, Some(1_234_567));
        assert_eq!(g.ecc.as_ref().unwrap().volatile_corrected, Some(1));
        assert_eq!(
            g.processes.as_deref(),
            Some(
                &[ProcessOverride {
                    pid: 123,
                    used_memory_bytes: Some(1_000_000),
                    sm_util_pct: None,
                    mem_util_pct: None,
                }][..]
            )
        );
        assert_eq!(s.events.len(), 4);
        assert_eq!(s.events[0].kind, EventKind::Xid);
        assert_eq!(s.events[0].data, Some(79));
        assert_eq!(s.events[1].kind, EventKind::DoubleBitEcc);
        assert_eq!(s.events[3].gpu_instance_id, Some(1));
    }

    #[test]
    fn parses_monitoring_overrides() {
        let s = parse_state(
            Path::new("s.json"),
            br#"{"gpus": {"0": {"power_mw": 250000, "sm_clock_mhz": 1410, "mem_clock_mhz": 1215,
                 "graphics_clock_mhz": 1400, "pcie_replay_counter": 7, "memory_temperature_c": 70,
                 "memory_reserved_bytes": 1024,
                 "processes": [{"pid": 1, "sm_util_pct": 90, "mem_util_pct": 40}],
                 "graphics_processes": [{"pid": 2, "used_memory_bytes": 5}],
                 "mps_processes": []}}}"#,
        )
        .unwrap();
        let g = &s.gpus[&0];
        assert_eq!(g.power_mw, Some(250_000));
        assert_eq!((g.sm_clock_mhz, g.mem_clock_mhz), (Some(1410), Some(1215)));
        assert_eq!(g.graphics_clock_mhz, Some(1400));
        assert_eq!(g.pcie_replay_counter, Some(7));
        assert_eq!(g.memory_temperature_c, Some(70));
        assert_eq!(g.memory_reserved_bytes, Some(1024));
        let p = &g.processes.as_ref().unwrap()[0];
        assert_eq!((p.sm_util_pct, p.mem_util_pct), (Some(90), Some(40)));
        assert_eq!(g.graphics_processes.as_ref().unwrap()[0].pid, 2);
        assert_eq!(g.mps_processes.as_deref(), Some(&[][..]));
        let p = Path::new("s.json");
        for typo in [
            r#"{"gpus": {"0": {"power_w": 1}}}"#,
            r#"{"gpus": {"0": {"processes": [{"pid": 1, "sm_util": 3}]}}}"#,
            r#"{"gpus": {"0": {"graphics_processes": [{"pid": 1, "kind": "G"}]}}}"#,
        ] {
            assert!(
                matches!(
                    parse_state(p, typo.as_bytes()),
                    Err(StateError::Json { .. })
                ),
                "{typo}"
            );
        }
    }

    #[test]
    fn rejects_typos_bad_keys_and_xids_without_number() {
        let p = Path::new("s.json");
        assert!(matches!(
            parse_state(p, br#"{"gpus": {"0": {"temperature": 1}}}"#),
            Err(StateError::Json { .. })
        ));
        assert!(matches!(
            parse_state(p, br#"{"gpus": {"zero": {}}}"#),
            Err(StateError::BadGpuKey { .. })
        ));
        assert!(matches!(
            parse_state(p, br#"{"events": [{"gpu": 0, "type": "xid"}]}"#),
            Err(StateError::XidWithoutData { position: 0 })
        ));
        assert!(matches!(
            parse_state(p, br#"{"events": [{"gpu": 0, "type": "fire"}]}"#),
            Err(StateError::Json { .. })
        ));
        assert_eq!(parse_state(p, b"{}").unwrap(), State::default());
    }

    #[test]
    fn watcher_reloads_keeps_last_good_and_forgets_a_removed_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut w = StateWatcher::new(Some(path.clone()));
        assert!(matches!(w.refresh(), Refresh::Unchanged));

        let write = |body: &str| {
            let tmp = dir.path().join("tmp");
            std::fs::write(&tmp, body).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        };
        write(r#"{"gpus": {"1": {"temperature_c": 50}}}"#);
        assert!(matches!(w.refresh(), Refresh::Reloaded));
        assert_eq!(w.current().gpus[&1].temperature_c, Some(50));
        assert!(matches!(w.refresh(), Refresh::Unchanged));

        write("{ not json");
        assert!(matches!(w.refresh(), Refresh::Rejected(_)));
        assert!(matches!(w.refresh(), Refresh::Unchanged), "reported once");
        assert_eq!(w.current().gpus[&1].temperature_c, Some(50));

        write(r#"{"gpus": {"1": {"temperature_c": 51}}}"#);
        assert!(matches!(w.refresh(), Refresh::Reloaded));
        assert_eq!(w.current().gpus[&1].temperature_c, Some(51));

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(w.refresh(), Refresh::Reloaded));
        assert!(w.current().gpus.is_empty());
    }
}
