//! Shared plumbing of the apir command-line tools: input reading, atomic
//! output, exit codes and the panic guard.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// Writes a message line to stderr with its control characters shown as
/// diagnostics show them (`?`, and a line end as `\n`, see
/// [`apir_ir::source::shown_line`]): a file name, an argument or a name
/// read from the input never sends an escape sequence to the terminal nor
/// starts a line of its own. Every message line of the tools is
/// written through here (rendered diagnostics are shown that way already).
#[macro_export]
macro_rules! report {
    ($($arg:tt)*) => {
        $crate::report_line(&::std::format!($($arg)*))
    };
}

/// [`report!`]'s line, shown as a diagnostic's message is (one line: a
/// line end in a file name or value it quotes is written `\n`) and
/// written.
#[doc(hidden)]
pub fn report_line(msg: &str) {
    eprintln!("{}", apir_ir::source::shown_line(msg));
}

pub mod cli;
mod pending;

use apir_compiler::driver::Length;
pub use apir_compiler::driver::{OutputSink, ReadAgain};
use apir_ir::source::MAX_SOURCE_BYTES;
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

/// An input opened for reading: its name as messages show it, the reader
/// and what is known of its length.
pub struct OpenInput {
    /// `path` as given, or `<stdin>`.
    pub name: String,
    /// The file or stdin.
    pub reader: Box<dyn Read>,
    /// The file's length; unknown for stdin.
    pub length: Length,
    /// A regular file's own handle, to read it again from its start
    /// ([`OpenInput::read_again`]).
    regular: Option<std::fs::File>,
}

impl OpenInput {
    /// The input as a reader that can start over, `head` being what was
    /// read of it so far: a regular file read again from its start;
    /// anything else (stdin, a pipe) spooled to an unnamed temporary file
    /// as it is read ([`Spooled`]), `head` first.
    pub fn read_again(self, head: Vec<u8>) -> std::io::Result<Box<dyn ReadAgain>> {
        match self.regular {
            Some(mut f) => {
                f.rewind()?;
                Ok(Box::new(f))
            }
            None => Ok(Box::new(Spooled::new(
                std::io::Cursor::new(head).chain(self.reader),
            ))),
        }
    }
}

/// Opens `path` (`-` or `None` for stdin) to be read once, from the
/// start (see [`open_input`] for an input that may be read again). The
/// error is a message ready to print.
pub fn open_once(path: Option<&Path>) -> Result<OpenInput, String> {
    Ok(match path {
        Some(p) if p.as_os_str() != "-" => {
            let name = p.display().to_string();
            let mut f = std::fs::File::open(p).map_err(|e| read_error_message(&name, &e))?;
            let length = f.length();
            let regular = f
                .metadata()
                .ok()
                .filter(std::fs::Metadata::is_file)
                .and_then(|_| f.try_clone().ok());
            OpenInput {
                name,
                reader: Box::new(f),
                length,
                regular,
            }
        }
        _ => OpenInput {
            name: "<stdin>".to_string(),
            reader: Box::new(std::io::stdin()),
            length: Length::Unknown,
            regular: None,
        },
    })
}

/// Reads `path` (`-` or `None` for stdin) as bytes, at most the input
/// limit ([`MAX_SOURCE_BYTES`], as for `apir-opt`): a regular file past it
/// is refused before it is read, any other input once one byte past it is
/// read (an endless one is not read on). The error is a message ready to
/// print.
pub fn read_input(path: Option<&Path>) -> Result<(String, Vec<u8>), String> {
    let input = open_once(path)?;
    let name = input.name.clone();
    read_whole(input, Vec::new()).map(|bytes| (name, bytes))
}

/// The error for the input `name` past the input limit: `len` bytes if
/// known (a regular file's length), else "more than" the limit.
pub fn too_long_message(name: &str, len: Option<u64>) -> String {
    let len = len.map_or(format!("more than {MAX_SOURCE_BYTES}"), |n| n.to_string());
    let what = if name == "<stdin>" {
        "standard input".to_string()
    } else {
        format!("`{name}`")
    };
    format!("error: {what} is {len} bytes; the limit is {MAX_SOURCE_BYTES}")
}

