//! What rnx shows about runtimes: a serde view built from the wire's
//! `RuntimeInfo` (the `--json` contract of `rnx runtime …`), its text forms
//! (the `list` table, the `info` report, the `install`/`build` summary)
//! and the plain progress lines shown when stderr is not a terminal.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use joblet_core::parse::format_duration;
use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::printer::human_bytes;
use crate::table;
use crate::view::{rfc3339, rfc3339_millis};

/// One runtime, installed or only in the node's catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeView {
    pub name: String,
    pub version: String,
    /// `name@version`, as `--runtime` and `rnx runtime info` take it.
    pub reference: String,
    pub description: Option<String>,
    /// False for a catalog entry `rnx runtime install` would build.
    pub installed: bool,
    /// `sha256:<hex>` of the installed tree; `null` when not installed.
    pub digest: Option<String>,
    /// `null` when not known (not installed).
    pub size_bytes: Option<u64>,
    pub files: Option<u64>,
    pub installed_at: Option<String>,
    pub installed_at_unix_ms: Option<UnixMillis>,
    /// The CUDA version its packages need; `null` = none.
    pub cuda: Option<String>,
    pub environment: BTreeMap<String, String>,
    pub self_check: Vec<String>,
    pub debian_packages: Vec<String>,
    /// `name==version`, from the runtime's lock.
    pub python_packages: Vec<String>,
    pub extras: Vec<String>,
    /// Jobs not yet finished that run in it.
    pub jobs: Vec<String>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

impl From<&pb::RuntimeInfo> for RuntimeView {
    fn from(r: &pb::RuntimeInfo) -> Self {
        let at = (r.installed_at_unix_ms > 0).then_some(r.installed_at_unix_ms);
        let known = r.installed || r.size_bytes > 0;
        RuntimeView {
            name: r.name.clone(),
            version: r.version.clone(),
            reference: reference(&r.name, &r.version),
            description: non_empty(&r.description),
            installed: r.installed,
            digest: non_empty(&r.digest),
            size_bytes: known.then_some(r.size_bytes),
            files: known.then_some(r.files),
            installed_at: at.map(rfc3339_millis),
            installed_at_unix_ms: at,
            cuda: non_empty(&r.cuda),
            environment: r
                .environment
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            self_check: r.self_check.clone(),
            debian_packages: r.debian_packages.clone(),
            python_packages: r.python_packages.clone(),
            extras: r.extras.clone(),
            jobs: r.jobs.clone(),
        }
    }
}

fn reference(name: &str, version: &str) -> String {
    if version.is_empty() {
        name.to_owned()
    } else {
        format!("{name}@{version}")
    }
}

/// `sha256:0123456789abcdef…` → `0123456789ab`.
pub fn short_digest(digest: &str) -> String {
    let hex = digest.split_once(':').map_or(digest, |(_, hex)| hex);
    hex.chars().take(12).collect()
}

/// How long ago `at` was, for recent times (`just now`, `5m ago`, `3h ago`,
/// `2d ago`); the date (`2025-01-02`) from a week on.
pub fn age(at: UnixMillis, now: UnixMillis) -> String {
    let secs = (now - at).max(0) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        86_400..604_800 => format!("{}d ago", secs / 86_400),
        _ => rfc3339(at).chars().take(10).collect(),
    }
}

const LIST_HEAD: [&str; 6] = ["NAME", "VERSION", "DIGEST", "SIZE", "INSTALLED", "JOBS"];

/// The human `rnx runtime list` table; catalog entries that are not
/// installed show `available`.
pub fn write_list(o: &mut dyn Write, runtimes: &[RuntimeView], now: UnixMillis) -> io::Result<()> {
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = runtimes
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                non_empty(&r.version).unwrap_or_else(dash),
                r.digest.as_deref().map_or_else(dash, short_digest),
                r.size_bytes.map_or_else(dash, human_bytes),
                match (r.installed, r.installed_at_unix_ms) {
                    (false, _) => "available".to_owned(),
                    (true, Some(at)) => age(at, now),
                    (true, None) => dash(),
                },
                if r.installed {
                    r.jobs.len().to_string()
                } else {
                    dash()
                },
            ]
        })
        .collect();
    table::write(o, &LIST_HEAD, &rows)
}

fn write_section(o: &mut dyn Write, title: &str, items: &[String]) -> io::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(o, "{title} ({}):", items.len())?;
    for i in items {
        writeln!(o, "  {i}")?;
    }
    Ok(())
}

