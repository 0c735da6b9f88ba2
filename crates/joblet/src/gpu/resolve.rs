//! GPU id resolution: which GPU a user means by an index, a UUID or a
//! unique UUID prefix.

use joblet_core::text::clip;
use joblet_gpu::GpuInfo;

use super::GpuNode;

/// A GPU id that names no GPU of this node, or more than one. The id is
/// the user's as messages echo it ([`clip`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuRefError {
    #[error("no GPU given: expected a GPU UUID, a unique UUID prefix or an index (see `rnx gpu status`)")]
    Empty,
    #[error("no GPU with index {id}; this node has: {}", list(.known))]
    NoIndex { id: String, known: Vec<Known> },
    #[error("no GPU matches {id:?}; this node has: {}", list(.known))]
    NoMatch { id: String, known: Vec<Known> },
    #[error("{id:?} matches {} GPUs ({}); give more of the UUID or the index", .uuids.len(), .uuids.join(", "))]
    Ambiguous { id: String, uuids: Vec<String> },
    /// The GPU left the inventory between resolving and reading it.
    #[error("GPU {uuid} vanished")]
    Vanished { uuid: String },
}

/// A GPU the node has, as a refusal lists it: `index (uuid)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub index: u32,
    pub uuid: String,
}

fn list(known: &[Known]) -> String {
    known
        .iter()
        .map(|k| format!("{} ({})", k.index, k.uuid))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finds the GPU `id` names: an index (`3`), a full UUID or a unique UUID
/// prefix (`GPU-1234`; case-insensitive). Returns its UUID.
pub fn resolve_gpu(node: &GpuNode, id: &str) -> Result<String, GpuRefError> {
    let id = id.trim();
    let known = || {
        node.inventory
            .gpus
            .iter()
            .map(|g| Known {
                index: g.index,
                uuid: g.uuid.clone(),
            })
            .collect()
    };
    if id.is_empty() {
        return Err(GpuRefError::Empty);
    }
    if id.chars().all(|c| c.is_ascii_digit()) {
        return node
            .inventory
            .gpus
            .iter()
            .find(|g| id.parse::<u32>() == Ok(g.index))
            .map(|g| g.uuid.clone())
            .ok_or_else(|| GpuRefError::NoIndex {
                id: clip(id),
                known: known(),
            });
    }
    let lower = id.to_ascii_lowercase();
    let matches: Vec<&GpuInfo> = node
        .inventory
        .gpus
        .iter()
        .filter(|g| g.uuid.to_ascii_lowercase().starts_with(&lower))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.uuid.clone()),
        [] => Err(GpuRefError::NoMatch {
            id: clip(id),
            known: known(),
        }),
        many => Err(GpuRefError::Ambiguous {
            id: clip(id),
            uuids: many.iter().map(|g| g.uuid.clone()).collect(),
        }),
    }
}

/// The GPU with UUID `uuid` in the inventory.
pub fn gpu_info<'a>(node: &'a GpuNode, uuid: &str) -> Result<&'a GpuInfo, GpuRefError> {
    node.inventory
        .gpus
        .iter()
        .find(|g| g.uuid == uuid)
        .ok_or_else(|| GpuRefError::Vanished {
            uuid: uuid.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use joblet_core::gpu::GpuPool;
    use joblet_gpu::NodeInventory;

    use super::*;

    fn node(uuids: &[&str]) -> GpuNode {
        GpuNode {
            inventory: NodeInventory {
                gpus: uuids
                    .iter()
                    .enumerate()
                    .map(|(i, u)| GpuInfo {
                        index: i as u32,
                        uuid: (*u).to_owned(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            pool: GpuPool::restore(Vec::new()),
            sampled_at: 0,
            simulation: None,
            jobs: Default::default(),
            cgroup_base: None,
            readings: Vec::new(),
            last_xid: Default::default(),
        }
    }

    #[test]
    fn by_index_uuid_or_unique_prefix_and_each_refusal_says_why() {
        let n = node(&["GPU-aa11", "GPU-aa22", "GPU-bb33"]);
        assert_eq!(resolve_gpu(&n, " 2 ").unwrap(), "GPU-bb33");
        assert_eq!(resolve_gpu(&n, "gpu-BB").unwrap(), "GPU-bb33");
        assert_eq!(resolve_gpu(&n, "GPU-aa22").unwrap(), "GPU-aa22");
        let huge = "G".repeat(100 * 1024);
        let e = resolve_gpu(&n, &huge).unwrap_err().to_string();
        assert!(e.len() < 300 && e.contains('…'), "{e}");
        let e = resolve_gpu(&n, &"9".repeat(100 * 1024))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 300 && e.contains('…'), "{e}");
        assert_eq!(
            resolve_gpu(&n, "").unwrap_err().to_string(),
            "no GPU given: expected a GPU UUID, a unique UUID prefix or an index (see `rnx gpu status`)"
        );
        assert_eq!(
            resolve_gpu(&n, "7").unwrap_err().to_string(),
            "no GPU with index 7; this node has: 0 (GPU-aa11), 1 (GPU-aa22), 2 (GPU-bb33)"
        );
        assert_eq!(
            resolve_gpu(&n, "GPU-cc").unwrap_err().to_string(),
            "no GPU matches \"GPU-cc\"; this node has: 0 (GPU-aa11), 1 (GPU-aa22), 2 (GPU-bb33)"
        );
        assert_eq!(
            resolve_gpu(&n, "GPU-aa").unwrap_err().to_string(),
            "\"GPU-aa\" matches 2 GPUs (GPU-aa11, GPU-aa22); give more of the UUID or the index"
        );
        assert_eq!(
            gpu_info(&n, "GPU-zz").unwrap_err().to_string(),
            "GPU GPU-zz vanished"
        );
    }
}
