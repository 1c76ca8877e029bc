//! The joint search of `schedule-staging{policy=pipelined}`: per tensor,
//! staged or indexed; per staging group, the copy method, the buffer count
//! and the buffer size (the split of the staging budget between groups).
//!
//! Each group's options are costed from its tile layouts under the cost
//! model: the M2S and S2M ring time of its SDMA copies, the core time of
//! its VEC_MEMCPY / C_MEMCPY copies (and of SDMA copies the core must wait
//! for because a single buffer cannot overlap them with compute), the
//! first tile's loads (the pipeline's fill) and the last tile's flushes
//! (its drain). A kernel's estimate is
//! `max(M2S, S2M, core + compute) + fill + drain`. Where the product of
//! the options is at most [`EXHAUSTIVE_LIMIT`] the combinations within the
//! budget are searched by branch and bound (a partial configuration's
//! estimate only grows as groups are added, so one past [`PRUNE_ABOVE`]
//! times the best is cut), within [`MAX_NODES`]; beyond, coordinate
//! descent from the even split and from every tensor indexed. The best
//! [`KEEP`] estimates are returned, the best of each choice of methods
//! first; the planner builds and simulates them (the simulator decides).

use super::emit::Buffering;
use super::{copy_method, Cx, ScheduleStaging, Treatment, MIN_BUFFER_BYTES};
use crate::staging::layout::{groups, reads_after_writes, Group, TileLayout};
use crate::staging::sim::{core_copy_ns, dma_ns, iteration_ns};
use apir_ir::staging::{Method, SimParams};
use apir_ir::target::sdma::MAX_DESCRIPTOR_BYTES;
use std::cell::Cell;

/// Searches of up to this many combinations are exhaustive (branch and
/// bound, project-defined).
pub const EXHAUSTIVE_LIMIT: u64 = 1 << 24;

/// Most nodes a branch-and-bound search visits (project-defined); past it
/// the coordinate descent runs too.
pub const MAX_NODES: u64 = 1 << 21;

/// Partial configurations estimated above this multiple of the best
/// estimate so far are cut (project-defined: estimates are within about
/// this of the simulated makespans).
pub const PRUNE_ABOVE: f64 = 1.5;

/// Candidates returned for simulation, at most (project-defined; the
/// planner simulates them while [`super::SIMULATED_WORK`] lasts).
pub const KEEP: usize = 64;

/// Buffer sizes are tried in steps of at most this many bytes (a 32nd of
/// a smaller budget; project-defined).
pub const SIZE_STEP: u64 = 512;

/// Most buffers a searched SDMA group gets (project-defined: a fourth
/// buffer helps only when copies and compute alternate unevenly).
pub const MAX_SEARCH_BUFFERS: u64 = 4;

/// Tiles walked per option; more are sampled evenly and scaled.
const SAMPLED_TILES: u64 = 64;

/// Row pieces the options of one kernel may lay out to cost their tiles
/// (project-defined): past them each option samples two tiles, so the
/// search stays bounded however many groups of long tiles a kernel has.
pub(crate) const WALK_PIECES: u64 = 1 << 24;

/// Row pieces the searches of a module's kernels may lay out together
/// (project-defined: two kernels' worth, a few seconds): past them a
/// kernel's search costs only its even split's buffering, two sampled
/// tiles each, so a small module of many kernels with long tiles is
/// planned in seconds, not seconds per kernel.
pub(crate) const MODULE_WALK_PIECES: u64 = 2 * WALK_PIECES;

/// Time a choice puts on each resource, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Cost {
    pub m2s: f64,
    pub s2m: f64,
    pub core: f64,
    pub fill: f64,
    pub drain: f64,
}

impl Cost {
    fn add(&mut self, o: &Cost) {
        self.m2s += o.m2s;
        self.s2m += o.s2m;
        self.core += o.core;
        self.fill += o.fill;
        self.drain += o.drain;
    }

    fn sub(&mut self, o: &Cost) {
        self.m2s -= o.m2s;
        self.s2m -= o.s2m;
        self.core -= o.core;
        self.fill -= o.fill;
        self.drain -= o.drain;
    }

    /// Time of every copy, on whatever lane.
    pub fn total(&self) -> f64 {
        self.m2s + self.s2m + self.core
    }

