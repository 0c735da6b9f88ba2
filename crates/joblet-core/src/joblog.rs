//! The on-disk framing of a job's output.
//!
//! The shim appends one record per chunk it reads from the job's stdout or
//! stderr; the daemon reads records back to serve logs. A record is
//!
//! ```text
//! magic u8 (0xA1) | stream u8 | len u32 LE | seq u64 LE | unix_ms i64 LE | data[len]
//! ```
//!
//! `seq` is the offset of the chunk's first byte in the job's whole output
//! (TCP-style), so a client that has received `n` bytes resumes with
//! `from_seq = n` and gets every byte exactly once, across reconnects and
//! daemon restarts. A record is written with one `write`, so a reader sees at
//! worst an incomplete tail, which [`decode`] reports as "need more bytes".
//!
//! A reader of a job's output is sent [`LogEvent`]s: its records, then,
//! once the job has ended, how it ended ([`JobEnd`]).

/// First byte of every record; anything else is corruption.
pub const MAGIC: u8 = 0xA1;
/// Bytes before a record's data.
pub const HEADER_LEN: usize = 1 + 1 + 4 + 8 + 8;
/// The shim never writes a larger chunk.
pub const MAX_DATA: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout = 1,
    Stderr = 2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub stream: Stream,
    pub seq: u64,
    pub unix_ms: i64,
    pub data: Vec<u8>,
}

/// What a reader of a job's output is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    /// Output, in `seq` order.
    Chunk(Record),
    /// The job has ended and every byte of its output was sent: the last
    /// event of a stream.
    Ended(JobEnd),
}

/// How a job ended, as a log reader is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    pub state: crate::JobState,
    pub exit_code: Option<i32>,
    pub reason: String,
    /// Total bytes of output; a reader that has seen them all has the
    /// whole log.
    pub total_bytes: u64,
}

/// The header fields of a record, enough to skip its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub stream: Stream,
    pub len: usize,
    pub seq: u64,
    pub unix_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("job log is corrupt at byte {offset}: {what}")]
    Corrupt { offset: u64, what: &'static str },
}

/// Appends the encoding of one record to `out`.
pub fn encode(stream: Stream, seq: u64, unix_ms: i64, data: &[u8], out: &mut Vec<u8>) {
    debug_assert!(data.len() <= MAX_DATA);
    out.reserve(HEADER_LEN + data.len());
    out.push(MAGIC);
    out.push(stream as u8);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&unix_ms.to_le_bytes());
    out.extend_from_slice(data);
}

/// Decodes a header from the start of `buf`. `Ok(None)`: fewer than
/// [`HEADER_LEN`] bytes. `offset` is only used in error messages.
pub fn decode_header(buf: &[u8], offset: u64) -> Result<Option<Header>, LogError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[0] != MAGIC {
        return Err(LogError::Corrupt {
            offset,
            what: "bad record marker",
        });
    }
    let stream = match buf[1] {
        1 => Stream::Stdout,
        2 => Stream::Stderr,
        _ => {
            return Err(LogError::Corrupt {
                offset,
                what: "unknown stream",
            })
        }
    };
    let len = u32::from_le_bytes(buf[2..6].try_into().expect("4 bytes")) as usize;
    if len > MAX_DATA {
        return Err(LogError::Corrupt {
            offset,
            what: "record longer than the maximum",
        });
    }
    let seq = u64::from_le_bytes(buf[6..14].try_into().expect("8 bytes"));
    let unix_ms = i64::from_le_bytes(buf[14..22].try_into().expect("8 bytes"));
    Ok(Some(Header {
        stream,
        len,
        seq,
        unix_ms,
    }))
}

/// Decodes one whole record from the start of `buf`, returning it and the
/// bytes it used; `Ok(None)` if `buf` holds only part of a record.
pub fn decode(buf: &[u8], offset: u64) -> Result<Option<(Record, usize)>, LogError> {
    let Some(h) = decode_header(buf, offset)? else {
        return Ok(None);
    };
    let end = HEADER_LEN + h.len;
    if buf.len() < end {
        return Ok(None);
    }
    let rec = Record {
        stream: h.stream,
        seq: h.seq,
        unix_ms: h.unix_ms,
        data: buf[HEADER_LEN..end].to_vec(),
    };
    Ok(Some((rec, end)))
}

/// The part of `rec` at or after output byte `from_seq`, if any.
pub fn slice_from(rec: &Record, from_seq: u64) -> Option<(u64, &[u8])> {
    let end = rec.seq + rec.data.len() as u64;
    if end <= from_seq || rec.data.is_empty() {
        return None;
    }
    let skip = from_seq.saturating_sub(rec.seq) as usize;
    Some((rec.seq + skip as u64, &rec.data[skip..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_partial_tail() {
        let mut buf = Vec::new();
        encode(Stream::Stdout, 0, 5, b"hello ", &mut buf);
        encode(Stream::Stderr, 6, 6, b"world", &mut buf);
        let (a, n) = decode(&buf, 0).unwrap().unwrap();
        assert_eq!(
            (a.stream, a.seq, a.data.as_slice()),
            (Stream::Stdout, 0, &b"hello "[..])
        );
        let (b, m) = decode(&buf[n..], n as u64).unwrap().unwrap();
        assert_eq!(
            (b.stream, b.seq, b.data.as_slice()),
            (Stream::Stderr, 6, &b"world"[..])
        );
        assert_eq!(n + m, buf.len());
        for cut in 0..m {
            assert_eq!(decode(&buf[n..n + cut], 0).unwrap(), None, "cut {cut}");
        }
    }

    #[test]
    fn corruption_is_reported_with_offset() {
        let e = decode(&[0u8; HEADER_LEN], 42).unwrap_err();
        assert_eq!(
            e,
            LogError::Corrupt {
                offset: 42,
                what: "bad record marker"
            }
        );
    }

    #[test]
    fn resume_inside_a_record() {
        let rec = Record {
            stream: Stream::Stdout,
            seq: 10,
            unix_ms: 0,
            data: b"abcdef".to_vec(),
        };
        assert_eq!(slice_from(&rec, 0), Some((10, &b"abcdef"[..])));
        assert_eq!(slice_from(&rec, 13), Some((13, &b"def"[..])));
        assert_eq!(slice_from(&rec, 16), None);
    }
}
