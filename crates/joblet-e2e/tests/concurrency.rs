//! 200 concurrent `RunJob` calls are all recorded exactly once.

use std::collections::BTreeSet;
use std::time::Duration;

use joblet_e2e::Node;

#[test]
fn two_hundred_concurrent_submissions_are_each_recorded_once() {
    let node = Node::start().unwrap();
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let node = &node;
                s.spawn(move || node.run(&["--", "sh", "-c", &format!("echo job-{i}")]))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 200, "every call got its own id");

    let list = node.wait_list(Duration::from_secs(120), "200 jobs completed", |l| {
        l.len() == 200 && l.iter().all(|j| j["state"] == "COMPLETED")
    });
    let listed: BTreeSet<String> = list
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed.len(), 200);
    assert_eq!(
        listed,
        ids.iter().cloned().collect::<BTreeSet<_>>(),
        "the recorded jobs are exactly the acknowledged ones"
    );
}