/// The human `rnx runtime info` report.
pub fn write_info(o: &mut dyn Write, r: &RuntimeView, now: UnixMillis) -> io::Result<()> {
    writeln!(o, "Name: {}", r.name)?;
    if !r.version.is_empty() {
        writeln!(o, "Version: {}", r.version)?;
    }
    if let Some(d) = &r.description {
        writeln!(o, "Description: {d}")?;
    }
    if r.installed {
        writeln!(o, "Status: installed")?;
    } else {
        writeln!(
            o,
            "Status: available, not installed (`rnx runtime install {}` builds it)",
            r.reference
        )?;
    }
    if let Some(d) = &r.digest {
        writeln!(o, "Digest: {d}")?;
    }
    if let Some(size) = r.size_bytes {
        match r.files {
            Some(n) if n > 0 => writeln!(o, "Size: {} in {n} files", human_bytes(size))?,
            _ => writeln!(o, "Size: {}", human_bytes(size))?,
        }
    }
    if let Some(at) = r.installed_at_unix_ms {
        writeln!(o, "Installed: {} ({})", rfc3339(at), age(at, now))?;
    }
    writeln!(o, "CUDA: {}", r.cuda.as_deref().unwrap_or("none"))?;
    if !r.extras.is_empty() {
        writeln!(o, "Extras: {}", r.extras.join(", "))?;
    }
    if !r.environment.is_empty() {
        writeln!(o, "Environment:")?;
        for (k, v) in &r.environment {
            writeln!(o, "  {k}={v}")?;
        }
    }
    write_section(o, "Self Check", &r.self_check)?;
    write_section(o, "Debian Packages", &r.debian_packages)?;
    write_section(o, "Python Packages", &r.python_packages)?;
    if r.installed {
        if r.jobs.is_empty() {
            writeln!(o, "Jobs: none")?;
        } else {
            write_section(o, "Jobs", &r.jobs)?;
        }
    }
    Ok(())
}

/// What `rnx runtime install|build` prints at the end (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstalledView {
    pub runtime: RuntimeView,
    /// From the request to the node's last progress event.
    pub elapsed_ms: u64,
}

/// The one-line summary: `installed NAME@VERSION DIGEST SIZE in TIME`.
pub fn installed_line(v: &InstalledView) -> String {
    let r = &v.runtime;
    let mut line = format!("installed {}", r.reference);
    if let Some(d) = &r.digest {
        let (algo, _) = d.split_once(':').unwrap_or(("", ""));
        let prefix = if algo.is_empty() {
            String::new()
        } else {
            format!("{algo}:")
        };
        line.push_str(&format!(" {prefix}{}", short_digest(d)));
    }
    if let Some(size) = r.size_bytes {
        line.push_str(&format!(" {}", human_bytes(size)));
    }
    let took = Duration::from_millis(v.elapsed_ms);
    let took = if took < Duration::from_secs(1) {
        format!("{}ms", v.elapsed_ms)
    } else {
        format_duration(took)
    };
    line.push_str(&format!(" in {took}"));
    line
}

/// One progress event as a line: `[python] 12/40 installing numpy`.
pub fn progress_line(p: &pb::RuntimeProgress) -> String {
    let phase = if p.phase.is_empty() {
        "build"
    } else {
        &p.phase
    };
    let mut line = format!("[{phase}]");
    if p.total > 0 {
        line.push_str(&format!(" {}/{}", p.done, p.total));
    }
    if !p.message.is_empty() {
        line.push(' ');
        line.push_str(&p.message);
    }
    line
}

/// Progress for a log or a pipe: a line when the phase or the message
/// changes, not for every count.
#[derive(Debug, Default)]
pub struct PlainProgress {
    last: Option<(String, String)>,
}

