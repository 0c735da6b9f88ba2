//! `rnx volume create|list|inspect|remove|share|unshare`.

use joblet_proto::pb;

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::printer::Printer;
use crate::settings::VolumeAction;
use crate::volume_view::{VolumeChange, VolumeView};

pub async fn run(mut ctx: Ctx, action: VolumeAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    let v = &mut ctx.volume;
    match action {
        VolumeAction::Create {
            name,
            size_bytes,
            kind,
            shared,
        } => {
            let r = v
                .create_volume(pb::CreateVolumeRequest {
                    name,
                    size_bytes,
                    r#type: kind.to_owned(),
                    shared,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.volume_changed(&VolumeView::from(&r), VolumeChange::Created)
        }
        VolumeAction::List => {
            let r = v
                .list_volumes(pb::ListVolumesRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
            let views: Vec<VolumeView> = r.volumes.iter().map(VolumeView::from).collect();
            printer.volume_list(&views)
        }
        VolumeAction::Inspect { name } => {
            let r = v
                .get_volume(pb::VolumeRef { name })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.volume_inspect(&VolumeView::from(&r))
        }
        VolumeAction::Remove { name, force } => {
            let r = v
                .remove_volume(pb::RemoveVolumeRequest { name, force })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.volume_changed(&VolumeView::from(&r), VolumeChange::Removed)
        }
        VolumeAction::SetShared { name, shared } => {
            let r = v
                .set_volume_shared(pb::SetVolumeSharedRequest { name, shared })
                .await
                .map_err(status_err)?
                .into_inner();
            let change = if shared {
                VolumeChange::Shared
            } else {
                VolumeChange::Unshared
            };
            printer.volume_changed(&VolumeView::from(&r), change)
        }
    }
    .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
