//! A lower bound on the makespan of every plan of a kernel under the cost
//! model, whatever its accessors, methods, buffers and tiles.
//!
//! Each access must have its bytes moved (or be indexed: `index_ns` per
//! element on the core). Moving them takes at least `copies` copies and
//! `bytes` bytes, where
//! - `bytes` is the access's footprint (each touched byte once);
//! - `copies` is at least the footprint's runs, split at the 64 KiB
//!   descriptor limit and at the budget; and, for an access that touches
//!   each element once, at least `R + cut`: a tile's copies are its runs,
//!   and `sum of runs = E - (adjacent touched pairs within one tile)`. The
//!   adjacent pairs are `E - R` in all (`R`: footprint runs); a dim whose
//!   step is one element pairs iteration `i` with `i + s` (its iteration
//!   stride), and in every block of `L = s * (n - 1)` consecutive such
//!   iterations each tile boundary cuts `s` pairs, so tiles of `T <= Tmax`
//!   iterations (a buffer holds at most `budget / element size` of them)
//!   cut at least `s * floor((L - s) / Tmax)` pairs a block (all `L` when
//!   `Tmax <= s`). A transposed walk is many short runs per tile.
//!
//! An SDMA copy takes at least `dma_fixed_ns + bytes / bandwidth` of its
//! ring (M2S for reads, S2M for writes); a core copy the VEC_MEMCPY or
//! C_MEMCPY equivalent of the core. The bound is the least `M` such that
//! the copies' work, split between ring and core in any proportion (a
//! relaxation: fractional, copies and bytes split independently), fits
//! `M` on each ring and `M - compute - forced indexing` on the core. Reads
//! and writes of one written tensor that could share an in-place group
//! count their union: reads as the largest read, writes as their sum, and
//! copies only from the 64 KiB / budget split. A tensor with an access
//! hinted `index` is indexed whole (every valid plan does so).

use super::footprint::{Footprint, Repeat, Sweep, MAX_FOOTPRINT_RUNS};
use super::layout::tensors;
use apir_ir::staging::{method_name, Accessor, Kernel, Method, SimParams};
use apir_ir::target::sdma::MAX_DESCRIPTOR_BYTES;
use apir_ir::Module;

/// The least time one access's bytes can move, alone, under the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessBound {
    /// Nanoseconds: the least of indexing, SDMA and core copies.
    pub least_ns: f64,
    /// `index`, `dma`, `vec` or `c`.
    pub by: &'static str,
    /// Copies at least (when staged).
    pub copies: u64,
    /// Bytes at least (when staged).
    pub bytes: u64,
}

/// A kernel's lower bound and its parts.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// The bound, ns.
    pub ns: f64,
    /// Compute alone, ns.
    pub compute_ns: f64,
    /// Core time at the bound (compute, indexing, core copies), ns; at
    /// most `ns`.
    pub core_ns: f64,
    /// M2S ring time at the bound, ns; at most `ns`.
    pub m2s_ns: f64,
    /// S2M ring time at the bound, ns; at most `ns`.
    pub s2m_ns: f64,
    /// Per access, in body order.
    pub accesses: Vec<AccessBound>,
}

/// Work that moves one way or the other.
#[derive(Clone, Copy, Debug)]
struct Piece {
    write: bool,
    ring: f64,
    core: f64,
}

