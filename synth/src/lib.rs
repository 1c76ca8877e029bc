//! Deterministic synthetic modules for benchmarks and fuzz seeds (the library
//! side of `apir-gen`, docs/tools.md).
//!
//! [`generate`] builds a module through the IR API: SBUF and PSUM buffers
//! declared up front, HBM tensors for the GpSimd kernels, then a mix of ISA
//! ops drawn from the op-encoder table rows available on the arch. Every op
//! passes [`apir_ir::verify()`] and is built to lower without errors:
//!
//! - each on-chip operand starts at a partition the partition start rule
//!   allows (docs/hardware.md, "Archs and memories") and walks partitions
//!   with step = the buffer's partition free size;
//! - every free step is positive and fits i16, every num is in `1..=65535`,
//!   and no free walk leaves its partition;
//! - the free dims with `num != 1` never exceed the role's slot count (read
//!   from the table), so no op needs `canonicalize-ap` to fit;
//! - buffers start at dtype-aligned bytes, so every start byte is aligned.
//!
//! The same [`GenOptions`] always give the same module (a splitmix64 stream
//! seeded from [`GenOptions::seed`]); [`print_generic_mlir`] writes the same
//! operands as a generic-form MLIR file for `mlir-opt
//! --allow-unregistered-dialect`, the benchmark's baseline.
//!
//! ```
//! use apir_synth::{generate, GenOptions};
//! let m = generate(&GenOptions { ops: 100, seed: 7, ..GenOptions::default() });
//! apir_ir::verify(&m).unwrap();
//! assert_eq!(m.top_ops().count(), 100);
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use apir_ir::target::arch::partition_start_rule;
use apir_ir::target::{AttrKind, IsaOp};
use apir_ir::{
    AccessPattern, Arch, Attr, Buffer, Dim, Dims, Dtype, Memory, Module, OpData, OpKind, Operand,
};
use std::collections::HashSet;
use std::fmt::Write;

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenOptions {
    /// Number of ISA ops (kernels come on top of these).
    pub ops: usize,
    /// Seed of the pseudo-random stream; the same seed gives the same module.
    pub seed: u64,
    /// Target arch: picks the available ops and the SBUF size.
    pub arch: Arch,
    /// `Some(K)`: the ops draw their access-pattern shapes round-robin from
    /// `K` distinct shapes (for memoisation benchmarks): op `i` repeats the
    /// op kind, buffers, start partitions and dims of shape `i % K`, and only
    /// its offsets inside a partition and its attributes vary (the pool holds
    /// at most one shape per op). `None`: every op draws a fresh shape.
    pub distinct_shapes: Option<usize>,
    /// Number of `gpsimd.kernel` ops, each reading and writing the same
    /// number of elements of HBM tensors, spread evenly among the ops.
    pub kernels: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            ops: 1000,
            seed: 0,
            arch: Arch::V2,
            distinct_shapes: None,
            kernels: 0,
        }
    }
}

/// The farthest (in elements) a generated free walk reaches from its start;
/// every data buffer has a partition free size above it.
const MAX_REACH: u64 = 2047;

/// splitmix64: tiny, fast, and the same on every platform.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-high.
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// An access-pattern shape: active partitions and the free dims.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Shape {
    channels: u64,
    free: Dims,
}

impl Shape {
    /// Free dims that take a descriptor slot (`num != 1`).
    fn active(&self) -> usize {
        self.free.iter().filter(|d| d.num != 1).count()
    }

    fn first_num(&self) -> u64 {
        self.free.iter().find(|d| d.num != 1).map_or(1, |d| d.num)
    }

    fn last_num(&self) -> u64 {
        self.free
            .iter()
            .rev()
            .find(|d| d.num != 1)
            .map_or(1, |d| d.num)
    }
}

/// How far a free walk with positive steps reaches past its start.
fn reach(free: &[Dim]) -> u64 {
    free.iter()
        .map(|d| d.step.unsigned_abs() * (d.num - 1))
        .sum()
}

fn random_shape(rng: &mut Rng) -> Shape {
    let channels = match rng.below(10) {
        0..=3 => 128,
        4 => 64,
        5 => 32,
        6 => 1,
        _ => rng.range(1, 128),
    };
    let active = match rng.below(20) {
        0..=5 => 1,
        6..=12 => 2,
        13..=17 => 3,
        _ => 4,
    };
    loop {
        // Innermost first, then reversed to outermost-first order.
        let mut dims: Vec<Dim> = Vec::with_capacity(4);
        let step = match rng.below(10) {
            0..=6 => 1,
            7 | 8 => 2,
            _ => 3,
        };
        let budget = MAX_REACH / step;
        let hi = budget.min(match active {
            1 => 2048,
            2 => 256,
            _ => 32,
        });
        dims.push(Dim::new(step as i64, rng.range(2, hi.max(2))));
        while dims.len() < active {
            let inner = reach(&dims);
            let gap = if rng.chance(60) { 0 } else { rng.range(1, 16) };
            let step = inner + 1 + gap;
            let room = MAX_REACH.saturating_sub(inner) / step;
            if room < 1 {
                break;
            }
            dims.push(Dim::new(step as i64, rng.range(2, (room + 1).clamp(2, 8))));
        }
        if dims.len() != active || reach(&dims) > MAX_REACH {
            continue;
        }
        dims.reverse();
        // Sometimes a unit dim, which `compact-unit-dims` drops.
        if dims.len() < 4 && rng.chance(20) {
            let at = rng.below(dims.len() as u64 + 1) as usize;
            dims.insert(at, Dim::new(rng.range(1, 64) as i64, 1));
        }
        return Shape {
            channels,
            free: dims.into_iter().collect(),
        };
    }
}

