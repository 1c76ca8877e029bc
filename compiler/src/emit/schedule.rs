//! Staging plans as data: each kernel's plan read back from the IR and
//! simulated, for `--emit=schedule-json`, `--emit=timeline-svg` and
//! `--emit=trace-json`.
//!
//! All three place the kernels on time by one rule, [`Placement`]: each core
//! has its own time axis starting at 0, and the kernels of one core run one
//! after another on it in issue (program) order, each starting where the
//! previous one on that core ended. Kernels on different cores run at the
//! same time, so every core's axis starts at the same instant.

use apir_ir::staging::{method_name, Accessor, Kernel, KernelPlan, Method, Step};
use apir_ir::target::sdma::{split_transfer, SdmaDescriptor};
use apir_ir::{Diagnostic, Diagnostics, Module, SourceMap};
use apir_passes::staging::bound::kernel_bound;
// The types a `KernelSchedule` holds, nameable from here (an embedder
// depends on this crate alone).
pub use apir_passes::staging::bound::Bound;
pub use apir_passes::staging::sim::{Event, Figures, Lane, Schedule};
use serde::Serialize;
use std::collections::BTreeMap;

/// One access of a planned kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessEntry {
    /// Index in the kernel body.
    pub index: usize,
    /// `read` or `write`.
    pub dir: &'static str,
    /// Tensor (buffer) name without `%`.
    pub tensor: String,
    /// `stream`, `tcm` or `index`.
    pub accessor: &'static str,
    /// `file:line:col`.
    pub loc: String,
    /// Why the planner chose the accessor (`gpsimd.plan {reasons}`), if
    /// the plan records it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The kernel's lower bound and its parts, rounded to 0.1 ns
/// ([`apir_passes::staging::bound`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct BoundEntry {
    /// No plan of the kernel is faster, ns.
    pub ns: f64,
    /// Compute alone, ns.
    pub compute_ns: f64,
    /// Core time at the bound: compute, indexing and core copies, ns.
    pub core_ns: f64,
    /// M2S ring time at the bound, ns.
    pub m2s_ns: f64,
    /// S2M ring time at the bound, ns.
    pub s2m_ns: f64,
    /// Per access: the least time its bytes can move alone, and how.
    pub accesses: Vec<AccessBoundEntry>,
}

/// One access's part of the bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct AccessBoundEntry {
    /// ns.
    pub least_ns: f64,
    /// `index`, `dma`, `vec` or `c`.
    pub by: &'static str,
    /// Copies at least, when staged.
    pub copies: u64,
    /// Bytes at least, when staged.
    pub bytes: u64,
}

impl BoundEntry {
    fn of(b: &Bound) -> BoundEntry {
        let tenth = |x: f64| (x * 10.0).round() / 10.0;
        BoundEntry {
            ns: tenth(b.ns),
            compute_ns: tenth(b.compute_ns),
            core_ns: tenth(b.core_ns),
            m2s_ns: tenth(b.m2s_ns),
            s2m_ns: tenth(b.s2m_ns),
            accesses: b
                .accesses
                .iter()
                .map(|a| AccessBoundEntry {
                    least_ns: tenth(a.least_ns),
                    by: a.by,
                    copies: a.copies,
                    bytes: a.bytes,
                })
                .collect(),
        }
    }
}

/// One dataram buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct BufferEntry {
    /// Dataram address.
    pub dram: u32,
    /// Bytes.
    pub bytes: u32,
}

/// One SDMA descriptor, or one core copy (`dir` = `vec` / `c`, no `hex`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DescriptorEntry {
    /// `m2s`, `s2m`, `vec` or `c`.
    pub dir: &'static str,
    /// SDMA queue id.
    pub queue: u8,
    /// HBM byte address.
    pub hbm: u64,
    /// Dataram byte address.
    pub dram: u32,
    /// Bytes moved.
    pub bytes: u32,
    /// The 16 descriptor bytes, lowercase hex (SDMA only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

/// `ns` rounded to 0.1 ns, as every time in the schedule JSON.
pub fn tenth(ns: f64) -> f64 {
    (ns * 10.0).round() / 10.0
}

