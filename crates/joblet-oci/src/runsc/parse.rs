//! Pure parsers for the text runsc prints, and [`RunscFeatures::from_outputs`].

use std::collections::BTreeSet;

use super::{DriverVersion, RunscFeatures, RunscRelease};

/// The captured output of the probe commands, as text.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeOutputs<'a> {
    /// `runsc --version` (stdout).
    pub version: &'a str,
    /// `runsc help` (stdout).
    pub help: &'a str,
    /// `runsc flags` (stdout and stderr together; the releases seen print on stderr).
    pub flags: &'a str,
    /// `runsc help platforms` (stdout), when `help` lists that topic.
    pub help_platforms: Option<&'a str>,
    /// `runsc nvproxy list-supported-drivers` (stdout), when it ran and succeeded.
    pub supported_drivers: Option<&'a str>,
}

/// Output that does not look like what runsc prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// `--version` did not start with `runsc version <release>`.
    #[error(
        "`runsc --version` printed {output:?}; expected a first line `runsc version <release>`"
    )]
    Version {
        /// What it printed (first 200 characters).
        output: String,
    },
    /// `flags` listed no flag at all.
    #[error("`runsc flags` listed no global flags; its output began {output:?}")]
    NoFlags {
        /// What it printed (first 200 characters).
        output: String,
    },
    /// A line of `nvproxy list-supported-drivers` is not a driver version.
    #[error("`runsc nvproxy list-supported-drivers` printed {line:?}, which is not a driver version MAJOR.MINOR.PATCH")]
    DriverLine {
        /// The offending line.
        line: String,
    },
}

impl RunscFeatures {
    /// Builds the features from the probe commands' output.
    pub fn from_outputs(out: &ProbeOutputs<'_>) -> Result<RunscFeatures, ParseError> {
        let (release, oci_spec) = parse_version(out.version)?;
        let help = parse_help(out.help);
        let global_flags = parse_flags(out.flags);
        if global_flags.is_empty() {
            return Err(ParseError::NoFlags {
                output: head(out.flags),
            });
        }
        let mut platforms = out.help_platforms.map(parse_platforms).unwrap_or_default();
        if platforms.is_empty() {
            platforms = flag_usage(out.flags, "platform")
                .map(platforms_from_usage)
                .unwrap_or_default();
        }
        let supported_drivers = out
            .supported_drivers
            .map(parse_supported_drivers)
            .transpose()?;
        Ok(RunscFeatures {
            release,
            oci_spec,
            subcommands: help.subcommands,
            global_flags: global_flags.into_iter().map(|(name, _)| name).collect(),
            platforms,
            supported_drivers,
        })
    }
}

fn head(s: &str) -> String {
    s.chars().take(200).collect()
}

/// `runsc version <release>` then `spec: <version>`.
pub(crate) fn parse_version(output: &str) -> Result<(RunscRelease, Option<String>), ParseError> {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    let release = lines
        .next()
        .and_then(|l| l.strip_prefix("runsc version "))
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ParseError::Version {
            output: head(output),
        })?;
    let spec = lines
        .find_map(|l| l.strip_prefix("spec:"))
        .map(|s| s.trim().to_owned());
    Ok((RunscRelease::parse(release), spec))
}

/// What `runsc help` lists.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Help {
    /// Subcommands, from every "Subcommands…:" group.
    pub subcommands: BTreeSet<String>,
    /// Help topics ("Additional help topics…"), e.g. `platforms`.
    pub topics: BTreeSet<String>,
}

/// Lines `\t<name>  <synopsis>` under `Subcommands…:` and `Additional help topics…:` headers.
pub(crate) fn parse_help(output: &str) -> Help {
    enum Section {
        None,
        Subcommands,
        Topics,
    }
    let mut help = Help::default();
    let mut section = Section::None;
    for line in output.lines() {
        if line.starts_with("Subcommands") {
            section = Section::Subcommands;
            continue;
        }
        if line.starts_with("Additional help topics") {
            section = Section::Topics;
            continue;
        }
        let Some(entry) = line.strip_prefix('\t') else {
            if !line.trim().is_empty() {
                section = Section::None;
            }
            continue;
        };
        let Some(name) = entry.split_whitespace().next() else {
            continue;
        };
        match section {
            Section::Subcommands => help.subcommands.insert(name.to_owned()),
            Section::Topics => help.topics.insert(name.to_owned()),
            Section::None => false,
        };
    }
    help
}