/// A data buffer ops may address, with its geometry.
#[derive(Clone, Copy, Debug)]
struct Slot {
    buf: Buffer,
    mem: Memory,
    /// First partition.
    start: u64,
    /// Partitions spanned.
    parts: u64,
    /// Partition free size in elements.
    f: u64,
}

impl Slot {
    /// Start partitions an operand of `c` channels may take in this buffer.
    fn starts(&self, c: u64) -> impl Iterator<Item = u64> + '_ {
        [0u64, 32, 64, 96].into_iter().filter(move |&p| {
            p >= self.start
                && p + c <= self.start + self.parts
                && partition_start_rule(p, c).is_none()
        })
    }

    fn allows(&self, c: u64, p: u64) -> bool {
        self.starts(c).any(|q| q == p)
    }
}

/// How an op kind uses the drawn shape; the roles listed in `shaped` take it
/// whole, so the shape's active dims must fit each of their slot counts.
struct Recipe {
    op: &'static str,
    weight: u64,
    shaped: &'static [&'static str],
}

#[rustfmt::skip]
const RECIPES: &[Recipe] = &[
    Recipe { op: "isa.tensor_copy", weight: 20, shaped: &["dst", "src"] },
    Recipe { op: "isa.tensor_tensor", weight: 12, shaped: &["dst", "src0", "src1"] },
    Recipe { op: "isa.activation", weight: 10, shaped: &["dst", "src"] },
    Recipe { op: "isa.tensor_scalar", weight: 10, shaped: &["dst", "src"] },
    Recipe { op: "isa.matmul", weight: 10, shaped: &[] },
    Recipe { op: "isa.memset", weight: 6, shaped: &["dst"] },
    Recipe { op: "isa.tensor_reduce", weight: 6, shaped: &["src"] },
    Recipe { op: "isa.reciprocal", weight: 5, shaped: &["dst", "src"] },
    Recipe { op: "isa.transpose", weight: 5, shaped: &[] },
    Recipe { op: "isa.bn_stats", weight: 5, shaped: &["src"] },
    Recipe { op: "isa.bn_aggr", weight: 3, shaped: &[] },
    Recipe { op: "isa.max8", weight: 3, shaped: &["src"] },
    Recipe { op: "isa.iota", weight: 3, shaped: &["dst"] },
    Recipe { op: "isa.matmul_sparse", weight: 2, shaped: &["ifmap"] },
];

/// A recipe resolved against the arch: its table row and shape capacity.
struct Usable {
    isa: IsaOp,
    name: &'static str,
    weight: u64,
    capacity: usize,
}

struct Gen {
    m: Module,
    /// Structural choices: op kind, buffers, start partitions, dims.
    rng: Rng,
    /// Everything else: offsets inside a partition, attributes, kernels.
    vary: Rng,
    /// SBUF and PSUM buffers that shaped operands go to.
    data: Vec<Slot>,
    /// Per-partition bias column (activation).
    bias: Slot,
    /// Small per-partition stats tile (bn_stats, bn_aggr, sparse metadata).
    stats: Slot,
    /// (input, output) HBM tensor pairs for the kernels.
    hbm: Vec<(Buffer, Buffer)>,
    usable: Vec<Usable>,
}

/// HBM tensors per kernel side: elements of each.
const HBM_ELEMS: u64 = 1 << 20;
/// First HBM address used.
const HBM_BASE: u64 = 0x4000_0000;

/// Builds a deterministic synthetic module (see the module docs).
pub fn generate(opts: &GenOptions) -> Module {
    let mut keep = |_: &mut Module| Ok::<(), std::convert::Infallible>(());
    match drive(opts, usize::MAX, &mut keep) {
        Ok(m) => m,
        Err(never) => match never {},
    }
}

/// Ops [`write_generated`] builds, verifies and prints at a time
/// (project-defined): enough that a batch's fixed costs vanish, few enough
/// that memory stays a few MiB.
pub const BATCH_OPS: usize = 4096;

/// The text formats the generator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// apir IR text ([`apir_ir::print_module`]).
    Apir,
    /// Generic-form MLIR ([`print_generic_mlir`]).
    Mlir,
    /// The lightest MLIR form ([`print_light_mlir`]).
    MlirLight,
}

/// Why [`write_generated`] stopped.
#[derive(Debug)]
pub enum WriteError {
    /// Writing failed.
    Io(std::io::Error),
    /// A generated batch failed verification (a bug in the generator): the
    /// verifier's diagnostics.
    Invalid(apir_ir::Diagnostics),
}

/// Writes the module [`generate`] builds for `opts`, in `format`, to `out`,
/// [`BATCH_OPS`] ops at a time: each batch is built, verified, printed and
/// dropped, so memory is one batch's (and the shape pool's) whatever
/// `opts.ops`. The bytes are those of printing the whole module.
pub fn write_generated(
    opts: &GenOptions,
    format: TextFormat,
    out: &mut dyn std::io::Write,
) -> Result<(), WriteError> {
    use apir_ir::printer::{print_footer, print_header, print_item};
    use apir_ir::Item;
    let mut text = String::new();
    let mut first = true;
    let mut flush = |m: &mut Module| -> Result<(), WriteError> {
        apir_ir::verify(m).map_err(WriteError::Invalid)?;
        text.clear();
        if first {
            match format {
                TextFormat::Apir => print_header(m, &mut text),
                TextFormat::Mlir | TextFormat::MlirLight => mlir_header(&mut text),
            }
        }
        for &item in &m.body {
            match (item, format) {
                // Every buffer is declared before the first op: the first
                // batch prints them, and they stay for the later ones to
                // verify against.
                (Item::Buffer(_), _) if !first => {}
                (_, TextFormat::Apir) => print_item(m, item, &mut text),
                (Item::Buffer(b), TextFormat::Mlir) => mlir_buffer(m, b, &mut text),
                (Item::Op(op), TextFormat::Mlir) => mlir_op(m, op, 1, &mut text),
                (Item::Buffer(_), TextFormat::MlirLight) => {}
                (Item::Op(op), TextFormat::MlirLight) => light_op(m, op, 1, &mut text),
            }
        }
        first = false;
        out.write_all(text.as_bytes()).map_err(WriteError::Io)?;
        m.clear_ops();
        Ok(())
    };
    let m = drive(opts, BATCH_OPS, &mut flush)?;
    let mut tail = String::new();
    match format {
        TextFormat::Apir => print_footer(&mut tail),
        TextFormat::Mlir | TextFormat::MlirLight => mlir_footer(m.arch, &mut tail),
    }
    out.write_all(tail.as_bytes()).map_err(WriteError::Io)?;
    out.flush().map_err(WriteError::Io)
}

