//! `rnx whoami`.

use joblet_proto::pb;

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::printer::Printer;
use crate::view::{ExecutorView, StateDiskView, WhoAmIView};

pub async fn run(mut ctx: Ctx) -> Result<u8, Error> {
    let who = ctx
        .client
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner();
    let view = WhoAmIView {
        name: who.name,
        role: who.role,
        node: ctx.node.name.clone(),
        address: ctx.endpoint.clone(),
        node_version: who.node_version,
        supported: who.supported,
        state_disk: who.state_disk.map(|d| StateDiskView {
            path: d.path,
            free_bytes: d.free_bytes,
            total_bytes: d.total_bytes,
        }),
        executors: who
            .executors
            .iter()
            .map(|e| ExecutorView::from_pb(e, &who.default_executor))
            .collect(),
        default_executor: (!who.default_executor.is_empty()).then_some(who.default_executor),
    };
    Printer::new(ctx.format, std::io::stdout())
        .whoami(&view)
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
