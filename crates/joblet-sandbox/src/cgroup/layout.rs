//! Which cgroup hierarchies this host has (`/proc/self/mountinfo`) and which
//! cgroup version serves each controller.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::error::CgroupError;
use super::files;

/// The controllers joblet uses. `Io` is `blkio` in v1; `Cpuacct` exists
/// only in v1 (v2 accounts CPU in every cgroup's `cpu.stat`); `Devices` and
/// `Freezer` are built into v2 (eBPF filter, `cgroup.freeze`/`cgroup.kill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    Cpu,
    Cpuacct,
    Cpuset,
    Memory,
    Io,
    Pids,
    Devices,
    Freezer,
}

impl Controller {
    pub const ALL: [Controller; 8] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Io,
        Controller::Pids,
        Controller::Devices,
        Controller::Freezer,
    ];

    /// The controller's name as a v1 mount option.
    pub fn v1_name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Cpuset => "cpuset",
            Controller::Memory => "memory",
            Controller::Io => "blkio",
            Controller::Pids => "pids",
            Controller::Devices => "devices",
            Controller::Freezer => "freezer",
        }
    }

    /// The name in v2 `cgroup.controllers`, for controllers v2 has as such.
    pub fn v2_name(self) -> Option<&'static str> {
        match self {
            Controller::Cpu => Some("cpu"),
            Controller::Cpuset => Some("cpuset"),
            Controller::Memory => Some("memory"),
            Controller::Io => Some("io"),
            Controller::Pids => Some("pids"),
            Controller::Cpuacct | Controller::Devices | Controller::Freezer => None,
        }
    }

    fn from_v1_name(s: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.v1_name() == s)
    }

    fn from_v2_name(s: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.v2_name() == Some(s))
    }
}

/// The cgroup version that serves a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V1,
    V2,
}

/// The cgroup hierarchies mounted on this host. Paths are plain paths, so
/// tests point them into temp dirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Only cgroup2 (modern distributions).
    Unified { root: PathBuf },
    /// v1 controllers, each at its mountpoint (co-mounted controllers share
    /// one), plus a cgroup2 tree holding whatever v1 does not.
    Hybrid {
        v1: BTreeMap<Controller, PathBuf>,
        unified: PathBuf,
    },
    /// Only v1.
    Legacy { v1: BTreeMap<Controller, PathBuf> },
}

/// Which version serves each controller on a host (see [`Layout::placement`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    served: BTreeMap<Controller, Version>,
}

impl Placement {
    /// The version serving `c`, if any.
    pub fn get(&self, c: Controller) -> Option<Version> {
        self.served.get(&c).copied()
    }

    /// The controllers served by `v`.
    pub fn served_by(&self, v: Version) -> BTreeSet<Controller> {
        self.served
            .iter()
            .filter(|(_, sv)| **sv == v)
            .map(|(c, _)| *c)
            .collect()
    }
}

/// Which of joblet's limits this host can enforce (for the node's
/// advertised capabilities). The IO limit additionally needs the job's work
/// directory on a block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Support {
    pub cpu_limit: bool,
    pub cpu_pinning: bool,
    pub memory_limit: bool,
    pub io_limit: bool,
    pub pids_limit: bool,
}

impl Layout {
    /// Reads a mountinfo file (normally `/proc/self/mountinfo`).
    pub fn detect(mountinfo: &Path) -> Result<Layout, CgroupError> {
        let text =
            std::fs::read_to_string(mountinfo).map_err(|source| CgroupError::ReadMountInfo {
                path: mountinfo.to_path_buf(),
                source,
            })?;
        Layout::parse_mountinfo(&text, mountinfo)
    }

