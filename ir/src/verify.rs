//! The verifier. It runs after parsing and after every pass, and reports
//! every problem it finds, each at its source location.
//!
//! Invariants checked:
//! - buffers fit their memory on the module's arch: start partition plus
//!   partitions within 128, start byte plus the partition slice within the
//!   arch's bytes per partition, start byte aligned to the dtype, HBM ranges
//!   inside the 64-bit address space;
//! - every ISA op exists on the module's arch; it has every role of its
//!   op-encoder table row, no unknown role and no role twice;
//! - each operand's memory is allowed for its role (SBUF/PSUM), and its dtype
//!   satisfies the role's rule (integer gather indices);
//! - interpreted attributes have an allowed type and value;
//! - every access pattern has at least one dim and no `num` of 0; for on-chip
//!   buffers the partition step is not negative and equals the partition free
//!   size unless only one partition is walked; every visited element lies
//!   inside its buffer, and the free dims never leave the partition;
//! - lowered forms (`fold<...>`, `slots<...>`, `kind<...>`, `wire<...>`)
//!   equal what the lowering math in [`crate::lowering`] derives from the
//!   logical access pattern and the op-encoder table;
//! - `gpsimd.read`/`write` address HBM and carry no lowered forms, and all accesses of one kernel have the
//!   same element count (one shared iteration space);
//! - a kernel's staging plan, if it has one, is well formed
//!   ([`crate::staging::KernelPlan::read`]: plan ops after the accesses,
//!   every attribute present and in range, buffers inside the dataram window
//!   and the staging budget and disjoint, copies inside their buffer, waits on
//!   SDMA copies already issued, computes inside the iteration space).

use crate::diag::{Diagnostic, Diagnostics};
use crate::module::{
    AccessPattern, Attr, BufferData, LoweredForm, Module, OpData, OpKind, Operand,
};
use crate::target::encoders::{short_eq, AttrInfo, AttrKind, ACCESS_ATTRS, KERNEL_ATTRS};
use crate::target::MemorySet;
use crate::{Op, Span};

/// Verifies `m`; returns every problem found.
pub fn verify(m: &Module) -> Result<(), Diagnostics> {
    // Nothing below may index an arena before the structure is known sound.
    let structural = structure(m);
    if !structural.is_empty() {
        return Err(structural);
    }
    let mut v = Verifier {
        m,
        diags: Vec::new(),
    };
    for (_, b) in m.buffers.iter() {
        v.buffer(b);
    }
    for op in m.walk_ops() {
        v.op(op);
    }
    v.finish()
}

