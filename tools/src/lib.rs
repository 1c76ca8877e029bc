//! Shared plumbing of the apir command-line tools: input reading, atomic
//! output, exit codes and the panic guard.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use apir_ir::Arch;
use std::io::{Read, Write};
use std::path::Path;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input has errors.
pub const EXIT_INPUT: i32 = 1;
/// Exit code: bad usage.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: internal error (a bug).
pub const EXIT_INTERNAL: i32 = 3;

/// The `--arch` value parser shared by the tools: `v2`, `v3` or `v4`, the
/// names of [`Arch::ALL`].
pub fn arch_parser() -> impl clap::builder::TypedValueParser<Value = Arch> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Arch::ALL.map(|a| a.name()))
        .map(|s: String| Arch::from_name(&s).unwrap_or(Arch::V2))
}

/// Reads `path` (`-` or `None` for stdin) as bytes. The error is a message
/// ready to print.
pub fn read_input(path: Option<&Path>) -> Result<(String, Vec<u8>), String> {
    match path {
        None => read_stdin(),
        Some(p) if p.as_os_str() == "-" => read_stdin(),
        Some(p) => std::fs::read(p)
            .map(|b| (p.display().to_string(), b))
            .map_err(|e| format!("error: cannot read `{}`: {e}", p.display())),
    }
}

fn read_stdin() -> Result<(String, Vec<u8>), String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| format!("error: cannot read standard input: {e}"))?;
    Ok(("<stdin>".to_string(), buf))
}

/// Decodes input bytes as UTF-8, naming the first bad byte's line and column.
pub fn decode_utf8(name: &str, bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = upto.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        format!("{name}:{line}:{col}: error: input is not valid UTF-8")
    })
}

/// Writes `data` to `path` completely or not at all (temporary file in the
/// same directory, then rename); `-` writes to stdout; an existing device or
/// pipe (`/dev/null`, a FIFO) is written in place.
pub fn write_output(path: &Path, data: &[u8]) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return write_stdout(data);
    }
    // A device or pipe (`-o /dev/null`, a FIFO) is written in place: renaming
    // a temporary file over it would replace the device with a plain file.
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| f.write_all(data).and_then(|_| f.flush()))
                .map_err(|e| format!("error: cannot write `{}`: {e}", path.display()));
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "error: cannot write `{}`: no directory `{}`",
            path.display(),
            dir.display()
        ));
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| {
        // tempfile's message names its random file; report the OS error alone.
        let reason = e.raw_os_error().map_or_else(
            || e.kind().to_string(),
            |c| std::io::Error::from_raw_os_error(c).to_string(),
        );
        format!(
            "error: cannot create a file in `{}`: {reason}",
            dir.display()
        )
    })?;
    tmp.write_all(data)
        .and_then(|_| tmp.flush())
        .map_err(|e| format!("error: cannot write `{}`: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| format!("error: cannot write `{}`: {}", path.display(), e.error))?;
    Ok(())
}

/// Writes to stdout; a closed pipe is not an error worth a message.
pub fn write_stdout(data: &[u8]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(data).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("error: cannot write standard output: {e}")),
    }
}

/// The whole `main` of a tool: parse the command line (usage errors exit 2,
/// `--help`/`--version` exit 0), then run, under [`guarded`].
pub fn cli_main<A: clap::Parser>(tool: &str, run: fn(A) -> i32) -> ! {
    guarded(tool, move || match A::try_parse() {
        Ok(args) => run(args),
        Err(e) => {
            let _ = e.print();
            if e.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_OK
            }
        }
    })
}

/// Runs `main`, turning a panic into an internal-error message and exit
/// code 3 instead of a backtrace.
pub fn guarded(tool: &str, main: impl FnOnce() -> i32 + std::panic::UnwindSafe) -> ! {
    std::panic::set_hook(Box::new(|_| {}));
    let code = match std::panic::catch_unwind(main) {
        Ok(code) => code,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            eprintln!("internal error: {tool} failed unexpectedly: {msg}\nThis is a bug in apir; please report it with the input that caused it.");
            EXIT_INTERNAL
        }
    };
    std::process::exit(code)
}
