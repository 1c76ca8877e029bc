//! Streaming from a reader: an op-local pipeline over an input that is
//! never held whole. The input is read in windows of about
//! [`ChunkOptions::window_bytes`]; each window's ops are parsed, verified,
//! lowered and emitted in batches as in [`crate::stream`], the output is
//! written to the sink as it is produced, and the ops are dropped. Memory
//! is the windows in flight, the buffers declared so far and one batch of
//! ops per thread, whatever the input's size.
//!
//! Two ways of cutting the input, both exact:
//!
//! - **Windows** (one thread, and always for the module header and the
//!   buffers before the first op): a window ends at a line end, or inside
//!   a line longer than half a window (a module written on one line) after
//!   a blank that a letter follows (`window_end`), and the parser hands
//!   out only the items that more input could not change
//!   ([`StreamParser::window`]); the first uncertain item is undone and
//!   the next window starts with it. An item longer than a window grows
//!   the window, up to [`ChunkOptions::max_window_bytes`]; an item that
//!   blank and comment lines follow to the window's end, filling a
//!   quarter of it, is taken as ended
//!   ([`StreamState::cutting_long_blank_runs`]: proved by parsing, as a
//!   part's cut is: any error after such a cut is [`ChunkError::Uncut`],
//!   and the driver streams again without cuts; [`diagnose`] never makes
//!   them), so such a run longer than any window streams. Parts are cut
//!   only at line starts: a long line streams on one thread.
//! - **Parts** (several threads): the reader cuts the input into parts of
//!   about [`ChunkOptions::window_bytes`] at lines where a top-level op
//!   begins (the first op's indentation, then a letter; after
//!   `BLANK_CUT_WINDOWS` windows with no such line, at the last blank or
//!   comment line read), and hands them to worker threads, each with a
//!   copy of the parser state ([`StreamParser::part`]) and a fork of the pass manager
//!   ([`PassManager::fork`]); the calling thread writes the parts' outputs
//!   in order and absorbs the forks in order. A cut is proved, not
//!   trusted: a part must parse whole (a cut inside an op leaves an item cut
//!   short at one end and a stray continuation at the other, both errors
//!   on the part's last or first line), and a part that does not (or
//!   declares a buffer) fails the attempt with [`ChunkError::Retry`]; the
//!   driver then rewinds the input and streams it on one thread. An error
//!   that is the input's (a verifier, pass or emit error, or a syntax
//!   error inside a part) fails it with [`ChunkError::Invalid`] and a
//!   [`Checkpoint`] for [`diagnose_from`]. Once a part fails, the parts
//!   after it stop and no more are read; the parts before it go on, so the
//!   first to fail in input order runs to its error.
//!
//! Warnings do not stop streaming: they are reported with spans into the
//! input, whose lines are gone by the end of the run, and
//! [`crate::driver::Driver::run_reader`] reads the input again for just the
//! lines they point at ([`SourceMap::add_excerpt`]).
//!
//! On an error streaming stops ([`ChunkError::Invalid`]) and [`diagnose`]
//! streams the input again to find what the whole-module path reports on
//! it, in the same bounded memory. On invalid UTF-8, an input past
//! [`apir_ir::source::MAX_SOURCE_BYTES`] or an item past the window bound,
//! streaming gives up ([`ChunkError::GiveUp`]) and the driver reruns the
//! whole-module path on the input read again, so diagnostics are exactly
//! that path's. At most [`ChunkOptions::in_flight`] parts are read and not
//! yet written at any time: every buffer has a bound.

use crate::manager::{numbered_after, BatchFailure, PassManager, RunReport};
use crate::stream::{
    lint_batch, op_ids, phase_report, run_items, BuildPasses, Clock, ErrorPhase, ItemConfig, Stop,
    StreamEmit, StreamOptions, Times, BATCH_OPS,
};
use crate::wire::{self, WireError};
use apir_ir::printer::{print_footer, print_header};
use apir_ir::source::MAX_SOURCE_BYTES;
use apir_ir::{
    verify_buffer, verify_ops, Arch, Bounded, Diagnostic, Diagnostics, FileId, Item, Module, Pass,
    SourceMap, Span, StreamParser, StreamState,
};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

/// Bytes per window and per part unless told otherwise (project-defined):
/// large enough that a window's fixed costs (a parser state, a pass manager
/// fork, a read and a write call) vanish beside its ops, small enough that
/// a few in flight per thread stay a few MiB.
pub const DEFAULT_WINDOW_BYTES: usize = 1 << 20;

/// The buffer a part's hex, dump or JSON text is written through while
/// its op indices are shifted (project-defined): the pieces between
/// indices are short, and this many bytes go to the sink per write.
const REBASE_BUFFER: usize = 64 << 10;

/// The largest window (project-defined): an item (a kernel with its body)
/// longer than this is left to the whole-module path.
pub const MAX_WINDOW_BYTES: usize = 64 << 20;

/// How to stream from a reader.
#[derive(Clone, Copy, Debug)]
pub struct ChunkOptions {
    /// What to emit, how to parse, threads (the part size is
    /// `window_bytes`, not [`StreamOptions::part_bytes`]).
    pub stream: StreamOptions,
    /// Bytes read per window or part.
    pub window_bytes: usize,
    /// The largest window an item may need.
    pub max_window_bytes: usize,
    /// Parts read and not yet written, at most (several threads).
    pub in_flight: usize,
    /// Windows take an item as ended before blank and comment lines that
    /// run to the window's end and fill a quarter of it
    /// ([`StreamState::cutting_long_blank_runs`]), so that such runs longer
    /// than any window stream; an error after such a cut is
    /// [`ChunkError::Uncut`].
    pub cut_long_runs: bool,
}

impl ChunkOptions {
    /// The defaults for `stream`: 1 MiB windows, up to 64 MiB for one item,
    /// one part in flight per thread and one more (what keeps every worker
    /// busy; more only lets finished parts wait, and the allocator's slack
    /// grow with the run).
    pub fn new(stream: StreamOptions) -> Self {
        ChunkOptions {
            stream,
            window_bytes: DEFAULT_WINDOW_BYTES,
            max_window_bytes: MAX_WINDOW_BYTES,
            in_flight: stream.threads.max(1) + 1,
            cut_long_runs: true,
        }
    }
}

/// Whether an emit can stream from a reader: every one. `wire-dump` and
/// `json` locate each op in the input (every window carries the line and
/// column it starts at); a `json` document is written up to the end of its
/// ops, and the caller, which renders the run's diagnostics from the lines
/// they point at, ends it ([`wire::JsonWriter::tail`]).
pub fn can_stream_from_reader(emit: StreamEmit) -> bool {
    matches!(
        emit,
        StreamEmit::Ir
            | StreamEmit::WireBin
            | StreamEmit::WireHex
            | StreamEmit::WireDump
            | StreamEmit::Json
    )
}

/// Why a streaming run from a reader stopped.
#[derive(Debug)]
pub enum ChunkError {
    /// Reading the input failed.
    Read(io::Error),
    /// Writing the output failed.
    Write(io::Error),
    /// The input has an error of this phase, or a multi-threaded attempt
    /// met one in a part, where a syntax error may also come from a cut
    /// where no item begins: [`diagnose`] finds what the whole-module
    /// path reports (looking no further than this phase), and if it finds
    /// nothing the input streams again on one thread. After a verifier,
    /// pass or emit error in a part, or a syntax error inside one (not
    /// where a cut may have put it), the [`Checkpoint`] at that part's start,
    /// for [`diagnose_from`] to read the input from there on.
    Invalid(ErrorPhase, Option<Box<Checkpoint>>),
    /// Not for streaming: invalid UTF-8, an input or an item too long. The
    /// whole-module path must run on the input read again (and report).
    GiveUp,
    /// The multi-threaded attempt could not cut the input (a buffer
    /// declared among the ops, a pass that cannot fork, a part that is not
    /// UTF-8): stream again on one thread.
    Retry,
    /// An error met after a window took an item as ended before a long
    /// run of blank and comment lines
    /// ([`StreamState::cutting_long_blank_runs`]), which may be that
    /// guess's: stream again without it ([`ChunkOptions::cut_long_runs`]
    /// false), which finds the error again, or none.
    Uncut,
}

/// Where a diagnosis can pick up after a multi-threaded attempt met an
/// error of the input (a verifier, pass or emit error, or a syntax error
/// inside a part) in a part
/// ([`ChunkError::Invalid`]): every part before it was parsed, verified,
/// lowered and written without one, so [`diagnose_from`] reads the input
/// from the first byte of the part that failed ([`Checkpoint::offset`])
/// on, with what a diagnosis of the whole input holds there: the parser's
/// state (the header, the buffers and the kernels defined so far), the
/// passes (their statistics, warnings and memos) and the count of ops
/// before. (The parse and verify times it carries for `--timing` are the
/// attempt's, summed over its threads.)
pub struct Checkpoint {
    base: usize,
    state: StreamState,
    pm: PassManager,
    ops_before: u32,
    times: Times,
}

