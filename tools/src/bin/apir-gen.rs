//! `apir-gen`: writes deterministic synthetic modules for benchmarks and fuzz
//! seeds, as apir IR text or as a generic-form MLIR file carrying the same
//! operands (the `mlir-opt` baseline of `tools/bench.sh`).

use apir_compiler::gen::{generate, print_generic_mlir, GenOptions};
use apir_ir::{print_module, verify, Arch};
use apir_tools::{write_output, write_stdout, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The largest `--ops` accepted (op ids are 32-bit).
const MAX_OPS: usize = 100_000_000;

/// The output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// apir IR text.
    Apir,
    /// Generic-form MLIR for `mlir-opt --allow-unregistered-dialect`.
    Mlir,
}

/// Write a deterministic synthetic module: valid IR that lowers without errors.
#[derive(Parser, Debug)]
#[command(
    name = "apir-gen",
    version,
    after_help = "Examples:\n  apir-gen --ops 1000 --seed 1\n  apir-gen --ops 1000000 --seed 7 -o target/bench/1m.apir\n  apir-gen --ops 1000000 --seed 7 --format mlir -o target/bench/1m.mlir\n  apir-gen --ops 100000 --seed 3 --arch v4 --distinct-shapes 1000 --kernels 8\n\nThe same options always give the same output.\nExit codes: 0 success, 1 the output could not be written, 2 bad usage, 3 internal error."
)]
struct Args {
    /// Number of ISA ops to generate.
    #[arg(long, value_name = "N")]
    ops: usize,
    /// Seed of the pseudo-random stream.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Target arch (picks the available ops and the SBUF size).
    #[arg(long, value_parser = apir_tools::arch_parser(), default_value = "v2")]
    arch: Arch,
    /// Draw the ops' access-pattern shapes from K distinct shapes.
    #[arg(long, value_name = "K")]
    distinct_shapes: Option<usize>,
    /// Add M `gpsimd.kernel` ops, each reading and writing HBM tensors.
    #[arg(long, value_name = "M", default_value_t = 0)]
    kernels: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "apir")]
    format: Format,
    /// Output file (written completely or not at all); default stdout.
    #[arg(short = 'o', value_name = "OUT")]
    output: Option<PathBuf>,
}

fn main() {
    apir_tools::cli_main("apir-gen", run)
}

fn run(args: Args) -> i32 {
    if args.ops > MAX_OPS || args.kernels > MAX_OPS {
        eprintln!("error: at most {MAX_OPS} ops and {MAX_OPS} kernels can be generated");
        return EXIT_USAGE;
    }
    if args
        .distinct_shapes
        .is_some_and(|k| !(1..=MAX_OPS).contains(&k))
    {
        eprintln!("error: --distinct-shapes must be in [1, {MAX_OPS}]");
        return EXIT_USAGE;
    }
    let opts = GenOptions {
        ops: args.ops,
        seed: args.seed,
        arch: args.arch,
        distinct_shapes: args.distinct_shapes,
        kernels: args.kernels,
    };
    let module = generate(&opts);
    if let Err(diags) = verify(&module) {
        let first = diags.first().map_or("", |d| d.message.as_str());
        eprintln!("internal error: apir-gen produced a module that fails verification ({} problems; first: {first})\nThis is a bug in apir; please report it with the command line.", diags.len());
        return EXIT_INTERNAL;
    }
    let text = match args.format {
        Format::Apir => print_module(&module),
        Format::Mlir => print_generic_mlir(&module),
    };
    let written = match &args.output {
        Some(path) => write_output(path, text.as_bytes()),
        None => write_stdout(text.as_bytes()),
    };
    match written {
        Ok(()) => EXIT_OK,
        Err(msg) => {
            eprintln!("{msg}");
            EXIT_INPUT
        }
    }
}
