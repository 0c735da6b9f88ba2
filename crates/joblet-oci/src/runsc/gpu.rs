//! The runsc global flags a GPU job needs: [`gpu_args`], a pure decision.
//!
//! Joblet passes a GPU job's `NVIDIA_DRIVER_CAPABILITIES` to runsc as
//! `--nvproxy-allowed-driver-capabilities`, so nvproxy allows exactly what the
//! job asked for and no more. Names are those of the NVIDIA container toolkit
//! (which nvproxy parses case-sensitively) plus `all`, passed through as `all`
//! for runsc to resolve to what its release supports. gVisor's privileged
//! capabilities (`profiling`, `fabric-imex-mgmt`, `gpudirect-storage`) are an
//! operator's decision, never a job's, so a job naming one is refused. Whether
//! a given release supports `graphics` or `video` is for runsc to say when it
//! creates the sandbox; its own error names the flag.

use super::caps::{parse_caps, Caps, DEFAULT_CAPS};
use super::{
    DriverVersion, RunscFeatures, FLAG_NVPROXY, FLAG_NVPROXY_ALLOWED_CAPS, NVPROXY_FIRST_RELEASE,
};

/// What a job's GPU setup asks of runsc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuRequest {
    /// The host's NVIDIA driver version (e.g. `550.54.15`); `None` when unknown.
    pub host_driver: Option<String>,
    /// The job's `NVIDIA_DRIVER_CAPABILITIES` (e.g. `compute,utility` or `all`).
    pub driver_capabilities: Option<String>,
    /// Whether the job's OCI spec carries NVIDIA GPUs (see [`super::detect_gpu`]).
    pub gpu_in_spec: bool,
}

/// Why runsc cannot run a GPU job, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuRefusal {
    /// This runsc predates nvproxy.
    #[error(
        "GPU job refused: runsc {release} has no nvproxy (gVisor's GPU support, first shipped in \
         {first}); install a newer runsc from gVisor's releases or use the runc/crun/native executor"
    )]
    NvproxyMissing {
        /// The installed release.
        release: String,
        /// [`NVPROXY_FIRST_RELEASE`].
        first: &'static str,
    },
    /// This runsc has nvproxy but cannot say which drivers it supports.
    #[error(
        "GPU job refused: runsc {release} cannot list the NVIDIA drivers its nvproxy supports \
         (`runsc nvproxy list-supported-drivers` is missing or failed), so the host driver cannot be \
         checked; install a newer runsc from gVisor's releases or use the runc/crun/native executor"
    )]
    DriverListUnavailable {
        /// The installed release.
        release: String,
    },
    /// The host driver version is not known.
    #[error(
        "GPU job refused: the host's NVIDIA driver version is unknown, so it cannot be checked \
         against the drivers runsc {release}'s nvproxy supports ({supported}); make the node report \
         its driver version (NVML) or use the runc/crun/native executor"
    )]
    HostDriverUnknown {
        /// The installed release.
        release: String,
        /// A few supported versions, comma-separated.
        supported: String,
    },
    /// The host driver version is not three numbers.
    #[error(
        "GPU job refused: host NVIDIA driver version {driver:?} is not of the form MAJOR.MINOR.PATCH, \
         so runsc {release}'s nvproxy cannot support it ({supported}); use the runc/crun/native executor"
    )]
    InvalidHostDriver {
        /// The version as reported.
        driver: String,
        /// The installed release.
        release: String,
        /// A few supported versions, comma-separated.
        supported: String,
    },
    /// The host driver is not one this runsc's nvproxy supports.
    #[error(
        "GPU job refused: host NVIDIA driver {driver} is not supported by runsc {release}'s nvproxy \
         (it supports {supported}); install a supported driver, or a runsc release that supports \
         {driver}, or use the runc/crun/native executor (Joblet never runs nvproxy on an \
         unsupported driver)"
    )]
    UnsupportedDriver {
        /// The host driver.
        driver: String,
        /// The installed release.
        release: String,
        /// A few supported versions (the host's branch first), comma-separated.
        supported: String,
    },
    /// `NVIDIA_DRIVER_CAPABILITIES` names something that is no capability.
    #[error(
        "GPU job refused: NVIDIA_DRIVER_CAPABILITIES={value:?} names {capability:?}, which is not an \
         NVIDIA driver capability; use a comma-separated list of {known} or `all`"
    )]
    UnknownCapability {
        /// The unknown name.
        capability: String,
        /// The whole value.
        value: String,
        /// The names Joblet accepts.
        known: String,
    },
    /// `NVIDIA_DRIVER_CAPABILITIES` names one of gVisor's privileged capabilities.
    #[error(
        "GPU job refused: NVIDIA_DRIVER_CAPABILITIES names {capability:?}, a privileged nvproxy \
         capability that a job cannot grant itself; drop it from the job (an operator can allow it \
         in runsc's own configuration)"
    )]
    PrivilegedCapability {
        /// The privileged name.
        capability: String,
    },
    /// Capabilities beyond compute and utility, on a runsc that cannot be told to allow them.
    #[error(
        "GPU job refused: the job asks for NVIDIA driver capabilities {requested:?}, but runsc \
         {release} has no --{flag} and its nvproxy offers compute and utility only; ask for \
         compute,utility, install a newer runsc, or use the runc/crun/native executor"
    )]
    CapabilitiesFlagMissing {
        /// What the job asked for, normalised.
        requested: String,
        /// The installed release.
        release: String,
        /// [`FLAG_NVPROXY_ALLOWED_CAPS`].
        flag: &'static str,
    },
}

