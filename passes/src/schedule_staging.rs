//! `schedule-staging`: plans every GpSimd kernel's HBM <-> dataram staging
//! (staging.md).
//!
//! Per kernel it
//! 1. chooses an accessor per access, per tensor (a connected component of
//!    HBM overlap among the buffers the kernel accesses,
//!    [`crate::staging::layout::tensors`]), so that the accesses of one
//!    tensor never mix buffered and unbuffered accessors and a written
//!    tensor's staged accesses share one group. An explicit `accessor` is
//!    honoured, or rejected when it cannot work: `stream` on an access that
//!    is not a contiguous in-order sweep (a stream copies storage order),
//!    `stream`/`tcm` on a tensor one of whose writes writes a byte twice (a
//!    staged write flushes each tile once). `auto` stages a tensor
//!    (`stream` for a contiguous sweep, `tcm` tiles otherwise and for
//!    in-place tensors) with SDMA or VEC_MEMCPY copies, or indexes it,
//!    whichever the cost model finds cheapest for the kernel as a whole
//!    (exhaustively over up to 729 combinations, else by coordinate
//!    descent); a tensor whose writes repeat a byte (or may: undecided
//!    within [`MAX_FOOTPRINT_RUNS`] runs) is indexed. First, while the
//!    staging does not fit the budget or the copy limit
//!    (`schedule-staging{max-copies=N}`, [`DEFAULT_MAX_COPIES`]), `auto`
//!    tensors are indexed, last first (the longest staged prefix that fits
//!    is found by bisection); a forced staging that does not fit is an
//!    error naming the budget or the limit. The plan is then simulated
//!    against the same kernel with the `auto` tensors indexed, and the
//!    faster one is kept, so `auto` never loses to per-element indexing;
//! 2. sizes and places the buffers, 64-byte aligned, from the start of the
//!    dataram window: `pipelined` gives a group whose whole iteration space
//!    fits one buffer exactly that one buffer, and splits the budget evenly
//!    between the `buffers` (N) buffers of every other group (one more for an
//!    in-place group, whose buffer is refilled only after its flush), with
//!    balanced tiles; `reference` gives each group one 4 KiB buffer, as the
//!    reference stream does, and streams only accesses that sweep their
//!    whole tensor from element 0 (what the runtime's stream does). A group
//!    that cannot get buffers of [`MIN_BUFFER_BYTES`] (or the whole kernel's
//!    bytes, if fewer) is an error naming the budget and the need;
//! 3. emits the steps in issue order (see [`super::staging::layout`] for the
//!    tile contract): loads run `N` tiles ahead of the compute, flushes
//!    follow each tile, a buffer is written again only after its flush
//!    completed, a tile that reads bytes an earlier tile of its group wrote
//!    is loaded only after that flush completed, and every outstanding copy
//!    is waited for at the end. `reference` waits for every copy as soon as
//!    it is issued (the runtime's `neuron_memcpy` is synchronous).
//!
//! A misspelt kernel or access attribute (`acessor`) draws a warning.

use crate::check_coherency::incompatible;
use crate::staging::footprint::{Repeat, Run, Sweep, MAX_FOOTPRINT_RUNS};
use crate::staging::layout::{
    groups, reads_after_writes, tensors, tile_iterations, Group, TileLayout,
};
use crate::staging::sim::{core_copy_ns, dma_ns, iteration_ns, Schedule};
use apir_ir::staging::{
    Accessor, Copy, Dir, Kernel, KernelPlan, Method, Policy, SimParams, Slot, Step,
};
use apir_ir::target::abi::BUFFER_SIZE_BYTES;
use apir_ir::target::sdma::{DATARAM_BASE, MAX_DESCRIPTOR_BYTES};
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, Pass, PassContext};

/// The reference stream's buffer (`BUFFER_SIZE_BYTES`).
const STREAM_BUFFER_BYTES: u64 = BUFFER_SIZE_BYTES as u64;

/// The smallest buffer `pipelined` plans with (project-defined): below it a
/// descriptor's fixed cost (1300 ns) is over 70 times its transfer time.
pub const MIN_BUFFER_BYTES: u64 = 512;

/// In an SDMA group, a copy of at most 1/`SMALL_COPY_FRACTION` of its
/// buffer that VEC_MEMCPY moves faster than SDMA goes by VEC_MEMCPY
/// (project-defined).
pub const SMALL_COPY_FRACTION: u64 = 8;

/// The method of one copy of `bytes` in a buffer of `buffer` bytes, in a
/// staging group whose method is `group`: in an SDMA group, a copy so small
/// that the DMA fixed cost dominates (at most 1/[`SMALL_COPY_FRACTION`] of
/// its buffer, and faster by VEC_MEMCPY) goes by VEC_MEMCPY, unless the
/// copies are synchronous (`reference`: the runtime always uses its default
/// method, DMA). The planner's cost model and its emitter both use it.
pub fn copy_method(p: &SimParams, group: Method, bytes: u64, buffer: u64, sync: bool) -> Method {
    let small = bytes * SMALL_COPY_FRACTION <= buffer
        && core_copy_ns(p, Method::VecMemcpy, bytes) < dma_ns(p, bytes);
    if group == Method::Dma && small && !sync {
        Method::VecMemcpy
    } else {
        group
    }
}

/// Buffers are placed at multiples of this many bytes (project-defined).
pub const BUFFER_ALIGN: u64 = 64;

/// The SDMA queue staging copies use on each core's engine (project-defined:
/// each core drives its own engine; the ring gives the direction).
pub const STAGING_QUEUE: u8 = 0;

