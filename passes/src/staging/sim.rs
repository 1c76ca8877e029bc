//! The staging simulator: a deterministic discrete-event model of one
//! kernel's plan on its core (docs/staging.md, "The cost model").
//!
//! Three in-order resources run concurrently: the core (computes, waits and
//! core copies, in issue order), the M2S ring and the S2M ring (SDMA copies in
//! issue order per ring). The plan becomes a dependency graph (`petgraph`):
//! one node per step, and an edge for
//! - program order on the core;
//! - issue: an SDMA copy cannot start before the core reaches it;
//! - ring order: a ring runs one descriptor at a time, in issue order;
//! - completion: an `sdma.wait` ends when its copy has finished.
//!
//! Buffer reuse is not assumed: a plan must order it itself, and
//! `check-coherency` proves it does, on the same graph ([`Schedule::happens_before`]).
//!
//! Because every resource is in order, each event starts when the last of its
//! predecessors ends; evaluating the graph in topological order is the
//! event simulation.

use apir_ir::staging::{Dir, Kernel, KernelPlan, Method, SimParams, Step};
use apir_ir::target::sdma::descriptor_count;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

/// The resource a step runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// The GpSimd core.
    Core,
    /// The M2S ring (HBM -> dataram).
    M2s,
    /// The S2M ring (dataram -> HBM).
    S2m,
}

impl Lane {
    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Core => "compute",
            Lane::M2s => "M2S queue",
            Lane::S2m => "S2M queue",
        }
    }
}

/// One simulated step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    /// The step's index in the plan.
    pub step: usize,
    /// Where it ran.
    pub lane: Lane,
    /// Start, ns.
    pub start: f64,
    /// End, ns.
    pub end: f64,
}

/// The simulator's figures for one kernel (schedule JSON `figures`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// When the last step ends, ns.
    pub makespan_ns: f64,
    /// `max(bytes_in / bw, bytes_out / bw, compute)`, with the SDMA bytes of
    /// each ring and the pure compute time, ns.
    pub lower_bound_ns: f64,
    /// Time the core spends blocked in `sdma.wait`, ns.
    pub stall_ns: f64,
    /// Bytes copied HBM -> dataram (any method).
    pub bytes_in: u64,
    /// Bytes copied dataram -> HBM (any method).
    pub bytes_out: u64,
    /// SDMA descriptors (a copy over 64 KiB takes several).
    pub descriptors: u64,
    /// Time the M2S ring is busy, ns.
    pub m2s_busy_ns: f64,
    /// Time the S2M ring is busy, ns.
    pub s2m_busy_ns: f64,
}

/// A simulated plan: the dependency graph, the timed events and the
/// figures.
#[derive(Debug)]
pub struct Schedule {
    /// The dependency graph; node `i` is step `i`.
    pub graph: DiGraph<(), (), u32>,
    /// One event per step, in step order.
    pub events: Vec<Event>,
    /// Figures.
    pub figures: Figures,
    /// Vector clocks: for step `i`, the number of steps of each lane
    /// (core, M2S, S2M) that happen before or at it.
    clocks: Vec<[u32; 3]>,
    /// Each step's lane and its position on the lane.
    pos: Vec<(Lane, u32)>,
}

fn lane_of(step: &Step) -> Lane {
    match step {
        Step::Copy(c) if c.method == Method::Dma => match c.dir {
            Dir::M2s => Lane::M2s,
            Dir::S2m => Lane::S2m,
        },
        _ => Lane::Core,
    }
}

/// Nanoseconds to move `bytes` at `per_us` bytes per microsecond.
fn transfer_ns(bytes: u64, per_us: u64) -> f64 {
    bytes as f64 * 1000.0 / per_us as f64
}

/// The duration of an SDMA copy of `bytes`.
pub(crate) fn dma_ns(p: &SimParams, bytes: u64) -> f64 {
    descriptor_count(bytes) as f64 * p.dma_fixed_ns as f64 + transfer_ns(bytes, p.dma_bytes_per_us)
}

/// The duration of a core copy of `bytes` by `method`.
pub(crate) fn core_copy_ns(p: &SimParams, method: Method, bytes: u64) -> f64 {
    match method {
        Method::VecMemcpy => p.vec_fixed_ns as f64 + transfer_ns(bytes, p.vec_bytes_per_us),
        Method::CMemcpy => p.c_fixed_ns as f64 + transfer_ns(bytes, p.c_bytes_per_us),
        Method::Dma => dma_ns(p, bytes),
    }
}

/// Core time of one iteration: its cycles plus one unbuffered access per
/// `index` access.
pub fn iteration_ns(p: &SimParams, cycles: u64, index_accesses: u64) -> f64 {
    cycles as f64 * 1000.0 / p.clock_mhz as f64 + (index_accesses * p.index_ns) as f64
}

