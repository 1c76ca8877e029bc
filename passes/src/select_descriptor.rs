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

use crate::operands::{lower_operands, operand_error};
use apir_ir::lowering::{check_fit, check_index_window, role_choice, FitError, LoweringTally};
use apir_ir::target::{DescriptorKind, WindowForm};
use apir_ir::{
    Changed, Diagnostic, Diagnostics, LoweredForm, Module, Op, Pass, PassContext, PassInfo,
};

/// The select-descriptor pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct SelectDescriptor;

impl SelectDescriptor {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "select-descriptor",
        summary: "Attach each operand's descriptor kind from the op-encoder table and range-check its slots",
        options: &[],
        create: |_| Ok(Box::new(SelectDescriptor)),
    };
}

impl Pass for SelectDescriptor {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn op_local(&self) -> bool {
        true
    }

    fn attaches(&self) -> Option<LoweredForm> {
        Some(LoweredForm::Kind)
    }

    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(*self))
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let (mut selected, mut four_d) = (0, 0);
        let changed = lower_operands(m, select, |o, kind| {
            if o.lowered().and_then(|l| l.kind) == Some(kind) {
                return false;
            }
            o.lowered_mut().kind = Some(kind);
            selected += 1;
            four_d += u64::from(kind.slots() == 4);
            true
        });
        count(cx, selected, four_d);
        changed
    }

    fn lowered_counter(&self) -> Option<fn(&LoweringTally, &mut PassContext)> {
        Some(|t, cx| count(cx, t.operands, t.four_d))
    }
}

/// The pass's statistics for `selected` operands given a kind, `four_d`
/// of them a 4-slot one.
fn count(cx: &mut PassContext, selected: u64, four_d: u64) {
    if selected > 0 {
        cx.count(
            "operands-selected",
            "Number of operands given a descriptor kind",
            selected,
        );
    }
    if four_d > 0 {
        cx.count(
            "four-d-descriptors",
            "Number of 4D descriptors selected",
            four_d,
        );
    }
}

/// The descriptor kind of operand `i` of `op`, after every check the user
/// controls.
fn select(m: &Module, op: Op, i: usize) -> Result<Option<DescriptorKind>, Diagnostic> {
    let o = &m.ops[op].operands[i];
    let err = |msg: String| operand_error(m, op, i, msg);
    let choice = role_choice(m, op, i).map_err(|e| Diagnostic::error(o.span, e.to_string()))?;
    let mem = m.buffers[o.buffer].mem;
    if !choice.mems.contains(mem) {
        return Err(err(format!("may address {}, not {mem}", choice.mems)));
    }
    let Some(l) = o
        .lowered()
        .filter(|l| l.fold.is_some() && l.slots.is_some())
    else {
        return Err(err(
            "run fold-partition and compact-unit-dims before select-descriptor".into(),
        ));
    };
    let slots = l.slots.as_deref().unwrap_or_default();
    let byte = l.fold.map_or(0, |f| f.byte);
    match check_fit(slots, &choice, byte) {
        Ok(()) => {}
        // The reference error is reported verbatim, located at the operand.
        Err(e @ FitError::TooManyDims { .. }) => {
            let note = format!(
                "`{}` operand `{}` has {} surviving free dims; its {} has {} slots",
                m.ops[op].kind.name(),
                m.str(o.role),
                slots.len(),
                choice.kind,
                choice.kind.slots()
            );
            return Err(Diagnostic::error(o.span, e.to_string()).with_note(note, None));
        }
        Err(e) => return Err(err(e.to_string())),
    }
    if choice.form == WindowForm::TwoWindow {
        check_index_window(m, op, i).map_err(|e| err(e.to_string()))?;
    }
    Ok(Some(choice.kind))
}
