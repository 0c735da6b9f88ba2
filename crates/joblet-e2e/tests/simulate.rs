//! `joblet simulate` as users run it: a fixture trace through every policy,
//! JSON that parses, and usage errors that name the accepted form.

use std::process::{Command, Output};

use joblet_e2e::{fixture, joblet_bin};
use serde_json::Value;

fn simulate(args: &[&str]) -> Output {
    Command::new(joblet_bin())
        .arg("simulate")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_tiresias_trace_runs_under_every_policy_without_oversubscription() {
    let trace = fixture("traces/tiresias/60_job.csv");
    let svg = tempfile::NamedTempFile::new().unwrap();
    let out = simulate(&[
        "--trace",
        trace.to_str().unwrap(),
        "--cluster",
        "4x4",
        "--json",
        "--plot",
        svg.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["jobs"], 60);
    let policies: Vec<&str> = r["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["fifo", "backfill", "las", "gittins"]);
    for p in r["policies"].as_array().unwrap() {
        assert_eq!(p["completed"], 60, "{p}");
        assert_eq!(p["max_oversubscription"], 0, "{p}");
        assert!(p["utilisation"].as_f64().unwrap() <= 1.0, "{p}");
    }
    let svg = std::fs::read_to_string(svg.path()).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{svg:.100}"
    );

    let text = simulate(&[
        "--trace",
        trace.to_str().unwrap(),
        "--cluster",
        "4x4",
        "--policy",
        "las",
    ]);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("avg JCT"));
}

#[test]
fn bad_arguments_name_the_accepted_form() {
    let trace = fixture("traces/tiresias/60_job.csv");
    let trace = trace.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--trace", trace, "--cluster", "4y4"],
            "expected NODESxGPUS, e.g. 64x8",
        ),
        (
            vec![
                "--trace",
                trace,
                "--cluster",
                "4x4",
                "--policy",
                "fifo,slurm",
            ],
            "accepted: fifo, backfill, las",
        ),
        (vec!["--cluster", "4x4"], "--trace <FILE.csv>"),
    ] {
        let out = simulate(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let missing = simulate(&["--trace", "/nonexistent/trace.csv", "--cluster", "4x4"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("/nonexistent/trace.csv"), "{err}");
}
