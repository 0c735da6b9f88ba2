//! What an installed gVisor `runsc` can do for GPU jobs, and the runsc flags
//! a GPU job needs.
//!
//! Three layers, pure where they can be:
//! - [`RunscFeatures`]: what one binary supports (its release, the global
//!   flags it accepts, its platforms, nvproxy and the NVIDIA drivers nvproxy
//!   supports), parsed from the text that `runsc --version`, `runsc help`,
//!   `runsc flags`, `runsc help platforms` and
//!   `runsc nvproxy list-supported-drivers` print ([`RunscFeatures::from_outputs`]).
//!   [`RunscFeatures::probe`] is the only function here that runs anything.
//! - [`gpu_args`]: the global flags a GPU job needs on that binary, or a
//!   [`GpuRefusal`] saying what is missing and what to do. It never asks runsc
//!   to accept a driver its nvproxy does not support.
//! - [`choose_platform`] picks the sandbox platform; [`detect_gpu`] tells
//!   whether an OCI spec asks for NVIDIA GPUs.
//!
//! Facts this relies on (gVisor's source, `runsc/config/flags.go`,
//! `runsc/cmd/nvproxy/`, `pkg/sentry/devices/nvproxy/nvconf/`):
//! - nvproxy first shipped in release-20230529.0 as `--nvproxy`; newer
//!   releases turn GPU support on by themselves when NVIDIA devices are in the
//!   spec and keep `--nvproxy` as an accepted "LEGACY" flag.
//! - `--version` prints `runsc version <release>` and `spec: <oci version>`;
//!   `flags` prints Go's flag defaults (Debian's 20221219 prints them on stderr);
//!   `help platforms` prints one platform per line, in no fixed order;
//!   `nvproxy list-supported-drivers` prints one `MAJOR.MM.PP` per line.
//! - Debian's runsc 0.0~20221219.0 has platforms ptrace and kvm only, no
//!   systrap and no nvproxy.
//!
//! Features are detected from what the binary lists, never from its release
//! date, so a distribution build with patches is judged by what it has.
//!
//! Must not depend on: the daemon, the scheduler, NVML.

mod caps;
mod detect;
mod gpu;
mod parse;
mod platform;
pub(crate) mod probe;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

pub use detect::detect_gpu;
pub use gpu::{gpu_args, GpuRefusal, GpuRequest};
pub use parse::{ParseError, ProbeOutputs};
pub use platform::{choose_platform, PlatformError};
pub use probe::{RunscError, DEFAULT_PROBE_TIMEOUT};

/// The first gVisor release with nvproxy (`--nvproxy`).
pub const NVPROXY_FIRST_RELEASE: &str = "release-20230529.0";

/// The global flag that turns nvproxy on (auto-enabled in newer releases).
pub const FLAG_NVPROXY: &str = "nvproxy";
/// The global flag that pins nvproxy's driver ABI version.
pub const FLAG_NVPROXY_DRIVER_VERSION: &str = "nvproxy-driver-version";
/// The global flag that bounds the NVIDIA driver capabilities a container may ask for.
pub const FLAG_NVPROXY_ALLOWED_CAPS: &str = "nvproxy-allowed-driver-capabilities";

/// What one installed runsc supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunscFeatures {
    /// The release, from `runsc --version`.
    pub release: RunscRelease,
    /// The OCI runtime-spec version it implements (`spec:` line), if printed.
    pub oci_spec: Option<String>,
    /// Subcommand names listed by `runsc help`.
    pub subcommands: BTreeSet<String>,
    /// Global flag names (without dashes) listed by `runsc flags`.
    pub global_flags: BTreeSet<String>,
    /// Platforms it can run sandboxes on (`runsc help platforms`, or the
    /// `--platform` flag's help text when that topic is missing).
    pub platforms: BTreeSet<String>,
    /// The NVIDIA drivers its nvproxy supports, sorted; `None` when it has no
    /// `nvproxy list-supported-drivers` subcommand or that command failed.
    pub supported_drivers: Option<Vec<DriverVersion>>,
}

impl RunscFeatures {
    /// Whether `runsc flags` lists the global flag `name` (no dashes).
    pub fn has_flag(&self, name: &str) -> bool {
        self.global_flags.contains(name)
    }

    /// Whether this runsc has nvproxy at all: the `--nvproxy` flag, any
    /// `--nvproxy-*` flag, or the `nvproxy` subcommand.
    pub fn has_nvproxy(&self) -> bool {
        self.has_flag(FLAG_NVPROXY)
            || self.global_flags.iter().any(|f| f.starts_with("nvproxy-"))
            || self.subcommands.contains("nvproxy")
    }

    /// Whether it accepts `--nvproxy` (the switch; auto-enabled in newer releases).
    pub fn has_nvproxy_flag(&self) -> bool {
        self.has_flag(FLAG_NVPROXY)
    }

    /// Whether it accepts `--nvproxy-driver-version`.
    pub fn has_nvproxy_driver_version(&self) -> bool {
        self.has_flag(FLAG_NVPROXY_DRIVER_VERSION)
    }

    /// Whether it accepts `--nvproxy-allowed-driver-capabilities`.
    pub fn has_nvproxy_allowed_driver_capabilities(&self) -> bool {
        self.has_flag(FLAG_NVPROXY_ALLOWED_CAPS)
    }

    /// Whether `runsc help` lists the `nvproxy` subcommand, the parent of
    /// `nvproxy list-supported-drivers`.
    pub fn has_list_supported_drivers(&self) -> bool {
        self.subcommands.contains("nvproxy")
    }

