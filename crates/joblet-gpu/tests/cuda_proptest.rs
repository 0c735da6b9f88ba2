//! Property tests: the CUDA `version.json` / `version.txt` parsers return
//! an error, never panic, on random, truncated and corrupted input.

use joblet_gpu::cuda::{parse_version_json, parse_version_txt};
use proptest::prelude::*;
use std::path::Path;

const JSON: &str = "{\n   \"cuda\" : {\n      \"name\" : \"CUDA SDK\",\n      \"version\" : \"12.2.140\"\n   },\n   \"cuda_cudart\" : {\n      \"name\" : \"CUDA Runtime (cudart)\",\n      \"version\" : \"12.2.140\"\n   }\n}\n";
const TXT: &str = "CUDA Version 11.8.89\n";

fn path() -> &'static Path {
    Path::new("/usr/local/cuda/version.x")
}

fn truncate(sample: &str, at: usize) -> &str {
    let mut at = at.min(sample.len());
    while !sample.is_char_boundary(at) {
        at -= 1;
    }
    &sample[..at]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_input_never_panics(text in ".{0,300}", bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_version_json(&text, path());
        let _ = parse_version_txt(&text, path());
        let lossy = String::from_utf8_lossy(&bytes);
        let _ = parse_version_json(&lossy, path());
        let _ = parse_version_txt(&lossy, path());
    }

    #[test]
    fn truncated_json_is_an_error_until_complete(at in 0usize..200) {
        let text = truncate(JSON, at);
        match parse_version_json(text, path()) {
            Ok(v) => {
                prop_assert_eq!(v, "12.2.140");
                prop_assert!(text.trim_end() == JSON.trim_end());
            }
            Err(e) => prop_assert!(e.to_string().contains("version.x")),
        }
    }

    #[test]
    fn truncated_txt_yields_a_prefix_or_an_error(at in 0usize..40) {
        if let Ok(v) = parse_version_txt(truncate(TXT, at), path()) {
            prop_assert!("11.8.89".starts_with(&v));
            prop_assert!(v.contains('.'));
        }
    }

    #[test]
    fn corrupted_files_never_panic(at in 0usize..200, byte in any::<u8>()) {
        for sample in [JSON, TXT] {
            let mut bytes = sample.as_bytes().to_vec();
            let i = at % bytes.len();
            bytes[i] = byte;
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_version_json(&text, path());
            let _ = parse_version_txt(&text, path());
        }
    }

    #[test]
    fn well_formed_versions_read_back(parts in proptest::collection::vec(0u32..1000, 2..4)) {
        let version = parts.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
        let json = format!("{{\"cuda\": {{\"name\": \"CUDA SDK\", \"version\": \"{version}\"}}}}");
        prop_assert_eq!(parse_version_json(&json, path()).unwrap(), version.clone());
        prop_assert_eq!(parse_version_txt(&format!("CUDA Version {version}\n"), path()).unwrap(), version);
    }
}
