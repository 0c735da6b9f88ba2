//! The procfs/sysfs backend: GPUs from `<proc>/driver/nvidia`, their
//! locality from `<sys>/bus/pci/devices`. Works without NVML; knows no
//! memory sizes, temperatures or utilisation.

use crate::inventory::{BackendReport, GpuInventory, InventoryError};
use crate::model::{normalize_bus_id, Backend, GpuInfo};
use crate::topology::sysfs::read_pci_locality;
use std::path::{Path, PathBuf};

/// GPU inventory read from the NVIDIA driver's procfs tree.
#[derive(Debug, Clone)]
pub struct ProcfsInventory {
    proc_root: PathBuf,
    sys_root: PathBuf,
}

/// What one `<proc>/driver/nvidia/gpus/<bdf>/information` file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInformation {
    /// `Model`.
    pub model: String,
    /// `GPU UUID`; `None` while the driver shows it as
    /// `GPU-????????-...` (the GPU has not been initialised yet).
    pub uuid: Option<String>,
    /// `Bus Location`, normalised.
    pub bus_location: String,
    /// `Device Minor`: `/dev/nvidia<minor>`.
    pub minor: u32,
    /// `GPU Excluded: Yes` (absent on old drivers = not excluded).
    pub excluded: bool,
}

impl ProcfsInventory {
    /// `proc_root` is normally `/proc`, `sys_root` `/sys`.
    pub fn new(proc_root: PathBuf, sys_root: PathBuf) -> ProcfsInventory {
        ProcfsInventory {
            proc_root,
            sys_root,
        }
    }
}

impl GpuInventory for ProcfsInventory {
    fn backend(&self) -> Backend {
        Backend::Procfs
    }

    fn discover(&self) -> Result<BackendReport, InventoryError> {
        let driver_dir = self.proc_root.join("driver").join("nvidia");
        if !driver_dir.is_dir() {
            return Err(InventoryError::NoDriver { path: driver_dir });
        }
        let mut report = BackendReport::default();
        report.driver_version = read_driver_version(&driver_dir, &mut report.warnings)?;

        let mut found: Vec<GpuInformation> = Vec::new();
        for (dir_bus_id, dir) in list_gpu_dirs(&driver_dir, &mut report.warnings)? {
            let path = dir.join("information");
            let text = std::fs::read(&path).map_err(|source| InventoryError::Read {
                path: path.clone(),
                source,
            })?;
            let info = parse_information(&String::from_utf8_lossy(&text), &path)?;
            if info.bus_location != dir_bus_id {
                report.warnings.push(format!(
                    "{}: Bus Location {} differs from the directory name {dir_bus_id}; using the Bus Location",
                    path.display(),
                    info.bus_location,
                ));
            }
            if info.excluded {
                tracing::warn!(gpu = %info.bus_location, "GPU is excluded by the driver (NVreg_ExcludedGpus); skipping it");
                report.warnings.push(format!(
                    "GPU {} ({}) is excluded by the driver (GPU Excluded: Yes) and is not offered",
                    info.bus_location, info.model
                ));
                continue;
            }
            if info.uuid.is_none() {
                report.warnings.push(format!(
                    "GPU {}: the driver does not know its UUID yet (not initialised); NVML will",
                    info.bus_location
                ));
            }
            found.push(info);
        }
        // NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID both number GPUs in PCI
        // bus order; normalised ids sort that way as strings.
        found.sort_by(|a, b| a.bus_location.cmp(&b.bus_location));

        for (index, info) in found.into_iter().enumerate() {
            let (numa_node, local_cpus) = match read_pci_locality(
                &self.sys_root,
                &info.bus_location,
            ) {
                Ok(loc) => (loc.numa_node, loc.local_cpus.map(|c| c.to_string())),
                Err(err) => {
                    tracing::warn!(gpu = %info.bus_location, error = %err, "GPU locality unreadable");
                    report.warnings.push(format!(
                        "GPU {}: locality unknown: {err}",
                        info.bus_location
                    ));
                    (None, None)
                }
            };
            report.gpus.push(GpuInfo {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                uuid: info.uuid.unwrap_or_default(),
                name: info.model,
                minor: info.minor,
                pci_bus_id: info.bus_location,
                numa_node,
                local_cpus,
                ..GpuInfo::default()
            });
        }
        Ok(report)
    }
}