/// Builds the module for `opts`, handing it to `flush` after every `batch`
/// top-level ops and once at the end; returns what is left of it.
fn drive<E>(
    opts: &GenOptions,
    batch: usize,
    flush: &mut dyn FnMut(&mut Module) -> Result<(), E>,
) -> Result<Module, E> {
    let mut g = Gen::new(opts);
    // More shapes than ops would never be drawn: the pool holds at most
    // one per op, so its memory follows the output.
    let pool = opts
        .distinct_shapes
        .map(|k| shape_pool(&mut g.rng, k.clamp(1, opts.ops.max(1))));
    let mut kernels_done = 0usize;
    let mut in_batch = 0usize;
    for i in 0..opts.ops {
        // Kernel j sits before op floor((j + 1) * ops / (kernels + 1)).
        while kernels_done < opts.kernels
            && i as u128
                >= (kernels_done as u128 + 1) * opts.ops as u128 / (opts.kernels as u128 + 1)
        {
            g.kernel(kernels_done);
            kernels_done += 1;
            in_batch += 1;
        }
        let shape = match &pool {
            Some(p) => {
                // The same structural stream per shape: op kind, buffers and
                // start partitions repeat with the shape, offsets vary.
                let j = (i % p.len()) as u64;
                g.rng = Rng(opts.seed ^ Rng(j).next_u64());
                p[j as usize].clone()
            }
            None => random_shape(&mut g.rng),
        };
        g.op(&shape);
        in_batch += 1;
        if in_batch >= batch {
            flush(&mut g.m)?;
            in_batch = 0;
        }
    }
    while kernels_done < opts.kernels {
        g.kernel(kernels_done);
        kernels_done += 1;
        in_batch += 1;
        if in_batch >= batch {
            flush(&mut g.m)?;
            in_batch = 0;
        }
    }
    flush(&mut g.m)?;
    Ok(g.m)
}

/// `k` pairwise distinct shapes (fewer only if the shape space ran dry).
fn shape_pool(rng: &mut Rng, k: usize) -> Vec<Shape> {
    let mut seen = HashSet::with_capacity(k);
    let mut pool = Vec::with_capacity(k);
    let mut tries = 0usize;
    while pool.len() < k && tries < k.saturating_mul(100).max(1000) {
        tries += 1;
        let s = random_shape(rng);
        if seen.insert(s.clone()) {
            pool.push(s);
        }
    }
    pool
}

impl Gen {
    fn new(opts: &GenOptions) -> Gen {
        let arch = opts.arch;
        let mut m = Module::new(arch);
        m.name = Some(m.sym("synthetic"));
        let mut data = Vec::new();
        let decl =
            |m: &mut Module, name: &str, mem, part: u32, byte: u64, shape: &[u64], dt: Dtype| {
                let d = m.buffer_data(name, mem, part, byte, shape, dt);
                let buf = m.add_buffer(d);
                Slot {
                    buf,
                    mem,
                    start: u64::from(part),
                    parts: shape[0],
                    f: shape[1..].iter().product(),
                }
            };
        // SBUF: 0x1E120 bytes per partition at most, below every arch's 0x30000.
        data.push(decl(
            &mut m,
            "sa",
            Memory::Sbuf,
            0,
            0,
            &[128, 8192],
            Dtype::F32,
        ));
        data.push(decl(
            &mut m,
            "sb",
            Memory::Sbuf,
            0,
            0x8000,
            &[128, 64, 128],
            Dtype::F32,
        ));
        data.push(decl(
            &mut m,
            "sc",
            Memory::Sbuf,
            0,
            0x10000,
            &[128, 16384],
            Dtype::Bf16,
        ));
        data.push(decl(
            &mut m,
            "sh",
            Memory::Sbuf,
            64,
            0x18000,
            &[64, 4096],
            Dtype::F32,
        ));
        data.push(decl(
            &mut m,
            "sq",
            Memory::Sbuf,
            32,
            0x1C000,
            &[32, 2048],
            Dtype::F32,
        ));
        let bias = decl(
            &mut m,
            "bias",
            Memory::Sbuf,
            0,
            0x1E000,
            &[128, 8],
            Dtype::F32,
        );
        let stats = decl(
            &mut m,
            "stats",
            Memory::Sbuf,
            0,
            0x1E020,
            &[128, 64],
            Dtype::F32,
        );
        // PSUM: 16 KiB per partition, two halves.
        data.push(decl(
            &mut m,
            "pa",
            Memory::Psum,
            0,
            0,
            &[128, 2048],
            Dtype::F32,
        ));
        data.push(decl(
            &mut m,
            "pb",
            Memory::Psum,
            0,
            0x2000,
            &[128, 4096],
            Dtype::Bf16,
        ));
        let mut hbm = Vec::new();
        for i in 0..opts.kernels.min(4) as u64 {
            let bytes = HBM_ELEMS * 4;
            let a = m.buffer_data(
                &format!("hin{i}"),
                Memory::Hbm,
                0,
                HBM_BASE + 2 * i * bytes,
                &[HBM_ELEMS],
                Dtype::F32,
            );
            let a = m.add_buffer(a);
            let b = m.buffer_data(
                &format!("hout{i}"),
                Memory::Hbm,
                0,
                HBM_BASE + (2 * i + 1) * bytes,
                &[HBM_ELEMS],
                Dtype::F32,
            );
            let b = m.add_buffer(b);
            hbm.push((a, b));
        }
        let usable = RECIPES
            .iter()
            .filter_map(|r| {
                let isa = IsaOp::from_name(r.op)?;
                let info = isa.info();
                info.encoder(arch)?;
                let capacity = r
                    .shaped
                    .iter()
                    .filter_map(|role| info.role(role))
                    .map(|(_, ri)| usize::from(ri.slots))
                    .min()
                    .unwrap_or(4);
                Some(Usable {
                    isa,
                    name: r.op,
                    weight: r.weight,
                    capacity,
                })
            })
            .collect();
        Gen {
            m,
            rng: Rng(opts.seed),
            vary: Rng(opts.seed ^ 0xA076_1D64_78BD_642F),
            data,
            bias,
            stats,
            hbm,
            usable,
        }
    }

