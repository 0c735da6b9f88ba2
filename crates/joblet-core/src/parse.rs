//! Parsers for the values users type: sizes, CPU lists, `KEY=VALUE` pairs,
//! durations. Each returns a [`ParseError`] that says what was expected;
//! the caller adds the name of the flag or field.

use std::time::Duration;

/// A value that does not have the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?}: expected {expected}")]
pub struct ParseError {
    pub value: String,
    pub expected: String,
}

impl ParseError {
    /// `value` is kept as messages echo it ([`crate::text::clip`]).
    fn new(value: &str, expected: impl Into<String>) -> Self {
        ParseError {
            value: crate::text::clip(value),
            expected: expected.into(),
        }
    }
}

pub const SIZE_MB_FORM: &str = "a size like 8GB, 4096MB or 4096 (megabytes)";

/// Parses a memory size into MiB: `8GB` / `8G` / `8GiB` (×1024), `4096MB` /
/// `4096M` / `4096MiB`, `1TB` (×1024²), or a bare number of MiB. Units are
/// case-insensitive; as in seed 001, 1 GB = 1024 MB.
pub fn parse_size_mb(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(ParseError::new(s, SIZE_MB_FORM));
    }
    let n: u64 = num.parse().map_err(|_| {
        ParseError::new(s, format!("{SIZE_MB_FORM}, small enough to fit in 64 bits"))
    })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "m" | "mb" | "mib" => 1,
        "g" | "gb" | "gib" => 1024,
        "t" | "tb" | "tib" => 1024 * 1024,
        _ => return Err(ParseError::new(s, SIZE_MB_FORM)),
    };
    n.checked_mul(mult).ok_or_else(|| {
        ParseError::new(s, format!("{SIZE_MB_FORM}, small enough to fit in 64 bits"))
    })
}

pub const CPU_LIST_FORM: &str = "a CPU list like 0-3 or 1,3 or 0-1,4 (CPU numbers 0-4095)";
pub const MAX_CPU_ID: u32 = 4095;

/// Parses a Linux CPU list (`0-3,5`) into sorted, de-duplicated CPU numbers.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, ParseError> {
    let err = || ParseError::new(s, CPU_LIST_FORM);
    let t = s.trim();
    if t.is_empty() {
        return Err(err());
    }
    let mut cpus = Vec::new();
    for part in t.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().map_err(|_| err())?;
        let b: u32 = b.parse().map_err(|_| err())?;
        if a > b || b > MAX_CPU_ID {
            return Err(err());
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats CPU numbers back into the compact list form (`0-3,5`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

pub const ENV_FORM: &str =
    "KEY=VALUE where KEY is letters, digits and '_' and does not start with a digit";

/// Checks an environment variable name.
pub fn check_env_key(key: &str) -> Result<(), ParseError> {
    let mut chars = key.chars();
    let ok = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ParseError::new(key, ENV_FORM))
    }
}

/// Parses `KEY=VALUE` (the value may be empty and may contain `=`).
pub fn parse_env_pair(s: &str) -> Result<(String, String), ParseError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| ParseError::new(s, ENV_FORM))?;
    check_env_key(k).map_err(|_| ParseError::new(s, ENV_FORM))?;
    if v.contains('\0') {
        return Err(ParseError::new(s, "a value without NUL bytes"));
    }
    Ok((k.to_owned(), v.to_owned()))
}

pub const DURATION_FORM: &str =
    "a duration like 30s, 500ms, 1.5s, 10m, 2h or 1h30m, or a number of seconds (whole milliseconds at most)";

const NANOS_PER_MILLI: u128 = 1_000_000;

/// Nanoseconds in one `unit` (humantime's unit names).
fn unit_nanos(unit: &str) -> Option<u128> {
    const S: u128 = 1_000_000_000;
    Some(match unit {
        "ns" | "nsec" | "nanos" => 1,
        "us" | "µs" | "usec" | "micros" => 1_000,
        "ms" | "msec" | "millis" => NANOS_PER_MILLI,
        "s" | "sec" | "secs" | "second" | "seconds" => S,
        "m" | "min" | "mins" | "minute" | "minutes" => 60 * S,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600 * S,
        "d" | "day" | "days" => 86_400 * S,
        "w" | "week" | "weeks" => 7 * 86_400 * S,
        "M" | "month" | "months" => 2_630_016 * S,
        "y" | "year" | "years" => 31_557_600 * S,
        _ => return None,
    })
}

