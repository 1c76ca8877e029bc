//! apir's passes, one file per pass, named after it (`fold-partition` <->
//! `fold_partition.rs` <-> `lit-tests/fold-partition/`). The registry that
//! names them lives in `apir-compiler`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod compact_unit_dims;
pub mod encode_wire;
pub mod fold_partition;
pub mod select_descriptor;

pub use compact_unit_dims::CompactUnitDims;
pub use encode_wire::EncodeWire;
pub use fold_partition::FoldPartition;
pub use select_descriptor::SelectDescriptor;

use apir_ir::{Module, Op, OpKind};

/// The ISA ops (table ops and `isa.custom`) of a module in program order:
/// the ops whose operands the lowering passes rewrite.
pub(crate) fn isa_ops(m: &Module) -> Vec<Op> {
    m.top_ops()
        .filter(|&op| matches!(m.ops[op].kind, OpKind::Isa(_) | OpKind::Custom))
        .collect()
}
