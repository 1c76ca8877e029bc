//! An optimality oracle for `schedule-staging`: a brute-force search over
//! the staging plans of small kernels, to measure how close the planner's
//! plans come to the best plan of a large, explicit plan space.
//!
//! What it does, per kernel of a fixed suite (contiguous, reversed, strided,
//! transposed, broadcast, in-place, tiny, multi-access and multi-kernel
//! modules, several dtypes and `cycles_per_element` values):
//! - enumerates every accessor choice per tensor (indexed, or staged:
//!   `stream` for a forward contiguous sweep, `tcm` otherwise and for the
//!   accesses of a written tensor with several accesses, which share one
//!   group), and per staging group:
//!   - a buffer count of 1 to 4 and a tile length (`tile_grid`): per
//!     buffer count `n`, a buffer may take a share of the budget of a
//!     multiple of 512 bytes split into `n` buffers, or the budget split
//!     evenly into `s` buffers for every `s` from `n` to 4 per group of the
//!     kernel, each size as it is and rounded down to 64 bytes (the buffer
//!     alignment); per size, the largest tile that fits it (at most the
//!     whole iteration space), the balanced tile of the same tile count and
//!     that tile rounded up to a multiple of 16 iterations where it still
//!     fits. The buffers of all groups together stay within the budget
//!     (16 KiB);
//!   - per direction (its loads, its flushes: an in-place group chooses
//!     them apart) how its copies move (`specs`): all by `dma`, all by
//!     `vec`, all by `c` where C_MEMCPY beats VEC_MEMCPY on some copy (never
//!     under the default parameters), or by `dma` with the copies of at most
//!     `s` bytes by `vec`, for `s` every power of two from 64 B below the
//!     largest copy (each split of the copies by size, smallest by `vec`
//!     first, up to that resolution); and each `dma` spec with and without
//!     its edge tile by `vec` where VEC_MEMCPY is faster for that copy: the
//!     first tile's loads (the core waits for them anyway) and the last
//!     tile's flushes (they run after the last compute). So each group
//!     fills by `vec` or not and drains by `vec` or not, independently.
//!     Specs that move every copy the same way count once; more than one
//!     buffer only when some copy is on a ring (the core's own copies gain
//!     nothing from more buffers).
//!
//!   With several groups that issue SDMA loads, the M2S ring is fed either
//!   greedily or strictly in the order the tiles are needed;
//! - writes each candidate's steps with its own schedule builder: loads
//!   issued as soon as their buffer is free (consumed, and flushed for a
//!   written group, and for an in-place group after every earlier tile that
//!   wrote bytes it reads was flushed; the builder knows the copies' times,
//!   so a load that waits for a flush is issued inside the compute, when
//!   that flush has landed), waits right before a tile's first compute
//!   (one wait per ring: the rings run in order), flushes right after its
//!   last compute (SDMA flushes, then the loads the tile's end frees, then
//!   core flushes, so the rings start before the core copies), every flush
//!   waited for before the end;
//! - times each candidate with its own copy of the cost model (the same
//!   arithmetic as the simulator, on the steps it builds), depth-first over
//!   the groups, pruned by lower bounds that hold for every plan the
//!   builder makes: each lane's busy time; the first tiles' loads, the
//!   computes with the core copies between them and the last tiles'
//!   flushes, in sequence (counting the least the groups not chosen yet
//!   add); each group's own pipeline (`pipeline`: its loads and its flushes
//!   in tile order on their rings, a tile computed after its loads, a
//!   buffer refilled after it was consumed); and, for a full candidate, the
//!   rings' deadlines (`ring_deadlines`: the SDMA loads of the tiles that
//!   start by an iteration, then the computes from there on; the computes
//!   up to an iteration, then the SDMA flushes of the tiles that end from
//!   there on). Subsets with four groups or more start from a candidate a
//!   greedy descent finds (`Search::seed`). Per accessor choice, the
//!   fastest candidate is printed as IR text into its kernel, parsed,
//!   proved by `check-coherency` and simulated by
//!   `apir_passes::staging::sim::Schedule::run`, whose makespan must match
//!   the search's own (to 1e-6 relative); it replaces the best only if the
//!   proof passes. The all-index plan is the first candidate.
//!
//! The space contains every plan the planner makes on the suite: its
//! accessors, buffer counts, tile lengths and the method of each copy are
//! one of the oracle's candidates, which the oracle's builder times no
//! slower (`planner_plans_lie_in_the_oracle_space`). Plan shapes outside
//! the space, probed on the suite, gain little: a second edge tile by
//! `vec` (the first two tiles' loads, the last two tiles' flushes) at most
//! 0.8% (one kernel), 5 to 8 buffers per group at most 0.2%, budget shares
//! in 128-byte steps at most 0.5%.
//!
//! Groups, tiles, layouts and copies are derived here from the contract in
//! docs/staging.md (and the plan op table of `apir_ir::staging`), from the
//! kernel text this test writes; nothing of `schedule_staging` or
//! `apir_passes::staging::layout` is used. The planner is run as a pass
//! (`schedule-staging`, default options) through `Compilation`; only its
//! output is read.
//!
//! Tests: `oracle_plans_are_proved_and_bounded` (every oracle plan is
//! proved, no candidate was rejected, the search's timing matches the
//! simulator's, every makespan is at least the kernel's lower bound
//! (`apir_passes::staging::bound`), and the planner's plans are proved
//! too); `planner_within_5_percent_of_oracle` (the goal: planner makespan
//! <= 1.05 x oracle makespan for every kernel, reporting every miss);
//! `planner_plans_lie_in_the_oracle_space` (the comparison is meaningful:
//! the planner's plans are candidates of the oracle, so no planner plan
//! beats the oracle's); `bound_is_sound_and_pruning_loses_nothing` (on a
//! few kernels, times every candidate within the budget: none is below its
//! bound, and the best is the pruned search's);
//! `oracle_plans_without_a_wait_are_rejected` (the proof is not a rubber
//! stamp: each winning plan with one wait removed is rejected);
//! `oracle_table` prints the comparison table, the oracle's winning
//! configurations (with the planner's, and where the planner's lies in the
//! oracle's space) and the search sizes when `APIR_ORACLE_TABLE=1`
//! (`tools/bench-plans.sh`), and both winning plans per kernel too with
//! `APIR_ORACLE_PLANS=1`.

use apir_compiler::Compilation;
use apir_ir::staging::{Kernel as IrKernel, KernelPlan, SimParams};
use apir_passes::staging::sim::Schedule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

// ---------------------------------------------------------------------------
// The kernel suite
// ---------------------------------------------------------------------------

/// The dtype table (ir/src/target/dtype.rs): name and bytes per element.
fn dtype_bytes(d: &str) -> u64 {
    match d {
        "f32" | "i32" | "u32" => 4,
        "bf16" | "f16" | "i16" | "u16" => 2,
        "u8" | "i8" | "f8e4m3" | "f8e5m2" => 1,
        _ => panic!("unknown dtype {d}"),
    }
}

/// A `mem.hbm` buffer.
#[derive(Clone, Debug)]
struct Buf {
    name: &'static str,
    addr: u64,
    shape: &'static str,
    dtype: &'static str,
}

impl Buf {
    fn elems(&self) -> u64 {
        self.shape
            .split('x')
            .map(|s| s.parse::<u64>().expect("shape"))
            .product()
    }
    fn eb(&self) -> u64 {
        dtype_bytes(self.dtype)
    }
    fn end(&self) -> u64 {
        self.addr + self.elems() * self.eb()
    }
}

/// A `gpsimd.read` / `gpsimd.write`: dims `(step, count)`, outermost first.
#[derive(Clone, Debug)]
struct Acc {
    buf: &'static str,
    write: bool,
    dims: Vec<(i64, u64)>,
    offset: i64,
}

fn rd(buf: &'static str, dims: &[(i64, u64)]) -> Acc {
    Acc {
        buf,
        write: false,
        dims: dims.to_vec(),
        offset: 0,
    }
}

fn wr(buf: &'static str, dims: &[(i64, u64)]) -> Acc {
    Acc {
        buf,
        write: true,
        dims: dims.to_vec(),
        offset: 0,
    }
}

impl Acc {
    fn off(mut self, offset: i64) -> Acc {
        self.offset = offset;
        self
    }

    fn text(&self) -> String {
        let op = if self.write {
            "gpsimd.write"
        } else {
            "gpsimd.read"
        };
        let pairs: Vec<String> = self
            .dims
            .iter()
            .map(|(s, n)| format!("[{s}, {n}]"))
            .collect();
        let mut t = format!("{op} %{}[{}]", self.buf, pairs.join(", "));
        if self.offset > 0 {
            write!(t, " + {}", self.offset).unwrap();
        } else if self.offset < 0 {
            write!(t, " - {}", -self.offset).unwrap();
        }
        t
    }
}

#[derive(Clone, Debug)]
struct KernelDef {
    name: &'static str,
    core: u32,
    cpe: u64,
    accs: Vec<Acc>,
}

fn kern(name: &'static str, core: u32, cpe: u64, accs: Vec<Acc>) -> KernelDef {
    KernelDef {
        name,
        core,
        cpe,
        accs,
    }
}

#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    bufs: Vec<Buf>,
    kernels: Vec<KernelDef>,
}

fn b(name: &'static str, addr: u64, shape: &'static str, dtype: &'static str) -> Buf {
    Buf {
        name,
        addr,
        shape,
        dtype,
    }
}

const A0: u64 = 0x4000_0000;
const A1: u64 = 0x4010_0000;
const A2: u64 = 0x4020_0000;
const A3: u64 = 0x4030_0000;
const A4: u64 = 0x4040_0000;

/// One kernel on core 0 over `bufs`.
fn case1(name: &'static str, cpe: u64, bufs: Vec<Buf>, accs: Vec<Acc>) -> Case {
    Case {
        name,
        bufs,
        kernels: vec![kern(name, 0, cpe, accs)],
    }
}