    fn makespan(&self, compute: f64) -> f64 {
        self.m2s.max(self.s2m).max(self.core + compute) + self.fill + self.drain
    }
}

/// One way to buffer a group, its dataram bytes and its cost.
#[derive(Clone, Copy, Debug)]
pub(super) struct GroupOption {
    pub buf: Buffering,
    pub bytes: u64,
    pub cost: Cost,
    /// Tried by the local search only (a tile whose last one is short).
    pub local: bool,
}

/// A configuration the planner may build: a treatment per tensor and the
/// buffering of each staged group (in group order), with its estimate.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub treat: Vec<Treatment>,
    pub bufs: Vec<Buffering>,
    /// Its state in the search: per all-staged group, its option or `None`
    /// (indexed).
    pub state: Vec<Option<usize>>,
}

/// What the search found, for the planner and for the reasons it gives.
pub(super) struct Found {
    /// The candidates, best estimate first.
    pub candidates: Vec<Candidate>,
    /// The groups with every allowed tensor staged.
    pub groups: Vec<Group>,
    /// Each of those groups' options.
    pub options: Vec<Vec<GroupOption>>,
    /// The tensor of each group.
    tensor_of: Vec<usize>,
    /// Core time of indexing each tensor, ns.
    index_cost: Vec<f64>,
    budget: u64,
    compute: f64,
    /// The kernel's iterations.
    elements: u64,
    /// The even split's state, when its buffering is among the options.
    pub even: Option<Vec<Option<usize>>>,
    /// Cost of the tensors indexed whatever the choice.
    fixed: Cost,
    /// The all-staged treatment, and the tensors indexed whatever the
    /// choice.
    staged: Vec<Treatment>,
    must_index: Vec<bool>,
}

