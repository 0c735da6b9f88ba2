//! Running a process inside a running job (`rnx job exec`): checked here
//! (the job's owner or the node's admin identity, a running job that is
//! not being stopped, the native executor), carried out by `joblet-shim
//! sandbox-exec` (which enters the job's namespaces and cgroups and drops
//! to the job's privileges, see `joblet_sandbox::init::run_exec`), its
//! output relayed from a terminal or pipes, every one recorded in the
//! store's exec audit from start to end.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use joblet_core::{FieldError, JobId, TermSize};
use joblet_sandbox::init::ExecConfig;
use joblet_shim::JobDir;
use joblet_store::Store;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::attach::Input;
use super::ApiError;
use crate::sandbox::NodeSandbox;

/// What the node needs to run execs: its shim binary and sandbox settings.
#[derive(Clone)]
pub struct ExecSetup {
    pub shim: PathBuf,
    pub sandbox: NodeSandbox,
}

/// An exec as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the job's environment.
    pub env: BTreeMap<String, String>,
    /// Standard input from the client.
    pub stdin: bool,
    /// A terminal of this size.
    pub tty: Option<TermSize>,
}

impl ExecRequest {
    /// Refuses an empty command and text the kernel cannot take.
    pub fn check(&self) -> Result<(), FieldError> {
        if self.command.trim().is_empty() {
            return Err(FieldError::new(
                "command",
                "is empty; give the program to run in the job, e.g. `rnx job exec ID -- nvidia-smi`",
            ));
        }
        let nul = |field: String, s: &str| {
            if s.contains('\0') {
                Err(FieldError::new(field, "contains a NUL byte"))
            } else {
                Ok(())
            }
        };
        nul("command".into(), &self.command)?;
        for (i, a) in self.args.iter().enumerate() {
            nul(format!("args[{i}]"), a)?;
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') {
                return Err(FieldError::new(
                    format!("env[{k:?}]"),
                    "is not a variable name: expected KEY=VALUE with a KEY without `=`",
                ));
            }
            nul(format!("env[{k:?}]"), v)?;
        }
        Ok(())
    }
}

/// What an exec sends back, in order; `Exit` is last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exit {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// A running exec.
pub struct ExecSession {
    pub output: mpsc::Receiver<ExecEvent>,
    /// Its input, when asked for (`-i`) or on a terminal (resizes).
    pub input: Option<ExecInput>,
}

/// The exec's way in.
pub struct ExecInput {
    writer: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    /// The terminal's side the node holds (resizes go here).
    master: Option<Arc<std::fs::File>>,
}

