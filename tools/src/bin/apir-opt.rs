//! `apir-opt`: parse, verify, run a pass pipeline and print the result.
//! Everything but the command line, opening the input and the output is
//! the library's driver (`apir_compiler::driver`): it streams the input in
//! bounded memory when the pipeline allows, and writes the output as it is
//! produced into a temporary file renamed over `-o` on success (or, for
//! stdout, into a buffer that spills to a temporary file and is copied out
//! at the end, so that a failure found late leaves no partial output).

use apir_compiler::driver::{self, Driver, OutputSink, StreamError};
use apir_compiler::Registry;
use apir_tools::cli::opt::Args;
use apir_tools::{
    open_input, read_error_message, write_stdout, OutputFile, SpillBuffer, EXIT_INPUT, EXIT_USAGE,
};
use std::path::Path;

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
    let (name, mut input) = match open_input(args.input.as_deref()) {
        Ok(x) => x,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    // The output is written as it is produced. An `-o` that cannot be
    // prepared (no such directory) is reported after the run, as a failed
    // write, and its output is held meanwhile.
    let (mut file, unwritable) =
        match OutputFile::create(args.output.as_deref().unwrap_or(Path::new("-"))) {
            Ok(f) => (Some(f), None),
            Err(msg) => (None, Some(msg)),
        };
    let mut held = SpillBuffer::default();
    let sink: &mut dyn OutputSink = match &mut file {
        Some(f) => f,
        None => &mut held,
    };
    let out = match driver.run_reader(&name, &mut *input, sink) {
        Ok(out) => out,
        Err(e) => {
            let msg = match &e {
                StreamError::Read(e) => read_error_message(&name, e),
                StreamError::Write(e) => match &file {
                    Some(f) => f.error(e),
                    None => format!("error: {e}"),
                },
            };
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    eprint!("{}", out.render_diagnostics());
    eprint!("{}", out.report);
    // A failed run writes no file; stdout gets what the run produced (a
    // JSON document still holds the diagnostics).
    if args.output.is_some() && !out.success() {
        return out.exit_code;
    }
    let committed = match (file, unwritable) {
        (Some(f), None) => f.commit(),
        (_, Some(msg)) => Err(msg),
        (None, None) => Ok(()),
    };
    match committed {
        Ok(()) => out.exit_code,
        Err(msg) => {
            apir_tools::report!("{msg}");
            EXIT_INPUT
        }
    }
}

/// Writes `data` to stdout; `code` unless the write fails.
fn print_stdout(data: &[u8], code: i32) -> i32 {
    match write_stdout(data) {
        Ok(()) => code,
        Err(msg) => {
            apir_tools::report!("{msg}");
            EXIT_INPUT
        }
    }
}