impl Found {
    fn space(&self) -> Space<'_> {
        Space {
            options: &self.options,
            tensor_of: &self.tensor_of,
            index_cost: &self.index_cost,
            budget: self.budget,
            compute: self.compute,
            fixed: self.fixed,
        }
    }

    /// The candidate of a state.
    pub fn candidate(&self, state: &[Option<usize>]) -> Candidate {
        let mut treat = self.staged.clone();
        let mut bufs = Vec::new();
        for (gi, s) in state.iter().enumerate() {
            match s {
                Some(o) => bufs.push(self.options[gi][*o].buf),
                None => treat[self.tensor_of[gi]] = Treatment::Index,
            }
        }
        for (ti, &m) in self.must_index.iter().enumerate() {
            if m {
                treat[ti] = Treatment::Index;
            }
        }
        Candidate {
            treat,
            bufs,
            state: state.to_vec(),
        }
    }

    /// The states near `state`: for each staged group, the tiles 1, 2, 4
    /// and 8 sizes larger and smaller with the same method and buffer
    /// count, one buffer
    /// more or fewer, the fill and drain by the other method, and each other
    /// method, at the closest buffer size; a move that does not fit the
    /// budget shrinks the other groups (each to its largest option of the
    /// same kind that fits), so budget shifts between groups are moves too.
    pub(crate) fn neighbors(&self, state: &[Option<usize>]) -> Vec<Vec<Option<usize>>> {
        let space = self.space();
        let mut out: Vec<Vec<Option<usize>>> = Vec::new();
        let same_kind = |a: &Buffering, b: &Buffering| {
            a.method == b.method && a.buffers == b.buffers && a.vec_edges == b.vec_edges
        };
        for gi in 0..state.len() {
            let Some(cur) = state[gi] else { continue };
            let opts = &self.options[gi];
            let c = opts[cur].buf;
            let mut moves: Vec<usize> = Vec::new();
            // Next larger / smaller tile of the same kind.
            let mut same: Vec<usize> = (0..opts.len())
                .filter(|&k| same_kind(&opts[k].buf, &c) && !opts[k].local)
                .collect();
            // The same number of tiles, the last one short: the largest
            // such tile of the same kind.
            let count = |t: u64| self.elements.div_ceil(t.max(1));
            let peers: Vec<usize> = (0..opts.len())
                .filter(|&k| {
                    k != cur
                        && same_kind(&opts[k].buf, &c)
                        && count(opts[k].buf.tile) == count(c.tile)
                })
                .collect();
            moves.extend(peers.iter().copied().max_by_key(|&k| opts[k].buf.tile));
            same.sort_by_key(|&k| opts[k].buf.tile);
            if let Some(p) = same.iter().position(|&k| k == cur) {
                for d in [1, 2, 4, 8] {
                    if p >= d {
                        moves.push(same[p - d]);
                    }
                    if p + d < same.len() {
                        moves.push(same[p + d]);
                    }
                }
            }
            // Another kind at the closest bytes.
            let closest = |want: &dyn Fn(&Buffering) -> bool| {
                (0..opts.len())
                    .filter(|&k| want(&opts[k].buf))
                    .min_by_key(|&k| opts[k].bytes.abs_diff(opts[cur].bytes))
            };
            let kinds: [&dyn Fn(&Buffering) -> bool; 5] = [
                &|b| {
                    b.method == c.method && b.vec_edges == c.vec_edges && b.buffers == c.buffers + 1
                },
                &|b| {
                    b.method == c.method && b.vec_edges == c.vec_edges && b.buffers + 1 == c.buffers
                },
                &|b| b.method == c.method && b.buffers == c.buffers && b.vec_edges != c.vec_edges,
                &|b| b.method != c.method && b.method == Method::Dma,
                &|b| b.method != c.method && b.method != Method::Dma,
            ];
            for want in kinds {
                moves.extend(closest(want));
            }
            for k in moves {
                let mut s = state.to_vec();
                s[gi] = Some(k);
                // Make room: shrink the other groups within their kind.
                let bytes = |s: &[Option<usize>]| -> u64 {
                    s.iter()
                        .enumerate()
                        .filter_map(|(g, o)| o.map(|o| self.options[g][o].bytes))
                        .sum()
                };
                if bytes(&s) > self.budget {
                    for gj in (0..s.len()).filter(|&g| g != gi) {
                        let Some(oj) = s[gj] else { continue };
                        let kind = self.options[gj][oj].buf;
                        let room = self
                            .budget
                            .saturating_sub(bytes(&s) - self.options[gj][oj].bytes);
                        if let Some(best) = (0..self.options[gj].len())
                            .filter(|&o| {
                                same_kind(&self.options[gj][o].buf, &kind)
                                    && self.options[gj][o].bytes <= room
                            })
                            .max_by_key(|&o| self.options[gj][o].bytes)
                        {
                            s[gj] = Some(best);
                        }
                        if bytes(&s) <= self.budget {
                            break;
                        }
                    }
                }
                if space.eval(&s).is_some() && !out.contains(&s) && s != state {
                    out.push(s);
                }
            }
        }
        out
    }
}

/// Per copy of one tile's runs: ring and core time by `method` in a
/// buffer of `buffer` bytes.
fn tile_cost(
    p: &SimParams,
    method: Method,
    runs: &[crate::staging::footprint::Run],
    buffer: u64,
    edge: bool,
) -> (f64, f64) {
    let (mut ring, mut core) = (0.0, 0.0);
    for r in runs {
        let mut left = r.len_u64();
        while left > 0 {
            let len = left.min(u64::from(MAX_DESCRIPTOR_BYTES));
            left -= len;
            match copy_method(p, method, len, buffer, false, edge) {
                Method::Dma => ring += dma_ns(p, len),
                m => core += core_copy_ns(p, m, len),
            }
        }
    }
    (ring, core)
}

/// The methods worth trying, with whether the fill and drain go by
/// VEC_MEMCPY: SDMA either way, VEC_MEMCPY, and C_MEMCPY only when its
/// parameters make it faster than VEC_MEMCPY for some copy.
fn variants(p: &SimParams) -> Vec<(Method, bool)> {
    let mut v = vec![
        (Method::Dma, false),
        (Method::Dma, true),
        (Method::VecMemcpy, false),
    ];
    if p.c_fixed_ns < p.vec_fixed_ns || p.c_bytes_per_us > p.vec_bytes_per_us {
        v.push((Method::CMemcpy, false));
    }
    v
}

/// Buffer sizes are tried in steps of this many bytes: a 32nd of the
/// budget, 64-byte aligned, between 64 and [`SIZE_STEP`].
fn size_step(budget: u64) -> u64 {
    (budget / 32 / super::BUFFER_ALIGN * super::BUFFER_ALIGN).clamp(super::BUFFER_ALIGN, SIZE_STEP)
}

