//! apir's criterion benchmarks live in `benches/` of this crate, apart
//! from the library crates so that `cargo test` never builds criterion:
//!
//! - `cargo bench -p apir-bench --bench encode_validate`: descriptor
//!   encode + validate through the library API, in descriptors per second
//!   on one core;
//! - `cargo bench -p apir-bench --bench parse_print`: parse, verify and
//!   print of a 100,000-op module from `apir-gen`'s generator, in ops per
//!   second.
//!
//! The library itself is empty.