/// The least copies and bytes of one access staged alone.
/// `runs_left` is the kernel's budget of footprint runs to enumerate
/// (shared by its accesses); past it an access counts one run.
fn least_moves(s: &Sweep, elements: u64, budget: u64, runs_left: &mut u64) -> (u64, u64) {
    let w = s.elem_bytes().max(1);
    let limit = budget.clamp(1, u64::from(MAX_DESCRIPTOR_BYTES));
    let injective = s.repeated_byte(0) == Repeat::Never;
    let fp = s.footprint(*runs_left);
    if let Footprint::Exact(r) = &fp {
        *runs_left = runs_left.saturating_sub(r.len() as u64);
    }
    let (runs, fp_bytes, split) = match &fp {
        Footprint::Exact(r) => (
            r.len() as u64,
            r.iter().map(|x| x.len_u64()).sum::<u64>(),
            r.iter().map(|x| x.len_u64().div_ceil(limit)).sum::<u64>(),
        ),
        _ => (1, 0, 1),
    };
    let bytes = if injective {
        elements.saturating_mul(w)
    } else {
        fp_bytes.max(w)
    };
    let mut copies = split.max(bytes.div_ceil(limit)).max(runs);
    if injective {
        let tmax = (budget / w).max(1);
        let cut = s
            .unit_dims()
            .into_iter()
            .map(|(stride, n)| {
                let block = stride.saturating_mul(n);
                let blocks = elements / block.max(1);
                let l = stride.saturating_mul(n - 1);
                let per = if tmax <= stride {
                    l
                } else {
                    stride.saturating_mul(l.saturating_sub(stride) / tmax)
                };
                blocks.saturating_mul(per)
            })
            .max()
            .unwrap_or(0);
        copies = copies.max(runs.saturating_add(cut));
    }
    (copies, bytes)
}