    /// Picks an op kind whose shaped roles can hold `active` dims.
    fn pick_kind(&mut self, active: usize) -> usize {
        let total: u64 = self
            .usable
            .iter()
            .filter(|u| u.capacity >= active)
            .map(|u| u.weight)
            .sum();
        let mut x = self.rng.below(total);
        for (i, u) in self.usable.iter().enumerate() {
            if u.capacity < active {
                continue;
            }
            if x < u.weight {
                return i;
            }
            x -= u.weight;
        }
        unreachable!("weights add up")
    }

    /// A data slot allowed for `role` of `isa` that can hold `c` channels,
    /// and (if `at` is given) start at partition `at`.
    fn slot(&mut self, isa: IsaOp, role: &str, c: u64, at: Option<u64>) -> Slot {
        let mems = isa
            .info()
            .role(role)
            .expect("recipe role is in the table")
            .1
            .mems;
        let mut cands = [self.data[0]; 8];
        let mut n = 0;
        for s in &self.data {
            let fits = match at {
                Some(p) => s.allows(c, p),
                None => s.starts(c).next().is_some(),
            };
            if mems.contains(s.mem) && fits {
                cands[n] = *s;
                n += 1;
            }
        }
        assert!(
            n > 0,
            "every channel count fits a 128-partition buffer at partition 0"
        );
        self.rng.pick(&cands[..n])
    }

    fn start(&mut self, s: &Slot, c: u64) -> u64 {
        let mut cands = [0u64; 4];
        let mut n = 0;
        for p in s.starts(c) {
            cands[n] = p;
            n += 1;
        }
        self.rng.pick(&cands[..n])
    }

    /// `role = %buf[[F, c], free...] + offset`, starting at partition `p`
    /// and element `e` of it (random if `None`).
    fn operand(
        &mut self,
        role: &str,
        s: Slot,
        p: u64,
        c: u64,
        free: &[Dim],
        e: Option<u64>,
    ) -> Operand {
        let r = reach(free);
        debug_assert!(r < s.f);
        let e = e.unwrap_or_else(|| self.vary.below(s.f - r));
        let mut dims = Dims::new();
        dims.push(Dim::new(s.f as i64, c));
        dims.extend_from_slice(free);
        let ap = AccessPattern {
            offset: ((p - s.start) * s.f + e) as i64,
            dims,
        };
        self.m.operand(role, s.buf, ap)
    }

    /// An operand of `shape` for `role`, in a random allowed buffer.
    fn shaped(&mut self, isa: IsaOp, role: &str, shape: &Shape) -> (Operand, u64) {
        let s = self.slot(isa, role, shape.channels, None);
        let p = self.start(&s, shape.channels);
        (
            self.operand(role, s, p, shape.channels, &shape.free, None),
            p,
        )
    }

    /// An operand of `shape` for `role` starting at partition `p`.
    fn shaped_at(&mut self, isa: IsaOp, role: &str, shape: &Shape, p: u64) -> Operand {
        let s = self.slot(isa, role, shape.channels, Some(p));
        self.operand(role, s, p, shape.channels, &shape.free, None)
    }

