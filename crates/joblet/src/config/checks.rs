//! The checks of a configuration that need more than its types: values
//! against each other, `logging.level`'s filter syntax, `jobs.user` on this
//! host. One function, [`super::Config::check`], runs them for both
//! `joblet check-config` and `joblet server`.

use joblet_core::text::clip;

use super::{Config, JobsConfig};

pub(super) fn check_values(cfg: &Config) -> Result<(), (String, String)> {
    if cfg.version != "1" {
        return Err((
            "version".into(),
            format!(
                "unsupported version {:?}; expected \"1\"",
                clip(&cfg.version)
            ),
        ));
    }
    if cfg.server.state_dir.as_os_str().is_empty() || cfg.server.state_dir.is_relative() {
        return Err((
            "server.state_dir".into(),
            format!(
                "{:?} is not an absolute path; expected e.g. /var/lib/joblet",
                cfg.server.state_dir
            ),
        ));
    }
    for (key, dir, example) in [
        (
            "runtimes.dir",
            &cfg.runtimes.dir,
            "/var/lib/joblet/runtimes",
        ),
        ("volumes.dir", &cfg.volumes.dir, "/var/lib/joblet/volumes"),
    ] {
        if let Some(d) = dir.as_ref().filter(|d| d.is_relative()) {
            return Err((
                key.into(),
                format!("{d:?} is not an absolute path; expected e.g. {example}, or leave it out for a directory under server.state_dir"),
            ));
        }
    }
    check_sandbox_settings(cfg)?;
    cfg.cluster.check(cfg.server.address)?;
    cfg.executors.check()?;
    check_log_filter(&cfg.logging.level).map_err(|e| ("logging.level".to_owned(), e.to_string()))
}

pub const LOG_FILTER_FORM: &str = "a level (trace, debug, info, warn, error or off) or comma-separated directives like joblet=debug,warn (tracing's EnvFilter syntax, TARGET=LEVEL)";

/// `logging.level`: tracing's `EnvFilter` syntax, where every directive
/// names a level. A bare word that is not a level (`shouting`) would be a
/// target enabled at every level, which is what a mistyped level looks
/// like: the daemon would log nothing of its own, so it is refused.
pub fn check_log_filter(filter: &str) -> Result<(), LogFilterError> {
    let t = filter.trim();
    if t.is_empty() {
        return Err(LogFilterError::Empty);
    }
    if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(t) {
        return Err(LogFilterError::Invalid {
            filter: filter.to_owned(),
            problem: e.to_string(),
        });
    }
    for directive in t.split(',').map(str::trim) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, l)| l);
        if level
            .trim()
            .parse::<tracing_subscriber::filter::LevelFilter>()
            .is_err()
        {
            return Err(LogFilterError::NotALevel {
                directive: directive.to_owned(),
            });
        }
    }
    Ok(())
}

/// Why `logging.level` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFilterError {
    #[error("is empty; expected {LOG_FILTER_FORM}")]
    Empty,
    #[error(
        "invalid filter {:?} ({problem}); expected {LOG_FILTER_FORM}",
        clip(filter)
    )]
    Invalid { filter: String, problem: String },
    #[error("{:?} is not a log level; expected {LOG_FILTER_FORM}", clip(directive))]
    NotALevel { directive: String },
}

pub const USER_FORM: &str = "a user name, UID or UID:GID (e.g. nobody or 65534:65534)";

/// Why `jobs.user` cannot be the jobs' user (the caller names the
/// setting). Values are clipped in messages.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// Neither a user name nor `UID` / `UID:GID` in decimal.
    #[error("invalid value {:?}: expected {USER_FORM}", clip(spec))]
    Invalid { spec: String },
    #[error("no user named {:?} on this host: expected {USER_FORM}", clip(spec))]
    Unknown { spec: String },
    #[error("cannot look up user {:?}: {source}", clip(spec))]
    Lookup { spec: String, source: nix::Error },
    /// Uid or gid 0 without `jobs.allow_root`.
    #[error("{:?} {}; expected an unprivileged user such as nobody, or set jobs.allow_root: true to run jobs as root (not recommended)", clip(spec), if *uid_zero { "is root (uid 0)" } else { "has root's group (gid 0)" })]
    Root { spec: String, uid_zero: bool },
}

