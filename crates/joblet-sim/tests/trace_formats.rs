//! Trace parsing: every fixture format, the accepted column names, and
//! errors that name the file, line and column.

use std::path::{Path, PathBuf};

use joblet_sim::trace::{parse_trace, read_trace, TraceFilter, NEGATIVE_DURATION, ZERO_GPUS};
use joblet_sim::SimError;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/traces")
        .join(name)
}

fn parse(text: &str) -> Result<joblet_sim::trace::Trace, SimError> {
    parse_trace("t.csv", text.as_bytes(), &TraceFilter::default())
}

#[test]
fn philly_whole_trace() {
    let t = read_trace(&fixture("philly.csv"), &TraceFilter::default()).unwrap();
    assert_eq!(t.jobs.len(), 82_247);
    assert_eq!(t.jobs[0].submit_ms, 0);
    assert!(t.jobs.windows(2).all(|w| w[0].submit_ms <= w[1].submit_ms));
    // 2017-09-04 10:30:41 .. 2017-12-22 08:02:11
    let span_s = (109 * 86_400 + (8 * 3600 + 2 * 60 + 11)) - (10 * 3600 + 30 * 60 + 41);
    assert_eq!(t.jobs.last().unwrap().submit_ms, span_s * 1000);
    assert!(t.jobs.iter().all(|j| j.gpus >= 1 && j.invalid.is_none()));
    assert_eq!(t.jobs.iter().map(|j| j.gpus).max(), Some(128));
    // the earliest row is line 15,xxx of the file, with VC 7f04ca
    assert_eq!(t.jobs[0].queue, "7f04ca");
    assert_eq!(t.jobs[0].owner, "7f04ca");
    // Row 2 of the file: 2017-10-09 07:01:55,66.0,1,66.0,11cb48
    let row2 = t.jobs.iter().find(|j| j.line == 2).unwrap();
    assert_eq!(
        (row2.duration_ms, row2.gpus, row2.queue.as_str()),
        (66_000, 1, "11cb48")
    );
}

#[test]
fn philly_one_virtual_cluster_and_limit() {
    let filter = TraceFilter {
        owner_or_queue: Some("6214e9".into()),
        limit: None,
    };
    let t = read_trace(&fixture("philly.csv"), &filter).unwrap();
    assert_eq!(t.jobs.len(), 41_226);
    assert!(t.jobs.iter().all(|j| j.queue == "6214e9"));
    assert_eq!(t.jobs[0].submit_ms, 0);
    let limited = TraceFilter {
        limit: Some(100),
        ..filter
    };
    let l = read_trace(&fixture("philly.csv"), &limited).unwrap();
    assert_eq!(l.jobs, t.jobs[..100]);
}

#[test]
fn filter_that_matches_nothing_lists_the_queues() {
    let filter = TraceFilter {
        owner_or_queue: Some("nope".into()),
        limit: None,
    };
    let e = read_trace(&fixture("philly.csv"), &filter)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no job has owner/queue `nope`"), "{e}");
    assert!(
        e.contains("6214e9 (41226 jobs), 11cb48 (16091 jobs)"),
        "{e}"
    );
}

#[test]
fn tiresias_60_job() {
    let t = read_trace(&fixture("tiresias/60_job.csv"), &TraceFilter::default()).unwrap();
    assert_eq!(t.jobs.len(), 60);
    assert_eq!(
        (t.jobs[1].submit_ms, t.jobs[1].duration_ms, t.jobs[1].gpus),
        (30_000, 147_000, 8)
    );
    assert_eq!(t.jobs.last().unwrap().submit_ms, 1_779_000);
    assert!(t
        .jobs
        .iter()
        .all(|j| j.owner.is_empty() && j.queue.is_empty()));
}

#[test]
fn tiresias_tf_job_without_trailing_newline() {
    let t = read_trace(&fixture("tiresias/tf_job.csv"), &TraceFilter::default()).unwrap();
    assert_eq!(t.jobs.len(), 2);
    assert!(t
        .jobs
        .iter()
        .all(|j| j.gpus == 12 && j.duration_ms == 20_000));
    assert_eq!(t.jobs[1].line, 3);
}

#[test]
fn cluster_spec_file_is_not_a_trace() {
    let e = read_trace(&fixture("tiresias/n32g4.csv"), &TraceFilter::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("n32g4.csv"), "{e}");
    assert!(
        e.contains("no submit-time column; looked for one of timestamp, submission_time, submit_time, time"),
        "{e}"
    );
    assert!(e.contains("num_switch, num_node_p_switch"), "{e}");
}