/// Balanced tiles of at most `t` iterations: the same number of tiles,
/// `ceil(E / ceil(E / t))` iterations each, rounded up to a multiple of 16
/// where that still fits.
pub(super) fn balanced(e: u64, t: u64) -> u64 {
    let t = t.clamp(1, e.max(1));
    let even = e.div_ceil(e.div_ceil(t)).max(1);
    let round = even.div_ceil(16) * 16;
    if round <= t {
        round
    } else {
        even
    }
}

impl ScheduleStaging {
    /// The options of group `g`: every method; 1..=[`MAX_SEARCH_BUFFERS`]
    /// buffers for SDMA (the depth when `buffers` is set), one for core
    /// methods (their copies are synchronous); SDMA with its fill and drain
    /// by SDMA or by VEC_MEMCPY; buffers that share multiples of the size
    /// step (a 32nd of the budget, at most [`SIZE_STEP`]) equally (64-byte
    /// aligned), or
    /// one buffer for the whole iteration space, or `extra` (the even
    /// split's buffer bytes and count).
    fn group_options(
        &self,
        cx: &Cx,
        g: &Group,
        extra: Option<(u64, u64)>,
        walk: &Cell<u64>,
    ) -> Vec<GroupOption> {
        let p = &self.params;
        let kernel = cx.kernel;
        let e = kernel.elements;
        let bpi = g.bytes_per_iteration.max(1);
        let whole = e.saturating_mul(bpi);
        let budget = self.params.budget;
        let least = bpi.max(MIN_BUFFER_BYTES.min(whole));
        let variants = variants(p);
        let step = size_step(budget);
        // Per tile length: the cost of each variant, from one walk, and
        // whether a tile reads bytes an earlier tile writes.
        let mut costs: Vec<(u64, Vec<Cost>, bool)> = Vec::new();
        let mut out = Vec::new();
        // Once the module's searches have laid out all they may, a kernel
        // is costed at its even split's buffering only: a few options, two
        // sampled tiles each.
        let coarse = walk.get() == 0;
        for (mi, &(m, vec_edges)) in variants.iter().enumerate() {
            let counts: Vec<u64> = match (m, self.depth) {
                (Method::Dma, Some(d)) => vec![self.fixed_buffers(g, d)],
                (Method::Dma, None) => (1..=MAX_SEARCH_BUFFERS).collect(),
                _ => vec![1],
            };
            for nb in counts {
                let mut sizes: Vec<u64> = if coarse {
                    Vec::new()
                } else {
                    (1..=budget / step)
                        .map(|k| (k * step / nb) / super::BUFFER_ALIGN * super::BUFFER_ALIGN)
                        .collect()
                };
                if nb == 1 && !coarse {
                    sizes.push(whole);
                }
                if let Some((b, n)) = extra {
                    if n == nb {
                        sizes.push(b);
                    }
                }
                // The balanced tile of each size; the largest (whose last
                // tile is short) is an option for the local search only.
                let mut tiles: Vec<(u64, bool)> = sizes
                    .iter()
                    .filter(|&&b| b >= least && b <= budget)
                    .flat_map(|&b| {
                        [
                            (balanced(e, b / bpi), false),
                            ((b / bpi).clamp(1, e.max(1)), true),
                        ]
                    })
                    .filter(|&(t, _)| t * bpi <= budget)
                    .collect();
                tiles.sort_unstable();
                tiles.dedup_by_key(|x| x.0);
                for (t, local) in tiles {
                    let n = e.div_ceil(t);
                    let buffer = t * bpi;
                    if nb > n {
                        // More buffers than tiles: the same plan as with
                        // one buffer a tile, tried with that count.
                        continue;
                    }
                    let bytes = nb * super::align_up(buffer);
                    if bytes > budget {
                        continue;
                    }
                    let (base, raw) = match costs.iter().find(|c| c.0 == t) {
                        Some(c) => (c.1[mi], c.2),
                        None => {
                            let (c, raw) = self.tile_costs(cx, g, t, &variants, walk);
                            let x = c[mi];
                            costs.push((t, c, raw));
                            (x, raw)
                        }
                    };
                    if m == Method::Dma && base.m2s == 0.0 && base.s2m == 0.0 {
                        // Every copy by the core: VEC_MEMCPY's plan.
                        continue;
                    }
                    let buf = Buffering {
                        method: m,
                        buffers: nb,
                        tile: t,
                        vec_edges,
                    };
                    let mut cost = base;
                    // With one buffer the next tile is loaded only after
                    // the current one is consumed, and refilled only after
                    // its flush: the core waits for every SDMA copy. A
                    // tile that reads what an earlier tile writes is loaded
                    // after that flush: with several buffers, part of the
                    // wait remains.
                    if m == Method::Dma && n > 1 && (nb == 1 || raw) {
                        cost.core += (cost.m2s + cost.s2m) / nb as f64;
                    }
                    if !out.iter().any(|o: &GroupOption| o.buf == buf) {
                        out.push(GroupOption {
                            buf,
                            bytes,
                            cost,
                            local,
                        });
                    }
                }
            }
        }
        // Cheapest first, for the branch and bound.
        out.sort_by(|a, b| a.cost.total().total_cmp(&b.cost.total()));
        out
    }

