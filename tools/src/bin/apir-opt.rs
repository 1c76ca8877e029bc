//! `apir-opt`: parse, verify, run a pass pipeline and print the result.
//! Everything but the command line, reading the input and writing the
//! output is the library's driver (`apir_compiler::driver`).

use apir_compiler::driver::{self, Driver, Input};
use apir_compiler::Registry;
use apir_tools::cli::opt::Args;
use apir_tools::{decode_utf8, read_input, write_output, write_stdout, EXIT_INPUT, EXIT_USAGE};

fn main() {
    apir_tools::cli_main("apir-opt", run)
}

fn run(args: Args) -> i32 {
    if args.list_passes {
        return print_stdout(driver::list_passes(&Registry::builtin()).as_bytes(), 0);
    }
    let options = args.driver_options();
    if let Err(msg) = options.check() {
        use clap::CommandFactory;
        let _ = Args::command()
            .error(clap::error::ErrorKind::ArgumentConflict, msg)
            .print();
        return EXIT_USAGE;
    }
    // Usage errors (the pipeline) are reported before any input is read.
    let driver = match Driver::new(options) {
        Ok(d) => d,
        Err(usage) => {
            eprint!("{}", usage.render_diagnostics());
            return usage.exit_code;
        }
    };
    let read = read_input(args.input.as_deref()).and_then(|(name, b)| {
        let text = decode_utf8(&name, b)?;
        Ok((name, text))
    });
    let (name, text) = match read {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_INPUT;
        }
    };
    let out = driver.run(Input::Text { name, text });
    eprint!("{}", out.render_diagnostics());
    eprint!("{}", out.report);
    match &args.output {
        // A failed run writes no file.
        Some(path) if out.success() => match write_output(path, &out.output) {
            Ok(()) => out.exit_code,
            Err(msg) => {
                eprintln!("{msg}");
                EXIT_INPUT
            }
        },
        Some(_) => out.exit_code,
        None => print_stdout(&out.output, out.exit_code),
    }
}

/// Writes `data` to stdout; `code` unless the write fails.
fn print_stdout(data: &[u8], code: i32) -> i32 {
    match write_stdout(data) {
        Ok(()) => code,
        Err(msg) => {
            eprintln!("{msg}");
            EXIT_INPUT
        }
    }
}
