//! `rnx job …`: run, status, list, log, stop, kill, delete.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use joblet_core::JobState;
use joblet_proto::{job_request_to_pb, pb, states_to_pb};

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::follow::{self, GrpcLogs, ReconnectPolicy};
use crate::printer::Printer;
use crate::settings::RunSettings;
use crate::terminal::{self, session};
use crate::upload;
use crate::view::{state_name, JobView};

fn printer(ctx: &Ctx) -> Printer<std::io::Stdout> {
    Printer::new(ctx.format, std::io::stdout())
}

fn job_ref(id: &str) -> pb::JobRef {
    pb::JobRef {
        job_id: id.to_owned(),
    }
}

/// Sends the job: RunJob, or SubmitJob streaming the `--upload` files.
async fn send(ctx: &mut Ctx, run: &RunSettings) -> Result<pb::RunJobResponse, Error> {
    let address = ctx.node.address.clone();
    let plan = upload::scan(&run.uploads)?;
    if plan.entries.is_empty() {
        return ctx
            .client
            .run_job(job_request_to_pb(&run.request))
            .await
            .map(|r| r.into_inner())
            .map_err(|s| Error::from_status(&address, s));
    }
    let mut request = run.request.clone();
    request.uploads = plan.entries.clone();
    let (stream, reader) = upload::stream(job_request_to_pb(&request), plan);
    let answer = ctx.client.submit_job(stream).await;
    super::upload_finished(reader)?;
    answer
        .map(|r| r.into_inner())
        .map_err(|s| Error::from_status(&address, s))
}

/// The job as the node accepted it.
async fn send_job(ctx: &mut Ctx, run: &RunSettings) -> Result<pb::Job, Error> {
    send(ctx, run).await?.job.ok_or(Error::BadResponse {
        call: "RunJob",
        missing: "job",
    })
}

/// RunJobFollow: the job as accepted, and the rest of the call's stream
/// (its output). `None` when the node does not have the call (it is older
/// than this rnx): nothing was run, and RunJob + GetJobLogs will do.
async fn start_following(
    ctx: &mut Ctx,
    run: &RunSettings,
) -> Result<Option<(pb::Job, follow::EventStream)>, Error> {
    let address = ctx.node.address.clone();
    let mut stream = match ctx
        .client
        .run_job_follow(job_request_to_pb(&run.request))
        .await
    {
        Ok(response) => response.into_inner(),
        Err(s) if s.code() == tonic::Code::Unimplemented => {
            tracing::debug!(
                message = s.message(),
                "node has no RunJobFollow; using RunJob"
            );
            return Ok(None);
        }
        Err(s) => return Err(Error::from_status(&address, s)),
    };
    match stream.message().await {
        Ok(Some(pb::LogEvent {
            event: Some(pb::log_event::Event::Accepted(job)),
        })) => Ok(Some((job, Box::pin(stream)))),
        Ok(_) => Err(Error::BadResponse {
            call: "RunJobFollow",
            missing: "the accepted job as its first event",
        }),
        Err(s) => Err(Error::from_status(&address, s)),
    }
}

pub async fn run(mut ctx: Ctx, run: RunSettings) -> Result<u8, Error> {
    if run.request.interactive || run.request.tty {
        return run_interactive(ctx, run).await;
    }
    // Following a job without uploads is one call: its start and output.
    let started = match run.follow {
        Some(_) if run.uploads.is_empty() => start_following(&mut ctx, &run).await?,
        _ => None,
    };
    let (job, first) = match started {
        Some((job, stream)) => (job, Some(stream)),
        None => (send_job(&mut ctx, &run).await?, None),
    };
    let Some(policy) = run.follow else {
        printer(&ctx)
            .job_started(&JobView::from(&job))
            .map_err(Error::Output)?;
        return Ok(exit::SUCCESS);
    };
    follow_to_end(ctx, &job.id, policy, first).await
}

/// `rnx job run -i/-t`: the job on this terminal's size, attached from
/// its first byte of output until it ends (rnx exits with its code) or the
/// detach keys are typed (it keeps running).
async fn run_interactive(mut ctx: Ctx, mut run: RunSettings) -> Result<u8, Error> {
    if run.request.tty {
        if let Some((rows, cols)) = terminal::size() {
            run.request.tty_rows = i64::from(rows);
            run.request.tty_cols = i64::from(cols);
        }
        // Programs on the job's terminal need its type (as `docker run -t`
        // and ssh pass it): this terminal's, unless -e TERM=… says.
        if !run.request.env.iter().any(|(k, _)| k == "TERM") {
            let term = std::env::var("TERM").unwrap_or_else(|_| "xterm".into());
            run.request.env.push(("TERM".into(), term));
        }
    }
    let job = send_job(&mut ctx, &run).await?;
    // Raw only when this terminal's keys go to the job (-it).
    let raw = run.request.tty && run.request.interactive && terminal::stdin_is_terminal();
    let opts = session::Options {
        job_id: job.id.clone(),
        read_only: false,
        raw,
        detach_keys: run.detach_keys.clone(),
        replay_bytes: u64::MAX,
        stdin: run.request.interactive,
    };
    let address = ctx.node.address.clone();
    let end = session::attach(&mut ctx.client, &address, opts).await?;
    Ok(after_attach(&job.id, end, raw))
}

