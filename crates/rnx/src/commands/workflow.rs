//! `rnx workflow run|validate|status|list|stop|delete` (`logs` and
//! `run --follow` have files of their own).

use std::io::Write;

use joblet_proto::{pb, upload_to_pb};

use super::job::now_ms;
use super::{workflow_follow, workflow_logs, Ctx};
use crate::error::Error;
use crate::exit;
use crate::printer::{human_bytes, Printer};
use crate::settings::{WorkflowAction, WorkflowFile};
use crate::upload::{self, UploadPlan};
use crate::workflow_uploads::{self, Sources};
use crate::workflow_view::{WorkflowDeletedView, WorkflowView};

pub async fn run(mut ctx: Ctx, action: WorkflowAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    match action {
        WorkflowAction::Run { file, follow } => return start(ctx, &file, follow).await,
        WorkflowAction::Validate { file } => {
            let request = request(&file, &UploadPlan::empty(upload::WORKFLOW), true);
            let answer = send(&mut ctx, request, UploadPlan::empty(upload::WORKFLOW)).await?;
            let shown = file.path.display().to_string();
            printer.workflow_validated(&WorkflowView::from(&answer), &shown, &file.workflow)
        }
        WorkflowAction::Status { id, detail } => {
            let w = get(&mut ctx, &id).await.map_err(status_err)?;
            printer.workflow_status(&WorkflowView::from(&w), detail, now_ms())
        }
        WorkflowAction::List { limit } => {
            let r = ctx
                .workflow
                .list_workflows(pb::ListWorkflowsRequest { limit })
                .await
                .map_err(status_err)?
                .into_inner();
            let views: Vec<WorkflowView> = r.workflows.iter().map(WorkflowView::from).collect();
            printer.workflow_list(&views, now_ms())
        }
        WorkflowAction::Logs { id, job } => {
            return workflow_logs::print(ctx, &id, job.as_deref()).await
        }
        WorkflowAction::Stop { id } => {
            let w = ctx
                .workflow
                .stop_workflow(workflow_ref(&id))
                .await
                .map_err(status_err)?
                .into_inner();
            printer.workflow_stopped(&WorkflowView::from(&w))
        }
        WorkflowAction::Delete { id } => {
            let r = ctx
                .workflow
                .delete_workflow(workflow_ref(&id))
                .await
                .map_err(status_err)?
                .into_inner();
            printer.workflow_deleted(&WorkflowDeletedView {
                id: r.workflow_id,
                deleted: true,
                jobs_deleted: r.jobs_deleted,
            })
        }
    }
    .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

fn workflow_ref(id: &str) -> pb::WorkflowRef {
    pb::WorkflowRef {
        workflow_id: id.to_owned(),
    }
}

/// GetWorkflow.
pub(super) async fn get(ctx: &mut Ctx, id: &str) -> Result<pb::Workflow, tonic::Status> {
    ctx.workflow
        .get_workflow(workflow_ref(id))
        .await
        .map(tonic::Response::into_inner)
}

/// The RunWorkflow request for `file` with `plan`'s manifest.
fn request(file: &WorkflowFile, plan: &UploadPlan, validate_only: bool) -> pb::RunWorkflowRequest {
    pb::RunWorkflowRequest {
        yaml: file.yaml.clone(),
        file: file.name.clone(),
        uploads: plan.entries.iter().map(upload_to_pb).collect(),
        validate_only,
    }
}

/// RunWorkflow: the request, then `plan`'s file bytes, as SubmitJob streams
/// a job's uploads.
async fn send(
    ctx: &mut Ctx,
    request: pb::RunWorkflowRequest,
    plan: UploadPlan,
) -> Result<pb::Workflow, Error> {
    let (stream, reader) = upload::stream_workflow(request, plan);
    let answer = ctx.workflow.run_workflow(stream).await;
    super::upload_finished(reader)?;
    answer
        .map(tonic::Response::into_inner)
        .map_err(|s| Error::from_status(&ctx.node.address, s))
}

/// `workflow run`: upload, start, show; then follow it when asked.
async fn start(mut ctx: Ctx, file: &WorkflowFile, follow: bool) -> Result<u8, Error> {
    let base = workflow_uploads::base_dir(&file.path);
    let sources = workflow_uploads::sources(&file.workflow);
    let plan = workflow_uploads::plan(&sources, &base)?;
    let files = plan.files.len();
    let what = match sources {
        Sources::Union(_) => "the jobs' uploads",
        Sources::Directory => {
            "the workflow file's directory; list `uploads:` in every job to send less"
        }
    };
    // Best effort, like the progress it precedes.
    let _ = writeln!(
        std::io::stderr(),
        "rnx: uploading {files} {} ({}) from {} ({what})",
        if files == 1 { "file" } else { "files" },
        human_bytes(plan.total),
        base.display(),
    );
    let request = request(file, &plan, false);
    let answer = send(&mut ctx, request, plan).await?;
    let view = WorkflowView::from(&answer);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    if !follow {
        printer
            .workflow_started(&view, now_ms())
            .map_err(Error::Output)?;
        return Ok(exit::SUCCESS);
    }
    printer
        .workflow_following(&view, now_ms())
        .map_err(Error::Output)?;
    workflow_follow::to_end(&mut ctx, &mut printer, view).await
}
