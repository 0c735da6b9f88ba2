//! The NVIDIA character-device majors from `<proc>/devices`.
//!
//! The GPU major is listed as `nvidia-frontend` by drivers before 550.40
//! and as `nvidia` since; `nvidia-uvm` and `nvidia-caps` are dynamic.

use crate::inventory::InventoryError;
use crate::model::DeviceMajors;
use std::path::Path;

/// Read `<proc_root>/devices` and pick out the NVIDIA majors. A major the
/// file does not list stays `None` (no driver, or no UVM module loaded).
pub fn read_device_majors(proc_root: &Path) -> Result<DeviceMajors, InventoryError> {
    let path = proc_root.join("devices");
    let text = std::fs::read(&path).map_err(|source| InventoryError::Read {
        path: path.clone(),
        source,
    })?;
    parse_device_majors(&String::from_utf8_lossy(&text), &path)
}

/// Parse the text of `/proc/devices`. `path` is only used in errors.
///
/// Only the `Character devices:` section is read; every line in it must
/// be `<major> <name>`. The `Block devices:` section is skipped.
pub fn parse_device_majors(text: &str, path: &Path) -> Result<DeviceMajors, InventoryError> {
    #[derive(PartialEq)]
    enum Section {
        None,
        Char,
        Other,
    }
    let parse_err = |line_no: usize, line: &str, why: &str| InventoryError::Parse {
        path: path.to_path_buf(),
        reason: format!("line {line_no} `{line}`: {why}"),
    };
    let mut section = Section::None;
    let mut seen_char = false;
    let mut majors = DeviceMajors::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        match line {
            "Character devices:" => {
                seen_char = true;
                section = Section::Char;
                continue;
            }
            "Block devices:" => {
                section = Section::Other;
                continue;
            }
            _ => {}
        }
        match section {
            Section::None => {
                return Err(parse_err(
                    line_no,
                    line,
                    "expected a `Character devices:` or `Block devices:` header first",
                ))
            }
            Section::Other => continue,
            Section::Char => {}
        }
        let (number, name) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| parse_err(line_no, line, "expected `<major> <name>`"))?;
        let major: u32 = number
            .parse()
            .map_err(|_| parse_err(line_no, line, "major is not a decimal number"))?;
        let slot = match name.trim() {
            "nvidia" | "nvidia-frontend" => &mut majors.nvidia,
            "nvidia-uvm" => &mut majors.nvidia_uvm,
            "nvidia-caps" => &mut majors.nvidia_caps,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(major);
        }
    }
    if !seen_char {
        return Err(InventoryError::Parse {
            path: path.to_path_buf(),
            reason: "no `Character devices:` section; is this /proc/devices?".to_string(),
        });
    }
    Ok(majors)
}
