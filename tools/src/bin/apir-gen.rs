//! `apir-gen`: writes deterministic synthetic modules for benchmarks and fuzz
//! seeds, as apir IR text or as an MLIR file carrying the same operands
//! (generic form, or the lightest form: the `mlir-opt` baselines of
//! `tools/bench.sh`).

use apir_ir::{print_module, verify};
use apir_synth::{generate, print_generic_mlir, print_light_mlir, GenOptions};
use apir_tools::cli::gen::{Args, Format, MAX_KERNELS, MAX_OPS};
use apir_tools::{write_output, write_stdout, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE};

fn main() {
    apir_tools::cli_main("apir-gen", run)
}

fn run(args: Args) -> i32 {
    if args.ops > MAX_OPS || args.kernels > MAX_KERNELS {
        eprintln!("error: at most {MAX_OPS} ops and {MAX_KERNELS} kernels can be generated");
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
        Format::MlirLight => print_light_mlir(&module),
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
