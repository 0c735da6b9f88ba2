//! `rnx node list|drain|undrain`: the cluster's nodes through NodeService.

use joblet_proto::pb;

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::node_view::{NodeListView, NodeView};
use crate::printer::Printer;
use crate::settings::NodeAction;

pub async fn run(mut ctx: Ctx, action: NodeAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    match action {
        NodeAction::List => {
            let r = ctx
                .nodes
                .list_nodes(pb::ListNodesRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
            printer.node_list(&NodeListView::from(&r))
        }
        NodeAction::Drain { name, drain } => {
            let r = ctx
                .nodes
                .drain_node(pb::DrainNodeRequest { name, drain })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.node_changed(&NodeView::from(&r))
        }
    }
    .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
