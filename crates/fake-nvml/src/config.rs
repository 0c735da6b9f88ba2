//! Loading `MOCK_NVML_CONFIG`: read the file and pick the parser by content (XML capture or YAML profile).

use std::path::{Path, PathBuf};

use crate::model::Node;
use crate::profile::{parse_profile, ProfileError};
use crate::smi_xml::{parse_smi_xml, SmiXmlError};

/// Largest description accepted (real captures are well under 1 MiB).
const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// Why the node description could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}; check that MOCK_NVML_CONFIG names a readable file")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_CONFIG_BYTES} bytes; this is not a node description")]
    TooLarge { path: PathBuf },
    #[error("{path} is not UTF-8 text; give a mock-NVML profile (YAML) or an `nvidia-smi -q -x` capture (XML)")]
    NotText { path: PathBuf },
    #[error("{path} (read as an nvidia-smi XML capture): {source}")]
    SmiXml { path: PathBuf, source: SmiXmlError },
    #[error("{path} (read as a mock-NVML YAML profile): {source}")]
    Profile { path: PathBuf, source: ProfileError },
}

/// Which parser a text needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    SmiXml,
    Profile,
}

/// Detect the format by content: a document whose first non-blank
/// character is `<` is XML, anything else is tried as YAML.
pub fn detect(text: &str) -> Format {
    let body = text.trim_start_matches('\u{feff}').trim_start();
    if body.starts_with('<') {
        Format::SmiXml
    } else {
        Format::Profile
    }
}

/// Parse a description already in memory; `path` only names it in errors.
pub fn parse_config(path: &Path, text: &str) -> Result<Node, ConfigError> {
    let body = text.trim_start_matches('\u{feff}');
    match detect(body) {
        Format::SmiXml => parse_smi_xml(body).map_err(|source| ConfigError::SmiXml {
            path: path.to_path_buf(),
            source,
        }),
        Format::Profile => parse_profile(body).map_err(|source| ConfigError::Profile {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Read and parse the description at `path`.
pub fn load_config(path: &Path) -> Result<Node, ConfigError> {
    let read = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::NotText {
        path: path.to_path_buf(),
    })?;
    parse_config(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_by_content_not_extension() {
        assert_eq!(detect("\u{feff}  <?xml version=\"1.0\"?>"), Format::SmiXml);
        assert_eq!(detect("<nvidia_smi_log/>"), Format::SmiXml);
        assert_eq!(detect("# comment\nversion: \"1.0\""), Format::Profile);
    }

    #[test]
    fn load_names_the_path_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.yaml");
        let err = load_config(&path).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }));
        assert!(err.to_string().contains("nope.yaml"), "{err}");
    }

    #[test]
    fn an_xml_profile_of_the_wrong_kind_is_rejected() {
        let err = parse_config(Path::new("x.xml"), "<html/>").unwrap_err();
        assert!(
            err.to_string()
                .contains("not an `nvidia-smi -q -x` capture"),
            "{err}"
        );
        let err = parse_config(Path::new("x.yaml"), "- 1\n- 2\n").unwrap_err();
        assert!(err.to_string().contains("not a mock-NVML profile"), "{err}");
    }
}
