//! `apir-gen`: writes deterministic synthetic modules for benchmarks and fuzz
//! seeds, as apir IR text or as an MLIR file carrying the same operands
//! (generic form, or the lightest form: the `mlir-opt` baselines of
//! `tools/bench.sh`). The module is built, verified and written a batch of
//! ops at a time ([`apir_synth::write_generated`]), so memory does not grow
//! with `--ops`; the output is made visible only when complete.

use apir_synth::{write_generated, GenOptions, TextFormat, WriteError};
use apir_tools::cli::gen::{Args, Format, MAX_KERNELS, MAX_OPS, MAX_SHAPES};
use apir_tools::{OutputFile, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE};
use std::path::Path;

fn main() {
    apir_tools::cli_main("apir-gen", run)
}

fn run(args: Args) -> i32 {
    if args.ops > MAX_OPS || args.kernels > MAX_KERNELS {
        apir_tools::report!(
            "error: at most {MAX_OPS} ops and {MAX_KERNELS} kernels can be generated"
        );
        return EXIT_USAGE;
    }
    if args
        .distinct_shapes
        .is_some_and(|k| !(1..=MAX_SHAPES).contains(&k))
    {
        apir_tools::report!("error: --distinct-shapes must be in [1, {MAX_SHAPES}]");
        return EXIT_USAGE;
    }
    let opts = GenOptions {
        ops: args.ops,
        seed: args.seed,
        arch: args.arch,
        distinct_shapes: args.distinct_shapes,
        kernels: args.kernels,
    };
    let format = match args.format {
        Format::Apir => TextFormat::Apir,
        Format::Mlir => TextFormat::Mlir,
        Format::MlirLight => TextFormat::MlirLight,
    };
    let path = args.output.as_deref().unwrap_or(Path::new("-"));
    let mut out = match OutputFile::create(path) {
        Ok(out) => out,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    match write_generated(&opts, format, &mut out) {
        Ok(()) => {}
        Err(WriteError::Io(e)) => {
            apir_tools::report!("{}", out.error(&e));
            return EXIT_INPUT;
        }
        Err(WriteError::Invalid(diags)) => {
            let first = diags.first().map_or("", |d| d.message.as_str());
            apir_tools::report!("internal error: apir-gen produced a module that fails verification ({} problems; first: {first})", diags.len());
            apir_tools::report!("This is a bug in apir; please report it with the command line.");
            return EXIT_INTERNAL;
        }
    }
    match out.commit() {
        Ok(()) => EXIT_OK,
        Err(msg) => {
            apir_tools::report!("{msg}");
            EXIT_INPUT
        }
    }
}
