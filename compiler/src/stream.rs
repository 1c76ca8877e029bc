//! The streaming driver: runs an op-local pipeline one top-level op at a
//! time, so memory stays proportional to the buffers and the output rather
//! than the module.
//!
//! Each batch of ops goes through the [`PassManager`]
//! ([`PassManager::run_batch`]): the one loop that runs the passes,
//! re-verifies after each and accounts their time, statistics and warnings,
//! accumulated over the batches.
//!
//! Every pass that declares itself [`apir_ir::Pass::op_local`] gives the same result,
//! statistics and diagnostics on a module holding the buffers and one op as
//! on the whole module, and the verifier checks each op with the same rules,
//! so streaming is an implementation detail of success. On the first error
//! of any kind the driver gives up and returns `None`; the caller then
//! finds what the whole-module path reports by streaming again
//! ([`crate::chunked::diagnose`]), or runs that path, which reports exactly
//! the diagnostics it always does.
//!
//! With several threads ([`StreamOptions::threads`]) a large input is cut
//! into parts of about [`StreamOptions::part_bytes`] at lines where a
//! top-level op begins, after the module header and the buffer declarations
//! that precede the first op. Each part is parsed by a fork of the parser
//! ([`StreamParser::fork`]) and lowered by a fork of the pass manager
//! ([`PassManager::fork`], copies of the passes by [`apir_ir::Pass::fork`])
//! on a `rayon` pool; outputs and op indices are joined in part order and
//! the forks absorbed in part order (statistics, warnings, times), so the
//! result is the one-thread result byte for byte. The cut is proved rather
//! than trusted: a part whose items do not all parse and verify (a cut
//! inside a multi-line op, a buffer declared among the ops, any error)
//! makes the driver fall back to one thread, which then behaves as above.

use crate::manager::{BuiltPass, Instrumentation, PassManager, RunReport};
use crate::wire::{self, IndexMarks, JsonWriter};
use apir_ir::printer::{print_footer, print_header, print_item};
use apir_ir::{
    lint_buffer, verify_buffer, verify_ops, DiagnosticLimit, FileId, Item, Module, Op,
    ParseOptions, Pass, SourceMap, Span, StreamParser,
};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the streaming driver writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEmit {
    /// IR text.
    Ir,
    /// Annotated wire dump.
    WireDump,
    /// One hex line per operand.
    WireHex,
    /// Raw descriptor bytes.
    WireBin,
    /// The JSON document.
    Json,
}

/// The size of the parts a multi-threaded run cuts its input into, unless
/// told otherwise (project-defined): large enough that forking the parser
/// and the passes per part costs nothing measurable, small enough that two
/// threads finish within a part of each other.
pub(crate) const DEFAULT_PART_BYTES: usize = 1 << 20;

/// How to stream.
#[derive(Clone, Copy, Debug)]
pub struct StreamOptions {
    /// Parser options (arch override).
    pub parse: ParseOptions,
    /// Instrumentation (IR dumps make streaming impossible; see [`can_stream`]).
    pub instrumentation: Instrumentation,
    /// What to write.
    pub emit: StreamEmit,
    /// Measure per-phase wall time.
    pub timed: bool,
    /// Worker threads; 1 streams on the calling thread.
    pub threads: usize,
    /// Bytes per part when `threads > 1`; an input shorter than two parts
    /// streams on one thread.
    pub part_bytes: usize,
    /// How many warnings the run keeps ([`PassManager::limited`]; every
    /// one by default), and for a diagnosis
    /// ([`crate::chunked::diagnose`]) how many errors.
    pub limit: DiagnosticLimit,
}

impl StreamOptions {
    /// One thread, no timing, default parser options.
    pub fn new(emit: StreamEmit) -> Self {
        StreamOptions {
            parse: ParseOptions::default(),
            instrumentation: Instrumentation::default(),
            emit,
            timed: false,
            threads: 1,
            part_bytes: DEFAULT_PART_BYTES,
            limit: DiagnosticLimit::NONE,
        }
    }
}

