//! Parsed arguments resolved once into what the commands act on: the
//! validated [`JobRequest`], the config file and node, the output format.

use std::path::PathBuf;

use joblet_core::gpu::AdminAction;
use joblet_core::{FieldError, JobRequest, JobState};

use crate::args::{
    Cli, Command, GpuCommand, JobCommand, NodeCommand, RunArgs, RuntimeCommand, TokenCommand,
    VolumeCommand, WorkflowCommand,
};
use crate::config::{self, LookupEnv};
use crate::error::Error;
use crate::follow::ReconnectPolicy;
use crate::printer::Format;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub format: Format,
    /// The client config file to read.
    pub config_path: PathBuf,
    /// `--node`, or `None` for the file's default.
    pub node: Option<String>,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Run(Box<RunSettings>),
    Status {
        id: String,
        detail: bool,
    },
    List {
        states: Vec<JobState>,
        limit: i64,
    },
    Log {
        id: String,
        follow: Option<ReconnectPolicy>,
    },
    Attach {
        id: String,
        read_only: bool,
        detach_keys: crate::terminal::DetachKeys,
    },
    Exec {
        id: String,
        command: Vec<String>,
        env: Vec<(String, String)>,
        interactive: bool,
        tty: bool,
    },
    Execs {
        id: String,
    },
    Stop {
        id: String,
        grace_seconds: Option<i64>,
    },
    Kill {
        id: String,
    },
    Delete {
        id: String,
    },
    WhoAmI,
    Gpu(GpuAction),
    Node(NodeAction),
    Runtime(RuntimeAction),
    Volume(VolumeAction),
    Workflow(WorkflowAction),
    /// `rnx audit`.
    Audit {
        since: Option<crate::parsers::Since>,
        owner: Option<String>,
    },
    Token(TokenAction),
    /// `rnx console`: a sign-in link, with this role (`None`: the caller's).
    Console {
        role: Option<&'static str>,
    },
}

/// `rnx token ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenAction {
    Create {
        name: String,
        role: &'static str,
        /// Seconds; `None` = never expires.
        expires_seconds: Option<i64>,
    },
    List,
    Revoke {
        token: String,
    },
}

/// `rnx gpu ...`. `on`: cluster mode, the node whose GPUs to show
/// (`--on`); `None` = the node connected to.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuAction {
    Status {
        all: bool,
        on: Option<String>,
    },
    Health {
        gpu_id: String,
    },
    Watch {
        interval: std::time::Duration,
        count: Option<u64>,
        all: bool,
        on: Option<String>,
    },
    Set {
        gpu_id: String,
        action: AdminAction,
    },
}

/// `rnx node ...`: the cluster's nodes, by their cluster names.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAction {
    List,
    /// `drain` (true) or `undrain` (false).
    Drain {
        name: String,
        drain: bool,
    },
}

/// `rnx runtime ...`. Runtime names are `NAME` or `NAME@VERSION`.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeAction {
    List {
        /// Also the catalog entries not installed.
        all: bool,
    },
    Info {
        name: String,
    },
    Install {
        name: String,
        extras: Vec<String>,
        rebuild: bool,
    },
    /// The manifest's directory is read when the command runs.
    Build {
        path: PathBuf,
        extras: Vec<String>,
        rebuild: bool,
    },
    Remove {
        name: String,
    },
    /// Runs the self-check job and follows it to its end.
    Test {
        name: String,
        follow: ReconnectPolicy,
    },
}

/// `rnx volume ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeAction {
    Create {
        name: String,
        size_bytes: i64,
        /// `filesystem` or `memory`, as the API names them.
        kind: &'static str,
        shared: bool,
    },
    List,
    Inspect {
        name: String,
    },
    Remove {
        name: String,
        force: bool,
    },
    SetShared {
        name: String,
        shared: bool,
    },
}

