//! `NVIDIA_DRIVER_CAPABILITIES`: which parts of the driver a job gets
//! (libraries and binaries, see [`super::driver_files`]). Same words and
//! default (`utility,compute`) as the NVIDIA container toolkit.

use super::error::ExecError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One driver capability. The declaration order is the order
/// [`DriverCapabilities`] prints them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverCapability {
    /// CUDA and OpenCL (`libcuda`, MPS binaries).
    Compute,
    /// The 32-bit variants of the other capabilities' libraries.
    Compat32,
    /// X11 display (implies graphics libraries).
    Display,
    /// OpenGL, Vulkan, EGL.
    Graphics,
    /// NVIDIA NGX (DLSS).
    Ngx,
    /// NVML and `nvidia-smi`.
    Utility,
    /// Video encode/decode (implies compute libraries).
    Video,
}

impl DriverCapability {
    /// Every capability, in display order.
    pub const ALL: [DriverCapability; 7] = [
        DriverCapability::Compute,
        DriverCapability::Compat32,
        DriverCapability::Display,
        DriverCapability::Graphics,
        DriverCapability::Ngx,
        DriverCapability::Utility,
        DriverCapability::Video,
    ];

    /// The word `NVIDIA_DRIVER_CAPABILITIES` uses.
    pub fn name(self) -> &'static str {
        match self {
            DriverCapability::Compute => "compute",
            DriverCapability::Compat32 => "compat32",
            DriverCapability::Display => "display",
            DriverCapability::Graphics => "graphics",
            DriverCapability::Ngx => "ngx",
            DriverCapability::Utility => "utility",
            DriverCapability::Video => "video",
        }
    }

    fn accepted() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl fmt::Display for DriverCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DriverCapability {
    type Err = ExecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let word = s.trim();
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(word))
            .ok_or_else(|| ExecError::InvalidCapability {
                value: word.to_string(),
                accepted: Self::accepted(),
            })
    }
}

/// A set of driver capabilities; never empty (an empty list means the
/// default, as in the container toolkit).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DriverCapabilities(BTreeSet<DriverCapability>);

impl DriverCapabilities {
    /// Parse a comma-separated list, case-insensitive, blanks around
    /// words ignored. `all` means every capability; an empty value (or a
    /// list of only commas) means the default `utility,compute`.
    pub fn parse(value: &str) -> Result<Self, ExecError> {
        let mut set = BTreeSet::new();
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if word.eq_ignore_ascii_case("all") {
                return Ok(Self::all());
            }
            set.insert(word.parse::<DriverCapability>()?);
        }
        Ok(Self::new(set))
    }

    /// The given capabilities; the default when there are none.
    pub fn new(caps: impl IntoIterator<Item = DriverCapability>) -> Self {
        let set: BTreeSet<_> = caps.into_iter().collect();
        if set.is_empty() {
            Self::default()
        } else {
            DriverCapabilities(set)
        }
    }

    /// Every capability (`all`).
    pub fn all() -> Self {
        DriverCapabilities(DriverCapability::ALL.into_iter().collect())
    }

    pub fn contains(&self, cap: DriverCapability) -> bool {
        self.0.contains(&cap)
    }

    /// The capabilities in display order.
    pub fn iter(&self) -> impl Iterator<Item = DriverCapability> + '_ {
        self.0.iter().copied()
    }
}

impl Default for DriverCapabilities {
    /// `utility,compute`, the container toolkit's default.
    fn default() -> Self {
        DriverCapabilities(BTreeSet::from([
            DriverCapability::Utility,
            DriverCapability::Compute,
        ]))
    }
}

impl fmt::Display for DriverCapabilities {
    /// Comma-separated in declaration order, e.g. `compute,utility`: the
    /// form `NVIDIA_DRIVER_CAPABILITIES` takes, and stable for a set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = self.iter().map(DriverCapability::name).collect();
        f.write_str(&words.join(","))
    }
}

impl FromStr for DriverCapabilities {
    type Err = ExecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for DriverCapabilities {
    type Error = ExecError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<DriverCapabilities> for String {
    fn from(caps: DriverCapabilities) -> String {
        caps.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use DriverCapability::*;

    #[test]
    fn default_is_utility_compute() {
        let d = DriverCapabilities::default();
        assert!(d.contains(Utility) && d.contains(Compute));
        assert!(!d.contains(Video));
        assert_eq!(d.to_string(), "compute,utility");
        assert_eq!(DriverCapabilities::parse("").unwrap(), d);
        assert_eq!(DriverCapabilities::parse("  , ,").unwrap(), d);
    }

    #[test]
    fn lists_parse_case_insensitively_with_blanks() {
        let c = DriverCapabilities::parse(" Video , UTILITY,,graphics ").unwrap();
        assert_eq!(c.iter().collect::<Vec<_>>(), [Graphics, Utility, Video]);
        assert_eq!(c.to_string(), "graphics,utility,video");
        assert!(!c.contains(Compute));
    }

    #[test]
    fn all_means_every_capability() {
        for v in ["all", "ALL", "utility,all"] {
            let c = DriverCapabilities::parse(v).unwrap();
            assert_eq!(c, DriverCapabilities::all(), "{v}");
        }
        assert_eq!(
            DriverCapabilities::all().to_string(),
            "compute,compat32,display,graphics,ngx,utility,video"
        );
    }

    #[test]
    fn unknown_word_names_the_variable_and_the_accepted_values() {
        let err = DriverCapabilities::parse("utility,cuda").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("NVIDIA_DRIVER_CAPABILITIES"), "{msg}");
        assert!(msg.contains("`cuda`"), "{msg}");
        for word in DriverCapability::ALL {
            assert!(msg.contains(word.name()), "{msg} lacks {word}");
        }
    }

    #[test]
    fn serde_round_trips_as_a_string() {
        let c = DriverCapabilities::parse("video,compute").unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, "\"compute,video\"");
        assert_eq!(
            serde_json::from_str::<DriverCapabilities>(&json).unwrap(),
            c
        );
        assert!(serde_json::from_str::<DriverCapabilities>("\"bogus\"").is_err());
    }

    proptest! {
        #[test]
        fn display_parses_back_to_the_same_set(bits in 1u8..128) {
            let caps = DriverCapabilities::new(
                DriverCapability::ALL.into_iter().enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0).map(|(_, c)| c),
            );
            let again = DriverCapabilities::parse(&caps.to_string()).unwrap();
            prop_assert_eq!(again, caps);
        }

        #[test]
        fn random_text_never_panics(text in ".{0,80}") {
            let _ = DriverCapabilities::parse(&text);
        }
    }
}
