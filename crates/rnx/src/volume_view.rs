//! What rnx shows about volumes: a serde view built from the wire's
//! `Volume` (the `--json` contract of `rnx volume …`) and its text forms
//! (the `list` table, the `inspect` report, the line after a change).

use std::io::{self, Write};

use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::printer::human_bytes;
use crate::table;
use crate::view::{rfc3339, rfc3339_millis};

/// Where a job sees volume `name`.
pub fn mount_path(name: &str) -> String {
    format!("/volumes/{name}")
}

/// One volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeView {
    pub name: String,
    /// `filesystem` (an ext4 image, kept across reboots) or `memory` (a
    /// tmpfs, emptied by a reboot).
    #[serde(rename = "type")]
    pub kind: String,
    pub size_bytes: u64,
    /// What it holds now; `null` when the node cannot tell (not mounted).
    pub used_bytes: Option<u64>,
    pub owner: String,
    /// True when every caller's jobs may mount it, not only its owner's.
    pub shared: bool,
    pub created: Option<String>,
    pub created_unix_ms: Option<UnixMillis>,
    /// Jobs not yet finished that mount it.
    pub jobs: Vec<String>,
    /// `mounted`, or why not.
    pub status: String,
    /// Where jobs see it.
    pub mount_path: String,
}

impl From<&pb::Volume> for VolumeView {
    fn from(v: &pb::Volume) -> Self {
        let created = (v.created_at_unix_ms > 0).then_some(v.created_at_unix_ms);
        VolumeView {
            name: v.name.clone(),
            kind: if v.r#type.is_empty() {
                "filesystem".to_owned()
            } else {
                v.r#type.clone()
            },
            size_bytes: v.size_bytes,
            used_bytes: v.used_bytes,
            owner: v.owner.clone(),
            shared: v.shared,
            created: created.map(rfc3339_millis),
            created_unix_ms: created,
            jobs: v.jobs.clone(),
            status: v.status.clone(),
            mount_path: mount_path(&v.name),
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

const LIST_HEAD: [&str; 8] = [
    "NAME", "TYPE", "SIZE", "USED", "OWNER", "SHARED", "JOBS", "STATUS",
];

/// The human `rnx volume list` table.
pub fn write_list(o: &mut dyn Write, volumes: &[VolumeView]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = volumes
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.kind.clone(),
                human_bytes(v.size_bytes),
                v.used_bytes.map_or_else(|| "-".to_owned(), human_bytes),
                v.owner.clone(),
                yes_no(v.shared).to_owned(),
                v.jobs.len().to_string(),
                if v.status.is_empty() {
                    "-".to_owned()
                } else {
                    v.status.clone()
                },
            ]
        })
        .collect();
    table::write(o, &LIST_HEAD, &rows)
}

fn kind_note(kind: &str) -> &'static str {
    match kind {
        "filesystem" => " (an ext4 image, kept across reboots)",
        "memory" => " (a tmpfs in the node's memory, emptied by a reboot)",
        _ => "",
    }
}

/// The human `rnx volume inspect` report.
pub fn write_inspect(o: &mut dyn Write, v: &VolumeView) -> io::Result<()> {
    writeln!(o, "Name: {}", v.name)?;
    writeln!(o, "Type: {}{}", v.kind, kind_note(&v.kind))?;
    writeln!(o, "Size: {}", human_bytes(v.size_bytes))?;
    match v.used_bytes {
        Some(used) if v.size_bytes > 0 => writeln!(
            o,
            "Used: {} ({}%)",
            human_bytes(used),
            used.saturating_mul(100) / v.size_bytes
        )?,
        Some(used) => writeln!(o, "Used: {}", human_bytes(used))?,
        None => writeln!(o, "Used: unknown")?,
    }
    writeln!(o, "Owner: {}", v.owner)?;
    if v.shared {
        writeln!(o, "Shared: yes (every caller's jobs may mount it)")?;
    } else {
        writeln!(o, "Shared: no (only {}'s jobs may mount it)", v.owner)?;
    }
    if let Some(at) = v.created_unix_ms {
        writeln!(o, "Created: {}", rfc3339(at))?;
    }
    if !v.status.is_empty() {
        writeln!(o, "Status: {}", v.status)?;
    }
    writeln!(
        o,
        "Mount: {} (rnx job run --volume={}, or --volume={}:ro for read-only)",
        v.mount_path, v.name, v.name
    )?;
    if v.jobs.is_empty() {
        writeln!(o, "Jobs: none")?;
    } else {
        writeln!(o, "Jobs ({}):", v.jobs.len())?;
        for j in &v.jobs {
            writeln!(o, "  {j}")?;
        }
    }
    Ok(())
}

