//! apir's driver layer: the pass registry (one explicit table), textual
//! pipelines, the pass manager, `--verify-diagnostics` matching, the
//! embedding API ([`Compilation`]), and `apir-opt`'s whole behaviour as a
//! library ([`driver`]).
//!
//! The wire library is reachable from here without any IR text
//! ([`target`]: ADDR4 codec, descriptor layouts, validators). Encode a
//! descriptor, then check its bytes with the independent validator:
//!
//! ```
//! use apir_compiler::target::addr4::{Addr4, Form};
//! use apir_compiler::target::descriptor::Descriptor;
//! use apir_compiler::target::validate::mem_nd_valid;
//! use apir_compiler::target::{Arch, DescriptorKind, Dtype, Memory, MemorySet};
//!
//! // A 4D destination in PSUM, partition 0, walking 512 contiguous f32.
//! let addr = Addr4 { mem: Memory::Psum, partition: 0, byte: 0, form: Form::Plain }.encode(Arch::V2).unwrap();
//! let mut d = Descriptor::unit(DescriptorKind::MemPattern(4), addr);
//! d.nums[0] = 512;
//! let bytes = d.encode();
//! assert_eq!(bytes.len(), 20);
//! assert_eq!(&bytes[0xC..0xE], &512u16.to_le_bytes()); // num0 at +0xC
//! mem_nd_valid(&bytes, d.kind, Dtype::F32, Arch::V2, MemorySet::SP).unwrap();
//! assert_eq!(Descriptor::decode(d.kind, &bytes).unwrap(), d);
//! ```
//!
//! A module built in code goes through the same pipeline as IR text:
//!
//! ```
//! use apir_compiler::{wire, Compilation};
//! use apir_compiler::target::{Arch, Dtype, IsaOp, Memory};
//! use apir_ir::{AccessPattern, Module, OpKind};
//!
//! let mut m = Module::new(Arch::V3);
//! let x = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
//! let x = m.add_buffer(x);
//! let dst = m.operand("dst", x, AccessPattern::new(&[(64, 128), (1, 64)], 0));
//! m.add_op(Module::op_data(OpKind::Isa(IsaOp::from_name("isa.memset").unwrap()), [dst]));
//! let mut c = Compilation::from_module(m);
//! c.run("lower-to-wire").unwrap();
//! let ops = wire::collect(&c.module, &c.sources).unwrap();
//! assert_eq!(wire::hex_lines(&ops), "0 dst MEM_PATTERN4D 128 0000000001000100010001004000010001000100\n");
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod driver;
pub mod expect;
pub mod gen;
pub mod manager;
pub mod pipeline;
pub mod registry;
pub mod schedule;
pub mod stream;
pub mod timeline;
pub mod wire;

pub use api::{describe, Compilation, DiagnosticInfo, Error};
pub use apir_ir::target;
pub use manager::{reverify, timing_text, Instrumentation, IrDump, PassManager, RunReport};
pub use pipeline::{Pipeline, PipelineEntry, PipelineError};
pub use registry::{NamedPipeline, PassInfo, Registry, NAMED_PIPELINES, PASSES};
