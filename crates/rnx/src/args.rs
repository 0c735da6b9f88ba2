//! The command-line syntax: clap derive structs, plain data. What the values
//! mean is decided in [`crate::settings`]; how they are checked, in
//! [`crate::parsers`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use joblet_core::JobState;

use crate::parsers::{self, SecretPair};

mod workflow;
pub use workflow::*;

const ROOT_AFTER_HELP: &str = "\
Configuration:
  rnx reads its node address and certificates from the first of
    --config FILE, $RNX_CONFIG, ~/.rnx/rnx-config.yml
  The daemon writes a ready rnx-config.yml into its state directory on first
  start (by default /var/lib/joblet/rnx-config.yml).

Exit codes:
  0    success
  1    the node refused or failed the request; `rnx workflow run --follow`:
       the workflow ended FAILED, STOPPED or CANCELED
  2    usage error (bad flag or value)
  3    cannot connect to the node, or the TLS handshake failed; or the
       connection broke while attached to a job or in `rnx job exec`
  4    the client config file is missing or invalid
  N    `rnx job run --follow` / `-i` / `-t`, `rnx job attach`, `rnx runtime
       test`: the job's own exit code; `rnx job exec`: the command's (126:
       it could not enter the job, 127: not found there, 128+N: signal N)
  125  `rnx job run --follow`, `rnx runtime test`: the job ended without an exit code
  130  `rnx workflow run --follow` interrupted (Ctrl-C): the workflow keeps running";

/// rnx: run and manage jobs on a Joblet node.
#[derive(Debug, Parser)]
#[command(
    name = "rnx",
    version,
    after_help = ROOT_AFTER_HELP,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

const GLOBAL: &str = "Global options";

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Client config file [default: $RNX_CONFIG, then ~/.rnx/rnx-config.yml]
    #[arg(long, global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,
    /// Node of the config file to use [default: the file's default_node]
    #[arg(long, global = true, value_name = "NAME", help_heading = GLOBAL)]
    pub node: Option<String>,
    /// Print JSON on stdout instead of text
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run jobs and look at them
    #[command(subcommand)]
    Job(JobCommand),
    /// Workflows: YAML files of jobs, each started once the jobs it requires have ended
    #[command(subcommand, after_help = WORKFLOW_AFTER_HELP)]
    Workflow(WorkflowCommand),
    /// Runtimes: prebuilt, read-only software environments jobs run in (--runtime)
    #[command(subcommand, after_help = RUNTIME_AFTER_HELP)]
    Runtime(RuntimeCommand),
    /// Volumes: named storage that outlives jobs, mounted at /volumes/NAME (--volume)
    #[command(subcommand, after_help = VOLUME_AFTER_HELP)]
    Volume(VolumeCommand),
    /// Show who the node thinks you are, which limits it enforces and what runs jobs
    Whoami,
    /// See the node's GPUs and their health; drain or take them offline (admin)
    #[command(subcommand)]
    Gpu(GpuCommand),
    /// Cluster mode: the cluster's nodes; drain one so no new jobs go to it (admin)
    #[command(subcommand, after_help = NODE_AFTER_HELP)]
    Node(NodeCommand),
    /// Admin: the GPU audit log, one record per GPU allocation
    Audit(AuditArgs),
    /// Admin: API tokens for the REST API (scripts, dashboards): create, list, revoke
    #[command(subcommand, after_help = TOKEN_AFTER_HELP)]
    Token(TokenCommand),
    /// Admin: a one-time sign-in link to the node's web console (valid 5 minutes)
    #[command(after_help = CONSOLE_AFTER_HELP)]
    Console(ConsoleArgs),
}

const TOKEN_AFTER_HELP: &str = "\
The node's REST API (https://HOST:8443/api/v1/..., `rest:` in
joblet-config.yml; docs/observability.md) takes the same identities as rnx: a
client certificate of the node's CA, or an API token made here. A token acts
as its NAME with its role: a viewer token reads, an admin token may also run
and stop jobs (they are owned by NAME). The node keeps only a hash of the
secret: `token create` prints it once, `token list` never shows it.

Examples:
  rnx token create --name ci-bot --role viewer --expires 30d
  curl --cacert ~/.rnx/ca.crt -H \"Authorization: Bearer $TOKEN\" https://node:8443/api/v1/jobs
  rnx token list
  rnx token revoke ci-bot";