/// The structural rules every module obeys, checked before anything else
/// (a module built through the API can break them; the parser never
/// produces one that does): every id in range and every symbol from this
/// module's interner; every op exactly once in the program; ISA ops,
/// `isa.custom` and kernels at the top level, accesses and plan ops only
/// inside a kernel, no kernel inside another; each buffer declared once by
/// name and before its first use; typed plans only on kernels. Each problem names the op (`op #N`) or buffer it concerns.
pub fn structure(m: &Module) -> Diagnostics {
    use crate::module::Item;
    let mut out = Diagnostics::new();
    let mut err = |span: Span, msg: String| out.push(Diagnostic::error(span, msg));
    let sym_ok = |s: crate::Symbol| m.symbols.contains(s);
    let name_of = |op: Op| -> &'static str { m.ops[op].kind.name() };
    // Buffers: names from this module, unique.
    let mut names: rustc_hash::FxHashMap<crate::Symbol, crate::Buffer> = Default::default();
    for (b, d) in m.buffers.iter() {
        if !sym_ok(d.name) {
            err(
                d.span,
                format!(
                    "buffer #{} has a name symbol from another module",
                    b.as_u32()
                ),
            );
        } else if let Some(prev) = names.insert(d.name, b) {
            err(
                d.span,
                format!(
                    "buffer `%{}` is declared twice (buffers #{} and #{})",
                    m.str(d.name),
                    prev.as_u32(),
                    b.as_u32()
                ),
            );
        }
    }
    // Program order: each id in range, each op once, placement.
    let mut seen = vec![false; m.ops.len()];
    let mut declared = vec![false; m.buffers.len()];
    let mut listed = vec![false; m.buffers.len()];
    // (op, inside a kernel)
    let mut stack: Vec<(Op, bool)> = Vec::new();
    for item in &m.body {
        match *item {
            Item::Buffer(b) => {
                if b.as_u32() as usize >= m.buffers.len() {
                    err(
                        m.span,
                        format!(
                            "the program lists buffer #{}, which does not exist",
                            b.as_u32()
                        ),
                    );
                } else if std::mem::replace(&mut listed[b.as_u32() as usize], true) {
                    err(
                        m.buffers[b].span,
                        format!(
                            "buffer `%{}` is listed twice in the program",
                            m.str(m.buffers[b].name)
                        ),
                    );
                } else {
                    declared[b.as_u32() as usize] = true;
                }
            }
            Item::Op(op) => stack.push((op, false)),
        }
        while let Some((op, inner)) = stack.pop() {
            if op.as_u32() as usize >= m.ops.len() {
                err(
                    m.span,
                    format!(
                        "the program lists op #{}, which does not exist",
                        op.as_u32()
                    ),
                );
                continue;
            }
            let d = &m.ops[op];
            let id = op.as_u32();
            if std::mem::replace(&mut seen[id as usize], true) {
                err(
                    d.span,
                    format!(
                        "op #{id} (`{}`) is listed twice in the program",
                        name_of(op)
                    ),
                );
                continue;
            }
            let allowed = match d.kind {
                OpKind::Isa(_) | OpKind::Custom => !inner,
                OpKind::Kernel { .. } => !inner,
                OpKind::Read | OpKind::Write | OpKind::Plan(_) => inner,
            };
            if !allowed {
                let msg = if inner {
                    format!("op #{id} (`{}`) is inside a `gpsimd.kernel`, where only `gpsimd.read`, `gpsimd.write` and staging-plan ops may appear", name_of(op))
                } else {
                    format!("op #{id} (`{}`) is at the top level, but may only appear inside a `gpsimd.kernel`", name_of(op))
                };
                err(d.span, msg);
            }
            for (k, v) in d.attrs.iter() {
                let bad = !sym_ok(*k) || matches!(v, crate::Attr::Str(s) if !sym_ok(*s));
                if bad {
                    err(
                        d.span,
                        format!(
                            "op #{id} (`{}`) has an attribute symbol from another module",
                            name_of(op)
                        ),
                    );
                }
            }
            for (i, o) in d.operands.iter().enumerate() {
                if !sym_ok(o.role) || o.struct_name.is_some_and(|s| !sym_ok(s)) {
                    err(d.span, format!("operand {i} of op #{id} (`{}`) has a role or struct symbol from another module", name_of(op)));
                }
                let b = o.buffer.as_u32() as usize;
                if b >= m.buffers.len() {
                    err(
                        o.span,
                        format!(
                            "operand {i} of op #{id} (`{}`) uses buffer #{b}, which does not exist",
                            name_of(op)
                        ),
                    );
                } else if !declared[b] {
                    err(o.span, format!("operand {i} of op #{id} (`{}`) uses buffer `%{}` before its declaration", name_of(op), m.str(m.buffers[o.buffer].name)));
                }
            }
            if let OpKind::Kernel { name, body } = d.kind {
                if !sym_ok(name) {
                    err(
                        d.span,
                        format!("op #{id} (`gpsimd.kernel`) has a name symbol from another module"),
                    );
                }
                if body.as_u32() as usize >= m.blocks.len() {
                    err(
                        d.span,
                        format!(
                            "op #{id} (`gpsimd.kernel`) has body block #{}, which does not exist",
                            body.as_u32()
                        ),
                    );
                } else {
                    for &inner_op in m.blocks[body].ops.iter().rev() {
                        stack.push((inner_op, true));
                    }
                }
            }
        }
    }
    for kernel in m.plans.keys() {
        let ok = (kernel.as_u32() as usize) < m.ops.len()
            && matches!(m.ops[*kernel].kind, OpKind::Kernel { .. });
        if !ok {
            err(
                m.span,
                format!(
                    "a staging plan is attached to op #{}, which is not a `gpsimd.kernel`",
                    kernel.as_u32()
                ),
            );
        }
    }
    out
}