/// Driver version from `<driver_dir>/version`; a missing file is a
/// warning, a garbled one an error.
fn read_driver_version(
    driver_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, InventoryError> {
    let path = driver_dir.join("version");
    match std::fs::read(&path) {
        Ok(text) => parse_driver_version(&String::from_utf8_lossy(&text), &path).map(Some),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            warnings.push(format!(
                "{} is missing: driver version unknown",
                path.display()
            ));
            Ok(None)
        }
        Err(source) => Err(InventoryError::Read { path, source }),
    }
}

/// `(normalised bus id, dir)` for each `<driver_dir>/gpus/<bdf>`.
fn list_gpu_dirs(
    driver_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<(String, PathBuf)>, InventoryError> {
    let gpus_dir = driver_dir.join("gpus");
    let entries = match std::fs::read_dir(&gpus_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            warnings.push(format!(
                "{} is missing: the driver lists no GPUs",
                gpus_dir.display()
            ));
            return Ok(Vec::new());
        }
        Err(source) => {
            return Err(InventoryError::Read {
                path: gpus_dir,
                source,
            })
        }
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| InventoryError::Read {
            path: gpus_dir.clone(),
            source,
        })?;
        let name = entry.file_name();
        match name.to_str().and_then(normalize_bus_id) {
            Some(bus_id) => dirs.push((bus_id, entry.path())),
            None => warnings.push(format!(
                "{}: not a PCI bus id, ignored",
                entry.path().display()
            )),
        }
    }
    Ok(dirs)
}

/// Parse an `information` file. `path` is only used in errors.
///
/// Lines are `Key: value`, split on the first `:` (values such as the bus
/// location hold more colons). `Model`, `GPU UUID`, `Bus Location` and
/// `Device Minor` are required; unknown keys are ignored.
pub fn parse_information(text: &str, path: &Path) -> Result<GpuInformation, InventoryError> {
    let err = |reason: String| InventoryError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let mut model = None;
    let mut uuid = None;
    let mut bus = None;
    let mut minor = None;
    let mut excluded = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = raw.split_once(':') else {
            return Err(err(format!(
                "line {line_no} `{}`: expected `Key: value`",
                raw.trim()
            )));
        };
        let value = value.trim();
        let bad = |what: &str| err(format!("line {line_no} `{}`: {what}", raw.trim()));
        match key.trim() {
            "Model" => {
                if value.is_empty() {
                    return Err(bad("empty model name"));
                }
                model.get_or_insert_with(|| value.to_string());
            }
            "GPU UUID" => {
                if !value.starts_with("GPU-") {
                    return Err(bad("UUID does not start with `GPU-`"));
                }
                uuid.get_or_insert(value);
            }
            "Bus Location" => {
                let id = normalize_bus_id(value)
                    .ok_or_else(|| bad("not a PCI bus id `domain:bus:device.function`"))?;
                bus.get_or_insert(id);
            }
            "Device Minor" => {
                let m: u32 = value
                    .parse()
                    .map_err(|_| bad("device minor is not a decimal number"))?;
                minor.get_or_insert(m);
            }
            "GPU Excluded" => {
                excluded = match value {
                    "Yes" => true,
                    "No" => false,
                    _ => return Err(bad("expected `Yes` or `No`")),
                }
            }
            _ => {}
        }
    }
    let missing = |key: &str| err(format!("no `{key}:` line"));
    let uuid = uuid.ok_or_else(|| missing("GPU UUID"))?;
    Ok(GpuInformation {
        model: model.ok_or_else(|| missing("Model"))?,
        uuid: (!uuid.contains('?')).then(|| uuid.to_string()),
        bus_location: bus.ok_or_else(|| missing("Bus Location"))?,
        minor: minor.ok_or_else(|| missing("Device Minor"))?,
        excluded,
    })
}

/// The driver version from `/proc/driver/nvidia/version`, e.g.
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ...`
/// → `550.54.15` (the first dotted all-numeric word of the `NVRM` line;
/// the open kernel module's longer line works the same way).
pub fn parse_driver_version(text: &str, path: &Path) -> Result<String, InventoryError> {
    let err = |reason: &str| InventoryError::Parse {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("NVRM version:"))
        .ok_or_else(|| err("no `NVRM version:` line"))?;
    line.split_whitespace()
        .find(|word| is_dotted_version(word))
        .map(str::to_string)
        .ok_or_else(|| err("the `NVRM version:` line holds no version number like `550.54.15`"))
}

/// `550.54.15`, `12.2`: digits separated by single dots, at least one dot.
pub(crate) fn is_dotted_version(word: &str) -> bool {
    word.contains('.')
        && word
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}