/// The pass and its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleStaging {
    /// Policy.
    pub policy: Policy,
    /// Buffers per staging group for `pipelined`.
    pub depth: u32,
    /// Simulator parameters (also recorded in each plan).
    pub params: SimParams,
    /// The most copies one kernel's plan may take
    /// ([`DEFAULT_MAX_COPIES`] unless set).
    pub max_copies: u64,
}

impl Default for ScheduleStaging {
    fn default() -> Self {
        ScheduleStaging {
            policy: Policy::Pipelined,
            depth: 2,
            params: SimParams::default(),
            max_copies: DEFAULT_MAX_COPIES,
        }
    }
}

impl Pass for ScheduleStaging {
    fn name(&self) -> &'static str {
        "schedule-staging"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut diags = Diagnostics::new();
        let mut plans = Vec::new();
        for kernel in Kernel::all(m) {
            misspelt_attrs(m, &kernel, cx);
            if kernel.accesses.is_empty() {
                continue;
            }
            match self.plan(m, &kernel) {
                Ok(plan) => plans.push((kernel.op, plan)),
                Err(d) => diags.extend(d),
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let changed = if plans.is_empty() {
            Changed::No
        } else {
            Changed::Yes
        };
        for (op, plan) in plans {
            cx.count("kernels-planned", "kernels given a staging plan", 1);
            for a in &plan.accessors {
                let (name, what) = match a {
                    Accessor::Stream => ("accesses-streamed", "accesses staged as a stream"),
                    Accessor::Tcm => ("accesses-tiled", "accesses staged in TCM tiles"),
                    Accessor::Index => ("accesses-indexed", "accesses left unbuffered"),
                };
                cx.count(name, what, 1);
            }
            let (dma, core) = plan.copies().fold((0, 0), |(d, c), x| {
                if x.method == Method::Dma {
                    (d + 1, c)
                } else {
                    (d, c + 1)
                }
            });
            cx.count("sdma-copies", "SDMA copies emitted", dma);
            cx.count("core-copies", "VEC_MEMCPY / C_MEMCPY copies emitted", core);
            plan.write(m, op);
        }
        Ok(changed)
    }
}

/// The candidate treatment of one tensor under `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Treatment {
    Staged(Method),
    Index,
}

/// One tensor (HBM buffer) of a kernel and its accesses.
struct Tensor {
    accesses: Vec<usize>,
    /// Whether `auto` may choose (no access carries a hint deciding it).
    free: bool,
    written: bool,
    candidates: Vec<Treatment>,
}