    fn op(&mut self, shape: &Shape) {
        let k = self.pick_kind(shape.active());
        let (isa, name) = (self.usable[k].isa, self.usable[k].name);
        let c = shape.channels;
        let unit = |n: u64| [Dim::new(1, n)];
        let mut ops: Vec<Operand> = Vec::with_capacity(4);
        match name {
            "isa.tensor_copy" | "isa.reciprocal" | "isa.tensor_scalar" => {
                ops.push(self.shaped(isa, "dst", shape).0);
                ops.push(self.shaped(isa, "src", shape).0);
            }
            "isa.tensor_tensor" => {
                ops.push(self.shaped(isa, "dst", shape).0);
                ops.push(self.shaped(isa, "src0", shape).0);
                ops.push(self.shaped(isa, "src1", shape).0);
            }
            "isa.memset" | "isa.iota" => ops.push(self.shaped(isa, "dst", shape).0),
            "isa.activation" => {
                let (src, p) = self.shaped(isa, "src", shape);
                ops.push(self.shaped(isa, "dst", shape).0);
                ops.push(src);
                let bias = self.bias;
                ops.push(self.operand("bias", bias, p, c, &unit(1), None));
            }
            "isa.tensor_reduce" => {
                let (src, p) = self.shaped(isa, "src", shape);
                // The destination keeps every dim but the innermost one.
                let last = shape.free.iter().rposition(|d| d.num != 1).unwrap_or(0);
                let mut free: Dims = shape
                    .free
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != last)
                    .map(|(_, d)| *d)
                    .collect();
                if free.is_empty() {
                    free.push(Dim::new(1, 1));
                }
                let dst = Shape { channels: c, free };
                ops.push(self.shaped_at(isa, "dst", &dst, p));
                ops.push(src);
            }
            "isa.bn_stats" | "isa.max8" => {
                let (src, p) = self.shaped(isa, "src", shape);
                let (n, stride) = if name == "isa.bn_stats" {
                    (6, 6)
                } else {
                    (8, 8)
                };
                let stats = self.stats;
                let e = stride * self.vary.below((stats.f - n) / stride + 1);
                ops.push(self.operand("dst", stats, p, c, &unit(n), Some(e)));
                ops.push(src);
            }
            "isa.bn_aggr" => {
                let stats = self.stats;
                let p = self.start(&stats, c);
                let groups = self.rng.range(1, 8);
                let e = 48 + 2 * self.vary.below(8);
                ops.push(self.operand("dst", stats, p, c, &unit(2), Some(e)));
                let free = [Dim::new(6, groups), Dim::new(1, 6)];
                ops.push(self.operand("src", stats, p, c, &free, Some(0)));
            }
            "isa.transpose" => {
                let t = shape.last_num().min(128);
                let (src_slot, dst_slot) = (
                    self.slot(isa, "src", c, None),
                    self.slot(isa, "dst", t, None),
                );
                let (ps, pd) = (self.start(&src_slot, c), self.start(&dst_slot, t));
                ops.push(self.operand("dst", dst_slot, pd, t, &unit(c), None));
                ops.push(self.operand("src", src_slot, ps, c, &unit(t), None));
            }
            "isa.matmul" | "isa.matmul_sparse" => {
                // stationary [K, M], moving/ifmap [K, N] -> dst [M, N] in one PSUM bank.
                let m_rows = shape.first_num().min(128);
                let n_cols = shape.last_num().min(512);
                let st = self.slot(isa, "stationary", c, None);
                let p = self.start(&st, c);
                let ps = self.slot(isa, "dst", m_rows, None);
                let pd = self.start(&ps, m_rows);
                let bank = 2048 / u64::from(self.m.buffers[ps.buf].dtype.bytes());
                let e = bank * self.vary.below(ps.f / bank);
                ops.push(self.operand("dst", ps, pd, m_rows, &unit(n_cols), Some(e)));
                ops.push(self.operand("stationary", st, p, c, &unit(m_rows), None));
                if name == "isa.matmul" {
                    let mv = self.slot(isa, "moving", c, Some(p));
                    ops.push(self.operand("moving", mv, p, c, &unit(n_cols), None));
                } else {
                    ops.push(self.shaped_at(isa, "ifmap", shape, p));
                    let stats = self.stats;
                    let e = 8 * self.vary.below(7);
                    ops.push(self.operand("metadata", stats, p, c, &unit(8), Some(e)));
                }
            }
            other => unreachable!("no recipe body for {other}"),
        }
        let mut data = Module::op_data(OpKind::Isa(isa), ops);
        self.attrs(isa, &mut data);
        self.m.add_op(data);
    }

    /// Sets about half of the op's interpreted attributes to random legal values.
    fn attrs(&mut self, isa: IsaOp, data: &mut OpData) {
        for a in isa.info().attrs {
            if !self.vary.chance(50) {
                continue;
            }
            let v = match a.kind {
                AttrKind::Enum(values) => Attr::Str(self.m.sym(self.vary.pick(values))),
                AttrKind::Int { min, max } => {
                    let lo = min.max(-1000);
                    let hi = max.min(1000);
                    Attr::Int(i128::from(lo) + i128::from(self.vary.below((hi - lo) as u64 + 1)))
                }
                AttrKind::Bool => Attr::Bool(self.vary.chance(50)),
            };
            data.attrs.insert(self.m.sym(a.name), v);
        }
    }

    /// `gpsimd.kernel @kJ` reading and writing `E` contiguous elements.
    fn kernel(&mut self, j: usize) {
        let (hin, hout) = self.hbm[j % self.hbm.len()];
        let e = 1024 * self.vary.range(1, 256);
        let max_off = (HBM_ELEMS - e) / 1024;
        let (off_in, off_out) = (
            1024 * self.vary.range(0, max_off),
            1024 * self.vary.range(0, max_off),
        );
        let read_ap = if self.vary.chance(50) {
            AccessPattern::new(&[(1, e)], off_in as i64)
        } else {
            AccessPattern::new(&[(1024, e / 1024), (1, 1024)], off_in as i64)
        };
        let write_ap = AccessPattern::new(&[(1, e)], off_out as i64);
        let body = self.m.new_block();
        let read = self.m.operand("src", hin, read_ap);
        let mut read = Module::op_data(OpKind::Read, [read]);
        if self.vary.chance(30) {
            let (k, v) = (self.m.sym("accessor"), self.m.sym("stream"));
            read.attrs.insert(k, Attr::Str(v));
        }
        self.m.add_op_to_block(body, read);
        let write = self.m.operand("dst", hout, write_ap);
        let mut write = Module::op_data(OpKind::Write, [write]);
        if self.vary.chance(50) {
            let (k, v) = (self.m.sym("accessor"), self.m.sym("stream"));
            write.attrs.insert(k, Attr::Str(v));
        }
        self.m.add_op_to_block(body, write);
        let name = self.m.sym(&format!("k{j}"));
        let mut kernel = Module::op_data(OpKind::Kernel { name, body }, []);
        let (core, cpe) = (self.m.sym("core"), self.m.sym("cycles_per_element"));
        kernel.attrs.insert(core, Attr::Int((j % 2) as i128));
        kernel
            .attrs
            .insert(cpe, Attr::Int(i128::from(self.vary.range(1, 4))));
        self.m.add_op(kernel);
    }
}

