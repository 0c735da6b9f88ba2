//! Runs the openb experiments without the daemon binary:
//! `cargo run --release -p joblet-sim --example openb -- PODS.csv NODES.csv
//! [STRATEGIES] [--replay] [--seed N] [--json] [--markdown] [--plot FILE.svg]`
//! (`joblet simulate --openb-pods … --openb-nodes …` is the same run).

use std::path::PathBuf;
use std::process::ExitCode;

use joblet_sim::openb::{
    parse_strategies, simulate_openb, InflateOptions, OpenbMode, OpenbOptions, ALL_STRATEGIES,
};

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut plot, mut json, mut markdown, mut replay) = (None, false, false, false);
    let mut inflate = InflateOptions::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plot" => plot = args.next().map(PathBuf::from),
            "--json" => json = true,
            "--markdown" => markdown = true,
            "--replay" => replay = true,
            "--seed" => {
                let v = args.next().unwrap_or_default();
                inflate.seed = v
                    .parse()
                    .map_err(|_| format!("--seed: `{v}` is not a number (0..=2^64-1)"))?;
            }
            _ => positional.push(arg),
        }
    }
    let [pods, nodes, rest @ ..] = positional.as_slice() else {
        return Err("usage: openb PODS.csv NODES.csv [fgd,best-fit,…] [--replay] [--seed N] [--json] [--markdown] [--plot FILE.svg]".into());
    };
    let strategies = match rest.first() {
        Some(s) => parse_strategies(s).map_err(|e| e.to_string())?,
        None => ALL_STRATEGIES.to_vec(),
    };
    let opts = OpenbOptions {
        pods: pods.into(),
        nodes: nodes.into(),
        strategies,
        mode: if replay {
            OpenbMode::Replay
        } else {
            OpenbMode::Inflate(inflate)
        },
        plot,
    };
    let report = simulate_openb(&opts).map_err(|e| e.to_string())?;
    if json {
        println!("{}", report.to_json());
    } else if markdown {
        print!("{}", report.to_markdown());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
