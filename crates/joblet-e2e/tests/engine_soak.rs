//! A soak of the daemon's engine through the real daemon and `rnx` (needs
//! root): random mixed CPU and GPU jobs on the simulated 8-GPU node (short
//! sleeps and echoes with known output, some exiting non-zero, some with
//! `--gpu=1..4`; now and then a flood that fills the queues), random stops
//! and kills (of queued jobs too), and many `kill -9` restarts of the
//! daemon in the middle of it all (some right after a submission, some
//! timed to a job's expected end, some during the previous restart's
//! recovery), each followed by a prompt restart. At the end:
//!
//! - every job is final (COMPLETED / FAILED / STOPPED) with the reason its
//!   script asked for: exit code and "exited with code N" unless the test
//!   stopped or killed it; never "lost" (the test makes no shim vanish),
//!   never a sandbox set-up failure;
//! - completed jobs have exactly their output; stopped ones a prefix of it;
//! - every GPU is AVAILABLE with no job;
//! - after a clean daemon stop no shim is alive (the job dirs' `shim.pid`
//!   name dead processes) and no cgroup is left below the node's base.
//!
//! Randomness is seeded: the seed is printed, and `JOBLET_SOAK_SEED=N`
//! replays a run (as far as timing allows); `JOBLET_SOAK_RESTARTS=N` sets
//! the number of `kill -9` restarts (default 64).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joblet_e2e::{Node, SimGpuNode};
use serde_json::Value;

const DEFAULT_RESTARTS: usize = 64;
/// How long the jobs may take to settle once the last restart is done.
const SETTLE: Duration = Duration::from_secs(60);
const TAIL: usize = 120;
/// CPU jobs beyond this many wait in the queue.
const MAX_RUNNING: usize = 3;

/// splitmix64: small, seedable, good enough to pick test actions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `pct` percent of the time.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
    )
}

/// A job the soak submitted, and what it was told to do.
struct SoakJob {
    n: usize,
    id: String,
    gpus: u64,
    /// The exit code its script ends with.
    code: i32,
    /// 0: it only echoes.
    sleep_ms: u64,
    /// Its whole output when it runs to its end.
    output: String,
    /// `stop` / `kill` requests the node accepted for it.
    signalled: Vec<&'static str>,
}

impl SoakJob {
    fn describe(&self) -> String {
        format!(
            "job #{} {} ({} GPUs, sleep {} ms, exit {}, signalled {:?})",
            self.n, self.id, self.gpus, self.sleep_ms, self.code, self.signalled
        )
    }
}

/// Fails the test with the seed, what was expected and the daemon log's
/// tail.
fn fail(node: &Node, seed: u64, what: &str) -> ! {
    panic!(
        "engine soak (seed {seed}): {what}\ndaemon log tail:\n{}",
        node.daemon_log_tail(TAIL)
    )
}

struct Soak {
    node: SimGpuNode,
    rng: Rng,
    seed: u64,
    jobs: Vec<SoakJob>,
    restarts: usize,
    /// Restarts timed to a job's expected end.
    timed_to_end: usize,
    /// rnx answers that no correct node gives.
    anomalies: Vec<String>,
    /// `rnx job stop` / `kill` requests sent (some find the job ended).
    signals_sent: usize,
    /// Of them, aimed at a job `rnx job list` showed QUEUED.
    queued_signals: usize,
    /// Restarts the daemon did not come back from (each with the log's
    /// tail), reported at the end.
    failed_starts: Vec<String>,
}

