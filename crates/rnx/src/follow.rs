//! Copying a job's output to stdout/stderr exactly once, across
//! disconnects: `rnx job log [-f]` and `rnx job run --follow` share it.
//!
//! Every chunk carries `seq`, the offset of its first byte in the job's whole
//! output. The client remembers the next offset it expects; after a broken
//! stream it reopens from there, cuts off what it has already written and
//! refuses a chunk that would leave a hole.

use std::error::Error as _;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use joblet_proto::pb::{self, log_event::Event};
use tokio::time::Instant;
use tonic::{Code, Status};

use crate::client::Client;

/// The line printed (once per outage) when the stream breaks.
pub const LOST_NOTICE: &str = "rnx: lost connection to the node; reconnecting…";

/// How to retry after the stream breaks while following.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// Give up when an outage lasts this long.
    pub give_up_after: Duration,
}

impl ReconnectPolicy {
    /// 100 ms doubling to 2 s, for at most `give_up_after`.
    pub fn new(give_up_after: Duration) -> Self {
        ReconnectPolicy {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            give_up_after,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("output is missing bytes {expected}..{got}: the node sent a chunk starting at byte {got} while byte {expected} was expected")]
    Gap { expected: u64, got: u64 },
    #[error("lost connection to the node for {}: {last}. The job keeps running on the node; resume with `rnx job log -f {job}`", humantime::format_duration(*.after))]
    Lost {
        job: String,
        after: Duration,
        last: String,
    },
    /// The node answered with an error (or the transport failed while not following).
    #[error("{0}")]
    Status(Status),
    #[error("cannot write the job's output: {0}")]
    Output(#[source] std::io::Error),
}

/// How the copy ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The job's end, when the node reported it (always when following).
    pub ended: Option<pb::JobEnded>,
    /// Offset after the last byte written.
    pub next_seq: u64,
}

pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::LogEvent, Status>> + Send>>;

/// Where log events come from; the real one is [`GrpcLogs`].
pub trait LogSource {
    /// Opens the job's output from byte `from_seq`.
    fn open(&mut self, from_seq: u64) -> impl Future<Output = Result<EventStream, Status>>;
}

/// `GetJobLogs` on a connected client.
pub struct GrpcLogs {
    pub client: Client,
    pub job_id: String,
    pub follow: bool,
    /// A stream opened already from byte 0 (RunJobFollow's, past its
    /// `accepted` event): the first open from byte 0 takes it.
    pub first: Option<EventStream>,
}

impl LogSource for GrpcLogs {
    async fn open(&mut self, from_seq: u64) -> Result<EventStream, Status> {
        if from_seq == 0 {
            if let Some(stream) = self.first.take() {
                return Ok(stream);
            }
        }
        self.first = None;
        let request = pb::GetJobLogsRequest {
            job_id: self.job_id.clone(),
            from_seq,
            follow: self.follow,
        };
        let stream = self.client.get_job_logs(request).await?.into_inner();
        Ok(Box::pin(stream))
    }
}

/// The next expected byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogCursor {
    next: u64,
}

impl LogCursor {
    pub fn new(from: u64) -> Self {
        LogCursor { next: from }
    }

    pub fn next(&self) -> u64 {
        self.next
    }

    /// The part of a chunk not written yet; moves the cursor past it.
    pub fn accept<'a>(&mut self, seq: u64, data: &'a [u8]) -> Result<&'a [u8], FollowError> {
        if seq > self.next {
            return Err(FollowError::Gap {
                expected: self.next,
                got: seq,
            });
        }
        let already = usize::try_from(self.next - seq).unwrap_or(usize::MAX);
        let fresh = data.get(already..).unwrap_or(&[]);
        self.next += fresh.len() as u64;
        Ok(fresh)
    }
}

/// Whether a status means "the connection broke" (worth reconnecting) rather
/// than "the node said no".
pub fn is_transient(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable | Code::Unknown | Code::Cancelled => true,
        // Locally made from an h2/hyper error, not sent by the node.
        Code::Internal => {
            status.source().is_some() || status.message().starts_with("h2 protocol error")
        }
        _ => false,
    }
}

enum StreamEnd {
    Ended(pb::JobEnded),
    Closed,
    Broken(Status),
}

