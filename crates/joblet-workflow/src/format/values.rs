//! Checked values of the workflow format. Each is checked inside its own
//! visitor, while its YAML node is read, so serde_norway reports a bad
//! value with its own line, column and key path, followed by the form that
//! is accepted.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use joblet_core::parse::{parse_duration, parse_size_mb, SIZE_MB_FORM};
use joblet_core::text::clip;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Unexpected, Visitor};
use serde::Deserialize;

use crate::need::Need;

/// At most this many retries of a job.
pub const MAX_RETRIES: u8 = 10;

/// The longest `retry_backoff`: one day.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(24 * 3600);

/// A mapping read in file order; a key given twice is refused at the
/// second one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ordered<T> {
    pub entries: Vec<(String, T)>,
    /// Each key's place in `entries`.
    pub index: HashMap<String, usize>,
}

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered {
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut out = Ordered::default();
                while let Some(key) = map.next_key_seed(UniqueKey { seen: &out.index })? {
                    let value = map.next_value()?;
                    out.index.insert(key.clone(), out.entries.len());
                    out.entries.push((key, value));
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A mapping key not seen before in its mapping.
struct UniqueKey<'a> {
    seen: &'a HashMap<String, usize>,
}

impl<'de> DeserializeSeed<'de> for UniqueKey<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for UniqueKey<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        if self.seen.contains_key(v) {
            return Err(E::custom(format_args!(
                "`{}` is given twice: give each name once in a mapping",
                clip(v)
            )));
        }
        Ok(v.to_owned())
    }
}

/// One entry of `requires`: `JOB: STATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawRequirement {
    pub job: String,
    pub need: Need,
}

impl<'de> Deserialize<'de> for RawRequirement {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawRequirement;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a requirement `JOB: STATE`, like `- data-preprocessing: COMPLETED` \
                     (STATE is COMPLETED, FAILED, STOPPED or ANY)",
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawRequirement, A::Error> {
                let Some(job) = map.next_key::<String>()? else {
                    return Err(de::Error::custom(
                        "an empty requirement: write `- JOB: STATE`, like `- data-preprocessing: COMPLETED`",
                    ));
                };
                let need = map.next_value()?;
                if map.next_key::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom(
                        "a requirement names one job: write one `- JOB: STATE` entry per job",
                    ));
                }
                Ok(RawRequirement { job, need })
            }
        }
        d.deserialize_map(V)
    }
}

/// A whole number, 0 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Whole(pub u64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Whole;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number, 0 or more")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Whole, E> {
                Ok(Whole(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Whole, E> {
                u64::try_from(v)
                    .map(Whole)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// `gpu_count`: a whole number of GPUs, or a share of one GPU like `0.5`
/// (to the thousandth), as `rnx job run --gpu` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GpuAmount {
    pub count: u64,
    /// 1 to 999 thousandths of one GPU (`count` is then 1); 0 = whole GPUs.
    pub milli: u64,
}

impl<'de> Deserialize<'de> for GpuAmount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GpuAmount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number of GPUs (0 or more), or a share of one GPU from 0.001 to 0.999 like 0.5")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GpuAmount, E> {
                Ok(GpuAmount { count: v, milli: 0 })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GpuAmount, E> {
                u64::try_from(v)
                    .map(|count| GpuAmount { count, milli: 0 })
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<GpuAmount, E> {
                let thousandths = v * 1000.0;
                let rounded = thousandths.round();
                let exact = (thousandths - rounded).abs() < 1e-6;
                if v.fract() == 0.0 && v >= 0.0 && v <= u64::MAX as f64 {
                    // Whole and in range: the cast is exact.
                    return Ok(GpuAmount {
                        count: v as u64,
                        milli: 0,
                    });
                }
                if exact && v > 0.0 && v < 1.0 {
                    return Ok(GpuAmount {
                        count: 1,
                        milli: rounded as u64,
                    });
                }
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// A size in MiB: a whole number of MiB, or a size like `8GB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SizeMb(pub u64);

impl<'de> Deserialize<'de> for SizeMb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SizeMb;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(SIZE_MB_FORM)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeMb, E> {
                Ok(SizeMb(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeMb, E> {
                u64::try_from(v)
                    .map(SizeMb)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SizeMb, E> {
                parse_size_mb(v).map(SizeMb).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `retries`: 0 to [`MAX_RETRIES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retries(pub u8);

impl<'de> Deserialize<'de> for Retries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Retries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a number of retries from 0 to {MAX_RETRIES}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Retries, E> {
                u8::try_from(v)
                    .ok()
                    .filter(|n| *n <= MAX_RETRIES)
                    .map(Retries)
                    .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Retries, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration like `30m`, `1h30m`, `500ms` or a bare number of seconds
/// (joblet-core's [`parse_duration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span(pub Duration);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(SpanVisitor { max: None })
    }
}

/// `retry_backoff`: a duration up to [`MAX_RETRY_BACKOFF`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff(pub Duration);

impl<'de> Deserialize<'de> for Backoff {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(SpanVisitor {
            max: Some(MAX_RETRY_BACKOFF),
        })
        .map(|s| Backoff(s.0))
    }
}

struct SpanVisitor {
    max: Option<Duration>,
}

impl Visitor<'_> for SpanVisitor {
    type Value = Span;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration like 30m, 1h30m or 500ms")?;
        if let Some(max) = self.max {
            write!(f, ", at most {}s", max.as_secs())?;
        }
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Span, E> {
        let d = parse_duration(v).map_err(E::custom)?;
        if self.max.is_some_and(|max| d > max) {
            return Err(E::invalid_value(Unexpected::Str(&clip(v)), &self));
        }
        Ok(Span(d))
    }
}