impl PlainProgress {
    /// The line to print for `p`, if any.
    pub fn line(&mut self, p: &pb::RuntimeProgress) -> Option<String> {
        let key = (p.phase.clone(), p.message.clone());
        if self.last.as_ref() == Some(&key) {
            return None;
        }
        self.last = Some(key);
        Some(progress_line(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z
    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn installed() -> pb::RuntimeInfo {
        pb::RuntimeInfo {
            name: "python-3.11-ml".into(),
            version: "1.0".into(),
            description: "Python 3.11 with PyTorch 2.3 and CUDA 12.1 wheels".into(),
            installed: true,
            digest: DIGEST.into(),
            size_bytes: 5_905_580_032,
            files: 48_213,
            installed_at_unix_ms: T0,
            cuda: "12.1".into(),
            environment: [
                ("PYTHONNOUSERSITE".to_owned(), "1".to_owned()),
                (
                    "PATH".to_owned(),
                    "/opt/runtime/bin:/usr/bin:/bin".to_owned(),
                ),
            ]
            .into(),
            self_check: vec!["python -c 'import torch; print(torch.__version__)'".into()],
            debian_packages: vec!["libgomp1".into(), "python3.11".into()],
            python_packages: vec!["numpy==1.26.4".into(), "torch==2.3.1".into()],
            extras: vec!["tensorflow".into()],
            jobs: vec!["abc123de-f456-7890-1234-567890abcdef".into()],
        }
    }

    fn others() -> Vec<pb::RuntimeInfo> {
        vec![
            pb::RuntimeInfo {
                name: "python-3.11-ml".into(),
                version: "0.9".into(),
                installed: true,
                digest: "sha256:fedcba9876543210fedcba".into(),
                size_bytes: 4 << 30,
                files: 40_000,
                installed_at_unix_ms: T0 + 30 * 86_400_000,
                ..Default::default()
            },
            pb::RuntimeInfo {
                name: "cuda-12.4-base".into(),
                version: "2".into(),
                description: "CUDA 12.4 runtime libraries".into(),
                installed: false,
                ..Default::default()
            },
        ]
    }

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut buf = Vec::new();
        f(&mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn list_table() {
        let mut all = vec![installed()];
        all.extend(others());
        let views: Vec<RuntimeView> = all.iter().map(RuntimeView::from).collect();
        // 3 hours after the first was installed.
        insta::assert_snapshot!(text(|o| write_list(
            o,
            &views,
            T0 + 30 * 86_400_000 + 3 * 3_600_000
        )));
        assert_eq!(
            text(|o| write_list(o, &[], T0)),
            "NAME  VERSION  DIGEST  SIZE  INSTALLED  JOBS\n"
        );
    }

    #[test]
    fn info_installed() {
        let v = RuntimeView::from(&installed());
        insta::assert_snapshot!(text(|o| write_info(o, &v, T0 + 3 * 3_600_000)));
    }

    #[test]
    fn info_available() {
        let v = RuntimeView::from(&others()[1]);
        insta::assert_snapshot!(text(|o| write_info(o, &v, T0)));
    }

    #[test]
    fn json_view() {
        let v = RuntimeView::from(&installed());
        insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
        let a = serde_json::to_value(RuntimeView::from(&others()[1])).unwrap();
        assert_eq!(a["installed"], false);
        assert_eq!(a["digest"], serde_json::Value::Null);
        assert_eq!(a["size_bytes"], serde_json::Value::Null);
        assert_eq!(a["reference"], "cuda-12.4-base@2");
    }

    #[test]
    fn ages_and_digests() {
        assert_eq!(age(T0, T0 + 59_000), "just now");
        assert_eq!(age(T0, T0 - 5_000), "just now");
        assert_eq!(age(T0, T0 + 5 * 60_000), "5m ago");
        assert_eq!(age(T0, T0 + 3 * 3_600_000), "3h ago");
        assert_eq!(age(T0, T0 + 6 * 86_400_000), "6d ago");
        assert_eq!(age(T0, T0 + 7 * 86_400_000), "2025-01-02");
        assert_eq!(short_digest(DIGEST), "0123456789ab");
        assert_eq!(short_digest("abc"), "abc");
    }

    #[test]
    fn summary_line() {
        let v = InstalledView {
            runtime: RuntimeView::from(&installed()),
            elapsed_ms: 192_400,
        };
        assert_eq!(
            installed_line(&v),
            "installed python-3.11-ml@1.0 sha256:0123456789ab 5.5 GiB in 3m 12s"
        );
        let quick = InstalledView {
            elapsed_ms: 250,
            ..v
        };
        assert!(installed_line(&quick).ends_with(" in 250ms"));
    }

    #[test]
    fn plain_progress_prints_changes_only() {
        let ev = |phase: &str, done, total, message: &str| pb::RuntimeProgress {
            phase: phase.into(),
            done,
            total,
            message: message.into(),
            installed: None,
        };
        let mut p = PlainProgress::default();
        let lines: Vec<String> = [
            ev("base", 0, 0, "debootstrap bookworm"),
            ev("python", 1, 3, "numpy==1.26.4"),
            ev("python", 1, 3, "numpy==1.26.4"),
            ev("python", 2, 3, "torch==2.3.1"),
            ev("ingest", 10, 48_213, "hashing files"),
            ev("ingest", 20_000, 48_213, "hashing files"),
            ev("done", 0, 0, ""),
        ]
        .iter()
        .filter_map(|e| p.line(e))
        .collect();
        assert_eq!(
            lines,
            [
                "[base] debootstrap bookworm",
                "[python] 1/3 numpy==1.26.4",
                "[python] 2/3 torch==2.3.1",
                "[ingest] 10/48213 hashing files",
                "[done]",
            ]
        );
    }
}
