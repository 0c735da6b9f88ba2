//! `rnx gpu status|health|watch|drain|offline|online`.

use std::io::IsTerminal;

use joblet_proto::{admin_action_to_pb, pb};

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::gpu_view::{GpuHealthView, GpuNodeView, GpuView};
use crate::printer::{Format, Printer};
use crate::settings::GpuAction;

pub async fn run(mut ctx: Ctx, action: GpuAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    match action {
        GpuAction::Status { all, on } => {
            let r = ctx
                .gpu
                .get_gpu_status(pb::GpuStatusRequest {
                    node: on.unwrap_or_default(),
                })
                .await
                .map_err(status_err)?
                .into_inner();
            printer
                .gpu_status(&GpuNodeView::from_pb(r), all)
                .map_err(Error::Output)?;
        }
        GpuAction::Health { gpu_id } => {
            let r = ctx
                .gpu
                .get_gpu_health(pb::GpuRef { gpu_id })
                .await
                .map_err(status_err)?
                .into_inner();
            printer
                .gpu_health(&GpuHealthView::from_pb(r))
                .map_err(Error::Output)?;
        }
        GpuAction::Watch {
            interval,
            count,
            all,
            on,
        } => {
            let request = pb::GpuStatusRequest {
                node: on.unwrap_or_default(),
            };
            let clear = ctx.format == Format::Human && std::io::stdout().is_terminal();
            let mut shown = 0u64;
            let mut tick = tokio::time::interval(interval);
            loop {
                tick.tick().await;
                let r = ctx
                    .gpu
                    .get_gpu_status(request.clone())
                    .await
                    .map_err(status_err)?
                    .into_inner();
                printer
                    .gpu_watch_frame(&GpuNodeView::from_pb(r), all, clear)
                    .map_err(Error::Output)?;
                shown += 1;
                if count.is_some_and(|n| shown >= n) {
                    break;
                }
            }
        }
        GpuAction::Set { gpu_id, action } => {
            let (action, force) = admin_action_to_pb(action);
            let r = ctx
                .gpu
                .set_gpu_state(pb::SetGpuStateRequest {
                    gpu_id,
                    action: action as i32,
                    force,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            printer
                .gpu_changed(&GpuView::from_pb(r))
                .map_err(Error::Output)?;
        }
    }
    Ok(exit::SUCCESS)
}