const CONSOLE_AFTER_HELP: &str = "\
Prints a link like https://HOST:8443/console/login?code=... Opening it signs
the browser in to the web console as you (a session of 12 hours, in a cookie),
with your role or the one --role asks for; the link works once, within 5
minutes. The browser must trust the node's CA certificate (ca.crt beside your
rnx-config.yml) or it warns about the connection.

Examples:
  rnx console
  rnx console --role viewer
  rnx --json console | jq -r .url";

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Admin: make a token; its secret is printed once, keep it safe
    #[command(
        after_help = "The token is printed once: send it as `Authorization: Bearer TOKEN`.\nWith --json: {\"token\": {...}, \"secret\": \"jbt_...\"}.\n\nExamples:\n  rnx token create --name grafana --role viewer\n  rnx token create --name nightly --role admin --expires 90d\n  TOKEN=$(rnx --json token create --name ci --role viewer | jq -r .secret)"
    )]
    Create(TokenCreateArgs),
    /// Admin: the tokens (never their secrets): name, role, who made them, expiry, last use
    List,
    /// Admin: revoke a token by name or id; it stops working at once
    #[command(after_help = "Examples:\n  rnx token revoke ci-bot")]
    Revoke(TokenRevokeArgs),
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The token's name, unique on the node; it acts as (and owns the jobs of) this name
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// viewer (read only) or admin (may also change things)
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: RoleArg,
    /// Expire after this long, like 12h, 30d or 52w [default: never]
    #[arg(long, value_name = "DURATION", value_parser = parsers::token_expiry)]
    pub expires: Option<i64>,
}

#[derive(Debug, Args)]
pub struct TokenRevokeArgs {
    /// The token's name or id (`rnx token list`)
    #[arg(value_name = "NAME|ID")]
    pub token: String,
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Sign in with this role instead of your own (viewer: a read-only console)
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: Option<RoleArg>,
}

/// A role, as tokens and console sessions take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    Viewer,
    Admin,
}

impl RoleArg {
    pub fn as_str(self) -> &'static str {
        match self {
            RoleArg::Viewer => "viewer",
            RoleArg::Admin => "admin",
        }
    }
}

const RUNTIME_AFTER_HELP: &str = "\
A runtime is a complete, read-only root filesystem (Debian packages, a
Python with its locked packages, environment variables) that the node
builds once and jobs then start in: `rnx job run --runtime=NAME[@VERSION]`.
The node keeps a catalog of runtimes it knows how to build; `install` builds
one of them, `build` builds one from your own manifest (runtime.yml).
Each installed runtime is named by NAME@VERSION and identified by the digest
of its files, so a job's environment can be named exactly.

Examples:
  rnx runtime list --all
  rnx runtime info python-3.11-ml
  rnx runtime install python-3.11-ml@1.0 --extra tensorflow
  rnx runtime build ./my-runtime/
  rnx runtime test python-3.11-ml
  rnx job run --runtime=python-3.11-ml@1.0 --gpu=1 python train.py";

const RUNTIME_REF_HELP: &str =
    "Runtime name, optionally with its version: python-3.11-ml or python-3.11-ml@1.0";

#[derive(Debug, Subcommand)]
pub enum RuntimeCommand {
    /// Table of installed runtimes: version, digest, size, when installed, jobs using it
    #[command(
        after_help = "Examples:\n  rnx runtime list\n  rnx runtime list --all\n  rnx --json runtime list | jq -r '.[] | select(.installed) | .reference'"
    )]
    List(RuntimeListArgs),
    /// Everything about one runtime: digest, size, CUDA, environment, self-check, packages, jobs
    #[command(
        after_help = "A runtime that is not installed but is in the node's catalog is shown as\n`available`, with what installing it would give.\n\nExamples:\n  rnx runtime info python-3.11-ml\n  rnx runtime info python-3.11-ml@1.0\n  rnx --json runtime info python-3.11-ml | jq -r '.python_packages[]'"
    )]
    Info(RuntimeRefArgs),
    /// Admin: build a runtime from the node's catalog and install it
    #[command(after_help = RUNTIME_INSTALL_AFTER_HELP)]
    Install(RuntimeInstallArgs),
    /// Admin: build a runtime from your own manifest (runtime.yml) and install it
    #[command(after_help = RUNTIME_BUILD_AFTER_HELP)]
    Build(RuntimeBuildArgs),
    /// Admin: remove an installed runtime (refused while unfinished jobs use it)
    #[command(
        after_help = "Jobs that are not finished keep a runtime in use: stop them first\n(`rnx runtime info NAME` lists them).\n\nExamples:\n  rnx runtime remove python-3.11-ml@0.9"
    )]
    Remove(RuntimeRefArgs),
    /// Run the runtime's self-check as a job, stream its output, exit with its exit code
    #[command(
        after_help = "The self-check is the manifest's `self_check` command (see `rnx runtime info`).\nThe job's id is printed on stderr; its output goes to stdout and stderr as\nwith `rnx job run --follow` (with --json too), and rnx exits with the job's\nexit code.\n\nExamples:\n  rnx runtime test python-3.11-ml\n  rnx runtime test python-3.11-ml@1.0 && echo ready"
    )]
    Test(RuntimeTestArgs),
}