/// `rnx job attach ID`: the last screenful of the job's output, then
/// everything new, and (unless --read-only) this terminal's input.
pub async fn attach(
    mut ctx: Ctx,
    id: &str,
    read_only: bool,
    detach_keys: terminal::DetachKeys,
) -> Result<u8, Error> {
    let job = get(&mut ctx, id).await?;
    if !job.interactive && !job.tty {
        return Err(Error::Node(tonic::Status::failed_precondition(format!(
            "job {} was started without -i or -t: it takes no input; follow its output with `rnx job log -f {}`",
            job.id, job.id
        ))));
    }
    let raw = job.tty && !read_only && terminal::stdin_is_terminal();
    let opts = session::Options {
        job_id: job.id.clone(),
        read_only,
        raw,
        detach_keys,
        replay_bytes: REPLAY_ON_ATTACH,
        stdin: true,
    };
    let address = ctx.node.address.clone();
    let end = session::attach(&mut ctx.client, &address, opts).await?;
    Ok(after_attach(&job.id, end, raw))
}

/// `rnx job exec`: a command inside the running job; rnx exits with its
/// code (128 + N when signal N ended it).
pub async fn exec(
    mut ctx: Ctx,
    id: &str,
    command: Vec<String>,
    env: Vec<(String, String)>,
    interactive: bool,
    tty: bool,
) -> Result<u8, Error> {
    let mut env: std::collections::HashMap<String, String> = env.into_iter().collect();
    if tty && !env.contains_key("TERM") {
        env.insert(
            "TERM".into(),
            std::env::var("TERM").unwrap_or_else(|_| "xterm".into()),
        );
    }
    let (command, args) = match command.split_first() {
        Some((c, rest)) => (c.clone(), rest.to_vec()),
        None => (String::new(), Vec::new()),
    };
    let size = if tty {
        terminal::size().map(|(rows, cols)| pb::TerminalSize {
            rows: u32::from(rows),
            cols: u32::from(cols),
        })
    } else {
        None
    };
    let opts = session::ExecOptions {
        start: pb::ExecStart {
            job_id: id.to_owned(),
            command,
            args,
            env,
            interactive,
            tty,
            size,
        },
        raw: tty && interactive && terminal::stdin_is_terminal(),
    };
    let address = ctx.node.address.clone();
    let exit = session::exec(&mut ctx.client, &address, opts).await?;
    Ok(match (exit.exit_code, exit.signal) {
        (Some(c), _) => exit::for_job(Some(c)),
        (None, s) if s > 0 => u8::try_from(128 + s).unwrap_or(exit::JOB_WITHOUT_EXIT_CODE),
        _ => exit::JOB_WITHOUT_EXIT_CODE,
    })
}

