//! Parser for NVIDIA k8s-test-infra mock-NVML profiles (YAML) into the node model.
//!
//! Layout: `system`, `device_defaults` (deep-merged under every `devices[]`
//! entry, the entry winning), `devices` (ordered by their `index`), `nvlink`
//! (switch auto-expansion: `links_per_gpu` active links per GPU fanned
//! round-robin over `switches`, or explicit `links`) and `pcie_topology`
//! (NUMA node of each GPU's root complex). Fields the fake does not serve are
//! ignored.

mod details;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_norway::{Mapping, Value};

use crate::model::{
    EccCounts, EccMode, Gpu, Memory, Mig, Node, NvLink, PageList, Process, RemappedRows,
    RetiredPages, Source, Thresholds, Utilization,
};
use crate::pci::PciAddress;
use crate::values;

/// Why a profile could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not valid YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("the top level is not a mapping with `system` and `devices`: not a mock-NVML profile")]
    NotAProfile,
    #[error("`{section}`: {reason}")]
    Section {
        section: &'static str,
        reason: String,
    },
    #[error("devices[{position}]: {reason}")]
    Device { position: usize, reason: String },
    #[error(
        "devices[{position}] and devices[{other}] both have index {index}; indices must be unique"
    )]
    DuplicateIndex {
        index: u32,
        position: usize,
        other: usize,
    },
}

/// Parse a mock-NVML profile.
pub fn parse_profile(text: &str) -> Result<Node, ProfileError> {
    let doc: Value = serde_norway::from_str(text)?;
    let Value::Mapping(top) = doc else {
        return Err(ProfileError::NotAProfile);
    };
    let get = |k: &str| top.get(Value::String(k.to_string()));
    if get("system").is_none() || get("devices").is_none() {
        return Err(ProfileError::NotAProfile);
    }

    let system: SystemSpec = section(get("system"), "system")?;
    let driver_version = system
        .driver_version
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| ProfileError::Section {
            section: "system",
            reason: "driver_version is missing; the profile format requires it".into(),
        })?;
    let cuda_driver_version = match (system.cuda_version_major, system.cuda_version_minor) {
        (Some(major), minor) => Some(major * 1000 + minor.unwrap_or(0) * 10),
        (None, _) => match &system.cuda_version {
            Some(v) => values::cuda_version(v).map_err(|reason| ProfileError::Section {
                section: "system",
                reason: format!("cuda_version: {reason}"),
            })?,
            None => None,
        },
    };
    let nvml_version = system
        .nvml_version
        .or_else(|| values::nvml_version(cuda_driver_version, &driver_version));

    let nvlink: NvLinkSpec = section(get("nvlink"), "nvlink")?;
    let links = nvlink.links_for_each_gpu()?;
    let topology: TopologySpec = section(get("pcie_topology"), "pcie_topology")?;
    let numa = topology.numa_by_address()?;

    let defaults = match get("device_defaults") {
        None | Some(Value::Null) => Mapping::new(),
        Some(Value::Mapping(m)) => m.clone(),
        Some(_) => {
            return Err(ProfileError::Section {
                section: "device_defaults",
                reason: "is not a mapping".into(),
            })
        }
    };
    let Some(Value::Sequence(entries)) = get("devices") else {
        return Err(ProfileError::Section {
            section: "devices",
            reason: "is not a list".into(),
        });
    };

    let mut by_index: BTreeMap<u32, (usize, Gpu)> = BTreeMap::new();
    for (position, entry) in entries.iter().enumerate() {
        let Value::Mapping(entry) = entry else {
            return Err(ProfileError::Device {
                position,
                reason: "is not a mapping".into(),
            });
        };
        let mut merged = defaults.clone();
        merge(&mut merged, entry);
        let spec: DeviceSpec =
            serde_path_to_error::deserialize(Value::Mapping(merged)).map_err(|e| {
                ProfileError::Device {
                    position,
                    reason: e.to_string(),
                }
            })?;
        let (index, gpu) = spec
            .into_gpu(&numa, links.as_deref())
            .map_err(|reason| ProfileError::Device { position, reason })?;
        if let Some((other, _)) = by_index.get(&index) {
            return Err(ProfileError::DuplicateIndex {
                index,
                position,
                other: *other,
            });
        }
        by_index.insert(index, (position, gpu));
    }

    Ok(Node {
        source: Source::Profile,
        driver_version,
        nvml_version,
        cuda_driver_version,
        gpus: by_index.into_values().map(|(_, gpu)| gpu).collect(),
    })
}

