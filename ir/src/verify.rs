//! The verifier. It runs after parsing and after every pass, and reports
//! every problem it finds, each at its source location.
//!
//! Invariants checked:
//! - first, the structural rules of [`structure`] (ids in range, symbols
//!   of this module, each stored op exactly once in the layout, placement,
//!   unique buffer and kernel names, declaration before use); nothing
//!   below runs on a module that breaks one;
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
    MAX_ARRAY_NESTING,
};
use crate::target::encoders::short_eq;
use crate::target::ops::{self, AttrDef, OperandForm, Parent, ValueKind};
use crate::target::MemorySet;
use crate::{Op, Span};

/// Verifies `m`; returns every problem found.
pub fn verify(m: &Module) -> Result<(), Diagnostics> {
    // Nothing below may index an arena before the structure is known sound.
    let structural = structure(m);
    if !structural.is_empty() {
        return Err(structural);
    }
    let mut v = Verifier::new(m);
    for (_, b) in m.buffers.iter() {
        v.buffer(b);
    }
    for op in m.walk_ops() {
        v.op(op);
    }
    v.finish()
}

/// Verifies one batch of a module that is produced a batch at a time (as
/// [`crate::StreamParser`] and the streaming driver do: the body holds the
/// batch's items, and the buffers of earlier batches stay stored, listed
/// again ([`Module::clear_ops`]) or no longer listed
/// ([`Module::clear_batch`])): the structural rules ([`structure`]) with
/// the buffers and kernels earlier batches declared as declared by this
/// one (a buffer stored since, that this batch does not declare, is an
/// error, as is a kernel name or a buffer name an earlier batch defined
/// again), then the buffers the body declares and its ops. Buffers that
/// earlier batches declared and this one does not are taken as verified
/// with them. Its work is that of the batch and of the buffers it declares
/// (plus the module's buffers when they stay listed).
pub fn verify_batch(m: &Module) -> Result<(), Diagnostics> {
    use crate::module::Item;
    let structural = structure_with(m, true);
    if !structural.is_empty() {
        return Err(structural);
    }
    let mut v = Verifier::new(m);
    for item in &m.body {
        if let Item::Buffer(b) = *item {
            v.buffer(&m.buffers[b]);
        }
    }
    for op in m.walk_ops() {
        v.op(op);
    }
    v.finish()
}

/// The structural rules every module obeys, checked before anything else
/// (a module built through the API can break any of them; the parser
/// reports each for text itself):
/// - every id in range: buffers, ops and blocks the layout or an op names
///   are stored (an op id freed by [`Module::remove_op`] is not);
/// - every symbol from this module's interner (names, roles, struct keys,
///   attribute keys and strings, nested ones included);
/// - the layout owns the ops: every stored op is listed exactly once in the
///   program (module body and kernel bodies), and every stored buffer is
///   declared exactly once in the module body;
/// - ISA ops, `isa.custom` and kernels at the top level, accesses and plan
///   ops only inside a kernel, no kernel inside another;
/// - buffer names unique, kernel names unique;
/// - each buffer declared before its first use;
/// - each op's operands of the form its row allows (one access for
///   `gpsimd.read`/`write`, none for kernels and plan ops);
/// - typed plans only on kernels, and never beside plan ops in the body;
/// - every name, role and attribute key spelled as the parser reads it
///   (`%name` and `@name`: letters, digits, `_ . $ -`; roles and keys an
///   identifier), no attribute under a key the printer writes itself
///   (`arch` on the module, a buffer's `partition`, `byte`, `addr`), and a
///   struct key (`as "..."`) on every `isa.custom` operand and on no
///   other, attribute arrays nested at most
///   [`MAX_ARRAY_NESTING`] deep (as the
///   parser reads them): a module that verifies prints to text that parses
///   back.
///
/// Each problem names the op (`op #N`) or buffer it concerns, once (a
/// kernel missing from the program is reported, not each op of its body).
/// Never panics.
pub fn structure(m: &Module) -> Diagnostics {
    structure_with(m, false)
}