/// `rnx job execs ID`: the exec audit of a job.
pub async fn execs(mut ctx: Ctx, id: &str) -> Result<u8, Error> {
    let execs = ctx
        .client
        .list_execs(job_ref(id))
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner()
        .execs;
    printer(&ctx).exec_list(&execs).map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

/// Output shown again on `rnx job attach`: about a screenful, so the
/// prompt the shell printed before is there.
const REPLAY_ON_ATTACH: u64 = 4096;

/// rnx's exit code once an attachment ended; says on stderr what the
/// code alone would not (after the terminal was restored).
fn after_attach(job_id: &str, end: session::End, raw: bool) -> u8 {
    match end {
        session::End::Ended(ended) => {
            if raw {
                // The job's last line may not have ended its line.
                let _ = writeln!(std::io::stdout());
            }
            exit_for_end(job_id, &ended)
        }
        session::End::Detached => {
            let _ = writeln!(
                std::io::stderr(),
                "\nrnx: detached from job {job_id}; it keeps running. Reattach with `rnx job attach {job_id}`"
            );
            exit::SUCCESS
        }
    }
}

/// Streams a started job's output until it ends (`first`: its output
/// opened already from byte 0); the job's exit code as rnx's, with a line
/// on stderr when the code alone would not tell what happened.
pub(super) async fn follow_to_end(
    ctx: Ctx,
    job_id: &str,
    policy: ReconnectPolicy,
    first: Option<follow::EventStream>,
) -> Result<u8, Error> {
    let ended = copy_output(ctx, job_id, Some(policy), first).await?;
    let Some(ended) = ended else {
        return Err(Error::BadResponse {
            call: "GetJobLogs",
            missing: "JobEnded event",
        });
    };
    Ok(exit_for_end(job_id, &ended))
}

/// The job's exit code as rnx's, with a line on stderr when the code alone
/// would not tell what happened.
fn exit_for_end(job_id: &str, ended: &pb::JobEnded) -> u8 {
    let code = exit::for_job(ended.exit_code);
    let state = state_name(ended.state);
    let mut err = std::io::stderr().lock();
    // Best effort: the exit code already tells what happened.
    let _ = match ended.exit_code {
        None => writeln!(
            err,
            "rnx: job {job_id} ended {state} without an exit code: {}",
            reason_or_unknown(&ended.reason)
        ),
        Some(c) if i32::from(code) != c => writeln!(
            err,
            "rnx: job {job_id} ended {state} with exit code {c}, which does not fit an exit status; exiting with {code}"
        ),
        Some(_) => Ok(()),
    };
    code
}

fn reason_or_unknown(reason: &str) -> &str {
    if reason.is_empty() {
        "no reason given"
    } else {
        reason
    }
}

/// Streams the job's output to stdout/stderr; the end event when the node
/// sent one. `first`: a stream of its output from byte 0 opened already.
async fn copy_output(
    ctx: Ctx,
    job_id: &str,
    follow: Option<ReconnectPolicy>,
    first: Option<follow::EventStream>,
) -> Result<Option<pb::JobEnded>, Error> {
    let address = ctx.node.address.clone();
    let mut source = GrpcLogs {
        client: ctx.client,
        job_id: job_id.to_owned(),
        follow: follow.is_some(),
        first,
    };
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let outcome = follow::copy_logs(
        &mut source,
        job_id,
        follow,
        &mut stdout.lock(),
        &mut stderr.lock(),
    )
    .await
    .map_err(|e| Error::from_follow(&address, e))?;
    if let Some(ended) = &outcome.ended {
        if ended.total_bytes > outcome.next_seq {
            tracing::warn!(
                received = outcome.next_seq,
                total = ended.total_bytes,
                "the node reports more output than it sent"
            );
        }
    }
    Ok(outcome.ended)
}

async fn get(ctx: &mut Ctx, id: &str) -> Result<pb::Job, Error> {
    ctx.client
        .get_job_status(job_ref(id))
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| Error::from_status(&ctx.node.address, s))
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub async fn status(mut ctx: Ctx, id: &str, detail: bool) -> Result<u8, Error> {
    let job = get(&mut ctx, id).await?;
    printer(&ctx)
        .job_status(&JobView::from(&job), detail, now_ms())
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

pub async fn list(mut ctx: Ctx, states: &[JobState], limit: i64) -> Result<u8, Error> {
    let request = pb::ListJobsRequest {
        states: states_to_pb(states),
        limit,
    };
    let jobs = ctx
        .client
        .list_jobs(request)
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner()
        .jobs;
    let views: Vec<JobView> = jobs.iter().map(JobView::from).collect();
    printer(&ctx).job_list(&views).map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

pub async fn log(ctx: Ctx, id: &str, follow: Option<ReconnectPolicy>) -> Result<u8, Error> {
    copy_output(ctx, id, follow, None).await?;
    Ok(exit::SUCCESS)
}

pub async fn stop(mut ctx: Ctx, id: &str, grace_seconds: Option<i64>) -> Result<u8, Error> {
    let request = pb::StopJobRequest {
        job_id: id.to_owned(),
        grace_seconds,
    };
    let job = ctx
        .client
        .stop_job(request)
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner();
    printer(&ctx)
        .job_signalled(
            &JobView::from(&job),
            "stop requested (SIGTERM now, SIGKILL after the grace period)",
        )
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

pub async fn kill(mut ctx: Ctx, id: &str) -> Result<u8, Error> {
    let job = ctx
        .client
        .kill_job(job_ref(id))
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner();
    printer(&ctx)
        .job_signalled(&JobView::from(&job), "SIGKILL sent")
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

pub async fn delete(mut ctx: Ctx, id: &str) -> Result<u8, Error> {
    let deleted = ctx
        .client
        .delete_job(job_ref(id))
        .await
        .map_err(|s| Error::from_status(&ctx.node.address, s))?
        .into_inner();
    printer(&ctx)
        .job_deleted(&deleted.id)
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