fn suite() -> Vec<Case> {
    vec![
        case1(
            "contig_f32_c2",
            2,
            vec![b("in", A0, "4096", "f32"), b("out", A1, "4096", "f32")],
            vec![rd("in", &[(1, 4096)]), wr("out", &[(1, 4096)])],
        ),
        case1(
            "contig_f32_c1",
            1,
            vec![b("in", A0, "8192", "f32"), b("out", A1, "8192", "f32")],
            vec![rd("in", &[(1, 8192)]), wr("out", &[(1, 8192)])],
        ),
        case1(
            "contig_bf16_c8",
            8,
            vec![b("in", A0, "8192", "bf16"), b("out", A1, "8192", "bf16")],
            vec![rd("in", &[(1, 8192)]), wr("out", &[(1, 8192)])],
        ),
        case1(
            "contig_u8_c64",
            64,
            vec![b("in", A0, "16384", "u8"), b("out", A1, "16384", "u8")],
            vec![rd("in", &[(1, 16384)]), wr("out", &[(1, 16384)])],
        ),
        case1(
            "contig_f16_256_c2",
            2,
            vec![b("in", A0, "256", "f16"), b("out", A1, "256", "f16")],
            vec![rd("in", &[(1, 256)]), wr("out", &[(1, 256)])],
        ),
        case1(
            "reversed_f32_c2",
            2,
            vec![b("in", A0, "4096", "f32"), b("out", A1, "4096", "f32")],
            vec![rd("in", &[(-1, 4096)]).off(4095), wr("out", &[(1, 4096)])],
        ),
        case1(
            "reversed_both_i8_c1",
            1,
            vec![b("in", A0, "8192", "i8"), b("out", A1, "8192", "i8")],
            vec![
                rd("in", &[(-1, 8192)]).off(8191),
                wr("out", &[(-1, 8192)]).off(8191),
            ],
        ),
        // Every other 512-byte row of a 64x128 f32 tensor.
        case1(
            "strided_rows_f32_c2",
            2,
            vec![b("src", A0, "64x128", "f32"), b("dst", A1, "4096", "f32")],
            vec![rd("src", &[(256, 32), (1, 128)]), wr("dst", &[(1, 4096)])],
        ),
        // 512-byte rows of u8 at a 1 KiB pitch.
        case1(
            "strided_rows_u8_c8",
            8,
            vec![b("src", A0, "16x1024", "u8"), b("dst", A1, "8192", "u8")],
            vec![rd("src", &[(1024, 16), (1, 512)]), wr("dst", &[(1, 8192)])],
        ),
        // A contiguous read scattered into every other 512-byte row.
        case1(
            "strided_write_f32_c2",
            2,
            vec![b("in", A0, "4096", "f32"), b("out", A1, "64x128", "f32")],
            vec![rd("in", &[(1, 4096)]), wr("out", &[(256, 32), (1, 128)])],
        ),
        case1(
            "transposed_64_f32_c4",
            4,
            vec![b("a", A0, "64x64", "f32"), b("t", A1, "4096", "f32")],
            vec![rd("a", &[(1, 64), (64, 64)]), wr("t", &[(1, 4096)])],
        ),
        case1(
            "transposed_128_bf16_c2",
            2,
            vec![b("a", A0, "128x128", "bf16"), b("t", A1, "16384", "bf16")],
            vec![rd("a", &[(1, 128), (128, 128)]), wr("t", &[(1, 16384)])],
        ),
        case1(
            "transposed_write_f32_c8",
            8,
            vec![b("a", A0, "4096", "f32"), b("t", A1, "64x64", "f32")],
            vec![rd("a", &[(1, 4096)]), wr("t", &[(1, 64), (64, 64)])],
        ),
        // A bias row broadcast over 32 rows (step 0).
        case1(
            "bias_f32_c2",
            2,
            vec![
                b("x", A0, "32x64", "f32"),
                b("bias", A1, "64", "f32"),
                b("y", A2, "32x64", "f32"),
            ],
            vec![
                rd("x", &[(1, 2048)]),
                rd("bias", &[(0, 32), (1, 64)]),
                wr("y", &[(1, 2048)]),
            ],
        ),
        // One scalar broadcast to every iteration.
        case1(
            "scalar_f16_c1",
            1,
            vec![
                b("s", A0, "1", "f16"),
                b("x", A1, "4096", "f16"),
                b("y", A2, "4096", "f16"),
            ],
            vec![
                rd("s", &[(0, 4096)]),
                rd("x", &[(1, 4096)]),
                wr("y", &[(1, 4096)]),
            ],
        ),
        case1(
            "inplace_f32_c2",
            2,
            vec![b("x", A0, "8192", "f32")],
            vec![rd("x", &[(1, 8192)]), wr("x", &[(1, 8192)])],
        ),
        case1(
            "inplace_bf16_c1",
            1,
            vec![b("x", A0, "8192", "bf16")],
            vec![rd("x", &[(1, 8192)]), wr("x", &[(1, 8192)])],
        ),
        case1(
            "inplace_u8_c64",
            64,
            vec![b("x", A0, "4096", "u8")],
            vec![rd("x", &[(1, 4096)]), wr("x", &[(1, 4096)])],
        ),
        // Iteration e reads x[e] and writes x[N-1-e]: later tiles read what
        // earlier ones wrote.
        case1(
            "inplace_reversed_f32_c2",
            2,
            vec![b("x", A0, "2048", "f32")],
            vec![rd("x", &[(1, 2048)]), wr("x", &[(-1, 2048)]).off(2047)],
        ),
        // In place through two names of the same bytes.
        case1(
            "inplace_two_names_f32_c2",
            2,
            vec![b("x", A0, "4096", "f32"), b("xa", A0, "4096", "f32")],
            vec![rd("x", &[(1, 4096)]), wr("xa", &[(1, 4096)])],
        ),
        // In place, the same walk spelt two ways.
        case1(
            "inplace_two_spellings_f32_c2",
            2,
            vec![b("x", A0, "4096", "f32")],
            vec![rd("x", &[(1, 4096)]), wr("x", &[(64, 64), (1, 64)])],
        ),
        // Two buffers 64 bytes apart: iteration e writes the element that
        // iteration e + 16 reads.
        case1(
            "overlap_shift_f32_c2",
            2,
            vec![b("a", A0, "2048", "f32"), b("b", A0 + 64, "2048", "f32")],
            vec![rd("a", &[(1, 2048)]), wr("b", &[(1, 2048)])],
        ),
        case1(
            "tiny_f32_c1",
            1,
            vec![b("in", A0, "8", "f32"), b("out", A1, "8", "f32")],
            vec![rd("in", &[(1, 8)]), wr("out", &[(1, 8)])],
        ),
        case1(
            "tiny_inplace_u8_c2",
            2,
            vec![b("x", A0, "3", "u8")],
            vec![rd("x", &[(1, 3)]), wr("x", &[(1, 3)])],
        ),
        case1(
            "mixed_u8_to_f32_c4",
            4,
            vec![b("in", A0, "4096", "u8"), b("out", A1, "4096", "f32")],
            vec![rd("in", &[(1, 4096)]), wr("out", &[(1, 4096)])],
        ),
        // Every 64th f32 of a table: staging would copy 4 bytes a copy.
        case1(
            "gather_f32_c1",
            1,
            vec![b("table", A0, "16384", "f32"), b("out", A1, "256", "f32")],
            vec![rd("table", &[(64, 256)]), wr("out", &[(1, 256)])],
        ),
        case1(
            "two_reads_one_write_f32_c2",
            2,
            vec![
                b("a", A0, "2048", "f32"),
                b("b", A1, "2048", "f32"),
                b("c", A2, "2048", "f32"),
            ],
            vec![
                rd("a", &[(1, 2048)]),
                rd("b", &[(1, 2048)]),
                wr("c", &[(1, 2048)]),
            ],
        ),
        case1(
            "three_reads_one_write_bf16_c8",
            8,
            vec![
                b("a", A0, "1024", "bf16"),
                b("b", A1, "1024", "bf16"),
                b("c", A2, "1024", "bf16"),
                b("d", A3, "1024", "bf16"),
            ],
            vec![
                rd("a", &[(1, 1024)]),
                rd("b", &[(1, 1024)]),
                rd("c", &[(1, 1024)]),
                wr("d", &[(1, 1024)]),
            ],
        ),
        // One tensor read forward and backward (two read groups of one
        // tensor).
        case1(
            "same_tensor_two_reads_f32_c2",
            2,
            vec![b("a", A0, "2048", "f32"), b("c", A1, "2048", "f32")],
            vec![
                rd("a", &[(1, 2048)]),
                rd("a", &[(-1, 2048)]).off(2047),
                wr("c", &[(1, 2048)]),
            ],
        ),
        // Two kernels on one core; the second reads every other element of
        // the first's output.
        Case {
            name: "two_kernels_one_core",
            bufs: vec![
                b("a", A0, "2048", "f32"),
                b("b", A1, "2048", "f32"),
                b("e", A2, "1024", "f32"),
            ],
            kernels: vec![
                kern(
                    "first",
                    0,
                    2,
                    vec![rd("a", &[(1, 2048)]), wr("b", &[(1, 2048)])],
                ),
                kern(
                    "second",
                    0,
                    1,
                    vec![rd("b", &[(2, 1024)]), wr("e", &[(1, 1024)])],
                ),
            ],
        },
        // Two kernels on two cores over disjoint tensors.
        Case {
            name: "two_kernels_two_cores",
            bufs: vec![
                b("a", A0, "4096", "f32"),
                b("b", A1, "4096", "f32"),
                b("c", A2, "4096", "bf16"),
                b("d", A3, "4096", "bf16"),
                b("unused", A4, "16", "f32"),
            ],
            kernels: vec![
                kern(
                    "left",
                    0,
                    2,
                    vec![rd("a", &[(1, 4096)]), wr("b", &[(1, 4096)])],
                ),
                kern(
                    "right",
                    1,
                    8,
                    vec![rd("c", &[(1, 4096)]), wr("d", &[(1, 4096)])],
                ),
            ],
        },
    ]
}

impl Case {
    fn buf(&self, name: &str) -> (usize, &Buf) {
        self.bufs
            .iter()
            .enumerate()
            .find(|(_, b)| b.name == name)
            .unwrap_or_else(|| panic!("{}: no buffer %{name}", self.name))
    }

    /// The module text, with `plans[k]` (plan op lines, unindented) in the
    /// body of kernel `k` after its accesses.
    fn text(&self, plans: &[Option<&str>]) -> String {
        let mut t = format!("module @{} attributes {{arch = \"v2\"}} {{\n", self.name);
        for b in &self.bufs {
            writeln!(
                t,
                "  %{} = mem.hbm {{addr = {:#x}}} : tensor<{}x{}>",
                b.name, b.addr, b.shape, b.dtype
            )
            .unwrap();
        }
        for (ki, k) in self.kernels.iter().enumerate() {
            writeln!(
                t,
                "  gpsimd.kernel @{} {{core = {}, cycles_per_element = {}}} {{",
                k.name, k.core, k.cpe
            )
            .unwrap();
            for a in &k.accs {
                writeln!(t, "    {}", a.text()).unwrap();
            }
            if let Some(Some(p)) = plans.get(ki) {
                for line in p.lines() {
                    writeln!(t, "    {line}").unwrap();
                }
            }
            t.push_str("  }\n");
        }
        t.push_str("}\n");
        t
    }
}

// ---------------------------------------------------------------------------
// What the test derives from a kernel (docs/staging.md)
// ---------------------------------------------------------------------------

/// The flat element positions an access visits, in iteration order
/// (innermost dim fastest).
fn ap_elements(dims: &[(i64, u64)], offset: i64) -> Vec<i64> {
    let mut out = vec![offset];
    for &(s, n) in dims {
        let mut next = Vec::with_capacity(out.len() * n as usize);
        for &base in &out {
            for i in 0..n as i64 {
                next.push(base + i * s);
            }
        }
        out = next;
    }
    out
}

struct Facts {
    /// Iterations.
    e: u64,
    /// Per access, the HBM byte address of the element each iteration visits.
    addrs: Vec<Vec<u64>>,
    /// Per access, bytes per element.
    eb: Vec<u64>,
    write: Vec<bool>,
    /// Per access, its tensor (connected component of HBM overlap among the
    /// buffers the kernel accesses).
    tensor: Vec<usize>,
    tensors: usize,
    /// Per access, whether it sweeps storage forward and contiguously.
    contiguous: Vec<bool>,
    /// Per access of two dims one of which steps one element, its walk
    /// (tiles' runs without sorting their addresses).
    walks: Vec<Option<Walk2>>,
    /// Core cycles per iteration.
    cpe: u64,
}

/// An access of two dims, `(so, co)` outer and `(si, ci)` inner, one of
/// which steps one element: iteration `i * ci + j` visits element
/// `offset + i * so + j * si` of the buffer at `base` (`eb` bytes an
/// element).
#[derive(Clone, Copy, Debug)]
struct Walk2 {
    base: u64,
    eb: u64,
    offset: i64,
    so: i64,
    si: i64,
    ci: u64,
}

impl Walk2 {
    fn of(a: &Acc, buf: &Buf) -> Option<Walk2> {
        let [(so, _), (si, ci)] = a.dims[..] else {
            return None;
        };
        (so.abs() == 1 || si.abs() == 1).then_some(Walk2 {
            base: buf.addr,
            eb: buf.eb(),
            offset: a.offset,
            so,
            si,
            ci,
        })
    }

    /// Appends the byte runs iterations `[e0, e1)` touch (not coalesced):
    /// each row's (its inner iterations) when the inner dim steps one
    /// element, else each column's (the iterations of one inner index, in
    /// order of the outer one).
    fn runs(&self, e0: u64, e1: u64, out: &mut Vec<(u64, u64)>) {
        let mut push = |a: i64, b: i64| {
            let (lo, hi) = (a.min(b) as u64, a.max(b) as u64);
            out.push((self.base + lo * self.eb, self.base + (hi + 1) * self.eb));
        };
        if self.si.abs() == 1 {
            for i in e0 / self.ci..=(e1 - 1) / self.ci {
                let j0 = e0.max(i * self.ci) - i * self.ci;
                let j1 = e1.min((i + 1) * self.ci) - i * self.ci;
                let at = |j: u64| self.offset + i as i64 * self.so + j as i64 * self.si;
                push(at(j0), at(j1 - 1));
            }
        } else {
            for j in 0..self.ci {
                // The outer indices i with e0 <= i * ci + j < e1.
                let lo = e0.saturating_sub(j).div_ceil(self.ci);
                if e1 <= j {
                    break;
                }
                let hi = (e1 - 1 - j) / self.ci;
                if lo > hi {
                    continue;
                }
                let at = |i: u64| self.offset + i as i64 * self.so + j as i64 * self.si;
                push(at(lo), at(hi));
            }
        }
    }
}

