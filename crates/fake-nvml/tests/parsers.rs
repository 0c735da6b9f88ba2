//! The two parsers against every fixture: counts, names, memory, minors, bus ids, MIG instances as the files give them; and no panic on garbage.

use std::path::{Path, PathBuf};

use nvidia_ml::config::{detect, Format};
use nvidia_ml::model::{Memory, Source};
use nvidia_ml::pci::PciAddress;
use nvidia_ml::{load_config, parse_config, parse_state};
use proptest::prelude::*;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

const FIXTURES: &[&str] = &[
    "nvml-profiles/mock-nvml-config-a100.yaml",
    "nvml-profiles/mock-nvml-config-h100.yaml",
    "nvidia-smi-xml/a100-sxm4-v12.xml",
    "nvidia-smi-xml/dual_a5000-v13.xml",
    "nvidia-smi-xml/rtx-3090-v12.xml",
    "nvidia-smi-xml/tesla-t4.xml",
];

const MIB: u64 = 1 << 20;

fn bus(s: &str) -> PciAddress {
    PciAddress::parse(s).unwrap()
}

#[test]
fn a100_profile() {
    let node = load_config(&fixture(FIXTURES[0])).unwrap();
    assert_eq!(node.source, Source::Profile);
    assert_eq!(node.driver_version, "550.163.01");
    assert_eq!(node.nvml_version.as_deref(), Some("12.550.163.01"));
    assert_eq!(node.cuda_driver_version, Some(12040));
    assert_eq!(node.gpus.len(), 8);
    let buses = ["07", "0F", "47", "4E", "87", "90", "B7", "BD"];
    for (i, g) in node.gpus.iter().enumerate() {
        assert_eq!(g.name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(
            g.uuid,
            format!("GPU-12345678-1234-1234-1234-12345678000{i}")
        );
        assert_eq!(g.minor_number, Some(i as u32));
        assert_eq!(g.pci, bus(&format!("0000:{}:00.0", buses[i])));
        assert_eq!(g.pci_device_id, Some(0x20B0_10DE));
        assert_eq!(g.pci_subsystem_id, Some(0x1347_10DE));
        assert_eq!(
            g.memory,
            Some(Memory {
                total: 42_949_672_960,
                reserved: 611_319_808,
                used: 0
            })
        );
        assert_eq!(g.memory.unwrap().free(), 42_338_353_152);
        assert_eq!(g.compute_capability, Some((8, 0)));
        assert_eq!(g.numa_node, Some(if i < 4 { 0 } else { 1 }));
        assert_eq!(g.temperature_c, Some(33));
        assert_eq!(g.thresholds.shutdown, Some(92));
        assert_eq!(g.thresholds.slowdown, Some(87));
        assert_eq!(g.thresholds.gpu_max, Some(83));
        assert_eq!(g.thresholds.mem_max, None);
        assert_eq!(g.utilization.gpu, Some(0));
        assert!(g.ecc_mode.unwrap().current);
        assert_eq!(g.ecc_counts.volatile_corrected, Some(0));
        assert_eq!(g.ecc_counts.aggregate_uncorrected, Some(0));
        assert_eq!(g.retired_pages.single_bit.as_ref().unwrap().count, 0);
        assert_eq!(g.retired_pages.pending, Some(false));
        assert_eq!(g.remapped_rows.failure, Some(false));
        assert!(g.processes.is_empty());
        let mig = g.mig.as_ref().unwrap();
        assert!(!mig.current_enabled && !mig.pending_enabled);
        assert_eq!(mig.max_devices, 7);
        assert!(mig.devices.is_empty());
        let links = g.nvlink.as_ref().unwrap();
        assert_eq!(links.len(), 12);
        assert!(links.iter().all(|l| l.active));
        assert_eq!(links[0].remote, Some(bus("0000:01:00.0")));
        assert_eq!(links[5].remote, Some(bus("0000:06:00.0")));
        assert_eq!(links[6].remote, Some(bus("0000:01:00.0")));
    }
}

#[test]
fn h100_profile() {
    let node = load_config(&fixture(FIXTURES[1])).unwrap();
    assert_eq!(node.gpus.len(), 8);
    let buses = ["1A", "1B", "4A", "4B", "8A", "8B", "CA", "CB"];
    for (i, g) in node.gpus.iter().enumerate() {
        assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(
            g.uuid,
            format!("GPU-01000100-0000-0000-0000-00000000000{i}")
        );
        assert_eq!(g.minor_number, Some(i as u32));
        assert_eq!(g.pci, bus(&format!("0000:{}:00.0", buses[i])));
        assert_eq!(g.memory.unwrap().total, 85_899_345_920);
        assert_eq!(g.memory.unwrap().reserved, 1_073_741_824);
        assert_eq!(g.compute_capability, Some((9, 0)));
        assert_eq!(g.numa_node, Some(if i < 4 { 0 } else { 1 }));
        assert_eq!(g.temperature_c, Some(34));
        let links = g.nvlink.as_ref().unwrap();
        assert_eq!(links.len(), 18);
        assert_eq!(links[17].remote, Some(bus("0000:06:00.0")));
    }
}

#[test]
fn a100_capture_with_mig() {
    let node = load_config(&fixture(FIXTURES[2])).unwrap();
    assert_eq!(node.source, Source::SmiXml);
    assert_eq!(node.driver_version, "535.54.03");
    assert_eq!(node.cuda_driver_version, Some(12020));
    assert_eq!(node.nvml_version.as_deref(), Some("12.535.54.03"));
    assert_eq!(node.gpus.len(), 1);
    let g = &node.gpus[0];
    assert_eq!(g.name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(g.uuid, "GPU-513536b6-7d19-9063-b049-1e69664bb298");
    assert_eq!(g.minor_number, Some(1));
    assert_eq!(g.pci, bus("00000000:01:00.0"));
    assert_eq!(g.pci_device_id, Some(0x20B2_10DE));
    assert_eq!(
        g.memory,
        Some(Memory {
            total: 81920 * MIB,
            reserved: 869 * MIB,
            used: 50 * MIB
        })
    );
    assert_eq!(g.compute_capability, Some((8, 0)));
    assert_eq!(g.numa_node, None);
    assert_eq!(g.temperature_c, Some(27));
    assert_eq!(g.thresholds.shutdown, Some(92));
    assert_eq!(g.thresholds.slowdown, Some(89));
    assert_eq!(g.thresholds.gpu_max, Some(85));
    assert_eq!(g.thresholds.mem_max, Some(95));
    assert_eq!(g.utilization.gpu, None, "N/A in MIG mode");
    assert_eq!(g.ecc_counts.volatile_corrected, Some(0));
    assert_eq!(g.retired_pages.single_bit, None, "N/A");
    assert_eq!(g.retired_pages.pending, None);
    assert_eq!(g.remapped_rows.correctable, None, "N/A");
    let mig = g.mig.as_ref().unwrap();
    assert!(mig.current_enabled && mig.pending_enabled);
    assert_eq!(mig.devices.len(), 4);
    assert_eq!(mig.max_devices, 4);
    for (i, d) in mig.devices.iter().enumerate() {
        assert_eq!(d.index, i as u32);
        assert_eq!(d.gpu_instance_id, 3 + i as u32);
        assert_eq!(d.compute_instance_id, 0);
        assert_eq!(d.profile.as_deref(), Some("1g.20gb"));
        assert_eq!(d.memory.unwrap().total, 19968 * MIB);
        assert_eq!(d.memory.unwrap().used, 12 * MIB);
        assert_eq!(d.attributes.multiprocessor_count, Some(14));
        assert_eq!(d.attributes.decoder_count, Some(1));
        assert_eq!(d.attributes.gpu_instance_slices, Some(1));
        assert!(d.uuid.starts_with("MIG-"));
    }
    let mut uuids: Vec<_> = mig.devices.iter().map(|d| &d.uuid).collect();
    uuids.dedup();
    assert_eq!(uuids.len(), 4);
}

#[test]
fn dual_a5000_capture() {
    let node = load_config(&fixture(FIXTURES[3])).unwrap();
    assert_eq!(node.driver_version, "590.44.01");
    assert_eq!(node.cuda_driver_version, Some(13010));
    assert_eq!(node.gpus.len(), 2);
    let (a, b) = (&node.gpus[0], &node.gpus[1]);
    assert_eq!(a.name, "NVIDIA RTX A5000");
    assert_eq!(b.name, "NVIDIA RTX A5000");
    assert_eq!(a.uuid, "GPU-12345678-aaaa-bbbb-cccc-0123456789ab");
    assert_eq!(b.uuid, "GPU-12345678-aaaa-bbbb-cccc-0123456789cd");
    // Minor numbers are not indices.
    assert_eq!(a.minor_number, Some(1));
    assert_eq!(b.minor_number, Some(0));
    assert_eq!(a.pci, bus("0000:81:00.0"));
    assert_eq!(b.pci, bus("0000:C1:00.0"));
    assert_eq!(
        a.memory,
        Some(Memory {
            total: 24564 * MIB,
            reserved: 450 * MIB,
            used: 22437 * MIB
        })
    );
    assert_eq!(b.memory.unwrap().used, 17253 * MIB);
    assert_eq!(a.compute_capability, Some((8, 6)));
    assert!(!a.ecc_mode.unwrap().current);
    assert_eq!(a.ecc_counts.volatile_corrected, None, "all N/A");
    assert_eq!(a.remapped_rows.correctable, Some(0));
    assert_eq!(a.remapped_rows.pending, Some(false));
    assert_eq!(a.temperature_c, Some(13));
    assert_eq!(b.temperature_c, Some(15));
    assert_eq!(a.thresholds.slowdown, Some(95));
    assert_eq!(a.processes.len(), 1);
    assert_eq!(a.processes[0].pid, 100477);
    assert_eq!(a.processes[0].used_memory, Some(22430 * MIB));
    assert_eq!(a.processes[0].gpu_instance_id, None);
    assert_eq!(b.processes[0].used_memory, Some(17246 * MIB));
    assert!(a.mig.is_none(), "MIG N/A");
}

#[test]
fn rtx_3090_capture() {
    let node = load_config(&fixture(FIXTURES[4])).unwrap();
    assert_eq!(node.driver_version, "525.147.05");
    assert_eq!(node.cuda_driver_version, Some(12000));
    assert_eq!(node.gpus.len(), 1);
    let g = &node.gpus[0];
    assert_eq!(g.name, "NVIDIA GeForce RTX 3090");
    assert_eq!(g.minor_number, Some(0));
    assert_eq!(g.pci, bus("0000:00:10.0"));
    assert_eq!(g.pci_device_id, None, "[REDACTED]");
    assert_eq!(
        g.memory,
        Some(Memory {
            total: 24576 * MIB,
            reserved: 316 * MIB,
            used: MIB
        })
    );
    assert_eq!(g.compute_capability, Some((8, 6)));
    assert_eq!(g.ecc_mode, None);
    assert_eq!(g.temperature_c, Some(37));
    assert_eq!(g.thresholds.gpu_max, Some(93));
    assert!(g.processes.is_empty());
    assert!(g.mig.is_none());
}

#[test]
fn tesla_t4_capture() {
    let node = load_config(&fixture(FIXTURES[5])).unwrap();
    assert_eq!(node.driver_version, "515.105.01");
    assert_eq!(node.cuda_driver_version, Some(11070));
    let g = &node.gpus[0];
    assert_eq!(g.name, "Tesla T4");
    assert_eq!(g.uuid, "GPU-d37e67a5-91dd-3774-a5cb-99096249601a");
    assert_eq!(g.minor_number, Some(0));
    assert_eq!(g.pci, bus("0000:00:1E.0"));
    assert_eq!(
        g.memory,
        Some(Memory {
            total: 15360 * MIB,
            reserved: 388 * MIB,
            used: 1032 * MIB
        })
    );
    assert_eq!(g.compute_capability, Some((7, 5)));
    assert!(g.ecc_mode.unwrap().current);
    assert_eq!(g.ecc_counts.aggregate_uncorrected, Some(0));
    assert_eq!(g.retired_pages.single_bit.as_ref().unwrap().count, 0);
    assert_eq!(g.retired_pages.pending, Some(false));
    assert_eq!(g.remapped_rows.correctable, None);
    assert_eq!(g.utilization.gpu, Some(0));
    assert_eq!(g.thresholds.shutdown, Some(96));
    assert_eq!(g.thresholds.mem_max, None);
    // Xorg is a graphics process: not in the compute list.
    assert_eq!(g.processes.len(), 1);
    assert_eq!(g.processes[0].pid, 5762);
    assert_eq!(g.processes[0].used_memory, Some(1005 * MIB));
}

#[test]
fn format_is_detected_by_content_whatever_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let xml_as_yaml = dir.path().join("capture.yaml");
    std::fs::copy(fixture(FIXTURES[5]), &xml_as_yaml).unwrap();
    assert_eq!(load_config(&xml_as_yaml).unwrap().source, Source::SmiXml);
    let yaml_as_xml = dir.path().join("profile.xml");
    std::fs::copy(fixture(FIXTURES[0]), &yaml_as_xml).unwrap();
    assert_eq!(load_config(&yaml_as_xml).unwrap().source, Source::Profile);
}

#[test]
fn profile_errors_name_the_device_and_field() {
    let p = Path::new("p.yaml");
    let err = parse_config(
        p,
        "system: {driver_version: \"1\"}\ndevices:\n  - index: 0\n    name: x\n    uuid: GPU-1\n",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("devices[0]") && err.to_string().contains("pci.bus_id"),
        "{err}"
    );
    let err = parse_config(p, "system: {}\ndevices: []\n").unwrap_err();
    assert!(err.to_string().contains("driver_version"), "{err}");
    let two = "system: {driver_version: \"1\"}\ndevice_defaults: {name: x}\ndevices:\n  - {index: 0, uuid: a, pci: {bus_id: \"0000:01:00.0\"}}\n  - {index: 0, uuid: b, pci: {bus_id: \"0000:02:00.0\"}}\n";
    let err = parse_config(p, two).unwrap_err();
    assert!(err.to_string().contains("both have index 0"), "{err}");
    let bad_temp = "system: {driver_version: \"1\"}\ndevices:\n  - {index: 0, name: x, uuid: a, pci: {bus_id: \"0000:01:00.0\"}, thermal: {temperature_gpu_c: hot}}\n";
    let err = parse_config(p, bad_temp).unwrap_err();
    assert!(
        err.to_string().contains("thermal.temperature_gpu_c"),
        "{err}"
    );
}

#[test]
fn capture_errors_name_the_gpu_and_field() {
    let p = Path::new("c.xml");
    let text = std::fs::read_to_string(fixture(FIXTURES[5])).unwrap();
    let broken = text.replace("<gpu_temp>40 C</gpu_temp>", "<gpu_temp>40 F</gpu_temp>");
    let err = parse_config(p, &broken).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("00000000:00:1E.0") && msg.contains("gpu_temp"),
        "{msg}"
    );
    let no_uuid = text.replace("<uuid>GPU-d37e67a5-91dd-3774-a5cb-99096249601a</uuid>", "");
    assert!(parse_config(p, &no_uuid)
        .unwrap_err()
        .to_string()
        .contains("<uuid>"));
}