impl ScheduleStaging {
    /// Plans one kernel.
    pub fn plan(&self, m: &Module, kernel: &Kernel) -> Result<KernelPlan, Diagnostics> {
        let sweeps: Vec<Sweep> = kernel
            .accesses
            .iter()
            .map(|a| Sweep::of(m, a.buffer, &a.ap))
            .collect();
        let mut diags = Diagnostics::new();
        for (a, s) in kernel.accesses.iter().zip(&sweeps) {
            if a.hint == Some(Accessor::Stream) && !s.is_contiguous() {
                diags.push(Diagnostic::error(
                    a.span,
                    "accessor \"stream\" needs a contiguous in-order sweep, and this access is not one: a stream copies storage order (iteration e at start + e), not the access's order, so it would move the wrong elements; use \"tcm\" or \"index\"",
                ));
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let labels = tensors(m, kernel);
        self.plan_with_tensors(m, kernel, &sweeps, &labels)
    }

    /// Plans one kernel whose accesses belong to the tensors `labels` (one
    /// label per access, as [`tensors`] gives them; a test may pass others
    /// to model a planner that groups wrongly).
    pub fn plan_with_tensors(
        &self,
        m: &Module,
        kernel: &Kernel,
        sweeps: &[Sweep],
        labels: &[usize],
    ) -> Result<KernelPlan, Diagnostics> {
        let tensors = self.tensors(m, kernel, sweeps, labels)?;
        let cx = Cx {
            m,
            kernel,
            sweeps,
            tensors: &tensors,
            labels,
        };
        let mut choice: Vec<Treatment> = tensors.iter().map(|t| t.candidates[0]).collect();
        // The cheapest *legal* choice: when the staging does not fit the
        // budget or the copy limit, `auto` indexes free staged tensors, the
        // last first; a forced staging that does not fit is an error. The
        // longest prefix of free staged tensors that fits is found by
        // bisection (fewer staged tensors never need more room or copies).
        let free: Vec<usize> = (0..tensors.len())
            .filter(|&i| tensors[i].free && choice[i] != Treatment::Index)
            .collect();
        let with = |keep: usize| -> Vec<Treatment> {
            let mut c = choice.clone();
            for &i in &free[keep..] {
                c[i] = Treatment::Index;
            }
            c
        };
        if let Err(e) = self.fitted(&cx, &choice) {
            if let Err(e0) = self.fitted(&cx, &with(0)) {
                return Err(if free.is_empty() { e } else { e0 });
            }
            // Invariant: `lo` staged free tensors fit, `hi` do not.
            let (mut lo, mut hi) = (0, free.len());
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if self.fitted(&cx, &with(mid)).is_ok() {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            choice = with(lo);
        }
        if self.policy == Policy::Pipelined {
            // Tensors the budget or the limit forced to indexing stay so.
            let allowed: Vec<Vec<Treatment>> = tensors
                .iter()
                .zip(&choice)
                .map(|(t, &c)| {
                    if c == Treatment::Index {
                        vec![Treatment::Index]
                    } else {
                        t.candidates.clone()
                    }
                })
                .collect();
            choice = self.choose(kernel, sweeps, &tensors, labels, &allowed);
        }
        // Every valid kernel is planned: a free tensor whose chosen
        // accessors the reference's matrix would reject is indexed instead
        // (a hinted one is left for check-coherency to report).
        let acc = self.accessors(kernel, sweeps, &tensors, &choice);
        for (ti, t) in tensors.iter().enumerate() {
            let staged = t
                .accesses
                .iter()
                .filter(|&&i| acc[i].0.is_buffered())
                .count();
            if !t.free || (!t.written && (staged == 0 || staged == t.accesses.len())) {
                continue; // readers only, all staged or all indexed: compatible
            }
            let clash = t.accesses.iter().enumerate().any(|(n, &j)| {
                t.accesses[..n].iter().any(|&i| {
                    let (a, b) = (&kernel.accesses[i], &kernel.accesses[j]);
                    incompatible(a.write, acc[i].0, b.write, acc[j].0).is_some()
                })
            });
            if clash {
                choice[ti] = Treatment::Index;
            }
        }
        let plan = self.build(&cx, &choice)?;
        // Auto never loses to indexing: compare with the free tensors indexed.
        let indexed: Vec<Treatment> = tensors
            .iter()
            .zip(&choice)
            .map(|(t, &c)| if t.free { Treatment::Index } else { c })
            .collect();
        if self.policy == Policy::Pipelined && indexed != choice {
            if let Ok(alt) = self.build(&cx, &indexed) {
                let a = Schedule::run(kernel, &plan).figures.makespan_ns;
                let b = Schedule::run(kernel, &alt).figures.makespan_ns;
                if b < a {
                    return Ok(alt);
                }
            }
        }
        Ok(plan)
    }

    fn tensors(
        &self,
        m: &Module,
        kernel: &Kernel,
        sweeps: &[Sweep],
        labels: &[usize],
    ) -> Result<Vec<Tensor>, Diagnostics> {
        let n = labels.iter().max().map_or(0, |l| l + 1);
        let mut out: Vec<Tensor> = (0..n)
            .map(|_| Tensor {
                accesses: Vec::new(),
                free: true,
                written: false,
                candidates: Vec::new(),
            })
            .collect();
        for (i, &l) in labels.iter().enumerate() {
            out[l].accesses.push(i);
        }
        let mut diags = Diagnostics::new();
        let mut rows_left = MAX_FOOTPRINT_RUNS;
        for t in &mut out {
            let acc = &kernel.accesses;
            t.written = t.accesses.iter().any(|&i| acc[i].write);
            let hints: Vec<Accessor> = t.accesses.iter().filter_map(|&i| acc[i].hint).collect();
            t.free = hints.is_empty();
            let staged_hint = hints.iter().any(|h| h.is_buffered());
            let index_hint = hints.contains(&Accessor::Index);
            // A write that writes some byte twice (a reduction into one
            // element, say) is deterministic when done in iteration order,
            // but a staged write flushes each tile once: the byte would be
            // copied out once per tile. Such tensors are indexed, and so are
            // those whose writes cannot be shown to write each byte once
            // within the footprint limit (shared by the kernel's writes, so
            // many large writes cannot each enumerate millions of rows).
            let repeated = t.accesses.iter().find_map(|&i| {
                if !acc[i].write {
                    return None;
                }
                // Decided without enumerating (a broadcast, nested dims), or
                // by enumerating its rows from the shared budget.
                let r = match sweeps[i].repeated_byte(0) {
                    Repeat::Unknown => {
                        let r = sweeps[i].repeated_byte(rows_left);
                        rows_left = rows_left.saturating_sub(sweeps[i].rows(kernel.elements));
                        r
                    }
                    decided => decided,
                };
                match r {
                    Repeat::Never => None,
                    Repeat::At(at) => Some(Some(at)),
                    Repeat::Unknown => Some(None),
                }
            });
            if let (Some(at), true) = (repeated, staged_hint) {
                let i = t
                    .accesses
                    .iter()
                    .copied()
                    .find(|&i| acc[i].hint.is_some_and(|h| h.is_buffered()))
                    .unwrap_or(t.accesses[0]);
                let name = acc[i].hint.map_or("tcm", |h| h.name());
                diags.push(Diagnostic::error(
                    acc[i].span,
                    match at {
                        Some(at) => format!(
                            "accessor \"{name}\" cannot stage this tensor: a write to it writes HBM byte {at:#x} more than once, and a staged write copies each tile out once, so that byte would be flushed once per tile; use \"index\""
                        ),
                        None => format!(
                            "accessor \"{name}\" cannot stage this tensor: whether a write to it writes some byte twice cannot be decided within {MAX_FOOTPRINT_RUNS} runs, and a staged write must write each byte once; use \"index\""
                        ),
                    },
                ));
                continue;
            }
            let shared = t.written && t.accesses.len() > 1;
            t.candidates = match self.policy {
                Policy::Reference => {
                    // The runtime's own choice: a stream sweeps a whole
                    // tensor from its first element; anything else, and an
                    // in-place tensor (its enforcer refuses a stream writer
                    // beside any other accessor), takes the unbuffered
                    // accessor. Hints are honoured.
                    let whole = t.accesses.iter().all(|&i| {
                        let b = &m.buffers[acc[i].buffer];
                        acc[i].hint.is_some()
                            || (sweeps[i].is_contiguous()
                                && acc[i].ap.offset == 0
                                && b.elements() == Some(kernel.elements))
                    });
                    if index_hint || repeated.is_some() || (!staged_hint && (shared || !whole)) {
                        vec![Treatment::Index]
                    } else {
                        vec![Treatment::Staged(Method::Dma)]
                    }
                }
                Policy::Pipelined if repeated.is_some() || (index_hint && !staged_hint) => {
                    vec![Treatment::Index]
                }
                Policy::Pipelined if staged_hint => {
                    vec![
                        Treatment::Staged(Method::Dma),
                        Treatment::Staged(Method::VecMemcpy),
                    ]
                }
                Policy::Pipelined => vec![
                    Treatment::Staged(Method::Dma),
                    Treatment::Staged(Method::VecMemcpy),
                    Treatment::Index,
                ],
            };
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        Ok(out)
    }

    /// The accessor of each access under a per-tensor treatment.
    fn accessors(
        &self,
        kernel: &Kernel,
        sweeps: &[Sweep],
        tensors: &[Tensor],
        choice: &[Treatment],
    ) -> Vec<(Accessor, Method)> {
        let mut out = vec![(Accessor::Index, Method::Dma); kernel.accesses.len()];
        for (t, &c) in tensors.iter().zip(choice) {
            for &i in &t.accesses {
                let a = &kernel.accesses[i];
                out[i] = match (a.hint, c) {
                    (Some(h), Treatment::Staged(m)) => (h, m),
                    (Some(h), Treatment::Index) => (h, Method::Dma),
                    (None, Treatment::Index) => (Accessor::Index, Method::Dma),
                    (None, Treatment::Staged(m)) => {
                        let shared = t.written && t.accesses.len() > 1;
                        if self.policy == Policy::Reference && !sweeps[i].is_contiguous() && !shared
                        {
                            (Accessor::Index, m)
                        } else if sweeps[i].is_contiguous() && !shared {
                            (Accessor::Stream, m)
                        } else {
                            (Accessor::Tcm, m)
                        }
                    }
                };
            }
        }
        out
    }

    /// Picks the cheapest treatment per free tensor under the cost model.
    fn choose(
        &self,
        kernel: &Kernel,
        sweeps: &[Sweep],
        tensors: &[Tensor],
        labels: &[usize],
        allowed: &[Vec<Treatment>],
    ) -> Vec<Treatment> {
        let p = &self.params;
        // Tile sizes as if every tensor allowed to be staged were: the
        // smallest tiles (the budget and the copy limit have been checked
        // for them).
        let staged: Vec<Treatment> = allowed.iter().map(|c| c[0]).collect();
        let acc = self.accessors(kernel, sweeps, tensors, &staged);
        let accessors: Vec<Accessor> = acc.iter().map(|a| a.0).collect();
        let gs = groups(kernel, sweeps, &accessors, labels);
        let sizes = self.sizes(kernel, &gs);
        // Per group, for each method a staged tensor may use: (m2s ns, s2m
        // ns, core ns, fill + drain ns), from one walk over its tiles.
        const METHODS: [Method; 2] = [Method::Dma, Method::VecMemcpy];
        let group_cost = |gi: usize| -> [[f64; 4]; 2] {
            let g = &gs[gi];
            let ti_n = sizes.tiles[gi];
            let tiles = kernel.elements.div_ceil(ti_n);
            let buffer = ti_n * g.bytes_per_iteration;
            let mut v = [[0.0f64; 4]; 2];
            let mut first_load = [None; 2];
            let mut last_flush = [0.0f64; 2];
            for k in 0..tiles {
                let e0 = k * ti_n;
                let l = TileLayout::new(kernel, sweeps, g, e0, (e0 + ti_n).min(kernel.elements));
                for (mi, &method) in METHODS.iter().enumerate() {
                    for (runs, lane) in [(&l.reads, 0usize), (&l.writes, 1usize)] {
                        // Ring time of this tile's SDMA copies.
                        let mut ring = 0.0;
                        for r in runs {
                            let len = r.len_u64();
                            match copy_method(p, method, len, buffer, false) {
                                Method::Dma => ring += dma_ns(p, len),
                                m => v[mi][2] += core_copy_ns(p, m, len),
                            }
                        }
                        v[mi][lane] += ring;
                        if lane == 0 && first_load[mi].is_none() {
                            first_load[mi] = Some(ring);
                        }
                        if lane == 1 {
                            last_flush[mi] = ring;
                        }
                    }
                }
            }
            for mi in 0..2 {
                v[mi][3] += first_load[mi].unwrap_or(0.0) + last_flush[mi];
            }
            v
        };
        // The groups of each tensor (a group's accesses are of one tensor).
        let mut of_tensor: Vec<Vec<usize>> = vec![Vec::new(); tensors.len()];
        for (gi, g) in gs.iter().enumerate() {
            of_tensor[labels[g.accesses[0]]].push(gi);
        }
        let table: Vec<Vec<(Treatment, [f64; 4])>> = allowed
            .iter()
            .enumerate()
            .map(|(ti, cands)| {
                let staged = cands.iter().any(|c| matches!(c, Treatment::Staged(_)));
                let mut per_method = [[0.0f64; 4]; 2];
                if staged {
                    for &gi in &of_tensor[ti] {
                        let c = group_cost(gi);
                        for mi in 0..2 {
                            for x in 0..4 {
                                per_method[mi][x] += c[mi][x];
                            }
                        }
                    }
                }
                cands
                    .iter()
                    .map(|&c| {
                        let v = match c {
                            Treatment::Index => [
                                0.0,
                                0.0,
                                kernel.elements as f64
                                    * p.index_ns as f64
                                    * tensors[ti].accesses.len() as f64,
                                0.0,
                            ],
                            Treatment::Staged(m) => {
                                per_method[METHODS.iter().position(|&x| x == m).unwrap_or(0)]
                            }
                        };
                        (c, v)
                    })
                    .collect()
            })
            .collect();
        let compute = kernel.elements as f64 * iteration_ns(p, kernel.cycles_per_element, 0);
        let estimate = |pick: &[usize]| {
            let mut s = [0.0f64; 4];
            for (ti, &k) in pick.iter().enumerate() {
                for (x, y) in s.iter_mut().zip(table[ti][k].1) {
                    *x += y;
                }
            }
            s[0].max(s[1]).max(s[2] + compute) + s[3]
        };
        let combos: u64 = table.iter().map(|c| c.len() as u64).product();
        let mut pick = vec![0usize; tensors.len()];
        if combos <= 729 {
            let mut best = (estimate(&pick), pick.clone());
            let mut cur = vec![0usize; tensors.len()];
            'outer: loop {
                let e = estimate(&cur);
                if e < best.0 {
                    best = (e, cur.clone());
                }
                for i in 0..cur.len() {
                    cur[i] += 1;
                    if cur[i] < table[i].len() {
                        continue 'outer;
                    }
                    cur[i] = 0;
                }
                break;
            }
            pick = best.1;
        } else {
            // Coordinate descent from "all staged by SDMA", on running sums
            // (each move is O(1)), over the tensors that have a choice, for
            // at most 64 rounds.
            let score = |s: &[f64; 4]| s[0].max(s[1]).max(s[2] + compute) + s[3];
            let mut sum = [0.0f64; 4];
            for (ti, &k) in pick.iter().enumerate() {
                for (x, y) in sum.iter_mut().zip(table[ti][k].1) {
                    *x += y;
                }
            }
            let mut best = score(&sum);
            let choosers: Vec<usize> = (0..pick.len()).filter(|&i| table[i].len() > 1).collect();
            for _ in 0..64 {
                let mut improved = false;
                for &i in &choosers {
                    for k in 0..table[i].len() {
                        if k == pick[i] {
                            continue;
                        }
                        let mut s2 = sum;
                        for (x, (new, old)) in s2
                            .iter_mut()
                            .zip(table[i][k].1.iter().zip(table[i][pick[i]].1))
                        {
                            *x += new - old;
                        }
                        let e = score(&s2);
                        if e < best {
                            best = e;
                            sum = s2;
                            pick[i] = k;
                            improved = true;
                        }
                    }
                }
                if !improved {
                    break;
                }
            }
        }
        pick.iter()
            .enumerate()
            .map(|(i, &k)| table[i][k].0)
            .collect()
    }

    /// Tile lengths for `groups`: the budget is split evenly between the
    /// buffers of groups that need more than one tile; a group whose whole
    /// iteration space fits one buffer gets one buffer of just that size.
    /// Tiles are balanced under `pipelined`: the same number of tiles,
    /// `ceil(E / ceil(E / T))` iterations each (rounded up to a multiple of
    /// 16 when the buffer allows), so the last tile is not a short one.
    fn sizes(&self, kernel: &Kernel, groups: &[Group]) -> Sizes {
        let e = kernel.elements;
        let whole = |g: &Group| e.saturating_mul(g.bytes_per_iteration);
        let least = |g: &Group| match self.policy {
            Policy::Reference => STREAM_BUFFER_BYTES,
            Policy::Pipelined => {
                align_up(g.bytes_per_iteration.max(MIN_BUFFER_BYTES.min(whole(g))))
            }
        };
        let single = |g: &Group| self.policy == Policy::Pipelined && whole(g) <= least(g);
        let shares: u64 = groups
            .iter()
            .map(|g| if single(g) { 1 } else { self.buffers_of(g) })
            .sum();
        let need: u64 = groups
            .iter()
            .map(|g| least(g) * if single(g) { 1 } else { self.buffers_of(g) })
            .sum();
        let buffer = self.buffer_bytes(shares);
        let fit = if groups.iter().all(|g| buffer >= least(g)) && need <= self.params.budget {
            Ok(())
        } else {
            let each = groups.iter().map(least).max().unwrap_or(0);
            Err((need, shares, each))
        };
        let tiles = groups
            .iter()
            .map(|g| {
                let t = tile_iterations(g, buffer).clamp(1, e.max(1));
                match self.policy {
                    Policy::Reference => t,
                    Policy::Pipelined => {
                        // Same tile count, the last tile no shorter than
                        // needed; rounded up to 16 iterations where that
                        // still fits the buffer.
                        let even = e.div_ceil(e.div_ceil(t)).max(1);
                        let round = even.div_ceil(16) * 16;
                        if round <= t {
                            round
                        } else {
                            even
                        }
                    }
                }
            })
            .collect();
        Sizes { fit, tiles }
    }

    /// Bytes of each buffer when `buffers` buffers share the budget.
    fn buffer_bytes(&self, buffers: u64) -> u64 {
        match self.policy {
            Policy::Reference => STREAM_BUFFER_BYTES,
            Policy::Pipelined => {
                let per = self.params.budget / buffers.max(1);
                per / BUFFER_ALIGN * BUFFER_ALIGN
            }
        }
    }

    /// Buffers a group gets: the depth, plus one for an in-place group
    /// under `pipelined`, whose buffer is refilled only after its flush
    /// completed (with one more buffer its loads still run `depth` tiles
    /// ahead).
    fn buffers_of(&self, g: &Group) -> u64 {
        let extra = self.policy == Policy::Pipelined && self.depth >= 2 && g.reads && g.writes;
        self.depth() + u64::from(extra)
    }

    fn depth(&self) -> u64 {
        match self.policy {
            Policy::Reference => 1,
            Policy::Pipelined => u64::from(self.depth),
        }
    }

    /// The accessors, groups and tile sizes of a treatment per tensor, if
    /// they fit the staging budget and the copy limit; the error says which
    /// does not and by how much.
    fn fitted(&self, cx: &Cx, choice: &[Treatment]) -> Result<Fitted, Diagnostics> {
        let Cx {
            m,
            kernel,
            sweeps,
            tensors,
            labels,
        } = *cx;
        let acc = self.accessors(kernel, sweeps, tensors, choice);
        let accessors: Vec<Accessor> = acc.iter().map(|a| a.0).collect();
        let gs = groups(kernel, sweeps, &accessors, labels);
        let sizes = self.sizes(kernel, &gs);
        if let Err((need, shares, each)) = sizes.fit {
            return Err(vec![Diagnostic::error(
                m.ops[kernel.op].span,
                format!(
                    "the staging plan of kernel @{} does not fit: it needs {need} bytes of dataram ({} staging group{} with {shares} buffer{} of at least {each} bytes) but the staging budget is {} bytes",
                    kernel.name,
                    gs.len(),
                    if gs.len() == 1 { "" } else { "s" },
                    if shares == 1 { "" } else { "s" },
                    self.params.budget
                ),
            )
            .with_note(
                match self.policy {
                    Policy::Pipelined => "index some accesses (`accessor = \"index\"`), use fewer buffers (`schedule-staging{buffers=1}`) or raise the budget (`schedule-staging{budget=...}`)",
                    Policy::Reference => "the reference runtime gives every staged access one 4 KiB buffer: index some accesses (`accessor = \"index\"`) or raise the budget (`schedule-staging{budget=...}`)",
                },
                None,
            )]);
        }
        if let Some(n) = self.copies_over_limit(kernel, sweeps, &gs, &sizes.tiles) {
            return Err(vec![Diagnostic::error(
                m.ops[kernel.op].span,
                format!(
                    "the staging plan of kernel @{} could take up to {n} copies (one per row piece of each tile), over the limit of `schedule-staging{{max-copies={}}}`: index the accesses with the most runs (`accessor = \"index\"`), raise the budget or raise the limit",
                    kernel.name, self.max_copies
                ),
            )]);
        }
        Ok(Fitted { acc, gs, sizes })
    }

    /// The most copies the plan of `groups` with tiles of `tiles`
    /// iterations can take, when that is over `max_copies`, else `None`.
    /// A tile takes at most one copy per row piece its accesses touch (a
    /// run never spans two tiles and a buffer is at most 64 KiB), and an
    /// access of `R` rows cut into `n` tiles has at most `R + n - 1` row
    /// pieces (each of the `n - 1` cuts splits at most one row).
    /// The bound is computed in O(accesses), and it bounds the work too:
    /// laying out and emitting the tiles enumerates exactly those pieces.
    fn copies_over_limit(
        &self,
        kernel: &Kernel,
        sweeps: &[Sweep],
        groups: &[Group],
        tiles: &[u64],
    ) -> Option<u64> {
        let e = kernel.elements;
        let bound = groups
            .iter()
            .zip(tiles)
            .flat_map(|(g, &t)| {
                let n = e.div_ceil(t.max(1)).max(1);
                g.accesses
                    .iter()
                    .map(move |&a| sweeps[a].rows(e).saturating_add(n - 1))
            })
            .fold(0u64, u64::saturating_add);
        (bound > self.max_copies).then_some(bound)
    }

    /// Builds the plan for a treatment per tensor.
    fn build(&self, cx: &Cx, choice: &[Treatment]) -> Result<KernelPlan, Diagnostics> {
        let Cx { kernel, sweeps, .. } = *cx;
        let Fitted { acc, gs, sizes } = self.fitted(cx, choice)?;
        let accessors: Vec<Accessor> = acc.iter().map(|a| a.0).collect();
        let depth = self.depth();
        let mut b = Builder {
            plan: KernelPlan {
                policy: self.policy,
                depth: depth as u32,
                accessors: accessors.clone(),
                params: self.params,
                slots: Vec::new(),
                steps: Vec::new(),
            },
            kernel,
            sweeps,
            sync: self.policy == Policy::Reference,
            waited: Vec::new(),
            groups: Vec::new(),
        };
        let mut at = u64::from(DATARAM_BASE);
        for (gi, g) in gs.iter().enumerate() {
            let t = sizes.tiles[gi];
            let tiles = kernel.elements.div_ceil(t);
            let n = self.buffers_of(g).min(tiles);
            let mut slots = Vec::new();
            for _ in 0..n {
                slots.push(b.plan.slots.len() as u32);
                b.plan.slots.push(Slot {
                    access: g.accesses[0] as u32,
                    dram: at as u32,
                    bytes: (t * g.bytes_per_iteration) as u32,
                });
                at += align_up(t * g.bytes_per_iteration);
            }
            let method = acc[g.accesses[0]].1;
            let lookahead = if g.reads && g.writes {
                self.buffers_of(g) - 1
            } else {
                depth
            };
            b.groups.push(GroupState {
                group: g.clone(),
                method,
                tile: t,
                tiles,
                slots,
                lookahead,
                next_load: 0,
                loads: Vec::new(),
                flushes: vec![Vec::new(); tiles as usize],
                flushed: 0,
                raw: if g.reads && g.writes {
                    read_after_write(kernel, sweeps, g, t, tiles)
                } else {
                    Vec::new()
                },
            });
        }
        b.emit();
        // The plan is kept (typed, in the module): no spare capacity.
        b.plan.steps.shrink_to_fit();
        Ok(b.plan)
    }
}

/// What one kernel's planning works on.
#[derive(Clone, Copy)]
struct Cx<'a> {
    m: &'a Module,
    kernel: &'a Kernel,
    sweeps: &'a [Sweep],
    tensors: &'a [Tensor],
    labels: &'a [usize],
}

/// A treatment per tensor that fits: each access's accessor and method,
/// the staging groups and their tile sizes.
struct Fitted {
    acc: Vec<(Accessor, Method)>,
    gs: Vec<Group>,
    sizes: Sizes,
}

/// Buffer sizing for a kernel's groups.
struct Sizes {
    /// `Err((need, buffers, least bytes per buffer))` when it does not fit.
    fit: Result<(), (u64, u64, u64)>,
    /// Iterations per tile, per group.
    tiles: Vec<u64>,
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(BUFFER_ALIGN) * BUFFER_ALIGN
}

/// The default of `schedule-staging{max-copies=N}`, the most copies one
/// kernel's plan may take (project-defined): 4 Mi copies is a 16 GiB stream
/// in 4 KiB tiles. Past it `auto` indexes and a forced staging is an error,
/// so planning time and memory stay proportional to a bounded plan.
pub const DEFAULT_MAX_COPIES: u64 = 1 << 22;

struct GroupState {
    group: Group,
    method: Method,
    /// Iterations per tile.
    tile: u64,
    tiles: u64,
    slots: Vec<u32>,
    /// How many tiles ahead of the compute loads are issued.
    lookahead: u64,
    next_load: u64,
    /// DMA load copy ids per tile issued and not yet waited for.
    loads: Vec<(u64, Vec<u32>)>,
    /// DMA flush copy ids per tile.
    flushes: Vec<Vec<u32>>,
    /// Tiles whose flush has been issued (tiles flush in order).
    flushed: u64,
    /// Per tile of an in-place group: the latest earlier tile that writes
    /// bytes this tile reads (its load must wait for that flush).
    raw: Vec<Option<u64>>,
}

struct Builder<'a> {
    plan: KernelPlan,
    kernel: &'a Kernel,
    sweeps: &'a [Sweep],
    sync: bool,
    /// Per copy id: waited for already (or a core copy).
    waited: Vec<bool>,
    groups: Vec<GroupState>,
}

impl Builder<'_> {
    fn emit(&mut self) {
        let e = self.kernel.elements;
        // Prologue: fill the pipeline.
        for g in 0..self.groups.len() {
            if self.groups[g].group.reads {
                let ahead = self.groups[g].lookahead;
                self.load_ahead(g, ahead);
            }
        }
        let mut a = 0u64;
        while a < e {
            // The next boundary: the nearest tile end of any group.
            let b = self
                .groups
                .iter()
                .map(|g| ((a / g.tile) + 1) * g.tile)
                .min()
                .unwrap_or(e)
                .min(e);
            for g in 0..self.groups.len() {
                let gs = &self.groups[g];
                if !a.is_multiple_of(gs.tile) {
                    continue;
                }
                let t = a / gs.tile;
                if gs.group.reads {
                    if gs.next_load <= t {
                        self.load_ahead(g, t + 1);
                    }
                    self.wait_loads(g, t);
                } else {
                    // A write-only buffer is written again only after its
                    // previous flush completed.
                    let n = self.groups[g].slots.len() as u64;
                    if t >= n {
                        self.wait_flush(g, t - n);
                    }
                }
            }
            self.plan.steps.push(Step::Compute {
                first: a,
                count: b - a,
            });
            for g in 0..self.groups.len() {
                let gs = &self.groups[g];
                if !b.is_multiple_of(gs.tile) && b != e {
                    continue;
                }
                let t = (b - 1) / gs.tile;
                if gs.group.writes {
                    self.flush(g, t);
                }
                if self.groups[g].group.reads {
                    let upto = t + 1 + self.groups[g].lookahead;
                    self.load_ahead(g, upto);
                }
            }
            a = b;
        }
        // The kernel ends when every copy has landed.
        for id in 0..self.waited.len() {
            if !self.waited[id] {
                self.wait(id as u32);
            }
        }
    }