impl OpenInput {
    /// The error for an input known, before it is read, to be past the
    /// input limit (a regular file measured).
    pub fn known_too_long(&self) -> Option<String> {
        self.length
            .past_limit()
            .then(|| too_long_message(&self.name, self.length.exact()))
    }
}

/// The rest of `input` after the bytes `head` already read from it, held
/// whole under the limit [`read_input`] sets.
pub fn read_whole(input: OpenInput, head: Vec<u8>) -> Result<Vec<u8>, String> {
    if let Some(msg) = input.known_too_long() {
        return Err(msg);
    }
    let OpenInput { name, reader, .. } = input;
    let too_long = |len: Option<u64>| too_long_message(&name, len);
    let mut buf = head;
    let left = (MAX_SOURCE_BYTES as u64 + 1).saturating_sub(buf.len() as u64);
    reader
        .take(left)
        .read_to_end(&mut buf)
        .map_err(|e| read_error_message(&name, &e))?;
    if buf.len() > MAX_SOURCE_BYTES {
        return Err(too_long(None));
    }
    Ok(buf)
}

/// Reads up to `n` bytes of `input` (fewer only at its end). The error is
/// a message ready to print.
pub fn read_head(input: &mut OpenInput, n: usize) -> Result<Vec<u8>, String> {
    let mut head = Vec::with_capacity(n);
    (&mut input.reader)
        .take(n as u64)
        .read_to_end(&mut head)
        .map_err(|e| read_error_message(&input.name, &e))?;
    Ok(head)
}

/// The message for a failed read of the input called `name`.
pub fn read_error_message(name: &str, e: &std::io::Error) -> String {
    if name == "<stdin>" {
        format!("error: cannot read standard input: {e}")
    } else {
        format!("error: cannot read `{name}`: {e}")
    }
}

/// Opens `path` (`-` or `None` for stdin) for reading in chunks, as the
/// name diagnostics give it and a reader that can start over: a regular
/// file seeks back; standard input, and a path that is not a regular file
/// (a pipe such as `<(...)`, a FIFO, a device), which cannot seek, is
/// spooled to an unnamed temporary file as it is read ([`Spooled`]), so
/// reading it again needs no memory.
pub fn open_input(path: Option<&Path>) -> Result<(String, Box<dyn ReadAgain>), String> {
    match path {
        Some(p) if p.as_os_str() != "-" => std::fs::File::open(p)
            .and_then(|f| {
                let regular = f.metadata()?.is_file();
                let name = p.display().to_string();
                Ok(if regular {
                    (name, Box::new(f) as Box<dyn ReadAgain>)
                } else {
                    (name, Box::new(Spooled::new(f)) as Box<dyn ReadAgain>)
                })
            })
            .map_err(|e| format!("error: cannot read `{}`: {e}", p.display())),
        _ => Ok((
            "<stdin>".to_string(),
            Box::new(Spooled::new(std::io::stdin())),
        )),
    }
}

/// A reader that copies what it reads to an unnamed temporary file (in
/// the temporary directory), so that it can be read again from the start
/// ([`ReadAgain::rewind`]): standard input for a run that may have to read
/// its input twice. The file is created on the first read and removed by
/// the operating system when dropped.
///
/// The spool keeps at most one byte past the input limit
/// ([`MAX_SOURCE_BYTES`]): past it the input is rejected whatever
/// follows, so an endless input (`/dev/zero`, a pipe that never closes)
/// neither fills the disk nor is read without end, and
/// [`ReadAgain::length`] then says it is too long.
pub struct Spooled<R> {
    inner: R,
    spool: Option<std::fs::File>,
    /// Bytes kept in the spool.
    kept: u64,
    /// The most bytes kept ([`SPOOL_BYTES`]).
    cap: u64,
    /// Reading from the spool (after a rewind) rather than `inner`.
    replaying: bool,
}

/// The most bytes a [`Spooled`] input keeps: one past the input limit.
const SPOOL_BYTES: u64 = MAX_SOURCE_BYTES as u64 + 1;