impl Schedule {
    /// Simulates `plan` for `kernel`.
    pub fn run(kernel: &Kernel, plan: &KernelPlan) -> Schedule {
        let p = &plan.params;
        let index_accesses = plan.accessors.iter().filter(|a| !a.is_buffered()).count() as u64;
        let per_iteration = iteration_ns(p, kernel.cycles_per_element, index_accesses);
        let n = plan.steps.len();
        let mut graph: DiGraph<(), (), u32> = DiGraph::with_capacity(n, n * 2);
        let mut copy_step: Vec<usize> = Vec::new();
        let mut last: [Option<usize>; 3] = [None; 3];
        let mut pos = Vec::with_capacity(n);
        let mut counts = [0u32; 3];
        for (i, step) in plan.steps.iter().enumerate() {
            let node = graph.add_node(());
            let lane = lane_of(step);
            let li = lane as usize;
            pos.push((lane, counts[li]));
            counts[li] += 1;
            if let Some(prev) = last[li] {
                graph.add_edge(NodeIndex::new(prev), node, ());
            }
            if lane != Lane::Core {
                // Issue: the core has run everything before it.
                if let Some(c) = last[Lane::Core as usize] {
                    graph.add_edge(NodeIndex::new(c), node, ());
                }
            }
            match step {
                Step::Copy(_) => copy_step.push(i),
                Step::Wait { copy } => {
                    let c = copy_step[*copy as usize];
                    graph.add_edge(NodeIndex::new(c), node, ());
                }
                Step::Compute { .. } => {}
            }
            last[li] = Some(i);
        }
        // Steps are added in issue order and every edge points forward, so
        // issue order is a topological order of the graph.
        debug_assert!(petgraph::algo::toposort(&graph, None).is_ok());
        let mut events: Vec<Event> = Vec::with_capacity(n);
        let mut clocks: Vec<[u32; 3]> = Vec::with_capacity(n);
        let mut stall = 0.0f64;
        let mut prev_core_end = 0.0f64;
        let (mut bytes_in, mut bytes_out, mut descriptors) = (0u64, 0u64, 0u64);
        let (mut m2s_sdma, mut s2m_sdma) = (0u64, 0u64);
        let (mut m2s_busy, mut s2m_busy) = (0.0f64, 0.0f64);
        for (i, step) in plan.steps.iter().enumerate() {
            let node = NodeIndex::new(i);
            let mut start = 0.0f64;
            let mut clock = [0u32; 3];
            for pred in graph.neighbors_directed(node, petgraph::Direction::Incoming) {
                let j = pred.index();
                start = start.max(events[j].end);
                for k in 0..3 {
                    clock[k] = clock[k].max(clocks[j][k]);
                }
            }
            let (lane, at) = pos[i];
            clock[lane as usize] = at + 1;
            let dur = match *step {
                Step::Copy(c) => {
                    let b = u64::from(c.bytes);
                    match c.dir {
                        Dir::M2s => bytes_in += b,
                        Dir::S2m => bytes_out += b,
                    }
                    if c.method == Method::Dma {
                        descriptors += descriptor_count(b);
                        let d = dma_ns(p, b);
                        match c.dir {
                            Dir::M2s => {
                                m2s_sdma += b;
                                m2s_busy += d;
                            }
                            Dir::S2m => {
                                s2m_sdma += b;
                                s2m_busy += d;
                            }
                        }
                        d
                    } else {
                        core_copy_ns(p, c.method, b)
                    }
                }
                Step::Wait { .. } => {
                    stall += (start - prev_core_end).max(0.0);
                    0.0
                }
                Step::Compute { count, .. } => count as f64 * per_iteration,
            };
            let end = start + dur;
            if lane == Lane::Core {
                prev_core_end = end;
            }
            events.push(Event {
                step: i,
                lane,
                start,
                end,
            });
            clocks.push(clock);
        }
        let makespan = events.iter().map(|e| e.end).fold(0.0, f64::max);
        let compute_ns =
            kernel.elements as f64 * kernel.cycles_per_element as f64 * 1000.0 / p.clock_mhz as f64;
        let lower_bound = transfer_ns(m2s_sdma, p.dma_bytes_per_us)
            .max(transfer_ns(s2m_sdma, p.dma_bytes_per_us))
            .max(compute_ns);
        Schedule {
            graph,
            events,
            figures: Figures {
                makespan_ns: makespan,
                lower_bound_ns: lower_bound,
                stall_ns: stall,
                bytes_in,
                bytes_out,
                descriptors,
                m2s_busy_ns: m2s_busy,
                s2m_busy_ns: s2m_busy,
            },
            clocks,
            pos,
        }
    }

    /// Whether step `a` finishes before step `b` starts in every execution
    /// of the plan, whatever the durations: a path `a -> ... -> b` exists in
    /// the dependency graph. Exact, in O(1) per query, by vector clocks over
    /// the three in-order lanes.
    pub fn happens_before(&self, a: usize, b: usize) -> bool {
        if a == b {
            return false;
        }
        let (lane, at) = self.pos[a];
        self.clocks[b][lane as usize] > at
    }