    /// The cost of tiles of `t` iterations of group `g`, per method: ring
    /// and core time of every tile (at most [`SAMPLED_TILES`] walked, more
    /// sampled evenly and scaled), the first tile's loads (the fill) and
    /// the last tile's flushes (the drain).
    fn tile_costs(
        &self,
        cx: &Cx,
        g: &Group,
        t: u64,
        variants: &[(Method, bool)],
        walk: &Cell<u64>,
    ) -> (Vec<Cost>, bool) {
        let p = &self.params;
        let e = cx.kernel.elements;
        let n = e.div_ceil(t);
        let buffer = t * g.bytes_per_iteration.max(1);
        let mut out = vec![Cost::default(); variants.len()];
        // Row pieces a tile's layout enumerates; the kernel's walks share
        // WALK_PIECES of them, and past that two tiles are sampled (the
        // first and the last).
        let per_tile: u64 = g
            .accesses
            .iter()
            .map(|&a| cx.sweeps[a].rows(t).saturating_add(1))
            .fold(0, u64::saturating_add);
        let afford = (walk.get() / per_tile.max(1)).max(2);
        let samples = n.min(SAMPLED_TILES).min(afford);
        walk.set(walk.get().saturating_sub(samples.saturating_mul(per_tile)));
        let scale = n as f64 / samples as f64;
        // The sampled tiles' runs, for read-after-write across tiles.
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for s in 0..samples {
            let k = if samples == n {
                s
            } else {
                s * (n - 1) / (samples - 1).max(1)
            };
            let e0 = k * t;
            let l = TileLayout::new(cx.kernel, cx.sweeps, g, e0, (e0 + t).min(e));
            for (c, &(m, edges)) in out.iter_mut().zip(variants) {
                let (lr, lc) = tile_cost(p, m, &l.reads, buffer, edges && k == 0);
                let (fr, fc) = tile_cost(p, m, &l.writes, buffer, edges && k + 1 == n);
                c.m2s += lr * scale;
                c.s2m += fr * scale;
                c.core += (lc + fc) * scale;
                // Fill and drain on the rings (a core copy is core time).
                if k == 0 {
                    c.fill = lr;
                }
                if k + 1 == n {
                    c.drain = fr;
                }
            }
            if g.reads && g.writes {
                reads.extend(l.reads.iter().map(|&r| (r, k)));
                writes.extend(l.writes.iter().map(|&r| (r, k)));
            }
        }
        let raw = !reads_after_writes(&reads, &writes).is_empty();
        (out, raw)
    }

