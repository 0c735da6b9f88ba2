//! Ordering of runtime versions: runs of digits compare as numbers, other runs as text,
//! so `1.10` is newer than `1.9`. A version that extends another is newer (`1.0-rc1` >
//! `1.0`), so a pre-release is best numbered below its release (`0.9.1`, then `1.0`).

use std::cmp::Ordering;

/// Compares two versions. Digit runs compare numerically (leading zeros ignored), other
/// runs byte-wise; a version that is a prefix of another is older (`1.0` < `1.0.1`).
pub fn compare(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let (ra, rest_a) = run(a);
        let (rb, rest_b) = run(b);
        let ord = match (ra[0].is_ascii_digit(), rb[0].is_ascii_digit()) {
            (true, true) => {
                let ta = trim_zeros(ra);
                let tb = trim_zeros(rb);
                ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb))
            }
            // A number sorts after text at the same place: `1.0` > `1.rc`.
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => ra.cmp(rb),
        };
        if ord != Ordering::Equal {
            return ord;
        }
        a = rest_a;
        b = rest_b;
    }
}

/// Splits off the leading run of digits, or of non-digits.
fn run(s: &[u8]) -> (&[u8], &[u8]) {
    let digit = s[0].is_ascii_digit();
    let end = s
        .iter()
        .position(|c| c.is_ascii_digit() != digit)
        .unwrap_or(s.len());
    s.split_at(end)
}

fn trim_zeros(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| c != b'0').unwrap_or(s.len());
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_versions() {
        let mut v = vec!["1.10", "1.9", "2", "1.0.1", "1.0", "10", "1.0-rc1", "01.2"];
        v.sort_by(|a, b| compare(a, b));
        assert_eq!(
            v,
            ["1.0", "1.0-rc1", "1.0.1", "01.2", "1.9", "1.10", "2", "10"]
        );
        assert_eq!(compare("1.02", "1.2"), Ordering::Equal);
    }
}