/// Deserialize an optional top-level section, naming it in errors.
fn section<T: for<'de> Deserialize<'de> + Default>(
    value: Option<&Value>,
    name: &'static str,
) -> Result<T, ProfileError> {
    match value {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_path_to_error::deserialize(v.clone()).map_err(|e| ProfileError::Section {
            section: name,
            reason: e.to_string(),
        }),
    }
}

/// Deep merge: mappings merge key by key, anything else in `over` replaces.
fn merge(base: &mut Mapping, over: &Mapping) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Mapping(b)), Value::Mapping(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A number, a numeric string, or `N/A` (= absent).
fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{n} is not an unsigned integer"))),
        Value::String(s) if s.trim().eq_ignore_ascii_case("N/A") => Ok(None),
        Value::String(s) => match values::number_with_unit(&s, "") {
            Ok(Some(v)) => Ok(Some(v)),
            Ok(None) => Err(D::Error::custom(format!(
                "expected a number or \"N/A\", found \"{s}\""
            ))),
            Err(e) => Err(D::Error::custom(e)),
        },
        other => Err(D::Error::custom(format!(
            "expected a number or \"N/A\", found {other:?}"
        ))),
    }
}

fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use serde::de::Error;
    opt_u64(d)?
        .map(|v| {
            u32::try_from(v).map_err(|_| D::Error::custom(format!("{v} does not fit 32 bits")))
        })
        .transpose()
}

/// `true`/`false` or `enabled`/`disabled`/`yes`/`no`; `N/A` = absent.
fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        Value::String(s) => match values::flag(&s) {
            Some(b) => Ok(Some(b)),
            None if !s.bytes().any(|b| b.is_ascii_alphanumeric()) || s.trim() == "N/A" => Ok(None),
            None => Err(D::Error::custom(format!(
                "expected enabled/disabled or true/false, found \"{s}\""
            ))),
        },
        other => Err(D::Error::custom(format!(
            "expected a boolean, found {other:?}"
        ))),
    }
}

#[derive(Debug, Default, Deserialize)]
struct SystemSpec {
    driver_version: Option<String>,
    nvml_version: Option<String>,
    cuda_version: Option<String>,
    cuda_version_major: Option<i32>,
    cuda_version_minor: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
struct NvLinkSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    links_per_gpu: Option<u32>,
    #[serde(default)]
    switches: Vec<SwitchSpec>,
    #[serde(default)]
    links: Vec<LinkSpec>,
}

#[derive(Debug, Deserialize)]
struct SwitchSpec {
    bdf: String,
}

#[derive(Debug, Deserialize)]
struct LinkSpec {
    link: u32,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    remote_pci_bus_id: Option<String>,
}

/// NVML's per-GPU link limit (`NVML_NVLINK_MAX_LINKS`).
pub(crate) const MAX_LINKS: u32 = 18;

