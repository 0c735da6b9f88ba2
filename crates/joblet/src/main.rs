//! `joblet`: the node daemon binary. See the library crate for the parts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use joblet::config::Config;
use joblet_pki::Role;

#[derive(Parser)]
#[command(
    name = "joblet",
    version,
    about = "Joblet node daemon: runs jobs for `rnx` clients over mutual TLS"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the node daemon (foreground). Creates the state dir, CA and an admin rnx-config.yml on first start.
    Server {
        /// joblet-config.yml; without it, embedded defaults (127.0.0.1:50051, /var/lib/joblet).
        #[arg(long, short, env = "JOBLET_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Client identities.
    #[command(subcommand)]
    Cert(CertCommand),
    /// Check a config file as `joblet server` does before it starts (values, and the jobs.user they name on this host) and print the effective settings.
    CheckConfig {
        #[arg(long, short, env = "JOBLET_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Discover this node's GPUs once, with the daemon's config and backends, and print them (like `nvidia-smi -L` / `slurmd -G`).
    #[command(
        after_help = "Reads gpu.* from the config (NVML library, CUDA paths, hwloc, simulate) even when gpu.enabled is false.\n\nExamples:\n  joblet discover\n  joblet discover --config /etc/joblet/joblet-config.yml --json\n  joblet discover --config demo.yml    # with gpu.simulate: a simulated node"
    )]
    Discover {
        #[arg(long, short, env = "JOBLET_CONFIG")]
        config: Option<PathBuf>,
        /// Print the inventory as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Container Device Interface (CDI) specs for this node's GPUs (`joblet cdi generate`).
    #[command(subcommand)]
    Cdi(joblet::commands::cdi::CdiCommand),
    /// Check this node's GPU setup: driver, NVML, device nodes, CUDA toolkits. Exits non-zero when gpu.enabled and gpu.required and no usable GPU.
    Doctor {
        #[arg(long, short, env = "JOBLET_CONFIG")]
        config: Option<PathBuf>,
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replay a GPU job trace (CSV) through the scheduler core under one or more policies and compare them.
    #[command(
        after_help = "Job traces (--trace, --cluster): the trace needs a header with a submit-time column (timestamp as YYYY-MM-DD HH:MM:SS, or submission_time / submit_time / time in seconds), duration (seconds) and a GPU count (num_gpus / num_gpu / gpus); user / cluster / vc / queue name the owner or queue.\n\nAlibaba openb (--openb-pods, --openb-nodes): GPU-sharing pods (fractions of a GPU) on the trace's own nodes, compared across placement strategies (--strategy). By default workload inflation: pods drawn at random (--seed) until the arrived GPU demand is 130% of the cluster's GPUs, with the allocated GPU share and the unallocated GPUs at every 5%; --replay replays the pods over their creation and deletion times instead.\n\nExamples:\n  joblet simulate --trace fixtures/traces/tiresias/60_job.csv --cluster 4x4\n  joblet simulate --trace fixtures/traces/philly.csv --cluster 64x8 --vc 6214e9 --policy fifo,las --plot out.svg\n  joblet simulate --trace philly.csv --cluster 120x8 --json\n  joblet simulate --openb-pods openb_pod_list_default.csv --openb-nodes openb_node_list_gpu_node.csv\n  joblet simulate --openb-pods pods.csv --openb-nodes nodes.csv --strategy fgd,best-fit --seed 7 --plot inflation.svg\n  joblet simulate --openb-pods pods.csv --openb-nodes nodes.csv --replay --json"
    )]
    Simulate {
        /// The trace (CSV with a header).
        #[arg(
            long,
            value_name = "FILE.csv",
            required_unless_present = "openb_pods",
            conflicts_with = "openb_pods"
        )]
        trace: Option<PathBuf>,
        /// Cluster shape: NODESxGPUS, e.g. 64x8 (DGX-like nodes: 2 NUMA nodes, one NVLink group).
        #[arg(long, value_name = "NODESxGPUS", value_parser = joblet_sim::parse_cluster, required_unless_present = "openb_pods", conflicts_with = "openb_pods")]
        cluster: Option<(u32, u32)>,
        /// Alibaba openb pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,…): simulate it instead of --trace.
        #[arg(long, value_name = "FILE.csv", requires = "openb_nodes", conflicts_with_all = ["vc", "limit"])]
        openb_pods: Option<PathBuf>,
        /// Alibaba openb node list (sn,cpu_milli,memory_mib,gpu,model): the cluster for --openb-pods.
        #[arg(long, value_name = "FILE.csv", requires = "openb_pods")]
        openb_nodes: Option<PathBuf>,
        /// openb: workload inflation (the default).
        #[arg(long, requires = "openb_pods", conflicts_with = "replay")]
        inflate: bool,
        /// openb: replay the pods over their creation and deletion times instead of inflating.
        #[arg(long, requires = "openb_pods")]
        replay: bool,
        /// openb: placement strategies to compare, in table order: fgd, best-fit, pack, spread, topology.
        #[arg(long, value_name = "NAME[,NAME…]", default_value = "fgd,best-fit,pack,spread,topology", value_parser = parse_strategies_arg, requires = "openb_pods")]
        strategy: Strategies,
        /// openb inflation: seed of the random draw of pods (printed with the results).
        #[arg(long, value_name = "N", default_value_t = joblet_sim::openb::DEFAULT_SEED, requires = "openb_pods")]
        seed: u64,
        /// Memory of each GPU in GiB.
        #[arg(long, value_name = "N", default_value_t = 32)]
        gpu_memory_gb: u64,
        /// Policies to compare, in table order: fifo, backfill, las, gittins; `default` names the daemon's default policy.
        #[arg(long, value_name = "NAME[,NAME…]", default_value = "fifo,backfill,las,gittins", value_parser = parse_policies_arg)]
        policy: Policies,
        /// How often a job checkpoints (its progress since is lost when it is preempted), e.g. 30m; 0 = nothing is lost.
        #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = joblet_sim::parse_duration_ms)]
        checkpoint_interval: u64,
        /// Run time a preempted job spends restoring its checkpoint when it starts again, e.g. 2m.
        #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = joblet_sim::parse_duration_ms)]
        restore_cost: u64,
        /// Preemption is free: no lost work, no restore (overrides --checkpoint-interval and --restore-cost).
        #[arg(long)]
        no_preemption_cost: bool,
        /// Only jobs of this owner / queue / virtual cluster.
        #[arg(long, value_name = "NAME")]
        vc: Option<String>,
        /// Only the first N jobs (by submit time, after --vc).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
        /// Print the table as markdown (for BENCHMARKS.md).
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
        /// Write an SVG: utilisation and queue length over time (--trace); allocated GPU share per strategy against arrived workload (openb inflation) or time (--replay).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum CertCommand {
    /// Mint a client certificate signed by this node's CA and write NAME.crt, NAME.key and rnx-config.yml into --out.
    #[command(
        after_help = "Example:\n  joblet cert issue --name alice --role viewer --out ./alice\n  rnx --config ./alice/rnx-config.yml job list"
    )]
    Issue {
        /// Identity name (certificate CN, recorded as job owner): letters, digits, '.', '_', '@', '-'.
        #[arg(long)]
        name: String,
        /// admin: run/stop/delete jobs; viewer: read-only (status, list, logs).
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Directory to write into (created with mode 0700).
        #[arg(long)]
        out: PathBuf,
        /// Validity in days.
        #[arg(long, default_value_t = joblet::state_dir::CLIENT_DAYS)]
        days: u32,
        #[arg(long, short, env = "JOBLET_CONFIG")]
        config: Option<PathBuf>,
    },
}

