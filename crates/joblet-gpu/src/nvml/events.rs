//! The NVML event source: a thread waiting on an NVML event set for XID,
//! single-bit and double-bit ECC events of every GPU, sending each as a
//! [`GpuEvent`].

use super::ffi::{self, RawEvent};
use super::NvmlInventory;
use crate::event::{GpuEvent, GpuEventKind};
use crate::inventory::InventoryError;
use crate::model::normalize_bus_id;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How long one `nvmlEventSetWait` blocks: also how quickly `stop` is seen.
pub const WAIT_MS: u32 = 500;
/// Pause after a failed wait, so a broken driver does not spin a core.
pub const BACKOFF: Duration = Duration::from_secs(1);
/// `gpuInstanceId` / `computeInstanceId` of an event about a whole GPU.
const WHOLE_GPU: u32 = 0xFFFF_FFFF;

/// The events the health monitor wants, as the k8s device plugin does.
fn wanted() -> EventTypes {
    EventTypes::CRITICAL_XID_ERROR
        | EventTypes::DOUBLE_BIT_ECC_ERROR
        | EventTypes::SINGLE_BIT_ECC_ERROR
}

/// Start the event thread. It registers every GPU for XID and ECC events
/// (those each GPU supports) before this returns, so a failure to create
/// the event set is an error here; afterwards it waits in
/// [`WAIT_MS`] steps until `stop` is set or `sink` is dropped. A wait that
/// fails with anything but a timeout is sent once as
/// [`GpuEventKind::WaitFailed`] (then [`BACKOFF`] and retry).
pub fn spawn_event_thread(
    inv: &NvmlInventory,
    sink: Sender<GpuEvent>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, InventoryError> {
    let nvml = Arc::clone(inv.nvml());
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let handle = thread::Builder::new()
        .name("gpu-events".into())
        .spawn(move || run(&nvml, &sink, &stop, ready_tx))
        .map_err(|source| InventoryError::EventThread { source })?;
    match ready_rx.recv() {
        Ok(Ok(registered)) => {
            tracing::info!(gpus = registered, "NVML event thread started");
            Ok(handle)
        }
        Ok(Err(e)) => {
            // The thread returns right after reporting the error; a panic
            // there would already be in `e`'s place, so the join result
            // carries nothing more.
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(InventoryError::Nvml {
                call: "nvmlEventSetCreate",
                gpu: None,
                reason: "the event thread ended before registering any GPU".into(),
            })
        }
    }
}

/// Which GPU an event handle belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Identity {
    pci_bus_id: String,
    uuid: Option<String>,
}

fn identity(device: &Device<'_>) -> Identity {
    Identity {
        pci_bus_id: device
            .pci_info()
            .ok()
            .and_then(|p| normalize_bus_id(&p.bus_id))
            .unwrap_or_default(),
        uuid: device.uuid().ok(),
    }
}

/// An event set with every GPU registered in it.
struct Registration<'nvml> {
    set: EventSet<'nvml>,
    gpus: HashMap<usize, Identity>,
}

fn run(
    nvml: &Nvml,
    sink: &Sender<GpuEvent>,
    stop: &AtomicBool,
    ready: SyncSender<Result<usize, InventoryError>>,
) {
    let registration = match register(nvml) {
        Ok(registration) => registration,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(registration.gpus.len())).is_err() {
        return;
    }
    wait_loop(nvml, &registration, sink, stop);
}

fn nvml_error(call: &'static str, gpu: Option<u32>, e: &NvmlError) -> InventoryError {
    InventoryError::Nvml {
        call,
        gpu,
        reason: e.to_string(),
    }
}

fn register(nvml: &Nvml) -> Result<Registration<'_>, InventoryError> {
    let count = nvml
        .device_count()
        .map_err(|e| nvml_error("nvmlDeviceGetCount_v2", None, &e))?;
    let mut set = nvml
        .create_event_set()
        .map_err(|e| nvml_error("nvmlEventSetCreate", None, &e))?;
    let mut registered: Vec<(Device<'_>, EventTypes)> = Vec::new();
    let mut gpus = HashMap::new();
    for index in 0..count {
        let device = match nvml.device_by_index(index) {
            Ok(device) => device,
            Err(e) => {
                tracing::warn!(gpu = index, error = %e, "no events from this GPU: no handle");
                continue;
            }
        };
        let mask = match device.supported_event_types() {
            Ok(supported) => supported & wanted(),
            Err(e) => {
                tracing::warn!(gpu = index, error = %e, "no events from this GPU: supported types unknown");
                continue;
            }
        };
        if mask.is_empty() {
            tracing::info!(gpu = index, "GPU supports none of the XID/ECC events");
            continue;
        }
        match device.register_events(mask, set) {
            Ok(with_device) => {
                set = with_device;
                gpus.insert(ffi::device_key(&device), identity(&device));
                registered.push((device, mask));
            }
            Err(e) => {
                tracing::warn!(gpu = index, error = %e.error, "cannot register GPU for events");
                set = rebuild(nvml, &registered)?;
            }
        }
    }
    Ok(Registration { set, gpus })
}

