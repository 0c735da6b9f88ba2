//! The MIG access capabilities a job on a MIG slice needs: besides its
//! parent's `/dev/nvidiaN`, the driver lets a process use a GPU instance
//! and a compute instance only through their access capability nodes
//! `/dev/nvidia-caps/nvidia-cap<m>` (major: `nvidia-caps` in
//! `/proc/devices`). The minors come from
//! `/proc/driver/nvidia-caps/mig-minors`, one capability per line:
//!
//! ```text
//! config 1
//! monitor 2
//! gpu0/gi1/access 12
//! gpu0/gi1/ci0/access 13
//! ```
//!
//! `gpu<N>` is the GPU's **device minor** (as in `/dev/nvidia<N>`), not
//! its NVML index. The driver lists every possible instance, created or
//! not; `config` and `monitor` (MIG administration and monitoring for
//! every GPU) are never given to a job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the driver lists the capability minors, under the proc root.
pub const MIG_MINORS: &str = "driver/nvidia-caps/mig-minors";
/// Where the capability nodes live, under the device dir.
pub const CAPS_DIR: &str = "nvidia-caps";

/// A MIG slice as a job holds it: which instance of which GPU.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct MigRef {
    /// The parent GPU's `GPU-...` UUID.
    pub parent_uuid: String,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// One access capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cap {
    Gpu { gpu: u32, gi: u32 },
    Compute { gpu: u32, gi: u32, ci: u32 },
}

/// The parsed `mig-minors` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigMinors {
    minors: BTreeMap<Cap, u32>,
    /// The file it came from (for messages).
    path: PathBuf,
}

/// Why the MIG capabilities of a slice cannot be given to a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigCapError {
    #[error(
        "cannot read the MIG capability minors {path}: {reason}; a MIG job needs the nvidia \
         driver's nvidia-caps support (is the driver loaded with MIG enabled? check \
         `nvidia-smi mig -lgi`)"
    )]
    Read { path: PathBuf, reason: String },
    #[error(
        "{path} line {line} `{text}`: expected `config M`, `monitor M`, `gpuN/giN/access M` or \
         `gpuN/giN/ciN/access M` with decimal numbers"
    )]
    Parse {
        path: PathBuf,
        line: usize,
        text: String,
    },
    #[error(
        "{path} has no `{cap}` line: the driver knows no such MIG instance; the MIG layout may \
         have changed since the daemon started (restart it after `nvidia-smi mig` changes)"
    )]
    Missing { path: PathBuf, cap: String },
}

impl MigMinors {
    /// Reads `<proc_root>/driver/nvidia-caps/mig-minors`.
    pub fn read(proc_root: &Path) -> Result<MigMinors, MigCapError> {
        let path = proc_root.join(MIG_MINORS);
        let text = std::fs::read_to_string(&path).map_err(|e| MigCapError::Read {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        MigMinors::parse(&text, &path)
    }

    /// Parses the file's text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<MigMinors, MigCapError> {
        let mut minors = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let bad = || MigCapError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                text: line.to_string(),
            };
            let (name, minor) = line.split_once(char::is_whitespace).ok_or_else(bad)?;
            let minor: u32 = number(minor.trim()).ok_or_else(bad)?;
            if matches!(name, "config" | "monitor") {
                continue;
            }
            let cap = parse_cap(name).ok_or_else(bad)?;
            minors.insert(cap, minor);
        }
        Ok(MigMinors {
            minors,
            path: path.to_path_buf(),
        })
    }

    /// The minors of the GPU-instance and compute-instance access
    /// capabilities of instance `gi`/`ci` on the GPU with device minor
    /// `gpu_minor`, in that order.
    pub fn slice(&self, gpu_minor: u32, gi: u32, ci: u32) -> Result<[u32; 2], MigCapError> {
        let get = |cap: Cap, name: String| {
            self.minors
                .get(&cap)
                .copied()
                .ok_or_else(|| MigCapError::Missing {
                    path: self.path.clone(),
                    cap: name,
                })
        };
        Ok([
            get(
                Cap::Gpu { gpu: gpu_minor, gi },
                format!("gpu{gpu_minor}/gi{gi}/access"),
            )?,
            get(
                Cap::Compute {
                    gpu: gpu_minor,
                    gi,
                    ci,
                },
                format!("gpu{gpu_minor}/gi{gi}/ci{ci}/access"),
            )?,
        ])
    }
}

