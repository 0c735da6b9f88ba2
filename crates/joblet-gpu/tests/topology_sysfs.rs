//! sysfs topology: hwloc's POWER9 + V100 snapshot and hand-made trees.

mod topology_fixtures;

use joblet_gpu::model::{GpuLocality, NumaNode, Package};
use joblet_gpu::topology::sysfs::{read_pci_locality, sysfs_topology};
use joblet_gpu::topology::{discover_topology, TopologyOptions};
use joblet_gpu::InventoryError;
use std::path::Path;

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

const P9_GPUS: [&str; 6] = [
    "0004:05:00.0",
    "0004:06:00.0",
    "0006:00:00.0",
    "0007:00:00.0",
    "0035:04:00.0",
    "0035:05:00.0",
];

#[test]
fn power9_snapshot_numa_nodes_include_gpu_memory_nodes() {
    let (_dir, root) = topology_fixtures::power9_fsroot();
    let topo = sysfs_topology(&root.join("sys")).unwrap();
    assert_eq!(topo.source, "sysfs");
    // node0/cpulist `0-87` and node8 `88-175` limited to cpu/online
    // `0-15,88-103`; MemTotal 129839104 kB and 133952000 kB.
    let mut expected = vec![
        NumaNode {
            os_index: 0,
            cpus: "0-15".into(),
            memory_bytes: Some(129_839_104 * 1024),
        },
        NumaNode {
            os_index: 8,
            cpus: "88-103".into(),
            memory_bytes: Some(133_952_000 * 1024),
        },
    ];
    // Nodes 250-255: the six V100s' 15 GiB of memory, no CPUs.
    expected.extend((250..=255).map(|os_index| NumaNode {
        os_index,
        cpus: String::new(),
        memory_bytes: Some(15_728_640 * 1024),
    }));
    assert_eq!(topo.numa_nodes, expected);
    // physical_package_id: cpu0-15 → 0, cpu88-103 → 8.
    assert_eq!(
        topo.packages,
        [
            Package {
                os_index: 0,
                numa_nodes: vec![0]
            },
            Package {
                os_index: 8,
                numa_nodes: vec![8]
            },
        ]
    );
    // The snapshot keeps only `class` and `local_cpus` of its six display
    // devices, no `vendor`: nothing is claimed as an NVIDIA GPU.
    assert!(topo.gpu_numa.is_empty());
    for bus in P9_GPUS {
        let dev = root.join("sys/bus/pci/devices").join(bus);
        assert_eq!(
            std::fs::read_to_string(dev.join("class")).unwrap().trim(),
            "0x030000"
        );
        assert!(!dev.join("vendor").exists());
    }
}

#[test]
fn power9_gpus_are_placed_by_their_local_cpu_mask() {
    let (_dir, root) = topology_fixtures::power9_fsroot();
    let sys = root.join("sys");
    // Give the six display devices the vendor file the snapshot lacks.
    for bus in P9_GPUS {
        write(&sys, &format!("bus/pci/devices/{bus}/vendor"), "0x10de\n");
    }
    let topo = sysfs_topology(&sys).unwrap();
    // No numa_node files: the node is the one whose CPUs hold local_cpus
    // (mask `...,0000ffff` = 0-15, `000000ff,ff000000,...` = 88-103).
    let expected: Vec<GpuLocality> = P9_GPUS
        .iter()
        .enumerate()
        .map(|(i, bus)| GpuLocality {
            pci_bus_id: bus.to_string(),
            numa_node: Some(if i < 3 { 0 } else { 8 }),
            local_cpus: Some(if i < 3 { "0-15" } else { "88-103" }.to_string()),
        })
        .collect();
    assert_eq!(topo.gpu_numa, expected);
    let loc = read_pci_locality(&sys, "0007:00:00.0").unwrap();
    assert_eq!(loc.numa_node, None);
    assert_eq!(loc.local_cpus.unwrap().to_string(), "88-103");
}