/// nvml-wrapper frees the set when a registration fails: make a new one
/// holding the GPUs registered so far.
fn rebuild<'nvml>(
    nvml: &'nvml Nvml,
    registered: &[(Device<'nvml>, EventTypes)],
) -> Result<EventSet<'nvml>, InventoryError> {
    let mut set = nvml
        .create_event_set()
        .map_err(|e| nvml_error("nvmlEventSetCreate", None, &e))?;
    for (device, mask) in registered {
        set = device
            .register_events(*mask, set)
            .map_err(|e| nvml_error("nvmlDeviceRegisterEvents", None, &e.error))?;
    }
    Ok(set)
}

fn wait_loop(
    nvml: &Nvml,
    registration: &Registration<'_>,
    sink: &Sender<GpuEvent>,
    stop: &AtomicBool,
) {
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        match ffi::wait_event(nvml, &registration.set, WAIT_MS) {
            Ok(raw) => {
                failing = false;
                let who = match registration.gpus.get(&raw.device_key) {
                    Some(id) => id.clone(),
                    None => ffi::event_device(nvml, &raw)
                        .map(|d| identity(&d))
                        .unwrap_or_default(),
                };
                for event in to_events(&raw, &who) {
                    tracing::debug!(?event, "GPU event");
                    if sink.send(event).is_err() {
                        return;
                    }
                }
            }
            Err(NvmlError::Timeout) => failing = false,
            Err(e) => {
                tracing::warn!(error = %e, "waiting for NVML events failed");
                if !failing && sink.send(GpuEvent::wait_failed(e.to_string())).is_err() {
                    return;
                }
                failing = true;
                back_off(stop);
            }
        }
    }
    tracing::debug!("NVML event thread stopping");
}

/// Sleep [`BACKOFF`], waking early when `stop` is set.
fn back_off(stop: &AtomicBool) {
    let step = Duration::from_millis(50);
    let mut slept = Duration::ZERO;
    while slept < BACKOFF && !stop.load(Ordering::Relaxed) {
        thread::sleep(step);
        slept += step;
    }
}

/// The events one NVML event record stands for (one per type bit).
fn to_events(raw: &RawEvent, who: &Identity) -> Vec<GpuEvent> {
    let types = EventTypes::from_bits_truncate(raw.event_type);
    let instance = |id: u32| (id != WHOLE_GPU).then_some(id);
    let mut kinds = Vec::new();
    if types.contains(EventTypes::CRITICAL_XID_ERROR) {
        kinds.push(GpuEventKind::Xid(raw.data));
    }
    if types.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
        kinds.push(GpuEventKind::DoubleBitEcc);
    }
    if types.contains(EventTypes::SINGLE_BIT_ECC_ERROR) {
        kinds.push(GpuEventKind::SingleBitEcc);
    }
    kinds
        .into_iter()
        .map(|kind| GpuEvent {
            pci_bus_id: who.pci_bus_id.clone(),
            uuid: who.uuid.clone(),
            kind,
            gpu_instance_id: instance(raw.gpu_instance_id),
            compute_instance_id: instance(raw.compute_instance_id),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who() -> Identity {
        Identity {
            pci_bus_id: "0000:4e:00.0".into(),
            uuid: Some("GPU-3".into()),
        }
    }

    #[test]
    fn xid_on_whole_gpu() {
        let raw = RawEvent {
            device_key: 1,
            event_type: EventTypes::CRITICAL_XID_ERROR.bits(),
            data: 79,
            gpu_instance_id: WHOLE_GPU,
            compute_instance_id: WHOLE_GPU,
        };
        assert_eq!(
            to_events(&raw, &who()),
            vec![GpuEvent {
                pci_bus_id: "0000:4e:00.0".into(),
                uuid: Some("GPU-3".into()),
                kind: GpuEventKind::Xid(79),
                gpu_instance_id: None,
                compute_instance_id: None,
            }]
        );
    }

    #[test]
    fn ecc_on_a_mig_slice_keeps_instance_ids() {
        let raw = RawEvent {
            device_key: 1,
            event_type: (EventTypes::DOUBLE_BIT_ECC_ERROR | EventTypes::SINGLE_BIT_ECC_ERROR)
                .bits(),
            data: 0,
            gpu_instance_id: 3,
            compute_instance_id: 0,
        };
        let events = to_events(&raw, &who());
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind, GpuEventKind::DoubleBitEcc);
        assert_eq!(events[1].kind, GpuEventKind::SingleBitEcc);
        assert_eq!(events[0].gpu_instance_id, Some(3));
        assert_eq!(events[0].compute_instance_id, Some(0));
    }

    #[test]
    fn unrelated_events_are_dropped() {
        let raw = RawEvent {
            device_key: 1,
            event_type: EventTypes::PSTATE_CHANGE.bits(),
            data: 0,
            gpu_instance_id: WHOLE_GPU,
            compute_instance_id: WHOLE_GPU,
        };
        assert!(to_events(&raw, &who()).is_empty());
    }
}
