//! Simulated GPUs (`gpu.simulate`): point NVML at the project's fake
//! library and tell it which profile or capture to serve.
//!
//! The fake library reads `MOCK_NVML_CONFIG` / `MOCK_NVML_STATE` when NVML
//! is initialised, so [`prepare`] runs at the start of `main`, before any
//! thread exists (setting the environment is only sound then).

use std::path::{Path, PathBuf};

use crate::config::GpuConfig;

/// Where the fake library is looked for when `gpu.nvml_library` is unset:
/// next to the `joblet` binary, as `cargo build` leaves it.
pub const FAKE_LIBRARY_NAME: &str = "libnvidia_ml.so";

/// A simulated node's settings, once prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simulation {
    /// The profile or capture served.
    pub from: PathBuf,
    /// The fake library that serves it.
    pub library: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("gpu.simulate needs the fake NVML library, but {path} does not exist: build it with `cargo build --workspace` (it is target/<profile>/{FAKE_LIBRARY_NAME}) or set gpu.nvml_library to it")]
    NoLibrary { path: PathBuf },
    #[error("cannot locate the joblet binary to find the fake NVML library next to it: {0}; set gpu.nvml_library")]
    NoExe(std::io::Error),
}

/// Resolves the library for `cfg.simulate` (without touching the
/// environment); `None` when the node is not simulated.
pub fn resolve(cfg: &GpuConfig, exe: &Path) -> Result<Option<Simulation>, SimulateError> {
    let Some(from) = &cfg.simulate else {
        return Ok(None);
    };
    let library = match &cfg.nvml_library {
        Some(lib) => lib.clone(),
        None => exe
            .parent()
            .map(|d| d.join(FAKE_LIBRARY_NAME))
            .unwrap_or_else(|| PathBuf::from(FAKE_LIBRARY_NAME)),
    };
    if !library.is_file() {
        return Err(SimulateError::NoLibrary { path: library });
    }
    Ok(Some(Simulation {
        from: from.clone(),
        library,
    }))
}

/// Resolves the simulation and exports its environment for the fake
/// library. Call before any thread is started.
pub fn prepare(cfg: &GpuConfig) -> Result<Option<Simulation>, SimulateError> {
    if !cfg.enabled || cfg.simulate.is_none() {
        return Ok(None);
    }
    let exe = std::env::current_exe().map_err(SimulateError::NoExe)?;
    let sim = resolve(cfg, &exe)?;
    if let Some(sim) = &sim {
        std::env::set_var("MOCK_NVML_CONFIG", &sim.from);
        match &cfg.simulate_state {
            Some(state) => std::env::set_var("MOCK_NVML_STATE", state),
            None => std::env::remove_var("MOCK_NVML_STATE"),
        }
        // A real node's device files must not change what the fake serves.
        std::env::remove_var("MOCK_NVML_DEV_DIR");
    }
    Ok(sim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_found_next_to_the_binary_or_named_in_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("p.yaml");
        std::fs::write(&profile, "x").unwrap();
        let exe = dir.path().join("joblet");
        let mut cfg = GpuConfig {
            enabled: true,
            simulate: Some(profile.clone()),
            ..GpuConfig::default()
        };
        let err = resolve(&cfg, &exe).unwrap_err().to_string();
        assert!(
            err.contains("libnvidia_ml.so") && err.contains("cargo build"),
            "{err}"
        );
        std::fs::write(dir.path().join(FAKE_LIBRARY_NAME), "").unwrap();
        let sim = resolve(&cfg, &exe).unwrap().unwrap();
        assert_eq!(sim.library, dir.path().join(FAKE_LIBRARY_NAME));
        assert_eq!(sim.from, profile);
        cfg.nvml_library = Some(dir.path().join("other.so"));
        assert!(resolve(&cfg, &exe).is_err());
        cfg.simulate = None;
        assert_eq!(resolve(&cfg, &exe).unwrap(), None);
    }
}
