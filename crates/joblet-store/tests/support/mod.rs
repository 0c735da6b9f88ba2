//! A store in a temporary directory, for the store's integration tests.

// Each test file uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;

use joblet_store::Store;

/// A temporary directory holding a database and its secret key, removed
/// on drop; [`Env::open`] opens (or reopens) the store there.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("state.db")
    }
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("secret.key")
    }
    pub fn open(&self) -> Store {
        Store::open(&self.db(), &self.key()).unwrap()
    }
}