/// The lower bound of `kernel` under `p`. Accesses hinted `index` are
/// indexed; accesses hinted `stream`/`tcm` are staged.
pub fn kernel_bound(m: &Module, kernel: &Kernel, p: &SimParams) -> Bound {
    let e = kernel.elements;
    let sweeps = Sweep::of_kernel(m, kernel);
    let labels = tensors(m, kernel);
    let fd = p.dma_fixed_ns as f64;
    let bwd = p.dma_bytes_per_us as f64 / 1000.0;
    let fcore = p.vec_fixed_ns.min(p.c_fixed_ns) as f64;
    let bwcore = p.vec_bytes_per_us.max(p.c_bytes_per_us) as f64 / 1000.0;
    let core_method = if p.c_fixed_ns < p.vec_fixed_ns && p.c_bytes_per_us >= p.vec_bytes_per_us {
        Method::CMemcpy
    } else {
        Method::VecMemcpy
    };
    let index = e as f64 * p.index_ns as f64;
    let compute = e as f64 * kernel.cycles_per_element as f64 * 1000.0 / p.clock_mhz as f64;
    let mut runs_left = MAX_FOOTPRINT_RUNS;
    let moves: Vec<(u64, u64)> = sweeps
        .iter()
        .map(|s| least_moves(s, e, p.budget, &mut runs_left))
        .collect();
    // Per access, alone.
    let accesses: Vec<AccessBound> = moves
        .iter()
        .map(|&(c, b)| {
            let dma = fd * c as f64 + b as f64 / bwd;
            let core = fcore * c as f64 + b as f64 / bwcore;
            let (least_ns, by) = [
                (index, "index"),
                (dma, method_name(Method::Dma)),
                (core, method_name(core_method)),
            ]
            .into_iter()
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .unwrap_or((index, "index"));
            AccessBound {
                least_ns,
                by,
                copies: c,
                bytes: b,
            }
        })
        .collect();
    // Items: one per access, or per direction of a written tensor with
    // several accesses (its staged accesses may share one group).
    let n_tensors = labels.iter().max().map_or(0, |l| l + 1);
    let mut members = vec![0usize; n_tensors];
    let mut written = vec![false; n_tensors];
    for (i, &t) in labels.iter().enumerate() {
        members[t] += 1;
        written[t] |= kernel.accesses[i].write;
    }
    let shared: Vec<bool> = (0..n_tensors)
        .map(|t| members[t] > 1 && written[t])
        .collect();
    let limit = p.budget.clamp(1, u64::from(MAX_DESCRIPTOR_BYTES));
    // A tensor one of whose accesses is hinted `index` (and none staged)
    // is indexed whole: buffered and unbuffered accessors of one tensor are
    // never compatible.
    let mut indexed = vec![false; n_tensors];
    let mut staged = vec![false; n_tensors];
    for (i, a) in kernel.accesses.iter().enumerate() {
        indexed[labels[i]] |= a.hint == Some(Accessor::Index);
        staged[labels[i]] |= a.hint.is_some_and(|h| h.is_buffered());
    }
    for (x, s) in indexed.iter_mut().zip(&staged) {
        *x &= !s;
    }
    let hint_of = |i: usize| {
        if indexed[labels[i]] {
            Some(Accessor::Index)
        } else {
            kernel.accesses[i].hint
        }
    };
    // (write, copies, bytes, accesses, hint)
    let mut items: Vec<(bool, u64, u64, u64, Option<Accessor>)> = Vec::new();
    for (i, a) in kernel.accesses.iter().enumerate() {
        if !shared[labels[i]] {
            items.push((a.write, moves[i].0, moves[i].1, 1, hint_of(i)));
        }
    }
    for t in (0..n_tensors).filter(|&t| shared[t]) {
        for write in [false, true] {
            let of: Vec<usize> = (0..labels.len())
                .filter(|&i| labels[i] == t && kernel.accesses[i].write == write)
                .collect();
            if of.is_empty() {
                continue;
            }
            let bytes = if write {
                of.iter()
                    .map(|&i| moves[i].1)
                    .fold(0u64, u64::saturating_add)
            } else {
                of.iter().map(|&i| moves[i].1).max().unwrap_or(0)
            };
            let hint = of.iter().find_map(|&i| hint_of(i));
            items.push((write, bytes.div_ceil(limit), bytes, of.len() as u64, hint));
        }
    }
    let mut fixed = 0.0;
    let mut pieces: Vec<Piece> = Vec::new();
    for (write, copies, bytes, n, hint) in items {
        let idx = index * n as f64;
        if hint == Some(Accessor::Index) {
            fixed += idx;
            continue;
        }
        let (rc, rb) = (fd * copies as f64, bytes as f64 / bwd);
        let (cc, cb) = (fcore * copies as f64, bytes as f64 / bwcore);
        let staged_core = cc + cb;
        let k = if hint.is_some() {
            staged_core
        } else {
            staged_core.min(idx)
        };
        let scale = if staged_core > 0.0 {
            k / staged_core
        } else {
            0.0
        };
        pieces.push(Piece {
            write,
            ring: rc,
            core: cc * scale,
        });
        pieces.push(Piece {
            write,
            ring: rb,
            core: cb * scale,
        });
    }
    // Pieces by the core time a ring nanosecond saves, best first.
    pieces.sort_by(|a, b| (b.core * a.ring).total_cmp(&(a.core * b.ring)));
    let split = |cap: f64| -> (f64, f64, f64) {
        let (mut core, mut ring) = (0.0, [0.0f64; 2]);
        for pc in &pieces {
            let r = &mut ring[usize::from(pc.write)];
            let room = (cap - *r).max(0.0);
            if pc.ring <= room {
                *r += pc.ring;
            } else {
                let f = if pc.ring > 0.0 { room / pc.ring } else { 1.0 };
                *r += room;
                core += pc.core * (1.0 - f);
            }
        }
        (compute + fixed + core, ring[0], ring[1])
    };
    let mut lo = compute + fixed;
    let mut hi = compute + fixed + pieces.iter().map(|p| p.core).sum::<f64>();
    for _ in 0..100 {
        if hi - lo <= 1e-9 * hi.max(1.0) {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if split(mid).0 <= mid {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The bound is `lo` (no `M` below it fits; `hi`, within 1e-9 of it,
    // may be above the least that does), the parts those of the split at
    // `hi`, which fits: each is held to the bound, so that no part is
    // ever above it (by up to 1e-9 of it, hundreds of ns on a long kernel).
    let (core_ns, m2s_ns, s2m_ns) = split(hi);
    Bound {
        ns: lo,
        compute_ns: compute,
        core_ns: core_ns.min(lo),
        m2s_ns: m2s_ns.min(lo),
        s2m_ns: s2m_ns.min(lo),
        accesses,
    }
}