/// How many supported versions a refusal names.
const SAMPLE: usize = 5;

/// The global flags a GPU job needs on this runsc: none for a job without
/// GPUs; otherwise `--nvproxy=true` where the binary accepts it, and
/// `--nvproxy-allowed-driver-capabilities=<caps>` where the job names
/// capabilities. Refuses when the runsc has no nvproxy, cannot list its
/// drivers, or does not support the host driver. Never produces
/// `--nvproxy-allow-unsupported-driver`.
pub fn gpu_args(features: &RunscFeatures, req: &GpuRequest) -> Result<Vec<String>, GpuRefusal> {
    if !req.gpu_in_spec {
        return Ok(Vec::new());
    }
    let release = features.release.raw.clone();
    if !features.has_nvproxy() {
        return Err(GpuRefusal::NvproxyMissing {
            release,
            first: NVPROXY_FIRST_RELEASE,
        });
    }
    let Some(supported) = features.supported_drivers.as_deref() else {
        return Err(GpuRefusal::DriverListUnavailable { release });
    };
    check_driver(supported, req.host_driver.as_deref(), &release)?;
    let caps = req
        .driver_capabilities
        .as_deref()
        .map(parse_caps)
        .transpose()?
        .flatten();

    let mut args = Vec::new();
    if features.has_nvproxy_flag() {
        args.push(format!("--{FLAG_NVPROXY}=true"));
    }
    match caps {
        None => {}
        Some(caps) if features.has_nvproxy_allowed_driver_capabilities() => {
            args.push(format!(
                "--{FLAG_NVPROXY_ALLOWED_CAPS}={}",
                caps.flag_value()
            ));
        }
        // Without the flag nvproxy allows its default set: fine for `all`
        // and for names within it.
        Some(Caps::All) => {}
        Some(Caps::Named(names)) if names.iter().all(|n| DEFAULT_CAPS.contains(n)) => {}
        Some(Caps::Named(names)) => {
            return Err(GpuRefusal::CapabilitiesFlagMissing {
                requested: names.join(","),
                release,
                flag: FLAG_NVPROXY_ALLOWED_CAPS,
            });
        }
    }
    Ok(args)
}

fn check_driver(
    supported: &[DriverVersion],
    host: Option<&str>,
    release: &str,
) -> Result<(), GpuRefusal> {
    let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
        return Err(GpuRefusal::HostDriverUnknown {
            release: release.to_owned(),
            supported: sample(supported, None),
        });
    };
    let Ok(version) = host.parse::<DriverVersion>() else {
        return Err(GpuRefusal::InvalidHostDriver {
            driver: host.to_owned(),
            release: release.to_owned(),
            supported: sample(supported, None),
        });
    };
    if supported.contains(&version) {
        return Ok(());
    }
    Err(GpuRefusal::UnsupportedDriver {
        driver: host.to_owned(),
        release: release.to_owned(),
        supported: sample(supported, Some(version.major)),
    })
}

