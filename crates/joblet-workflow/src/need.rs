//! What a requirement asks of the job it names, and how a job finished.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// The state a requirement `- JOB: STATE` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Need {
    /// The job ended COMPLETED.
    Completed,
    /// The job ended FAILED (after its last attempt).
    Failed,
    /// The job ended STOPPED.
    Stopped,
    /// The job is finished, whatever its state: COMPLETED, FAILED, STOPPED
    /// or CANCELED. For jobs that must run after another one whatever
    /// happened to it (cleanup, reports).
    Any,
}

/// How a job's last attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EndState {
    Completed,
    Failed,
    Stopped,
}

/// A job's final state in a workflow run: it ran and ended, or it never
/// ran (canceled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Final {
    Ended(EndState),
    Canceled,
}

pub const NEED_FORM: &str = "COMPLETED, FAILED, STOPPED or ANY (finished in any state)";

impl Need {
    pub const ALL: [Need; 4] = [Need::Completed, Need::Failed, Need::Stopped, Need::Any];

    /// Whether a job that finished in `fin` satisfies this requirement.
    pub fn accepts(self, fin: Final) -> bool {
        match (self, fin) {
            (Need::Any, _) => true,
            (need, Final::Ended(end)) => need.end_state() == Some(end),
            (_, Final::Canceled) => false,
        }
    }

    /// The one end state this requirement accepts; `None` for [`Need::Any`].
    pub fn end_state(self) -> Option<EndState> {
        match self {
            Need::Completed => Some(EndState::Completed),
            Need::Failed => Some(EndState::Failed),
            Need::Stopped => Some(EndState::Stopped),
            Need::Any => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Need::Completed => "COMPLETED",
            Need::Failed => "FAILED",
            Need::Stopped => "STOPPED",
            Need::Any => "ANY",
        }
    }
}

impl EndState {
    pub fn as_str(self) -> &'static str {
        match self {
            EndState::Completed => "COMPLETED",
            EndState::Failed => "FAILED",
            EndState::Stopped => "STOPPED",
        }
    }
}

impl Final {
    pub fn as_str(self) -> &'static str {
        match self {
            Final::Ended(end) => end.as_str(),
            Final::Canceled => "CANCELED",
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for EndState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Final {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Read from a string while its YAML scalar is read, so a bad state is
/// reported at its own line and column with the accepted ones.
impl<'de> Deserialize<'de> for Need {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Need, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Need;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a state: {NEED_FORM}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Need, E> {
                Need::ALL
                    .into_iter()
                    .find(|n| n.as_str() == v)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_need_accepts_exactly_its_state_and_any_accepts_all() {
        let finals = [
            Final::Ended(EndState::Completed),
            Final::Ended(EndState::Failed),
            Final::Ended(EndState::Stopped),
            Final::Canceled,
        ];
        for need in Need::ALL {
            for fin in finals {
                let want = need == Need::Any || need.as_str() == fin.as_str();
                assert_eq!(need.accepts(fin), want, "{need} {fin}");
            }
        }
    }

    #[test]
    fn needs_read_back_from_json() {
        for need in Need::ALL {
            let json = serde_json::to_string(&need).unwrap();
            assert_eq!(serde_json::from_str::<Need>(&json).unwrap(), need);
        }
        let e = serde_json::from_str::<Need>("\"completed\"").unwrap_err();
        assert!(
            e.to_string().contains("COMPLETED, FAILED, STOPPED or ANY"),
            "{e}"
        );
    }
}
