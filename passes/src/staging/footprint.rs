//! What an access touches in HBM, as byte runs, for any range of kernel
//! iterations, in time linear in the runs (never per element of a
//! contiguous row).
//!
//! Addresses are `u128`: an HBM buffer may end exactly at 2^64, and a
//! half-open run that ends there must not wrap to an empty one. Element
//! positions inside a walk are `i128`, so no partial sum of steps can wrap.

use apir_ir::{AccessPattern, Module};

/// An HBM byte address or the end of a run (up to 2^64 inclusive).
pub(crate) type Addr = u128;

/// The most runs an access's whole footprint is enumerated into
/// (project-defined, 4 Mi runs = 128 MiB of runs): beyond it the checks that
/// need it fall back to the footprint's hull (its lowest and highest byte).
pub const MAX_FOOTPRINT_RUNS: u64 = 1 << 22;

/// A half-open HBM byte range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    /// First byte.
    pub start: Addr,
    /// One past the last byte (at most 2^64).
    pub end: Addr,
}

impl Run {
    /// Bytes in the run.
    pub fn len(&self) -> u128 {
        self.end - self.start
    }

    /// Bytes in the run as `u64` (saturating: only a run of all 2^64
    /// bytes does not fit; staged runs are at most a buffer).
    pub(crate) fn len_u64(&self) -> u64 {
        u64::try_from(self.len()).unwrap_or(u64::MAX)
    }

    /// Whether the run is empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whether two runs share a byte.
    pub fn overlaps(&self, other: &Run) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// Most runs a lazily enumerated footprint may have (project-defined):
/// enumerating them in address order takes time, not memory, and the
/// checks walk them again and again: about a second for this many.
pub(crate) const MAX_SORTED_RUNS: u64 = 1 << 24;

/// Most runs the lazily enumerated footprints of a module may have
/// together (project-defined): two of the largest, a kernel's read and
/// write. `check-coherency` walks each a few times (the kernel's
/// overlapping writes, the plan proof, the module's races), so a small
/// module of many such accesses is answered in a few seconds, not one
/// second per access. Past it, footprints are bounded by their hull.
pub(crate) const MAX_MODULE_SORTED_RUNS: u64 = 2 * MAX_SORTED_RUNS;

/// Rows a lazily enumerated footprint produces at a time (project-defined):
/// a merge of many such footprints holds a chunk of each (256 rows of
/// 32 bytes: 8 KiB; the module's race sweep may merge thousands).
const LAZY_CHUNK_ROWS: u64 = 256;

/// An access's whole footprint: exact sorted, coalesced runs; or, when that
/// would take more than [`MAX_FOOTPRINT_RUNS`] runs but the walk's dims
/// nest (each step passes the reach of the dims inside it, so the runs come
/// out in address order and disjoint), the same runs enumerated lazily; or
/// else the hull of its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Footprint {
    /// Sorted, coalesced runs.
    Exact(Vec<Run>),
    /// Sorted, disjoint runs, enumerated on demand from a nested walk.
    Sorted(Sweep),
    /// Every byte lies in this run (not every byte of it is touched).
    Hull(Run),
}

impl Footprint {
    /// The runs in address order (the hull as one run when inexact).
    pub fn iter(&self) -> FootprintIter<'_> {
        match self {
            Footprint::Exact(r) => FootprintIter::Slice(r.iter()),
            Footprint::Hull(h) => FootprintIter::Slice(std::slice::from_ref(h).iter()),
            Footprint::Sorted(s) => FootprintIter::Lazy {
                sweep: s,
                next: 0,
                buf: Vec::new(),
                at: 0,
            },
        }
    }

    /// Whether the runs are exact.
    pub(crate) fn is_exact(&self) -> bool {
        !matches!(self, Footprint::Hull(_))
    }

    /// The runs enumerated on demand (an upper bound: one per row of the
    /// walk), 0 unless [`Footprint::Sorted`].
    pub(crate) fn lazy_runs(&self) -> u64 {
        match self {
            Footprint::Sorted(s) => s.rows(s.elements),
            _ => 0,
        }
    }
}

