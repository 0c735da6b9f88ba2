//! Wakes log followers as soon as a job's `output.log` is written, so a
//! follower (`rnx job log -f`, an attached terminal) sees output within
//! the write's own latency rather than at its next poll. One inotify
//! instance for the whole daemon (inotify instances are few: 128 per user
//! by default), one watch per followed log however many follow it; the
//! followers keep polling as well, so a lost or absent watch only costs
//! latency. The `notify` crate was not taken: it adds a thread per watcher
//! and debouncing, and this needs one inotify descriptor on tokio's
//! reactor.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// The daemon's watcher of job logs; cheap to clone. A disabled one
/// (`default()`, or no inotify at start) hands out watches that never
/// fire.
#[derive(Clone, Default)]
pub struct LogWatch {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    fd: AsyncFd<InotifyFd>,
    watches: Mutex<HashMap<WatchDescriptor, Entry>>,
}

/// The followers of one log: a change counter they subscribe to.
struct Entry {
    tx: watch::Sender<u64>,
    refs: usize,
}

/// `AsyncFd` wants `AsRawFd`; nix's `Inotify` offers `AsFd`.
struct InotifyFd(Inotify);

impl AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl LogWatch {
    /// A watcher with its reader task on the current tokio runtime (must
    /// be called inside one); a disabled one, with a warning, when inotify
    /// is not available.
    pub fn start() -> LogWatch {
        match Inner::new() {
            Ok(inner) => {
                let inner = Arc::new(inner);
                tokio::spawn(read_events(inner.clone()));
                LogWatch { inner: Some(inner) }
            }
            Err(e) => {
                tracing::warn!(error = %e, "no inotify for job logs: followers poll every 25 ms");
                LogWatch::default()
            }
        }
    }

    /// Changes of the file at `path` from now on. A file that cannot be
    /// watched gives a watch that never fires (the follower's poll
    /// remains).
    pub fn watch(&self, path: &Path) -> LogChanges {
        let Some(inner) = &self.inner else {
            return LogChanges::none();
        };
        let wd = match inner
            .fd
            .get_ref()
            .0
            .add_watch(path, AddWatchFlags::IN_MODIFY)
        {
            Ok(wd) => wd,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "cannot watch a job's log");
                return LogChanges::none();
            }
        };
        let mut watches = inner.watches.lock().unwrap_or_else(|p| p.into_inner());
        // The same file watched again gives the same descriptor.
        let entry = watches.entry(wd).or_insert_with(|| Entry {
            tx: watch::channel(0).0,
            refs: 0,
        });
        entry.refs += 1;
        LogChanges {
            rx: Some(entry.tx.subscribe()),
            guard: Some(Guard {
                inner: Arc::downgrade(inner),
                wd,
            }),
        }
    }
}

impl Inner {
    fn new() -> std::io::Result<Inner> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        // SAFETY: the Inotify owns its descriptor (an OwnedFd) and keeps
        // it open, answering the same number, until it is dropped, which
        // happens only with the AsyncFd that owns it.
        let fd = unsafe { AsyncFd::register(InotifyFd(fd)) }.map_err(std::io::Error::from)?;
        Ok(Inner {
            fd,
            watches: Mutex::new(HashMap::new()),
        })
    }
}

/// Reads the instance's events for the daemon's life; bumps the counter
/// of the log each event names.
async fn read_events(strong: Arc<Inner>) {
    loop {
        let mut ready = match strong.fd.readable().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "inotify for job logs failed: followers poll");
                return;
            }
        };
        match ready.get_inner().0.read_events() {
            Ok(events) => {
                let mut watches = strong.watches.lock().unwrap_or_else(|p| p.into_inner());
                for ev in events {
                    if ev.mask.contains(AddWatchFlags::IN_IGNORED) {
                        // The file is gone (its job deleted): the
                        // descriptor is free, and may be handed out again.
                        watches.remove(&ev.wd);
                    } else if let Some(e) = watches.get(&ev.wd) {
                        e.tx.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
            }
            Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
            Err(e) => {
                tracing::warn!(error = %e, "reading inotify events for job logs failed: followers poll");
                return;
            }
        }
    }
}

/// One follower's view of one log's changes.
pub struct LogChanges {
    rx: Option<watch::Receiver<u64>>,
    guard: Option<Guard>,
}

impl LogChanges {
    fn none() -> LogChanges {
        LogChanges {
            rx: None,
            guard: None,
        }
    }

    /// Resolves when the log changed since the last call (or since the
    /// watch began); never, for a watch that cannot fire.
    pub async fn changed(&mut self) {
        match &mut self.rx {
            Some(rx) => {
                if rx.changed().await.is_err() {
                    // The watch ended (the file is gone): stop firing.
                    self.rx = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// Whether this watch can fire at all (a follower watches again while
    /// it cannot: the log did not exist yet, or was replaced).
    pub fn is_live(&self) -> bool {
        self.rx.is_some() && self.guard.is_some()
    }
}

/// Releases a follower's share of a watch; the last one removes it.
struct Guard {
    inner: Weak<Inner>,
    wd: WatchDescriptor,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let mut watches = inner.watches.lock().unwrap_or_else(|p| p.into_inner());
        let Some(e) = watches.get_mut(&self.wd) else {
            return; // already gone with its file
        };
        e.refs -= 1;
        if e.refs == 0 {
            watches.remove(&self.wd);
            if let Err(e) = inner.fd.get_ref().0.rm_watch(self.wd) {
                tracing::debug!(error = %e, "removing a job log's watch");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[tokio::test]
    async fn a_write_wakes_every_follower_of_the_file_and_the_last_one_out_removes_the_watch() {
        let w = LogWatch::start();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let mut f = std::fs::File::create(&path).unwrap();
        let mut a = w.watch(&path);
        let mut b = w.watch(&path);
        assert!(a.is_live() && b.is_live());
        assert_eq!(w.inner.as_ref().unwrap().watches.lock().unwrap().len(), 1);
        // Nothing written yet: no wake-up.
        assert!(tokio::time::timeout(Duration::from_millis(50), a.changed())
            .await
            .is_err());
        f.write_all(b"x").unwrap();
        tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .expect("a woken");
        tokio::time::timeout(Duration::from_secs(5), b.changed())
            .await
            .expect("b woken");
        // A write between two waits is not lost.
        f.write_all(b"y").unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .expect("a woken by the earlier write");
        drop(a);
        assert_eq!(w.inner.as_ref().unwrap().watches.lock().unwrap().len(), 1);
        drop(b);
        assert!(w.inner.as_ref().unwrap().watches.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_missing_file_or_a_disabled_watcher_gives_a_watch_that_never_fires() {
        let dir = tempfile::tempdir().unwrap();
        let missing = LogWatch::start().watch(&dir.path().join("nope"));
        assert!(!missing.is_live());
        let mut off = LogWatch::default().watch(&dir.path().join("nope"));
        assert!(!off.is_live());
        assert!(
            tokio::time::timeout(Duration::from_millis(20), off.changed())
                .await
                .is_err()
        );
    }
}
