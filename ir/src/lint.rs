//! Warnings about IR the verifier accepts: things that are valid but most
//! likely not what was meant. The verifier reports errors only; these are
//! reported beside it, never stop a pipeline, and change nothing.
//!
//! - An attribute an op does not interpret (its row of the op-definition
//!   table, [`crate::target::ops`], does not list it) is kept and printed
//!   back, but does nothing: every such attribute is a warning, with the
//!   interpreted attribute it is most likely a misspelling of, if any
//!   (`axsi` on `isa.tensor_reduce`: did you mean `axis`?).
//! - An extra attribute on a buffer is kept by design (a front end's
//!   annotation); it is a warning only when it is close to an attribute of
//!   the buffer op (`partiton`).
//! - Staging-plan ops are not linted: an attribute their row does not list
//!   is an error of the plan's reader ([`crate::staging::KernelPlan::read`]).
//!
//! Drivers call [`lint`] once on a module that verified, before its first
//! pass (the pass manager does), or [`lint_buffer`] and [`lint_ops`] item
//! by item in program order (a streaming driver); both give the same
//! warnings in the same order. A driver that shows at most so many
//! warnings walks with [`Lints::within`] instead: the same first warnings,
//! the rest counted without being built.

use crate::diag::{Diagnostic, Diagnostics};
use crate::module::{Item, Module, OpKind};
use crate::target::encoders::short_eq;
use crate::{Buffer, Op};

/// Every warning about `m`, in program order (a kernel before its body).
/// Never panics, even on a module that does not verify.
pub fn lint(m: &Module) -> Diagnostics {
    let mut l = Lints::all();
    l.module(m);
    l.kept
}

/// The warnings about buffer `b` (for drivers that go item by item).
pub fn lint_buffer(m: &Module, b: Buffer) -> Diagnostics {
    let mut l = Lints::all();
    l.buffer(m, b);
    l.kept
}

/// The warnings about top-level ops `top` and their regions, in program
/// order (for drivers that go item by item).
pub fn lint_ops(m: &Module, top: impl IntoIterator<Item = Op>) -> Diagnostics {
    let mut l = Lints::all();
    l.ops(m, top);
    l.kept
}

/// Lint warnings as they are found, in program order: the first `room`
/// are built in full, every one after them is only counted. Building a
/// warning (its suggestion, its message and note) is nearly all of its
/// cost, so a driver that shows a bounded number of warnings pays a count
/// for each one past them: a module with a warning on every op costs
/// about what it would without them. [`lint`], [`lint_buffer`] and
/// [`lint_ops`] are these walks with no limit.
#[derive(Debug)]
pub struct Lints {
    kept: Diagnostics,
    room: usize,
    omitted: usize,
}

impl Lints {
    /// Every warning kept.
    pub fn all() -> Self {
        Lints::within(usize::MAX)
    }

    /// At most `room` warnings kept, the rest counted.
    pub fn within(room: usize) -> Self {
        Lints {
            kept: Diagnostics::new(),
            room,
            omitted: 0,
        }
    }

    /// The warnings about `m`, as [`lint`].
    pub fn module(&mut self, m: &Module) {
        let mut seen = vec![false; m.ops.id_bound()];
        for item in &m.body {
            match *item {
                Item::Buffer(b) => self.buffer(m, b),
                Item::Op(op) => ops(m, op, &mut seen, self),
            }
        }
    }

    /// The warnings about buffer `b`, as [`lint_buffer`].
    pub fn buffer(&mut self, m: &Module, b: Buffer) {
        buffer(m, b, self);
    }

    /// The warnings about top-level ops `top`, as [`lint_ops`].
    pub fn ops(&mut self, m: &Module, top: impl IntoIterator<Item = Op>) {
        let mut seen = vec![false; m.ops.id_bound()];
        for op in top {
            ops(m, op, &mut seen, self);
        }
    }

    /// The warnings kept, in order, and how many more were found.
    pub fn into_parts(self) -> (Diagnostics, usize) {
        (self.kept, self.omitted)
    }

    /// A warning found: `build` makes it if it is kept.
    fn found(&mut self, build: impl FnOnce() -> Diagnostic) {
        if self.kept.len() < self.room {
            self.kept.push(build());
        } else {
            self.omitted = self.omitted.saturating_add(1);
        }
    }
}

