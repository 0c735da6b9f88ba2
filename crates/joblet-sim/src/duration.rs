//! Durations on the command line (`30m`, `90s`, `2h`, `500ms`, `0`).

use crate::error::SimError;

/// Parses a duration into milliseconds: a whole number with the unit
/// `ms`, `s`, `m` or `h` (`0` needs none).
pub fn parse_duration_ms(s: &str) -> Result<u64, SimError> {
    let v = s.trim();
    let bad = |reason| SimError::BadDuration {
        value: s.to_string(),
        reason,
    };
    if v == "0" {
        return Ok(0);
    }
    let split = v
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| bad("no unit"))?;
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad("not a whole number"))?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad("unknown unit")),
    };
    n.checked_mul(scale).ok_or_else(|| bad("too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration_ms("30m").unwrap(), 1_800_000);
        assert_eq!(parse_duration_ms("90s").unwrap(), 90_000);
        assert_eq!(parse_duration_ms("2h").unwrap(), 7_200_000);
        assert_eq!(parse_duration_ms("500ms").unwrap(), 500);
        assert_eq!(parse_duration_ms("0").unwrap(), 0);
        for bad in ["", "30", "m", "1.5h", "3d", "-1s"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }
}
