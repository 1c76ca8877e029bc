//! The integration tests of `apir-tools`, in one test binary (one link for
//! the crate instead of one per file): the tools run as processes, the lit
//! suite (`lit_suite`), and the manifest checks.

mod dis_robustness;
mod help_examples;
mod lit;
mod manifest;
mod output_files;
mod streaming;