/// Verifies one buffer declaration (for drivers that verify item by item).
pub fn verify_buffer(m: &Module, b: crate::Buffer) -> Result<(), Diagnostics> {
    let mut v = Verifier {
        m,
        diags: Vec::new(),
    };
    v.buffer(&m.buffers[b]);
    v.finish()
}

/// Verifies top-level ops and their regions (for drivers that verify item by
/// item); the buffers they use are assumed verified.
pub fn verify_ops(m: &Module, ops: impl IntoIterator<Item = Op>) -> Result<(), Diagnostics> {
    let mut v = Verifier {
        m,
        diags: Vec::new(),
    };
    for op in ops {
        m.visit_op(op, &mut |o| v.op(o));
    }
    v.finish()
}

/// Re-verifies only the lowered forms of `ops` and their regions: each
/// operand's `fold`, `slots`, `kind` and `wire` must equal what the lowering
/// math derives from its (already verified) access pattern. The pass manager
/// runs this instead of [`verify_ops`] after a pass that promises to change
/// nothing but lowered forms ([`crate::Pass::preserves_logical_ir`]).
pub fn verify_lowered(m: &Module, ops: impl IntoIterator<Item = Op>) -> Result<(), Diagnostics> {
    verify_forms(m, ops, Forms::ALL)
}

/// Re-verifies one lowered form of `ops` and their regions: where an
/// operand carries `form`, it must equal what the lowering math derives
/// from the access pattern (and, for `wire`, from the other forms). The
/// pass manager runs this after a pass that attaches only that form
/// ([`crate::Pass::attaches`]).
pub fn verify_lowered_form(
    m: &Module,
    ops: impl IntoIterator<Item = Op>,
    form: LoweredForm,
) -> Result<(), Diagnostics> {
    verify_forms(m, ops, Forms::only(form))
}

fn verify_forms(
    m: &Module,
    ops: impl IntoIterator<Item = Op>,
    forms: Forms,
) -> Result<(), Diagnostics> {
    let mut v = Verifier {
        m,
        diags: Vec::new(),
    };
    for op in ops {
        m.visit_op(op, &mut |o| {
            if matches!(m.ops[o].kind, OpKind::Isa(_) | OpKind::Custom) {
                for idx in 0..m.ops[o].operands.len() {
                    let from = v.diags.len();
                    v.lowered(o, idx, forms);
                    v.about(from, o, Some(m.ops[o].operands[idx].role));
                }
            }
        });
    }
    v.finish()
}

/// A set of lowered forms to check.
#[derive(Clone, Copy)]
struct Forms(u8);

impl Forms {
    const ALL: Forms = Forms(0b1111);

    fn only(form: LoweredForm) -> Forms {
        Forms(1 << form as u8)
    }

    fn has(self, form: LoweredForm) -> bool {
        self.0 & (1 << form as u8) != 0
    }
}

struct Verifier<'a> {
    m: &'a Module,
    diags: Diagnostics,
}

/// The lowest and highest flat element an access pattern visits, relative to
/// its offset, over `dims`. `None` on overflow.
pub fn extent(dims: &[crate::Dim]) -> Option<(i128, i128)> {
    let mut lo = 0i128;
    let mut hi = 0i128;
    for d in dims {
        // |step| <= 2^63 and num - 1 < 2^64: the product fits i128 (< 2^127),
        // so only the sums need checking (and no 128-bit multiply libcall).
        let reach = i128::from(d.step) * i128::from(d.num.checked_sub(1)?);
        if reach < 0 {
            lo = lo.checked_add(reach)?;
        } else {
            hi = hi.checked_add(reach)?;
        }
    }
    Some((lo, hi))
}

