//! A job's `NVIDIA_DRIVER_CAPABILITIES`, checked for [`super::gpu_args`].
//!
//! Names are those of the NVIDIA container toolkit (which nvproxy parses
//! case-sensitively) plus `all`. gVisor's privileged capabilities are an
//! operator's decision, never a job's.

use super::gpu::GpuRefusal;

/// NVIDIA container toolkit capability names (nvproxy's `nvconf` knows the same).
pub(super) const KNOWN_CAPS: [&str; 7] = [
    "compute", "compat32", "display", "graphics", "ngx", "utility", "video",
];
/// gVisor's privileged capabilities: allowed only by an operator.
pub(super) const PRIVILEGED_CAPS: [&str; 3] =
    ["profiling", "fabric-imex-mgmt", "gpudirect-storage"];
/// What nvproxy offers without `--nvproxy-allowed-driver-capabilities`.
pub(super) const DEFAULT_CAPS: [&str; 2] = ["compute", "utility"];

/// A job's capability request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Caps {
    /// `all` (alone or with other names).
    All,
    /// Known names, deduplicated, in the order given.
    Named(Vec<&'static str>),
}

impl Caps {
    pub(super) fn flag_value(&self) -> String {
        match self {
            Caps::All => "all".to_owned(),
            Caps::Named(names) => names.join(","),
        }
    }
}

/// `None` for an empty value (nvproxy then applies its default, compute and utility).
pub(super) fn parse_caps(value: &str) -> Result<Option<Caps>, GpuRefusal> {
    let mut names: Vec<&'static str> = Vec::new();
    let mut all = false;
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if item == "all" {
            all = true;
        } else if let Some(known) = KNOWN_CAPS.iter().find(|k| **k == item) {
            if !names.contains(known) {
                names.push(known);
            }
        } else if PRIVILEGED_CAPS.contains(&item) {
            return Err(GpuRefusal::PrivilegedCapability {
                capability: item.to_owned(),
            });
        } else {
            return Err(GpuRefusal::UnknownCapability {
                capability: item.to_owned(),
                value: value.to_owned(),
                known: KNOWN_CAPS.join(", "),
            });
        }
    }
    Ok(match (all, names.is_empty()) {
        (true, _) => Some(Caps::All),
        (false, true) => None,
        (false, false) => Some(Caps::Named(names)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_ask_for_nothing() {
        assert_eq!(parse_caps(""), Ok(None));
        assert_eq!(parse_caps(" ,, "), Ok(None));
    }

    #[test]
    fn all_wins_over_names() {
        assert_eq!(parse_caps("compute,all"), Ok(Some(Caps::All)));
        assert_eq!(Caps::All.flag_value(), "all");
    }

    #[test]
    fn names_keep_their_order_without_duplicates() {
        let caps = parse_caps(" graphics,compute ,graphics,utility")
            .unwrap()
            .unwrap();
        assert_eq!(caps, Caps::Named(vec!["graphics", "compute", "utility"]));
        assert_eq!(caps.flag_value(), "graphics,compute,utility");
    }

    #[test]
    fn privileged_and_unknown_names_are_refused() {
        for name in PRIVILEGED_CAPS {
            assert_eq!(
                parse_caps(&format!("compute,{name}")),
                Err(GpuRefusal::PrivilegedCapability {
                    capability: name.to_owned()
                })
            );
        }
        let err = parse_caps("compute,COMPUTE").unwrap_err();
        assert!(
            matches!(&err, GpuRefusal::UnknownCapability { capability, value, .. }
            if capability == "COMPUTE" && value == "compute,COMPUTE")
        );
    }
}