/// Parses a duration to the millisecond: a bare number of seconds (`30`,
/// `0.5`), or components like `30s`, `500ms`, `1.5s`, `1h30m`, `1h 30m`
/// (humantime's units; a component may have a decimal fraction). Nothing
/// is rounded: a value that is not a whole number of milliseconds (`1us`,
/// `0.0005s`) is refused, so a limit is never silently changed.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || ParseError::new(s, DURATION_FORM);
    let t = s.trim();
    if t.is_empty() {
        return Err(err());
    }
    let mut nanos: u128 = 0;
    let mut rest = t;
    let mut components = 0;
    while !rest.is_empty() {
        // <digits>[.<digits>]
        let int_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int, after) = rest.split_at(int_end);
        if int.is_empty() || int.len() > 20 {
            return Err(err());
        }
        let (frac, after) = match after.strip_prefix('.') {
            Some(f) => {
                let end = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
                if end == 0 || end > 9 {
                    return Err(err());
                }
                f.split_at(end)
            }
            None => ("", after),
        };
        let after = after.trim_start();
        let unit_end = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        components += 1;
        let per = match unit {
            // A bare number is seconds, and only on its own.
            "" if components == 1 && after.is_empty() => unit_nanos("s").unwrap_or(1),
            u => unit_nanos(u).ok_or_else(err)?,
        };
        let int: u128 = int.parse().map_err(|_| err())?;
        let mut value = int.checked_mul(per).ok_or_else(err)?;
        if !frac.is_empty() {
            let scale = 10u128.pow(frac.len() as u32);
            let frac: u128 = frac.parse().map_err(|_| err())?;
            let part = frac * per;
            if !part.is_multiple_of(scale) {
                return Err(err());
            }
            value += part / scale;
        }
        nanos = nanos.checked_add(value).ok_or_else(err)?;
        rest = after.trim_start();
    }
    if !nanos.is_multiple_of(NANOS_PER_MILLI) {
        return Err(err());
    }
    u64::try_from(nanos / NANOS_PER_MILLI)
        .map(Duration::from_millis)
        .map_err(|_| err())
}

