//! Reads a job trace (CSV with a header) into jobs sorted by submit time,
//! the first at t = 0.
//!
//! Columns are recognised by name (case-insensitive):
//! - submit time: `timestamp` (`YYYY-MM-DD HH:MM:SS`, UTC), or
//!   `submission_time` / `submit_time` / `time` (seconds);
//! - `duration` (seconds);
//! - GPU count: `num_gpus` / `num_gpu` / `gpus`;
//! - optional owner `user` and queue `vc` / `cluster` / `queue`.
//!
//! A row that cannot be read (a missing field, a number that is not one, an
//! impossible date) is an error naming the file, line and column. A
//! well-formed row that no scheduler could run, 0 GPUs or a negative
//! duration, is kept with a [`TraceJob::invalid`] reason: the simulation
//! counts it as rejected for that reason, so nothing is skipped silently.

use std::collections::BTreeMap;
use std::path::Path;

use crate::civil::parse_timestamp;
use crate::error::SimError;

/// Reason for trace rows asking for no GPUs.
pub const ZERO_GPUS: &str = "trace row asks for 0 GPUs";
/// Reason for trace rows with a duration below zero.
pub const NEGATIVE_DURATION: &str = "trace row has a negative duration";

const SUBMIT_SECONDS: &[&str] = &["submission_time", "submit_time", "time"];
const SUBMIT_ALL: &[&str] = &["timestamp", "submission_time", "submit_time", "time"];
const DURATION: &[&str] = &["duration"];
const GPUS: &[&str] = &["num_gpus", "num_gpu", "gpus"];
const OWNER: &[&str] = &["user"];
const QUEUE: &[&str] = &["vc", "cluster", "queue"];

/// One job of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJob {
    /// Line of the row in the file (1 = header): the job's key.
    pub line: u64,
    /// Milliseconds after the first job's submission.
    pub submit_ms: u64,
    /// How long it runs once started (0 for invalid rows).
    pub duration_ms: u64,
    pub gpus: u32,
    /// `user` column, else the queue, else empty.
    pub owner: String,
    /// `vc` / `cluster` / `queue` column, else empty.
    pub queue: String,
    /// Why no scheduler is asked to run it ([`ZERO_GPUS`],
    /// [`NEGATIVE_DURATION`]).
    pub invalid: Option<&'static str>,
}

/// A trace, filtered and sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The file name as given.
    pub file: String,
    pub jobs: Vec<TraceJob>,
}

/// What to keep of a trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceFilter {
    /// Only jobs whose queue (or, with no queue column, owner) is this.
    pub owner_or_queue: Option<String>,
    /// Only the first N jobs by submit time (after the filter).
    pub limit: Option<usize>,
}

/// Reads and parses a trace file.
pub fn read_trace(path: &Path, filter: &TraceFilter) -> Result<Trace, SimError> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_trace(&path.display().to_string(), &bytes, filter)
}

enum SubmitColumn {
    Timestamp(usize),
    Seconds(usize),
}

struct Columns {
    submit: SubmitColumn,
    duration: usize,
    gpus: usize,
    owner: Option<usize>,
    queue: Option<usize>,
}

fn find(header: &[String], names: &[&str]) -> Option<usize> {
    names
        .iter()
        .find_map(|name| header.iter().position(|h| h == name))
}

fn columns(file: &str, header: &[String], filter: &TraceFilter) -> Result<Columns, SimError> {
    let missing = |what, looked_for| SimError::MissingColumn {
        file: file.to_string(),
        what,
        looked_for,
        found: header.to_vec(),
    };
    let submit = match find(header, &["timestamp"]) {
        Some(i) => SubmitColumn::Timestamp(i),
        None => {
            let i =
                find(header, SUBMIT_SECONDS).ok_or_else(|| missing("submit-time", SUBMIT_ALL))?;
            SubmitColumn::Seconds(i)
        }
    };
    let cols = Columns {
        submit,
        duration: find(header, DURATION).ok_or_else(|| missing("duration", DURATION))?,
        gpus: find(header, GPUS).ok_or_else(|| missing("GPU-count", GPUS))?,
        owner: find(header, OWNER),
        queue: find(header, QUEUE),
    };
    if let Some(f) = &filter.owner_or_queue {
        if cols.owner.is_none() && cols.queue.is_none() {
            return Err(SimError::NoOwnerColumn {
                file: file.to_string(),
                filter: f.clone(),
                found: header.to_vec(),
            });
        }
    }
    Ok(cols)
}

/// A parsed row before normalisation (submit time in absolute ms).
struct Row {
    job: TraceJob,
    submit_abs_ms: i64,
}

struct RowReader<'a> {
    file: &'a str,
    header: &'a [String],
    record: &'a csv::StringRecord,
    line: u64,
}

