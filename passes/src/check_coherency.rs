//! `check-coherency`: proves every kernel's staging coherent (staging.md).
//!
//! Accessor compatibility, per tensor (an HBM buffer; buffers whose byte
//! ranges overlap count as one tensor), among the accesses open at the same
//! time: those of one kernel, and those of kernels on different cores, which
//! run concurrently:
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

use crate::staging::footprint::{coalesce, first_overlap, Run, Sweep};
use crate::staging::layout::{
    groups, reads_after_writes, same_tensor, tile_iterations, TileLayout,
};
use crate::staging::sim::Schedule;
use apir_ir::staging::{Accessor, Dir, Kernel, KernelPlan, Step};
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, Pass, PassContext};

/// Plan-proof problems reported per kernel before the rest are counted.
const MAX_PLAN_ERRORS: usize = 20;

/// The pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckCoherency;

impl Pass for CheckCoherency {
    fn name(&self) -> &'static str {
        "check-coherency"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let kernels = Kernel::all(m);
        let mut diags = Diagnostics::new();
        let mut opened = Vec::new();
        for k in &kernels {
            let (plan, spans) = match KernelPlan::read_with_spans(m, k.op)? {
                Some((p, s)) => (Some(p), s),
                None => (None, Vec::new()),
            };
            let accessors: Vec<Option<Accessor>> = match &plan {
                Some(p) => p.accessors.iter().map(|&a| Some(a)).collect(),
                None => k.accesses.iter().map(|a| a.hint).collect(),
            };
            let sweeps: Vec<Sweep> = k
                .accesses
                .iter()
                .map(|a| Sweep::of(m, a.buffer, &a.ap))
                .collect();
            let footprints: Vec<Vec<Run>> = sweeps
                .iter()
                .map(|s| {
                    let mut r = s.footprint();
                    coalesce(&mut r);
                    r
                })
                .collect();
            let mut kd = matrix(m, k, &accessors);
            kd.extend(overlapping_writes(m, k, &footprints));
            // A plan is proved only over accesses that are coherent.
            if let (Some(p), true) = (&plan, kd.is_empty()) {
                cx.count("plans-proved", "staging plans checked", 1);
                let mut d = prove(m, k, &sweeps, p, &spans);
                if d.len() > MAX_PLAN_ERRORS {
                    let more = d.len() - MAX_PLAN_ERRORS;
                    d.truncate(MAX_PLAN_ERRORS);
                    d.push(Diagnostic::error(
                        m.ops[k.op].span,
                        format!(
                            "staging plan of kernel @{}: {more} more problems not shown",
                            k.name
                        ),
                    ));
                }
                kd.extend(d);
            }
            diags.extend(kd);
            opened.push((k, footprints));
        }
        diags.extend(races(&opened));
        if diags.is_empty() {
            Ok(Changed::No)
        } else {
            Err(diags)
        }
    }
}

fn tensor_name(m: &Module, k: &Kernel, i: usize) -> String {
    format!("%{}", m.str(m.buffers[k.accesses[i].buffer].name))
}

fn describe(m: &Module, k: &Kernel, i: usize, acc: Option<Accessor>) -> String {
    let a = &k.accesses[i];
    format!(
        "`{}` of {} through {}",
        if a.write {
            "gpsimd.write"
        } else {
            "gpsimd.read"
        },
        tensor_name(m, k, i),
        acc.map_or("an accessor not chosen yet".into(), an_accessor)
    )
}

/// "a stream accessor", "a tcm accessor", "an index accessor".
fn an_accessor(x: Accessor) -> String {
    let article = if x == Accessor::Index { "an" } else { "a" };
    format!("{article} {} accessor", x.name())
}