impl<R: Read> Spooled<R> {
    /// Spools `inner`.
    pub fn new(inner: R) -> Self {
        Self::with_cap(inner, SPOOL_BYTES)
    }

    /// Spools `inner`, keeping at most `cap` bytes (the input is longer
    /// than `cap - 1` bytes, the limit, once it is reached).
    fn with_cap(inner: R, cap: u64) -> Self {
        Spooled {
            inner,
            spool: None,
            kept: 0,
            cap,
            replaying: false,
        }
    }

    fn spool(&mut self) -> std::io::Result<&mut std::fs::File> {
        if self.spool.is_none() {
            let file = tempfile::tempfile().map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a temporary file to keep it in: {e}"),
                )
            })?;
            self.spool = Some(file);
        }
        self.spool
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no spool file"))
    }
}

impl<R: Read> Read for Spooled<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.replaying {
            return self.spool()?.read(buf);
        }
        let n = self.inner.read(buf)?;
        let keep = (n as u64).min(self.cap - self.kept) as usize;
        self.spool()?.write_all(&buf[..keep])?;
        self.kept += keep as u64;
        Ok(n)
    }
}

impl<R: Read> ReadAgain for Spooled<R> {
    fn rewind(&mut self) -> std::io::Result<()> {
        use std::io::Seek;
        if !self.replaying {
            // The rest of the input goes to the spool too, then the spool
            // is read from its start.
            self.spool()?;
            if let Some(spool) = &mut self.spool {
                let rest = (&mut self.inner).take(self.cap - self.kept);
                self.kept += std::io::copy(&mut { rest }, spool)?;
            }
            self.replaying = true;
        }
        self.spool()?.seek(std::io::SeekFrom::Start(0)).map(|_| ())
    }

    fn seek_to(&mut self, offset: u64) -> std::io::Result<()> {
        use std::io::Seek;
        self.rewind()?;
        self.spool()?
            .seek(std::io::SeekFrom::Start(offset))
            .map(|_| ())
    }

    fn length(&mut self) -> Length {
        match (self.replaying, self.kept) {
            (_, kept) if kept == self.cap => Length::MoreThan(kept - 1),
            (true, kept) => Length::Exactly(kept),
            (false, _) => Length::Unknown,
        }
    }
}

/// The output of a run, in bounded memory: bytes kept in memory up to
/// [`SpillBuffer::MEMORY`], then in an unnamed temporary file; copied to
/// where they belong once the run has succeeded ([`SpillBuffer::copy_to`]).
#[derive(Default)]
pub struct SpillBuffer {
    mem: Vec<u8>,
    file: Option<std::fs::File>,
}

impl SpillBuffer {
    /// Bytes kept in memory before spilling to a file (project-defined).
    pub const MEMORY: usize = 4 << 20;

    /// Writes everything held to `out`.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        use std::io::Seek;
        if let Some(f) = &mut self.file {
            f.seek(std::io::SeekFrom::Start(0))?;
            std::io::copy(f, out)?;
        }
        out.write_all(&self.mem)?;
        out.flush()
    }

    /// Everything held, read into memory (for small outputs and tests).
    pub fn into_bytes(mut self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.copy_to(&mut out)?;
        Ok(out)
    }
}

impl Write for SpillBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.mem.len() + buf.len() > Self::MEMORY {
            let file = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(tempfile::tempfile()?),
            };
            file.write_all(&self.mem)?;
            self.mem.clear();
            if buf.len() > Self::MEMORY {
                file.write_all(buf)?;
                return Ok(buf.len());
            }
        }
        self.mem.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl OutputSink for SpillBuffer {
    fn restart(&mut self) -> std::io::Result<()> {
        self.mem.clear();
        if let Some(f) = &mut self.file {
            use std::io::Seek;
            f.set_len(0)?;
            f.seek(std::io::SeekFrom::Start(0))?;
        }
        Ok(())
    }
}

