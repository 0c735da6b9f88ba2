//! The detach key sequence (`--detach-keys`, Docker's form and default,
//! `ctrl-p,ctrl-q`) and the matcher that finds it in what the user types.

use std::fmt;

/// A sequence of keys, as the bytes a terminal sends for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachKeys(Vec<u8>);

impl DetachKeys {
    /// Parses `ctrl-p,ctrl-q`: comma-separated keys, each one printable
    /// ASCII character or `ctrl-X` with X one of `a`–`z`, `@`, `[`, `\`,
    /// `]`, `^`, `_`.
    pub fn parse(s: &str) -> Result<DetachKeys, String> {
        let form = "expected comma-separated keys, each a single character or ctrl-X (X a letter or one of @ [ \\ ] ^ _), e.g. ctrl-p,ctrl-q";
        let mut bytes = Vec::new();
        for key in s.split(',') {
            let b = match key.strip_prefix("ctrl-") {
                Some(x) if x.len() == 1 => {
                    let c = x.as_bytes()[0].to_ascii_lowercase();
                    match c {
                        b'a'..=b'z' => c - b'a' + 1,
                        b'@' => 0,
                        b'[' => 27,
                        b'\\' => 28,
                        b']' => 29,
                        b'^' => 30,
                        b'_' => 31,
                        _ => return Err(format!("{key:?} is not a key: {form}")),
                    }
                }
                _ if key.len() == 1 && key.as_bytes()[0].is_ascii_graphic() => key.as_bytes()[0],
                _ => return Err(format!("{key:?} is not a key: {form}")),
            };
            bytes.push(b);
        }
        Ok(DetachKeys(bytes))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for DetachKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self
            .0
            .iter()
            .map(|&b| match b {
                1..=26 => format!("ctrl-{}", char::from(b'a' + b - 1)),
                0 => "ctrl-@".into(),
                27 => "ctrl-[".into(),
                28 => "ctrl-\\".into(),
                29 => "ctrl-]".into(),
                30 => "ctrl-^".into(),
                31 => "ctrl-_".into(),
                b => char::from(b).to_string(),
            })
            .collect();
        f.write_str(&keys.join(","))
    }
}

/// What to do with a chunk of typed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    /// Bytes for the job (a partial sequence that did not complete is
    /// passed on once it is clear it is not the sequence).
    pub forward: Vec<u8>,
    /// The whole sequence was typed: detach after forwarding `forward`.
    pub detach: bool,
}

/// Finds the detach sequence across chunks: bytes that may start it are
/// held back until the sequence completes (detach) or breaks (they go to
/// the job, as Docker does).
#[derive(Debug, Clone)]
pub struct Matcher {
    keys: Vec<u8>,
    held: usize,
}

impl Matcher {
    pub fn new(keys: &DetachKeys) -> Matcher {
        Matcher {
            keys: keys.0.clone(),
            held: 0,
        }
    }

    pub fn scan(&mut self, input: &[u8]) -> Scanned {
        let mut forward = Vec::with_capacity(input.len());
        if self.keys.is_empty() {
            forward.extend_from_slice(input);
            return Scanned {
                forward,
                detach: false,
            };
        }
        for &b in input {
            if b == self.keys[self.held] {
                self.held += 1;
                if self.held == self.keys.len() {
                    self.held = 0;
                    return Scanned {
                        forward,
                        detach: true,
                    };
                }
                continue;
            }
            // The held prefix was not the sequence: it goes to the job.
            forward.extend_from_slice(&self.keys[..self.held]);
            self.held = 0;
            if b == self.keys[0] {
                self.held = 1;
                if self.keys.len() == 1 {
                    self.held = 0;
                    return Scanned {
                        forward,
                        detach: true,
                    };
                }
            } else {
                forward.push(b);
            }
        }
        Scanned {
            forward,
            detach: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_dockers_forms() {
        assert_eq!(
            DetachKeys::parse("ctrl-p,ctrl-q").unwrap().bytes(),
            [16, 17]
        );
        assert_eq!(
            DetachKeys::parse("ctrl-@,a,ctrl-\\").unwrap().bytes(),
            [0, b'a', 28]
        );
        assert_eq!(
            DetachKeys::parse("ctrl-p,ctrl-q").unwrap().to_string(),
            "ctrl-p,ctrl-q"
        );
        for bad in ["", "ctrl-", "ctrl-1", "ab", "ctrl-p,,ctrl-q", " "] {
            let e = DetachKeys::parse(bad).unwrap_err();
            assert!(e.contains("e.g. ctrl-p,ctrl-q"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_sequence_detaches_and_a_broken_one_is_passed_on() {
        let keys = DetachKeys::parse("ctrl-p,ctrl-q").unwrap();
        let mut m = Matcher::new(&keys);
        assert_eq!(
            m.scan(b"ls\x10"),
            Scanned {
                forward: b"ls".to_vec(),
                detach: false
            }
        );
        assert_eq!(
            m.scan(b"\x11"),
            Scanned {
                forward: vec![],
                detach: true
            }
        );
        let mut m = Matcher::new(&keys);
        assert_eq!(
            m.scan(b"\x10x"),
            Scanned {
                forward: b"\x10x".to_vec(),
                detach: false
            }
        );
        assert_eq!(
            m.scan(b"\x10\x10\x11"),
            Scanned {
                forward: b"\x10".to_vec(),
                detach: true
            }
        );
    }

    proptest! {
        /// Input without the sequence reaches the job whole, however it is
        /// chunked (once the held prefix is flushed by a later byte).
        #[test]
        fn input_without_the_sequence_is_forwarded_whole(
            data in proptest::collection::vec(prop_oneof![Just(16u8), Just(17u8), any::<u8>()], 0..200),
            cuts in proptest::collection::vec(0usize..200, 0..10),
        ) {
            let keys = DetachKeys::parse("ctrl-p,ctrl-q").unwrap();
            let detaches = data.windows(2).any(|w| w == [16, 17]);
            let mut m = Matcher::new(&keys);
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= data.len()).collect();
            cuts.sort_unstable();
            let mut out = Vec::new();
            let mut last = 0;
            let mut detached = false;
            for c in cuts.into_iter().chain([data.len()]) {
                let s = m.scan(&data[last..c]);
                out.extend(s.forward);
                last = c;
                if s.detach { detached = true; break; }
            }
            prop_assert_eq!(detached, detaches);
            if !detached {
                // A trailing ctrl-p may still be held.
                let mut expect = data.clone();
                if expect.last() == Some(&16) && out.len() + 1 == expect.len() {
                    expect.pop();
                }
                prop_assert_eq!(out, expect);
            }
        }
    }
}