/// The runs of a [`Footprint`] in address order.
pub enum FootprintIter<'a> {
    /// Materialised runs.
    Slice(std::slice::Iter<'a, Run>),
    /// Runs of a nested walk, produced a chunk of rows at a time.
    Lazy {
        /// The walk.
        sweep: &'a Sweep,
        /// The next iteration to enumerate.
        next: u64,
        /// The current chunk.
        buf: Vec<Run>,
        /// The next run of the chunk.
        at: usize,
    },
}

impl Iterator for FootprintIter<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        match self {
            FootprintIter::Slice(it) => it.next().copied(),
            FootprintIter::Lazy {
                sweep,
                next,
                buf,
                at,
            } => {
                if *at == buf.len() {
                    if *next >= sweep.elements {
                        return None;
                    }
                    buf.clear();
                    *at = 0;
                    let end = next.saturating_add(sweep.row_num.saturating_mul(LAZY_CHUNK_ROWS));
                    sweep.runs_into(*next, end, buf);
                    *next = end.min(sweep.elements);
                }
                let r = buf.get(*at).copied();
                *at += 1;
                r
            }
        }
    }
}

/// Several sorted run streams merged into one sorted by start, each run
/// with the index of its stream.
pub(crate) fn merge_sorted<'a>(
    streams: Vec<FootprintIter<'a>>,
) -> impl Iterator<Item = (Run, usize)> + 'a {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut streams = streams;
    let mut heap: BinaryHeap<Reverse<(Run, usize)>> = BinaryHeap::new();
    for (i, s) in streams.iter_mut().enumerate() {
        if let Some(r) = s.next() {
            heap.push(Reverse((r, i)));
        }
    }
    std::iter::from_fn(move || {
        let Reverse((r, i)) = heap.pop()?;
        if let Some(n) = streams[i].next() {
            heap.push(Reverse((n, i)));
        }
        Some((r, i))
    })
}

/// Whether an access visits some byte more than once
/// ([`Sweep::repeated_byte`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    /// Every byte at most once.
    Never,
    /// This byte (at least) twice.
    At(Addr),
    /// Not decided within the limit on runs.
    Unknown,
}

/// [`Sweep::walk`]: two sweeps walk the same bytes in the same order
/// exactly when their keys are equal.
pub(crate) type WalkKey<'a> = (u64, u64, &'a [(i128, u64)], (u64, i128), Addr);

/// An access pattern over an HBM buffer prepared for run enumeration: unit
/// dims dropped, adjacent dims merged where the walk is the same, and the
/// innermost dim kept as a "row" when it is contiguous (step 1 or -1) or a
/// repeat (step 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sweep {
    /// Byte address of element 0 of the buffer.
    base: Addr,
    /// Bytes per element.
    elem: u64,
    /// Start element.
    offset: i128,
    /// Outer dims (step, num), outermost first.
    outer: Vec<(i128, u64)>,
    /// The row: iterations per row and the step inside it (-1, 0 or 1).
    row_num: u64,
    row_step: i128,
    /// Iterations in all.
    elements: u64,
}

impl Sweep {
    /// The sweep of `ap` over a buffer whose element 0 is at byte `base` and
    /// whose elements are `elem` bytes. The verifier has checked that `ap`
    /// stays inside its buffer, so every address it visits is below 2^64.
    pub fn new(ap: &AccessPattern, base: u64, elem: u64) -> Sweep {
        let dims: Vec<(i128, u64)> = ap
            .dims
            .iter()
            .map(|d| (i128::from(d.step), d.num))
            .collect();
        Sweep::from_dims(Addr::from(base), elem, i128::from(ap.offset), &dims)
    }

    fn from_dims(base: Addr, elem: u64, offset: i128, raw: &[(i128, u64)]) -> Sweep {
        let mut dims: Vec<(i128, u64)> = Vec::with_capacity(raw.len());
        for &(step, num) in raw.iter().filter(|d| d.1 != 1) {
            if let Some(last) = dims.last_mut() {
                // [s1, n1], [s2, n2] walk like [s2, n1 * n2] when s1 = s2 * n2.
                if last.0 == step * i128::from(num) {
                    *last = (step, last.1.saturating_mul(num));
                    continue;
                }
            }
            dims.push((step, num));
        }
        let elements = dims
            .iter()
            .fold(1u64, |acc, d| acc.saturating_mul(d.1))
            .max(1);
        let (row_step, row_num) = match dims.last() {
            Some(&(s, n)) if (-1..=1).contains(&s) => {
                dims.pop();
                (s, n)
            }
            _ => (1, 1),
        };
        Sweep {
            base,
            elem,
            offset,
            outer: dims,
            row_num,
            row_step,
            elements,
        }
    }