fn facts(case: &Case, k: &KernelDef) -> Facts {
    let mut addrs = Vec::new();
    let mut eb = Vec::new();
    let mut bufs = Vec::new();
    let mut walks = Vec::new();
    for a in &k.accs {
        let (bi, buf) = case.buf(a.buf);
        walks.push(Walk2::of(a, buf));
        let v: Vec<u64> = ap_elements(&a.dims, a.offset)
            .into_iter()
            .map(|el| {
                assert!(
                    el >= 0 && (el as u64) < buf.elems(),
                    "{}: access outside %{}",
                    case.name,
                    buf.name
                );
                buf.addr + el as u64 * buf.eb()
            })
            .collect();
        addrs.push(v);
        eb.push(buf.eb());
        bufs.push(bi);
    }
    let e = addrs[0].len() as u64;
    assert!(
        addrs.iter().all(|v| v.len() as u64 == e),
        "{}: element counts differ",
        case.name
    );
    // Tensors: union-find over the accessed buffers.
    let mut used: Vec<usize> = bufs.clone();
    used.sort_unstable();
    used.dedup();
    let mut parent: Vec<usize> = (0..used.len()).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        p[x] = r;
        r
    }
    for i in 0..used.len() {
        for j in i + 1..used.len() {
            let (x, y) = (&case.bufs[used[i]], &case.bufs[used[j]]);
            if x.addr < y.end() && y.addr < x.end() {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    let mut label: BTreeMap<usize, usize> = BTreeMap::new();
    let tensor: Vec<usize> = bufs
        .iter()
        .map(|bi| {
            let u = used.binary_search(bi).unwrap();
            let root = find(&mut parent, u);
            let n = label.len();
            *label.entry(root).or_insert(n)
        })
        .collect();
    let contiguous = addrs
        .iter()
        .zip(&eb)
        .map(|(v, &w)| v.windows(2).all(|p| p[1] == p[0] + w))
        .collect();
    let write: Vec<bool> = k.accs.iter().map(|a| a.write).collect();
    // The suite's kernels are valid: no byte written twice, by one access or
    // by two.
    let mut written: Vec<u64> = Vec::new();
    for (i, v) in addrs.iter().enumerate() {
        if write[i] {
            for &x in v {
                for byte in 0..eb[i] {
                    written.push(x + byte);
                }
            }
        }
    }
    let n = written.len();
    written.sort_unstable();
    written.dedup();
    assert_eq!(n, written.len(), "{}: a byte is written twice", case.name);
    Facts {
        e,
        addrs,
        eb,
        write,
        tensor,
        tensors: label.len(),
        contiguous,
        walks,
        cpe: k.cpe,
    }
}

const INDEX: u8 = 0;
const STREAM: u8 = 1;
const TCM: u8 = 2;
const ACCESSOR_NAMES: [&str; 3] = ["index", "stream", "tcm"];

/// A staging group: the accesses that share dataram buffers, owner first.
#[derive(Clone, Debug)]
struct Group {
    accs: Vec<usize>,
    /// Bytes per iteration: element sizes, counting once accesses that walk
    /// the same bytes in the same order with the same element size.
    bpi: u64,
    reads: bool,
    writes: bool,
}

/// The accessor of each access and the groups, for the tensors in `staged`
/// (a bit per tensor).
fn accessors_and_groups(f: &Facts, staged: u32) -> (Vec<u8>, Vec<Group>) {
    let n = f.addrs.len();
    let members = |t: usize| (0..n).filter(move |&i| f.tensor[i] == t);
    let mut acc = vec![INDEX; n];
    let mut groups: Vec<Group> = Vec::new();
    let mut shared: Vec<Option<usize>> = vec![None; f.tensors];
    for (i, &t) in f.tensor.iter().enumerate() {
        if staged & (1 << t) == 0 {
            continue;
        }
        let written = members(t).any(|j| f.write[j]);
        let several = members(t).count() > 1;
        if written && several {
            // Every access of a written tensor with several accesses is
            // `tcm`, and they share one group (a buffered writer is
            // exclusive; a tcm write excludes every other accessor).
            acc[i] = TCM;
            match shared[t] {
                Some(g) => groups[g].accs.push(i),
                None => {
                    shared[t] = Some(groups.len());
                    groups.push(Group {
                        accs: vec![i],
                        bpi: 0,
                        reads: false,
                        writes: false,
                    });
                }
            }
        } else {
            acc[i] = if f.contiguous[i] { STREAM } else { TCM };
            groups.push(Group {
                accs: vec![i],
                bpi: 0,
                reads: false,
                writes: false,
            });
        }
    }
    for g in &mut groups {
        let mut bpi = 0;
        for (k, &j) in g.accs.iter().enumerate() {
            let same = g.accs[..k]
                .iter()
                .any(|&p| f.eb[p] == f.eb[j] && f.addrs[p] == f.addrs[j]);
            if !same {
                bpi += f.eb[j];
            }
        }
        g.bpi = bpi;
        g.reads = g.accs.iter().any(|&j| !f.write[j]);
        g.writes = g.accs.iter().any(|&j| f.write[j]);
    }
    (acc, groups)
}

// ---------------------------------------------------------------------------
// Tiles, layouts and copies
// ---------------------------------------------------------------------------

/// Sorts `[start, end)` runs and merges those that overlap or touch.
fn coalesce(v: &mut Vec<(u64, u64)>) {
    v.sort_unstable();
    let mut w = 0usize;
    for i in 0..v.len() {
        if w > 0 && v[i].0 <= v[w - 1].1 {
            v[w - 1].1 = v[w - 1].1.max(v[i].1);
        } else {
            v[w] = v[i];
            w += 1;
        }
    }
    v.truncate(w);
}

/// The byte runs the elements at `addrs` (each `eb` bytes) touch, appended
/// to `out` (not coalesced).
fn push_runs(addrs: &[u64], eb: u64, out: &mut Vec<(u64, u64)>) {
    let forward = addrs.windows(2).all(|p| p[1] == p[0] + eb);
    if forward {
        out.push((addrs[0], addrs[addrs.len() - 1] + eb));
        return;
    }
    let backward = addrs.windows(2).all(|p| p[0] == p[1] + eb);
    if backward {
        out.push((addrs[addrs.len() - 1], addrs[0] + eb));
        return;
    }
    let mut starts: Vec<u64> = addrs.to_vec();
    starts.sort_unstable();
    starts.dedup();
    let mut cur = (starts[0], starts[0] + eb);
    for &s in &starts[1..] {
        if s <= cur.1 {
            cur.1 = cur.1.max(s + eb);
        } else {
            out.push(cur);
            cur = (s, s + eb);
        }
    }
    out.push(cur);
}

/// One copy of a tile: HBM address, offset in the buffer, bytes.
#[derive(Clone, Copy, Debug)]
struct Cp {
    hbm: u64,
    off: u64,
    bytes: u64,
}

#[derive(Clone, Debug, Default)]
struct Tile {
    loads: Vec<Cp>,
    flushes: Vec<Cp>,
    /// Earlier tiles that write bytes this tile reads (its loads come after
    /// their flushes).
    raw: Vec<usize>,
    /// Per load spec of the geometry (`Geo::load_specs`), the time the
    /// loads take on their ring (SDMA copies) and on the core (core
    /// copies); per flush spec, the flushes'.
    load: Vec<(f64, f64)>,
    flush: Vec<(f64, f64)>,
}

/// The tiles of one group for one tile length, and the distinct ways to
/// move each direction's copies.
struct Geo {
    t_len: u64,
    tiles: Vec<Tile>,
    load_specs: Vec<Spec>,
    flush_specs: Vec<Spec>,
    /// Per spec: whether it puts any copy on a ring.
    load_async: Vec<bool>,
    flush_async: Vec<bool>,
}

const MAX_COPY: u64 = 65536;

fn split(run: (u64, u64), off: u64, out: &mut Vec<Cp>) {
    let mut at = run.0;
    while at < run.1 {
        let bytes = (run.1 - at).min(MAX_COPY);
        out.push(Cp {
            hbm: at,
            off: off + (at - run.0),
            bytes,
        });
        at += bytes;
    }
}

fn geometry(f: &Facts, g: &Group, t_len: u64, p: &SimParams) -> Geo {
    let ntiles = f.e.div_ceil(t_len) as usize;
    let mut tiles = Vec::with_capacity(ntiles);
    let mut reads: Vec<(u64, u64)> = Vec::new();
    let mut writes: Vec<(u64, u64)> = Vec::new();
    let mut all_writes: Vec<(u64, u64, usize)> = Vec::new();
    let mut all_reads: Vec<(u64, u64, usize)> = Vec::new();
    for t in 0..ntiles {
        let e0 = t as u64 * t_len;
        let e1 = (e0 + t_len).min(f.e);
        reads.clear();
        writes.clear();
        for &a in &g.accs {
            let out = if f.write[a] { &mut writes } else { &mut reads };
            match &f.walks[a] {
                Some(w) => w.runs(e0, e1, out),
                None => push_runs(&f.addrs[a][e0 as usize..e1 as usize], f.eb[a], out),
            }
        }
        coalesce(&mut reads);
        coalesce(&mut writes);
        let mut union: Vec<(u64, u64)> = reads.iter().chain(&writes).copied().collect();
        coalesce(&mut union);
        let mut offsets = Vec::with_capacity(union.len());
        let mut at = 0u64;
        for r in &union {
            offsets.push(at);
            at += r.1 - r.0;
        }
        assert!(
            at <= t_len * g.bpi,
            "a tile's layout ({at} bytes) exceeds its buffer"
        );
        let place = |r: (u64, u64)| {
            let i = union.partition_point(|u| u.0 <= r.0) - 1;
            assert!(r.1 <= union[i].1);
            offsets[i] + (r.0 - union[i].0)
        };
        let mut tile = Tile::default();
        for &r in &reads {
            split(r, place(r), &mut tile.loads);
            all_reads.push((r.0, r.1, t));
        }
        for &r in &writes {
            split(r, place(r), &mut tile.flushes);
            all_writes.push((r.0, r.1, t));
        }
        tiles.push(tile);
    }
    let (load_specs, load_async) = specs(p, &mut tiles, M2S);
    let (flush_specs, flush_async) = specs(p, &mut tiles, S2M);
    // Read after write across tiles of the group. Write runs never overlap
    // (no byte is written twice), so sorted by start they are sorted by end.
    all_writes.sort_unstable();
    for &(s, e, j) in &all_reads {
        let from = all_writes.partition_point(|w| w.1 <= s);
        for w in all_writes[from..].iter().take_while(|w| w.0 < e) {
            if w.2 < j && !tiles[j].raw.contains(&w.2) {
                tiles[j].raw.push(w.2);
            }
        }
    }
    Geo {
        t_len,
        tiles,
        load_specs,
        flush_specs,
        load_async,
        flush_async,
    }
}

// ---------------------------------------------------------------------------
// The cost model (docs/staging.md; the same arithmetic as the simulator)
// ---------------------------------------------------------------------------

const DMA: usize = 0;
const VEC: usize = 1;
const CMC: usize = 2;
const METHOD_NAMES: [&str; 3] = ["dma", "vec", "c"];

/// How one direction's copies (a group's loads, or its flushes) are moved:
/// every copy by `base`, except in an SDMA group the copies of at most
/// `small` bytes, and with `edge` the copies of the edge tile (the first
/// tile's loads, which the core waits for anyway; the last tile's
/// flushes, after the last compute) that VEC_MEMCPY moves faster than
/// SDMA, which go by VEC_MEMCPY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spec {
    base: usize,
    small: u64,
    edge: bool,
}

impl Spec {
    const fn all(base: usize) -> Spec {
        Spec {
            base,
            small: 0,
            edge: false,
        }
    }

    /// The method of a copy of `bytes` of an edge tile or another.
    fn method(&self, p: &SimParams, bytes: u64, edge_tile: bool) -> usize {
        if self.base != DMA {
            return self.base;
        }
        let small = bytes <= self.small;
        let edge = self.edge && edge_tile && copy_ns(p, VEC, bytes) < copy_ns(p, DMA, bytes);
        if small || edge {
            VEC
        } else {
            DMA
        }
    }

    fn name(&self) -> String {
        let mut s = METHOD_NAMES[self.base].to_string();
        let mut by_vec = Vec::new();
        if self.small > 0 {
            by_vec.push(format!("<= {} B", self.small));
        }
        if self.edge {
            by_vec.push("edge tile".to_string());
        }
        if !by_vec.is_empty() {
            write!(s, " (vec: {})", by_vec.join(", ")).unwrap();
        }
        s
    }
}

/// The least threshold tried for the small copies by VEC_MEMCPY (under the
/// default parameters a copy below it costs the ring 12 times or more what
/// it costs the core; finer thresholds would only keep some of those on the
/// ring).
const SMALLEST_THRESHOLD: u64 = 64;

/// The specs worth trying for direction `dir` of `tiles`, and whether each
/// puts a copy on a ring; fills each tile's ring and core time per spec.
/// Tried: every copy by DMA, by VEC, or by C where C_MEMCPY is faster than
/// VEC_MEMCPY for some copy (never under the default parameters); DMA with
/// the copies of at most `s` bytes by VEC, for `s` every power of two from
/// [`SMALLEST_THRESHOLD`] below the largest copy (the smallest copies go
/// by VEC first: they save the most ring time per core time); each of
/// those DMA specs with and without the edge tile's copies by VEC where VEC
/// is faster. Specs that move every copy the same way as an earlier one are
/// dropped (with no copies this way, one spec is left).
fn specs(p: &SimParams, tiles: &mut [Tile], dir: usize) -> (Vec<Spec>, Vec<bool>) {
    let last = tiles.len() - 1;
    fn copies(t: &Tile, dir: usize) -> &[Cp] {
        if dir == M2S {
            &t.loads
        } else {
            &t.flushes
        }
    }
    let edge_of = |i: usize| if dir == M2S { i == 0 } else { i == last };
    let mut sizes: Vec<u64> = tiles
        .iter()
        .flat_map(|t| copies(t, dir).iter().map(|c| c.bytes))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut cands = vec![Spec::all(DMA), Spec::all(VEC)];
    if sizes
        .iter()
        .any(|&b| copy_ns(p, CMC, b) < copy_ns(p, VEC, b))
    {
        cands.push(Spec::all(CMC));
    }
    // Thresholds: none, and every power of two from 64 B below the
    // largest copy (one at or past it moves every copy: VEC's plan).
    let largest = sizes.last().copied().unwrap_or(0);
    let mut smalls = vec![0];
    let mut x = SMALLEST_THRESHOLD;
    while x < largest {
        smalls.push(x);
        x *= 2;
    }
    for small in smalls {
        for edge in [false, true] {
            cands.push(Spec {
                base: DMA,
                small,
                edge,
            });
        }
    }
    let mut out: Vec<Spec> = Vec::new();
    let mut asyncs = Vec::new();
    let mut seen: Vec<Vec<usize>> = Vec::new();
    for spec in cands {
        let sig: Vec<usize> = tiles
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let e = edge_of(i);
                copies(t, dir)
                    .iter()
                    .map(move |c| spec.method(p, c.bytes, e))
            })
            .collect();
        if seen.contains(&sig) {
            continue;
        }
        asyncs.push(sig.contains(&DMA));
        seen.push(sig);
        out.push(spec);
    }
    for (i, t) in tiles.iter_mut().enumerate() {
        let e = edge_of(i);
        let v: Vec<(f64, f64)> = out
            .iter()
            .map(|spec| {
                let (mut ring, mut core) = (0.0, 0.0);
                for c in copies(t, dir) {
                    let m = spec.method(p, c.bytes, e);
                    if m == DMA {
                        ring += copy_ns(p, m, c.bytes);
                    } else {
                        core += copy_ns(p, m, c.bytes);
                    }
                }
                (ring, core)
            })
            .collect();
        if dir == M2S {
            t.load = v;
        } else {
            t.flush = v;
        }
    }
    (out, asyncs)
}

