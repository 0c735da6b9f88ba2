//! clap `value_parser` functions for every typed flag, built on
//! [`joblet_core::parse`]. Each error says what was expected; clap adds the
//! flag and the offending value (`invalid value '8XB' for '--gpu-memory
//! <SIZE>': expected …`).

use std::fmt;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use joblet_core::parse::{self, ParseError};
use joblet_core::spec::limits;
use joblet_core::JobState;

fn expected(e: ParseError) -> String {
    format!("expected {}", e.expected)
}

/// A whole number in `0..=max`; `-1`, `1.5` and `99999999999999999999` are
/// refused with the accepted range.
fn whole_number(s: &str, max: i64, unit: &str) -> Result<i64, String> {
    let form = || format!("expected a whole number from 0 to {max} ({unit})");
    let n: u64 = s.trim().parse().map_err(|_| form())?;
    i64::try_from(n).ok().filter(|n| *n <= max).ok_or_else(form)
}

/// `--max-cpu=PERCENT`: percent of one CPU.
pub fn cpu_percent(s: &str) -> Result<i64, String> {
    whole_number(
        s,
        limits::MAX_CPU_PERCENT,
        "percent of one CPU: 100 = one core, 250 = two and a half; 0 = no limit",
    )
}

/// What `--gpu` asks for: `count` whole GPUs, or (`milli` 1 to 999) that
/// many thousandths of one GPU (`count` is then 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuAsk {
    pub count: i64,
    pub milli: i64,
}

/// `--gpu=N` (whole GPUs) or `--gpu=0.5` (a share of one GPU, to the
/// thousandth).
pub fn gpu_count(s: &str) -> Result<GpuAsk, String> {
    let form = || {
        format!(
            "expected a whole number of GPUs from 0 to {} (0 = none), or a share of one GPU from 0.001 to 0.999 like 0.5 or 0.25",
            limits::MAX_GPU_COUNT
        )
    };
    let t = s.trim();
    let Some((whole, frac)) = t.split_once('.') else {
        let count = whole_number(t, limits::MAX_GPU_COUNT, "GPUs; 0 = none").map_err(|_| form())?;
        return Ok(GpuAsk { count, milli: 0 });
    };
    if frac.is_empty() || frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(form());
    }
    let whole = if whole.is_empty() {
        Ok(0)
    } else {
        whole_number(whole, limits::MAX_GPU_COUNT, "GPUs").map_err(|_| form())
    }?;
    let milli: i64 = format!("{frac:0<3}").parse().map_err(|_| form())?;
    match (whole, milli) {
        (n, 0) => Ok(GpuAsk { count: n, milli: 0 }),
        (0, m) => Ok(GpuAsk { count: 1, milli: m }),
        _ => Err(format!(
            "{}: a job gets whole GPUs or a share of one, not both",
            form()
        )),
    }
}

/// `--max-iobps=BYTES_PER_SEC`.
pub fn iobps(s: &str) -> Result<i64, String> {
    whole_number(s, i64::MAX, "bytes per second; 0 = no limit")
}

/// `--limit=N` of `job list`.
pub fn list_limit(s: &str) -> Result<i64, String> {
    whole_number(s, i64::from(u32::MAX), "jobs; 0 = all")
}

/// `rnx workflow list --limit`.
pub fn workflow_list_limit(s: &str) -> Result<i64, String> {
    whole_number(s, i64::from(u32::MAX), "workflows; 0 = all")
}

fn size_mb(s: &str, max: i64) -> Result<i64, String> {
    let mb = parse::parse_size_mb(s).map_err(expected)?;
    i64::try_from(mb)
        .ok()
        .filter(|mb| *mb <= max)
        .ok_or_else(|| format!("expected {}, at most {max} MB", parse::SIZE_MB_FORM))
}

/// `--max-memory=SIZE`, in MiB.
pub fn memory_mb(s: &str) -> Result<i64, String> {
    size_mb(s, limits::MAX_MEMORY_MB)
}