    fn layout(&self, g: usize, t: u64) -> TileLayout {
        let gs = &self.groups[g];
        let e0 = t * gs.tile;
        let e1 = (e0 + gs.tile).min(self.kernel.elements);
        TileLayout::new(self.kernel, self.sweeps, &gs.group, e0, e1)
    }

    fn slot(&self, g: usize, t: u64) -> u32 {
        let s = &self.groups[g].slots;
        s[(t % s.len() as u64) as usize]
    }

    fn wait(&mut self, id: u32) {
        self.plan.steps.push(Step::Wait { copy: id });
        self.waited[id as usize] = true;
    }

    /// Issues the copies of `runs` of tile `t`; returns the SDMA ids.
    fn copies(&mut self, g: usize, t: u64, dir: Dir, layout: &TileLayout) -> Vec<u32> {
        let slot = self.slot(g, t);
        let base = u64::from(self.plan.slots[slot as usize].dram);
        let method = self.groups[g].method;
        let owner = self.groups[g].group.accesses[0] as u32;
        let runs = match dir {
            Dir::M2s => &layout.reads,
            Dir::S2m => &layout.writes,
        };
        let mut ids = Vec::new();
        for r in runs {
            let mut h = r.start;
            while h < r.end {
                // `h < r.end <= 2^64`, so `h` fits the copy's u64 address.
                let len = (r.end - h).min(u128::from(MAX_DESCRIPTOR_BYTES)) as u64;
                let off = layout
                    .offset_of(h, len)
                    .expect("a tile's runs lie inside its layout");
                let id = self.waited.len() as u32;
                let method = copy_method(
                    &self.plan.params,
                    method,
                    len,
                    u64::from(self.plan.slots[slot as usize].bytes),
                    self.sync,
                );
                self.plan.steps.push(Step::Copy(Copy {
                    dir,
                    method,
                    queue: if method == Method::Dma {
                        STAGING_QUEUE
                    } else {
                        0
                    },
                    access: owner,
                    tile: t as u32,
                    slot,
                    hbm: h as u64,
                    dram: (base + off) as u32,
                    bytes: len as u32,
                }));
                self.waited.push(method != Method::Dma);
                if method == Method::Dma {
                    if self.sync {
                        self.wait(id);
                    } else {
                        ids.push(id);
                    }
                }
                h += u128::from(len);
            }
        }
        ids
    }

