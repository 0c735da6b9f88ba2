//! The running jobs' cgroup counters, kept in memory for scrapes: a
//! sampler thread ([`spawn_sampler`]) re-reads them every period (the GPU
//! monitor's, `gpu.health_interval`), so a scrape of a node with many jobs
//! opens no cgroup file for them.
//!
//! The jobs sampled are those the latest scrape showed running; a scrape
//! reads itself any running job the sampler has not read within 1.5
//! periods (one new since the previous scrape, or a sampler running late),
//! so what a scrape shows is at most one period old (1.5 at worst). The
//! sampler stops reading after [`IDLE`] without a scrape (nobody looks),
//! and a node whose period is zero reads at every scrape. Reads happen
//! outside the lock: a scrape never waits for the sampler's file reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use joblet_sandbox::cgroup::JobCgroup;

use super::cgroup_usage::UsageFiles;
use super::collect::JobCgroups;
use super::snapshot::JobUsage;

/// No scrape for this long: the sampler stops reading until the next one.
pub const IDLE: Duration = Duration::from_secs(300);

/// The counters of the jobs the latest scrape showed running.
#[derive(Debug)]
pub struct UsageCache {
    cgroups: JobCgroups,
    period: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    jobs: BTreeMap<String, Entry>,
    last_scrape: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Entry {
    files: Arc<UsageFiles>,
    usage: Option<JobUsage>,
    read_at: Instant,
}

impl UsageCache {
    /// Counters of jobs in `cgroups`, sampled every `period` (zero: read
    /// at each scrape).
    pub fn new(cgroups: JobCgroups, period: Duration) -> UsageCache {
        UsageCache {
            cgroups,
            period,
            state: Mutex::new(State::default()),
        }
    }

    pub fn period(&self) -> Duration {
        self.period
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters of the `running` jobs for a scrape now, by job id;
    /// the jobs no longer running are forgotten.
    pub fn usage(&self, running: &[&str]) -> BTreeMap<String, JobUsage> {
        let now = Instant::now();
        let fresh_for = self.period + self.period / 2;
        let wanted: BTreeSet<&str> = running.iter().copied().collect();
        let mut out = BTreeMap::new();
        let mut todo: Vec<(&str, Option<Arc<UsageFiles>>)> = Vec::new();
        {
            let mut st = self.lock();
            st.last_scrape = Some(now);
            st.jobs.retain(|id, _| wanted.contains(id.as_str()));
            for id in &wanted {
                match st.jobs.get(*id) {
                    Some(e) if now.saturating_duration_since(e.read_at) < fresh_for => {
                        if let Some(u) = e.usage {
                            out.insert((*id).to_owned(), u);
                        }
                    }
                    Some(e) => todo.push((id, Some(e.files.clone()))),
                    None => todo.push((id, None)),
                }
            }
        }
        if todo.is_empty() {
            return out;
        }
        let read: Vec<(&str, Entry)> = todo
            .into_iter()
            .filter_map(|(id, files)| {
                let files = files.or_else(|| self.find(id))?;
                let usage = files.read();
                let read_at = Instant::now();
                Some((
                    id,
                    Entry {
                        files,
                        usage,
                        read_at,
                    },
                ))
            })
            .collect();
        let mut st = self.lock();
        for (id, e) in read {
            if let Some(u) = e.usage {
                out.insert(id.to_owned(), u);
            }
            st.jobs.insert(id.to_owned(), e);
        }
        out
    }

    /// One sampler round: re-reads the jobs the latest scrape showed
    /// running, unless none came for [`IDLE`].
    pub fn sample(&self) {
        let targets: Vec<(String, Arc<UsageFiles>)> = {
            let st = self.lock();
            if st.last_scrape.is_none_or(|t| t.elapsed() > IDLE) {
                return;
            }
            st.jobs
                .iter()
                .map(|(id, e)| (id.clone(), e.files.clone()))
                .collect()
        };
        let read: Vec<(String, Option<JobUsage>, Instant)> = targets
            .into_iter()
            .map(|(id, files)| {
                let usage = files.read();
                (id, usage, Instant::now())
            })
            .collect();
        let mut st = self.lock();
        for (id, usage, read_at) in read {
            // A scrape may have forgotten it meanwhile (it ended).
            if let Some(e) = st.jobs.get_mut(&id) {
                e.usage = usage;
                e.read_at = read_at;
            }
        }
    }

    fn find(&self, id: &str) -> Option<Arc<UsageFiles>> {
        let job = JobCgroup::open(&self.cgroups.layout, &self.cgroups.base, id).ok()?;
        UsageFiles::find(job.dirs()).map(Arc::new)
    }
}

/// Starts the thread that samples `cache` every period; it ends once the
/// cache is dropped. `None` for a zero period (scrapes read themselves).
pub fn spawn_sampler(cache: &Arc<UsageCache>) -> Option<std::io::Result<JoinHandle<()>>> {
    let period = cache.period;
    if period.is_zero() {
        return None;
    }
    let cache = Arc::downgrade(cache);
    Some(
        std::thread::Builder::new()
            .name("metrics-cgroups".into())
            .spawn(move || {
                let mut next = Instant::now() + period;
                loop {
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                    let Some(cache) = cache.upgrade() else {
                        return;
                    };
                    let t0 = Instant::now();
                    cache.sample();
                    tracing::trace!(
                        elapsed_us = t0.elapsed().as_micros() as u64,
                        "metrics: job cgroups sampled"
                    );
                    next += period;
                    let now = Instant::now();
                    if next <= now {
                        next = now + period;
                    }
                }
            }),
    )
}

#[cfg(test)]
mod tests {
    use joblet_sandbox::cgroup::Layout;

