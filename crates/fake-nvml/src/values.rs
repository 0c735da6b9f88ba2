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

/// `"67.03 W"` (or `"67 W"`) → milliwatts (`67030`).
pub(crate) fn watts_as_mw(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let bad = || format!("expected watts such as `67.03 W`, found `{text}`");
    let number = text.strip_suffix('W').map(str::trim_end).ok_or_else(bad)?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let mut milli: u64 = 0;
    for (i, b) in frac.bytes().take(3).enumerate() {
        milli += u64::from(b - b'0') * 10u64.pow(2 - i as u32);
    }
    let watts: u64 = whole.parse().map_err(|_| bad())?;
    watts
        .checked_mul(1000)
        .and_then(|mw| mw.checked_add(milli))
        .and_then(|mw| u32::try_from(mw).ok())
        .map(Some)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Performance state `P0`..`P15` → `nvmlPstates_t` (0..15).
pub(crate) fn pstate(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    text.strip_prefix('P')
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| *n <= 15)
        .map(Some)
        .ok_or_else(|| format!("expected a performance state P0..P15, found `{text}`"))
}

/// Compute mode text (`Default`, `Exclusive_Process`, `prohibited`, ...)
/// → `nvmlComputeMode_t`; `None` for anything else (`N/A`).
pub(crate) fn compute_mode(text: &str) -> Option<u32> {
    match text
        .trim()
        .to_ascii_lowercase()
        .replace([' ', '-'], "_")
        .as_str()
    {
        "default" => Some(0),
        "exclusive_thread" => Some(1),
        "prohibited" => Some(2),
        "exclusive_process" => Some(3),
        _ => None,
    }
}

/// Driver model text (`WDDM`, `TCC`, `MCDM`) → `nvmlDriverModel_t`;
/// `None` for `N/A` (every Linux driver).
pub(crate) fn driver_model(text: &str) -> Option<u32> {
    match text.trim().to_ascii_uppercase().as_str() {
        "WDDM" => Some(0),
        "TCC" | "WDM" => Some(1),
        "MCDM" => Some(2),
        _ => None,
    }
}

/// Brand text → `nvmlBrandType_t`; `None` for a text NVML has no value for.
pub(crate) fn brand(text: &str) -> Option<u32> {
    match text.trim().to_ascii_lowercase().as_str() {
        "quadro" => Some(1),
        "tesla" => Some(2),
        "nvs" => Some(3),
        "grid" => Some(4),
        "geforce" => Some(5),
        "titan" => Some(6),
        "quadro rtx" => Some(12),
        "nvidia rtx" => Some(13),
        "nvidia" => Some(14),
        "geforce rtx" => Some(15),
        "titan rtx" => Some(16),
        _ => None,
    }
}

/// Which process lists an `nvidia-smi` process type belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessKind {
    pub compute: bool,
    pub graphics: bool,
    pub mps: bool,
}

/// `C`, `G`, `C+G`, `M`, `M+C` → the lists the process is in.
pub(crate) fn process_kind(text: &str) -> ProcessKind {
    let t = text.to_ascii_uppercase();
    ProcessKind {
        compute: t.contains('C'),
        graphics: t.contains('G'),
        mps: t.contains('M'),
    }
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

    #[test]
    fn watts_pstates_and_modes() {
        assert_eq!(watts_as_mw("67.03 W"), Ok(Some(67_030)));
        assert_eq!(watts_as_mw("500.00 W"), Ok(Some(500_000)));
        assert_eq!(watts_as_mw("6.4125 W"), Ok(Some(6_412)));
        assert_eq!(watts_as_mw("70 W"), Ok(Some(70_000)));
        assert_eq!(watts_as_mw("N/A"), Ok(None));
        assert!(watts_as_mw("67.03 mW").is_err());
        assert!(watts_as_mw("6x.0 W").is_err());
        assert_eq!(pstate("P8"), Ok(Some(8)));
        assert_eq!(pstate("N/A"), Ok(None));
        assert!(pstate("P16").is_err());
        assert_eq!(compute_mode("Exclusive_Process"), Some(3));
        assert_eq!(compute_mode("default"), Some(0));
        assert_eq!(compute_mode("N/A"), None);
        assert_eq!(driver_model("N/A"), None);
        assert_eq!(brand("NVIDIA RTX"), Some(13));
        assert_eq!(brand("GeForce"), Some(5));
        assert_eq!(brand("Acme"), None);
    }
}
