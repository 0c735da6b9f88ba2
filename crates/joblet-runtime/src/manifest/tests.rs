use std::collections::BTreeMap;

use super::*;

const LOCK: &str = "numpy==2.4.6 \\\n    --hash=sha256:aa\n";

const FULL: &str = r#"
name: python-3.11-ml
version: "1.0"
description: ML
base:
  suite: bookworm
  variant: essential
  packages: [python3, libstdc++6]
python:
  lock: requirements.lock
  find_links: wheels
  extras:
    jax: extras/jax.lock
environment:
  PATH: /usr/bin:/bin
  PYTHONUNBUFFERED: "1"
cuda: "13.0"
self_check: [python3, -c, "import numpy"]
"#;

fn files(manifest: &str, extra: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::from([(MANIFEST_FILE.to_string(), manifest.as_bytes().to_vec())]);
    for (path, text) in extra {
        files.insert(path.to_string(), text.as_bytes().to_vec());
    }
    files
}

fn full_files() -> BTreeMap<String, Vec<u8>> {
    files(
        FULL,
        &[
            ("requirements.lock", LOCK),
            ("extras/jax.lock", "jax==0.10.2 --hash=sha256:bb\n"),
            ("wheels/x.whl", "zip"),
        ],
    )
}

fn error_of(manifest: &str) -> String {
    Manifest::from_files(&files(manifest, &[("requirements.lock", LOCK)]))
        .unwrap_err()
        .to_string()
}

#[test]
fn reads_a_full_manifest() {
    let m = Manifest::from_files(&full_files()).unwrap();
    assert_eq!(m.name.as_str(), "python-3.11-ml");
    assert_eq!(m.version.as_str(), "1.0");
    assert_eq!(m.base.variant, Variant::Essential);
    assert_eq!(
        m.base
            .packages
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>(),
        ["python3", "libstdc++6"]
    );
    let python = m.python.as_ref().unwrap();
    assert_eq!(python.find_links.as_ref().unwrap().as_str(), "wheels");
    assert_eq!(m.cuda.unwrap().to_string(), "13.0");
    assert_eq!(m.self_check.as_slice(), ["python3", "-c", "import numpy"]);
    assert_eq!(m.environment.len(), 2);
    let lock = m.lock(&python.lock).unwrap();
    assert_eq!(lock.packages, [("numpy".to_string(), "2.4.6".to_string())]);
    assert_eq!(m.locks().len(), 2);
    assert_eq!(m.source(), Path::new("runtime.yml"));
}

#[test]
fn variant_defaults_to_apt_and_python_is_optional() {
    let m = Manifest::from_files(&files(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\nself_check: [true]\n",
        &[],
    ))
    .unwrap();
    assert_eq!(m.base.variant, Variant::Apt);
    assert!(m.python.is_none() && m.cuda.is_none() && m.environment.is_empty());
}

#[test]
fn load_reads_a_directory_and_names_the_file_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    super::write_files(&full_files(), dir.path()).unwrap();
    let m = Manifest::load(dir.path()).unwrap();
    assert_eq!(m.source(), dir.path().join("runtime.yml"));
    let collected = super::collect_files(dir.path()).unwrap();
    assert_eq!(collected, full_files());

    std::fs::remove_file(dir.path().join("extras/jax.lock")).unwrap();
    let err = Manifest::load(&dir.path().join("runtime.yml")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: field `python.extras.jax`: file `extras/jax.lock` does not exist (paths are \
             relative to the manifest's directory)",
            dir.path().join("runtime.yml").display()
        )
    );
    let err = Manifest::load(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, ManifestError::Read { .. }), "{err}");
}

#[test]
fn unknown_field() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\nself_check: [true]\nimage: debian\n"
    ));
}

#[test]
fn unknown_nested_field() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase:\n  suite: bookworm\n  mirror: http://x\nself_check: [true]\n"
    ));
}

#[test]
fn bad_name() {
    insta::assert_snapshot!(error_of(
        "name: my runtime\nversion: '1'\nbase: {suite: bookworm}\nself_check: [true]\n"
    ));
}

