//! The daemon's state directory: its layout, the single-daemon lock, and
//! first-start bootstrap of the PKI and the admin's `rnx-config.yml`.
//!
//! ```text
//! <state_dir>/
//!   joblet.lock        held (flock) by the running daemon
//!   joblet.db          SQLite store;  secrets.key: key sealing queued jobs' secrets
//!   server.json        pid and bound address of the running daemon
//!   rnx-config.yml     ready client config for the admin identity
//!   pki/ca.{crt,key} server.{crt,key} admin.{crt,key}
//!   jobs/<id>/         one directory per job (shim files, output.log, work/)
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use joblet_pki::{CertPem, CertificateAuthority, Role, Validity};
use joblet_proto::ClientConfigFile;

/// CA and server certificates last ten years; the admin's one.
const CA_DAYS: u32 = 3650;
const SERVER_DAYS: u32 = 3650;
pub const CLIENT_DAYS: u32 = 365;

#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// The PKI material the server needs.
pub struct ServerPki {
    pub ca: CertificateAuthority,
    pub server: CertPem,
    pub admin: CertPem,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another joblet daemon is already using state dir {0} (it holds joblet.lock); stop it first or use another server.state_dir")]
    Locked(PathBuf),
    #[error("PKI in {path}: {source}")]
    Pki {
        path: PathBuf,
        source: joblet_pki::PkiError,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// How long a starting daemon waits for the state dir's lock (a daemon that
/// was just killed may still be exiting).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateDir { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn db(&self) -> PathBuf {
        self.root.join("joblet.db")
    }
    pub fn secrets_key(&self) -> PathBuf {
        self.root.join("secrets.key")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    pub fn jobs(&self) -> PathBuf {
        self.root.join("jobs")
    }
    pub fn job(&self, id: &joblet_core::JobId) -> PathBuf {
        self.jobs().join(id.as_str())
    }
    /// Where workflow runs keep their uploaded files: `workflows/ID/files`.
    pub fn workflow(&self, id: &str) -> PathBuf {
        self.root.join("workflows").join(id)
    }
    pub fn client_config(&self) -> PathBuf {
        self.root.join(joblet_proto::client_file::FILE_NAME)
    }
    pub fn server_json(&self) -> PathBuf {
        self.root.join("server.json")
    }

    /// Creates the directory tree (mode 0700) and takes the daemon lock; the
    /// returned guard must live as long as the daemon.
    pub fn create_and_lock(&self) -> Result<Flock<File>, StateError> {
        for dir in [self.root.clone(), self.pki(), self.jobs()] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(io("cannot create directory", &dir))?;
        }
        let lock_path = self.root.join("joblet.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io("cannot open", &lock_path))?;
        // flock, not fcntl locks: tied to this open file, released when the
        // daemon dies. A daemon killed a moment ago may still be exiting
        // (its threads leaving the kernel): wait for it a little.
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let mut lock = lock;
        let mut told = false;
        loop {
            match Flock::lock(lock, FlockArg::LockExclusiveNonblock) {
                Ok(held) => return Ok(held),
                Err((file, _)) if std::time::Instant::now() < deadline => {
                    if !told {
                        tracing::info!(lock = %lock_path.display(), "another joblet holds the state dir; waiting up to {LOCK_WAIT:?} for it to exit");
                        told = true;
                    }
                    lock = file;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(_) => return Err(StateError::Locked(self.root.clone())),
            }
        }
    }

    /// Loads the CA, server and admin certificates, creating any that are
    /// missing (first start). The server certificate names `hosts`.
    /// Cluster mode: the node's fencing deadline, which the shims of its
    /// cluster jobs read (see `joblet_shim::fence`).
    pub fn cluster_fence(&self) -> PathBuf {
        self.root().join("cluster-fence")
    }

    pub fn ensure_pki(&self, hosts: &[String]) -> Result<ServerPki, StateError> {
        let dir = self.pki();
        let pki_err = |source| StateError::Pki {
            path: dir.clone(),
            source,
        };
        let read = |name: &str| -> Result<Option<CertPem>, StateError> {
            let (c, k) = (
                dir.join(format!("{name}.crt")),
                dir.join(format!("{name}.key")),
            );
            if !c.exists() || !k.exists() {
                return Ok(None);
            }
            let cert = fs::read_to_string(&c).map_err(io("cannot read", &c))?;
            let key = fs::read_to_string(&k).map_err(io("cannot read", &k))?;
            Ok(Some(CertPem { cert, key }))
        };
        let ca = match read("ca")? {
            Some(pem) => CertificateAuthority::from_pem(&pem.cert, &pem.key).map_err(pki_err)?,
            None => {
                tracing::info!(dir = %dir.display(), "first start: creating certificate authority");
                let ca =
                    CertificateAuthority::generate("joblet CA", Validity::days_from_now(CA_DAYS))
                        .map_err(pki_err)?;
                let pem = CertPem {
                    cert: ca.cert_pem().to_owned(),
                    key: ca.key_pem(),
                };
                joblet_pki::write_pem_files(&dir, "ca", &pem).map_err(pki_err)?;
                ca
            }
        };
        let server = match read("server")? {
            Some(pem) => pem,
            None => {
                let pem = ca
                    .issue_server(hosts, Validity::days_from_now(SERVER_DAYS))
                    .map_err(pki_err)?;
                joblet_pki::write_pem_files(&dir, "server", &pem).map_err(pki_err)?;
                pem
            }
        };
        let admin = match read("admin")? {
            Some(pem) => pem,
            None => {
                let pem = ca
                    .issue_client("admin", Role::Admin, Validity::days_from_now(CLIENT_DAYS))
                    .map_err(pki_err)?;
                joblet_pki::write_pem_files(&dir, "admin", &pem).map_err(pki_err)?;
                pem
            }
        };
        Ok(ServerPki { ca, server, admin })
    }

    /// The daemon's local socket: root on this host talks to it without
    /// TCP or TLS (see [`crate::local`]).
    pub fn socket(&self) -> PathBuf {
        self.root.join("joblet.sock")
    }

    /// Writes `rnx-config.yml` for the admin, pointing at `address` and, when
    /// `local_socket` (the daemon listens on it), at the local socket.
    pub fn write_client_config(
        &self,
        address: &str,
        pki: &ServerPki,
        local_socket: bool,
    ) -> Result<PathBuf, StateError> {
        let mut file = ClientConfigFile::single(
            "default",
            address,
            "localhost",
            pki.ca.cert_pem(),
            &pki.admin.cert,
            &pki.admin.key,
        );
        if local_socket {
            for node in file.nodes.values_mut() {
                node.socket = Some(self.socket());
            }
        }
        let path = self.client_config();
        write_private(&path, file.to_yaml().as_bytes())?;
        Ok(path)
    }

    /// Records the running daemon's pid and listeners (tests and scripts
    /// wait for it, then read the addresses it bound).
    pub fn write_server_json(&self, listeners: &Listeners) -> Result<(), StateError> {
        let body = serde_json::json!({
            "pid": std::process::id(),
            "address": listeners.grpc,
            "metrics": listeners.metrics,
            "rest": listeners.rest,
            "version": env!("CARGO_PKG_VERSION"),
        });
        write_private(&self.server_json(), format!("{body}\n").as_bytes())
    }
}

/// The addresses the daemon listens on, as `server.json` records them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listeners {
    /// The mTLS gRPC address (`server.address`).
    pub grpc: String,
    /// The Prometheus `/metrics` address, when serving.
    pub metrics: Option<String>,
    /// The HTTPS REST API and web console address, when serving.
    pub rest: Option<String>,
}

/// Writes a file with mode 0600 atomically (temp file + rename).
pub fn write_private(path: &Path, data: &[u8]) -> Result<(), StateError> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("cannot write", &tmp))?;
    f.write_all(data).map_err(io("cannot write", &tmp))?;
    f.sync_all().map_err(io("cannot write", &tmp))?;
    fs::rename(&tmp, path).map_err(io("cannot write", path))
}

/// Names the server certificate covers: loopback, the hostname, the listen
/// address when it is specific, and `server.tls_hosts`.
pub fn server_hosts(listen: std::net::SocketAddr, extra: &[String]) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if let Ok(h) = nix::unistd::gethostname() {
        if let Some(h) = h.to_str() {
            hosts.push(h.to_owned());
        }
    }
    if !listen.ip().is_unspecified() {
        hosts.push(listen.ip().to_string());
    }
    hosts.extend(extra.iter().cloned());
    hosts.sort();
    hosts.dedup();
    hosts
}
