//! Stop and kill: through the job's shim's control socket (SIGTERM, then
//! SIGKILL after the grace period; or SIGKILL at once).

use std::time::Duration;

use joblet_core::JobId;
use joblet_engine::{StopHow, Ticket};
use joblet_shim::{JobDir, ShimError};

use super::{AgentReport, LocalAgent};

/// How long a stop waits for a starting shim to listen on its control
/// socket, and how often it asks meanwhile.
const RETRY_FOR: Duration = Duration::from_secs(10);
const RETRY_EVERY: Duration = Duration::from_millis(20);

impl LocalAgent {
    pub(super) fn send_signal(&mut self, job: &JobId, how: StopHow, ticket: Option<Ticket>) {
        let dir = JobDir::new(self.dirs.job(job));
        let reports = self.reports.clone();
        let job = job.clone();
        tokio::spawn(async move {
            let failed = deliver(&dir, how).await.err().map(|e| {
                tracing::warn!(job = %job, error = %e, "cannot signal the job");
                format!("cannot signal job {job}: {e}")
            });
            let _ = reports.send(AgentReport::Signalled {
                job,
                ticket,
                failed,
            });
        });
    }
}

/// Asks the shim of `dir` to stop or kill its job. RUNNING is recorded
/// before the shim listens on its control socket (a warm shim may still be
/// setting up): until it does, or the job's exit is recorded, it asks
/// again. A job that ended meanwhile has nothing left to stop: that is not
/// an error.
async fn deliver(dir: &JobDir, how: StopHow) -> Result<(), ShimError> {
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let ended = || joblet_shim::read_exit(dir).ok().flatten().is_some();
    loop {
        let sent = match how {
            StopHow::Kill => joblet_shim::request_kill(dir).await,
            StopHow::Stop { grace_ms } => {
                joblet_shim::request_stop(dir, Duration::from_millis(grace_ms)).await
            }
        };
        match sent {
            Ok(()) => return Ok(()),
            Err(ShimError::NotRunning { .. })
                if !ended() && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err(e) if ended() => {
                tracing::debug!(error = %e, "stop raced with the job's exit");
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
}
