//! A user-given `NVIDIA_VISIBLE_DEVICES` (seed 003's `all`, indices,
//! `void`), applied **within** the job's allocation: it can narrow the
//! GPUs a job sees, never widen them. The NVIDIA container toolkit lets a
//! tenant name any GPU of the host this way; Joblet does not.
//!
//! Differences from the toolkit, on purpose:
//! - unset or empty means `all` (of the job's GPUs), not `void`: the job
//!   asked for GPUs with `--gpu`, so it wants them;
//! - indices are the job's own view, `0..n-1` over its GPUs in PCI bus
//!   order (what CUDA numbers them inside the job), never host indices;
//! - MIG `gpu:instance` pairs are not accepted; MIG UUIDs are.

use super::error::ExecError;
use super::mig::MigRef;
use crate::model::normalize_bus_id;
use serde::{Deserialize, Serialize};

/// One GPU (or MIG slice) a job holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobGpu {
    /// Host NVML index.
    pub index: u32,
    /// `GPU-...` (or `MIG-...` for a slice).
    pub uuid: String,
    /// Device minor: the job gets `/dev/nvidia<minor>`.
    pub minor: u32,
    /// PCI bus id; normalised form preferred (`0000:07:00.0`).
    pub bus_id: String,
    /// Memory of the GPU (or slice), MB; 0 when unknown.
    pub memory_mb: u64,
    /// The MIG instance, when this is a slice: `index`, `minor` and
    /// `bus_id` are then its parent's and `uuid` is the slice's own.
    #[serde(default)]
    pub mig: Option<MigRef>,
}

/// What `NVIDIA_VISIBLE_DEVICES` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VisibleRequest {
    /// Every GPU of the job (also: unset or empty).
    All,
    /// Driver libraries and binaries, no GPU.
    None,
    /// No GPU handling at all: no devices, no driver files, no GPU env.
    Void,
    /// A subset of the job's GPUs.
    Select(Vec<Selector>),
}

/// One item of a `NVIDIA_VISIBLE_DEVICES` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selector {
    /// The job's own index (`0..n-1`, PCI bus order).
    Index(u32),
    /// A GPU or MIG UUID, compared case-insensitively.
    Uuid(String),
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Index(i) => write!(f, "GPU {i}"),
            Selector::Uuid(u) => f.write_str(u),
        }
    }
}

/// Parse the value of `NVIDIA_VISIBLE_DEVICES` (`None` = unset).
pub fn parse_visible(value: Option<&str>) -> Result<VisibleRequest, ExecError> {
    let raw = value.unwrap_or("");
    let trimmed = raw.trim();
    let invalid = |reason: String| ExecError::InvalidVisibleDevices {
        value: raw.to_string(),
        reason,
    };
    if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("all") {
        return Ok(VisibleRequest::All);
    }
    if trimmed.eq_ignore_ascii_case("none") {
        return Ok(VisibleRequest::None);
    }
    if trimmed.eq_ignore_ascii_case("void") {
        return Ok(VisibleRequest::Void);
    }
    let mut selectors = Vec::new();
    for item in trimmed.split(',').map(str::trim) {
        let selector = if item.is_empty() {
            return Err(invalid("an empty entry in the list".into()));
        } else if item.bytes().all(|b| b.is_ascii_digit()) {
            Selector::Index(
                item.parse()
                    .map_err(|_| invalid(format!("index `{item}` is too large")))?,
            )
        } else if is_uuid(item) {
            Selector::Uuid(item.to_string())
        } else if ["all", "none", "void"]
            .iter()
            .any(|w| item.eq_ignore_ascii_case(w))
        {
            return Err(invalid(format!("`{item}` cannot be part of a list")));
        } else if item.contains(':') {
            return Err(invalid(format!(
                "MIG `gpu:instance` selectors like `{item}` are not supported; use the MIG \
                 UUID (MIG-...)"
            )));
        } else {
            return Err(invalid(format!("`{item}` is neither an index nor a UUID")));
        };
        selectors.push(selector);
    }
    Ok(VisibleRequest::Select(selectors))
}

