//! Property tests: cpulist / cpumask / sysfs value parsers and the hwloc
//! XML rewriter return an error, never panic, on random, truncated and
//! corrupted input; cpulists round-trip.

mod topology_fixtures;

use joblet_gpu::topology::cpulist::{parse_cpulist, parse_cpumask, CpuSet};
use joblet_gpu::topology::hwloc::hwloc_topology;
use joblet_gpu::topology::sysfs::{parse_hex_id, parse_node_meminfo, parse_numa_node};
use joblet_gpu::topology::xml_compat::{downgrade_v3_to_v2, xml_format_major};
use proptest::prelude::*;
use std::path::Path;

fn path() -> &'static Path {
    Path::new("/sys/test")
}

fn truncate(sample: &str, at: usize) -> &str {
    let mut at = at.min(sample.len());
    while !sample.is_char_boundary(at) {
        at -= 1;
    }
    &sample[..at]
}

fn all_value_parsers(text: &str) {
    let _ = parse_cpulist(text);
    let _ = parse_cpumask(text);
    let _ = parse_numa_node(text, path());
    let _ = parse_hex_id(text, path());
    let _ = parse_node_meminfo(text, path());
}

fn dgx2() -> String {
    std::fs::read_to_string(topology_fixtures::fixtures().join("hwloc/nvidiaDGX2.xml")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_values_never_panic(text in ".{0,200}", bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        all_value_parsers(&text);
        all_value_parsers(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn cpulike_soup_never_panics(text in "[0-9a-fx,:\\- \n]{0,80}") {
        all_value_parsers(&text);
    }

    #[test]
    fn huge_numbers_are_errors(n in 1_048_577u64..u64::MAX) {
        let single = n.to_string();
        let range = format!("0-{}", n);
        let node = format!("{}{}", n, n);
        prop_assert!(parse_cpulist(&single).is_err());
        prop_assert!(parse_cpulist(&range).is_err());
        prop_assert!(parse_numa_node(&node, path()).is_err());
    }

    #[test]
    fn cpulists_round_trip(ranges in proptest::collection::vec((0u32..5000, 0u32..64), 0..20)) {
        let set = CpuSet::from_ranges(ranges.iter().map(|&(a, len)| (a, a + len)));
        let text = set.to_string();
        prop_assert_eq!(parse_cpulist(&text).unwrap(), set.clone());
        // The same CPUs as a hex mask, most significant word first.
        let max = set.iter().last().unwrap_or(0);
        let mut words = vec![0u32; (max / 32 + 1) as usize];
        for cpu in set.iter() {
            words[(cpu / 32) as usize] |= 1 << (cpu % 32);
        }
        let mask: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
        prop_assert_eq!(parse_cpumask(&mask.join(",")).unwrap(), set);
    }

    #[test]
    fn random_xml_never_panics(text in ".{0,300}") {
        let _ = xml_format_major(&text);
        let _ = downgrade_v3_to_v2(&text);
        let wrapped = format!("<topology version=\"3.0\">{text}</topology>");
        let _ = xml_format_major(&wrapped);
        let _ = downgrade_v3_to_v2(&wrapped);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn long_masks_are_bounded(words in 1usize..40_000) {
        let mut mask = vec!["00000000"; words];
        mask[0] = "00000001";
        let text = mask.join(",");
        match parse_cpumask(&text) {
            Ok(set) => prop_assert_eq!(set.iter().collect::<Vec<_>>(), vec![(words as u32 - 1) * 32]),
            Err(_) => prop_assert!(words * 32 > 1 << 20),
        }
    }

    #[test]
    fn truncated_and_corrupted_fixture_xml_never_panics(at in 0usize..43_000, byte in any::<u8>()) {
        let xml = dgx2();
        let cut = truncate(&xml, at);
        if at < xml.trim_end().len() {
            prop_assert!(downgrade_v3_to_v2(cut).is_err());
        }
        let mut bytes = xml.into_bytes();
        let i = at % bytes.len();
        bytes[i] = byte;
        let corrupted = String::from_utf8_lossy(&bytes);
        let _ = xml_format_major(&corrupted);
        let _ = downgrade_v3_to_v2(&corrupted);
    }
}

/// hwloc itself, fed truncated and corrupted copies of a real capture:
/// an error or a topology, never a panic.
#[test]
fn hwloc_survives_broken_fixture_xml() {
    let xml = dgx2();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.xml");
    let step = xml.len() / 24;
    for i in 0..24 {
        let at = i * step + 7;
        std::fs::write(&file, truncate(&xml, at)).unwrap();
        assert!(hwloc_topology(Some(&file)).is_err(), "cut at {at}");
        let mut bytes = xml.clone().into_bytes();
        bytes[at] = b"<>\"&x0 "[i % 7];
        std::fs::write(&file, &bytes).unwrap();
        if let Ok(topo) = hwloc_topology(Some(&file)) {
            assert!(topo.gpu_numa.len() <= 16);
        }
    }
}

#[test]
fn rewritten_xml_keeps_topology_infos_in_the_root_object() {
    let v2 = downgrade_v3_to_v2(&dgx2()).unwrap();
    assert_eq!(xml_format_major(&v2).unwrap(), Some(2));
    assert!(!v2.contains("pci_locality"));
    assert!(!v2.contains(" id=\"obj"));
    // `<info name="Backend" value="NVML"/>` moved from <topology> into the
    // Machine object, before its first child object.
    let machine = v2.find("<object type=\"Machine\"").unwrap();
    let package = v2.find("<object type=\"Package\"").unwrap();
    let backend = v2.find("<info name=\"Backend\" value=\"NVML\"/>").unwrap();
    assert!(machine < backend && backend < package);
    // osdev_type="12" (GPU|COPROC bitmask) → 5 (v2 COPROC).
    assert!(!v2.contains("osdev_type=\"12\""));
    assert!(v2.contains("name=\"nvml0\" osdev_type=\"5\""));
    // Content (distance matrices) is kept byte for byte.
    assert!(v2.contains("<u64values length=\"12\">10 21 21 10 </u64values>"));
}