    /// Searches the configurations of a kernel; `allowed` gives each
    /// tensor's possible treatments, `base` the planner's even split
    /// (buffering per group of the all-staged choice), whose sizes are
    /// among the options.
    pub(super) fn search(&self, cx: &Cx, allowed: &[Vec<Treatment>], base: &[Buffering]) -> Found {
        let kernel = cx.kernel;
        let p = &self.params;
        let staged: Vec<Treatment> = allowed.iter().map(|c| c[0]).collect();
        let acc = self.accessors(kernel, cx.sweeps, cx.tensors, &staged);
        let gs = groups(kernel, cx.sweeps, &acc, cx.labels);
        // This kernel's share of what the module's searches may lay out.
        let given = WALK_PIECES.min(cx.work.walk.get());
        let walk = Cell::new(given);
        let options: Vec<Vec<GroupOption>> = gs
            .iter()
            .enumerate()
            .map(|(gi, g)| {
                let extra = base.get(gi).map(|b| (b.buffer_bytes(g), b.buffers));
                self.group_options(cx, g, extra, &walk)
            })
            .collect();
        cx.work.walk.set(cx.work.walk.get() - (given - walk.get()));
        let index_cost: Vec<f64> = cx
            .tensors
            .iter()
            .map(|t| kernel.elements as f64 * p.index_ns as f64 * t.accesses.len() as f64)
            .collect();
        let tensor_of: Vec<usize> = gs.iter().map(|g| cx.labels[g.accesses[0]]).collect();
        let indexable: Vec<bool> = allowed
            .iter()
            .map(|c| c.contains(&Treatment::Index))
            .collect();
        let must_index: Vec<bool> = staged.iter().map(|&t| t == Treatment::Index).collect();
        let compute = kernel.elements as f64 * iteration_ns(p, kernel.cycles_per_element, 0);
        // Tensors indexed whatever the search does (forced or hinted).
        let mut fixed = Cost::default();
        for (ti, &m) in must_index.iter().enumerate() {
            if m {
                fixed.core += index_cost[ti];
            }
        }
        let mut top = Top::new(&options);
        let choosers: Vec<usize> = (0..cx.tensors.len())
            .filter(|&t| indexable[t] && !must_index[t])
            .collect();
        let combos = options
            .iter()
            .map(|o| o.iter().filter(|x| !x.local).count() as u64 + 1)
            .chain(choosers.iter().map(|_| 2))
            .fold(1u64, u64::saturating_mul);
        let search = Space {
            options: &options,
            tensor_of: &tensor_of,
            index_cost: &index_cost,
            budget: self.params.budget,
            compute,
            fixed,
        };
        // The even split seeds the cutoff of the branch and bound.
        let even: Vec<Option<usize>> = gs
            .iter()
            .enumerate()
            .map(|(gi, _)| {
                let b = base.get(gi)?;
                options[gi].iter().position(|o| o.buf == *b)
            })
            .collect();
        if let Some(e) = search.eval(&even) {
            top.offer(e, &even);
        }
        let mut nodes = 0u64;
        if combos <= EXHAUSTIVE_LIMIT {
            // The all-staged masks first: their estimates set the cutoff.
            for mask in 0..(1u64 << choosers.len()) {
                let mut indexed = must_index.clone();
                for (k, &t) in choosers.iter().enumerate() {
                    indexed[t] = mask >> k & 1 == 1;
                }
                search.exhaust(&indexed, &mut top, &mut nodes);
            }
        }
        let even_state = Some(even.clone());
        if combos > EXHAUSTIVE_LIMIT || nodes > MAX_NODES {
            // Starts: the even split; every choosing tensor indexed.
            search.descend(even, &indexable, &mut top);
            let all_index: Vec<Option<usize>> = tensor_of
                .iter()
                .map(|&t| if indexable[t] { None } else { Some(0) })
                .collect();
            search.descend(all_index, &indexable, &mut top);
        }
        let states: Vec<Vec<Option<usize>>> =
            top.take().into_iter().map(|(_, state)| state).collect();
        let mut found = Found {
            candidates: Vec::new(),
            groups: gs,
            options,
            tensor_of,
            index_cost,
            budget: self.params.budget,
            compute,
            elements: kernel.elements,
            even: even_state.filter(|s| s.iter().all(Option::is_some)),
            fixed,
            staged,
            must_index,
        };
        found.candidates = states.iter().map(|s| found.candidate(s)).collect();
        found
    }

    /// The buffer count of an SDMA group when `buffers` is set: the depth,
    /// plus one for an in-place group (its buffer is refilled only after
    /// its flush, so with one more its loads still run `depth` ahead).
    pub(super) fn fixed_buffers(&self, g: &Group, depth: u32) -> u64 {
        u64::from(depth) + u64::from(depth >= 2 && g.reads && g.writes)
    }
}