    /// Issues the loads of tiles before `upto`, in order, while they can be
    /// issued: a tile that reads bytes an earlier tile writes waits until
    /// that tile's flush has been issued.
    fn load_ahead(&mut self, g: usize, upto: u64) {
        let upto = upto.min(self.groups[g].tiles);
        while self.groups[g].next_load < upto {
            let t = self.groups[g].next_load;
            if let Some(Some(k)) = self.groups[g].raw.get(t as usize) {
                if *k >= self.groups[g].flushed {
                    return;
                }
            }
            self.load(g, t);
        }
    }

    fn load(&mut self, g: usize, t: u64) {
        // The buffer's previous tile must have been flushed.
        let n = self.groups[g].slots.len() as u64;
        if self.groups[g].group.writes && t >= n {
            self.wait_flush(g, t - n);
        }
        // Read after write across tiles: the bytes must have landed.
        if let Some(Some(k)) = self.groups[g].raw.get(t as usize).copied() {
            self.wait_flush(g, k);
        }
        let layout = self.layout(g, t);
        let ids = self.copies(g, t, Dir::M2s, &layout);
        let gs = &mut self.groups[g];
        gs.loads.push((t, ids));
        gs.next_load = t + 1;
    }

    fn wait_loads(&mut self, g: usize, t: u64) {
        let gs = &mut self.groups[g];
        let Some(i) = gs.loads.iter().position(|(k, _)| *k == t) else {
            return;
        };
        let (_, ids) = gs.loads.remove(i);
        for id in ids {
            if !self.waited[id as usize] {
                self.wait(id);
            }
        }
    }

