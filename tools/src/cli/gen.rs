//! `apir-gen`'s command line.

use apir_ir::Arch;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The largest `--ops` accepted: the module is built whole before it is
/// printed (about 1.2 KiB an op), so this many take about 2.3 GiB.
/// `tools/bench.sh` repeats the ops of a generated module for larger
/// inputs.
pub const MAX_OPS: usize = 2_000_000;

/// The largest `--kernels` accepted (about 3.6 KiB a kernel while the
/// module is built: this many take about 1.7 GiB, and with [`MAX_OPS`]
/// ops about 4 GiB).
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
