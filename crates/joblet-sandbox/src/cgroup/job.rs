//! [`JobCgroup`]: one job's directory in every hierarchy (each v1
//! hierarchy plus the cgroup2 tree), created with all limits applied and
//! verified, then watched, killed and removed.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::error::CgroupError;
use super::files;
use super::layout::{Controller, Layout, Placement, Version};
use super::limits::{CgroupRoots, Limits, Plan};
use super::{v1, v2, CgroupManager, CgroupStats};

/// How long [`JobCgroup::destroy`] waits for killed processes to leave.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long the v1 freezer may take to report `FROZEN`.
const FREEZE_WAIT: Duration = Duration::from_secs(1);

/// The v2 controllers joblet enables for job cgroups (where v2 serves them).
const V2_ENABLE: [Controller; 5] = [
    Controller::Cpu,
    Controller::Cpuset,
    Controller::Io,
    Controller::Memory,
    Controller::Pids,
];

/// One hierarchy's directory of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    dir: PathBuf,
    version: Version,
    /// The controllers this directory serves for the job.
    controllers: Vec<Controller>,
}

impl Member {
    fn serves(&self, c: Controller) -> bool {
        self.controllers.contains(&c)
    }
}

/// One job's cgroups: on a hybrid host one directory per v1 hierarchy plus
/// one in the cgroup2 tree (always created there, because the v2 device
/// filter attaches to it), on a pure host one or the other.
#[derive(Debug)]
pub struct JobCgroup {
    members: Vec<Member>,
}

impl JobCgroup {
    /// Creates `<base>/<name>` in every hierarchy (`base` is the daemon's
    /// subtree relative to each hierarchy's root, e.g. `joblet`; created
    /// when missing and prepared: v1 cpuset levels get CPUs and memory
    /// nodes, v2 levels get the controllers enabled in
    /// `cgroup.subtree_control`), applies all limits and verifies each file
    /// it wrote by reading it back. Fails closed: a limit whose controller
    /// is missing, a write the kernel refuses or a value that does not read
    /// back removes the job directories again and returns an error naming
    /// the file and value. An existing job directory without processes
    /// (left by a crash) is reused.
    pub fn create(
        layout: &Layout,
        roots: &CgroupRoots,
        base: &str,
        name: &str,
        limits: &Limits,
    ) -> Result<JobCgroup, CgroupError> {
        check_base(base)?;
        check_component("name", name)?;
        let plan = limits.plan(&roots.sysfs)?;
        let placement = layout.placement()?;
        require(layout, &placement, limits)?;
        prepare_base(layout, &placement, base)?;
        let job = JobCgroup {
            members: members(layout, &placement, &format!("{base}/{name}")),
        };
        let mut made: Vec<PathBuf> = Vec::new();
        if let Err(e) = job.fill(&plan, &mut made) {
            for dir in made.iter().rev() {
                if let Err(re) = files::rmdir(dir) {
                    tracing::warn!(error = %re, "could not remove a cgroup after a failed create");
                }
            }
            return Err(e);
        }
        tracing::debug!(job = name, dirs = ?job.members.iter().map(|m| &m.dir).collect::<Vec<_>>(), "created job cgroups");
        Ok(job)
    }

    /// Applies `limits` to the job's existing cgroups, with the checks of
    /// [`JobCgroup::create`] (every file read back; a limit whose
    /// controller is missing is an error). For a warm sandbox's cgroups,
    /// created with the node's defaults before their job was known; limits
    /// `None` leaves as they are, so only ever go from those defaults to a
    /// job's, never back. On error the caller removes the cgroups: the job
    /// must not start.
    pub fn set_limits(
        &self,
        layout: &Layout,
        roots: &CgroupRoots,
        limits: &Limits,
    ) -> Result<(), CgroupError> {
        let plan = limits.plan(&roots.sysfs)?;
        let placement = layout.placement()?;
        require(layout, &placement, limits)?;
        for m in &self.members {
            apply(m, &plan)?;
        }
        Ok(())
    }

