//! hwloc driven by its environment variables: `HWLOC_XMLFILE` (a real
//! machine's capture simulating a node) and `HWLOC_FSROOT` (hwloc's own
//! POWER9 test snapshot). One test in its own binary: it changes the
//! process environment, which no other test may see.

mod topology_fixtures;

use joblet_gpu::topology::hwloc::hwloc_topology;
use joblet_gpu::topology::{discover_topology, TopologyOptions};
use std::path::PathBuf;

#[test]
fn hwloc_environment_variables_drive_the_topology() {
    // HWLOC_XMLFILE: discover_topology loads it (hwloc 3.x XML included).
    let dgx2 = topology_fixtures::fixtures().join("hwloc/nvidiaDGX2.xml");
    std::env::set_var("HWLOC_XMLFILE", &dgx2);
    let opts = TopologyOptions {
        sys_root: PathBuf::from("/sys"),
        hwloc: true,
        hwloc_xml: None,
    };
    let topo = discover_topology(&opts).unwrap();
    assert_eq!(topo.source, format!("hwloc-xml:{}", dgx2.display()));
    assert_eq!(topo.numa_nodes.len(), 2);
    assert_eq!(topo.gpu_numa.len(), 16);

    // An explicit XML wins over the environment.
    let xeon = topology_fixtures::fixtures().join("hwloc/32em64t-2n8c2t-pci-normalio.xml");
    let topo = discover_topology(&TopologyOptions {
        hwloc_xml: Some(xeon.clone()),
        ..opts.clone()
    })
    .unwrap();
    assert_eq!(topo.source, format!("hwloc-xml:{}", xeon.display()));
    assert_eq!(topo.gpu_numa.len(), 3);

    // A broken HWLOC_XMLFILE is an error, not this machine's sysfs.
    std::env::set_var("HWLOC_XMLFILE", "/nonexistent/topology.xml");
    assert!(discover_topology(&opts).is_err());
    std::env::remove_var("HWLOC_XMLFILE");

    // HWLOC_FSROOT: hwloc's Linux backend reads the POWER9 snapshot. It
    // hides the GPU-memory NUMA nodes 250-255 (hwloc keeps them only with
    // HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1) and limits CPUs to the online
    // ones; memory sizes match the snapshot's node*/meminfo.
    let (_dir, root) = topology_fixtures::power9_fsroot();
    std::env::set_var("HWLOC_FSROOT", &root);
    let topo = hwloc_topology(None).unwrap();
    std::env::remove_var("HWLOC_FSROOT");
    let nodes: Vec<(u32, &str, Option<u64>)> = topo
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.as_str(), n.memory_bytes))
        .collect();
    assert_eq!(
        nodes,
        [
            (0, "0-15", Some(129_839_104 * 1024)),
            (8, "88-103", Some(133_952_000 * 1024))
        ]
    );
    let packages: Vec<(u32, Vec<u32>)> = topo
        .packages
        .iter()
        .map(|p| (p.os_index, p.numa_nodes.clone()))
        .collect();
    assert_eq!(packages, [(0, vec![0]), (8, vec![8])]);
}