impl Checkpoint {
    /// The input offset the diagnosis resumes at: the input given to
    /// [`diagnose_from`] must start there.
    pub fn offset(&self) -> usize {
        self.base
    }
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("offset", &self.base)
            .field("ops_before", &self.ops_before)
            .finish_non_exhaustive()
    }
}

/// A successful streaming run from a reader.
#[derive(Debug, Default)]
pub struct ChunkOutput {
    /// Timings, statistics and warnings, as
    /// [`crate::stream::StreamOutput::report`]; the warnings' spans are
    /// offsets in the input, in file 0.
    pub report: RunReport,
    /// Parts processed by worker threads (0 on one thread).
    pub parts: usize,
    /// Bytes of input read.
    pub bytes: usize,
    /// ISA ops written: with [`StreamEmit::Json`], what
    /// [`wire::JsonWriter::after`] takes to end the document.
    pub ops: usize,
}

/// The input, read in bounded pieces.
struct Reader<'r> {
    input: &'r mut dyn Read,
    eof: bool,
}

impl Reader<'_> {
    /// Reads until `buf` holds `upto` bytes or the input ends.
    fn fill(&mut self, buf: &mut Vec<u8>, upto: usize) -> Result<(), ChunkError> {
        while !self.eof && buf.len() < upto {
            let want = upto - buf.len();
            buf.reserve_exact(want);
            let got = (&mut *self.input)
                .take(want as u64)
                .read_to_end(buf)
                .map_err(ChunkError::Read)?;
            if got < want {
                self.eof = true;
            }
        }
        Ok(())
    }
}

/// What the sequential (window) phase carries.
struct Seq {
    state: Option<StreamState>,
    /// Input from absolute offset `base` on, not yet handed out.
    buf: Vec<u8>,
    base: usize,
    /// The module header (and for `wire-bin` the section header) written.
    started: bool,
    /// Index of the next ISA op.
    op_index: usize,
    /// `wire-bin` records written so far (for the section's end marker).
    records: u64,
    /// The indentation of the top-level op the window phase stopped at.
    indent: Vec<u8>,
    times: Times,
    /// Where `base` lies in the input: its 0-based line and the characters
    /// before it on that line (what `wire-dump` and `json` locate ops
    /// with).
    at: LineCol,
    /// The input's name in locations.
    name: String,
    /// The module's arch, once the header is parsed.
    arch: Option<Arch>,
    /// The `json` document's ops so far.
    json: wire::JsonWriter,
    /// The op ids the batches so far numbered ([`Checkpoint`]).
    op_ids: u32,
}

/// A position in the input as a 0-based line and the characters before
/// it on that line.
#[derive(Clone, Copy, Debug, Default)]
struct LineCol {
    line: u32,
    column: u32,
}

impl LineCol {
    /// The position after `text` read from here.
    fn after(self, text: &[u8]) -> LineCol {
        let chars = |b: &[u8]| b.iter().filter(|&&c| c & 0xc0 != 0x80).count() as u32;
        match text.iter().rposition(|&b| b == b'\n') {
            None => LineCol {
                line: self.line,
                column: self.column.saturating_add(chars(text)),
            },
            Some(i) => {
                let lines = text.iter().filter(|&&b| b == b'\n').count() as u32;
                LineCol {
                    line: self.line.saturating_add(lines),
                    column: chars(&text[i + 1..]),
                }
            }
        }
    }
}

/// Whether `emit` shows where each op is (`wire-dump`, `json`): only then
/// is the input's line and column followed.
fn locates(emit: StreamEmit) -> bool {
    matches!(emit, StreamEmit::WireDump | StreamEmit::Json)
}

/// The sources a window or part of the input at `base` (at `at`) is
/// emitted with: none, unless the emit locates ops; then the window as
/// file 0.
fn window_sources(emit: StreamEmit, name: &str, text: &str, base: usize, at: LineCol) -> SourceMap {
    let mut sources = SourceMap::new();
    if locates(emit) {
        let offset = u32::try_from(base).unwrap_or(u32::MAX);
        sources.add_window(name, text, offset, at.line, at.column);
    }
    sources
}

/// Streams `input` through the pipeline `build` makes, writing the output
/// to `out` as it is produced. See the module docs for the errors; after
/// one, what was written to `out` is not the output. `wire-dump` and
/// `json` locate ops in `<input>` ([`run_chunked_named`] names it). A
/// `json` document is written up to the end of its ops: end it with
/// `wire::JsonWriter::after(output.ops).tail(diagnostics)`, the run's
/// warnings as JSON (their lines are not held: read them again).
pub fn run_chunked(
    input: &mut dyn Read,
    out: &mut dyn Write,
    build: &BuildPasses<'_>,
    opts: ChunkOptions,
) -> Result<ChunkOutput, ChunkError> {
    run_chunked_named(input, "<input>", out, build, opts)
}

/// [`run_chunked`] on an input called `name` (`wire-dump` and `json` show
/// each op at `name:line:col`, as the whole-module path does).
pub fn run_chunked_named(
    input: &mut dyn Read,
    name: &str,
    out: &mut dyn Write,
    build: &BuildPasses<'_>,
    opts: ChunkOptions,
) -> Result<ChunkOutput, ChunkError> {
    let sopts = opts.stream;
    if !can_stream_from_reader(sopts.emit) {
        return Err(ChunkError::GiveUp);
    }
    let mut pm = PassManager::new(build().ok_or(ChunkError::GiveUp)?, sopts.instrumentation)
        .timed(sopts.timed)
        .limited(sopts.limit);
    let mut rd = Reader { input, eof: false };
    let mut seq = Seq {
        state: Some({
            let state = StreamState::new(FileId(0), sopts.parse);
            if opts.cut_long_runs {
                state.cutting_long_blank_runs()
            } else {
                state
            }
        }),
        buf: Vec::new(),
        base: 0,
        started: false,
        op_index: 0,
        records: 0,
        indent: Vec::new(),
        times: Times::default(),
        at: LineCol::default(),
        name: name.to_string(),
        arch: None,
        json: wire::JsonWriter::default(),
        op_ids: 0,
    };
    let parallel = sopts.threads > 1;
    let done = sequential(&mut rd, out, &mut pm, &mut seq, opts, parallel)?;
    let mut parts = 0;
    if !done {
        let buffers = seq.state.as_mut().map_or(0, |s| s.module().buffers.len());
        match part_bytes(opts, buffers) {
            Some(window_bytes) => {
                let opts = ChunkOptions {
                    window_bytes,
                    ..opts
                };
                parts = parts_phase(&mut rd, out, &mut pm, &mut seq, opts)?;
            }
            // Copying the state to every part would cost more than the
            // parts' work: the rest streams on this thread.
            None => {
                sequential(&mut rd, out, &mut pm, &mut seq, opts, false)?;
            }
        }
    }
    let clock = Clock(sopts.timed);
    let t = clock.start();
    match sopts.emit {
        StreamEmit::Ir => {
            let mut footer = String::new();
            print_footer(&mut footer);
            out.write_all(footer.as_bytes())
        }
        StreamEmit::WireBin => out.write_all(&wire::bin_end(seq.records)),
        _ => Ok(()),
    }
    .map_err(ChunkError::Write)?;
    out.flush().map_err(ChunkError::Write)?;
    Clock::add(t, &mut seq.times.emit);
    // Warnings are in the report, their spans offsets in the input; the
    // caller reads the lines they point at again to render them.
    let report = phase_report(&mut pm, sopts, &seq.times);
    Ok(ChunkOutput {
        report,
        parts,
        bytes: seq.base + seq.buf.len(),
        ops: seq.op_index,
    })
}

/// Bytes of a part per buffer declared (project-defined), once the
/// buffers are more than a default window's worth at this rate: every
/// part starts from a copy of the parser state, which holds the buffers,
/// so parts grow with them and the copies stay a small share of the work
/// (linear in the input, not in the input times the buffers).
const PART_BYTES_PER_BUFFER: usize = 256;

/// The size of the parts for a module of `buffers` buffers: the window,
/// or [`PART_BYTES_PER_BUFFER`] per buffer when that is more than the
/// default window; `None` (stream on one thread) when that is more than a
/// quarter of the largest window.
fn part_bytes(opts: ChunkOptions, buffers: usize) -> Option<usize> {
    let per_buffer = buffers.saturating_mul(PART_BYTES_PER_BUFFER);
    if per_buffer <= DEFAULT_WINDOW_BYTES {
        return Some(opts.window_bytes);
    }
    let want = opts.window_bytes.max(per_buffer);
    (want <= opts.max_window_bytes / 4).then_some(want)
}