/// Go's flag defaults: `  -name [type]` lines, each followed by `    \t`-indented usage lines.
/// Returns each flag's name and its usage text (continuation lines joined by `\n`).
pub(crate) fn parse_flags(output: &str) -> Vec<(String, String)> {
    let mut flags: Vec<(String, String)> = Vec::new();
    for line in output.lines() {
        if let Some(rest) = line
            .strip_prefix("  -")
            .filter(|r| !r.starts_with([' ', '\t', '-']))
        {
            let name = rest.split_whitespace().next().unwrap_or_default();
            // A one-letter flag puts its usage on the same line after a tab.
            let usage = rest
                .split_once('\t')
                .map(|(_, u)| u.trim().to_owned())
                .unwrap_or_default();
            if !name.is_empty() {
                flags.push((name.to_owned(), usage));
            }
        } else if let Some(usage) = line.strip_prefix("    \t") {
            if let Some((_, text)) = flags.last_mut() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(usage.trim_end());
            }
        }
    }
    flags
}

/// The usage text of one flag in `runsc flags` output.
fn flag_usage<'a>(flags_output: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = flags_output.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("  -") else {
            continue;
        };
        if rest.split_whitespace().next() == Some(name) {
            return lines.next().and_then(|l| l.strip_prefix("    \t"));
        }
    }
    None
}