/// `--gpu-memory=SIZE`, in MiB per GPU.
pub fn gpu_memory_mb(s: &str) -> Result<i64, String> {
    size_mb(s, limits::MAX_GPU_MEMORY_MB)
}

/// `--cpu-cores=LIST`, normalised (`3,1,2` -> `1-3`).
pub fn cpu_list(s: &str) -> Result<String, String> {
    let cpus = parse::parse_cpu_list(s).map_err(expected)?;
    Ok(parse::format_cpu_list(&cpus))
}

/// A duration in whole seconds from `min` to `max`; `form` says what is
/// expected. A fraction of a second (`1500ms`) is refused, never cut.
fn whole_secs(s: &str, min: i64, max: i64, form: &str) -> Result<i64, String> {
    let d = parse::parse_duration(s).map_err(|_| format!("expected {form}"))?;
    Some(d)
        .filter(|d| d.subsec_nanos() == 0)
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .filter(|secs| (min..=max).contains(secs))
        .ok_or_else(|| format!("expected {form}"))
}

/// `--timeout=DURATION`: milliseconds; 0 = the node's default.
pub fn timeout_ms(s: &str) -> Result<i64, String> {
    let d = parse::parse_duration(s).map_err(expected)?;
    i64::try_from(d.as_millis())
        .ok()
        .filter(|ms| *ms <= limits::MAX_TIMEOUT_MS)
        .ok_or_else(|| {
            format!(
                "expected {}, at most {} seconds",
                parse::DURATION_FORM,
                limits::MAX_TIMEOUT_SECS
            )
        })
}

pub const GPU_TIME_FORM: &str =
    "a GPU time limit like 90s, 30m, 2h or 1h30m (whole seconds, at least 1s, at most 366 days)";

/// `--gpu-time=DURATION`: how long the job may hold its GPUs, in whole
/// seconds; more than 0 (leave the flag out for the node's default).
pub fn gpu_time_secs(s: &str) -> Result<i64, String> {
    whole_secs(s, 1, limits::MAX_TIMEOUT_SECS, GPU_TIME_FORM)
}

/// `--cuda=VERSION`: `12.2` or `12.2.1`.
pub fn cuda_version(s: &str) -> Result<String, String> {
    parse::parse_cuda_version(s).map_err(expected)
}

pub fn mig_profile(s: &str) -> Result<String, String> {
    parse::parse_mig_profile(s).map_err(expected)
}

/// `rnx audit --since`: a time span back from now, or a point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// `--since 2h`: records that ended in the last two hours.
    Ago(Duration),
    /// `--since 2025-01-02T03:04:05Z`, in Unix milliseconds.
    At(joblet_core::UnixMillis),
}

impl Since {
    /// The point in time, given the current one.
    pub fn to_unix_ms(self, now_ms: joblet_core::UnixMillis) -> joblet_core::UnixMillis {
        match self {
            Since::At(ms) => ms,
            Since::Ago(d) => {
                now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }
        }
    }
}

pub const SINCE_FORM: &str = "a duration back from now like 30m, 2h or 7days, or an RFC 3339 time like 2025-01-02T03:04:05Z or 2025-01-02T05:04:05+02:00, or a date like 2025-01-02 (UTC)";

/// `rnx audit --since=DURATION|RFC3339`.
pub fn since(s: &str) -> Result<Since, String> {
    let t = s.trim();
    if let Ok(d) = parse::parse_duration(t) {
        return Ok(Since::Ago(d));
    }
    rfc3339_ms(t)
        .map(Since::At)
        .ok_or_else(|| format!("expected {SINCE_FORM}"))
}