impl NvLinkSpec {
    /// The links every GPU has; `None` when the profile describes no NVLink.
    fn links_for_each_gpu(&self) -> Result<Option<Vec<NvLink>>, ProfileError> {
        let bad = |reason: String| ProfileError::Section {
            section: "nvlink",
            reason,
        };
        let per_gpu = self.links_per_gpu.unwrap_or(0);
        if per_gpu > MAX_LINKS {
            return Err(bad(format!(
                "links_per_gpu {per_gpu} is above NVML's {MAX_LINKS} links per GPU"
            )));
        }
        let parse = |bdf: &str| {
            PciAddress::parse(bdf).ok_or_else(|| bad(format!("`{bdf}` is not a PCI bus id")))
        };
        if !self.links.is_empty() {
            let count = self
                .links
                .iter()
                .map(|l| l.link.saturating_add(1))
                .max()
                .unwrap_or(0)
                .max(per_gpu);
            if count > MAX_LINKS {
                return Err(bad(format!(
                    "link {} is above NVML's {MAX_LINKS} links per GPU",
                    count - 1
                )));
            }
            let mut out = vec![
                NvLink {
                    active: false,
                    remote: None
                };
                count as usize
            ];
            for l in &self.links {
                let remote = l.remote_pci_bus_id.as_deref().map(parse).transpose()?;
                out[l.link as usize] = NvLink {
                    active: l
                        .state
                        .as_deref()
                        .is_none_or(|s| s.eq_ignore_ascii_case("active")),
                    remote,
                };
            }
            return Ok(Some(out));
        }
        if per_gpu == 0 {
            return Ok(None);
        }
        let switches = self
            .switches
            .iter()
            .map(|s| parse(&s.bdf))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(
            (0..per_gpu as usize)
                .map(|l| NvLink {
                    active: true,
                    remote: (!switches.is_empty()).then(|| switches[l % switches.len()]),
                })
                .collect(),
        ))
    }
}

#[derive(Debug, Default, Deserialize)]
struct TopologySpec {
    #[serde(default)]
    root_complexes: Vec<RootComplexSpec>,
}

#[derive(Debug, Deserialize)]
struct RootComplexSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    numa_node: Option<u32>,
    #[serde(default)]
    devices: Vec<String>,
}