impl RowReader<'_> {
    fn field(&self, i: usize) -> Result<&str, SimError> {
        self.record
            .get(i)
            .map(str::trim)
            .ok_or_else(|| SimError::ShortRow {
                file: self.file.to_string(),
                line: self.line,
                fields: self.record.len(),
                column: self.header[i].clone(),
                needed: i + 1,
            })
    }

    fn bad(&self, i: usize, value: &str, expected: &'static str) -> SimError {
        SimError::BadField {
            file: self.file.to_string(),
            line: self.line,
            column: self.header[i].clone(),
            value: value.to_string(),
            expected,
        }
    }

    /// Seconds (a finite decimal number) as milliseconds.
    fn seconds_ms(&self, i: usize) -> Result<i64, SimError> {
        let v = self.field(i)?;
        const EXPECTED: &str = "a number of seconds (e.g. 66 or 66.0)";
        let secs: f64 = v.parse().map_err(|_| self.bad(i, v, EXPECTED))?;
        // ±1e12 s is ±31,000 years: anything larger is garbage.
        if !secs.is_finite() || secs.abs() > 1e12 {
            return Err(self.bad(i, v, EXPECTED));
        }
        Ok((secs * 1000.0).round() as i64)
    }

    fn gpus(&self, i: usize) -> Result<u32, SimError> {
        let v = self.field(i)?;
        const EXPECTED: &str = "a whole number of GPUs (e.g. 8 or 8.0)";
        if let Ok(n) = v.parse::<u32>() {
            return Ok(n);
        }
        let f: f64 = v.parse().map_err(|_| self.bad(i, v, EXPECTED))?;
        if f.is_finite() && f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f) {
            Ok(f as u32)
        } else {
            Err(self.bad(i, v, EXPECTED))
        }
    }

    fn row(&self, cols: &Columns) -> Result<Row, SimError> {
        let submit_abs_ms = match &cols.submit {
            SubmitColumn::Timestamp(i) => {
                let v = self.field(*i)?;
                parse_timestamp(v)
                    .map(|s| s * 1000)
                    .ok_or_else(|| self.bad(*i, v, "a UTC time `YYYY-MM-DD HH:MM:SS`"))?
            }
            SubmitColumn::Seconds(i) => self.seconds_ms(*i)?,
        };
        let duration = self.seconds_ms(cols.duration)?;
        let gpus = self.gpus(cols.gpus)?;
        let opt = |i: Option<usize>| -> Result<String, SimError> {
            i.map_or(Ok(String::new()), |i| self.field(i).map(str::to_string))
        };
        let queue = opt(cols.queue)?;
        let owner = match cols.owner {
            Some(i) => self.field(i)?.to_string(),
            None => queue.clone(),
        };
        let invalid = if gpus == 0 {
            Some(ZERO_GPUS)
        } else if duration < 0 {
            Some(NEGATIVE_DURATION)
        } else {
            None
        };
        Ok(Row {
            job: TraceJob {
                line: self.line,
                submit_ms: 0,
                duration_ms: u64::try_from(duration).unwrap_or(0),
                gpus,
                owner,
                queue,
                invalid,
            },
            submit_abs_ms,
        })
    }
}

/// File line numbers from the csv reader's byte offsets (its own line
/// numbers are off after CRLF and blank lines). Offsets only grow.
struct LineCounter<'a> {
    bytes: &'a [u8],
    offset: usize,
    line: u64,
}

impl<'a> LineCounter<'a> {
    fn new(bytes: &'a [u8]) -> LineCounter<'a> {
        LineCounter {
            bytes,
            offset: 0,
            line: 1,
        }
    }

    /// The 1-based line of the record starting at `byte`; blank lines the
    /// reader skipped before it are counted.
    fn line_at(&mut self, byte: u64) -> u64 {
        let mut target = usize::try_from(byte)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        while target < self.bytes.len() && matches!(self.bytes[target], b'\r' | b'\n') {
            target += 1;
        }
        if target > self.offset {
            let newlines = self.bytes[self.offset..target]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.line += newlines as u64;
            self.offset = target;
        }
        self.line
    }
}

/// Parses trace text (`file` names it in errors).
pub fn parse_trace(file: &str, bytes: &[u8], filter: &TraceFilter) -> Result<Trace, SimError> {
    let csv_err = |line: u64, e: csv::Error| SimError::Csv {
        file: file.to_string(),
        line,
        message: e.to_string(),
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(bytes);
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| csv_err(1, e))?
        .iter()
        .map(|h| h.trim().trim_start_matches('\u{feff}').to_ascii_lowercase())
        .collect();
    let cols = columns(file, &header, filter)?;
    let mut rows = Vec::new();
    let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
    let mut record = csv::StringRecord::new();
    let mut lines = LineCounter::new(bytes);
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(0, |p| lines.line_at(p.byte()));
                return Err(csv_err(line, e));
            }
        }
        let line = record.position().map_or(0, |p| lines.line_at(p.byte()));
        if record.iter().all(|f| f.trim().is_empty()) {
            continue; // a blank line is not a job
        }
        let row = RowReader {
            file,
            header: &header,
            record: &record,
            line,
        }
        .row(&cols)?;
        if let Some(f) = &filter.owner_or_queue {
            let key = if cols.queue.is_some() {
                &row.job.queue
            } else {
                &row.job.owner
            };
            if key != f {
                *per_key.entry(key.clone()).or_default() += 1;
                continue;
            }
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(match &filter.owner_or_queue {
            Some(f) if !per_key.is_empty() => {
                let mut known: Vec<(String, usize)> = per_key.into_iter().collect();
                known.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                SimError::FilterMatchesNothing {
                    file: file.to_string(),
                    filter: f.clone(),
                    known: known
                        .into_iter()
                        .take(20)
                        .map(|(k, n)| format!("{k} ({n} jobs)"))
                        .collect(),
                }
            }
            _ => SimError::EmptyTrace {
                file: file.to_string(),
            },
        });
    }
    rows.sort_by_key(|r| r.submit_abs_ms); // stable: ties keep file order
    if let Some(limit) = filter.limit {
        rows.truncate(limit);
        if rows.is_empty() {
            return Err(SimError::EmptyTrace {
                file: file.to_string(),
            });
        }
    }
    let t0 = rows.first().map_or(0, |r| r.submit_abs_ms);
    let jobs = rows
        .into_iter()
        .map(|r| TraceJob {
            submit_ms: u64::try_from(r.submit_abs_ms.saturating_sub(t0)).unwrap_or(0),
            ..r.job
        })
        .collect();
    Ok(Trace {
        file: file.to_string(),
        jobs,
    })
}