/// The input must stay within what spans can address.
fn check_size(base: usize, len: usize) -> Result<(), ChunkError> {
    if base.saturating_add(len) > MAX_SOURCE_BYTES {
        return Err(ChunkError::GiveUp);
    }
    Ok(())
}

/// Streams window after window on this thread: to the end of the input
/// (`Ok(true)`), or with `until_op`, until a window ends before an item
/// that is a top-level op at the start of a line (`Ok(false)`: the parts
/// take over from there, cutting at lines with its indentation).
fn sequential(
    rd: &mut Reader<'_>,
    out: &mut dyn Write,
    pm: &mut PassManager,
    seq: &mut Seq,
    opts: ChunkOptions,
    until_op: bool,
) -> Result<bool, ChunkError> {
    let sopts = opts.stream;
    let clock = Clock(sopts.timed);
    let cfg = ItemConfig {
        emit: sopts.emit,
        clock,
        part: false,
    };
    let window = opts.window_bytes.max(1);
    // Before the parts phase a whole window is read, but while no buffer
    // is declared among the ops in it only its first `window / 16` bytes
    // are streamed here (the module header, the buffers and the first
    // ops), so the workers start at once. A buffer declared among the
    // first window's ops is read here instead, where a part would send
    // the whole run back to one thread; so is a window that short holding
    // no whole item, which a whole window is tried for before windows grow.
    let mut want = window;
    let mut short = until_op;
    loop {
        let t = clock.start();
        rd.fill(&mut seq.buf, want)?;
        check_size(seq.base, seq.buf.len())?;
        let last = rd.eof;
        let skipping = seq.state.as_ref().is_some_and(StreamState::skipping);
        let cut = if last {
            seq.buf.len()
        } else {
            let upto = if short {
                seq.buf.len().min(window / 16)
            } else {
                seq.buf.len()
            };
            match window_cut(&seq.buf[..upto], skipping) {
                Some(cut) => cut,
                // A short window with no whole line: a whole one.
                None if short => {
                    short = false;
                    continue;
                }
                None => {
                    want = grow(want, opts)?;
                    continue;
                }
            }
        };
        let text = as_text(&seq.buf[..cut]).ok_or(ChunkError::GiveUp)?;
        let state = seq.state.take().ok_or(ChunkError::GiveUp)?;
        let mut sp = StreamParser::window(state, text, seq.base, last);
        Clock::add(t, &mut seq.times.parse);
        if !sp.started() {
            if sp.resume_at().is_none() {
                // The module header does not parse.
                return Err(ChunkError::Invalid(ErrorPhase::Syntax, None));
            }
            seq.state = Some(sp.into_state());
            if !std::mem::take(&mut short) {
                want = grow(want, opts)?;
            }
            continue;
        }
        if !seq.started {
            seq.started = true;
            let t = clock.start();
            let m = sp.module();
            seq.arch = Some(m.arch);
            match sopts.emit {
                StreamEmit::Ir => {
                    let mut header = String::new();
                    print_header(m, &mut header);
                    out.write_all(header.as_bytes())
                }
                StreamEmit::WireBin => out.write_all(&wire::bin_header(m.arch)),
                StreamEmit::Json => out.write_all(wire::JsonWriter::head(m.arch).as_bytes()),
                _ => Ok(()),
            }
            .map_err(ChunkError::Write)?;
            Clock::add(t, &mut seq.times.emit);
        }
        let sources = window_sources(sopts.emit, &seq.name, text, seq.base, seq.at);
        let part = run_items(
            &mut sp,
            &sources,
            pm,
            cfg,
            &|| false,
            seq.op_index,
            Vec::new(),
        )
        .map_err(|e| match e {
            // The error may be a cut's before a long blank run.
            Stop::Error(_) if sp.cut_at_a_long_run() => ChunkError::Uncut,
            Stop::Error(phase) => ChunkError::Invalid(phase, None),
            Stop::Buffer | Stop::Aborted | Stop::Cut => ChunkError::GiveUp,
        })?;
        let ops = part.op_count - seq.op_index;
        seq.op_index = part.op_count;
        seq.op_ids = seq.op_ids.saturating_add(part.op_ids);
        seq.records += part.records;
        seq.times.absorb(&part.times);
        let t = clock.start();
        if sopts.emit == StreamEmit::Json {
            out.write_all(seq.json.join(ops).as_bytes())
                .map_err(ChunkError::Write)?;
        }
        out.write_all(&part.out).map_err(ChunkError::Write)?;
        Clock::add(t, &mut seq.times.emit);
        let resume = sp.resume_at();
        seq.state = Some(sp.into_state());
        if last {
            seq.base += seq.buf.len();
            seq.buf.clear();
            return Ok(true);
        }
        let resume = resume.ok_or(ChunkError::GiveUp)?;
        let consumed = resume - seq.base;
        if consumed == 0 {
            if !std::mem::take(&mut short) {
                want = grow(want, opts)?;
            }
            continue;
        }
        let indent = op_indent(&seq.buf, consumed).map(<[u8]>::to_vec);
        if locates(sopts.emit) {
            seq.at = seq.at.after(&seq.buf[..consumed]);
        }
        seq.buf.drain(..consumed);
        seq.base = resume;
        want = window;
        if let (true, Some(indent)) = (until_op, indent) {
            if short && declares_buffer(&seq.buf, &indent) {
                // The rest of the first window is streamed here.
                short = false;
                continue;
            }
            seq.indent = indent;
            return Ok(false);
        }
    }
}

/// Whether a line of `buf` after its first begins with `indent` and then
/// `%`, as a buffer declaration among top-level ops does (a guess from
/// the text: a wrong one only costs time).
fn declares_buffer(buf: &[u8], indent: &[u8]) -> bool {
    let mut line = Vec::with_capacity(indent.len() + 2);
    line.push(b'\n');
    line.extend_from_slice(indent);
    line.push(b'%');
    memchr::memmem::find(buf, &line).is_some()
}

/// An input's errors as the whole-module path reports them, found by
/// [`diagnose`] without holding the input.
#[derive(Debug)]
pub struct Findings {
    /// The diagnostics in the whole-module path's order: its syntax
    /// errors; or else the verifier's (every buffer's, then every op's);
    /// or else the warnings so far and the errors of the first pass that
    /// fails; or else none, and the emit's error is [`Findings::emit`].
    /// Spans are offsets in the input, in file 0. Collected under the
    /// run's [`StreamOptions::limit`].
    pub diagnostics: Bounded,
    /// When every pass ran without an error but the emit cannot write the
    /// module ([`ErrorPhase::Emit`]): the emit's error for the first op in
    /// program order it fails on (an operand without descriptor bytes),
    /// and that op's span, which the caller locates (`file:line:col`) to
    /// word the error as the whole-module path does.
    pub emit: Option<(WireError, Span)>,
    /// The phase they are of.
    pub phase: ErrorPhase,
    /// What the whole-module path's report holds besides them: the phases
    /// it went through (`parse`; `verify` unless a syntax error stopped
    /// it; after a pass error, each pass that ran and its re-verification)
    /// with their times if [`StreamOptions::timed`], and after a pass
    /// error the statistics of the passes that ran.
    pub report: RunReport,
    /// The module's arch: its header's, or when the header has an error
    /// the parser options' (`None` if they name none), as a JSON document
    /// of the failure shows it (`null` for none).
    pub arch: Option<Arch>,
}

/// What [`diagnose`] has found so far, each list bounded by the run's
/// limit.
struct Found {
    /// Verifier errors: the buffers', the ops'.
    buffers: Bounded,
    ops: Bounded,
    /// The earliest pass that failed on some batch, and how.
    failed: Option<PassFailed>,
    /// The emit's first error and its op's span, once every batch before
    /// it verified and lowered ([`Findings::emit`]).
    emit: Option<(WireError, Span)>,
    /// Ops parsed in earlier batches: an op's id in the whole module is
    /// its id in its batch plus this.
    ops_before: u32,
}

/// How the earliest failing pass failed, over the batches so far.
struct PassFailed {
    /// Its index in the pipeline.
    pass: usize,
    /// The errors it reported.
    errors: Bounded,
    /// Where its output did not verify: the internal error saying so
    /// (once), then the verifier's errors.
    unverified: Bounded,
}

impl PassFailed {
    /// What the pass gives on the whole module: it reports its errors if
    /// any op has one; only when none has is its output verified.
    fn diagnostics(self) -> Bounded {
        if self.errors.is_empty() {
            self.unverified
        } else {
            self.errors
        }
    }