/// Writes `data` to `path` completely or not at all, the way Unix tools
/// write their output files: through a temporary file in the destination's
/// directory, renamed over it. A new file gets the mode the umask leaves of
/// 0666; an overwritten file keeps its mode; a symbolic link is written
/// through (its target is replaced, the link stays); an existing device or
/// pipe (`/dev/null`, a FIFO) is written in place; `-` writes to stdout;
/// a directory, however it is spelt (`out/`, `out/.`), is an error saying
/// it is one. Every error names the destination, and no temporary file is
/// left behind.
pub fn write_output(path: &Path, data: &[u8]) -> Result<(), String> {
    let mut out = OutputFile::create(path)?;
    out.write_all(data).map_err(|e| out.error(&e))?;
    out.commit()
}

/// An output written as it is produced and made visible only when the run
/// succeeds ([`OutputFile::commit`]), as [`write_output`] describes: a
/// temporary file in the destination's directory, renamed over it; for
/// stdout, a device or a pipe, a [`SpillBuffer`] copied there at the end
/// (bytes written to a pipe cannot be taken back if the run then fails).
/// Dropped without a commit, it leaves nothing behind.
pub struct OutputFile {
    shown: String,
    to: Destination,
}

enum Destination {
    Temp {
        tmp: tempfile::NamedTempFile,
        /// Removes `tmp` if a signal ends the run; dropped after it.
        pending: pending::Pending,
        dest: std::path::PathBuf,
        existing: Option<std::fs::Permissions>,
    },
    InPlace {
        dest: std::path::PathBuf,
        held: SpillBuffer,
    },
    Stdout(SpillBuffer),
}