/// Up to [`SAMPLE`] supported versions, newest first: those of the host's
/// branch when there are any, else the newest overall.
fn sample(supported: &[DriverVersion], branch: Option<u32>) -> String {
    let same: Vec<&DriverVersion> = supported
        .iter()
        .rev()
        .filter(|v| Some(v.major) == branch)
        .collect();
    let pool: Vec<&DriverVersion> = if same.is_empty() {
        supported.iter().rev().collect()
    } else {
        same
    };
    if pool.is_empty() {
        return "no driver at all".to_owned();
    }
    let mut text = pool
        .iter()
        .take(SAMPLE)
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if pool.len() > SAMPLE {
        text.push_str(&format!(" and {} more", pool.len() - SAMPLE));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::runsc::RunscRelease;

    fn runsc(flags: &[&str], subcommands: &[&str], drivers: Option<&[&str]>) -> RunscFeatures {
        RunscFeatures {
            release: RunscRelease::parse("release-20260831.0"),
            oci_spec: Some("1.2.1".to_owned()),
            subcommands: subcommands.iter().map(|s| s.to_string()).collect(),
            global_flags: flags.iter().map(|s| s.to_string()).collect(),
            platforms: BTreeSet::new(),
            supported_drivers: drivers.map(|d| d.iter().map(|v| v.parse().unwrap()).collect()),
        }
    }

    fn newer() -> RunscFeatures {
        runsc(
            &[
                "nvproxy",
                "nvproxy-driver-version",
                "nvproxy-allowed-driver-capabilities",
                "platform",
            ],
            &["run", "nvproxy"],
            Some(&["535.104.05", "535.129.03", "550.54.15", "550.90.07"]),
        )
    }

    fn debian() -> RunscFeatures {
        let mut f = runsc(&["platform", "network"], &["run"], None);
        f.release = RunscRelease::parse("0.0~20221219.0");
        f
    }

    fn gpu(driver: Option<&str>, caps: Option<&str>) -> GpuRequest {
        GpuRequest {
            host_driver: driver.map(str::to_owned),
            driver_capabilities: caps.map(str::to_owned),
            gpu_in_spec: true,
        }
    }

    #[test]
    fn no_gpu_needs_no_flags_even_on_an_old_runsc() {
        let req = GpuRequest {
            gpu_in_spec: false,
            ..gpu(None, Some("bogus"))
        };
        assert_eq!(gpu_args(&debian(), &req), Ok(vec![]));
    }

    #[test]
    fn runsc_without_nvproxy_is_refused_naming_release_and_first_nvproxy_release() {
        let err = gpu_args(&debian(), &gpu(Some("550.54.15"), None)).unwrap_err();
        assert!(matches!(err, GpuRefusal::NvproxyMissing { .. }));
        let msg = err.to_string();
        for part in [
            "0.0~20221219.0",
            "nvproxy",
            "release-20230529.0",
            "runc/crun/native",
        ] {
            assert!(msg.contains(part), "{msg}");
        }
    }

    #[test]
    fn supported_driver_gets_nvproxy_and_capabilities() {
        let args = gpu_args(&newer(), &gpu(Some("550.54.15"), Some("compute,utility"))).unwrap();
        assert_eq!(
            args,
            [
                "--nvproxy=true",
                "--nvproxy-allowed-driver-capabilities=compute,utility"
            ]
        );
        let args = gpu_args(&newer(), &gpu(Some(" 535.104.5 "), None)).unwrap();
        assert_eq!(args, ["--nvproxy=true"]);
    }

    #[test]
    fn all_is_passed_as_all_and_names_are_deduplicated() {
        let args = gpu_args(&newer(), &gpu(Some("550.54.15"), Some("utility, all"))).unwrap();
        assert_eq!(args[1], "--nvproxy-allowed-driver-capabilities=all");
        let args = gpu_args(
            &newer(),
            &gpu(Some("550.54.15"), Some("video,compute,video,,")),
        )
        .unwrap();
        assert_eq!(
            args[1],
            "--nvproxy-allowed-driver-capabilities=video,compute"
        );
        let args = gpu_args(&newer(), &gpu(Some("550.54.15"), Some(" , "))).unwrap();
        assert_eq!(args, ["--nvproxy=true"]);
    }

    #[test]
    fn nvproxy_switch_is_left_out_where_the_flag_is_gone() {
        let mut f = newer();
        f.global_flags.remove("nvproxy");
        assert!(f.has_nvproxy());
        let args = gpu_args(&f, &gpu(Some("550.54.15"), Some("compute"))).unwrap();
        assert_eq!(args, ["--nvproxy-allowed-driver-capabilities=compute"]);
    }

    #[test]
    fn unknown_and_unsupported_drivers_are_refused_with_a_sample() {
        let err = gpu_args(&newer(), &gpu(None, None)).unwrap_err();
        assert!(matches!(err, GpuRefusal::HostDriverUnknown { .. }));
        assert!(err.to_string().contains("550.90.07"), "{err}");

        let err = gpu_args(&newer(), &gpu(Some("550.54.14"), None)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, GpuRefusal::UnsupportedDriver { .. }));
        assert!(
            msg.contains("550.54.14") && msg.contains("550.90.07, 550.54.15"),
            "{msg}"
        );
        assert!(
            !msg.contains("535."),
            "the host's branch comes first: {msg}"
        );
        assert!(!msg.contains("--nvproxy-allow-unsupported-driver"), "{msg}");

        let err = gpu_args(&newer(), &gpu(Some("590.48.01"), None)).unwrap_err();
        assert!(
            err.to_string()
                .contains("550.90.07, 550.54.15, 535.129.03, 535.104.05"),
            "{err}"
        );

        let err = gpu_args(&newer(), &gpu(Some("550.54"), None)).unwrap_err();
        assert!(matches!(err, GpuRefusal::InvalidHostDriver { .. }), "{err}");
    }

    #[test]
    fn long_supported_lists_are_cut_short() {
        let drivers: Vec<String> = (1..=9).map(|p| format!("570.{p}.01")).collect();
        let refs: Vec<&str> = drivers.iter().map(String::as_str).collect();
        let f = runsc(&["nvproxy"], &["nvproxy"], Some(&refs));
        let msg = gpu_args(&f, &gpu(Some("570.10.01"), None))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("570.09.01, 570.08.01, 570.07.01, 570.06.01, 570.05.01 and 4 more"),
            "{msg}"
        );
    }

    #[test]
    fn nvproxy_without_a_driver_list_is_refused() {
        let f = runsc(&["nvproxy"], &["run"], None);
        let err = gpu_args(&f, &gpu(Some("525.60.13"), None)).unwrap_err();
        assert!(matches!(err, GpuRefusal::DriverListUnavailable { .. }));
        assert!(err.to_string().contains("list-supported-drivers"), "{err}");
    }

    #[test]
    fn bad_capabilities_are_refused_by_name() {
        let err = gpu_args(&newer(), &gpu(Some("550.54.15"), Some("compute,Utility"))).unwrap_err();
        assert!(
            matches!(&err, GpuRefusal::UnknownCapability { capability, .. } if capability == "Utility")
        );
        assert!(err
            .to_string()
            .contains("compute, compat32, display, graphics, ngx, utility, video"));

        let err = gpu_args(&newer(), &gpu(Some("550.54.15"), Some("all,profiling"))).unwrap_err();
        assert_eq!(
            err,
            GpuRefusal::PrivilegedCapability {
                capability: "profiling".to_owned()
            }
        );
    }

    #[test]
    fn without_the_capabilities_flag_only_the_default_set_is_possible() {
        let f = runsc(&["nvproxy"], &["nvproxy"], Some(&["525.60.13"]));
        assert_eq!(
            gpu_args(&f, &gpu(Some("525.60.13"), Some("utility,compute"))).unwrap(),
            ["--nvproxy=true"]
        );
        assert_eq!(
            gpu_args(&f, &gpu(Some("525.60.13"), Some("all"))).unwrap(),
            ["--nvproxy=true"]
        );
        let err = gpu_args(&f, &gpu(Some("525.60.13"), Some("compute,graphics"))).unwrap_err();
        assert!(
            matches!(&err, GpuRefusal::CapabilitiesFlagMissing { requested, .. } if requested == "compute,graphics")
        );
        assert!(
            err.to_string()
                .contains("--nvproxy-allowed-driver-capabilities"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_driver_list_refuses_every_driver() {
        let f = runsc(&["nvproxy"], &["nvproxy"], Some(&[]));
        let err = gpu_args(&f, &gpu(Some("550.54.15"), None)).unwrap_err();
        assert!(
            err.to_string().contains("it supports no driver at all"),
            "{err}"
        );
    }
}