/// A successful streaming run.
#[derive(Debug, Default)]
pub struct StreamOutput {
    /// The emitted bytes.
    pub output: Vec<u8>,
    /// Timings (`parse`, `verify`, each pass, `(verify)`, `emit`) and
    /// statistics, as the whole-module path reports them. With several
    /// threads each phase's time is summed over the threads.
    pub report: RunReport,
    /// Parts the input was processed in (1 when it streamed on one thread).
    pub parts: usize,
}

/// Whether `passes` and `inst` allow streaming (every pass op-local, no IR
/// dumps between passes).
pub fn can_stream(passes: &[BuiltPass], inst: Instrumentation) -> bool {
    !inst.print_ir_after_all
        && !inst.print_ir_after_failure
        && passes.iter().all(|(_, p)| p.op_local())
}

/// A stopwatch that reads the clock only when timing was asked for: per-op
/// timing of a million ops would otherwise cost a noticeable share of the run.
#[derive(Clone, Copy)]
pub(crate) struct Clock(pub(crate) bool);

impl Clock {
    pub(crate) fn start(&self) -> Option<Instant> {
        self.0.then(Instant::now)
    }

    pub(crate) fn add(t: Option<Instant>, to: &mut Duration) {
        if let Some(t) = t {
            *to += t.elapsed();
        }
    }
}

/// Time per phase of one part, besides the passes and their verifier runs
/// (which the [`PassManager`] times).
#[derive(Clone, Debug, Default)]
pub(crate) struct Times {
    pub(crate) parse: Duration,
    pub(crate) verify: Duration,
    pub(crate) emit: Duration,
}

impl Times {
    pub(crate) fn absorb(&mut self, other: &Times) {
        self.parse += other.parse;
        self.verify += other.verify;
        self.emit += other.emit;
    }
}

/// Ops parsed, verified, lowered and emitted together (project-defined):
/// enough to spread each pass's per-run costs (its context, its counters,
/// the verifier's setup) over many ops, few enough that memory stays that of
/// the buffers and the output.
pub(crate) const BATCH_OPS: usize = 64;

/// What one run of [`run_items`] produced.
pub(crate) struct Part {
    /// IR text, raw bytes, or hex, dump or JSON text (JSON: the part's ops,
    /// separated by commas, without the document around them).
    pub(crate) out: Vec<u8>,
    /// In a part of a larger run, where hex, dump and JSON text hold op
    /// indices: they were counted from 0, and are shifted by the ops
    /// before the part when it is written ([`wire::write_rebased`]).
    pub(crate) marks: IndexMarks,
    /// The index after the last ISA op emitted.
    pub(crate) op_count: usize,
    /// `wire-bin` records emitted (for the end marker of the section).
    pub(crate) records: u64,
    /// The kernels the part defines, each name with its span (a part of
    /// a larger run; a name defined in two parts is a duplicate its parser
    /// could not see).
    pub(crate) kernels: Vec<(String, Span)>,
    /// The op ids its batches' parsing numbered, nested ops included: a
    /// module parsed whole numbers the ops after the part from the sum of
    /// these ([`op_ids`]).
    pub(crate) op_ids: u32,
    pub(crate) times: Times,
}

/// How [`run_items`] runs.
#[derive(Clone, Copy)]
pub(crate) struct ItemConfig {
    pub(crate) emit: StreamEmit,
    pub(crate) clock: Clock,
    /// A part of a larger run: hex, dump and JSON text notes where its op
    /// indices are ([`Part::marks`]; they are shifted when the parts are
    /// joined), and a buffer declaration gives up.
    pub(crate) part: bool,
}