    /// The sweep of access pattern `ap` over HBM buffer `buffer` of `m`.
    pub fn of(m: &Module, buffer: apir_ir::Buffer, ap: &AccessPattern) -> Sweep {
        let b = &m.buffers[buffer];
        Sweep::new(ap, b.base, u64::from(b.dtype.bytes()))
    }

    /// The sweeps of a kernel's accesses, in body order.
    pub fn of_kernel(m: &Module, kernel: &apir_ir::staging::Kernel) -> Vec<Sweep> {
        kernel
            .accesses
            .iter()
            .map(|a| Sweep::of(m, a.buffer, &a.ap))
            .collect()
    }

    /// Iterations the access runs for.
    pub fn elements(&self) -> u64 {
        self.elements
    }

    /// The rows (runs of one row each) the first `e` iterations touch.
    pub fn rows(&self, e: u64) -> u64 {
        e.min(self.elements).div_ceil(self.row_num)
    }

    /// Bytes per element.
    pub fn elem_bytes(&self) -> u64 {
        self.elem
    }

    /// Two accesses visit the same byte addresses in the same order with
    /// the same element size (an in-place read and write, even through two
    /// buffer names) exactly when these keys are equal: the element size,
    /// the iterations, the dims and the first address. A key, so that the
    /// accesses of a group that walk alike are found through a hash set,
    /// not pair by pair.
    pub(crate) fn walk(&self) -> WalkKey<'_> {
        (
            self.elem,
            self.elements,
            &self.outer,
            (self.row_num, self.row_step),
            self.addr(self.offset),
        )
    }

    /// The same walk with every address lowered by `origin` (at most the
    /// lowest byte it visits), to compare the shapes of walks over
    /// different buffers.
    pub(crate) fn rebased(&self, origin: Addr) -> Sweep {
        Sweep {
            base: self.base.saturating_sub(origin),
            ..self.clone()
        }
    }

    /// The dims whose step is one element (either way), as (iteration
    /// stride, count) with count at least 2: iteration `i` and `i + stride`
    /// visit adjacent elements whenever `i`'s index in the dim is not its
    /// last.
    pub(crate) fn unit_dims(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if self.row_step.abs() == 1 && self.row_num >= 2 {
            out.push((1, self.row_num));
        }
        let mut stride = self.row_num;
        for &(s, n) in self.outer.iter().rev() {
            if s.abs() == 1 && n >= 2 {
                out.push((stride, n));
            }
            stride = stride.saturating_mul(n);
        }
        out
    }

    /// Whether the access visits storage contiguously and in order: element
    /// `e` is at `start + e` (what a stream copies).
    pub(crate) fn is_contiguous(&self) -> bool {
        self.outer.is_empty() && (self.row_step == 1 || self.row_num == 1)
    }

    /// Byte address of element position `el` of the buffer (`el >= 0` for
    /// every position an access visits).
    fn addr(&self, el: i128) -> Addr {
        self.base + (el.max(0) as u128) * u128::from(self.elem)
    }

    /// Byte address of the element iteration `e` visits.
    pub fn address(&self, e: u64) -> Addr {
        let row = e / self.row_num;
        let j = i128::from(e % self.row_num);
        self.addr(self.row_start(row) + j * self.row_step)
    }

    /// Element index (in the buffer) of the first element of row `row`.
    fn row_start(&self, mut row: u64) -> i128 {
        let mut el = self.offset;
        for &(s, n) in self.outer.iter().rev() {
            el += i128::from(row % n) * s;
            row /= n;
        }
        el
    }

    /// Whether some element is visited more than once because of a step-0
    /// dim (a broadcast).
    pub fn repeats(&self) -> bool {
        self.outer.iter().any(|d| d.0 == 0) || (self.row_step == 0 && self.row_num > 1)
    }

    /// Every dim with its step made positive (the start moved to the lowest
    /// element), step-0 and unit dims dropped, sorted by step, innermost
    /// first: the same *set* of elements as the walk, whatever its order.
    fn set_dims(&self) -> (i128, Vec<(i128, u64)>) {
        let mut offset = self.offset;
        let mut dims: Vec<(i128, u64)> = Vec::with_capacity(self.outer.len() + 1);
        let row = (self.row_step, self.row_num);
        for &(s, n) in self.outer.iter().chain(std::iter::once(&row)) {
            if s == 0 || n <= 1 {
                continue;
            }
            if s < 0 {
                offset += s * i128::from(n - 1);
            }
            dims.push((s.abs(), n));
        }
        dims.sort_unstable();
        (offset, dims)
    }

    /// The bytes the whole access touches: exact sorted, coalesced runs, or
    /// its hull when that takes more than `limit` runs. Computed from the
    /// set of elements (dims reordered by step and merged where their union
    /// is contiguous), so a transposed walk of a dense block is one run and
    /// a broadcast of 2^34 iterations over 16 bytes is one run.
    ///
    /// A walk whose dims nest and that takes more than `limit` runs is
    /// enumerated lazily ([`Footprint::Sorted`]) when it takes at most
    /// 2^24 (`MAX_SORTED_RUNS`).
    pub fn footprint(&self, limit: u64) -> Footprint {
        self.footprint_within(limit, MAX_SORTED_RUNS)
    }

    /// [`Sweep::footprint`], enumerated lazily only when that takes at most
    /// `lazy` runs (and at most `MAX_SORTED_RUNS`): what a caller with a
    /// budget of runs to walk over many footprints has left.
    pub(crate) fn footprint_within(&self, limit: u64, lazy: u64) -> Footprint {
        let (offset, dims) = self.set_dims();
        // Merge, innermost first: a contiguous block [1, L] under a dim of
        // step s <= L is the block [1, s * (n - 1) + L]; [s, n] under [s * n,
        // m] is [s, n * m].
        let mut merged: Vec<(i128, u64)> = Vec::with_capacity(dims.len());
        for (s, n) in dims {
            if let Some(last) = merged.last_mut() {
                if last.0 == 1 && s <= i128::from(last.1) {
                    let len = s * i128::from(n - 1) + i128::from(last.1);
                    if let Ok(len) = u64::try_from(len) {
                        *last = (1, len);
                        continue;
                    }
                } else if s == last.0 * i128::from(last.1) {
                    *last = (last.0, last.1.saturating_mul(n));
                    continue;
                }
            }
            merged.push((s, n));
        }
        let hi: i128 = merged.iter().map(|&(s, n)| s * i128::from(n - 1)).sum();
        let hull = Run {
            start: self.addr(offset),
            end: self.addr(offset + hi) + Addr::from(self.elem),
        };
        let rows = merged
            .iter()
            .skip(usize::from(merged.first().is_some_and(|d| d.0 == 1)))
            .try_fold(1u64, |acc, d| acc.checked_mul(d.1));
        let within = |max: u64| rows.is_some_and(|r| r <= max);
        let nested = {
            let mut reach = 0i128;
            merged.iter().all(|&(st, n)| {
                let ok = st == 1 || st > reach;
                reach += st * i128::from(n - 1);
                ok
            })
        };
        if !(within(limit) || nested && within(lazy.min(MAX_SORTED_RUNS))) {
            return Footprint::Hull(hull);
        }
        merged.reverse();
        let set = Sweep::from_dims(self.base, self.elem, offset, &merged);
        if !within(limit) {
            // Nested: the walk's runs come out in address order, disjoint.
            return Footprint::Sorted(set);
        }
        let mut out = Vec::new();
        set.runs_into(0, set.elements, &mut out);
        coalesce(&mut out);
        Footprint::Exact(out)
    }

    /// Whether the access visits some byte more than once (deciding it
    /// enumerates at most `limit` runs).
    pub fn repeated_byte(&self, limit: u64) -> Repeat {
        if self.repeats() {
            return Repeat::At(self.address(0));
        }
        // Nested dims (each step past the reach of the dims inside it) never
        // revisit an element.
        let (_, dims) = self.set_dims();
        let mut reach = 0i128;
        let mut nested = true;
        for &(s, n) in &dims {
            nested &= s > reach;
            reach += s * i128::from(n - 1);
        }
        if nested {
            return Repeat::Never;
        }
        // Otherwise one run per row, in walk order: a row never revisits an
        // element, so a repeat is an overlap between two rows.
        let rows = self
            .outer
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.1));
        let Some(rows) = rows.filter(|&r| r <= limit) else {
            return Repeat::Unknown;
        };
        let mut runs = Vec::with_capacity(rows as usize);
        self.runs_into(0, self.elements, &mut runs);
        runs.sort_unstable();
        runs.windows(2)
            .find(|w| w[1].start < w[0].end)
            .map_or(Repeat::Never, |w| Repeat::At(w[1].start))
    }

    /// Appends the bytes iterations `[e0, e1)` touch to `out`, one run per
    /// row piece (unsorted, possibly overlapping).
    pub(crate) fn runs_into(&self, e0: u64, e1: u64, out: &mut Vec<Run>) {
        let e1 = e1.min(self.elements);
        if e0 >= e1 {
            return;
        }
        let n = self.row_num;
        let first_row = e0 / n;
        let last_row = (e1 - 1) / n;
        // An odometer over the outer dims avoids a division per row.
        let mut idx: Vec<u64> = Vec::with_capacity(self.outer.len());
        let mut r = first_row;
        for &(_, num) in self.outer.iter().rev() {
            idx.push(r % num);
            r /= num;
        }
        idx.reverse();
        let mut start = self.offset
            + self
                .outer
                .iter()
                .zip(&idx)
                .map(|(&(s, _), &i)| s * i128::from(i))
                .sum::<i128>();
        for row in first_row..=last_row {
            let lo = i128::from(e0.max(row * n) - row * n);
            let hi = i128::from(e1.min((row + 1).saturating_mul(n)) - row * n);
            let (a, b) = match self.row_step {
                1 => (start + lo, start + hi),
                -1 => (start - hi + 1, start - lo + 1),
                _ => (start, start + 1),
            };
            out.push(Run {
                start: self.addr(a),
                end: self.addr(b),
            });
            // Advance the odometer.
            for k in (0..self.outer.len()).rev() {
                let (s, num) = self.outer[k];
                idx[k] += 1;
                start += s;
                if idx[k] < num {
                    break;
                }
                idx[k] = 0;
                start -= s * i128::from(num);
            }
        }
    }
}