/// One simulated step of a plan, for output (schedule JSON `events`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventEntry {
    /// The step's index in the plan (its position among the plan's ops).
    pub step: usize,
    /// `copy`, `wait` or `compute`.
    pub kind: &'static str,
    /// The in-order resource it ran on: `core`, `m2s` (the M2S ring) or
    /// `s2m` (the S2M ring). Core copies (`vec`, `c`) run on `core`.
    pub lane: &'static str,
    /// Start on the kernel's own clock, ns, rounded to 0.1 ns.
    pub start_ns: f64,
    /// End on the kernel's own clock, ns, rounded to 0.1 ns. A wait has
    /// `start_ns == end_ns`: the moment the core resumes.
    pub end_ns: f64,
    /// For a copy, its copy id (the number an `sdma.wait` names: copies are
    /// numbered in issue order from 0); for a wait, the copy it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<u32>,
    /// For a copy, its direction: `m2s` (HBM -> dataram) or `s2m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<&'static str>,
    /// For a copy, how it moves: `dma` (SDMA), `vec` or `c` (core memcpy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<&'static str>,
    /// For a copy, the bytes it moves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u32>,
    /// For a compute step, its first iteration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// For a compute step, its iteration count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// The lane's key in the schedule JSON and the SVG (`core`, `m2s`, `s2m`).
pub(crate) fn lane_key(l: Lane) -> &'static str {
    match l {
        Lane::Core => "core",
        Lane::M2s => "m2s",
        Lane::S2m => "s2m",
    }
}

/// Every step of `plan` as simulated in `events`, in step order, times
/// rounded to 0.1 ns.
pub fn event_entries(plan: &KernelPlan, events: &[Event]) -> Vec<EventEntry> {
    let mut copies = 0u32;
    events
        .iter()
        .filter_map(|e| {
            let step = plan.steps.get(e.step)?;
            let mut entry = EventEntry {
                step: e.step,
                kind: "",
                lane: lane_key(e.lane),
                start_ns: tenth(e.start),
                end_ns: tenth(e.end),
                copy: None,
                dir: None,
                method: None,
                bytes: None,
                first: None,
                count: None,
            };
            match *step {
                Step::Copy(c) => {
                    entry.kind = "copy";
                    entry.copy = Some(copies);
                    entry.dir = Some(c.dir.name());
                    entry.method = Some(method_name(c.method));
                    entry.bytes = Some(c.bytes);
                    copies += 1;
                }
                Step::Wait { copy } => {
                    entry.kind = "wait";
                    entry.copy = Some(copy);
                }
                Step::Compute { first, count } => {
                    entry.kind = "compute";
                    entry.first = Some(first);
                    entry.count = Some(count);
                }
            }
            Some(entry)
        })
        .collect()
}

/// Where the kernels sit in time: each core's time axis starts at 0, and
/// the kernels of one core run one after another on it in the order given
/// (issue order), each starting where the previous one on that core ended.
/// [`trace_json`], [`json`] (`offset_ns`) and the timeline SVG all place
/// kernels by this one rule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    /// Per kernel, in the order given: its start on its core's axis, ns.
    pub offsets: Vec<f64>,
    /// Per core: when its last kernel ends, ns.
    pub core_end: BTreeMap<u32, f64>,
}

impl Placement {
    /// Places `kernels`, given in issue order.
    pub fn new(kernels: &[KernelSchedule]) -> Placement {
        let mut core_end: BTreeMap<u32, f64> = BTreeMap::new();
        let offsets = kernels
            .iter()
            .map(|k| {
                let clock = core_end.entry(k.kernel.core).or_insert(0.0);
                let at = *clock;
                *clock = at + k.schedule.figures.makespan_ns;
                at
            })
            .collect();
        Placement { offsets, core_end }
    }

    /// When the last kernel on any core ends, ns (0 without kernels).
    pub fn end(&self) -> f64 {
        self.core_end.values().copied().fold(0.0, f64::max)
    }
}

/// The figures with every time rounded to 0.1 ns, for output.
pub fn rounded(f: Figures) -> Figures {
    Figures {
        makespan_ns: tenth(f.makespan_ns),
        lower_bound_ns: tenth(f.lower_bound_ns),
        stall_ns: tenth(f.stall_ns),
        m2s_busy_ns: tenth(f.m2s_busy_ns),
        s2m_busy_ns: tenth(f.s2m_busy_ns),
        ..f
    }
}

/// A planned, simulated kernel.
#[derive(Debug)]
pub struct KernelSchedule {
    /// The kernel.
    pub kernel: Kernel,
    /// Its plan.
    pub plan: KernelPlan,
    /// The simulation.
    pub schedule: Schedule,
    /// Accesses, for output.
    pub accesses: Vec<AccessEntry>,
    /// Descriptors in issue order, for output.
    pub descriptors: Vec<DescriptorEntry>,
    /// The kernel's lower bound (also `schedule.figures.lower_bound_ns`).
    pub bound: Bound,
}