/// The phase of the whole-module path an error belongs to. That path
/// parses the whole input, then verifies it, then runs the passes, then
/// emits, and reports the errors of the first phase that has any: an
/// error found in one phase says that no later phase needs looking at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorPhase {
    /// A syntax error.
    Syntax,
    /// A verifier error.
    Verify,
    /// An error of a pass.
    Passes,
    /// An error of the emit: an operand without the lowered form the emit
    /// writes (`wire-bin` after a pipeline that does not encode).
    Emit,
}

/// Why [`run_items`] stopped before the end of its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// An error: in the input, or, in a part, possibly a cut where no
    /// item begins (a syntax error).
    Error(ErrorPhase),
    /// A buffer declared in a part (parts share the buffers declared
    /// before them).
    Buffer,
    /// Another part failed.
    Aborted,
    /// A syntax error on a part's first line, or on its last unless it is
    /// the input's last part (the worker's `chunked::at_a_cut`), where a
    /// cut inside an item (an op written over several lines) puts one:
    /// maybe not the input's.
    Cut,
}

/// Parses, verifies, lowers (each batch through `pm`, which accumulates
/// the passes' statistics, warnings and times) and emits the items of `sp`
/// in batches of [`BATCH_OPS`] ops, numbering ISA ops from `first`;
/// stops at the first error, at a buffer declared in a part, or once
/// `abort` says so (asked before each batch). The output goes into `out`
/// (cleared first: a buffer of an earlier part, whose capacity is kept).
pub(crate) fn run_items<P: Pass + ?Sized>(
    sp: &mut StreamParser<'_>,
    sources: &SourceMap,
    pm: &mut PassManager<P>,
    cfg: ItemConfig,
    abort: &impl Fn() -> bool,
    first: usize,
    mut out: Vec<u8>,
) -> Result<Part, Stop> {
    let clock = cfg.clock;
    let emit = cfg.emit;
    out.clear();
    // Text emits write into `text`, the binary one into `out`.
    let (out, mut text) = match emit {
        StreamEmit::WireBin => (out, String::new()),
        _ => (Vec::new(), String::from_utf8(out).unwrap_or_default()),
    };
    let mut part = Part {
        out,
        marks: IndexMarks::new(),
        op_count: first,
        records: 0,
        kernels: Vec::new(),
        op_ids: 0,
        times: Times::default(),
    };
    // The part's JSON ops are separated by commas; the document around
    // them is the caller's.
    let mut json = JsonWriter::default();
    // Ops are located one after another across the part's batches.
    let mut locator = apir_ir::Locator::default();
    let mut done = false;
    while !done {
        if abort() {
            return Err(Stop::Aborted);
        }
        // Parse a batch: up to BATCH_OPS ops and the buffers among them.
        let t = clock.start();
        let mut ops = 0;
        while ops < BATCH_OPS {
            match sp.next_item() {
                None => {
                    done = true;
                    break;
                }
                Some(Err(())) => return Err(Stop::Error(ErrorPhase::Syntax)),
                Some(Ok(Item::Buffer(_))) if cfg.part => return Err(Stop::Buffer),
                Some(Ok(Item::Buffer(_))) => {}
                Some(Ok(Item::Op(_))) => ops += 1,
            }
        }
        Clock::add(t, &mut part.times.parse);
        let m: &mut Module = sp.module();
        if m.body.is_empty() {
            continue;
        }
        // The ops parsed, before a pass adds any (a split's pieces are not
        // the input's ops).
        let ids = op_ids(m);
        part.op_ids = part.op_ids.saturating_add(ids);
        pm.begin_batch(ids);
        let t = clock.start();
        for &item in &m.body {
            if let Item::Buffer(b) = item {
                verify_buffer(m, b).map_err(|_| Stop::Error(ErrorPhase::Verify))?;
            }
        }
        let verified = verify_ops(m, m.top_ops());
        Clock::add(t, &mut part.times.verify);
        verified.map_err(|_| Stop::Error(ErrorPhase::Verify))?;
        lint_batch(pm, m);
        if ops > 0 {
            pm.run_verified_batch(m)
                .map_err(|_| Stop::Error(ErrorPhase::Passes))?;
        }
        let t = clock.start();
        match emit {
            StreamEmit::Ir => {
                for &item in &m.body {
                    print_item(m, item, &mut text);
                }
            }
            StreamEmit::WireBin => {
                let done = wire::append_verified(m, &mut part.out, part.op_count)
                    .map_err(|_| Stop::Error(ErrorPhase::Emit))?;
                part.op_count += done.ops;
                part.records += done.records;
            }
            StreamEmit::WireHex | StreamEmit::WireDump | StreamEmit::Json => {
                let locator = (emit != StreamEmit::WireHex).then_some(&mut locator);
                let ops = wire::collect_from(m, sources, locator, part.op_count)
                    .map_err(|_| Stop::Error(ErrorPhase::Emit))?;
                part.op_count += ops.len();
                let marks = cfg.part.then_some(&mut part.marks);
                match emit {
                    StreamEmit::WireHex => wire::hex_lines_into(&mut text, &ops, marks),
                    StreamEmit::WireDump => wire::dump_into(&mut text, m.arch, &ops, marks),
                    _ => json.ops_into(&mut text, &ops, marks),
                }
            }
        }
        Clock::add(t, &mut part.times.emit);
        // The batch is done: its buffers stay stored, its items go.
        m.clear_batch();
    }
    if !sp.errors().is_empty() {
        return Err(Stop::Error(ErrorPhase::Syntax));
    }
    if cfg.part {
        part.kernels = sp
            .kernel_names()
            .map(|(name, span)| (name.to_string(), span))
            .collect();
    }
    if emit != StreamEmit::WireBin {
        part.out = text.into_bytes();
    }
    Ok(part)
}

