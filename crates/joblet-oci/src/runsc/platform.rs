//! Which sandbox platform to run runsc on: [`choose_platform`], a pure decision.

use super::RunscFeatures;

/// A platform this runsc cannot provide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    /// The configured platform is not one the binary has.
    #[error(
        "runsc {release} has no platform {platform:?}; it has {available}: configure one of those \
         for the runsc executor, or leave the platform unset"
    )]
    NotAvailable {
        /// The configured platform.
        platform: String,
        /// The installed release.
        release: String,
        /// The platforms it has, comma-separated.
        available: String,
    },
    /// Nothing configured, and neither default is available.
    #[error(
        "runsc {release} has neither the systrap nor the ptrace platform (it has {available}); \
         configure one of those for the runsc executor"
    )]
    NoDefault {
        /// The installed release.
        release: String,
        /// The platforms it has, comma-separated.
        available: String,
    },
}

/// The configured platform when the binary has it; unset: `systrap` where
/// available (gVisor's default in newer releases), else `ptrace`.
pub fn choose_platform(
    features: &RunscFeatures,
    configured: Option<&str>,
) -> Result<String, PlatformError> {
    let available = || {
        if features.platforms.is_empty() {
            "no platform listed".to_owned()
        } else {
            features
                .platforms
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    match configured {
        Some(platform) if features.has_platform(platform) => Ok(platform.to_owned()),
        Some(platform) => Err(PlatformError::NotAvailable {
            platform: platform.to_owned(),
            release: features.release.raw.clone(),
            available: available(),
        }),
        None => ["systrap", "ptrace"]
            .into_iter()
            .find(|p| features.has_platform(p))
            .map(str::to_owned)
            .ok_or_else(|| PlatformError::NoDefault {
                release: features.release.raw.clone(),
                available: available(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::runsc::RunscRelease;

    fn with_platforms(platforms: &[&str]) -> RunscFeatures {
        RunscFeatures {
            release: RunscRelease::parse("0.0~20221219.0"),
            oci_spec: None,
            subcommands: BTreeSet::new(),
            global_flags: BTreeSet::new(),
            platforms: platforms.iter().map(|s| s.to_string()).collect(),
            supported_drivers: None,
        }
    }

    #[test]
    fn unset_prefers_systrap_then_ptrace() {
        assert_eq!(
            choose_platform(&with_platforms(&["kvm", "ptrace", "systrap"]), None).unwrap(),
            "systrap"
        );
        assert_eq!(
            choose_platform(&with_platforms(&["kvm", "ptrace"]), None).unwrap(),
            "ptrace"
        );
    }

    #[test]
    fn unset_without_either_default_is_an_error() {
        let err = choose_platform(&with_platforms(&["kvm"]), None).unwrap_err();
        assert!(matches!(err, PlatformError::NoDefault { .. }));
        assert!(err.to_string().contains("it has kvm"), "{err}");
        let err = choose_platform(&with_platforms(&[]), None).unwrap_err();
        assert!(err.to_string().contains("no platform listed"), "{err}");
    }

    #[test]
    fn configured_platform_must_exist() {
        let debian = with_platforms(&["kvm", "ptrace"]);
        assert_eq!(choose_platform(&debian, Some("kvm")).unwrap(), "kvm");
        let err = choose_platform(&debian, Some("systrap")).unwrap_err();
        assert_eq!(
            err,
            PlatformError::NotAvailable {
                platform: "systrap".to_owned(),
                release: "0.0~20221219.0".to_owned(),
                available: "kvm, ptrace".to_owned(),
            }
        );
        assert!(err
            .to_string()
            .contains("0.0~20221219.0 has no platform \"systrap\"; it has kvm, ptrace"));
        assert!(choose_platform(&debian, Some("")).is_err());
    }
}