fn buffer(m: &Module, b: Buffer, out: &mut Lints) {
    let Some(data) = m.buffers.get(b) else {
        return;
    };
    if data.attrs.is_empty() {
        return;
    }
    let def = crate::target::OpCode::Buffer(data.mem).def();
    for k in data.attrs.keys() {
        if !m.symbols.contains(*k) {
            continue;
        }
        let key = m.str(*k);
        // A buffer's extra attribute is a warning only with a suggestion:
        // finding it decides, so it is found for every one.
        if let Some(c) = crate::diag::did_you_mean(key, def.attrs.iter().map(|a| a.name)) {
            out.found(|| {
                // The buffer by name: a buffer built in code has no span
                // to show, and a warning has no subject but an op.
                Diagnostic::warning(
                    data.span,
                    format!(
                        "unknown attribute `{key}` on buffer `%{}` (`{}`); did you mean `{c}`?",
                        m.str(data.name),
                        def.name
                    ),
                )
            });
        }
    }
}

/// `op` and the ops of its region, each once.
fn ops(m: &Module, op: Op, seen: &mut [bool], out: &mut Lints) {
    // An op with no attributes and no region, nearly every op, has nothing
    // to lint: it is passed over without the walk below.
    if m.ops
        .get(op)
        .is_some_and(|d| d.attrs.is_empty() && !matches!(d.kind, OpKind::Kernel { .. }))
    {
        return;
    }
    // The body of the op, if it is a kernel seen for the first time: only
    // kernels need a stack (an ISA op is linted without allocating).
    let mut visit = |op: Op, out: &mut Lints| -> Option<crate::Block> {
        let data = m.ops.get(op)?;
        match seen.get_mut(op.as_u32() as usize) {
            Some(s) if !*s => *s = true,
            _ => return None,
        }
        attributes(m, op, out);
        match data.kind {
            OpKind::Kernel { body, .. } => Some(body),
            _ => None,
        }
    };
    let Some(body) = visit(op, out) else { return };
    let mut stack: Vec<Op> = Vec::new();
    let push = |stack: &mut Vec<Op>, body: crate::Block| {
        if let Some(b) = m.blocks.get(body) {
            stack.extend(b.ops.iter().rev());
        }
    };
    push(&mut stack, body);
    while let Some(op) = stack.pop() {
        if let Some(body) = visit(op, out) {
            push(&mut stack, body);
        }
    }
}