/// The best states seen, by estimate (a state: per group, its option, or
/// `None` when its tensor is indexed), kept diverse: the estimate cannot
/// see every stall (a core copy that blocks the core while a small SDMA
/// buffer waits), so the best state of each choice of methods and indexed
/// tensors comes first, then the best of the rest.
struct Top<'a> {
    options: &'a [Vec<GroupOption>],
    seen: Vec<(f64, Vec<Option<usize>>)>,
    /// The best estimate offered.
    best: f64,
}

impl<'a> Top<'a> {
    fn new(options: &'a [Vec<GroupOption>]) -> Self {
        Top {
            options,
            seen: Vec::new(),
            best: f64::INFINITY,
        }
    }

    /// The methods of a state's groups (`None`: indexed).
    fn signature(&self, state: &[Option<usize>]) -> Vec<Option<Method>> {
        state
            .iter()
            .enumerate()
            .map(|(gi, s)| s.map(|k| self.options[gi][k].buf.method))
            .collect()
    }

    /// Partial states estimated above this are not worth completing.
    fn cutoff(&self) -> f64 {
        self.best * PRUNE_ABOVE
    }

    fn offer(&mut self, est: f64, state: &[Option<usize>]) {
        self.best = self.best.min(est);
        if self.seen.len() >= 64 * KEEP {
            self.prune(16 * KEEP);
        }
        self.seen.push((est, state.to_vec()));
    }

    /// Keeps `n` states: per signature its best few, best first.
    fn prune(&mut self, n: usize) {
        self.seen
            .sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        self.seen.dedup_by(|a, b| a.1 == b.1);
        let mut per: Vec<(Vec<Option<Method>>, usize)> = Vec::new();
        let mut rank = Vec::with_capacity(self.seen.len());
        for (_, s) in &self.seen {
            let sig = self.signature(s);
            let r = match per.iter_mut().find(|(x, _)| *x == sig) {
                Some((_, c)) => {
                    *c += 1;
                    *c
                }
                None => {
                    per.push((sig, 0));
                    0
                }
            };
            rank.push(r);
        }
        let mut order: Vec<usize> = (0..self.seen.len()).collect();
        order.sort_by_key(|&i| (rank[i].min(2), i));
        order.truncate(n);
        order.sort_unstable();
        let seen = std::mem::take(&mut self.seen);
        self.seen = order.into_iter().map(|i| seen[i].clone()).collect();
    }

    /// The states to simulate: the best of each signature first.
    fn take(mut self) -> Vec<(f64, Vec<Option<usize>>)> {
        self.prune(KEEP);
        let mut per: Vec<Vec<Option<Method>>> = Vec::new();
        let mut first = Vec::new();
        let mut rest = Vec::new();
        for x in std::mem::take(&mut self.seen) {
            let sig = self.signature(&x.1);
            if per.contains(&sig) {
                rest.push(x);
            } else {
                per.push(sig);
                first.push(x);
            }
        }
        first.extend(rest);
        first
    }
}

/// The search space of one kernel.
struct Space<'a> {
    options: &'a [Vec<GroupOption>],
    tensor_of: &'a [usize],
    index_cost: &'a [f64],
    budget: u64,
    compute: f64,
    fixed: Cost,
}

