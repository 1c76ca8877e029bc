//! What an access touches in HBM, as byte runs, for any range of kernel
//! iterations, in time linear in the runs (never per element of a
//! contiguous row).

use apir_ir::{AccessPattern, Module};

/// A half-open HBM byte range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl Run {
    /// Bytes in the run.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the run is empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// An access pattern over an HBM buffer prepared for run enumeration: unit
/// dims dropped, adjacent dims merged where the walk is the same, and the
/// innermost dim kept as a "row" when it is contiguous (step 1 or -1) or a
/// repeat (step 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    /// Byte address of element 0 of the buffer.
    base: u64,
    /// Bytes per element.
    elem: u64,
    /// Start element.
    offset: i64,
    /// Outer dims (step, num), outermost first.
    outer: Vec<(i64, u64)>,
    /// The row: iterations per row and the step inside it (-1, 0 or 1).
    row_num: u64,
    row_step: i64,
    /// Iterations in all.
    elements: u64,
}

impl Sweep {
    /// The sweep of `ap` over a buffer whose element 0 is at byte `base` and
    /// whose elements are `elem` bytes. The verifier has checked that `ap`
    /// stays inside its buffer, so every address fits in `u64`.
    pub fn new(ap: &AccessPattern, base: u64, elem: u64) -> Sweep {
        let mut dims: Vec<(i64, u64)> = Vec::with_capacity(ap.dims.len());
        for d in ap.dims.iter().filter(|d| d.num != 1) {
            if let Some(last) = dims.last_mut() {
                // [s1, n1], [s2, n2] walk like [s2, n1 * n2] when s1 = s2 * n2.
                if i128::from(last.0) == i128::from(d.step) * i128::from(d.num) {
                    *last = (d.step, last.1 * d.num);
                    continue;
                }
            }
            dims.push((d.step, d.num));
        }
        let elements = dims.iter().map(|d| d.1).product::<u64>().max(1);
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
            offset: ap.offset,
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

    /// Iterations the access runs for.
    pub fn elements(&self) -> u64 {
        self.elements
    }

    /// Bytes per element.
    pub fn elem_bytes(&self) -> u64 {
        self.elem
    }

    /// Whether the access visits storage contiguously and in order: element
    /// `e` is at `start + e` (what a stream copies).
    pub fn is_contiguous(&self) -> bool {
        self.outer.is_empty() && (self.row_step == 1 || self.row_num == 1)
    }

    /// Byte address of the element iteration `e` visits.
    pub fn address(&self, e: u64) -> u64 {
        let row = e / self.row_num;
        let j = (e % self.row_num) as i64;
        let el = self.row_start(row) + j * self.row_step;
        self.base + el as u64 * self.elem
    }

    /// Element index (in the buffer) of the first element of row `row`.
    fn row_start(&self, mut row: u64) -> i64 {
        let mut el = self.offset;
        for &(s, n) in self.outer.iter().rev() {
            el += (row % n) as i64 * s;
            row /= n;
        }
        el
    }

    /// Whether some element is visited more than once because of a step-0
    /// dim (a broadcast).
    pub fn repeats(&self) -> bool {
        self.outer.iter().any(|d| d.0 == 0) || (self.row_step == 0 && self.row_num > 1)
    }

    /// The bytes the whole access touches, one run per row piece (unsorted).
    /// Step-0 dims are left out (they revisit the same bytes), so the cost
    /// follows the distinct rows, not the iterations: a broadcast of 2^34
    /// iterations over 16 bytes is one run.
    pub fn footprint(&self) -> Vec<Run> {
        let mut distinct = self.clone();
        distinct.outer.retain(|d| d.0 != 0);
        if distinct.row_step == 0 {
            distinct.row_num = 1;
        }
        let rows: u64 = distinct.outer.iter().map(|d| d.1).product();
        let mut out = Vec::new();
        distinct.runs_into(0, rows * distinct.row_num, &mut out);
        out
    }

    /// Appends the bytes iterations `[e0, e1)` touch to `out`, one run per
    /// row piece (unsorted, possibly overlapping).
    pub fn runs_into(&self, e0: u64, e1: u64, out: &mut Vec<Run>) {
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
                .map(|(&(s, _), &i)| s * i as i64)
                .sum::<i64>();
        for row in first_row..=last_row {
            let lo = e0.max(row * n) - row * n;
            let hi = e1.min((row + 1) * n) - row * n;
            let (a, b) = match self.row_step {
                1 => (start + lo as i64, start + hi as i64),
                -1 => (start - hi as i64 + 1, start - lo as i64 + 1),
                _ => (start, start + 1),
            };
            out.push(Run {
                start: self.base + a as u64 * self.elem,
                end: self.base + b as u64 * self.elem,
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
                start -= s * num as i64;
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

/// The first byte two sorted, coalesced run lists share, if any.
pub fn first_overlap(a: &[Run], b: &[Run]) -> Option<u64> {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].start.max(b[j].start);
        let hi = a[i].end.min(b[j].end);
        if lo < hi {
            return Some(lo);
        }
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(ap: &AccessPattern, e0: u64, e1: u64) -> Vec<Run> {
        let s = Sweep::new(ap, 1000, 4);
        let mut out = Vec::new();
        s.runs_into(e0, e1, &mut out);
        coalesce(&mut out);
        out
    }

    /// Runs equal the set of addresses a per-element walk visits.
    fn brute(ap: &AccessPattern, e0: u64, e1: u64) -> Vec<Run> {
        let s = Sweep::new(ap, 1000, 4);
        let mut out: Vec<Run> = (e0..e1)
            .map(|e| {
                let a = s.address(e);
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

    #[test]
    fn overlap_of_sorted_runs() {
        let a = [Run { start: 0, end: 4 }, Run { start: 10, end: 20 }];
        let b = [Run { start: 4, end: 10 }, Run { start: 19, end: 30 }];
        assert_eq!(first_overlap(&a, &b), Some(19));
        assert_eq!(first_overlap(&a, &b[..1]), None);
    }
}
