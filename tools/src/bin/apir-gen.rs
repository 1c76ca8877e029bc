//! `apir-gen`: writes deterministic synthetic modules for benchmarks.

fn main() {}
