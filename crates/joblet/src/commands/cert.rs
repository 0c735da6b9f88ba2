//! `joblet cert issue`: mints a client identity signed by the node's CA and
//! writes it with a ready `rnx-config.yml`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use joblet_pki::{CertificateAuthority, Role, Validity};
use joblet_proto::ClientConfigFile;

use crate::config::Config;
use crate::state_dir::{write_private, StateDir};

pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_config: PathBuf,
}

pub fn issue(
    cfg: &Config,
    name: &str,
    role: Role,
    days: u32,
    out: &Path,
) -> anyhow::Result<Issued> {
    joblet_pki::validate_name(name)?;
    if days == 0 {
        bail!("--days: must be at least 1");
    }
    let dirs = StateDir::new(&cfg.server.state_dir);
    let ca = joblet_pki::read_pem_files(&dirs.pki(), "ca").with_context(|| {
        format!(
            "no CA in {}: start `joblet server` once with this config to create it",
            dirs.pki().display()
        )
    })?;
    let ca = CertificateAuthority::from_pem(&ca.cert, &ca.key)?;
    let pem = ca.issue_client(name, role, Validity::days_from_now(days))?;
    let (cert, key) = joblet_pki::write_pem_files(out, name, &pem)?;
    // The running daemon's address if there is one, else the configured one.
    let address = std::fs::read_to_string(dirs.server_json())
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["address"].as_str().map(str::to_owned))
        .unwrap_or_else(|| cfg.server.address.to_string());
    let file = ClientConfigFile::single(
        "default",
        &address,
        "localhost",
        ca.cert_pem(),
        &pem.cert,
        &pem.key,
    );
    let client_config = out.join(joblet_proto::client_file::FILE_NAME);
    write_private(&client_config, file.to_yaml().as_bytes())?;
    Ok(Issued {
        cert,
        key,
        client_config,
    })
}
