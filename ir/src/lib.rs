//! apir's IR: entities and arenas, access patterns, the text format (parser
//! and printer), the verifier, diagnostics, the target model and the
//! reference evaluator, plus the [`Pass`] trait every pass implements.
//!
//! ```
//! use apir_ir::{parse_str, print_module, verify, ParseOptions};
//! let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %x[[64, 128], [1, 64]]\n}\n";
//! let (module, _sources) = parse_str("k.apir", text, ParseOptions::default()).unwrap();
//! verify(&module).unwrap();
//! assert_eq!(print_module(&module), text);
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod arena;
pub mod diag;
pub mod eval;
pub mod intern;
pub mod lint;
pub mod lowering;
pub mod module;
pub mod parser;
pub mod pass;
pub mod plan;
pub mod printer;
pub mod source;
pub mod staging;
pub mod target;
pub mod text;
pub mod verify;

pub use diag::{
    render_all, render_all_styled, Bounded, Diagnostic, DiagnosticLimit, Diagnostics, Omitted,
    Severity, Subject,
};
pub use eval::{logical_addresses, logical_walk, Address, Walk};
pub use intern::{Interner, Symbol};
pub use lint::{lint, lint_buffer, lint_ops, Lints};
pub use module::{
    AccessPattern, Arena, Attr, Attrs, Block, Buffer, BufferData, Dim, Dims, Fold, Item, Lowered,
    LoweredForm, Module, Op, OpData, OpKind, Operand, Place,
};
pub use parser::{parse_module, parse_str, split_input, ParseOptions, StreamParser, StreamState};
pub use pass::{
    Changed, OptionError, OptionInfo, Pass, PassContext, PassInfo, PassOptions, Statistic,
    Statistics,
};
pub use printer::print_module;
pub use source::{FileId, Locator, SourceMap, Span};
pub use target::{Arch, Dtype, Memory};
pub use verify::{
    verify, verify_batch, verify_buffer, verify_lowered, verify_lowered_form, verify_ops,
};