const RUNTIME_INSTALL_AFTER_HELP: &str = "\
The node builds the runtime (base system, then Python packages), stores its
files by content and installs it; progress is shown on stderr, then one line:
name@version, digest, size and the time it took. A failed or interrupted
build installs nothing. Installing what is already stored is quick unless
--rebuild is given.

Examples:
  rnx runtime install python-3.11-ml
  rnx runtime install python-3.11-ml@1.0 --extra tensorflow
  rnx runtime install python-3.11-ml --rebuild";

const RUNTIME_BUILD_AFTER_HELP: &str = "\
PATH is the manifest file or the directory holding runtime.yml. rnx sends the
manifest (as runtime.yml) and every file under its directory, by its path
relative to it; hidden directories (.git, .venv) are skipped. Symlinks to files
inside the directory are sent as those files; symlinks leading out of it are
refused, and so is more than 64 MiB in all. Then as `rnx runtime install`.

Examples:
  rnx runtime build ./my-runtime/
  rnx runtime build ./my-runtime/runtime.yml --extra tensorflow
  rnx runtime build ./my-runtime/ --rebuild";

#[derive(Debug, Args)]
pub struct RuntimeListArgs {
    /// Also the node's catalog entries that are not installed (shown as available)
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct RuntimeRefArgs {
    #[arg(value_name = "NAME[@VERSION]", help = RUNTIME_REF_HELP, value_parser = parsers::runtime_name)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct RuntimeInstallArgs {
    #[arg(value_name = "NAME[@VERSION]", help = RUNTIME_REF_HELP, value_parser = parsers::runtime_name)]
    pub name: String,
    /// One of the manifest's optional extras to include (repeatable), e.g. --extra tensorflow
    #[arg(long = "extra", value_name = "NAME", value_parser = parsers::extra_name)]
    pub extras: Vec<String>,
    /// Build again even when a runtime with the same inputs is stored
    #[arg(long)]
    pub rebuild: bool,
}

#[derive(Debug, Args)]
pub struct RuntimeBuildArgs {
    /// The manifest (runtime.yml) or the directory holding it
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// One of the manifest's optional extras to include (repeatable), e.g. --extra tensorflow
    #[arg(long = "extra", value_name = "NAME", value_parser = parsers::extra_name)]
    pub extras: Vec<String>,
    /// Build again even when a runtime with the same inputs is stored
    #[arg(long)]
    pub rebuild: bool,
}

#[derive(Debug, Args)]
pub struct RuntimeTestArgs {
    #[arg(value_name = "NAME[@VERSION]", help = RUNTIME_REF_HELP, value_parser = parsers::runtime_name)]
    pub name: String,
    /// How long to keep retrying after losing the connection
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parsers::duration)]
    pub reconnect_timeout: Duration,
}

const VOLUME_AFTER_HELP: &str = "\
A volume is named storage that outlives the jobs using it: a job run with
--volume=NAME sees it at /volumes/NAME (read-only with --volume=NAME:ro).
A volume is its owner's unless shared; anyone may list and inspect volumes,
creating, removing and sharing them needs an admin certificate.

Examples:
  rnx volume create data-lake --size=10GB
  rnx volume create scratch --size=512MB --type=memory
  rnx volume list
  rnx job run --volume=data-lake:ro --volume=scratch python etl.py
  rnx volume share data-lake
  rnx volume remove scratch";

const VOLUME_NAME_HELP: &str =
    "Volume name: up to 128 letters, digits, '.', '-' and '_', like data-lake";