    /// Adds a batch's failure of the same pass.
    fn add(&mut self, f: BatchFailure) {
        if !f.unverified {
            self.errors.extend(f.diagnostics);
        } else if self.unverified.is_empty() {
            self.unverified.extend(f.diagnostics);
        } else {
            self.unverified.extend(f.diagnostics.into_iter().skip(1));
        }
    }
}

/// Finds, streaming (in windows on this thread, memory independent of the
/// input's size), the errors the whole-module path reports on `input`,
/// for an input streaming met an error in: the whole-module path parses
/// the whole input, then verifies it, then runs each pass on all of it,
/// and reports the first of the three that fails. One streamed run finds
/// all three at once: every window is parsed (the parser's state carries
/// its errors from window to window, up to [`apir_ir::parser::MAX_ERRORS`]),
/// each batch is verified until a syntax error appears, and lowered until
/// an error of either kind appears, each batch up to the earliest pass
/// that failed so far (op-local passes fail on a batch as on the whole
/// module). `Ok(None)` when it finds no error (the error was elsewhere,
/// for instance in the emit: the caller runs the whole-module path);
/// [`ChunkError::GiveUp`] for what streaming cannot read (invalid UTF-8,
/// an item past the window bound, ...).
///
/// `input` is `file` from offset `base` on (a case of a split input
/// starts past 0): spans are offsets in `file`. `upto` is the latest
/// phase to look at: an error of some phase was met (streaming stopped at
/// it), so no later phase can be the one reported, and a syntax or
/// verifier error is found without lowering anything.
pub fn diagnose(
    input: &mut dyn Read,
    file: FileId,
    base: usize,
    upto: ErrorPhase,
    build: &BuildPasses<'_>,
    opts: ChunkOptions,
) -> Result<Option<Findings>, ChunkError> {
    let sopts = opts.stream;
    let pm = PassManager::new(build().ok_or(ChunkError::GiveUp)?, sopts.instrumentation)
        .timed(sopts.timed)
        .limited(sopts.limit);
    let start = Checkpoint {
        base,
        state: StreamState::new(file, sopts.parse),
        pm,
        ops_before: 0,
        times: Times::default(),
    };
    diagnose_run(input, start, false, upto, opts)
}

/// [`diagnose`] picking up at `from`, where a multi-threaded attempt met
/// an error in a part ([`ChunkError::Invalid`]): `input` is the input
/// from [`Checkpoint::offset`] on. What it finds is what [`diagnose`]
/// finds on the whole input, without parsing, verifying and lowering
/// again the parts before, which went through without an error. `opts`
/// as for the attempt (its passes, limit and timing are in `from`).
pub fn diagnose_from(
    input: &mut dyn Read,
    from: Checkpoint,
    upto: ErrorPhase,
    opts: ChunkOptions,
) -> Result<Option<Findings>, ChunkError> {
    diagnose_run(input, from, true, upto, opts)
}

/// [`diagnose`] from `start` (`resumed`: a [`Checkpoint`] past the module
/// header).
fn diagnose_run(
    input: &mut dyn Read,
    start: Checkpoint,
    resumed: bool,
    upto: ErrorPhase,
    opts: ChunkOptions,
) -> Result<Option<Findings>, ChunkError> {
    let sopts = opts.stream;
    let clock = Clock(sopts.timed);
    let Checkpoint {
        base,
        mut state,
        mut pm,
        ops_before,
        mut times,
    } = start;
    let passes = pm.names().count();
    let mut rd = Reader { input, eof: false };
    let mut arch = if resumed {
        Some(state.module().arch)
    } else {
        sopts.parse.arch
    };
    let mut header_seen = resumed;
    let mut buf = Vec::new();
    let mut base = base;
    let limit = sopts.limit;
    let mut found = Found {
        buffers: Bounded::new(limit),
        ops: Bounded::new(limit),
        failed: None,
        emit: None,
        ops_before,
    };
    let window = opts.window_bytes.max(1);
    let mut want = window;
    loop {
        rd.fill(&mut buf, want)?;
        check_size(base, buf.len())?;
        let last = rd.eof;
        let cut = if last {
            buf.len()
        } else {
            match window_cut(&buf, state.skipping()) {
                Some(cut) => cut,
                None => {
                    want = grow(want, opts)?;
                    continue;
                }
            }
        };
        let text = as_text(&buf[..cut]).ok_or(ChunkError::GiveUp)?;
        let t = clock.start();
        let mut sp = StreamParser::window(state, text, base, last);
        Clock::add(t, &mut times.parse);
        if sp.started() && !header_seen {
            // Nothing past the header is parsed yet: its errors are the
            // header's.
            header_seen = true;
            if sp.errors().is_empty() {
                arch = Some(sp.module().arch);
            }
        }
        if !sp.started() {
            let header_failed = sp.resume_at().is_none();
            let errors = sp.errors().to_vec();
            state = sp.into_state();
            if header_failed {
                // The module header does not parse: nothing else does.
                if !last {
                    read_rest(&mut rd, &mut buf, base, window)?;
                }
                let mut found = Bounded::new(limit);
                found.extend(errors);
                return Ok((!found.is_empty()).then(|| Findings {
                    diagnostics: found,
                    emit: None,
                    phase: ErrorPhase::Syntax,
                    report: phases(&times, ErrorPhase::Syntax),
                    arch,
                }));
            }
            want = grow(want, opts)?;
            continue;
        }
        diagnose_items(
            &mut sp,
            &mut pm,
            Stage {
                passes,
                upto,
                emit: sopts.emit,
            },
            &mut found,
            clock,
            &mut times,
        );
        let resume = sp.resume_at();
        let full = sp.errors().len() >= apir_ir::parser::MAX_ERRORS;
        state = sp.into_state();
        if last {
            break;
        }
        if full {
            // The parser stops at its limit: the rest is not parsed.
            read_rest(&mut rd, &mut buf, base, window)?;
            break;
        }
        let resume = resume.ok_or(ChunkError::GiveUp)?;
        let consumed = resume - base;
        if consumed == 0 {
            want = grow(want, opts)?;
            continue;
        }
        buf.drain(..consumed);
        base = resume;
        want = window;
    }
    let mut out = Bounded::new(limit);
    let mut passes = RunReport::default();
    let phase = if !state.errors().is_empty() {
        out.extend(state.errors().iter().cloned());
        ErrorPhase::Syntax
    } else if !found.buffers.is_empty() || !found.ops.is_empty() {
        out.append(found.buffers);
        out.append(found.ops);
        ErrorPhase::Verify
    } else if let Some(failed) = found.failed {
        // The passes after the failing one never ran on the whole module.
        pm.forget_from(failed.pass + 1);
        passes = pm.take_report();
        out.extend(std::mem::take(&mut passes.warnings));
        out.omit(passes.omitted);
        out.append(failed.diagnostics());
        ErrorPhase::Passes
    } else if found.emit.is_some() {
        // Every pass ran on the whole module; the emit's error replaces
        // their warnings.
        passes = pm.take_report();
        passes.warnings.clear();
        ErrorPhase::Emit
    } else {
        return Ok(None);
    };
    let mut report = phases(&times, phase);
    report.timings.extend(passes.timings);
    report.statistics = passes.statistics;
    Ok(Some(Findings {
        diagnostics: out,
        emit: found.emit.filter(|_| phase == ErrorPhase::Emit),
        phase,
        report,
        arch,
    }))
}

/// Reads the rest of the input as the whole-module path does before it
/// parses anything (`buf` holding the input from `base` on): an input
/// that is not UTF-8 or longer than spans can address is reported as such
/// by that path, whatever its syntax errors ([`ChunkError::GiveUp`]).
/// One window at a time.
fn read_rest(
    rd: &mut Reader<'_>,
    buf: &mut Vec<u8>,
    mut base: usize,
    window: usize,
) -> Result<(), ChunkError> {
    loop {
        let upto = buf.len() + window;
        rd.fill(buf, upto)?;
        check_size(base, buf.len())?;
        match std::str::from_utf8(buf) {
            Ok(_) => {
                base += buf.len();
                buf.clear();
            }
            // A character cut by the read: it ends in the next one.
            Err(e) if e.error_len().is_none() && !rd.eof => {
                base += e.valid_up_to();
                buf.drain(..e.valid_up_to());
            }
            Err(_) => return Err(ChunkError::GiveUp),
        }
        if rd.eof {
            return Ok(());
        }
    }
}

/// The report of the phases the whole-module path goes through before it
/// stops at an error of `phase`, without the passes.
fn phases(times: &Times, phase: ErrorPhase) -> RunReport {
    let mut timings = vec![("parse".to_string(), times.parse)];
    if phase > ErrorPhase::Syntax {
        timings.push(("verify".to_string(), times.verify));
    }
    RunReport {
        timings,
        ..RunReport::default()
    }
}

