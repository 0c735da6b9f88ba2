//! Finding and reading the client config file (`rnx-config.yml`).
//!
//! Lookup order: `--config FILE`, then `$RNX_CONFIG`, then
//! `~/.rnx/rnx-config.yml`. A file named explicitly (flag or variable) must
//! exist; rnx never silently falls back to another identity.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use joblet_proto::client_file::{self, ClientConfigFile, ClientFileError, ResolvedNode};

/// Where the daemon writes a ready client config on first start.
pub const DAEMON_WRITTEN_CONFIG: &str = "/var/lib/joblet/rnx-config.yml";

/// The process environment the lookup depends on, passed in so tests need
/// not mutate the real one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookupEnv {
    /// The value of `RNX_CONFIG`, if set.
    pub rnx_config: Option<OsString>,
    /// The user's home directory, if known.
    pub home: Option<PathBuf>,
}

impl LookupEnv {
    pub fn from_process() -> Self {
        LookupEnv {
            rnx_config: std::env::var_os("RNX_CONFIG").filter(|v| !v.is_empty()),
            home: dirs::home_dir(),
        }
    }

    /// `~/.rnx/rnx-config.yml`, if the home directory is known.
    pub fn home_config(&self) -> Option<PathBuf> {
        self.home
            .as_ref()
            .map(|h| h.join(".rnx").join(client_file::FILE_NAME))
    }
}

/// Where the config came from, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    Home,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "client config {path} (given with --config) does not exist; {}",
        places_hint()
    )]
    FlagMissing { path: PathBuf },
    #[error(
        "client config {path} (from $RNX_CONFIG) does not exist; {}",
        places_hint()
    )]
    EnvMissing { path: PathBuf },
    #[error(
        "no client config found. rnx looks in: --config FILE, $RNX_CONFIG, {home}. {}",
        daemon_hint()
    )]
    NotFound { home: String },
    /// `--node NAME` names no entry of the file; NAME may be a cluster
    /// node, which `--node` does not pick.
    #[error(
        "{source}. --node picks an entry of the client config to connect to; a cluster's nodes \
         are named by `rnx node list` and reached through any of them (e.g. `rnx gpu status --on {name}`)"
    )]
    NoSuchNode {
        source: ClientFileError,
        name: String,
    },
    #[error("{0}")]
    File(#[from] ClientFileError),
}

fn daemon_hint() -> String {
    format!(
        "The joblet daemon writes a ready rnx-config.yml into its state directory on first start \
         (by default {DAEMON_WRITTEN_CONFIG}); copy it to ~/.rnx/rnx-config.yml or pass it with --config"
    )
}

fn places_hint() -> String {
    format!(
        "rnx looks in --config FILE, then $RNX_CONFIG, then ~/.rnx/rnx-config.yml. {}",
        daemon_hint()
    )
}

/// Picks the config file: the flag, else `RNX_CONFIG`, else the one in home.
pub fn locate(flag: Option<&Path>, env: &LookupEnv) -> Result<(PathBuf, Source), ConfigError> {
    if let Some(path) = flag {
        return if path.is_file() {
            Ok((path.to_owned(), Source::Flag))
        } else {
            Err(ConfigError::FlagMissing {
                path: path.to_owned(),
            })
        };
    }
    if let Some(value) = &env.rnx_config {
        let path = PathBuf::from(value);
        return if path.is_file() {
            Ok((path, Source::Env))
        } else {
            Err(ConfigError::EnvMissing { path })
        };
    }
    match env.home_config() {
        Some(path) if path.is_file() => Ok((path, Source::Home)),
        Some(path) => Err(ConfigError::NotFound {
            home: path.display().to_string(),
        }),
        None => Err(ConfigError::NotFound {
            home: "~/.rnx/rnx-config.yml (no home directory known)".to_owned(),
        }),
    }
}

/// Reads `path` and picks `node` (or the file's default).
pub fn load_node(path: &Path, node: Option<&str>) -> Result<ResolvedNode, ConfigError> {
    let file = ClientConfigFile::load(path)?;
    file.resolve(path, node).map_err(|e| match e {
        ClientFileError::NoSuchNode { ref name, .. } => ConfigError::NoSuchNode {
            name: name.clone(),
            source: e,
        },
        other => ConfigError::File(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_config(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = ClientConfigFile::single("default", "127.0.0.1:1", "localhost", "A", "B", "C");
        std::fs::write(path, file.to_yaml()).unwrap();
    }

    #[test]
    fn lookup_order_flag_then_env_then_home() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("flag.yml");
        let envf = dir.path().join("env.yml");
        let home = dir.path().join("home");
        let homef = home.join(".rnx").join("rnx-config.yml");
        for p in [&flag, &envf, &homef] {
            write_config(p);
        }
        let env = LookupEnv {
            rnx_config: Some(envf.clone().into()),
            home: Some(home.clone()),
        };
        assert_eq!(
            locate(Some(&flag), &env).unwrap(),
            (flag.clone(), Source::Flag)
        );
        assert_eq!(locate(None, &env).unwrap(), (envf.clone(), Source::Env));
        let env_home = LookupEnv {
            rnx_config: None,
            home: Some(home.clone()),
        };
        assert_eq!(
            locate(None, &env_home).unwrap(),
            (homef.clone(), Source::Home)
        );
        // The found file resolves to its node.
        let node = load_node(&homef, None).unwrap();
        assert_eq!(node.address, "127.0.0.1:1");
    }

    #[test]
    fn explicit_paths_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        write_config(&home.join(".rnx").join("rnx-config.yml"));
        let env = LookupEnv {
            rnx_config: Some(dir.path().join("nope.yml").into()),
            home: Some(home),
        };
        let e = locate(None, &env).unwrap_err().to_string();
        assert!(e.contains("nope.yml") && e.contains("RNX_CONFIG"), "{e}");
        let e = locate(Some(&dir.path().join("gone.yml")), &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gone.yml") && e.contains("--config"), "{e}");
    }

    #[test]
    fn nothing_found_lists_the_places_and_the_daemon_file() {
        let dir = tempfile::tempdir().unwrap();
        let env = LookupEnv {
            rnx_config: None,
            home: Some(dir.path().to_owned()),
        };
        let e = locate(None, &env).unwrap_err().to_string();
        for needle in [
            "--config FILE",
            "$RNX_CONFIG",
            ".rnx/rnx-config.yml",
            DAEMON_WRITTEN_CONFIG,
        ] {
            assert!(e.contains(needle), "{needle} missing in: {e}");
        }
        let e = locate(None, &LookupEnv::default()).unwrap_err().to_string();
        assert!(e.contains("no home directory"), "{e}");
    }

    #[test]
    fn unknown_node_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yml");
        write_config(&path);
        let e = load_node(&path, Some("gpu7")).unwrap_err().to_string();
        assert!(e.contains("gpu7") && e.contains("default"), "{e}");
        assert!(e.ends_with("(e.g. `rnx gpu status --on gpu7`)"), "{e}");
    }
}
