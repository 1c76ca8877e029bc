//! `check-coherency`: proves every kernel's staging coherent
//! (docs/staging.md).
//!
//! Accessor compatibility, per tensor (a connected component of HBM
//! overlap among the buffers a kernel accesses: overlap is transitive
//! through chains of buffers), among the accesses open at the same time:
//! those of one kernel, and those of kernels on different cores, which run
//! concurrently:
//! - the reference's matrix: any number of buffered readers may coexist; a
//!   buffered writer is exclusive; a buffered reader or writer is
//!   incompatible with an unbuffered (`index`) accessor;
//! - what the reference misses (its TCM accessor carries no enforcer): a
//!   `tcm` write to a tensor that another access reaches through a different
//!   accessor is an error; `tcm` accesses of one tensor that one of them
//!   writes share one tile (an in-place kernel), and the plan must read each
//!   tile before writing it;
//! - writes to overlapping HBM bytes from two accesses are an error (one
//!   access writing a byte twice is not: its writes happen in iteration
//!   order), and so are a write and a read of the same bytes in kernels on
//!   different cores (found by one sweep over every access's sorted runs).
//!
//! Plan proof, for every kernel with a plan: computes cover the iteration
//! space once and in order; every copy belongs to its group's tile and
//! buffer and moves bytes of the tile's layout to their place in it; the
//! loads of a tile cover every byte its reads touch; the flushes of a tile
//! copy exactly the bytes its writes touch, and no byte is flushed twice;
//! and, on the plan's dependency graph (whatever the durations): loads
//! complete before the first compute of their tile, flushes start after its
//! last compute, a buffer is refilled or rewritten only after its previous
//! tile was consumed and flushed, a tile that reads bytes an earlier tile
//! wrote is loaded after that flush, and every flush completes before the
//! kernel ends. A plan is proved only when its kernel's accesses passed the
//! checks above. Each violation is a diagnostic at the step (or the access)
//! it concerns, naming the accesses involved.

use crate::staging::footprint::{
    coalesce, coalesced, first_overlap, merge_sorted, Addr, Footprint, Run, Sweep,
    MAX_FOOTPRINT_RUNS, MAX_MODULE_SORTED_RUNS,
};
use crate::staging::layout::{groups, tensors, tile_iterations, Group, TileLayout};
use crate::staging::sim::Schedule;
use apir_ir::staging::{Accessor, Dir, Kernel, KernelPlan, Step};
use apir_ir::target::sdma::MAX_DESCRIPTOR_BYTES;
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, Pass, PassContext, PassInfo};
use std::collections::{BTreeSet, HashSet};

/// Problems reported per kernel (and races per module) before the rest are
/// counted in one closing diagnostic (project-defined, as rustc and clang
/// cap their errors).
pub const MAX_ERRORS: usize = 20;

/// The most (access run, access run) pairs the read-after-write /
/// write-after-read proof examines per kernel (project-defined); a plan
/// that needs more is reported as not provable within the bound.
pub(crate) const MAX_HAZARD_PAIRS: u64 = 1 << 22;

/// The most runs the read-after-write / write-after-read proof cuts the
/// accesses that share bytes with a write into (project-defined).
pub(crate) const MAX_HAZARD_RUNS: u64 = 1 << 22;

/// The most row pieces the plan proof lays out per kernel (project-defined:
/// four times the largest copy limit the planner takes, so that every plan the
/// planner makes is proved).
pub(crate) const MAX_PROOF_PIECES: u64 = 1 << 24;
const _: () = assert!(MAX_PROOF_PIECES >= 4 * crate::schedule_staging::MAX_COPIES_LIMIT);

/// The pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckCoherency;

impl CheckCoherency {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "check-coherency",
        summary: "Prove each kernel's accessors compatible and its staging plan coherent",
        options: &[],
        create: |_| Ok(Box::new(CheckCoherency)),
    };
}

impl Pass for CheckCoherency {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let kernels = Kernel::all(m);
        let mut diags = Diagnostics::new();
        let mut opened = Vec::new();
        let mut budget = FootprintBudget::new(MAX_FOOTPRINT_RUNS, MAX_MODULE_SORTED_RUNS);
        for k in &kernels {
            let (plan, spans) = match KernelPlan::read_with_spans(m, k.op)? {
                Some((p, s)) => (Some(p), s),
                None => (None, Vec::new()),
            };
            let accessors: Vec<Option<Accessor>> = match &plan {
                Some(p) => p.accessors.iter().map(|&a| Some(a)).collect(),
                None => k.accesses.iter().map(|a| a.hint).collect(),
            };
            let sweeps = Sweep::of_kernel(m, k);
            let footprints = budget.footprints(k, &sweeps);
            let labels = tensors(m, k);
            let mut kd = matrix(m, k, &accessors, &labels);
            kd.extend(overlapping_writes(m, k, &footprints, &mut budget));
            // A plan is proved only over accesses that are coherent.
            if let (Some(p), true) = (&plan, kd.is_empty()) {
                cx.count("plans-proved", "staging plans checked", 1);
                kd.extend(prove(m, k, &sweeps, &footprints, p, &spans, &labels));
            }
            let name = m.ops[k.op].kind.name();
            diags.extend(
                cap(kd, m.ops[k.op].span, &format!("kernel @{}", k.name))
                    .into_iter()
                    .map(|d| d.about(k.op, name, None)),
            );
            opened.push((k, footprints));
        }
        if let Some(first) = kernels.first() {
            let (shown, more) = races(&opened, &mut budget);
            diags.extend(shown);
            let what = "the module's kernels";
            let span = m.ops[first.op].span;
            match more {
                More::None => {}
                More::Exactly(n) => diags.push(Diagnostic::error(
                    span,
                    format!("{what}: {n} more problems not shown"),
                )),
                More::AtLeast(n) => diags.push(Diagnostic::error(
                    span,
                    format!(
                        "{what}: at least {n} more problems not shown (racing pairs are told apart up to {MAX_RACE_PAIRS})"
                    ),
                )),
            }
        }
        if diags.is_empty() {
            Ok(Changed::No)
        } else {
            Err(diags)
        }
    }
}

/// The first [`MAX_ERRORS`] of `d`, then one error counting the rest.
fn cap(mut d: Diagnostics, span: apir_ir::Span, what: &str) -> Diagnostics {
    if d.len() > MAX_ERRORS {
        let more = d.len() - MAX_ERRORS;
        d.truncate(MAX_ERRORS);
        d.push(Diagnostic::error(
            span,
            format!("{what}: {more} more problems not shown"),
        ));
    }
    d
}

fn tensor_name(m: &Module, k: &Kernel, i: usize) -> String {
    format!("%{}", m.str(m.buffers[k.accesses[i].buffer].name))
}

fn op_name(k: &Kernel, i: usize) -> &'static str {
    use apir_ir::target::OpCode;
    if k.accesses[i].write {
        OpCode::Write.name()
    } else {
        OpCode::Read.name()
    }
}

fn describe(m: &Module, k: &Kernel, i: usize, acc: Option<Accessor>) -> String {
    format!(
        "`{}` of {} through {}",
        op_name(k, i),
        tensor_name(m, k, i),
        acc.map_or("an accessor not chosen yet".into(), an_accessor)
    )
}

/// "a stream accessor", "a tcm accessor", "an index accessor".
fn an_accessor(x: Accessor) -> String {
    let article = if x == Accessor::Index { "an" } else { "a" };
    format!("{article} {} accessor", x.name())
}