/// `--policy fifo,las`: one argument holding a list.
#[derive(Debug, Clone)]
struct Policies(Vec<joblet_sched::model::Policy>);

fn parse_policies_arg(s: &str) -> Result<Policies, joblet_sim::SimError> {
    joblet_sim::parse_policies(s).map(Policies)
}

#[derive(Clone)]
struct Strategies(Vec<joblet_sched::model::Strategy>);

fn parse_strategies_arg(s: &str) -> Result<Strategies, joblet_sim::SimError> {
    joblet_sim::openb::parse_strategies(s).map(Strategies)
}

fn parse_role(s: &str) -> Result<Role, joblet_pki::PkiError> {
    s.parse()
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    match path {
        Some(p) => Ok(Config::load(p)?),
        None => Ok(Config::default()),
    }
}

/// The config with every check `joblet server` makes of it before it
/// starts ([`Config::check`]): what `server` and `check-config` both use.
fn load_checked_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    let cfg = load_config(path)?;
    let source = path.map_or_else(|| PathBuf::from("(embedded defaults)"), PathBuf::clone);
    cfg.check(&source)?;
    Ok(cfg)
}

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Plain text into a log file, colours on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server { config } => load_checked_config(config.as_ref()).and_then(|cfg| {
            // Before any thread exists: it sets the fake NVML's environment.
            let sim = joblet::gpu::simulate::prepare(&cfg.gpu)?;
            init_tracing(&cfg.logging.level);
            // Its threads do not preempt the client or a job when they wake
            // (see joblet::sched_class).
            if let Err(e) = joblet::sched_class::batch_current_thread() {
                tracing::warn!(error = %e, "cannot move the daemon's main thread to SCHED_BATCH");
            }
            // One worker: the engine is one task that every start, end and
            // commit goes through, and the API's handlers only decode,
            // hand over and stream (blocking work runs on the blocking
            // pool). With a worker per CPU, a task woken on one worker was
            // often taken by another woken beside it on the same CPU,
            // which (SCHED_BATCH) then waited for the first to sleep:
            // ~0.3 ms per job start (bench/history/runs-08-13.md, "one
            // runtime worker").
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .on_thread_start(joblet::sched_class::batch_runtime_thread)
                .build()
                .context("starting the async runtime")?;
            // The server runs as a task on the runtime's workers, where the
            // accept loops and every connection run too: polled by this
            // thread in `block_on`, each new connection crossed from a
            // worker to this thread and back (two wake-ups on a job's start).
            rt.block_on(async {
                tokio::spawn(joblet::server::run(cfg, sim))
                    .await
                    .context("the server task failed")?
            })
        }),
        Command::Simulate {
            trace,
            cluster,
            openb_pods,
            openb_nodes,
            inflate: _,
            replay,
            strategy,
            seed,
            gpu_memory_gb,
            policy,
            checkpoint_interval,
            restore_cost,
            no_preemption_cost,
            vc,
            limit,
            json,
            markdown,
            plot,
        } => {
            if let (Some(pods), Some(nodes)) = (openb_pods, openb_nodes) {
                use joblet_sim::openb::{InflateOptions, OpenbMode, OpenbOptions};
                let mode = if replay {
                    OpenbMode::Replay
                } else {
                    OpenbMode::Inflate(InflateOptions {
                        seed,
                        ..InflateOptions::default()
                    })
                };
                let opts = OpenbOptions {
                    pods,
                    nodes,
                    strategies: strategy.0,
                    mode,
                    plot,
                };
                joblet_sim::openb::simulate_openb(&opts)
                    .map(|report| {
                        if json {
                            println!("{}", report.to_json());
                        } else if markdown {
                            print!("{}", report.to_markdown());
                        } else {
                            print!("{}", report.to_text());
                        }
                    })
                    .map_err(anyhow::Error::from)
            } else if let (Some(trace), Some(cluster)) = (trace, cluster) {
                let costs = if no_preemption_cost {
                    joblet_sim::PreemptionCosts::FREE
                } else {
                    joblet_sim::PreemptionCosts {
                        checkpoint_interval_ms: checkpoint_interval,
                        restore_cost_ms: restore_cost,
                    }
                };
                let opts = joblet_sim::SimOptions {
                    trace,
                    nodes: cluster.0,
                    gpus_per_node: cluster.1,
                    gpu_memory_gb,
                    policies: policy.0,
                    filter: vc,
                    limit,
                    plot,
                    costs,
                };
                joblet_sim::simulate(&opts)
                    .map(|report| {
                        if json {
                            println!("{}", report.to_json());
                        } else if markdown {
                            print!("{}", report.to_markdown());
                        } else {
                            print!("{}", report.to_text());
                        }
                    })
                    .map_err(anyhow::Error::from)
            } else {
                Err(anyhow::anyhow!("simulate needs --trace FILE.csv and --cluster NODESxGPUS, or --openb-pods FILE.csv and --openb-nodes FILE.csv"))
            }
        }
        Command::Discover { config, json } => load_config(config.as_ref()).and_then(|cfg| {
            init_tracing("warn");
            joblet::commands::discover::run(&cfg, json)
        }),
        Command::Cdi(cmd) => load_config(cmd.config()).and_then(|cfg| {
            init_tracing("warn");
            joblet::commands::cdi::run(&cfg, &cmd)
        }),
        Command::Doctor { config, json } => {
            match load_config(config.as_ref()).and_then(|cfg| {
                init_tracing("error");
                joblet::commands::doctor::run(&cfg, json)
            }) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::FAILURE,
                Err(e) => Err(e),
            }
        }
        Command::CheckConfig { config } => {
            load_checked_config(config.as_ref()).map(|cfg| println!("{cfg:#?}"))
        }
        Command::Cert(CertCommand::Issue {
            name,
            role,
            out,
            days,
            config,
        }) => load_config(config.as_ref()).and_then(|cfg| {
            let issued = joblet::commands::cert::issue(&cfg, &name, role, days, &out)?;
            println!("issued {role} identity {name:?} (valid {days} days)");
            println!("  certificate:   {}", issued.cert.display());
            println!("  key:           {}", issued.key.display());
            println!(
                "  client config: {}   (rnx --config {} job list)",
                issued.client_config.display(),
                issued.client_config.display()
            );
            Ok(())
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("joblet: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
