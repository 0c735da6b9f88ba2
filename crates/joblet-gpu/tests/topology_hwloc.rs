//! hwloc topology from the fixture XMLs (hwloc 3.x captures of a DGX-2
//! and of a 2-socket Xeon with Tesla GPUs), from this machine, and from
//! files that are not topologies.

use joblet_gpu::model::GpuLocality;
use joblet_gpu::topology::hwloc::hwloc_topology;
use joblet_gpu::topology::{discover_topology, TopologyOptions};
use joblet_gpu::InventoryError;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hwloc")
        .join(name)
}

fn gpu(bus: &str, node: u32, cpus: &str) -> GpuLocality {
    GpuLocality {
        pci_bus_id: bus.to_string(),
        numa_node: Some(node),
        local_cpus: Some(cpus.to_string()),
    }
}

#[test]
fn dgx2_has_two_sockets_and_sixteen_v100s() {
    let path = fixture("nvidiaDGX2.xml");
    let topo = hwloc_topology(Some(&path)).unwrap();
    assert_eq!(topo.source, format!("hwloc-xml:{}", path.display()));

    // <object type="NUMANode" os_index="0" cpuset="0x00000003" ... local_memory="810234351616"/>
    // <object type="NUMANode" os_index="1" cpuset="0x03000000" ... local_memory="811737923584"/>
    let nodes: Vec<(u32, &str, Option<u64>)> = topo
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.as_str(), n.memory_bytes))
        .collect();
    assert_eq!(
        nodes,
        [
            (0, "0-1", Some(810_234_351_616)),
            (1, "24-25", Some(811_737_923_584))
        ]
    );
    let packages: Vec<(u32, Vec<u32>)> = topo
        .packages
        .iter()
        .map(|p| (p.os_index, p.numa_nodes.clone()))
        .collect();
    assert_eq!(packages, [(0, vec![0]), (1, vec![1])]);

    // The 16 `pci_type="0302 [10de:1db8] ..."` devices (V100-SXM3); the 12
    // NVSwitches (class 0680) are not GPUs.
    let socket0 = ["34", "36", "39", "3b", "57", "59", "5c", "5e"];
    let socket1 = ["b7", "b9", "bc", "be", "e0", "e2", "e5", "e7"];
    let mut expected: Vec<GpuLocality> = socket0
        .iter()
        .map(|b| gpu(&format!("0000:{b}:00.0"), 0, "0-1"))
        .collect();
    expected.extend(
        socket1
            .iter()
            .map(|b| gpu(&format!("0000:{b}:00.0"), 1, "24-25")),
    );
    assert_eq!(topo.gpu_numa, expected);
}

#[test]
fn two_socket_xeon_keeps_only_the_nvidia_display_devices() {
    let topo = hwloc_topology(Some(&fixture("32em64t-2n8c2t-pci-normalio.xml"))).unwrap();
    // Package 0 cpuset 0x00ff00ff, package 1 0xff00ff00; 32 GiB-ish each.
    let nodes: Vec<(u32, &str, Option<u64>)> = topo
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.as_str(), n.memory_bytes))
        .collect();
    assert_eq!(
        nodes,
        [
            (0, "0-7,16-23", Some(34_330_173_440)),
            (1, "8-15,24-31", Some(34_359_738_368))
        ]
    );
    assert_eq!(topo.packages.len(), 2);
    assert_eq!(topo.packages[1].numa_nodes, [1]);
    // Three Tesla M2075 (10de:1094, class 0302); the Matrox VGA (102b) at
    // 05:03.0 and the Radeon (1002) at 84:00.1 are not NVIDIA.
    assert_eq!(
        topo.gpu_numa,
        [
            gpu("0000:03:00.0", 0, "0-7,16-23"),
            gpu("0000:83:00.0", 1, "8-15,24-31"),
            gpu("0000:84:00.0", 1, "8-15,24-31"),
        ]
    );
}

#[test]
fn this_machine_has_numa_nodes_and_no_nvidia_gpu() {
    let topo = hwloc_topology(None).unwrap();
    assert_eq!(topo.source, "hwloc");
    assert!(!topo.numa_nodes.is_empty());
    assert!(topo.numa_nodes.iter().any(|n| !n.cpus.is_empty()));
    assert!(!topo.packages.is_empty());
    let has_nvidia = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                std::fs::read_to_string(e.path().join("vendor"))
                    .map(|v| v.trim() == "0x10de")
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false);
    assert_eq!(!topo.gpu_numa.is_empty(), has_nvidia);
}

#[test]
fn discover_uses_the_configured_xml() {
    let opts = TopologyOptions {
        sys_root: PathBuf::from("/nonexistent-sys"),
        hwloc: true,
        hwloc_xml: Some(fixture("nvidiaDGX2.xml")),
    };
    let topo = discover_topology(&opts).unwrap();
    assert!(topo.source.starts_with("hwloc-xml:"));
    assert_eq!(topo.gpu_numa.len(), 16);
}

#[test]
fn unusable_xml_files_are_errors_not_fallbacks() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.xml");
    let not_xml = dir.path().join("garbage.xml");
    std::fs::write(&not_xml, "this is <not xml").unwrap();
    let not_topology = dir.path().join("html.xml");
    std::fs::write(&not_topology, "<html><body/></html>").unwrap();
    let bad_topology = dir.path().join("bad.xml");
    std::fs::write(
        &bad_topology,
        r#"<?xml version="1.0"?><topology version="2.0"><object type="Nonsense"/></topology>"#,
    )
    .unwrap();

    assert!(matches!(
        hwloc_topology(Some(&missing)),
        Err(InventoryError::Read { path, .. }) if path == missing
    ));
    for file in [&not_xml, &not_topology] {
        match hwloc_topology(Some(file)) {
            Err(InventoryError::Parse { path, .. }) => assert_eq!(&path, file),
            other => panic!("{}: {other:?}", file.display()),
        }
    }
    let err = hwloc_topology(Some(&bad_topology)).unwrap_err();
    assert!(matches!(err, InventoryError::Hwloc { .. }), "{err:?}");
    assert!(err.to_string().contains("bad.xml"), "{err}");

    // discover_topology does not fall back to sysfs for an explicit XML.
    let opts = TopologyOptions {
        sys_root: PathBuf::from("/sys"),
        hwloc: true,
        hwloc_xml: Some(bad_topology),
    };
    assert!(discover_topology(&opts).is_err());
}