    /// A pair `(x, y)`, `x` in `a` and `y` in `b`, such that `x` does not
    /// happen before `y`, if any: [`Schedule::happens_before`] for every
    /// pair, in O(|a| + |b|). `x` happens before `y` exactly when `y`'s clock
    /// on `x`'s lane passes `x`'s position there, so it is enough to compare,
    /// per lane, the latest step of `a` with the `b` whose clock on that
    /// lane is least.
    pub(crate) fn first_not_before(&self, a: &[usize], b: &[usize]) -> Option<(usize, usize)> {
        if b.is_empty() {
            return None;
        }
        let mut latest: [Option<(u32, usize)>; 3] = [None; 3];
        for &x in a {
            if b.contains(&x) && b.len() <= 8 {
                return Some((x, x));
            }
            let (lane, at) = self.pos[x];
            let l = &mut latest[lane as usize];
            if l.is_none_or(|(p, _)| at > p) {
                *l = Some((at, x));
            }
        }
        for (lane, l) in latest.iter().enumerate() {
            let Some((at, x)) = *l else { continue };
            let y = b
                .iter()
                .copied()
                .min_by_key(|&y| self.clocks[y][lane])
                .unwrap_or(b[0]);
            if self.clocks[y][lane] <= at || x == y {
                return Some((x, y));
            }
        }
        // A step in both sets never happens before itself.
        if b.len() > 8 {
            let mut bs = b.to_vec();
            bs.sort_unstable();
            if let Some(&x) = a.iter().find(|x| bs.binary_search(x).is_ok()) {
                return Some((x, x));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apir_ir::staging::{Accessor, Copy, Policy, Slot};

    fn copy(dir: Dir, bytes: u32) -> Step {
        Step::Copy(Copy {
            dir,
            method: Method::Dma,
            queue: 0,
            access: 0,
            tile: 0,
            slot: 0,
            hbm: 0,
            dram: 0x80000,
            bytes,
        })
    }

    fn kernel(elements: u64, cycles: u64) -> Kernel {
        Kernel {
            op: apir_ir::Op::from_u32(0),
            name: "k".into(),
            core: 0,
            cycles_per_element: cycles,
            accesses: Vec::new(),
            elements,
        }
    }

    fn plan(steps: Vec<Step>) -> KernelPlan {
        KernelPlan {
            policy: Policy::Pipelined,
            depth: 2,
            accessors: vec![Accessor::Stream],
            params: SimParams::default(),
            reasons: Vec::new(),
            slots: vec![Slot {
                access: 0,
                dram: 0x80000,
                bytes: 4096,
            }],
            steps,
        }
    }

    #[test]
    fn copy_wait_compute_timing() {
        // 1400 iterations at 1 cycle and 1.4 GHz: 1000 ns of compute.
        let steps = vec![
            copy(Dir::M2s, 2720),
            Step::Wait { copy: 0 },
            Step::Compute {
                first: 0,
                count: 1400,
            },
            copy(Dir::S2m, 2720),
        ];
        let s = Schedule::run(&kernel(1400, 1), &plan(steps));
        // 1300 ns fixed + 100 ns of transfer.
        assert!((s.events[0].end - 1400.0).abs() < 1e-9);
        assert!((s.figures.stall_ns - 1400.0).abs() < 1e-9);
        assert!((s.events[2].end - 2400.0).abs() < 1e-9);
        assert!((s.figures.makespan_ns - 3800.0).abs() < 1e-9);
        assert!((s.figures.lower_bound_ns - 1000.0).abs() < 1e-9);
        assert_eq!(s.figures.descriptors, 2);
        assert!(s.happens_before(0, 2));
        assert!(s.happens_before(2, 3));
        assert!(!s.happens_before(3, 2));
    }

    #[test]
    fn rings_overlap_and_unwaited_copies_are_unordered() {
        let steps = vec![
            copy(Dir::M2s, 27_200),
            copy(Dir::S2m, 27_200),
            Step::Compute { first: 0, count: 1 },
        ];
        let s = Schedule::run(&kernel(1, 1), &plan(steps));
        // Both rings start at 0 and run 1300 + 1000 ns each.
        assert!((s.events[0].end - 2300.0).abs() < 1e-9);
        assert!((s.events[1].start).abs() < 1e-9);
        assert!(!s.happens_before(0, 2));
        assert!(!s.happens_before(0, 1));
        assert!((s.figures.stall_ns).abs() < 1e-9);
    }

    #[test]
    fn a_copy_over_64_kib_takes_several_descriptors() {
        let p = SimParams::default();
        assert!((dma_ns(&p, 65_536 * 2) - (2600.0 + 131_072.0 / 27.2)).abs() < 1e-6);
    }
}