/// Sorts `runs` and merges overlapping and adjacent ones, in place.
pub fn coalesce(runs: &mut Vec<Run>) {
    runs.sort_unstable();
    let mut w = 0usize;
    for i in 0..runs.len() {
        if w > 0 && runs[i].start <= runs[w - 1].end {
            runs[w - 1].end = runs[w - 1].end.max(runs[i].end);
        } else {
            runs[w] = runs[i];
            w += 1;
        }
    }
    runs.truncate(w);
}

/// The first byte two sorted, disjoint run sequences share, if any.
pub(crate) fn first_overlap(
    a: impl IntoIterator<Item = Run>,
    b: impl IntoIterator<Item = Run>,
) -> Option<Addr> {
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    let (mut x, mut y) = (a.next()?, b.next()?);
    loop {
        let lo = x.start.max(y.start);
        let hi = x.end.min(y.end);
        if lo < hi {
            return Some(lo);
        }
        if x.end <= y.end {
            x = a.next()?;
        } else {
            y = b.next()?;
        }
    }
}

/// A stream of runs sorted by start, with overlapping and adjacent runs
/// merged as they come (sorted and disjoint).
pub fn coalesced(it: impl Iterator<Item = Run>) -> impl Iterator<Item = Run> {
    let mut it = it.peekable();
    std::iter::from_fn(move || {
        let mut cur = it.next()?;
        while let Some(n) = it.peek() {
            if n.start > cur.end {
                break;
            }
            cur.end = cur.end.max(n.end);
            it.next();
        }
        Some(cur)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_enumeration_is_bounded() {
        // Every other element: one run per element, in address order.
        let strided = |n: u64| Sweep::new(&AccessPattern::new(&[(2, n)], 0), 0, 4);
        let s = strided(1 << 10);
        assert!(matches!(s.footprint(0), Footprint::Sorted(_)));
        assert_eq!(s.rows(s.elements()), 1 << 10);
        // Past MAX_SORTED_RUNS runs: the hull.
        assert_eq!(
            strided(MAX_SORTED_RUNS + 1).footprint(0),
            Footprint::Hull(Run {
                start: 0,
                end: 4 * 2 * u128::from(MAX_SORTED_RUNS) + 4
            })
        );
        assert!(matches!(
            strided(MAX_SORTED_RUNS).footprint(0),
            Footprint::Sorted(_)
        ));
    }

    fn runs(ap: &AccessPattern, e0: u64, e1: u64) -> Vec<Run> {
        let s = Sweep::new(ap, 1000, 4);
        let mut out = Vec::new();
        s.runs_into(e0, e1, &mut out);
        coalesce(&mut out);
        out
    }

    /// Runs equal the set of addresses a per-element walk visits.
    fn brute(ap: &AccessPattern, e0: u64, e1: u64) -> Vec<Run> {
        // The flat element order of docs/ir.md, innermost dim fastest, computed here
        // and not by the sweep under test.
        let mut out: Vec<Run> = (e0..e1)
            .map(|e| {
                let mut rest = e;
                let mut el = i128::from(ap.offset);
                for d in ap.dims.iter().rev() {
                    el += i128::from(d.step) * i128::from(rest % d.num);
                    rest /= d.num;
                }
                let a = 1000 + el as u128 * 4;
                Run {
                    start: a,
                    end: a + 4,
                }
            })
            .collect();
        coalesce(&mut out);
        out
    }

    #[test]
    fn contiguous_is_one_run_per_range() {
        let ap = AccessPattern::new(&[(64, 4), (1, 64)], 8);
        let s = Sweep::new(&ap, 0, 4);
        assert!(s.is_contiguous());
        assert_eq!(
            runs(&ap, 10, 200),
            vec![Run {
                start: 1000 + 18 * 4,
                end: 1000 + 208 * 4
            }]
        );
    }

    #[test]
    fn shapes_match_the_element_walk() {
        let cases = [
            AccessPattern::new(&[(128, 8), (1, 64)], 0), // strided rows
            AccessPattern::new(&[(1, 16), (16, 16)], 0), // transposed
            AccessPattern::new(&[(0, 4), (1, 32)], 5),   // broadcast rows
            AccessPattern::new(&[(16, 4), (0, 8)], 0),   // broadcast elements
            AccessPattern::new(&[(-1, 40)], 39),         // reversed
            AccessPattern::new(&[(-16, 4), (-1, 16)], 63), // reversed rows
            AccessPattern::new(&[(1, 1), (7, 9)], 3),    // scattered
        ];
        for ap in &cases {
            let n = ap.elements().unwrap();
            for (a, b) in [(0, n), (1, n - 1), (3, 7), (n / 2, n)] {
                assert_eq!(runs(ap, a, b), brute(ap, a, b), "{ap:?} [{a}, {b})");
            }
        }
        assert!(!Sweep::new(&cases[0], 0, 4).is_contiguous());
        assert!(!Sweep::new(&cases[4], 0, 4).is_contiguous());
    }

    /// The footprint as a set: exact runs equal the coalesced element walk,
    /// a hull contains it, whatever the order and signs of the dims.
    #[test]
    fn footprints_are_the_set_of_visited_bytes() {
        let cases = [
            AccessPattern::new(&[(1, 16), (16, 16)], 0), // transposed dense: one run
            AccessPattern::new(&[(1, 8), (1, 8)], 0),    // overlapping rows
            AccessPattern::new(&[(-16, 4), (-1, 16)], 63), // reversed
            AccessPattern::new(&[(3, 4), (2, 4)], 1),    // interleaved dims
            AccessPattern::new(&[(0, 9), (7, 5)], 2),    // broadcast of a strided walk
            AccessPattern::new(&[(2, 3), (40, 2), (1, 2)], 0),
        ];
        for ap in &cases {
            let s = Sweep::new(ap, 1000, 4);
            let want = brute(ap, 0, ap.elements().unwrap());
            assert_eq!(
                s.footprint(1 << 20),
                Footprint::Exact(want.clone()),
                "{ap:?}"
            );
            let lazy = s.footprint(0);
            let runs: Vec<Run> = coalesced(lazy.iter()).collect();
            match lazy {
                Footprint::Hull(h) => {
                    assert_eq!((h.start, h.end), (want[0].start, want.last().unwrap().end))
                }
                // Lazily, in address order, disjoint: the same bytes.
                Footprint::Sorted(_) => {
                    assert!(lazy
                        .iter()
                        .collect::<Vec<_>>()
                        .windows(2)
                        .all(|w| w[0].end <= w[1].start));
                    assert_eq!(runs, want, "{ap:?}");
                }
                Footprint::Exact(r) => assert_eq!(r, want),
            }
        }
        // A strided walk past the run limit is enumerated lazily, in order.
        let strided = Sweep::new(&AccessPattern::new(&[(2, 10_000)], 1), 0, 1);
        let f = strided.footprint(100);
        assert!(matches!(f, Footprint::Sorted(_)));
        assert_eq!(f.iter().count(), 10_000);
        assert_eq!(
            f.iter().nth(9_999),
            Some(Run {
                start: 19_999,
                end: 20_000
            })
        );
        // Interleaved dims do not nest: the hull.
        let interleaved = Sweep::new(&AccessPattern::new(&[(3, 400), (2, 400)], 0), 0, 1);
        assert!(matches!(interleaved.footprint(100), Footprint::Hull(_)));
        // A transposed dense 2^20 x 2^20 walk is one run, found at once.
        let big = AccessPattern::new(&[(1, 1 << 20), (1 << 20, 1 << 20)], 0);
        assert_eq!(
            Sweep::new(&big, 0, 1).footprint(16),
            Footprint::Exact(vec![Run {
                start: 0,
                end: 1 << 40
            }])
        );
    }

    #[test]
    fn repeated_bytes() {
        let rep = |dims: &[(i64, u64)], limit| {
            Sweep::new(&AccessPattern::new(dims, 0), 0, 4).repeated_byte(limit)
        };
        assert_eq!(rep(&[(64, 8), (1, 64)], 0), Repeat::Never); // nested: decided without runs
        assert_eq!(rep(&[(1, 16), (16, 16)], 0), Repeat::Never);
        assert_eq!(rep(&[(0, 2), (1, 4)], 0), Repeat::At(0)); // a broadcast
        assert_eq!(rep(&[(2, 4), (1, 3)], 16), Repeat::At(8)); // rows overlap
        assert_eq!(rep(&[(4, 2), (2, 3)], 16), Repeat::At(16));
        assert_eq!(rep(&[(3, 2), (2, 3)], 16), Repeat::Never);
        assert_eq!(rep(&[(2, 3), (3, 2)], 16), Repeat::Never); // not nested, yet no repeat
        assert_eq!(rep(&[(2, 3), (3, 2)], 1), Repeat::Unknown);
    }

    /// A buffer that ends at the top of the 64-bit address space: runs end
    /// at 2^64 and do not wrap.
    #[test]
    fn runs_end_at_the_top_of_the_address_space() {
        let ap = AccessPattern::new(&[(1, 1024)], 0);
        let s = Sweep::new(&ap, u64::MAX - 4095, 4);
        let mut out = Vec::new();
        s.runs_into(512, 1024, &mut out);
        assert_eq!(
            out,
            vec![Run {
                start: (1u128 << 64) - 2048,
                end: 1 << 64
            }]
        );
        assert_eq!(out[0].len(), 2048);
        let rev = Sweep::new(&AccessPattern::new(&[(-1, 1024)], 1023), u64::MAX - 4095, 4);
        assert_eq!(
            rev.footprint(1),
            Footprint::Exact(vec![Run {
                start: (1u128 << 64) - 4096,
                end: 1 << 64
            }])
        );
        assert_eq!(rev.address(0), (1u128 << 64) - 4);
    }

    #[test]
    fn overlap_of_sorted_runs() {
        let a = [Run { start: 0, end: 4 }, Run { start: 10, end: 20 }];
        let b = [Run { start: 4, end: 10 }, Run { start: 19, end: 30 }];
        assert_eq!(first_overlap(a, b), Some(19));
        assert_eq!(first_overlap(a, b[..1].iter().copied()), None);
    }
}
