//! How one NVML answer becomes a model value: "not supported" / "no data"
//! is `None` (never an error), `GPU_IS_LOST` flags the GPU and stops
//! further queries on it, anything else is `None` plus a warning.

use nvml_wrapper::error::NvmlError;

/// Answers gathered about one GPU, with what went wrong on the way.
#[derive(Debug)]
pub(crate) struct Answers {
    /// NVML index of the GPU the answers are about (for messages).
    pub gpu: u32,
    /// NVML said `GPU_IS_LOST`; later queries are skipped.
    pub lost: bool,
    /// Failures worth showing the user.
    pub warnings: Vec<String>,
}

/// Errors that only mean "this GPU or driver does not have that": the
/// field stays `None` and nobody is warned. A symbol the library does not
/// export (an older driver) counts as absent too.
pub(crate) fn is_absent(err: &NvmlError) -> bool {
    matches!(
        err,
        NvmlError::NotSupported
            | NvmlError::NoData
            | NvmlError::FunctionNotFound
            | NvmlError::FailedToLoadSymbol(_)
    )
}

impl Answers {
    pub fn new(gpu: u32) -> Answers {
        Answers {
            gpu,
            lost: false,
            warnings: Vec::new(),
        }
    }

    /// Run `query` unless the GPU is already lost and sort its answer.
    pub fn get<T>(
        &mut self,
        call: &'static str,
        query: impl FnOnce() -> Result<T, NvmlError>,
    ) -> Option<T> {
        if self.lost {
            return None;
        }
        match query() {
            Ok(value) => Some(value),
            Err(err) => {
                self.note(call, &err);
                None
            }
        }
    }

    /// Run `query` even when the GPU is already lost: identity facts
    /// (UUID, PCI bus id) are often still cached by the driver and say
    /// which GPU was lost.
    pub fn get_always<T>(
        &mut self,
        call: &'static str,
        query: impl FnOnce() -> Result<T, NvmlError>,
    ) -> Option<T> {
        match query() {
            Ok(value) => Some(value),
            Err(NvmlError::GpuLost) if self.lost => None,
            Err(err) => {
                self.note(call, &err);
                None
            }
        }
    }

    /// Record a failed call (absent → debug log only).
    pub fn note(&mut self, call: &'static str, err: &NvmlError) {
        match err {
            NvmlError::GpuLost => {
                tracing::warn!(gpu = self.gpu, call, "NVML reports the GPU as lost");
                self.lost = true;
            }
            e if is_absent(e) => {
                tracing::debug!(gpu = self.gpu, call, error = %e, "not available");
            }
            e => {
                tracing::warn!(gpu = self.gpu, call, error = %e, "NVML query failed");
                self.warnings.push(format!(
                    "GPU {}: {call} failed ({e}); the field is left empty",
                    self.gpu
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_none_without_warning() {
        let mut a = Answers::new(2);
        assert_eq!(a.get::<u32>("x", || Err(NvmlError::NotSupported)), None);
        assert!(a.warnings.is_empty());
        assert!(!a.lost);
    }

    #[test]
    fn lost_stops_later_queries() {
        let mut a = Answers::new(2);
        assert_eq!(a.get::<u32>("x", || Err(NvmlError::GpuLost)), None);
        assert!(a.lost);
        let mut called = false;
        assert_eq!(
            a.get("y", || {
                called = true;
                Ok(1u32)
            }),
            None
        );
        assert!(!called);
    }

    #[test]
    fn other_errors_warn_with_gpu_and_call() {
        let mut a = Answers::new(5);
        assert_eq!(
            a.get::<u32>("nvmlDeviceGetX", || Err(NvmlError::Unknown)),
            None
        );
        assert_eq!(a.warnings.len(), 1);
        assert!(a.warnings[0].contains("GPU 5"));
        assert!(a.warnings[0].contains("nvmlDeviceGetX"));
    }
}