/// `rnx workflow ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowAction {
    Run {
        file: Box<WorkflowFile>,
        follow: bool,
    },
    Validate {
        file: Box<WorkflowFile>,
    },
    Status {
        id: String,
        detail: bool,
    },
    List {
        limit: i64,
    },
    Logs {
        id: String,
        /// Only this job of the workflow.
        job: Option<String>,
    },
    Stop {
        id: String,
    },
    Delete {
        id: String,
    },
}

/// A workflow file, read and checked here so its mistakes show before any
/// connection is made.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowFile {
    /// As given on the command line.
    pub path: PathBuf,
    /// Its file name, as the node is told it.
    pub name: String,
    pub yaml: String,
    pub workflow: joblet_workflow::Workflow,
}

/// Reads and checks the workflow file at `path`; errors name it as given.
pub fn workflow_file(path: PathBuf) -> Result<WorkflowFile, Error> {
    let shown = path.display().to_string();
    let yaml = std::fs::read_to_string(&path).map_err(|source| Error::WorkflowFile {
        path: path.clone(),
        source,
    })?;
    let limits = joblet_workflow::Limits {
        max_gpus_per_node: None,
    };
    let workflow = joblet_workflow::Workflow::parse(&yaml, &shown, &limits)
        .map_err(|e| Error::WorkflowFormat(Box::new(e)))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    Ok(WorkflowFile {
        path,
        name,
        yaml,
        workflow,
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// Already checked with [`JobRequest::validate`].
    pub request: JobRequest,
    /// `Some` with `--follow`.
    pub follow: Option<ReconnectPolicy>,
    /// `--upload` paths, scanned into the request's manifest when it is sent.
    pub uploads: Vec<std::path::PathBuf>,
    /// `--detach-keys` (for `-t` on a terminal).
    pub detach_keys: crate::terminal::DetachKeys,
}

impl Settings {
    /// Resolves the command line. Usage problems are reported before the
    /// config file is looked for.
    pub fn resolve(cli: Cli, env: &LookupEnv) -> Result<Settings, Error> {
        let action = action(cli.command)?;
        let (config_path, _) = config::locate(cli.global.config.as_deref(), env)?;
        Ok(Settings {
            format: if cli.global.json {
                Format::Json
            } else {
                Format::Human
            },
            config_path,
            node: cli.global.node,
            action,
        })
    }
}

/// The action a command line asks for, with its request validated.
pub fn action(command: Command) -> Result<Action, Error> {
    Ok(match command {
        Command::Whoami => Action::WhoAmI,
        Command::Audit(a) => Action::Audit {
            since: a.since,
            owner: a.owner,
        },
        Command::Gpu(gpu) => Action::Gpu(match gpu {
            GpuCommand::Status(a) => GpuAction::Status {
                all: a.all,
                on: a.on,
            },
            GpuCommand::Health(a) => GpuAction::Health { gpu_id: a.gpu_id },
            GpuCommand::Watch(a) => GpuAction::Watch {
                interval: a.interval,
                count: a.count,
                all: a.all,
                on: a.on,
            },
            GpuCommand::Drain(a) => GpuAction::Set {
                gpu_id: a.gpu_id,
                action: AdminAction::Drain,
            },
            GpuCommand::Offline(a) => GpuAction::Set {
                gpu_id: a.gpu_id,
                action: AdminAction::Offline { force: a.force },
            },
            GpuCommand::Online(a) => GpuAction::Set {
                gpu_id: a.gpu_id,
                action: AdminAction::Online,
            },
        }),
        Command::Token(t) => Action::Token(match t {
            TokenCommand::Create(a) => TokenAction::Create {
                name: a.name,
                role: a.role.as_str(),
                expires_seconds: a.expires,
            },
            TokenCommand::List => TokenAction::List,
            TokenCommand::Revoke(a) => TokenAction::Revoke { token: a.token },
        }),
        Command::Console(a) => Action::Console {
            role: a.role.map(|r| r.as_str()),
        },
        Command::Node(n) => Action::Node(match n {
            NodeCommand::List => NodeAction::List,
            NodeCommand::Drain(a) => NodeAction::Drain {
                name: a.name,
                drain: true,
            },
            NodeCommand::Undrain(a) => NodeAction::Drain {
                name: a.name,
                drain: false,
            },
        }),
        Command::Runtime(r) => Action::Runtime(match r {
            RuntimeCommand::List(a) => RuntimeAction::List { all: a.all },
            RuntimeCommand::Info(a) => RuntimeAction::Info { name: a.name },
            RuntimeCommand::Install(a) => RuntimeAction::Install {
                name: a.name,
                extras: a.extras,
                rebuild: a.rebuild,
            },
            RuntimeCommand::Build(a) => RuntimeAction::Build {
                path: a.path,
                extras: a.extras,
                rebuild: a.rebuild,
            },
            RuntimeCommand::Remove(a) => RuntimeAction::Remove { name: a.name },
            RuntimeCommand::Test(a) => RuntimeAction::Test {
                name: a.name,
                follow: ReconnectPolicy::new(a.reconnect_timeout),
            },
        }),
        Command::Volume(v) => Action::Volume(match v {
            VolumeCommand::Create(a) => VolumeAction::Create {
                name: a.name,
                size_bytes: a.size,
                kind: a.kind.as_str(),
                shared: a.shared,
            },
            VolumeCommand::List => VolumeAction::List,
            VolumeCommand::Inspect(a) => VolumeAction::Inspect { name: a.name },
            VolumeCommand::Remove(a) => VolumeAction::Remove {
                name: a.name,
                force: a.force,
            },
            VolumeCommand::Share(a) => VolumeAction::SetShared {
                name: a.name,
                shared: true,
            },
            VolumeCommand::Unshare(a) => VolumeAction::SetShared {
                name: a.name,
                shared: false,
            },
        }),
        Command::Workflow(w) => Action::Workflow(match w {
            WorkflowCommand::Run(a) => WorkflowAction::Run {
                file: Box::new(workflow_file(a.file)?),
                follow: a.follow,
            },
            WorkflowCommand::Validate(a) => WorkflowAction::Validate {
                file: Box::new(workflow_file(a.file)?),
            },
            WorkflowCommand::Status(a) => WorkflowAction::Status {
                id: a.id,
                detail: a.detail,
            },
            WorkflowCommand::List(a) => WorkflowAction::List {
                limit: a.limit.unwrap_or(0),
            },
            WorkflowCommand::Logs(a) => WorkflowAction::Logs {
                id: a.id,
                job: a.job,
            },
            WorkflowCommand::Stop(a) => WorkflowAction::Stop { id: a.id },
            WorkflowCommand::Delete(a) => WorkflowAction::Delete { id: a.id },
        }),
        Command::Job(job) => match job {
            JobCommand::Run(run) => Action::Run(Box::new(run_settings(&run)?)),
            JobCommand::Status(a) => Action::Status {
                id: a.id,
                detail: a.detail,
            },
            JobCommand::List(a) => Action::List {
                states: a.states,
                limit: a.limit.unwrap_or(0),
            },
            JobCommand::Log(a) => Action::Log {
                id: a.id,
                follow: a.follow.then(|| ReconnectPolicy::new(a.reconnect_timeout)),
            },
            JobCommand::Stop(a) => Action::Stop {
                id: a.id,
                grace_seconds: a.grace,
            },
            JobCommand::Kill(a) => Action::Kill { id: a.id },
            JobCommand::Delete(a) => Action::Delete { id: a.id },
            JobCommand::Attach(a) => Action::Attach {
                id: a.id,
                read_only: a.read_only,
                detach_keys: a.detach_keys,
            },
            JobCommand::Exec(a) => Action::Exec {
                id: a.id,
                command: a.command,
                env: a.env,
                interactive: a.interactive,
                tty: a.tty,
            },
            JobCommand::Execs(a) => Action::Execs { id: a.id },
        },
    })
}

/// `job run`'s flags as a request, checked with the server's own rules.
pub fn run_settings(a: &RunArgs) -> Result<RunSettings, Error> {
    let (command, args) = match a.command.split_first() {
        Some((c, rest)) => (c.clone(), rest.to_vec()),
        None => (String::new(), Vec::new()),
    };
    let request = JobRequest {
        command,
        args,
        max_cpu: a.max_cpu.unwrap_or(0),
        cpu_cores: a.cpu_cores.clone().unwrap_or_default(),
        max_memory_mb: a.max_memory.unwrap_or(0),
        max_iobps: a.max_iobps.unwrap_or(0),
        gpu_count: a.gpu.map_or(0, |g| g.count),
        gpu_memory_mb: a.gpu_memory.unwrap_or(0),
        gpu_milli: a.gpu.map_or(0, |g| g.milli),
        env: a.env.clone(),
        secret_env: a
            .secret_env
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect(),
        // The manifest is built from the files when the job is sent.
        uploads: Vec::new(),
        volumes: a.volumes.clone(),
        network: a.network.clone().unwrap_or_default(),
        runtime: a.runtime.clone().unwrap_or_default(),
        timeout_ms: a.timeout,
        // For nodes that predate timeout_ms: whole seconds, rounded up so
        // a sub-second limit is not 0 there; 0 stays unset (the node's
        // default).
        timeout_seconds: a.timeout.filter(|ms| *ms > 0).map(|ms| (ms + 999) / 1000),
        gpu_time_seconds: a.gpu_time,
        cuda_version: a.cuda.clone().unwrap_or_default(),
        mig_profile: a.mig.clone().unwrap_or_default(),
        gpu_profiling: a.gpu_profiling,
        restart: a.restart.clone().unwrap_or_default(),
        executor: a.executor.clone().unwrap_or_default(),
        devices: a.devices.clone(),
        interactive: a.interactive,
        tty: a.tty,
        // The terminal's size is read when the job is sent.
        tty_rows: 0,
        tty_cols: 0,
    };
    checkable(&request)
        .validate()
        .map_err(|source| Error::InvalidRequest {
            flag: flag_for_field(&source),
            source,
        })?;
    Ok(RunSettings {
        request,
        follow: a.follow.then(|| ReconnectPolicy::new(a.reconnect_timeout)),
        uploads: a.uploads.iter().map(std::path::PathBuf::from).collect(),
        detach_keys: a.detach_keys.clone(),
    })
}

/// The request as [`JobRequest::validate`] checks it: `--volume=NAME:ro`
/// and `--runtime=NAME@VERSION` by their names (the parsers checked the
/// rest of their form); the request sent keeps them whole.
fn checkable(request: &JobRequest) -> JobRequest {
    let mut r = request.clone();
    for v in &mut r.volumes {
        *v = crate::parsers::volume_base(v).to_owned();
    }
    r.runtime = crate::parsers::runtime_base(&r.runtime).to_owned();
    r
}

/// The `rnx job run` flag that sets a request field.
pub fn flag_for_field(e: &FieldError) -> &'static str {
    let field = e.field.as_str();
    let base = field.split(['[', '.']).next().unwrap_or(field);
    match (base, field) {
        ("command" | "args", _) => "COMMAND",
        (_, "resources.max_cpu") => "--max-cpu",
        (_, "resources.cpu_cores") => "--cpu-cores",
        (_, "resources.max_memory_mb") => "--max-memory",
        (_, "resources.max_iobps") => "--max-iobps",
        (_, "resources.gpu_count" | "resources.gpu_milli") => "--gpu",
        (_, "resources.gpu_memory_mb") => "--gpu-memory",
        (_, "resources.gpu_time_seconds") => "--gpu-time",
        ("cuda_version", _) => "--cuda",
        ("mig_profile", _) => "--mig",
        ("gpu_profiling", _) => "--gpu-profiling",
        ("restart", _) => "--restart",
        ("executor", _) => "--executor",
        ("devices", _) => "--device",
        ("env", _) => "--env",
        ("secret_env", _) => "--secret-env",
        ("uploads", _) => "--upload",
        ("volumes", _) => "--volume",
        ("network", _) => "--network",
        ("runtime", _) => "--runtime",
        ("timeout_seconds" | "timeout_ms", _) => "--timeout",
        _ => "request",
    }
}

#[cfg(test)]
mod tests;