/// Why accessors `x` of access `a` and `y` of access `b` (of one tensor)
/// cannot be open together, if they cannot.
pub(crate) fn incompatible(
    a_write: bool,
    x: Accessor,
    b_write: bool,
    y: Accessor,
) -> Option<String> {
    let tcm = (x == Accessor::Tcm, y == Accessor::Tcm);
    match tcm {
        (true, true) => None,
        (true, false) | (false, true) => {
            let (t_write, other, o_write) = if tcm.0 {
                (a_write, y, b_write)
            } else {
                (b_write, x, a_write)
            };
            if t_write {
                Some(format!("a TCM write to a tensor that another access reaches through {} (the reference runtime does not track TCM accessors; apir does)", an_accessor(other)))
            } else if other == Accessor::Index {
                Some("a buffered reader (TCM) is incompatible with an unbuffered accessor on the same tensor".to_string())
            } else if o_write {
                Some("a buffered writer is exclusive".to_string())
            } else {
                None
            }
        }
        (false, false) => match (x.is_buffered(), y.is_buffered()) {
            (true, true) if a_write || b_write => Some("a buffered writer is exclusive".to_string()),
            (true, false) | (false, true) => Some(
                "a buffered reader or writer is incompatible with an unbuffered accessor on the same tensor".to_string(),
            ),
            _ => None,
        },
    }
}

/// The earlier accesses of a tensor of one direction and accessor: the
/// first of them and how many there are.
#[derive(Clone, Copy)]
struct Class {
    write: bool,
    accessor: Accessor,
    first: usize,
    count: usize,
}

/// The accessor matrix and the TCM rules among the accesses of each tensor
/// of `k` (`labels`, from [`tensors`]). Each access is reported once, at
/// most, against the first earlier access of its tensor it conflicts with,
/// with the number of other earlier accesses it conflicts with.
fn matrix(m: &Module, k: &Kernel, acc: &[Option<Accessor>], labels: &[usize]) -> Diagnostics {
    let mut out = Diagnostics::new();
    // Whether two accesses conflict depends on their direction and
    // accessor alone: per tensor, the earlier accesses are kept as the
    // first of each (direction, accessor) class and the count of each, so
    // each access is checked against at most six classes, not against
    // every earlier access (time linear in the accesses).
    let n = labels.iter().max().map_or(0, |l| l + 1);
    let mut seen: Vec<Vec<Class>> = vec![Vec::new(); n];
    for j in 0..k.accesses.len() {
        let Some(y) = acc[j] else { continue };
        let b = &k.accesses[j];
        let classes = &mut seen[labels[j]];
        let mut first: Option<(usize, String)> = None;
        let mut conflicting = 0usize;
        for c in classes.iter() {
            if let Some(r) = incompatible(c.write, c.accessor, b.write, y) {
                conflicting += c.count;
                if first.as_ref().is_none_or(|(i, _)| c.first < *i) {
                    first = Some((c.first, r));
                }
            }
        }
        match classes
            .iter_mut()
            .find(|c| c.write == b.write && c.accessor == y)
        {
            Some(c) => c.count += 1,
            None => classes.push(Class {
                write: b.write,
                accessor: y,
                first: j,
                count: 1,
            }),
        }
        let others = conflicting.saturating_sub(1);
        if let Some((i, r)) = first {
            let more = match others {
                0 => String::new(),
                1 => " (it conflicts with 1 other earlier access of the tensor too)".to_string(),
                n => format!(" (it conflicts with {n} other earlier accesses of the tensor too)"),
            };
            out.push(
                Diagnostic::error(
                    b.span,
                    format!(
                        "incoherent accessors in kernel @{}: {} and {}: {r}{more}",
                        k.name,
                        describe(m, k, j, Some(y)),
                        describe(m, k, i, acc[i])
                    ),
                )
                .with_note("the other access", k.accesses[i].span),
            );
        }
    }
    out
}

/// The two latest-ending runs seen so far of two different keys, for a
/// sweep in start order: a run overlaps some earlier-starting run of
/// another key exactly when it starts before the end of the latest-ending
/// one of another key.
#[derive(Clone, Copy, Default)]
struct Top2 {
    a: Option<(Addr, usize, (usize, usize))>,
    b: Option<(Addr, usize, (usize, usize))>,
}

impl Top2 {
    fn insert(&mut self, end: Addr, key: usize, what: (usize, usize)) {
        let new = Some((end, key, what));
        match self.a {
            None => self.a = new,
            Some(a) if a.1 == key => {
                if end > a.0 {
                    self.a = new;
                }
            }
            Some(a) if end > a.0 => {
                self.b = self.a;
                self.a = new;
            }
            Some(_) => match self.b {
                Some(b) if b.1 == key && end <= b.0 => {}
                Some(b) if b.1 != key && end <= b.0 => {}
                _ => self.b = new,
            },
        }
    }

    /// An earlier run of a key other than `key` that reaches past `start`.
    fn partner(&self, key: usize, start: Addr) -> Option<(usize, usize)> {
        [self.a, self.b]
            .into_iter()
            .flatten()
            .find(|&(end, k, _)| k != key && end > start)
            .map(|(_, _, w)| w)
    }
}

/// Writes to overlapping HBM bytes from two accesses of one kernel: one
/// sweep over every write's runs sorted by start, each pair reported once
/// at the later access with the first byte both write.
fn overlapping_writes(
    m: &Module,
    k: &Kernel,
    footprints: &[Footprint],
    budget: &mut FootprintBudget,
) -> Diagnostics {
    let writes: Vec<usize> = (0..footprints.len())
        .filter(|&i| k.accesses[i].write)
        .collect();
    let streams = writes.iter().map(|&i| footprints[i].iter()).collect();
    let mut top = Top2::default();
    let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (r, w) in merge_sorted(streams) {
        let i = writes[w];
        if let Some((_, j)) = top.partner(i, r.start) {
            pairs.insert((i.min(j), i.max(j)));
        }
        top.insert(r.end, i, (0, i));
    }
    let mut out = Diagnostics::new();
    for (i, j) in pairs {
        let (a, b) = (&k.accesses[i], &k.accesses[j]);
        let (fi, fj) = (&footprints[i], &footprints[j]);
        // Past the errors shown (`cap`), only the count matters: the first
        // shared byte is not searched for.
        let what = if out.len() >= MAX_ERRORS {
            String::new()
        } else {
            budget.shared(fi, fj, "write")
        };
        out.push(
            Diagnostic::error(
                b.span,
                format!(
                    "overlapping writes in kernel @{}: this `gpsimd.write` of {} and an earlier one of {} {what}",
                    k.name,
                    tensor_name(m, k, j),
                    tensor_name(m, k, i)
                ),
            )
            .with_note("the other access", a.span),
        );
    }
    out
}

/// The most distinct racing pairs of accesses the race sweep tells apart
/// (project-defined): past it, a pair found again cannot be told from a
/// new one, and the count of problems not shown is a lower bound. Memory
/// stays a few tens of MiB however many kernels race. (The unit tests
/// take a small bound, to reach it.)
#[cfg(not(test))]
pub(crate) const MAX_RACE_PAIRS: usize = 1 << 18;
#[cfg(test)]
pub(crate) const MAX_RACE_PAIRS: usize = 64;

/// How many racing pairs [`races`] found past those it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum More {
    None,
    Exactly(usize),
    AtLeast(usize),
}