/// Copies output to `out` (stdout chunks) and `err` (stderr chunks, and
/// rnx's reconnect notice). With `follow`, reconnects after transient
/// failures and returns only once the node reports the job ended.
pub async fn copy_logs<S, O, E>(
    source: &mut S,
    job_id: &str,
    follow: Option<ReconnectPolicy>,
    out: &mut O,
    err: &mut E,
) -> Result<Outcome, FollowError>
where
    S: LogSource,
    O: Write,
    E: Write,
{
    let mut cursor = LogCursor::new(0);
    // Start of the current outage and the next retry delay.
    let mut outage: Option<(Instant, Duration)> = None;
    loop {
        let end = match source.open(cursor.next()).await {
            Ok(stream) => drain(stream, &mut cursor, &mut outage, out, err).await?,
            Err(status) => StreamEnd::Broken(status),
        };
        let status = match end {
            StreamEnd::Ended(ended) => {
                return Ok(Outcome {
                    ended: Some(ended),
                    next_seq: cursor.next(),
                })
            }
            StreamEnd::Closed if follow.is_none() => {
                return Ok(Outcome {
                    ended: None,
                    next_seq: cursor.next(),
                })
            }
            StreamEnd::Closed => Status::unavailable("the log stream closed before the job ended"),
            StreamEnd::Broken(status) => status,
        };
        let policy = match follow {
            Some(policy) if is_transient(&status) => policy,
            _ => return Err(FollowError::Status(status)),
        };
        let (since, delay) = match outage {
            Some(o) => o,
            None => {
                writeln!(err, "{LOST_NOTICE}").map_err(FollowError::Output)?;
                err.flush().map_err(FollowError::Output)?;
                (Instant::now(), policy.first_delay)
            }
        };
        tracing::debug!(code = ?status.code(), message = status.message(), "log stream broke");
        let elapsed = since.elapsed();
        if elapsed >= policy.give_up_after {
            return Err(FollowError::Lost {
                job: job_id.to_owned(),
                after: policy.give_up_after,
                last: status.message().to_owned(),
            });
        }
        tokio::time::sleep(delay.min(policy.give_up_after - elapsed)).await;
        outage = Some((since, (delay * 2).min(policy.max_delay)));
    }
}