/// An attribute the op does not interpret.
fn attributes(m: &Module, op: Op, out: &mut Lints) {
    let data = &m.ops[op];
    if data.attrs.is_empty() || matches!(data.kind, OpKind::Plan(_)) {
        return;
    }
    let def = data.kind.code().def();
    for k in data.attrs.keys() {
        if !m.symbols.contains(*k) {
            continue;
        }
        let key = m.str(*k);
        if def.attrs.iter().any(|a| short_eq(a.name, key)) {
            continue;
        }
        // Every attribute the op does not interpret is a warning, with a
        // suggestion or without: one kept is built, one past them counted.
        out.found(|| {
            let known = def.attrs.iter().map(|a| a.name);
            let message = match crate::diag::did_you_mean(key, known) {
                Some(c) => format!(
                    "unknown attribute `{key}` on `{}`; did you mean `{c}`?",
                    def.name
                ),
                None => format!("unknown attribute `{key}` on `{}`", def.name),
            };
            let interprets = if def.attrs.is_empty() {
                format!("`{}` interprets no attribute", def.name)
            } else {
                let names: Vec<String> =
                    def.attrs.iter().map(|a| format!("`{}`", a.name)).collect();
                format!("`{}` interprets {}", def.name, names.join(", "))
            };
            Diagnostic::warning(data.span, message)
                .with_note(format!("it is kept as written; {interprets}"), None)
                .about(m.origin(op), def.name, None)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Severity;

    fn parsed(text: &str) -> Module {
        crate::parse_str("t.apir", text, crate::ParseOptions::default())
            .unwrap_or_else(|(d, _)| panic!("{d:?}"))
            .0
    }

    const TEXT: &str = "module attributes {arch = \"v2\"} {
  %x = mem.sbuf {partition = 0, byte = 0, partiton = 1, origin = \"fe\"} : tile<4x4xf32>
  isa.tensor_reduce dst = %x[[4, 4], [1, 1]], src = %x[[4, 4], [1, 4]] {op = \"add\", axsi = \"XY\"}
  isa.tensor_copy dst = %x[[4, 4], [1, 4]], src = %x[[4, 4], [1, 4]] {note = \"kept\"}
  isa.custom dst = %x[[4, 4], [1, 4]] as \"NEURON_ISA_TPB_TENSOR1D\" {name = \"k\", nmae = \"k\"}
  %h = mem.hbm {addr = 0} : tensor<16xf32>
  gpsimd.kernel @k {core = 0, cycles_per_elem = 2} {
    gpsimd.read %h[[1, 16]] {acessor = \"tcm\"}
  }
}
";

    /// A walk that keeps `room` warnings keeps the first `room` of the
    /// unlimited walk's, identical, and counts the others; item by item
    /// in one walk it finds what [`lint`] finds.
    #[test]
    fn a_walk_within_room_keeps_the_first_and_counts_the_rest() {
        let m = parsed(TEXT);
        let all = lint(&m);
        assert_eq!(all.len(), 6);
        for room in 0..=7 {
            let mut l = Lints::within(room);
            l.module(&m);
            let (kept, omitted) = l.into_parts();
            assert_eq!(kept, all[..room.min(6)], "room {room}");
            assert_eq!(omitted, 6 - room.min(6), "room {room}");
        }
        let mut l = Lints::within(3);
        for item in &m.body {
            match *item {
                Item::Buffer(b) => l.buffer(&m, b),
                Item::Op(op) => l.ops(&m, [op]),
            }
        }
        let (kept, omitted) = l.into_parts();
        assert_eq!((kept.as_slice(), omitted), (&all[..3], 3));
    }

    /// Past its room a walk counts a warning without building it.
    #[test]
    fn warnings_past_the_room_are_not_built() {
        let mut l = Lints::within(2);
        let mut built = 0;
        for _ in 0..5 {
            l.found(|| {
                built += 1;
                Diagnostic::warning(None, "w")
            });
        }
        assert_eq!(built, 2);
        let (kept, omitted) = l.into_parts();
        assert_eq!((kept.len(), omitted), (2, 3));
    }

    /// A misspelt attribute gets the one it most likely means, any other
    /// unknown attribute a plain warning; a buffer's extra attribute only
    /// when it is close to a buffer attribute. The module still verifies.
    #[test]
    fn unknown_attributes_are_warnings() {
        let m = parsed(TEXT);
        assert!(crate::verify(&m).is_ok());
        let w = lint(&m);
        let messages: Vec<&str> = w.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "unknown attribute `partiton` on buffer `%x` (`mem.sbuf`); did you mean `partition`?",
                "unknown attribute `axsi` on `isa.tensor_reduce`; did you mean `axis`?",
                "unknown attribute `note` on `isa.tensor_copy`",
                "unknown attribute `nmae` on `isa.custom`; did you mean `name`?",
                "unknown attribute `cycles_per_elem` on `gpsimd.kernel`; did you mean `cycles_per_element`?",
                "unknown attribute `acessor` on `gpsimd.read`; did you mean `accessor`?",
            ]
        );
        assert!(w.iter().all(|d| d.severity == Severity::Warning));
        assert_eq!(
            w[1].notes[0].0,
            "it is kept as written; `isa.tensor_reduce` interprets `op`, `axis`"
        );
        assert_eq!(
            w[2].notes[0].0,
            "it is kept as written; `isa.tensor_copy` interprets no attribute"
        );
    }

    /// Item by item, in program order, gives the same warnings.
    #[test]
    fn item_by_item_gives_the_same_warnings() {
        let m = parsed(TEXT);
        let mut items = Diagnostics::new();
        for item in &m.body {
            match *item {
                Item::Buffer(b) => items.extend(lint_buffer(&m, b)),
                Item::Op(op) => items.extend(lint_ops(&m, [op])),
            }
        }
        assert_eq!(items, lint(&m));
    }

    /// Plan ops are the plan reader's; a module that does not verify is
    /// linted without a panic.
    #[test]
    fn plan_ops_and_broken_modules() {
        let mut m = parsed(TEXT);
        m.body.push(Item::Op(Op::from_u32(1000)));
        m.body.push(Item::Buffer(Buffer::from_u32(1000)));
        assert_eq!(lint(&m).len(), 6);
    }

    /// Removing an op leaves a gap in the ids: the ops after it are still
    /// linted.
    #[test]
    fn ops_past_a_removed_id_are_linted() {
        let mut m = parsed(TEXT);
        let first = m.top_ops().next().expect("an op");
        let before = lint(&m).len();
        let gone = lint_ops(&m, [first]).len();
        m.remove_op(first);
        assert_eq!(lint(&m).len(), before - gone);
        assert!(m.ops.id_bound() > m.ops.len());
    }
}