/// The accessor matrix and the TCM rules for every pair of accesses of `k`
/// on one tensor.
fn matrix(m: &Module, k: &Kernel, acc: &[Option<Accessor>]) -> Diagnostics {
    let mut out = Diagnostics::new();
    for j in 0..k.accesses.len() {
        for i in 0..j {
            let (a, b) = (&k.accesses[i], &k.accesses[j]);
            if !same_tensor(m, a.buffer, b.buffer) {
                continue;
            }
            let (Some(x), Some(y)) = (acc[i], acc[j]) else {
                continue;
            };
            let tcm = (x == Accessor::Tcm, y == Accessor::Tcm);
            let reason = match tcm {
                (true, true) => None,
                (true, false) | (false, true) => {
                    let (t_write, other, o_write) = if tcm.0 {
                        (a.write, y, b.write)
                    } else {
                        (b.write, x, a.write)
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
                    (true, true) if a.write || b.write => Some("a buffered writer is exclusive".to_string()),
                    (true, false) | (false, true) => Some(
                        "a buffered reader or writer is incompatible with an unbuffered accessor on the same tensor".to_string(),
                    ),
                    _ => None,
                },
            };
            if let Some(r) = reason {
                out.push(
                    Diagnostic::error(
                        b.span,
                        format!(
                            "incoherent accessors in kernel @{}: {} and {}: {r}",
                            k.name,
                            describe(m, k, j, Some(y)),
                            describe(m, k, i, Some(x))
                        ),
                    )
                    .with_note("the other access", a.span),
                );
            }
        }
    }
    out
}

/// Writes to overlapping HBM bytes from two accesses of one kernel.
fn overlapping_writes(m: &Module, k: &Kernel, footprints: &[Vec<Run>]) -> Diagnostics {
    let mut out = Diagnostics::new();
    for j in 0..k.accesses.len() {
        for i in 0..j {
            let (a, b) = (&k.accesses[i], &k.accesses[j]);
            if !(a.write && b.write) {
                continue;
            }
            if let Some(at) = first_overlap(&footprints[i], &footprints[j]) {
                out.push(
                    Diagnostic::error(
                        b.span,
                        format!(
                            "overlapping writes in kernel @{}: this `gpsimd.write` of {} and an earlier one of {} both write HBM byte {at:#x}",
                            k.name,
                            tensor_name(m, k, j),
                            tensor_name(m, k, i)
                        ),
                    )
                    .with_note("the other access", a.span),
                );
            }
        }
    }
    out
}

/// Kernels on different cores run at the same time: an HBM byte one of
/// them writes must not be touched by another. One sweep over every
/// access's runs sorted by start address.
fn races(opened: &[(&Kernel, Vec<Vec<Run>>)]) -> Diagnostics {
    let mut runs: Vec<(Run, usize, usize)> = Vec::new();
    for (ki, (_, fps)) in opened.iter().enumerate() {
        for (ai, f) in fps.iter().enumerate() {
            runs.extend(f.iter().map(|&r| (r, ki, ai)));
        }
    }
    runs.sort_unstable_by_key(|(r, ki, ai)| (r.start, *ki, *ai));
    let mut active: Vec<(Run, usize, usize)> = Vec::new();
    let mut reported: std::collections::BTreeSet<((usize, usize), (usize, usize))> =
        Default::default();
    let mut out = Diagnostics::new();
    for &(r, kj, aj) in &runs {
        active.retain(|(x, _, _)| x.end > r.start);
        for &(x, ki, ai) in &active {
            let (ka, kb) = (opened[ki].0, opened[kj].0);
            let (a, b) = (&ka.accesses[ai], &kb.accesses[aj]);
            if ka.core == kb.core || !(a.write || b.write) {
                continue; // one core runs its kernels one after another
            }
            let key = (
                (ki.min(kj), if ki <= kj { ai } else { aj }),
                (ki.max(kj), if ki <= kj { aj } else { ai }),
            );
            if !reported.insert(key) {
                continue;
            }
            let at = r.start.max(x.start);
            let (first, second) = if ki <= kj {
                ((ka, a), (kb, b))
            } else {
                ((kb, b), (ka, a))
            };
            out.push(
                Diagnostic::error(
                    second.1.span,
                    format!(
                        "kernels @{} (core {}) and @{} (core {}) run at the same time and both touch HBM byte {at:#x}, and at least one of them writes it",
                        second.0.name, second.0.core, first.0.name, first.0.core
                    ),
                )
                .with_note("the other access", first.1.span),
            );
        }
        active.push((r, kj, aj));
    }
    out
}

/// Proves a plan coherent; see the module doc.
/// Each problem is reported at the step it concerns (or the kernel).
fn prove(
    m: &Module,
    k: &Kernel,
    sweeps: &[Sweep],
    p: &KernelPlan,
    spans: &[apir_ir::Span],
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
    let gs = groups(m, k, sweeps, &p.accessors);
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
    let mut owned = vec![false; copy_steps.len()];
    for (id, &si) in copy_steps.iter().enumerate() {
        if let Step::Copy(c) = p.steps[si] {
            owned[id] = gs.iter().any(|g| g.accesses[0] == c.access as usize);
        }
    }
    for g in &gs {
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
        let t_len = tile_iterations(g, bytes);
        let tiles = k.elements.div_ceil(t_len);
        // Copies of this group, by tile.
        let mut by_tile: Vec<Vec<usize>> = vec![Vec::new(); tiles as usize];
        for (id, &si) in copy_steps.iter().enumerate() {
            let Step::Copy(c) = p.steps[si] else { continue };
            if c.access as usize != owner {
                continue;
            }
            if u64::from(c.tile) >= tiles {
                err(
                    Some(si),
                    format!(
                    "copy {id} names tile {} of access {owner} ({name}), which has {tiles} tiles",
                    c.tile
                ),
                );
                continue;
            }
            by_tile[c.tile as usize].push(id);
        }
        let mut flushed: Vec<Run> = Vec::new();
        let mut written: Vec<(Run, u64)> = Vec::new();
        let mut read: Vec<(Run, u64)> = Vec::new();
        let mut prev_on_slot: Vec<Option<u64>> = vec![None; slots.len()];
        for t in 0..tiles {
            let e0 = t * t_len;
            let e1 = (e0 + t_len).min(k.elements);
            let layout = TileLayout::new(k, sweeps, g, e0, e1);
            let slot = slots[(t % slots.len() as u64) as usize];
            let base = u64::from(p.slots[slot].dram);
            let mut loaded = Vec::new();
            let mut stored = Vec::new();
            for &id in &by_tile[t as usize] {
                let Step::Copy(c) = p.steps[copy_steps[id]] else {
                    continue;
                };
                let run = Run {
                    start: c.hbm,
                    end: c.hbm + u64::from(c.bytes),
                };
                let wanted = match c.dir {
                    Dir::M2s => &layout.reads,
                    Dir::S2m => &layout.writes,
                };
                let inside = wanted
                    .iter()
                    .any(|r| r.start <= run.start && run.end <= r.end);
                let place = layout
                    .offset_of(c.hbm, u64::from(c.bytes))
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
                    Dir::S2m => {
                        stored.push(run);
                        flushed.push(run);
                    }
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
            for r in &layout.writes {
                written.push((*r, t));
            }
            for r in &layout.reads {
                read.push((*r, t));
            }
            // Ordering on the dependency graph.
            let (first_c, last_c) = overlapping(&computes, e0, e1);
            let (Some(first_c), Some(last_c)) = (first_c, last_c) else {
                continue;
            };
            for &id in &by_tile[t as usize] {
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
                for &id in &by_tile[t as usize] {
                    let s = copy_steps[id];
                    if let (Dir::M2s, Some(pl)) = (dir_of(p, s), prev_last) {
                        if !hb(pl, s) {
                            err(Some(s), format!("load copy {id} refills buffer {slot} for tile {t} of access {owner} ({name}) before tile {prev} was consumed"));
                        }
                    }
                }
                for &pid in &by_tile[prev as usize] {
                    let ps = copy_steps[pid];
                    if dir_of(p, ps) != Dir::S2m {
                        continue;
                    }
                    if !hb(ps, first_c) {
                        err(Some(first_c), format!("tile {t} of access {owner} ({name}) is computed in buffer {slot} before flush copy {pid} of tile {prev} has completed"));
                    }
                    for &id in &by_tile[t as usize] {
                        let s = copy_steps[id];
                        if dir_of(p, s) == Dir::M2s && !hb(ps, s) {
                            err(Some(s), format!("load copy {id} refills buffer {slot} before flush copy {pid} of tile {prev} of access {owner} ({name}) has completed"));
                        }
                    }
                }
            }
            prev_on_slot[si] = Some(t);
        }
        // No byte flushed twice.
        flushed.sort_unstable();
        if let Some(w) = flushed.windows(2).find(|w| w[1].start < w[0].end) {
            err(
                None,
                format!(
                    "HBM byte {:#x} of access {owner} ({name}) is flushed twice",
                    w[1].start
                ),
            );
        }
        // Read-after-write across tiles: a later tile that reads bytes an
        // earlier tile wrote loads them after that flush.
        if g.reads && g.writes {
            for (kt, j) in reads_after_writes(&read, &written) {
                for &fid in &by_tile[kt as usize] {
                    let fs = copy_steps[fid];
                    if dir_of(p, fs) != Dir::S2m {
                        continue;
                    }
                    for &lid in &by_tile[j as usize] {
                        let ls = copy_steps[lid];
                        if dir_of(p, ls) == Dir::M2s && !hb(fs, ls) {
                            err(Some(ls), format!("tile {j} of access {owner} ({name}) reads bytes tile {kt} wrote, but load copy {lid} may run before flush copy {fid} completes"));
                        }
                    }
                }
            }
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
    out
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