    use super::*;

    /// A cgroup2 root with job `j1`'s directory under base `jb`.
    fn root() -> (tempfile::TempDir, JobCgroups) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "cpu memory io pids\n").unwrap();
        let job = d.path().join("jb/j1");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("cpu.stat"), "usage_usec 1000000\n").unwrap();
        set_memory(d.path(), 10);
        let cgroups = JobCgroups {
            layout: Layout::Unified {
                root: d.path().to_path_buf(),
            },
            base: "jb".into(),
        };
        (d, cgroups)
    }

    fn set_memory(root: &std::path::Path, bytes: u64) {
        std::fs::write(root.join("jb/j1/memory.current"), format!("{bytes}\n")).unwrap();
    }

    fn memory(cache: &UsageCache, running: &[&str]) -> Option<u64> {
        cache.usage(running).get("j1").and_then(|u| u.memory_bytes)
    }

    #[test]
    fn scrapes_show_what_the_sampler_read_and_read_new_jobs_themselves() {
        let (d, cgroups) = root();
        let cache = UsageCache::new(cgroups, Duration::from_secs(3600));
        // New: read by the scrape itself.
        assert_eq!(memory(&cache, &["j1"]), Some(10));
        assert_eq!(cache.usage(&["j1"])["j1"].cpu_seconds, Some(1.0));
        // Within a period a scrape shows the sampler's reading...
        set_memory(d.path(), 20);
        assert_eq!(memory(&cache, &["j1"]), Some(10));
        // ...which each round refreshes.
        cache.sample();
        assert_eq!(memory(&cache, &["j1"]), Some(20));
        // A job no longer running is forgotten and not sampled.
        assert_eq!(memory(&cache, &[]), None);
        set_memory(d.path(), 30);
        cache.sample();
        assert!(cache.lock().jobs.is_empty());
        assert_eq!(memory(&cache, &["j1"]), Some(30));
        // A job without cgroups has no usage.
        assert!(!cache.usage(&["j1", "nope"]).contains_key("nope"));
    }

    #[test]
    fn a_zero_period_reads_at_every_scrape_and_starts_no_sampler() {
        let (d, cgroups) = root();
        let cache = Arc::new(UsageCache::new(cgroups, Duration::ZERO));
        assert!(spawn_sampler(&cache).is_none());
        assert_eq!(memory(&cache, &["j1"]), Some(10));
        set_memory(d.path(), 20);
        assert_eq!(memory(&cache, &["j1"]), Some(20));
    }

    #[test]
    fn the_sampler_stops_when_nobody_scrapes() {
        let (d, cgroups) = root();
        let cache = UsageCache::new(cgroups, Duration::from_secs(3600));
        assert_eq!(memory(&cache, &["j1"]), Some(10));
        set_memory(d.path(), 20);
        cache.lock().last_scrape = Instant::now().checked_sub(IDLE + Duration::from_secs(1));
        cache.sample();
        assert_eq!(
            cache.lock().jobs["j1"].usage.unwrap().memory_bytes,
            Some(10)
        );
    }
}
