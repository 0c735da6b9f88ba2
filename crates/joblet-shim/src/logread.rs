//! Reading a job's `output.log` from any output offset, while the shim may
//! still be appending to it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use joblet_core::joblog::{self, Record, HEADER_LEN, MAX_DATA};

use crate::error::ShimError;

/// A cursor over `output.log`.
#[derive(Debug)]
pub struct LogReader {
    path: PathBuf,
    /// `None` until the file exists (a missing file is an empty log).
    file: Option<File>,
    /// File offset of the next record to look at.
    offset: u64,
    /// Output offset (seq) of the next byte to return.
    want: u64,
}

impl LogReader {
    /// Opens `path` positioned at the record that holds output byte
    /// `from_seq` (or at the end, waiting for it). Skipped records' data is
    /// seeked over, never read.
    pub fn open(path: &Path, from_seq: u64) -> Result<LogReader, ShimError> {
        let mut r = LogReader {
            path: path.to_owned(),
            file: None,
            offset: 0,
            want: from_seq,
        };
        r.try_open()?;
        Ok(r)
    }

    /// The seq of the next output byte [`read_available`](Self::read_available)
    /// will return.
    pub fn next_seq(&self) -> u64 {
        self.want
    }

    /// The complete records available now from [`next_seq`](Self::next_seq)
    /// on (the first trimmed to start there), about `max_bytes` of data at
    /// most but always at least one record if one is complete. An
    /// incomplete tail is left for a later call; an empty vec means nothing
    /// new yet.
    pub fn read_available(&mut self, max_bytes: usize) -> Result<Vec<Record>, ShimError> {
        if self.file.is_none() && !self.try_open()? {
            return Ok(Vec::new());
        }
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        // Room for at least one whole record, so every call can progress.
        let cap = max_bytes.max(MAX_DATA) + HEADER_LEN;
        let buf = read_at_most(file, self.offset, cap).map_err(|source| ShimError::ReadLog {
            path: self.path.clone(),
            source,
        })?;
        let mut out = Vec::new();
        let mut used = 0usize;
        let mut data_bytes = 0usize;
        while data_bytes < max_bytes.max(1) {
            let at = self.offset + used as u64;
            let (rec, n) = match joblog::decode(&buf[used..], at) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // Hand out what came before; the next call reports it.
                Err(_) if !out.is_empty() => break,
                Err(source) => {
                    return Err(ShimError::LogCorrupt {
                        path: self.path.clone(),
                        source,
                    })
                }
            };
            used += n;
            if let Some((seq, data)) = joblog::slice_from(&rec, self.want) {
                self.want = seq + data.len() as u64;
                data_bytes += data.len();
                out.push(Record {
                    stream: rec.stream,
                    seq,
                    unix_ms: rec.unix_ms,
                    data: data.to_vec(),
                });
            }
        }
        self.offset += used as u64;
        Ok(out)
    }

    /// Opens the file if it exists and walks its headers up to the record
    /// holding `want`. Returns whether the file is open.
    fn try_open(&mut self) -> Result<bool, ShimError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => {
                return Err(ShimError::ReadLog {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        let mut header = [0u8; HEADER_LEN];
        loop {
            let n = read_exact_or_eof(&file, self.offset, &mut header).map_err(|source| {
                ShimError::ReadLog {
                    path: self.path.clone(),
                    source,
                }
            })?;
            let Some(h) = joblog::decode_header(&header[..n], self.offset).map_err(|source| {
                ShimError::LogCorrupt {
                    path: self.path.clone(),
                    source,
                }
            })?
            else {
                break;
            };
            if h.seq + h.len as u64 > self.want {
                break;
            }
            // Entirely before `want`: skip its data unread. (If the data is
            // still being written, the next record starts there anyway.)
            self.offset += (HEADER_LEN + h.len) as u64;
        }
        self.file = Some(file);
        Ok(true)
    }
}

/// Bytes of output recorded in `path` so far: the seq just past the last
/// complete record. Walks headers only (data is skipped), so it is cheap
/// even for large logs. A missing file holds 0 bytes.
pub fn output_bytes(path: &Path) -> Result<u64, ShimError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(ShimError::ReadLog {
                path: path.to_owned(),
                source,
            })
        }
    };
    let read_err = |source| ShimError::ReadLog {
        path: path.to_owned(),
        source,
    };
    let len = file.metadata().map_err(read_err)?.len();
    let mut offset = 0u64;
    let mut bytes = 0u64;
    let mut header = [0u8; HEADER_LEN];
    loop {
        let n = read_exact_or_eof(&file, offset, &mut header).map_err(read_err)?;
        let h = joblog::decode_header(&header[..n], offset).map_err(|source| {
            ShimError::LogCorrupt {
                path: path.to_owned(),
                source,
            }
        })?;
        let Some(h) = h else { return Ok(bytes) };
        let end = offset + (HEADER_LEN + h.len) as u64;
        if end > len {
            return Ok(bytes); // data of the last record still being written
        }
        bytes = h.seq + h.len as u64;
        offset = end;
    }
}

