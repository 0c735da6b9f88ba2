//! The CDI specs of a node: every `*.yaml`, `*.yml` and `*.json` file in
//! the spec directories ([`DEFAULT_SPEC_DIRS`]: `/etc/cdi`, then
//! `/var/run/cdi`), and the edits of the devices a container asks for.
//!
//! As in the CDI library's cache: a directory later in the list has
//! priority (a device there replaces one of the same name in an earlier
//! one, so generated specs in `/var/run/cdi` override static ones in
//! `/etc/cdi`); the same device in two files of one directory is a
//! conflict, and neither is used. A file that cannot be read or is not a
//! valid spec is kept as a problem and left out, so one broken vendor
//! file does not take every other device down; asking for a device that
//! is not there names the devices that are, and those problems.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::name::{CdiDevice, Kind};
use super::spec::{ContainerEdits, Format, Spec, SpecError};
use super::validate::validate;

/// Where the CDI library looks for specs, lowest priority first.
pub const DEFAULT_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// Why specs could not be loaded or devices resolved.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot list the CDI spec directory {dir}: {source}")]
    ReadDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(
        "no CDI spec has kind `{kind}` (asked for `{device}`); kinds found in {dirs}: {known}{problems}"
    )]
    UnknownKind {
        device: String,
        kind: String,
        dirs: String,
        known: String,
        problems: String,
    },
    #[error("CDI device `{device}` is not defined in {files}; devices of kind `{kind}`: {known}{problems}")]
    UnknownDevice {
        device: String,
        kind: String,
        files: String,
        known: String,
        problems: String,
    },
    #[error("CDI device `{device}` is defined in both {first} and {second} (same directory, same priority): neither is used; remove one")]
    Conflict {
        device: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// One loaded, valid spec file.
#[derive(Debug, Clone)]
struct Loaded {
    path: PathBuf,
    kind: Kind,
    spec: Spec,
}

/// Where a device is defined: spec (index into `specs`) and device index.
#[derive(Debug, Clone, Copy)]
struct Defined {
    spec: usize,
    device: usize,
    /// The directory's index (priority).
    priority: usize,
}

/// The specs found in the spec directories.
#[derive(Debug, Default)]
pub struct Registry {
    dirs: Vec<PathBuf>,
    specs: Vec<Loaded>,
    devices: BTreeMap<CdiDevice, Defined>,
    /// Devices defined twice at the same priority: the two files.
    conflicts: BTreeMap<CdiDevice, (PathBuf, PathBuf)>,
    problems: Vec<RegistryError>,
}

impl Registry {
    /// Loads every spec file under `dirs` (lowest priority first; a
    /// directory that does not exist is skipped).
    pub fn load<P: AsRef<Path>>(dirs: &[P]) -> Registry {
        let mut reg = Registry {
            dirs: dirs.iter().map(|d| d.as_ref().to_path_buf()).collect(),
            ..Registry::default()
        };
        for (priority, dir) in dirs.iter().enumerate() {
            let dir = dir.as_ref();
            let files = match spec_files(dir) {
                Ok(files) => files,
                Err(e) => {
                    reg.problems.push(e);
                    continue;
                }
            };
            for path in files {
                let loaded = Spec::read(&path).and_then(|spec| {
                    let kind = validate(&spec, &path)?;
                    Ok(Loaded { path, kind, spec })
                });
                match loaded {
                    Ok(l) => reg.add(l, priority),
                    Err(e) => {
                        tracing::warn!(error = %e, "CDI spec left out");
                        reg.problems.push(e.into());
                    }
                }
            }
        }
        reg
    }

    /// The default directories' specs.
    pub fn load_default() -> Registry {
        Registry::load(&DEFAULT_SPEC_DIRS)
    }

    fn add(&mut self, loaded: Loaded, priority: usize) {
        let index = self.specs.len();
        for (i, d) in loaded.spec.devices.iter().enumerate() {
            // Validated: the name is a CDI device name.
            let Ok(name) = CdiDevice::new(loaded.kind.clone(), &d.name) else {
                continue;
            };
            if let Some((first, _)) = self.conflicts.get(&name) {
                tracing::debug!(device = %name, first = %first.display(), "conflicting CDI device");
                continue;
            }
            let here = Defined {
                spec: index,
                device: i,
                priority,
            };
            match self.devices.get(&name).copied() {
                Some(old) if old.priority == priority => {
                    self.devices.remove(&name);
                    self.conflicts.insert(
                        name,
                        (self.specs[old.spec].path.clone(), loaded.path.clone()),
                    );
                }
                _ => {
                    self.devices.insert(name, here);
                }
            }
        }
        self.specs.push(loaded);
    }

    /// Files that could not be loaded, and unreadable directories.
    pub fn problems(&self) -> &[RegistryError] {
        &self.problems
    }

    /// Every device that can be asked for, sorted.
    pub fn devices(&self) -> impl Iterator<Item = &CdiDevice> {
        self.devices.keys()
    }

    /// The edits for `wanted`, in order: for each spec, its shared edits
    /// once (before its first device's), then each device's.
    pub fn resolve(&self, wanted: &[CdiDevice]) -> Result<ContainerEdits, RegistryError> {
        let mut out = ContainerEdits::default();
        let mut shared_done: Vec<usize> = Vec::new();
        for device in wanted {
            let d = self.find(device)?;
            let loaded = &self.specs[d.spec];
            if !shared_done.contains(&d.spec) {
                out.append(&loaded.spec.container_edits);
                shared_done.push(d.spec);
            }
            out.append(&loaded.spec.devices[d.device].container_edits);
        }
        Ok(out)
    }

    fn find(&self, device: &CdiDevice) -> Result<Defined, RegistryError> {
        if let Some(d) = self.devices.get(device) {
            return Ok(*d);
        }
        if let Some((first, second)) = self.conflicts.get(device) {
            return Err(RegistryError::Conflict {
                device: device.to_string(),
                first: first.clone(),
                second: second.clone(),
            });
        }
        let kind = device.kind();
        let of_kind: Vec<&Loaded> = self.specs.iter().filter(|s| &s.kind == kind).collect();
        if of_kind.is_empty() {
            let mut kinds: Vec<String> = self.specs.iter().map(|s| s.kind.to_string()).collect();
            kinds.sort();
            kinds.dedup();
            return Err(RegistryError::UnknownKind {
                device: device.to_string(),
                kind: kind.to_string(),
                dirs: self.dirs_text(),
                known: list_or_none(kinds),
                problems: self.problems_text(),
            });
        }
        let known: Vec<String> = self
            .devices
            .keys()
            .filter(|d| d.kind() == kind)
            .map(|d| d.name().to_string())
            .collect();
        let files: Vec<String> = of_kind
            .iter()
            .map(|s| s.path.display().to_string())
            .collect();
        Err(RegistryError::UnknownDevice {
            device: device.to_string(),
            kind: kind.to_string(),
            files: files.join(", "),
            known: list_or_none(known),
            problems: self.problems_text(),
        })
    }

    fn dirs_text(&self) -> String {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        dirs.join(", ")
    }

    /// `"; N spec files left out: …"` when there are problems.
    fn problems_text(&self) -> String {
        if self.problems.is_empty() {
            return String::new();
        }
        let all: Vec<String> = self.problems.iter().map(|p| p.to_string()).collect();
        format!(
            "; {} spec file(s) or directories left out: {}",
            all.len(),
            all.join("; ")
        )
    }
}

fn list_or_none(v: Vec<String>) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

/// The spec files directly in `dir`, sorted by name; none when `dir`
/// does not exist.
fn spec_files(dir: &Path) -> Result<Vec<PathBuf>, RegistryError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RegistryError::ReadDir {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RegistryError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        // Symlinks are followed; directories and other files are not specs.
        if Format::of(&path).is_some() && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str, devices: &[(&str, &str)], shared_env: &str) -> String {
        let mut s = format!(
            "cdiVersion: 0.5.0\nkind: {kind}\ncontainerEdits:\n  env: [\"{shared_env}\"]\ndevices:\n"
        );
        for (name, node) in devices {
            s.push_str(&format!(
                "  - name: \"{name}\"\n    containerEdits:\n      deviceNodes:\n        - path: {node}\n"
            ));
        }
        s
    }

    fn dev(s: &str) -> CdiDevice {
        s.parse().unwrap()
    }

    #[test]
    fn devices_resolve_to_shared_then_device_edits() {
        let tmp = tempfile::tempdir().unwrap();
        let etc = tmp.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(
            etc.join("gpu.yaml"),
            spec(
                "example.com/gpu",
                &[("0", "/dev/g0"), ("1", "/dev/g1")],
                "SHARED=1",
            ),
        )
        .unwrap();
        std::fs::write(
            etc.join("fpga.yml"),
            spec("example.com/fpga", &[("a", "/dev/f0")], "FPGA=1"),
        )
        .unwrap();
        std::fs::write(etc.join("README.txt"), "not a spec").unwrap();
        let reg = Registry::load(&[&etc, &tmp.path().join("missing")]);
        assert!(reg.problems().is_empty(), "{:?}", reg.problems());
        let all: Vec<String> = reg.devices().map(|d| d.to_string()).collect();
        assert_eq!(
            all,
            [
                "example.com/fpga=a",
                "example.com/gpu=0",
                "example.com/gpu=1"
            ]
        );
        let edits = reg
            .resolve(&[
                dev("example.com/gpu=1"),
                dev("example.com/fpga=a"),
                dev("example.com/gpu=0"),
            ])
            .unwrap();
        // Each spec's shared edits once.
        assert_eq!(edits.env, ["SHARED=1", "FPGA=1"]);
        let nodes: Vec<String> = edits
            .device_nodes
            .iter()
            .map(|n| n.path.display().to_string())
            .collect();
        assert_eq!(nodes, ["/dev/g1", "/dev/f0", "/dev/g0"]);
    }

    #[test]
    fn unknown_devices_and_kinds_list_what_there_is() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("gpu.json"),
            serde_json::to_string(
                &Spec::parse(
                    spec(
                        "example.com/gpu",
                        &[("0", "/dev/g0"), ("all", "/dev/g0")],
                        "A=1",
                    )
                    .as_bytes(),
                    Format::Yaml,
                    Path::new("x"),
                )
                .unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let reg = Registry::load(&[tmp.path()]);
        let e = reg
            .resolve(&[dev("example.com/gpu=7")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`example.com/gpu=7` is not defined"), "{e}");
        assert!(e.contains("gpu.json"), "{e}");
        assert!(
            e.contains("devices of kind `example.com/gpu`: 0, all"),
            "{e}"
        );
        let e = reg
            .resolve(&[dev("other.com/gpu=0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no CDI spec has kind `other.com/gpu`") && e.contains("example.com/gpu"),
            "{e}"
        );
    }

    #[test]
    fn bad_files_are_left_out_and_named_when_a_device_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("good.yaml"),
            spec("example.com/gpu", &[("0", "/dev/g0")], "A=1"),
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("old.yaml"),
            spec("example.com/gpu", &[("1", "/dev/g1")], "A=1").replace("0.5.0", "0.3.0"),
        )
        .unwrap();
        std::fs::write(tmp.path().join("junk.json"), "{not json").unwrap();
        let reg = Registry::load(&[tmp.path()]);
        assert_eq!(reg.problems().len(), 2, "{:?}", reg.problems());
        reg.resolve(&[dev("example.com/gpu=0")]).unwrap();
        let e = reg
            .resolve(&[dev("example.com/gpu=1")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("left out"), "{e}");
        assert!(
            e.contains("old.yaml") && e.contains("needs at least 0.5.0"),
            "{e}"
        );
        assert!(e.contains("junk.json"), "{e}");
    }

    #[test]
    fn later_directories_override_and_same_directory_twins_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let (etc, run) = (tmp.path().join("etc"), tmp.path().join("run"));
        std::fs::create_dir(&etc).unwrap();
        std::fs::create_dir(&run).unwrap();
        std::fs::write(
            etc.join("a.yaml"),
            spec(
                "example.com/gpu",
                &[("0", "/dev/static0"), ("1", "/dev/a1")],
                "A=1",
            ),
        )
        .unwrap();
        std::fs::write(
            run.join("b.yaml"),
            spec("example.com/gpu", &[("0", "/dev/dynamic0")], "B=1"),
        )
        .unwrap();
        let reg = Registry::load(&[&etc, &run]);
        let e = reg.resolve(&[dev("example.com/gpu=0")]).unwrap();
        assert_eq!(e.device_nodes[0].path, Path::new("/dev/dynamic0"));
        assert_eq!(e.env, ["B=1"]);
        std::fs::write(
            etc.join("c.yaml"),
            spec("example.com/gpu", &[("1", "/dev/c1")], "C=1"),
        )
        .unwrap();
        let reg = Registry::load(&[&etc, &run]);
        let e = reg
            .resolve(&[dev("example.com/gpu=1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.yaml") && e.contains("c.yaml") && e.contains("neither is used"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_directory_is_a_problem() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        let reg = Registry::load(&[&file]);
        assert_eq!(reg.problems().len(), 1);
        assert!(reg.problems()[0].to_string().contains("cannot list"));
    }
}
