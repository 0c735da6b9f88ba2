//! What an NVIDIA XID error means for the GPU that raised it.
//!
//! Like NVIDIA's Kubernetes device plugin: XIDs 13, 31, 43, 45, 68 and 109
//! are the application's fault (bad kernel, illegal address, stopped or
//! preempted context, video-decoder exception, context-switch timeout) and
//! leave the GPU healthy; any other XID degrades it. The descriptions come
//! from NVIDIA's XID catalogue, for the cause shown to operators.

/// How an XID affects its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidClass {
    /// The job's fault: the GPU stays in service.
    Application,
    /// The GPU itself is in trouble: take it out of service.
    Device,
}

/// Classifies an XID and names it.
pub fn classify_xid(xid: u64) -> (XidClass, &'static str) {
    let class = match xid {
        13 | 31 | 43 | 45 | 68 | 109 => XidClass::Application,
        _ => XidClass::Device,
    };
    (class, describe(xid))
}

fn describe(xid: u64) -> &'static str {
    match xid {
        13 => "graphics engine exception",
        31 => "GPU memory page fault",
        32 => "invalid or corrupted push buffer stream",
        38 => "driver firmware error",
        43 => "GPU stopped processing",
        45 => "preemptive cleanup, due to previous errors",
        48 => "double-bit ECC error",
        61 | 62 => "internal micro-controller error",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        68 => "video processor exception",
        69 => "graphics engine class error",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        109 => "context switch timeout",
        119 | 120 => "GSP error",
        _ => "see NVIDIA's XID catalogue",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_xids_are_the_jobs_fault() {
        for xid in [13, 31, 43, 45, 68, 109] {
            assert_eq!(classify_xid(xid).0, XidClass::Application, "XID {xid}");
        }
        for xid in [48, 63, 64, 74, 79, 92, 94, 95, 119, 1000] {
            assert_eq!(classify_xid(xid).0, XidClass::Device, "XID {xid}");
        }
        assert_eq!(classify_xid(79).1, "GPU has fallen off the bus");
    }
}