impl Soak {
    fn submit(&mut self) {
        let n = self.jobs.len();
        let rng = &mut self.rng;
        let gpus = if rng.chance(45) { 1 + rng.below(4) } else { 0 };
        let code = match rng.below(10) {
            0 => 1,
            1 => 2,
            2 => 7,
            _ => 0,
        };
        let sleep_ms = if rng.chance(40) {
            0
        } else {
            50 * (1 + rng.below(14))
        };
        let script = if sleep_ms == 0 {
            format!("echo s{n}-a; echo s{n}-b; exit {code}")
        } else {
            format!(
                "echo s{n}-a; sleep {}.{:03}; echo s{n}-b; exit {code}",
                sleep_ms / 1000,
                sleep_ms % 1000
            )
        };
        let gpu_flag = format!("--gpu={gpus}");
        let mut args = vec!["job", "run"];
        if gpus > 0 {
            args.push(&gpu_flag);
        }
        args.extend(["--", "sh", "-c", &script]);
        let out = self.node.rnx(&args);
        if !out.status.success() {
            let running = self.node.daemon_running();
            fail(
                &self.node,
                self.seed,
                &format!(
                    "expected job #{n} to be accepted; `rnx job run` failed ({}; daemon running: {running}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            );
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        self.jobs.push(SoakJob {
            n,
            id,
            gpus,
            code,
            sleep_ms,
            output: format!("s{n}-a\ns{n}-b\n"),
            signalled: Vec::new(),
        });
    }

    /// Stops or kills a job: `queued_pct` percent of the time one that
    /// waits in a queue if any does (the job behind it must then start),
    /// otherwise one of the latest, mostly of this round (`first..`); it
    /// may have ended already.
    fn signal_one(&mut self, first: usize, queued_pct: u64) {
        let len = self.jobs.len();
        let queued: Vec<usize> = if self.rng.chance(queued_pct) {
            let list = self.node.rnx_json(&["job", "list", "--state", "queued"]);
            list.as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|j| self.jobs.iter().position(|s| j["id"] == s.id.as_str()))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let pick = if !queued.is_empty() {
            self.queued_signals += 1;
            queued[self.rng.below(queued.len() as u64) as usize]
        } else {
            let from = if self.rng.chance(70) {
                first
            } else {
                len.saturating_sub(12)
            };
            from + self.rng.below((len - from) as u64) as usize
        };
        let verb = if self.rng.chance(50) { "stop" } else { "kill" };
        self.signals_sent += 1;
        let id = self.jobs[pick].id.clone();
        let out = if verb == "stop" {
            self.node
                .rnx(&["job", "stop", "--grace", "1s", id.as_str()])
        } else {
            self.node.rnx(&["job", "kill", id.as_str()])
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            self.jobs[pick].signalled.push(verb);
        } else if !stderr.contains("already finished") {
            self.anomalies.push(format!(
                "`rnx job {verb}` of {}: expected success or \"already finished\", got {}: {}",
                self.jobs[pick].describe(),
                out.status,
                stderr.trim()
            ));
        }
    }

    /// Sleeps until a just-submitted sleeping job's expected end (plus or
    /// minus a few ms), if one runs: the kill that follows meets its end.
    fn wait_for_an_end(&mut self, candidates: std::ops::Range<usize>) -> bool {
        let Some(j) = candidates
            .rev()
            .find(|&i| self.jobs[i].sleep_ms > 0 && self.jobs[i].signalled.is_empty())
        else {
            return false;
        };
        let id = self.jobs[j].id.clone();
        let deadline = Instant::now() + Duration::from_secs(2);
        let started = loop {
            let out = self.node.rnx(&["--json", "job", "status", id.as_str()]);
            let st: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            match st["state"].as_str() {
                Some("RUNNING") => break st["started_unix_ms"].as_u64(),
                Some("QUEUED" | "PENDING") if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => break None,
            }
        };
        let Some(started) = started else {
            return false;
        };
        // The shell starts, echoes, sleeps: its end is a few ms past
        // start + sleep. Aim from just before it to just after it.
        let jitter = self.rng.below(40);
        let at = UNIX_EPOCH + Duration::from_millis(started + self.jobs[j].sleep_ms + jitter);
        if let Ok(wait) = at.duration_since(SystemTime::now()) {
            std::thread::sleep(wait);
        }
        true
    }

    /// `kill -9` and restart. A daemon that does not come back is a
    /// failure: noted (with its log's tail) and reported at the end; the
    /// daemon is started once more so the soak can go on and find what
    /// else is wrong. A second failed start ends the soak at once.
    fn kill_and_restart(&mut self, why: &str) {
        self.node.kill_daemon();
        self.restarts += 1;
        if let Err(e) = self.node.restart() {
            self.failed_starts.push(format!(
                "expected the daemon to come back after kill -9 #{} ({why}); it did not: {e:#}",
                self.restarts
            ));
            if let Err(e) = self.node.restart() {
                panic!(
                    "engine soak (seed {}): expected the daemon to come back after kill -9 #{} ({why}); it did not, twice: {e:#}\nthe first time: {}",
                    self.seed,
                    self.restarts,
                    self.failed_starts.last().unwrap()
                );
            }
        }
    }

    /// One round: a burst of submissions (sometimes a flood that fills the
    /// queues), maybe stops or kills, then a `kill -9` (right away, at a
    /// random moment, or at a job's expected end) and a prompt restart,
    /// sometimes a second one during the recovery.
    fn round(&mut self) {
        let first = self.jobs.len();
        // Mostly a few jobs; now and then a flood that fills the queues.
        let burst = if self.rng.chance(20) {
            5 + self.rng.below(5)
        } else {
            1 + self.rng.below(4)
        };
        for _ in 0..burst {
            self.submit();
        }
        if burst >= 5 {
            // A flood leaves jobs waiting: take some off their queues.
            for _ in 0..self.rng.below(3) {
                self.signal_one(first, 90);
            }
        } else if self.rng.chance(40) {
            self.signal_one(first, 50);
        }
        let why = match self.rng.below(10) {
            0..=2 => "right after submissions",
            3..=5 => {
                std::thread::sleep(Duration::from_millis(self.rng.below(400)));
                "at a random moment"
            }
            _ => {
                let last = self.jobs.len();
                if self.wait_for_an_end(first..last) {
                    self.timed_to_end += 1;
                    "at a job's expected end"
                } else {
                    "with no running job's end to aim at"
                }
            }
        };
        self.kill_and_restart(why);
        if self.rng.chance(10) {
            // Again, while the new daemon recovers.
            self.kill_and_restart("during the previous restart's recovery");
        }
        if self.rng.chance(30) {
            std::thread::sleep(Duration::from_millis(self.rng.below(500)));
        }
    }

    /// Waits until every job is final; returns `rnx job list` by id.
    fn settle(&self) -> (BTreeMap<String, Value>, bool) {
        let deadline = Instant::now() + SETTLE;
        loop {
            let list = self.node.rnx_json(&["job", "list"]);
            let by_id: BTreeMap<String, Value> = list
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|j| (j["id"].as_str().unwrap_or("").to_owned(), j))
                .collect();
            let done = by_id.values().all(|j| {
                matches!(
                    j["state"].as_str(),
                    Some("COMPLETED" | "FAILED" | "STOPPED")
                )
            });
            if done || Instant::now() > deadline {
                return (by_id, done);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Everything wrong with job `j`'s end (`st`: its `job list` entry).
    fn check_job(&self, j: &SoakJob, st: &Value, problems: &mut Vec<String>) {
        let state = st["state"].as_str().unwrap_or("?");
        let reason = st["reason"].as_str().unwrap_or("");
        // `job list` may leave the transitions out: read them on a problem.
        let history = || transitions(&self.node.status(&j.id));
        let mut bad = |what: String| {
            problems.push(format!(
                "{}: {what}\n    history: {}",
                j.describe(),
                history()
            ))
        };
        if !matches!(state, "COMPLETED" | "FAILED" | "STOPPED") {
            bad(format!(
                "expected a final state, it is {state} (reason {reason:?}) after {SETTLE:?}"
            ));
            return;
        }
        if reason.contains("lost") {
            bad(format!(
                "expected no lost job (the soak makes no shim vanish), got {state} {reason:?}"
            ));
            return;
        }
        if reason.contains("sandbox setup failed") || reason.starts_with("failed to start") {
            bad(format!(
                "expected no sandbox set-up failure or failure to start, got {state} {reason:?}"
            ));
            return;
        }
        let log = match self.node.rnx(&["job", "log", j.id.as_str()]) {
            out if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
            out => {
                bad(format!(
                    "`rnx job log` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                return;
            }
        };
        if !j.signalled.is_empty() && state == "STOPPED" {
            let by_request = [
                "stopped by request",
                "killed by request",
                "stopped before it started",
            ];
            if !by_request.iter().any(|r| reason.starts_with(r)) {
                bad(format!(
                    "expected a stopped job's reason to say it was stopped or killed by request, got {reason:?}"
                ));
            }
            if !j.output.starts_with(&log) {
                bad(format!(
                    "expected a stopped job's log to be a prefix of {:?}, got {log:?}",
                    j.output
                ));
            }
            return;
        }
        // Ran to its end (a stop or kill that came too late changes nothing).
        let want_state = if j.code == 0 { "COMPLETED" } else { "FAILED" };
        let want_reason = format!("exited with code {}", j.code);
        if state != want_state || st["exit_code"] != j.code || reason != want_reason {
            bad(format!(
                "expected {want_state} exit {} {want_reason:?}, got {state} exit {} {reason:?}",
                j.code, st["exit_code"]
            ));
        }
        if log != j.output {
            bad(format!("expected log {:?}, got {log:?}", j.output));
        }
        if j.gpus > 0 {
            let held = st["gpus"]["indices"].as_array().map_or(0, Vec::len) as u64;
            if held != j.gpus {
                bad(format!(
                    "expected {} GPUs recorded, got {}",
                    j.gpus, st["gpus"]
                ));
            }
        }
    }
}

/// A job's transitions, compactly: `QUEUED +0ms, RUNNING +12ms, …`
/// (milliseconds after the first), with their reasons.
fn transitions(st: &Value) -> String {
    let ts = st["transitions"].as_array().cloned().unwrap_or_default();
    let t0 = ts
        .first()
        .and_then(|t| t["at_unix_ms"].as_i64())
        .unwrap_or(0);
    ts.iter()
        .map(|t| {
            let at = t["at_unix_ms"].as_i64().unwrap_or(0) - t0;
            match t["reason"].as_str() {
                Some(r) if !r.is_empty() => {
                    format!("{} +{at}ms ({r})", t["to"].as_str().unwrap_or("?"))
                }
                _ => format!("{} +{at}ms", t["to"].as_str().unwrap_or("?")),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The daemon log's lines that name job `id` (at most `max`, the last
/// ones): what every daemon this node started said about it.
fn log_lines_for(node: &Node, id: &str, max: usize) -> String {
    let log = node.daemon_log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(id)).collect();
    lines[lines.len().saturating_sub(max)..].join("\n      ")
}

#[test]
fn engine_soak_with_kill_9_restarts() {
    let seed = env_number("JOBLET_SOAK_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let restarts_wanted =
        env_number("JOBLET_SOAK_RESTARTS").unwrap_or(DEFAULT_RESTARTS as u64) as usize;
    let mut rng = Rng(seed);
    let policy = if rng.chance(50) { "fifo" } else { "backfill" };
    eprintln!(
        "engine soak: seed {seed} (replay with JOBLET_SOAK_SEED={seed}), {restarts_wanted} kill -9 restarts, gpu.policy {policy}"
    );
    let node = SimGpuNode::start(MAX_RUNNING, &format!("  policy: {policy}\n"), "").unwrap();
    let mut soak = Soak {
        node,
        rng,
        seed,
        jobs: Vec::new(),
        restarts: 0,
        timed_to_end: 0,
        anomalies: Vec::new(),
        signals_sent: 0,
        queued_signals: 0,
        failed_starts: Vec::new(),
    };
    let t0 = Instant::now();
    while soak.restarts < restarts_wanted {
        soak.round();
        if soak.restarts.is_multiple_of(10) {
            eprintln!(
                "engine soak: {} restarts, {} jobs, {:.1?}",
                soak.restarts,
                soak.jobs.len(),
                t0.elapsed()
            );
        }
    }
    let churn = t0.elapsed();

    let (by_id, all_final) = soak.settle();
    let mut problems = std::mem::take(&mut soak.anomalies);
    if !all_final {
        problems.push(format!(
            "not every job was final {SETTLE:?} after the last restart"
        ));
    }
    for j in &soak.jobs {
        let before = problems.len();
        match by_id.get(&j.id) {
            Some(st) => soak.check_job(j, st, &mut problems),
            None => problems.push(format!("{}: missing from `rnx job list`", j.describe())),
        }
        if problems.len() > before && problems.len() <= 12 {
            problems.push(format!(
                "    daemon log about job #{}:\n      {}",
                j.n,
                log_lines_for(&soak.node, &j.id, 12)
            ));
        }
    }
    if by_id.len() != soak.jobs.len() {
        problems.push(format!(
            "expected {} jobs in `rnx job list`, it has {}",
            soak.jobs.len(),
            by_id.len()
        ));
    }
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for st in by_id.values() {
        *states
            .entry(st["state"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }

    // Every GPU back, once the release checks are done.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut busy = soak.node.busy_gpus();
    while !busy.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        busy = soak.node.busy_gpus();
    }
    if !busy.is_empty() {
        let holders: std::collections::BTreeSet<String> = soak
            .node
            .gpus()
            .iter()
            .flat_map(|g| g["jobs"].as_array().cloned().unwrap_or_default())
            .filter_map(|j| j.as_str().map(str::to_owned))
            .collect();
        let held_by: Vec<String> = holders
            .iter()
            .map(|id| match soak.jobs.iter().find(|j| &j.id == id) {
                Some(j) => format!(
                    "{} is {}",
                    j.describe(),
                    by_id.get(id).map_or("unknown".into(), |st| format!(
                        "{} ({})",
                        st["state"], st["reason"]
                    ))
                ),
                None => format!("{id}: not a job of the soak"),
            })
            .collect();
        problems.push(format!(
            "expected every GPU AVAILABLE with no job once every job ended, but:\n  {}\n held by:\n  {}",
            busy.join("\n  "),
            held_by.join("\n  ")
        ));
    }

    // A clean stop leaves no shim and no cgroup.
    let log_before_stop = soak.node.daemon_log_tail(TAIL);
    soak.node.stop_daemon();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut shims = soak.node.live_shims();
    while !shims.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        shims = soak.node.live_shims();
    }
    if !shims.is_empty() {
        problems.push(format!(
            "expected no shim alive after a clean daemon stop, found {shims:?}"
        ));
    }
    let base = soak
        .node
        .cgroup_base()
        .expect("the harness chose the node's cgroup base");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = base.children();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = base.children();
    }
    if !left.is_empty() {
        problems.push(format!(
            "expected no cgroup below the node's base {} after a clean daemon stop, found {left:?}",
            base.0
        ));
    }

    let signalled = soak.jobs.iter().filter(|j| !j.signalled.is_empty()).count();
    let gpu_jobs = soak.jobs.iter().filter(|j| j.gpus > 0).count();
    eprintln!(
        "engine soak: seed {seed}: {} jobs ({gpu_jobs} GPU; {} stop/kill requests, {} of them to queued jobs, {signalled} jobs signalled before they ended), {} kill -9 restarts ({} timed to a job's end) in {churn:.1?}, {:.1?} in all; final states {states:?}",
        soak.jobs.len(),
        soak.signals_sent,
        soak.queued_signals,
        soak.restarts,
        soak.timed_to_end,
        t0.elapsed()
    );
    let failed_starts = soak.failed_starts.len();
    if failed_starts > 0 {
        eprintln!(
            "engine soak: the daemon failed to come back {failed_starts} times; the first time:\n{}",
            soak.failed_starts[0]
        );
        problems.insert(
            0,
            format!(
                "expected the daemon to come back after every kill -9; {failed_starts} of {} restarts exited during start-up (the first one's log tail is printed above the panic):\n  {}",
                soak.restarts,
                soak.failed_starts
                    .iter()
                    .map(|f| f.lines().last().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ),
        );
    }
    if !problems.is_empty() {
        let shown = problems.len().min(40);
        panic!(
            "engine soak (seed {seed}, replay with JOBLET_SOAK_SEED={seed}): {} problems{}:\n{}\ndaemon log tail (before the clean stop):\n{log_before_stop}",
            problems.len(),
            if shown < problems.len() { format!(" (first {shown})") } else { String::new() },
            problems[..shown].join("\n")
        );
    }
    assert!(soak.restarts >= restarts_wanted);
}