/// Prints `m` as a generic-form MLIR module carrying the same operands, for
/// `mlir-opt --allow-unregistered-dialect` (the benchmark baseline).
///
/// Buffers become `%x = "mem.sbuf"() {partition = 0 : i64, byte = 0 : i64,
/// shape = array<i64: 128, 2048>, dtype = "f32"} : () -> i64`; an op becomes
/// `"isa.tensor_copy"(%p, %x) {dst = array<i64: 512, 128, 1, 512>,
/// dst_offset = 0 : i64, src = array<i64: ...>, src_offset = 1 : i64} :
/// (i64, i64) -> ()` (each role's `[step, num]` pairs flattened, then its
/// offset, then the op's attributes); kernels keep their body as a region.
pub fn print_generic_mlir(m: &Module) -> String {
    let mut out = String::with_capacity(160 * (m.ops.len() + m.buffers.len()) + 64);
    mlir_header(&mut out);
    for item in &m.body {
        match *item {
            apir_ir::Item::Buffer(b) => mlir_buffer(m, b, &mut out),
            apir_ir::Item::Op(op) => mlir_op(m, op, 1, &mut out),
        }
    }
    mlir_footer(m.arch, &mut out);
    out
}

/// The first line of both MLIR forms.
fn mlir_header(out: &mut String) {
    out.push_str("\"builtin.module\"() ({\n");
}

/// The last line of both MLIR forms: the module's arch as an attribute.
fn mlir_footer(arch: Arch, out: &mut String) {
    out.push_str("}) {apir.arch = \"");
    out.push_str(arch.name());
    out.push_str("\"} : () -> ()\n");
}

/// Prints `m` in the lightest MLIR form that still carries every number of
/// its operands, for `mlir-opt --allow-unregistered-dialect` (the second
/// benchmark baseline): no buffers and no SSA operands, one attribute per
/// op, `"isa.tensor_copy"() {ap = array<i64: 1, 2, 512, 128, 1, 512, 0, 0,
/// 2, 2048, 128, 4, 512, 1>} : () -> ()`, where each operand contributes its
/// buffer's index among the module's buffers, its number of dims, its
/// `[step, num]` pairs and its offset. Op attributes are left out; kernels
/// keep their body as a region.
pub fn print_light_mlir(m: &Module) -> String {
    let mut out = String::with_capacity(96 * m.ops.len() + 64);
    mlir_header(&mut out);
    for &op in m.body.iter().filter_map(|i| match i {
        apir_ir::Item::Op(op) => Some(op),
        apir_ir::Item::Buffer(_) => None,
    }) {
        light_op(m, op, 1, &mut out);
    }
    mlir_footer(m.arch, &mut out);
    out
}

fn light_op(m: &Module, op: apir_ir::Op, depth: usize, out: &mut String) {
    let data = &m.ops[op];
    for _ in 0..depth {
        out.push_str("  ");
    }
    let _ = write!(out, "\"{}\"()", data.kind.name());
    if let OpKind::Kernel { body, .. } = data.kind {
        out.push_str(" ({\n");
        for &inner in &m.blocks[body].ops {
            light_op(m, inner, depth + 1, out);
        }
        for _ in 0..depth {
            out.push_str("  ");
        }
        out.push_str("})");
    }
    if !data.operands.is_empty() {
        out.push_str(" {ap = array<i64: ");
        let mut first = true;
        let mut num = |out: &mut String, v: i128| {
            if !first {
                out.push_str(", ");
            }
            first = false;
            let _ = write!(out, "{v}");
        };
        for o in &data.operands {
            num(out, i128::from(o.buffer.as_u32()));
            num(out, o.ap.dims.len() as i128);
            for d in &o.ap.dims {
                num(out, i128::from(d.step));
                num(out, i128::from(d.num));
            }
            num(out, i128::from(o.ap.offset));
        }
        out.push_str(">}");
    }
    out.push_str(" : () -> ()\n");
}

fn mlir_int(out: &mut String, v: impl std::fmt::Display) {
    let _ = write!(out, "{v} : i64");
}

fn mlir_buffer(m: &Module, b: Buffer, out: &mut String) {
    let d = &m.buffers[b];
    let _ = write!(out, "  %{} = \"{}\"() {{", m.str(d.name), d.mem.op_name());
    if d.mem.is_on_chip() {
        out.push_str("partition = ");
        mlir_int(out, d.partition);
        out.push_str(", byte = ");
    } else {
        out.push_str("addr = ");
    }
    mlir_int(out, d.base);
    out.push_str(", shape = array<i64: ");
    for (i, s) in d.shape.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{s}");
    }
    let _ = writeln!(out, ">, dtype = \"{}\"}} : () -> i64", d.dtype.name());
}

fn mlir_attr(m: &Module, a: &Attr, out: &mut String) {
    match a {
        Attr::Int(v) => mlir_int(out, v),
        Attr::Str(s) => apir_ir::printer::write_string(out, m.str(*s)),
        Attr::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Attr::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                mlir_attr(m, v, out);
            }
            out.push(']');
        }
    }
}