/// `specifies which platform to use: systrap (default), ptrace, kvm. (default "systrap")`.
fn platforms_from_usage(usage: &str) -> BTreeSet<String> {
    let Some((_, list)) = usage.split_once("use:") else {
        return BTreeSet::new();
    };
    let list = list.split_once('.').map_or(list, |(l, _)| l);
    list.split(',')
        .filter_map(|item| item.split_whitespace().next())
        .filter(|name| {
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// One platform name per line.
pub(crate) fn parse_platforms(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One driver version per line; sorted and deduplicated.
pub(crate) fn parse_supported_drivers(output: &str) -> Result<Vec<DriverVersion>, ParseError> {
    let mut drivers = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.parse()
                .map_err(|_| ParseError::DriverLine { line: l.to_owned() })
        })
        .collect::<Result<Vec<DriverVersion>, _>>()?;
    drivers.sort();
    drivers.dedup();
    Ok(drivers)
}

#[cfg(test)]
mod tests {
    //! `debian-20221219-*` are captured from Debian's runsc 0.0~20221219.0.
    //! `constructed-20260831-*` are built from gVisor's source
    //! (`runsc/cli/main.go`, `runsc/cli/help.go`, `runsc/config/flags.go`;
    //! flags trimmed to a realistic subset, in Go's `PrintDefaults` layout)
    //! and a driver list reported in google/gvisor issue 12642.

    use super::*;

    const OLD_VERSION: &str = include_str!("testdata/debian-20221219-version.txt");
    const OLD_HELP: &str = include_str!("testdata/debian-20221219-help.txt");
    const OLD_FLAGS: &str = include_str!("testdata/debian-20221219-flags.txt");
    const OLD_PLATFORMS: &str = include_str!("testdata/debian-20221219-help-platforms.txt");
    const NEW_VERSION: &str = include_str!("testdata/constructed-20260831-version.txt");
    const NEW_HELP: &str = include_str!("testdata/constructed-20260831-help.txt");
    const NEW_FLAGS: &str = include_str!("testdata/constructed-20260831-flags.txt");
    const NEW_PLATFORMS: &str = include_str!("testdata/constructed-20260831-help-platforms.txt");
    const NEW_DRIVERS: &str = include_str!("testdata/constructed-20260831-drivers.txt");

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn debian_runsc_has_no_nvproxy_and_no_systrap() {
        let help = parse_help(OLD_HELP);
        assert!(help.topics.contains("platforms"));
        let f = RunscFeatures::from_outputs(&ProbeOutputs {
            version: OLD_VERSION,
            help: OLD_HELP,
            flags: OLD_FLAGS,
            help_platforms: Some(OLD_PLATFORMS),
            supported_drivers: None,
        })
        .unwrap();
        assert_eq!(f.release.raw, "0.0~20221219.0");
        assert_eq!(f.release.date, Some(20221219));
        assert_eq!(f.oci_spec.as_deref(), Some("1.0.2-dev"));
        assert_eq!(f.platforms, set(&["kvm", "ptrace"]));
        assert!(!f.has_nvproxy());
        assert!(!f.has_list_supported_drivers());
        assert!(f.has_flag("platform") && f.has_flag("network") && f.has_flag("root"));
        assert!(f.has_flag("TESTONLY-unsafe-nonroot") && f.has_flag("net-raw"));
        assert!(f.subcommands.contains("run") && f.subcommands.contains("boot"));
        assert!(
            !f.subcommands.contains("platforms"),
            "a help topic is not a subcommand"
        );
        assert_eq!(f.supported_drivers, None);
    }

    #[test]
    fn newer_runsc_lists_nvproxy_flags_systrap_and_drivers() {
        let f = RunscFeatures::from_outputs(&ProbeOutputs {
            version: NEW_VERSION,
            help: NEW_HELP,
            flags: NEW_FLAGS,
            help_platforms: Some(NEW_PLATFORMS),
            supported_drivers: Some(NEW_DRIVERS),
        })
        .unwrap();
        assert_eq!(f.release.raw, "release-20260831.0");
        assert_eq!(f.oci_spec.as_deref(), Some("1.2.1"));
        assert_eq!(f.platforms, set(&["kvm", "ptrace", "systrap"]));
        assert!(f.has_nvproxy_flag());
        assert!(f.has_nvproxy_driver_version());
        assert!(f.has_nvproxy_allowed_driver_capabilities());
        assert!(f.has_list_supported_drivers());
        assert!(f.has_flag("nvproxy-allow-unsupported-driver"));
        let drivers = f.supported_drivers.unwrap();
        assert_eq!(drivers.len(), 17);
        assert_eq!(drivers.first().unwrap().to_string(), "535.129.03");
        assert_eq!(drivers.last().unwrap().to_string(), "580.105.08");
    }

    #[test]
    fn multi_line_usage_does_not_make_flags() {
        let flags = parse_flags(NEW_FLAGS);
        let overlay = flags.iter().find(|(n, _)| n == "overlay2").unwrap();
        assert!(overlay.1.contains("'none' to turn overlay mode off"));
        assert!(flags
            .iter()
            .all(|(n, _)| !n.starts_with('*') && !n.starts_with('\'')));
        let names: Vec<&str> = flags.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.iter().filter(|n| **n == "overlay2").count(), 1);
        assert_eq!(parse_flags(OLD_FLAGS).len(), 68);
    }

    #[test]
    fn one_letter_flag_keeps_usage_on_its_line() {
        let flags = parse_flags("  -v\tverbose output\n  -root string\n    \troot dir\n");
        assert_eq!(
            flags,
            vec![
                ("v".to_owned(), "verbose output".to_owned()),
                ("root".to_owned(), "root dir".to_owned()),
            ]
        );
    }

    #[test]
    fn platforms_fall_back_to_the_platform_flag_usage() {
        for (flags, want) in [
            (OLD_FLAGS, set(&["kvm", "ptrace"])),
            (NEW_FLAGS, set(&["kvm", "ptrace", "systrap"])),
        ] {
            let f = RunscFeatures::from_outputs(&ProbeOutputs {
                version: NEW_VERSION,
                help: "",
                flags,
                help_platforms: None,
                supported_drivers: None,
            })
            .unwrap();
            assert_eq!(f.platforms, want);
        }
    }

    #[test]
    fn version_lines_must_name_runsc() {
        assert!(matches!(
            parse_version("runc version 1.1.5\n"),
            Err(ParseError::Version { .. })
        ));
        assert!(matches!(
            parse_version("runsc version \n"),
            Err(ParseError::Version { .. })
        ));
        assert!(matches!(parse_version(""), Err(ParseError::Version { .. })));
        let (release, spec) = parse_version("runsc version VERSION_MISSING\n").unwrap();
        assert_eq!(
            (release.raw.as_str(), release.date, spec),
            ("VERSION_MISSING", None, None)
        );
    }

    #[test]
    fn empty_flags_output_is_an_error() {
        let err = RunscFeatures::from_outputs(&ProbeOutputs {
            version: NEW_VERSION,
            help: NEW_HELP,
            flags: "Usage: runsc <flags> <subcommand>\n",
            ..ProbeOutputs::default()
        })
        .unwrap_err();
        assert!(matches!(err, ParseError::NoFlags { .. }));
    }

    #[test]
    fn driver_list_rejects_garbage_and_sorts() {
        assert_eq!(
            parse_supported_drivers("550.90.07\n\n535.104.05\n550.90.07\n").unwrap(),
            vec!["535.104.05".parse().unwrap(), "550.90.07".parse().unwrap()]
        );
        assert_eq!(
            parse_supported_drivers("535.104.05\nunsupported driver\n"),
            Err(ParseError::DriverLine {
                line: "unsupported driver".to_owned()
            })
        );
        assert_eq!(parse_supported_drivers("").unwrap(), vec![]);
    }
}
