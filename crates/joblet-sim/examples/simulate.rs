//! Runs a simulation from the command line without the daemon binary:
//! `cargo run --release -p joblet-sim --example simulate -- TRACE.csv
//! NODESxGPUS [POLICIES] [--vc NAME] [--limit N] [--json] [--plot FILE.svg]
//! [--checkpoint-interval 30m] [--restore-cost 2m] [--no-preemption-cost]`.

use std::path::PathBuf;
use std::process::ExitCode;

use joblet_sim::{parse_cluster, parse_policies, simulate, SimError, SimOptions, ALL_POLICIES};

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut filter, mut limit, mut plot, mut json) = (None, None, None, false);
    let mut costs = joblet_sim::PreemptionCosts::DEFAULT;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--checkpoint-interval" => {
                costs.checkpoint_interval_ms =
                    joblet_sim::parse_duration_ms(&args.next().unwrap_or_default())
                        .map_err(|e| e.to_string())?;
            }
            "--restore-cost" => {
                costs.restore_cost_ms =
                    joblet_sim::parse_duration_ms(&args.next().unwrap_or_default())
                        .map_err(|e| e.to_string())?;
            }
            "--no-preemption-cost" => costs = joblet_sim::PreemptionCosts::FREE,
            "--vc" => filter = args.next(),
            "--limit" => limit = args.next().and_then(|n| n.parse().ok()),
            "--plot" => plot = args.next().map(PathBuf::from),
            "--json" => json = true,
            _ => positional.push(arg),
        }
    }
    let usage = "usage: simulate TRACE.csv NODESxGPUS [fifo,backfill,las,gittins,default] [--vc NAME] [--limit N] [--json] [--plot FILE.svg]";
    let (Some(trace), Some(cluster)) = (positional.first(), positional.get(1)) else {
        return Err(usage.to_string());
    };
    let (nodes, gpus_per_node) = parse_cluster(cluster).map_err(|e| e.to_string())?;
    let policies = match positional.get(2) {
        Some(p) => parse_policies(p).map_err(|e: SimError| e.to_string())?,
        None => ALL_POLICIES.to_vec(),
    };
    let report = simulate(&SimOptions {
        trace: PathBuf::from(trace),
        nodes,
        gpus_per_node,
        gpu_memory_gb: 32,
        policies,
        filter,
        limit,
        plot,
        costs,
    })
    .map_err(|e| e.to_string())?;
    if json {
        println!("{}", report.to_json());
    } else {
        println!("{}", report.to_markdown());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