/// A 2-socket x86 machine: CPUs 0-3 on node 0, 4-7 on node 1.
fn two_socket_sys(sys: &Path) {
    write(sys, "devices/system/cpu/online", "0-7\n");
    for cpu in 0..8 {
        write(
            sys,
            &format!("devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
            if cpu < 4 { "0\n" } else { "1\n" },
        );
    }
    write(sys, "devices/system/cpu/cpufreq/boost", "1\n");
    write(sys, "devices/system/node/node0/cpulist", "0-3\n");
    write(
        sys,
        "devices/system/node/node0/meminfo",
        "Node 0 MemTotal:       65536 kB\nNode 0 MemFree:        1024 kB\n",
    );
    write(sys, "devices/system/node/node1/cpulist", "4-7\n");
    write(sys, "devices/system/node/online", "0-1\n");
    let pci = |bus: &str, vendor: &str, class: &str, numa: Option<&str>, cpus: Option<&str>| {
        write(sys, &format!("bus/pci/devices/{bus}/vendor"), vendor);
        write(sys, &format!("bus/pci/devices/{bus}/class"), class);
        if let Some(n) = numa {
            write(sys, &format!("bus/pci/devices/{bus}/numa_node"), n);
        }
        if let Some(c) = cpus {
            write(sys, &format!("bus/pci/devices/{bus}/local_cpulist"), c);
        }
    };
    pci(
        "0000:81:00.0",
        "0x10de\n",
        "0x030200\n",
        Some("1\n"),
        Some("4-7\n"),
    ); // 3D controller
    pci(
        "0000:81:00.1",
        "0x10de\n",
        "0x040300\n",
        Some("1\n"),
        Some("4-7\n"),
    ); // its HDMI audio
    pci(
        "0000:01:00.0",
        "0x10de\n",
        "0x030000\n",
        Some("-1\n"),
        Some("0-3\n"),
    ); // VGA, no NUMA info
    pci(
        "0000:00:02.0",
        "0x8086\n",
        "0x030000\n",
        Some("0\n"),
        Some("0-3\n"),
    ); // Intel iGPU
    pci(
        "0000:02:00.0",
        "0x10de\n",
        "0x030200\n",
        None,
        Some("0-7\n"),
    ); // spans both nodes
}

#[test]
fn temp_tree_topology() {
    let dir = tempfile::tempdir().unwrap();
    two_socket_sys(dir.path());
    let topo = sysfs_topology(dir.path()).unwrap();
    assert_eq!(
        topo.numa_nodes,
        [
            NumaNode {
                os_index: 0,
                cpus: "0-3".into(),
                memory_bytes: Some(64 * 1024 * 1024)
            },
            NumaNode {
                os_index: 1,
                cpus: "4-7".into(),
                memory_bytes: None
            },
        ]
    );
    assert_eq!(
        topo.packages,
        [
            Package {
                os_index: 0,
                numa_nodes: vec![0]
            },
            Package {
                os_index: 1,
                numa_nodes: vec![1]
            },
        ]
    );
    let gpus: Vec<(&str, Option<u32>, Option<&str>)> = topo
        .gpu_numa
        .iter()
        .map(|g| (g.pci_bus_id.as_str(), g.numa_node, g.local_cpus.as_deref()))
        .collect();
    assert_eq!(
        gpus,
        [
            ("0000:01:00.0", Some(0), Some("0-3")),
            ("0000:02:00.0", None, Some("0-7")),
            ("0000:81:00.0", Some(1), Some("4-7")),
        ]
    );
    let via_discover = discover_topology(&TopologyOptions {
        sys_root: dir.path().to_path_buf(),
        hwloc: false,
        hwloc_xml: None,
    })
    .unwrap();
    assert_eq!(via_discover, topo);
}

#[test]
fn no_numa_directories_means_one_node_with_all_online_cpus() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "devices/system/cpu/online", "0-1\n");
    let topo = sysfs_topology(dir.path()).unwrap();
    assert_eq!(
        topo.numa_nodes,
        [NumaNode {
            os_index: 0,
            cpus: "0-1".into(),
            memory_bytes: None
        }]
    );
    assert!(topo.packages.is_empty());
    assert!(topo.gpu_numa.is_empty());

    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        sysfs_topology(empty.path()),
        Err(InventoryError::Read { path, .. }) if path.ends_with("devices/system/cpu/online")
    ));
}

#[test]
fn garbled_sysfs_files_are_parse_errors_naming_the_file() {
    let cases = [
        ("bus/pci/devices/0000:81:00.0/numa_node", "one\n"),
        ("bus/pci/devices/0000:81:00.0/local_cpulist", "4-x\n"),
        ("bus/pci/devices/0000:81:00.0/class", "0xZZ\n"),
        ("bus/pci/devices/0000:81:00.0/vendor", "nvidia\n"),
        ("devices/system/node/node1/cpulist", "7-4\n"),
        (
            "devices/system/node/node0/meminfo",
            "Node 0 MemTotal: lots kB\n",
        ),
        (
            "devices/system/cpu/cpu3/topology/physical_package_id",
            "?\n",
        ),
        ("devices/system/cpu/online", "0-\n"),
    ];
    for (rel, content) in cases {
        let dir = tempfile::tempdir().unwrap();
        two_socket_sys(dir.path());
        write(dir.path(), rel, content);
        match sysfs_topology(dir.path()) {
            Err(InventoryError::Parse { path, reason }) => {
                assert!(path.ends_with(rel), "{rel}: error names {}", path.display());
                assert!(!reason.is_empty());
            }
            other => panic!("{rel}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn this_machine_sysfs_has_a_numa_node() {
    let topo = sysfs_topology(Path::new("/sys")).unwrap();
    assert!(!topo.numa_nodes.is_empty());
    assert!(topo.numa_nodes.iter().any(|n| !n.cpus.is_empty()));
}