/// The node of capability minor `m` under `dev_dir`.
pub fn cap_node(dev_dir: &Path, minor: u32) -> PathBuf {
    dev_dir.join(CAPS_DIR).join(format!("nvidia-cap{minor}"))
}

/// A decimal number without sign or padding tricks (`0`, `12`).
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `gpuN/giN/access` or `gpuN/giN/ciN/access`.
fn parse_cap(name: &str) -> Option<Cap> {
    let parts: Vec<&str> = name.split('/').collect();
    let field = |part: &str, prefix: &str| number(part.strip_prefix(prefix)?);
    match parts[..] {
        [gpu, gi, "access"] => Some(Cap::Gpu {
            gpu: field(gpu, "gpu")?,
            gi: field(gi, "gi")?,
        }),
        [gpu, gi, ci, "access"] => Some(Cap::Compute {
            gpu: field(gpu, "gpu")?,
            gi: field(gi, "gi")?,
            ci: field(ci, "ci")?,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n\
                          gpu1/gi3/access 30\ngpu1/gi3/ci0/access 31\ngpu1/gi3/ci1/access 32\n";

    fn parse(text: &str) -> Result<MigMinors, MigCapError> {
        MigMinors::parse(text, Path::new("/proc/driver/nvidia-caps/mig-minors"))
    }

    #[test]
    fn slices_get_their_gi_and_ci_minors_by_device_minor() {
        let m = parse(SAMPLE).unwrap();
        assert_eq!(m.slice(0, 1, 0).unwrap(), [12, 13]);
        assert_eq!(m.slice(1, 3, 0).unwrap(), [30, 31]);
        assert_eq!(m.slice(1, 3, 1).unwrap(), [30, 32]);
        let e = m.slice(1, 4, 0).unwrap_err().to_string();
        assert!(e.contains("no `gpu1/gi4/access` line"), "{e}");
        let e = m.slice(0, 1, 5).unwrap_err().to_string();
        assert!(e.contains("`gpu0/gi1/ci5/access`"), "{e}");
        assert_eq!(
            cap_node(Path::new("/dev"), 31),
            Path::new("/dev/nvidia-caps/nvidia-cap31")
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        for bad in [
            "gpu0/gi1/access",
            "gpu0/gi1/access x",
            "gpu0/gi1/access -1",
            "gpu0/gi/access 3",
            "gpuX/gi1/access 3",
            "gpu0/gi1/ci0 3",
            "gpu0/gi1/ci0/ci1/access 3",
            "something 4",
        ] {
            let e = parse(&format!("config 1\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("line 2"), "{bad}: {e}");
            assert!(e.contains("gpuN/giN/ciN/access M"), "{bad}: {e}");
        }
        let e = MigMinors::read(Path::new("/nonexistent-proc")).unwrap_err();
        assert!(e
            .to_string()
            .contains("/nonexistent-proc/driver/nvidia-caps/mig-minors"));
    }

    proptest! {
        /// Every line written in the driver's form is read back.
        #[test]
        fn written_minors_read_back(
            entries in proptest::collection::btree_map((0u32..8, 0u32..15, 0u32..8), 0u32..5000, 0..20)
        ) {
            let mut text = String::from("config 1\nmonitor 2\n");
            for ((gpu, gi, ci), m) in &entries {
                text.push_str(&format!("gpu{gpu}/gi{gi}/access {}\n", m + 10_000));
                text.push_str(&format!("gpu{gpu}/gi{gi}/ci{ci}/access {m}\n"));
            }
            let parsed = parse(&text).unwrap();
            for ((gpu, gi, ci), m) in &entries {
                let [g, c] = parsed.slice(*gpu, *gi, *ci).unwrap();
                prop_assert_eq!(c, *m);
                prop_assert!(g >= 10_000);
            }
        }

        #[test]
        fn random_text_never_panics(text in ".{0,200}") {
            let _ = parse(&text);
        }
    }
}