#[test]
fn unquoted_numbers_keep_their_text() {
    for v in ["1.0", "1.10", "2", "13.0"] {
        let m = Manifest::from_files(&files(
            &format!(
                "name: x\nversion: {v}\nbase: {{suite: bookworm}}\ncuda: {v}\nself_check: [true]\n"
            ),
            &[],
        ));
        match v {
            "2" => assert!(m.is_err(), "cuda 2 has no minor"),
            _ => {
                let m = m.unwrap();
                assert_eq!(m.version.as_str(), v);
                assert_eq!(m.cuda.unwrap().to_string(), v, "the text, not a float");
            }
        }
    }
}

#[test]
fn bad_variant() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm, variant: tiny}\nself_check: [true]\n"
    ));
}

#[test]
fn bad_package() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm, packages: [python3, 'curl=7.88']}\nself_check: [true]\n"
    ));
}

#[test]
fn missing_field() {
    insta::assert_snapshot!(error_of("name: x\nversion: '1'\nself_check: [true]\n"));
}

#[test]
fn empty_self_check() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\nself_check: []\n"
    ));
}

#[test]
fn bad_cuda() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\ncuda: 13\nself_check: [true]\n"
    ));
}

#[test]
fn lock_outside_the_directory() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm, packages: [python3]}\n\
         python: {lock: ../../etc/passwd}\nself_check: [true]\n"
    ));
}

#[test]
fn bad_environment_name() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\nenvironment: {1PATH: x}\nself_check: [true]\n"
    ));
}

#[test]
fn python_needs_debian_python() {
    insta::assert_snapshot!(error_of(
        "name: x\nversion: '1'\nbase: {suite: bookworm}\npython: {lock: requirements.lock}\nself_check: [true]\n"
    ));
}

#[test]
fn unhashed_lock() {
    let err = Manifest::from_files(&files(
        "name: x\nversion: '1'\nbase: {suite: bookworm, packages: [python3]}\n\
         python: {lock: requirements.lock}\nself_check: [true]\n",
        &[("requirements.lock", "# header\nnumpy==2.4.6\n")],
    ))
    .unwrap_err();
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn cuda_wheels_need_cuda_declared() {
    let manifest = |cuda: &str| {
        format!(
            "name: x\nversion: '1'\nbase: {{suite: bookworm, packages: [python3]}}\n\
             python: {{lock: requirements.lock}}\n{cuda}self_check: [true]\n"
        )
    };
    let lock = [(
        "requirements.lock",
        "nvidia-cuda-runtime==13.2.86 --hash=sha256:aa\n",
    )];
    let missing = Manifest::from_files(&files(&manifest(""), &lock)).unwrap_err();
    insta::assert_snapshot!("cuda_missing", missing.to_string());
    let too_old = Manifest::from_files(&files(&manifest("cuda: \"12.4\"\n"), &lock)).unwrap_err();
    insta::assert_snapshot!("cuda_too_old", too_old.to_string());
    assert!(Manifest::from_files(&files(&manifest("cuda: \"13.0\"\n"), &lock)).is_ok());
}

#[test]
fn find_links_with_a_trailing_slash() {
    let mut f = full_files();
    let text = FULL.replace("find_links: wheels", "find_links: wheels/");
    f.insert(MANIFEST_FILE.to_string(), text.into_bytes());
    assert!(Manifest::from_files(&f).is_ok());
}

#[test]
fn relative_find_links_must_be_uploaded() {
    let mut f = full_files();
    f.remove("wheels/x.whl");
    let err = Manifest::from_files(&f).unwrap_err();
    assert!(
        err.to_string()
            .contains("field `python.find_links`: file `wheels` does not exist"),
        "{err}"
    );
}

#[test]
fn uploads_need_a_manifest_and_clean_paths() {
    let mut f = full_files();
    f.insert("../evil".to_string(), vec![]);
    assert_eq!(
        Manifest::from_files(&f).unwrap_err().to_string(),
        "uploaded file name `../evil` is not allowed: use relative paths without `..`"
    );
    let f = BTreeMap::from([("README".to_string(), vec![])]);
    assert!(matches!(
        Manifest::from_files(&f),
        Err(ManifestError::NoManifest { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let bad = BTreeMap::from([("/etc/x".to_string(), vec![])]);
    assert!(super::write_files(&bad, dir.path()).is_err());
}
