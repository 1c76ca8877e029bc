//! `compact-unit-dims`: drops free dims with `num = 1` and records the
//! survivors innermost first (`slots<[s, n], ...>`, slot 0 = innermost), as
//! the reference packer does. It never reorders dims and never touches the
//! partition axis (pair 0 of an on-chip operand). Re-running it changes
//! nothing.

use crate::operands::lower_operands;
use apir_ir::lowering::{free_dims, slots_of, LoweringTally};
use apir_ir::{Changed, Diagnostics, LoweredForm, Module, Pass, PassContext, PassInfo};

/// The compact-unit-dims pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct CompactUnitDims;

impl CompactUnitDims {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "compact-unit-dims",
        summary: "Drop free dims with num = 1 and record the surviving slots innermost first",
        options: &[],
        create: |_| Ok(Box::new(CompactUnitDims)),
    };
}

impl Pass for CompactUnitDims {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn op_local(&self) -> bool {
        true
    }

    fn attaches(&self) -> Option<LoweredForm> {
        Some(LoweredForm::Slots)
    }

    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(*self))
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let (mut compacted, mut dropped_total) = (0, 0);
        let changed = lower_operands(
            m,
            |m, op, i| {
                let o = &m.ops[op].operands[i];
                let slots = slots_of(m, o);
                let dropped = free_dims(m, o).len() - slots.len();
                Ok(Some((slots, dropped)))
            },
            |o, (slots, dropped)| {
                if o.lowered().and_then(|l| l.slots.as_ref()) == Some(&slots) {
                    return false;
                }
                o.lowered_mut().slots = Some(slots);
                compacted += 1;
                dropped_total += dropped as u64;
                true
            },
        );
        count(cx, compacted, dropped_total);
        changed
    }

    fn lowered_counter(&self) -> Option<fn(&LoweringTally, &mut PassContext)> {
        Some(|t, cx| count(cx, t.operands, t.unit_dims_dropped))
    }
}

/// The pass's statistics for `compacted` operands given slots, which
/// dropped `dropped` unit dims in all.
fn count(cx: &mut PassContext, compacted: u64, dropped: u64) {
    if compacted > 0 {
        cx.count(
            "operands-compacted",
            "Number of operands given slots",
            compacted,
        );
        cx.count(
            "unit-dims-dropped",
            "Number of free dims with num = 1 dropped",
            dropped,
        );
    }
}
