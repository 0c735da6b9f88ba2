//! The library's stderr lines (`fake-nvml: <function>: <message>`): the only channel a C caller of a fake driver reads.
//!
//! A cdylib loaded into arbitrary programs has no logging subscriber to rely
//! on, and the real NVML reports on stderr too, so these are plain writes of
//! one whole line each.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Mutex;

static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn write_line(function: &str, message: &str) {
    let line = format!("fake-nvml: {function}: {message}\n");
    // Nothing sensible to do if stderr is closed.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Report a failure (init errors, rejected state files): always printed.
pub(crate) fn report(function: &str, message: &str) {
    write_line(function, message);
}

/// Report a request outside the model, once per distinct message, so a
/// caller polling the same unmodelled query does not flood its log.
pub(crate) fn unmodelled(function: &str, message: &str) {
    let key = format!("{function}\0{message}");
    let first = {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        seen.get_or_insert_with(HashSet::new).insert(key)
    };
    if first {
        write_line(function, message);
    }
}