#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Admin: create a volume of a fixed size
    #[command(after_help = VOLUME_CREATE_AFTER_HELP)]
    Create(VolumeCreateArgs),
    /// Table of volumes: type, size, space used, owner, sharing, jobs using it, status
    #[command(
        after_help = "Examples:\n  rnx volume list\n  rnx --json volume list | jq -r '.[] | select(.shared) | .name'"
    )]
    List,
    /// Everything about one volume: size and use, owner, sharing, where jobs see it, jobs
    #[command(after_help = "Examples:\n  rnx volume inspect data-lake")]
    Inspect(VolumeRefArgs),
    /// Admin: remove a volume and everything on it
    #[command(
        after_help = "Refused while unfinished jobs use the volume, and for another caller's volume,\nunless --force is given: then those jobs are killed first.\n\nExamples:\n  rnx volume remove scratch\n  rnx volume remove data-lake --force"
    )]
    Remove(VolumeRemoveArgs),
    /// Admin: let every caller's jobs mount the volume
    #[command(after_help = "Examples:\n  rnx volume share data-lake")]
    Share(VolumeRefArgs),
    /// Admin: let only the owner's jobs mount the volume again
    #[command(after_help = "Examples:\n  rnx volume unshare data-lake")]
    Unshare(VolumeRefArgs),
}

const VOLUME_CREATE_AFTER_HELP: &str = "\
SIZE is a size like 1GB, 512MB or 16MB (at least 1MB; 1GB = 1024MB). A
filesystem volume is an ext4 image on the node's disk and keeps its data
across reboots; a memory volume is a tmpfs in the node's memory, emptied
when the node reboots.

Examples:
  rnx volume create data-lake --size=10GB
  rnx volume create scratch --size=512MB --type=memory
  rnx volume create shared-models --size=100GB --shared";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VolumeKind {
    Filesystem,
    Memory,
}

impl VolumeKind {
    /// The name the API takes.
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeKind::Filesystem => "filesystem",
            VolumeKind::Memory => "memory",
        }
    }
}

#[derive(Debug, Args)]
pub struct VolumeCreateArgs {
    #[arg(value_name = "NAME", help = VOLUME_NAME_HELP, value_parser = parsers::volume_ref)]
    pub name: String,
    /// Its size, e.g. --size=1GB, --size=512MB or --size=16MB
    #[arg(long, value_name = "SIZE", value_parser = parsers::volume_size_bytes)]
    pub size: i64,
    /// filesystem (an ext4 image on the node's disk, kept across reboots) or memory (a tmpfs, emptied by a reboot)
    #[arg(long = "type", value_name = "TYPE", value_enum, default_value_t = VolumeKind::Filesystem)]
    pub kind: VolumeKind,
    /// Let every caller's jobs mount it, not only yours
    #[arg(long)]
    pub shared: bool,
}

#[derive(Debug, Args)]
pub struct VolumeRefArgs {
    #[arg(value_name = "NAME", help = VOLUME_NAME_HELP, value_parser = parsers::volume_ref)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct VolumeRemoveArgs {
    #[arg(value_name = "NAME", help = VOLUME_NAME_HELP, value_parser = parsers::volume_ref)]
    pub name: String,
    /// Also when unfinished jobs use it (they are killed first), or when it is another caller's
    #[arg(long)]
    pub force: bool,
}

const AUDIT_AFTER_HELP: &str = "\
Each GPU job leaves one record per allocation: who ran it, which GPUs it
held (indices and UUIDs), when it got and released them, the most GPU
memory it was seen using, and how it ended. Records are kept when the job
is deleted. Jobs still holding GPUs are always listed (END shows -).

Examples:
  rnx audit
  rnx audit --since 24h
  rnx audit --since 2025-01-02T00:00:00Z --owner alice
  rnx --json audit --since 7days | jq '.[] | select(.ended == \"FAILED\")'";

#[derive(Debug, Args)]
#[command(after_help = AUDIT_AFTER_HELP)]
pub struct AuditArgs {
    /// Only records that ended after this: a duration back from now (30m, 24h, 7days) or an RFC 3339 time (2025-01-02T03:04:05Z) [default: all]
    #[arg(long, value_name = "DURATION|RFC3339", value_parser = parsers::since)]
    pub since: Option<parsers::Since>,
    /// Only this owner's records (the name `rnx job list` shows in OWNER)
    #[arg(long, value_name = "NAME", value_parser = parsers::owner)]
    pub owner: Option<String>,
}

const NODE_AFTER_HELP: &str = "\
In cluster mode (`cluster:` in joblet-config.yml) several joblet nodes share
one etcd: any node answers for the whole cluster, one of them leads the
scheduler, and jobs are placed on whichever node has room. A node is ready
(new jobs may go to it), drained (its jobs keep running, no new ones come)
or lost (it stopped answering; its jobs are placed again elsewhere if their
restart policy says so). A node on its own lists only itself.