impl TopologySpec {
    fn numa_by_address(&self) -> Result<BTreeMap<PciAddress, u32>, ProfileError> {
        let mut out = BTreeMap::new();
        for rc in &self.root_complexes {
            let Some(node) = rc.numa_node else { continue };
            for bdf in &rc.devices {
                let addr = PciAddress::parse(bdf).ok_or_else(|| ProfileError::Section {
                    section: "pcie_topology",
                    reason: format!("`{bdf}` is not a PCI bus id"),
                })?;
                out.insert(addr, node);
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Deserialize)]
struct DeviceSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    index: Option<u32>,
    name: Option<String>,
    uuid: Option<String>,
    #[serde(default, deserialize_with = "opt_u32")]
    minor_number: Option<u32>,
    #[serde(default)]
    pci: PciSpec,
    compute_capability: Option<CcSpec>,
    memory: Option<MemorySpec>,
    #[serde(default)]
    thermal: ThermalSpec,
    #[serde(default)]
    utilization: UtilizationSpec,
    ecc: Option<EccSpec>,
    #[serde(default)]
    retired_pages: RetiredSpec,
    #[serde(default)]
    remapped_rows: RemappedSpec,
    mig: Option<MigSpec>,
    #[serde(default)]
    processes: Vec<ProcessSpec>,
    #[serde(flatten)]
    details: details::DetailsSpec,
}

#[derive(Debug, Default, Deserialize)]
struct PciSpec {
    bus_id: Option<String>,
    #[serde(default, deserialize_with = "opt_u32")]
    device_id: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    subsystem_id: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct CcSpec {
    major: i32,
    minor: i32,
}

#[derive(Debug, Deserialize)]
struct MemorySpec {
    #[serde(default, deserialize_with = "opt_u64")]
    total_bytes: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    reserved_bytes: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    free_bytes: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    used_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct ThermalSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    temperature_gpu_c: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    shutdown_threshold_c: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    slowdown_threshold_c: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    max_operating_c: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory_max_threshold_c: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    temperature_memory_c: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct UtilizationSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    gpu: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    encoder: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    decoder: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct EccSpec {
    #[serde(default, deserialize_with = "opt_flag")]
    mode_current: Option<bool>,
    #[serde(default, deserialize_with = "opt_flag")]
    mode_pending: Option<bool>,
    #[serde(default)]
    errors: EccErrorsSpec,
}

#[derive(Debug, Default, Deserialize)]
struct EccErrorsSpec {
    #[serde(default)]
    volatile: EccSideSpec,
    #[serde(default)]
    aggregate: EccSideSpec,
}

#[derive(Debug, Default, Deserialize)]
struct EccSideSpec {
    #[serde(default)]
    single_bit: EccTotalSpec,
    #[serde(default)]
    double_bit: EccTotalSpec,
}

#[derive(Debug, Default, Deserialize)]
struct EccTotalSpec {
    #[serde(default, deserialize_with = "opt_u64")]
    total: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct RetiredSpec {
    single_bit_retirement: Option<RetirementSpec>,
    double_bit_retirement: Option<RetirementSpec>,
    #[serde(default, deserialize_with = "opt_flag")]
    pending_retirement: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct RetirementSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    count: Option<u32>,
    #[serde(default)]
    addresses: Vec<Value>,
}

impl RetirementSpec {
    fn into_pages(self) -> Result<Option<PageList>, String> {
        let addresses = self
            .addresses
            .iter()
            .map(|a| {
                match a {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s
                        .trim()
                        .strip_prefix("0x")
                        .and_then(|h| u64::from_str_radix(h, 16).ok()),
                    _ => None,
                }
                .ok_or_else(|| format!("retired page address {a:?} is not a number or 0x-hex"))
            })
            .collect::<Result<Vec<u64>, String>>()?;
        let listed = u32::try_from(addresses.len()).unwrap_or(u32::MAX);
        Ok(match self.count {
            Some(count) => Some(PageList {
                count: count.max(listed),
                addresses,
            }),
            None if !addresses.is_empty() => Some(PageList {
                count: listed,
                addresses,
            }),
            None => None,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
struct RemappedSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    correctable: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    uncorrectable: Option<u32>,
    #[serde(default, deserialize_with = "opt_flag")]
    pending: Option<bool>,
    #[serde(default, deserialize_with = "opt_flag")]
    failure_occurred: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct MigSpec {
    #[serde(default, deserialize_with = "opt_flag")]
    mode_current: Option<bool>,
    #[serde(default, deserialize_with = "opt_flag")]
    mode_pending: Option<bool>,
    #[serde(default, deserialize_with = "opt_u32")]
    max_gpu_instances: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct ProcessSpec {
    pid: u32,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "opt_u64")]
    used_memory_mib: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    used_memory_bytes: Option<u64>,
}

impl DeviceSpec {
    fn into_gpu(
        self,
        numa: &BTreeMap<PciAddress, u32>,
        links: Option<&[NvLink]>,
    ) -> Result<(u32, Gpu), String> {
        let index = self
            .index
            .ok_or("index is missing; every device entry needs its NVML index")?;
        let name = self
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or("name is missing (set it in device_defaults or the entry)")?;
        let uuid = self
            .uuid
            .filter(|u| !u.trim().is_empty())
            .ok_or("uuid is missing")?;
        let bus_id = self
            .pci
            .bus_id
            .ok_or("pci.bus_id is missing; the fake does not invent bus ids")?;
        let pci = PciAddress::parse(&bus_id)
            .ok_or_else(|| format!("pci.bus_id `{bus_id}` is not a PCI bus id"))?;
        let memory = match self.memory {
            None => None,
            Some(m) => m.total_bytes.map(|total| {
                let reserved = m.reserved_bytes.unwrap_or(0);
                let used = m.used_bytes.unwrap_or_else(|| {
                    m.free_bytes
                        .map(|f| total.saturating_sub(reserved).saturating_sub(f))
                        .unwrap_or(0)
                });
                Memory {
                    total,
                    reserved,
                    used,
                }
            }),
        };
        let (ecc_mode, ecc_counts) = match self.ecc {
            None => (None, EccCounts::default()),
            Some(e) => (
                e.mode_current.map(|current| EccMode {
                    current,
                    pending: e.mode_pending.unwrap_or(current),
                }),
                EccCounts {
                    volatile_corrected: e.errors.volatile.single_bit.total,
                    volatile_uncorrected: e.errors.volatile.double_bit.total,
                    aggregate_corrected: e.errors.aggregate.single_bit.total,
                    aggregate_uncorrected: e.errors.aggregate.double_bit.total,
                },
            ),
        };
        let retired_pages = RetiredPages {
            single_bit: self
                .retired_pages
                .single_bit_retirement
                .map(RetirementSpec::into_pages)
                .transpose()?
                .flatten(),
            double_bit: self
                .retired_pages
                .double_bit_retirement
                .map(RetirementSpec::into_pages)
                .transpose()?
                .flatten(),
            pending: self.retired_pages.pending_retirement,
        };
        let mig = self.mig.and_then(|m| {
            m.mode_current.map(|current| Mig {
                current_enabled: current,
                pending_enabled: m.mode_pending.unwrap_or(current),
                max_devices: m.max_gpu_instances.unwrap_or(0),
                devices: Vec::new(),
            })
        });
        let details = self.details.into_details()?;
        let mut processes = Vec::new();
        let mut graphics_processes = Vec::new();
        let mut mps_processes = Vec::new();
        for p in self.processes {
            let process = Process {
                pid: p.pid,
                used_memory: p
                    .used_memory_bytes
                    .or_else(|| p.used_memory_mib.and_then(|m| m.checked_mul(1 << 20))),
                gpu_instance_id: None,
                compute_instance_id: None,
            };
            let kind = values::process_kind(p.kind.as_deref().unwrap_or("C"));
            if kind.compute {
                processes.push(process);
            }
            if kind.graphics {
                graphics_processes.push(process);
            }
            if kind.mps {
                mps_processes.push(process);
            }
        }
        Ok((
            index,
            Gpu {
                minor_number: self.minor_number,
                pci_device_id: self.pci.device_id,
                pci_subsystem_id: self.pci.subsystem_id,
                memory,
                compute_capability: self.compute_capability.map(|c| (c.major, c.minor)),
                numa_node: numa.get(&pci).copied(),
                temperature_c: self.thermal.temperature_gpu_c,
                thresholds: Thresholds {
                    shutdown: self.thermal.shutdown_threshold_c,
                    slowdown: self.thermal.slowdown_threshold_c,
                    gpu_max: self.thermal.max_operating_c,
                    mem_max: self.thermal.memory_max_threshold_c,
                },
                utilization: Utilization {
                    gpu: self.utilization.gpu,
                    memory: self.utilization.memory,
                    encoder: self.utilization.encoder,
                    decoder: self.utilization.decoder,
                },
                ecc_mode,
                ecc_counts,
                retired_pages,
                remapped_rows: RemappedRows {
                    correctable: self.remapped_rows.correctable,
                    uncorrectable: self.remapped_rows.uncorrectable,
                    pending: self.remapped_rows.pending,
                    failure: self.remapped_rows.failure_occurred,
                },
                processes,
                graphics_processes,
                mps_processes,
                board: details.board,
                power: details.power,
                clocks: details.clocks,
                pcie: details.pcie,
                fan: details.fan,
                performance_state: details.performance_state,
                memory_temperature_c: self.thermal.temperature_memory_c,
                bar1: details.bar1,
                mig,
                nvlink: links.map(<[NvLink]>::to_vec),
                name,
                uuid,
                pci,
            },
        ))
    }
}
