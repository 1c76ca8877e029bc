//! Shared plumbing of the apir command-line tools: input reading, atomic
//! output, exit codes and the panic guard.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cli;

use apir_ir::Arch;
use std::io::{Read, Write};
use std::path::Path;

pub use apir_compiler::driver::{EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE};

/// When to colour diagnostics (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// When standard error is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether to colour now.
    pub(crate) fn enabled(self) -> bool {
        use std::io::IsTerminal;
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stderr().is_terminal()
            }
        }
    }
}

/// The `--arch` value parser shared by the tools: `v2`, `v3` or `v4`, the
/// names of [`Arch::ALL`].
pub(crate) fn arch_parser() -> impl clap::builder::TypedValueParser<Value = Arch> {
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

/// Writes `data` to `path` completely or not at all, the way Unix tools
/// write their output files: through a temporary file in the destination's
/// directory, renamed over it. A new file gets the mode the umask leaves of
/// 0666; an overwritten file keeps its mode; a symbolic link is written
/// through (its target is replaced, the link stays); an existing device or
/// pipe (`/dev/null`, a FIFO) is written in place; `-` writes to stdout.
/// Every error names the destination, and no temporary file is left behind.
pub fn write_output(path: &Path, data: &[u8]) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return write_stdout(data);
    }
    let shown = path.display();
    let dest = resolve_links(path).map_err(|e| format!("error: cannot write `{shown}`: {e}"))?;
    let existing = std::fs::metadata(&dest).ok();
    // A device or pipe (`-o /dev/null`, a FIFO) is written in place: renaming
    // a temporary file over it would replace the device with a plain file.
    if let Some(meta) = &existing {
        if !meta.is_file() && !meta.is_dir() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(&dest)
                .and_then(|mut f| f.write_all(data).and_then(|_| f.flush()))
                .map_err(|e| format!("error: cannot write `{shown}`: {e}"));
        }
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "error: cannot write `{shown}`: no directory `{}`",
            dir.display()
        ));
    }
    let mut builder = tempfile::Builder::new();
    builder.prefix(".apir-out-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Created 0666 less the umask, like any new file; an existing
        // file's own mode is put back below.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(&dir).map_err(|e| {
        // tempfile's message names its random file; report the OS error alone.
        format!(
            "error: cannot write `{shown}`: cannot create a file in `{}`: {}",
            dir.display(),
            os_reason(&e)
        )
    })?;
    // Written through the plain file, whose errors do not name the
    // temporary file.
    let file = tmp.as_file_mut();
    file.write_all(data)
        .and_then(|_| file.flush())
        .and_then(|_| match &existing {
            Some(meta) => file.set_permissions(meta.permissions()),
            None => Ok(()),
        })
        .map_err(|e| format!("error: cannot write `{shown}`: {}", os_reason(&e)))?;
    tmp.persist(&dest)
        .map_err(|e| format!("error: cannot write `{shown}`: {}", os_reason(&e.error)))?;
    Ok(())
}

/// The OS's reason for an error, without any path a wrapper added.
fn os_reason(e: &std::io::Error) -> String {
    e.raw_os_error().map_or_else(
        || e.kind().to_string(),
        |c| std::io::Error::from_raw_os_error(c).to_string(),
    )
}

/// `path` with every symbolic link along its last component followed (at
/// most 40, as the kernel allows), so that writing replaces the link's
/// target and keeps the link. A dangling link resolves to the file it names.
fn resolve_links(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Writes to stdout through a duplicate of descriptor 1, so that every
/// write error (a full device) is reported, which Rust's `stdout` may
/// swallow; a pipe closed by its reader is not worth a message. (A standard
/// output closed before the program started is reopened on `/dev/null` by
/// the Rust runtime and cannot be told apart without `unsafe`.)
pub fn write_stdout(data: &[u8]) -> Result<(), String> {
    #[cfg(unix)]
    if stdout_was_closed() {
        return Err(
            "error: cannot write standard output: it was closed when the tool started (the output would be lost)"
                .to_string(),
        );
    }
    let stdout = std::io::stdout();
    let lock = stdout.lock();
    // A duplicate of descriptor 1: fails if it is closed, and its writes
    // report every error.
    #[cfg(unix)]
    let mut out = {
        use std::os::fd::AsFd;
        match lock.as_fd().try_clone_to_owned() {
            Ok(fd) => std::fs::File::from(fd),
            Err(e) => {
                return Err(format!(
                    "error: cannot write standard output: {}",
                    os_reason(&e)
                ))
            }
        }
    };
    #[cfg(not(unix))]
    let mut out = lock;
    match out.write_all(data).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!(
            "error: cannot write standard output: {}",
            os_reason(&e)
        )),
    }
}

/// Whether standard output was closed when the process started. The Rust
/// runtime opens `/dev/null` (read-write) on a closed standard descriptor,
/// so writes to it would succeed and the output vanish; a shell redirect to
/// `/dev/null` opens it write-only, which stays a valid destination.
#[cfg(unix)]
fn stdout_was_closed() -> bool {
    use rustix::fs::{fcntl_getfl, fstat, stat, OFlags};
    let out = std::io::stdout();
    let (Ok(flags), Ok(st), Ok(null)) = (fcntl_getfl(&out), fstat(&out), stat("/dev/null")) else {
        return false;
    };
    let read_write = flags & OFlags::RWMODE == OFlags::RDWR;
    read_write && st.st_rdev == null.st_rdev && st.st_ino == null.st_ino && st.st_dev == null.st_dev
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
