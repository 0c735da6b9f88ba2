//! Merging two backends' views of the same GPUs by PCI bus id: the
//! primary (NVML) wins, the secondary (procfs/sysfs) fills what the
//! primary could not know, and every disagreement becomes a warning.

use crate::inventory::BackendReport;
use crate::model::{normalize_bus_id, Ecc, GpuInfo, Thermal};

/// Merge two reports (see [`merge_labeled`]), naming the backends
/// "primary" and "secondary" in warnings.
pub fn merge(primary: BackendReport, secondary: BackendReport) -> (Vec<GpuInfo>, Vec<String>) {
    merge_labeled(primary, secondary, ("primary", "secondary"))
}

/// Merge two reports by normalised PCI bus id (for a GPU whose bus id the
/// primary could not read: by UUID, or by index when it is lost). For a
/// GPU both saw, the
/// primary's facts are kept and its `None` / empty fields filled from the
/// secondary; its device minor is taken from the secondary only when the
/// primary lost the GPU (a lost GPU's minor is unknown). A minor or UUID
/// both know but disagree on is a warning naming both values (primary
/// kept). A GPU only one backend saw is kept, with a warning.
///
/// Returns GPUs sorted by index (then bus id), and the warnings: both
/// reports' own first, then the merge's.
pub fn merge_labeled(
    primary: BackendReport,
    secondary: BackendReport,
    (first, second): (&str, &str),
) -> (Vec<GpuInfo>, Vec<String>) {
    let mut backend_warnings = primary.warnings;
    backend_warnings.extend(secondary.warnings);
    let mut warnings = Vec::new();
    let mut others: Vec<Option<GpuInfo>> = secondary.gpus.into_iter().map(Some).collect();
    let mut pairs: Vec<(GpuInfo, Option<GpuInfo>)> =
        primary.gpus.into_iter().map(|gpu| (gpu, None)).collect();
    // By bus id first, so a fallback match below cannot take a GPU that
    // another one matches exactly.
    for (gpu, found) in &mut pairs {
        if let Some(key) = bus_key(&gpu.pci_bus_id) {
            *found = take(&mut others, |o| {
                bus_key(&o.pci_bus_id).as_ref() == Some(&key)
            });
        }
    }
    // A GPU whose bus id the primary could not read (lost): by UUID, or
    // for a lost GPU by index (both backends number in PCI bus order).
    for (gpu, found) in &mut pairs {
        if found.is_some() || bus_key(&gpu.pci_bus_id).is_some() {
            continue;
        }
        if !gpu.uuid.is_empty() {
            *found = take(&mut others, |o| o.uuid.eq_ignore_ascii_case(&gpu.uuid));
        } else if gpu.lost {
            *found = take(&mut others, |o| o.index == gpu.index);
        }
    }
    let mut gpus = Vec::with_capacity(pairs.len() + others.len());
    for (mut gpu, found) in pairs {
        match found {
            Some(other) => fill(&mut gpu, other, (first, second), &mut warnings),
            None => warnings.push(format!(
                "GPU {} ({}) was seen by the {first} backend only",
                gpu.index,
                shown_bus(&gpu.pci_bus_id)
            )),
        }
        gpus.push(gpu);
    }
    for other in others.into_iter().flatten() {
        warnings.push(format!(
            "GPU {} ({}) was seen by the {second} backend only",
            other.index,
            shown_bus(&other.pci_bus_id)
        ));
        gpus.push(other);
    }
    gpus.sort_by(|a, b| (a.index, &a.pci_bus_id).cmp(&(b.index, &b.pci_bus_id)));
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    backend_warnings.extend(warnings);
    (gpus, backend_warnings)
}

/// Take the first remaining GPU that `matches`.
fn take(others: &mut [Option<GpuInfo>], matches: impl Fn(&GpuInfo) -> bool) -> Option<GpuInfo> {
    others
        .iter_mut()
        .find(|o| o.as_ref().is_some_and(&matches))
        .and_then(Option::take)
}

fn bus_key(raw: &str) -> Option<String> {
    normalize_bus_id(raw)
}

fn shown_bus(raw: &str) -> &str {
    if raw.is_empty() {
        "bus id unknown"
    } else {
        raw
    }
}

