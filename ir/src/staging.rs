//! Staging plans: the ops `schedule-staging` writes into a `gpsimd.kernel`
//! body, read back as typed values (docs/staging.md).
//!
//! A planned kernel body holds its accesses, then one `gpsimd.plan` op, then
//! the plan's dataram buffers and its steps in issue order:
//!
//! ```text
//! gpsimd.kernel @relu {core = 0, cycles_per_element = 2} {
//!   gpsimd.read %in[[1, 4096]]
//!   gpsimd.write %out[[1, 4096]]
//!   gpsimd.plan {policy = "pipelined", buffers = 2, accessors = ["stream", "stream"]}
//!   gpsimd.buffer {slot = 0, access = 0, dram = 0x80000, bytes = 4096}
//!   sdma.copy {id = 0, dir = "m2s", queue = 0, access = 0, tile = 0, slot = 0, hbm = 0x40000000, dram = 0x80000, bytes = 4096}
//!   sdma.wait {copy = 0}
//!   gpsimd.compute {first = 0, count = 1024}
//! }
//! ```
//!
//! | op | meaning |
//! | --- | --- |
//! | `gpsimd.plan` | the policy, the buffering depth, the accessor chosen per access (in body order), and any simulator parameter that differs from [`SimParams::default`] |
//! | `gpsimd.buffer` | one dataram buffer: `[dram, dram + bytes)`, owned by the staging group of access `access` |
//! | `sdma.copy` | an SDMA transfer on the core's M2S (`m2s`, HBM -> dataram) or S2M (`s2m`, dataram -> HBM) ring; asynchronous |
//! | `gpsimd.memcpy` | the same transfer done by the core itself (`method = "vec"` or `"c"`); synchronous |
//! | `sdma.wait` | the core blocks until copy `copy` has completed |
//! | `gpsimd.compute` | the core runs iterations `[first, first + count)` of the kernel loop |
//!
//! Copies are numbered by `id` in issue order (SDMA and core copies share the
//! numbering); `tile` is the index of the tile (a range of iterations) of
//! access `access` the copy belongs to; `slot` is the `gpsimd.buffer` it uses.
//! The attributes are the storage: [`KernelPlan::read`] decodes and checks
//! them, [`KernelPlan::write`] replaces a kernel's plan ops.

use crate::diag::{Diagnostic, Diagnostics};
use crate::module::{AccessPattern, Attr, Attrs, Buffer, Module, Op, OpData, OpKind};
use crate::source::Span;
use crate::target::encoders::KERNEL_ATTRS;
use crate::target::ops::ValueKind;
use crate::target::sdma::{DATARAM_BASE, DATARAM_END, MAX_DESCRIPTOR_BYTES, QUEUES};
use std::borrow::Cow;

// The plan ops are rows of the op-definition table; the plan's typed
// values live in `plan`, the simulator parameters in the cost model.
pub use crate::plan::{
    core_method, method_name, Accessor, Copy, Dir, KernelPlan, Method, Policy, Slot, Step,
};
pub use crate::target::cost::{ParamInfo, SimParams, PARAMS};
pub use crate::target::ops::{PlanOp, MAX_DEPTH};

/// One access of a kernel, as the planner and the checker see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The `gpsimd.read` / `gpsimd.write` op.
    pub op: Op,
    /// Whether the kernel writes through it.
    pub write: bool,
    /// The HBM buffer.
    pub buffer: Buffer,
    /// The access pattern (elements of the buffer's dtype).
    pub ap: AccessPattern,
    /// The `accessor` hint (`None` for `auto`).
    pub hint: Option<Accessor>,
    /// Location of the access op.
    pub span: Span,
}

/// A kernel's own data: name, core, cost per element, accesses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The `gpsimd.kernel` op.
    pub op: Op,
    /// Symbol name.
    pub name: String,
    /// GpSimd core.
    pub core: u32,
    /// Core cycles per iteration.
    pub cycles_per_element: u64,
    /// Accesses in body order.
    pub accesses: Vec<Access>,
    /// Iterations (the shared element count; 0 if the kernel has no access).
    pub elements: u64,
}

fn int_attr(m: &Module, attrs: &Attrs, key: &str) -> Option<i128> {
    attrs.iter().find_map(|(k, v)| match v {
        Attr::Int(i) if m.str(*k) == key => Some(*i),
        _ => None,
    })
}

fn str_attr<'m>(m: &'m Module, attrs: &Attrs, key: &str) -> Option<&'m str> {
    attrs.iter().find_map(|(k, v)| match v {
        Attr::Str(s) if m.str(*k) == key => Some(m.str(*s)),
        _ => None,
    })
}

