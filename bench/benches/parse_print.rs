//! Parse + verify + print of a 100,000-op module from `apir-gen`'s
//! generator; throughput is reported in ops (elements = ops).
//!
//! Run with `cargo bench -p apir-bench --bench parse_print`.

#![allow(missing_docs)]

use apir_ir::{parse_str, print_module, verify, Arch, ParseOptions};
use apir_synth::{generate, GenOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const OPS: usize = 100_000;

fn parse_verify_print(c: &mut Criterion) {
    let module = generate(&GenOptions {
        ops: OPS,
        seed: 1,
        arch: Arch::V2,
        distinct_shapes: None,
        kernels: 4,
    });
    let text = print_module(&module);
    let ops = module.ops.len() as u64;
    let mut group = c.benchmark_group("parse_print");
    group.sample_size(10);
    group.throughput(Throughput::Elements(ops));
    group.bench_function("parse", |b| {
        b.iter(|| parse_str("gen.apir", black_box(&text), ParseOptions::default()).unwrap())
    });
    group.bench_function("parse_verify_print", |b| {
        b.iter(|| {
            let (m, _) = parse_str("gen.apir", black_box(&text), ParseOptions::default()).unwrap();
            verify(&m).unwrap();
            print_module(&m)
        })
    });
    group.bench_function("print", |b| b.iter(|| print_module(black_box(&module))));
    group.finish();
}

criterion_group!(benches, parse_verify_print);
criterion_main!(benches);
