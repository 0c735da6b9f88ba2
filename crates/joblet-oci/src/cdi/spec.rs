//! The CDI spec file as data: the serde types of `specs-go/config.go`
//! (container-device-interface, spec 1.1.0), read from YAML or JSON and
//! written back in the same shape (field order and omitted empty fields
//! as the Go library writes them).
//!
//! Parsing is strict: a field this crate does not know is an error that
//! names the file and the field's path, since an edit that cannot be
//! understood cannot be applied (fail closed). Checking what the fields
//! hold is [`super::validate`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a spec file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read CDI spec {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("CDI spec {path}: cannot parse `{field}`: {reason}")]
    Parse {
        path: PathBuf,
        /// Where in the document (`devices[0].containerEdits`), `.` for
        /// the top level.
        field: String,
        reason: String,
    },
    #[error("CDI spec {path}: `{field}`: {reason}")]
    Invalid {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("cannot serialise the CDI spec: {0}")]
    Serialise(String),
}

/// A CDI spec: the devices of one `kind` and the edits they share.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// The spec version the file follows (`0.5.0`).
    pub cdi_version: String,
    /// `vendor/class`, e.g. `nvidia.com/gpu`.
    pub kind: String,
    /// CDI-only metadata (needs 0.6.0); not put into the container.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub devices: Vec<Device>,
    /// Edits made whenever any device of this spec is injected.
    #[serde(default, skip_serializing_if = "ContainerEdits::is_empty")]
    pub container_edits: ContainerEdits,
}

/// One device a container can ask for by `kind=name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub container_edits: ContainerEdits,
}

/// Changes to a container's OCI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerEdits {
    /// `KEY=VALUE`, replacing a variable of the same name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    /// Host network interfaces moved into the container (1.1.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_devices: Vec<NetDevice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    /// Intel RDT settings (0.7.0; `schemata`, `enableMonitoring`: 1.1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intel_rdt: Option<IntelRdt>,
    /// Extra groups of the container's process (0.7.0).
    #[serde(
        default,
        rename = "additionalGids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub additional_gids: Vec<u32>,
}

impl ContainerEdits {
    /// No edit at all (valid for a spec's shared edits, not for a device).
    pub fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.device_nodes.is_empty()
            && self.net_devices.is_empty()
            && self.hooks.is_empty()
            && self.mounts.is_empty()
            && self.intel_rdt.is_none()
            && self.additional_gids.is_empty()
    }

    /// `other`'s edits after these (the CDI library's `Append`: a later
    /// Intel RDT setting wins).
    pub fn append(&mut self, other: &ContainerEdits) {
        self.env.extend(other.env.iter().cloned());
        self.device_nodes.extend(other.device_nodes.iter().cloned());
        self.net_devices.extend(other.net_devices.iter().cloned());
        self.hooks.extend(other.hooks.iter().cloned());
        self.mounts.extend(other.mounts.iter().cloned());
        if other.intel_rdt.is_some() {
            self.intel_rdt.clone_from(&other.intel_rdt);
        }
        self.additional_gids
            .extend(other.additional_gids.iter().copied());
    }
}

/// A device node to create in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceNode {
    /// Where the node appears in the container.
    pub path: PathBuf,
    /// The host node it stands for (0.5.0); `path` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<PathBuf>,
    /// `c`, `b`, `u` or `p`; read from the host node when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    /// Device cgroup access, a subset of `rwm`; `rwm` when absent, `none`
    /// for no access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

impl DeviceNode {
    /// The host node to read type and numbers from.
    pub fn host(&self) -> &Path {
        self.host_path.as_deref().unwrap_or(&self.path)
    }
}

/// A mount to add to the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mount {
    pub host_path: PathBuf,
    pub container_path: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// The mount type (0.4.0), e.g. `bind`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub mount_type: Option<String>,
}

/// An OCI hook to add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hook {
    /// `prestart`, `createRuntime`, `createContainer`, `startContainer`,
    /// `poststart` or `poststop`.
    pub hook_name: String,
    pub path: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
}

