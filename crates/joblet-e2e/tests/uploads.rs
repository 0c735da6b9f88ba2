//! `--upload`: files and directories land in the job's /work byte-exact and
//! owned by the job's user; traversal, escaping symlinks, special files and
//! oversize uploads are refused before anything is written.

use joblet_e2e::{Node, NodeOptions};
use joblet_proto::pb;
use tonic::Code;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn files_and_directories_arrive_byte_exact() {
    let node = Node::start().unwrap();
    let src = node.dir.path().join("src");
    std::fs::create_dir_all(src.join("dataset/train")).unwrap();
    std::fs::write(src.join("model.py"), "print('hi')\n").unwrap();
    std::fs::write(src.join("dataset/train/a.csv"), "1,2\n").unwrap();
    std::os::unix::fs::symlink("train/a.csv", src.join("dataset/latest")).unwrap();
    // 12 MB of varied bytes, checked by hash inside the job.
    let big: Vec<u8> = (0..12_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(src.join("blob.bin"), &big).unwrap();
    let local_sum = String::from_utf8(
        std::process::Command::new("sha256sum")
            .arg(src.join("blob.bin"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();

    let up = |p: &str| format!("--upload={}", src.join(p).display());
    let out = node.rnx(&[
        "job", "run", "-f", &up("model.py"), &up("dataset/"), &up("blob.bin"), "--",
        "sh", "-c", "cat model.py; cat dataset/latest; sha256sum blob.bin | cut -d' ' -f1; stat -c '%U' model.py dataset/train/a.csv",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let want_sum = local_sum.split_whitespace().next().unwrap();
    assert_eq!(
        text,
        format!("print('hi')\n1,2\n{want_sum}\nnobody\nnobody\n")
    );
}

#[test]
fn rnx_refuses_escaping_symlinks_and_device_files_before_sending() {
    let node = Node::start().unwrap();
    let d = node.dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", d.join("shadow")).unwrap();
    let out = node.rnx(&[
        "job",
        "run",
        &format!("--upload={}", d.display()),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("symlink to /etc/shadow"),
        "{}",
        stderr(&out)
    );
    let out = node.rnx(&["job", "run", "--upload=/dev/null", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("device file"), "{}", stderr(&out));
    assert_eq!(node.rnx_json(&["job", "list"]).as_array().unwrap().len(), 0);
}

fn entry(path: &str, kind: pb::UploadKind, size: u64, target: &str) -> pb::UploadEntry {
    pb::UploadEntry {
        path: path.into(),
        kind: kind as i32,
        mode: 0o644,
        size,
        target: target.into(),
    }
}

/// SubmitJob with a hand-made manifest and `data` after it.
fn submit(
    node: &Node,
    uploads: Vec<pb::UploadEntry>,
    data: &[u8],
) -> Result<pb::RunJobResponse, tonic::Status> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resolved = rnx::config::load_node(&node.client_config(), None).unwrap();
    let mut client = rt.block_on(rnx::client::connect(&resolved)).unwrap();
    let job = pb::RunJobRequest {
        command: "true".into(),
        uploads,
        ..Default::default()
    };
    let mut msgs = vec![pb::SubmitJobMessage {
        msg: Some(pb::submit_job_message::Msg::Job(job)),
    }];
    if !data.is_empty() {
        msgs.push(pb::SubmitJobMessage {
            msg: Some(pb::submit_job_message::Msg::Data(pb::UploadData {
                data: data.to_vec(),
            })),
        });
    }
    rt.block_on(client.submit_job(futures_stream(msgs)))
        .map(|r| r.into_inner())
}

fn futures_stream(
    msgs: Vec<pb::SubmitJobMessage>,
) -> impl tokio_stream::Stream<Item = pb::SubmitJobMessage> {
    tokio_stream::iter(msgs)
}

#[test]
fn the_node_refuses_traversal_escapes_and_oversize_before_writing() {
    let node = Node::start_with(NodeOptions {
        extra_config: "  max_upload_mb: 1\n".into(),
        ..Default::default()
    })
    .unwrap();
    use pb::UploadKind::{Dir, File, Symlink, Unspecified};
    let cases: Vec<(Vec<pb::UploadEntry>, &str)> = vec![
        (
            vec![entry("../../etc/joblet-e2e-x", File, 2, "")],
            "uploads[0].path",
        ),
        (
            vec![entry("/etc/joblet-e2e-x", File, 2, "")],
            "uploads[0].path",
        ),
        (
            vec![entry("d", Dir, 0, ""), entry("d/../../x", File, 2, "")],
            "uploads[1].path",
        ),
        (
            vec![entry("shadow", Symlink, 0, "/etc/shadow")],
            "uploads[0].target",
        ),
        (
            vec![entry("up", Symlink, 0, "../../etc")],
            "uploads[0].target",
        ),
        (vec![entry("dev", Unspecified, 0, "")], "uploads[0].kind"),
        (vec![entry("big", File, 2 * 1024 * 1024, "")], "uploads"),
    ];
    for (manifest, field) in cases {
        let err = submit(&node, manifest, b"hi").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(
            err.message().starts_with(field),
            "{field}: {}",
            err.message()
        );
    }
    // Data that does not match the manifest: refused, nothing kept.
    let err = submit(&node, vec![entry("a", File, 10, "")], b"short").unwrap_err();
    assert!(
        err.message().contains("5 bytes missing"),
        "{}",
        err.message()
    );
    let err = submit(&node, vec![entry("a", File, 2, "")], b"too long").unwrap_err();
    assert!(err.message().contains("more data"), "{}", err.message());

    assert!(!std::path::Path::new("/etc/joblet-e2e-x").exists());
    let staging = node.state_dir().join("uploads");
    let left = std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
    assert_eq!(
        left,
        0,
        "no half-written upload left in {}",
        staging.display()
    );
    assert_eq!(
        node.rnx_json(&["job", "list"]).as_array().unwrap().len(),
        0,
        "no job recorded"
    );

    // RunJob does not take a manifest (it has no way to carry the bytes).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resolved = rnx::config::load_node(&node.client_config(), None).unwrap();
    let mut client = rt.block_on(rnx::client::connect(&resolved)).unwrap();
    let err = rt
        .block_on(client.run_job(pb::RunJobRequest {
            command: "true".into(),
            uploads: vec![entry("a", File, 1, "")],
            ..Default::default()
        }))
        .unwrap_err();
    assert!(
        err.code() == Code::InvalidArgument && err.message().contains("SubmitJob"),
        "{err:?}"
    );
}

/// `filesystem.work_size_mb`: `/work` is a tmpfs of that size owned by the
/// job's user, holding a copy of the uploads; a job cannot write past it,
/// what it writes there stays out of the host, and uploads that would not
/// fit are refused at submission.
#[test]
fn a_sized_work_holds_the_uploads_and_stops_the_job_at_its_size() {
    let node = Node::start_with(NodeOptions {
        extra_config: "filesystem:\n  work_size_mb: 2\n".into(),
        ..NodeOptions::default()
    })
    .unwrap();
    let src = node.dir.path().join("src");
    std::fs::create_dir_all(src.join("data")).unwrap();
    std::fs::write(src.join("data/a.csv"), "1,2\n").unwrap();
    let up = format!("--upload={}", src.join("data/").display());
    let out = node.rnx(&[
        "job", "run", "-f", &up, "--",
        "sh", "-c",
        "cat data/a.csv; stat -c '%U %a' /work; dd if=/dev/zero of=/work/big bs=1M count=4 2>&1 | grep -o 'No space left on device' | head -1; df -k /work | awk 'NR==2 {print $2}'; rm /work/big; echo done > /work/out",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text,
        "1,2\nnobody 755\nNo space left on device\n2048\n",
        "{}",
        stderr(&out)
    );
    // Scratch: nothing the job wrote reached the host's work dir.
    let id_line = node.rnx(&["--json", "job", "list"]);
    let jobs: serde_json::Value = serde_json::from_slice(&id_line.stdout).unwrap();
    let id = jobs[0]["id"]
        .as_str()
        .or(jobs["jobs"][0]["id"].as_str())
        .unwrap()
        .to_string();
    let host_work = node.state_dir().join("jobs").join(&id).join("work");
    assert!(
        host_work.join("data/a.csv").exists(),
        "the upload stays on the host"
    );
    assert!(!host_work.join("out").exists() && !host_work.join("big").exists());

    // 3 MB of uploads do not fit in a 2 MiB /work: refused before any job exists.
    std::fs::write(src.join("big.bin"), vec![7u8; 3_000_000]).unwrap();
    let out = node.rnx(&[
        "job",
        "run",
        &format!("--upload={}", src.join("big.bin").display()),
        "--",
        "true",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("filesystem.work_size_mb") && err.contains("do not fit"),
        "{err}"
    );
}