/// What [`diagnose_items`] runs on each batch.
#[derive(Clone, Copy)]
struct Stage {
    /// The pipeline's passes.
    passes: usize,
    /// The latest phase to look at.
    upto: ErrorPhase,
    /// The emit whose errors [`ErrorPhase::Emit`] looks for.
    emit: StreamEmit,
}

/// One window's items for [`diagnose`], batch after batch.
fn diagnose_items(
    sp: &mut StreamParser<'_>,
    pm: &mut PassManager,
    stage: Stage,
    found: &mut Found,
    clock: Clock,
    times: &mut Times,
) {
    let Stage { passes, upto, emit } = stage;
    let mut done = false;
    while !done {
        let mut ops = 0;
        let t = clock.start();
        while ops < BATCH_OPS {
            match sp.next_item() {
                None => {
                    done = true;
                    break;
                }
                Some(Ok(Item::Op(_))) => ops += 1,
                Some(_) => {}
            }
        }
        Clock::add(t, &mut times.parse);
        let parsed = sp.errors().is_empty();
        let m: &mut Module = sp.module();
        let before = found.ops_before;
        let numbered = op_ids(m);
        pm.begin_batch(numbered);
        // An op's subject as the whole module numbers it.
        let renumber = |mut d: Diagnostics| {
            for s in d.iter_mut().filter_map(|d| d.subject.as_mut()) {
                s.op = numbered_after(s.op, before);
            }
            d
        };
        if parsed && upto >= ErrorPhase::Verify && !m.body.is_empty() {
            let t = clock.start();
            for &item in &m.body {
                if let Item::Buffer(b) = item {
                    if let Err(d) = verify_buffer(m, b) {
                        found.buffers.extend(d);
                    }
                }
            }
            if let Err(d) = verify_ops(m, m.top_ops()) {
                found.ops.extend(renumber(d));
            }
            Clock::add(t, &mut times.verify);
            if upto >= ErrorPhase::Passes && found.buffers.is_empty() && found.ops.is_empty() {
                lint_batch(pm, m);
                // The passes up to the earliest that failed so far.
                let until = found.failed.as_ref().map_or(passes, |f| f.pass + 1);
                if ops > 0 {
                    if let Err(mut f) = pm.run_batch_upto(m, until) {
                        f.diagnostics = renumber(f.diagnostics);
                        match &mut found.failed {
                            Some(failed) if failed.pass == f.pass => failed.add(f),
                            // An earlier pass: the whole module stops there.
                            _ => {
                                let mut failed = PassFailed {
                                    pass: f.pass,
                                    errors: Bounded::new(found.ops.limit()),
                                    unverified: Bounded::new(found.ops.limit()),
                                };
                                failed.add(f);
                                found.failed = Some(failed);
                            }
                        }
                    }
                }
                // The emit's first error, while no batch has failed
                // before it (an error of an earlier phase anywhere wins).
                if upto >= ErrorPhase::Emit
                    && emit != StreamEmit::Ir
                    && found.failed.is_none()
                    && found.emit.is_none()
                {
                    if let Err(e) = wire::collect_from(m, &SourceMap::new(), None, 0) {
                        found.emit = emit_failure(m, e, before);
                    }
                }
            }
        }
        found.ops_before = found.ops_before.saturating_add(numbered);
        m.clear_batch();
    }
}

/// The emit's error `e` on a batch whose ops follow `before` ops of
/// earlier batches, with the span of the op it is about, the op numbered
/// as in the whole module; `None` for an error about no op (none that
/// [`wire::collect_from`] gives).
fn emit_failure(m: &Module, e: WireError, before: u32) -> Option<(WireError, Span)> {
    let WireError::NotEncoded {
        mut subject,
        location,
    } = e
    else {
        return None;
    };
    // The span of the op that has no bytes (its subject names the op it
    // stands for, which may be gone).
    let span = m.ops.get(wire::first_not_encoded(m)?)?.span;
    subject.op = numbered_after(subject.op, before);
    Some((WireError::NotEncoded { subject, location }, span))
}

/// Where a window of `buf` (read input, not its end) may end: after its
/// last line feed, or, when that leaves more than half of `buf` (a line
/// longer than half a window, such as a module written with its ops on one
/// line), after the last blank that a letter follows past it. `None` if
/// neither is in `buf`: the window grows.
///
/// Both keep the parser's window rule exact ([`StreamParser::window`]):
/// the grammar's lookaheads stop at a line end, and none reads past a
/// blank but by skipping blanks, which at the window's end leaves the item
/// there uncertain; the one that scans blanks by hand (`role =`) looks for
/// punctuation, which the letter after the cut is not. Tokens end at the
/// blank before the cut, as they do in the whole input.
fn window_end(buf: &[u8]) -> Option<usize> {
    let line = buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1);
    let from = line.unwrap_or(0);
    if line.is_some_and(|l| l >= buf.len() / 2) {
        return line;
    }
    let inside = buf[from..]
        .windows(2)
        .rposition(|w| matches!(w[0], b' ' | b'\t') && w[1].is_ascii_alphabetic())
        .map(|i| from + i + 1);
    inside.or(line)
}

/// `bytes` as text if they are UTF-8. Every byte of a streamed input is
/// checked here once, so the check is `simdutf8`'s, which reads 32 bytes
/// a step where the standard library's reads a word. It says only
/// whether: on input that is not UTF-8 the callers give up on the window
/// or part, and the run's diagnostic then names the line and column of
/// the first bad byte.
fn as_text(bytes: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(bytes).ok()
}

/// Where a window of `buf` may end: [`window_end`], or, when the window
/// begins inside a line that error recovery skips
/// ([`StreamState::skipping`]) and `buf` has neither a line feed nor a cut
/// inside a line, after its last whole UTF-8 character: the parser skips
/// all of it, as the parser of the whole input skips the rest of that
/// line, so a long line after a syntax error is never held whole.
fn window_cut(buf: &[u8], skipping: bool) -> Option<usize> {
    let cut = window_end(buf);
    if cut.is_some() || !skipping {
        return cut;
    }
    let whole = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        // A character cut by the end of `buf`; any other error is reported
        // where the window is read as text.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    (whole > 0).then_some(whole)
}

/// The next window size when a window held no whole item.
fn grow(want: usize, opts: ChunkOptions) -> Result<usize, ChunkError> {
    if want >= opts.max_window_bytes {
        return Err(ChunkError::GiveUp);
    }
    Ok(want.saturating_mul(2).min(opts.max_window_bytes))
}

