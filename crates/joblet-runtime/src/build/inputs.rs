//! The inputs digest: what a tree is built from. Two builds with the same inputs produce
//! the same runtime (up to Debian updates in the suite), so the second reuses the first's
//! tree instead of running mmdebstrap and uv again.

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::manifest::Manifest;

/// Bump when the build itself changes what a tree contains for the same manifest.
const FORMAT: u32 = 1;

#[derive(Serialize)]
struct Inputs<'a> {
    format: u32,
    arch: &'a str,
    suite: &'a str,
    variant: &'a str,
    packages: Vec<&'a str>,
    /// sha256 of the main lock, if the runtime has Python packages.
    python_lock: Option<&'a str>,
    /// Extras chosen → sha256 of their lock.
    extras: BTreeMap<&'a str, &'a str>,
}

/// `sha256:<hex>` over the base (suite, variant, sorted package list), the architecture,
/// the lock files' contents and the extras chosen (`extras` must be names the manifest has).
/// Description, environment, `cuda` and `self_check` are not inputs: they do not change
/// the tree.
pub(crate) fn digest(manifest: &Manifest, extras: &[&str], arch: &str) -> String {
    let python = manifest.python.as_ref();
    let lock_hash = |rel| manifest.lock(rel).map(|l| l.sha256.as_str());
    let mut packages: Vec<&str> = manifest.base.packages.iter().map(|p| p.as_str()).collect();
    packages.sort_unstable();
    packages.dedup();
    let inputs = Inputs {
        format: FORMAT,
        arch,
        suite: manifest.base.suite.as_str(),
        variant: manifest.base.variant.as_str(),
        packages,
        python_lock: python.and_then(|p| lock_hash(&p.lock)),
        extras: extras
            .iter()
            .filter_map(|name| {
                let (key, rel) = python?.extras.iter().find(|(k, _)| k.as_str() == *name)?;
                Some((key.as_str(), lock_hash(rel)?))
            })
            .collect(),
    };
    let json = serde_json::to_vec(&inputs).expect("strings and maps always serialise");
    format!("sha256:{}", hex::encode(Sha256::digest(json)))
}
