//! Running the resolved [`Settings`]: read the config, connect, dispatch to
//! the command group.

mod audit;
mod gpu;
mod job;
mod node;
mod runtime;
mod token;
mod volume;
mod whoami;
mod workflow;
mod workflow_follow;
mod workflow_logs;

use joblet_proto::ResolvedNode;

use crate::client::{
    self, Client, GpuClient, NodeClient, RuntimeClient, TokenClient, VolumeClient, WorkflowClient,
};
use crate::config;
use crate::error::Error;
use crate::settings::{Action, Settings};

/// What a command needs: the node it talks to and the output format.
pub struct Ctx {
    pub node: ResolvedNode,
    /// What the connection runs over: `unix:PATH` or `host:port`.
    pub endpoint: String,
    pub client: Client,
    /// The GPU, node, runtime, volume and workflow services, on the same
    /// connection.
    pub gpu: GpuClient,
    /// NodeService: the cluster's nodes (`node` is the config entry).
    pub nodes: NodeClient,
    pub runtime: RuntimeClient,
    pub volume: VolumeClient,
    pub workflow: WorkflowClient,
    /// TokenService: REST API tokens and console links.
    pub tokens: TokenClient,
    pub format: crate::printer::Format,
}

/// Runs the command; returns the exit code on success.
pub async fn run(settings: Settings) -> Result<u8, Error> {
    let node = config::load_node(&settings.config_path, settings.node.as_deref())?;
    let conn = client::connect_node(&node).await?;
    let ctx = Ctx {
        node,
        endpoint: conn.endpoint,
        client: Client::new(conn.channel.clone()),
        gpu: GpuClient::new(conn.channel.clone()),
        nodes: NodeClient::new(conn.channel.clone()),
        runtime: RuntimeClient::new(conn.channel.clone()),
        volume: VolumeClient::new(conn.channel.clone()),
        workflow: WorkflowClient::new(conn.channel.clone()),
        tokens: TokenClient::new(conn.channel),
        format: settings.format,
    };
    match settings.action {
        Action::Run(run) => job::run(ctx, *run).await,
        Action::Status { id, detail } => job::status(ctx, &id, detail).await,
        Action::List { states, limit } => job::list(ctx, &states, limit).await,
        Action::Log { id, follow } => job::log(ctx, &id, follow).await,
        Action::Attach {
            id,
            read_only,
            detach_keys,
        } => job::attach(ctx, &id, read_only, detach_keys).await,
        Action::Exec {
            id,
            command,
            env,
            interactive,
            tty,
        } => job::exec(ctx, &id, command, env, interactive, tty).await,
        Action::Execs { id } => job::execs(ctx, &id).await,
        Action::Stop { id, grace_seconds } => job::stop(ctx, &id, grace_seconds).await,
        Action::Kill { id } => job::kill(ctx, &id).await,
        Action::Delete { id } => job::delete(ctx, &id).await,
        Action::WhoAmI => whoami::run(ctx).await,
        Action::Gpu(gpu) => gpu::run(ctx, gpu).await,
        Action::Node(n) => node::run(ctx, n).await,
        Action::Runtime(r) => runtime::run(ctx, r).await,
        Action::Volume(v) => volume::run(ctx, v).await,
        Action::Workflow(w) => workflow::run(ctx, w).await,
        Action::Audit { since, owner } => audit::run(ctx, since, owner).await,
        Action::Token(t) => token::run(ctx, t).await,
        Action::Console { role } => token::console(ctx, role).await,
    }
}

/// Waits for the thread that read an upload's files. A local read failure
/// ends the stream early; it is the error to report, not the node's
/// "incomplete upload" answer to it.
fn upload_finished(
    reader: std::thread::JoinHandle<Result<(), crate::upload::UploadError>>,
) -> Result<(), Error> {
    match reader.join() {
        Ok(result) => result.map_err(Error::from),
        Err(_) => Err(Error::Output(std::io::Error::other(
            "the upload reader thread panicked",
        ))),
    }
}
