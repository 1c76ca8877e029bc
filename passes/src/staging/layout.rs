//! Tensors, staging groups and tile layouts: the contract the planner
//! writes and `check-coherency` re-derives.
//!
//! - A **tensor** of a kernel is a connected component of HBM overlap among
//!   the buffers the kernel accesses: two buffers are one tensor when their
//!   byte ranges overlap, directly or through a chain of overlapping buffers
//!   (A overlaps B and B overlaps C: A, B and C are one tensor even when A
//!   and C are disjoint). Ranges that only touch are different tensors.
//! - A **group** is the set of accesses that share dataram buffers: the
//!   `tcm` accesses of a tensor that one of them writes (an in-place kernel)
//!   form one group; every other staged access is a group of its own. So
//!   every HBM byte a kernel writes through a staged access belongs to
//!   exactly one group. The group's first access owns its buffers
//!   (`gpsimd.buffer {access = ...}`).
//! - Tile `t` of a group covers iterations `[t * T, min((t + 1) * T, E))`,
//!   where `T` = buffer bytes / bytes per iteration (the sum of the element
//!   sizes of the group's accesses, counting once accesses that visit the
//!   same byte addresses in the same order with the same element size);
//!   tile `t` uses the group's buffer `t mod buffers`.
//! - A tile's **layout**: the union of the bytes its accesses touch, as
//!   sorted coalesced runs, packed from the buffer's start in address order.
//!   HBM byte `h` of the tile lives at `buffer + (offset of its run) + (h -
//!   run start)`. Loads copy the read runs, flushes the write runs, each run
//!   one copy (split at 64 KiB).

use super::footprint::{coalesce, Addr, Run, Sweep};
use apir_ir::staging::{Accessor, Kernel};
use apir_ir::Module;

/// The HBM byte range of a buffer, `[base, base + bytes)`, as `u128` (it
/// may end at 2^64).
pub(crate) fn buffer_range(m: &Module, b: apir_ir::Buffer) -> Run {
    let d = &m.buffers[b];
    let bytes = u128::from(d.elements().unwrap_or(0)) * u128::from(d.dtype.bytes());
    Run {
        start: Addr::from(d.base),
        end: Addr::from(d.base) + bytes,
    }
}

/// The tensor of each access of `kernel`: the connected components of HBM
/// overlap among the buffers it accesses, numbered in the order of their
/// first access. One sort and one sweep over the buffers' ranges: a range
/// that starts before the end of the component so far joins it.
pub fn tensors(m: &Module, kernel: &Kernel) -> Vec<usize> {
    let mut buffers: Vec<apir_ir::Buffer> = kernel.accesses.iter().map(|a| a.buffer).collect();
    buffers.sort_unstable();
    buffers.dedup();
    let mut by_start: Vec<(Run, usize)> = buffers
        .iter()
        .enumerate()
        .map(|(i, &b)| (buffer_range(m, b), i))
        .collect();
    by_start.sort_unstable();
    let mut component = vec![0usize; buffers.len()];
    let mut end: Option<Addr> = None;
    let mut n = 0usize;
    for (r, i) in by_start {
        match end {
            Some(e) if r.start < e => end = Some(e.max(r.end)),
            _ => {
                n += 1;
                end = Some(r.end);
            }
        }
        component[i] = n - 1;
    }
    // Renumber in order of first access.
    let mut label = vec![usize::MAX; n];
    let mut next = 0;
    kernel
        .accesses
        .iter()
        .map(|a| {
            let c = component[buffers.binary_search(&a.buffer).unwrap_or(0)];
            if label[c] == usize::MAX {
                label[c] = next;
                next += 1;
            }
            label[c]
        })
        .collect()
}

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

