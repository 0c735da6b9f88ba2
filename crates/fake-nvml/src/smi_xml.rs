//! Parser for real `nvidia-smi -q -x` captures into the node model.

mod details;

use roxmltree::{Document, Node as XmlNode, ParsingOptions};

use crate::derive;
use crate::model::{
    EccCounts, EccMode, Gpu, Memory, Mig, MigAttributes, MigDevice, Node, PageList, Process,
    RemappedRows, RetiredPages, Source, Thresholds, Utilization,
};
use crate::pci::PciAddress;
use crate::values;

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SmiXmlError {
    #[error("not well-formed XML: {0}; give an unmodified `nvidia-smi -q -x` capture")]
    Xml(#[from] roxmltree::Error),
    #[error(
        "root element is <{0}>, not <nvidia_smi_log>: this is not an `nvidia-smi -q -x` capture"
    )]
    NotACapture(String),
    #[error("<{field}> is missing: an `nvidia-smi -q -x` capture always has it")]
    MissingSystemField { field: &'static str },
    #[error("<{field}>: {reason}")]
    SystemField { field: &'static str, reason: String },
    #[error("GPU #{gpu} ({id}): <{field}> is missing or empty")]
    MissingGpuField {
        gpu: usize,
        id: String,
        field: &'static str,
    },
    #[error("GPU #{gpu} ({id}): <{field}>: {reason}")]
    GpuField {
        gpu: usize,
        id: String,
        field: &'static str,
        reason: String,
    },
}

/// Largest document accepted, in XML nodes (an 8-GPU capture is ~20k).
const NODES_LIMIT: u32 = 2_000_000;

/// Parse an `nvidia-smi -q -x` capture. `N/A` and similar values become
/// "not available" in the model; values with digits must parse.
pub fn parse_smi_xml(text: &str) -> Result<Node, SmiXmlError> {
    let options = ParsingOptions {
        allow_dtd: true,
        nodes_limit: NODES_LIMIT,
    };
    let doc = Document::parse_with_options(text, options)?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(SmiXmlError::NotACapture(root.tag_name().name().to_string()));
    }
    let driver_version = child_text(root, &["driver_version"])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(SmiXmlError::MissingSystemField {
            field: "driver_version",
        })?
        .to_string();
    let cuda_driver_version = match child_text(root, &["cuda_version"]) {
        None => None,
        Some(t) => values::cuda_version(t).map_err(|reason| SmiXmlError::SystemField {
            field: "cuda_version",
            reason,
        })?,
    };
    let gpus = root
        .children()
        .filter(|n| n.has_tag_name("gpu"))
        .enumerate()
        .map(|(i, n)| GpuReader::new(i, n).read())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Node {
        source: Source::SmiXml,
        nvml_version: values::nvml_version(cuda_driver_version, &driver_version),
        driver_version,
        cuda_driver_version,
        gpus,
    })
}

/// First child element with each successive name.
fn child<'a, 'i>(node: XmlNode<'a, 'i>, path: &[&str]) -> Option<XmlNode<'a, 'i>> {
    path.iter().try_fold(node, |n, name| {
        n.children()
            .find(|c| c.is_element() && c.has_tag_name(*name))
    })
}

fn child_text<'a>(node: XmlNode<'a, '_>, path: &[&str]) -> Option<&'a str> {
    child(node, path).map(|n| n.text().unwrap_or(""))
}

/// Reads one `<gpu>` element, naming it in errors.
struct GpuReader<'a, 'i> {
    position: usize,
    id: String,
    node: XmlNode<'a, 'i>,
}

impl<'a, 'i> GpuReader<'a, 'i> {
    fn new(position: usize, node: XmlNode<'a, 'i>) -> Self {
        let id = node.attribute("id").unwrap_or("no id").to_string();
        Self { position, id, node }
    }

    fn missing(&self, field: &'static str) -> SmiXmlError {
        SmiXmlError::MissingGpuField {
            gpu: self.position,
            id: self.id.clone(),
            field,
        }
    }

    fn bad(&self, field: &'static str, reason: String) -> SmiXmlError {
        SmiXmlError::GpuField {
            gpu: self.position,
            id: self.id.clone(),
            field,
            reason,
        }
    }

