//! Values an `nvidia-smi` capture lacks, derived from what it has: compute capability, MIG profile names and MIG UUIDs.

/// CUDA compute capability by product-name token. Only boards whose
/// capability is fixed by the chip are listed (NVIDIA "CUDA GPUs" table):
///
/// | token | capability |
/// |---|---|
/// | `V100` | 7.0 |
/// | `T4` | 7.5 |
/// | `A100`, `A30` | 8.0 |
/// | `A10`, `A40`, `A4000`, `A5000`, `A6000`, `3060`, `3070`, `3080`, `3090` | 8.6 |
/// | `L4`, `L40`, `L40S` | 8.9 |
/// | `H100`, `H200` | 9.0 |
const COMPUTE_CAPABILITY: &[(&str, (i32, i32))] = &[
    ("V100", (7, 0)),
    ("T4", (7, 5)),
    ("A100", (8, 0)),
    ("A30", (8, 0)),
    ("A10", (8, 6)),
    ("A40", (8, 6)),
    ("A4000", (8, 6)),
    ("A5000", (8, 6)),
    ("A6000", (8, 6)),
    ("3060", (8, 6)),
    ("3070", (8, 6)),
    ("3080", (8, 6)),
    ("3090", (8, 6)),
    ("L4", (8, 9)),
    ("L40", (8, 9)),
    ("L40S", (8, 9)),
    ("H100", (9, 0)),
    ("H200", (9, 0)),
];

/// Tokens of a product name: split on blanks and `-`, upper-cased
/// (`NVIDIA A100-SXM4-80GB` → `NVIDIA`, `A100`, `SXM4`, `80GB`).
fn tokens(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| c.is_whitespace() || c == '-')
        .filter(|t| !t.is_empty())
        .map(|t| t.to_ascii_uppercase())
}

/// Compute capability of a product name, if its family is in the table.
/// Whole tokens are compared, so `A10` does not match `A100`.
pub fn compute_capability(product_name: &str) -> Option<(i32, i32)> {
    tokens(product_name).find_map(|t| {
        COMPUTE_CAPABILITY
            .iter()
            .find(|(token, _)| *token == t)
            .map(|(_, cc)| *cc)
    })
}

/// SM count of each compute-slice count of a MIG-capable family (NVIDIA
/// MIG user guide, "Supported MIG profiles"): `(SMs, slices)`.
const MIG_SMS: &[(&str, &[(u32, u32)])] = &[
    ("A100", &[(14, 1), (28, 2), (42, 3), (56, 4), (98, 7)]),
    ("A30", &[(14, 1), (28, 2), (56, 4)]),
    ("H100", &[(16, 1), (32, 2), (60, 3), (64, 4), (132, 7)]),
];

/// Compute slices (`g`) of a MIG device of `parent_name` with `sm_count`
/// SMs, if the family and the SM count are in the table.
pub fn mig_compute_slices(parent_name: &str, sm_count: u32) -> Option<u32> {
    let family =
        tokens(parent_name).find_map(|t| MIG_SMS.iter().find(|(family, _)| *family == t))?;
    family
        .1
        .iter()
        .find(|(sms, _)| *sms == sm_count)
        .map(|(_, slices)| *slices)
}

/// MIG profile name as the driver prints it (`1g.10gb`, `1g.10gb+me`):
/// compute slices from the SM count, memory rounded up to whole GiB, `+me`
/// for a one-slice instance that owns the OFA engine (media extensions).
/// `None` when the family or SM count is unknown.
pub fn mig_profile_name(
    parent_name: &str,
    sm_count: u32,
    memory_mib: u64,
    ofa_count: u32,
) -> Option<String> {
    let slices = mig_compute_slices(parent_name, sm_count)?;
    let gib = memory_mib.div_ceil(1024);
    let media = if slices == 1 && ofa_count > 0 {
        "+me"
    } else {
        ""
    };
    Some(format!("{slices}g.{gib}gb{media}"))
}

/// Deterministic MIG UUID (`MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`) for a
/// MIG device the source gives no UUID for: FNV-1a of the parent UUID and
/// the instance ids, so it is stable across runs and distinct per instance.
pub fn mig_uuid(parent_uuid: &str, gpu_instance_id: u32, compute_instance_id: u32) -> String {
    let key = format!("{parent_uuid}/{gpu_instance_id}/{compute_instance_id}");
    let hi = fnv1a(0xcbf2_9ce4_8422_2325, key.as_bytes());
    let lo = fnv1a(hi ^ 0x9e37_79b9_7f4a_7c15, key.as_bytes());
    let h = format!("{hi:016x}{lo:016x}");
    format!(
        "MIG-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |acc, b| {
        (acc ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capability_by_family() {
        assert_eq!(compute_capability("NVIDIA A100-SXM4-80GB"), Some((8, 0)));
        assert_eq!(compute_capability("NVIDIA RTX A5000"), Some((8, 6)));
        assert_eq!(compute_capability("NVIDIA GeForce RTX 3090"), Some((8, 6)));
        assert_eq!(compute_capability("Tesla T4"), Some((7, 5)));
        assert_eq!(compute_capability("NVIDIA H100 80GB HBM3"), Some((9, 0)));
        assert_eq!(compute_capability("NVIDIA A10"), Some((8, 6)));
        assert_eq!(compute_capability("Quadro K2200"), None);
    }

    #[test]
    fn mig_profiles_follow_the_driver_names() {
        let a100 = "NVIDIA A100-SXM4-80GB";
        assert_eq!(
            mig_profile_name(a100, 14, 19968, 0).as_deref(),
            Some("1g.20gb")
        );
        assert_eq!(
            mig_profile_name("NVIDIA A100-SXM4-40GB", 14, 4864, 0).as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(
            mig_profile_name(a100, 14, 9984, 1).as_deref(),
            Some("1g.10gb+me")
        );
        assert_eq!(
            mig_profile_name(a100, 42, 40192, 0).as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(mig_profile_name(a100, 15, 9984, 0), None);
        assert_eq!(mig_profile_name("Tesla T4", 14, 9984, 0), None);
    }

    #[test]
    fn mig_uuids_are_stable_and_distinct() {
        let a = mig_uuid("GPU-1", 3, 0);
        assert_eq!(a, mig_uuid("GPU-1", 3, 0));
        assert_ne!(a, mig_uuid("GPU-1", 4, 0));
        assert_eq!(a.len(), "MIG-".len() + 36);
        assert!(a.starts_with("MIG-"));
    }
}
