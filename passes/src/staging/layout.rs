//! Staging groups and tile layouts: the contract the planner writes and
//! `check-coherency` re-derives.
//!
//! - A **group** is the set of accesses that share dataram buffers: the
//!   `tcm` accesses of a tensor that one of them writes (an in-place kernel;
//!   a tensor is a buffer and every buffer whose HBM range overlaps it)
//!   form one group; every other staged access is a group of its own. The
//!   group's first access owns its buffers (`gpsimd.buffer {access = ...}`).
//! - Tile `t` of a group covers iterations `[t * T, min((t + 1) * T, E))`,
//!   where `T` = buffer bytes / bytes per iteration (the sum of the element
//!   sizes of the group's distinct access patterns); tile `t` uses the group's buffer
//!   `t mod buffers`.
//! - A tile's **layout**: the union of the bytes its accesses touch, as
//!   sorted coalesced runs, packed from the buffer's start in address order.
//!   HBM byte `h` of the tile lives at `buffer + (offset of its run) + (h -
//!   run start)`. Loads copy the read runs, flushes the write runs, each run
//!   one copy (split at 64 KiB).

use super::footprint::{coalesce, Run, Sweep};
use apir_ir::staging::{Accessor, Kernel};
use apir_ir::Module;

/// One staging group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Accesses (indices in body order), owner first.
    pub accesses: Vec<usize>,
    /// Bytes the group's accesses touch per iteration.
    pub bytes_per_iteration: u64,
    /// Whether the group reads / writes.
    pub reads: bool,
    /// Whether the group writes.
    pub writes: bool,
}

/// The staging groups of `kernel` given each access's accessor.
pub fn groups(m: &Module, kernel: &Kernel, sweeps: &[Sweep], accessors: &[Accessor]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut joined = vec![false; kernel.accesses.len()];
    for (i, a) in kernel.accesses.iter().enumerate() {
        if joined[i] || !accessors[i].is_buffered() {
            continue;
        }
        let mut members = vec![i];
        if accessors[i] == Accessor::Tcm {
            let written = kernel.accesses.iter().zip(accessors).any(|(b, &acc)| {
                same_tensor(m, b.buffer, a.buffer) && b.write && acc == Accessor::Tcm
            });
            if written {
                for (j, b) in kernel.accesses.iter().enumerate().skip(i + 1) {
                    if same_tensor(m, b.buffer, a.buffer) && accessors[j] == Accessor::Tcm {
                        members.push(j);
                    }
                }
            }
        }
        for &j in &members {
            joined[j] = true;
        }
        out.push(Group {
            // Accesses that walk the same bytes in the same order (an
            // in-place read and write) count once.
            bytes_per_iteration: members
                .iter()
                .enumerate()
                .filter(|&(n, &j)| !members[..n].iter().any(|&p| sweeps[p] == sweeps[j]))
                .map(|(_, &j)| sweeps[j].elem_bytes())
                .sum(),
            reads: members.iter().any(|&j| !kernel.accesses[j].write),
            writes: members.iter().any(|&j| kernel.accesses[j].write),
            accesses: members,
        });
    }
    out
}

/// The layout of one tile of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TileLayout {
    /// Union of the bytes the tile touches, sorted and coalesced.
    pub union: Vec<Run>,
    /// Offset of each union run from the buffer's start.
    pub offsets: Vec<u64>,
    /// Bytes the group's reads touch in the tile, sorted and coalesced.
    pub reads: Vec<Run>,
    /// Bytes the group's writes touch in the tile, sorted and coalesced.
    pub writes: Vec<Run>,
}

impl TileLayout {
    /// The layout of iterations `[e0, e1)` of `group`.
    pub fn new(kernel: &Kernel, sweeps: &[Sweep], group: &Group, e0: u64, e1: u64) -> TileLayout {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for &a in &group.accesses {
            let out = if kernel.accesses[a].write {
                &mut writes
            } else {
                &mut reads
            };
            sweeps[a].runs_into(e0, e1, out);
        }
        coalesce(&mut reads);
        coalesce(&mut writes);
        let mut union: Vec<Run> = reads.iter().chain(&writes).copied().collect();
        coalesce(&mut union);
        let mut offsets = Vec::with_capacity(union.len());
        let mut at = 0u64;
        for r in &union {
            offsets.push(at);
            at += r.len();
        }
        TileLayout {
            union,
            offsets,
            reads,
            writes,
        }
    }

    /// Bytes the layout takes in its buffer.
    pub fn bytes(&self) -> u64 {
        self.union.iter().map(Run::len).sum()
    }

    /// Offset from the buffer start of HBM bytes `[h, h + len)`, if the tile
    /// holds them contiguously.
    pub fn offset_of(&self, h: u64, len: u64) -> Option<u64> {
        let i = self
            .union
            .partition_point(|r| r.start <= h)
            .checked_sub(1)?;
        let r = self.union[i];
        (h + len <= r.end).then(|| self.offsets[i] + (h - r.start))
    }
}

/// Iterations per tile of a group whose buffers are `buffer_bytes` each.
pub fn tile_iterations(group: &Group, buffer_bytes: u64) -> u64 {
    buffer_bytes / group.bytes_per_iteration.max(1)
}

/// Whether two buffers are the same tensor: the same buffer, or HBM ranges
/// that overlap.
pub fn same_tensor(m: &Module, a: apir_ir::Buffer, b: apir_ir::Buffer) -> bool {
    if a == b {
        return true;
    }
    let range = |x: apir_ir::Buffer| {
        let d = &m.buffers[x];
        let bytes = d.elements().unwrap_or(0) * u64::from(d.dtype.bytes());
        (d.base, d.base.saturating_add(bytes))
    };
    let (a0, a1) = range(a);
    let (b0, b1) = range(b);
    a0 < b1 && b0 < a1
}

/// Read-after-write across tiles: every pair `(k, j)`, `k < j`, such that
/// tile `j` reads bytes tile `k` writes (`reads` and `writes` are runs
/// tagged with their tile, in any order). Sorted, without repeats. The
/// planner loads tile `j` after tile `k`'s flush; `check-coherency` proves
/// it did.
pub fn reads_after_writes(reads: &[(Run, u64)], writes: &[(Run, u64)]) -> Vec<(u64, u64)> {
    let mut writes = writes.to_vec();
    writes.sort_unstable();
    // No write run is longer than `longest`, so an overlapping run starts
    // at most that far before a read run.
    let longest = writes.iter().map(|(w, _)| w.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for &(r, j) in reads {
        let from = writes.partition_point(|(w, _)| w.start + longest <= r.start);
        for &(w, k) in writes[from..].iter().take_while(|(w, _)| w.start < r.end) {
            if k < j && w.end > r.start {
                out.push((k, j));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, end: u64) -> Run {
        Run { start, end }
    }

    #[test]
    fn read_after_write_pairs() {
        // Tile 0 writes one long run; tile 2 writes [100, 104).
        let writes = [(run(0, 64), 0), (run(100, 104), 2)];
        let reads = [
            (run(60, 68), 1),   // overlaps tile 0's write by 4 bytes
            (run(64, 100), 3),  // touches both runs only at their edges
            (run(102, 103), 3), // inside tile 2's write
            (run(0, 4), 0),     // same tile: not across tiles
            (run(100, 101), 1), // written only by a later tile
            (run(10, 20), 1),   // deep inside the long run, found past shorter ones
        ];
        assert_eq!(reads_after_writes(&reads, &writes), vec![(0, 1), (2, 3)]);
        assert!(reads_after_writes(&reads, &[]).is_empty());
    }
}
