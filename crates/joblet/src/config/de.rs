//! Deserializers for values with their own syntax: durations, addresses,
//! bounded numbers; each error names the accepted form.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(joblet_core::parse::DURATION_FORM)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v).map(Duration::from_secs).map_err(|_| {
                E::custom(format!(
                    "invalid value {v}: expected {}",
                    joblet_core::parse::DURATION_FORM
                ))
            })
        }
        /// `0.5`: seconds with a fraction, kept to the millisecond.
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Duration, E> {
            let ms = v * 1000.0;
            let whole = ms.round();
            if v.is_finite() && v >= 0.0 && (ms - whole).abs() < 1e-6 && whole <= 1e15 {
                Ok(Duration::from_millis(whole as u64))
            } else {
                Err(E::custom(format!(
                    "invalid value {v}: expected {}",
                    joblet_core::parse::DURATION_FORM
                )))
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
            joblet_core::parse::parse_duration(v).map_err(E::custom)
        }
    }
    d.deserialize_any(V)
}

pub(super) fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| serde::de::Error::custom(format!("invalid value {s:?}: expected IP:PORT like 127.0.0.1:50051 or 0.0.0.0:50051 ([::]:50051 for IPv6)")))
}

pub(super) fn de_pids_max<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = i64::deserialize(d)?;
    if (8..=4_194_304).contains(&n) {
        Ok(n as u64)
    } else {
        Err(serde::de::Error::custom(format!(
            "invalid value {n}: expected a number of processes from 8 to 4194304"
        )))
    }
}

pub(super) fn de_max_running<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let n = i64::deserialize(d)?;
    if (1..=100_000).contains(&n) {
        Ok(n as usize)
    } else {
        Err(serde::de::Error::custom(format!(
            "invalid value {n}: expected a number of jobs from 1 to 100000"
        )))
    }
}
