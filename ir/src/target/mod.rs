//! The target model: every fact about the machine lives here and nowhere else
//! (described in docs/hardware.md).
//!
//! - [`arch`]: NeuronCore generations and their memory geometry;
//! - [`dtype`]: the element types and their codes;
//! - [`encoders`]: the op-encoder table, the single source of
//!   truth that the parser, verifier and lowering passes read;
//! - [`ops`]: the op-definition table: every other op (`isa.custom`,
//!   buffers, kernels, accesses, staging-plan ops) and one view over all
//!   ops (placement, operand form, attributes);
//! - [`cost`]: the simulator parameters, their bounds and defaults;
//! - [`addr4`]: the ADDR4 start-address codec;
//! - [`descriptor`]: the TENSOR/MEM_PATTERN byte layouts;
//! - [`validate`]: the hardware model's validators;
//! - [`sdma`]: the 16-byte SDMA descriptor, its validator and transfer split,
//!   the dataram window and the memcpy methods;
//! - [`abi`]: the reference runtime's staging struct layouts.

pub mod abi;
pub mod addr4;
pub mod arch;
pub mod cost;
pub mod descriptor;
pub mod dtype;
pub mod dump;
pub mod encoders;
pub mod ops;
pub mod sdma;
pub mod validate;

pub use arch::{Arch, Memory, MemorySet};
pub use dtype::Dtype;
pub use encoders::{
    AttrInfo, AttrKind, Core, DescriptorKind, Direction, DtypeRule, EncoderVariant, IsaOp, OpInfo,
    RoleInfo, WindowForm,
};
pub use ops::{AttrDef, OpCode, OpDef, OperandForm, Parent, PlanOp, ValueKind};
