//! apir's driver layer: the pass registry (one explicit table), textual
//! pipelines, the pass manager, `--verify-diagnostics` matching, and the
//! embedding API ([`Compilation`]).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod expect;
pub mod gen;
pub mod manager;
pub mod pipeline;
pub mod registry;
pub mod stream;
pub mod wire;

pub use api::{describe, Compilation, DiagnosticInfo, Error};
pub use manager::{timing_text, Instrumentation, IrDump, PassManager, RunReport};
pub use pipeline::{Pipeline, PipelineEntry, PipelineError};
pub use registry::{NamedPipeline, PassInfo, Registry, NAMED_PIPELINES, PASSES};