#[test]
fn missing_duration_and_gpu_columns_are_named() {
    let e = parse("time,gpus\n1,1\n").unwrap_err().to_string();
    assert!(
        e.contains("no duration column; looked for one of duration"),
        "{e}"
    );
    let e = parse("time,duration\n1,1\n").unwrap_err().to_string();
    assert!(
        e.contains("no GPU-count column; looked for one of num_gpus, num_gpu, gpus"),
        "{e}"
    );
}

#[test]
fn alternative_column_names_and_owner_queue() {
    let t = parse("Submission_Time,Duration,GPUs,user,vc\n10,5,2,alice,vcA\n4.5,1.25,1,bob,vcB\n")
        .unwrap();
    assert_eq!(t.jobs.len(), 2);
    assert_eq!(t.jobs[0].line, 3);
    assert_eq!(
        (
            t.jobs[0].submit_ms,
            t.jobs[0].duration_ms,
            t.jobs[0].owner.as_str(),
            t.jobs[0].queue.as_str()
        ),
        (0, 1250, "bob", "vcB")
    );
    assert_eq!(t.jobs[1].submit_ms, 5_500);
    let vc = parse_trace(
        "t.csv",
        b"time,duration,num_gpu,user,queue\n1,1,1,alice,q1\n2,1,1,q1,q2\n",
        &TraceFilter {
            owner_or_queue: Some("q1".into()),
            limit: None,
        },
    )
    .unwrap();
    // The filter looks at the queue column when there is one.
    assert_eq!(vc.jobs.len(), 1);
    assert_eq!(vc.jobs[0].owner, "alice");
    let e = parse_trace(
        "t.csv",
        b"time,duration,num_gpu\n1,1,1\n",
        &TraceFilter {
            owner_or_queue: Some("q1".into()),
            limit: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("needs an owner/queue column (one of user, cluster, vc, queue)"),
        "{e}"
    );
}

#[test]
fn ties_keep_file_order_and_blank_lines_and_bom_and_crlf() {
    let t =
        parse("\u{feff}submit_time,duration,num_gpus\r\n5,1,1\r\n\r\n3,1,2\r\n5,1,4\r\n3,1,8\r\n")
            .unwrap();
    let order: Vec<(u64, u32)> = t.jobs.iter().map(|j| (j.submit_ms, j.gpus)).collect();
    assert_eq!(order, [(0, 2), (0, 8), (2000, 1), (2000, 4)]);
    let lines: Vec<u64> = t.jobs.iter().map(|j| j.line).collect();
    assert_eq!(lines, [4, 6, 2, 5]);
}

#[test]
fn unrunnable_rows_are_kept_with_a_reason() {
    let t = parse("time,duration,gpus\n0,10,0\n1,-3,2\n2,0,1\n").unwrap();
    let reasons: Vec<Option<&str>> = t.jobs.iter().map(|j| j.invalid).collect();
    assert_eq!(reasons, [Some(ZERO_GPUS), Some(NEGATIVE_DURATION), None]);
}

#[test]
fn bad_fields_name_file_line_column_and_form() {
    for (text, needle) in [
        (
            "timestamp,duration,num_gpus\n2017-10-09 07:01:55,1,1\n2017-02-30 00:00:00,1,1\n",
            "t.csv:3: column `timestamp`: `2017-02-30 00:00:00` is not a UTC time `YYYY-MM-DD HH:MM:SS`",
        ),
        (
            "time,duration,gpus\n1,abc,1\n",
            "t.csv:2: column `duration`: `abc` is not a number of seconds",
        ),
        ("time,duration,gpus\n1,NaN,1\n", "column `duration`: `NaN`"),
        ("time,duration,gpus\n1,1,1.5\n", "t.csv:2: column `gpus`: `1.5` is not a whole number of GPUs"),
        ("time,duration,gpus\n1,1,-1\n", "column `gpus`: `-1`"),
        ("time,duration,gpus\n1,1,1\n2,1\n", "t.csv:3: the row has 2 fields but column `gpus` is field 3"),
        ("time,duration,gpus\n1e400,1,1\n", "column `time`: `1e400`"),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text:?}: {e}");
    }
    assert!(matches!(
        parse("time,duration,gpus\n"),
        Err(SimError::EmptyTrace { .. })
    ));
    assert!(matches!(parse(""), Err(SimError::MissingColumn { .. })));
    let e = parse_trace(
        "t.csv",
        b"time,duration,gpus\n1,1,\xff\n",
        &TraceFilter::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.csv:2: "), "{e}");
}

#[test]
fn gpu_counts_written_as_floats() {
    let t = parse("time,duration,gpus\n0,1,8.0\n").unwrap();
    assert_eq!(t.jobs[0].gpus, 8);
}

#[test]
fn missing_file_is_named() {
    let e = read_trace(Path::new("/nonexistent/x.csv"), &TraceFilter::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot read trace /nonexistent/x.csv"), "{e}");
}