impl Space<'_> {
    /// Every combination of the staged groups' options within the budget,
    /// with the tensors `indexed` indexed.
    fn exhaust(&self, indexed: &[bool], top: &mut Top<'_>, nodes: &mut u64) {
        let mut cost = self.fixed;
        for (t, &i) in indexed.iter().enumerate() {
            if i && self.tensor_of.contains(&t) {
                cost.core += self.index_cost[t];
            }
        }
        let mut state: Vec<Option<usize>> = vec![None; self.options.len()];
        self.dfs(0, indexed, self.budget, cost, &mut state, top, nodes);
    }

    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &self,
        gi: usize,
        indexed: &[bool],
        left: u64,
        cost: Cost,
        state: &mut Vec<Option<usize>>,
        top: &mut Top<'_>,
        nodes: &mut u64,
    ) {
        *nodes += 1;
        // Adding groups only adds cost: a partial state past the cutoff
        // cannot become a candidate (branch and bound).
        if *nodes > MAX_NODES || cost.makespan(self.compute) > top.cutoff() {
            return;
        }
        if gi == self.options.len() {
            top.offer(cost.makespan(self.compute), state);
            return;
        }
        if indexed[self.tensor_of[gi]] {
            state[gi] = None;
            self.dfs(gi + 1, indexed, left, cost, state, top, nodes);
            return;
        }
        // Options come cheapest first (`group_options`): good leaves
        // early make the cutoff bite.
        for (k, o) in self.options[gi].iter().enumerate() {
            if o.bytes > left || o.local {
                continue;
            }
            let mut c = cost;
            c.add(&o.cost);
            state[gi] = Some(k);
            self.dfs(gi + 1, indexed, left - o.bytes, c, state, top, nodes);
        }
        state[gi] = None;
    }

    /// The estimate of a state, if it is one (groups of one tensor all
    /// staged or all indexed, within the budget).
    fn eval(&self, state: &[Option<usize>]) -> Option<f64> {
        let (cost, bytes) = self.sums(state)?;
        (bytes <= self.budget).then(|| cost.makespan(self.compute))
    }

    /// The cost and dataram bytes of a state whose groups of one tensor
    /// are all staged or all indexed.
    fn sums(&self, state: &[Option<usize>]) -> Option<(Cost, u64)> {
        let mut cost = self.fixed;
        let mut bytes = 0u64;
        let mut indexed: Vec<Option<bool>> = vec![None; self.index_cost.len()];
        for (gi, s) in state.iter().enumerate() {
            let t = self.tensor_of[gi];
            let i = s.is_none();
            match indexed[t] {
                Some(x) if x != i => return None,
                Some(_) => {}
                None => {
                    indexed[t] = Some(i);
                    if i {
                        cost.core += self.index_cost[t];
                    }
                }
            }
            if let Some(k) = s {
                let o = &self.options[gi][*k];
                bytes += o.bytes;
                cost.add(&o.cost);
            }
        }
        Some((cost, bytes))
    }

    /// Coordinate descent from `state` (a group without a usable start
    /// takes its first option): each round tries every option of every
    /// staged group (on running sums, O(1) a move) and indexing or staging
    /// every tensor that may choose, and takes each improvement; at most 32
    /// rounds.
    fn descend(&self, mut state: Vec<Option<usize>>, indexable: &[bool], top: &mut Top<'_>) {
        for (gi, s) in state.iter_mut().enumerate() {
            if s.is_none() && !indexable[self.tensor_of[gi]] {
                *s = Some(0);
            }
        }
        if self.eval(&state).is_none() {
            // Out of the budget: start from the smallest options.
            for (gi, s) in state.iter_mut().enumerate() {
                if s.is_some() {
                    *s = (0..self.options[gi].len()).min_by_key(|&k| self.options[gi][k].bytes);
                }
            }
        }
        let Some((mut cost, mut bytes)) = self.sums(&state) else {
            return;
        };
        let mut best = cost.makespan(self.compute);
        top.offer(best, &state);
        for _ in 0..32 {
            let mut improved = false;
            for gi in 0..state.len() {
                let t = self.tensor_of[gi];
                // Index or stage the whole tensor.
                if indexable[t] {
                    let mut s2 = state.clone();
                    let to_index = state[gi].is_some();
                    for (gj, s) in s2.iter_mut().enumerate() {
                        if self.tensor_of[gj] == t {
                            *s = if to_index { None } else { Some(0) };
                        }
                    }
                    if let Some((c, b)) = self.sums(&s2).filter(|x| x.1 <= self.budget) {
                        let e = c.makespan(self.compute);
                        top.offer(e, &s2);
                        if e < best {
                            (best, state, cost, bytes) = (e, s2, c, b);
                            improved = true;
                        }
                    }
                }
                let Some(cur) = state[gi] else { continue };
                for k in 0..self.options[gi].len() {
                    let (old, new) = (&self.options[gi][cur], &self.options[gi][k]);
                    let b = bytes - old.bytes + new.bytes;
                    if k == cur || b > self.budget || new.local {
                        continue;
                    }
                    let mut c = cost;
                    c.sub(&old.cost);
                    c.add(&new.cost);
                    let e = c.makespan(self.compute);
                    state[gi] = Some(k);
                    top.offer(e, &state);
                    if e < best {
                        (best, cost, bytes) = (e, c, b);
                        improved = true;
                        break;
                    }
                    state[gi] = Some(cur);
                }
            }
            if !improved {
                break;
            }
        }
    }
}
