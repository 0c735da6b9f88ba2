//! Checks of a volume's name and size: pure, done before anything is touched.

use crate::error::VolumeError;
use crate::kind::VolumeKind;

/// The longest volume name.
pub const MAX_NAME_LEN: usize = 64;

const MIB: u64 = 1 << 20;
const TIB: u64 = 1 << 40;

/// The smallest filesystem volume: `mkfs.ext4` gives a filesystem a journal only from
/// 2048 blocks of 1 KiB on (below that it makes one without, and below 64 KiB none at
/// all), and a volume without a journal could be left inconsistent by a crash.
pub const MIN_FILESYSTEM_BYTES: u64 = 2 * MIB;

/// The smallest memory volume.
pub const MIN_MEMORY_BYTES: u64 = MIB;

/// The largest filesystem volume: a bound against typing mistakes (`--size=16PB`); an
/// image file of more than 16 TiB is better a disk of its own.
pub const MAX_FILESYSTEM_BYTES: u64 = 16 * TIB;

/// The largest memory volume (and no more than the host's memory, see
/// [`check_fits_memory`]).
pub const MAX_MEMORY_BYTES: u64 = TIB;

/// The accepted form of a name, for error messages.
pub(crate) const NAME_FORM: &str = "1 to 64 ASCII letters, digits, '.', '-' or '_', \
     starting with a letter or digit, like data-lake";

/// Checks a volume name: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `.`, `-` or `_`,
/// starting with a letter or digit (so never `.`, `..` or an option-like `-x`). The name
/// is a directory under the volumes root, so nothing else may pass.
pub fn validate_name(name: &str) -> Result<(), VolumeError> {
    let problem = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("it is longer than 64 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        Some("it has a character other than a letter, digit, '.', '-' or '_'")
    } else if !name.as_bytes()[0].is_ascii_alphanumeric() {
        Some("it does not start with a letter or digit")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(VolumeError::InvalidName {
            name: clip(name),
            problem,
        }),
    }
}

/// The sizes a volume of `kind` may have, in bytes, inclusive.
pub fn size_range(kind: VolumeKind) -> (u64, u64) {
    match kind {
        VolumeKind::Filesystem => (MIN_FILESYSTEM_BYTES, MAX_FILESYSTEM_BYTES),
        VolumeKind::Memory => (MIN_MEMORY_BYTES, MAX_MEMORY_BYTES),
    }
}

/// Checks a volume's size against [`size_range`].
pub fn validate_size(kind: VolumeKind, size_bytes: u64) -> Result<(), VolumeError> {
    let (min, max) = size_range(kind);
    let problem = if size_bytes < min {
        match kind {
            VolumeKind::Filesystem => "too small: ext4 needs 2 MiB for a filesystem with a journal",
            VolumeKind::Memory => "too small",
        }
    } else if size_bytes > max {
        "too large"
    } else {
        return Ok(());
    };
    Err(VolumeError::InvalidSize {
        kind,
        size_bytes,
        problem: format!(
            "{problem}; expected {min} ({}) to {max} ({}) bytes",
            human(min),
            human(max)
        ),
    })
}

/// Checks that a memory volume of `size_bytes` fits in the host's `ram_bytes`: a tmpfs
/// larger than memory would push the node into swap or the OOM killer before it is full.
pub fn check_fits_memory(size_bytes: u64, ram_bytes: u64) -> Result<(), VolumeError> {
    if size_bytes <= ram_bytes {
        return Ok(());
    }
    Err(VolumeError::InvalidSize {
        kind: VolumeKind::Memory,
        size_bytes,
        problem: format!(
            "more than this host's memory ({ram_bytes} bytes, {})",
            human(ram_bytes)
        ),
    })
}

/// `2 MiB`, `16 TiB`, or the bytes when not a whole number of MiB.
fn human(bytes: u64) -> String {
    if bytes >= TIB && bytes.is_multiple_of(TIB) {
        format!("{} TiB", bytes / TIB)
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} B")
    }
}

/// At most 80 characters of a user-typed name, for messages.
fn clip(name: &str) -> String {
    name.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names_pass() {
        for n in [
            "a",
            "data-lake",
            "python-3.11_ml",
            "0",
            "A.b-C_d",
            &"x".repeat(64),
        ] {
            validate_name(n).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
    }

    #[test]
    fn bad_names_are_refused_saying_why_and_what_is_accepted() {
        for (n, why) in [
            ("", "it is empty"),
            (&"x".repeat(65), "longer than 64"),
            (".", "does not start with a letter or digit"),
            ("..", "does not start with a letter or digit"),
            (".hidden", "does not start with a letter or digit"),
            ("-rf", "does not start with a letter or digit"),
            ("_x", "does not start with a letter or digit"),
            ("a/b", "a character other than"),
            ("../etc", "a character other than"),
            ("a b", "a character other than"),
            ("ä", "a character other than"),
            ("a\0b", "a character other than"),
        ] {
            let err = validate_name(n).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(why), "{n:?}: {msg}");
            assert!(msg.starts_with("invalid volume name"), "{msg}");
            assert!(
                msg.contains("starting with a letter or digit, like data-lake"),
                "{msg}"
            );
        }
    }

    #[test]
    fn sizes_are_bounded_per_kind() {
        for kind in VolumeKind::ALL {
            let (min, max) = size_range(kind);
            validate_size(kind, min).unwrap();
            validate_size(kind, max).unwrap();
            assert!(validate_size(kind, min - 1).is_err());
            assert!(validate_size(kind, max + 1).is_err());
            assert!(validate_size(kind, 0).is_err());
        }
        validate_size(VolumeKind::Memory, MIB).unwrap();
        assert!(validate_size(VolumeKind::Filesystem, MIB).is_err());
    }

    #[test]
    fn a_size_error_names_the_field_the_reason_and_the_range() {
        let msg = validate_size(VolumeKind::Filesystem, MIB)
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "invalid size for a filesystem volume: 1048576 bytes is too small: ext4 needs \
             2 MiB for a filesystem with a journal; expected 2097152 (2 MiB) to \
             17592186044416 (16 TiB) bytes"
        );
        let msg = validate_size(VolumeKind::Memory, 2 * TIB)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("memory volume: 2199023255552 bytes is too large"),
            "{msg}"
        );
        assert!(msg.contains("to 1099511627776 (1 TiB) bytes"), "{msg}");
    }

    #[test]
    fn a_memory_volume_must_fit_in_the_host_memory() {
        check_fits_memory(8 * MIB, 8 * MIB).unwrap();
        let msg = check_fits_memory(8 * MIB + 1, 8 * MIB)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("more than this host's memory (8388608 bytes, 8 MiB)"),
            "{msg}"
        );
    }
}