/// The op ids a batch just parsed into `m` numbered, nested ops included,
/// taken before any pass adds ops (the pieces of a split): the module
/// parsed whole numbers the next batch's ops from the sum of these over
/// the batches before, and its verifier and passes name ops by those
/// numbers.
pub(crate) fn op_ids(m: &Module) -> u32 {
    u32::try_from(m.ops.id_bound()).unwrap_or(u32::MAX)
}

/// Hands `pm` the lint warnings of a batch's items, in program order (each
/// buffer, each run of ops at once), as [`PassManager::run`] lints a whole
/// module; past the warnings its report keeps, they are counted, not
/// built ([`PassManager::lint_with`]).
pub(crate) fn lint_batch<P: Pass + ?Sized>(pm: &mut PassManager<P>, m: &Module) {
    pm.lint_with(|found| {
        let mut run: Vec<Op> = Vec::new();
        for &item in &m.body {
            match item {
                Item::Op(op) => run.push(op),
                Item::Buffer(b) => {
                    found.ops(m, run.drain(..));
                    found.buffer(m, b);
                }
            }
        }
        found.ops(m, run);
    });
}

/// Builds the passes of the pipeline afresh (`None` if it cannot).
pub(crate) type BuildPasses<'a> = dyn Fn() -> Option<Vec<BuiltPass>> + 'a;

