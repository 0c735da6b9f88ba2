//! A job's output as a log reader is sent it: [`LogEvent`] ↔ `pb::LogEvent`.

use joblet_core::joblog::{JobEnd, LogEvent, Record, Stream};
use joblet_core::FieldError;

use super::state::{required_state_from_pb, state_to_pb};
use crate::pb;

pub fn log_event_to_pb(e: LogEvent) -> pb::LogEvent {
    let event = match e {
        LogEvent::Chunk(r) => pb::log_event::Event::Chunk(pb::LogChunk {
            seq: r.seq,
            stream: stream_to_pb(r.stream) as i32,
            data: r.data,
            unix_ms: r.unix_ms,
        }),
        LogEvent::Ended(end) => pb::log_event::Event::Ended(pb::JobEnded {
            state: state_to_pb(end.state) as i32,
            exit_code: end.exit_code,
            reason: end.reason,
            total_bytes: end.total_bytes,
        }),
    };
    pb::LogEvent { event: Some(event) }
}

/// Output or a job's end from the wire. RunJobFollow's `accepted` job is
/// neither (a client reads it apart from the output), and is refused here.
pub fn log_event_from_pb(e: pb::LogEvent) -> Result<LogEvent, FieldError> {
    match e.event {
        Some(pb::log_event::Event::Chunk(c)) => Ok(LogEvent::Chunk(Record {
            stream: stream_from_pb(c.stream)?,
            seq: c.seq,
            unix_ms: c.unix_ms,
            data: c.data,
        })),
        Some(pb::log_event::Event::Ended(end)) => Ok(LogEvent::Ended(JobEnd {
            state: required_state_from_pb("ended.state", end.state)?,
            exit_code: end.exit_code,
            reason: end.reason,
            total_bytes: end.total_bytes,
        })),
        Some(pb::log_event::Event::Accepted(_)) => Err(FieldError::new(
            "accepted",
            "is the job RunJobFollow accepted, not output",
        )),
        None => Err(FieldError::new("event", "is empty")),
    }
}

pub fn stream_to_pb(s: Stream) -> pb::LogStream {
    match s {
        Stream::Stdout => pb::LogStream::Stdout,
        Stream::Stderr => pb::LogStream::Stderr,
    }
}

fn stream_from_pb(v: i32) -> Result<Stream, FieldError> {
    match pb::LogStream::try_from(v) {
        Ok(pb::LogStream::Stdout) => Ok(Stream::Stdout),
        Ok(pb::LogStream::Stderr) => Ok(Stream::Stderr),
        _ => Err(FieldError::new(
            "chunk.stream",
            format!("unknown stream number {v}; expected 1 (stdout) or 2 (stderr)"),
        )),
    }
}