impl KernelSchedule {
    /// Every simulated step, for output ([`event_entries`]).
    pub fn events(&self) -> Vec<EventEntry> {
        event_entries(&self.plan, &self.schedule.events)
    }
}

/// Every kernel of `m` with its plan, simulated. A module that does not
/// verify gives the verifier's diagnostics (it is verified first: a module
/// built or edited in code is checked at this door); a kernel without a
/// plan is an error at the kernel that says how to get one; a plan whose
/// copies cannot be described (which `schedule-staging` never writes) is
/// an internal error.
pub fn collect(m: &Module, sources: &SourceMap) -> Result<Vec<KernelSchedule>, Diagnostics> {
    apir_ir::verify(m)?;
    collect_verified(m, sources)
}

/// [`collect`] for a module the pass manager has just verified.
pub(crate) fn collect_verified(
    m: &Module,
    sources: &SourceMap,
) -> Result<Vec<KernelSchedule>, Diagnostics> {
    let mut out = Vec::new();
    for kernel in Kernel::all(m) {
        let plan = match KernelPlan::read(m, kernel.op) {
            Ok(Some(p)) => p.into_owned(),
            Ok(None) if kernel.accesses.is_empty() => continue,
            Ok(None) => {
                return Err(vec![Diagnostic::error(
                    m.ops[kernel.op].span,
                    format!(
                        "kernel @{} has no staging plan; run `schedule-staging` first (for example `-p lower-staging`)",
                        kernel.name
                    ),
                )])
            }
            Err(d) => return Err(d),
        };
        let mut schedule = Schedule::run(&kernel, &plan);
        let bound = kernel_bound(m, &kernel, &plan.params);
        schedule.figures.lower_bound_ns = bound.ns;
        let mut locator = apir_ir::Locator::default();
        let accesses = kernel
            .accesses
            .iter()
            .enumerate()
            .map(|(i, a)| AccessEntry {
                index: i,
                dir: if a.write { "write" } else { "read" },
                tensor: m.str(m.buffers[a.buffer].name).to_string(),
                accessor: plan
                    .accessors
                    .get(i)
                    .copied()
                    .unwrap_or(Accessor::Index)
                    .name(),
                loc: if sources.get(a.span.file).is_some() {
                    locator.location(sources, a.span)
                } else {
                    String::new()
                },
                reason: plan.reasons.get(i).cloned().unwrap_or_default(),
            })
            .collect();
        let mut descriptors = Vec::new();
        for step in &plan.steps {
            let Step::Copy(c) = step else { continue };
            if c.method != Method::Dma {
                descriptors.push(DescriptorEntry {
                    dir: method_name(c.method),
                    queue: 0,
                    hbm: c.hbm,
                    dram: c.dram,
                    bytes: c.bytes,
                    hex: None,
                });
                continue;
            }
            let pieces =
                split_transfer(c.hbm, c.dram, u64::from(c.bytes), c.queue).map_err(|e| {
                    vec![Diagnostic::internal(
                        m.ops[kernel.op].span,
                        format!(
                            "kernel @{}: a planned copy has no SDMA descriptors: {e}",
                            kernel.name
                        ),
                    )]
                })?;
            for d in pieces {
                descriptors.push(entry(c.dir.name(), &d));
            }
        }
        out.push(KernelSchedule {
            kernel,
            plan,
            schedule,
            accesses,
            descriptors,
            bound,
        });
    }
    Ok(out)
}

fn entry(dir: &'static str, d: &SdmaDescriptor) -> DescriptorEntry {
    let hex: String = d.encode().iter().map(|b| format!("{b:02x}")).collect();
    DescriptorEntry {
        dir,
        queue: d.queue,
        hbm: d.hbm,
        dram: d.dram,
        bytes: d.length,
        hex: Some(hex),
    }
}

#[derive(Serialize)]
struct JsonKernel<'a> {
    name: &'a str,
    core: u32,
    policy: &'static str,
    accesses: &'a [AccessEntry],
    buffers: Vec<BufferEntry>,
    descriptors: &'a [DescriptorEntry],
    figures: Figures,
    bound: BoundEntry,
    offset_ns: f64,
    events: Vec<EventEntry>,
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    arch: Option<&'static str>,
    kernels: Vec<JsonKernel<'a>>,
    diagnostics: &'a [crate::wire::JsonDiagnostic],
}

