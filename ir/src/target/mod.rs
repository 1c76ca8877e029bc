//! The target model: every fact about the machine lives here and nowhere else.
//!
//! - [`arch`]: NeuronCore generations and their memory geometry (target.md §1);
//! - [`dtype`]: the element types and their codes (target.md §2);
//! - [`encoders`]: the op-encoder table (target.md §6), the single source of
//!   truth that the parser, verifier and lowering passes read;
//! - [`addr4`]: the ADDR4 start-address codec (target.md §3);
//! - [`descriptor`]: the TENSOR/MEM_PATTERN byte layouts (target.md §4);
//! - [`validate`]: the hardware model's validators (target.md §5);
//! - [`sdma`]: the 16-byte SDMA descriptor, its validator and transfer split,
//!   the dataram window and the memcpy methods (staging.md);
//! - [`abi`]: the reference runtime's staging struct layouts (staging.md
//!   "ABI layouts").

pub mod abi;
pub mod addr4;
pub mod arch;
pub mod cost;
pub mod descriptor;
pub mod dtype;
pub mod dump;
pub mod encoders;
pub mod sdma;
pub mod validate;

pub use arch::{Arch, Memory, MemorySet};
pub use dtype::Dtype;
pub use encoders::{
    AttrInfo, AttrKind, Core, DescriptorKind, Direction, DtypeRule, EncoderVariant, IsaOp, OpInfo,
    RoleInfo, WindowForm,
};
