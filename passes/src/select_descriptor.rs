//! `select-descriptor`: attaches each operand's descriptor kind
//! (`kind<TENSOR<n>D | MEM_PATTERN<n>D>`) from the op-encoder table for the
//! module's arch (v4 writes 4D destinations with TENSOR4D; `isa.custom` uses
//! the string-keyed selector), then range-checks the compacted slots:
//! `active = 1 + surviving free dims <= N + 1` (else the reference's exact
//! `Illegal ISA memory access dimension` error), steps in i16, nums in
//! 1..=65535, and the validator rules the user controls (step 0 in slot 2, a
//! striding two-window source, a gather data window not 4-byte aligned).
//! Also rejects an op unavailable on the arch and a role in a memory its
//! encoder forbids.

use apir_ir::lowering::{check_fit, check_index_window, role_choice, FitError};
use apir_ir::target::WindowForm;
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, Pass, PassContext};

/// The select-descriptor pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct SelectDescriptor;

impl Pass for SelectDescriptor {
    fn name(&self) -> &'static str {
        "select-descriptor"
    }

    fn op_local(&self) -> bool {
        true
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut diags = Vec::new();
        let mut changed = Changed::No;
        for op in crate::isa_ops(m) {
            let opname = m.ops[op].kind.name();
            for i in 0..m.ops[op].operands.len() {
                let o = &m.ops[op].operands[i];
                let role = m.str(o.role);
                let err = |msg: String| {
                    Diagnostic::error(o.span, format!("`{opname}` operand `{role}`: {msg}"))
                };
                let choice = match role_choice(m, op, i) {
                    Ok(c) => c,
                    Err(msg) => {
                        diags.push(Diagnostic::error(o.span, msg));
                        continue;
                    }
                };
                let mem = m.buffers[o.buffer].mem;
                if !choice.mems.contains(mem) {
                    diags.push(err(format!("may address {}, not {mem}", choice.mems)));
                    continue;
                }
                let Some(l) = o
                    .lowered()
                    .filter(|l| l.fold.is_some() && l.slots.is_some())
                else {
                    diags.push(err(
                        "run fold-partition and compact-unit-dims before select-descriptor".into(),
                    ));
                    continue;
                };
                let slots = l.slots.as_deref().unwrap_or_default();
                let byte = l.fold.map_or(0, |f| f.byte);
                match check_fit(slots, &choice, byte) {
                    Ok(()) => {}
                    // The reference error is reported verbatim, located at the operand.
                    Err(e @ FitError::TooManyDims { .. }) => {
                        let note = format!(
                            "`{opname}` operand `{role}` has {} surviving free dims; its {} has {} slots",
                            slots.len(),
                            choice.kind,
                            choice.kind.slots()
                        );
                        diags.push(Diagnostic::error(o.span, e.to_string()).with_note(note, None));
                        continue;
                    }
                    Err(e) => {
                        diags.push(err(e.to_string()));
                        continue;
                    }
                }
                if choice.form == WindowForm::TwoWindow {
                    if let Err(msg) = check_index_window(m, op, i) {
                        diags.push(err(msg));
                        continue;
                    }
                }
                let o = &mut m.ops[op].operands[i];
                if o.lowered().and_then(|l| l.kind) != Some(choice.kind) {
                    o.lowered_mut().kind = Some(choice.kind);
                    changed = Changed::Yes;
                    cx.count(
                        "operands-selected",
                        "Number of operands given a descriptor kind",
                        1,
                    );
                    if choice.kind.slots() == 4 {
                        cx.count("four-d-descriptors", "Number of 4D descriptors selected", 1);
                    }
                }
            }
        }
        if diags.is_empty() {
            Ok(changed)
        } else {
            Err(diags)
        }
    }
}
