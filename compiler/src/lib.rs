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
//! This crate is the one to depend on: it re-exports the IR types a
//! module is built from ([`Module`], [`AccessPattern`], [`OpKind`], ...),
//! the target model ([`target`]) and the whole IR crate as [`ir`].
//!
//! Build a module in code, lower it, and read and validate its bytes:
//!
//! ```
//! use apir_compiler::target::validate::mem_nd_valid;
//! use apir_compiler::target::{IsaOp, MemorySet};
//! use apir_compiler::{wire, AccessPattern, Arch, Compilation, Dtype, Memory, Module, OpKind};
//!
//! let mut m = Module::new(Arch::V3);
//! let x = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
//! let x = m.add_buffer(x);
//! let dst = m.operand("dst", x, AccessPattern::new(&[(64, 128), (1, 64)], 0));
//! let memset = IsaOp::from_name("isa.memset").unwrap();
//! m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
//! let mut c = Compilation::from_module(m);
//! c.run("lower-to-wire").unwrap();
//! let ops = wire::collect(&c.module, &c.sources).unwrap();
//! assert_eq!(wire::hex_lines(&ops), "0 dst MEM_PATTERN4D 128 0000000001000100010001004000010001000100\n");
//! let d = &ops[0].operands[0];
//! mem_nd_valid(&d.bytes, d.kind, d.dtype, Arch::V3, MemorySet::SP).unwrap();
//! ```
//!
//! Plan a GpSimd kernel's HBM staging and read its SDMA descriptors:
//!
//! ```
//! use apir_compiler::target::sdma::{validate, SdmaDescriptor};
//! use apir_compiler::{schedule, Compilation};
//!
//! let text = r#"module attributes {arch = "v2"} {
//!   %in  = mem.hbm {addr = 0x40000000} : tensor<65536xf32>
//!   %out = mem.hbm {addr = 0x40100000} : tensor<65536xf32>
//!   gpsimd.kernel @relu {core = 0, cycles_per_element = 2} {
//!     gpsimd.read  %in[[1, 65536]]
//!     gpsimd.write %out[[1, 65536]]
//!   }
//! }
//! "#;
//! let mut c = Compilation::parse("relu.apir", text, None).unwrap();
//! c.run("lower-staging").unwrap();
//! let kernels = schedule::collect(&c.module, &c.sources).unwrap();
//! let relu = &kernels[0];
//! assert!(relu.schedule.figures.makespan_ns >= relu.bound.ns);
//! let sdma: Vec<_> = relu.descriptors.iter().filter_map(|d| d.hex.as_ref().map(|h| (d, h))).collect();
//! assert!(!sdma.is_empty());
//! for (d, hex) in sdma {
//!     let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
//!     validate(&bytes).unwrap();
//!     let desc = SdmaDescriptor::decode(&bytes).unwrap();
//!     assert_eq!((desc.length, desc.hbm, desc.dram), (d.bytes, d.hbm, d.dram));
//! }
//! ```
//!
//! A module built in code has no source text, so its diagnostics say
//! which op and operand they are about instead of a line and column:
//!
//! ```
//! use apir_compiler::target::IsaOp;
//! use apir_compiler::{AccessPattern, Arch, Compilation, Dtype, Error, Memory, Module, OpKind, Severity};
//!
//! let mut m = Module::new(Arch::V2);
//! let x = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
//! let x = m.add_buffer(x);
//! // 65 elements per partition: one more than the buffer holds.
//! let dst = m.operand("dst", x, AccessPattern::new(&[(64, 128), (1, 65)], 0));
//! let op = m.add_op(Module::op_data(OpKind::Isa(IsaOp::from_name("isa.memset").unwrap()), [dst]));
//! let mut c = Compilation::from_module(m);
//! let Err(Error::Diagnostics(diags)) = c.run("lower-to-wire") else { panic!("rejected") };
//! let info = &c.describe(&diags)[0];
//! assert_eq!(info.severity, Severity::Error);
//! assert_eq!(info.location, None);
//! let subject = info.subject.as_ref().unwrap();
//! assert_eq!((subject.op, subject.name, subject.role.as_deref()), (op, "isa.memset", Some("dst")));
//! assert!(c.render(&diags).contains("in op #0 (isa.memset), operand dst"));
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod chunked;
pub mod driver;
pub mod emit;
pub mod expect;
pub mod manager;
pub mod pipeline;
pub mod registry;
pub mod stream;

pub use api::{describe, Compilation, DiagnosticInfo, Error, Location, ParseError};
pub use apir_ir as ir;
pub use apir_ir::target;
pub use apir_ir::{
    AccessPattern, Arch, Attr, Attrs, Block, Buffer, BufferData, Diagnostic, Diagnostics, Dim,
    Dims, Dtype, Memory, Module, Op, OpData, OpKind, Operand, Severity, SourceMap, Span, Subject,
};
pub use emit::{schedule, timeline, wire};
pub use manager::{
    reverify, timing_text, BatchFailure, Instrumentation, IrDump, PassManager, RunReport,
};
pub use pipeline::{Pipeline, PipelineEntry, PipelineError};
pub use registry::{NamedPipeline, PassInfo, Registry, NAMED_PIPELINES, PASSES};
