//! Volume records: inserted once per name, read, listed by name, shared and
//! deleted; kept across a reopen; bad input and corrupt rows refused by name.

use joblet_store::{StoreError, VolumeRecord};

mod support;
use support::Env;

fn rec(name: &str, kind: &str, size_bytes: u64) -> VolumeRecord {
    VolumeRecord {
        name: name.into(),
        kind: kind.into(),
        size_bytes,
        owner: "alice".into(),
        shared: false,
        created_ms: 1_700_000_000_000,
    }
}

#[test]
fn a_volume_is_recorded_read_listed_by_name_and_kept_across_a_reopen() {
    let env = Env::new();
    let store = env.open();
    assert_eq!(store.list_volumes().unwrap(), vec![]);
    assert_eq!(store.volume("data-lake").unwrap(), None);
    let lake = rec("data-lake", "filesystem", 1 << 30);
    let scratch = VolumeRecord {
        shared: true,
        ..rec("scratch", "memory", 64 << 20)
    };
    let big = rec("big", "filesystem", i64::MAX as u64);
    for r in [&scratch, &lake, &big] {
        store.insert_volume(r).unwrap();
    }
    assert_eq!(store.volume("data-lake").unwrap(), Some(lake.clone()));
    drop(store);
    let store = env.open();
    assert_eq!(
        store.list_volumes().unwrap(),
        vec![big, lake.clone(), scratch.clone()]
    );
    assert_eq!(store.volume("scratch").unwrap(), Some(scratch));
}

#[test]
fn a_second_volume_of_the_same_name_is_refused_and_the_first_kept() {
    let env = Env::new();
    let store = env.open();
    let first = rec("data-lake", "filesystem", 1 << 30);
    store.insert_volume(&first).unwrap();
    let err = store
        .insert_volume(&rec("data-lake", "memory", 1 << 20))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::VolumeExists(n) if n == "data-lake"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "a volume named data-lake already exists (see `rnx volume list`)"
    );
    assert_eq!(store.list_volumes().unwrap(), vec![first]);
}

#[test]
fn shared_is_set_and_cleared_and_a_missing_volume_is_named() {
    let env = Env::new();
    let store = env.open();
    store
        .insert_volume(&rec("data-lake", "filesystem", 1 << 30))
        .unwrap();
    store.set_volume_shared("data-lake", true).unwrap();
    assert!(store.volume("data-lake").unwrap().unwrap().shared);
    store.set_volume_shared("data-lake", false).unwrap();
    assert!(!store.volume("data-lake").unwrap().unwrap().shared);
    let err = store.set_volume_shared("nope", true).unwrap_err();
    assert!(
        matches!(&err, StoreError::VolumeNotFound(n) if n == "nope"),
        "{err:?}"
    );
    assert!(err.to_string().contains("no volume named nope"), "{err}");
}

#[test]
fn delete_says_whether_there_was_a_record() {
    let env = Env::new();
    let store = env.open();
    store
        .insert_volume(&rec("data-lake", "filesystem", 1 << 30))
        .unwrap();
    store
        .insert_volume(&rec("keep", "memory", 1 << 20))
        .unwrap();
    assert!(store.delete_volume("data-lake").unwrap());
    assert!(!store.delete_volume("data-lake").unwrap());
    assert_eq!(store.volume("data-lake").unwrap(), None);
    assert_eq!(
        store
            .list_volumes()
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect::<Vec<_>>(),
        ["keep"]
    );
    // The name is free again.
    store
        .insert_volume(&rec("data-lake", "memory", 1 << 20))
        .unwrap();
}

#[test]
fn an_unknown_kind_or_a_size_out_of_range_is_refused_by_name() {
    let env = Env::new();
    let store = env.open();
    for (r, says) in [
        (rec("a", "disk", 1 << 20), "unknown kind \"disk\""),
        (rec("b", "filesystem", 0), "size 0 bytes is out of range"),
        (
            rec("c", "memory", u64::MAX),
            "size 18446744073709551615 bytes is out of range",
        ),
    ] {
        let err = store.insert_volume(&r).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("volume {}: ", r.name)) && msg.contains(says),
            "{msg}"
        );
    }
    assert_eq!(store.list_volumes().unwrap(), vec![]);
}

#[test]
fn a_corrupt_row_is_reported_with_its_volume() {
    let env = Env::new();
    let store = env.open();
    rusqlite::Connection::open(env.db())
        .unwrap()
        .execute(
            "INSERT INTO volumes (name, kind, size_bytes, owner, shared, created_ms) \
             VALUES ('odd', 'floppy', 1440, 'bob', 0, 5)",
            [],
        )
        .unwrap();
    let err = store.volume("odd").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("volume odd: stored kind \"floppy\" is unknown"),
        "{err}"
    );
    assert!(store.list_volumes().is_err());
}

#[test]
fn a_record_round_trips_through_json() {
    let r = rec("data-lake", "filesystem", 1 << 30);
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(
        json,
        r#"{"name":"data-lake","kind":"filesystem","size_bytes":1073741824,"owner":"alice","shared":false,"created_ms":1700000000000}"#
    );
    assert_eq!(serde_json::from_str::<VolumeRecord>(&json).unwrap(), r);
}
