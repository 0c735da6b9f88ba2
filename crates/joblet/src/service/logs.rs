//! Serving a job's output: from any byte offset, once or following the job
//! until it ends. The shim writes `output.log`; this only reads it, so a
//! follower can reconnect to a restarted daemon and resume at its offset.
//!
//! A reader gets a [`LogStream`]: the job's output records, then how it
//! ended ([`LogEvent`]), or a [`LogError`] that ends the stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use joblet_core::joblog::{JobEnd, LogEvent};
use joblet_core::JobId;
use joblet_shim::{LogReader, ShimError};
use joblet_store::{Store, StoreError};
use tokio::sync::{broadcast, mpsc};

use super::logwatch::{LogChanges, LogWatch};
use super::ApiError;

use crate::engine::{Ended, EngineHandle};
use crate::outcome::Final;
use crate::state_dir::StateDir;

/// How often a follower looks for new output while the job runs, when no
/// write woke it first ([`LogWatch`]).
const POLL: Duration = Duration::from_millis(25);
const BATCH: usize = 256 * 1024;

/// What a log reader receives, in order; a [`LogError`] is the last item.
pub type LogStream = mpsc::Receiver<Result<LogEvent, LogError>>;

/// Why a log stream ended early.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The job's record went away while it was followed.
    #[error("job {id} was deleted")]
    Deleted { id: JobId },
    #[error("cannot read job {id}: {source}")]
    Store { id: JobId, source: StoreError },
    #[error("cannot read the log of job {id}: {source}")]
    Read { id: JobId, source: ShimError },
    /// Cluster mode: the node running the job stopped serving its log.
    #[error("the log of job {id} from node {node}: {message}")]
    Remote {
        id: String,
        node: String,
        message: String,
    },
}

fn log_path(dirs: &StateDir, id: &JobId) -> std::path::PathBuf {
    dirs.job(id).join("output.log")
}

/// Bytes of output recorded so far (the `seq` after the last record); 0
/// when the log cannot be read (the status call still answers).
pub fn log_bytes(dirs: &StateDir, id: &JobId) -> u64 {
    joblet_shim::output_bytes(&log_path(dirs, id)).unwrap_or_else(|e| {
        tracing::warn!(job = %id, error = %e, "cannot size the job's log");
        0
    })
}

/// Job `id`'s output from byte `from_seq`: what there is, or with
/// `follow` everything until the job ends, then how it ended.
pub fn stream(
    store: Arc<Store>,
    engine: &EngineHandle,
    dirs: &StateDir,
    watch: &LogWatch,
    id: JobId,
    from_seq: u64,
    follow: bool,
) -> Result<LogStream, ApiError> {
    let reader = open_reader(dirs, &id, from_seq)?;
    let (tx, rx) = mpsc::channel(16);
    let ended = engine.subscribe_ended();
    let wake = Wake::new(watch, log_path(dirs, &id), follow);
    tokio::spawn(copy(store, ended, reader, id, wake, tx, false));
    Ok(rx)
}

/// The output of a job just submitted until it ends, as [`stream`] with
/// `follow` sends it. `ended` must have been subscribed before the job was
/// submitted, so that its end cannot be announced unheard. Nothing is read
/// before the first announcement or poll: a new job has no output yet, and
/// its start should not wait for a reader.
pub fn follow_new_job(
    store: Arc<Store>,
    ended: broadcast::Receiver<Ended>,
    dirs: &StateDir,
    watch: &LogWatch,
    id: JobId,
) -> Result<LogStream, ApiError> {
    let reader = open_reader(dirs, &id, 0)?;
    let (tx, rx) = mpsc::channel(16);
    let wake = Wake::new(watch, log_path(dirs, &id), true);
    tokio::spawn(copy(store, ended, reader, id, wake, tx, true));
    Ok(rx)
}

/// What wakes a follower besides its poll: writes to the log, once the
/// log exists (a job not started yet has none; each poll tries again).
struct Wake {
    watch: LogWatch,
    path: std::path::PathBuf,
    changes: Option<LogChanges>,
    /// Whether to follow at all (a one-off read needs no watch).
    follow: bool,
}

impl Wake {
    fn new(watch: &LogWatch, path: std::path::PathBuf, follow: bool) -> Wake {
        Wake {
            watch: watch.clone(),
            path,
            changes: None,
            follow,
        }
    }