/// `--emit=schedule-json` (the fields are described in docs/staging.md, "Looking
/// at a plan"): per kernel, after the plan's accesses, buffers, descriptors
/// and figures, its `offset_ns` on its core's time axis ([`Placement`]) and
/// its `events`, every step's simulated start and end on the kernel's own
/// clock. The arch is `null` when there is none to name, as for
/// [`crate::wire::json`].
pub fn json(
    arch: impl Into<Option<apir_ir::Arch>>,
    kernels: &[KernelSchedule],
    diagnostics: &[crate::wire::JsonDiagnostic],
) -> String {
    let placement = Placement::new(kernels);
    let doc = JsonDoc {
        arch: arch.into().map(|a| a.name()),
        kernels: kernels
            .iter()
            .zip(&placement.offsets)
            .map(|(k, &offset)| JsonKernel {
                name: &k.kernel.name,
                core: k.kernel.core,
                policy: k.plan.policy.name(),
                accesses: &k.accesses,
                buffers: k
                    .plan
                    .slots
                    .iter()
                    .map(|s| BufferEntry {
                        dram: s.dram,
                        bytes: s.bytes,
                    })
                    .collect(),
                descriptors: &k.descriptors,
                figures: rounded(k.schedule.figures),
                bound: BoundEntry::of(&k.bound),
                offset_ns: tenth(offset),
                events: k.events(),
            })
            .collect(),
        diagnostics,
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// `--emit=trace-json`: the simulated steps in the Chrome trace-event
/// format (a JSON object with `traceEvents`, as Perfetto and
/// chrome://tracing open it). Each core is a process, its lanes (compute,
/// M2S queue, S2M queue) are threads; kernels are placed by [`Placement`]
/// (the kernels of one core one after another in program order, every core
/// from 0, so all cores share the viewer's one clock); times are
/// microseconds. A step with a duration is a complete event (`"ph": "X"`)
/// named after what it does; a wait that stalls the core is a `stall` event
/// from the end of the core's previous step to the wait's end.
///
/// Events are serialized one by one as the kernels' steps are walked, so
/// the memory taken is the output's plus a constant, however many copies a
/// plan has. Every object's keys are written in byte order.
pub fn trace_json(kernels: &[KernelSchedule]) -> String {
    let placement = Placement::new(kernels);
    let doc = TraceDoc {
        display_time_unit: "ns",
        trace_events: TraceEvents {
            kernels,
            placement: &placement,
        },
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// The trace document ([`trace_json`]); keys in byte order.
#[derive(Serialize)]
struct TraceDoc<'a> {
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "traceEvents")]
    trace_events: TraceEvents<'a>,
}

/// The trace's events, produced while they are serialized: walking the
/// kernels in order, a core's process and thread names before its first
/// kernel, then each kernel's steps.
struct TraceEvents<'a> {
    kernels: &'a [KernelSchedule],
    placement: &'a Placement,
}

/// The lanes of a core, in thread order (thread id = position + 1).
const TRACE_LANES: [Lane; 3] = [Lane::Core, Lane::M2s, Lane::S2m];

/// The thread id of lane `l` in the trace.
fn trace_tid(l: Lane) -> usize {
    TRACE_LANES.iter().position(|&x| x == l).unwrap_or(0) + 1
}