/// `GPU-` or `MIG-` followed by at least one more character.
fn is_uuid(item: &str) -> bool {
    item.len() > 4
        && ["GPU-", "MIG-"]
            .iter()
            .any(|p| item.get(..4).is_some_and(|h| h.eq_ignore_ascii_case(p)))
}

/// The job's GPUs in PCI bus order: position `i` is the job's index `i`.
pub fn job_order(gpus: &[JobGpu]) -> Vec<JobGpu> {
    let mut sorted = gpus.to_vec();
    sorted.sort_by_cached_key(|g| {
        (
            normalize_bus_id(&g.bus_id).unwrap_or_else(|| g.bus_id.to_ascii_lowercase()),
            g.index,
            g.mig
                .as_ref()
                .map(|m| (m.gpu_instance_id, m.compute_instance_id)),
        )
    });
    sorted
}

/// The GPUs the request leaves visible, out of the job's allocation
/// `gpus`, in PCI bus order without duplicates. `None` and `Void` leave
/// none (the caller handles `Void`'s "no GPU handling"). A selector
/// outside the allocation is an error, never a silent widening.
pub fn resolve_visible(req: &VisibleRequest, gpus: &[JobGpu]) -> Result<Vec<JobGpu>, ExecError> {
    let ordered = job_order(gpus);
    let selectors = match req {
        VisibleRequest::All => return Ok(ordered),
        VisibleRequest::None | VisibleRequest::Void => return Ok(Vec::new()),
        VisibleRequest::Select(s) => s,
    };
    let mut chosen = vec![false; ordered.len()];
    for selector in selectors {
        let position = match selector {
            Selector::Index(i) => usize::try_from(*i).ok().filter(|&i| i < ordered.len()),
            Selector::Uuid(u) => ordered.iter().position(|g| g.uuid.eq_ignore_ascii_case(u)),
        };
        let Some(position) = position else {
            let held: Vec<String> = ordered
                .iter()
                .enumerate()
                .map(|(i, g)| format!("{i}: {}", g.uuid))
                .collect();
            return Err(ExecError::OutsideAllocation {
                requested: selector.to_string(),
                held: held.join(", "),
            });
        };
        chosen[position] = true;
    }
    Ok(ordered
        .into_iter()
        .zip(chosen)
        .filter_map(|(g, keep)| keep.then_some(g))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gpu(index: u32, bus: u8) -> JobGpu {
        JobGpu {
            index,
            uuid: format!("GPU-{index:08x}-0000-0000-0000-000000000000"),
            minor: index,
            bus_id: format!("0000:{bus:02x}:00.0"),
            memory_mb: 40960,
            mig: None,
        }
    }

    #[test]
    fn parse_forms() {
        use VisibleRequest::{All, Select, Void};
        assert_eq!(parse_visible(None).unwrap(), All);
        assert_eq!(parse_visible(Some("  ")).unwrap(), All);
        assert_eq!(parse_visible(Some("ALL")).unwrap(), All);
        assert_eq!(parse_visible(Some("none")).unwrap(), VisibleRequest::None);
        assert_eq!(parse_visible(Some(" Void ")).unwrap(), Void);
        assert_eq!(
            parse_visible(Some("1, 0,GPU-abc,mig-xyz")).unwrap(),
            Select(vec![
                Selector::Index(1),
                Selector::Index(0),
                Selector::Uuid("GPU-abc".into()),
                Selector::Uuid("mig-xyz".into()),
            ])
        );
    }

    #[test]
    fn parse_errors_name_the_variable_and_the_forms() {
        for (value, hint) in [
            ("0,,1", "empty entry"),
            ("0,all", "cannot be part of a list"),
            ("0:1", "MIG UUID"),
            ("gpu0", "neither an index nor a UUID"),
            ("GPU-", "neither"),
            ("-1", "neither"),
            ("99999999999", "too large"),
        ] {
            let msg = parse_visible(Some(value)).unwrap_err().to_string();
            assert!(msg.starts_with("NVIDIA_VISIBLE_DEVICES=`"), "{msg}");
            assert!(msg.contains(hint), "{value}: {msg}");
            assert!(msg.contains("`all`, `none`, `void`"), "{msg}");
        }
    }

    #[test]
    fn indices_are_the_jobs_own_in_bus_order() {
        // Host GPUs 5 (bus 0x3b) and 2 (bus 0x86), given out of order.
        let alloc = [gpu(5, 0x86), gpu(2, 0x3b)];
        let all = resolve_visible(&VisibleRequest::All, &alloc).unwrap();
        assert_eq!(all.iter().map(|g| g.index).collect::<Vec<_>>(), [2, 5]);
        let one = resolve_visible(&parse_visible(Some("1")).unwrap(), &alloc).unwrap();
        assert_eq!(one, [gpu(5, 0x86)]);
        // Selector order and duplicates do not matter: bus order, once.
        let req = parse_visible(Some("1,0,1")).unwrap();
        assert_eq!(resolve_visible(&req, &alloc).unwrap(), all);
        let by_uuid =
            VisibleRequest::Select(vec![Selector::Uuid(gpu(5, 0x86).uuid.to_ascii_lowercase())]);
        assert_eq!(resolve_visible(&by_uuid, &alloc).unwrap(), [gpu(5, 0x86)]);
        assert!(resolve_visible(&VisibleRequest::None, &alloc)
            .unwrap()
            .is_empty());
        assert!(resolve_visible(&VisibleRequest::Void, &alloc)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn widening_is_refused_with_the_held_gpus() {
        let alloc = [gpu(0, 0x07), gpu(1, 0x0f)];
        // Host GPU 2 exists on the node but is not the job's.
        let err = resolve_visible(&parse_visible(Some("2")).unwrap(), &alloc).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("asks for GPU 2"), "{msg}");
        assert!(
            msg.contains(&format!("[0: {}, 1: {}]", alloc[0].uuid, alloc[1].uuid)),
            "{msg}"
        );
        assert!(msg.contains("never widen"), "{msg}");
        let other = gpu(7, 0x90).uuid;
        let err = resolve_visible(
            &VisibleRequest::Select(vec![Selector::Index(0), Selector::Uuid(other.clone())]),
            &alloc,
        )
        .unwrap_err();
        assert!(err.to_string().contains(&other));
    }

    fn selector() -> impl Strategy<Value = Selector> {
        prop_oneof![
            (0u32..12).prop_map(Selector::Index),
            (0u32..12).prop_map(|i| Selector::Uuid(gpu(i, 0).uuid)),
        ]
    }

    proptest! {
        #[test]
        fn resolve_never_leaves_the_allocation(
            host in proptest::sample::subsequence((0u32..12).collect::<Vec<_>>(), 0..12),
            sels in proptest::collection::vec(selector(), 1..6),
            which in 0u8..4,
        ) {
            let alloc: Vec<JobGpu> = host.iter().map(|&i| gpu(i, (i * 7 % 256) as u8)).collect();
            let req = match which {
                0 => VisibleRequest::All,
                1 => VisibleRequest::None,
                2 => VisibleRequest::Void,
                _ => VisibleRequest::Select(sels.clone()),
            };
            match resolve_visible(&req, &alloc) {
                Ok(seen) => {
                    for g in &seen {
                        prop_assert!(alloc.contains(g), "{g:?} is not allocated");
                    }
                    let mut buses: Vec<_> = seen.iter().map(|g| g.bus_id.clone()).collect();
                    let n = buses.len();
                    buses.sort();
                    buses.dedup();
                    prop_assert_eq!(buses.len(), n, "duplicates");
                    prop_assert_eq!(&job_order(&seen), &seen, "not in bus order");
                }
                Err(_) => {
                    // Only a selector outside the allocation is refused.
                    prop_assert_eq!(which, 3);
                    let outside = sels.iter().any(|s| match s {
                        Selector::Index(i) => *i as usize >= alloc.len(),
                        Selector::Uuid(u) => !alloc.iter().any(|g| &g.uuid == u),
                    });
                    prop_assert!(outside);
                }
            }
        }

        #[test]
        fn random_values_never_panic(text in ".{0,60}") {
            let _ = parse_visible(Some(&text));
        }
    }
}
