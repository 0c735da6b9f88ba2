//! The NVML event thread turns events the fake delivers (from its state
//! file) into `GpuEvent`s naming the GPU by bus id, and stops on request.

mod nvml_common;

use joblet_gpu::nvml::events::spawn_event_thread;
use joblet_gpu::{GpuEvent, GpuEventKind};
use nvml_common::{fixture, open, write_state};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(10);

#[test]
fn xid_and_ecc_events_arrive_with_the_gpus_bus_id() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    write_state(&state, &json!({}));
    let inv = open(
        &fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        Some(&state),
    );
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = spawn_event_thread(&inv, tx, Arc::clone(&stop)).expect("event thread");

    // Nothing injected: nothing arrives.
    assert!(rx.recv_timeout(Duration::from_millis(700)).is_err());

    // `events` is append-only; the set delivers each once, in order.
    let mut events = vec![json!({"gpu": 3, "type": "xid", "data": 79})];
    write_state(&state, &json!({"events": events}));
    let got = rx.recv_timeout(PATIENCE).expect("XID 79 arrives");
    assert_eq!(
        got,
        GpuEvent {
            pci_bus_id: "0000:4e:00.0".into(),
            uuid: Some("GPU-12345678-1234-1234-1234-123456780003".into()),
            kind: GpuEventKind::Xid(79),
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    );

    events.push(json!({"gpu": 3, "type": "xid", "data": 13}));
    events.push(json!({"gpu": 1, "type": "double_bit_ecc"}));
    events.push(json!({"gpu": 0, "type": "single_bit_ecc"}));
    events.push(json!({"gpu": 2, "type": "xid", "data": 31, "gpu_instance_id": 1, "compute_instance_id": 0}));
    write_state(&state, &json!({"events": events}));
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(rx.recv_timeout(PATIENCE).expect("next event"));
    }
    let summary: Vec<(&str, &GpuEventKind, Option<u32>, Option<u32>)> = got
        .iter()
        .map(|e| {
            (
                e.pci_bus_id.as_str(),
                &e.kind,
                e.gpu_instance_id,
                e.compute_instance_id,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("0000:4e:00.0", &GpuEventKind::Xid(13), None, None),
            ("0000:0f:00.0", &GpuEventKind::DoubleBitEcc, None, None),
            ("0000:07:00.0", &GpuEventKind::SingleBitEcc, None, None),
            ("0000:47:00.0", &GpuEventKind::Xid(31), Some(1), Some(0)),
        ]
    );
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "each event once"
    );

    // Stop: the thread notices within one wait.
    let asked = Instant::now();
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("event thread exits cleanly");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
}
