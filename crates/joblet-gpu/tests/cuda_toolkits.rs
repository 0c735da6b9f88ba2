//! CUDA toolkit discovery in temp dirs laid out like /usr/local.

use joblet_gpu::cuda::{find_toolkits, DEFAULT_CUDA_PATHS};
use joblet_gpu::CudaToolkit;
use std::path::{Path, PathBuf};

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

const JSON_12_2: &str = r#"{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "12.2.140"
   },
   "cuda_cudart" : {
      "name" : "CUDA Runtime (cudart)",
      "version" : "12.2.140"
   }
}
"#;

fn toolkit(path: &Path, version: &str, source: &str) -> CudaToolkit {
    CudaToolkit {
        path: path.display().to_string(),
        version: version.to_string(),
        source: source.to_string(),
    }
}

/// /usr/local: cuda → cuda-12.2 (json), cuda-11.8 (txt), cuda-12.4 (json).
fn usr_local(root: &Path) {
    write(root, "cuda-12.2/version.json", JSON_12_2);
    write(root, "cuda-11.8/version.txt", "CUDA Version 11.8.89\n");
    write(
        root,
        "cuda-12.4/version.json",
        r#"{"cuda": {"name": "CUDA SDK", "version": "12.4.131"}}"#,
    );
    std::os::unix::fs::symlink(root.join("cuda-12.2"), root.join("cuda")).unwrap();
    // Not toolkits: other names next to it.
    write(root, "cudnn/version.txt", "CUDA Version 1.0.0\n");
    write(root, "cuda-samples/README", "samples\n");
}

#[test]
fn configured_path_and_versioned_siblings_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    usr_local(dir.path());
    let (toolkits, warnings) = find_toolkits(&[dir.path().join("cuda")]);
    assert!(warnings.is_empty(), "{warnings:?}");
    // `cuda` (the symlink, as configured) first; its target cuda-12.2 is
    // the same toolkit and is not listed again; siblings newest first.
    assert_eq!(
        toolkits,
        [
            toolkit(&dir.path().join("cuda"), "12.2.140", "version.json"),
            toolkit(&dir.path().join("cuda-12.4"), "12.4.131", "version.json"),
            toolkit(&dir.path().join("cuda-11.8"), "11.8.89", "version.txt"),
        ]
    );
    // Configuring the versioned dir too changes nothing.
    let (again, _) = find_toolkits(&[dir.path().join("cuda"), dir.path().join("cuda-12.2")]);
    assert_eq!(again, toolkits);
}

#[test]
fn json_wins_over_txt_and_garbled_files_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "both/version.json", JSON_12_2);
    write(dir.path(), "both/version.txt", "CUDA Version 11.0.0\n");
    write(
        dir.path(),
        "badjson/version.json",
        "{\"cuda\": {\"version\": 12}}",
    );
    write(dir.path(), "badjson/version.txt", "CUDA Version 10.2.89\n");
    write(dir.path(), "garbled/version.json", "{\"cuda\": ");
    write(
        dir.path(),
        "garbled-txt/version.txt",
        "CUDA Version twelve\n",
    );
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();

    let (toolkits, warnings) =
        find_toolkits(&[dir.path().join("both"), dir.path().join("badjson")]);
    assert_eq!(
        toolkits,
        [
            toolkit(&dir.path().join("both"), "12.2.140", "version.json"),
            toolkit(&dir.path().join("badjson"), "10.2.89", "version.txt"),
        ]
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("badjson/version.json"), "{warnings:?}");

    for name in ["garbled", "garbled-txt", "empty"] {
        let (toolkits, warnings) = find_toolkits(&[dir.path().join(name)]);
        assert!(toolkits.is_empty(), "{name}");
        assert!(
            warnings.iter().any(|w| w.contains(name)),
            "{name}: {warnings:?}"
        );
    }
    let (_, warnings) = find_toolkits(&[dir.path().join("garbled")]);
    assert!(warnings.iter().any(|w| w.contains("garbled/version.json")));
    let (_, warnings) = find_toolkits(&[dir.path().join("garbled-txt")]);
    assert!(warnings
        .iter()
        .any(|w| w.contains("garbled-txt/version.txt")));
}

#[test]
fn absent_paths_are_quiet_and_files_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notadir", "x");
    let (toolkits, warnings) =
        find_toolkits(&[dir.path().join("missing"), dir.path().join("notadir")]);
    assert!(toolkits.is_empty());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("notadir"));
}

#[test]
fn sibling_without_configured_dir_is_still_found() {
    // /opt/cuda is configured but only /opt/cuda-11.8 exists.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "cuda-11.8/version.txt",
        "CUDA Version 11.8.89\n",
    );
    let (toolkits, warnings) = find_toolkits(&[dir.path().join("cuda")]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        toolkits,
        [toolkit(
            &dir.path().join("cuda-11.8"),
            "11.8.89",
            "version.txt"
        )]
    );
}

#[test]
fn defaults_on_this_machine_do_not_fail() {
    let paths: Vec<PathBuf> = DEFAULT_CUDA_PATHS.iter().map(PathBuf::from).collect();
    let (toolkits, _warnings) = find_toolkits(&paths);
    for t in toolkits {
        assert!(!t.version.is_empty());
    }
}

/// A toolkit assembled from NVIDIA's redistributable archives (as the CUDA
/// 13.0 image of a real H100 machine had it: `nvcc` and headers, no
/// `version.json`): its headers give the version.
#[test]
fn toolkits_without_a_version_file_are_read_from_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let cuda_h = "#ifndef __cuda_cuda_h__\n#define __cuda_cuda_h__\n\
                  /**\n * CUDA API version number\n */\n#define CUDA_VERSION 13000\n";
    write(dir.path(), "cuda-13.0/include/cuda.h", cuda_h);
    write(
        dir.path(),
        "cuda-12.8/include/cuda_runtime_api.h",
        "#define CUDART_VERSION  12080\n",
    );
    // version.json still wins over the headers.
    write(dir.path(), "cuda-12.2/version.json", JSON_12_2);
    write(
        dir.path(),
        "cuda-12.2/include/cuda.h",
        "#define CUDA_VERSION 11000\n",
    );
    write(
        dir.path(),
        "cuda-9.9/include/cuda.h",
        "#define CUDA_VERSION 99\n",
    );
    let (toolkits, warnings) = find_toolkits(&[dir.path().join("cuda")]);
    assert_eq!(
        toolkits,
        [
            toolkit(&dir.path().join("cuda-13.0"), "13.0", "include/cuda.h"),
            toolkit(
                &dir.path().join("cuda-12.8"),
                "12.8",
                "include/cuda_runtime_api.h"
            ),
            toolkit(&dir.path().join("cuda-12.2"), "12.2.140", "version.json"),
        ]
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("cuda-9.9/include/cuda.h") && warnings[0].contains("13000 (13.0)"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("not counted as a CUDA toolkit"),
        "{warnings:?}"
    );
}