/// Fill `gpu`'s gaps from `other` (the same GPU seen by the secondary).
fn fill(
    gpu: &mut GpuInfo,
    other: GpuInfo,
    (first, second): (&str, &str),
    warnings: &mut Vec<String>,
) {
    if bus_key(&gpu.pci_bus_id).is_none() && !other.pci_bus_id.is_empty() {
        gpu.pci_bus_id = other.pci_bus_id.clone();
    }
    let bus = gpu.pci_bus_id.clone();
    if gpu.lost {
        gpu.minor = other.minor;
    } else if gpu.minor != other.minor {
        warnings.push(format!(
            "GPU {bus}: device minor {} ({first}) disagrees with {} ({second}); using {}",
            gpu.minor, other.minor, gpu.minor
        ));
    }
    if gpu.uuid.is_empty() {
        gpu.uuid = other.uuid;
    } else if !other.uuid.is_empty() && !gpu.uuid.eq_ignore_ascii_case(&other.uuid) {
        warnings.push(format!(
            "GPU {bus}: UUID {} ({first}) disagrees with {} ({second}); using {}",
            gpu.uuid, other.uuid, gpu.uuid
        ));
    }
    if gpu.name.is_empty() {
        gpu.name = other.name;
    }
    or_fill(&mut gpu.memory_total_bytes, other.memory_total_bytes);
    or_fill(&mut gpu.memory_used_bytes, other.memory_used_bytes);
    or_fill(&mut gpu.compute_capability, other.compute_capability);
    or_fill(&mut gpu.numa_node, other.numa_node);
    or_fill(&mut gpu.local_cpus, other.local_cpus);
    if gpu.nvlink_peers.is_empty() {
        gpu.nvlink_peers = other.nvlink_peers;
    }
    or_fill(&mut gpu.mig, other.mig);
    fill_thermal(&mut gpu.thermal, other.thermal);
    fill_ecc(&mut gpu.ecc, other.ecc);
    or_fill(&mut gpu.utilization_gpu_pct, other.utilization_gpu_pct);
    or_fill(
        &mut gpu.utilization_memory_pct,
        other.utilization_memory_pct,
    );
    if gpu.processes.is_empty() {
        gpu.processes = other.processes;
    }
    gpu.lost |= other.lost;
}

fn or_fill<T>(mine: &mut Option<T>, theirs: Option<T>) {
    if mine.is_none() {
        *mine = theirs;
    }
}

fn fill_thermal(mine: &mut Thermal, theirs: Thermal) {
    or_fill(&mut mine.current_c, theirs.current_c);
    or_fill(&mut mine.slowdown_c, theirs.slowdown_c);
    or_fill(&mut mine.shutdown_c, theirs.shutdown_c);
}