/// A `gpsimd.kernel` integer attribute, or its default from the kernel
/// attribute table (the verifier has checked the value's range).
fn kernel_attr(m: &Module, attrs: &Attrs, key: &str) -> u64 {
    int_attr(m, attrs, key)
        .and_then(|v| u64::try_from(v).ok())
        .or_else(|| {
            KERNEL_ATTRS
                .iter()
                .find(|a| a.name == key)
                .and_then(|a| a.default.parse().ok())
        })
        .unwrap_or(0)
}

impl Kernel {
    /// Reads the kernel op `op` (the verifier has checked its attributes).
    pub fn read(m: &Module, op: Op) -> Option<Kernel> {
        let data = &m.ops[op];
        let OpKind::Kernel { name, body } = data.kind else {
            return None;
        };
        let mut accesses = Vec::new();
        for &inner in &m.blocks[body].ops {
            let d = &m.ops[inner];
            let write = match d.kind {
                OpKind::Read => false,
                OpKind::Write => true,
                _ => continue,
            };
            let Some(o) = d.operands.first() else {
                continue;
            };
            accesses.push(Access {
                op: inner,
                write,
                buffer: o.buffer,
                ap: o.ap.clone(),
                hint: str_attr(m, &d.attrs, "accessor").and_then(Accessor::from_name),
                span: d.span,
            });
        }
        let elements = accesses.first().and_then(|a| a.ap.elements()).unwrap_or(0);
        Some(Kernel {
            op,
            name: m.str(name).to_string(),
            core: kernel_attr(m, &data.attrs, "core") as u32,
            cycles_per_element: kernel_attr(m, &data.attrs, "cycles_per_element"),
            accesses,
            elements,
        })
    }

    /// Every kernel of `m`, in program order.
    pub fn all(m: &Module) -> Vec<Kernel> {
        m.top_ops().filter_map(|op| Kernel::read(m, op)).collect()
    }
}