impl Serialize for TraceEvents<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(None)?;
        let mut seen = std::collections::BTreeSet::new();
        for (k, &at) in self.kernels.iter().zip(&self.placement.offsets) {
            let core = k.kernel.core;
            if seen.insert(core) {
                let name = format!("core {core}");
                seq.serialize_element(&TraceEvent::Process {
                    args: NameArgs { name: &name },
                    name: "process_name",
                    ph: "M",
                    pid: core,
                })?;
                for l in TRACE_LANES {
                    seq.serialize_element(&TraceEvent::Thread {
                        args: NameArgs { name: l.name() },
                        name: "thread_name",
                        ph: "M",
                        pid: core,
                        tid: trace_tid(l),
                    })?;
                }
            }
            let kernel = k.kernel.name.as_str();
            let mut copy_id = 0u64;
            let mut prev_core_end = 0.0f64;
            for e in &k.schedule.events {
                let Some(step) = k.plan.steps.get(e.step) else {
                    continue;
                };
                let (name, args) = match *step {
                    Step::Copy(c) => {
                        let id = copy_id;
                        copy_id += 1;
                        let what = if c.dir == apir_ir::staging::Dir::M2s {
                            "load"
                        } else {
                            "flush"
                        };
                        (
                            format!("{what} {} tile {}", method_name(c.method), c.tile),
                            SpanArgs::Copy {
                                access: c.access,
                                bytes: c.bytes,
                                copy: id,
                                dram: c.dram,
                                hbm: c.hbm,
                                kernel,
                            },
                        )
                    }
                    Step::Wait { copy } => {
                        if e.end > prev_core_end {
                            seq.serialize_element(&TraceEvent::Span {
                                args: SpanArgs::Stall {
                                    kernel,
                                    waits_for_copy: copy,
                                },
                                dur: (e.end - prev_core_end) / 1000.0,
                                name: "stall",
                                ph: "X",
                                pid: core,
                                tid: trace_tid(Lane::Core),
                                ts: (at + prev_core_end) / 1000.0,
                            })?;
                        }
                        prev_core_end = prev_core_end.max(e.end);
                        continue;
                    }
                    Step::Compute { first, count } => (
                        format!("compute {first}..{}", first + count),
                        SpanArgs::Compute {
                            iterations: count,
                            kernel,
                        },
                    ),
                };
                if e.lane == Lane::Core {
                    prev_core_end = e.end;
                }
                seq.serialize_element(&TraceEvent::Span {
                    args,
                    dur: (e.end - e.start) / 1000.0,
                    name: &name,
                    ph: "X",
                    pid: core,
                    tid: trace_tid(e.lane),
                    ts: (at + e.start) / 1000.0,
                })?;
            }
        }
        seq.end()
    }
}

/// One trace event; fields in byte order, as the keys are written.
#[derive(Serialize)]
#[serde(untagged)]
enum TraceEvent<'a> {
    /// A core's name (metadata, `"ph": "M"`).
    Process {
        args: NameArgs<'a>,
        name: &'static str,
        ph: &'static str,
        pid: u32,
    },
    /// A lane's name (metadata, `"ph": "M"`).
    Thread {
        args: NameArgs<'a>,
        name: &'static str,
        ph: &'static str,
        pid: u32,
        tid: usize,
    },
    /// A complete event (`"ph": "X"`): a step or a stall; `ts` and `dur` in
    /// microseconds.
    Span {
        args: SpanArgs<'a>,
        dur: f64,
        name: &'a str,
        ph: &'static str,
        pid: u32,
        tid: usize,
        ts: f64,
    },
}

/// The `args` of a metadata event.
#[derive(Serialize)]
struct NameArgs<'a> {
    name: &'a str,
}

