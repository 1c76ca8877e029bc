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
