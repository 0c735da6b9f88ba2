//! The trace parser against garbled and generated input: it never panics,
//! errors name the file and a line, and valid rows parse back exactly.

use joblet_sim::trace::{parse_trace, TraceFilter};
use joblet_sim::SimError;
use proptest::prelude::*;

const VALID: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n\
2017-10-09 07:01:55,66.0,1,66.0,11cb48\n\
2017-10-09 06:13:03,2951.0,1,2951.0,6214e9\n\
2017-09-29 07:58:32,860662.0,8,860662.0,6c71a0\n";

fn check(bytes: &[u8]) {
    match parse_trace("g.csv", bytes, &TraceFilter::default()) {
        Ok(t) => {
            assert!(!t.jobs.is_empty());
            assert_eq!(t.jobs[0].submit_ms, 0);
            assert!(t.jobs.windows(2).all(|w| w[0].submit_ms <= w[1].submit_ms));
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("g.csv"), "{msg}");
            match e {
                SimError::Csv { line, .. }
                | SimError::BadField { line, .. }
                | SimError::ShortRow { line, .. } => assert!(line >= 1, "{msg}"),
                SimError::MissingColumn { .. } | SimError::EmptyTrace { .. } => {}
                other => panic!("unexpected error kind: {other}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn garbled_bytes_never_panic(edits in prop::collection::vec((0usize..200, any::<u8>()), 0..12), cut in 0usize..200) {
        let mut bytes = VALID.as_bytes().to_vec();
        for (pos, b) in edits {
            let pos = pos % bytes.len();
            bytes[pos] = b;
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        check(&bytes);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "[a-z_,0-9:. \\-\"\n]{0,300}") {
        check(format!("time,duration,gpus\n{text}").as_bytes());
        check(text.as_bytes());
    }

    #[test]
    fn generated_rows_parse_back(rows in prop::collection::vec((0u32..1_000_000, 0u32..100_000, 1u32..64), 1..50)) {
        let mut text = String::from("submit_time,duration,num_gpu\n");
        for (t, d, g) in &rows {
            text.push_str(&format!("{t},{d},{g}\n"));
        }
        let trace = parse_trace("g.csv", text.as_bytes(), &TraceFilter::default()).unwrap();
        let t0 = rows.iter().map(|r| r.0).min().unwrap();
        let mut expect: Vec<(u64, u64, u32, u64)> = rows
            .iter()
            .enumerate()
            .map(|(i, (t, d, g))| (u64::from(t - t0) * 1000, u64::from(*d) * 1000, *g, i as u64 + 2))
            .collect();
        expect.sort_by_key(|e| e.0); // stable, like the parser
        let got: Vec<(u64, u64, u32, u64)> = trace.jobs.iter().map(|j| (j.submit_ms, j.duration_ms, j.gpus, j.line)).collect();
        prop_assert_eq!(got, expect);
    }
}
