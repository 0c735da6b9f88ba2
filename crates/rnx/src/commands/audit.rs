//! `rnx audit`: the node's GPU audit log (admin only).

use joblet_proto::pb;

use super::Ctx;
use crate::audit_view::AuditView;
use crate::error::Error;
use crate::exit;
use crate::parsers::Since;
use crate::printer::Printer;

pub async fn run(mut ctx: Ctx, since: Option<Since>, owner: Option<String>) -> Result<u8, Error> {
    let request = pb::ListAuditRequest {
        // 0 = all; a time before 1970 asks for all as well.
        since_ms: since.map_or(0, |s| s.to_unix_ms(super::job::now_ms()).max(0)),
        owner: owner.unwrap_or_default(),
    };
    let records = ctx
        .client
        .list_audit(request)
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner()
        .records;
    let views: Vec<AuditView> = records.iter().map(AuditView::from).collect();
    Printer::new(ctx.format, std::io::stdout())
        .audit(&views)
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