impl KernelPlan {
    /// Reads the plan of kernel `kernel`: `Ok(None)` if it has none. Every
    /// structural problem is reported: misplaced or repeated plan ops,
    /// missing or out-of-range attributes, buffers outside the dataram
    /// window or overlapping, copies outside their buffer or referring to an
    /// unknown access, tile or buffer, waits on a copy not yet issued or on a
    /// core copy, computes out of the iteration space. A plan written by
    /// [`KernelPlan::write`] is held typed and borrowed, after the same
    /// checks ([`KernelPlan::problems`]).
    pub fn read(m: &Module, kernel: Op) -> Result<Option<Cow<'_, KernelPlan>>, Diagnostics> {
        Ok(KernelPlan::read_with_spans(m, kernel)?.map(|(p, _)| p))
    }

    /// [`KernelPlan::read`], also giving the location of each step's op
    /// (empty for a typed plan: every step is at its kernel).
    pub fn read_with_spans(
        m: &Module,
        kernel: Op,
    ) -> Result<Option<PlanWithSpans<'_>>, Diagnostics> {
        let OpKind::Kernel { body, .. } = m.ops[kernel].kind else {
            return Ok(None);
        };
        if let Some(plan) = m.plans.get(&kernel) {
            let (accesses, elements) = kernel_shape(m, body);
            let span = m.ops[kernel].span;
            let diags: Diagnostics = plan
                .problems(accesses, elements)
                .into_iter()
                .map(|(_, msg)| Diagnostic::error(span, msg))
                .collect();
            return if diags.is_empty() {
                Ok(Some((Cow::Borrowed(plan), Vec::new())))
            } else {
                Err(diags)
            };
        }
        let mut r = Reader {
            m,
            diags: Vec::new(),
            copies: 0,
            spans: Vec::new(),
            slot_spans: Vec::new(),
        };
        let mut header: Option<(KernelPlan, Span)> = None;
        let mut rejected = false;
        let mut accesses = 0u64;
        let mut elements = None;
        for &op in &m.blocks[body].ops {
            let data = &m.ops[op];
            let OpKind::Plan(kind) = data.kind else {
                if header.is_some() {
                    r.err(
                        data.span,
                        format!(
                            "`{}` after the kernel's `gpsimd.plan`: accesses come first",
                            data.kind.name()
                        ),
                    );
                }
                if header.is_none() {
                    accesses += 1;
                }
                if elements.is_none() {
                    elements = data.operands.first().and_then(|o| o.ap.elements());
                }
                continue;
            };
            let Some((plan, _)) = header.as_mut() else {
                if rejected {
                    // The header was reported; its steps cannot be checked.
                    continue;
                }
                if kind != PlanOp::Header {
                    r.err(
                        data.span,
                        format!(
                            "`{}` before the kernel's `gpsimd.plan` (the plan op comes first)",
                            kind.name()
                        ),
                    );
                    continue;
                }
                match r.header(data) {
                    Some(p) => header = Some((p, data.span)),
                    None => rejected = true,
                }
                continue;
            };
            r.step(plan, kind, data, accesses);
        }
        if let Some((plan, span)) = &header {
            for (at, msg) in plan.problems(accesses, elements.unwrap_or(0)) {
                let s = match at {
                    At::Plan => *span,
                    At::Slot(i) => r.slot_spans[i],
                    At::Step(i) => r.spans[i],
                };
                r.err(s, msg);
            }
        }
        if r.diags.is_empty() {
            Ok(header.map(|(p, _)| (Cow::Owned(p), r.spans)))
        } else {
            Err(r.diags)
        }
    }

    /// Every structural problem of this plan for a kernel of `accesses`
    /// accesses and `elements` iterations, where it is: the accessor list and the reasons beside it,
    /// the depth and the simulator parameters in range; buffers in the
    /// dataram window, owned by an access, disjoint and within the budget;
    /// copies of a known access, tile (each tile holds at least one
    /// iteration), buffer and queue (none for a core copy; one per
    /// direction, the model's in-order ring), inside their buffer and
    /// the 64-bit HBM space, of 1 to 65536 bytes; waits on an SDMA copy
    /// issued before; computes inside the iteration space. The one check
    /// of plans, whether read from text or written by a pass.
    pub fn problems(&self, accesses: u64, elements: u64) -> Vec<(At, String)> {
        let mut out = Vec::new();
        let range =
            |out: &mut Vec<(At, String)>, at, op: &str, key: &str, v: u64, min: u64, max: u64| {
                let ok = (min..=max).contains(&v);
                if !ok {
                    out.push((
                        at,
                        format!("attribute `{key}` of `{op}` must be an integer in [{min}, {max}]"),
                    ));
                }
                ok
            };
        let plan = PlanOp::Header.name();
        range(
            &mut out,
            At::Plan,
            plan,
            "buffers",
            u64::from(self.depth),
            1,
            MAX_DEPTH,
        );
        let mut params = self.params;
        for p in PARAMS {
            range(
                &mut out,
                At::Plan,
                plan,
                p.name,
                *(p.field)(&mut params),
                p.min,
                p.max,
            );
        }
        if accesses == 0 {
            out.push((
                At::Plan,
                "`gpsimd.plan` in a kernel without accesses: there is nothing to stage".to_string(),
            ));
        } else if self.accessors.len() as u64 != accesses {
            let plural = |n: u64, w: &str, suffix: &str| {
                format!("{n} {w}{}", if n == 1 { "" } else { suffix })
            };
            out.push((
                At::Plan,
                format!(
                    "`gpsimd.plan` names {} but the kernel has {}",
                    plural(self.accessors.len() as u64, "accessor", "s"),
                    plural(accesses, "access", "es")
                ),
            ));
        }
        if !self.reasons.is_empty() && self.reasons.len() != self.accessors.len() {
            out.push((
                At::Plan,
                format!(
                    "`gpsimd.plan` gives {} reasons for {} accessors: `reasons` holds one per access, or is left out",
                    self.reasons.len(),
                    self.accessors.len()
                ),
            ));
        }
        let window = u64::from(DATARAM_END - DATARAM_BASE);
        let (lo, hi) = (u64::from(DATARAM_BASE), u64::from(DATARAM_END) - 1);
        let buffer = PlanOp::Buffer.name();
        let mut slots_ok = true;
        for (i, s) in self.slots.iter().enumerate() {
            let at = At::Slot(i);
            let a = range(
                &mut out,
                at,
                buffer,
                "access",
                u64::from(s.access),
                0,
                accesses.saturating_sub(1),
            );
            let d = range(&mut out, at, buffer, "dram", u64::from(s.dram), lo, hi);
            let b = range(&mut out, at, buffer, "bytes", u64::from(s.bytes), 1, window);
            if a && d && b && s.end() > u64::from(DATARAM_END) {
                out.push((at, format!("buffer [{:#x}, {:#x}) runs past the end of the dataram window [{DATARAM_BASE:#x}, {DATARAM_END:#x})", s.dram, s.end())));
                slots_ok = false;
            }
            slots_ok &= a && d && b;
        }
        if slots_ok {
            out.extend(slot_problems(self).into_iter().map(|m| (At::Plan, m)));
        }
        let mut dma: Vec<bool> = Vec::new();
        // The queue of the first SDMA copy of each direction (M2S, S2M),
        // and that copy's number.
        let mut rings: [Option<(u8, usize)>; 2] = [None, None];
        for (i, step) in self.steps.iter().enumerate() {
            let at = At::Step(i);
            match *step {
                Step::Copy(c) => {
                    let op = if c.method == Method::Dma {
                        PlanOp::Sdma.name()
                    } else {
                        PlanOp::Memcpy.name()
                    };
                    dma.push(c.method == Method::Dma);
                    let mut ok = if c.method == Method::Dma {
                        let ring = &mut rings[usize::from(c.dir == Dir::S2m)];
                        match *ring {
                            None => *ring = Some((c.queue, dma.len() - 1)),
                            // What check-coherency proves and the simulator
                            // times holds for one in-order ring per
                            // direction: copies on two queues could
                            // complete out of order.
                            Some((q, first)) if q != c.queue => out.push((at, format!(
                                "`{op}` on queue {} but copy {first} of the same direction ({}) on queue {q}: a kernel's copies of one direction go on one in-order ring, so one queue",
                                c.queue,
                                c.dir.name()
                            ))),
                            Some(_) => {}
                        }
                        range(&mut out, at, op, "queue", u64::from(c.queue), 0, u64::from(QUEUES) - 1)
                    } else if c.queue != 0 {
                        // Text has no queue for a core copy: a typed one
                        // would print as another plan.
                        out.push((at, format!("a core copy (`{op}`) runs on no SDMA queue: its queue must be 0, not {}", c.queue)));
                        false
                    } else {
                        true
                    };
                    ok &= range(&mut out, at, op, "access", u64::from(c.access), 0, accesses.saturating_sub(1));
                    // Each tile holds at least one iteration.
                    ok &= range(&mut out, at, op, "tile", u64::from(c.tile), 0, elements.saturating_sub(1));
                    let slot_ok = range(&mut out, at, op, "slot", u64::from(c.slot), 0, self.slots.len().saturating_sub(1) as u64);
                    ok &= range(&mut out, at, op, "dram", u64::from(c.dram), lo, hi);
                    ok &= range(&mut out, at, op, "bytes", u64::from(c.bytes), 1, u64::from(MAX_DESCRIPTOR_BYTES));
                    if !ok {
                        continue;
                    }
                    let (dram, bytes) = (u64::from(c.dram), u64::from(c.bytes));
                    if self.slots.is_empty() {
                        out.push((at, "a copy needs a `gpsimd.buffer`, and the plan has none".to_string()));
                        continue;
                    }
                    if !slot_ok {
                        continue;
                    }
                    let s = self.slots[c.slot as usize];
                    if dram < u64::from(s.dram) || dram + bytes > s.end() {
                        out.push((at, format!("copy touches dataram [{dram:#x}, {:#x}), outside its buffer {} [{:#x}, {:#x})", dram + bytes, c.slot, s.dram, s.end())));
                        continue;
                    }
                    if c.hbm.checked_add(bytes).is_none() && c.hbm.wrapping_add(bytes) != 0 {
                        out.push((at, format!("copy runs past the end of the 64-bit HBM address space (hbm = {:#x}, bytes = {bytes})", c.hbm)));
                    }
                }
                Step::Wait { copy } => match dma.get(copy as usize) {
                    None => out.push((at, format!("`sdma.wait` on copy {copy}, which is not issued before it"))),
                    Some(false) => out.push((at, format!("`sdma.wait` on copy {copy}, a core copy (`gpsimd.memcpy` completes before the core goes on)"))),
                    Some(true) => {}
                },
                Step::Compute { first, count } => {
                    let op = PlanOp::Compute.name();
                    let f = range(&mut out, at, op, "first", first, 0, elements.saturating_sub(1));
                    let c = range(&mut out, at, op, "count", count, 1, elements);
                    if f && c && u128::from(first) + u128::from(count) > u128::from(elements) {
                        out.push((at, format!("`gpsimd.compute` runs iterations [{first}, {}) past the kernel's {elements}", u128::from(first) + u128::from(count))));
                    }
                }
            }
        }
        out
    }

    /// Replaces the plan of kernel `kernel` by this one, held typed in the
    /// module (32 bytes a step; [`KernelPlan::print`] writes it as plan
    /// ops). Plan ops read from text are removed from the kernel's body and
    /// from storage ([`Module::retain_ops`]), so re-planning leaves no op
    /// behind.
    pub fn write(self, m: &mut Module, kernel: Op) {
        let Some(OpKind::Kernel { body, .. }) = m.ops.get(kernel).map(|d| d.kind) else {
            return;
        };
        m.retain_ops(Some(body), |_, d| !matches!(d.kind, OpKind::Plan(_)));
        m.plans.insert(kernel, self);
    }

    /// Appends the plan's ops as text, one per line, each after `indent`:
    /// the header, the buffers, then the steps with copies numbered in
    /// issue order. The same text the printer gives plan ops read from it.
    pub fn print(&self, indent: &str, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            "{indent}{} {{policy = \"{}\", buffers = {}, accessors = [",
            PlanOp::Header.name(),
            self.policy.name(),
            self.depth
        );
        for (i, a) in self.accessors.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(out, "{sep}\"{}\"", a.name());
        }
        out.push(']');
        if !self.reasons.is_empty() {
            out.push_str(", reasons = [");
            for (i, r) in self.reasons.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                crate::printer::write_string(out, r);
            }
            out.push(']');
        }
        let defaults = SimParams::default();
        for p in PARAMS {
            let (mut mine, mut def) = (self.params, defaults);
            let v = *(p.field)(&mut mine);
            if v != *(p.field)(&mut def) {
                let _ = write!(out, ", {} = {v}", p.name);
            }
        }
        out.push_str("}\n");
        for (i, s) in self.slots.iter().enumerate() {
            let _ = writeln!(
                out,
                "{indent}{} {{slot = {i}, access = {}, dram = {}, bytes = {}}}",
                PlanOp::Buffer.name(),
                s.access,
                s.dram,
                s.bytes
            );
        }
        let mut id = 0u64;
        for step in &self.steps {
            let _ = match *step {
                Step::Copy(c) => {
                    out.push_str(indent);
                    if c.method == Method::Dma {
                        let _ = write!(
                            out,
                            "{} {{id = {id}, dir = \"{}\", queue = {}",
                            PlanOp::Sdma.name(),
                            c.dir.name(),
                            c.queue
                        );
                    } else {
                        let _ = write!(
                            out,
                            "{} {{id = {id}, method = \"{}\", dir = \"{}\"",
                            PlanOp::Memcpy.name(),
                            method_name(c.method),
                            c.dir.name()
                        );
                    }
                    id += 1;
                    writeln!(
                        out,
                        ", access = {}, tile = {}, slot = {}, hbm = {}, dram = {}, bytes = {}}}",
                        c.access, c.tile, c.slot, c.hbm, c.dram, c.bytes
                    )
                }
                Step::Wait { copy } => {
                    writeln!(out, "{indent}{} {{copy = {copy}}}", PlanOp::Wait.name())
                }
                Step::Compute { first, count } => writeln!(
                    out,
                    "{indent}{} {{first = {first}, count = {count}}}",
                    PlanOp::Compute.name()
                ),
            };
        }
    }
}