fn transfer_ns(bytes: u64, per_us: u64) -> f64 {
    bytes as f64 * 1000.0 / per_us as f64
}

fn copy_ns(p: &SimParams, m: usize, bytes: u64) -> f64 {
    match m {
        DMA => {
            bytes.div_ceil(MAX_COPY) as f64 * p.dma_fixed_ns as f64
                + transfer_ns(bytes, p.dma_bytes_per_us)
        }
        VEC => p.vec_fixed_ns as f64 + transfer_ns(bytes, p.vec_bytes_per_us),
        CMC => p.c_fixed_ns as f64 + transfer_ns(bytes, p.c_bytes_per_us),
        _ => unreachable!("method {m}"),
    }
}

fn iteration_ns(p: &SimParams, cpe: u64, indexed: u64) -> f64 {
    cpe as f64 * 1000.0 / p.clock_mhz as f64 + (indexed * p.index_ns) as f64
}

// ---------------------------------------------------------------------------
// Candidates
// ---------------------------------------------------------------------------

/// One choice for one group: a tile geometry, a buffer count, the methods
/// of its loads and its flushes, and what it adds to each lower-bound term.
#[derive(Clone, Copy, Debug)]
struct Opt {
    geo: usize,
    n: usize,
    lm: usize,
    fm: usize,
    parts: Parts,
    /// `parts.bound` with the kernel's computes: no configuration with
    /// this option has a lower bound.
    own: f64,
}

/// Lower-bound terms, additive over groups (`pipe`: the largest).
#[derive(Clone, Copy, Debug, Default)]
struct Parts {
    /// Buffer bytes.
    bytes: u64,
    /// Core copies, M2S SDMA time, S2M SDMA time.
    core: f64,
    m2s: f64,
    s2m: f64,
    /// SDMA loads of tile 0 (before the first compute, on one ring).
    fill: f64,
    /// Core loads of tile 0 (before the first compute).
    pre: f64,
    /// Core copies between the first and the last compute.
    mid: f64,
    /// SDMA flushes of the last tile (after the last compute, on one ring).
    drain: f64,
    /// Core flushes of the last tile (after the last compute).
    post: f64,
    /// The longest of the groups' own pipelines ([`pipeline`]).
    pipe: f64,
}

impl Parts {
    fn add(&self, o: &Parts) -> Parts {
        Parts {
            bytes: self.bytes + o.bytes,
            core: self.core + o.core,
            m2s: self.m2s + o.m2s,
            s2m: self.s2m + o.s2m,
            fill: self.fill + o.fill,
            pre: self.pre + o.pre,
            mid: self.mid + o.mid,
            drain: self.drain + o.drain,
            post: self.post + o.post,
            pipe: self.pipe.max(o.pipe),
        }
    }

    /// A lower bound of the makespan of every plan the builder makes with
    /// these groups, whose computes (with indexed accesses) take `compute`.
    fn bound(&self, compute: f64) -> f64 {
        self.bound_with(&Rest::default(), compute)
    }

    /// A lower bound of the makespan of every plan the builder makes with
    /// these groups and any options of groups that add at least `r`: each
    /// resource's busy time (the core's with the computes); the loads
    /// before the first compute (SDMA on the ring and core ones on the
    /// core, at the same time), the computes and the core copies between,
    /// and the flushes after the last compute; and each group's own
    /// pipeline.
    fn bound_with(&self, r: &Rest, compute: f64) -> f64 {
        let q = &r.least;
        let lanes = (compute + self.core + q.core)
            .max(self.m2s + q.m2s)
            .max(self.s2m + q.s2m);
        // Each later group adds at least `fill_pre` to the fill and the
        // core loads before the first compute together, however it splits
        // them (and at least its least fill, its least core loads).
        let start = (self.fill + q.fill)
            .max(self.pre + q.pre)
            .max((self.fill + self.pre + r.fill_pre) / 2.0);
        let end = (self.drain + q.drain)
            .max(self.post + q.post)
            .max((self.drain + self.post + r.drain_post) / 2.0);
        let chain = start + compute + self.mid + q.mid + end;
        lanes.max(chain).max(self.pipe).max(q.pipe)
    }
}

/// A lower bound of the makespan of every plan the builder makes with the
/// options `opts` of `groups` (whose terms add up to `p`), from the rings'
/// deadlines: the SDMA loads of the tiles that start at or before
/// iteration `x` run one after another on the M2S ring from time 0, and
/// the last of them to end is followed by the computes from its tile's
/// start (at or before `x`) on, then by the last tiles' flushes; the SDMA
/// flushes of the tiles that end at or after iteration `y` start after the
/// compute of iteration `y - 1`, which ends at least `y` iterations after
/// the first compute started (itself after the first tiles' loads), and
/// run one after another on the S2M ring.
fn ring_deadlines(
    opts: &[Opt],
    groups: &[Group],
    geos: &[Geo],
    per_iter: f64,
    e: u64,
    p: &Parts,
) -> f64 {
    let start = p.fill.max(p.pre);
    let end = p.drain.max(p.post);
    let mut bound = 0.0f64;
    // Loads by the iteration their tile starts at: the groups' tiles
    // merged in that order.
    let mut next = [0usize; MAX_GROUPS];
    let mut sum = 0.0;
    loop {
        let mut x = u64::MAX;
        for (g, o) in opts.iter().enumerate() {
            let geo = &geos[o.geo];
            if groups[g].reads && next[g] < geo.tiles.len() {
                x = x.min(next[g] as u64 * geo.t_len);
            }
        }
        if x == u64::MAX {
            break;
        }
        for (g, o) in opts.iter().enumerate() {
            let geo = &geos[o.geo];
            if groups[g].reads && next[g] < geo.tiles.len() && next[g] as u64 * geo.t_len == x {
                sum += geo.tiles[next[g]].load[o.lm].0;
                next[g] += 1;
            }
        }
        bound = bound.max(sum + (e - x) as f64 * per_iter + end);
    }
    // Flushes by the iteration their tile ends at, latest first.
    let mut left: [usize; MAX_GROUPS] = [0; MAX_GROUPS];
    for (g, o) in opts.iter().enumerate() {
        left[g] = if groups[g].writes {
            geos[o.geo].tiles.len()
        } else {
            0
        };
    }
    let end_of = |geo: &Geo, j: usize| ((j as u64 + 1) * geo.t_len).min(e);
    let mut sum = 0.0;
    loop {
        let mut y = None;
        for (g, o) in opts.iter().enumerate() {
            if left[g] > 0 {
                let at = end_of(&geos[o.geo], left[g] - 1);
                y = Some(y.map_or(at, |v: u64| v.max(at)));
            }
        }
        let Some(y) = y else { break };
        for (g, o) in opts.iter().enumerate() {
            let geo = &geos[o.geo];
            if left[g] > 0 && end_of(geo, left[g] - 1) == y {
                sum += geo.tiles[left[g] - 1].flush[o.fm].0;
                left[g] -= 1;
            }
        }
        bound = bound.max(start + y as f64 * per_iter + sum);
    }
    bound
}

/// The least the groups after a position of the search add to each bound
/// term, whatever options they take: per term the sum of the groups'
/// least (`least.pipe`: the largest of their least pipelines), and the sums
/// of their least fill plus core loads of the first tile, and of their
/// least drain plus core flushes of the last tile.
#[derive(Clone, Copy, Debug, Default)]
struct Rest {
    least: Parts,
    fill_pre: f64,
    drain_post: f64,
}

impl Rest {
    /// Adds a group with options `opts`.
    fn with(&self, opts: &[Opt]) -> Rest {
        let min = |f: &dyn Fn(&Parts) -> f64| {
            opts.iter()
                .map(|o| f(&o.parts))
                .fold(f64::INFINITY, f64::min)
        };
        let q = &self.least;
        Rest {
            least: Parts {
                bytes: q.bytes + opts.iter().map(|o| o.parts.bytes).min().unwrap_or(0),
                core: q.core + min(&|p| p.core),
                m2s: q.m2s + min(&|p| p.m2s),
                s2m: q.s2m + min(&|p| p.s2m),
                fill: q.fill + min(&|p| p.fill),
                pre: q.pre + min(&|p| p.pre),
                mid: q.mid + min(&|p| p.mid),
                drain: q.drain + min(&|p| p.drain),
                post: q.post + min(&|p| p.post),
                pipe: q.pipe.max(min(&|p| p.pipe)),
            },
            fill_pre: self.fill_pre + min(&|p| p.fill + p.pre),
            drain_post: self.drain_post + min(&|p| p.drain + p.post),
        }
    }
}

/// The least time the steps of one group can take in any plan the
/// builder makes with it, whatever the other groups do: the earliest
/// times of its events under constraints every such plan meets (the other
/// groups only add copies to the rings and the core), where `per_iter` is
/// the compute time of one iteration:
/// - its M2S loads run in tile order and its S2M flushes too (FIFO rings);
///   a tile's loads are issued after the tile `n` earlier was consumed
///   (and, for a written group, flushed) and after the flushes of the
///   earlier tiles it reads from; its SDMA loads start then or later;
/// - the compute of tile `j` starts after its SDMA loads ended and after
///   the compute of tile `j - 1` and that tile's core flushes; with one
///   buffer (or for tile 0) its core loads come in between too (they are
///   issued once tile `j - 1` was consumed), else they come between their
///   issue and the compute; it takes `per_iter` per iteration; a
///   write-only group's tile `j` also starts after the flush of tile
///   `j - n` ended (the builder waits for it);
/// - a tile's SDMA flushes start after its compute, its core flushes end
///   at least their time after it.
///
/// The makespan is at least the end of its last compute and core flushes,
/// and of its rings.
fn pipeline(g: &Group, geo: &Geo, n: usize, lm: usize, fm: usize, per_iter: f64, e: u64) -> f64 {
    let k = geo.tiles.len();
    let mut c_end = vec![0.0f64; k];
    let mut f_end = vec![0.0f64; k];
    let (mut ring_l, mut ring_f, mut core) = (0.0f64, 0.0f64, 0.0f64);
    for (j, tile) in geo.tiles.iter().enumerate() {
        let (lr, lc) = if g.reads { tile.load[lm] } else { (0.0, 0.0) };
        let (fr, fc) = if g.writes { tile.flush[fm] } else { (0.0, 0.0) };
        let mut issue = 0.0f64;
        if j >= n {
            issue = issue.max(c_end[j - n]);
            if g.writes {
                issue = issue.max(f_end[j - n]);
            }
        }
        for &r in &tile.raw {
            issue = issue.max(f_end[r]);
        }
        let mut cs = core.max(issue + lc);
        if lr > 0.0 {
            ring_l = ring_l.max(issue) + lr;
            cs = cs.max(ring_l);
        }
        if n == 1 || j == 0 {
            cs = cs.max(core.max(issue) + lc);
        }
        if !g.reads && j >= n {
            cs = cs.max(f_end[j - n]);
        }
        let iters = (((j + 1) as u64 * geo.t_len).min(e) - j as u64 * geo.t_len) as f64;
        let ce = cs + iters * per_iter;
        c_end[j] = ce;
        core = ce + fc;
        f_end[j] = core;
        if fr > 0.0 {
            ring_f = ring_f.max(ce) + fr;
            f_end[j] = f_end[j].max(ring_f);
        }
    }
    core.max(ring_l).max(ring_f)
}

#[allow(clippy::too_many_arguments)]
fn parts(
    g: &Group,
    geo: &Geo,
    n: usize,
    lm: usize,
    fm: usize,
    bytes: u64,
    per_iter: f64,
    e: u64,
) -> Parts {
    let last = geo.tiles.len() - 1;
    let mut p = Parts {
        bytes,
        pipe: pipeline(g, geo, n, lm, fm, per_iter, e),
        ..Parts::default()
    };
    for (t, tile) in geo.tiles.iter().enumerate() {
        let (ring, core) = tile.load[lm];
        p.m2s += ring;
        p.core += core;
        if t == 0 {
            p.fill += ring;
            p.pre += core;
        } else if t >= n {
            // Issued after tile t - n was consumed.
            p.mid += core;
        }
        let (ring, core) = tile.flush[fm];
        p.s2m += ring;
        p.core += core;
        if t == last {
            p.drain += ring;
            p.post += core;
        } else {
            p.mid += core;
        }
    }
    p
}