fn fixture_texts() -> Vec<(String, String)> {
    FIXTURES
        .iter()
        .map(|f| (f.to_string(), std::fs::read_to_string(fixture(f)).unwrap()))
        .collect()
}

fn truncate_at_char(s: &str, at: usize) -> &str {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    &s[..at]
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_config(Path::new("r"), &text);
        let mut xml = String::from("<nvidia_smi_log>");
        xml.push_str(&text);
        let _ = parse_config(Path::new("r"), &xml);
        let _ = parse_state(Path::new("r"), &bytes);
    }

    #[test]
    fn truncated_fixtures_never_panic(which in 0..FIXTURES.len(), frac in 0.0f64..1.0) {
        let texts = fixture_texts();
        let (_, text) = &texts[which];
        let cut = truncate_at_char(text, (text.len() as f64 * frac) as usize);
        if let Ok(node) = parse_config(Path::new("t"), cut) {
            // A prefix that still parses (YAML can) is a smaller node, never a bigger one.
            let full = parse_config(Path::new("t"), text).unwrap();
            prop_assert!(node.gpus.len() <= full.gpus.len());
        }
        if detect(cut) == Format::SmiXml && !cut.trim_end().ends_with("</nvidia_smi_log>") {
            prop_assert!(parse_config(Path::new("t"), cut).is_err());
        }
    }

    #[test]
    fn garbled_fixtures_never_panic(
        which in 0..FIXTURES.len(),
        edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 1..16),
    ) {
        let texts = fixture_texts();
        let mut bytes = texts[which].1.clone().into_bytes();
        for (pos, b) in edits {
            let i = ((bytes.len() as f64) * pos) as usize % bytes.len();
            bytes[i] = b;
        }
        let _ = parse_config(Path::new("g"), &String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn truncated_state_never_panics(frac in 0.0f64..1.0) {
        let example = br#"{ "gpus": { "3": { "temperature_c": 95, "ecc": {"volatile_corrected": 1},
            "processes": [{"pid": 123, "used_memory_bytes": 1000000}], "lost": false } },
            "events": [ {"gpu": 3, "type": "xid", "data": 79}, {"gpu": 1, "type": "double_bit_ecc"} ] }"#;
        let cut = &example[..(example.len() as f64 * frac) as usize];
        prop_assert!(parse_state(Path::new("s"), cut).is_err());
    }
}

#[test]
fn mig_names_are_left_unknown_when_they_cannot_be_derived() {
    let text = std::fs::read_to_string(fixture(FIXTURES[2])).unwrap();
    // Two compute instances in GPU instance 3: a partial profile.
    let shared = text.replacen(
        "<gpu_instance_id>4</gpu_instance_id>",
        "<gpu_instance_id>3</gpu_instance_id>",
        1,
    );
    let node = parse_config(Path::new("a.xml"), &shared).unwrap();
    let devs = &node.gpus[0].mig.as_ref().unwrap().devices;
    assert_eq!(devs[0].profile, None);
    assert_eq!(devs[1].profile, None);
    assert_eq!(devs[2].profile.as_deref(), Some("1g.20gb"));
    // An SM count no A100 profile has.
    let odd = text.replacen(
        "<multiprocessor_count>14</multiprocessor_count>",
        "<multiprocessor_count>15</multiprocessor_count>",
        1,
    );
    let node = parse_config(Path::new("a.xml"), &odd).unwrap();
    assert_eq!(node.gpus[0].mig.as_ref().unwrap().devices[0].profile, None);
}
