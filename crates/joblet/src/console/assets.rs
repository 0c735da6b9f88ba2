//! The console's files, compiled into the daemon's binary.
//!
//! `include_bytes!` over an explicit table rather than the `rust-embed`
//! crate: no dependency (and no proc macro to build), the table is the
//! list of what is served (anything else is a 404 by construction), and a
//! unit test checks that every file under `assets/` is in it, byte for
//! byte, so nothing is forgotten. Cargo rebuilds the daemon when any of
//! them changes.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use sha2::{Digest, Sha256};

/// One file of the console.
#[derive(Debug)]
pub struct Asset {
    /// Relative to `assets/`, `/`-separated; the URL is
    /// `/console/assets/<path>` (`index.html` is served at `/console/`).
    pub path: &'static str,
    pub body: &'static [u8],
}

macro_rules! assets {
    ($($path:literal),* $(,)?) => {
        &[$(Asset { path: $path, body: include_bytes!(concat!("assets/", $path)) }),*]
    };
}

/// Every file served, in no particular order.
pub const ASSETS: &[Asset] = assets![
    "index.html",
    "console.css",
    "js/app.js",
    "js/api.js",
    "js/dom.js",
    "js/format.js",
    "js/charts.js",
    "js/dag.js",
    "js/pages/overview.js",
    "js/pages/jobs.js",
    "js/pages/job.js",
    "js/pages/gpus.js",
    "js/pages/workflows.js",
    "js/pages/history.js",
    "vendor/uplot/uPlot.esm.js",
    "vendor/uplot/uPlot.min.css",
    "vendor/uplot/LICENSE",
    "vendor/uplot/README.md",
];

/// The file at `path`, if the console has one.
pub fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// The `Content-Type` of a file, by its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        // LICENSE, README.md: shown as text.
        _ => "text/plain; charset=utf-8",
    }
}

/// A strong `ETag` of each file (quoted SHA-256 prefix), computed once.
static ETAGS: LazyLock<BTreeMap<&'static str, String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            (a.path, format!("\"{}\"", hex::encode(&digest[..16])))
        })
        .collect()
});

impl Asset {
    pub fn content_type(&self) -> &'static str {
        content_type(self.path)
    }

    pub fn etag(&self) -> &'static str {
        ETAGS.get(self.path).map(String::as_str).unwrap_or("\"\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn files(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, root, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, p));
            }
        }
    }

    #[test]
    fn every_file_under_assets_is_served_as_it_is() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console/assets");
        let mut found = Vec::new();
        files(&root, &root, &mut found);
        for (rel, path) in &found {
            let asset = find(rel).unwrap_or_else(|| {
                panic!("{rel} is under assets/ but not in ASSETS (console/assets.rs)")
            });
            assert_eq!(asset.body, std::fs::read(path).unwrap(), "{rel}");
        }
        assert_eq!(found.len(), ASSETS.len(), "ASSETS lists a file twice");
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("js/app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("a/b.css"), "text/css; charset=utf-8");
        assert_eq!(
            content_type("vendor/uplot/LICENSE"),
            "text/plain; charset=utf-8"
        );
        for a in ASSETS {
            assert!(!a.content_type().is_empty());
        }
    }

    #[test]
    fn etags_differ_by_content_and_are_quoted() {
        let a = find("js/app.js").unwrap().etag();
        let b = find("console.css").unwrap().etag();
        assert_ne!(a, b);
        assert!(
            a.starts_with('"') && a.ends_with('"') && a.len() == 34,
            "{a}"
        );
    }
}