/// An RFC 3339 time with `Z` or a `±HH:MM` offset, or a bare date (UTC
/// midnight), in Unix milliseconds.
fn rfc3339_ms(t: &str) -> Option<joblet_core::UnixMillis> {
    let is_date = t.len() == 10 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-';
    let (local, offset_secs) = if is_date {
        (format!("{t}T00:00:00Z"), 0i64)
    } else if let Some(base) = t.strip_suffix(['Z', 'z']) {
        (format!("{base}Z"), 0)
    } else {
        // `…+HH:MM` / `…-HH:MM` after the seconds.
        let split = t.len().checked_sub(6)?;
        let (base, zone) = (t.get(..split)?, t.get(split..)?);
        let z = zone.as_bytes();
        let sign = match z[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        if z[3] != b':' {
            return None;
        }
        let hh: i64 = zone.get(1..3)?.parse().ok()?;
        let mm: i64 = zone.get(4..6)?.parse().ok()?;
        if hh > 23
            || mm > 59
            || !zone[1..3]
                .bytes()
                .chain(zone[4..6].bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        (format!("{base}Z"), sign * (hh * 3600 + mm * 60))
    };
    // Strict: `T` between date and time, a zone given (checked above).
    if local.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    let at = humantime::parse_rfc3339(&local).ok()?;
    let ms = i64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()?;
    Some(ms - offset_secs * 1000)
}

/// `rnx audit --owner=NAME`.
pub fn owner(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 256 || t.chars().any(char::is_control) {
        return Err("expected an owner name (the certificate's common name, as `rnx job list` shows it), like alice".to_owned());
    }
    Ok(t.to_owned())
}

pub const GRACE_FORM: &str = "a duration like 30s, 2m or 10 (whole seconds, at most 86400)";

/// `--grace=DURATION` of `job stop`: whole seconds, as the node takes it.
pub fn grace_secs(s: &str) -> Result<i64, String> {
    whole_secs(s, 0, 24 * 3600, GRACE_FORM)
}

/// `--reconnect-timeout=DURATION`.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse::parse_duration(s).map_err(expected)
}

/// `token create --expires=DURATION`: whole seconds, 1 s to ten years
/// (`30d`, `12h`, `52w`).
pub fn token_expiry(s: &str) -> Result<i64, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|_| format!("invalid value {s:?}: expected a duration like 12h, 30d or 52w"))?;
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    if !(1..=10 * 366 * 24 * 3600).contains(&secs) {
        return Err(format!(
            "invalid value {s:?}: expected 1s to ten years (like 30d)"
        ));
    }
    Ok(secs)
}

/// `--env KEY=VALUE`.
pub fn env_pair(s: &str) -> Result<(String, String), String> {
    parse::parse_env_pair(s).map_err(expected)
}

/// Runtime and volume names, the rule [`joblet_core::JobRequest::validate`]
/// applies (checked against it in the tests).
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

const NAME_FORM: &str = "up to 128 letters, digits, '.', '-' and '_'";

/// A runtime version: what may follow `@` in `NAME@VERSION`.
pub fn is_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
}

pub const RUNTIME_FORM: &str =
    "NAME[@VERSION]: a runtime name of up to 128 letters, digits, '.', '-' and '_', \
     optionally @ and a version of letters, digits, '.', '-', '_' and '+', \
     like python-3.11-ml or python-3.11-ml@1.0";

/// `--runtime=NAME[@VERSION]` and the `rnx runtime` commands' `NAME[@VERSION]`.
pub fn runtime_name(s: &str) -> Result<String, String> {
    let (name, version) = match s.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (s, None),
    };
    if is_name(name) && version.is_none_or(is_version) {
        Ok(s.to_owned())
    } else {
        Err(format!("expected {RUNTIME_FORM}"))
    }
}

/// The name part of `NAME[@VERSION]`.
pub fn runtime_base(s: &str) -> &str {
    s.split_once('@').map_or(s, |(name, _)| name)
}

pub const VOLUME_MOUNT_FORM: &str = "NAME[:ro]: a volume name of up to 128 letters, digits, '.', '-' and '_' \
     (a volume name, not a path), optionally :ro to mount it read-only, like data-lake or data-lake:ro";