    /// The job's cgroups as they would be named, without creating or
    /// checking anything: for killing and removing a job's cgroups after a
    /// restart.
    pub fn open(layout: &Layout, base: &str, name: &str) -> Result<JobCgroup, CgroupError> {
        check_base(base)?;
        check_component("name", name)?;
        let placement = layout.placement()?;
        Ok(JobCgroup {
            members: members(layout, &placement, &format!("{base}/{name}")),
        })
    }

    fn fill(&self, plan: &Plan, made: &mut Vec<PathBuf>) -> Result<(), CgroupError> {
        for m in &self.members {
            let created = files::mkdir(&m.dir)?;
            made.push(m.dir.clone());
            // Only a directory that was there already can hold processes.
            let pids = if created {
                Vec::new()
            } else {
                files::procs(&m.dir)?
            };
            if !pids.is_empty() {
                // Not ours to remove: it holds someone's processes.
                made.pop();
                return Err(CgroupError::Busy {
                    path: m.dir.clone(),
                    pids,
                });
            }
            apply(m, plan)?;
        }
        Ok(())
    }

    /// Moves process `pid` (all its threads) into the job's cgroup in every
    /// hierarchy (v1 first, the cgroup2 directory last). Each write of a pid
    /// to `cgroup.procs` takes the kernel's global lock that
    /// [`JobCgroup::entry`] avoids; the sandbox runner uses that instead.
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        for m in &self.members {
            files::write(&m.dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// What a process needs to enter the job's cgroups by itself, without
    /// a pid written to `cgroup.procs` (which write-locks the kernel's
    /// global `cgroup_threadgroup_rwsem` and so, unless cgroup2 is mounted
    /// with `favordynmods`, waits for an RCU grace period: milliseconds on
    /// every job's start): each v1 directory's `tasks` file, opened for
    /// writing, where a single-threaded process moves itself by writing
    /// `0` (the kernel takes no global lock for that), then the cgroup2
    /// directory, opened, for `clone3(CLONE_INTO_CGROUP)`. The sandbox init
    /// takes them on its release (see `init::entry`).
    pub fn entry(&self) -> Result<Vec<OwnedFd>, CgroupError> {
        self.members
            .iter()
            .map(|m| {
                let (path, dir) = match m.version {
                    Version::V1 => (m.dir.join("tasks"), false),
                    Version::V2 => (m.dir.clone(), true),
                };
                let mut open = OpenOptions::new();
                if dir {
                    open.read(true).custom_flags(libc::O_DIRECTORY);
                } else {
                    open.write(true);
                }
                open.open(&path)
                    .map(OwnedFd::from)
                    .map_err(|source| CgroupError::Open { path, source })
            })
            .collect()
    }

    /// The job's v1 devices directory, for the v1 device rules.
    pub fn v1_devices_dir(&self) -> Option<&Path> {
        self.members
            .iter()
            .find(|m| m.version == Version::V1 && m.serves(Controller::Devices))
            .map(|m| m.dir.as_path())
    }

    /// The job's cgroup2 directory, for the v2 eBPF device filter.
    pub fn unified_dir(&self) -> Option<&Path> {
        self.members
            .iter()
            .find(|m| m.version == Version::V2)
            .map(|m| m.dir.as_path())
    }

    /// Every directory of the job (v1 hierarchies, then cgroup2).
    pub fn dirs(&self) -> Vec<&Path> {
        self.members.iter().map(|m| m.dir.as_path()).collect()
    }

    /// The processes in the job (in any of its directories), sorted.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut all = BTreeSet::new();
        for m in &self.members {
            all.extend(files::procs(&m.dir)?);
        }
        Ok(all.into_iter().collect())
    }

    fn memory_member(&self) -> Option<&Member> {
        self.members.iter().find(|m| m.serves(Controller::Memory))
    }

    /// Whether the kernel OOM-killed a process of the job (v2
    /// `memory.events` `oom_kill`, v1 `memory.oom_control` `oom_kill`, or
    /// on v1 kernels before 4.13 whether the limit was hit at all).
    /// `false` without a memory controller. Ask before [`Self::destroy`].
    pub fn oom_killed(&self) -> Result<bool, CgroupError> {
        let Some(m) = self.memory_member() else {
            return Ok(false);
        };
        let n = match m.version {
            Version::V1 => v1::oom_kills(&m.dir)?,
            Version::V2 => v2::oom_kills(&m.dir)?,
        };
        Ok(n > 0)
    }

    /// Why the job died, when the kernel says: `out of memory: limit 512 MB`
    /// after an OOM kill, otherwise `None`. Ask before [`Self::destroy`].
    pub fn death_reason(&self) -> Result<Option<String>, CgroupError> {
        if !self.oom_killed()? {
            return Ok(None);
        }
        let limit = match self.memory_member() {
            Some(m) => memory_limit(m)?,
            None => None,
        };
        Ok(Some(match limit {
            Some(bytes) => format!("out of memory: limit {} MB", bytes / (1024 * 1024)),
            None => "out of memory".to_string(),
        }))
    }

    /// Memory current/peak, CPU time, task count and OOM kills, as far as
    /// the serving controllers report them.
    pub fn stats(&self) -> Result<CgroupStats, CgroupError> {
        let mut s = CgroupStats::default();
        if let Some(m) = self.memory_member() {
            match m.version {
                Version::V1 => v1::memory_stats(&m.dir, &mut s)?,
                Version::V2 => v2::memory_stats(&m.dir, &mut s)?,
            }
        }
        let cpuacct = self
            .members
            .iter()
            .find(|m| m.version == Version::V1 && m.serves(Controller::Cpuacct));
        s.cpu_usage_usec = match (cpuacct, self.unified_dir()) {
            (Some(m), _) => Some(v1::cpu_usage_usec(&m.dir)?),
            (None, Some(u)) => v2::cpu_usage_usec(u)?,
            (None, None) => None,
        };
        if let Some(m) = self.members.iter().find(|m| m.serves(Controller::Pids)) {
            s.pids_current = Some(files::read_u64(&m.dir.join("pids.current"))?);
        }
        Ok(s)
    }

    /// Kills every process of the job and waits (at most 10 s) until none
    /// is left: `cgroup.kill` where the kernel has it; otherwise (and for
    /// processes outside the cgroup2 directory) SIGKILL to each process,
    /// inside a v1 freezer freeze when there is one so nothing can fork or
    /// exit (and free its pid for reuse) meanwhile. Gone directories count
    /// as empty.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        let start = Instant::now();
        let unified = self.unified_dir();
        let freezer = self
            .members
            .iter()
            .find(|m| m.version == Version::V1 && m.serves(Controller::Freezer))
            .map(|m| m.dir.as_path());
        let mut pause = Duration::from_millis(1);
        loop {
            let all = self.pids()?;
            if all.is_empty() {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= KILL_WAIT {
                let path = self
                    .members
                    .iter()
                    .find(|m| files::procs(&m.dir).is_ok_and(|p| !p.is_empty()))
                    .map(|m| m.dir.clone())
                    .unwrap_or_default();
                return Err(CgroupError::KillTimeout {
                    path,
                    pids: all,
                    waited_ms: waited.as_millis() as u64,
                });
            }
            let mut rest = all;
            if let Some(u) = unified.filter(|u| u.is_dir()) {
                if v2::kill(u)? {
                    let in_unified = files::procs(u)?;
                    rest.retain(|p| !in_unified.contains(p));
                }
            }
            if !rest.is_empty() {
                match freezer.filter(|f| f.is_dir()) {
                    Some(f) => {
                        let frozen = v1::freeze(f, FREEZE_WAIT)?;
                        if !frozen {
                            tracing::warn!(dir = %f.display(), "freezer did not reach FROZEN; killing anyway");
                        }
                        let mut targets: BTreeSet<i32> = rest.into_iter().collect();
                        targets.extend(files::procs(f)?);
                        let sent = sigkill_all(f, &targets);
                        // Thaw even when a kill failed: frozen processes
                        // cannot die.
                        v1::thaw(f)?;
                        sent?;
                    }
                    None => {
                        let dir = self.members.first().map(|m| m.dir.as_path());
                        let targets: BTreeSet<i32> = rest.into_iter().collect();
                        sigkill_all(dir.unwrap_or(Path::new("")), &targets)?;
                    }
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Removes every directory of the job (they must be empty of
    /// processes). Missing ones are fine. Tries all and reports the first
    /// failure.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let mut first = None;
        for m in &self.members {
            if let Err(e) = files::rmdir(&m.dir) {
                tracing::warn!(error = %e, "could not remove a job cgroup");
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Kills every process left ([`Self::kill_all`]) and removes all the
    /// job's directories ([`Self::remove`]). Idempotent: destroying what is
    /// already gone succeeds. When the job's processes are all gone (the
    /// usual case: its pid 1 has been reaped), each directory goes with one
    /// `rmdir` and nothing is read; the first directory the kernel refuses
    /// to remove (busy) switches to killing and removing as above.
    pub fn destroy(self) -> Result<(), CgroupError> {
        for m in &self.members {
            if !files::try_rmdir(&m.dir)? {
                self.kill_all()?;
                return self.remove();
            }
        }
        Ok(())
    }
}

impl CgroupManager for JobCgroup {
    fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        JobCgroup::add_pid(self, pid)
    }
    fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        JobCgroup::pids(self)
    }
    fn oom_killed(&self) -> Result<bool, CgroupError> {
        JobCgroup::oom_killed(self)
    }
    fn stats(&self) -> Result<CgroupStats, CgroupError> {
        JobCgroup::stats(self)
    }
    fn kill_all(&self) -> Result<(), CgroupError> {
        JobCgroup::kill_all(self)
    }
    fn remove(&self) -> Result<(), CgroupError> {
        JobCgroup::remove(self)
    }
}

/// SIGKILL to each pid; a pid that is already gone is fine.
/// Writes `plan` into one hierarchy's directory of the job.
fn apply(m: &Member, plan: &Plan) -> Result<(), CgroupError> {
    match m.version {
        Version::V1 => v1::apply(&m.dir, &m.controllers, plan),
        Version::V2 => {
            let set: BTreeSet<Controller> = m.controllers.iter().copied().collect();
            v2::apply(&m.dir, &set, plan)
        }
    }
}

fn sigkill_all(dir: &Path, pids: &BTreeSet<i32>) -> Result<(), CgroupError> {
    for &pid in pids {
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(source) => {
                return Err(CgroupError::Kill {
                    pid,
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// The memory limit in bytes, `None` when unlimited.
fn memory_limit(m: &Member) -> Result<Option<u64>, CgroupError> {
    let path = match m.version {
        Version::V1 => m.dir.join("memory.limit_in_bytes"),
        Version::V2 => m.dir.join("memory.max"),
    };
    let s = files::read(&path)?;
    let s = s.trim();
    if s == "max" {
        return Ok(None);
    }
    let v: u64 = s.parse().map_err(|_| CgroupError::Parse {
        path: path.clone(),
        content: s.to_string(),
        reason: "expected a byte count or `max`",
    })?;
    // v1 reports "unlimited" as the largest page-aligned i64.
    Ok((v < (1u64 << 62)).then_some(v))
}

/// The job's directory in each hierarchy: every distinct v1 mountpoint,
/// then the cgroup2 tree.
fn members(layout: &Layout, placement: &Placement, rel: &str) -> Vec<Member> {
    let mut out = Vec::new();
    for (mount, ctrls) in layout.v1_hierarchies() {
        let controllers: Vec<Controller> = ctrls
            .into_iter()
            .filter(|c| placement.get(*c) == Some(Version::V1))
            .collect();
        if !controllers.is_empty() {
            out.push(Member {
                dir: files::join_rel(&mount, rel),
                version: Version::V1,
                controllers,
            });
        }
    }
    if let Some(root) = layout.unified_root() {
        out.push(Member {
            dir: files::join_rel(root, rel),
            version: Version::V2,
            controllers: placement.served_by(Version::V2).into_iter().collect(),
        });
    }
    out
}

/// Every limit asked for has a controller serving it.
fn require(layout: &Layout, placement: &Placement, limits: &Limits) -> Result<(), CgroupError> {
    let wanted = [
        (limits.cpu_percent.is_some(), "cpu_percent", Controller::Cpu),
        (limits.cpuset.is_some(), "cpuset", Controller::Cpuset),
        (limits.memory_mb.is_some(), "memory_mb", Controller::Memory),
        (limits.io_bps.is_some(), "io_bps", Controller::Io),
        (true, "pids_max", Controller::Pids),
    ];
    for (asked, limit, c) in wanted {
        if asked && placement.get(c).is_none() {
            return Err(CgroupError::ControllerUnavailable {
                limit,
                controller: c.v2_name().unwrap_or(c.v1_name()),
                unified: layout
                    .unified_root()
                    .map(|u| u.join("cgroup.controllers").display().to_string())
                    .unwrap_or_else(|| "not mounted".to_string()),
            });
        }
    }
    Ok(())
}

/// Creates the base directories in every hierarchy and prepares each level:
/// v1 cpuset levels inherit CPUs and memory nodes; in cgroup2 the root and
/// every level down to the base enable joblet's controllers for children.
fn prepare_base(layout: &Layout, placement: &Placement, base: &str) -> Result<(), CgroupError> {
    for (mount, ctrls) in layout.v1_hierarchies() {
        let cpuset = ctrls.contains(&Controller::Cpuset)
            && placement.get(Controller::Cpuset) == Some(Version::V1);
        let mut cur = mount.clone();
        for comp in base.split('/') {
            cur = cur.join(comp);
            files::mkdir(&cur)?;
            if cpuset {
                v1::init_cpuset(&cur, None)?;
            }
        }
    }
    if let Some(root) = layout.unified_root() {
        let wanted: BTreeSet<Controller> = V2_ENABLE
            .into_iter()
            .filter(|c| placement.get(*c) == Some(Version::V2))
            .collect();
        let mut cur = root.to_path_buf();
        if !wanted.is_empty() {
            v2::enable_controllers(&cur, &wanted)?;
        }
        for comp in base.split('/') {
            cur = cur.join(comp);
            files::mkdir(&cur)?;
            if !wanted.is_empty() {
                v2::enable_controllers(&cur, &wanted)?;
            }
        }
    }
    Ok(())
}

/// `base`: one or more `/`-separated valid components.
fn check_base(base: &str) -> Result<(), CgroupError> {
    if base.is_empty() {
        return Err(CgroupError::InvalidName {
            what: "base",
            value: base.to_string(),
            reason: "must not be empty",
        });
    }
    base.split('/').try_for_each(|c| check_component("base", c))
}

/// One directory name: letters, digits, `-`, `_`, `.`; not `.`/`..`.
pub(crate) fn check_component(what: &'static str, s: &str) -> Result<(), CgroupError> {
    let bad = |reason| CgroupError::InvalidName {
        what,
        value: s.to_string(),
        reason,
    };
    if s.is_empty() {
        return Err(bad(
            "empty path component (leading, trailing or double `/`?)",
        ));
    }
    if s == "." || s == ".." {
        return Err(bad("`.` and `..` are not cgroup names"));
    }
    if s.len() > 200 {
        return Err(bad("longer than 200 bytes"));
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(bad("only letters, digits, `-`, `_` and `.` are allowed"));
    }
    Ok(())
}
