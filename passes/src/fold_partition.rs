//! `fold-partition`: moves pair 0 of every on-chip operand into start fields
//! and a channel count (`fold<partition = P, byte = B, channels = C>`).
//!
//! Start partition = `buffer.partition + offset / F`, start byte =
//! `buffer.byte + (offset % F) * elem`, channels = `n0` (docs/ir.md, docs/hardware.md).
//! Errors, each naming the op, the role and the values: negative partition
//! step; partition step not equal to the partition free size while `n0 > 1`;
//! start + channels over 128; partition start rule broken; channels 0; start
//! byte not aligned to the dtype. HBM operands have no partition axis and are
//! left alone. Re-running the pass changes nothing.

use crate::operands::{lower_operands, operand_error};
use apir_ir::lowering::{fold_of, LoweringTally};
use apir_ir::{Changed, Diagnostics, LoweredForm, Module, Pass, PassContext, PassInfo};

/// The fold-partition pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct FoldPartition;

impl FoldPartition {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "fold-partition",
        summary: "Fold the partition axis (pair 0) into start partition, byte and channel count",
        options: &[],
        create: |_| Ok(Box::new(FoldPartition)),
    };
}

impl Pass for FoldPartition {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn op_local(&self) -> bool {
        true
    }

    fn attaches(&self) -> Option<LoweredForm> {
        Some(LoweredForm::Fold)
    }

    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(*self))
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut folded = 0;
        let changed = lower_operands(
            m,
            |m, op, i| fold_of(m, &m.ops[op].operands[i]).map_err(|e| operand_error(m, op, i, e)),
            |o, fold| {
                if o.lowered().and_then(|l| l.fold) == Some(fold) {
                    return false;
                }
                o.lowered_mut().fold = Some(fold);
                folded += 1;
                true
            },
        );
        count(cx, folded);
        changed
    }

    fn lowered_counter(&self) -> Option<fn(&LoweringTally, &mut PassContext)> {
        Some(|t, cx| count(cx, t.operands))
    }
}

/// The pass's statistics for `folded` operands given a fold.
fn count(cx: &mut PassContext, folded: u64) {
    if folded > 0 {
        cx.count(
            "operands-folded",
            "Number of operands whose partition axis was folded",
            folded,
        );
    }
}