/// A plan read back with the location of each step's op (empty when the
/// plan is held typed: every step is at its kernel).
pub(crate) type PlanWithSpans<'m> = (Cow<'m, KernelPlan>, Vec<Span>);

/// Where a plan problem is: the plan as a whole (its header), a buffer, or
/// a step, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The `gpsimd.plan` header or the plan as a whole.
    Plan,
    /// Buffer (slot) `i`.
    Slot(usize),
    /// Step `i` (in issue order).
    Step(usize),
}

/// The accesses and iterations of the kernel whose body is `body`.
fn kernel_shape(m: &Module, body: crate::module::Block) -> (u64, u64) {
    let mut accesses = 0u64;
    let mut elements = None;
    for &op in &m.blocks[body].ops {
        let d = &m.ops[op];
        if matches!(d.kind, OpKind::Read | OpKind::Write) {
            accesses += 1;
            if elements.is_none() {
                elements = d.operands.first().and_then(|o| o.ap.elements());
            }
        }
    }
    (accesses, elements.unwrap_or(0))
}

/// Buffers that overlap, and buffers over the budget.
fn slot_problems(plan: &KernelPlan) -> Vec<String> {
    let mut out = Vec::new();
    let mut order: Vec<usize> = (0..plan.slots.len()).collect();
    order.sort_by_key(|&i| plan.slots[i].dram);
    for w in order.windows(2) {
        let (a, b) = (plan.slots[w[0]], plan.slots[w[1]]);
        if a.end() > u64::from(b.dram) {
            out.push(format!(
                "buffers {} [{:#x}, {:#x}) and {} [{:#x}, {:#x}) overlap",
                w[0],
                a.dram,
                a.end(),
                w[1],
                b.dram,
                b.end()
            ));
        }
    }
    let total: u64 = plan.slots.iter().map(|s| u64::from(s.bytes)).sum();
    if total > plan.params.budget {
        out.push(format!(
            "the plan's buffers take {total} bytes of dataram, over the staging budget of {} bytes",
            plan.params.budget
        ));
    }
    out
}

