//! The plan's steps in issue order, from the chosen buffering of each
//! staging group (the tile contract is [`crate::staging::layout`]'s).

use super::{copy_method, STAGING_QUEUE};
use crate::staging::footprint::{Run, Sweep};
use crate::staging::layout::{reads_after_writes, Group, TileLayout};
use apir_ir::staging::Slot;
use apir_ir::staging::{Copy, Dir, Kernel, KernelPlan, Method, Step};
use apir_ir::target::sdma::{DATARAM_BASE, MAX_DESCRIPTOR_BYTES};

/// How one staging group is buffered: the method of its copies (a copy
/// small enough that the DMA fixed cost dominates may still go by
/// VEC_MEMCPY, [`copy_method`]), its buffer count and iterations per tile,
/// and whether an SDMA group's fill (its first tile's loads) and drain (its
/// last tile's flushes) go by VEC_MEMCPY where that is faster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Buffering {
    pub method: Method,
    pub buffers: u64,
    pub tile: u64,
    pub vec_edges: bool,
}

impl Buffering {
    /// Bytes of one buffer of `group`.
    pub fn buffer_bytes(&self, group: &Group) -> u64 {
        self.tile * group.bytes_per_iteration
    }

    /// How many tiles ahead of the compute a group's loads run: as many as
    /// it has buffers, one fewer for an in-place group (a buffer is
    /// refilled only after its flush).
    pub(crate) fn lookahead(&self, group: &Group) -> u64 {
        if group.writes {
            self.buffers.saturating_sub(1)
        } else {
            self.buffers
        }
    }
}

/// Places the groups' buffers from the start of the dataram window
/// (`align`-byte aligned) and emits the steps of `plan`, whose header
/// (policy, depth, accessors, parameters) is already set. `sync`: every
/// copy is waited for as soon as it is issued (the reference runtime).
pub(super) fn emit(
    mut plan: KernelPlan,
    kernel: &Kernel,
    sweeps: &[Sweep],
    gs: &[Group],
    bufs: &[Buffering],
    sync: bool,
    align: u64,
) -> KernelPlan {
    let mut at = u64::from(DATARAM_BASE);
    let mut groups = Vec::with_capacity(gs.len());
    for (g, b) in gs.iter().zip(bufs) {
        let tiles = kernel.elements.div_ceil(b.tile);
        let n = b.buffers.min(tiles).max(1);
        let bytes = b.buffer_bytes(g);
        let mut slots = Vec::new();
        for _ in 0..n {
            slots.push(plan.slots.len() as u32);
            plan.slots.push(Slot {
                access: g.accesses[0] as u32,
                dram: at as u32,
                bytes: bytes as u32,
            });
            at += bytes.div_ceil(align) * align;
        }
        groups.push(GroupState {
            group: g.clone(),
            method: b.method,
            vec_edges: b.vec_edges,
            tile: b.tile,
            tiles,
            slots,
            lookahead: b.lookahead(g),
            next_load: 0,
            loads: Vec::new(),
            flushes: vec![Vec::new(); tiles as usize],
            flushed: 0,
            raw: if g.reads && g.writes {
                read_after_write(kernel, sweeps, g, b.tile, tiles)
            } else {
                Vec::new()
            },
        });
    }
    let mut b = Builder {
        plan,
        kernel,
        sweeps,
        sync,
        waited: Vec::new(),
        groups,
    };
    b.emit();
    // The plan is kept (typed, in the module): no spare capacity.
    b.plan.steps.shrink_to_fit();
    b.plan
}

struct GroupState {
    group: Group,
    method: Method,
    /// Fill and drain by VEC_MEMCPY where faster.
    vec_edges: bool,
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
        // Prologue: fill the pipeline, the first tile of every group
        // before the second of any (the M2S ring is in order: the first
        // compute waits only for the first tiles).
        let ahead = self.groups.iter().map(|g| g.lookahead).max().unwrap_or(0);
        for k in 1..=ahead {
            for g in 0..self.groups.len() {
                if self.groups[g].group.reads && self.groups[g].lookahead >= k {
                    self.load_ahead(g, k);
                }
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
                let edge = self.groups[g].vec_edges
                    && match dir {
                        Dir::M2s => t == 0,
                        Dir::S2m => t + 1 == self.groups[g].tiles,
                    };
                let method = copy_method(
                    &self.plan.params,
                    method,
                    len,
                    u64::from(self.plan.slots[slot as usize].bytes),
                    self.sync,
                    edge,
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