These commands name the cluster's nodes as `rnx node list` shows them; the
global --node instead picks which entry of your rnx-config.yml to connect to.

Examples:
  rnx node list
  rnx node drain gpu-07
  rnx node undrain gpu-07
  rnx gpu status --on gpu-07
  rnx --json node list | jq -r '.nodes[] | select(.state == \"ready\") | .name'";

const CLUSTER_NODE_HELP: &str = "The cluster node's name, as `rnx node list` shows it, like gpu-07";

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Table of the cluster's nodes: state, leader, free GPUs, jobs, CPU, memory, address, labels
    #[command(after_help = NODE_LIST_AFTER_HELP)]
    List,
    /// Admin: place no new jobs on a node; the jobs on it keep running
    #[command(
        after_help = "The node stays drained, across its restarts too, until `rnx node undrain`.\nIts running jobs are not stopped: stop them with `rnx job stop` if it must be\nemptied (`rnx job list` shows each job's NODE).\n\nExamples:\n  rnx node drain gpu-07\n  rnx --json node drain gpu-07 | jq -r .state"
    )]
    Drain(NodeNameArgs),
    /// Admin: let new jobs be placed on a drained node again
    #[command(after_help = "Examples:\n  rnx node undrain gpu-07")]
    Undrain(NodeNameArgs),
}

const NODE_LIST_AFTER_HELP: &str = "\
Columns: STATE (ready, drained or lost), LEADER (* on the node leading the
scheduler), GPUS (free/total), JOBS (placed on it now), CPU and MEMORY (what
it offers jobs; - when not tracked), ADDRESS (where its API listens),
LABELS (cluster.labels). The last line names the node that answered. With
--json: {\"cluster\", \"answered_by\", \"nodes\": [...]}, each node with every
field (cpu_millis and memory_mb null when not tracked).

Examples:
  rnx node list
  rnx --json node list | jq -r '.nodes[] | select(.gpus_free > 0) | .name'";

#[derive(Debug, Args)]
pub struct NodeNameArgs {
    #[arg(value_name = "NAME", help = CLUSTER_NODE_HELP, value_parser = parsers::Clipped(parsers::cluster_node))]
    pub name: String,
}

const GPU_ID_HELP: &str = "GPU UUID, a unique UUID prefix (GPU-1a2b), or index";

const GPU_ON_HELP: &str = "Cluster mode: another node's GPUs, by its name in `rnx node list` (the node connected to answers for it) [default: the node connected to]";

#[derive(Debug, Subcommand)]
pub enum GpuCommand {
    /// Table of the node's GPUs: memory, utilization, temperature, state, jobs
    #[command(
        after_help = "Examples:\n  rnx gpu status\n  rnx gpu status --all\n  rnx gpu status --on gpu-07\n  rnx --json gpu status | jq '.gpus[] | select(.state != \"AVAILABLE\")'"
    )]
    Status(GpuStatusArgs),
    /// One GPU's health: ECC counters, retired pages, thermal limits, history of state changes
    Health(GpuIdArgs),
    /// Refresh the status table every interval until interrupted (Ctrl-C)
    #[command(
        after_help = "Examples:\n  rnx gpu watch\n  rnx gpu watch --interval 2s --count 10\n  rnx gpu watch --on gpu-07\n  rnx --json gpu watch --count 3 | jq -c '[.gpus[].utilization_pct]'"
    )]
    Watch(GpuWatchArgs),
    /// Admin: let the jobs on a GPU finish but place no new ones on it
    Drain(GpuIdArgs),
    /// Admin: take a GPU out of service (--force stops the jobs on it)
    Offline(GpuOfflineArgs),
    /// Admin: put a drained, offline or degraded GPU back into service
    Online(GpuIdArgs),
}

#[derive(Debug, Args)]
pub struct GpuStatusArgs {
    /// Also show UUIDs, PCI bus ids, device minors, NUMA nodes, ECC, MIG instances and processes
    #[arg(long)]
    pub all: bool,
    #[arg(long, value_name = "NODE", help = GPU_ON_HELP, value_parser = parsers::Clipped(parsers::cluster_node))]
    pub on: Option<String>,
}

#[derive(Debug, Args)]
pub struct GpuIdArgs {
    #[arg(long = "gpu-id", value_name = "ID", help = GPU_ID_HELP, value_parser = parsers::Clipped(parsers::gpu_ref))]
    pub gpu_id: String,
}