struct Reader<'m> {
    m: &'m Module,
    diags: Diagnostics,
    /// Copies read so far.
    copies: u64,
    /// The location of each step read so far.
    spans: Vec<Span>,
    /// The location of each buffer read so far.
    slot_spans: Vec<Span>,
}

impl Reader<'_> {
    fn err(&mut self, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(span, msg));
    }

    /// Checks that `data` has the required attributes of its row of the
    /// op-definition table and no attribute the row does not list.
    fn keys(&mut self, data: &OpData, kind: PlanOp) -> bool {
        let m = self.m;
        let known = kind.attrs();
        let mut ok = true;
        for k in data.attrs.keys() {
            let k = m.str(*k);
            if !known.iter().any(|a| a.name == k) {
                let all: Vec<&str> = known.iter().map(|a| a.name).collect();
                let hint = crate::diag::did_you_mean(k, all.iter().copied())
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                self.err(
                    data.span,
                    format!(
                        "`{}` has no attribute `{k}` (its attributes are {}){hint}",
                        kind.name(),
                        all.join(", ")
                    ),
                );
                ok = false;
            }
        }
        for a in known.iter().filter(|a| a.required) {
            if !data.attrs.keys().any(|s| m.str(*s) == a.name) {
                self.err(
                    data.span,
                    format!("`{}` is missing its `{}` attribute", kind.name(), a.name),
                );
                ok = false;
            }
        }
        ok
    }

    /// An integer attribute in `[min, max]`: the bounds that depend on
    /// nothing else (a field's type, the dataram window, the table
    /// bounds); those that depend on the kernel or the plan are
    /// [`KernelPlan::problems`]'s.
    fn int(&mut self, data: &OpData, key: &str, min: u64, max: u64) -> Option<u64> {
        let v = int_attr(self.m, &data.attrs, key);
        match v.and_then(|v| u64::try_from(v).ok()) {
            Some(v) if (min..=max).contains(&v) => Some(v),
            _ => {
                self.err(
                    data.span,
                    format!(
                        "attribute `{key}` of `{}` must be an integer in [{min}, {max}]",
                        data.kind.name()
                    ),
                );
                None
            }
        }
    }

    /// An integer attribute of plan op `kind` within the bounds of its row
    /// of the op-definition table.
    fn uint(&mut self, data: &OpData, kind: PlanOp, key: &str) -> Option<u64> {
        let (min, max) = match kind.def().attr(key).map(|a| a.kind) {
            Some(ValueKind::Int { min, max }) => (
                u64::try_from(min).unwrap_or(0),
                u64::try_from(max).unwrap_or(u64::MAX),
            ),
            _ => (0, u64::MAX),
        };
        self.int(data, key, min, max)
    }

    /// A string attribute of plan op `kind` among the words its row of the
    /// op-definition table allows, decoded by `f`.
    fn word<T>(
        &mut self,
        data: &OpData,
        kind: PlanOp,
        key: &str,
        f: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let allowed = match kind.def().attr(key).map(|a| a.kind) {
            Some(ValueKind::Enum(words)) => words,
            _ => &[],
        };
        let got = str_attr(self.m, &data.attrs, key).and_then(&f);
        if got.is_none() {
            let q: Vec<String> = allowed.iter().map(|v| format!("\"{v}\"")).collect();
            self.err(
                data.span,
                format!(
                    "attribute `{key}` of `{}` must be one of {}",
                    data.kind.name(),
                    q.join(", ")
                ),
            );
        }
        got
    }

    fn header(&mut self, data: &OpData) -> Option<KernelPlan> {
        let m = self.m;
        if !self.keys(data, PlanOp::Header) {
            return None;
        }
        let policy = self.word(data, PlanOp::Header, "policy", Policy::from_name);
        let depth = self.uint(data, PlanOp::Header, "buffers");
        let mut accessors = Vec::new();
        let list = data.attrs.iter().find_map(|(k, v)| match v {
            Attr::Array(a) if m.str(*k) == "accessors" => Some(a),
            _ => None,
        });
        let mut ok = true;
        match list {
            Some(items) => {
                for it in items {
                    match it {
                        Attr::Str(s) => match Accessor::from_name(m.str(*s)) {
                            Some(a) => accessors.push(a),
                            None => ok = false,
                        },
                        _ => ok = false,
                    }
                }
            }
            None => ok = false,
        }
        if !ok {
            let words = match PlanOp::Header.def().attr("accessors").map(|a| a.kind) {
                Some(ValueKind::List(ValueKind::Enum(words))) => *words,
                _ => &[],
            };
            let q: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
            let listed = match q.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => q.join(""),
            };
            self.err(
                data.span,
                format!(
                    "attribute `accessors` of `{}` must be an array of {listed}, one per access",
                    PlanOp::Header.name()
                ),
            );
        }
        let mut reasons = Vec::new();
        if let Some(v) = data
            .attrs
            .iter()
            .find_map(|(k, v)| (m.str(*k) == "reasons").then_some(v))
        {
            match v {
                Attr::Array(items)
                    if items.len() == accessors.len()
                        && items.iter().all(|it| matches!(it, Attr::Str(_))) =>
                {
                    reasons = items
                        .iter()
                        .filter_map(|it| match it {
                            Attr::Str(s) => Some(m.str(*s).to_string()),
                            _ => None,
                        })
                        .collect();
                }
                _ => {
                    self.err(
                        data.span,
                        format!(
                            "attribute `reasons` of `{}` must be an array of strings, one per access",
                            PlanOp::Header.name()
                        ),
                    );
                    ok = false;
                }
            }
        }
        let mut params = SimParams::default();
        for p in PARAMS {
            if data.attrs.keys().any(|k| m.str(*k) == p.name) {
                match self.uint(data, PlanOp::Header, p.name) {
                    Some(v) => *(p.field)(&mut params) = v,
                    None => ok = false,
                }
            }
        }
        Some(KernelPlan {
            policy: policy?,
            depth: u32::try_from(depth?).ok()?,
            accessors,
            params,
            reasons,
            slots: Vec::new(),
            steps: Vec::new(),
        })
        .filter(|_| ok)
    }

    /// Decodes one plan op after the header into `plan`. The access and
    /// buffer of a copy are range-checked here too, so that every bad
    /// attribute of the op is reported at once; the checks that need the
    /// whole plan or the kernel are [`KernelPlan::problems`]'s.
    fn step(&mut self, plan: &mut KernelPlan, kind: PlanOp, data: &OpData, accesses: u64) {
        if !self.keys(data, kind) {
            return;
        }
        match kind {
            PlanOp::Header => self.err(data.span, format!("a kernel has one `{}`", kind.name())),
            PlanOp::Buffer => {
                if !plan.steps.is_empty() {
                    self.err(
                        data.span,
                        "`gpsimd.buffer` after the plan's first step: buffers come first",
                    );
                }
                let slot = self.uint(data, kind, "slot");
                let access = self.uint(data, kind, "access");
                let dram = self.uint(data, kind, "dram");
                let bytes = self.uint(data, kind, "bytes");
                let (Some(slot), Some(access), Some(dram), Some(bytes)) =
                    (slot, access, dram, bytes)
                else {
                    return;
                };
                if slot != plan.slots.len() as u64 {
                    self.err(
                        data.span,
                        format!(
                            "buffer slots are numbered in order: expected slot {}, found {slot}",
                            plan.slots.len()
                        ),
                    );
                    return;
                }
                self.slot_spans.push(data.span);
                plan.slots.push(Slot {
                    access: access as u32,
                    dram: dram as u32,
                    bytes: bytes as u32,
                });
            }
            PlanOp::Sdma | PlanOp::Memcpy => {
                let id = self.uint(data, kind, "id");
                let method = if kind == PlanOp::Sdma {
                    Some(Method::Dma)
                } else {
                    self.word(data, kind, "method", core_method)
                };
                let dir = self.word(data, kind, "dir", Dir::from_name);
                let queue = if kind == PlanOp::Sdma {
                    self.uint(data, kind, "queue")
                } else {
                    Some(0)
                };
                // The access and the buffer are bounded by the kernel and
                // the plan so far, not only by the table.
                let access = self.int(data, "access", 0, accesses.saturating_sub(1));
                let tile = self.uint(data, kind, "tile");
                let slots = plan.slots.len().saturating_sub(1) as u64;
                let slot = self.int(data, "slot", 0, slots);
                let hbm = self.uint(data, kind, "hbm");
                let dram = self.uint(data, kind, "dram");
                let bytes = self.uint(data, kind, "bytes");
                let (
                    Some(id),
                    Some(method),
                    Some(dir),
                    Some(queue),
                    Some(access),
                    Some(tile),
                    Some(slot),
                    Some(hbm),
                    Some(dram),
                    Some(bytes),
                ) = (id, method, dir, queue, access, tile, slot, hbm, dram, bytes)
                else {
                    return;
                };
                if id != self.copies {
                    self.err(
                        data.span,
                        format!(
                            "copies are numbered in issue order: expected id {}, found {id}",
                            self.copies
                        ),
                    );
                    return;
                }
                self.copies += 1;
                self.spans.push(data.span);
                plan.steps.push(Step::Copy(Copy {
                    dir,
                    method,
                    queue: queue as u8,
                    access: access as u32,
                    tile: tile as u32,
                    slot: slot as u32,
                    hbm,
                    dram: dram as u32,
                    bytes: bytes as u32,
                }));
            }
            PlanOp::Wait => {
                let Some(copy) = self.uint(data, kind, "copy") else {
                    return;
                };
                self.spans.push(data.span);
                plan.steps.push(Step::Wait { copy: copy as u32 });
            }
            PlanOp::Compute => {
                let first = self.uint(data, kind, "first");
                let count = self.uint(data, kind, "count");
                let (Some(first), Some(count)) = (first, count) else {
                    return;
                };
                self.spans.push(data.span);
                plan.steps.push(Step::Compute { first, count });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every attribute the plan printer writes is one its op's row of
    /// the op-definition table lists, so that the reader accepts it.
    #[test]
    fn printed_plans_use_the_table_attributes() {
        let plan = KernelPlan {
            policy: Policy::Pipelined,
            depth: 2,
            accessors: vec![Accessor::Stream],
            params: SimParams {
                budget: 4096,
                ..SimParams::default()
            },
            reasons: vec!["r".to_string()],
            slots: vec![Slot {
                access: 0,
                dram: 0x80000,
                bytes: 4096,
            }],
            steps: vec![
                Step::Copy(Copy {
                    dir: Dir::M2s,
                    method: Method::Dma,
                    queue: 0,
                    access: 0,
                    tile: 0,
                    slot: 0,
                    hbm: 0,
                    dram: 0x80000,
                    bytes: 16,
                }),
                Step::Copy(Copy {
                    dir: Dir::S2m,
                    method: Method::VecMemcpy,
                    queue: 0,
                    access: 0,
                    tile: 0,
                    slot: 0,
                    hbm: 0,
                    dram: 0x80000,
                    bytes: 16,
                }),
                Step::Wait { copy: 0 },
                Step::Compute { first: 0, count: 1 },
            ],
        };
        let mut text = String::new();
        plan.print("", &mut text);
        let mut seen = 0;
        for line in text.lines() {
            let (name, rest) = line.split_once(" {").unwrap();
            let kind = PlanOp::from_name(name).unwrap();
            seen |= 1 << kind as u32;
            for attr in rest.split(", ").filter_map(|a| a.split_once(" = ")) {
                let key = attr.0;
                if key.contains('"') {
                    continue; // inside an array of strings
                }
                assert!(kind.def().attr(key).is_some(), "{name} {key}");
            }
        }
        assert_eq!(seen, (1 << PlanOp::ALL.len()) - 1, "{text}");
    }

    #[test]
    fn kernel_attributes_default_from_the_table() {
        let text = "module attributes {arch = \"v2\"} {\n  %t = mem.hbm {addr = 0} : tensor<8xf32>\n  gpsimd.kernel @a {\n    gpsimd.read %t[[1, 8]]\n  }\n  gpsimd.kernel @b {core = 3, cycles_per_element = 7} {\n    gpsimd.write %t[[1, 8]] {accessor = \"tcm\"}\n  }\n}\n";
        let (m, _) = crate::parse_str("k.apir", text, crate::ParseOptions::default()).unwrap();
        let k = Kernel::all(&m);
        assert_eq!((k[0].core, k[0].cycles_per_element), (0, 1));
        assert_eq!((k[1].core, k[1].cycles_per_element), (3, 7));
        assert_eq!(k[0].accesses[0].hint, None);
        assert_eq!(k[1].accesses[0].hint, Some(Accessor::Tcm));
        assert_eq!((k[0].elements, k[1].accesses[0].write), (8, true));
    }
}
