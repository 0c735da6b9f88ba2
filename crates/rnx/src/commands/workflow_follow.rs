//! `rnx workflow run --follow`: polls the workflow until it ends, printing
//! one line per job change, then its final view. Ctrl-C stops following
//! only; the workflow runs on.

use std::collections::HashMap;
use std::io::{Stdout, Write};
use std::time::Duration;

use tokio::time::Instant;

use super::job::now_ms;
use super::workflow::get;
use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::follow::{is_transient, LOST_NOTICE};
use crate::printer::Printer;
use crate::workflow_text::{change_key, change_line};
use crate::workflow_view::WorkflowView;

/// Time between two looks at the workflow.
const POLL: Duration = Duration::from_millis(200);
/// How long a lost connection is retried before giving up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// Follows `first` (the workflow as the node started it) to its end: exit
/// 0 if it COMPLETED, 1 if not, [`exit::INTERRUPTED`] on Ctrl-C.
pub(super) async fn to_end(
    ctx: &mut Ctx,
    printer: &mut Printer<Stdout>,
    first: WorkflowView,
) -> Result<u8, Error> {
    let Some(id) = first.id.clone() else {
        return Err(Error::BadResponse {
            call: "RunWorkflow",
            missing: "id",
        });
    };
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut seen: HashMap<String, _> = first
        .jobs
        .iter()
        .map(|j| (j.name.clone(), change_key(j)))
        .collect();
    let mut current = first;
    let mut outage: Option<Instant> = None;
    while !current.ended() {
        let polled = tokio::select! {
            _ = &mut interrupted => {
                // Best effort: the exit code says it too.
                let _ = writeln!(
                    std::io::stderr(),
                    "rnx: stopped following; workflow {id} keeps running on the node (`rnx workflow status {id}`, `rnx workflow stop {id}`)"
                );
                return Ok(exit::INTERRUPTED);
            }
            polled = async {
                tokio::time::sleep(POLL).await;
                get(ctx, &id).await
            } => polled,
        };
        let w = match polled {
            Ok(w) => w,
            Err(status) if is_transient(&status) => {
                let since = *outage.get_or_insert_with(|| {
                    let _ = writeln!(std::io::stderr(), "{LOST_NOTICE}");
                    Instant::now()
                });
                if since.elapsed() >= GIVE_UP_AFTER {
                    return Err(Error::from_status(&ctx.node.address, status));
                }
                continue;
            }
            Err(status) => return Err(Error::from_status(&ctx.node.address, status)),
        };
        outage = None;
        let view = WorkflowView::from(&w);
        let now = now_ms();
        for j in &view.jobs {
            let key = change_key(j);
            if seen.get(&j.name) != Some(&key) {
                printer
                    .workflow_change(&change_line(j, now))
                    .map_err(Error::Output)?;
                seen.insert(j.name.clone(), key);
            }
        }
        current = view;
    }
    printer
        .workflow_followed(&current, now_ms())
        .map_err(Error::Output)?;
    Ok(if current.state == "COMPLETED" {
        exit::SUCCESS
    } else {
        exit::REFUSED
    })
}