    fn flush(&mut self, g: usize, t: u64) {
        let layout = self.layout(g, t);
        let ids = self.copies(g, t, Dir::S2m, &layout);
        self.groups[g].flushes[t as usize] = ids;
        self.groups[g].flushed = t + 1;
    }

    fn wait_flush(&mut self, g: usize, t: u64) {
        let ids = std::mem::take(&mut self.groups[g].flushes[t as usize]);
        for id in ids {
            if !self.waited[id as usize] {
                self.wait(id);
            }
        }
    }
}

/// For each tile of an in-place group, the latest earlier tile that writes
/// bytes the tile reads.
fn read_after_write(
    kernel: &Kernel,
    sweeps: &[Sweep],
    g: &Group,
    tile: u64,
    tiles: u64,
) -> Vec<Option<u64>> {
    // The tiles' read and write runs, tagged with their tile; one layout
    // is held at a time.
    let mut reads: Vec<(Run, u64)> = Vec::new();
    let mut writes: Vec<(Run, u64)> = Vec::new();
    for t in 0..tiles {
        let e0 = t * tile;
        let l = TileLayout::new(kernel, sweeps, g, e0, (e0 + tile).min(kernel.elements));
        reads.extend(l.reads.iter().map(|&r| (r, t)));
        writes.extend(l.writes.iter().map(|&r| (r, t)));
    }
    let pairs = reads_after_writes(&reads, &writes);
    let mut dep = vec![None; tiles as usize];
    for (k, j) in pairs {
        dep[j as usize] = dep[j as usize].max(Some(k));
    }
    dep
}

