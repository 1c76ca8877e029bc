//! `apir-gen`'s command line.

use apir_ir::Arch;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The largest `--ops` accepted: the module is built, verified and
/// printed a batch of ops at a time, so memory does not grow with it; this
/// many make about 130 GB of apir text.
pub const MAX_OPS: usize = 1_000_000_000;

/// The largest `--distinct-shapes` accepted: the pool of shapes is held
/// whole (a few hundred bytes a shape).
pub const MAX_SHAPES: usize = 2_000_000;

/// The largest `--kernels` accepted (kernels are printed a batch at a time
/// too; this many take the staging passes a few minutes to plan).
pub const MAX_KERNELS: usize = 500_000;

/// The output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// apir IR text.
    Apir,
    /// Generic-form MLIR for `mlir-opt --allow-unregistered-dialect`.
    Mlir,
    /// The lightest MLIR form: one `ap = array<i64: ...>` attribute per op
    /// with every number of its operands, no buffers, no SSA operands.
    MlirLight,
}

/// Write a deterministic synthetic module: valid IR that lowers without errors.
#[derive(Parser, Debug)]
#[command(
    name = "apir-gen",
    version,
    after_help = "Examples:\n  apir-gen --ops 1000 --seed 1\n  apir-gen --ops 100000 --seed 7 -o 100k.apir\n  apir-gen --ops 100000 --seed 7 --format mlir -o 100k.mlir\n  apir-gen --ops 100000 --seed 7 --format mlir-light -o 100k-light.mlir\n  apir-gen --ops 100000 --seed 3 --arch v4 --distinct-shapes 1000 --kernels 8\n\nThe same options always give the same output.\nExit codes: 0 success, 1 the output could not be written, 2 bad usage, 3 internal error."
)]
pub struct Args {
    /// Number of ISA ops to generate.
    #[arg(long, value_name = "N")]
    pub ops: usize,
    /// Seed of the pseudo-random stream.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Target arch (picks the available ops and the SBUF size).
    #[arg(long, value_parser = crate::arch_parser(), default_value = "v2")]
    pub arch: Arch,
    /// Draw the ops' access-pattern shapes from K distinct shapes.
    #[arg(long, value_name = "K")]
    pub distinct_shapes: Option<usize>,
    /// Add M `gpsimd.kernel` ops, each reading and writing HBM tensors.
    #[arg(long, value_name = "M", default_value_t = 0)]
    pub kernels: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "apir")]
    pub format: Format,
    /// Output file (written completely or not at all); default stdout.
    #[arg(short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
}
