//! Property tests: the procfs parsers (`information`, `version`,
//! `/proc/devices`) return an error, never panic, on random, truncated
//! and corrupted input, and read back what a well-formed file says.

use joblet_gpu::majors::parse_device_majors;
use joblet_gpu::procfs::{parse_driver_version, parse_information};
use proptest::prelude::*;
use std::path::Path;

const INFORMATION: &str = "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 165\nGPU UUID: \t GPU-4f8a8c4e-1d4a-2a2b-9b0e-1f7a3b2c1d00\nVideo BIOS: \t 92.00.19.00.10\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t 0000:07:00.0\nDevice Minor: \t 2\nGPU Excluded:\t No\n";
const VERSION: &str = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
const DEVICES: &str = "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  5 /dev/tty\n 10 misc\n195 nvidia\n195 nvidia-modeset\n238 nvidia-caps\n239 nvidia-uvm\n254 ndctl\n\nBlock devices:\n  7 loop\n253 zram\n259 blkext\n";

fn path() -> &'static Path {
    Path::new("/proc/test")
}

/// `sample` cut at `at` (moved back to a char boundary).
fn truncate(sample: &str, at: usize) -> &str {
    let mut at = at.min(sample.len());
    while !sample.is_char_boundary(at) {
        at -= 1;
    }
    &sample[..at]
}

/// `sample` with the byte at `at` replaced.
fn corrupt(sample: &str, at: usize, byte: u8) -> String {
    let mut bytes = sample.as_bytes().to_vec();
    let at = at % bytes.len();
    bytes[at] = byte;
    String::from_utf8_lossy(&bytes).into_owned()
}

fn all_parsers(text: &str) {
    let _ = parse_information(text, path());
    let _ = parse_driver_version(text, path());
    let _ = parse_device_majors(text, path());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_text_never_panics(text in ".{0,400}") {
        all_parsers(&text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        all_parsers(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn key_value_soup_never_panics(
        lines in proptest::collection::vec(
            (prop::sample::select(vec!["Model", "GPU UUID", "Bus Location", "Device Minor", "GPU Excluded", "IRQ", "Character devices", "Block devices", "NVRM version", "195 nvidia", "nvidia-uvm"]),
             prop::sample::select(vec![":", ": ", "", "::", " "]),
             "[ -~\t]{0,30}"),
            0..16)
    ) {
        let text: String = lines.iter().map(|(k, s, v)| format!("{k}{s}{v}\n")).collect();
        all_parsers(&text);
    }

    #[test]
    fn truncated_information_is_ok_or_an_error(at in 0usize..400) {
        let text = truncate(INFORMATION, at);
        match parse_information(text, path()) {
            // Only a cut after the last required line can still parse.
            Ok(info) => {
                prop_assert!(text.len() >= INFORMATION.find("Device Minor: \t 2").unwrap() + 17);
                prop_assert_eq!(info.minor, 2);
                prop_assert_eq!(info.bus_location, "0000:07:00.0");
            }
            Err(e) => prop_assert!(e.to_string().contains("/proc/test")),
        }
    }

    #[test]
    fn corrupted_files_never_panic(at in 0usize..400, byte in any::<u8>()) {
        all_parsers(&corrupt(INFORMATION, at, byte));
        all_parsers(&corrupt(VERSION, at, byte));
        all_parsers(&corrupt(DEVICES, at, byte));
    }

    #[test]
    fn truncated_version_and_devices_never_panic(at in 0usize..400) {
        let version = truncate(VERSION, at);
        if let Ok(v) = parse_driver_version(version, path()) {
            // A cut inside the number yields a shorter dotted number.
            prop_assert!("550.54.15".starts_with(&v));
        }
        let devices = truncate(DEVICES, at);
        if let Ok(majors) = parse_device_majors(devices, path()) {
            // A cut name matches nothing; a cut number leaves no name.
            prop_assert!(majors.nvidia.is_none() || majors.nvidia == Some(195));
            prop_assert!(majors.nvidia_uvm.is_none() || majors.nvidia_uvm == Some(239));
        }
    }

    #[test]
    fn well_formed_information_reads_back(
        model in "[A-Za-z0-9][A-Za-z0-9 -]{0,30}[A-Za-z0-9]",
        domain in 0u32..=0xffff, bus in 0u32..=0xff, dev in 0u32..=0x1f, func in 0u32..=7,
        minor in 0u32..255,
        excluded in any::<bool>(),
    ) {
        let text = format!(
            "Model: \t\t {model}\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\nBus Location: \t {domain:04X}:{bus:02X}:{dev:02x}.{func}\nDevice Minor: \t {minor}\nGPU Excluded:\t {}\n",
            if excluded { "Yes" } else { "No" }
        );
        let info = parse_information(&text, path()).unwrap();
        prop_assert_eq!(info.model, model);
        prop_assert_eq!(info.bus_location, format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}"));
        prop_assert_eq!(info.minor, minor);
        prop_assert_eq!(info.excluded, excluded);
    }

    #[test]
    fn well_formed_devices_read_back(nvidia in 1u32..512, uvm in 1u32..512, caps in 1u32..512, frontend in any::<bool>()) {
        let name = if frontend { "nvidia-frontend" } else { "nvidia" };
        let text = format!("Character devices:\n  1 mem\n{nvidia} {name}\n{uvm} nvidia-uvm\n{caps} nvidia-caps\n\nBlock devices:\n  7 loop\n");
        let majors = parse_device_majors(&text, path()).unwrap();
        prop_assert_eq!(majors.nvidia, Some(nvidia));
        prop_assert_eq!(majors.nvidia_uvm, Some(uvm));
        prop_assert_eq!(majors.nvidia_caps, Some(caps));
    }
}

#[test]
fn samples_parse() {
    let info = parse_information(INFORMATION, path()).unwrap();
    assert_eq!(info.model, "NVIDIA A100-SXM4-40GB");
    assert_eq!(
        info.uuid.as_deref(),
        Some("GPU-4f8a8c4e-1d4a-2a2b-9b0e-1f7a3b2c1d00")
    );
    assert!(!info.excluded);
    assert_eq!(parse_driver_version(VERSION, path()).unwrap(), "550.54.15");
    let majors = parse_device_majors(DEVICES, path()).unwrap();
    assert_eq!(
        (majors.nvidia, majors.nvidia_uvm, majors.nvidia_caps),
        (Some(195), Some(239), Some(238))
    );
}