/// Kernels on different cores run at the same time: an HBM byte one of
/// them writes must not be touched by another. One sweep over every
/// access's runs sorted by start address, in O(n log n): each run is
/// checked against the latest-ending earlier runs of two other cores (any
/// run for a write, writes for a read). Each racing pair of accesses is
/// reported once, with the first byte both touch: the first
/// [`MAX_ERRORS`] pairs in order of their accesses, and how many more
/// there are (the distinct pairs are kept up to [`MAX_RACE_PAIRS`]; only
/// the pairs shown become diagnostics).
fn races(
    opened: &[(&Kernel, Vec<Footprint>)],
    budget: &mut FootprintBudget,
) -> (Diagnostics, More) {
    let mut who: Vec<(usize, usize)> = Vec::new();
    let mut streams = Vec::new();
    for (ki, (_, fps)) in opened.iter().enumerate() {
        for (ai, f) in fps.iter().enumerate() {
            who.push((ki, ai));
            streams.push(f.iter());
        }
    }
    let (mut any, mut writes) = (Top2::default(), Top2::default());
    type Pair = ((usize, usize), (usize, usize));
    // The first pairs in order (what is shown), and every distinct pair
    // up to the bound (what is counted).
    let mut first: BTreeSet<Pair> = BTreeSet::new();
    let mut distinct: HashSet<Pair> = HashSet::new();
    let mut overflowed = false;
    for (r, s) in merge_sorted(streams) {
        let (ki, ai) = who[s];
        let k = opened[ki].0;
        let core = k.core as usize;
        let write = k.accesses[ai].write;
        let partner = if write { &any } else { &writes }.partner(core, r.start);
        if let Some(other) = partner {
            let pair = (other.min((ki, ai)), other.max((ki, ai)));
            first.insert(pair);
            if first.len() > MAX_ERRORS {
                first.pop_last();
            }
            if distinct.len() < MAX_RACE_PAIRS {
                distinct.insert(pair);
            } else if !distinct.contains(&pair) {
                overflowed = true;
            }
        }
        any.insert(r.end, core, (ki, ai));
        if write {
            writes.insert(r.end, core, (ki, ai));
        }
    }
    let rest = distinct.len().saturating_sub(first.len());
    let more = match (rest, overflowed) {
        (_, true) => More::AtLeast(rest),
        (0, false) => More::None,
        (n, false) => More::Exactly(n),
    };
    let mut out = Diagnostics::new();
    for ((ki, ai), (kj, aj)) in first {
        let (first, second) = ((opened[ki].0, ai), (opened[kj].0, aj));
        let (fa, fb) = (&opened[ki].1[ai], &opened[kj].1[aj]);
        let what = budget.shared(fa, fb, "touch");
        out.push(
            Diagnostic::error(
                second.0.accesses[second.1].span,
                format!(
                    "kernels @{} (core {}) and @{} (core {}) run at the same time and {what}, and at least one of them writes it",
                    second.0.name, second.0.core, first.0.name, first.0.core
                ),
            )
            .with_note("the other access", first.0.accesses[first.1].span),
        );
    }
    (out, more)
}

/// What the module's footprints may still take, over all its kernels:
/// runs held in memory (every kernel's footprints are kept for the race
/// sweep) and runs enumerated lazily (each is walked a few times). Past
/// the first, a walk is enumerated lazily when its dims nest; past both,
/// it is bounded by its hull.
///
/// The runs walked to find the first byte two overlapping footprints
/// share, for the messages, are bounded over the module too (by the lazy
/// bound): past it a message says that they share bytes, not which.
struct FootprintBudget {
    held: u64,
    lazy: u64,
    search: u64,
}

impl FootprintBudget {
    fn new(held: u64, lazy: u64) -> Self {
        FootprintBudget {
            held,
            lazy,
            search: lazy,
        }
    }

    /// What two footprints the sweep found overlapping share, for a
    /// message: "both {verb} HBM byte X" (the first), "both {verb} the
    /// same HBM bytes" once the search bound is spent, or, when one is a
    /// hull, that they may.
    fn shared(&mut self, a: &Footprint, b: &Footprint, verb: &str) -> String {
        if !(a.is_exact() && b.is_exact()) {
            return format!(
                "may both {verb} the same HBM bytes (a footprint too large to enumerate is bounded by its hull)"
            );
        }
        let seen = std::cell::Cell::new(0u64);
        let left = self.search;
        let within = |_: &Run| {
            seen.set(seen.get() + 1);
            seen.get() <= left
        };
        let at = first_overlap(a.iter().take_while(within), b.iter().take_while(within));
        self.search = left.saturating_sub(seen.get());
        match at {
            Some(at) => format!("both {verb} HBM byte {at:#x}"),
            None => format!("both {verb} the same HBM bytes"),
        }
    }

    /// The footprints of kernel `k`'s accesses (`sweeps`), its writes
    /// first: a write's exact runs serve both the overlapping-write check
    /// and the race sweep, a read's only the latter.
    fn footprints(&mut self, k: &Kernel, sweeps: &[Sweep]) -> Vec<Footprint> {
        let mut out: Vec<Option<Footprint>> = vec![None; sweeps.len()];
        for write in [true, false] {
            for (i, s) in sweeps.iter().enumerate() {
                if k.accesses[i].write == write {
                    out[i] = Some(self.footprint(s));
                }
            }
        }
        out.into_iter()
            .map(|f| f.unwrap_or(Footprint::Exact(Vec::new())))
            .collect()
    }

    /// The footprint of `s` within what is left, which it then takes.
    fn footprint(&mut self, s: &Sweep) -> Footprint {
        let f = s.footprint_within(self.held.min(MAX_FOOTPRINT_RUNS), self.lazy);
        if let Footprint::Exact(r) = &f {
            self.held = self.held.saturating_sub(r.len() as u64);
        }
        self.lazy = self.lazy.saturating_sub(f.lazy_runs());
        f
    }
}