/// The indentation of the item at `at` if it is a top-level op at the
/// start of a line: the blanks before it on its line, then a letter.
fn op_indent(buf: &[u8], at: usize) -> Option<&[u8]> {
    let line = buf[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let indent = &buf[line..at];
    let blank = indent.iter().all(|&b| b == b' ' || b == b'\t');
    (blank && buf.get(at).is_some_and(u8::is_ascii_alphabetic)).then_some(indent)
}

/// The start of the line after the first line feed at or after `at`.
fn next_line(buf: &[u8], at: usize) -> Option<usize> {
    let nl = buf.get(at..)?.iter().position(|&b| b == b'\n')?;
    Some(at + nl + 1)
}

/// The first cut at or after `from`: the start of a line that begins with
/// `indent` and then a letter (where the printer puts a top-level op),
/// pointing at the letter's line start. If `buf` has none yet, `Err` says
/// where to look again once more is read (the last line it could not
/// decide): the scan goes on from there rather than from `from`, so a run
/// of lines without a cut is scanned once however often `buf` grows.
fn find_cut(buf: &[u8], from: usize, indent: &[u8]) -> Result<usize, usize> {
    let Some(mut at) = from.checked_sub(1) else {
        return Err(from);
    };
    loop {
        let Some(line) = next_line(buf, at) else {
            // No line feed from `at` on: the next look starts at the end.
            return Err(buf.len().max(at + 1));
        };
        let after = line + indent.len();
        match (buf.get(line..after), buf.get(after)) {
            (Some(lead), Some(b)) if lead == indent && b.is_ascii_alphabetic() => return Ok(line),
            // Not yet known: the line's start is not all read.
            (Some(lead), None) if lead == indent => return Err(line),
            (None, _) if indent.starts_with(&buf[line..]) => return Err(line),
            _ => at = line,
        }
    }
}

/// Windows' worth of input a part may grow to with no op line before it
/// is cut at a blank or comment line instead (project-defined): past any
/// top-level item but a kernel of that size, so a kernel's body (whose
/// lines are no cut) is seldom cut and the attempt seldom retried, and a
/// run of blank or comment lines longer than the largest window streams.
const BLANK_CUT_WINDOWS: usize = 16;

/// The last start of a blank or comment line at or after `from` (a line
/// of blanks that is empty or goes on with `//`) that `buf` shows whole
/// enough to tell, if any: where a part may end when no op line comes
/// (the last one, so that what follows the cut, copied into the next
/// part, is short). The cut is proved as any other (a part cut inside an
/// item does not parse). Also where to look again once more is read (the
/// first line it could not decide): the lines before it are not looked
/// at again.
fn last_blank_cut(buf: &[u8], from: usize) -> (Option<usize>, usize) {
    let mut last = None;
    let Some(mut at) = from.checked_sub(1) else {
        return (last, from);
    };
    loop {
        let Some(line) = next_line(buf, at) else {
            return (last, buf.len().max(at + 1));
        };
        let rest = &buf[line..];
        let lead = rest
            .iter()
            .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r'))
            .count();
        let blank = match rest.get(lead..lead + 2) {
            Some(two) => two[0] == b'\n' || two == b"//",
            None if rest.get(lead) == Some(&b'\n') => true,
            None if rest.get(lead).is_some_and(|&b| b != b'/') => false,
            // Not yet known: the line's start is not all read.
            None => return (last, line),
        };
        if blank {
            last = Some(line);
        }
        at = line;
    }
}

/// Whether the last line of `text` that is neither blank nor a comment
/// is a lone `}` indented less than the top-level ops (`indent`; with
/// ops not indented, any lone `}`): the module's closing brace, after
/// which only blank and comment lines may come.
fn closes_module(text: &[u8], indent: &[u8]) -> bool {
    let last = text
        .split(|&b| b == b'\n')
        .rev()
        .map(|l| (l, l.trim_ascii_start()))
        .find(|(_, t)| !t.is_empty() && !t.starts_with(b"//"));
    last.is_some_and(|(line, t)| {
        let lead = line.len() - t.len();
        t.trim_ascii_end() == b"}" && (indent.is_empty() || lead < indent.len())
    })
}

/// A part for a worker.
struct Job {
    index: usize,
    text: Vec<u8>,
    /// A buffer for the part's output (a written part's, handed back).
    out: Vec<u8>,
    base: usize,
    /// Where `base` lies in the input.
    at: LineCol,
    last: bool,
    state: StreamState,
    pm: PassManager<dyn Pass + Send>,
}

/// A worker's result: the part's output and its pass manager, or why it
/// failed, and the part's text buffer handed back for reuse.
type Done = (usize, Result<Finished, Stop>, Vec<u8>);

/// A part a worker finished: its output, its pass manager, and whether
/// its `wire-bin` records already hold their op indices in the whole
/// run (see [`Written`]).
type Finished = (crate::stream::Part, PassManager<dyn Pass + Send>, bool);

/// What the writing thread has written, for the workers: the parts
/// written (in order) and the ISA ops in them. A worker whose part is
/// the next to be written knows the op index its part starts at, and
/// shifts its `wire-bin` records there itself, while the output is still
/// in its cache; any other part is shifted as it is written.
type Written = Mutex<(usize, usize)>;

/// The multi-threaded phase: parts cut at op lines, lowered on
/// `opts.stream.threads` workers, written and absorbed in order on this
/// thread. Returns the number of parts.
fn parts_phase(
    rd: &mut Reader<'_>,
    out: &mut dyn Write,
    pm: &mut PassManager,
    seq: &mut Seq,
    opts: ChunkOptions,
) -> Result<usize, ChunkError> {
    let sopts = opts.stream;
    let clock = Clock(sopts.timed);
    let template = pm.fork().ok_or(ChunkError::Retry)?;
    let state = seq.state.take().ok_or(ChunkError::GiveUp)?;
    let indent = std::mem::take(&mut seq.indent);
    let window = opts.window_bytes.max(1);
    // The lowest index of a part that failed: the parts after it stop
    // (`Stop::Aborted`), the parts before it go on, so the first part to
    // fail in part order always runs to its error, and the parts before it
    // are written (a diagnosis picks up after them: `Checkpoint`).
    let first_failed = AtomicUsize::new(usize::MAX);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let written_to: Written = Mutex::new((0, seq.op_index));
    let cfg = ItemConfig {
        emit: sopts.emit,
        clock,
        part: true,
    };
    let name = seq.name.as_str();
    let mut failed: Option<ChunkError> = None;
    // Parts done, not yet written (in order).
    let mut pending: BTreeMap<usize, Result<_, Stop>> = BTreeMap::new();
    let mut parts = 0;
    // The kernels the parts written defined, checked in part order.
    let mut kernels: HashMap<String, Span> = HashMap::new();
    // Where each part sent and not yet written starts.
    let mut bases: BTreeMap<usize, usize> = BTreeMap::new();
    // The run stopped at a part that failed (or was stopped), every part
    // before it written and absorbed.
    let mut resumable = false;
    std::thread::scope(|s| {
        for _ in 0..sopts.threads {
            let done_tx = done_tx.clone();
            let (job_rx, first_failed, written_to) = (&job_rx, &first_failed, &written_to);
            s.spawn(move || loop {
                let job = match job_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(mut job) = job else { return };
                let stop = || first_failed.load(Ordering::Relaxed) < job.index;
                let result = if stop() {
                    Err(Stop::Aborted)
                } else {
                    // A panic (a bug) fails the part; the one-thread rerun
                    // meets it again on the calling thread, which reports it.
                    // So does text that is not UTF-8.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let text = as_text(&job.text).ok_or(Stop::Aborted)?;
                        let sources = window_sources(cfg.emit, name, text, job.base, job.at);
                        let mut sp = StreamParser::part(job.state, text, job.base, job.last);
                        let mut part =
                            run_items(&mut sp, &sources, &mut job.pm, cfg, &stop, 0, job.out)
                                .map_err(|stop| match stop {
                                    Stop::Error(ErrorPhase::Syntax)
                                        if at_a_cut(text, job.base, job.last, sp.errors()) =>
                                    {
                                        Stop::Cut
                                    }
                                    stop => stop,
                                })?;
                        let base = match written_to.lock() {
                            Ok(w) if cfg.emit == StreamEmit::WireBin && w.0 == job.index => {
                                Some(w.1)
                            }
                            _ => None,
                        };
                        if let Some(base) = base.filter(|&b| b > 0) {
                            wire::rebase_binary(&mut part.out, base);
                        }
                        Ok((part, job.pm, base.is_some()))
                    }))
                    .unwrap_or(Err(Stop::Aborted))
                };
                if result.is_err() {
                    first_failed.fetch_min(job.index, Ordering::Relaxed);
                }
                if done_tx.send((job.index, result, job.text)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        // Text buffers of finished parts, for the next parts (at most one
        // per part in flight), and output buffers of written parts: the
        // same few buffers go round, so memory stays what the largest
        // parts took, whatever the input's length.
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut outs: Vec<Vec<u8>> = Vec::new();
        let (mut sent, mut written, mut input_done) = (0usize, 0usize, false);
        let mut buf = std::mem::take(&mut seq.buf);
        'run: loop {
            // Write what is ready, in order.
            while let Ok((i, r, text)) = done_rx.try_recv() {
                pending.insert(i, r);
                pool.push(text);
            }
            while let Some(r) = pending.remove(&written) {
                let (mut part, fork, rebased) = match r {
                    Ok(done) => done,
                    Err(stop) => {
                        failed = Some(ChunkError::Retry);
                        pending.insert(written, Err(stop));
                        // Every part before it went through.
                        resumable = true;
                        break 'run;
                    }
                };
                // A kernel name defined in an earlier part: the one-thread
                // run reports it.
                let mut names = std::collections::HashSet::new();
                if !part
                    .kernels
                    .iter()
                    .all(|(k, _)| !kernels.contains_key(k) && names.insert(k))
                {
                    failed = Some(ChunkError::Retry);
                    // (The one-thread run reports it.)
                    break 'run;
                }
                kernels.extend(std::mem::take(&mut part.kernels));
                let t = clock.start();
                let written_out = match sopts.emit {
                    StreamEmit::WireBin => {
                        if !rebased && seq.op_index > 0 {
                            wire::rebase_binary(&mut part.out, seq.op_index);
                        }
                        out.write_all(&part.out)
                    }
                    StreamEmit::WireHex | StreamEmit::WireDump | StreamEmit::Json => {
                        // The part rendered its text in the worker, its op
                        // indices counted from 0: they are shifted as the
                        // text is written, through a small buffer (the
                        // rest of the text is copied, not formatted).
                        let sep = match sopts.emit {
                            StreamEmit::Json => seq.json.join(part.op_count),
                            _ => "",
                        };
                        if seq.op_index == 0 {
                            out.write_all(sep.as_bytes())
                                .and_then(|()| out.write_all(&part.out))
                        } else {
                            let mut w = io::BufWriter::with_capacity(REBASE_BUFFER, &mut *out);
                            w.write_all(sep.as_bytes())
                                .and_then(|()| {
                                    wire::write_rebased(
                                        &part.out,
                                        &part.marks,
                                        seq.op_index,
                                        &mut w,
                                    )
                                })
                                .and_then(|()| w.flush())
                        }
                    }
                    _ => out.write_all(&part.out),
                };
                if let Err(e) = written_out {
                    failed = Some(ChunkError::Write(e));
                    break 'run;
                }
                Clock::add(t, &mut seq.times.emit);
                outs.push(std::mem::take(&mut part.out));
                seq.op_index += part.op_count;
                seq.op_ids = seq.op_ids.saturating_add(part.op_ids);
                seq.records += part.records;
                seq.times.absorb(&part.times);
                // A pass whose fork's results may differ from the
                // one-thread run's (a budget it carries in program order
                // was bound by the parts before): that run decides.
                if !pm.absorb(fork) {
                    failed = Some(ChunkError::Retry);
                    break 'run;
                }
                bases.remove(&written);
                written += 1;
                if let Ok(mut w) = written_to.lock() {
                    *w = (written, seq.op_index);
                }
            }
            if input_done && written == sent {
                break;
            }
            // (No part is read after one failed: the parts before it finish,
            // then the run stops at it.)
            let failing = first_failed.load(Ordering::Relaxed) != usize::MAX;
            if !input_done && !failing && sent - written < opts.in_flight.max(1) {
                // Read the next part.
                let t = clock.start();
                let (mut scan, mut blank_scan) = (window, window);
                let cut = loop {
                    if buf.len() >= window {
                        match find_cut(&buf, scan, &indent) {
                            Ok(c) => break Some(c),
                            Err(next) => scan = next,
                        }
                    }
                    if buf.len() >= window.saturating_mul(BLANK_CUT_WINDOWS) {
                        let (blank, next) = last_blank_cut(&buf, blank_scan);
                        blank_scan = next;
                        match blank {
                            // Lines after the module's closing `}`: a cut
                            // there would leave the `}` in a part that is
                            // not the last (an error); they are read to
                            // the end of the input as before.
                            Some(c) if closes_module(&buf[..c], &indent) => {
                                blank_scan = usize::MAX;
                            }
                            Some(c) => break Some(c),
                            None => {}
                        }
                    }
                    if rd.eof {
                        break None;
                    }
                    if buf.len() >= opts.max_window_bytes {
                        failed = Some(ChunkError::Retry);
                        break 'run;
                    }
                    // A part is cut at the first op line past `window`:
                    // read a little past it, so that what follows the cut
                    // (copied into the next part's buffer) stays small.
                    let upto = if buf.len() < window {
                        window + (window / 16).max(1)
                    } else {
                        buf.len() + window
                    };
                    let filled = rd
                        .fill(&mut buf, upto)
                        .and_then(|()| check_size(seq.base, buf.len()));
                    if let Err(e) = filled {
                        failed = Some(e);
                        break 'run;
                    }
                };
                let (text, last) = match cut {
                    Some(c) => {
                        // The rest starts the next part, in a buffer a
                        // finished part handed back: the same few buffers
                        // go round instead of one allocation per part.
                        let mut rest = pool.pop().unwrap_or_default();
                        rest.clear();
                        rest.extend_from_slice(&buf[c..]);
                        buf.truncate(c);
                        (std::mem::replace(&mut buf, rest), false)
                    }
                    None => (std::mem::take(&mut buf), true),
                };
                Clock::add(t, &mut seq.times.parse);
                let Some(fork) = template.fork() else {
                    failed = Some(ChunkError::Retry);
                    break 'run;
                };
                let job = Job {
                    index: sent,
                    base: seq.base,
                    at: seq.at,
                    last,
                    text,
                    out: outs.pop().unwrap_or_default(),
                    state: state.clone(),
                    pm: fork,
                };
                bases.insert(sent, seq.base);
                seq.base += job.text.len();
                if locates(sopts.emit) {
                    seq.at = seq.at.after(&job.text);
                }
                if job_tx.send(job).is_err() {
                    failed = Some(ChunkError::Retry);
                    break 'run;
                }
                sent += 1;
                input_done = last;
                continue;
            }
            match done_rx.recv() {
                Ok((i, r, text)) => {
                    pending.insert(i, r);
                    pool.push(text);
                }
                Err(_) => {
                    failed = Some(ChunkError::Retry);
                    break;
                }
            }
        }
        if failed.is_some() {
            // Nothing more is written: every part still running stops.
            first_failed.store(0, Ordering::Relaxed);
        }
        drop(job_tx);
        parts = sent;
    });
    // Whether the first part that failed by itself (not aborted because
    // another failed) met an error that is the input's: a verifier, pass
    // or emit error, or a syntax error inside the part (one on its first
    // or last line may be a cut's, `Stop::Cut`: the one-thread run tells).
    // A syntax error inside may still come from a cut inside a kernel, or
    // from a buffer declared in an earlier part that was aborted first:
    // the diagnosis then finds none, and the one-thread run tells.
    pending.extend(done_rx.try_iter().map(|d| (d.0, d.1)));
    let invalid = pending
        .values()
        .find_map(|r| match r {
            Err(Stop::Aborted) | Ok(_) => None,
            Err(Stop::Error(phase)) => Some(Some(*phase)),
            Err(Stop::Buffer | Stop::Cut) => Some(None),
        })
        .flatten();
    match failed {
        Some(ChunkError::Retry) if invalid.is_some() => {
            // Every part before the first one not written went through
            // without an error: a diagnosis can start there.
            let first_unwritten = bases.first_key_value().map(|(_, &base)| base);
            let resume = first_unwritten.filter(|_| resumable).and_then(|base| {
                let mut state = state.without_long_run_cuts()?;
                for (name, span) in kernels {
                    state.define_kernel(&name, span);
                }
                let empty = PassManager::new(Vec::new(), sopts.instrumentation);
                Some(Box::new(Checkpoint {
                    base,
                    state,
                    pm: std::mem::replace(pm, empty),
                    ops_before: seq.op_ids,
                    times: seq.times.clone(),
                }))
            });
            match invalid.unwrap_or(ErrorPhase::Passes) {
                // Looked for from the start, a syntax error a part's cut
                // may have made would cost a diagnosis the one-thread run
                // makes anyway.
                ErrorPhase::Syntax if resume.is_none() => Err(ChunkError::Retry),
                phase => Err(ChunkError::Invalid(phase, resume)),
            }
        }
        Some(e) => Err(e),
        None => Ok(parts),
    }
}

/// Whether a part's first syntax error (among `errors`, spans offsets in
/// the input; the part is `text` from offset `base` on) lies on its first
/// line that is not blank or a comment, or on or after its last such line
/// unless it is the input's `last` part: where a cut inside an item puts
/// one (the rest of the item starting the part, an item cut short by the
/// part's end). A cut at a blank or comment line ([`last_blank_cut`]) may
/// leave such lines between the cut and the rest of the item, or between
/// the item cut short and the part's end, so they are passed over.
fn at_a_cut(text: &str, base: usize, last: bool, errors: &[Diagnostic]) -> bool {
    let Some(at) = errors.first().and_then(|d| d.span) else {
        return true;
    };
    let at = (at.start as usize).saturating_sub(base);
    let bytes = text.as_bytes();
    // The end of the first line an item is on (past its line feed).
    let mut start = 0;
    let first_end = loop {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        if end >= bytes.len() {
            break bytes.len();
        }
        if !blank_or_comment(&bytes[start..end]) {
            break end + 1;
        }
        start = end + 1;
    };
    // The start of the last line an item is on.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut end = body.len();
    let last_start = loop {
        let start = memchr::memrchr(b'\n', &body[..end]).map_or(0, |i| i + 1);
        if start == 0 || !blank_or_comment(&body[start..end]) {
            break start;
        }
        end = start - 1;
    };
    at < first_end || (!last && at >= last_start)
}

/// Whether `line` (without its line feed) holds only blanks, or blanks
/// and then a `//` comment: a line no item is on. The rule of
/// [`last_blank_cut`], which decides it from a line's first bytes as
/// they arrive; both are the parser's (blanks, CR, `//` to the line's
/// end).
fn blank_or_comment(line: &[u8]) -> bool {
    let lead = line
        .iter()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r'))
        .count();
    let rest = &line[lead..];
    rest.is_empty() || rest.starts_with(b"//")
}

#[cfg(test)]
mod tests {
    use super::{
        closes_module, find_cut, last_blank_cut, part_bytes, ChunkOptions, StreamEmit,
        StreamOptions,
    };
    use proptest::prelude::*;

    /// The cut by its definition, on the whole buffer: the first line
    /// start at or after `from` that `indent` and then a letter begin.
    fn cut_of(buf: &[u8], from: usize, indent: &[u8]) -> Option<usize> {
        (from.max(1)..buf.len()).find(|&l| {
            buf[l - 1] == b'\n'
                && buf[l..].starts_with(indent)
                && buf
                    .get(l + indent.len())
                    .is_some_and(u8::is_ascii_alphabetic)
        })
    }

    proptest! {
        /// Read a byte at a time, with the scan resumed where the last one
        /// stopped, the first cut found is the whole buffer's.
        #[test]
        fn resumed_scan_finds_the_first_cut(
            text in proptest::collection::vec(
                prop::sample::select(vec![b' ', b'\n', b'a', b'/', b'\t']), 0..80),
            indent in prop::sample::select(vec!["", " ", "  ", "\t "]),
            from in 1usize..20,
        ) {
            let indent = indent.as_bytes();
            let mut scan = from;
            let mut found = None;
            for len in from..=text.len() {
                match find_cut(&text[..len], scan, indent) {
                    Ok(c) => {
                        found = Some(c);
                        break;
                    }
                    Err(next) => {
                        prop_assert!(next >= scan && next <= len + 1, "{next} {scan} {len}");
                        scan = next;
                    }
                }
            }
            let want = cut_of(&text, from, indent);
            match found {
                Some(c) => prop_assert_eq!(Some(c), want),
                // Undecided at the end: the whole buffer has none.
                None => prop_assert!(want.is_none()),
            }
        }
    }

    /// The blank cuts by their definition, on the whole buffer.
    fn blank_cuts_of(buf: &[u8], from: usize) -> Vec<usize> {
        (from.max(1)..buf.len())
            .filter(|&l| {
                let rest = &buf[l..];
                let lead = rest
                    .iter()
                    .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r'))
                    .count();
                buf[l - 1] == b'\n'
                    && (rest[lead..].starts_with(b"\n") || rest[lead..].starts_with(b"//"))
            })
            .collect()
    }

    proptest! {
        /// Read a byte at a time, the scan resumed where the last one
        /// stopped: every blank cut reported is one of the whole buffer's,
        /// each later than the one before, and the last reported is the
        /// whole buffer's last.
        #[test]
        fn resumed_scan_finds_the_last_blank_cut(
            text in proptest::collection::vec(
                prop::sample::select(vec![b' ', b'\n', b'a', b'/', b'\t', b'\r']), 0..80),
            from in 1usize..20,
        ) {
            let mut scan = from;
            let mut seen = None;
            for len in from..=text.len() {
                let (last, next) = last_blank_cut(&text[..len], scan);
                prop_assert!(next >= scan && next <= len + 1, "{next} {scan} {len}");
                if let Some(c) = last {
                    prop_assert!(seen.is_none_or(|s| c > s), "{c} after {seen:?}");
                    prop_assert!(blank_cuts_of(&text, from).contains(&c), "{c}");
                    seen = Some(c);
                }
                scan = next;
            }
            let want = blank_cuts_of(&text, from);
            // The last line may be undecided at the end (blanks, or
            // blanks and one `/`): then it is not a cut of the whole
            // buffer either.
            prop_assert_eq!(seen, want.last().copied());
        }
    }

    #[test]
    fn a_syntax_error_on_a_parts_first_or_last_item_line_may_be_a_cuts() {
        use super::at_a_cut;
        use apir_ir::{Diagnostic, FileId, Span};
        let text = "  isa.a x\n  isa.b y\n  isa.c z\n";
        let base = 1000;
        let at = |o: usize| {
            [Diagnostic::error(
                Span::new(FileId(0), (base + o) as u32, (base + o + 1) as u32),
                "e",
            )]
        };
        // The first line, the last line, the end (an item cut short).
        for o in [0, 5, 9, 20, 29, text.len()] {
            assert!(at_a_cut(text, base, false, &at(o)), "at {o}");
        }
        // Inside.
        for o in [10, 15, 19] {
            assert!(!at_a_cut(text, base, false, &at(o)), "at {o}");
        }
        // The input's last part: no cut after it, only before.
        for o in [0, 9] {
            assert!(at_a_cut(text, base, true, &at(o)), "at {o}");
        }
        for o in [10, 20, 29, text.len()] {
            assert!(!at_a_cut(text, base, true, &at(o)), "at {o}");
        }
        // No span, or no error: not known to be the input's.
        assert!(at_a_cut(text, base, false, &[Diagnostic::error(None, "e")]));
        assert!(at_a_cut(text, base, true, &[]));
        // Blank and comment lines (a cut at one) before the first line an
        // item is on and after the last: passed over.
        let padded = "\n  // c\n\t\r\n  + 4, src = %b\n  isa.b y\n  isa.c z,\n //\n\n";
        let plus = padded.find('+').unwrap();
        let b = padded.find("isa.b").unwrap();
        let z = padded.find('z').unwrap();
        for o in [
            0,
            1,
            plus,
            plus + 5,
            b - 3,
            z,
            padded.len() - 1,
            padded.len(),
        ] {
            assert!(at_a_cut(padded, base, false, &at(o)), "at {o}");
        }
        for o in [b, b + 5, z - 9] {
            assert!(!at_a_cut(padded, base, false, &at(o)), "at {o}");
        }
        for o in [z, padded.len()] {
            assert!(!at_a_cut(padded, base, true, &at(o)), "at {o}");
        }
        assert!(at_a_cut(padded, base, true, &at(plus)));
        // The same with CRLF line ends.
        let crlf = padded.replace('\n', "\r\n");
        let plus = crlf.find('+').unwrap();
        let b = crlf.find("isa.b").unwrap();
        let z = crlf.find('z').unwrap();
        for o in [0, 2, plus, b - 4, z, crlf.len()] {
            assert!(at_a_cut(&crlf, base, false, &at(o)), "at {o}");
        }
        for o in [b, b + 5, z - 10] {
            assert!(!at_a_cut(&crlf, base, false, &at(o)), "at {o}");
        }
        // No line an item is on, or nothing at all: an error at the end
        // may be a cut's, unless the part is the input's last (then its
        // end is the input's).
        for part in ["", "\n", "  // c\n\n", "//"] {
            assert!(at_a_cut(part, base, false, &at(part.len())), "{part:?}");
            assert!(!at_a_cut(part, base, true, &at(part.len())), "{part:?}");
        }
        // Ending in comment lines without a line feed.
        let tail = "  isa.a x\n  isa.b y\n  // c";
        let y = tail.find('y').unwrap();
        assert!(at_a_cut(tail, base, false, &at(y)));
        assert!(at_a_cut(tail, base, false, &at(tail.len())));
        assert!(!at_a_cut(tail, base, true, &at(y)));
        // A part of one line, with or without its line feed.
        let third = [Diagnostic::error(Span::new(FileId(0), 3, 4), "e")];
        assert!(at_a_cut("  isa.a x\n", 0, false, &third));
        assert!(at_a_cut("  isa.a x", 0, true, &third));
    }

    #[test]
    fn parts_grow_with_the_buffers_they_copy() {
        let opts = ChunkOptions::new(StreamOptions::new(StreamEmit::WireBin));
        // A few buffers: the window.
        assert_eq!(part_bytes(opts, 0), Some(1 << 20));
        assert_eq!(part_bytes(opts, 4096), Some(1 << 20));
        // More: 256 bytes a buffer, up to a quarter of the largest window.
        assert_eq!(part_bytes(opts, 4097), Some(4097 * 256));
        assert_eq!(part_bytes(opts, 65536), Some(16 << 20));
        // Past it: one thread.
        assert_eq!(part_bytes(opts, 65537), None);
        // A window set larger stays.
        let wide = ChunkOptions {
            window_bytes: 8 << 20,
            ..opts
        };
        assert_eq!(part_bytes(wide, 10_000), Some(8 << 20));
    }

    #[test]
    fn the_module_brace_is_told_from_a_kernel_brace() {
        let ops = b"  isa.memset dst = %a[[1, 1]]\n";
        let module_end = [&ops[..], b"}\n\n  // trailing\n\n"].concat();
        assert!(closes_module(&module_end, b"  "));
        let kernel_end = [&ops[..], b"  }\n\n// between\n"].concat();
        assert!(!closes_module(&kernel_end, b"  "));
        assert!(!closes_module(ops, b"  "));
        // Ops not indented: any lone brace is taken for the module's.
        assert!(closes_module(b"isa.x\n}\n", b""));
        assert!(!closes_module(b"", b"  "));
    }
}