/// Streams `range` of `file` through the pipeline `build` makes and renders
/// `emit`. `None` on any error (see the module docs). Timings are measured
/// only when `timed`.
///
/// Each attempt runs on passes built for it: a multi-threaded attempt that
/// gives up leaves nothing behind (such as memo entries its forks added) in
/// the passes of the one-thread run that follows, so statistics do not
/// depend on whether a parallel attempt came first.
pub fn run_streaming(
    sources: &SourceMap,
    file: FileId,
    range: Range<usize>,
    build: &BuildPasses<'_>,
    opts: StreamOptions,
) -> Option<StreamOutput> {
    let manager = || {
        Some(
            PassManager::new(build()?, opts.instrumentation)
                .timed(opts.timed)
                .limited(opts.limit),
        )
    };
    if opts.threads > 1 {
        if let Some(out) = run_parts(sources, file, range.clone(), manager()?, opts) {
            return Some(out);
        }
    }
    let mut pm = manager()?;
    let clock = Clock(opts.timed);
    let mut header = Times::default();
    let t = clock.start();
    let mut sp = StreamParser::new(sources, file, range, opts.parse);
    Clock::add(t, &mut header.parse);
    if !sp.errors().is_empty() {
        return None;
    }
    let cfg = ItemConfig {
        emit: opts.emit,
        clock,
        part: false,
    };
    let part = run_items(&mut sp, sources, &mut pm, cfg, &|| false, 0, Vec::new()).ok()?;
    let m = sp.module();
    Some(join(sources, m, pm, opts, header, "", vec![part]))
}

/// The multi-threaded run: each part through a [`PassManager::fork`] of
/// `pm`, absorbed back in part order; `None` if the input is too small, a
/// pass cannot fork, or any part fails (the caller then streams on one
/// thread).
fn run_parts(
    sources: &SourceMap,
    file: FileId,
    range: Range<usize>,
    mut pm: PassManager,
    opts: StreamOptions,
) -> Option<StreamOutput> {
    let clock = Clock(opts.timed);
    let src = sources.file(file).text().as_bytes();
    let end = range.end.min(src.len());
    if end.saturating_sub(range.start) < opts.part_bytes.saturating_mul(2) {
        return None;
    }
    let mut header = Times::default();
    let t = clock.start();
    let mut sp = StreamParser::new(sources, file, range, opts.parse);
    // The buffers declared before the first op are the parts' shared state.
    let mut lead = String::new();
    let mut lead_lints = apir_ir::Diagnostics::new();
    while sp.errors().is_empty() && sp.at_buffer() {
        let Some(Ok(item @ Item::Buffer(b))) = sp.next_item() else {
            return None;
        };
        let m = sp.module();
        verify_buffer(m, b).ok()?;
        lead_lints.extend(lint_buffer(m, b));
        if opts.emit == StreamEmit::Ir {
            print_item(m, item, &mut lead);
        }
        m.clear_batch();
    }
    if !sp.errors().is_empty() {
        return None;
    }
    let starts = part_starts(src, sp.position(), end, opts.part_bytes);
    Clock::add(t, &mut header.parse);
    if starts.len() < 2 {
        return None;
    }
    let mut parts = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let last = i + 1 == starts.len();
        let part_end = if last { end } else { starts[i + 1] };
        parts.push((sp.fork(start..part_end, last), pm.fork()?));
    }
    let cfg = ItemConfig {
        emit: opts.emit,
        clock,
        part: true,
    };
    let abort = AtomicBool::new(false);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build()
        .ok()?;
    let results: Vec<Option<_>> = pool.install(|| {
        parts
            .into_par_iter()
            .map(|(mut psp, mut fork)| {
                let stop = || abort.load(Ordering::Relaxed);
                let out = run_items(&mut psp, sources, &mut fork, cfg, &stop, 0, Vec::new()).ok();
                if out.is_none() {
                    abort.store(true, Ordering::Relaxed);
                }
                out.map(|part| (part, fork))
            })
            .collect()
    });
    let results: Vec<(Part, PassManager<dyn Pass + Send>)> =
        results.into_iter().collect::<Option<_>>()?;
    // A kernel name defined in two parts: the one-thread run reports it.
    let mut kernels = std::collections::HashSet::new();
    if !results
        .iter()
        .flat_map(|(part, _)| &part.kernels)
        .all(|k| kernels.insert(k.0.as_str()))
    {
        return None;
    }
    let mut parts = Vec::with_capacity(results.len());
    pm.lint(lead_lints);
    for (part, fork) in results {
        // A fork whose results may differ from the one-thread run's (see
        // `Pass::join`): that run decides.
        if !pm.absorb(fork) {
            return None;
        }
        parts.push(part);
    }
    let m = sp.module();
    Some(join(sources, m, pm, opts, header, &lead, parts))
}