impl super::attach::TakesInput for ExecInput {
    async fn send(&mut self, input: Input) -> std::io::Result<()> {
        match input {
            Input::Data(d) => match self.writer.as_mut() {
                Some(w) => w.write_all(&d).await,
                None => Ok(()),
            },
            Input::Resize { rows, cols } => {
                if let Some(m) = &self.master {
                    joblet_shim::pty::resize(&**m, rows, cols)?;
                }
                Ok(())
            }
            Input::CloseStdin => {
                if self.master.is_none() {
                    if let Some(mut w) = self.writer.take() {
                        w.shutdown().await?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Names each exec's config file apart.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Starts `req` in job `id` (checked by the caller: running, the caller
/// may) whose leader is `leader` (pid, start time).
pub(super) async fn start(
    setup: &ExecSetup,
    store: Arc<Store>,
    dir: &JobDir,
    id: &JobId,
    caller: &str,
    leader: (i32, u64),
    req: ExecRequest,
) -> Result<ExecSession, ApiError> {
    let mut init = setup.sandbox.exec_init(id, &dir.path().join("work"));
    init.command = req.command.clone();
    init.args = req.args.clone();
    init.env = req.env.clone();
    let config = ExecConfig {
        leader_pid: leader.0,
        leader_start_time: leader.1,
        cgroup_base: setup.sandbox.cgroup_base.clone(),
        cgroup_name: id.to_string(),
        init,
        tty: req.tty.is_some(),
    };
    let path = dir.path().join(format!(
        "exec-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let json = serde_json::to_vec(&config)
        .map_err(|e| ApiError::Internal(format!("encoding the exec's config: {e}")))?;
    write_private(&path, &json)
        .map_err(|e| ApiError::Internal(format!("writing {}: {e}", path.display())))?;

    let mut cmd = tokio::process::Command::new(&setup.shim);
    cmd.arg("sandbox-exec")
        .arg(&path)
        .env_clear()
        .kill_on_drop(false);
    let (tx, output) = mpsc::channel(64);
    let spawned = match req.tty {
        Some(size) => spawn_tty(&mut cmd, size, tx.clone()),
        None => spawn_pipes(&mut cmd, req.stdin, tx.clone()),
    };
    let Spawned {
        mut child,
        input,
        relays,
    } = match spawned {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(ApiError::NodeCannot(format!(
                "cannot start {} sandbox-exec for job {id}: {e}",
                setup.shim.display()
            )));
        }
    };
    let mut argv = vec![req.command.clone()];
    argv.extend(req.args.iter().cloned());
    let audit = store.exec_started(id.as_str(), caller, &argv, req.tty.is_some(), now_ms());
    let audit = match audit {
        Ok(a) => a,
        Err(e) => {
            // No exec without its record.
            let _ = child.start_kill();
            return Err(super::store_error(e));
        }
    };
    tracing::info!(job = %id, caller, command = %req.command, audit, "exec started in the job");
    let job = id.clone();
    tokio::spawn(async move {
        // A client that goes away takes its command with it: the helper
        // is killed, and the command with it (its parent-death signal).
        let status = tokio::select! {
            status = child.wait() => status,
            () = tx.closed() => {
                tracing::info!(%job, audit, "the exec's client went away; killing the command");
                let _ = child.start_kill();
                child.wait().await
            }
        };
        let _ = std::fs::remove_file(&path);
        let (code, signal) = match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                (s.code(), s.signal())
            }
            Err(e) => {
                tracing::warn!(%job, "waiting for an exec: {e}");
                (None, None)
            }
        };
        // The output relays end once every holder of the pipes or the
        // terminal is gone; the exit goes after what they sent (unless the
        // client is gone).
        tokio::select! {
            _ = futures::future::join_all(relays) => {}
            () = tx.closed() => {}
        }
        if let Err(e) = store.exec_ended(audit, now_ms(), code, signal) {
            tracing::warn!(%job, audit, "recording the exec's end: {e}");
        }
        tracing::info!(%job, audit, ?code, ?signal, "exec ended");
        let _ = tx.send(ExecEvent::Exit { code, signal }).await;
    });
    Ok(ExecSession { output, input })
}

/// A started `sandbox-exec`: the process, its input, and the tasks that
/// relay its output until end of file.
struct Spawned {
    child: tokio::process::Child,
    input: Option<ExecInput>,
    relays: Vec<tokio::task::JoinHandle<()>>,
}

fn spawn_tty(
    cmd: &mut tokio::process::Command,
    size: TermSize,
    tx: mpsc::Sender<ExecEvent>,
) -> std::io::Result<Spawned> {
    // Close-on-exec: no other child of the daemon holds an end, so the
    // master reads EIO once the command's are closed.
    let pty = joblet_shim::pty::open(size)?;
    let slave: OwnedFd = pty.slave;
    cmd.stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // The terminal's other ends go with `cmd` (dropped by the caller once
    // started): the command's are then the only ones, and its end reads EIO.
    let child = cmd.spawn()?;
    let master = Arc::new(std::fs::File::from(pty.master));
    let reader = master.try_clone()?;
    let writer = tokio::fs::File::from_std(master.try_clone()?);
    let relay = tokio::task::spawn_blocking(move || relay_blocking(reader, tx));
    Ok(Spawned {
        child,
        input: Some(ExecInput {
            writer: Some(Box::new(writer)),
            master: Some(master),
        }),
        relays: vec![relay],
    })
}

fn relay_blocking(mut from: std::fs::File, tx: mpsc::Sender<ExecEvent>) {
    use std::io::Read;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if tx
                    .blocking_send(ExecEvent::Stdout(buf[..n].to_vec()))
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EIO: no process has the terminal open any more.
            Err(_) => return,
        }
    }
}

fn spawn_pipes(
    cmd: &mut tokio::process::Command,
    stdin: bool,
    tx: mpsc::Sender<ExecEvent>,
) -> std::io::Result<Spawned> {
    cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut relays = Vec::with_capacity(2);
    if let Some(out) = child.stdout.take() {
        relays.push(tokio::spawn(relay(out, tx.clone(), ExecEvent::Stdout)));
    }
    if let Some(err) = child.stderr.take() {
        relays.push(tokio::spawn(relay(err, tx, ExecEvent::Stderr)));
    }
    let input = child.stdin.take().map(|w| ExecInput {
        writer: Some(Box::new(w)),
        master: None,
    });
    Ok(Spawned {
        child,
        input,
        relays,
    })
}

async fn relay(
    mut from: impl AsyncRead + Unpin,
    tx: mpsc::Sender<ExecEvent>,
    wrap: fn(Vec<u8>) -> ExecEvent,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send(wrap(buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
