//! Reading the value strings `nvidia-smi` prints (`40960 MiB`, `27 C`, `0 %`, `N/A`, `Enabled`, `20B210DE`).
//!
//! Rule: a text without any ASCII digit (`N/A`, `[Not Supported]`,
//! `[REDACTED]`, `Requested functionality has been deprecated`) means "not
//! available" and reads as `None`; a text with digits must parse exactly or
//! it is an error naming what was expected.

/// `"<n> <unit>"` (or just `"<n>"` when `unit` is empty) → `n`.
pub(crate) fn number_with_unit(text: &str, unit: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let number = text
        .strip_suffix(unit)
        .map(str::trim_end)
        .ok_or_else(|| format!("expected a number followed by `{unit}`, found `{text}`"))?;
    number
        .parse::<u64>()
        .map(Some)
        .map_err(|e| format!("`{text}` is not a whole number of {unit}: {e}"))
}

/// A plain unsigned number that must fit `u32`.
pub(crate) fn number_u32(text: &str, unit: &str) -> Result<Option<u32>, String> {
    match number_with_unit(text, unit)? {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("`{}` is too large", text.trim())),
    }
}

/// Hex id such as `20B210DE` or `0x20B210DE`.
pub(crate) fn hex_u32(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    u32::from_str_radix(digits, 16)
        .map(Some)
        .map_err(|e| format!("`{text}` is not a 32-bit hex id: {e}"))
}

/// `Yes`/`Enabled`/`Active` → true, `No`/`Disabled`/`Not Active` → false,
/// anything else (`N/A`, `[Not Supported]`) → not available.
pub(crate) fn flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "yes" | "enabled" | "active" | "true" => Some(true),
        "no" | "disabled" | "not active" | "false" => Some(false),
        _ => None,
    }
}

/// CUDA version `12.4` → NVML's encoding `12040`.
pub(crate) fn cuda_version(text: &str) -> Result<Option<i32>, String> {
    let text = text.trim();
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let (major, minor) = text.split_once('.').unwrap_or((text, "0"));
    let parse = |s: &str| {
        s.parse::<i32>()
            .ok()
            .filter(|v| (0..1000).contains(v))
            .ok_or_else(|| format!("`{text}` is not a CUDA version like `12.4`"))
    };
    let (major, minor) = (parse(major)?, parse(minor)?);
    if minor >= 100 {
        return Err(format!("`{text}` has a minor version above 99"));
    }
    Ok(Some(major * 1000 + minor * 10))
}

/// NVML's version string: `<CUDA major>.<driver version>` (`12.550.163.01`).
pub(crate) fn nvml_version(cuda: Option<i32>, driver: &str) -> Option<String> {
    cuda.map(|v| format!("{}.{driver}", v / 1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_units() {
        assert_eq!(number_with_unit("40960 MiB", "MiB"), Ok(Some(40960)));
        assert_eq!(number_with_unit(" 27 C ", "C"), Ok(Some(27)));
        assert_eq!(number_with_unit("0 %", "%"), Ok(Some(0)));
        assert_eq!(number_with_unit("N/A", "MiB"), Ok(None));
        assert_eq!(number_with_unit("[Not Supported]", "%"), Ok(None));
        assert_eq!(number_with_unit("5", ""), Ok(Some(5)));
        assert!(number_with_unit("40 GiB", "MiB").is_err());
        assert!(number_with_unit("4x0 MiB", "MiB").is_err());
        assert!(number_with_unit("99999999999999999999999 MiB", "MiB").is_err());
        assert!(number_u32("4294967296", "").is_err());
    }

    #[test]
    fn ids_flags_and_versions() {
        assert_eq!(hex_u32("20B210DE"), Ok(Some(0x20B2_10DE)));
        assert_eq!(hex_u32("0x147F10DE"), Ok(Some(0x147F_10DE)));
        assert_eq!(hex_u32("[REDACTED]"), Ok(None));
        assert!(hex_u32("12345678901").is_err());
        assert_eq!(flag("Enabled"), Some(true));
        assert_eq!(flag("No"), Some(false));
        assert_eq!(flag("N/A"), None);
        assert_eq!(cuda_version("12.4"), Ok(Some(12040)));
        assert_eq!(cuda_version("13.1"), Ok(Some(13010)));
        assert_eq!(cuda_version("N/A"), Ok(None));
        assert!(cuda_version("12.x").is_err());
        assert_eq!(
            nvml_version(Some(12020), "535.54.03").as_deref(),
            Some("12.535.54.03")
        );
    }
}