/// Most buffers a group gets.
const MAX_BUFFERS: usize = 4;

/// A group's share of the budget is a multiple of this many bytes.
const BUDGET_STEP: u64 = 512;

/// Buffers are placed at multiples of this many bytes (`plan_text`).
const BUFFER_ALIGN: u64 = 64;

/// Balanced tiles are also tried rounded up to a multiple of this many
/// iterations (so that tiles start 64-byte aligned in HBM for 4-byte
/// elements).
const TILE_ROUND: u64 = 16;

/// The (buffer count, tile length) pairs tried for group `g` of a kernel
/// with `ngroups` groups. Per buffer count `n` (1 to [`MAX_BUFFERS`]), the
/// most bytes a buffer may take: a share of the budget of a multiple of
/// [`BUDGET_STEP`] bytes split into `n` buffers, or the budget split into
/// `s` equal buffers for every `s` from `n` to [`MAX_BUFFERS`] buffers per
/// group (an even split of the budget between the groups); each as it is
/// and rounded down to [`BUFFER_ALIGN`] bytes (so that aligned buffers fit
/// too). Per such size: the largest tile that fits it (at most the whole
/// iteration space), the balanced tile of the same tile count (equal tiles)
/// and the balanced tile rounded up to a multiple of [`TILE_ROUND`]
/// iterations where that still fits.
fn tile_grid(f: &Facts, g: &Group, budget: u64, ngroups: usize) -> BTreeSet<(usize, u64)> {
    let mut nt: BTreeSet<(usize, u64)> = BTreeSet::new();
    for n in 1..=MAX_BUFFERS {
        let shares = (1..=budget / BUDGET_STEP).map(|u| u * BUDGET_STEP / n as u64);
        let even = (n..=MAX_BUFFERS * ngroups).map(|s| budget / s as u64);
        for size in shares.chain(even) {
            for per_buffer in [size, size / BUFFER_ALIGN * BUFFER_ALIGN] {
                let tmax = (per_buffer / g.bpi).min(f.e);
                if tmax == 0 {
                    continue;
                }
                let balanced = f.e.div_ceil(f.e.div_ceil(tmax));
                let rounded = balanced.div_ceil(TILE_ROUND) * TILE_ROUND;
                for t in [tmax, balanced, rounded] {
                    if t <= tmax && n as u64 <= f.e.div_ceil(t) {
                        nt.insert((n, t));
                    }
                }
            }
        }
    }
    nt
}

/// The geometries of a kernel's groups, each made once: by the group's
/// accesses and the tile length.
#[derive(Default)]
struct Geos {
    list: Vec<Geo>,
    index: BTreeMap<(Vec<usize>, u64), usize>,
}

/// Every option of group `g` (of `ngroups`), sorted by its own bound: per
/// (buffer count, tile length) of [`tile_grid`], every load spec and every
/// flush spec of the geometry (more than one buffer only when some copy is
/// on a ring).
fn options(
    f: &Facts,
    g: &Group,
    ngroups: usize,
    p: &SimParams,
    per_iter: f64,
    geos: &mut Geos,
) -> Vec<Opt> {
    let nt = tile_grid(f, g, p.budget, ngroups);
    let mut out = Vec::new();
    for (n, t) in nt {
        let gi = *geos.index.entry((g.accs.clone(), t)).or_insert_with(|| {
            geos.list.push(geometry(f, g, t, p));
            geos.list.len() - 1
        });
        let geo = &geos.list[gi];
        let lms = if g.reads { geo.load_specs.len() } else { 1 };
        let fms = if g.writes { geo.flush_specs.len() } else { 1 };
        for lm in 0..lms {
            for fm in 0..fms {
                let async_copies =
                    (g.reads && geo.load_async[lm]) || (g.writes && geo.flush_async[fm]);
                if n > 1 && !async_copies {
                    // Copies the core does itself gain nothing from more
                    // buffers.
                    continue;
                }
                let bytes = n as u64 * t * g.bpi;
                let parts = parts(g, geo, n, lm, fm, bytes, per_iter, f.e);
                out.push(Opt {
                    geo: gi,
                    n,
                    lm,
                    fm,
                    parts,
                    own: parts.bound(f.e as f64 * per_iter),
                });
            }
        }
    }
    out.sort_by(|a, b| a.own.total_cmp(&b.own));
    out
}

/// Issue order of loads on the M2S ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Issue {
    /// Every load whose buffer is free, in the order the tiles are needed.
    Greedy,
    /// Loads strictly in the order the tiles are needed.
    Strict,
}

/// A full candidate: the groups and one option per group.
struct Cand<'a> {
    groups: &'a [Group],
    geos: &'a [Geo],
    opts: Vec<Opt>,
    issue: Issue,
}

// ---------------------------------------------------------------------------
// The schedule builder and its timing
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum PStep {
    Copy {
        dir: usize,
        method: usize,
        group: usize,
        tile: usize,
        hbm: u64,
        off: u64,
        bytes: u64,
    },
    Wait(usize),
    Compute(u64, u64),
}

struct Builder<'p> {
    p: &'p SimParams,
    per_iter: f64,
    ct: f64,
    ring: [f64; 2],
    ring_ids: [Vec<usize>; 2],
    ring_end: [Vec<f64>; 2],
    waited: [usize; 2],
    next_id: usize,
    rec: Option<Vec<PStep>>,
}