impl OutputFile {
    /// Prepares the output `path` (`-`: stdout). The error is a message
    /// naming the destination.
    pub fn create(path: &Path) -> Result<OutputFile, String> {
        let shown = path.display().to_string();
        if path.as_os_str() == "-" {
            return Ok(OutputFile {
                shown,
                to: Destination::Stdout(SpillBuffer::default()),
            });
        }
        let dest =
            resolve_links(path).map_err(|e| format!("error: cannot write `{shown}`: {e}"))?;
        let existing = std::fs::metadata(&dest).ok();
        // A directory is said to be one, however it is named: renaming over
        // `out/` or `out/.` would fail with `Not a directory` or `Device or
        // resource busy`.
        if existing.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            return Err(format!("error: cannot write `{shown}`: it is a directory"));
        }
        // A device or pipe (`-o /dev/null`, a FIFO) is written in place: renaming
        // a temporary file over it would replace the device with a plain file.
        if let Some(meta) = &existing {
            if !meta.is_file() {
                return Ok(OutputFile {
                    shown,
                    to: Destination::InPlace {
                        dest,
                        held: SpillBuffer::default(),
                    },
                });
            }
        }
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if !dir.is_dir() {
            let why = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(format!(
                "error: cannot write `{shown}`: `{}` {why}",
                dir.display()
            ));
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix(".apir-out-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Created 0666 less the umask, like any new file; an existing
            // file's own mode is put back at the commit.
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let (tmp, pending) = pending::create(|| builder.tempfile_in(&dir)).map_err(|e| {
            // tempfile's message names its random file; report the OS error alone.
            format!(
                "error: cannot write `{shown}`: cannot create a file in `{}`: {}",
                dir.display(),
                os_reason(&e)
            )
        })?;
        Ok(OutputFile {
            shown,
            to: Destination::Temp {
                tmp,
                pending,
                dest,
                existing: existing.map(|m| m.permissions()),
            },
        })
    }

    /// The message for a failed write, naming the destination.
    pub fn error(&self, e: &std::io::Error) -> String {
        match self.to {
            Destination::Stdout(_) => {
                format!("error: cannot write standard output: {}", os_reason(e))
            }
            _ => format!("error: cannot write `{}`: {}", self.shown, os_reason(e)),
        }
    }

    /// Makes the output visible: renames the temporary file over the
    /// destination, or writes the held bytes to stdout, the device or the
    /// pipe.
    pub fn commit(self) -> Result<(), String> {
        let shown = self.shown;
        let fail = |e: &std::io::Error| format!("error: cannot write `{shown}`: {}", os_reason(e));
        match self.to {
            Destination::Stdout(mut held) => write_stdout_with(|out| held.copy_to(out)),
            Destination::InPlace { dest, mut held } => std::fs::OpenOptions::new()
                .write(true)
                .open(&dest)
                .and_then(|mut f| held.copy_to(&mut f))
                .map_err(|e| format!("error: cannot write `{shown}`: {e}")),
            Destination::Temp {
                mut tmp,
                pending,
                dest,
                existing,
            } => {
                // Written through the plain file, whose errors do not name
                // the temporary file.
                let file = tmp.as_file_mut();
                file.flush()
                    .and_then(|_| match &existing {
                        Some(perm) => file.set_permissions(perm.clone()),
                        None => Ok(()),
                    })
                    .map_err(|e| fail(&e))?;
                // A failed rename drops (removes) the file with the list held.
                pending
                    .finish(|| tmp.persist(&dest).map_err(|e| e.error))
                    .map_err(|e| fail(&e))?;
                Ok(())
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.to {
            Destination::Temp { tmp, .. } => tmp.as_file_mut().write(buf),
            Destination::InPlace { held, .. } | Destination::Stdout(held) => held.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.to {
            Destination::Temp { tmp, .. } => tmp.as_file_mut().write_all(buf),
            Destination::InPlace { held, .. } | Destination::Stdout(held) => held.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl OutputSink for OutputFile {
    fn restart(&mut self) -> std::io::Result<()> {
        match &mut self.to {
            Destination::Temp { tmp, .. } => {
                use std::io::Seek;
                let f = tmp.as_file_mut();
                f.set_len(0)?;
                f.seek(std::io::SeekFrom::Start(0)).map(|_| ())
            }
            Destination::InPlace { held, .. } | Destination::Stdout(held) => held.restart(),
        }
    }
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
/// swallow; a pipe closed by its reader is not worth a message. A standard
/// output closed before the program started is reopened on `/dev/null`
/// (read-write) by the Rust runtime, and so is written like any
/// `/dev/null`: it cannot be told from one a caller opened read-write,
/// as Python's `subprocess.DEVNULL` does, and that caller asked for the
/// output to be discarded.
pub fn write_stdout(data: &[u8]) -> Result<(), String> {
    write_stdout_with(|out| out.write_all(data).and_then(|_| out.flush()))
}

/// [`write_stdout`] with the writing done by `write` on the duplicate.
fn write_stdout_with(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), String> {
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
    match write(&mut out) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!(
            "error: cannot write standard output: {}",
            os_reason(&e)
        )),
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
            report!("internal error: {tool} failed unexpectedly: {msg}");
            report!("This is a bug in apir; please report it with the input that caused it.");
            EXIT_INTERNAL
        }
    };
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endless input is kept up to the cap and no further, read live
    /// or on a rewind, and then known to be past the limit; a short one
    /// replays exactly and knows its length.
    #[test]
    fn a_spool_keeps_one_byte_past_the_limit() {
        let mut endless = Spooled::with_cap(std::io::repeat(b'x'), 1000);
        assert_eq!(endless.length(), Length::Unknown);
        let mut buf = [0u8; 600];
        endless.read_exact(&mut buf).unwrap();
        endless.read_exact(&mut buf).unwrap(); // 1200 read live, 1000 kept
        assert_eq!(endless.length(), Length::MoreThan(999));
        endless.rewind().unwrap();
        let mut replay = Vec::new();
        endless.read_to_end(&mut replay).unwrap();
        assert_eq!(replay.len(), 1000);
        // A rewind before the cap copies only up to it.
        let mut endless = Spooled::with_cap(std::io::repeat(b'y'), 1000);
        endless.read_exact(&mut buf[..10]).unwrap();
        endless.rewind().unwrap();
        assert_eq!(endless.length(), Length::MoreThan(999));
        let mut replay = Vec::new();
        endless.read_to_end(&mut replay).unwrap();
        assert_eq!(replay, vec![b'y'; 1000]);
        let mut short = Spooled::with_cap(&b"module {}\n"[..], 1000);
        short.read_exact(&mut buf[..3]).unwrap();
        short.rewind().unwrap();
        assert_eq!(short.length(), Length::Exactly(10));
        let mut replay = Vec::new();
        short.read_to_end(&mut replay).unwrap();
        assert_eq!(replay, b"module {}\n");
    }
}
