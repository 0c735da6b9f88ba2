//! A fake `libnvidia-ml.so.1`: serves NVML calls from a mock-NVML profile or a real `nvidia-smi -q -x` capture.
//!
//! The crate builds `target/<profile>/libnvidia_ml.so`, a drop-in replacement
//! for NVIDIA's NVML library for machines without a GPU (developer machines,
//! CI, simulated nodes). It answers the NVML calls the project makes from one
//! of two kinds of description of a node, and accepts faults and load injected
//! at run time by a test.
//!
//! # Using it
//!
//! ```text
//! cargo build -p fake-nvml          # target/debug/libnvidia_ml.so
//! mkdir -p /tmp/fake-nvml && ln -sf "$PWD/target/debug/libnvidia_ml.so" /tmp/fake-nvml/libnvidia-ml.so.1
//! MOCK_NVML_CONFIG=fixtures/nvml-profiles/mock-nvml-config-a100.yaml \
//!     LD_LIBRARY_PATH=/tmp/fake-nvml  some-nvml-program
//! ```
//!
//! or point the daemon's `gpu.nvml_library` (nvml-wrapper's
//! `Nvml::builder().lib_path(..)`) at `target/debug/libnvidia_ml.so`.
//! Note that `cargo test` refreshes only `target/debug/deps/libnvidia_ml.so`
//! (the copy a test binary finds next to itself); the top-level copy is
//! refreshed by `cargo build`.
//!
//! # Environment (read by `nvmlInit_v2`)
//!
//! | variable | meaning |
//! |---|---|
//! | `MOCK_NVML_CONFIG` | path of the node description, detected by content: an NVIDIA k8s-test-infra mock-NVML profile (YAML: `system`, `device_defaults` merged under each `devices[]` entry, `nvlink`, `pcie_topology`) or an `nvidia-smi -q -x` capture (XML). Unset, unreadable or malformed: `nvmlInit_v2` returns `NVML_ERROR_LIBRARY_NOT_FOUND` and says why on stderr. |
//! | `MOCK_NVML_STATE` | optional path of a JSON state file for fault and load injection (below). Re-read whenever its inode, size, mtime or ctime changes; write it atomically (temp file + rename). Missing file: no overrides. Malformed: the last good state stays and one stderr line says why. |
//! | `MOCK_NVML_DEV_DIR` | device directory, default `/dev`. If `<dir>/nvidiactl` exists the library behaves like the driver: only GPUs whose `<dir>/nvidia<minor>` the caller can open (`open(O_RDWR)` succeeds or fails with `ENXIO`/`ENODEV`) are enumerated, re-indexed 0..n in file order, and an `nvidiactl` the caller may not open makes `nvmlInit_v2` return `NVML_ERROR_NO_PERMISSION`. Without `nvidiactl` (a GPU-less machine simulating a node) every GPU of the file is enumerated. |
//!
//! # State file
//!
//! ```json
//! { "gpus": { "3": { "temperature_c": 95, "utilization_gpu_pct": 80, "utilization_memory_pct": 10,
//!                    "memory_used_bytes": 1234567, "memory_reserved_bytes": 611319808,
//!                    "power_mw": 250000, "graphics_clock_mhz": 1410, "sm_clock_mhz": 1410,
//!                    "mem_clock_mhz": 1215, "pcie_replay_counter": 0, "memory_temperature_c": 45,
//!                    "ecc": {"volatile_corrected": 1, "volatile_uncorrected": 0,
//!                            "aggregate_corrected": 1, "aggregate_uncorrected": 0,
//!                            "retired_pages_single": 0, "retired_pages_double": 0, "retired_pending": false,
//!                            "remapped_correctable": 0, "remapped_uncorrectable": 0,
//!                            "remapped_pending": false, "remapped_failure": false},
//!                    "processes": [{"pid": 123, "used_memory_bytes": 1000000,
//!                                   "sm_util_pct": 70, "mem_util_pct": 20}],
//!                    "graphics_processes": [{"pid": 456, "used_memory_bytes": 268435456}],
//!                    "mps_processes": [],
//!                    "lost": false } },
//!   "events": [ {"gpu": 3, "type": "xid", "data": 79}, {"gpu": 1, "type": "double_bit_ecc"},
//!               {"gpu": 0, "type": "single_bit_ecc"},
//!               {"gpu": 2, "type": "xid", "data": 31, "gpu_instance_id": 1, "compute_instance_id": 0} ] }
//! ```
//!
//! * Keys of `gpus` and the `gpu` of an event are indices into the file's
//!   device list (the NVML index on a host that sees every GPU), so an
//!   override follows the physical GPU into a job's re-indexed view.
//! * Every field is optional; an absent one keeps the profile's or capture's
//!   value. Unknown fields make the file malformed (typos fail loudly).
//! * Units are NVML's: `power_mw` in milliwatts (`nvmlDeviceGetPowerUsage`,
//!   the power fields of `nvmlDeviceGetFieldValues`, and the rate the energy
//!   counter grows at), clocks in MHz (current clocks only; maximum and
//!   application clocks stay the description's), memory in bytes
//!   (`memory_used_bytes` is capped at total minus reserved),
//!   `memory_temperature_c` for `NVML_FI_DEV_MEMORY_TEMP`.
//! * `processes` replaces the GPU's compute-process list,
//!   `graphics_processes` its graphics-process list and `mps_processes` its
//!   MPS-client list. A process's `sm_util_pct`/`mem_util_pct` give it a
//!   sample in `nvmlDeviceGetProcessUtilization` (timestamped at the call);
//!   processes without either have none, and a GPU with no sample answers
//!   `NVML_ERROR_NOT_FOUND`, as the driver does.
//! * `lost: true` makes every query on that GPU (and its MIG devices) return
//!   `NVML_ERROR_GPU_IS_LOST`; handles can still be obtained.
//! * `events` is append-only. Each event set delivers every event appended
//!   after the set was created (like the driver, which reports events as they
//!   happen) once, in order, skipping those whose GPU or type it has not
//!   registered; `nvmlEventSetWait_v2` polls the file every 50 ms
//!   up to its timeout and then returns `NVML_ERROR_TIMEOUT`. Event data is
//!   filled like the driver's: the GPU's handle, the event type bit, the XID as
//!   `eventData`, and GPU/compute instance ids (`0xFFFFFFFF` for the whole GPU).
//!
//! # What is modelled
//!
//! The C functions exported by `ffi` and its per-area modules (about a
//! hundred): init/shutdown, error strings, system versions and process
//! names, device enumeration by index/UUID/PCI bus id, identity (name, UUID,
//! serial, board part number, brand, VBIOS and InfoROM versions, minor
//! number, index), PCI, memory (v1, v2 with `reserved`, BAR1), compute
//! capability, NUMA node, display/persistence/compute/driver modes,
//! temperature and thresholds, fans, performance state, utilization
//! (GPU/memory, encoder/decoder), power usage and limits (management,
//! default, constraints, enforced), total energy, clocks (graphics, SM,
//! memory, video: current, max, application target/default, customer
//! boost), PCIe link generation/width, throughput and replay counter, ECC
//! mode and counters, retired pages, remapped rows, field values
//! (`nvmlDeviceGetFieldValues`: ECC mode and totals, retired pages, memory
//! temperature, energy, NVLink count, PCIe replays, remapped rows, power
//! and power limits; any other id gets `NVML_ERROR_NOT_SUPPORTED` in its
//! own `nvmlReturn`), compute/graphics/MPS processes in every struct
//! version (the suffix-less names take `nvmlProcessInfo_v1_t`, `_v2` and
//! `_v3` take `nvmlProcessInfo_t`), per-process utilisation, MIG mode and
//! MIG device handles, NVLink state and remote PCI info, and events. A
//! value the description marks `N/A` or lacks is
//! `NVML_ERROR_NOT_SUPPORTED` (a board without a fan, the Windows driver
//! model on Linux, a capture's deprecated display mode); a request outside
//! the model (an enum value or handle kind the fake does not simulate) gets
//! an NVML error code and one stderr line `fake-nvml: <function>: <what is
//! not modelled>` (printed once per distinct message). Symbols not exported
//! are absent, as NVML symbols of newer drivers are absent from older
//! libraries.
//!
//! Energy (`src/energy.rs`): each GPU's counter starts at `nvmlInit` from the
//! description's value (a profile's `power.total_energy_consumption_mj`),
//! or 0 where it has none (every capture), and grows by the power draw in
//! force times the monotonic time elapsed, so it never decreases while the
//! library stays initialised. It is `NOT_SUPPORTED` where the power draw
//! is unknown.
//!
//! Derived values, because an `nvidia-smi` capture lacks them: compute
//! capability from the product name ([`derive::compute_capability`]), MIG
//! profile names from SM count and memory ([`derive::mig_profile_name`]), MIG
//! UUIDs (deterministic, from the parent UUID and instance ids) and the NVML
//! version (`<CUDA major>.<driver version>`, NVML's own format). Power from a
//! capture: the draw is R535's `average_power_draw` (what
//! `nvmlDeviceGetPowerUsage` reports), else `power_draw`; the management
//! limit is `requested_power_limit` (R530+) or `power_limit` (older), the
//! enforced one `current_power_limit` or `enforced_power_limit`. A capture
//! lists one fan speed, served as one fan. The SM application clock is the
//! graphics one, as NVML reports it. Encoder/decoder utilisation comes
//! with a fixed 1 s sampling period.
//!
//! The Rust side (`rlib`) exposes the parsers and the model so tests can read
//! the same fixtures.

mod abi;
pub mod config;
pub mod derive;
pub mod devnodes;
mod diag;
mod energy;
mod events;
pub mod ffi;
mod handles;
pub mod model;
pub mod pci;
pub mod profile;
mod queries;
mod runtime;
pub mod smi_xml;
pub mod state;
mod values;

pub use config::{load_config, parse_config, ConfigError};
pub use model::Node;
pub use state::{parse_state, State, StateError};
