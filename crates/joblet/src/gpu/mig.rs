//! MIG slices as allocation units, on the daemon's side: the submission
//! checks with messages that list what the node offers, and a placed unit
//! (whole GPU or slice) as the [`JobGpu`] the job's sandbox is built from.

use joblet_gpu::exec::{JobGpu, MigRef};
use joblet_gpu::GpuInfo;
use joblet_sched::model::JobRequest;

use super::node_spec::{mib, Offer};

/// What MIG makes impossible on this node, in seed 001's words, with what
/// to ask for instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigRefusal {
    #[error("No GPUs available: the job asks for MIG slices (--mig={profile}) but no GPU on this node has MIG slices; run it without --mig to get whole GPUs (see `rnx gpu status --all`)")]
    NoSlices { profile: String },
    #[error("No GPUs available: this node has no MIG slice of profile {profile}; it has {offered}; ask for one of those with --mig")]
    NoSuchProfile { profile: String, offered: String },
    #[error("No GPUs available: the job asks for {asked} MIG slices of profile {profile} but this node has {have}; ask for at most {have}")]
    TooMany {
        profile: String,
        asked: u32,
        have: u32,
    },
    #[error("No GPUs available: every GPU on this node is split into MIG slices ({offered}); ask for slices with --mig=PROFILE")]
    AllSliced { offered: String },
}

/// Refuses at submission what MIG makes impossible on this node.
pub fn check_request(offer: &Offer, req: &JobRequest) -> Result<(), MigRefusal> {
    match &req.mig_profile {
        Some(p) if offer.slices.is_empty() => Err(MigRefusal::NoSlices { profile: p.clone() }),
        Some(p) => match offer.slices.get(p) {
            None => Err(MigRefusal::NoSuchProfile {
                profile: p.clone(),
                offered: offer.slice_list(),
            }),
            Some(&n) if req.gpu_count > n => Err(MigRefusal::TooMany {
                profile: p.clone(),
                asked: req.gpu_count,
                have: n,
            }),
            Some(_) => Ok(()),
        },
        None if offer.whole == 0 && !offer.slices.is_empty() => Err(MigRefusal::AllSliced {
            offered: offer.slice_list(),
        }),
        None => Ok(()),
    }
}

/// A placed MIG slice the driver no longer reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MIG instance {gpu_instance} of GPU {index} ({uuid}) is no longer reported by the driver")]
pub struct MigGone {
    pub gpu_instance: u32,
    pub index: u32,
    pub uuid: String,
}

/// The job's view of a placed unit of GPU `g`: the whole GPU, or MIG
/// instance `gi` of it (its first compute instance) named by the slice's
/// UUID.
pub fn job_gpu(g: &GpuInfo, gi: Option<u32>) -> Result<JobGpu, MigGone> {
    let whole = JobGpu {
        index: g.index,
        uuid: g.uuid.clone(),
        minor: g.minor,
        bus_id: g.pci_bus_id.clone(),
        memory_mb: mib(g.memory_total_bytes),
        mig: None,
    };
    let Some(gi) = gi else { return Ok(whole) };
    let inst = g
        .mig
        .iter()
        .flat_map(|m| &m.gpu_instances)
        .filter(|i| i.gpu_instance_id == gi && i.uuid.is_some())
        .min_by_key(|i| i.compute_instance_id)
        .ok_or_else(|| MigGone {
            gpu_instance: gi,
            index: g.index,
            uuid: g.uuid.clone(),
        })?;
    Ok(JobGpu {
        uuid: inst.uuid.clone().unwrap_or_default(),
        memory_mb: mib(inst.memory_total_bytes),
        mig: Some(MigRef {
            parent_uuid: g.uuid.clone(),
            gpu_instance_id: gi,
            compute_instance_id: inst.compute_instance_id,
        }),
        ..whole
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_gpu::model::{MigGpuInstance, MigInfo};
    use joblet_sched::model::{Sharing, WorkloadClass};
    use std::collections::BTreeMap;

    fn req(n: u32, mig: Option<&str>) -> JobRequest {
        JobRequest {
            gpu_milli: 0,
            job: "j".into(),
            owner: "o".into(),
            queue: "default".into(),
            gpu_count: n,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: mig.map(str::to_string),
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: false,
            preemptible: false,
            time_limit_ms: None,
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        }
    }

    #[test]
    fn submission_messages_say_what_the_node_offers() {
        let mig = Offer {
            whole: 0,
            slices: BTreeMap::from([("1g.10gb".into(), 4), ("3g.40gb".into(), 1)]),
        };
        let plain = Offer {
            whole: 8,
            slices: BTreeMap::new(),
        };
        check_request(&mig, &req(2, Some("1g.10gb"))).unwrap();
        check_request(&plain, &req(2, None)).unwrap();
        for (offer, r, want) in [
            (&plain, req(1, Some("1g.10gb")), "no GPU on this node has MIG slices; run it without --mig"),
            (&mig, req(1, Some("7g.80gb")), "no MIG slice of profile 7g.80gb; it has 1g.10gb (4 slices), 3g.40gb (1 slice); ask for one of those with --mig"),
            (&mig, req(2, Some("3g.40gb")), "asks for 2 MIG slices of profile 3g.40gb but this node has 1; ask for at most 1"),
            (&mig, req(1, None), "every GPU on this node is split into MIG slices (1g.10gb (4 slices), 3g.40gb (1 slice)); ask for slices with --mig=PROFILE"),
        ] {
            let e = check_request(offer, &r).unwrap_err().to_string();
            assert!(e.starts_with("No GPUs available: "), "{e}");
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_slice_is_its_parents_node_with_its_own_uuid() {
        let g = GpuInfo {
            index: 2,
            uuid: "GPU-p".into(),
            minor: 5,
            pci_bus_id: "0000:07:00.0".into(),
            memory_total_bytes: Some(80 << 30),
            mig: Some(MigInfo {
                enabled: true,
                pending: true,
                gpu_instances: vec![
                    MigGpuInstance {
                        gpu_instance_id: 3,
                        compute_instance_id: 1,
                        uuid: Some("MIG-3-1".into()),
                        ..Default::default()
                    },
                    MigGpuInstance {
                        gpu_instance_id: 3,
                        compute_instance_id: 0,
                        uuid: Some("MIG-3-0".into()),
                        memory_total_bytes: Some(20 << 30),
                        ..Default::default()
                    },
                ],
            }),
            ..GpuInfo::default()
        };
        let whole = job_gpu(&g, None).unwrap();
        assert_eq!(
            (whole.uuid.as_str(), whole.minor, whole.memory_mb),
            ("GPU-p", 5, 81920)
        );
        let s = job_gpu(&g, Some(3)).unwrap();
        assert_eq!(
            (s.index, s.minor, s.uuid.as_str(), s.memory_mb),
            (2, 5, "MIG-3-0", 20480)
        );
        assert_eq!(
            s.mig,
            Some(MigRef {
                parent_uuid: "GPU-p".into(),
                gpu_instance_id: 3,
                compute_instance_id: 0
            })
        );
        let e = job_gpu(&g, Some(4)).unwrap_err().to_string();
        assert!(e.contains("MIG instance 4 of GPU 2"), "{e}");
    }
}