    /// Parses mountinfo text; `source` only names it in errors. The first
    /// mount of each hierarchy wins; controllers joblet does not use (and
    /// named hierarchies such as `name=systemd`) are ignored.
    pub fn parse_mountinfo(text: &str, source: &Path) -> Result<Layout, CgroupError> {
        let mut v1: BTreeMap<Controller, PathBuf> = BTreeMap::new();
        let mut unified: Option<PathBuf> = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |reason: &str| CgroupError::MountInfoLine {
                path: source.to_path_buf(),
                line: i + 1,
                reason: reason.to_string(),
            };
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields
                .iter()
                .position(|f| *f == "-")
                .ok_or_else(|| bad("no ` - ` separator"))?;
            if sep < 6 || fields.len() < sep + 4 {
                return Err(bad("too few fields"));
            }
            let mountpoint = PathBuf::from(unescape(fields[4]));
            let fstype = fields[sep + 1];
            let super_opts = fields[sep + 3];
            match fstype {
                "cgroup2" if unified.is_none() => unified = Some(mountpoint),
                "cgroup" => {
                    for opt in super_opts.split(',') {
                        if let Some(c) = Controller::from_v1_name(opt) {
                            v1.entry(c).or_insert_with(|| mountpoint.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        match (v1.is_empty(), unified) {
            (true, Some(root)) => Ok(Layout::Unified { root }),
            (false, Some(unified)) => Ok(Layout::Hybrid { v1, unified }),
            (false, None) => Ok(Layout::Legacy { v1 }),
            (true, None) => Err(CgroupError::NoCgroupMounts {
                path: source.to_path_buf(),
            }),
        }
    }

    /// The cgroup2 tree, if mounted.
    pub fn unified_root(&self) -> Option<&Path> {
        match self {
            Layout::Unified { root } => Some(root),
            Layout::Hybrid { unified, .. } => Some(unified),
            Layout::Legacy { .. } => None,
        }
    }

    /// The v1 mountpoint of a controller, if mounted.
    pub fn v1_mount(&self, c: Controller) -> Option<&Path> {
        self.v1_map().and_then(|m| m.get(&c)).map(PathBuf::as_path)
    }

    /// Whether the v1 devices controller is mounted (then a job's device
    /// rules go to its `devices.deny`/`devices.allow` as well as to the v2
    /// eBPF filter where a cgroup2 tree exists).
    pub fn has_v1_devices(&self) -> bool {
        self.v1_mount(Controller::Devices).is_some()
    }

    fn v1_map(&self) -> Option<&BTreeMap<Controller, PathBuf>> {
        match self {
            Layout::Unified { .. } => None,
            Layout::Hybrid { v1, .. } | Layout::Legacy { v1 } => Some(v1),
        }
    }

    /// The distinct v1 mountpoints with the controllers each one holds.
    pub fn v1_hierarchies(&self) -> BTreeMap<PathBuf, Vec<Controller>> {
        let mut out: BTreeMap<PathBuf, Vec<Controller>> = BTreeMap::new();
        if let Some(map) = self.v1_map() {
            for (c, p) in map {
                out.entry(p.clone()).or_default().push(*c);
            }
        }
        out
    }

    /// `<hierarchy>/<rel>` for every hierarchy: each distinct v1 mountpoint,
    /// then the cgroup2 tree.
    pub fn dirs_for(&self, rel: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .v1_hierarchies()
            .keys()
            .map(|m| files::join_rel(m, rel))
            .collect();
        if let Some(u) = self.unified_root() {
            out.push(files::join_rel(u, rel));
        }
        out
    }

    /// The controllers listed in the cgroup2 root's `cgroup.controllers`
    /// (empty without a cgroup2 tree). Names joblet does not use are skipped.
    pub fn v2_controllers(&self) -> Result<BTreeSet<Controller>, CgroupError> {
        let Some(root) = self.unified_root() else {
            return Ok(BTreeSet::new());
        };
        let content = files::read(&root.join("cgroup.controllers"))?;
        Ok(content
            .split_whitespace()
            .filter_map(Controller::from_v2_name)
            .collect())
    }

    /// Which version serves each controller: v2 when the cgroup2 root lists
    /// it in `cgroup.controllers`, otherwise v1 when mounted. `Cpuacct`
    /// is v1 only; `Freezer` and `Devices` are v1 when mounted, otherwise
    /// v2 (built in) when a cgroup2 tree exists.
    pub fn placement(&self) -> Result<Placement, CgroupError> {
        let v2 = self.v2_controllers()?;
        let mut served = BTreeMap::new();
        for c in Controller::ALL {
            let v = if v2.contains(&c) {
                Some(Version::V2)
            } else if self.v1_mount(c).is_some() {
                Some(Version::V1)
            } else if matches!(c, Controller::Freezer | Controller::Devices)
                && self.unified_root().is_some()
            {
                Some(Version::V2)
            } else {
                None
            };
            if let Some(v) = v {
                served.insert(c, v);
            }
        }
        Ok(Placement { served })
    }

    /// Which limits this host can enforce.
    pub fn support(&self) -> Result<Support, CgroupError> {
        let p = self.placement()?;
        Ok(Support {
            cpu_limit: p.get(Controller::Cpu).is_some(),
            cpu_pinning: p.get(Controller::Cpuset).is_some(),
            memory_limit: p.get(Controller::Memory).is_some(),
            io_limit: p.get(Controller::Io).is_some(),
            pids_limit: p.get(Controller::Pids).is_some(),
        })
    }

    /// The same layout rooted at the cgroups this process is in (read from
    /// `proc_cgroup`, normally `/proc/self/cgroup`) instead of at the
    /// hierarchy roots, so job cgroups nest under the caller's own (for
    /// example to stay inside a memory cgroup a supervisor put us in).
    /// Assumes the mounts show the whole hierarchy (mount root `/`, or a
    /// cgroup namespace); every resulting directory must exist. On cgroup2
    /// the caller's cgroup must hold no processes for controllers to be
    /// enabled below it (the no-internal-processes rule).
    pub fn nested_in(&self, proc_cgroup: &Path) -> Result<Layout, CgroupError> {
        let text = std::fs::read_to_string(proc_cgroup).map_err(|source| CgroupError::Read {
            path: proc_cgroup.to_path_buf(),
            source,
        })?;
        let mut by_v1: BTreeMap<String, String> = BTreeMap::new();
        let mut v2_path: Option<String> = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(CgroupError::ProcCgroupLine {
                    path: proc_cgroup.to_path_buf(),
                    line: i + 1,
                    reason: "fewer than three `:`-separated fields".to_string(),
                });
            };
            if ctrls.is_empty() {
                v2_path = Some(path.to_string());
            } else {
                for c in ctrls.split(',') {
                    by_v1.insert(c.to_string(), path.to_string());
                }
            }
        }
        let missing = |h: &str| CgroupError::ProcCgroupMissing {
            path: proc_cgroup.to_path_buf(),
            hierarchy: h.to_string(),
        };
        let exists = |p: PathBuf| -> Result<PathBuf, CgroupError> {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(CgroupError::Stat {
                    path: p,
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                })
            }
        };
        let rebase_v1 = |v1: &BTreeMap<Controller, PathBuf>| {
            let mut out = BTreeMap::new();
            for (c, mount) in v1 {
                let rel = by_v1.get(c.v1_name()).ok_or_else(|| missing(c.v1_name()))?;
                out.insert(*c, exists(files::join_rel(mount, rel))?);
            }
            Ok::<_, CgroupError>(out)
        };
        let rebase_v2 = |root: &Path| {
            let rel = v2_path.as_deref().ok_or_else(|| missing("cgroup2 (0::)"))?;
            exists(files::join_rel(root, rel))
        };
        Ok(match self {
            Layout::Unified { root } => Layout::Unified {
                root: rebase_v2(root)?,
            },
            Layout::Hybrid { v1, unified } => Layout::Hybrid {
                v1: rebase_v1(v1)?,
                unified: rebase_v2(unified)?,
            },
            Layout::Legacy { v1 } => Layout::Legacy { v1: rebase_v1(v1)? },
        })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space and so on).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn this_machines_mountinfo_is_hybrid() {
        let l = Layout::parse_mountinfo(HYBRID, Path::new("mi")).unwrap();
        let Layout::Hybrid { v1, unified } = &l else {
            panic!("{l:?}")
        };
        assert_eq!(unified, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(v1.len(), 8);
        for c in Controller::ALL {
            assert_eq!(
                l.v1_mount(c).unwrap(),
                Path::new("/sys/fs/cgroup").join(c.v1_name())
            );
        }
        assert!(l.has_v1_devices());
        assert_eq!(l.unified_root(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(l.dirs_for("joblet/j1").len(), 9);
    }

    #[test]
    fn comounted_controllers_share_one_hierarchy() {
        let mi = "\
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/net_cls,net_prio rw - cgroup cgroup rw,net_cls,net_prio
32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";
        let l = Layout::parse_mountinfo(mi, Path::new("mi")).unwrap();
        let Layout::Legacy { v1 } = &l else {
            panic!("{l:?}")
        };
        assert_eq!(v1.len(), 3);
        let h = l.v1_hierarchies();
        assert_eq!(h.len(), 2);
        assert_eq!(
            h[Path::new("/sys/fs/cgroup/cpu,cpuacct")],
            vec![Controller::Cpu, Controller::Cpuacct]
        );
        assert!(!l.has_v1_devices());
        assert_eq!(l.unified_root(), None);
    }

    #[test]
    fn unified_only_and_escaped_mountpoints() {
        let mi = "29 23 0:26 / /sys/fs/my\\040cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let l = Layout::parse_mountinfo(mi, Path::new("mi")).unwrap();
        assert_eq!(
            l,
            Layout::Unified {
                root: PathBuf::from("/sys/fs/my cgroup")
            }
        );
    }

    #[test]
    fn optional_fields_before_the_separator_are_skipped() {
        let mi = "29 23 0:26 / /sys/fs/cgroup rw shared:4 master:1 - cgroup2 cgroup2 rw\n";
        let l = Layout::parse_mountinfo(mi, Path::new("mi")).unwrap();
        assert_eq!(l.unified_root(), Some(Path::new("/sys/fs/cgroup")));
    }

    #[test]
    fn no_cgroups_and_garbage_are_errors() {
        let err =
            Layout::parse_mountinfo("22 27 0:21 / /proc rw - proc proc rw\n", Path::new("mi"))
                .unwrap_err();
        assert!(matches!(err, CgroupError::NoCgroupMounts { .. }), "{err}");
        let err = Layout::parse_mountinfo("garbage line\n", Path::new("mi")).unwrap_err();
        assert!(err.to_string().contains("mi line 1"), "{err}");
    }

    #[test]
    fn placement_follows_the_unified_controllers_file() {
        let tmp = tempfile::tempdir().unwrap();
        let u = tmp.path().join("unified");
        std::fs::create_dir(&u).unwrap();
        std::fs::write(u.join("cgroup.controllers"), "hugetlb\n").unwrap();
        let mut v1 = BTreeMap::new();
        for c in Controller::ALL {
            v1.insert(c, tmp.path().join(c.v1_name()));
        }
        let l = Layout::Hybrid {
            v1: v1.clone(),
            unified: u.clone(),
        };
        let p = l.placement().unwrap();
        for c in Controller::ALL {
            assert_eq!(p.get(c), Some(Version::V1), "{c:?}");
        }
        assert!(p.served_by(Version::V2).is_empty());

        // Memory and io moved to v2 (unmounted from v1).
        std::fs::write(u.join("cgroup.controllers"), "memory io hugetlb\n").unwrap();
        v1.remove(&Controller::Memory);
        v1.remove(&Controller::Io);
        v1.remove(&Controller::Freezer);
        let l = Layout::Hybrid {
            v1,
            unified: u.clone(),
        };
        let p = l.placement().unwrap();
        assert_eq!(p.get(Controller::Memory), Some(Version::V2));
        assert_eq!(p.get(Controller::Io), Some(Version::V2));
        assert_eq!(p.get(Controller::Cpu), Some(Version::V1));
        assert_eq!(p.get(Controller::Freezer), Some(Version::V2));
        assert_eq!(p.get(Controller::Devices), Some(Version::V1));

        // Pure v2 without pids enabled at the root: pids is unavailable.
        std::fs::write(u.join("cgroup.controllers"), "cpuset cpu io memory\n").unwrap();
        let l = Layout::Unified { root: u };
        let p = l.placement().unwrap();
        assert_eq!(p.get(Controller::Pids), None);
        assert_eq!(p.get(Controller::Cpuacct), None);
        assert_eq!(p.get(Controller::Devices), Some(Version::V2));
        let s = l.support().unwrap();
        assert!(s.cpu_limit && s.cpu_pinning && s.memory_limit && s.io_limit);
        assert!(!s.pids_limit);
    }

    #[test]
    fn nested_in_follows_proc_self_cgroup() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = tmp.path().join("memory");
        let cpu = tmp.path().join("cpu");
        let uni = tmp.path().join("unified");
        std::fs::create_dir_all(mem.join("process_api/abc")).unwrap();
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::create_dir_all(&uni).unwrap();
        let pc = tmp.path().join("cgroup");
        std::fs::write(&pc, "4:memory:/process_api/abc\n1:cpu:/\n0::/\n").unwrap();
        let l = Layout::Hybrid {
            v1: BTreeMap::from([
                (Controller::Memory, mem.clone()),
                (Controller::Cpu, cpu.clone()),
            ]),
            unified: uni.clone(),
        };
        let n = l.nested_in(&pc).unwrap();
        assert_eq!(
            n.v1_mount(Controller::Memory).unwrap(),
            mem.join("process_api/abc")
        );
        assert_eq!(n.v1_mount(Controller::Cpu).unwrap(), cpu);
        assert_eq!(n.unified_root().unwrap(), uni);

        // A hierarchy missing from the file, or a directory that does not
        // exist, is an error rather than a guess.
        std::fs::write(&pc, "1:cpu:/\n0::/\n").unwrap();
        let err = l.nested_in(&pc).unwrap_err();
        assert!(err.to_string().contains("memory"), "{err}");
        std::fs::write(&pc, "4:memory:/gone\n1:cpu:/\n0::/\n").unwrap();
        assert!(l.nested_in(&pc).is_err());
    }
}