impl Builder<'_> {
    /// Waits for ring copy `seq` of `lane` (and every earlier one of that
    /// ring, in order), unless a wait already covers it.
    fn wait(&mut self, lane: usize, seq: usize) {
        if seq < self.waited[lane] {
            return;
        }
        self.ct = self.ct.max(self.ring_end[lane][seq]);
        self.waited[lane] = seq + 1;
        if let Some(r) = &mut self.rec {
            r.push(PStep::Wait(self.ring_ids[lane][seq]));
        }
    }

    /// Issues a copy by `method`; returns its ring position for an SDMA
    /// copy.
    fn copy(
        &mut self,
        dir: usize,
        method: usize,
        group: usize,
        tile: usize,
        c: &Cp,
    ) -> Option<usize> {
        if let Some(r) = &mut self.rec {
            r.push(PStep::Copy {
                dir,
                method,
                group,
                tile,
                hbm: c.hbm,
                off: c.off,
                bytes: c.bytes,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        let d = copy_ns(self.p, method, c.bytes);
        if method == DMA {
            let start = self.ring[dir].max(self.ct);
            let end = start + d;
            self.ring[dir] = end;
            self.ring_ids[dir].push(id);
            self.ring_end[dir].push(end);
            Some(self.ring_end[dir].len() - 1)
        } else {
            self.ct += d;
            None
        }
    }

    fn compute(&mut self, first: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.ct += count as f64 * self.per_iter;
        if let Some(r) = &mut self.rec {
            r.push(PStep::Compute(first, count));
        }
    }
}

struct GState {
    next_load: usize,
    consumed: usize,
    load_seq: Vec<Option<usize>>,
    flush_seq: Vec<Option<usize>>,
    flush_end: Vec<f64>,
    /// A consumed tile whose core flushes are not done yet.
    pending: Option<usize>,
}

const M2S: usize = 0;
const S2M: usize = 1;

/// Most staging groups a kernel of the suite has (at most one per access).
const MAX_GROUPS: usize = 8;

/// A few group indices, without allocating (the builder runs millions of
/// times).
#[derive(Clone, Copy, Default)]
struct Groups {
    v: [usize; MAX_GROUPS],
    len: usize,
}

impl Groups {
    fn push(&mut self, g: usize) {
        self.v[self.len] = g;
        self.len += 1;
    }

    fn as_slice(&self) -> &[usize] {
        &self.v[..self.len]
    }

    /// Sorts by a key that tells every two groups apart (insertion sort).
    fn sort_by_key<K: Ord>(&mut self, key: impl Fn(usize) -> K) {
        for i in 1..self.len {
            let mut j = i;
            while j > 0 && key(self.v[j]) < key(self.v[j - 1]) {
                self.v.swap(j, j - 1);
                j -= 1;
            }
        }
    }
}

/// Builds the steps of a candidate and times them; returns the makespan
/// (and the steps when `record`).
fn build(c: &Cand, f: &Facts, p: &SimParams, indexed: u64, record: bool) -> (f64, Vec<PStep>) {
    let ng = c.groups.len();
    assert!(ng <= MAX_GROUPS, "{ng} groups");
    let mut b = Builder {
        p,
        per_iter: iteration_ns(p, f.cpe, indexed),
        ct: 0.0,
        ring: [0.0; 2],
        ring_ids: [Vec::new(), Vec::new()],
        ring_end: [Vec::new(), Vec::new()],
        waited: [0; 2],
        next_id: 0,
        rec: record.then(Vec::new),
    };
    let geo: Vec<&Geo> = c.opts.iter().map(|o| &c.geos[o.geo]).collect();
    let mut st: Vec<GState> = geo
        .iter()
        .map(|g| GState {
            next_load: 0,
            consumed: 0,
            load_seq: vec![None; g.tiles.len()],
            flush_seq: vec![None; g.tiles.len()],
            flush_end: vec![0.0; g.tiles.len()],
            pending: None,
        })
        .collect();
    // Need order: the tile's first iteration, then the group.
    let key = |g: usize, t: usize| (t as u64 * geo[g].t_len, g);
    let readers: Vec<usize> = (0..ng).filter(|&g| c.groups[g].reads).collect();

    // Whether the next load of group g may be issued, and when its buffer's
    // flushes (and those of earlier tiles it reads from) have landed.
    let ready = |st: &[GState], g: usize| -> Option<(f64, Option<usize>)> {
        let s = &st[g];
        let l = s.next_load;
        let n = c.opts[g].n;
        if l >= geo[g].tiles.len() {
            return None;
        }
        // The earlier tiles it reads from, and its buffer's previous tile.
        let deps = geo[g].tiles[l].raw.iter().copied().chain(l.checked_sub(n));
        let mut at = 0.0f64;
        let mut seq: Option<usize> = None;
        for k in deps {
            if s.consumed <= k || s.pending == Some(k) {
                return None;
            }
            at = at.max(s.flush_end[k]);
            if let Some(q) = s.flush_seq[k] {
                seq = Some(seq.map_or(q, |x: usize| x.max(q)));
            }
        }
        Some((at, seq))
    };
    let issue_load = |b: &mut Builder, st: &mut [GState], g: usize, wait_seq: Option<usize>| {
        if let Some(q) = wait_seq {
            b.wait(S2M, q);
        }
        let l = st[g].next_load;
        let spec = geo[g].load_specs[c.opts[g].lm];
        let mut last = None;
        for cp in &geo[g].tiles[l].loads {
            if let Some(q) = b.copy(M2S, spec.method(p, cp.bytes, l == 0), g, l, cp) {
                last = Some(q);
            }
        }
        st[g].load_seq[l] = last;
        st[g].next_load += 1;
    };
    // The loads that may go now: the candidates in need order (strict: only
    // the first needed of all).
    let candidates = |st: &[GState]| -> Groups {
        let mut v = Groups::default();
        for &g in &readers {
            if st[g].next_load < geo[g].tiles.len() {
                v.push(g);
            }
        }
        v.sort_by_key(|g| key(g, st[g].next_load));
        if c.issue == Issue::Strict {
            v.len = v.len.min(1);
        }
        v
    };
    // Issues every load that is free by now; returns the earliest time a
    // further one becomes free, if any.
    let issue_ready = |b: &mut Builder, st: &mut [GState]| -> Option<f64> {
        loop {
            let mut issued = false;
            let mut next: Option<f64> = None;
            for &g in candidates(st).as_slice() {
                if let Some((at, seq)) = ready(st, g) {
                    if at <= b.ct {
                        issue_load(b, st, g, seq);
                        issued = true;
                        break;
                    }
                    next = Some(next.map_or(at, |x: f64| x.min(at)));
                }
            }
            if !issued {
                return next;
            }
        }
    };

    let e = f.e;
    let mut s = 0u64;
    while s < e {
        // Tiles that start at `s`: their loads are issued (now, if not yet)
        // and waited for; a reused buffer's flushes are waited for.
        issue_ready(&mut b, &mut st);
        let mut need: [Option<usize>; 2] = [None, None];
        let mut starting = Groups::default();
        for (g, gm) in geo.iter().enumerate() {
            if s.is_multiple_of(gm.t_len) {
                starting.push(g);
            }
        }
        starting.sort_by_key(|g| key(g, (s / geo[g].t_len) as usize));
        for &g in starting.as_slice() {
            let t = (s / geo[g].t_len) as usize;
            let n = c.opts[g].n;
            if c.groups[g].reads {
                while st[g].next_load <= t {
                    let (_, seq) =
                        ready(&st, g).expect("a tile's own load is always free at its start");
                    issue_load(&mut b, &mut st, g, seq);
                }
                if let Some(q) = st[g].load_seq[t] {
                    need[M2S] = Some(need[M2S].map_or(q, |x| x.max(q)));
                }
            }
            if c.groups[g].writes && t >= n {
                if let Some(q) = st[g].flush_seq[t - n] {
                    need[S2M] = Some(need[S2M].map_or(q, |x| x.max(q)));
                }
            }
        }
        for lane in [M2S, S2M] {
            if let Some(q) = need[lane] {
                b.wait(lane, q);
            }
        }
        // The segment up to the next tile boundary of any group; a load
        // that waits for a flush goes in when that flush has landed.
        let nb = (0..ng)
            .map(|g| ((s / geo[g].t_len) + 1) * geo[g].t_len)
            .min()
            .unwrap_or(e)
            .min(e);
        let mut cur = s;
        loop {
            let next = issue_ready(&mut b, &mut st);
            if let Some(at) = next {
                let k = ((at - b.ct) / b.per_iter).ceil().max(1.0) as u64;
                if cur + k < nb {
                    b.compute(cur, k);
                    cur += k;
                    continue;
                }
            }
            b.compute(cur, nb - cur);
            break;
        }
        // Tiles that end at `nb`: consumed, and flushed: SDMA flushes
        // first, then the loads the consumed buffers free (so that the
        // rings start before the core copies), then the core flushes.
        let mut ending = Groups::default();
        for (g, gm) in geo.iter().enumerate() {
            if nb.is_multiple_of(gm.t_len) || nb == e {
                ending.push(g);
            }
        }
        ending.sort_by_key(|g| key(g, ((nb - 1) / geo[g].t_len) as usize));
        for &g in ending.as_slice() {
            let t = ((nb - 1) / geo[g].t_len) as usize;
            st[g].consumed = t + 1;
            if c.groups[g].writes {
                let spec = geo[g].flush_specs[c.opts[g].fm];
                let edge = t + 1 == geo[g].tiles.len();
                for cp in &geo[g].tiles[t].flushes {
                    if spec.method(p, cp.bytes, edge) != DMA {
                        st[g].pending = Some(t);
                    } else if let Some(q) = b.copy(S2M, DMA, g, t, cp) {
                        st[g].flush_seq[t] = Some(q);
                        st[g].flush_end[t] = b.ring_end[S2M][q];
                    }
                }
            }
        }
        issue_ready(&mut b, &mut st);
        for &g in ending.as_slice() {
            if let Some(t) = st[g].pending.take() {
                let spec = geo[g].flush_specs[c.opts[g].fm];
                let edge = t + 1 == geo[g].tiles.len();
                for cp in &geo[g].tiles[t].flushes {
                    let m = spec.method(p, cp.bytes, edge);
                    if m != DMA {
                        b.copy(S2M, m, g, t, cp);
                    }
                }
            }
        }
        s = nb;
    }
    if let Some(last) = b.ring_end[S2M].len().checked_sub(1) {
        b.wait(S2M, last);
    }
    let makespan = b.ct.max(b.ring[0]).max(b.ring[1]);
    (makespan, b.rec.unwrap_or_default())
}

/// The plan ops of a candidate as IR text (one op a line).
fn plan_text(c: &Cand, acc: &[u8], steps: &[PStep]) -> String {
    let mut t = String::new();
    let depth = c.opts.iter().map(|o| o.n).max().unwrap_or(1);
    let names: Vec<String> = acc
        .iter()
        .map(|&a| format!("\"{}\"", ACCESSOR_NAMES[a as usize]))
        .collect();
    writeln!(
        t,
        "gpsimd.plan {{policy = \"pipelined\", buffers = {depth}, accessors = [{}]}}",
        names.join(", ")
    )
    .unwrap();
    // Buffers: each group's, back to back from the start of the dataram
    // window, 64-byte aligned.
    let mut base: Vec<Vec<u64>> = Vec::new();
    let mut at = 0x80000u64;
    let mut slot = 0usize;
    let mut first_slot = Vec::new();
    for (g, o) in c.opts.iter().enumerate() {
        let bytes = c.geos[o.geo].t_len * c.groups[g].bpi;
        first_slot.push(slot);
        let mut v = Vec::new();
        for _ in 0..o.n {
            writeln!(
                t,
                "gpsimd.buffer {{slot = {slot}, access = {}, dram = {at}, bytes = {bytes}}}",
                c.groups[g].accs[0]
            )
            .unwrap();
            v.push(at);
            at = (at + bytes).div_ceil(BUFFER_ALIGN) * BUFFER_ALIGN;
            slot += 1;
        }
        base.push(v);
    }
    let mut id = 0usize;
    for s in steps {
        match *s {
            PStep::Copy {
                dir,
                method,
                group,
                tile,
                hbm,
                off,
                bytes,
            } => {
                let n = c.opts[group].n;
                let sl = first_slot[group] + tile % n;
                let dram = base[group][tile % n] + off;
                let d = if dir == M2S { "m2s" } else { "s2m" };
                let owner = c.groups[group].accs[0];
                if method == DMA {
                    write!(t, "sdma.copy {{id = {id}, dir = \"{d}\", queue = 0").unwrap();
                } else {
                    write!(
                        t,
                        "gpsimd.memcpy {{id = {id}, method = \"{}\", dir = \"{d}\"",
                        METHOD_NAMES[method]
                    )
                    .unwrap();
                }
                writeln!(
                    t,
                    ", access = {owner}, tile = {tile}, slot = {sl}, hbm = {hbm}, dram = {dram}, bytes = {bytes}}}"
                )
                .unwrap();
                id += 1;
            }
            PStep::Wait(c) => writeln!(t, "sdma.wait {{copy = {c}}}").unwrap(),
            PStep::Compute(first, count) => {
                writeln!(t, "gpsimd.compute {{first = {first}, count = {count}}}").unwrap()
            }
        }
    }
    t
}

fn describe(c: &Cand, acc: &[u8], f: &Facts) -> String {
    let names: Vec<&str> = acc.iter().map(|&a| ACCESSOR_NAMES[a as usize]).collect();
    let mut s = format!("accessors [{}]", names.join(", "));
    for (g, o) in c.opts.iter().enumerate() {
        let grp = &c.groups[g];
        let geo = &c.geos[o.geo];
        let (lm, fm) = (geo.load_specs[o.lm].name(), geo.flush_specs[o.fm].name());
        let m = match (grp.reads, grp.writes) {
            (true, true) => format!("load {lm} flush {fm}"),
            (true, false) => lm,
            _ => fm,
        };
        let accs: Vec<String> = grp.accs.iter().map(|a| a.to_string()).collect();
        write!(
            s,
            "; group [{}]: {m}, {} x {} B buffers, {} iterations a tile, {} tiles",
            accs.join(","),
            o.n,
            geo.t_len * grp.bpi,
            geo.t_len,
            f.e.div_ceil(geo.t_len)
        )
        .unwrap();
    }
    let loaders = c
        .opts
        .iter()
        .zip(c.groups)
        .filter(|(o, g)| g.reads && c.geos[o.geo].load_async[o.lm])
        .count();
    if loaders > 1 {
        write!(s, "; M2S issue {:?}", c.issue).unwrap();
    }
    s
}

// ---------------------------------------------------------------------------
// The search
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default)]
struct Stats {
    /// Accessor choices (staged tensor subsets) searched.
    subsets: usize,
    /// Options per group, per subset searched (the largest subset's).
    options: Vec<usize>,
    /// Product of the option counts over every subset (the space before
    /// the budget and the bound).
    space: f64,
    /// Search-tree nodes (partial or full assignments) visited.
    nodes: u64,
    /// Candidates built and timed by the search's own model (the seeds'
    /// included).
    timed: u64,
    /// Candidates printed, proved and simulated: the all-index plan, and
    /// per accessor choice its fastest candidate if that beat the best so
    /// far.
    checked: u64,
    /// Candidates `check-coherency` rejected (with the message).
    rejected: Vec<String>,
    /// Candidates whose search timing differs from the simulator's.
    mismatched: Vec<String>,
    /// Candidates timed below their bound (exhaustive mode only).
    bound_violations: Vec<String>,
    secs: f64,
}

#[derive(Clone, Debug)]
struct Winner {
    makespan: f64,
    lower_bound: f64,
    config: String,
    plan: String,
}

struct Search<'a> {
    case: &'a Case,
    ki: usize,
    f: &'a Facts,
    p: SimParams,
    best: Option<Winner>,
    stats: Stats,
    /// Time every candidate within the budget (no pruning by the bound),
    /// and check the bound against each.
    exhaustive: bool,
}

const MAX_REJECTIONS: usize = 20;

/// Subsets with at least this many groups start their search from a seed
/// ([`Search::seed`]).
const SEED_GROUPS: usize = 4;

/// Most rounds of [`Search::seed`].
const SEED_ROUNDS: usize = 3;

impl Search<'_> {
    /// Proves and simulates a plan; replaces the best if it is proved.
    fn consider(&mut self, plan: String, config: String, timed: f64) {
        self.stats.checked += 1;
        let mut plans: Vec<Option<&str>> = vec![None; self.case.kernels.len()];
        plans[self.ki] = Some(&plan);
        let text = self.case.text(&plans);
        let mut comp = match Compilation::parse("oracle.apir", &text, None) {
            Ok(c) => c,
            Err(e) => {
                self.stats
                    .rejected
                    .push(format!("{config}: does not parse: {e}"));
                return;
            }
        };
        if let Err(e) = comp.run("check-coherency") {
            self.stats.rejected.push(format!("{config}: {e}"));
            return;
        }
        let (makespan, lower_bound) = simulate(&comp, self.ki);
        if (makespan - timed).abs() > 1e-6 * makespan.max(1.0) {
            self.stats.mismatched.push(format!(
                "{config}: search timed {timed} ns, simulator {makespan} ns"
            ));
        }
        if self.best.as_ref().is_none_or(|b| makespan < b.makespan) {
            self.best = Some(Winner {
                makespan,
                lower_bound,
                config,
                plan,
            });
        }
    }

    fn best_ns(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.makespan)
    }

    /// A first candidate for a subset's search, so that the bound prunes
    /// from the start: every group at its smallest option, then each group
    /// in turn takes its option that makes the fastest plan with the others
    /// fixed (among those within the budget whose own bound is below the
    /// best so far), while that improves the plan (at most [`SEED_ROUNDS`]
    /// rounds; greedy issue).
    fn seed(
        &mut self,
        groups: &[Group],
        geos: &[Geo],
        opts: &[Vec<Opt>],
        indexed: u64,
    ) -> Option<(f64, Vec<Opt>, Issue)> {
        let smallest = |v: &Vec<Opt>| *v.iter().min_by_key(|o| o.parts.bytes).unwrap();
        let mut cur: Vec<Opt> = opts.iter().map(smallest).collect();
        let bytes = |v: &[Opt]| v.iter().map(|o| o.parts.bytes).sum::<u64>();
        if opts.iter().any(Vec::is_empty) || bytes(&cur) > self.p.budget {
            return None;
        }
        let time = |s: &mut Self, v: &[Opt]| {
            let cand = Cand {
                groups,
                geos,
                opts: v.to_vec(),
                issue: Issue::Greedy,
            };
            s.stats.timed += 1;
            build(&cand, s.f, &s.p, indexed, false).0
        };
        let mut best = time(self, &cur);
        for _ in 0..SEED_ROUNDS {
            let mut improved = false;
            for g in 0..groups.len() {
                for &o in &opts[g] {
                    if o.own >= best.min(self.best_ns()) {
                        break;
                    }
                    let mut next = cur.clone();
                    next[g] = o;
                    if bytes(&next) > self.p.budget {
                        continue;
                    }
                    let ms = time(self, &next);
                    if ms < best * (1.0 - 1e-9) {
                        (best, cur, improved) = (ms, next, true);
                    }
                }
            }
            if !improved {
                break;
            }
        }
        (best < self.best_ns() * (1.0 - 1e-9)).then_some((best, cur, Issue::Greedy))
    }

    fn run(&mut self) {
        let t0 = Instant::now();
        let f = self.f;
        let nacc = f.addrs.len();
        // The all-index plan.
        {
            let per = iteration_ns(&self.p, f.cpe, nacc as u64);
            let names: Vec<String> = (0..nacc).map(|_| "\"index\"".to_string()).collect();
            let plan = format!(
                "gpsimd.plan {{policy = \"pipelined\", buffers = 1, accessors = [{}]}}\ngpsimd.compute {{first = 0, count = {}}}\n",
                names.join(", "),
                f.e
            );
            let cfg = format!("accessors [{}]", vec!["index"; nacc].join(", "));
            self.consider(plan, cfg, f.e as f64 * per);
        }
        // Staged tensor subsets, most staged first.
        let mut all_geos = Geos::default();
        let mut subsets: Vec<u32> = (1..(1u32 << f.tensors)).collect();
        subsets.sort_by_key(|s| std::cmp::Reverse(s.count_ones()));
        for staged in subsets {
            let (acc, groups) = accessors_and_groups(f, staged);
            let indexed = acc.iter().filter(|&&a| a == INDEX).count() as u64;
            let per_iter = iteration_ns(&self.p, f.cpe, indexed);
            let compute = f.e as f64 * per_iter;
            let opts: Vec<Vec<Opt>> = groups
                .iter()
                .map(|g| options(f, g, groups.len(), &self.p, per_iter, &mut all_geos))
                .collect();
            let geos = &all_geos.list;
            self.stats.subsets += 1;
            if self.stats.options.len() < opts.len() {
                self.stats.options = opts.iter().map(Vec::len).collect();
            }
            self.stats.space += opts.iter().map(|o| o.len() as f64).product::<f64>();
            // What the groups after each position add at least.
            let mut rest = vec![Rest::default(); groups.len() + 1];
            for g in (0..groups.len()).rev() {
                rest[g] = rest[g + 1].with(&opts[g]);
            }
            let loaders = |chosen: &[Opt]| {
                chosen
                    .iter()
                    .zip(&groups)
                    .filter(|(o, g)| g.reads && geos[o.geo].load_async[o.lm])
                    .count()
            };
            // Depth-first over the groups' options, pruned by the budget
            // and by the bound (against the best proved plan and this
            // subset's best candidate, which is proved at the end).
            let mut sub_best: Option<(f64, Vec<Opt>, Issue)> = None;
            if !self.exhaustive && groups.len() >= SEED_GROUPS {
                sub_best = self.seed(&groups, geos, &opts, indexed);
            }
            let mut stack: Vec<(usize, usize, Parts)> = vec![(0, 0, Parts::default())];
            let mut chosen: Vec<Opt> = Vec::new();
            while let Some((depth, i, partial)) = stack.pop() {
                chosen.truncate(depth);
                if i >= opts[depth].len() {
                    continue;
                }
                let o = opts[depth][i];
                let best = sub_best.as_ref().map_or(self.best_ns(), |b| b.0);
                if !self.exhaustive && o.own >= best * (1.0 - 1e-12) {
                    // Options are sorted by their own bound: neither this
                    // one nor a later sibling can lead to a better plan.
                    continue;
                }
                // Next sibling first on the stack, then this node's child.
                stack.push((depth, i + 1, partial));
                let p = partial.add(&o.parts);
                self.stats.nodes += 1;
                let mut bound = p.bound_with(&rest[depth + 1], compute);
                if p.bytes + rest[depth + 1].least.bytes > self.p.budget
                    || (!self.exhaustive && bound >= best * (1.0 - 1e-12))
                {
                    continue;
                }
                chosen.push(o);
                if depth + 1 < groups.len() {
                    stack.push((depth + 1, 0, p));
                    continue;
                }
                bound = bound.max(ring_deadlines(&chosen, &groups, geos, per_iter, f.e, &p));
                if !self.exhaustive && bound >= best * (1.0 - 1e-12) {
                    continue;
                }
                let issues: &[Issue] = if loaders(&chosen) > 1 {
                    &[Issue::Greedy, Issue::Strict]
                } else {
                    &[Issue::Greedy]
                };
                for &issue in issues {
                    let cand = Cand {
                        groups: &groups,
                        geos,
                        opts: chosen.clone(),
                        issue,
                    };
                    self.stats.timed += 1;
                    let (ms, _) = build(&cand, f, &self.p, indexed, false);
                    if self.exhaustive && ms < bound * (1.0 - 1e-9) {
                        self.stats.bound_violations.push(format!(
                            "{}: timed {ms} ns, bound {bound} ns",
                            describe(&cand, &acc, f)
                        ));
                    }
                    let best = sub_best.as_ref().map_or(self.best_ns(), |b| b.0);
                    if ms < best * (1.0 - 1e-9) {
                        sub_best = Some((ms, cand.opts, issue));
                    }
                }
            }
            if let Some((ms, opts, issue)) = sub_best {
                if self.stats.rejected.len() < MAX_REJECTIONS {
                    let cand = Cand {
                        groups: &groups,
                        geos,
                        opts,
                        issue,
                    };
                    let (ms2, steps) = build(&cand, f, &self.p, indexed, true);
                    assert_eq!(ms, ms2);
                    let plan = plan_text(&cand, &acc, &steps);
                    let cfg = describe(&cand, &acc, f);
                    self.consider(plan, cfg, ms);
                }
            }
        }
        self.stats.secs = t0.elapsed().as_secs_f64();
    }
}

