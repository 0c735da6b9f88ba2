//! Why a manifest was refused. Every error names the manifest file, and the field or the
//! referenced file that is wrong.

use std::path::PathBuf;

use crate::lock::LockError;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The YAML does not have the manifest's form; `message` is serde_norway's, which names
    /// the field and the accepted form.
    #[error("{}{}: {message} (the manifest format is described in runtimes/README.md)", path.display(), location(*line, *column))]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },

    #[error(
        "{}: field `{field}`: file `{file}` does not exist (paths are relative to the \
         manifest's directory)",
        manifest.display()
    )]
    MissingFile {
        manifest: PathBuf,
        field: String,
        file: String,
    },

    #[error("{}: field `{field}`: lock file `{file}` {source}", manifest.display())]
    Lock {
        manifest: PathBuf,
        field: String,
        file: String,
        #[source]
        source: LockError,
    },

    #[error(
        "{}: field `cuda`: lock file `{file}` pins {package} {found}, but `cuda` is {}; \
         set `cuda: \"{major}.0\"` or higher (the CUDA version the node's driver must support)",
        manifest.display(),
        declared.as_deref().map(|d| format!("\"{d}\"")).unwrap_or_else(|| "not set".to_string()),
        major = found.split('.').next().unwrap_or_default()
    )]
    Cuda {
        manifest: PathBuf,
        file: String,
        package: String,
        found: String,
        declared: Option<String>,
    },

    #[error("{}: field `{field}`: {message}", manifest.display())]
    Invalid {
        manifest: PathBuf,
        field: &'static str,
        message: &'static str,
    },

    #[error(
        "the uploaded files have no `{expected}` at their top: send a runtime directory \
         with its manifest"
    )]
    NoManifest { expected: &'static str },

    #[error("uploaded file name `{path}` is not allowed: use relative paths without `..`")]
    BadUploadPath { path: String },
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}