/// Proves a plan coherent; see the module doc. `labels` gives each
/// access's tensor ([`tensors`]); the staging groups follow from them and
/// from the plan's accessors, but the read-after-write and
/// write-after-read proof does not trust them: it orders every pair of
/// accesses that touch a common byte by address (`Hazards::check`).
/// Each problem is reported at the step it concerns (or the kernel).
pub fn prove(
    m: &Module,
    k: &Kernel,
    sweeps: &[Sweep],
    footprints: &[Footprint],
    p: &KernelPlan,
    spans: &[apir_ir::Span],
    labels: &[usize],
) -> Diagnostics {
    let mut out = Diagnostics::new();
    let kspan = m.ops[k.op].span;
    let mut err = |at: Option<usize>, msg: String| {
        let span = at.and_then(|i| spans.get(i).copied()).unwrap_or(kspan);
        out.push(Diagnostic::error(
            span,
            format!("staging plan of kernel @{}: {msg}", k.name),
        ))
    };
    // Computes cover [0, E) once, in order.
    let mut next = 0u64;
    let mut computes: Vec<(usize, u64, u64)> = Vec::new();
    for (i, s) in p.steps.iter().enumerate() {
        if let Step::Compute { first, count } = *s {
            if first != next {
                err(Some(i), format!("compute step {i} runs iterations from {first}, but the next iteration is {next}"));
                return out;
            }
            next = first + count;
            computes.push((i, first, first + count));
        }
    }
    if next != k.elements {
        err(
            None,
            format!(
                "the computes run {next} of the kernel's {} iterations",
                k.elements
            ),
        );
        return out;
    }
    let gs = groups(k, sweeps, &p.accessors, labels);
    let sched = Schedule::run(k, p);
    let hb = |a: usize, b: usize| sched.happens_before(a, b);
    // Copy ids to steps.
    let copy_steps: Vec<usize> = p
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Copy(_)))
        .map(|(i, _)| i)
        .collect();
    let last_core = p
        .steps
        .iter()
        .rposition(|s| !matches!(s, Step::Copy(c) if c.method == apir_ir::staging::Method::Dma));
    let mut owner_of_group = vec![false; k.accesses.len()];
    for g in &gs {
        owner_of_group[g.accesses[0]] = true;
    }
    let mut owned = vec![false; copy_steps.len()];
    for (id, &si) in copy_steps.iter().enumerate() {
        if let Step::Copy(c) = p.steps[si] {
            owned[id] = owner_of_group
                .get(c.access as usize)
                .copied()
                .unwrap_or(false);
        }
    }
    let index = CopyIndex::new(p, &copy_steps);
    // (group, iterations per tile, tiles) of each group whose buffers
    // were read.
    let mut staged: Vec<(usize, u64, u64)> = Vec::new();
    // Row pieces laid out so far (bounded by MAX_PROOF_PIECES).
    let mut work = 0u64;
    for (gi, g) in gs.iter().enumerate() {
        let owner = g.accesses[0];
        let slots: Vec<usize> = (0..p.slots.len())
            .filter(|&s| p.slots[s].access as usize == owner)
            .collect();
        let name = tensor_name(m, k, owner);
        if slots.is_empty() {
            err(
                None,
                format!("access {owner} ({name}) is staged but has no buffer"),
            );
            continue;
        }
        let bytes = u64::from(p.slots[slots[0]].bytes);
        if slots.iter().any(|&s| u64::from(p.slots[s].bytes) != bytes)
            || bytes % g.bytes_per_iteration != 0
        {
            err(None, format!("the buffers of access {owner} ({name}) differ in size or do not hold whole iterations"));
            continue;
        }
        let t_len = tile_iterations(g, bytes).max(1);
        let tiles = k.elements.div_ceil(t_len);
        // Copies of this group, by tile. Every tile touches some byte, so it
        // needs a copy: a plan with more tiles than copies (past the few
        // whose problems would be shown) is reported without walking its
        // tiles, so the work stays bounded by the plan's size.
        let mine = index.of_access(owner as u32);
        for &(_, tile, _, _, id) in mine.iter().filter(|x| u64::from(x.1) >= tiles) {
            let si = copy_steps[id as usize];
            err(
                Some(si),
                format!("copy {id} names tile {tile} of access {owner} ({name}), which has {tiles} tiles"),
            );
        }
        if tiles > mine.len() as u64 + MAX_ERRORS as u64 {
            err(
                None,
                format!(
                    "access {owner} ({name}) has {tiles} tiles but only {} cop{}: every tile needs its loads or flushes",
                    mine.len(),
                    if mine.len() == 1 { "y" } else { "ies" }
                ),
            );
            continue;
        }
        staged.push((gi, t_len, tiles));
        let ids = |t: u64| index.of_tile(owner as u32, t).iter().map(|x| x.4 as usize);
        // Work bound: laying out the tiles enumerates every row piece of
        // the group's accesses; a plan whose tiles hold more (only a
        // hand-written one can: the planner's copy limit is lower) is
        // reported instead of walked.
        let pieces: u64 = g
            .accesses
            .iter()
            .map(|&a| sweeps[a].rows(k.elements).saturating_add(tiles))
            .fold(0, u64::saturating_add);
        work = work.saturating_add(pieces);
        if work > MAX_PROOF_PIECES {
            err(None, format!("the tiles of access {owner} ({name}) hold more than {MAX_PROOF_PIECES} row pieces: the plan cannot be proved within that bound"));
            continue;
        }
        let mut prev_on_slot: Vec<Option<u64>> = vec![None; slots.len()];
        for t in 0..tiles {
            let e0 = t * t_len;
            let e1 = (e0 + t_len).min(k.elements);
            let layout = TileLayout::new(k, sweeps, g, e0, e1);
            let slot = slots[(t % slots.len() as u64) as usize];
            let base = u64::from(p.slots[slot].dram);
            let mut loaded = Vec::new();
            let mut stored = Vec::new();
            for id in ids(t) {
                let Step::Copy(c) = p.steps[copy_steps[id]] else {
                    continue;
                };
                let run = copy_run(&c);
                let wanted = match c.dir {
                    Dir::M2s => &layout.reads,
                    Dir::S2m => &layout.writes,
                };
                let inside = wanted
                    .partition_point(|r| r.start <= run.start)
                    .checked_sub(1)
                    .is_some_and(|i| run.end <= wanted[i].end);
                let place = layout
                    .offset_of(Addr::from(c.hbm), u64::from(c.bytes))
                    .map(|o| base + o);
                if c.slot as usize != slot {
                    err(Some(copy_steps[id]), format!("copy {id} of tile {t} of access {owner} ({name}) uses buffer {}, but the tile's buffer is {slot}", c.slot));
                } else if !inside {
                    let what = if c.dir == Dir::M2s { "reads" } else { "writes" };
                    err(Some(copy_steps[id]), format!("copy {id} moves HBM bytes [{:#x}, {:#x}) that tile {t} of access {owner} ({name}) never {what}", run.start, run.end));
                } else if place != Some(u64::from(c.dram)) {
                    err(Some(copy_steps[id]), format!("copy {id} puts HBM byte {:#x} at dataram {:#x}, but tile {t}'s layout holds it at {:#x}", c.hbm, c.dram, place.unwrap_or(0)));
                }
                match c.dir {
                    Dir::M2s => loaded.push(run),
                    Dir::S2m => stored.push(run),
                }
            }
            let mut l = loaded.clone();
            coalesce(&mut l);
            let mut s = stored.clone();
            coalesce(&mut s);
            if l != layout.reads {
                err(None, format!("the loads of tile {t} of access {owner} ({name}) do not cover the bytes its reads touch"));
            }
            if s != layout.writes {
                err(None, format!("the flushes of tile {t} of access {owner} ({name}) do not copy exactly the bytes its writes touch"));
            }
            // Ordering on the dependency graph.
            let (first_c, last_c) = overlapping(&computes, e0, e1);
            let (Some(first_c), Some(last_c)) = (first_c, last_c) else {
                continue;
            };
            for id in ids(t) {
                let si = copy_steps[id];
                let Step::Copy(c) = p.steps[si] else { continue };
                match c.dir {
                    Dir::M2s if !hb(si, first_c) => err(Some(si), format!("load copy {id} of tile {t} of access {owner} ({name}) may not have completed when the tile's first compute (step {first_c}) starts")),
                    Dir::S2m if !hb(last_c, si) => err(Some(si), format!("flush copy {id} of tile {t} of access {owner} ({name}) may start before the tile's last compute (step {last_c}) ends")),
                    Dir::S2m if last_core.is_none_or(|lc| !hb(si, lc) && si != lc) => err(Some(si), format!("flush copy {id} of tile {t} of access {owner} ({name}) is not waited for before the kernel ends")),
                    _ => {}
                }
            }
            let si = (t % slots.len() as u64) as usize;
            if let Some(prev) = prev_on_slot[si] {
                let pe0 = prev * t_len;
                let pe1 = (pe0 + t_len).min(k.elements);
                let prev_last = overlapping(&computes, pe0, pe1).1;
                let loads: Vec<usize> = ids(t)
                    .map(|id| copy_steps[id])
                    .filter(|&s| dir_of(p, s) == Dir::M2s)
                    .collect();
                if let Some(pl) = prev_last {
                    if let Some((_, s)) = sched.first_not_before(&[pl], &loads) {
                        let id = copy_id(&copy_steps, s);
                        err(Some(s), format!("load copy {id} refills buffer {slot} for tile {t} of access {owner} ({name}) before tile {prev} was consumed"));
                    }
                }
                let flushes: Vec<usize> = ids(prev)
                    .map(|id| copy_steps[id])
                    .filter(|&s| dir_of(p, s) == Dir::S2m)
                    .collect();
                if let Some((ps, _)) = sched.first_not_before(&flushes, &[first_c]) {
                    let pid = copy_id(&copy_steps, ps);
                    err(Some(first_c), format!("tile {t} of access {owner} ({name}) is computed in buffer {slot} before flush copy {pid} of tile {prev} has completed"));
                }
                if let Some((ps, s)) = sched.first_not_before(&flushes, &loads) {
                    let (pid, id) = (copy_id(&copy_steps, ps), copy_id(&copy_steps, s));
                    err(Some(s), format!("load copy {id} refills buffer {slot} before flush copy {pid} of tile {prev} of access {owner} ({name}) has completed"));
                }
            }
            prev_on_slot[si] = Some(t);
        }
    }
    for (id, o) in owned.iter().enumerate() {
        if !o {
            err(
                Some(copy_steps[id]),
                format!("copy {id} names an access that is not the first of a staging group"),
            );
        }
    }
    // No byte flushed twice, over every flush of the kernel (whatever the
    // group: a byte written through two groups would be flushed by both).
    let mut flushed: Vec<(Run, usize)> = copy_steps
        .iter()
        .filter_map(|&si| match p.steps[si] {
            Step::Copy(c) if c.dir == Dir::S2m => Some((copy_run(&c), c.access as usize)),
            _ => None,
        })
        .collect();
    flushed.sort_unstable();
    let mut reach: Option<Addr> = None;
    for &(r, a) in &flushed {
        if reach.is_some_and(|e| r.start < e) {
            err(
                None,
                format!(
                    "HBM byte {:#x} of access {a} ({}) is flushed twice",
                    r.start,
                    tensor_name(m, k, a)
                ),
            );
            break;
        }
        reach = Some(reach.map_or(r.end, |e| e.max(r.end)));
    }
    let cx = Hazards {
        m,
        k,
        sweeps,
        p,
        gs: &gs,
        copy_steps: &copy_steps,
        sched: &sched,
    };
    for (at, msg) in cx.check(footprints, &staged, &computes) {
        err(at, msg);
    }
    out
}

