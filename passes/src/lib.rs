//! apir's passes, one file per pass, named after it (`fold-partition` <->
//! `fold_partition.rs` <-> `lit-tests/fold-partition/`). The registry that
//! names them lives in `apir-compiler`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod canonicalize_ap;
pub mod check_coherency;
pub mod compact_unit_dims;
pub mod encode_wire;
pub mod fold_partition;
mod operands;
pub mod schedule_staging;
pub mod select_descriptor;
pub mod staging;

pub use canonicalize_ap::CanonicalizeAp;
pub use check_coherency::CheckCoherency;
pub use compact_unit_dims::CompactUnitDims;
pub use encode_wire::EncodeWire;
pub use fold_partition::FoldPartition;
pub use schedule_staging::ScheduleStaging;
pub use select_descriptor::SelectDescriptor;
