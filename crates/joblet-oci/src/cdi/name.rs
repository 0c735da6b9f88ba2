//! CDI names: a spec's `kind` (`vendor/class`, [`Kind`]) and a device's
//! fully qualified name (`vendor/class=name`, [`CdiDevice`]), which is
//! what `--device` flags take (podman's, and Joblet's).
//!
//! The characters allowed are the CDI library's (`pkg/parser/parser.go`):
//! a vendor and a class start with a letter, end with a letter or digit
//! and hold letters, digits, `_`, `-` and `.` between; a device name
//! starts and ends with a letter or digit and may also hold `:` (MIG
//! slices, `0:1`). A class holding a `.` needs cdiVersion 0.6.0, a
//! device name starting with a digit 0.5.0 ([`super::version`]).

use std::fmt;
use std::str::FromStr;

/// The accepted form of a qualified device name, for messages.
pub const DEVICE_FORM: &str =
    "vendor.com/class=name (e.g. nvidia.com/gpu=0): a vendor and class of letters, digits, '_', '-', '.' starting with a letter, and a device name of letters, digits, '_', '-', '.', ':' starting and ending with a letter or digit";

/// The accepted form of a kind, for messages.
pub const KIND_FORM: &str = "vendor.com/class (e.g. nvidia.com/gpu): letters, digits, '_', '-', '.', each part starting with a letter and ending with a letter or digit";

/// Why a name is not a CDI name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{given}` is not a qualified CDI device name: {why}; expected {DEVICE_FORM}")]
    Device { given: String, why: String },
    #[error("`{given}` is not a CDI kind: {why}; expected {KIND_FORM}")]
    Kind { given: String, why: String },
}

/// A spec's `kind`: who made the devices (`vendor`, domain-like, e.g.
/// `nvidia.com`) and what they are (`class`, e.g. `gpu`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    vendor: String,
    class: String,
}

impl Kind {
    /// A kind from its two parts, each checked.
    pub fn new(vendor: &str, class: &str) -> Result<Kind, NameError> {
        let given = format!("{vendor}/{class}");
        let bad = |why: String| NameError::Kind {
            given: given.clone(),
            why,
        };
        check_vendor_or_class("vendor", vendor).map_err(bad)?;
        check_vendor_or_class("class", class).map_err(bad)?;
        Ok(Kind {
            vendor: vendor.to_string(),
            class: class.to_string(),
        })
    }

    pub fn vendor(&self) -> &str {
        &self.vendor
    }

    pub fn class(&self) -> &str {
        &self.class
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.vendor, self.class)
    }
}

impl FromStr for Kind {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Kind, NameError> {
        let (vendor, class) = s.split_once('/').ok_or_else(|| NameError::Kind {
            given: s.to_string(),
            why: "no '/' between vendor and class".into(),
        })?;
        Kind::new(vendor, class)
    }
}

/// A fully qualified CDI device name, `vendor.com/class=name`: what a
/// `--device` flag names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CdiDevice {
    kind: Kind,
    name: String,
}

impl CdiDevice {
    /// A device of `kind` named `name` (checked).
    pub fn new(kind: Kind, name: &str) -> Result<CdiDevice, NameError> {
        check_device_name(name).map_err(|why| NameError::Device {
            given: format!("{kind}={name}"),
            why,
        })?;
        Ok(CdiDevice {
            kind,
            name: name.to_string(),
        })
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for CdiDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.kind, self.name)
    }
}

impl FromStr for CdiDevice {
    type Err = NameError;

    fn from_str(s: &str) -> Result<CdiDevice, NameError> {
        let bad = |why: &str| NameError::Device {
            given: s.to_string(),
            why: why.to_string(),
        };
        let (kind, name) = s
            .split_once('=')
            .ok_or_else(|| bad("no '=' before the device name"))?;
        let (vendor, class) = kind
            .split_once('/')
            .ok_or_else(|| bad("no '/' between vendor and class"))?;
        check_vendor_or_class("vendor", vendor).map_err(|why| bad(&why))?;
        check_vendor_or_class("class", class).map_err(|why| bad(&why))?;
        check_device_name(name).map_err(|why| bad(&why))?;
        Ok(CdiDevice {
            kind: Kind {
                vendor: vendor.to_string(),
                class: class.to_string(),
            },
            name: name.to_string(),
        })
    }
}