fn fill_ecc(mine: &mut Ecc, theirs: Ecc) {
    or_fill(&mut mine.enabled, theirs.enabled);
    or_fill(&mut mine.volatile_corrected, theirs.volatile_corrected);
    or_fill(&mut mine.volatile_uncorrected, theirs.volatile_uncorrected);
    or_fill(&mut mine.aggregate_corrected, theirs.aggregate_corrected);
    or_fill(
        &mut mine.aggregate_uncorrected,
        theirs.aggregate_uncorrected,
    );
    or_fill(&mut mine.retired_pages, theirs.retired_pages);
    or_fill(
        &mut mine.retired_pages_pending,
        theirs.retired_pages_pending,
    );
    or_fill(
        &mut mine.remapped_rows_uncorrectable,
        theirs.remapped_rows_uncorrectable,
    );
    or_fill(
        &mut mine.remapped_rows_pending,
        theirs.remapped_rows_pending,
    );
    or_fill(
        &mut mine.remapped_rows_failure,
        theirs.remapped_rows_failure,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, bus: &str, minor: u32, uuid: &str) -> GpuInfo {
        GpuInfo {
            index,
            uuid: uuid.into(),
            name: "NVIDIA A100-SXM4-40GB".into(),
            minor,
            pci_bus_id: bus.into(),
            ..GpuInfo::default()
        }
    }

    fn report(gpus: Vec<GpuInfo>) -> BackendReport {
        BackendReport {
            gpus,
            ..BackendReport::default()
        }
    }

    #[test]
    fn secondary_fills_gaps_primary_wins() {
        let mut nvml = gpu(0, "0000:07:00.0", 0, "GPU-a");
        nvml.memory_total_bytes = Some(40 << 30);
        nvml.thermal.current_c = Some(33);
        let mut procfs = gpu(0, "00000000:07:00.0", 0, "GPU-a");
        procfs.name = "A100 from procfs".into();
        procfs.numa_node = Some(1);
        procfs.local_cpus = Some("64-127".into());
        procfs.memory_total_bytes = Some(1);
        let (gpus, warnings) = merge(report(vec![nvml]), report(vec![procfs]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert_eq!(g.name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(g.memory_total_bytes, Some(40 << 30));
        assert_eq!(g.numa_node, Some(1));
        assert_eq!(g.local_cpus.as_deref(), Some("64-127"));
        assert_eq!(g.thermal.current_c, Some(33));
    }

    #[test]
    fn disagreeing_minor_and_uuid_warn_with_both_values() {
        let (gpus, warnings) = merge_labeled(
            report(vec![gpu(0, "0000:07:00.0", 2, "GPU-a")]),
            report(vec![gpu(0, "0000:07:00.0", 5, "GPU-b")]),
            ("NVML", "procfs"),
        );
        assert_eq!(gpus[0].minor, 2);
        assert_eq!(gpus[0].uuid, "GPU-a");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("minor 2 (NVML)") && warnings[0].contains("5 (procfs)"));
        assert!(warnings[1].contains("GPU-a (NVML)") && warnings[1].contains("GPU-b (procfs)"));
    }

    #[test]
    fn a_lost_gpu_takes_minor_and_identity_from_the_secondary() {
        let mut nvml = gpu(1, "0000:0f:00.0", 0, "");
        nvml.lost = true;
        nvml.name.clear();
        let (gpus, warnings) = merge(
            report(vec![nvml]),
            report(vec![gpu(1, "0000:0f:00.0", 7, "GPU-x")]),
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((gpus[0].minor, gpus[0].uuid.as_str()), (7, "GPU-x"));
        assert!(gpus[0].lost);
        assert_eq!(gpus[0].name, "NVIDIA A100-SXM4-40GB");
    }

    #[test]
    fn a_lost_gpu_without_bus_id_matches_by_index_after_exact_matches() {
        let mut lost = gpu(1, "", 0, "");
        lost.lost = true;
        let (gpus, warnings) = merge(
            report(vec![gpu(0, "0000:07:00.0", 0, "GPU-a"), lost]),
            report(vec![
                gpu(0, "0000:07:00.0", 0, "GPU-a"),
                gpu(1, "0000:0f:00.0", 4, "GPU-b"),
            ]),
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].pci_bus_id, "0000:0f:00.0");
        assert_eq!((gpus[1].minor, gpus[1].uuid.as_str()), (4, "GPU-b"));
        assert!(gpus[1].lost);
    }

    #[test]
    fn a_gpu_without_bus_id_matches_by_uuid() {
        let (gpus, warnings) = merge(
            report(vec![gpu(0, "garbage", 3, "GPU-B")]),
            report(vec![gpu(0, "0000:0f:00.0", 3, "gpu-b")]),
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].pci_bus_id, "0000:0f:00.0");
    }

    #[test]
    fn one_sided_gpus_are_kept_with_a_warning() {
        let (gpus, warnings) = merge_labeled(
            report(vec![gpu(0, "0000:07:00.0", 0, "GPU-a")]),
            report(vec![gpu(1, "0000:0f:00.0", 1, "GPU-b")]),
            ("NVML", "procfs"),
        );
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].pci_bus_id, "0000:07:00.0");
        assert_eq!(gpus[1].pci_bus_id, "0000:0f:00.0");
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("0000:07:00.0") && warnings[0].contains("NVML backend only"));
        assert!(
            warnings[1].contains("0000:0f:00.0") && warnings[1].contains("procfs backend only")
        );
    }

    #[test]
    fn backend_warnings_come_first_and_unknown_gpus_never_match() {
        let mut a = report(vec![gpu(0, "", 0, "")]);
        a.warnings.push("nvml said".into());
        let mut b = report(vec![gpu(0, "", 0, "")]);
        b.warnings.push("procfs said".into());
        let (gpus, warnings) = merge(a, b);
        assert_eq!(gpus.len(), 2);
        assert_eq!(&warnings[..2], ["nvml said", "procfs said"]);
        assert!(warnings[2].contains("bus id unknown"));
    }
}
