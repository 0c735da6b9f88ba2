//! User-supplied text as messages echo it back: cut to a length a reader
//! (and a gRPC status header) can take. A 100 KB job id or env key is
//! named by its first [`ECHO_CHARS`] characters and `…`, never echoed whole.

/// How many characters of a user's value a message repeats.
pub const ECHO_CHARS: usize = 64;

/// `s` as an error message may echo it: unchanged when it has at most
/// [`ECHO_CHARS`] characters, else its first [`ECHO_CHARS`] and `…`.
pub fn clip(s: &str) -> String {
    match s.char_indices().nth(ECHO_CHARS) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_on_a_character() {
        assert_eq!(clip(""), "");
        let exact = "a".repeat(ECHO_CHARS);
        assert_eq!(clip(&exact), exact);
        let long = "b".repeat(100 * 1024);
        let cut = clip(&long);
        assert_eq!(cut, format!("{}…", "b".repeat(ECHO_CHARS)));
        // Multi-byte characters are never split.
        let wide = "é".repeat(ECHO_CHARS + 1);
        assert_eq!(clip(&wide), format!("{}…", "é".repeat(ECHO_CHARS)));
    }
}