/// A host network interface moved into the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetDevice {
    pub host_interface_name: String,
    /// Its name in the container.
    pub name: String,
}

/// Intel RDT settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntelRdt {
    #[serde(default, rename = "closID", skip_serializing_if = "Option::is_none")]
    pub clos_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3_cache_schema: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_bw_schema: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemata: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_monitoring: bool,
}

/// The format of a spec file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl Format {
    /// By file name: `.json` is JSON, `.yaml`/`.yml` YAML; `None` for
    /// anything else (not a spec file).
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => Some(Format::Json),
            Some("yaml" | "yml") => Some(Format::Yaml),
            _ => None,
        }
    }
}

impl Spec {
    /// Reads and parses `path` (YAML unless it ends in `.json`). Does not
    /// validate ([`super::validate::validate`]).
    pub fn read(path: &Path) -> Result<Spec, SpecError> {
        let bytes = std::fs::read(path).map_err(|source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Spec::parse(&bytes, Format::of(path).unwrap_or(Format::Yaml), path)
    }

    /// Parses a document; `path` names it in errors.
    pub fn parse(bytes: &[u8], format: Format, path: &Path) -> Result<Spec, SpecError> {
        let parse_error = |field: String, reason: String| SpecError::Parse {
            path: path.to_path_buf(),
            field: if field.is_empty() { ".".into() } else { field },
            reason,
        };
        match format {
            Format::Json => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                serde_path_to_error::deserialize(&mut de)
                    .map_err(|e| parse_error(e.path().to_string(), e.into_inner().to_string()))
            }
            Format::Yaml => {
                let de = serde_norway::Deserializer::from_slice(bytes);
                serde_path_to_error::deserialize(de)
                    .map_err(|e| parse_error(e.path().to_string(), e.into_inner().to_string()))
            }
        }
    }

