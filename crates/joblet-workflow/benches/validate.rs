//! Reading and checking a 10,000-job workflow file (`cargo bench -p
//! joblet-workflow`): YAML parsing, every per-job check and request
//! validation, the cycle check and the can-every-job-start analysis. The
//! `yaml only` line is the floor: serde_norway reading the same text into
//! nothing.

#[path = "../tests/support/big.rs"]
mod big;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use joblet_workflow::{Limits, Workflow};

fn validate(c: &mut Criterion) {
    let limits = Limits {
        max_gpus_per_node: Some(8),
    };
    for n in [1_000, 10_000] {
        let text = big::dag(n);
        c.bench_function(&format!("parse and check {n} jobs"), |b| {
            // The workflow is kept by whoever reads it: its drop is not timed.
            b.iter_with_large_drop(|| {
                Workflow::parse(black_box(&text), "big.yaml", &limits).unwrap()
            })
        });
    }
    let text = big::dag(10_000);
    c.bench_function("yaml only, 10000 jobs", |b| {
        b.iter_with_large_drop(|| {
            serde_norway::from_str::<serde::de::IgnoredAny>(black_box(&text)).unwrap()
        })
    });
}

criterion_group!(benches, validate);
criterion_main!(benches);
