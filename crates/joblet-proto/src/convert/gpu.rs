//! GPU history lines and admin actions. (A GPU's own description is built
//! by the daemon from its discovery types, which this crate does not
//! depend on.)

use joblet_core::gpu::{AdminAction, GpuState};
use joblet_core::record::GpuEventRecord;
use joblet_core::FieldError;

use crate::pb;

/// One line of a GPU's history (the GPU itself is the message's context:
/// `GpuHealth.gpu`). No state = `""`.
pub fn gpu_event_to_pb(e: &GpuEventRecord) -> pb::GpuEvent {
    pb::GpuEvent {
        at_unix_ms: e.at_ms,
        kind: e.kind.clone(),
        from_state: e.from.map(|s| s.as_str().to_owned()).unwrap_or_default(),
        to_state: e.to.map(|s| s.as_str().to_owned()).unwrap_or_default(),
        message: e.message.clone(),
    }
}

/// A history line of the GPU `uuid` / `index` from the wire.
pub fn gpu_event_from_pb(
    uuid: &str,
    index: u32,
    e: pb::GpuEvent,
) -> Result<GpuEventRecord, FieldError> {
    let state = |field: &str, s: String| -> Result<Option<GpuState>, FieldError> {
        if s.is_empty() {
            return Ok(None);
        }
        s.parse()
            .map(Some)
            .map_err(|e: joblet_core::gpu::UnknownGpuState| FieldError::new(field, e.to_string()))
    };
    Ok(GpuEventRecord {
        uuid: uuid.to_owned(),
        index,
        at_ms: e.at_unix_ms,
        kind: e.kind,
        from: state("from_state", e.from_state)?,
        to: state("to_state", e.to_state)?,
        message: e.message,
    })
}

/// `SetGpuStateRequest.action` (with its `force`).
pub fn admin_action_from_pb(action: i32, force: bool) -> Result<AdminAction, FieldError> {
    match pb::GpuAction::try_from(action) {
        Ok(pb::GpuAction::Drain) => Ok(AdminAction::Drain),
        Ok(pb::GpuAction::Offline) => Ok(AdminAction::Offline { force }),
        Ok(pb::GpuAction::Online) => Ok(AdminAction::Online),
        _ => Err(FieldError::new(
            "action",
            format!(
                "invalid value {action}: expected GPU_ACTION_DRAIN, GPU_ACTION_OFFLINE or GPU_ACTION_ONLINE"
            ),
        )),
    }
}

/// The wire's `(action, force)` for an admin action.
pub fn admin_action_to_pb(a: AdminAction) -> (pb::GpuAction, bool) {
    match a {
        AdminAction::Drain => (pb::GpuAction::Drain, false),
        AdminAction::Offline { force } => (pb::GpuAction::Offline, force),
        AdminAction::Online => (pb::GpuAction::Online, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_actions_round_trip_and_unknown_ones_name_the_field() {
        for a in [
            AdminAction::Drain,
            AdminAction::Offline { force: false },
            AdminAction::Offline { force: true },
            AdminAction::Online,
        ] {
            let (action, force) = admin_action_to_pb(a);
            assert_eq!(admin_action_from_pb(action as i32, force), Ok(a));
        }
        let e = admin_action_from_pb(0, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "action: invalid value 0: expected GPU_ACTION_DRAIN, GPU_ACTION_OFFLINE or GPU_ACTION_ONLINE"
        );
    }

    #[test]
    fn an_unknown_gpu_state_names_its_field() {
        let e = gpu_event_from_pb(
            "GPU-a",
            0,
            pb::GpuEvent {
                to_state: "MELTED".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.field, "to_state");
    }
}