/// Reads up to `cap` bytes at `offset`, fewer only at end-of-file.
fn read_at_most(file: &File, offset: u64, cap: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; cap];
    let n = read_exact_or_eof(file, offset, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Fills `buf` from `offset` unless end-of-file comes first; returns the
/// bytes read.
fn read_exact_or_eof(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_core::joblog::{encode, Stream};
    use std::io::Write;

    fn record(stream: Stream, seq: u64, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(stream, seq, 1000 + seq as i64, data, &mut v);
        v
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    fn text(recs: &[Record]) -> Vec<u8> {
        recs.iter().flat_map(|r| r.data.clone()).collect()
    }

    #[test]
    fn output_bytes_counts_complete_records_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        assert_eq!(output_bytes(&path).unwrap(), 0);
        append(&path, &record(Stream::Stdout, 0, b"hello"));
        append(&path, &record(Stream::Stderr, 5, b"world!"));
        assert_eq!(output_bytes(&path).unwrap(), 11);
        let partial = record(Stream::Stdout, 11, b"tail");
        append(&path, &partial[..partial.len() - 2]);
        assert_eq!(output_bytes(&path).unwrap(), 11);
    }

    #[test]
    fn missing_file_is_empty_until_it_appears() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        let mut r = LogReader::open(&path, 3).unwrap();
        assert!(r.read_available(1024).unwrap().is_empty());
        append(&path, &record(Stream::Stdout, 0, b"hello"));
        let recs = r.read_available(1024).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!((recs[0].seq, recs[0].data.as_slice()), (3, &b"lo"[..]));
        assert_eq!(recs[0].unix_ms, 1000);
        assert_eq!(r.next_seq(), 5);
    }

    #[test]
    fn partial_trailing_record_is_left_for_later() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        append(&path, &record(Stream::Stdout, 0, b"abc"));
        append(&path, &record(Stream::Stderr, 3, b"de"));
        let third = record(Stream::Stdout, 5, b"fghij");
        // Header complete, data cut short.
        append(&path, &third[..HEADER_LEN + 2]);

        let mut r = LogReader::open(&path, 0).unwrap();
        let recs = r.read_available(1 << 20).unwrap();
        assert_eq!(text(&recs), b"abcde");
        assert_eq!(recs[1].stream, Stream::Stderr);
        assert_eq!(r.next_seq(), 5);
        assert!(r.read_available(1 << 20).unwrap().is_empty());

        // Positioning onto the incomplete record works too.
        let mut late = LogReader::open(&path, 7).unwrap();
        assert!(late.read_available(1 << 20).unwrap().is_empty());

        append(&path, &third[HEADER_LEN + 2..]);
        let recs = r.read_available(1 << 20).unwrap();
        assert_eq!(text(&recs), b"fghij");
        assert_eq!(recs[0].seq, 5);
        let recs = late.read_available(1 << 20).unwrap();
        assert_eq!((recs[0].seq, text(&recs)), (7, b"hij".to_vec()));
    }

    #[test]
    fn partial_header_and_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        for i in 0..10u64 {
            append(
                &path,
                &record(Stream::Stdout, i * 4, format!("r{i:02}\n").as_bytes()),
            );
        }
        let next = record(Stream::Stdout, 40, b"tail");
        append(&path, &next[..5]);
        let mut r = LogReader::open(&path, 0).unwrap();
        // Small max_bytes: several calls, at least one record each.
        let mut got = Vec::new();
        loop {
            let recs = r.read_available(6).unwrap();
            if recs.is_empty() {
                break;
            }
            assert!(recs.len() <= 2, "{}", recs.len());
            got.extend(text(&recs));
        }
        let want: Vec<u8> = (0..10)
            .flat_map(|i| format!("r{i:02}\n").into_bytes())
            .collect();
        assert_eq!(got, want);
        assert_eq!(r.next_seq(), 40);
        append(&path, &next[5..]);
        assert_eq!(text(&r.read_available(0).unwrap()), b"tail");
    }

    #[test]
    fn corruption_is_reported_with_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("output.log");
        append(&path, &record(Stream::Stdout, 0, b"ok"));
        append(&path, &[0u8; HEADER_LEN]);
        let mut r = LogReader::open(&path, 0).unwrap();
        assert_eq!(text(&r.read_available(1024).unwrap()), b"ok");
        let err = r.read_available(1024).unwrap_err();
        assert!(err.to_string().contains("output.log"), "{err}");
        assert!(matches!(
            LogReader::open(&path, 100),
            Err(ShimError::LogCorrupt { .. })
        ));
    }
}
