use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

use super::*;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn write(path: &Path, text: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A small root filesystem: shared files, one file whose content is `flavour`, a setuid
/// binary, a hard link, symlinks, special files, and contents in the skipped directories.
fn fake_root(root: &Path, flavour: &str) {
    fs::create_dir_all(root).unwrap();
    write(&root.join("etc/os-release"), "ID=debian\n", 0o644);
    write(&root.join("usr/bin/tool"), "#!/bin/sh\necho tool\n", 0o4755);
    write(&root.join("usr/bin/group-tool"), "#!/bin/sh\n", 0o2755);
    write(&root.join("usr/lib/libshared.so"), "shared library", 0o644);
    write(
        &root.join(format!("usr/lib/flavour-{flavour}")),
        flavour,
        0o644,
    );
    fs::hard_link(
        root.join("usr/lib/libshared.so"),
        root.join("usr/lib/libshared.so.1"),
    )
    .unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    std::os::unix::fs::symlink("/usr/lib/libshared.so", root.join("usr/lib/abs-link")).unwrap();
    fs::create_dir_all(root.join("var/empty")).unwrap();
    for skipped in ["proc/1", "sys/kernel", "dev/pts", "run/lock", "tmp/junk"] {
        fs::create_dir_all(root.join(skipped)).unwrap();
    }
    write(&root.join("tmp/junk/file"), "junk", 0o644);
    fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
    nix::unistd::mkfifo(
        &root.join("usr/lib/fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(root.join("usr/lib/socket")).unwrap();
    if is_root() {
        nix::sys::stat::mknod(
            &root.join("usr/lib/null"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        write(&root.join("home/user/owned"), "mine", 0o600);
        std::os::unix::fs::chown(root.join("home/user/owned"), Some(1000), Some(1000)).unwrap();
    }
}

fn ingest(store: &RuntimeStore, flavour: &str) -> Tree {
    let lock = store.lock().unwrap();
    let staging = store.staging(&lock).unwrap();
    fake_root(&staging.rootfs(), flavour);
    store
        .ingest(&lock, &staging, &mut |_, _| {}, &AtomicBool::new(false))
        .unwrap()
}

fn record(name: &str, version: &str, tree: &Tree) -> Installed {
    Installed {
        name: name.to_string(),
        version: version.to_string(),
        description: String::new(),
        digest: tree.digest.clone(),
        root: tree.root.clone(),
        size_bytes: tree.size_bytes,
        files: tree.files,
        installed_at: 0,
        environment: BTreeMap::new(),
        cuda: None,
        self_check: vec!["true".to_string()],
        python_packages: vec![],
        debian_packages: vec![],
        extras: vec![],
        inputs_digest: format!("inputs-of-{name}"),
    }
}

fn install(store: &RuntimeStore, name: &str, version: &str, flavour: &str) -> Installed {
    let tree = ingest(store, flavour);
    let lock = store.lock().unwrap();
    let rec = record(name, version, &tree);
    store.commit(&lock, &rec).unwrap();
    store.resolve(name, Some(version)).unwrap().unwrap()
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                count_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn ingest_keeps_files_and_links_and_drops_what_a_runtime_must_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let tree = ingest(&store, "a");
    let root = &tree.root;
    assert!(tree.digest.starts_with("sha256:") && tree.digest.len() == 71);
    assert_eq!(root, &dir.path().join("trees").join(&tree.digest[7..]));

    assert_eq!(
        fs::read_to_string(root.join("usr/bin/tool")).unwrap(),
        "#!/bin/sh\necho tool\n"
    );
    // setuid and setgid cleared, the rest of the mode kept; sticky bit kept.
    assert_eq!(
        fs::metadata(root.join("usr/bin/tool")).unwrap().mode() & 0o7777,
        0o755
    );
    assert_eq!(
        fs::metadata(root.join("usr/bin/group-tool"))
            .unwrap()
            .mode()
            & 0o7777,
        0o755
    );
    assert_eq!(
        fs::metadata(root.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    assert_eq!(tree.cleared_bits, 2);
    // Symlinks recreated as they were.
    assert_eq!(
        fs::read_link(root.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    assert_eq!(
        fs::read_link(root.join("usr/lib/abs-link")).unwrap(),
        Path::new("/usr/lib/libshared.so")
    );
    // Device nodes, fifos and sockets dropped.
    for gone in ["usr/lib/fifo", "usr/lib/socket", "usr/lib/null"] {
        assert!(
            fs::symlink_metadata(root.join(gone)).is_err(),
            "{gone} was kept"
        );
    }
    assert_eq!(tree.dropped, if is_root() { 3 } else { 2 });
    // Skipped directories are there, empty.
    for skipped in ["proc", "sys", "dev", "run", "tmp"] {
        assert_eq!(
            fs::read_dir(root.join(skipped)).unwrap().count(),
            0,
            "{skipped}"
        );
    }
    assert!(root.join("var/empty").is_dir());
    // Regular files are links to objects; the two hard-linked paths share one object.
    let shared = fs::metadata(root.join("usr/lib/libshared.so")).unwrap();
    let shared1 = fs::metadata(root.join("usr/lib/libshared.so.1")).unwrap();
    assert_eq!(shared.ino(), shared1.ino());
    assert_eq!(shared.nlink(), 3, "object + two tree paths");
    if is_root() {
        let owned = fs::metadata(root.join("home/user/owned")).unwrap();
        assert_eq!(
            (owned.uid(), owned.gid(), owned.mode() & 0o777),
            (1000, 1000, 0o600)
        );
    }
    let files = if is_root() { 7 } else { 6 };
    assert_eq!(tree.files, files);
    assert_eq!(tree.new_objects, files - 1);
    assert_eq!(
        count_files(&dir.path().join("objects")),
        (files - 1) as usize
    );
    // Nothing left in tmp/ once the staging directory is dropped.
    assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
}

#[test]
fn same_content_is_stored_once_and_has_a_stable_digest() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let first = ingest(&store, "a");
    let objects = count_files(&dir.path().join("objects"));

    // The same content again, with other modification times: same digest, nothing new.
    let lock = store.lock().unwrap();
    let staging = store.staging(&lock).unwrap();
    fake_root(&staging.rootfs(), "a");
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(staging.rootfs().join("etc/os-release"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let again = store
        .ingest(&lock, &staging, &mut |_, _| {}, &AtomicBool::new(false))
        .unwrap();
    drop((staging, lock));
    assert_eq!(again.digest, first.digest);
    assert_eq!(again.new_objects, 0);
    assert_eq!(count_files(&dir.path().join("objects")), objects);
    assert_eq!(fs::read_dir(dir.path().join("trees")).unwrap().count(), 1);

    // A second runtime sharing all but one file adds exactly one object.
    let other = ingest(&store, "b");
    assert_ne!(other.digest, first.digest);
    assert_eq!(other.new_objects, 1);
    assert_eq!(count_files(&dir.path().join("objects")), objects + 1);
    let usage = store.disk_usage().unwrap();
    assert_eq!((usage.objects, usage.trees), (objects as u64 + 1, 2));
    assert!(usage.object_bytes > 0);
}

#[test]
fn remove_collects_what_only_the_removed_runtime_used() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let a = install(&store, "rt-a", "1", "a");
    let b = install(&store, "rt-b", "1", "b");
    let objects = dir.path().join("objects");
    let before = count_files(&objects);

    let removed = store.remove("rt-b", None).unwrap();
    assert_eq!(removed.digest, b.digest);
    assert!(!b.root.exists());
    assert!(a.root.join("usr/lib/flavour-a").is_file());
    assert_eq!(
        count_files(&objects),
        before - 1,
        "only flavour-b's object goes"
    );
    assert_eq!(store.list().unwrap(), vec![a.clone()]);

    store.remove("rt-a", Some("1")).unwrap();
    assert_eq!(count_files(&objects), 0);
    assert_eq!(fs::read_dir(dir.path().join("trees")).unwrap().count(), 0);
    assert!(store.list().unwrap().is_empty());

    let err = store.remove("rt-a", None).unwrap_err();
    assert_eq!(err.to_string(), "runtime rt-a is not installed");
    let err = store.remove("rt-a", Some("2")).unwrap_err();
    assert_eq!(err.to_string(), "runtime rt-a@2 is not installed");
}

#[test]
fn two_versions_of_one_tree_keep_it_until_both_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let one = install(&store, "rt", "1.9", "a");
    let two = install(&store, "rt", "1.10", "a");
    assert_eq!(one.digest, two.digest);
    assert_eq!(store.resolve("rt", None).unwrap().unwrap().version, "1.10");
    assert_eq!(
        store.resolve("rt", Some("1.9")).unwrap().unwrap().version,
        "1.9"
    );
    assert_eq!(store.resolve("other", None).unwrap(), None);
    let versions: Vec<String> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(versions, ["1.9", "1.10"]);

    store.remove("rt", None).unwrap();
    assert!(one.root.is_dir());
    assert_eq!(
        store
            .find_by_inputs("inputs-of-rt")
            .unwrap()
            .unwrap()
            .version,
        "1.9"
    );
    store.remove("rt", None).unwrap();
    assert!(!one.root.exists());
    assert_eq!(store.find_by_inputs("inputs-of-rt").unwrap(), None);
}

#[test]
fn interrupted_work_is_not_listed_and_is_cleared_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let kept = install(&store, "kept", "1", "a");
    let objects_before = count_files(&dir.path().join("objects"));

    // What a build killed at various points leaves: a half-built staging root, a tree
    // being assembled (linking an object it had just created), and a tree renamed into
    // place whose record was never written.
    let tmp = dir.path().join("tmp");
    fake_root(&tmp.join("stage-x/rootfs"), "z");
    let orphan = dir.path().join("objects/ff/orphan");
    write(&orphan, "half-ingested", 0o644);
    fs::create_dir_all(tmp.join("tree-y/usr")).unwrap();
    fs::hard_link(&orphan, tmp.join("tree-y/usr/file")).unwrap();
    fs::create_dir_all(dir.path().join("trees/deadbeef/usr")).unwrap();
    fs::write(dir.path().join("trees/deadbeef/usr/x"), "x").unwrap();

    // While someone holds the lock (a build in progress), open leaves tmp/ alone.
    let lock = store.lock().unwrap();
    RuntimeStore::open(dir.path()).unwrap();
    assert!(tmp.join("stage-x").exists());
    drop(lock);

    let store = RuntimeStore::open(dir.path()).unwrap();
    assert_eq!(store.list().unwrap(), vec![kept.clone()]);
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    assert!(!orphan.exists());
    assert!(!dir.path().join("trees/deadbeef").exists());
    assert!(kept.root.join("usr/bin/tool").is_file());
    assert_eq!(count_files(&dir.path().join("objects")), objects_before);
}

#[test]
fn cancelled_ingest_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let lock = store.lock().unwrap();
    let staging = store.staging(&lock).unwrap();
    let rootfs = staging.rootfs();
    fake_root(&rootfs, "a");
    for i in 0..2100 {
        write(
            &rootfs.join(format!("usr/share/many/{i}")),
            &i.to_string(),
            0o644,
        );
    }
    let err = store
        .ingest(&lock, &staging, &mut |_, _| {}, &AtomicBool::new(true))
        .unwrap_err();
    assert!(matches!(err, StoreError::Cancelled), "{err}");
    drop((staging, lock));
    assert_eq!(count_files(&dir.path().join("objects")), 0);
    assert_eq!(fs::read_dir(dir.path().join("trees")).unwrap().count(), 0);
    assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
}

#[test]
fn a_second_installer_waits_for_the_lock_then_sees_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let barrier = Arc::new(Barrier::new(2));
    let first = {
        let (root, barrier) = (root.clone(), barrier.clone());
        std::thread::spawn(move || {
            let store = RuntimeStore::open(&root).unwrap();
            let tree = ingest(&store, "a");
            let lock = store.lock().unwrap();
            barrier.wait();
            std::thread::sleep(Duration::from_millis(300));
            store.commit(&lock, &record("rt", "1", &tree)).unwrap();
            Instant::now()
        })
    };
    barrier.wait();
    let store = RuntimeStore::open(&root).unwrap();
    assert!(
        store.try_lock().unwrap().is_none(),
        "the first installer holds the lock"
    );
    assert_eq!(store.resolve("rt", None).unwrap(), None);
    let _lock = store.lock().unwrap();
    let acquired = Instant::now();
    let committed = first.join().unwrap();
    assert!(acquired >= committed);
    assert!(store.resolve("rt", None).unwrap().is_some());

    let cancel = AtomicBool::new(true);
    assert!(store.lock_unless(&cancel).unwrap().is_none());
}

#[test]
fn records_are_plain_json_without_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let installed = install(&store, "rt", "1", "a");
    let text = fs::read_to_string(dir.path().join("installed/rt@1.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["digest"], installed.digest.as_str());
    assert!(json.get("root").is_none());

    fs::write(dir.path().join("installed/bad@1.json"), "{").unwrap();
    let err = store.list().unwrap_err();
    assert!(
        err.to_string().contains("bad@1.json is unreadable"),
        "{err}"
    );
}

#[test]
fn file_capabilities_do_not_survive_ingest() {
    let setcap = Path::new("/usr/sbin/setcap");
    if !is_root() || !setcap.exists() {
        eprintln!("SKIPPED: needs root and setcap");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = RuntimeStore::open(dir.path()).unwrap();
    let lock = store.lock().unwrap();
    let staging = store.staging(&lock).unwrap();
    let rootfs = staging.rootfs();
    write(&rootfs.join("usr/bin/ping"), "binary", 0o755);
    let status = std::process::Command::new(setcap)
        .arg("cap_net_raw+ep")
        .arg(rootfs.join("usr/bin/ping"))
        .status()
        .unwrap();
    assert!(status.success());
    let tree = store
        .ingest(&lock, &staging, &mut |_, _| {}, &AtomicBool::new(false))
        .unwrap();
    let out = std::process::Command::new("/usr/sbin/getcap")
        .arg(tree.root.join("usr/bin/ping"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}