/// A plan's copies by owner access, tile, direction and HBM address:
/// `(access, tile, dir, hbm, copy id)`, sorted (24 bytes a copy).
struct CopyIndex(Vec<(u32, u32, Dir, u64, u32)>);

impl CopyIndex {
    fn new(p: &KernelPlan, copy_steps: &[usize]) -> CopyIndex {
        let mut v: Vec<(u32, u32, Dir, u64, u32)> = copy_steps
            .iter()
            .enumerate()
            .filter_map(|(id, &si)| match p.steps[si] {
                Step::Copy(c) => Some((c.access, c.tile, c.dir, c.hbm, id as u32)),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        CopyIndex(v)
    }

    fn of_access(&self, a: u32) -> &[(u32, u32, Dir, u64, u32)] {
        let lo = self.0.partition_point(|x| x.0 < a);
        let hi = self.0.partition_point(|x| x.0 <= a);
        &self.0[lo..hi]
    }

    /// The copies of tile `t` of access `a` (loads, then flushes).
    fn of_tile(&self, a: u32, t: u64) -> &[(u32, u32, Dir, u64, u32)] {
        let Ok(t) = u32::try_from(t) else {
            return &[];
        };
        let lo = self.0.partition_point(|x| (x.0, x.1) < (a, t));
        let hi = self.0.partition_point(|x| (x.0, x.1) <= (a, t));
        &self.0[lo..hi]
    }

    /// The ids of the copies of tile `t` of access `a` in direction `dir`
    /// that move bytes of `region` (copies of one tile and direction are
    /// disjoint in a plan that passed the coverage checks).
    fn touching(&self, a: u32, t: u64, dir: Dir, region: Run) -> impl Iterator<Item = u32> + '_ {
        let tile = self.of_tile(a, t);
        let lo = tile.partition_point(|x| x.2 < dir);
        let hi = tile.partition_point(|x| x.2 <= dir);
        let same = &tile[lo..hi];
        // Copies that start before the region ends, latest first, while
        // they still reach into it.
        let end = same.partition_point(|x| Addr::from(x.3) < region.end);
        same[..end]
            .iter()
            .rev()
            .take_while(move |x| Addr::from(x.3) + Addr::from(MAX_DESCRIPTOR_BYTES) > region.start)
            .map(|x| x.4)
    }
}

/// The id of the copy at step `s`.
fn copy_id(copy_steps: &[usize], s: usize) -> usize {
    copy_steps.partition_point(|&x| x < s)
}

/// For each access, whether it shares an HBM byte with another access of
/// which one of the two writes: only those take part in the
/// read-after-write / write-after-read proof. A read shares one when it
/// meets the union of the writes; a write when it meets the union of the
/// reads (two writes that meet are an error before any plan is proved).
fn sharing_a_written_byte(k: &Kernel, footprints: &[Footprint]) -> Vec<bool> {
    let kind = |write: bool| -> Vec<usize> {
        (0..footprints.len())
            .filter(|&i| k.accesses[i].write == write)
            .collect()
    };
    let (reads, writes) = (kind(false), kind(true));
    // Every run read counts against one budget: the runs merged into the
    // two unions (each made once), then each access's runs, each looked
    // up in the opposite union by binary search. Past the budget the
    // answer is conservative: every access takes part.
    let budget = MAX_HAZARD_RUNS.saturating_mul(4);
    let seen = std::cell::Cell::new(0u64);
    let within = |_: &Run| {
        seen.set(seen.get() + 1);
        seen.get() <= budget
    };
    // A union held in memory is at most as long as the footprints held
    // exactly ([`MAX_FOOTPRINT_RUNS`]); a longer one is past the bound too.
    let cap = crate::staging::footprint::MAX_FOOTPRINT_RUNS as usize;
    let union = |ids: &[usize]| -> Vec<Run> {
        let merged = merge_sorted(ids.iter().map(|&i| footprints[i].iter()).collect());
        let runs: Vec<Run> = coalesced(merged.map(|(r, _)| r).take_while(within))
            .take(cap + 1)
            .collect();
        if runs.len() > cap {
            seen.set(budget + 1);
        }
        runs
    };
    let (read_union, write_union) = (union(&reads), union(&writes));
    let mut out = Vec::with_capacity(footprints.len());
    for (a, f) in footprints.iter().enumerate() {
        if seen.get() > budget {
            break;
        }
        let other = if k.accesses[a].write {
            &read_union
        } else {
            &write_union
        };
        // The union is sorted and its runs disjoint: the first run that
        // ends after `r` starts is the only one that can meet it first.
        let meets = |r: Run| {
            let i = other.partition_point(|u| u.end <= r.start);
            r.start < r.end && other.get(i).is_some_and(|u| u.start < r.end)
        };
        out.push(!other.is_empty() && f.iter().take_while(within).any(meets));
    }
    if seen.get() > budget {
        return vec![true; footprints.len()];
    }
    out
}

/// The HBM bytes a copy moves.
fn copy_run(c: &apir_ir::staging::Copy) -> Run {
    Run {
        start: Addr::from(c.hbm),
        end: Addr::from(c.hbm) + Addr::from(c.bytes),
    }
}

/// Where an access's bytes are held while a range of iterations runs: a
/// tile of a staging group, or (for an indexed access) nowhere but HBM,
/// during one compute step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Unit {
    /// Tile `tile` of group `group`.
    Tile { group: usize, tile: u64 },
    /// Compute step `step` (an indexed access).
    Step(usize),
}

/// The read-after-write / write-after-read proof by address.
struct Hazards<'a> {
    m: &'a Module,
    k: &'a Kernel,
    sweeps: &'a [Sweep],
    p: &'a KernelPlan,
    gs: &'a [Group],
    copy_steps: &'a [usize],
    sched: &'a Schedule,
}

/// One access's bytes in one unit.
#[derive(Clone, Copy, Debug)]
struct Piece {
    run: Run,
    unit: u32,
    access: u32,
    write: bool,
}