async fn drain<O: Write, E: Write>(
    mut stream: EventStream,
    cursor: &mut LogCursor,
    outage: &mut Option<(Instant, Duration)>,
    out: &mut O,
    err: &mut E,
) -> Result<StreamEnd, FollowError> {
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(pb::LogEvent { event: Some(event) }) => event,
            // An event this build does not know: skip it.
            Ok(pb::LogEvent { event: None }) => continue,
            Err(status) => return Ok(StreamEnd::Broken(status)),
        };
        *outage = None;
        match event {
            Event::Chunk(chunk) => {
                let fresh = cursor.accept(chunk.seq, &chunk.data)?;
                if fresh.is_empty() {
                    continue;
                }
                let sink: &mut dyn Write = if chunk.stream == pb::LogStream::Stderr as i32 {
                    err
                } else {
                    out
                };
                sink.write_all(fresh).map_err(FollowError::Output)?;
                sink.flush().map_err(FollowError::Output)?;
            }
            Event::Ended(ended) => return Ok(StreamEnd::Ended(ended)),
            // RunJobFollow's first event, taken before the copy starts.
            Event::Accepted(_) => continue,
        }
    }
    Ok(StreamEnd::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn cursor_trims_overlap_and_refuses_gaps() {
        let mut c = LogCursor::new(0);
        assert_eq!(c.accept(0, b"hello").unwrap(), b"hello");
        assert_eq!(c.next(), 5);
        assert_eq!(c.accept(3, b"lo world").unwrap(), b" world");
        assert_eq!(c.accept(0, b"hello").unwrap(), b"");
        assert_eq!(c.next(), 11);
        assert!(matches!(
            c.accept(12, b"x"),
            Err(FollowError::Gap {
                expected: 11,
                got: 12
            })
        ));
    }

    fn chunk(seq: u64, stream: pb::LogStream, data: &[u8]) -> Result<pb::LogEvent, Status> {
        Ok(pb::LogEvent {
            event: Some(Event::Chunk(pb::LogChunk {
                seq,
                stream: stream as i32,
                data: data.to_vec(),
                unix_ms: 0,
            })),
        })
    }

    fn ended(code: i32, total: u64) -> Result<pb::LogEvent, Status> {
        Ok(pb::LogEvent {
            event: Some(Event::Ended(pb::JobEnded {
                state: pb::JobState::Completed as i32,
                exit_code: Some(code),
                reason: String::new(),
                total_bytes: total,
            })),
        })
    }

    /// A node whose whole output is `log`; each open serves the next
    /// scripted stream, which replays from the asked offset (rounded down to
    /// a chunk start, as a real node may) and then breaks or ends.
    struct Scripted {
        log: Vec<(pb::LogStream, Vec<u8>)>,
        /// Per open: how many chunks to send, then Some(status) to break with
        /// or None to end the job.
        script: VecDeque<Result<(usize, Option<Status>), Status>>,
        opened_from: Vec<u64>,
    }

    impl LogSource for Scripted {
        async fn open(&mut self, from_seq: u64) -> Result<EventStream, Status> {
            self.opened_from.push(from_seq);
            let (n, then) = self.script.pop_front().expect("script too short")?;
            let mut events = Vec::new();
            let mut seq = 0u64;
            let mut total = 0u64;
            for (stream, data) in &self.log {
                let len = data.len() as u64;
                // Also replay the chunk that ends at from_seq (overlap).
                if seq + len >= from_seq && events.len() < n {
                    events.push(chunk(seq, *stream, data));
                }
                seq += len;
                total += len;
            }
            match then {
                Some(status) => events.push(Err(status)),
                None => events.push(ended(3, total)),
            }
            Ok(Box::pin(futures::stream::iter(events)))
        }
    }

    fn fast() -> ReconnectPolicy {
        ReconnectPolicy {
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            give_up_after: Duration::from_secs(5),
        }
    }

    fn log() -> Vec<(pb::LogStream, Vec<u8>)> {
        vec![
            (pb::LogStream::Stdout, b"one\n".to_vec()),
            (pb::LogStream::Stderr, b"warn\n".to_vec()),
            (pb::LogStream::Stdout, b"two\n".to_vec()),
            (pb::LogStream::Stdout, b"three\n".to_vec()),
        ]
    }

    #[tokio::test]
    async fn reconnects_and_writes_every_byte_once() {
        let mut src = Scripted {
            log: log(),
            script: VecDeque::from([
                Ok((2, Some(Status::unavailable("connection reset")))),
                Err(Status::unavailable("connection refused")),
                Ok((2, Some(Status::unknown("error reading a body")))),
                Ok((9, None)),
            ]),
            opened_from: vec![],
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let outcome = copy_logs(&mut src, "job", Some(fast()), &mut out, &mut err)
            .await
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "one\ntwo\nthree\n");
        let err = String::from_utf8(err).unwrap();
        assert_eq!(err.matches(LOST_NOTICE).count(), 2, "{err}");
        assert_eq!(err.replace(&format!("{LOST_NOTICE}\n"), ""), "warn\n");
        assert_eq!(src.opened_from, vec![0, 9, 9, 13]);
        assert_eq!(outcome.next_seq, 19);
        assert_eq!(outcome.ended.unwrap().exit_code, Some(3));
    }

    #[tokio::test]
    async fn refusals_are_not_retried() {
        let mut src = Scripted {
            log: log(),
            script: VecDeque::from([Err(Status::not_found("no job with id or prefix \"ab\""))]),
            opened_from: vec![],
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = copy_logs(&mut src, "ab", Some(fast()), &mut out, &mut err)
            .await
            .unwrap_err();
        assert!(matches!(e, FollowError::Status(s) if s.code() == Code::NotFound));
        assert!(err.is_empty());
    }

    #[tokio::test]
    async fn without_follow_a_break_is_an_error() {
        let mut src = Scripted {
            log: log(),
            script: VecDeque::from([Ok((1, Some(Status::unavailable("reset"))))]),
            opened_from: vec![],
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = copy_logs(&mut src, "j", None, &mut out, &mut err)
            .await
            .unwrap_err();
        assert!(matches!(e, FollowError::Status(_)));
        assert_eq!(out, b"one\n");
    }

    #[tokio::test]
    async fn gives_up_after_the_reconnect_timeout() {
        let mut src = Scripted {
            log: log(),
            script: (0..1000)
                .map(|_| Err(Status::unavailable("connection refused")))
                .collect(),
            opened_from: vec![],
        };
        let policy = ReconnectPolicy {
            give_up_after: Duration::from_millis(30),
            ..fast()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = copy_logs(&mut src, "abc", Some(policy), &mut out, &mut err)
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, FollowError::Lost { .. }), "{text}");
        assert!(text.contains("rnx job log -f abc"), "{text}");
        assert_eq!(
            String::from_utf8(err).unwrap().matches(LOST_NOTICE).count(),
            1
        );
    }

    #[tokio::test]
    async fn a_gap_is_an_error() {
        struct Gappy;
        impl LogSource for Gappy {
            async fn open(&mut self, _: u64) -> Result<EventStream, Status> {
                Ok(Box::pin(futures::stream::iter(vec![
                    chunk(0, pb::LogStream::Stdout, b"ab"),
                    chunk(5, pb::LogStream::Stdout, b"cd"),
                ])))
            }
        }
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = copy_logs(&mut Gappy, "j", Some(fast()), &mut out, &mut err)
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                FollowError::Gap {
                    expected: 2,
                    got: 5
                }
            ),
            "{e}"
        );
        assert_eq!(out, b"ab");
    }
}
