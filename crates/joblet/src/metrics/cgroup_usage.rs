//! A running job's cgroup counters from only the files its series need:
//! CPU (v1 `cpuacct.usage`, else v2 `cpu.stat` `usage_usec`), memory (v1
//! `memory.usage_in_bytes`, v2 `memory.current`) and block IO
//! ([`super::cgroup_io`]). Which files those are is found once per job
//! ([`UsageFiles::find`], from its cgroup directories), so each later read
//! opens three files and nothing else. Takes directories as parameters, so
//! tests point it at a temp dir.

use std::path::{Path, PathBuf};

use super::cgroup_io;
use super::snapshot::JobUsage;

/// Where a job's CPU time is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cpu {
    /// v1 `cpuacct.usage`, nanoseconds.
    Nanos(PathBuf),
    /// v2 `cpu.stat`, its `usage_usec` line.
    Stat(PathBuf),
}

/// Where a job's block IO is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Io {
    /// v2 `io.stat`.
    Stat(PathBuf),
    /// v1 `blkio.throttle.io_service_bytes`.
    Blkio(PathBuf),
}

/// The files a job's usage series are read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFiles {
    cpu: Option<Cpu>,
    memory: Option<PathBuf>,
    io: Option<Io>,
}

impl UsageFiles {
    /// The files among a job's cgroup directories `dirs` (its v1
    /// hierarchies and its cgroup2 directory); `None` when none is there
    /// (its cgroups are gone, or not made yet).
    pub fn find<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Option<UsageFiles> {
        let dirs: Vec<&Path> = dirs.into_iter().collect();
        let first = |name: &str| dirs.iter().map(|d| d.join(name)).find(|p| p.exists());
        // A v1 `cpu` hierarchy has a `cpu.stat` too, without `usage_usec`.
        let stat = || {
            dirs.iter().map(|d| d.join("cpu.stat")).find(|p| {
                std::fs::read_to_string(p).is_ok_and(|t| keyed(&t, "usage_usec").is_some())
            })
        };
        let cpu = first("cpuacct.usage")
            .map(Cpu::Nanos)
            .or_else(|| stat().map(Cpu::Stat));
        let memory = first("memory.usage_in_bytes").or_else(|| first("memory.current"));
        let io = dirs.iter().find_map(|d| {
            let v2 = d.join("io.stat");
            if v2.exists() {
                return Some(Io::Stat(v2));
            }
            let v1 = d.join("blkio.throttle.io_service_bytes");
            v1.exists().then_some(Io::Blkio(v1))
        });
        let files = UsageFiles { cpu, memory, io };
        (files != UsageFiles::default()).then_some(files)
    }

    /// The counters now; `None` when none of the files could be read (the
    /// job's cgroups are gone).
    pub fn read(&self) -> Option<JobUsage> {
        let cpu_seconds = self.cpu.as_ref().and_then(|cpu| match cpu {
            Cpu::Nanos(p) => read_u64(p).map(|ns| (ns / 1000) as f64 / 1e6),
            Cpu::Stat(p) => read(p)
                .and_then(|t| keyed(&t, "usage_usec"))
                .map(|us| us as f64 / 1e6),
        });
        let memory_bytes = self.memory.as_deref().and_then(read_u64);
        let io = self.io.as_ref().and_then(|io| match io {
            Io::Stat(p) => read(p).map(|t| cgroup_io::parse_io_stat(&t)),
            Io::Blkio(p) => read(p).map(|t| cgroup_io::parse_blkio(&t)),
        });
        let usage = JobUsage {
            cpu_seconds,
            memory_bytes,
            io_read_bytes: io.map(|(r, _)| r),
            io_write_bytes: io.map(|(_, w)| w),
        };
        (usage != JobUsage::default()).then_some(usage)
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file (`usage_usec 1234` lines).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(d.path().join(name), text).unwrap();
        }
        d
    }

    #[test]
    fn v1_hierarchies_give_cpuacct_usage_memory_and_blkio() {
        let cpu = dir_with(&[
            ("cpuacct.usage", "2500000000\n"),
            ("cpu.stat", "nr_periods 0\n"),
        ]);
        let mem = dir_with(&[("memory.usage_in_bytes", "4096\n")]);
        let blkio = dir_with(&[(
            "blkio.throttle.io_service_bytes",
            "8:0 Read 7\n8:0 Write 3\n",
        )]);
        let files = UsageFiles::find([cpu.path(), mem.path(), blkio.path()]).unwrap();
        assert_eq!(
            files.read(),
            Some(JobUsage {
                cpu_seconds: Some(2.5),
                memory_bytes: Some(4096),
                io_read_bytes: Some(7),
                io_write_bytes: Some(3),
            })
        );
    }

    #[test]
    fn a_v2_directory_gives_cpu_stat_memory_current_and_io_stat() {
        // A v1 `cpu` hierarchy's cpu.stat has no usage_usec: not this one.
        let v1_cpu = dir_with(&[("cpu.stat", "nr_periods 0\nnr_throttled 0\n")]);
        let v2 = dir_with(&[
            ("cpu.stat", "usage_usec 1250000\nuser_usec 1\n"),
            ("memory.current", "10\n"),
            ("io.stat", "8:0 rbytes=5 wbytes=6 rios=1 wios=1\n"),
        ]);
        let files = UsageFiles::find([v1_cpu.path(), v2.path()]).unwrap();
        let usage = files.read().unwrap();
        assert_eq!(usage.cpu_seconds, Some(1.25));
        assert_eq!(usage.memory_bytes, Some(10));
        assert_eq!(
            (usage.io_read_bytes, usage.io_write_bytes),
            (Some(5), Some(6))
        );
    }

    #[test]
    fn gone_cgroups_have_no_files_and_no_usage() {
        let d = dir_with(&[("memory.current", "10\n")]);
        assert_eq!(UsageFiles::find([Path::new("/nonexistent/joblet")]), None);
        let files = UsageFiles::find([d.path()]).unwrap();
        drop(d);
        assert_eq!(files.read(), None);
    }
}