    /// The spec as YAML (the form `nvidia-ctk cdi generate` writes).
    ///
    /// Device names holding a `:` (MIG slices, `1:10`) are quoted: the
    /// serialiser leaves them plain, which YAML 1.2 reads as a string but
    /// a YAML 1.1 reader (PyYAML) as a base-60 number.
    pub fn to_yaml(&self) -> Result<String, SpecError> {
        let text =
            serde_norway::to_string(self).map_err(|e| SpecError::Serialise(e.to_string()))?;
        let mut out = String::with_capacity(text.len() + 16);
        for line in text.lines() {
            match line.strip_prefix("- name: ") {
                // A CDI device name holds no quote, so quoting is safe.
                Some(name) if name.contains(':') && !name.starts_with(['\'', '"']) => {
                    out.push_str(&format!("- name: '{name}'"));
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        Ok(out)
    }

    /// The spec as indented JSON, ending in a newline.
    pub fn to_json(&self) -> Result<String, SpecError> {
        serde_json::to_string_pretty(self)
            .map(|s| s + "\n")
            .map_err(|e| SpecError::Serialise(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
cdiVersion: 0.5.0
kind: example.com/device
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: /var/dev/nvidia0
containerEdits:
  env:
    - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
    - path: /dev/nvidiactl
  hooks:
    - hookName: createContainer
      path: /usr/bin/hook
      args: [hook, one]
      timeout: 5
  mounts:
    - hostPath: /lib/libcuda.so.1
      containerPath: /lib/libcuda.so.1
      options: [ro, nosuid, nodev, rbind, rprivate]
"#;

    #[test]
    fn yaml_and_json_read_the_same_spec_and_write_it_back() {
        let spec = Spec::parse(YAML.as_bytes(), Format::Yaml, Path::new("a.yaml")).unwrap();
        assert_eq!(spec.cdi_version, "0.5.0");
        assert_eq!(spec.devices[0].name, "0");
        let node = &spec.devices[0].container_edits.device_nodes[0];
        assert_eq!(node.host(), Path::new("/var/dev/nvidia0"));
        assert_eq!(
            spec.container_edits.device_nodes[0].host(),
            Path::new("/dev/nvidiactl")
        );
        assert_eq!(spec.container_edits.hooks[0].timeout, Some(5));
        let json = spec.to_json().unwrap();
        let again = Spec::parse(json.as_bytes(), Format::Json, Path::new("a.json")).unwrap();
        assert_eq!(again, spec);
        let yaml = spec.to_yaml().unwrap();
        let again = Spec::parse(yaml.as_bytes(), Format::Yaml, Path::new("b.yaml")).unwrap();
        assert_eq!(again, spec);
        // Empty fields are left out, as the Go library does.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(v.get("annotations").is_none(), "{v}");
        assert!(
            v["devices"][0]["containerEdits"].get("env").is_none(),
            "{v}"
        );
        assert!(v["devices"][0]["containerEdits"]["deviceNodes"][0]
            .get("type")
            .is_none());
    }

    #[test]
    fn mig_device_names_are_quoted_in_yaml() {
        let mut spec = Spec::parse(YAML.as_bytes(), Format::Yaml, Path::new("a.yaml")).unwrap();
        spec.devices[0].name = "1:10".into();
        let mut second = spec.devices[0].clone();
        second.name = "MIG-a:b".into();
        spec.devices.push(second);
        let yaml = spec.to_yaml().unwrap();
        assert!(yaml.contains("- name: '1:10'\n"), "{yaml}");
        assert!(yaml.contains("- name: 'MIG-a:b'\n"), "{yaml}");
        let again = Spec::parse(yaml.as_bytes(), Format::Yaml, Path::new("b.yaml")).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn unknown_and_mistyped_fields_name_the_file_and_the_field() {
        let bad = YAML.replace("hostPath: /var/dev/nvidia0", "hostpath: /var/dev/nvidia0");
        let e = Spec::parse(bad.as_bytes(), Format::Yaml, Path::new("/etc/cdi/x.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc/cdi/x.yaml"), "{e}");
        assert!(
            e.contains("devices[0].containerEdits.deviceNodes[0]") && e.contains("hostpath"),
            "{e}"
        );
        let bad = YAML.replace("timeout: 5", "timeout: soon");
        let e = Spec::parse(bad.as_bytes(), Format::Yaml, Path::new("y.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("containerEdits.hooks[0].timeout"), "{e}");
        let e = Spec::parse(b"{\"kind\": \"a/b\"}", Format::Json, Path::new("z.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("z.json") && e.contains("cdiVersion"), "{e}");
    }

    #[test]
    fn read_names_a_missing_file_and_picks_the_format_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = Spec::read(&dir.path().join("none.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.yaml"), "{e}");
        let spec = Spec::parse(YAML.as_bytes(), Format::Yaml, Path::new("a")).unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, spec.to_json().unwrap()).unwrap();
        assert_eq!(Spec::read(&p).unwrap(), spec);
        assert_eq!(Format::of(Path::new("a.yml")), Some(Format::Yaml));
        assert_eq!(Format::of(Path::new("a.txt")), None);
    }

    #[test]
    fn append_keeps_order_and_the_later_rdt() {
        let mut a = ContainerEdits {
            env: vec!["A=1".into()],
            intel_rdt: Some(IntelRdt {
                clos_id: Some("a".into()),
                ..IntelRdt::default()
            }),
            ..ContainerEdits::default()
        };
        let b = ContainerEdits {
            env: vec!["B=2".into()],
            additional_gids: vec![44],
            intel_rdt: Some(IntelRdt {
                clos_id: Some("b".into()),
                ..IntelRdt::default()
            }),
            ..ContainerEdits::default()
        };
        a.append(&b);
        a.append(&ContainerEdits::default());
        assert_eq!(a.env, ["A=1", "B=2"]);
        assert_eq!(a.additional_gids, [44]);
        assert_eq!(a.intel_rdt.unwrap().clos_id.as_deref(), Some("b"));
        assert!(ContainerEdits::default().is_empty());
    }
}