    fn required_text(&self, field: &'static str) -> Result<String, SmiXmlError> {
        child_text(self.node, &[field])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| self.missing(field))
    }

    /// Number with unit at `path` under `base`; absent element = not available.
    fn num(
        &self,
        base: XmlNode<'_, '_>,
        path: &[&str],
        field: &'static str,
        unit: &str,
    ) -> Result<Option<u64>, SmiXmlError> {
        match child_text(base, path) {
            None => Ok(None),
            Some(t) => values::number_with_unit(t, unit).map_err(|r| self.bad(field, r)),
        }
    }

    fn num32(
        &self,
        base: XmlNode<'_, '_>,
        path: &[&str],
        field: &'static str,
        unit: &str,
    ) -> Result<Option<u32>, SmiXmlError> {
        match child_text(base, path) {
            None => Ok(None),
            Some(t) => values::number_u32(t, unit).map_err(|r| self.bad(field, r)),
        }
    }

    fn flag(&self, base: XmlNode<'_, '_>, path: &[&str]) -> Option<bool> {
        child_text(base, path).and_then(values::flag)
    }

    fn read(&self) -> Result<Gpu, SmiXmlError> {
        let name = self.required_text("product_name")?;
        let uuid = self.required_text("uuid")?;
        let bus_text = child_text(self.node, &["pci", "pci_bus_id"])
            .or(self.node.attribute("id"))
            .ok_or_else(|| self.missing("pci_bus_id"))?;
        let pci = PciAddress::parse(bus_text)
            .ok_or_else(|| self.bad("pci_bus_id", format!("`{bus_text}` is not a PCI bus id")))?;
        let hex = |path: &[&str], field| match child_text(self.node, path) {
            None => Ok(None),
            Some(t) => values::hex_u32(t).map_err(|r| self.bad(field, r)),
        };
        let memory = self.memory(child(self.node, &["fb_memory_usage"]))?;
        let mig = self.mig(&name, &uuid)?;
        Ok(Gpu {
            minor_number: self.num32(self.node, &["minor_number"], "minor_number", "")?,
            pci_device_id: hex(&["pci", "pci_device_id"], "pci_device_id")?,
            pci_subsystem_id: hex(&["pci", "pci_sub_system_id"], "pci_sub_system_id")?,
            memory,
            compute_capability: derive::compute_capability(&name),
            numa_node: None,
            temperature_c: self.num32(self.node, &["temperature", "gpu_temp"], "gpu_temp", "C")?,
            thresholds: self.thresholds()?,
            utilization: Utilization {
                gpu: self.num32(self.node, &["utilization", "gpu_util"], "gpu_util", "%")?,
                memory: self.num32(
                    self.node,
                    &["utilization", "memory_util"],
                    "memory_util",
                    "%",
                )?,
                encoder: self.num32(
                    self.node,
                    &["utilization", "encoder_util"],
                    "encoder_util",
                    "%",
                )?,
                decoder: self.num32(
                    self.node,
                    &["utilization", "decoder_util"],
                    "decoder_util",
                    "%",
                )?,
            },
            ecc_mode: self.ecc_mode(),
            ecc_counts: self.ecc_counts()?,
            retired_pages: self.retired_pages()?,
            remapped_rows: self.remapped_rows()?,
            processes: self.processes(|k| k.compute)?,
            graphics_processes: self.processes(|k| k.graphics)?,
            mps_processes: self.processes(|k| k.mps)?,
            board: self.board(),
            power: self.power()?,
            clocks: self.clocks()?,
            pcie: self.pcie()?,
            fan: self.fan()?,
            performance_state: self.performance_state()?,
            memory_temperature_c: self.num32(
                self.node,
                &["temperature", "memory_temp"],
                "memory_temp",
                "C",
            )?,
            bar1: self.bar1()?,
            mig,
            nvlink: None,
            name,
            uuid,
            pci,
        })
    }

    /// `<fb_memory_usage>`-style block in MiB; `None` unless total and used
    /// are both available.
    fn memory(&self, block: Option<XmlNode<'_, '_>>) -> Result<Option<Memory>, SmiXmlError> {
        let Some(block) = block else {
            return Ok(None);
        };
        let total = self.num(block, &["total"], "fb_memory_usage/total", "MiB")?;
        let used = self.num(block, &["used"], "fb_memory_usage/used", "MiB")?;
        let reserved = self.num(block, &["reserved"], "fb_memory_usage/reserved", "MiB")?;
        let free = self.num(block, &["free"], "fb_memory_usage/free", "MiB")?;
        let (Some(total), Some(used)) = (total, used) else {
            return Ok(None);
        };
        // Older captures have no <reserved>: whatever is neither used nor free.
        let reserved = reserved
            .or_else(|| free.map(|f| total.saturating_sub(used).saturating_sub(f)))
            .unwrap_or(0);
        let mib = |v: u64| {
            v.checked_mul(1 << 20)
                .ok_or_else(|| self.bad("fb_memory_usage", format!("{v} MiB overflows bytes")))
        };
        Ok(Some(Memory {
            total: mib(total)?,
            reserved: mib(reserved)?,
            used: mib(used)?,
        }))
    }

    fn thresholds(&self) -> Result<Thresholds, SmiXmlError> {
        let t = |name: &'static str| self.num32(self.node, &["temperature", name], name, "C");
        Ok(Thresholds {
            shutdown: t("gpu_temp_max_threshold")?,
            slowdown: t("gpu_temp_slow_threshold")?,
            gpu_max: t("gpu_temp_max_gpu_threshold")?,
            mem_max: t("gpu_temp_max_mem_threshold")?,
        })
    }

    fn ecc_mode(&self) -> Option<EccMode> {
        let current = self.flag(self.node, &["ecc_mode", "current_ecc"])?;
        let pending = self
            .flag(self.node, &["ecc_mode", "pending_ecc"])
            .unwrap_or(current);
        Some(EccMode { current, pending })
    }

    /// Sum of the available counters named `parts` under `<ecc_errors><section>`;
    /// falls back to the pre-R510 `<single_bit|double_bit><total>` layout.
    fn ecc_sum(
        &self,
        section: &'static str,
        parts: &[&'static str],
        legacy: &'static str,
    ) -> Result<Option<u64>, SmiXmlError> {
        let Some(block) = child(self.node, &["ecc_errors", section]) else {
            return Ok(None);
        };
        let mut total: Option<u64> = None;
        for part in parts {
            if let Some(v) = self.num(block, &[part], part, "")? {
                total = Some(total.unwrap_or(0).saturating_add(v));
            }
        }
        if total.is_none() {
            total = self.num(block, &[legacy, "total"], legacy, "")?;
        }
        Ok(total)
    }

    fn ecc_counts(&self) -> Result<EccCounts, SmiXmlError> {
        const CORRECTED: &[&str] = &["sram_correctable", "dram_correctable"];
        const UNCORRECTED: &[&str] = &[
            "sram_uncorrectable",
            "sram_uncorrectable_parity",
            "sram_uncorrectable_secded",
            "dram_uncorrectable",
        ];
        Ok(EccCounts {
            volatile_corrected: self.ecc_sum("volatile", CORRECTED, "single_bit")?,
            volatile_uncorrected: self.ecc_sum("volatile", UNCORRECTED, "double_bit")?,
            aggregate_corrected: self.ecc_sum("aggregate", CORRECTED, "single_bit")?,
            aggregate_uncorrected: self.ecc_sum("aggregate", UNCORRECTED, "double_bit")?,
        })
    }

    fn page_list(&self, cause: &'static str) -> Result<Option<PageList>, SmiXmlError> {
        let Some(block) = child(self.node, &["retired_pages", cause]) else {
            return Ok(None);
        };
        let Some(count) = self.num32(block, &["retired_count"], "retired_count", "")? else {
            return Ok(None);
        };
        let addresses = child(block, &["retired_pagelist"])
            .map(|list| {
                list.descendants()
                    .filter_map(|n| n.text())
                    .filter_map(|t| {
                        let t = t.trim();
                        t.strip_prefix("0x")
                            .and_then(|h| u64::from_str_radix(h, 16).ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(PageList { count, addresses }))
    }

    fn retired_pages(&self) -> Result<RetiredPages, SmiXmlError> {
        Ok(RetiredPages {
            single_bit: self.page_list("multiple_single_bit_retirement")?,
            double_bit: self.page_list("double_bit_retirement")?,
            pending: self.flag(self.node, &["retired_pages", "pending_retirement"]),
        })
    }

    fn remapped_rows(&self) -> Result<RemappedRows, SmiXmlError> {
        let Some(block) = child(self.node, &["remapped_rows"]) else {
            return Ok(RemappedRows::default());
        };
        Ok(RemappedRows {
            correctable: self.num32(block, &["remapped_row_corr"], "remapped_row_corr", "")?,
            uncorrectable: self.num32(block, &["remapped_row_unc"], "remapped_row_unc", "")?,
            pending: self.flag(block, &["remapped_row_pending"]),
            failure: self.flag(block, &["remapped_row_failure"]),
        })
    }

    /// The processes whose `<type>` `wanted` selects.
    fn processes(
        &self,
        wanted: impl Fn(values::ProcessKind) -> bool,
    ) -> Result<Vec<Process>, SmiXmlError> {
        let Some(block) = child(self.node, &["processes"]) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for info in block.children().filter(|n| n.has_tag_name("process_info")) {
            // "C", "G", "C+G", "M", "M+C": each NVML process list holds
            // the processes of its kind.
            let kind = child_text(info, &["type"]).unwrap_or("C");
            if !wanted(values::process_kind(kind)) {
                continue;
            }
            let pid = self
                .num32(info, &["pid"], "process_info/pid", "")?
                .ok_or_else(|| self.missing("process_info/pid"))?;
            let used_memory = self
                .num(info, &["used_memory"], "process_info/used_memory", "MiB")?
                .and_then(|m| m.checked_mul(1 << 20));
            out.push(Process {
                pid,
                used_memory,
                gpu_instance_id: self.num32(info, &["gpu_instance_id"], "gpu_instance_id", "")?,
                compute_instance_id: self.num32(
                    info,
                    &["compute_instance_id"],
                    "compute_instance_id",
                    "",
                )?,
            });
        }
        Ok(out)
    }

    fn mig(&self, parent_name: &str, parent_uuid: &str) -> Result<Option<Mig>, SmiXmlError> {
        let Some(current_enabled) = self.flag(self.node, &["mig_mode", "current_mig"]) else {
            return Ok(None);
        };
        let pending_enabled = self
            .flag(self.node, &["mig_mode", "pending_mig"])
            .unwrap_or(current_enabled);
        let mut devices = Vec::new();
        if let Some(block) = child(self.node, &["mig_devices"]) {
            for (i, dev) in block
                .children()
                .filter(|n| n.has_tag_name("mig_device"))
                .enumerate()
            {
                devices.push(self.mig_device(i, dev, parent_name, parent_uuid)?);
            }
        }
        // A compute instance that shares its GPU instance with another one is
        // a partial profile (`1c.3g.20gb`) whose GPU-instance size the capture
        // does not give: leave its name and slice counts unknown.
        let shared: Vec<u32> = devices
            .iter()
            .map(|d| d.gpu_instance_id)
            .filter(|gi| devices.iter().filter(|d| d.gpu_instance_id == *gi).count() > 1)
            .collect();
        for d in devices
            .iter_mut()
            .filter(|d| shared.contains(&d.gpu_instance_id))
        {
            d.profile = None;
            d.attributes.gpu_instance_slices = None;
        }
        let max_devices = devices
            .iter()
            .map(|d| d.index.saturating_add(1))
            .max()
            .unwrap_or(0);
        Ok(Some(Mig {
            current_enabled,
            pending_enabled,
            max_devices,
            devices,
        }))
    }

    fn mig_device(
        &self,
        position: usize,
        dev: XmlNode<'_, '_>,
        parent_name: &str,
        parent_uuid: &str,
    ) -> Result<MigDevice, SmiXmlError> {
        let index = match self.num32(dev, &["index"], "mig_device/index", "")? {
            Some(i) => i,
            None => u32::try_from(position).map_err(|_| self.missing("mig_device/index"))?,
        };
        if index > 254 {
            return Err(self.bad(
                "mig_device/index",
                format!("{index} is above the 255 MIG devices a GPU can hold"),
            ));
        }
        let gi = self
            .num32(dev, &["gpu_instance_id"], "mig_device/gpu_instance_id", "")?
            .ok_or_else(|| self.missing("mig_device/gpu_instance_id"))?;
        let ci = self
            .num32(
                dev,
                &["compute_instance_id"],
                "mig_device/compute_instance_id",
                "",
            )?
            .ok_or_else(|| self.missing("mig_device/compute_instance_id"))?;
        let shared = child(dev, &["device_attributes", "shared"]);
        let attr = |name: &'static str| match shared {
            None => Ok(None),
            Some(s) => self.num32(s, &[name], name, ""),
        };
        let sm = attr("multiprocessor_count")?;
        let ofa = attr("ofa_count")?;
        let memory = self.memory(child(dev, &["fb_memory_usage"]))?;
        let profile = match (sm, memory) {
            (Some(sm), Some(m)) => {
                derive::mig_profile_name(parent_name, sm, m.total >> 20, ofa.unwrap_or(0))
            }
            _ => None,
        };
        let slices = sm.and_then(|sm| derive::mig_compute_slices(parent_name, sm));
        let uuid = child_text(dev, &["uuid"])
            .map(str::trim)
            .filter(|u| u.starts_with("MIG-"))
            .map(str::to_string)
            .unwrap_or_else(|| derive::mig_uuid(parent_uuid, gi, ci));
        Ok(MigDevice {
            index,
            gpu_instance_id: gi,
            compute_instance_id: ci,
            uuid,
            profile,
            memory,
            attributes: MigAttributes {
                multiprocessor_count: sm,
                copy_engine_count: attr("copy_engine_count")?,
                decoder_count: attr("decoder_count")?,
                encoder_count: attr("encoder_count")?,
                jpeg_count: attr("jpg_count")?,
                ofa_count: ofa,
                gpu_instance_slices: slices,
                compute_instance_slices: slices,
            },
        })
    }
}