/// Where the parts of `start..end` begin: `start`, then about every
/// `part_bytes`, the first line after that point that starts with the
/// first op's indentation followed by a letter (where the printer puts a
/// top-level op). A wrong guess only costs time: the part it ends fails.
fn part_starts(src: &[u8], start: usize, end: usize, part_bytes: usize) -> Vec<usize> {
    let mut starts = vec![start];
    let line_start = src[..start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let indent = &src[line_start..start];
    if !indent.iter().all(|&b| b == b' ' || b == b'\t') || part_bytes == 0 {
        return starts;
    }
    let next_line = |from: usize| {
        src[from..end]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| from + i + 1)
    };
    let mut from = start.saturating_add(part_bytes);
    while from < end {
        let Some(mut line) = next_line(from) else {
            break;
        };
        let found = loop {
            let at = line + indent.len();
            if at < end && src[line..at] == *indent && src[at].is_ascii_alphabetic() {
                break Some(at);
            }
            match next_line(line) {
                Some(l) => line = l,
                None => break None,
            }
        };
        let Some(at) = found else {
            break;
        };
        starts.push(at);
        from = at.saturating_add(part_bytes);
    }
    starts
}

/// Joins the parts in order: output, op indices and times; the report
/// (statistics, warnings, the passes' times) is what `pm` accumulated over
/// them. `lead` is the IR text of the items handled before the parts.
fn join<P: Pass + ?Sized>(
    sources: &SourceMap,
    m: &Module,
    mut pm: PassManager<P>,
    opts: StreamOptions,
    header: Times,
    lead: &str,
    parts: Vec<Part>,
) -> StreamOutput {
    let emit = opts.emit;
    let clock = Clock(opts.timed);
    let mut times = header;
    let count = parts.len();
    let t = clock.start();
    let mut output = Vec::new();
    if emit == StreamEmit::Ir {
        let mut text = String::new();
        print_header(m, &mut text);
        text.push_str(lead);
        output = text.into_bytes();
    }
    if emit == StreamEmit::WireBin {
        output = wire::bin_header(m.arch).to_vec();
    }
    let mut json = JsonWriter::default();
    if emit == StreamEmit::Json {
        output = JsonWriter::head(m.arch).into_bytes();
    }
    let mut base = 0;
    let mut records = 0;
    for mut part in parts {
        times.absorb(&part.times);
        records += part.records;
        match emit {
            StreamEmit::WireBin | StreamEmit::Ir => {
                if emit == StreamEmit::WireBin && base > 0 {
                    // The part numbered its ops from 0.
                    wire::rebase_binary(&mut part.out, base);
                }
                if output.is_empty() {
                    output = part.out;
                } else {
                    output.extend_from_slice(&part.out);
                }
            }
            StreamEmit::WireHex | StreamEmit::WireDump | StreamEmit::Json => {
                if emit == StreamEmit::Json {
                    output.extend_from_slice(json.join(part.op_count).as_bytes());
                }
                // Writing to a Vec cannot fail.
                let _ = wire::write_rebased(&part.out, &part.marks, base, &mut output);
            }
        }
        base += part.op_count;
    }
    match emit {
        StreamEmit::Ir => {
            let mut footer = String::new();
            print_footer(&mut footer);
            output.extend_from_slice(footer.as_bytes());
        }
        StreamEmit::WireBin => output.extend_from_slice(&wire::bin_end(records)),
        // Warnings of a successful run are in the document, as on the
        // whole-module path.
        StreamEmit::Json => {
            let warnings = crate::driver::with_omitted_notes(pm.warnings());
            let warnings = crate::driver::json_diagnostics(sources, &warnings);
            output.extend_from_slice(json.tail(&warnings).as_bytes());
        }
        _ => {}
    }
    Clock::add(t, &mut times.emit);
    let report = phase_report(&mut pm, opts, &times);
    StreamOutput {
        output,
        report,
        parts: count,
    }
}