/// The staging groups of `kernel` given each access's accessor and tensor
/// ([`tensors`]).
pub fn groups(
    kernel: &Kernel,
    sweeps: &[Sweep],
    accessors: &[Accessor],
    tensor: &[usize],
) -> Vec<Group> {
    let n = tensor.iter().max().map_or(0, |t| t + 1);
    // Tensors written through a `tcm` access: their `tcm` accesses are one
    // group.
    let mut tcm_written = vec![false; n];
    for (i, a) in kernel.accesses.iter().enumerate() {
        if a.write && accessors[i] == Accessor::Tcm {
            tcm_written[tensor[i]] = true;
        }
    }
    let mut out: Vec<Group> = Vec::new();
    let mut shared: Vec<Option<usize>> = vec![None; n];
    for (i, &acc) in accessors.iter().enumerate() {
        if !acc.is_buffered() {
            continue;
        }
        let t = tensor[i];
        if acc == Accessor::Tcm && tcm_written[t] {
            if let Some(g) = shared[t] {
                out[g].accesses.push(i);
                continue;
            }
            shared[t] = Some(out.len());
        }
        out.push(Group {
            accesses: vec![i],
            bytes_per_iteration: 0,
            reads: false,
            writes: false,
        });
    }
    for g in &mut out {
        let members = &g.accesses;
        // Accesses that walk the same bytes in the same order (an in-place
        // read and write) count once.
        let mut walks = std::collections::HashSet::new();
        g.bytes_per_iteration = members
            .iter()
            .filter(|&&j| walks.insert(sweeps[j].walk()))
            .map(|&j| sweeps[j].elem_bytes())
            .sum();
        g.reads = members.iter().any(|&j| !kernel.accesses[j].write);
        g.writes = members.iter().any(|&j| kernel.accesses[j].write);
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
            // A tile's layout fits its buffer (at most the dataram window),
            // so every offset fits u64.
            at = at.saturating_add(u64::try_from(r.len()).unwrap_or(u64::MAX));
        }
        TileLayout {
            union,
            offsets,
            reads,
            writes,
        }
    }

    /// Bytes the layout takes in its buffer.
    pub fn bytes(&self) -> u128 {
        self.union.iter().map(Run::len).sum()
    }

    /// Offset from the buffer start of HBM bytes `[h, h + len)`, if the tile
    /// holds them contiguously.
    pub fn offset_of(&self, h: Addr, len: u64) -> Option<u64> {
        let i = self
            .union
            .partition_point(|r| r.start <= h)
            .checked_sub(1)?;
        let r = self.union[i];
        (h + Addr::from(len) <= r.end).then(|| self.offsets[i] + (h - r.start) as u64)
    }
}

/// Iterations per tile of a group whose buffers are `buffer_bytes` each.
pub(crate) fn tile_iterations(group: &Group, buffer_bytes: u64) -> u64 {
    buffer_bytes / group.bytes_per_iteration.max(1)
}

/// Read-after-write across tiles: every pair `(k, j)`, `k < j`, such that
/// tile `j` reads bytes tile `k` writes (`reads` and `writes` are runs
/// tagged with their tile, in any order). Sorted, without repeats. The
/// planner loads tile `j` after tile `k`'s flush; `check-coherency` proves
/// it did.
pub(crate) fn reads_after_writes(reads: &[(Run, u64)], writes: &[(Run, u64)]) -> Vec<(u64, u64)> {
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

    fn run(start: u128, end: u128) -> Run {
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
        // Runs that end at 2^64 still overlap.
        let top = 1u128 << 64;
        let w = [(run(top - 8, top), 0)];
        assert_eq!(
            reads_after_writes(&[(run(top - 4, top), 1)], &w),
            vec![(0, 1)]
        );
    }

    fn chain_kernel(text: &str) -> (Module, Kernel) {
        let (m, _) = apir_ir::parse_str("t.apir", text, apir_ir::ParseOptions::default()).unwrap();
        let k = Kernel::all(&m).remove(0);
        (m, k)
    }

    /// A tensor is a connected component of overlap: a chain a-b-c is one
    /// tensor although a and c are disjoint; ranges that only touch, or
    /// that end at 2^64, are handled exactly.
    #[test]
    fn tensors_are_components_of_overlap() {
        let text = "module attributes {arch = \"v2\"} {
  %a = mem.hbm {addr = 0x1000} : tensor<16xf32>
  %b = mem.hbm {addr = 0x1038} : tensor<16xf32>
  %c = mem.hbm {addr = 0x1070} : tensor<16xf32>
  %d = mem.hbm {addr = 0x10b0} : tensor<4xf32>
  %e = mem.hbm {addr = 0xFFFFFFFFFFFFFFC0} : tensor<16xf32>
  %f = mem.hbm {addr = 0xFFFFFFFFFFFFFFF0} : tensor<4xf32>
  gpsimd.kernel @k {
    gpsimd.read %d[[1, 4]]
    gpsimd.write %c[[1, 4]]
    gpsimd.read %a[[1, 4]]
    gpsimd.write %f[[1, 4]]
    gpsimd.read %b[[1, 4]]
    gpsimd.read %e[[1, 4]]
  }
}
";
        let (m, k) = chain_kernel(text);
        // %d starts where %c ends: a tensor of its own.
        assert_eq!(tensors(&m, &k), vec![0, 1, 1, 2, 1, 2]);
        assert_eq!(buffer_range(&m, k.accesses[3].buffer).end, 1u128 << 64);
    }
}