/// [`structure`]; `batch`: of a batch ([`verify_batch`]), the buffers and
/// kernels earlier batches declared ([`Module::clear_batch`]) counted as
/// declared before the body, and not checked again.
fn structure_with(m: &Module, batch: bool) -> Diagnostics {
    use crate::module::Item;
    let mut out = Diagnostics::new();
    macro_rules! err {
        ($span:expr, $msg:expr $(,)?) => {
            out.push(Diagnostic::error($span, $msg))
        };
    }
    let sym_ok = |s: crate::Symbol| m.symbols.contains(s);
    let name_of = |op: Op| -> &'static str { m.ops[op].kind.name() };
    // `%name`, or `#N` if the name is not a symbol of this module.
    let buffer_name = |b: crate::Buffer| -> String {
        let name = m.buffers[b].name;
        if sym_ok(name) {
            format!("`%{}`", m.str(name))
        } else {
            format!("#{}", b.as_u32())
        }
    };
    // The module's own symbols.
    if m.name.is_some_and(|s| !sym_ok(s)) {
        err!(
            m.span,
            "the module's name is a symbol from another module".to_string(),
        );
    }
    if let Some(fault) = attrs_fault(m, &m.attrs) {
        err!(
            m.span,
            format!("the module has an attribute {}", fault.words()),
        );
    }
    // Buffers `0..first` were declared by earlier batches, and checked
    // with them.
    let first = if batch { m.earlier_buffers() } else { 0 };
    let earlier = |b: crate::Buffer| (b.as_u32() as usize) < first;
    // Buffers: names and attributes from this module, names unique.
    let mut names: rustc_hash::FxHashMap<crate::Symbol, crate::Buffer> = Default::default();
    for (b, d) in m.buffers_from(first) {
        if !sym_ok(d.name) {
            err!(
                d.span,
                format!(
                    "buffer #{} has a name symbol from another module",
                    b.as_u32()
                ),
            );
            continue;
        }
        if let Some(fault) = attrs_fault(m, &d.attrs) {
            err!(
                d.span,
                format!(
                    "buffer `%{}` has an attribute {}",
                    m.str(d.name),
                    fault.words()
                ),
            );
        }
        // (The names of earlier batches' buffers count while those do.)
        if first > 0 && m.earlier.buffer_names.contains(&d.name) {
            err!(
                d.span,
                format!(
                    "buffer `%{}` (#{}) is declared twice: an earlier batch declared it",
                    m.str(d.name),
                    b.as_u32()
                ),
            );
        } else if let Some(prev) = names.insert(d.name, b) {
            err!(
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
    // Which buffers the module body declares at all: a use of one it does
    // not is reported once, at the buffer.
    // (Indexed from `first`: an earlier batch's buffer counts as listed
    // and declared.)
    let at = |b: crate::Buffer| (b.as_u32() as usize).checked_sub(first);
    let mut listed = vec![false; m.buffers.len() - first];
    for item in &m.body {
        if let Item::Buffer(b) = *item {
            if let Some(l) = at(b).and_then(|i| listed.get_mut(i)) {
                *l = true;
            }
        }
    }
    // Program order: each id in range, each op once, placement.
    let mut seen = vec![false; m.ops.id_bound()];
    let mut declared = vec![false; m.buffers.len() - first];
    let mut kernels: rustc_hash::FxHashMap<crate::Symbol, Op> = Default::default();
    // (op, inside a kernel)
    let mut stack: Vec<(Op, bool)> = Vec::new();
    // Where the diagnostics about the op being checked start.
    let mut pending: Option<(usize, Op)> = None;
    let about = |ds: &mut [Diagnostic], op: Op| {
        if let Some(d) = m.ops.get(op) {
            for x in ds {
                x.set_subject(op, d.kind.name(), None);
            }
        }
    };
    for item in &m.body {
        match *item {
            Item::Buffer(b) => {
                if b.as_u32() as usize >= m.buffers.len() {
                    err!(
                        m.span,
                        format!(
                            "the program lists buffer #{}, which does not exist",
                            b.as_u32()
                        ),
                    );
                } else if earlier(b) {
                    err!(
                        m.buffers[b].span,
                        format!(
                            "buffer {} is declared again: an earlier batch declared it",
                            buffer_name(b)
                        ),
                    );
                } else if std::mem::replace(&mut declared[b.as_u32() as usize - first], true) {
                    err!(
                        m.buffers[b].span,
                        format!("buffer {} is listed twice in the program", buffer_name(b)),
                    );
                }
            }
            Item::Op(op) => stack.push((op, false)),
        }
        while let Some((op, inner)) = stack.pop() {
            // The diagnostics about the previous op are about it.
            if let Some((from, prev)) = pending.replace((out.len(), op)) {
                about(&mut out[from..], prev);
            }
            let id = op.as_u32();
            let Some(d) = m.ops.get(op) else {
                let why = if (id as usize) < m.ops.id_bound() {
                    "which was removed"
                } else {
                    "which does not exist"
                };
                err!(m.span, format!("the program lists op #{id}, {why}"));
                continue;
            };
            if std::mem::replace(&mut seen[id as usize], true) {
                err!(
                    d.span,
                    format!(
                        "op #{id} (`{}`) is listed twice in the program",
                        name_of(op)
                    ),
                );
                continue;
            }
            // Where the op may appear is its row's parent.
            let here = if inner {
                Parent::Kernel
            } else {
                Parent::Module
            };
            if d.kind.code().def().parent != here {
                let kernel = ops::OpCode::Kernel.name();
                let msg = if inner {
                    format!(
                        "op #{id} (`{}`) is inside a `{kernel}`, where only {} may appear",
                        name_of(op),
                        ops::kernel_body_text()
                    )
                } else {
                    format!("op #{id} (`{}`) is at the top level, but may only appear inside a `{kernel}`", name_of(op))
                };
                err!(d.span, msg);
            }
            if let Some(fault) = attrs_fault(m, &d.attrs) {
                err!(
                    d.span,
                    format!(
                        "op #{id} (`{}`) has an attribute {}",
                        name_of(op),
                        fault.words()
                    ),
                );
            }
            // The operands its row's form allows: one role-less access, or
            // none (kernels, plan ops); other forms are checked per role.
            let form_ok = match d.kind.code().def().operands {
                ops::OperandForm::Access { role, .. } => {
                    d.operands.len() == 1
                        && sym_ok(d.operands[0].role)
                        && m.str(d.operands[0].role) == role
                }
                ops::OperandForm::Body
                | ops::OperandForm::None
                | ops::OperandForm::Buffer { .. } => d.operands.is_empty(),
                ops::OperandForm::Roles(_) | ops::OperandForm::AnyRoles { .. } => true,
            };
            if !form_ok {
                let want = match d.kind.code().def().operands {
                    ops::OperandForm::Access { role, .. } => {
                        format!("exactly one access (role `{role}`)")
                    }
                    _ => "no operands".to_string(),
                };
                err!(
                    d.span,
                    format!(
                        "op #{id} (`{}`) has {} operand(s), but takes {want}",
                        name_of(op),
                        d.operands.len()
                    ),
                );
            }
            for (i, o) in d.operands.iter().enumerate() {
                // About the operand: its role, when it is this module's.
                let role = || sym_ok(o.role).then(|| m.str(o.role));
                if !sym_ok(o.role) || o.struct_name.is_some_and(|s| !sym_ok(s)) {
                    out.push(
                        Diagnostic::error(d.span, format!("operand {i} of op #{id} (`{}`) has a role or struct symbol from another module", name_of(op)))
                            .about(op, name_of(op), role()),
                    );
                }
                let b = o.buffer.as_u32() as usize;
                if b >= m.buffers.len() {
                    out.push(
                        Diagnostic::error(
                            o.span,
                            format!(
                                "operand {i} of op #{id} (`{}`) uses buffer #{b}, which does not exist",
                                name_of(op)
                            ),
                        )
                        .about(op, name_of(op), role()),
                    );
                } else if at(o.buffer).is_some_and(|i| !declared[i] && listed[i])
                    && sym_ok(m.buffers[o.buffer].name)
                {
                    out.push(
                        Diagnostic::error(o.span, format!("operand {i} of op #{id} (`{}`) uses buffer `%{}` before its declaration", name_of(op), m.str(m.buffers[o.buffer].name)))
                            .about(op, name_of(op), role()),
                    );
                }
            }
            if let OpKind::Kernel { name, body } = d.kind {
                if !sym_ok(name) {
                    err!(
                        d.span,
                        format!(
                            "op #{id} (`{}`) has a name symbol from another module",
                            name_of(op)
                        ),
                    );
                } else if batch && m.earlier.kernels.contains(&name) {
                    err!(
                        d.span,
                        format!(
                            "kernel `@{}` (op #{id}) is declared twice: an earlier batch declared it",
                            m.str(name)
                        ),
                    );
                } else if let Some(prev) = kernels.insert(name, op) {
                    let msg = format!(
                        "kernel `@{}` is declared twice (op #{} and op #{id})",
                        m.str(name),
                        prev.as_u32()
                    );
                    out.push(
                        Diagnostic::error(d.span, msg)
                            .with_note("the first declaration", m.ops[prev].span),
                    );
                }
                match m.blocks.get(body) {
                    None => err!(
                        d.span,
                        format!(
                            "op #{id} (`{}`) has body block #{}, which does not exist",
                            name_of(op),
                            body.as_u32()
                        ),
                    ),
                    Some(block) => {
                        for &inner_op in block.ops.iter().rev() {
                            stack.push((inner_op, true));
                        }
                    }
                }
            }
        }
    }
    if let Some((from, prev)) = pending.take() {
        about(&mut out[from..], prev);
    }
    spelling(m, first, &mut out);
    // Stored but not in the program: one diagnostic per missing kernel
    // (its body goes with it), then one per other op.
    let mut missing: Vec<Op> = m
        .ops
        .keys()
        .filter(|op| !seen[op.as_u32() as usize])
        .collect();
    missing.sort_by_key(|&op| !matches!(m.ops[op].kind, OpKind::Kernel { .. }));
    for op in missing {
        if seen[op.as_u32() as usize] {
            continue;
        }
        err!(
            m.ops[op].span,
            format!(
                "op #{} (`{}`) is stored but not in the program (every stored op is listed exactly once)",
                op.as_u32(),
                name_of(op)
            ),
        );
        // It and its body (a kernel's), recursively: reported once.
        let mut todo = vec![op];
        while let Some(o) = todo.pop() {
            if std::mem::replace(&mut seen[o.as_u32() as usize], true) {
                continue;
            }
            if let OpKind::Kernel { body, .. } = m.ops[o].kind {
                if let Some(block) = m.blocks.get(body) {
                    todo.extend(block.ops.iter().filter(|&&i| m.ops.contains(i)));
                }
            }
        }
    }
    for (b, d) in m.buffers_from(first) {
        if !listed[b.as_u32() as usize - first] {
            err!(
                d.span,
                format!(
                    "buffer {} is stored but not declared in the program",
                    buffer_name(b)
                ),
            );
        }
    }
    for kernel in m.plans.keys() {
        let ok = matches!(
            m.ops.get(*kernel).map(|d| d.kind),
            Some(OpKind::Kernel { .. })
        );
        if !ok {
            err!(
                m.span,
                format!(
                    "a staging plan is attached to op #{}, which is not a `{}`",
                    kernel.as_u32(),
                    ops::OpCode::Kernel.name()
                ),
            );
            continue;
        }
        // A kernel's plan is typed or written as plan ops, never both.
        if let Some(OpKind::Kernel { body, .. }) = m.ops.get(*kernel).map(|d| d.kind) {
            let plan_op = m.blocks.get(body).and_then(|b| {
                b.ops
                    .iter()
                    .copied()
                    .find(|&o| matches!(m.ops.get(o).map(|d| d.kind), Some(OpKind::Plan(_))))
            });
            if let Some(p) = plan_op {
                out.push(
                    Diagnostic::error(
                        m.ops[p].span,
                        format!(
                            "op #{} (`{}`) has a typed staging plan and plan ops in its body (op #{}); a plan is one or the other",
                            kernel.as_u32(),
                            ops::OpCode::Kernel.name(),
                            p.as_u32()
                        ),
                    )
                    .about(*kernel, ops::OpCode::Kernel.name(), None),
                );
            }
        }
    }
    out
}

/// The spelling rules of [`structure`]: what a module built in code can
/// name or key that text cannot write, so that its printed text would not
/// parse back. Symbols from another module are reported by `structure`
/// itself and skipped here. Buffers before `first` are an earlier
/// batch's, checked with it.
fn spelling(m: &Module, first: usize, out: &mut Diagnostics) {
    use crate::parser::{is_identifier, is_sigil_name};
    let str_of = |s: crate::Symbol| m.symbols.contains(s).then(|| m.str(s));
    let bad_name = |s: crate::Symbol| str_of(s).is_some_and(|t| !is_sigil_name(t));
    const NAME: &str = "(a name is one or more letters, digits, `_`, `.`, `$` or `-`)";
    const KEY: &str = "(a letter or `_`, then letters, digits, `_`, `.`, `$` or `-`)";
    // The first key of `attrs` that is not an identifier or is `reserved`.
    let bad_key = |attrs: &crate::Attrs, reserved: &dyn Fn(&str) -> bool| -> Option<String> {
        attrs.keys().find_map(|&k| {
            let t = str_of(k)?;
            if !is_identifier(t) {
                Some(format!(
                    "the attribute key {t:?}, which is not an identifier {KEY}"
                ))
            } else if reserved(t) {
                Some(format!(
                    "an attribute `{t}`, a key the IR text keeps for a field (`arch` of a module; `partition`, `byte` or `addr` of a buffer)"
                ))
            } else {
                None
            }
        })
    };
    if let Some(name) = m.name.filter(|&n| bad_name(n)) {
        out.push(Diagnostic::error(
            m.span,
            format!(
                "the module is named {:?}, which is not a name the IR can spell {NAME}",
                m.str(name)
            ),
        ));
    }
    if let Some(why) = bad_key(&m.attrs, &|k| k == "arch") {
        out.push(Diagnostic::error(m.span, format!("the module has {why}")));
    }
    for (b, d) in m.buffers_from(first) {
        if bad_name(d.name) {
            out.push(Diagnostic::error(
                d.span,
                format!(
                    "buffer #{} is named {:?}, which is not a name the IR can spell {NAME}",
                    b.as_u32(),
                    m.str(d.name)
                ),
            ));
        }
        // Every buffer op's attributes, not only this one's: the parser
        // rejects `partition` on `mem.hbm` as well as a repeated `byte`.
        if let Some(why) = bad_key(&d.attrs, &ops::is_buffer_attr) {
            out.push(Diagnostic::error(
                d.span,
                format!("buffer #{} has {why}", b.as_u32()),
            ));
        }
    }
    for (op, d) in m.ops.iter() {
        let id = op.as_u32();
        let what = d.kind.name();
        let mut err = |msg: String| {
            out.push(Diagnostic::error(d.span, msg).about(op, what, None));
        };
        if let OpKind::Kernel { name, .. } = d.kind {
            if bad_name(name) {
                err(format!(
                    "op #{id} (`{what}`) is named {:?}, which is not a name the IR can spell {NAME}",
                    m.str(name)
                ));
            }
        }
        if let Some(why) = bad_key(&d.attrs, &|_| false) {
            err(format!("op #{id} (`{what}`) has {why}"));
        }
        // Roles are written before `=` (a read's or write's is its row's,
        // not written, and checked by `structure`).
        let written = !matches!(d.kind, OpKind::Read | OpKind::Write);
        for (i, o) in d.operands.iter().enumerate() {
            let role = str_of(o.role);
            if written && role.is_some_and(|r| !is_identifier(r)) {
                err(format!(
                    "operand {i} of op #{id} (`{what}`) has the role {:?}, which is not an identifier {KEY}",
                    role.unwrap_or_default()
                ));
            }
            match (d.kind == OpKind::Custom, o.struct_name.is_some()) {
                (true, false) => err(format!(
                    "operand {i} of op #{id} (`{what}`) has no struct key: every `isa.custom` operand names its descriptor struct (`as \"...\"`)"
                )),
                (false, true) => err(format!(
                    "operand {i} of op #{id} (`{what}`) has a struct key (`as \"...\"`), which only `isa.custom` operands take"
                )),
                _ => {}
            }
        }
    }
}

/// What structure finds wrong with a built module's attribute.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AttrFault {
    /// A key or string that is not a symbol of the module.
    Foreign,
    /// Arrays nested deeper than [`MAX_ARRAY_NESTING`].
    Deep,
}

impl AttrFault {
    /// How a message names it, after "has an attribute ...".
    fn words(self) -> String {
        match self {
            AttrFault::Foreign => "symbol from another module".to_string(),
            AttrFault::Deep => format!(
                "whose arrays nest more than {MAX_ARRAY_NESTING} deep (text reads no deeper)"
            ),
        }
    }
}

/// The first fault of `v`, met `depth` arrays deep: a string that is not a
/// symbol of `m`, or arrays nested past [`MAX_ARRAY_NESTING`], where the
/// walk stops (a value built in code may nest as deep as memory allows).
fn attr_fault(m: &Module, v: &Attr, depth: usize) -> Option<AttrFault> {
    match v {
        Attr::Str(s) => (!m.symbols.contains(*s)).then_some(AttrFault::Foreign),
        Attr::Array(_) if depth >= MAX_ARRAY_NESTING => Some(AttrFault::Deep),
        Attr::Array(items) => items.iter().find_map(|a| attr_fault(m, a, depth + 1)),
        Attr::Int(_) | Attr::Bool(_) => None,
    }
}

/// Verifies one buffer declaration (for drivers that verify item by item).
/// A buffer id that is not stored is reported, not indexed.
pub fn verify_buffer(m: &Module, b: crate::Buffer) -> Result<(), Diagnostics> {
    let Some(data) = m.buffers.get(b) else {
        let msg = format!("buffer #{} does not exist", b.as_u32());
        return Err(vec![Diagnostic::error(m.span, msg)]);
    };
    let mut v = Verifier::new(m);
    v.buffer(data);
    v.finish()
}

/// Verifies top-level ops and their regions (for drivers that verify item by
/// item); the buffers they use are assumed verified. The ids these rules
/// index are checked first: an op, block or buffer that is
/// not stored, or a kernel inside a kernel, is reported instead.
pub fn verify_ops(m: &Module, ops: impl IntoIterator<Item = Op>) -> Result<(), Diagnostics> {
    let mut v = Verifier::new(m);
    for op in ops {
        if stored(m, op, false) {
            v.walk(op);
        } else {
            // (`unstored` finds what `stored` did; were it not to, the op
            // is still reported, never walked.)
            v.diags.push(unstored(m, op, false).unwrap_or_else(|| {
                Diagnostic::internal(m.span, format!("op #{} cannot be checked", op.as_u32()))
            }));
        }
    }
    v.finish()
}

/// Whether every id [`verify_ops`] indexes in `op` and its region is stored
/// (the common case, decided without building a diagnostic); `inner`: `op`
/// is listed in a kernel's body.
#[inline]
fn stored(m: &Module, op: Op, inner: bool) -> bool {
    let Some(d) = m.ops.get(op) else { return false };
    if !d.operands.iter().all(|o| operand_stored(m, o)) || attrs_fault(m, &d.attrs).is_some() {
        return false;
    }
    match d.kind {
        OpKind::Kernel { .. } if inner => false,
        OpKind::Kernel { body, .. } => m
            .blocks
            .get(body)
            .is_some_and(|b| b.ops.iter().all(|&x| stored(m, x, true))),
        _ => true,
    }
}

/// Whether the ids an operand's checks index are this module's: its
/// buffer, role and struct name.
#[inline]
fn operand_stored(m: &Module, o: &Operand) -> bool {
    m.buffers.get(o.buffer).is_some()
        && m.symbols.contains(o.role)
        && o.struct_name.is_none_or(|s| m.symbols.contains(s))
}

/// The first fault of `attrs`: a key or string that is not a symbol of
/// `m` (which the attribute checks would look up), or arrays nested deeper
/// than text reads.
#[inline]
fn attrs_fault(m: &Module, attrs: &crate::Attrs) -> Option<AttrFault> {
    attrs.iter().find_map(|(k, v)| {
        if m.symbols.contains(*k) {
            attr_fault(m, v, 0)
        } else {
            Some(AttrFault::Foreign)
        }
    })
}

/// What [`verify_ops`] cannot index in `op` and its region (`inner`: `op`
/// is listed in a kernel's body): the part of [`structure`]'s rules that
/// keeps the op rules from panicking, for a driver that does not run it.
/// The diagnostic for what [`stored`] finds missing.
#[cold]
#[inline(never)]
fn unstored(m: &Module, op: Op, inner: bool) -> Option<Diagnostic> {
    let id = op.as_u32();
    let Some(d) = m.ops.get(op) else {
        return Some(Diagnostic::error(
            m.span,
            format!("op #{id} does not exist"),
        ));
    };
    let name = d.kind.name();
    let mut operands = d.operands.iter().enumerate();
    if let Some((i, o)) = operands.find(|(_, o)| !operand_stored(m, o)) {
        let msg = if m.buffers.get(o.buffer).is_none() {
            format!(
                "operand {i} of op #{id} (`{name}`) uses buffer #{}, which does not exist",
                o.buffer.as_u32()
            )
        } else {
            format!("operand {i} of op #{id} (`{name}`) has a role or struct symbol from another module")
        };
        let role = m.symbols.contains(o.role).then(|| m.str(o.role));
        return Some(Diagnostic::error(o.span, msg).about(op, name, role));
    }
    if let Some(fault) = attrs_fault(m, &d.attrs) {
        let msg = format!("op #{id} (`{name}`) has an attribute {}", fault.words());
        return Some(Diagnostic::error(d.span, msg).about(op, name, None));
    }
    if let OpKind::Kernel { body, .. } = d.kind {
        if inner {
            let msg = format!("op #{id} (`{name}`) is a kernel inside a kernel");
            return Some(Diagnostic::error(d.span, msg).about(op, name, None));
        }
        let Some(block) = m.blocks.get(body) else {
            let msg = format!(
                "op #{id} (`{name}`) has body block #{}, which does not exist",
                body.as_u32()
            );
            return Some(Diagnostic::error(d.span, msg).about(op, name, None));
        };
        return block.ops.iter().find_map(|&x| unstored(m, x, true));
    }
    None
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
    let mut v = Verifier::new(m);
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
    /// Buffer sizes already computed, by buffer index modulo its length.
    sizes: [Sizes; 16],
}

/// What the fast decisions need of a buffer, remembered per buffer so that
/// an operand on a buffer already seen reads this entry only: its memory and
/// dtype, its partition free size `F`, partition count `P` (1 off chip) and
/// total element count `F * P`, all three positive and within 64 bits.
#[derive(Clone, Copy)]
struct Sizes {
    /// The buffer's index plus one (0: no buffer yet).
    key: u64,
    mem: crate::Memory,
    dtype: crate::target::Dtype,
    free: u64,
    partitions: u64,
    total: u64,
}

impl Sizes {
    /// An empty slot (no buffer has key 0).
    const EMPTY: Sizes = Sizes {
        key: 0,
        mem: crate::Memory::Hbm,
        dtype: crate::target::Dtype::F32,
        free: 0,
        partitions: 0,
        total: 0,
    };
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

impl<'a> Verifier<'a> {
    fn new(m: &'a Module) -> Self {
        Verifier {
            m,
            diags: Vec::new(),
            sizes: [Sizes::EMPTY; 16],
        }
    }

    /// `buffer`'s [`Sizes`], when it exists and its partition free size and
    /// total element count are positive and fit 64 bits (otherwise the
    /// buffer is reported on its own, and its operands' access patterns are
    /// not checked). A buffer already seen is not looked up again: the
    /// module does not change while it is verified.
    #[inline]
    fn sizes(&mut self, buffer: crate::Buffer) -> Option<Sizes> {
        let key = u64::from(buffer.as_u32()) + 1;
        let slot = &mut self.sizes[buffer.as_u32() as usize % 16];
        if slot.key == key {
            return Some(*slot);
        }
        let b = self.m.buffers.get(buffer)?;
        let free = b.free_elements().filter(|&f| f > 0)?;
        let partitions = b.partitions();
        let total = free.checked_mul(partitions).filter(|&t| t > 0)?;
        *slot = Sizes {
            key,
            mem: b.mem,
            dtype: b.dtype,
            free,
            partitions,
            total,
        };
        Some(*slot)
    }

    /// Verifies `op` and, for a kernel, its body, in program order.
    fn walk(&mut self, op: Op) {
        self.op(op);
        if let OpKind::Kernel { body, .. } = self.m.ops[op].kind {
            self.walk_body(body);
        }
    }

    /// [`Verifier::walk`] over a kernel's body: kept out of line so that
    /// `walk`, which runs once per op, has [`Verifier::op`] inlined.
    #[inline(never)]
    fn walk_body(&mut self, body: crate::Block) {
        for &inner in &self.m.blocks[body].ops {
            self.walk(inner);
        }
    }

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
    #[inline]
    fn about(&mut self, from: usize, op: Op, role: Option<crate::Symbol>) {
        if from < self.diags.len() {
            self.mark(from, op, role);
        }
    }

    /// [`Verifier::about`] for a non-empty range of diagnostics.
    #[cold]
    #[inline(never)]
    fn mark(&mut self, from: usize, op: Op, role: Option<crate::Symbol>) {
        let name = self.m.ops[op].kind.name();
        let role = role.map(|r| self.m.str(r));
        // A piece of a split op is named by the op it stands for: these
        // rules' messages name no op id (the structural ones, which do,
        // name the op as stored).
        let op = self.m.origin(op);
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
            // In 128 bits: a partition count near 2^64 must not wrap into
            // range (its operands' checks rely on the buffer fitting).
            let end = u128::from(b.partition) + u128::from(b.partitions());
            if end > u128::from(total) {
                self.err(b.span, format!(
                    "buffer `%{name}` does not fit {}: partitions {}..{end} exceed the {total} partitions",
                    b.mem, b.partition
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
        } else {
            if b.partition != 0 {
                // Text cannot say it (the HBM buffer op has no `partition`),
                // so a built module holding one would print as another.
                self.err(b.span, format!(
                    "buffer `%{name}` in {} has partition {}: {} is not partitioned, so the field must be 0",
                    b.mem, b.partition, b.mem
                ));
            }
            if u128::from(b.base) + u128::from(bytes) > 1u128 << 64 {
                self.err(b.span, format!(
                    "buffer `%{name}` at {:#x} with {bytes} bytes runs past the end of the 64-bit address space",
                    b.base
                ));
            }
        }
    }

    /// Inlined into [`Verifier::walk`], which calls it once per op.
    #[inline(always)]
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
                match self.isa_operands_clean(isa, data) {
                    // No rule before the lowered forms reports anything, so
                    // only the lowered forms remain, in operand order.
                    Some(true) => {
                        for (idx, o) in data.operands.iter().enumerate() {
                            if o.lowered().is_some() {
                                let from = self.diags.len();
                                self.lowered(op, idx, Forms::ALL);
                                self.about(from, op, Some(o.role));
                            }
                        }
                    }
                    Some(false) => {}
                    None => self.isa_operands(op, isa),
                }
                // The attribute table is looked up only for an op with
                // attributes (most have none).
                if !data.attrs.is_empty() {
                    self.attr_values(data, data.kind.code().def().attrs, isa.info().name);
                }
            }
            OpKind::Custom => {
                let def = data.kind.code().def();
                let mems = match def.operands {
                    OperandForm::AnyRoles { mems } => mems,
                    _ => MemorySet::SP,
                };
                self.roles(op);
                for (idx, o) in data.operands.iter().enumerate() {
                    let from = self.diags.len();
                    self.memory(o, mems, def.name, false);
                    self.ap(o, false);
                    if o.lowered().is_some() {
                        self.lowered(op, idx, Forms::ALL);
                    }
                    self.about(from, op, Some(o.role));
                }
                self.attrs(data, def.attrs, def.name);
            }
            OpKind::Kernel { body, .. } => {
                let def = data.kind.code().def();
                self.attrs(data, def.attrs, def.name);
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
                let def = data.kind.code().def();
                let mems = match def.operands {
                    OperandForm::Access { mems, .. } => mems,
                    _ => MemorySet::HBM,
                };
                self.attrs(data, def.attrs, def.name);
                for o in &data.operands {
                    self.memory(o, mems, def.name, true);
                    self.ap(o, true);
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

    /// Whether the operands of the ISA op `data` pass every rule the
    /// verifier checks before their lowered forms: the op exists on the
    /// module's arch; each operand's role is one of its row's, no role twice
    /// and none missing; each operand's memory and dtype are allowed for its
    /// role; each access pattern passes [`ap_clean`]. `Some` with whether an
    /// operand carries lowered forms; `None` says only that the full checks
    /// must decide (and word what they find).
    fn isa_operands_clean(&mut self, isa: crate::target::IsaOp, data: &OpData) -> Option<bool> {
        let m = self.m;
        // As many operands as the row has roles, checked first: with no
        // role given twice (below), none is then missing.
        if !isa.on_arch(m.arch) || data.operands.len() != isa.info().roles.len() {
            return None;
        }
        // The table roles seen, as a bit set (at most 64 roles a row, as in
        // `Verifier::roles`): a role given twice would set its bit twice.
        let mut seen = 0u64;
        let mut lowered = false;
        for o in &data.operands {
            let (k, role) = isa.role_of(o.role)?;
            if seen & (1 << k) != 0 {
                return None;
            }
            seen |= 1 << k;
            let b = self.sizes(o.buffer)?;
            if !role.mems.contains(b.mem) || !role.dtype.allows(b.dtype) || !ap_clean(&b, &o.ap) {
                return None;
            }
            lowered |= o.lowered().is_some();
        }
        Some(lowered)
    }

    /// The rules of an ISA op before its attributes, each reported: the op
    /// on the module's arch, its roles ([`Verifier::roles`]), and per
    /// operand its memory, dtype, access pattern and lowered forms.
    #[cold]
    #[inline(never)]
    fn isa_operands(&mut self, op: Op, isa: crate::target::IsaOp) {
        let m = self.m;
        let data = &m.ops[op];
        let info = isa.info();
        if !isa.on_arch(m.arch) {
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
                self.memory(o, role.mems, info.name, false);
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
            self.ap(o, false);
            if o.lowered().is_some() {
                self.lowered(op, idx, Forms::ALL);
            }
            self.about(from, op, Some(o.role));
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
            // Only a diagnostic names the role.
            let role = || m.str(o.role);
            if let Some(prev) = data.operands[..i].iter().find(|p| p.role == o.role) {
                let role = role();
                self.diags.push(
                    Diagnostic::error(o.span, format!("role `{role}` is given twice"))
                        .with_note("first given here", prev.span),
                );
            }
            let Some(isa) = isa else { continue };
            match isa.role_of(o.role) {
                Some((k, _)) => seen |= 1 << k,
                None => {
                    let role = role();
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

    /// The operand's memory is one `allowed`; `access` for a kernel's
    /// access, whose role is not written.
    fn memory(&mut self, o: &Operand, allowed: MemorySet, opname: &str, access: bool) {
        let mem = self.m.buffers[o.buffer].mem;
        if !allowed.contains(mem) {
            let role = self.m.str(o.role);
            let what = if access {
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

    /// `access`: `o` is a kernel's access, whose role is not written.
    fn ap(&mut self, o: &Operand, access: bool) {
        let clean = self.sizes(o.buffer).is_some_and(|b| ap_clean(&b, &o.ap));
        if !clean {
            self.ap_checks(o, access);
        }
    }

    /// The access-pattern rules of `o`, each reported: exact (128-bit)
    /// arithmetic, the first failing rule's diagnostic.
    #[cold]
    #[inline(never)]
    fn ap_checks(&mut self, o: &Operand, access: bool) {
        let m = self.m;
        let b = &m.buffers[o.buffer];
        // Interned names are looked up only for a diagnostic.
        let bname = DeferStr(m, b.name);
        // "operand `dst`", or "the access" of a kernel (its role is not
        // written).
        let who = Who(access.then_some("the access"), DeferStr(m, o.role));
        let ap: &AccessPattern = &o.ap;
        if ap.dims.is_empty() {
            self.err(o.span, format!("{who} has no dims"));
            return;
        }
        if let Some(i) = ap.dims.iter().position(|d| d.num == 0) {
            self.err(
                o.span,
                format!("{who}: dim {i} has num 0 (every dim visits at least one element)"),
            );
            return;
        }
        let Some(f) = b.free_elements() else {
            return; // reported on the buffer
        };
        let Some(total) = f.checked_mul(b.partitions()) else {
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
                    format!("{who}: the partition step {} is negative", p.step),
                );
                return;
            }
            if p.num > 1 && p.step as u64 != f {
                self.err(o.span, format!(
                    "{who}: the partition step {} must equal the partition free size {f} of `%{bname}` (partitions are walked contiguously)",
                    p.step
                ));
                return;
            }
        }
        // On chip the free dims' extent, and the partition dim's reach
        // (its step is not negative) on top of it; every term widens the
        // extent, so the whole overflows if the free part does.
        let free = if on_chip { extent(&ap.dims[1..]) } else { None };
        let whole = match free {
            Some((flo, fhi)) => {
                let p = ap.dims[0];
                let reach = i128::from(p.step) * i128::from(p.num - 1);
                fhi.checked_add(reach).map(|hi| (flo, hi))
            }
            None if on_chip => None,
            None => extent(&ap.dims),
        };
        let Some((lo, hi)) = whole else {
            self.err(
                o.span,
                format!("{who}: the access pattern's extent overflows"),
            );
            return;
        };
        let off = i128::from(ap.offset);
        if on_chip && off >= 0 {
            // Checked before the whole-buffer bound: a free walk running off
            // its partition is the more precise message.
            let (flo, fhi) = free.unwrap_or((0, 0));
            // off >= 0 and f > 0: a u64 remainder (an i128 one is a libcall).
            let e = i128::from(ap.offset.unsigned_abs() % f);
            // `e >= 0`: `e + flo` cannot overflow, `e + fhi` can.
            if e + flo < 0 || e.checked_add(fhi).is_none_or(|h| h >= i128::from(f)) {
                self.err(o.span, format!(
                    "{who} leaves its partition: starting at element {e} of a partition, the free dims reach elements {}..={} of 0..{f}",
                    e + flo, e.saturating_add(fhi)
                ));
                return;
            }
        }
        // `lo` may be as low as i128::MIN: the sums are checked too.
        let (Some(first), Some(last)) = (off.checked_add(lo), off.checked_add(hi)) else {
            self.err(
                o.span,
                format!("{who}: the access pattern's extent overflows"),
            );
            return;
        };
        if first < 0 || last >= i128::from(total) {
            self.err(o.span, format!(
                "{who} leaves buffer `%{bname}`: it visits elements {first}..={last}, the buffer has 0..{total}"
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
    #[inline]
    fn attrs(&mut self, data: &OpData, known: &[AttrDef], opname: &str) {
        if !data.attrs.is_empty() {
            self.attr_values(data, known, opname);
        }
    }

    /// [`Verifier::attrs`] for an op with attributes.
    #[inline(never)]
    fn attr_values(&mut self, data: &OpData, known: &[AttrDef], opname: &str) {
        let m = self.m;
        for (n, (k, v)) in data.attrs.iter().enumerate() {
            let key = m.str(*k);
            let Some(info) = known.iter().find(|a| short_eq(a.name, key)) else {
                continue;
            };
            if !value_ok(m, info.kind, v) {
                let mut d = Diagnostic::error(
                    data.attr_span(n),
                    format!(
                        "attribute `{key}` of `{opname}` must be {}",
                        expected(info.kind)
                    ),
                );
                if let (ValueKind::Enum(values), Attr::Str(s)) = (info.kind, v) {
                    if let Some(c) = crate::diag::did_you_mean(m.str(*s), values.iter().copied()) {
                        d = d.with_note(format!("did you mean \"{c}\"?"), None);
                    }
                }
                self.diags.push(d);
            }
        }
    }
}

/// An interned name displayed by looking it up only when formatted, so a
/// check that passes never touches the string table.
#[derive(Clone, Copy)]
struct DeferStr<'a>(&'a Module, crate::Symbol);

impl std::fmt::Display for DeferStr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.str(self.1))
    }
}

/// Who an access-pattern diagnostic is about: the words given (a kernel's
/// access), else "operand `role`".
struct Who<'a>(Option<&'static str>, DeferStr<'a>);

impl std::fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(words) => f.write_str(words),
            None => write!(f, "operand `{}`", self.1),
        }
    }
}

/// Whether `ap` passes every access-pattern rule of the verifier on the
/// buffer `b` (on chip or not; partition free size `F > 0`, `P` partitions,
/// `total = F * P > 0` elements), decided in 64-bit arithmetic: at least one
/// dim, no `num` of 0, a partition step (on chip) not negative and equal to
/// `F` unless one partition is walked, the free dims inside the partition
/// and every visited element inside the buffer. `false` when a rule fails or
/// a sum or product leaves 64 bits: then the exact checks decide.
#[inline(always)]
fn ap_clean(b: &Sizes, ap: &AccessPattern) -> bool {
    let (f, total) = (b.free, b.total);
    let on_chip = b.mem.is_on_chip();
    // A negative offset visits a negative element (every extent's low end
    // is at most 0); an empty pattern has no dims.
    let off = ap.offset;
    if off < 0 {
        return false;
    }
    let all: &[crate::Dim] = &ap.dims;
    let Some((&p, rest)) = all.split_first() else {
        return false;
    };
    if on_chip && (p.step < 0 || p.num == 0 || (p.num > 1 && p.step.unsigned_abs() != f)) {
        return false;
    }
    // The extent of the free dims on chip (the partition dim is taken
    // below), of all dims otherwise, relative to the offset.
    let dims = if on_chip { rest } else { all };
    let (mut lo, mut hi) = (0i64, 0i64);
    for d in dims {
        let Some(reach) = d
            .num
            .checked_sub(1)
            .and_then(|n| i64::try_from(n).ok())
            .and_then(|n| d.step.checked_mul(n))
        else {
            return false;
        };
        let end = if reach < 0 { &mut lo } else { &mut hi };
        let Some(sum) = end.checked_add(reach) else {
            return false;
        };
        *end = sum;
    }
    if on_chip {
        // The offset is element `e` of partition `q` (counted from the
        // buffer's first), both from one `div_rem`.
        let (q, e) = crate::module::div_rem(off.unsigned_abs(), f);
        // The free dims stay in that partition: `e + lo >= 0` and
        // `e + hi < F` (`lo <= 0 <= hi`, `e < F`).
        if e < lo.unsigned_abs() || e.checked_add(hi.unsigned_abs()).is_none_or(|h| h >= f) {
            return false;
        }
        // Then the first element visited, `off + lo >= e + lo`, is not
        // negative, and the last is `(q + num - 1) * F + (e + hi)` (the
        // partition step is `F` whenever `num > 1`), inside the buffer
        // exactly when `q + num - 1 < P`, as `0 <= e + hi < F`.
        return q < b.partitions && p.num - 1 < b.partitions - q;
    }
    // `off >= 0` and `lo <= 0`: `off + lo` cannot overflow, `off + hi` can.
    off + lo >= 0
        && off
            .checked_add(hi)
            .is_some_and(|last| last.unsigned_abs() < total)
}

/// Whether `v` is a value of `kind`.
fn value_ok(m: &Module, kind: ValueKind, v: &Attr) -> bool {
    match (kind, v) {
        (ValueKind::Enum(values), Attr::Str(s)) => {
            let s = m.str(*s);
            values.iter().any(|v| short_eq(v, s))
        }
        (ValueKind::Int { min, max }, Attr::Int(i)) => (min..=max).contains(i),
        (ValueKind::Bool, Attr::Bool(_)) | (ValueKind::Str, Attr::Str(_)) => true,
        (ValueKind::List(of), Attr::Array(items)) => items.iter().all(|it| value_ok(m, *of, it)),
        _ => false,
    }
}

/// What a value of `kind` is, for messages.
fn expected(kind: ValueKind) -> String {
    match kind {
        ValueKind::Enum(values) => {
            let q: Vec<_> = values.iter().map(|v| format!("\"{v}\"")).collect();
            format!("one of {}", q.join(", "))
        }
        ValueKind::Int { min, max } => format!("an integer in [{min}, {max}]"),
        ValueKind::Bool => "`true` or `false`".to_string(),
        ValueKind::Str => "a string".to_string(),
        ValueKind::List(of) => format!("an array, each element {}", expected(*of)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{Item, Place};

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

    /// `m` with one more kernel, `@name`, with an empty body, at the end.
    fn with_kernel(m: &mut Module, name: &str) -> (Op, crate::Block) {
        let body = m.new_block();
        let name = m.sym(name);
        let k = m.append_op(None, Module::op_data(OpKind::Kernel { name, body }, []));
        (k, body)
    }

    /// Exactly one diagnostic, located at `span`, whose message contains
    /// `want`.
    #[track_caller]
    fn one(m: &Module, want: &str) {
        let d = verify(m).expect_err(want);
        assert_eq!(d.len(), 1, "{want}: {d:?}");
        assert!(d[0].message.contains(want), "{}", d[0].message);
        assert!(d[0].span.is_some(), "{want}: not located");
        assert!(
            d[0].message.contains("op #") || d[0].message.contains("buffer"),
            "{}",
            d[0].message
        );
    }

    /// An access without its operand, an access with two, a kernel with
    /// one: each is one diagnostic about that op (its printed text would
    /// not parse back, and the staging passes index accesses by operand).
    #[test]
    fn operands_follow_the_rows_form() {
        let (m, _, kernel, read) = parsed();
        let mut x = m.clone();
        x.ops[read].operands.clear();
        one(
            &x,
            "op #1 (`gpsimd.read`) has 0 operand(s), but takes exactly one access (role `src`)",
        );
        let mut x = m.clone();
        let again = x.ops[read].operands[0].clone();
        x.ops[read].operands.push(again.clone());
        one(&x, "has 2 operand(s)");
        let mut x = m.clone();
        x.ops[read].operands[0].role = x.sym("dst");
        one(&x, "takes exactly one access (role `src`)");
        let mut x = m.clone();
        x.ops[kernel].operands.push(again);
        one(
            &x,
            "op #2 (`gpsimd.kernel`) has 1 operand(s), but takes no operands",
        );
        // Each names its op as data too.
        let d = verify(&x).unwrap_err();
        let s = d[0].subject.as_ref().expect("a subject");
        assert_eq!((s.op, s.name), (kernel, "gpsimd.kernel"));
    }

    /// A kernel whose plan is typed and also written as plan ops in its
    /// body is one diagnostic (the printed module would hold both).
    #[test]
    fn a_plan_is_typed_or_ops_never_both() {
        let (m, _, kernel, _) = parsed();
        let OpKind::Kernel { body, .. } = m.ops[kernel].kind else {
            panic!("not a kernel")
        };
        let mut x = m.clone();
        x.plans.insert(
            kernel,
            crate::staging::KernelPlan {
                policy: crate::staging::Policy::Pipelined,
                depth: 1,
                accessors: vec![crate::staging::Accessor::Index],
                params: Default::default(),
                reasons: Vec::new(),
                slots: Vec::new(),
                steps: Vec::new(),
            },
        );
        x.append_op(
            Some(body),
            Module::op_data(OpKind::Plan(crate::target::ops::PlanOp::Header), []),
        );
        let d = structure(&x);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].message
                .contains("has a typed staging plan and plan ops in its body"),
            "{}",
            d[0].message
        );
        assert_eq!(d[0].subject.as_ref().map(|s| s.op), Some(kernel));
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
        // An ISA op inside a kernel.
        let mut x = m.clone();
        x.move_op(copy, Place::End(Some(body)));
        one(&x, "op #0 (`isa.tensor_copy`) is inside a `gpsimd.kernel`");
        // A read at the top level (and out of its kernel).
        let mut x = m.clone();
        x.move_op(read, Place::End(None));
        one(&x, "op #1 (`gpsimd.read`) is at the top level");
        // A kernel inside a kernel (listed once).
        let mut x = m.clone();
        let (_, outer) = with_kernel(&mut x, "outer");
        x.move_op(kernel, Place::End(Some(outer)));
        one(&x, "op #2 (`gpsimd.kernel`) is inside a `gpsimd.kernel`");
        // One op listed twice.
        let mut x = m.clone();
        x.body.push(Item::Op(copy));
        one(&x, "op #0 (`isa.tensor_copy`) is listed twice");
        let mut x = m.clone();
        x.blocks[body].ops.push(read);
        one(&x, "op #1 (`gpsimd.read`) is listed twice");
        // A stored op the program does not list; a kernel, reported once
        // with its body.
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Op(copy));
        one(
            &x,
            "op #0 (`isa.tensor_copy`) is stored but not in the program",
        );
        let mut x = m.clone();
        x.blocks[body].ops.clear();
        one(&x, "op #1 (`gpsimd.read`) is stored but not in the program");
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Op(kernel));
        one(
            &x,
            "op #2 (`gpsimd.kernel`) is stored but not in the program",
        );
        // Two buffers with one name.
        let mut x = m.clone();
        let (b0, b1, b2) = (
            crate::Buffer::from_u32(0),
            crate::Buffer::from_u32(1),
            crate::Buffer::from_u32(2),
        );
        x.buffers[b1].name = x.buffers[b0].name;
        one(&x, "buffer `%x` is declared twice");
        // Two kernels with one name.
        let mut x = m.clone();
        with_kernel(&mut x, "k");
        one(&x, "kernel `@k` is declared twice (op #2 and op #3)");
        // A use before the declaration.
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Buffer(b1));
        x.body.push(Item::Buffer(b1));
        one(
            &x,
            "operand 0 of op #0 (`isa.tensor_copy`) uses buffer `%y` before its declaration",
        );
        // A buffer the program never declares (its use is not reported
        // again), and one declared twice.
        let mut x = m.clone();
        x.body.retain(|i| *i != Item::Buffer(b2));
        one(&x, "buffer `%h` is stored but not declared in the program");
        let mut x = m.clone();
        x.body.push(Item::Buffer(b2));
        one(&x, "buffer `%h` is listed twice");
        // Dangling ids: a buffer, an op, a removed op, a block.
        let mut x = m.clone();
        x.ops[copy].operands[1].buffer = crate::Buffer::from_u32(99);
        one(
            &x,
            "operand 1 of op #0 (`isa.tensor_copy`) uses buffer #99, which does not exist",
        );
        let mut x = m.clone();
        x.body.push(Item::Op(Op::from_u32(1000)));
        one(&x, "the program lists op #1000, which does not exist");
        let mut x = m.clone();
        x.remove_op(copy);
        assert!(verify(&x).is_ok());
        x.body.push(Item::Op(copy));
        one(&x, "the program lists op #0, which was removed");
        let mut x = m.clone();
        let (k2, _) = with_kernel(&mut x, "e");
        x.ops[k2].kind = OpKind::Kernel {
            name: x.sym("e"),
            body: crate::Block::from_u32(99),
        };
        one(
            &x,
            "op #3 (`gpsimd.kernel`) has body block #99, which does not exist",
        );
        // Foreign symbols: a role, a buffer name, a kernel name, a string
        // nested in an attribute array.
        let foreign = crate::Symbol::from_raw(1 << 30);
        let mut x = m.clone();
        x.ops[copy].operands[0].role = foreign;
        one(&x, "operand 0 of op #0 (`isa.tensor_copy`) has a role or struct symbol from another module");
        let mut x = m.clone();
        x.buffers[b0].name = foreign;
        one(&x, "buffer #0 has a name symbol from another module");
        let mut x = m.clone();
        x.ops[kernel].kind = OpKind::Kernel {
            name: foreign,
            body,
        };
        one(
            &x,
            "op #2 (`gpsimd.kernel`) has a name symbol from another module",
        );
        let mut x = m.clone();
        let key = x.sym("u");
        x.ops[read]
            .attrs
            .insert(key, Attr::Array(vec![Attr::Int(1), Attr::Str(foreign)]));
        one(
            &x,
            "op #1 (`gpsimd.read`) has an attribute symbol from another module",
        );
        let mut x = m.clone();
        let key = x.sym("u");
        x.buffers[b2].attrs.insert(key, Attr::Str(foreign));
        one(
            &x,
            "buffer `%h` has an attribute symbol from another module",
        );
    }

    /// The 64-bit decision of the access-pattern rules never passes a
    /// pattern the exact checks report, and on patterns whose terms stay
    /// small (or merely fit 64 bits) it passes every one they accept; the
    /// whole-op decision for ISA ops likewise agrees with the reported rules
    /// (roles, memories, dtypes, arch).
    mod clean_decisions {
        use super::*;
        use crate::target::{Arch, Dtype, IsaOp, Memory};
        use proptest::prelude::*;

        fn mem() -> impl Strategy<Value = Memory> {
            prop_oneof![Just(Memory::Sbuf), Just(Memory::Psum), Just(Memory::Hbm)]
        }

        fn step() -> impl Strategy<Value = i64> {
            prop_oneof![
                -4i64..=4,
                -3000i64..3000,
                any::<i64>(),
                Just(i64::MAX),
                Just(i64::MIN),
                (0u32..63).prop_map(|k| 1i64 << k),
                (0u32..63).prop_map(|k| -(1i64 << k)),
            ]
        }

        fn num() -> impl Strategy<Value = u64> {
            prop_oneof![
                0u64..=4,
                1u64..3000,
                any::<u64>(),
                Just(u64::MAX),
                (0u32..64).prop_map(|k| 1u64 << k),
                (0u32..64).prop_map(|k| (1u64 << k) + 1),
            ]
        }

        fn offset() -> impl Strategy<Value = i64> {
            prop_oneof![
                -4i64..=4,
                0i64..1_000_000,
                any::<i64>(),
                Just(i64::MAX),
                (0u32..63).prop_map(|k| 1i64 << k),
            ]
        }

        fn size() -> impl Strategy<Value = u64> {
            prop_oneof![
                0u64..=4,
                1u64..5000,
                Just(u64::MAX),
                (0u32..64).prop_map(|k| 1u64 << k),
            ]
        }

        /// A module holding one buffer, and an operand on it.
        fn operand_on(
            mem: Memory,
            shape: &[u64],
            dims: &[(i64, u64)],
            offset: i64,
        ) -> (Module, Operand) {
            let mut m = Module::new(Arch::V2);
            let name = m.sym("b");
            let b = m.add_buffer(BufferData {
                name,
                mem,
                partition: 0,
                base: 0,
                shape: shape.iter().copied().collect(),
                dtype: Dtype::F32,
                attrs: Default::default(),
                span: Span::default(),
            });
            let o = m.operand("src", b, AccessPattern::new(dims, offset));
            (m, o)
        }

        /// Whether the 64-bit decision passes `o`, as [`Verifier::ap`] takes
        /// it (buffer sizes from the verifier's memo).
        fn decided_clean(m: &Module, o: &Operand) -> bool {
            Verifier::new(m)
                .sizes(o.buffer)
                .is_some_and(|b| ap_clean(&b, &o.ap))
        }

        /// Whether the exact checks report nothing about `o`.
        fn reported_clean(m: &Module, o: &Operand) -> bool {
            let mut v = Verifier::new(m);
            v.ap_checks(o, false);
            v.diags.is_empty()
        }

        /// The buffer memo gives what a fresh look-up gives, for buffers
        /// whose indices share a slot, in any order, repeatedly; buffers
        /// whose sizes are not usable (a 0 or an overflowing product) are
        /// `None` every time and leave the memo as it was.
        #[test]
        fn the_buffer_memo_is_a_fresh_look_up() {
            let mut m = Module::new(Arch::V2);
            let mut bufs = Vec::new();
            for i in 0..40u64 {
                let name = m.sym(&format!("b{i}"));
                let (mem, shape) = match i % 5 {
                    0 => (Memory::Hbm, vec![1 + i, 3]),
                    1 => (Memory::Sbuf, vec![1 + i % 128, 2 + i]),
                    2 => (Memory::Psum, vec![4, 1 + i, 2]),
                    3 => (Memory::Sbuf, vec![4, 0]),
                    _ => (Memory::Sbuf, vec![2, u64::MAX, 2]),
                };
                bufs.push(m.add_buffer(BufferData {
                    name,
                    mem,
                    partition: 0,
                    base: 0,
                    shape: shape.into_iter().collect(),
                    dtype: if i % 2 == 0 { Dtype::F32 } else { Dtype::I32 },
                    attrs: Default::default(),
                    span: Span::default(),
                }));
            }
            let facts = |s: Option<Sizes>| {
                s.map(|s| (s.key, s.mem, s.dtype, s.free, s.partitions, s.total))
            };
            let mut v = Verifier::new(&m);
            for round in 0..3 {
                for k in 0..bufs.len() {
                    let b = bufs[(k * 7 + round * 3) % bufs.len()];
                    let d = &m.buffers[b];
                    let want = match (d.free_elements(), d.elements()) {
                        (Some(f), Some(t)) if f > 0 && t > 0 => Some((
                            u64::from(b.as_u32()) + 1,
                            d.mem,
                            d.dtype,
                            f,
                            d.partitions(),
                            t,
                        )),
                        _ => None,
                    };
                    assert_eq!(facts(v.sizes(b)), want, "buffer {}", b.as_u32());
                    assert_eq!(facts(Verifier::new(&m).sizes(b)), want);
                }
            }
            assert!(Verifier::new(&m)
                .sizes(crate::Buffer::from_u32(99))
                .is_none());
        }

        /// The patterns of a well-formed module are decided in 64 bits (the
        /// exact checks do not run on them).
        #[test]
        fn valid_patterns_are_decided_clean() {
            let (m, copy, _, read) = parsed();
            for op in [copy, read] {
                for o in &m.ops[op].operands {
                    assert!(decided_clean(&m, o), "{:?}", o.ap);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            #[test]
            fn never_passes_what_is_reported(
                mem in mem(),
                shape in proptest::collection::vec(size(), 0..4),
                dims in proptest::collection::vec((step(), num()), 0..6),
                offset in offset(),
                walk_partitions in any::<bool>(),
            ) {
                let mut dims = dims;
                // Often a partition step that is the partition free size,
                // so that the later rules are reached.
                let f = shape.iter().skip(1).try_fold(1u64, |a, &d| a.checked_mul(d));
                if let (true, Some(f), Some(d0)) = (walk_partitions, f, dims.first_mut()) {
                    d0.0 = i64::try_from(f).unwrap_or(d0.0);
                }
                let (m, o) = operand_on(mem, &shape, &dims, offset);
                if decided_clean(&m, &o) {
                    prop_assert!(reported_clean(&m, &o), "{shape:?} {dims:?} + {offset}");
                }
            }

            #[test]
            fn passes_what_small_terms_keep_inside(
                mem in mem(),
                shape in proptest::collection::vec(1u64..64, 0..4),
                dims in proptest::collection::vec((-3i64..40, 0u64..6), 0..6),
                offset in -2i64..3000,
                walk_partitions in any::<bool>(),
            ) {
                let mut dims = dims;
                let f: u64 = shape.iter().skip(1).product();
                if let (true, Some(d0)) = (walk_partitions, dims.first_mut()) {
                    d0.0 = f as i64;
                }
                let (m, o) = operand_on(mem, &shape, &dims, offset);
                prop_assert_eq!(decided_clean(&m, &o), reported_clean(&m, &o), "{:?} {:?} + {}", shape, dims, offset);
            }

            /// Where every product and sum fits 64 bits, the 64-bit decision
            /// is the exact one, on chip (the partition count and the
            /// offset's partition and element taken apart by one division)
            /// and off chip: offsets at and around partition boundaries,
            /// partition walks up to and past the last partition.
            #[test]
            fn decides_exactly_where_terms_fit_64_bits(
                mem in mem(),
                parts in prop_oneof![1u64..=4, 1u64..=300],
                free in proptest::collection::vec(prop_oneof![1u64..=4, 1u64..3000], 1..3),
                walk_partitions in any::<bool>(),
                p in (-3i64..100_000, prop_oneof![0u64..=4, 0u64..=302]),
                dims in proptest::collection::vec(
                    prop_oneof![(-50i64..50, 0u64..40), (-70_000i64..70_000, 0u64..2000)],
                    0..4,
                ),
                (q, e) in (0u64..310, prop_oneof![0u64..=4, 0u64..6000]),
                negative in proptest::bool::weighted(0.05),
                near in any::<bool>(),
            ) {
                let f: u64 = free.iter().product();
                let mut shape = vec![parts];
                shape.extend(&free);
                let (mut dims, mut p, mut q, mut e) = (dims, p, q, e);
                if near {
                    // Mostly inside, so that the last rules decide: each
                    // free dim within its share of the partition, the
                    // walk within a few partitions of the buffer's end.
                    let share = f / (dims.len() as u64 + 1);
                    for d in &mut dims {
                        let room = share / d.0.unsigned_abs().max(1);
                        d.1 = d.1.min(room + 1 + u64::from(d.1 % 7 == 0));
                    }
                    q %= parts + 1;
                    p.1 %= parts - q.min(parts) + 2;
                    e %= share + 2;
                }
                let p0 = (if walk_partitions { f as i64 } else { p.0 }, p.1);
                let mut all = vec![p0];
                all.extend(dims);
                let offset = if negative { -1 - e as i64 } else { (q * f + e) as i64 };
                let (m, o) = operand_on(mem, &shape, &all, offset);
                prop_assert_eq!(
                    decided_clean(&m, &o),
                    reported_clean(&m, &o),
                    "{:?} {:?} + {}", shape, all, offset
                );
            }

            #[test]
            fn isa_ops_clean_exactly_when_nothing_is_reported(
                arch in prop_oneof![Just(Arch::V2), Just(Arch::V3), Just(Arch::V4)],
                row in 0..IsaOp::all().count(),
                picks in proptest::collection::vec((0usize..12, 0usize..4), 0..6),
                complete in any::<bool>(),
            ) {
                let isa = IsaOp::all().nth(row).unwrap();
                let mut m = Module::new(arch);
                let kinds = [
                    (Memory::Sbuf, Dtype::F32),
                    (Memory::Psum, Dtype::F32),
                    (Memory::Hbm, Dtype::F32),
                    (Memory::Sbuf, Dtype::I32),
                ];
                let bufs: Vec<_> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, &(mem, dtype))| {
                        let name = m.sym(&format!("b{i}"));
                        let shape = if mem.is_on_chip() { [4u64, 8] } else { [1, 32] };
                        m.add_buffer(BufferData {
                            name,
                            mem,
                            partition: 0,
                            base: 0,
                            shape: shape.iter().copied().collect(),
                            dtype,
                            attrs: Default::default(),
                            span: Span::default(),
                        })
                    })
                    .collect();
                // Role names: the row's, then others' and unknown ones.
                let mut names: Vec<&str> = isa.info().roles.iter().map(|r| r.name).collect();
                names.extend(["dst", "src", "src0", "bias", "moving", "scr", "x"]);
                let ap = |mem: Memory| {
                    if mem.is_on_chip() {
                        AccessPattern::new(&[(8, 4), (1, 8)], 0)
                    } else {
                        AccessPattern::new(&[(1, 32)], 0)
                    }
                };
                let mut operands = Vec::new();
                if complete {
                    for (i, r) in isa.info().roles.iter().enumerate() {
                        let b = bufs[picks.get(i).map_or(0, |p| p.1)];
                        operands.push(m.operand(r.name, b, ap(m.buffers[b].mem)));
                    }
                } else {
                    for &(r, b) in &picks {
                        let b = bufs[b];
                        operands.push(m.operand(names[r % names.len()], b, ap(m.buffers[b].mem)));
                    }
                }
                let op = m.append_op(None, Module::op_data(OpKind::Isa(isa), operands));
                let clean = Verifier::new(&m).isa_operands_clean(isa, &m.ops[op]);
                let mut v = Verifier::new(&m);
                v.isa_operands(op, isa);
                prop_assert_eq!(clean.is_some(), v.diags.is_empty(), "{:?}", v.diags);
            }
        }
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
