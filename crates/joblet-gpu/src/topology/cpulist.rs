//! CPU sets as the kernel writes them: cpulists (`0-3,8`) and hex masks
//! (`0000,000000ff,ff000000`), parsed into sorted ranges and printed back
//! as a canonical cpulist.

use std::fmt;

/// Highest CPU number accepted (the kernel's `NR_CPUS` is at most 8192;
/// this leaves room without letting a garbled file describe 4 G CPUs).
pub const MAX_CPU: u32 = 1 << 20;

/// A set of CPU (or NUMA node) numbers, kept as sorted, merged,
/// inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet {
    ranges: Vec<(u32, u32)>,
}

/// Why a cpulist or cpumask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("`{item}` is not a CPU number or range `a-b`")]
    BadItem { item: String },
    #[error("range `{item}` ends before it starts")]
    Reversed { item: String },
    #[error("CPU {cpu} is above the supported maximum {MAX_CPU}")]
    TooLarge { cpu: u64 },
    #[error("`{word}` is not a 32-bit hex mask word")]
    BadMaskWord { word: String },
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> CpuSet {
        CpuSet::default()
    }

    /// A set from arbitrary (unsorted, overlapping) inclusive ranges.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> CpuSet {
        let mut ranges: Vec<(u32, u32)> = ranges.into_iter().filter(|(a, b)| a <= b).collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            match merged.last_mut() {
                Some(last) if start <= last.1.saturating_add(1) => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        CpuSet { ranges: merged }
    }

    /// A set from individual numbers.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
        CpuSet::from_ranges(cpus.into_iter().map(|c| (c, c)))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Sorted, merged, inclusive ranges.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Number of members.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| u64::from(b - a) + 1).sum()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= cpu && cpu <= b)
    }

    /// Every member of `other` is in `self`.
    pub fn is_superset(&self, other: &CpuSet) -> bool {
        other
            .ranges
            .iter()
            .all(|&(a, b)| self.ranges.iter().any(|&(x, y)| x <= a && b <= y))
    }

    /// `self` and `other` share a member.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.ranges
            .iter()
            .any(|&(a, b)| other.ranges.iter().any(|&(x, y)| a.max(x) <= b.min(y)))
    }

    /// Members of both.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut out = Vec::new();
        for &(a, b) in &self.ranges {
            for &(x, y) in &other.ranges {
                let (lo, hi) = (a.max(x), b.min(y));
                if lo <= hi {
                    out.push((lo, hi));
                }
            }
        }
        CpuSet::from_ranges(out)
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's cpulist form: `0-3,8,10-11`; empty for the empty set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

fn parse_cpu(s: &str, item: &str) -> Result<u32, CpuListError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::BadItem {
            item: item.to_string(),
        });
    }
    let value: u64 = s
        .parse()
        .map_err(|_| CpuListError::TooLarge { cpu: u64::MAX })?;
    if value > u64::from(MAX_CPU) {
        return Err(CpuListError::TooLarge { cpu: value });
    }
    // Checked against MAX_CPU above, so it fits.
    u32::try_from(value).map_err(|_| CpuListError::TooLarge { cpu: value })
}

/// Parse a cpulist (`local_cpulist`, `node*/cpulist`, `cpu/online`):
/// comma-separated numbers and `a-b` ranges, surrounding whitespace
/// ignored. An empty (or all-whitespace) list is the empty set.
pub fn parse_cpulist(text: &str) -> Result<CpuSet, CpuListError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(CpuSet::new());
    }
    let mut ranges = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (start, end) = match item.split_once('-') {
            Some((a, b)) => (parse_cpu(a, item)?, parse_cpu(b, item)?),
            None => {
                let c = parse_cpu(item, item)?;
                (c, c)
            }
        };
        if end < start {
            return Err(CpuListError::Reversed {
                item: item.to_string(),
            });
        }
        ranges.push((start, end));
    }
    Ok(CpuSet::from_ranges(ranges))
}

/// Parse a hex cpumask (`local_cpus`, `cpumap`): comma-separated 32-bit
/// words, most significant first.
pub fn parse_cpumask(text: &str) -> Result<CpuSet, CpuListError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(CpuSet::new());
    }
    let words: Vec<&str> = text.split(',').collect();
    let mut cpus = Vec::new();
    for (i, word) in words.iter().rev().enumerate() {
        let word = word.trim();
        if word.is_empty() || word.len() > 8 || !word.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CpuListError::BadMaskWord {
                word: word.to_string(),
            });
        }
        let bits = u32::from_str_radix(word, 16).map_err(|_| CpuListError::BadMaskWord {
            word: word.to_string(),
        })?;
        if bits == 0 {
            continue;
        }
        let base = (i as u64) * 32;
        if base + 31 > u64::from(MAX_CPU) {
            return Err(CpuListError::TooLarge { cpu: base + 31 });
        }
        for bit in 0..32u32 {
            if bits & (1 << bit) != 0 {
                // base + bit <= MAX_CPU (checked above), so it fits in u32.
                cpus.push(base as u32 + bit);
            }
        }
    }
    Ok(CpuSet::from_cpus(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_round_trip() {
        let set = parse_cpulist("0-3,8,10-11\n").unwrap();
        assert_eq!(set.to_string(), "0-3,8,10-11");
        assert_eq!(set.len(), 7);
        assert_eq!(parse_cpulist("3,1,2,0").unwrap().to_string(), "0-3");
        assert_eq!(parse_cpulist("").unwrap(), CpuSet::new());
        assert_eq!(parse_cpulist(" \n").unwrap().to_string(), "");
        for bad in ["a", "1-", "-1", "3-1", "1,,2", "1-2-3", "99999999999", "+1"] {
            assert!(parse_cpulist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpumasks_become_cpulists() {
        // POWER9 snapshot: 0007:00:00.0 local_cpus.
        let set = parse_cpumask("0000,00000000,000000ff,ff000000,00000000,00000000\n").unwrap();
        assert_eq!(set.to_string(), "88-103");
        assert_eq!(parse_cpumask("ff").unwrap().to_string(), "0-7");
        assert_eq!(
            parse_cpumask("00000001,00000001").unwrap().to_string(),
            "0,32"
        );
        for bad in ["xyz", "1,,2", "123456789"] {
            assert!(parse_cpumask(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_relations() {
        let node0 = parse_cpulist("0-87").unwrap();
        let gpu = parse_cpulist("0-15").unwrap();
        assert!(node0.is_superset(&gpu));
        assert!(!gpu.is_superset(&node0));
        assert!(node0.intersects(&gpu));
        assert!(!parse_cpulist("88-90").unwrap().intersects(&gpu));
        assert!(node0.is_superset(&CpuSet::new()));
        let online = parse_cpulist("0-15,88-103").unwrap();
        assert_eq!(node0.intersection(&online).to_string(), "0-15");
        assert!(parse_cpulist("88-175")
            .unwrap()
            .intersection(&gpu)
            .is_empty());
    }
}
