//! Staging plans as data: each kernel's plan read back from the IR and
//! simulated, for `--emit=schedule-json` and `--emit=timeline-svg`.

use apir_ir::staging::{method_name, Accessor, Kernel, KernelPlan, Method, Step};
use apir_ir::target::sdma::{split_transfer, SdmaDescriptor};
use apir_ir::{Diagnostic, Diagnostics, Module, SourceMap};
use apir_passes::staging::sim::{Figures, Lane, Schedule};
use serde::Serialize;

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
}

/// One dataram buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BufferEntry {
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

/// The figures with every time rounded to 0.1 ns, for output.
pub fn rounded(f: Figures) -> Figures {
    let tenth = |x: f64| (x * 10.0).round() / 10.0;
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
}

/// Every kernel of `m` with its plan, simulated. A kernel without a plan is
/// an error at the kernel that says how to get one; a malformed plan gives
/// the verifier's diagnostics; a plan whose copies cannot be described
/// (which `schedule-staging` never writes) is an internal error.
pub fn collect(m: &Module, sources: &SourceMap) -> Result<Vec<KernelSchedule>, Diagnostics> {
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
        let schedule = Schedule::run(&kernel, &plan);
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
                    sources.location(a.span)
                } else {
                    String::new()
                },
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
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    arch: &'static str,
    kernels: Vec<JsonKernel<'a>>,
    diagnostics: &'a [crate::wire::JsonDiagnostic],
}

/// `--emit=schedule-json` (tools.md).
pub fn json(
    arch: apir_ir::Arch,
    kernels: &[KernelSchedule],
    diagnostics: &[crate::wire::JsonDiagnostic],
) -> String {
    let doc = JsonDoc {
        arch: arch.name(),
        kernels: kernels
            .iter()
            .map(|k| JsonKernel {
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
/// M2S queue, S2M queue) are threads; the kernels of one core run one after
/// another in program order, so each starts where the previous one on its
/// core ended; times are microseconds. A step with a duration is a complete
/// event (`"ph": "X"`) named after what it does; a wait that stalls the
/// core is a `stall` event from the end of the core's previous step to the
/// wait's end.
pub fn trace_json(kernels: &[KernelSchedule]) -> String {
    use serde_json::json;
    use std::collections::BTreeMap;
    let mut events = Vec::new();
    // Where each core's next kernel starts, ns.
    let mut clock: BTreeMap<u32, f64> = BTreeMap::new();
    let lanes = [Lane::Core, Lane::M2s, Lane::S2m];
    let tid = |l: Lane| lanes.iter().position(|&x| x == l).unwrap_or(0) + 1;
    for k in kernels {
        let core = k.kernel.core;
        if !clock.contains_key(&core) {
            events.push(json!({"name": "process_name", "ph": "M", "pid": core, "args": {"name": format!("core {core}")}}));
            for l in lanes {
                events.push(json!({"name": "thread_name", "ph": "M", "pid": core, "tid": tid(l), "args": {"name": l.name()}}));
            }
        }
        let at = *clock.entry(core).or_insert(0.0);
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
                        json!({"kernel": k.kernel.name, "copy": id, "access": c.access, "hbm": c.hbm, "dram": c.dram, "bytes": c.bytes}),
                    )
                }
                Step::Wait { copy } => {
                    if e.end > prev_core_end {
                        events.push(json!({
                            "name": "stall", "ph": "X", "pid": core, "tid": tid(Lane::Core),
                            "ts": (at + prev_core_end) / 1000.0, "dur": (e.end - prev_core_end) / 1000.0,
                            "args": {"kernel": k.kernel.name, "waits_for_copy": copy},
                        }));
                    }
                    prev_core_end = prev_core_end.max(e.end);
                    continue;
                }
                Step::Compute { first, count } => (
                    format!("compute {first}..{}", first + count),
                    json!({"kernel": k.kernel.name, "iterations": count}),
                ),
            };
            if e.lane == Lane::Core {
                prev_core_end = e.end;
            }
            events.push(json!({
                "name": name, "ph": "X", "pid": core, "tid": tid(e.lane),
                "ts": (at + e.start) / 1000.0, "dur": (e.end - e.start) / 1000.0,
                "args": args,
            }));
        }
        clock.insert(core, at + k.schedule.figures.makespan_ns);
    }
    let doc = json!({"traceEvents": events, "displayTimeUnit": "ns"});
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
