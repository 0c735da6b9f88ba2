//! Large output is captured byte-exact, and read back from any offset.

mod common;

use common::*;
use joblet_shim::{LogReader, Outcome};

const SIZE: usize = 5_000_000;

/// Deterministic incompressible bytes (xorshift64*).
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(n);
    out
}

#[tokio::test]
async fn five_megabytes_byte_exact_and_readable_from_any_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let input = noise(SIZE);
    let file = tmp.path().join("input.bin");
    std::fs::write(&file, &input).unwrap();

    let exit = finish(start(
        &dir,
        &spec(tmp.path(), "cat", &[file.to_str().unwrap()]),
    ))
    .await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    assert_eq!(exit.log_bytes, SIZE as u64);

    let recs = records(&dir, 0);
    assert!(recs.len() > 1);
    assert!(recs
        .iter()
        .all(|r| r.data.len() <= joblet_core::joblog::MAX_DATA));
    let all: Vec<u8> = recs.iter().flat_map(|r| r.data.iter().copied()).collect();
    assert!(all == input, "captured output differs from the input");

    for from in [
        0u64, 1, 4095, 65_535, 65_536, 65_537, 1_000_003, 2_500_000, 4_999_999,
    ] {
        let mut r = LogReader::open(&dir.output_log_path(), from).unwrap();
        assert_eq!(r.next_seq(), from);
        let mut got = Vec::new();
        let mut expect_seq = from;
        loop {
            let recs = r.read_available(100_000).unwrap();
            if recs.is_empty() {
                break;
            }
            for rec in recs {
                assert_eq!(rec.seq, expect_seq);
                expect_seq += rec.data.len() as u64;
                got.extend(rec.data);
            }
        }
        assert!(got == input[from as usize..], "tail from {from} differs");
        assert_eq!(r.next_seq(), SIZE as u64);
    }
    for from in [SIZE as u64, SIZE as u64 + 10] {
        let mut r = LogReader::open(&dir.output_log_path(), from).unwrap();
        assert!(r.read_available(1 << 20).unwrap().is_empty());
        assert_eq!(r.next_seq(), from);
    }
}

#[tokio::test]
async fn base64_of_urandom_arrives_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _cleanup) = job_dir(tmp.path());
    let exit = finish(start(
        &dir,
        &sh(
            tmp.path(),
            "head -c 3000000 /dev/urandom | base64 | tee copy.txt; echo done >&2",
        ),
    ))
    .await;
    assert_eq!(exit.outcome, Outcome::Exited, "{exit:?}");
    let copy = std::fs::read(tmp.path().join("copy.txt")).unwrap();
    let recs = records(&dir, 0);
    let stdout: Vec<u8> = recs
        .iter()
        .filter(|r| r.stream == joblet_core::joblog::Stream::Stdout)
        .flat_map(|r| r.data.iter().copied())
        .collect();
    assert!(stdout == copy, "stdout differs from the job's own copy");
    assert_eq!(exit.log_bytes, copy.len() as u64 + 5);
}