/// The report of a streaming run: what `pm` accumulated, with the phases
/// in pipeline order (every pass, even if no batch had an op to run it
/// on), one entry per name, the verifier's runs after the passes summed as
/// `(verify)`, between `parse` and `verify` first and `emit` last.
pub(crate) fn phase_report<P: Pass + ?Sized>(
    pm: &mut PassManager<P>,
    opts: StreamOptions,
    times: &Times,
) -> RunReport {
    let mut report: RunReport = pm.take_report();
    let mut phases: Vec<(String, Duration)> = vec![
        ("parse".into(), times.parse),
        ("verify".into(), times.verify),
    ];
    let mut add = |name: &str, d: Duration| match phases.iter_mut().find(|p| p.0 == name) {
        Some(p) => p.1 += d,
        None => phases.push((name.to_string(), d)),
    };
    for name in pm.names() {
        add(name, Duration::ZERO);
    }
    let mut reverify = Duration::ZERO;
    for (name, d) in &report.timings {
        match name.as_str() {
            "(verify)" => reverify += *d,
            _ => add(name, *d),
        }
    }
    if pm.names().next().is_some() && !opts.instrumentation.no_verify {
        phases.push(("(verify)".into(), reverify));
    }
    phases.push(("emit".into(), times.emit));
    report.timings = phases;
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compilation, Pipeline, Registry};

    /// Streaming and the whole-module path produce the same bytes and
    /// statistics on the corpus, for every emit mode.
    #[test]
    fn streaming_matches_the_module_path() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut sources = SourceMap::new();
            let file = sources.add("c.apir", text.clone());
            let registry = Registry::builtin();
            let pipeline = Pipeline::parse("lower-to-wire").unwrap();
            let mut whole = match Compilation::parse("c.apir", &text, None) {
                Ok(c) => c,
                Err(_) => continue,
            };
            let run = whole.run("lower-to-wire");
            for emit in [
                StreamEmit::Ir,
                StreamEmit::WireBin,
                StreamEmit::WireHex,
                StreamEmit::WireDump,
                StreamEmit::Json,
            ] {
                let build = || registry.build(&pipeline).ok();
                let opts = StreamOptions::new(emit);
                let streamed = run_streaming(&sources, file, 0..text.len(), &build, opts);
                match (&run, streamed) {
                    (Err(_), None) => {}
                    (Ok(report), Some(s)) => {
                        let ops = wire::collect(&whole.module, &whole.sources).unwrap();
                        let expected = match emit {
                            StreamEmit::Ir => whole.ir().into_bytes(),
                            StreamEmit::WireBin => wire::binary(whole.module.arch, &ops).unwrap(),
                            StreamEmit::WireHex => wire::hex_lines(&ops).into_bytes(),
                            StreamEmit::WireDump => wire::dump(&whole.module, &ops).into_bytes(),
                            StreamEmit::Json => {
                                let warnings = crate::driver::json_diagnostics(
                                    &whole.sources,
                                    &report.warnings,
                                );
                                wire::json(whole.module.arch, &ops, &warnings).into_bytes()
                            }
                        };
                        assert_eq!(
                            String::from_utf8_lossy(&s.output),
                            String::from_utf8_lossy(&expected),
                            "{} {emit:?}",
                            path.display()
                        );
                        assert_eq!(s.report.statistics, report.statistics, "{}", path.display());
                        assert_eq!(s.report.warnings, report.warnings, "{}", path.display());
                    }
                    (whole, streamed) => panic!(
                        "{}: module path {:?}, streaming {:?}",
                        path.display(),
                        whole.is_ok(),
                        streamed.is_some()
                    ),
                }
            }
            files += 1;
        }
        assert!(files >= 5);
    }
}
