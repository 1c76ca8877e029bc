//! Descriptor encode + validate through the library API (target: at least
//! 50 million descriptors per second on one core).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use apir_ir::target::addr4::{Addr4, Form};
use apir_ir::target::descriptor::{size, Descriptor};
use apir_ir::target::validate::descriptor_valid;
use apir_ir::target::{Arch, DescriptorKind, Direction, Dtype, MemorySet};
use apir_ir::Memory;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn descriptors() -> Vec<Descriptor> {
    (0..1024u32)
        .map(|i| {
            let kind = if i % 2 == 0 {
                DescriptorKind::MemPattern(4)
            } else {
                DescriptorKind::Tensor(3)
            };
            let addr = Addr4 {
                mem: if i % 3 == 0 {
                    Memory::Psum
                } else {
                    Memory::Sbuf
                },
                partition: i % 128,
                byte: (i * 4) % 0x4000,
                form: Form::Plain,
            }
            .encode(Arch::V3)
            .unwrap();
            let mut d = Descriptor::unit(kind, addr);
            d.steps[0] = 1;
            d.nums[0] = (i % 500 + 1) as u16;
            d.steps[1] = (i % 64) as i16 + 1;
            d.nums[1] = 4;
            d
        })
        .collect()
}

/// Whether `bytes`, the encoding of `d`, pass the v3 validator for its
/// kind's direction.
fn valid(d: &Descriptor, bytes: &[u8]) -> bool {
    let dir = if matches!(d.kind, DescriptorKind::MemPattern(_)) {
        Direction::Write
    } else {
        Direction::Read
    };
    descriptor_valid(
        black_box(bytes),
        d.kind,
        Dtype::F32,
        Arch::V3,
        dir,
        MemorySet::SP,
    )
    .is_ok()
}

fn bench(c: &mut Criterion) {
    let ds = descriptors();
    let mut g = c.benchmark_group("descriptor");
    g.throughput(Throughput::Elements(ds.len() as u64));
    g.bench_function("encode+validate", |b| {
        let mut buf = [0u8; 20];
        b.iter(|| {
            let mut ok = 0usize;
            for d in &ds {
                let out = &mut buf[..size(usize::from(d.kind.slots()))];
                d.write(out);
                ok += usize::from(valid(d, out));
            }
            assert_eq!(ok, ds.len());
            ok
        })
    });
    g.bench_function("encode(SmallVec)+validate", |b| {
        b.iter(|| {
            let mut ok = 0usize;
            for d in &ds {
                let bytes = d.encode();
                ok += usize::from(valid(d, &bytes));
            }
            ok
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
