//! A large workflow file for the validation test and benchmark.

use std::fmt::Write;

/// `n` jobs. Job `i` requires up to three of the 50 jobs before it
/// COMPLETED; every tenth job is an alert that requires one earlier job
/// FAILED, and jobs after it may require the alert only as ANY. So many
/// jobs are asked for both COMPLETED and FAILED, yet every job can start.
pub fn dag(n: usize) -> String {
    let mut text = String::with_capacity(n * 120);
    text.push_str("name: big\nresources:\n  max_memory: 512\njobs:\n");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % m as u64) as usize
    };
    for i in 0..n {
        let _ = write!(text, "  job-{i}:\n    command: run\n    args: [\"{i}\"]\n");
        if i == 0 {
            continue;
        }
        text.push_str("    requires:\n");
        if i % 10 == 0 {
            let _ = writeln!(text, "      - job-{}: FAILED", i - 1 - next(i.min(50)));
            continue;
        }
        let mut picked = Vec::new();
        for _ in 0..3 {
            let j = i - 1 - next(i.min(50));
            if !picked.contains(&j) {
                picked.push(j);
                let need = if j % 10 == 0 && j > 0 {
                    "ANY"
                } else {
                    "COMPLETED"
                };
                let _ = writeln!(text, "      - job-{j}: {need}");
            }
        }
    }
    text
}