/// The `args` of a complete event; fields in byte order.
#[derive(Serialize)]
#[serde(untagged)]
enum SpanArgs<'a> {
    /// A copy: its id within the kernel and what it moves.
    Copy {
        access: u32,
        bytes: u32,
        copy: u64,
        dram: u32,
        hbm: u64,
        kernel: &'a str,
    },
    /// A compute step.
    Compute { iterations: u64, kernel: &'a str },
    /// A wait that stalls the core.
    Stall {
        kernel: &'a str,
        waits_for_copy: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compilation;
    use serde_json::Value;

    /// @a and @c on core 0, @b on core 1.
    const THREE: &str = "module @three attributes {arch = \"v2\"} {
  %x = mem.hbm {addr = 0x40000000} : tensor<4096xf32>
  %y = mem.hbm {addr = 0x40100000} : tensor<4096xf32>
  %z = mem.hbm {addr = 0x40200000} : tensor<4096xf32>
  %w = mem.hbm {addr = 0x40300000} : tensor<4096xf32>
  gpsimd.kernel @a {core = 0, cycles_per_element = 2} {
    gpsimd.read  %x[[1, 4096]]
    gpsimd.write %y[[1, 4096]]
  }
  gpsimd.kernel @b {core = 1, cycles_per_element = 3} {
    gpsimd.read  %x[[1, 4096]]
    gpsimd.write %z[[1, 4096]]
  }
  gpsimd.kernel @c {core = 0, cycles_per_element = 1} {
    gpsimd.read  %y[[1, 2048]]
    gpsimd.write %w[[1, 2048]]
  }
}
";

    fn three() -> Vec<KernelSchedule> {
        let mut c = Compilation::parse("three.apir", THREE, None)
            .map_err(|e| e.to_string())
            .unwrap();
        c.run("lower-staging").unwrap();
        collect(&c.module, &c.sources).unwrap()
    }

    #[test]
    fn kernels_of_a_core_follow_each_other_from_zero() {
        let k = three();
        let mk: Vec<f64> = k.iter().map(|k| k.schedule.figures.makespan_ns).collect();
        let p = Placement::new(&k);
        assert_eq!(p.offsets, [0.0, 0.0, mk[0]]);
        assert_eq!(p.core_end.get(&0), Some(&(mk[0] + mk[2])));
        assert_eq!(p.core_end.get(&1), Some(&mk[1]));
        assert_eq!(p.end(), (mk[0] + mk[2]).max(mk[1]));
        assert_eq!(Placement::new(&[]).end(), 0.0);
    }

    /// The schedule JSON's `offset_ns` and the trace's timestamps come from
    /// the same placement.
    #[test]
    fn json_and_trace_place_kernels_alike() {
        let k = three();
        let p = Placement::new(&k);
        let doc: Value = serde_json::from_str(&json(apir_ir::Arch::V2, &k, &[])).unwrap();
        let offsets: Vec<f64> = doc["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["offset_ns"].as_f64().unwrap())
            .collect();
        assert_eq!(
            offsets,
            p.offsets.iter().map(|&x| tenth(x)).collect::<Vec<_>>()
        );
        let trace: Value = serde_json::from_str(&trace_json(&k)).unwrap();
        for (ks, &at) in k.iter().zip(&p.offsets) {
            let first = trace["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X" && e["args"]["kernel"] == ks.kernel.name.as_str())
                .map(|e| e["ts"].as_f64().unwrap())
                .fold(f64::MAX, f64::min);
            assert!((first * 1000.0 - at).abs() < 1e-6, "@{}", ks.kernel.name);
        }
    }

    /// The trace is written as its value tree prints: every object's keys
    /// in byte order (the document's too), pretty-printed; no kernels give
    /// no events.
    #[test]
    fn trace_keys_are_in_byte_order() {
        let k = three();
        let trace = trace_json(&k);
        // Per nesting depth, the last key of the object open there.
        let mut last: Vec<Option<&str>> = Vec::new();
        for line in trace.lines() {
            let depth = (line.len() - line.trim_start().len()) / 2;
            last.truncate(depth + 1);
            last.resize(depth + 1, None);
            let Some(rest) = line.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some((key, _)) = rest.split_once("\": ") else {
                continue;
            };
            assert!(last[depth] < Some(key), "{key:?} after {:?}", last[depth]);
            last[depth] = Some(key);
        }
        let v: Value = serde_json::from_str(&trace).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        // Two cores, each a process name and three thread names.
        assert_eq!(events.iter().filter(|e| e["ph"] == "M").count(), 8);
        let keys = |e: &Value| e.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        for e in events.iter().filter(|e| e["ph"] == "X") {
            assert_eq!(keys(e), ["args", "dur", "name", "ph", "pid", "tid", "ts"]);
        }
        assert!(events
            .iter()
            .any(|e| keys(&e["args"]) == ["access", "bytes", "copy", "dram", "hbm", "kernel"]));
        assert!(events
            .iter()
            .any(|e| keys(&e["args"]) == ["iterations", "kernel"]));
        assert_eq!(
            trace_json(&[]),
            "{\n  \"displayTimeUnit\": \"ns\",\n  \"traceEvents\": []\n}\n"
        );
    }

    #[test]
    fn events_say_what_each_step_is() {
        let k = three();
        for ks in &k {
            let events = ks.events();
            assert_eq!(events.len(), ks.plan.steps.len());
            let copies = events.iter().filter(|e| e.kind == "copy").count();
            assert_eq!(copies, ks.plan.copies().count());
            for (e, step) in events.iter().zip(&ks.plan.steps) {
                match step {
                    Step::Copy(c) => {
                        let lane = if c.method == Method::Dma {
                            c.dir.name()
                        } else {
                            "core"
                        };
                        assert_eq!(e.lane, lane);
                        assert_eq!(e.bytes, Some(c.bytes));
                        assert!(e.first.is_none() && e.count.is_none());
                    }
                    Step::Wait { copy } => {
                        assert_eq!((e.kind, e.lane, e.copy), ("wait", "core", Some(*copy)));
                        assert_eq!(e.start_ns, e.end_ns);
                    }
                    Step::Compute { first, count } => {
                        assert_eq!((e.kind, e.lane), ("compute", "core"));
                        assert_eq!((e.first, e.count), (Some(*first), Some(*count)));
                        assert!(e.copy.is_none() && e.dir.is_none());
                    }
                }
            }
        }
    }
}
