//! Load and fault injection through the fake's state file reach the
//! inventory on the next `discover()`: temperature, utilisation, memory,
//! processes, ECC counters, and a GPU lost from the bus.

mod nvml_common;

use joblet_gpu::model::GpuProcess;
use joblet_gpu::GpuInventory;
use nvml_common::{fixture, open, write_state};
use serde_json::json;

#[test]
fn injected_state_shows_up_and_a_lost_gpu_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    write_state(&state, &json!({}));
    let inv = open(
        &fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        Some(&state),
    );

    let before = inv.discover().expect("discover");
    let gpu3 = &before.gpus[3];
    assert_eq!(gpu3.thermal.current_c, Some(33));
    assert!(gpu3.processes.is_empty());
    assert!(before.gpus.iter().all(|g| !g.lost));

    write_state(
        &state,
        &json!({"gpus": {
            "3": {
                "temperature_c": 95,
                "utilization_gpu_pct": 80,
                "utilization_memory_pct": 10,
                "memory_used_bytes": 8_589_934_592u64,
                "ecc": {
                    "volatile_corrected": 7, "volatile_uncorrected": 1,
                    "aggregate_corrected": 70, "aggregate_uncorrected": 2,
                    "retired_pages_single": 3, "retired_pages_double": 1, "retired_pending": true,
                    "remapped_correctable": 4, "remapped_uncorrectable": 5,
                    "remapped_pending": true, "remapped_failure": false
                },
                "processes": [
                    {"pid": 4242, "used_memory_bytes": 4_294_967_296u64},
                    {"pid": 17, "used_memory_bytes": 1_048_576}
                ]
            },
            "5": {"lost": true}
        }}),
    );
    let after = inv
        .discover()
        .expect("discover with a lost GPU still works");
    assert_eq!(after.gpus.len(), 8);

    let gpu3 = &after.gpus[3];
    assert_eq!(gpu3.pci_bus_id, "0000:4e:00.0");
    assert_eq!(gpu3.thermal.current_c, Some(95));
    assert!(gpu3.thermal.current_c > gpu3.thermal.slowdown_c);
    assert_eq!(gpu3.utilization_gpu_pct, Some(80));
    assert_eq!(gpu3.utilization_memory_pct, Some(10));
    assert_eq!(gpu3.memory_used_bytes, Some(8_589_934_592));
    assert_eq!(gpu3.ecc.volatile_corrected, Some(7));
    assert_eq!(gpu3.ecc.volatile_uncorrected, Some(1));
    assert_eq!(gpu3.ecc.aggregate_corrected, Some(70));
    assert_eq!(gpu3.ecc.aggregate_uncorrected, Some(2));
    assert_eq!(gpu3.ecc.retired_pages, Some(4));
    assert_eq!(gpu3.ecc.retired_pages_pending, Some(true));
    assert_eq!(gpu3.ecc.remapped_rows_uncorrectable, Some(5));
    assert_eq!(gpu3.ecc.remapped_rows_pending, Some(true));
    assert_eq!(gpu3.ecc.remapped_rows_failure, Some(false));
    assert_eq!(
        gpu3.processes,
        [
            GpuProcess {
                pid: 17,
                used_memory_bytes: Some(1_048_576)
            },
            GpuProcess {
                pid: 4242,
                used_memory_bytes: Some(4_294_967_296)
            },
        ]
    );
    // Untouched GPUs keep the profile's values.
    assert_eq!(after.gpus[2].thermal.current_c, Some(33));
    assert!(!after.gpus[3].lost);

    let gpu5 = &after.gpus[5];
    assert_eq!(gpu5.index, 5);
    assert!(gpu5.lost, "{gpu5:?}");
    assert_eq!(gpu5.thermal.current_c, None);
    assert_eq!(after.gpus.iter().filter(|g| g.lost).count(), 1);
    assert!(
        after
            .warnings
            .iter()
            .any(|w| w.starts_with("GPU 5 ") && w.contains("lost")),
        "{:?}",
        after.warnings
    );

    // The GPU comes back after a reset.
    write_state(&state, &json!({}));
    let reset = inv.discover().expect("discover");
    assert!(reset.gpus.iter().all(|g| !g.lost));
    assert_eq!(reset.gpus[5].pci_bus_id, "0000:90:00.0");
    assert_eq!(reset.gpus[3].thermal.current_c, Some(33));
}