/// Makespan of kernel `ki`'s plan in a compiled module, and the kernel's
/// lower bound under the plan's cost model (no plan may beat it).
fn simulate(c: &Compilation, ki: usize) -> (f64, f64) {
    let k: IrKernel = IrKernel::all(&c.module).swap_remove(ki);
    let plan = KernelPlan::read(&c.module, k.op)
        .expect("plan reads")
        .expect("kernel has a plan");
    let s = Schedule::run(&k, &plan);
    let bound = apir_passes::staging::bound::kernel_bound(&c.module, &k, &plan.params);
    // Each resource's time at the bound is within the bound.
    assert!(
        [bound.compute_ns, bound.core_ns, bound.m2s_ns, bound.s2m_ns]
            .iter()
            .all(|&part| part <= bound.ns),
        "{bound:?}"
    );
    (s.figures.makespan_ns, bound.ns)
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Row {
    name: String,
    /// The case and the kernel in it.
    case: usize,
    kernel: usize,
    planner: f64,
    planner_bound: f64,
    planner_accessors: String,
    /// The planner's plan ops, as text.
    planner_plan: String,
    /// The oracle's builder on the planner's configuration, and that
    /// configuration in the oracle's terms ([`planner_in_space`]).
    planner_in_space: Result<(f64, String), String>,
    oracle: Winner,
    stats: Stats,
}

/// A case's name, and `check-coherency` on the module with the oracle's
/// plans and on the planner's output.
type ModuleCheck = (String, Result<(), String>, Result<(), String>);

struct Results {
    rows: Vec<Row>,
    /// Per case: `check-coherency` on the module with every kernel's oracle
    /// plan, and on the planner's output.
    module_checks: Vec<ModuleCheck>,
    secs: f64,
}

fn results() -> &'static Results {
    static R: OnceLock<Results> = OnceLock::new();
    R.get_or_init(compute_results)
}

/// The planner's plan for one kernel.
#[derive(Clone, Debug)]
struct PlannerRow {
    /// Simulated makespan, and the kernel's lower bound.
    makespan: f64,
    bound: f64,
    /// Accessors, buffers and copies.
    summary: String,
    /// The plan ops, as text.
    plan: String,
    /// [`planner_in_space`].
    in_space: Result<(f64, String), String>,
}

/// Where the planner's plan for kernel `ki` of `case` lies in the oracle's
/// space: its accessors, and per staging group its buffer count and tile
/// length (which must be a pair of [`tile_grid`]), its copies (which must
/// be the tiles' copies of the oracle's geometry) and their methods (which
/// must be one of the geometry's load specs and flush specs). The oracle's
/// builder then times that candidate (with either issue order); returns
/// the faster of those makespans, which must not exceed the planner's
/// simulated `makespan`: then the oracle's best plan is at least as fast
/// as the planner's. Else says what lies outside the space.
fn planner_in_space(
    case: &Case,
    ki: usize,
    plan: &KernelPlan,
    makespan: f64,
) -> Result<(f64, String), String> {
    use apir_ir::staging::{Dir, Method};
    let p = plan.params;
    let f = facts(case, &case.kernels[ki]);
    let mut staged = 0u32;
    for (i, a) in plan.accessors.iter().enumerate() {
        if *a != apir_ir::staging::Accessor::Index {
            staged |= 1 << f.tensor[i];
        }
    }
    let (acc, groups) = accessors_and_groups(&f, staged);
    let names: Vec<&str> = acc.iter().map(|&a| ACCESSOR_NAMES[a as usize]).collect();
    let theirs: Vec<&str> = plan.accessors.iter().map(|a| a.name()).collect();
    if names != theirs {
        return Err(format!(
            "accessors [{}], the oracle's for those tensors [{}]",
            theirs.join(", "),
            names.join(", ")
        ));
    }
    let indexed = acc.iter().filter(|&&a| a == INDEX).count() as u64;
    let per_iter = iteration_ns(&p, f.cpe, indexed);
    let mut geos = Vec::new();
    let mut opts = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let owner = g.accs[0] as u32;
        let slots: Vec<u64> = plan
            .slots
            .iter()
            .filter(|s| s.access == owner)
            .map(|s| u64::from(s.bytes))
            .collect();
        let n = slots.len();
        let bytes = slots.first().copied().unwrap_or(0);
        if n == 0 || slots.iter().any(|&b| b != bytes) || bytes % g.bpi != 0 {
            return Err(format!(
                "group {gi}: buffers of {slots:?} B for {} B per iteration",
                g.bpi
            ));
        }
        let t = bytes / g.bpi;
        if !tile_grid(&f, g, p.budget, groups.len()).contains(&(n, t)) {
            return Err(format!(
                "group {gi}: {n} buffers of {t} iterations, not on the oracle's grid"
            ));
        }
        let geo = geometry(&f, g, t, &p);
        let last = geo.tiles.len() - 1;
        // The spec of each direction whose methods are the planner's.
        let spec_of = |dir: Dir, specs: &[Spec]| -> Result<usize, String> {
            let mut want: Vec<(u32, u64, u32, usize)> = plan
                .copies()
                .filter(|c| c.access == owner && c.dir == dir)
                .map(|c| {
                    let m = match c.method {
                        Method::Dma => DMA,
                        Method::VecMemcpy => VEC,
                        Method::CMemcpy => CMC,
                    };
                    (c.tile, c.hbm, c.bytes, m)
                })
                .collect();
            want.sort_unstable();
            let copies = |t: &Tile| -> Vec<Cp> {
                if dir == Dir::M2s {
                    t.loads.clone()
                } else {
                    t.flushes.clone()
                }
            };
            let edge = |i: usize| if dir == Dir::M2s { i == 0 } else { i == last };
            let mut mine: Vec<(u32, u64, u32, u64)> = Vec::new();
            for (i, tile) in geo.tiles.iter().enumerate() {
                mine.extend(
                    copies(tile)
                        .iter()
                        .map(|c| (i as u32, c.hbm, c.bytes as u32, c.bytes)),
                );
            }
            mine.sort_unstable();
            let same_copies = want.len() == mine.len()
                && want
                    .iter()
                    .zip(&mine)
                    .all(|(a, b)| (a.0, a.1, a.2) == (b.0, b.1, b.2));
            if !same_copies {
                return Err(format!(
                    "group {gi}: the planner's {dir:?} copies are not the oracle's tiles' copies"
                ));
            }
            specs
                .iter()
                .position(|s| {
                    want.iter()
                        .all(|&(t, _, b, m)| s.method(&p, u64::from(b), edge(t as usize)) == m)
                })
                .ok_or_else(|| {
                    format!("group {gi}: no spec moves the {dir:?} copies by the planner's methods")
                })
        };
        let lm = if g.reads {
            spec_of(Dir::M2s, &geo.load_specs)?
        } else {
            0
        };
        let fm = if g.writes {
            spec_of(Dir::S2m, &geo.flush_specs)?
        } else {
            0
        };
        let ring = (g.reads && geo.load_async[lm]) || (g.writes && geo.flush_async[fm]);
        if n > 1 && !ring {
            return Err(format!(
                "group {gi}: {n} buffers and every copy by the core"
            ));
        }
        let parts = parts(g, &geo, n, lm, fm, n as u64 * bytes, per_iter, f.e);
        geos.push(geo);
        opts.push(Opt {
            geo: gi,
            n,
            lm,
            fm,
            parts,
            own: 0.0,
        });
    }
    let mut best = f64::INFINITY;
    let mut config = String::new();
    for issue in [Issue::Greedy, Issue::Strict] {
        let cand = Cand {
            groups: &groups,
            geos: &geos,
            opts: opts.clone(),
            issue,
        };
        let ms = build(&cand, &f, &p, indexed, false).0;
        if ms < best {
            best = ms;
            config = describe(&cand, &acc, &f);
        }
    }
    if best > makespan * (1.0 + 1e-9) {
        return Err(format!("the oracle's builder takes {best:.1} ns on the planner's configuration, the planner's plan {makespan:.1} ns"));
    }
    Ok((best, config))
}

/// Runs `schedule-staging` on a case: per kernel its figures, and
/// `check-coherency` on the planned module.
fn run_planner(case: &Case) -> Planned {
    let text = case.text(&[]);
    let mut c = Compilation::parse(case.name, &text, None)
        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", case.name));
    c.run("schedule-staging")
        .unwrap_or_else(|e| panic!("{}: schedule-staging: {e}", case.name));
    let mut v = Vec::new();
    for ki in 0..case.kernels.len() {
        let (ms, lb) = simulate(&c, ki);
        let k = IrKernel::all(&c.module).swap_remove(ki);
        let plan = KernelPlan::read(&c.module, k.op).unwrap().unwrap();
        let acc: Vec<&str> = plan.accessors.iter().map(|a| a.name()).collect();
        let sizes: BTreeSet<u32> = plan.slots.iter().map(|s| s.bytes).collect();
        let sizes: Vec<String> = sizes.iter().map(|b| format!("{b} B")).collect();
        let (mut sdma, mut core) = (0, 0);
        for c in plan.copies() {
            if c.method == apir_ir::staging::Method::Dma {
                sdma += 1;
            } else {
                core += 1;
            }
        }
        let mut text = String::new();
        plan.print("", &mut text);
        v.push(PlannerRow {
            makespan: ms,
            bound: lb,
            summary: format!(
                "accessors [{}], buffers = {}, {} buffers ({}), {sdma} SDMA and {core} core copies",
                acc.join(", "),
                plan.depth,
                plan.slots.len(),
                sizes.join(", ")
            ),
            plan: text,
            in_space: planner_in_space(case, ki, &plan, ms),
        });
    }
    let check = c
        .run("check-coherency")
        .map(|_| ())
        .map_err(|e| e.to_string());
    (v, check)
}