/// What a change did, in one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeChange {
    Created,
    Removed,
    Shared,
    Unshared,
}

/// The line `rnx volume create|remove|share|unshare` prints.
pub fn change_line(v: &VolumeView, change: VolumeChange) -> String {
    let name = &v.name;
    match change {
        VolumeChange::Created => format!(
            "created volume {name} ({}, {}{}); jobs mount it with --volume={name}",
            v.kind,
            human_bytes(v.size_bytes),
            if v.shared { ", shared" } else { "" }
        ),
        VolumeChange::Removed => format!("removed volume {name}"),
        VolumeChange::Shared => {
            format!("volume {name} is shared: every caller's jobs may mount it")
        }
        VolumeChange::Unshared => format!(
            "volume {name} is no longer shared: only {}'s jobs may mount it",
            v.owner
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z

    fn volumes() -> Vec<pb::Volume> {
        vec![
            pb::Volume {
                name: "data-lake".into(),
                r#type: "filesystem".into(),
                size_bytes: 1 << 30,
                used_bytes: Some(120 << 20),
                owner: "alice".into(),
                shared: true,
                created_at_unix_ms: T0,
                jobs: vec![
                    "abc123de-f456-7890-1234-567890abcdef".into(),
                    "0f0e0d0c-0000-4000-8000-000000000001".into(),
                ],
                status: "mounted".into(),
            },
            pb::Volume {
                name: "scratch".into(),
                r#type: "memory".into(),
                size_bytes: 512 << 20,
                used_bytes: None,
                owner: "bob".into(),
                shared: false,
                created_at_unix_ms: T0 + 60_000,
                jobs: vec![],
                status: "not mounted: the node restarted; it is mounted again when a job uses it"
                    .into(),
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
        let views: Vec<VolumeView> = volumes().iter().map(VolumeView::from).collect();
        insta::assert_snapshot!(text(|o| write_list(o, &views)));
        assert_eq!(
            text(|o| write_list(o, &[])),
            "NAME  TYPE  SIZE  USED  OWNER  SHARED  JOBS  STATUS\n"
        );
    }

    #[test]
    fn inspect_shared_and_in_use() {
        let v = VolumeView::from(&volumes()[0]);
        insta::assert_snapshot!(text(|o| write_inspect(o, &v)));
    }

    #[test]
    fn inspect_private_and_unmounted() {
        let v = VolumeView::from(&volumes()[1]);
        insta::assert_snapshot!(text(|o| write_inspect(o, &v)));
    }

    #[test]
    fn json_view() {
        let views: Vec<VolumeView> = volumes().iter().map(VolumeView::from).collect();
        insta::assert_snapshot!(serde_json::to_string_pretty(&views).unwrap());
        let v = serde_json::to_value(&views[1]).unwrap();
        assert_eq!(v["type"], "memory");
        assert_eq!(v["used_bytes"], serde_json::Value::Null);
        assert_eq!(v["size_bytes"], 512u64 << 20);
    }

    #[test]
    fn change_lines() {
        let shared = VolumeView::from(&volumes()[0]);
        let private = VolumeView::from(&volumes()[1]);
        assert_eq!(
            change_line(&shared, VolumeChange::Created),
            "created volume data-lake (filesystem, 1.0 GiB, shared); jobs mount it with --volume=data-lake"
        );
        assert_eq!(
            change_line(&private, VolumeChange::Created),
            "created volume scratch (memory, 512.0 MiB); jobs mount it with --volume=scratch"
        );
        assert_eq!(
            change_line(&private, VolumeChange::Removed),
            "removed volume scratch"
        );
        assert_eq!(
            change_line(&shared, VolumeChange::Shared),
            "volume data-lake is shared: every caller's jobs may mount it"
        );
        assert_eq!(
            change_line(&private, VolumeChange::Unshared),
            "volume scratch is no longer shared: only bob's jobs may mount it"
        );
    }
}
