//! A node's executors as WhoAmI reports them: [`ExecutorInfo`] (with
//! whether the caller may use it) ↔ `pb::ExecutorInfo`.
//!
//! The wire carries capabilities by name ([`ExecutorCaps::flags`]) and not
//! who may use an executor, only whether the caller may: `users` comes
//! back empty. A capability name this build does not know is skipped (a
//! newer node may have more).

use joblet_core::executor::{ExecutorCaps, ExecutorInfo, ExecutorKind};
use joblet_core::FieldError;

use super::non_empty;
use crate::pb;

/// One executor on the wire; `allowed`: whether the caller may use it.
pub fn executor_to_pb(e: &ExecutorInfo, allowed: bool) -> pb::ExecutorInfo {
    pb::ExecutorInfo {
        name: e.name.clone(),
        kind: e.kind.as_str().to_owned(),
        binary: e.binary.clone().unwrap_or_default(),
        version: e.version.clone().unwrap_or_default(),
        capabilities: e.caps.names().into_iter().map(str::to_owned).collect(),
        gpu_unavailable: e.gpu_unavailable.clone().unwrap_or_default(),
        allowed,
    }
}

/// An executor from the wire, and whether the caller may use it.
pub fn executor_from_pb(e: pb::ExecutorInfo) -> Result<(ExecutorInfo, bool), FieldError> {
    let kind = ExecutorKind::parse(&e.kind).ok_or_else(|| {
        FieldError::new(
            "executors.kind",
            format!(
                "unknown executor kind {:?}; expected one of {}",
                joblet_core::text::clip(&e.kind),
                ExecutorKind::ALL.map(ExecutorKind::as_str).join(", ")
            ),
        )
    })?;
    let mut caps = ExecutorCaps::default();
    for name in &e.capabilities {
        let flag = match name.as_str() {
            "gpu" => &mut caps.gpu,
            "cdi" => &mut caps.cdi,
            "oom-events" => &mut caps.oom_events,
            "checkpoint-restore" => &mut caps.checkpoint_restore,
            "join-netns" => &mut caps.join_netns,
            "device-cgroup" => &mut caps.device_cgroup,
            _ => continue,
        };
        *flag = true;
    }
    let info = ExecutorInfo {
        name: e.name,
        kind,
        binary: non_empty(e.binary),
        version: non_empty(e.version),
        caps,
        gpu_unavailable: non_empty(e.gpu_unavailable),
        users: Vec::new(),
    };
    Ok((info, e.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_name_maps_back_to_its_flag() {
        let all = ExecutorCaps {
            gpu: true,
            cdi: true,
            oom_events: true,
            checkpoint_restore: true,
            join_netns: true,
            device_cgroup: true,
        };
        for (name, _) in all.flags() {
            let wire = pb::ExecutorInfo {
                name: "x".into(),
                kind: "runc".into(),
                capabilities: vec![name.to_owned()],
                ..Default::default()
            };
            let (info, _) = executor_from_pb(wire).unwrap();
            assert_eq!(info.caps.names(), [name]);
        }
    }

    #[test]
    fn unknown_kinds_are_refused_and_unknown_capabilities_skipped() {
        let e = executor_from_pb(pb::ExecutorInfo {
            name: "kata".into(),
            kind: "kata".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field, "executors.kind");
        assert!(e.problem.contains("native, runc, crun, runsc"), "{e}");
        let (info, allowed) = executor_from_pb(pb::ExecutorInfo {
            name: "runc".into(),
            kind: "runc".into(),
            capabilities: vec!["cdi".into(), "teleport".into()],
            allowed: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(info.caps.names(), ["cdi"]);
        assert!(allowed);
    }
}