/// A case's planner rows and `check-coherency` on its planned module.
type Planned = (Vec<PlannerRow>, Result<(), String>);

/// One unit of work of [`compute_results`].
#[derive(Clone, Copy)]
enum Job {
    /// The planner on case `ci`.
    Planner(usize),
    /// The oracle on kernel `ki` of case `ci`.
    Oracle(usize, usize),
}

fn compute_results() -> Results {
    let t0 = Instant::now();
    let cases = suite();
    let p = SimParams::default();
    // The planner per module and the oracle per kernel, on every core.
    let mut jobs: Vec<Job> = (0..cases.len()).map(Job::Planner).collect();
    for (ci, c) in cases.iter().enumerate() {
        jobs.extend((0..c.kernels.len()).map(|ki| Job::Oracle(ci, ki)));
    }
    let next = AtomicUsize::new(0);
    let planned: Mutex<BTreeMap<usize, Planned>> = Mutex::new(BTreeMap::new());
    let out: Mutex<BTreeMap<(usize, usize), (Winner, Stats)>> = Mutex::new(BTreeMap::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(&job) = jobs.get(j) else { break };
                let (ci, ki) = match job {
                    Job::Planner(ci) => {
                        let r = run_planner(&cases[ci]);
                        planned.lock().unwrap().insert(ci, r);
                        continue;
                    }
                    Job::Oracle(ci, ki) => (ci, ki),
                };
                let case = &cases[ci];
                let f = facts(case, &case.kernels[ki]);
                let mut s = Search {
                    case,
                    ki,
                    f: &f,
                    p,
                    best: None,
                    stats: Stats::default(),
                    exhaustive: false,
                };
                s.run();
                let w = s.best.clone().expect("the all-index plan is proved");
                out.lock().unwrap().insert((ci, ki), (w, s.stats));
            });
        }
    });
    let (planner, planner_checks): (Vec<Vec<PlannerRow>>, Vec<Result<(), String>>) =
        planned.into_inner().unwrap().into_values().unzip();
    let out = out.into_inner().unwrap();
    let mut rows = Vec::new();
    let mut module_checks = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        let mut plans: Vec<Option<&str>> = Vec::new();
        for ki in 0..case.kernels.len() {
            let (w, _) = &out[&(ci, ki)];
            plans.push(Some(&w.plan));
        }
        let text = case.text(&plans);
        let oracle_check = Compilation::parse(case.name, &text, None)
            .map_err(|e| e.to_string())
            .and_then(|mut c| {
                c.run("check-coherency")
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        module_checks.push((
            case.name.to_string(),
            oracle_check,
            planner_checks[ci].clone(),
        ));
        for (ki, k) in case.kernels.iter().enumerate() {
            let (w, stats) = &out[&(ci, ki)];
            let pr = planner[ci][ki].clone();
            let name = if case.kernels.len() == 1 {
                case.name.to_string()
            } else {
                format!("{}/@{}", case.name, k.name)
            };
            rows.push(Row {
                name,
                case: ci,
                kernel: ki,
                planner: pr.makespan,
                planner_bound: pr.bound,
                planner_accessors: pr.summary,
                planner_plan: pr.plan,
                planner_in_space: pr.in_space,
                oracle: w.clone(),
                stats: stats.clone(),
            });
        }
    }
    Results {
        rows,
        module_checks,
        secs: t0.elapsed().as_secs_f64(),
    }
}

fn table(r: &Results) -> String {
    let mut t = String::new();
    writeln!(
        t,
        "| kernel | planner ns | oracle ns | planner/oracle | bound ns | oracle/bound |"
    )
    .unwrap();
    writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: |").unwrap();
    for row in &r.rows {
        writeln!(
            t,
            "| {} | {:.1} | {:.1} | {:.3} | {:.1} | {:.3} |",
            row.name,
            row.planner,
            row.oracle.makespan,
            row.planner / row.oracle.makespan,
            row.oracle.lower_bound,
            row.oracle.makespan / row.oracle.lower_bound
        )
        .unwrap();
    }
    t
}

const GOAL: f64 = 1.05;

#[test]
fn oracle_plans_are_proved_and_bounded() {
    let r = results();
    let mut problems = Vec::new();
    for row in &r.rows {
        let s = &row.stats;
        for m in &s.rejected {
            problems.push(format!(
                "{}: check-coherency rejected an oracle plan: {m}",
                row.name
            ));
        }
        for m in &s.mismatched {
            problems.push(format!("{}: timing mismatch: {m}", row.name));
        }
        if row.oracle.makespan < row.oracle.lower_bound * (1.0 - 1e-9) {
            problems.push(format!(
                "{}: oracle makespan {} ns is below the kernel's lower bound {} ns",
                row.name, row.oracle.makespan, row.oracle.lower_bound
            ));
        }
        if row.planner < row.planner_bound * (1.0 - 1e-9) {
            problems.push(format!(
                "{}: planner makespan {} ns is below its plan's lower bound {} ns",
                row.name, row.planner, row.planner_bound
            ));
        }
    }
    for (name, oracle, planner) in &r.module_checks {
        if let Err(e) = oracle {
            problems.push(format!("{name}: the module with the oracle's plans: {e}"));
        }
        if let Err(e) = planner {
            problems.push(format!("{name}: the planner's plans: {e}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn planner_within_5_percent_of_oracle() {
    let r = results();
    let misses: Vec<&Row> = r
        .rows
        .iter()
        .filter(|row| row.planner > GOAL * row.oracle.makespan)
        .collect();
    if misses.is_empty() {
        return;
    }
    let mut t = String::new();
    writeln!(
        t,
        "{} of {} kernels miss planner makespan <= {GOAL} x oracle makespan:",
        misses.len(),
        r.rows.len()
    )
    .unwrap();
    writeln!(
        t,
        "| kernel | planner ns | oracle ns | planner/oracle | oracle plan | planner plan |"
    )
    .unwrap();
    writeln!(t, "| --- | ---: | ---: | ---: | --- | --- |").unwrap();
    for row in &misses {
        let planner = match &row.planner_in_space {
            Ok((_, config)) => config.clone(),
            Err(_) => row.planner_accessors.clone(),
        };
        writeln!(
            t,
            "| {} | {:.1} | {:.1} | {:.3} | {} | {planner} |",
            row.name,
            row.planner,
            row.oracle.makespan,
            row.planner / row.oracle.makespan,
            row.oracle.config
        )
        .unwrap();
    }
    assert!(misses.is_empty(), "{t}");
}

/// The comparison means something only if the oracle searches what the
/// planner does: every planner plan's configuration (accessors, buffer
/// count and tile length per group, the method of every copy) is one of
/// the oracle's candidates, and the oracle's builder times it no slower
/// than the simulator times the planner's plan. So the oracle's best is at
/// least as fast as the planner's, and a planner that found plan shapes
/// the oracle lacks would fail here rather than beat a weak reference.
#[test]
fn planner_plans_lie_in_the_oracle_space() {
    let r = results();
    let mut problems = Vec::new();
    for row in &r.rows {
        if let Err(e) = &row.planner_in_space {
            problems.push(format!("{}: {e} ({})", row.name, row.planner_accessors));
        }
        if row.planner < row.oracle.makespan * (1.0 - 1e-9) {
            problems.push(format!(
                "{}: the planner's plan ({:.1} ns) beats the oracle's ({:.1} ns, {})",
                row.name, row.planner, row.oracle.makespan, row.oracle.config
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn oracle_table() {
    if std::env::var("APIR_ORACLE_TABLE").as_deref() != Ok("1") {
        return;
    }
    let r = results();
    let mut t = String::from(
        "\n== staging oracle: planner (schedule-staging, default options) vs oracle\n",
    );
    t.push_str(&table(r));
    t.push_str("\n== oracle's winning configurations (groups: owner access first)\n");
    for row in &r.rows {
        writeln!(t, "{}: {}", row.name, row.oracle.config).unwrap();
        writeln!(t, "  planner: {}", row.planner_accessors).unwrap();
        match &row.planner_in_space {
            Ok((ns, config)) => writeln!(
                t,
                "  in the oracle's space: {config} ({ns:.1} ns by the oracle's builder)"
            ),
            Err(e) => writeln!(
                t,
                "  planner's configuration outside the oracle's space: {e}"
            ),
        }
        .unwrap();
    }
    t.push_str("\n== search size per kernel\n");
    writeln!(
        t,
        "| kernel | subsets | options per group | space | nodes | timed | proved | s |"
    )
    .unwrap();
    writeln!(t, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |").unwrap();
    for row in &r.rows {
        let s = &row.stats;
        writeln!(
            t,
            "| {} | {} | {:?} | {:.3e} | {} | {} | {} | {:.2} |",
            row.name, s.subsets, s.options, s.space, s.nodes, s.timed, s.checked, s.secs
        )
        .unwrap();
    }
    writeln!(t, "total {:.1} s", r.secs).unwrap();
    if std::env::var("APIR_ORACLE_PLANS").as_deref() == Ok("1") {
        t.push_str("\n== oracle's winning plans, and the planner's\n");
        for row in &r.rows {
            writeln!(t, "-- {} (oracle)\n{}", row.name, row.oracle.plan).unwrap();
            writeln!(t, "-- {} (planner)\n{}", row.name, row.planner_plan).unwrap();
        }
    }
    println!("{t}");
}

/// The bound the search prunes with holds for every candidate the builder
/// makes, and pruning loses nothing: on kernels small enough to time every
/// candidate within the budget, the exhaustive search finds the same best.
#[test]
fn bound_is_sound_and_pruning_loses_nothing() {
    let p = SimParams::default();
    let cases = suite();
    let mut problems = Vec::new();
    // The exhaustive searches first: they run while the other tests'
    // shared results are computed.
    let mut found = Vec::new();
    for name in EXHAUSTIVE {
        let case = cases
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no case {name}"));
        let f = facts(case, &case.kernels[0]);
        let mut s = Search {
            case,
            ki: 0,
            f: &f,
            p,
            best: None,
            stats: Stats::default(),
            exhaustive: true,
        };
        s.run();
        problems.extend(
            s.stats
                .bound_violations
                .iter()
                .map(|v| format!("{name}: {v}")),
        );
        problems.extend(
            s.stats
                .rejected
                .iter()
                .map(|v| format!("{name}: rejected: {v}")),
        );
        let best = s.best.expect("the all-index plan is proved");
        found.push((name, best, s.stats.timed));
    }
    let r = results();
    for (name, best, timed) in found {
        let row = r.rows.iter().find(|row| row.name == name).unwrap();
        if (best.makespan - row.oracle.makespan).abs() > 1e-6 * best.makespan {
            problems.push(format!(
                "{name}: exhaustive best {} ns ({}), pruned search {} ns ({})",
                best.makespan, best.config, row.oracle.makespan, row.oracle.config
            ));
        }
        if std::env::var("APIR_ORACLE_TABLE").as_deref() == Ok("1") {
            println!(
                "exhaustive {name}: {timed} candidates timed, best {:.1} ns",
                best.makespan
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The kernels `bound_is_sound_and_pruning_loses_nothing` searches without
/// pruning.
const EXHAUSTIVE: [&str; 5] = [
    "contig_f16_256_c2",
    "strided_rows_u8_c8",
    "inplace_reversed_f32_c2",
    "mixed_u8_to_f32_c4",
    "tiny_inplace_u8_c2",
];

/// `check-coherency` does not accept just anything the oracle writes: each
/// oracle plan with one of its waits removed (the first, a middle one, the
/// last; the builder emits no wait another one implies) is rejected.
#[test]
fn oracle_plans_without_a_wait_are_rejected() {
    let r = results();
    let cases = suite();
    let mut problems = Vec::new();
    let mut tried = 0;
    for row in &r.rows {
        let case = &cases[row.case];
        let lines: Vec<&str> = row.oracle.plan.lines().collect();
        let waits: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with("sdma.wait"))
            .collect();
        let Some(&last) = waits.last() else { continue };
        let mut drop: Vec<usize> = vec![waits[0], waits[waits.len() / 2], last];
        drop.dedup();
        for d in drop {
            let plan: String = lines
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != d)
                .map(|(_, l)| format!("{l}\n"))
                .collect();
            let mut plans: Vec<Option<&str>> = vec![None; case.kernels.len()];
            plans[row.kernel] = Some(&plan);
            let text = case.text(&plans);
            tried += 1;
            let mut c = Compilation::parse(case.name, &text, None)
                .unwrap_or_else(|e| panic!("{}: {e}", row.name));
            if c.run("check-coherency").is_ok() {
                problems.push(format!(
                    "{}: accepted without `{}` (line {d} of the plan)",
                    row.name, lines[d]
                ));
            }
        }
    }
    assert!(tried > 20, "only {tried} mutants");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