    /// Watches the log if it is not watched yet; called before each read,
    /// so no write after a read goes unnoticed.
    fn arm(&mut self) {
        if self.follow && !self.changes.as_ref().is_some_and(LogChanges::is_live) {
            self.changes = Some(self.watch.watch(&self.path));
        }
    }

    /// The next write to the log; never, while it is not watched.
    async fn changed(&mut self) {
        match &mut self.changes {
            Some(c) => c.changed().await,
            None => std::future::pending().await,
        }
    }
}

fn open_reader(dirs: &StateDir, id: &JobId, from_seq: u64) -> Result<LogReader, ApiError> {
    LogReader::open(&log_path(dirs, id), from_seq)
        .map_err(|e| ApiError::Internal(format!("cannot open the log of job {id}: {e}")))
}

/// Sends the job's output from the reader's offset on `tx`; with `follow`,
/// until the job ends, closing with its JobEnded event. `wait_first`: wait
/// for the job's end or the next poll before the first read.
async fn copy(
    store: Arc<Store>,
    mut ended: broadcast::Receiver<Ended>,
    mut reader: LogReader,
    id: JobId,
    mut wake: Wake,
    tx: mpsc::Sender<Result<LogEvent, LogError>>,
    wait_first: bool,
) {
    let follow = wake.follow;
    let mut wait = wait_first;
    wake.arm();
    // The final state the engine announced with the job's end.
    let mut announced: Option<Final> = None;
    // When the job's state was last read: a write wakes only the file's
    // reading, the state is read at a poll, an announcement, or at least
    // every POLL (a chatty job's follower does not query the store at
    // each of its writes).
    let mut checked: Option<Instant> = None;
    loop {
        let mut polled = false;
        if wait {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => polled = true,
                _ = wake.changed() => {}
                _ = tx.closed() => return,
                fin = wait_for(&mut ended, &id) => announced = fin,
            }
            wake.arm();
        }
        let due = checked.is_none_or(|t| t.elapsed() >= POLL);
        // Read the state before the file: if the job was already final,
        // everything it wrote is in the file by now. (Its progress only:
        // the spec is not needed here; and not even that when its end was
        // announced with what was recorded.)
        let rec = if let Some(fin) = announced.take() {
            Some(Progress {
                state: fin.state,
                exit_code: fin.exit_code,
                reason: fin.reason,
            })
        } else if polled || due {
            checked = Some(Instant::now());
            match store.progress(&id) {
                Ok(Some(r)) => Some(Progress {
                    state: r.state,
                    exit_code: r.exit_code,
                    reason: r.reason,
                }),
                Ok(None) => {
                    let _ = tx.send(Err(LogError::Deleted { id })).await;
                    return;
                }
                Err(source) => {
                    let _ = tx.send(Err(LogError::Store { id, source })).await;
                    return;
                }
            }
        } else {
            None
        };
        let mut sent_any = false;
        loop {
            let records = match reader.read_available(BATCH) {
                Ok(r) => r,
                Err(source) => {
                    let _ = tx.send(Err(LogError::Read { id, source })).await;
                    return;
                }
            };
            if records.is_empty() {
                break;
            }
            sent_any = true;
            for r in records {
                if tx.send(Ok(LogEvent::Chunk(r))).await.is_err() {
                    return; // client went away
                }
            }
        }
        let Some(rec) = rec else {
            wait = !sent_any;
            continue;
        };
        if rec.state.is_terminal() || !follow {
            if rec.state.is_terminal() {
                let end = JobEnd {
                    state: rec.state,
                    exit_code: rec.exit_code,
                    reason: rec.reason,
                    total_bytes: reader.next_seq(),
                };
                let _ = tx.send(Ok(LogEvent::Ended(end))).await;
            }
            return;
        }
        wait = !sent_any;
    }
}

/// What a follower needs of a job's state.
struct Progress {
    state: joblet_core::JobState,
    exit_code: Option<i32>,
    reason: String,
}

/// Resolves when `id` is announced as finished, with its final state as
/// recorded (`None` when that is not known, or announcements were missed).
async fn wait_for(rx: &mut broadcast::Receiver<Ended>, id: &JobId) -> Option<Final> {
    loop {
        match rx.recv().await {
            Ok(done) if &done.id == id => return done.recorded,
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => return None,
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