impl Hazards<'_> {
    /// Every pair of accesses that touch a common HBM byte, at least one of
    /// them writing it, is ordered as the kernel's semantics require
    /// (iteration `e` reads, then writes; a read sees every write of an
    /// earlier iteration and none of a later one), whatever the staging
    /// groups: the bytes of each access are cut by tile (staged) or
    /// compute step (indexed, when its footprint meets a staged one), every
    /// overlapping pair of pieces in different units is found by one sweep
    /// over the pieces sorted by address, and the events that make the
    /// bytes visible (a tile's flush copies of those bytes, a compute step
    /// for an indexed access) must happen before the events that fetch
    /// them (a tile's load copies, a compute step), on the dependency graph.
    /// Two pieces of one tile share the tile's buffer and need no copy
    /// between them.
    fn check(
        &self,
        footprints: &[Footprint],
        staged: &[(usize, u64, u64)],
        computes: &[(usize, u64, u64)],
    ) -> Vec<(Option<usize>, String)> {
        let (k, p) = (self.k, self.p);
        let sharing = sharing_a_written_byte(k, footprints);
        let mut units: Vec<(Unit, u64, u64)> = Vec::new();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut buf: Vec<Run> = Vec::new();
        let too_many = || {
            vec![(None, format!("the order of the accesses that share bytes cannot be proved within {MAX_HAZARD_RUNS} runs"))]
        };
        // Access `a`'s runs in `buf`, merged, as pieces of `unit`.
        let add = |pieces: &mut Vec<Piece>, buf: &mut Vec<Run>, unit: u32, a: usize| {
            coalesce(buf);
            pieces.extend(buf.drain(..).map(|run| Piece {
                run,
                unit,
                access: a as u32,
                write: k.accesses[a].write,
            }));
        };
        for &(gi, t_len, tiles) in staged {
            let members: Vec<usize> = self.gs[gi]
                .accesses
                .iter()
                .copied()
                .filter(|&a| sharing[a])
                .collect();
            if members.is_empty() {
                continue;
            }
            for t in 0..tiles {
                let e0 = t * t_len;
                let e1 = (e0 + t_len).min(k.elements);
                let unit = units.len() as u32;
                units.push((Unit::Tile { group: gi, tile: t }, e0, e1));
                for &a in &members {
                    self.sweeps[a].runs_into(e0, e1, &mut buf);
                    add(&mut pieces, &mut buf, unit, a);
                }
                if pieces.len() as u64 > MAX_HAZARD_RUNS {
                    return too_many();
                }
            }
        }
        if pieces.is_empty() {
            return Vec::new();
        }
        // Indexed accesses that share bytes with a write, one unit per
        // compute step.
        for (a, acc) in p.accessors.iter().enumerate() {
            if acc.is_buffered() || !sharing[a] {
                continue;
            }
            for &(si, first, end) in computes {
                let unit = units.len() as u32;
                units.push((Unit::Step(si), first, end));
                self.sweeps[a].runs_into(first, end, &mut buf);
                if (pieces.len() + buf.len()) as u64 > MAX_HAZARD_RUNS {
                    return too_many();
                }
                add(&mut pieces, &mut buf, unit, a);
            }
        }
        pieces.sort_unstable_by_key(|x| (x.run.start, x.unit, x.access));
        let by_tile = CopyIndex::new(p, self.copy_steps);
        let mut out = Vec::new();
        // One error per pair of units; every overlapping pair of pieces is
        // checked, since two tiles may share bytes in several places and in
        // both directions.
        let mut reported: HashSet<(u32, u32)> = HashSet::new();
        let mut pairs = 0u64;
        let (mut active, mut active_w): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
        for (xi, x) in pieces.iter().enumerate() {
            let start = x.run.start;
            let list = if x.write {
                active.retain(|&q| pieces[q].run.end > start);
                &active
            } else {
                active_w.retain(|&q| pieces[q].run.end > start);
                &active_w
            };
            for &yi in list {
                // Every pair looked at counts, those skipped below too: many
                // accesses overlapping inside one tile cost as much.
                pairs += 1;
                if pairs > MAX_HAZARD_PAIRS {
                    out.push((None, format!("the order of the accesses that share bytes cannot be proved within {MAX_HAZARD_PAIRS} pairs of runs")));
                    return out;
                }
                let y = &pieces[yi];
                if x.unit == y.unit {
                    continue;
                }
                let (ux, uy) = (units[x.unit as usize].0, units[y.unit as usize].0);
                if matches!((ux, uy), (Unit::Step(_), Unit::Step(_))) {
                    continue; // both on the core, in program order
                }
                let key = (x.unit.min(y.unit), x.unit.max(y.unit));
                if reported.contains(&key) {
                    continue;
                }
                let region = Run {
                    start,
                    end: x.run.end.min(y.run.end),
                };
                if let Some(e) = self.pair(&units, &by_tile, x, y, region) {
                    reported.insert(key);
                    out.push(e);
                    if out.len() > MAX_ERRORS {
                        return out;
                    }
                }
            }
            active.push(xi);
            if x.write {
                active_w.push(xi);
            }
        }
        out
    }

    /// The steps that make `piece`'s bytes in `region` visible (a write's
    /// flush copies or compute step) or fetch them (a read's load copies
    /// or compute step).
    fn events(
        &self,
        units: &[(Unit, u64, u64)],
        by_tile: &CopyIndex,
        piece: &Piece,
        region: Run,
    ) -> Vec<usize> {
        match units[piece.unit as usize].0 {
            Unit::Step(si) => vec![si],
            Unit::Tile { group, tile } => {
                let owner = self.gs[group].accesses[0] as u32;
                let dir = if piece.write { Dir::S2m } else { Dir::M2s };
                by_tile
                    .touching(owner, tile, dir, region)
                    .map(|id| self.copy_steps[id as usize])
                    .filter(|&si| match self.p.steps[si] {
                        Step::Copy(c) => copy_run(&c).overlaps(&region),
                        _ => false,
                    })
                    .collect()
            }
        }
    }

    fn event_name(&self, si: usize) -> String {
        match self.p.steps[si] {
            Step::Copy(c) => {
                let id = self.copy_steps.partition_point(|&s| s < si);
                let kind = if c.dir == Dir::M2s { "load" } else { "flush" };
                format!("{kind} copy {id}")
            }
            _ => format!("compute step {si}"),
        }
    }

    fn place(&self, units: &[(Unit, u64, u64)], piece: &Piece) -> String {
        let a = piece.access as usize;
        let what = format!(
            "`{}` of {}",
            op_name(self.k, a),
            tensor_name(self.m, self.k, a)
        );
        match units[piece.unit as usize].0 {
            Unit::Tile { group, tile } => format!(
                "{what} (tile {tile} of the staging group of access {})",
                self.gs[group].accesses[0]
            ),
            Unit::Step(si) => format!("{what} (indexed, in compute step {si})"),
        }
    }

    /// Checks one pair of overlapping pieces in different units; `None`
    /// when they are ordered as the semantics require.
    fn pair(
        &self,
        units: &[(Unit, u64, u64)],
        by_tile: &CopyIndex,
        x: &Piece,
        y: &Piece,
        region: Run,
    ) -> Option<(Option<usize>, String)> {
        // `w` writes; `o` reads or writes.
        let (w, o) = if x.write { (x, y) } else { (y, x) };
        let (_, w0, w1) = units[w.unit as usize];
        let (_, o0, o1) = units[o.unit as usize];
        let h = region.start;
        // Which must come first: the write's visibility (`true`) or the
        // other's event (`false`).
        let write_first = if o.write {
            if w1 <= o0 {
                true
            } else if o1 <= w0 {
                false
            } else {
                return Some((None, format!("{} and {} both write HBM byte {h:#x} in overlapping iteration ranges through different buffers: no order of their flushes is right for every byte", self.place(units, w), self.place(units, o))));
            }
        } else if w1 <= o0 {
            true // read after write
        } else if o1 <= w0 + 1 {
            false // write after read (a read of iteration e precedes its write)
        } else {
            return Some((None, format!("{} reads HBM byte {h:#x} and {} writes it, in overlapping iteration ranges through different buffers: no order of their copies serves every iteration; stage them in one group (\"tcm\") or index them", self.place(units, o), self.place(units, w))));
        };
        let (ew, eo) = (
            self.events(units, by_tile, w, region),
            self.events(units, by_tile, o, region),
        );
        let (before, after) = if write_first { (&ew, &eo) } else { (&eo, &ew) };
        if let Some((a, b)) = self.sched.first_not_before(before, after) {
            {
                // The message of the in-place group (one group, two tiles).
                if let (
                    Unit::Tile {
                        group: g1,
                        tile: kt,
                    },
                    Unit::Tile { group: g2, tile: j },
                    true,
                    false,
                ) = (
                    units[w.unit as usize].0,
                    units[o.unit as usize].0,
                    write_first,
                    o.write,
                ) {
                    if g1 == g2 {
                        let owner = self.gs[g1].accesses[0];
                        return Some((Some(b), format!("tile {j} of access {owner} ({}) reads bytes tile {kt} wrote, but {} may run before {} completes", tensor_name(self.m, self.k, owner), self.event_name(b), self.event_name(a))));
                    }
                }
                let (first, second) = if write_first { (w, o) } else { (o, w) };
                let (did, does) = match (write_first, o.write) {
                    (true, false) => ("writes", "reads it"),
                    (false, false) => ("reads", "writes it"),
                    _ => ("writes", "writes it again"),
                };
                return Some((Some(b), format!("{} {did} HBM byte {h:#x} and {} {does} in a later iteration, but {} may run before {} completes", self.place(units, first), self.place(units, second), self.event_name(b), self.event_name(a))));
            }
        }
        None
    }
}

