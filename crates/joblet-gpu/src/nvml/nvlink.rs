//! NVLink peers: which GPUs of this node a GPU reaches over an active
//! NVLink, directly or through an NVSwitch.

use super::query::{is_absent, Answers};
use crate::model::normalize_bus_id;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use std::collections::{BTreeSet, HashSet};

/// `NVML_NVLINK_MAX_LINKS` of NVML 12 (Hopper has 18 links).
const MAX_LINKS: u32 = 18;

/// Normalised PCI bus ids at the far end of each active link of `device`
/// (another GPU, an NVSwitch, or a CPU's NVLink port).
pub(crate) fn read_link_endpoints(device: &Device<'_>, answers: &mut Answers) -> Vec<String> {
    let mut endpoints = Vec::new();
    for link in 0..MAX_LINKS {
        if answers.lost {
            break;
        }
        let wrapper = device.link_wrapper_for(link);
        match wrapper.is_active() {
            Ok(true) => {}
            Ok(false) => continue,
            // Past the GPU's last link, or no NVLink at all.
            Err(NvmlError::InvalidArg) => break,
            Err(e) if is_absent(&e) => break,
            Err(e) => {
                answers.note("nvmlDeviceGetNvLinkState", &e);
                break;
            }
        }
        let Some(remote) = answers.get("nvmlDeviceGetNvLinkRemotePciInfo_v2", || {
            wrapper.remote_pci_info()
        }) else {
            continue;
        };
        match normalize_bus_id(&remote.bus_id) {
            Some(bus) => endpoints.push(bus),
            None => answers.warnings.push(format!(
                "GPU {}: NVLink {link} reports remote PCI bus id {:?}, which is not a bus id",
                answers.gpu, remote.bus_id
            )),
        }
    }
    endpoints
}

/// Peers of each GPU given `(bus id, link endpoints)` for every GPU of the
/// node: GPUs at the far end of a link, plus GPUs that share a far end
/// which is not a GPU of the node (an NVSwitch: DGX/HGX boards wire every
/// GPU to the same switches, so all of them are peers). Result in input
/// order, each list sorted, without the GPU itself.
pub(crate) fn peers(gpus: &[(String, Vec<String>)]) -> Vec<Vec<String>> {
    let node_gpus: HashSet<&str> = gpus.iter().map(|(bus, _)| bus.as_str()).collect();
    gpus.iter()
        .map(|(bus, endpoints)| {
            let mut found = BTreeSet::new();
            for end in endpoints {
                if node_gpus.contains(end.as_str()) {
                    found.insert(end.clone());
                    continue;
                }
                for (other, other_ends) in gpus {
                    if other_ends.contains(end) {
                        found.insert(other.clone());
                    }
                }
            }
            found.remove(bus);
            found.into_iter().collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn direct_links_are_peers() {
        let gpus = vec![
            (
                "0000:07:00.0".to_string(),
                s(&["0000:0f:00.0", "0000:0f:00.0"]),
            ),
            ("0000:0f:00.0".to_string(), s(&["0000:07:00.0"])),
            ("0000:47:00.0".to_string(), s(&[])),
        ];
        assert_eq!(
            peers(&gpus),
            vec![s(&["0000:0f:00.0"]), s(&["0000:07:00.0"]), s(&[])]
        );
    }

    #[test]
    fn a_shared_switch_makes_peers() {
        let gpus = vec![
            (
                "0000:07:00.0".to_string(),
                s(&["0000:01:00.0", "0000:02:00.0"]),
            ),
            ("0000:0f:00.0".to_string(), s(&["0000:02:00.0"])),
            ("0000:47:00.0".to_string(), s(&["0000:03:00.0"])),
        ];
        assert_eq!(
            peers(&gpus),
            vec![s(&["0000:0f:00.0"]), s(&["0000:07:00.0"]), s(&[])]
        );
    }

    #[test]
    fn a_link_to_itself_is_not_a_peer() {
        let gpus = vec![("0000:07:00.0".to_string(), s(&["0000:07:00.0"]))];
        assert_eq!(peers(&gpus), vec![s(&[])]);
    }
}