/// `--volume=NAME[:ro]`: `NAME` (read-write) or `NAME:ro`; `NAME:rw` is
/// taken as `NAME`. The wire carries the normalised string.
pub fn volume_name(s: &str) -> Result<String, String> {
    let refuse = || format!("expected --volume={VOLUME_MOUNT_FORM}");
    let (name, mode) = match s.split_once(':') {
        Some((name, mode)) => (name, Some(mode)),
        None => (s, None),
    };
    if !is_name(name) {
        return Err(refuse());
    }
    match mode {
        None | Some("rw") => Ok(name.to_owned()),
        Some("ro") => Ok(format!("{name}:ro")),
        Some(other) => Err(format!(
            "unknown mount mode {:?}: expected --volume={VOLUME_MOUNT_FORM}",
            joblet_core::text::clip(other)
        )),
    }
}

/// `--executor=NAME`: `native`, `runc`, `crun`, `runsc`, or a name the
/// node's admin gave one (the rule [`joblet_core::JobRequest::validate`]
/// applies; whether the node has it, the node says).
pub fn executor_name(s: &str) -> Result<String, String> {
    match joblet_core::executor::check_executor_name(s) {
        Ok(()) => Ok(s.to_owned()),
        Err(_) => Err(format!(
            "expected an executor name of {NAME_FORM}, like native, runc, crun or runsc (`rnx whoami` lists this node's)"
        )),
    }
}

pub const CDI_DEVICE_FORM: &str =
    "a CDI device name vendor.com/class=name, like nvidia.com/gpu=0 or nvidia.com/gpu=all";

/// `--device=vendor.com/class=name`: a CDI device, as CDI names them.
pub fn cdi_device(s: &str) -> Result<String, String> {
    match joblet_core::executor::split_cdi_name(s) {
        Some(_) => Ok(s.to_owned()),
        None => Err(format!("expected {CDI_DEVICE_FORM}")),
    }
}

/// The name part of a `--volume` value.
pub fn volume_base(s: &str) -> &str {
    s.split_once(':').map_or(s, |(name, _)| name)
}

/// A volume's name in the `rnx volume` commands.
pub fn volume_ref(s: &str) -> Result<String, String> {
    if is_name(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "expected a volume name of {NAME_FORM}, like data-lake (a volume name, not a path)"
        ))
    }
}

/// `--extra=NAME` of `rnx runtime install|build`: one of the manifest's extras.
pub fn extra_name(s: &str) -> Result<String, String> {
    if is_name(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "expected the name of one of the manifest's extras, {NAME_FORM}, like tensorflow"
        ))
    }
}

pub const VOLUME_SIZE_FORM: &str = "a size like 1GB, 512MB or 16MB (at least 1MB; 1GB = 1024MB)";

/// `rnx volume create --size=SIZE`, in bytes.
pub fn volume_size_bytes(s: &str) -> Result<i64, String> {
    let mb = parse::parse_size_mb(s).map_err(|_| format!("expected {VOLUME_SIZE_FORM}"))?;
    if mb == 0 {
        return Err(format!("expected {VOLUME_SIZE_FORM}"));
    }
    i64::try_from(mb)
        .ok()
        .and_then(|mb| mb.checked_mul(1024 * 1024))
        .ok_or_else(|| format!("expected {VOLUME_SIZE_FORM}, at most {} MB", i64::MAX >> 20))
}

/// `--upload=PATH`.
pub fn upload_path(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('\0') {
        Err("expected a file or directory path, like model.py or dataset/".to_owned())
    } else {
        Ok(s.to_owned())
    }
}

/// A value parser whose refusal echoes the value cut as the node's
/// messages cut it ([`joblet_core::text::clip`]); clap's own would repeat a
/// 100 KB id whole. For ids (`job_ref`, `gpu_ref`).
#[derive(Clone, Copy)]
pub struct Clipped(pub fn(&str) -> Result<String, String>);

impl TypedValueParser for Clipped {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let text = value.to_string_lossy();
        let why = match value.to_str() {
            Some(t) => match (self.0)(t) {
                Ok(v) => return Ok(v),
                Err(why) => why,
            },
            None => "expected UTF-8 text".to_owned(),
        };
        let arg = arg.map_or_else(|| "ID".to_owned(), |a| a.to_string());
        Err(clap::Error::raw(
            ErrorKind::ValueValidation,
            format!(
                "invalid value '{}' for '{arg}': {why}\n",
                joblet_core::text::clip(&text)
            ),
        )
        .with_cmd(cmd))
    }
}