/// The first and last compute steps (sorted, contiguous `(step, first,
/// end)` ranges) that run any iteration of `[e0, e1)`.
fn overlapping(computes: &[(usize, u64, u64)], e0: u64, e1: u64) -> (Option<usize>, Option<usize>) {
    let lo = computes.partition_point(|c| c.2 <= e0);
    let hi = computes.partition_point(|c| c.1 < e1);
    if lo < hi {
        (Some(computes[lo].0), Some(computes[hi - 1].0))
    } else {
        (None, None)
    }
}

fn dir_of(p: &KernelPlan, step: usize) -> Dir {
    match p.steps[step] {
        Step::Copy(c) => c.dir,
        _ => Dir::M2s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels(text: &str) -> (Module, Vec<Kernel>) {
        let (m, _) =
            apir_ir::parse_str("k.apir", text, apir_ir::ParseOptions::default()).expect("parses");
        let k = Kernel::all(&m);
        (m, k)
    }

    /// Kernels on different cores writing the same bytes: the first
    /// racing pairs are shown and the rest counted, exactly while the
    /// distinct pairs are within the bound, as a lower bound past it.
    #[test]
    fn racing_kernels_are_shown_first_and_counted() {
        let module = |n: usize| {
            let mut text = String::from(
                "module attributes {arch = \"v2\"} {\n  %h = mem.hbm {addr = 0x40000000} : tensor<4096xf32>\n",
            );
            for i in 0..n {
                text.push_str(&format!(
                    "  gpsimd.kernel @k{i} {{core = {i}}} {{\n    gpsimd.write %h[[1, 4]] + {}\n  }}\n",
                    i % 3
                ));
            }
            text.push_str("}\n");
            let (mut m, _) = apir_ir::parse_str("r.apir", &text, apir_ir::ParseOptions::default())
                .expect("parses");
            let mut cx = PassContext::default();
            match CheckCoherency.run(&mut m, &mut cx) {
                Err(d) => d,
                Ok(_) => Diagnostics::new(),
            }
        };
        // One new pair a kernel or so: 40 kernels stay within the bound
        // (64 in the unit tests), 200 go past it.
        let few = module(40);
        assert_eq!(few.len(), MAX_ERRORS + 1, "{few:?}");
        assert!(few[..MAX_ERRORS]
            .iter()
            .all(|d| d.message.contains("run at the same time")));
        let last = &few[MAX_ERRORS].message;
        assert!(
            last.starts_with("the module's kernels: ")
                && last.ends_with(" more problems not shown"),
            "{last}"
        );
        let many = module(200);
        let last = &many[MAX_ERRORS].message;
        assert!(
            last.contains(&format!(
                "at least {} more problems not shown",
                MAX_RACE_PAIRS - MAX_ERRORS
            )),
            "{last}"
        );
        // The pairs shown are the first ones, in order of their accesses
        // (the earlier one, at the note, then the later), either way.
        for d in [&few, &many] {
            let order: Vec<(u32, u32)> = d[..MAX_ERRORS]
                .iter()
                .map(|d| {
                    let other = d.notes[0].1.map_or(0, |s| s.start);
                    (other, d.span.map_or(0, |s| s.start))
                })
                .collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        }
    }

    /// The accessor matrix reports, at each access that conflicts with an
    /// earlier access of its tensor, the first such access and how many
    /// others there are: what comparing it with every earlier access of
    /// its tensor gives, on random kernels of reads and writes of two
    /// tensors through random accessors.
    #[test]
    fn matrix_names_the_first_conflict_and_counts_the_rest() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let access = (any::<bool>(), 0usize..2, 0usize..4);
        let strategy = proptest::collection::vec(access, 1..14);
        let mut runner = TestRunner::new(Config {
            cases: 256,
            ..Config::default()
        });
        runner
            .run(&strategy, |accesses| {
                let mut text = String::from(
                    "module attributes {arch = \"v2\"} {
  %a = mem.hbm {addr = 0x1000} : tensor<64xf32>
  %b = mem.hbm {addr = 0x2000} : tensor<64xf32>
  gpsimd.kernel @k {
",
                );
                for (i, &(write, t, hint)) in accesses.iter().enumerate() {
                    let op = if write { "write" } else { "read" };
                    let hint = [
                        "",
                        " {accessor = \"stream\"}",
                        " {accessor = \"tcm\"}",
                        " {accessor = \"index\"}",
                    ][hint];
                    // Disjoint bytes: only the accessors conflict.
                    text.push_str(&format!(
                        "    gpsimd.{op} %{}[[1, 4]] + {}{hint}\n",
                        ["a", "b"][t],
                        4 * i
                    ));
                }
                text.push_str("  }\n}\n");
                let (m, ks) = kernels(&text);
                let k = &ks[0];
                let acc: Vec<Option<Accessor>> = accesses
                    .iter()
                    .map(|&(_, _, h)| {
                        [
                            None,
                            Some(Accessor::Stream),
                            Some(Accessor::Tcm),
                            Some(Accessor::Index),
                        ][h]
                    })
                    .collect();
                let labels = tensors(&m, k);
                let got: Vec<(u32, String)> = matrix(&m, k, &acc, &labels)
                    .iter()
                    .map(|d| (d.span.map_or(0, |s| s.start), d.message.clone()))
                    .collect();
                // Every earlier access of the tensor, one by one.
                let mut want = Vec::new();
                for j in 0..accesses.len() {
                    let Some(y) = acc[j] else { continue };
                    let conflicts: Vec<(usize, String)> = (0..j)
                        .filter(|&i| labels[i] == labels[j])
                        .filter_map(|i| {
                            let x = acc[i]?;
                            incompatible(accesses[i].0, x, accesses[j].0, y).map(|r| (i, r))
                        })
                        .collect();
                    let Some((i, r)) = conflicts.first() else {
                        continue;
                    };
                    let more = match conflicts.len() - 1 {
                        0 => String::new(),
                        1 => " (it conflicts with 1 other earlier access of the tensor too)"
                            .to_string(),
                        n => format!(
                            " (it conflicts with {n} other earlier accesses of the tensor too)"
                        ),
                    };
                    let message = format!(
                        "incoherent accessors in kernel @k: {} and {}: {r}{more}",
                        describe(&m, k, j, Some(y)),
                        describe(&m, k, *i, acc[*i])
                    );
                    want.push((k.accesses[j].span.start, message));
                }
                prop_assert_eq!(got, want);
                Ok(())
            })
            .unwrap();
    }

    /// Which accesses share a byte with an access of the other kind is what
    /// the bytes say: each access's bytes from the reference evaluator
    /// (every element's address, element-size bytes each), compared pair
    /// by pair, on random kernels of strided, interleaved and offset reads
    /// and writes over overlapping tensors of two element sizes.
    #[test]
    fn accesses_sharing_a_written_byte_are_the_ones_the_bytes_say() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let access = (any::<bool>(), 0usize..3, 1u64..4, 0u64..7, any::<bool>());
        let strategy = proptest::collection::vec(access, 1..7);
        let mut runner = TestRunner::new(Config {
            cases: 256,
            ..Config::default()
        });
        runner
            .run(&strategy, |accesses| {
                // Three tensors, 6 and 3 bytes apart, f32 and bf16.
                let mut text = String::from(
                    "module attributes {arch = \"v2\"} {
  %a = mem.hbm {addr = 0x1000} : tensor<64xf32>
  %b = mem.hbm {addr = 0x1006} : tensor<64xf32>
  %c = mem.hbm {addr = 0x1009} : tensor<128xbf16>
  gpsimd.kernel @k {
",
                );
                for &(write, t, step, off, two) in &accesses {
                    let name = ["a", "b", "c"][t];
                    let op = if write { "write" } else { "read" };
                    // 12 elements each: [[step, 12]] or [[step * 6, 2], [step, 6]].
                    let ap = if two {
                        format!("[[{}, 2], [{step}, 6]]", step * 6)
                    } else {
                        format!("[[{step}, 12]]")
                    };
                    text.push_str(&format!("    gpsimd.{op} %{name}{ap} + {off}\n"));
                }
                text.push_str("  }\n}\n");
                let (m, ks) = kernels(&text);
                let k = &ks[0];
                let bytes: Vec<std::collections::BTreeSet<u64>> = k
                    .accesses
                    .iter()
                    .map(|a| {
                        let o = &m.ops[a.op].operands[0];
                        let size = u64::from(m.buffers[o.buffer].dtype.bytes());
                        apir_ir::logical_addresses(&m, o)
                            .unwrap()
                            .iter()
                            .flat_map(|x| x.byte..x.byte + size)
                            .collect()
                    })
                    .collect();
                let want: Vec<bool> = (0..bytes.len())
                    .map(|i| {
                        (0..bytes.len()).any(|j| {
                            k.accesses[i].write != k.accesses[j].write
                                && !bytes[i].is_disjoint(&bytes[j])
                        })
                    })
                    .collect();
                let fps: Vec<Footprint> = k
                    .accesses
                    .iter()
                    .map(|a| Sweep::of(&m, a.buffer, &a.ap).footprint(1 << 10))
                    .collect();
                prop_assert_eq!(sharing_a_written_byte(k, &fps), want, "{}", text);
                Ok(())
            })
            .unwrap();
    }

    /// Footprints past the in-memory limit are enumerated lazily when their
    /// dims nest: an even/odd split of one tensor is told apart exactly (no
    /// "may" error), and a real overlap is still found with its first byte.
    #[test]
    fn lazy_footprints_are_exact() {
        let text = "module attributes {arch = \"v2\"} {
  %t = mem.hbm {addr = 0x1000} : tensor<4096xi8>
  gpsimd.kernel @a {core = 0} {
    gpsimd.write %t[[2, 2048]]
    gpsimd.write %t[[2, 2048]] + 1
  }
  gpsimd.kernel @b {core = 1} {
    gpsimd.read %t[[4, 1024]] + 3
  }
}
";
        let (m, ks) = kernels(text);
        let fp = |k: &Kernel| -> Vec<Footprint> {
            k.accesses
                .iter()
                .map(|a| Sweep::of(&m, a.buffer, &a.ap).footprint(16))
                .collect()
        };
        let (fa, fb) = (fp(&ks[0]), fp(&ks[1]));
        assert!(fa
            .iter()
            .chain(&fb)
            .all(|f| matches!(f, Footprint::Sorted(_))));
        let mut b = FootprintBudget::new(16, 1 << 20);
        assert!(overlapping_writes(&m, &ks[0], &fa, &mut b).is_empty());
        // Core 1 reads the odd bytes 3, 7, ...: a race with the odd write.
        let (d, more) = races(&[(&ks[0], fa), (&ks[1], fb)], &mut b);
        assert_eq!(more, More::None);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].message.contains("both touch HBM byte 0x1003"),
            "{}",
            d[0].message
        );
    }

    /// The runs enumerated lazily are bounded over the module: past the
    /// budget a footprint is its hull, which contains the exact runs, so
    /// the even/odd writes are then reported as ones that may overlap.
    #[test]
    fn lazy_runs_are_bounded_over_the_module() {
        let text = "module attributes {arch = \"v2\"} {
  %t = mem.hbm {addr = 0x1000} : tensor<4096xi8>
  gpsimd.kernel @a {core = 0} {
    gpsimd.write %t[[2, 2048]]
    gpsimd.write %t[[2, 2048]] + 1
  }
}
";
        let (m, ks) = kernels(text);
        let sweeps = Sweep::of_kernel(&m, &ks[0]);
        let exact: Vec<Vec<Run>> = sweeps
            .iter()
            .map(|s| s.footprint(u64::MAX).iter().collect())
            .collect();
        // Room for both, and for one.
        for (lazy, hulls) in [(4096, 0), (4095, 1), (2048, 1), (2047, 2)] {
            let mut budget = FootprintBudget::new(16, lazy);
            let fps: Vec<Footprint> = sweeps.iter().map(|s| budget.footprint(s)).collect();
            let taken: u64 = fps.iter().map(Footprint::lazy_runs).sum();
            assert!(taken <= lazy);
            assert_eq!(
                fps.iter()
                    .filter(|f| matches!(f, Footprint::Hull(_)))
                    .count(),
                hulls
            );
            for (f, runs) in fps.iter().zip(&exact) {
                let bound: Vec<Run> = f.iter().collect();
                assert!(runs
                    .iter()
                    .all(|r| bound.iter().any(|b| b.start <= r.start && r.end <= b.end)));
            }
            let d = overlapping_writes(&m, &ks[0], &fps, &mut budget);
            assert_eq!(d.len(), usize::from(hulls > 0), "lazy budget {lazy}");
            if hulls > 0 {
                assert!(d[0].message.contains("may both write"), "{}", d[0].message);
            }
        }
    }

    /// A kernel's writes take the lazy budget before its reads.
    #[test]
    fn writes_take_the_lazy_budget_first() {
        let text = "module attributes {arch = \"v2\"} {
  %t = mem.hbm {addr = 0x1000} : tensor<4096xi8>
  gpsimd.kernel @a {core = 0} {
    gpsimd.read %t[[2, 2048]]
    gpsimd.write %t[[2, 2048]]
    gpsimd.write %t[[2, 2048]] + 1
  }
}
";
        let (m, ks) = kernels(text);
        let mut budget = FootprintBudget::new(16, 4096);
        let fps = budget.footprints(&ks[0], &Sweep::of_kernel(&m, &ks[0]));
        assert!(matches!(fps[0], Footprint::Hull(_)));
        assert!(fps[1..].iter().all(|f| matches!(f, Footprint::Sorted(_))));
        assert!(overlapping_writes(&m, &ks[0], &fps, &mut budget).is_empty());
    }

    /// The first byte two overlapping writes share is searched within the
    /// module's bound; past it the message says they share bytes.
    #[test]
    fn the_first_shared_byte_is_searched_within_a_bound() {
        let text = "module attributes {arch = \"v2\"} {
  %t = mem.hbm {addr = 0x1000} : tensor<4096xi8>
  gpsimd.kernel @a {core = 0} {
    gpsimd.write %t[[2, 2000]]
    gpsimd.write %t[[2, 2000]] + 2
  }
}
";
        let (m, ks) = kernels(text);
        for (search, what) in [
            (1 << 20, "both write HBM byte 0x1002"),
            (1, "both write the same HBM bytes"),
        ] {
            let mut budget = FootprintBudget::new(16, 1 << 20);
            let fps = budget.footprints(&ks[0], &Sweep::of_kernel(&m, &ks[0]));
            budget.search = search;
            let d = overlapping_writes(&m, &ks[0], &fps, &mut budget);
            assert_eq!(d.len(), 1);
            assert!(d[0].message.ends_with(what), "{}", d[0].message);
        }
    }
}