    /// Whether it can run sandboxes on `platform`.
    pub fn has_platform(&self, platform: &str) -> bool {
        self.platforms.contains(platform)
    }
}

/// A runsc release as `runsc --version` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunscRelease {
    /// The version exactly as printed: `release-20240513.0` upstream,
    /// `0.0~20221219.0` from Debian, `VERSION_MISSING` from a dev build.
    pub raw: String,
    /// The release date as `YYYYMMDD`, when the version carries one.
    pub date: Option<u32>,
    /// The number after the date (`.0`, `.1`), when present.
    pub build: Option<u32>,
}

impl RunscRelease {
    /// Reads the release date and build number out of a version string.
    pub fn parse(raw: &str) -> RunscRelease {
        let raw = raw.trim().to_owned();
        let (date, build) = find_date(&raw).map_or((None, None), |(d, b)| (Some(d), b));
        RunscRelease { raw, date, build }
    }
}

impl fmt::Display for RunscRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// The first run of exactly eight digits starting `20` (a `YYYYMMDD` date),
/// and the number after a following `.`.
fn find_date(s: &str) -> Option<(u32, Option<u32>)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        if digits.len() == 8 && digits.starts_with("20") {
            let date = digits.parse().ok()?;
            let build = s[i..]
                .strip_prefix('.')
                .map(|rest| {
                    rest.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .and_then(|n| n.parse().ok());
            return Some((date, build));
        }
    }
    None
}

/// An NVIDIA driver version as nvproxy names it: `MAJOR.MINOR.PATCH`,
/// printed as gVisor prints it (`535.104.05`), compared numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion {
    /// The branch, e.g. 535.
    pub major: u32,
    /// e.g. 104.
    pub minor: u32,
    /// e.g. 5 (printed `05`).
    pub patch: u32,
}

/// A driver version that is not three dot-separated numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an NVIDIA driver version of the form MAJOR.MINOR.PATCH (e.g. 550.54.15)")]
pub struct DriverVersionError {
    /// The text that did not parse.
    pub input: String,
}

impl FromStr for DriverVersion {
    type Err = DriverVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || DriverVersionError {
            input: s.to_owned(),
        };
        let mut parts = s.trim().split('.');
        let mut next = || -> Result<u32, DriverVersionError> {
            let p = parts.next().ok_or_else(err)?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            p.parse().map_err(|_| err())
        };
        let version = DriverVersion {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(version)
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}.{:02}.{:02}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_from_debian_upstream_and_dev_builds() {
        let debian = RunscRelease::parse("0.0~20221219.0");
        assert_eq!((debian.date, debian.build), (Some(20221219), Some(0)));
        assert_eq!(debian.to_string(), "0.0~20221219.0");

        let upstream = RunscRelease::parse("release-20240513.2");
        assert_eq!((upstream.date, upstream.build), (Some(20240513), Some(2)));

        let dev = RunscRelease::parse("VERSION_MISSING");
        assert_eq!((dev.date, dev.build), (None, None));
        assert_eq!(dev.raw, "VERSION_MISSING");

        let fedora_git = RunscRelease::parse("20240408.0-1.20240418git9e5a99b");
        assert_eq!(
            (fedora_git.date, fedora_git.build),
            (Some(20240408), Some(0))
        );

        let no_build = RunscRelease::parse("release-20240101");
        assert_eq!((no_build.date, no_build.build), (Some(20240101), None));
    }

    #[test]
    fn driver_versions_parse_print_and_order_numerically() {
        let v: DriverVersion = "535.104.05".parse().unwrap();
        assert_eq!(
            v,
            DriverVersion {
                major: 535,
                minor: 104,
                patch: 5
            }
        );
        assert_eq!(v.to_string(), "535.104.05");
        assert_eq!("535.104.5".parse::<DriverVersion>().unwrap(), v);
        let newer: DriverVersion = "535.129.03".parse().unwrap();
        assert!(newer > v);
        for bad in [
            "",
            "550",
            "550.54",
            "550.54.15.1",
            "550.x.15",
            "550..15",
            "-1.2.3",
        ] {
            assert!(bad.parse::<DriverVersion>().is_err(), "{bad:?} parsed");
        }
    }

    fn features(flags: &[&str], subcommands: &[&str]) -> RunscFeatures {
        RunscFeatures {
            release: RunscRelease::parse("release-20260831.0"),
            oci_spec: None,
            subcommands: subcommands.iter().map(|s| s.to_string()).collect(),
            global_flags: flags.iter().map(|s| s.to_string()).collect(),
            platforms: BTreeSet::new(),
            supported_drivers: None,
        }
    }

    #[test]
    fn nvproxy_is_detected_from_any_of_its_traces() {
        assert!(!features(&["debug", "platform"], &["run"]).has_nvproxy());
        assert!(features(&["nvproxy"], &[]).has_nvproxy());
        assert!(features(&["nvproxy-driver-version"], &[]).has_nvproxy());
        assert!(features(&[], &["nvproxy"]).has_nvproxy());
        let f = features(&["nvproxy-allowed-driver-capabilities"], &["nvproxy"]);
        assert!(f.has_nvproxy_allowed_driver_capabilities());
        assert!(f.has_list_supported_drivers());
        assert!(!f.has_nvproxy_flag());
        assert!(!f.has_nvproxy_driver_version());
    }
}
