//! Where a node of the workflow file is: line and column, for the errors
//! found after serde has read the file (an unknown requirement, a cycle, a
//! request the node cannot run).
//!
//! serde_norway keeps no spans, but it does put the line and column of the
//! node being read on every error raised while that node is read. So the
//! file is read a second time — only when there is an error to report —
//! by a walker that follows a path of keys and indexes and raises a marker
//! error while reading the target node; the marker comes back with the
//! target's position. Being serde_norway's own parser, it agrees with the
//! first reading on everything YAML allows (flow mappings, quoted keys,
//! comments, anchors), which a scanner over the text lines would have to
//! imitate.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One step from a node to one inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Into the value of this key of a mapping; as the last step, the key
    /// itself.
    Key(String),
    /// Into this item of a sequence.
    Index(usize),
    /// The first key of a mapping (the job of a `- JOB: STATE` entry).
    FirstKey,
}

/// The marker error's text: no YAML error says this.
const MARK: &str = "\u{1}joblet-workflow-locate\u{1}";

/// Line and column (1-based) of the node at `path` in `text`; `None` when
/// there is none.
pub(crate) fn locate(text: &str, path: &[Step]) -> Option<(usize, usize)> {
    let de = serde_norway::Deserializer::from_str(text);
    match (Find { path }).deserialize(de) {
        Err(e) if e.to_string().contains(MARK) => e.location().map(|l| (l.line(), l.column())),
        _ => None,
    }
}

/// Follows `path` from the node it is given.
struct Find<'p> {
    path: &'p [Step],
}

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.path.first() {
            None => d.deserialize_any(Here),
            Some(Step::Index(_)) => d.deserialize_seq(self),
            Some(Step::Key(_) | Step::FirstKey) => d.deserialize_map(self),
        }
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping or a sequence")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (want, rest) = match self.path.split_first() {
            Some((Step::Key(k), rest)) => (k.as_str(), rest),
            Some((Step::FirstKey, _)) => {
                map.next_key_seed(Here)?;
                return Ok(());
            }
            _ => return Ok(()),
        };
        while let Some(hit) = map.next_key_seed(Probe {
            want,
            last: rest.is_empty(),
        })? {
            if hit {
                return map.next_value_seed(Find { path: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (i, rest) = match self.path.split_first() {
            Some((Step::Index(i), rest)) => (*i, rest),
            _ => return Ok(()),
        };
        for _ in 0..i {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Find { path: rest })?;
        Ok(())
    }
}

/// A mapping key: `Ok(true)` if it is the one wanted, the marker if it is
/// and it is the target.
struct Probe<'a> {
    want: &'a str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Probe<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match (v == self.want, self.last) {
            (true, true) => Err(E::custom(MARK)),
            (hit, _) => Ok(hit),
        }
    }
}

/// The target: whatever it is, reading it raises the marker (every
/// visit a visitor does not define is an error naming `expecting`).
struct Here;

impl<'de> DeserializeSeed<'de> for Here {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Here {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# a comment
name: demo
jobs:
  a:
    command: x
  \"b\":
    command: y
    requires:
      - a: COMPLETED
      - {c: ANY}
  c: {command: z, args: [p, q]}
";

    fn key(k: &str) -> Step {
        Step::Key(k.to_owned())
    }

    #[test]
    fn keys_items_and_first_keys_are_found_where_they_are() {
        use Step::{FirstKey, Index};
        let at = |p: &[Step]| locate(TEXT, p);
        assert_eq!(at(&[key("jobs")]), Some((3, 1)));
        assert_eq!(at(&[key("jobs"), key("a")]), Some((4, 3)));
        assert_eq!(at(&[key("jobs"), key("b")]), Some((6, 3)));
        assert_eq!(
            at(&[key("jobs"), key("b"), key("requires"), Index(0), FirstKey]),
            Some((9, 9))
        );
        assert_eq!(
            at(&[key("jobs"), key("b"), key("requires"), Index(1), FirstKey]),
            Some((10, 10))
        );
        assert_eq!(at(&[key("jobs"), key("c")]), Some((11, 3)));
        assert_eq!(
            at(&[key("jobs"), key("c"), key("args"), Index(1)]),
            Some((11, 29))
        );
    }

    #[test]
    fn what_is_not_there_has_no_place() {
        use Step::Index;
        assert_eq!(locate(TEXT, &[key("jobs"), key("d")]), None);
        assert_eq!(
            locate(TEXT, &[key("jobs"), key("a"), key("requires"), Index(0)]),
            None
        );
        assert_eq!(
            locate(TEXT, &[key("jobs"), key("c"), key("args"), Index(5)]),
            None
        );
        assert_eq!(locate("jobs: [a, b", &[key("jobs"), Index(3)]), None);
        assert_eq!(
            locate("jobs: [a, b", &[key("jobs"), Index(1)]),
            Some((1, 11))
        );
    }
}