impl Verifier<'_> {
    fn finish(self) -> Result<(), Diagnostics> {
        if self.diags.is_empty() {
            Ok(())
        } else {
            Err(self.diags)
        }
    }

    fn err(&mut self, span: Span, msg: String) {
        self.diags.push(Diagnostic::error(span, msg));
    }

    /// Marks the diagnostics from `from` on as being about `op` (and the
    /// operand with `role`), unless they already name a subject.
    fn about(&mut self, from: usize, op: Op, role: Option<crate::Symbol>) {
        if from >= self.diags.len() {
            return;
        }
        let name = self.m.ops[op].kind.name();
        let role = role.map(|r| self.m.str(r));
        for d in &mut self.diags[from..] {
            d.set_subject(op, name, role);
        }
    }

    fn buffer(&mut self, b: &BufferData) {
        let m = self.m;
        let name = m.str(b.name);
        let arch = m.arch;
        if b.shape.is_empty() || b.shape.contains(&0) {
            self.err(
                b.span,
                format!("buffer `%{name}` needs a shape of dimensions that are all at least 1"),
            );
            return;
        }
        let Some(bytes) = b.bytes_per_partition() else {
            self.err(
                b.span,
                format!("buffer `%{name}` is too large: its size overflows 64 bits"),
            );
            return;
        };
        if b.mem.is_on_chip() {
            let total = arch.partitions(b.mem);
            let parts = b.partitions();
            if u64::from(b.partition) + parts > u64::from(total) {
                self.err(b.span, format!(
                    "buffer `%{name}` does not fit {}: partitions {}..{} exceed the {total} partitions",
                    b.mem, b.partition, u64::from(b.partition) + parts
                ));
            }
            let limit = arch.bytes_per_partition(b.mem);
            if b.base.checked_add(bytes).is_none_or(|e| e > limit) {
                self.err(b.span, format!(
                    "buffer `%{name}` does not fit {} on {arch}: bytes {:#x}..{:#x} of each partition exceed its {limit:#x} bytes",
                    b.mem, b.base, u128::from(b.base) + u128::from(bytes)
                ));
            }
            let esize = u64::from(b.dtype.bytes());
            if !b.base.is_multiple_of(esize) {
                self.err(b.span, format!(
                    "buffer `%{name}` starts at byte {:#x}, which is not a multiple of the {} size ({esize} bytes)",
                    b.base, b.dtype
                ));
            }
        } else if u128::from(b.base) + u128::from(bytes) > 1u128 << 64 {
            self.err(b.span, format!(
                "buffer `%{name}` at {:#x} with {bytes} bytes runs past the end of the 64-bit address space",
                b.base
            ));
        }
    }

    fn op(&mut self, op: Op) {
        let from = self.diags.len();
        self.op_rules(op);
        self.about(from, op, None);
    }

    fn op_rules(&mut self, op: Op) {
        let m = self.m;
        let data = &m.ops[op];
        match data.kind {
            OpKind::Isa(isa) => {
                let info = isa.info();
                if info.encoder(m.arch).is_none() {
                    let archs: Vec<_> = info.archs().map(|a| a.name()).collect();
                    self.err(
                        data.span,
                        format!(
                            "`{}` is not available on {} (it exists on {})",
                            info.name,
                            m.arch,
                            archs.join(", ")
                        ),
                    );
                }
                self.roles(op);
                for (idx, o) in data.operands.iter().enumerate() {
                    let from = self.diags.len();
                    if let Some((_, role)) = isa.role_of(o.role) {
                        self.memory(o, role.mems, info.name);
                        let dt = m.buffers[o.buffer].dtype;
                        if !role.dtype.allows(dt) {
                            self.err(
                                o.span,
                                format!(
                                "operand `{}` of `{}` needs an integer element type, found {dt}",
                                role.name, info.name
                            ),
                            );
                        }
                    }
                    self.ap(o);
                    self.lowered(op, idx, Forms::ALL);
                    self.about(from, op, Some(o.role));
                }
                self.attrs(data, info.attrs, info.name);
            }
            OpKind::Custom => {
                self.roles(op);
                for (idx, o) in data.operands.iter().enumerate() {
                    let from = self.diags.len();
                    self.memory(o, MemorySet::SP, "isa.custom");
                    self.ap(o);
                    self.lowered(op, idx, Forms::ALL);
                    self.about(from, op, Some(o.role));
                }
            }
            OpKind::Kernel { body, .. } => {
                self.attrs(data, KERNEL_ATTRS, "gpsimd.kernel");
                let mut first: Option<(u64, Span)> = None;
                for &inner in &m.blocks[body].ops {
                    for o in &m.ops[inner].operands {
                        let Some(n) = o.ap.elements() else {
                            self.err(
                                o.span,
                                "access visits more than 2^64 - 1 elements (the product of its counts overflows)"
                                    .to_string(),
                            );
                            continue;
                        };
                        match first {
                            None => first = Some((n, o.span)),
                            Some((n0, s0)) if n0 != n => {
                                self.diags.push(
                                    Diagnostic::error(o.span, format!(
                                        "access visits {n} elements but the kernel's iteration space has {n0} (every access of a kernel visits the same number of elements)"
                                    ))
                                    .with_note("the first access sets the iteration space", s0),
                                );
                            }
                            Some(_) => {}
                        }
                    }
                }
                if let Err(d) = crate::staging::KernelPlan::read(m, op) {
                    self.diags.extend(d);
                }
            }
            // Checked with their kernel, as one plan.
            OpKind::Plan(_) => {}
            OpKind::Read | OpKind::Write => {
                self.attrs(data, ACCESS_ATTRS, data.kind.name());
                for o in &data.operands {
                    self.memory(o, MemorySet::HBM, data.kind.name());
                    self.ap(o);
                    if o.lowered().is_some() {
                        self.err(o.span, format!(
                            "`{}` accesses carry no lowered forms (fold, slots, kind and wire belong to ISA operands)",
                            data.kind.name()
                        ));
                    }
                }
            }
        }
    }

    fn roles(&mut self, op: Op) {
        let m = self.m;
        let data = &m.ops[op];
        let isa = match data.kind {
            OpKind::Isa(isa) => Some(isa),
            _ => None,
        };
        let name = data.kind.name();
        // The table roles seen, as a bit set; roles an unknown role is a
        // likely misspelling of (their "missing" error would repeat it).
        let mut seen = 0u64;
        let mut meant = 0u64;
        for (i, o) in data.operands.iter().enumerate() {
            let role = m.str(o.role);
            if let Some(prev) = data.operands[..i].iter().find(|p| p.role == o.role) {
                self.diags.push(
                    Diagnostic::error(o.span, format!("role `{role}` is given twice"))
                        .with_note("first given here", prev.span),
                );
            }
            let Some(isa) = isa else { continue };
            match isa.role_of(o.role) {
                Some((k, _)) => seen |= 1 << k,
                None => {
                    let roles = isa.info().roles;
                    let known: Vec<_> = roles.iter().map(|r| r.name).collect();
                    let mut d = Diagnostic::error(
                        o.span,
                        format!(
                            "`{name}` has no role `{role}` (its roles are {})",
                            known.join(", ")
                        ),
                    );
                    if let Some(c) = crate::diag::did_you_mean(role, known.iter().copied()) {
                        d = d.with_note(format!("did you mean `{c}`?"), None);
                        if let Some(k) = roles.iter().position(|r| r.name == c) {
                            meant |= 1 << k;
                        }
                    }
                    self.diags.push(d);
                }
            }
        }
        if let Some(isa) = isa {
            for (i, r) in isa.info().roles.iter().enumerate() {
                if seen & (1 << i) == 0 && meant & (1 << i) == 0 {
                    self.err(
                        data.span,
                        format!("`{name}` is missing its `{}` operand", r.name),
                    );
                }
            }
        }
    }

    fn memory(&mut self, o: &Operand, allowed: MemorySet, opname: &str) {
        let mem = self.m.buffers[o.buffer].mem;
        if !allowed.contains(mem) {
            let role = self.m.str(o.role);
            let what = if matches!(opname, "gpsimd.read" | "gpsimd.write") {
                format!(
                    "`{opname}` must address HBM, but `%{}` is in {mem}",
                    self.m.str(self.m.buffers[o.buffer].name)
                )
            } else {
                format!(
                    "operand `{role}` of `{opname}` may address {allowed}, but `%{}` is in {mem}",
                    self.m.str(self.m.buffers[o.buffer].name)
                )
            };
            self.err(o.span, what);
        }
    }

    fn ap(&mut self, o: &Operand) {
        let m = self.m;
        let b = &m.buffers[o.buffer];
        // Interned names are looked up here but only formatted on error.
        let bname = m.str(b.name);
        let role = m.str(o.role);
        let ap: &AccessPattern = &o.ap;
        if ap.dims.is_empty() {
            self.err(o.span, format!("operand `{role}` has no dims"));
            return;
        }
        if let Some(i) = ap.dims.iter().position(|d| d.num == 0) {
            self.err(
                o.span,
                format!(
                    "operand `{role}`: dim {i} has num 0 (every dim visits at least one element)"
                ),
            );
            return;
        }
        let (Some(total), Some(f)) = (b.elements(), b.free_elements()) else {
            return; // reported on the buffer
        };
        if total == 0 || f == 0 {
            return; // reported on the buffer
        }
        let on_chip = b.mem.is_on_chip();
        if on_chip {
            let p = ap.dims[0];
            if p.step < 0 {
                self.err(
                    o.span,
                    format!(
                        "operand `{role}`: the partition step {} is negative",
                        p.step
                    ),
                );
                return;
            }
            if p.num > 1 && p.step as u64 != f {
                self.err(o.span, format!(
                    "operand `{role}`: the partition step {} must equal the partition free size {f} of `%{bname}` (partitions are walked contiguously)",
                    p.step
                ));
                return;
            }
        }
        let Some((lo, hi)) = extent(&ap.dims) else {
            self.err(
                o.span,
                format!("operand `{role}`: the access pattern's extent overflows"),
            );
            return;
        };
        let off = i128::from(ap.offset);
        if on_chip && off >= 0 {
            // Checked before the whole-buffer bound: a free walk running off
            // its partition is the more precise message.
            let (flo, fhi) = extent(&ap.dims[1..]).unwrap_or((0, 0));
            // off >= 0 and f > 0: a u64 remainder (an i128 one is a libcall).
            let e = i128::from(ap.offset.unsigned_abs() % f);
            // `e >= 0`: `e + flo` cannot overflow, `e + fhi` can.
            if e + flo < 0 || e.checked_add(fhi).is_none_or(|h| h >= i128::from(f)) {
                self.err(o.span, format!(
                    "operand `{role}` leaves its partition: starting at element {e} of a partition, the free dims reach elements {}..={} of 0..{f}",
                    e + flo, e.saturating_add(fhi)
                ));
                return;
            }
        }
        // `lo` may be as low as i128::MIN: the sums are checked too.
        let (Some(first), Some(last)) = (off.checked_add(lo), off.checked_add(hi)) else {
            self.err(
                o.span,
                format!("operand `{role}`: the access pattern's extent overflows"),
            );
            return;
        };
        if first < 0 || last >= i128::from(total) {
            self.err(o.span, format!(
                "operand `{role}` leaves buffer `%{bname}`: it visits elements {first}..={last}, the buffer has 0..{total}"
            ));
        }
    }

    /// Lowered forms must be exactly what the lowering math derives from the
    /// logical access pattern.
    fn lowered(&mut self, op: Op, idx: usize, forms: Forms) {
        let o = &self.m.ops[op].operands[idx];
        let Some(l) = o.lowered() else { return };
        let role = self.m.str(o.role);
        let fold = l.fold.filter(|_| forms.has(LoweredForm::Fold));
        let slots = l.slots.as_ref().filter(|_| forms.has(LoweredForm::Slots));
        let kind = l.kind.filter(|_| forms.has(LoweredForm::Kind));
        let wire = l.wire.as_ref().filter(|_| forms.has(LoweredForm::Wire));
        if let Some(f) = fold {
            match crate::lowering::fold_of(self.m, o) {
                Ok(Some(want)) if want == f => {}
                Ok(Some(want)) => self.err(o.span, format!(
                    "operand `{role}`: fold<partition = {}, byte = {:#x}, channels = {}> does not match its access pattern, which folds to fold<partition = {}, byte = {:#x}, channels = {}>",
                    f.partition, f.byte, f.channels, want.partition, want.byte, want.channels
                )),
                Ok(None) => self.err(o.span, format!("operand `{role}`: an HBM operand has no partition axis to fold")),
                Err(e) => self.err(o.span, format!("operand `{role}` carries a fold but its access pattern cannot be folded: {e}")),
            }
        }
        if let Some(slots) = slots {
            let want = crate::lowering::slots_of(self.m, o);
            if *slots != want {
                let show = |d: &[crate::Dim]| {
                    d.iter()
                        .map(|d| format!("[{}, {}]", d.step, d.num))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                self.err(o.span, format!(
                    "operand `{role}`: slots<{}> do not match its access pattern, whose surviving free dims (innermost first) are slots<{}>",
                    show(slots), show(&want)
                ));
            }
        }
        if kind.is_none() && wire.is_none() {
            return;
        }
        let choice = match crate::lowering::role_choice(self.m, op, idx) {
            Ok(c) => c,
            Err(msg) => {
                self.err(
                    o.span,
                    format!("operand `{role}` carries a descriptor kind or bytes: {msg}"),
                );
                return;
            }
        };
        if let Some(kind) = kind {
            if choice.kind != kind {
                self.err(o.span, format!("operand `{role}`: kind<{kind}> is not its role's descriptor, which is {} on {}", choice.kind, self.m.arch));
            }
        }
        if let Some(bytes) = wire {
            match crate::lowering::descriptor_with(self.m, op, idx, &choice) {
                Ok(d) if d.encode() == *bytes => {}
                Ok(d) => {
                    let mut want = String::new();
                    crate::printer::write_hex(&mut want, &d.encode());
                    self.err(o.span, format!("operand `{role}`: its wire bytes do not encode its lowered forms, which encode to \"{want}\""));
                }
                Err(msg) => self.err(
                    o.span,
                    format!("operand `{role}` carries wire bytes but cannot be encoded: {msg}"),
                ),
            }
        }
    }

    /// The interpreted attributes of `data` against `known`: a value of the
    /// wrong type or out of range is an error at the value, with the closest
    /// allowed word when it looks like a misspelling of one.
    fn attrs(&mut self, data: &OpData, known: &[AttrInfo], opname: &str) {
        let m = self.m;
        for (n, (k, v)) in data.attrs.iter().enumerate() {
            let key = m.str(*k);
            let Some(info) = known.iter().find(|a| short_eq(a.name, key)) else {
                continue;
            };
            let ok = match (info.kind, v) {
                (AttrKind::Enum(values), Attr::Str(s)) => values.contains(&m.str(*s)),
                (AttrKind::Int { min, max }, Attr::Int(i)) => {
                    (i128::from(min)..=i128::from(max)).contains(i)
                }
                (AttrKind::Bool, Attr::Bool(_)) => true,
                _ => false,
            };
            if !ok {
                let expected = match info.kind {
                    AttrKind::Enum(values) => {
                        let q: Vec<_> = values.iter().map(|v| format!("\"{v}\"")).collect();
                        format!("one of {}", q.join(", "))
                    }
                    AttrKind::Int { min, max } => format!("an integer in [{min}, {max}]"),
                    AttrKind::Bool => "`true` or `false`".to_string(),
                };
                let mut d = Diagnostic::error(
                    data.attr_span(n),
                    format!("attribute `{key}` of `{opname}` must be {expected}"),
                );
                if let (AttrKind::Enum(values), Attr::Str(s)) = (info.kind, v) {
                    if let Some(c) = crate::diag::did_you_mean(m.str(*s), values.iter().copied()) {
                        d = d.with_note(format!("did you mean \"{c}\"?"), None);
                    }
                }
                self.diags.push(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{Item, OpData};

    const TEXT: &str = "module attributes {arch = \"v2\"} {
  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>
  %y = mem.sbuf {partition = 0, byte = 0x4000} : tile<128x64xf32>
  isa.tensor_copy dst = %y[[64, 128], [1, 64]], src = %x[[64, 128], [1, 64]]
  %h = mem.hbm {addr = 0} : tensor<16xf32>
  gpsimd.kernel @k {
    gpsimd.read %h[[1, 16]]
  }
}
";

    fn parsed() -> (Module, Op, Op, Op) {
        let (m, _) = crate::parse_str("t.apir", TEXT, crate::ParseOptions::default()).unwrap();
        let ops: Vec<Op> = m.walk_ops();
        (m.clone(), ops[0], ops[1], ops[2])
    }

    /// One located diagnostic for each kind of malformed module built
    /// through the API, never a panic; the unmutated module verifies.
    #[test]
    fn malformed_modules_get_one_diagnostic_each() {
        let (m, copy, kernel, read) = parsed();
        assert!(verify(&m).is_ok());
        let OpKind::Kernel { body, .. } = m.ops[kernel].kind else {
            panic!("not a kernel")
        };
        let one = |m: &Module, want: &str| {
            let d = verify(m).expect_err(want);
            assert_eq!(d.len(), 1, "{want}: {d:?}");
            assert!(d[0].message.contains(want), "{}", d[0].message);
        };
        // An ISA op inside a kernel.
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Op(copy));
        x.blocks[body].ops.push(copy);
        one(&x, "op #0 (`isa.tensor_copy`) is inside a `gpsimd.kernel`");
        // A read at the top level (and out of its kernel).
        let mut x = m.clone();
        x.blocks[body].ops.clear();
        x.body.push(Item::Op(read));
        one(&x, "(`gpsimd.read`) is at the top level");
        // A kernel inside a kernel (listed once).
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Op(kernel));
        let outer = x.new_block();
        x.blocks[outer].ops.push(kernel);
        let name = x.ops[kernel].kind;
        let OpKind::Kernel { name, .. } = name else {
            unreachable!()
        };
        let k2 = x.ops.push(OpData {
            kind: OpKind::Kernel { name, body: outer },
            operands: Default::default(),
            attrs: Default::default(),
            attr_spans: None,
            span: Span::default(),
        });
        x.body.push(Item::Op(k2));
        one(&x, "(`gpsimd.kernel`) is inside a `gpsimd.kernel`");
        // One op listed twice.
        let mut x = m.clone();
        x.body.push(Item::Op(copy));
        one(&x, "op #0 (`isa.tensor_copy`) is listed twice");
        // Two buffers with one name.
        let mut x = m.clone();
        let (b0, b1) = (crate::Buffer::from_u32(0), crate::Buffer::from_u32(1));
        x.buffers[b1].name = x.buffers[b0].name;
        one(&x, "buffer `%x` is declared twice");
        // A use before the declaration.
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Buffer(b1));
        x.body.push(Item::Buffer(b1));
        one(
            &x,
            "operand 0 of op #0 (`isa.tensor_copy`) uses buffer `%y` before its declaration",
        );
        // A dangling buffer id, a foreign role symbol, a dangling op id.
        let mut x = m.clone();
        x.ops[copy].operands[1].buffer = crate::Buffer::from_u32(99);
        one(&x, "uses buffer #99, which does not exist");
        let mut x = m.clone();
        x.ops[copy].operands[0].role = crate::Symbol::from_raw(1 << 30);
        one(&x, "has a role or struct symbol from another module");
        let mut x = m.clone();
        x.body.push(Item::Op(Op::from_u32(1000)));
        one(&x, "the program lists op #1000, which does not exist");
    }

    /// A misspelt role gets one error with the role it most likely means
    /// (not also "missing its `src` operand"); a misspelt enum value is
    /// reported at the value, with the closest allowed word.
    #[test]
    fn misspellings_get_suggestions_at_their_place() {
        let text = "module attributes {arch = \"v2\"} {
  %x = mem.sbuf {partition = 0, byte = 0} : tile<4x4xf32>
  isa.tensor_copy dst = %x[[4, 4], [1, 4]], scr = %x[[4, 4], [1, 4]]
  isa.activation dst = %x[[4, 4], [1, 4]], src = %x[[4, 4], [1, 4]], bias = %x[[4, 4], [1, 1]] {func = \"rleu\"}
}
";
        let (m, sm) = crate::parse_str("t.apir", text, crate::ParseOptions::default())
            .unwrap_or_else(|(d, _)| panic!("{d:?}"));
        let diags = verify(&m).unwrap_err();
        assert_eq!(diags.len(), 2, "{diags:?}");
        assert!(diags[0].message.contains("has no role `scr`"));
        assert_eq!(diags[0].notes[0].0, "did you mean `src`?");
        assert!(diags[1].message.contains("attribute `func`"));
        assert_eq!(diags[1].notes[0].0, "did you mean \"relu\"?");
        let at = sm.location(diags[1].span.unwrap());
        assert!(at.ends_with(":4:104"), "{at}");
        // Built in code, the same attribute error points at the op.
        let mut built = m.clone();
        for d in built.ops.values_mut() {
            d.attr_spans = None;
        }
        let diags = verify(&built).unwrap_err();
        assert!(sm.location(diags[1].span.unwrap()).ends_with(":4:3"));
    }
}