/// `jobs.user`: a passwd name, `UID` or `UID:GID`.
pub fn resolve_user(spec: &str) -> Result<(u32, u32), UserError> {
    let num = |s: &str| {
        s.parse::<u32>().map_err(|_| UserError::Invalid {
            spec: spec.to_string(),
        })
    };
    if let Some((u, g)) = spec.split_once(':') {
        return Ok((num(u)?, num(g)?));
    }
    if spec.chars().all(|c| c.is_ascii_digit()) && !spec.is_empty() {
        let uid = num(spec)?;
        return Ok((uid, uid));
    }
    match nix::unistd::User::from_name(spec) {
        Ok(Some(u)) => Ok((u.uid.as_raw(), u.gid.as_raw())),
        Ok(None) => Err(UserError::Unknown {
            spec: spec.to_string(),
        }),
        Err(source) => Err(UserError::Lookup {
            spec: spec.to_string(),
            source,
        }),
    }
}

/// Who jobs run as (`jobs.user`, resolved on this host): never root (uid or
/// gid 0) unless `jobs.allow_root`.
pub fn jobs_user(jobs: &JobsConfig) -> Result<(u32, u32), UserError> {
    let (uid, gid) = resolve_user(&jobs.user)?;
    if (uid == 0 || gid == 0) && !jobs.allow_root {
        return Err(UserError::Root {
            spec: jobs.user.clone(),
            uid_zero: uid == 0,
        });
    }
    Ok((uid, gid))
}

/// Most warm sandboxes a node keeps (`sandbox.warm_pool`): each holds a
/// shim, two init processes, namespaces and a cgroup.
pub const MAX_WARM_POOL: usize = 64;

/// `filesystem.*` and `sandbox.*` values serde cannot check by type.
fn check_sandbox_settings(cfg: &Config) -> Result<(), (String, String)> {
    for (i, m) in cfg.filesystem.allowed_mounts.iter().enumerate() {
        // The sandbox's own rule, so the daemon never starts with a mount
        // every job would refuse.
        joblet_sandbox::init::check_ro_mount(m).map_err(|e| {
            (
                format!("filesystem.allowed_mounts[{i}]"),
                format!("{e}; expected an absolute host directory such as /usr or /opt/tools"),
            )
        })?;
    }
    if !(1..=1_048_576).contains(&cfg.filesystem.tmp_size_mb) {
        return Err((
            "filesystem.tmp_size_mb".into(),
            format!(
                "invalid value {}: expected 1 to 1048576 (MiB)",
                cfg.filesystem.tmp_size_mb
            ),
        ));
    }
    if cfg.filesystem.work_size_mb > 1_048_576 {
        return Err((
            "filesystem.work_size_mb".into(),
            format!(
                "invalid value {}: expected 0 (the host directory, unlimited) or 1 to 1048576 (MiB)",
                cfg.filesystem.work_size_mb
            ),
        ));
    }
    crate::gpu::config_check::check(&cfg.gpu)?;
    for (key, n) in [
        ("sandbox.warm_pool", cfg.sandbox.warm_pool),
        ("gpu.warm_pool", cfg.gpu.warm_pool),
    ] {
        if n > MAX_WARM_POOL {
            return Err((
                key.into(),
                format!("invalid value {n}: expected 0 (no warm sandboxes) to {MAX_WARM_POOL}"),
            ));
        }
    }
    let base = &cfg.sandbox.cgroup_base;
    if base.is_empty()
        || base.starts_with('.')
        || !base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err((
            "sandbox.cgroup_base".into(),
            format!("invalid value {base:?}: expected a single directory name such as joblet"),
        ));
    }
    Ok(())
}
