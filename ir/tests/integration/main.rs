//! The integration tests of `apir-ir`, in one test binary (one link for
//! the crate instead of one per file).

mod api_modules;
mod common;
mod evaluator;
mod parser_robustness;
mod recycled_ops;
mod roundtrip;
mod sdma;