/// Warns about an attribute of a kernel or an access that is not one the
/// staging passes interpret but is close to one (`acessor`): it is kept, as
/// every unknown attribute is, but a misspelt hint would silently do nothing.
fn misspelt_attrs(m: &Module, kernel: &Kernel, cx: &mut PassContext) {
    use apir_ir::target::encoders::{ACCESS_ATTRS, KERNEL_ATTRS};
    let mut check = |op: apir_ir::Op, known: &[apir_ir::target::encoders::AttrInfo]| {
        let data = &m.ops[op];
        for k in data.attrs.keys() {
            let key = m.str(*k);
            if known.iter().any(|a| a.name == key) {
                continue;
            }
            if let Some(a) = known.iter().find(|a| {
                strsim::damerau_levenshtein(a.name, key) <= 2
                    || strsim::jaro_winkler(a.name, key) > 0.9
            }) {
                cx.warn(Diagnostic::warning(
                    data.span,
                    format!(
                        "`{}` attribute `{key}` is not interpreted (it is kept as written); did you mean `{}`?",
                        data.kind.name(),
                        a.name
                    ),
                ));
            }
        }
    };
    check(kernel.op, KERNEL_ATTRS);
    for a in &kernel.accesses {
        check(a.op, ACCESS_ATTRS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_copies_of_an_sdma_group_go_by_vec_memcpy() {
        let p = SimParams::default();
        // 128 bytes in a 4 KiB buffer: 116 ns by VEC_MEMCPY, 1304.7 ns by SDMA.
        assert_eq!(
            copy_method(&p, Method::Dma, 128, 4096, false),
            Method::VecMemcpy
        );
        // Exactly 1/8 of the buffer still counts as small; one byte more does not.
        assert_eq!(
            copy_method(&p, Method::Dma, 512, 4096, false),
            Method::VecMemcpy
        );
        assert_eq!(copy_method(&p, Method::Dma, 513, 4096, false), Method::Dma);
        // A whole-buffer copy stays on the ring.
        assert_eq!(copy_method(&p, Method::Dma, 4096, 4096, false), Method::Dma);
        // Synchronous copies (reference) keep the runtime's default method.
        assert_eq!(copy_method(&p, Method::Dma, 128, 4096, true), Method::Dma);
        // When SDMA is cheaper even for a small copy, it stays SDMA.
        let cheap_dma = SimParams {
            dma_fixed_ns: 10,
            ..SimParams::default()
        };
        assert_eq!(
            copy_method(&cheap_dma, Method::Dma, 128, 4096, false),
            Method::Dma
        );
        // Other group methods are kept.
        assert_eq!(
            copy_method(&p, Method::VecMemcpy, 4096, 4096, false),
            Method::VecMemcpy
        );
    }
}