fn mlir_op(m: &Module, op: apir_ir::Op, depth: usize, out: &mut String) {
    let data = &m.ops[op];
    for _ in 0..depth {
        out.push_str("  ");
    }
    let _ = write!(out, "\"{}\"(", data.kind.name());
    for (i, o) in data.operands.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('%');
        out.push_str(m.str(m.buffers[o.buffer].name));
    }
    out.push(')');
    if let OpKind::Kernel { body, .. } = data.kind {
        out.push_str(" ({\n");
        for &inner in &m.blocks[body].ops {
            mlir_op(m, inner, depth + 1, out);
        }
        for _ in 0..depth {
            out.push_str("  ");
        }
        out.push_str("})");
    }
    out.push_str(" {");
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push_str(", ");
        }
        first = false;
    };
    if let OpKind::Kernel { name, .. } = data.kind {
        sep(out);
        out.push_str("kernel = ");
        apir_ir::printer::write_string(out, m.str(name));
    }
    for o in &data.operands {
        let role = m.str(o.role);
        sep(out);
        let _ = write!(out, "{role} = array<i64: ");
        for (i, d) in o.ap.dims.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}, {}", d.step, d.num);
        }
        let _ = write!(out, ">, {role}_offset = ");
        mlir_int(out, o.ap.offset);
    }
    for (k, v) in &data.attrs {
        sep(out);
        out.push_str(m.str(*k));
        out.push_str(" = ");
        mlir_attr(m, v, out);
    }
    out.push_str("} : (");
    for i in 0..data.operands.len() {
        out.push_str(if i == 0 { "i64" } else { ", i64" });
    }
    out.push_str(") -> ()\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use apir_ir::{parse_str, print_module, verify, ParseOptions};

    fn opts(arch: Arch, seed: u64) -> GenOptions {
        GenOptions {
            ops: 3000,
            seed,
            arch,
            distinct_shapes: None,
            kernels: 5,
        }
    }

    /// Checks the lowering rules the generator promises, operand by operand.
    fn check_lowerable(m: &Module) {
        for op in m.walk_ops() {
            let data = &m.ops[op];
            let info = match data.kind {
                OpKind::Isa(isa) => isa.info(),
                _ => continue,
            };
            assert!(
                info.encoder(m.arch).is_some(),
                "{} on {}",
                info.name,
                m.arch
            );
            for o in &data.operands {
                let b = &m.buffers[o.buffer];
                let (_, role) = info.role(m.str(o.role)).unwrap();
                assert!(role.mems.contains(b.mem));
                let f = b.free_elements().unwrap();
                let p = o.ap.dims[0];
                assert_eq!(
                    p.step as u64, f,
                    "partition step of {} {}",
                    info.name, role.name
                );
                let start = u64::from(b.partition) + o.ap.offset as u64 / f;
                assert_eq!(
                    partition_start_rule(start, p.num),
                    None,
                    "{} {} {start}+{}",
                    info.name,
                    role.name,
                    p.num
                );
                let free = &o.ap.dims[1..];
                assert!(free
                    .iter()
                    .all(|d| d.step > 0 && d.step <= i64::from(i16::MAX)));
                assert!(free.iter().all(|d| (1..=65535).contains(&d.num)));
                let active = free.iter().filter(|d| d.num != 1).count();
                assert!(
                    active <= usize::from(role.slots),
                    "{} {}: {active} > {}",
                    info.name,
                    role.name,
                    role.slots
                );
                let byte = b.base + (o.ap.offset as u64 % f) * u64::from(b.dtype.bytes());
                assert_eq!(byte % u64::from(b.dtype.bytes()), 0);
            }
        }
    }

    /// Written a batch at a time, a module is the bytes of printing it
    /// whole, in every format: kernels among the ops, kernels only, more
    /// kernels than a batch after the last op, a shape pool, an empty one.
    #[test]
    fn batches_print_as_the_whole_module() {
        let cases = [
            (BATCH_OPS * 2 + 17, 5, None, Arch::V2),
            (0, BATCH_OPS + 3, None, Arch::V3),
            (100, BATCH_OPS + 1, Some(7), Arch::V4),
            (BATCH_OPS, 0, Some(3), Arch::V2),
            (0, 0, None, Arch::V2),
        ];
        for (ops, kernels, distinct_shapes, arch) in cases {
            let opts = GenOptions {
                ops,
                seed: 5,
                arch,
                distinct_shapes,
                kernels,
            };
            let m = generate(&opts);
            for (format, whole) in [
                (TextFormat::Apir, apir_ir::print_module(&m)),
                (TextFormat::Mlir, print_generic_mlir(&m)),
                (TextFormat::MlirLight, print_light_mlir(&m)),
            ] {
                let mut out = Vec::new();
                write_generated(&opts, format, &mut out).unwrap();
                assert!(
                    out == whole.as_bytes(),
                    "{format:?}, {ops} ops, {kernels} kernels"
                );
            }
        }
    }

    #[test]
    fn generated_modules_verify_on_every_arch() {
        for arch in Arch::ALL {
            for seed in [0, 1, 42, 0xDEAD_BEEF] {
                let m = generate(&opts(arch, seed));
                if let Err(d) = verify(&m) {
                    panic!(
                        "{arch} seed {seed}: {:?}",
                        d.iter().map(|d| &d.message).collect::<Vec<_>>()
                    );
                }
                check_lowerable(&m);
                assert_eq!(m.top_ops().count(), 3005);
            }
        }
    }

    #[test]
    fn every_recipe_appears() {
        for arch in Arch::ALL {
            let m = generate(&opts(arch, 3));
            let mut names: HashSet<&str> = HashSet::new();
            for op in m.walk_ops() {
                names.insert(m.ops[op].kind.name());
            }
            for r in RECIPES {
                let available = IsaOp::from_name(r.op)
                    .unwrap()
                    .info()
                    .encoder(arch)
                    .is_some();
                assert_eq!(names.contains(r.op), available, "{} on {arch}", r.op);
            }
            assert!(names.contains("gpsimd.kernel"));
        }
    }

    #[test]
    fn same_seed_same_text_and_round_trip() {
        let a = print_module(&generate(&opts(Arch::V3, 9)));
        let b = print_module(&generate(&opts(Arch::V3, 9)));
        assert_eq!(a, b);
        let (parsed, _) = parse_str("gen.apir", &a, ParseOptions::default()).unwrap();
        verify(&parsed).unwrap();
        assert_eq!(print_module(&parsed), a);
    }

    #[test]
    fn different_seeds_differ() {
        let a = print_module(&generate(&opts(Arch::V2, 1)));
        let b = print_module(&generate(&opts(Arch::V2, 2)));
        assert_ne!(a, b);
    }

    #[test]
    fn distinct_shapes_bound_the_shapes_used() {
        let o = GenOptions {
            ops: 2000,
            seed: 5,
            arch: Arch::V2,
            distinct_shapes: Some(7),
            kernels: 0,
        };
        let m = generate(&o);
        verify(&m).unwrap();
        check_lowerable(&m);
        // Op kind, buffers, start partitions and dims repeat per shape.
        // (op name, per operand: buffer, start partition, dims)
        type Signature<'a> = (&'a str, Vec<(Buffer, u64, Vec<Dim>)>);
        let mut shapes: HashSet<Signature> = HashSet::new();
        let mut offsets: HashSet<i64> = HashSet::new();
        for op in m.top_ops() {
            let d = &m.ops[op];
            let operands = d
                .operands
                .iter()
                .map(|o| {
                    let f = o.ap.dims[0].step;
                    offsets.insert(o.ap.offset);
                    (o.buffer, (o.ap.offset / f) as u64, o.ap.dims.to_vec())
                })
                .collect();
            shapes.insert((d.kind.name(), operands));
        }
        assert_eq!(shapes.len(), 7);
        assert!(offsets.len() > 100, "offsets still vary");
        let pool = shape_pool(&mut Rng(1), 500);
        assert_eq!(pool.len(), 500);
        // Different K, different modules; same K, same module.
        let a = print_module(&generate(&GenOptions {
            distinct_shapes: Some(3),
            ..o.clone()
        }));
        assert_ne!(a, print_module(&m));
        assert_eq!(
            a,
            print_module(&generate(&GenOptions {
                distinct_shapes: Some(3),
                ..o
            }))
        );
    }

    #[test]
    fn kernels_have_equal_element_counts() {
        let o = GenOptions {
            ops: 10,
            seed: 2,
            arch: Arch::V4,
            distinct_shapes: None,
            kernels: 12,
        };
        let m = generate(&o);
        verify(&m).unwrap();
        let kernels: Vec<_> = m
            .top_ops()
            .filter(|&op| matches!(m.ops[op].kind, OpKind::Kernel { .. }))
            .collect();
        assert_eq!(kernels.len(), 12);
        for k in kernels {
            let OpKind::Kernel { body, .. } = m.ops[k].kind else {
                unreachable!()
            };
            let ops = &m.blocks[body].ops;
            assert_eq!(ops.len(), 2);
            let n: Vec<_> = ops
                .iter()
                .map(|&o| m.ops[o].operands[0].ap.elements())
                .collect();
            assert_eq!(n[0], n[1]);
        }
        // No ops at all still gives the kernels.
        let m = generate(&GenOptions {
            ops: 0,
            kernels: 2,
            ..o
        });
        assert_eq!(m.top_ops().count(), 2);
    }

    #[test]
    fn mlir_text_carries_every_operand() {
        let m = generate(&GenOptions {
            ops: 50,
            seed: 4,
            arch: Arch::V2,
            distinct_shapes: None,
            kernels: 1,
        });
        let text = print_generic_mlir(&m);
        assert!(text.starts_with("\"builtin.module\"() ({\n"));
        assert!(text.ends_with("}) {apir.arch = \"v2\"} : () -> ()\n"));
        let operands: usize = m.walk_ops().iter().map(|&o| m.ops[o].operands.len()).sum();
        assert_eq!(text.matches("_offset = ").count(), operands);
        assert!(text.contains("%sa = \"mem.sbuf\"() {partition = 0 : i64, byte = 0 : i64, shape = array<i64: 128, 8192>, dtype = \"f32\"} : () -> i64\n"));
    }

    /// The light form: one line per op, every operand's numbers in its one
    /// attribute, no buffers.
    #[test]
    fn light_mlir_carries_every_number() {
        let m = generate(&GenOptions {
            ops: 50,
            seed: 4,
            arch: Arch::V2,
            distinct_shapes: None,
            kernels: 0,
        });
        let text = print_light_mlir(&m);
        assert!(text.starts_with("\"builtin.module\"() ({\n"));
        assert!(text.ends_with("}) {apir.arch = \"v2\"} : () -> ()\n"));
        assert_eq!(text.lines().count(), 52);
        assert!(!text.contains('%'));
        let op = m.top_ops().next().unwrap();
        let data = &m.ops[op];
        let mut want = format!("  \"{}\"() {{ap = array<i64: ", data.kind.name());
        let mut nums = Vec::new();
        for o in &data.operands {
            nums.push(o.buffer.as_u32().to_string());
            nums.push(o.ap.dims.len().to_string());
            for d in &o.ap.dims {
                nums.push(d.step.to_string());
                nums.push(d.num.to_string());
            }
            nums.push(o.ap.offset.to_string());
        }
        want.push_str(&nums.join(", "));
        want.push_str(">} : () -> ()\n");
        assert_eq!(text.lines().nth(1).map(|l| format!("{l}\n")), Some(want));
    }
}