#[derive(Debug, Args)]
pub struct GpuOfflineArgs {
    #[arg(long = "gpu-id", value_name = "ID", help = GPU_ID_HELP, value_parser = parsers::Clipped(parsers::gpu_ref))]
    pub gpu_id: String,
    /// Also when jobs run on it: they are stopped
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct GpuWatchArgs {
    /// Time between refreshes, like 1s or 500ms
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parsers::watch_interval)]
    pub interval: Duration,
    /// Stop after this many refreshes [default: until interrupted]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Also show the --all columns
    #[arg(long)]
    pub all: bool,
    #[arg(long, value_name = "NODE", help = GPU_ON_HELP, value_parser = parsers::Clipped(parsers::cluster_node))]
    pub on: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Start a job; print its id, or with --follow stream its output
    Run(Box<RunArgs>),
    /// Show one job
    Status(StatusArgs),
    /// List jobs, newest first
    List(ListArgs),
    /// Print a job's output (stdout and stderr kept apart)
    Log(LogArgs),
    /// Stop a job: SIGTERM, then SIGKILL after a grace period
    Stop(StopArgs),
    /// Kill a job at once with SIGKILL
    Kill(JobRefArgs),
    /// Delete a finished job's record and output
    Delete(JobRefArgs),
    /// Attach to an interactive job (started with -i or -t): its output, and this terminal's input
    Attach(AttachArgs),
    /// Run a command inside a running job: its namespaces, cgroups, user, seccomp filter and /dev (so nvidia-smi sees exactly its GPUs)
    Exec(ExecArgs),
    /// List the commands run inside a job with `exec`: who, what, when, exit code
    Execs(JobRefArgs),
}

const EXEC_AFTER_HELP: &str = "\
The command runs beside the job's processes with exactly the job's
isolation: never more. Only the job's owner (or the node's admin) may exec;
every exec is recorded (`rnx job execs ID`). rnx exits with the command's
exit code (128 + N when signal N ended it).

Examples:
  rnx job exec 3f2a -- nvidia-smi
  rnx job exec -it 3f2a -- bash
  rnx job exec 3f2a -- py-spy dump --pid 2";

#[derive(Debug, Args)]
#[command(after_help = EXEC_AFTER_HELP)]
pub struct ExecArgs {
    /// Send this terminal's input to the command
    #[arg(short = 'i', long)]
    pub interactive: bool,
    /// Run the command on a terminal of this window's size
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Environment variable added to the job's (repeatable), e.g. -e DEBUG=1
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE", value_parser = parsers::env_pair)]
    pub env: Vec<(String, String)>,
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
    /// The command to run inside the job and its arguments
    #[arg(value_name = "COMMAND", required = true, num_args = 1.., trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
    /// Watch only: no input (any number of watchers; needs only the right to read the job)
    #[arg(long)]
    pub read_only: bool,
    /// The keys that detach and leave the job running, comma-separated
    #[arg(long, value_name = "KEYS", default_value = "ctrl-p,ctrl-q", value_parser = parsers::detach_keys)]
    pub detach_keys: parsers::DetachKeys,
}

const RUN_AFTER_HELP: &str = "\
Everything from COMMAND on belongs to the job, including arguments that look
like flags; put rnx's own flags before it, or use `--` to end them.

Executors: an executor is what runs the job's process. `native`, joblet's own
sandbox, is the usual default; `runc`, `crun` and `runsc` (gVisor) are OCI
runtimes a node's admin may offer, which get the same limits, GPUs and volumes.
`rnx whoami` lists the node's executors with their capabilities and marks its
default. --device adds CDI devices by name (vendor.com/class=name, from the CDI
specs in /etc/cdi or /var/run/cdi on the node) and needs an executor with the
cdi capability (runc or crun). A job its executor cannot run (say GPUs on one
without the gpu capability) is refused before it starts, naming both.

Interactive jobs: -i sends this terminal's input to the job (a pipe: end of
file when yours ends), -t runs it on a terminal of this window's size, in its
own sandbox like any job (only its GPUs, its limits). rnx stays attached and
exits with the job's code; Ctrl-C reaches the job, not rnx. Type the detach
keys (ctrl-p,ctrl-q) to leave it running, and `rnx job attach ID` to come
back, also after the daemon restarted. They run on the native executor.