/// Formats a duration in whole seconds (`1h 30m`), for times that passed.
pub fn format_duration(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Formats a limit to the millisecond (`1s 900ms`, `500ms`, `1h 30m`), the
/// way [`parse_duration`] reads it back.
pub fn format_duration_ms(d: Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

pub const CUDA_VERSION_FORM: &str =
    "a CUDA version like 12.2 or 12.2.1 (MAJOR.MINOR or MAJOR.MINOR.PATCH, digits only)";

/// Checks a CUDA version as users type it (`12.2`, `11.8.0`) and returns it
/// trimmed. Each part is 1 to 4 digits; nothing else is accepted (no `v`
/// prefix, no `12`, no `12.2.1.4`).
pub fn parse_cuda_version(s: &str) -> Result<String, ParseError> {
    let t = s.trim();
    let parts: Vec<&str> = t.split('.').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| (1..=4).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(t.to_owned())
    } else {
        Err(ParseError::new(s, CUDA_VERSION_FORM))
    }
}

pub const MIG_PROFILE_FORM: &str =
    "a MIG profile as nvidia-smi names it, like 1g.10gb, 3g.40gb, 1g.10gb+me or 1c.3g.40gb";

/// Checks a MIG profile name (`1g.10gb`, `2g.20gb`, `1g.10gb+me`,
/// `1c.3g.40gb`: optional `<n>c.`, then `<n>g.<n>gb`, then optional
/// `+`/`-` suffixes of letters and dots such as `+me` or `+gfx`) and
/// returns it trimmed and lower-cased, as the driver prints it.
pub fn parse_mig_profile(s: &str) -> Result<String, ParseError> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || ParseError::new(s, MIG_PROFILE_FORM);
    let digits = |p: &str, max: usize| {
        !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_digit())
    };
    let (core, suffix) = match t.find(['+', '-']) {
        Some(i) => t.split_at(i),
        None => (t.as_str(), ""),
    };
    let mut parts: Vec<&str> = core.split('.').collect();
    if parts.len() == 3 {
        let ci = parts.remove(0);
        if !ci.strip_suffix('c').is_some_and(|n| digits(n, 2)) {
            return Err(bad());
        }
    }
    let [g, mem] = parts[..] else {
        return Err(bad());
    };
    if !g.strip_suffix('g').is_some_and(|n| digits(n, 2))
        || !mem.strip_suffix("gb").is_some_and(|n| digits(n, 4))
    {
        return Err(bad());
    }
    // `+me`, `-me`, `+gfx`, `+me.all`: each group a sign and a word.
    let mut rest = suffix;
    while !rest.is_empty() {
        let body = &rest[1..];
        let end = body.find(['+', '-']).unwrap_or(body.len());
        let word = &body[..end];
        if word.is_empty()
            || word.starts_with('.')
            || word.ends_with('.')
            || !word.bytes().all(|b| b.is_ascii_lowercase() || b == b'.')
        {
            return Err(bad());
        }
        rest = &body[end..];
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_seed_001_forms() {
        assert_eq!(parse_size_mb("8GB").unwrap(), 8192);
        assert_eq!(parse_size_mb("16gb").unwrap(), 16384);
        assert_eq!(parse_size_mb("4096MB").unwrap(), 4096);
        assert_eq!(parse_size_mb("4096").unwrap(), 4096);
        assert_eq!(parse_size_mb("1TB").unwrap(), 1024 * 1024);
        assert_eq!(parse_size_mb("2GiB").unwrap(), 2048);
    }

    #[test]
    fn bad_sizes_say_what_is_expected() {
        for bad in [
            "8XB",
            "",
            "GB",
            "-1",
            "8.5GB",
            "99999999999999999999",
            "18014398509481984GB",
        ] {
            let e = parse_size_mb(bad).unwrap_err();
            assert!(e.to_string().contains("8GB, 4096MB or 4096"), "{bad}: {e}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), vec![1, 3]);
        assert_eq!(
            format_cpu_list(&parse_cpu_list("0-1,4,5,6,9").unwrap()),
            "0-1,4-6,9"
        );
        for bad in ["", "3-1", "a", "0-", "-1", "4096", "1,,2"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_pairs() {
        assert_eq!(parse_env_pair("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert_eq!(parse_env_pair("_X=").unwrap(), ("_X".into(), "".into()));
        for bad in ["A", "=x", "1A=x", "A-B=x", "A B=x"] {
            assert!(parse_env_pair(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("2days").unwrap(),
            Duration::from_secs(172_800)
        );
        assert!(parse_duration("-5").is_err());
        assert!(parse_duration("soon").is_err());
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h 30m");
    }

    /// Sub-second values are kept to the millisecond, never rounded to 0
    /// (which would mean "no limit") or down to whole seconds.
    #[test]
    fn durations_keep_milliseconds() {
        for (given, ms) in [
            ("500ms", 500),
            ("0.5s", 500),
            ("0.5", 500),
            ("1ms", 1),
            ("1.9s", 1900),
            ("1s 900ms", 1900),
            ("1s900ms", 1900),
            ("1.5h", 5_400_000),
            ("1000us", 1),
            ("2000000ns", 2),
            (" 250 ms ", 250),
        ] {
            assert_eq!(
                parse_duration(given).unwrap(),
                Duration::from_millis(ms),
                "{given}"
            );
        }
        for bad in [
            "1us",
            "0.0005s",
            "2500000ns",
            "1.s",
            ".5s",
            "1.2.3s",
            "5 5",
            "1x",
            "ms",
            "s5",
            "1h-5m",
            "",
            "0.1234567891s",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.to_string().contains("500ms"), "{bad}: {e}");
        }
        assert!(parse_duration("99999999999999999999999h").is_err());
        assert_eq!(format_duration_ms(Duration::from_millis(1900)), "1s 900ms");
        assert_eq!(format_duration_ms(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration_ms(Duration::from_secs(5400)), "1h 30m");
        assert_eq!(format_duration(Duration::from_millis(1900)), "1s");
    }

    proptest::proptest! {
        /// Whatever a limit is, its printed form reads back the same.
        #[test]
        fn a_formatted_limit_parses_back(ms in 0u64..40_000_000_000) {
            let d = Duration::from_millis(ms);
            proptest::prop_assert_eq!(parse_duration(&format_duration_ms(d)).unwrap(), d);
        }
    }

    #[test]
    fn a_long_value_is_echoed_clipped() {
        let long = "9".repeat(100_000) + "x";
        let e = parse_duration(&long).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
        assert!(e.value.ends_with('…'));
    }

    #[test]
    fn cuda_versions() {
        assert_eq!(parse_cuda_version("12.2").unwrap(), "12.2");
        assert_eq!(parse_cuda_version(" 11.8.0 ").unwrap(), "11.8.0");
        for bad in [
            "", "12", "12.", ".2", "v12.2", "12.2.1.4", "12.x", "12,2", "１２.2", "12.-2",
            "12345.1",
        ] {
            let e = parse_cuda_version(bad).unwrap_err();
            assert!(e.to_string().contains("MAJOR.MINOR"), "{bad}: {e}");
        }
    }

    #[test]
    fn mig_profiles() {
        for (given, want) in [
            ("1g.10gb", "1g.10gb"),
            (" 3G.40GB ", "3g.40gb"),
            ("1g.10gb+me", "1g.10gb+me"),
            ("1c.3g.40gb", "1c.3g.40gb"),
            ("1g.24gb-me", "1g.24gb-me"),
            ("1g.23gb+gfx+me.all", "1g.23gb+gfx+me.all"),
            ("7g.80gb", "7g.80gb"),
        ] {
            assert_eq!(parse_mig_profile(given).unwrap(), want, "{given}");
        }
        for bad in [
            "",
            "1g",
            "1g.10",
            "10gb",
            "g.10gb",
            "1g.gb",
            "1x.10gb",
            "1g.10gb+",
            "1g.10gb+1",
            "1g.10gb++me",
            "1c.1g",
            "c.1g.10gb",
            "1c.2c.1g.10gb",
            "1g.10gb+.me",
            "123g.10gb",
            "1g.10gb me",
            "MIG-1g.10gb",
        ] {
            let e = parse_mig_profile(bad).unwrap_err();
            assert!(e.to_string().contains("1g.10gb"), "{bad}: {e}");
        }
    }

    proptest::proptest! {
        /// Every MAJOR.MINOR[.PATCH] of digits is accepted as is.
        #[test]
        fn cuda_versions_of_digits_are_accepted(
            major in 0u32..10_000,
            minor in 0u32..10_000,
            patch in proptest::option::of(0u32..10_000),
        ) {
            let v = match patch {
                Some(p) => format!("{major}.{minor}.{p}"),
                None => format!("{major}.{minor}"),
            };
            proptest::prop_assert_eq!(parse_cuda_version(&v).unwrap(), v);
        }

        /// Every `[<c>c.]<g>g.<m>gb[+me]` is accepted as is; whatever is
        /// accepted is lower-case, trimmed and has the `<g>g.<m>gb` core.
        #[test]
        fn mig_profiles_of_the_form_are_accepted(
            c in proptest::option::of(1u32..8),
            g in 1u32..8,
            m in 1u32..200,
            me in proptest::bool::ANY,
        ) {
            let mut p = format!("{g}g.{m}gb");
            if let Some(c) = c { p = format!("{c}c.{p}"); }
            if me { p.push_str("+me"); }
            proptest::prop_assert_eq!(parse_mig_profile(&p).unwrap(), p);
        }

        #[test]
        fn accepted_mig_profiles_have_the_form(s in "[0-9cgbme.+ -]{0,14}") {
            if let Ok(v) = parse_mig_profile(&s) {
                proptest::prop_assert_eq!(v.as_str(), s.trim());
                proptest::prop_assert!(v.contains("g.") && v.contains("gb"));
                proptest::prop_assert!(v.bytes().next().is_some_and(|b| b.is_ascii_digit()));
            }
        }

        /// Whatever is accepted has two or three dot-separated groups of 1
        /// to 4 digits, and is the input trimmed.
        #[test]
        fn accepted_cuda_versions_have_the_form(s in "[0-9.a ]{0,12}") {
            if let Ok(v) = parse_cuda_version(&s) {
                proptest::prop_assert_eq!(v.as_str(), s.trim());
                let parts: Vec<&str> = v.split('.').collect();
                proptest::prop_assert!(parts.len() == 2 || parts.len() == 3);
                proptest::prop_assert!(parts
                    .iter()
                    .all(|p| (1..=4).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit())));
            }
        }
    }
}