/// A vendor or class: starts with a letter, ends with a letter or digit,
/// letters, digits, `_`, `-`, `.` between.
fn check_vendor_or_class(what: &str, s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err(format!("empty {what}"));
    };
    if !first.is_ascii_alphabetic() {
        return Err(format!("{what} `{s}` should start with a letter"));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!("invalid character '{c}' in {what} `{s}`"));
    }
    if !last.is_ascii_alphanumeric() {
        return Err(format!("{what} `{s}` should end with a letter or digit"));
    }
    Ok(())
}

/// A device name: starts and ends with a letter or digit, letters,
/// digits, `_`, `-`, `.`, `:` between.
pub(crate) fn check_device_name(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err("empty device name".into());
    };
    if !first.is_ascii_alphanumeric() {
        return Err(format!(
            "device name `{s}` should start with a letter or digit"
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    {
        return Err(format!("invalid character '{c}' in device name `{s}`"));
    }
    if !last.is_ascii_alphanumeric() {
        return Err(format!(
            "device name `{s}` should end with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_parse_and_print_back() {
        for s in [
            "nvidia.com/gpu=0",
            "nvidia.com/gpu=all",
            "nvidia.com/gpu=0:1",
            "nvidia.com/gpu=GPU-12345678-1234-1234-1234-123456780000",
            "joblet-test-42.example/gpu=7",
            "vendor.com/class.sub=dev_1",
        ] {
            let d: CdiDevice = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
        let d: CdiDevice = "nvidia.com/gpu=0:1".parse().unwrap();
        assert_eq!(d.kind().vendor(), "nvidia.com");
        assert_eq!(d.kind().class(), "gpu");
        assert_eq!(d.name(), "0:1");
    }

    #[test]
    fn malformed_names_say_what_is_wrong_and_the_accepted_form() {
        for (s, why) in [
            ("nvidia.com/gpu", "no '=' before the device name"),
            ("gpu=0", "no '/' between vendor and class"),
            ("/dev/nvidia0", "no '=' before the device name"),
            ("nvidia.com/gpu=", "empty device name"),
            ("=0", "no '/'"),
            ("/gpu=0", "empty vendor"),
            ("nvidia.com/=0", "empty class"),
            (
                "1nvidia.com/gpu=0",
                "vendor `1nvidia.com` should start with a letter",
            ),
            ("nvidia.com-/gpu=0", "should end with a letter or digit"),
            ("nvidia.com/g*u=0", "invalid character '*' in class"),
            (
                "nvidia.com/gpu=0:",
                "device name `0:` should end with a letter or digit",
            ),
            ("nvidia.com/gpu=-0", "should start with a letter or digit"),
            ("nvidia.com/gpu=a b", "invalid character ' '"),
            ("nvidia.com/gpu=a=b", "invalid character '='"),
        ] {
            let e = s.parse::<CdiDevice>().unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.contains(&format!("`{s}`")), "{s}: {e}");
            assert!(e.contains("expected vendor.com/class=name"), "{s}: {e}");
        }
    }

    #[test]
    fn kinds_are_checked_like_the_parts_of_a_device_name() {
        let k: Kind = "nvidia.com/gpu".parse().unwrap();
        assert_eq!(k.to_string(), "nvidia.com/gpu");
        assert_eq!(Kind::new("nvidia.com", "gpu").unwrap(), k);
        let e = Kind::new("nvidia.com", "").unwrap_err().to_string();
        assert!(
            e.contains("empty class") && e.contains("expected vendor.com/class"),
            "{e}"
        );
        let e = "nvidia.com".parse::<Kind>().unwrap_err().to_string();
        assert!(e.contains("no '/'"), "{e}");
        let e = CdiDevice::new(k, "x/y").unwrap_err().to_string();
        assert!(e.contains("invalid character '/'"), "{e}");
    }
}