Examples:
  rnx job run -it --gpu=1 -- bash
  cat data.csv | rnx job run -i -- python3 count.py
  rnx job run --gpu=1 python gpu_hello.py
  rnx job run --gpu=2 --gpu-memory=16GB --max-memory=32768 --max-cpu=800 python train.py
  rnx job run --gpu=1 --gpu-time=2h --cuda=12.2 python train.py
  rnx job run --gpu=1 --mig=1g.10gb python infer.py
  rnx job run --runtime=python-3.11-ml@1.0 --volume=datasets:ro --volume=checkpoints \\
      python train.py --data=/volumes/datasets --out=/volumes/checkpoints
  rnx job run --gpu=1 --gpu-profiling nsys profile python train.py
  rnx job run --upload=model.py --upload=dataset/ \\
      python -m torch.distributed.launch --nproc_per_node=4 model.py
  rnx job run -e MODE=fast -s API_TOKEN=xyz --timeout=1h -- python x.py --epochs 3
  rnx job run --executor=runc -- id
  rnx job run --executor=crun --device nvidia.com/gpu=0 -- nvidia-smi -L
  ID=$(rnx job run sleep 60) && rnx job status \"$ID\"";

#[derive(Debug, Args)]
#[command(after_help = RUN_AFTER_HELP)]
pub struct RunArgs {
    /// CPU limit in percent of one core (100 = one core, 250 = two and a half), e.g. --max-cpu=200
    #[arg(long, value_name = "PERCENT", value_parser = parsers::cpu_percent, allow_negative_numbers = true)]
    pub max_cpu: Option<i64>,
    /// CPUs the job may run on, as a list like 0-3 or 1,3, e.g. --cpu-cores=0-3
    #[arg(long, value_name = "LIST", value_parser = parsers::cpu_list)]
    pub cpu_cores: Option<String>,
    /// Memory limit: megabytes, or a size like 16GB or 4096MB, e.g. --max-memory=32768
    #[arg(long, value_name = "SIZE", value_parser = parsers::memory_mb, allow_negative_numbers = true)]
    pub max_memory: Option<i64>,
    /// Block-IO limit in bytes per second, e.g. --max-iobps=10485760
    #[arg(long, value_name = "BYTES_PER_SEC", value_parser = parsers::iobps, allow_negative_numbers = true)]
    pub max_iobps: Option<i64>,
    /// Environment variable for the job (repeatable), e.g. -e MODE=fast
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE", value_parser = parsers::env_pair)]
    pub env: Vec<(String, String)>,
    /// Secret environment variable (repeatable); its value is never shown or stored in clear, e.g. -s API_TOKEN=xyz
    #[arg(short = 's', long = "secret-env", value_name = "KEY=VALUE", value_parser = parsers::SecretEnvParser)]
    pub secret_env: Vec<SecretPair>,
    /// File or directory to copy into the job's working directory (repeatable), e.g. --upload=dataset/
    #[arg(long = "upload", value_name = "PATH", value_parser = parsers::upload_path)]
    pub uploads: Vec<String>,
    /// Volume to mount at /volumes/NAME (repeatable); :ro mounts it read-only, e.g. --volume=data-lake:ro (see `rnx volume list`)
    #[arg(long = "volume", value_name = "NAME[:ro]", value_parser = parsers::volume_name)]
    pub volumes: Vec<String>,
    /// Network: none (own namespace, loopback only) or host (the host's network; the node must allow it) [default: none]
    #[arg(long, value_name = "MODE", value_parser = ["none", "host"])]
    pub network: Option<String>,
    /// Installed runtime to run the job in, optionally pinned to a version, e.g. --runtime=python-3.11-ml or --runtime=python-3.11-ml@1.0 (see `rnx runtime list`)
    #[arg(long, value_name = "NAME[@VERSION]", value_parser = parsers::runtime_name)]
    pub runtime: Option<String>,
    /// Time limit like 500ms, 1.5s, 10m or 1h30m, to the millisecond; at most the node's jobs.default_timeout; 0 = the node's [default: the node's]
    #[arg(long, value_name = "DURATION", value_parser = parsers::timeout_ms, allow_negative_numbers = true)]
    pub timeout: Option<i64>,
    /// Number of GPUs, all allocated together, e.g. --gpu=2; or a share of one GPU shared with other jobs, e.g. --gpu=0.5 (needs a node with gpu.sharing shared or mps; under mps the share caps the job's SMs)
    #[arg(long, value_name = "N|SHARE", value_parser = parsers::gpu_count, allow_negative_numbers = true)]
    pub gpu: Option<parsers::GpuAsk>,
    /// Minimum free memory per GPU: 8GB, 4096MB or 4096 (megabytes), e.g. --gpu-memory=8GB
    #[arg(long, value_name = "SIZE", value_parser = parsers::gpu_memory_mb, allow_negative_numbers = true)]
    pub gpu_memory: Option<i64>,
    /// How long the job may hold its GPUs, like 90s, 30m, 2h or 1h30m; needs --gpu [default: the node's]
    #[arg(long, value_name = "DURATION", value_parser = parsers::gpu_time_secs, allow_negative_numbers = true)]
    pub gpu_time: Option<i64>,
    /// CUDA toolkit version to mount, MAJOR.MINOR[.PATCH], e.g. --cuda=12.2; needs --gpu [default: the runtime's]
    #[arg(long, value_name = "VERSION", value_parser = parsers::cuda_version)]
    pub cuda: Option<String>,
    /// Run on MIG slices of this profile instead of whole GPUs (--gpu counts slices), e.g. --mig=1g.10gb
    #[arg(long, value_name = "PROFILE", value_parser = parsers::mig_profile)]
    pub mig: Option<String>,
    /// Let the job profile its GPUs (CUPTI, Nsight): it also gets /dev/nvidia-uvm-tools; needs --gpu
    #[arg(long)]
    pub gpu_profiling: bool,
    /// What runs the job: native (joblet's own sandbox) or an OCI runtime the node offers, like runc, crun or runsc (see `rnx whoami`), e.g. --executor=runc [default: the node's]
    #[arg(long, value_name = "NAME", value_parser = parsers::executor_name)]
    pub executor: Option<String>,
    /// CDI device for the job (repeatable), from the CDI specs in /etc/cdi or /var/run/cdi on the node, e.g. --device nvidia.com/gpu=0; needs an executor with the cdi capability (runc or crun)
    #[arg(long = "device", value_name = "VENDOR/CLASS=NAME", value_parser = parsers::cdi_device)]
    pub devices: Vec<String>,
    /// In a cluster: what happens when the job's node is lost: never (it ends FAILED, naming the node) or on-node-failure (it runs again elsewhere as its next attempt, $JOBLET_ATTEMPT one higher) [default: never]
    #[arg(long, value_name = "POLICY", value_parser = ["never", "on-node-failure"])]
    pub restart: Option<String>,
    /// Stream the job's output and exit with the job's exit code
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// With --follow: how long to keep retrying after losing the connection
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parsers::duration)]
    pub reconnect_timeout: Duration,
    /// Keep the job's standard input open and send this terminal's input to it (a pipe, e.g. `cat data | rnx job run -i -- wc -l`); stays attached until the job ends, exits with its code
    #[arg(short = 'i', long)]
    pub interactive: bool,
    /// Run the job on a pseudo-terminal of this terminal's size (with -i: an interactive shell, e.g. `rnx job run -it --gpu=1 -- bash`); Ctrl-C and friends reach the job, the window size follows
    #[arg(short = 't', long)]
    pub tty: bool,
    /// With -t: the keys that detach from the job and leave it running, comma-separated, e.g. ctrl-p,ctrl-q (reattach with `rnx job attach ID`)
    #[arg(long, value_name = "KEYS", default_value = "ctrl-p,ctrl-q", value_parser = parsers::detach_keys)]
    pub detach_keys: parsers::DetachKeys,
    /// The program to run and its arguments
    #[arg(
        value_name = "COMMAND",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct JobRefArgs {
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
    /// Also show every state transition with its time and reason
    #[arg(long)]
    pub detail: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs in this state (repeatable): pending, queued, running, completed, failed, stopped, preempted
    #[arg(long = "state", value_name = "STATE", value_parser = parsers::job_state)]
    pub states: Vec<JobState>,
    /// At most this many jobs (newest first); 0 = all
    #[arg(long, value_name = "N", value_parser = parsers::list_limit, allow_negative_numbers = true)]
    pub limit: Option<i64>,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
    /// Keep streaming until the job ends
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// With --follow: how long to keep retrying after losing the connection
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parsers::duration)]
    pub reconnect_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// Job id, or any unique prefix of it
    #[arg(value_name = "ID", value_parser = parsers::Clipped(parsers::job_ref))]
    pub id: String,
    /// Time between SIGTERM and SIGKILL, like 10s or 1m [default: the node's]
    #[arg(long, value_name = "DURATION", value_parser = parsers::grace_secs, allow_negative_numbers = true)]
    pub grace: Option<i64>,
}