/// A job id or a unique prefix of one.
pub fn job_ref(s: &str) -> Result<String, String> {
    joblet_core::id::check_prefix(s).map_err(|e| e.to_string())?;
    Ok(s.to_ascii_lowercase())
}

/// A workflow id or a prefix of one: hex digits and `-`, as job ids.
pub fn workflow_ref(s: &str) -> Result<String, String> {
    joblet_core::id::check_prefix(s).map_err(|_| {
        format!(
            "invalid workflow id {:?}: expected a workflow id or a unique prefix of one, hex digits and '-' (see `rnx workflow list`)",
            joblet_core::text::clip(s)
        )
    })?;
    Ok(s.to_ascii_lowercase())
}

/// `--gpu-id`: a GPU UUID, a unique UUID prefix, or an index. Which GPU it
/// names is the node's business; here only its form is checked.
pub fn gpu_ref(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 96 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!(
            "invalid GPU id {:?}: expected a GPU UUID (GPU-1a2b3c4d-...), a unique prefix of one, or an index like 0",
            joblet_core::text::clip(s)
        ));
    }
    Ok(t.to_string())
}

/// A cluster node's name (`rnx node drain NAME`, `rnx gpu status --on
/// NAME`): a host-name-like word. Whether the cluster has such a node is
/// the node's business; here only its form is checked.
pub fn cluster_node(s: &str) -> Result<String, String> {
    let t = s.trim();
    let ok = !t.is_empty()
        && t.len() <= 253
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if !ok {
        return Err(
            "expected a node name as `rnx node list` shows it, like gpu-07 (letters, digits, '-', '.' and '_')"
                .to_owned(),
        );
    }
    Ok(t.to_owned())
}

/// `gpu watch --interval`: at least 100ms.
pub fn watch_interval(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < Duration::from_millis(100) {
        return Err(format!(
            "invalid interval {s:?}: expected at least 100ms, like 1s or 500ms"
        ));
    }
    Ok(d)
}

/// `--state STATE` of `job list`.
pub fn job_state(s: &str) -> Result<JobState, String> {
    s.parse::<JobState>().map_err(|e| e.to_string())
}

/// A `--secret-env` pair. Its `Debug` hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretPair {
    pub key: String,
    pub value: String,
}

impl fmt::Debug for SecretPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=***", self.key)
    }
}

/// Parses `--secret-env KEY=VALUE` without ever echoing the value: clap's
/// own error would print the whole argument, secret included.
#[derive(Clone, Copy, Debug, Default)]
pub struct SecretEnvParser;

impl TypedValueParser for SecretEnvParser {
    type Value = SecretPair;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<SecretPair, clap::Error> {
        let shown = |v: &str| -> String {
            match v.split_once('=') {
                Some((k, _)) => format!("{k}=***"),
                None => "***".to_owned(),
            }
        };
        let fail = |shown_value: String, why: String| {
            let arg = arg.map_or_else(|| "--secret-env".to_owned(), |a| a.to_string());
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid value '{shown_value}' for '{arg}': {why} (the secret value is not shown)\n"),
            )
            .with_cmd(cmd)
        };
        let Some(text) = value.to_str() else {
            return Err(fail("***".to_owned(), "expected UTF-8 text".to_owned()));
        };
        match parse::parse_env_pair(text) {
            Ok((key, value)) => Ok(SecretPair { key, value }),
            Err(e) => Err(fail(shown(text), expected(e))),
        }
    }
}

#[cfg(test)]
mod tests;

pub use crate::terminal::DetachKeys;

/// `--detach-keys=ctrl-p,ctrl-q`.
pub fn detach_keys(s: &str) -> Result<DetachKeys, String> {
    DetachKeys::parse(s)
}
