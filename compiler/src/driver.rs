//! The `apir-opt` driver as a library (what MLIR's `MlirOptMain` is to
//! `mlir-opt`): options in, an input, and everything the tool prints back
//! as a value ([`Outcome`]): the output bytes, the diagnostics to show,
//! the report (IR dumps, statistics, timing) and the exit code.
//!
//! [`Driver::new`] checks the options and builds the pipeline (usage
//! errors, exit code 2, before any input is read); [`Driver::run`] then
//! processes an input:
//!
//! - each case (the whole input, or with [`Options::split_input_file`] each
//!   part between `// -----` lines) streams when every pass is op-local and
//!   nothing asks for the whole module ([`crate::stream`]); on an error it
//!   is diagnosed streaming ([`crate::chunked::diagnose`], the diagnostics
//!   of the whole-module path without its memory); otherwise, or when that
//!   finds nothing, it goes the whole-module way: parse, verify, the
//!   [`PassManager`], emit;
//! - the emits are [`Emit`]'s; a JSON emit of a failed case still gives a
//!   document, with the diagnostics in it, and with `split_input_file` the
//!   JSON documents of the cases form one array (so the output stays JSON),
//!   other outputs are joined by `// -----` lines (`wire-bin` sections back
//!   to back);
//! - with [`Options::verify_diagnostics`] the diagnostics are matched
//!   against the `expected-*` comments of each case ([`crate::expect`]) and
//!   the mismatches are what is shown.
//!
//! ```
//! use apir_compiler::driver::{self, Emit, Input, Options, EXIT_INPUT, EXIT_OK};
//!
//! let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %x[[64, 128], [1, 64]]\n}\n";
//! let options = Options {
//!     pipeline: "lower-to-wire".into(),
//!     emit: Emit::WireHex,
//!     ..Options::default()
//! };
//! let out = driver::run(options.clone(), Input::text("k.apir", text));
//! assert_eq!(out.exit_code, EXIT_OK);
//! assert_eq!(out.output, b"0 dst MEM_PATTERN4D 128 0000000001000100010001004000010001000100\n");
//!
//! // An error is data too: located diagnostics, rendered on request.
//! let bad = text.replace("%x[[64", "%y[[64");
//! let out = driver::run(options, Input::text("k.apir", bad));
//! assert_eq!(out.exit_code, EXIT_INPUT);
//! assert!(out.output.is_empty());
//! assert!(out.diagnostics[0].message.contains("undefined buffer `%y`"));
//! assert!(out.render_diagnostics().contains("k.apir:3:"));
//! ```

use crate::api::{describe, Error};
use crate::chunked::{self, ChunkError, ChunkOptions};
use crate::manager::{timing_text, Instrumentation, PassManager};
use crate::pipeline::{Pipeline, PipelineError};
use crate::registry::Registry;
use crate::stream::{self, ErrorPhase, StreamEmit, StreamOptions};
use crate::timeline::Axis;
use crate::wire::{self, JsonDiagnostic, JsonNote};
use crate::{expect, schedule, timeline};
use apir_ir::source::MAX_SOURCE_BYTES;
use apir_ir::{
    parse_module, print_module, render_all_styled, split_input, verify, Arch, Bounded, Diagnostic,
    DiagnosticLimit, Diagnostics, FileId, Omitted, ParseOptions, Severity, SourceMap, Span,
    StreamParser,
};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::time::{Duration, Instant};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input has errors.
pub const EXIT_INPUT: i32 = 1;
/// Exit code: bad usage (options, pipeline text, an emit that does not
/// apply).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: internal error (a bug in apir).
pub const EXIT_INTERNAL: i32 = 3;

/// What the driver writes (`apir-opt --emit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Emit {
    /// The IR after the pipeline.
    #[default]
    Ir,
    /// Annotated dump per descriptor ([`wire::dump`]).
    WireDump,
    /// One line per operand ([`wire::hex_lines`]).
    WireHex,
    /// Framed binary ([`wire::binary`]).
    WireBin,
    /// JSON: arch, ops with their encoded operands, diagnostics
    /// ([`wire::json`]).
    Json,
    /// JSON: each kernel's staging plan, descriptors and simulated figures
    /// ([`schedule::json`]).
    ScheduleJson,
    /// SVG: each kernel's simulated timeline ([`timeline::svg`]).
    TimelineSvg,
    /// Chrome trace-event JSON of the simulated steps
    /// ([`schedule::trace_json`]).
    TraceJson,
}

impl Emit {
    /// Every emit, in `--help` order.
    pub const ALL: [Emit; 8] = [
        Emit::Ir,
        Emit::WireDump,
        Emit::WireHex,
        Emit::WireBin,
        Emit::Json,
        Emit::ScheduleJson,
        Emit::TimelineSvg,
        Emit::TraceJson,
    ];

    /// The name on the command line (`wire-hex`).
    pub fn name(self) -> &'static str {
        match self {
            Emit::Ir => "ir",
            Emit::WireDump => "wire-dump",
            Emit::WireHex => "wire-hex",
            Emit::WireBin => "wire-bin",
            Emit::Json => "json",
            Emit::ScheduleJson => "schedule-json",
            Emit::TimelineSvg => "timeline-svg",
            Emit::TraceJson => "trace-json",
        }
    }

    /// One line saying what the emit writes (`apir-opt --help`).
    pub fn help(self) -> &'static str {
        match self {
            Emit::Ir => "The IR after the pipeline",
            Emit::WireDump => "Annotated dump per descriptor: `offset | bytes | field = value`",
            Emit::WireHex => "One line per operand: op index, role, kind, channels, hex bytes",
            Emit::WireBin => "Framed binary (read by apir-dis): a 16-byte header (`APIRWIRE`, version, arch), per descriptor its op index, kind, dtype, channels, role and bytes (op order then role order), then a 16-byte end marker (`APIRDONE`, the record count)",
            Emit::Json => "JSON: arch, ops with their encoded operands, diagnostics",
            Emit::ScheduleJson => "JSON: each kernel's staging plan, descriptors, simulated figures, its offset on its core's time axis and every step's start and end",
            Emit::TimelineSvg => "SVG: each kernel's simulated timeline (M2S, S2M, compute), placed on its core's time axis (see `--timeline-axis`)",
            Emit::TraceJson => "Chrome trace-event JSON of the simulated steps (Perfetto, chrome://tracing): one process per core, kernels of a core one after another on its time axis",
        }
    }

    /// The emit called `name` on the command line.
    pub fn from_name(name: &str) -> Option<Emit> {
        Emit::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether the output is a JSON document (joined into one array with
    /// `split_input_file`).
    pub(crate) fn is_json(self) -> bool {
        matches!(self, Emit::Json | Emit::ScheduleJson | Emit::TraceJson)
    }

    /// Whether the emit simulates staging plans (and so needs the whole
    /// module).
    pub(crate) fn is_staging(self) -> bool {
        matches!(
            self,
            Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson
        )
    }

    /// What the streaming driver writes for this emit, if it can.
    fn streamed(self) -> Option<StreamEmit> {
        match self {
            Emit::Ir => Some(StreamEmit::Ir),
            Emit::WireDump => Some(StreamEmit::WireDump),
            Emit::WireHex => Some(StreamEmit::WireHex),
            Emit::WireBin => Some(StreamEmit::WireBin),
            Emit::Json => Some(StreamEmit::Json),
            Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson => None,
        }
    }
}

/// How to run (the library side of `apir-opt`'s command line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Pipeline text (`fold-partition,compact-unit-dims`, a named
    /// pipeline); empty: parse, verify, print.
    pub pipeline: String,
    /// What to write.
    pub emit: Emit,
    /// The time axis of [`Emit::TimelineSvg`] (default: one per core); set
    /// with any other emit, a usage error.
    pub timeline_axis: Option<Axis>,
    /// Overrides the module's `arch` attribute.
    pub arch: Option<Arch>,
    /// Treat `// -----` lines as boundaries of independent cases.
    pub split_input_file: bool,
    /// Check `expected-*` comments against the diagnostics produced.
    pub verify_diagnostics: bool,
    /// Dump the IR after every pass into the report.
    pub print_ir_after_all: bool,
    /// Dump the IR after a failing pass into the report.
    pub print_ir_after_failure: bool,
    /// After each pass that attaches a lowered form, re-derive that form
    /// and compare (off by default: such a pass promises to attach the
    /// lowering math's own result; see [`crate::reverify`]).
    pub verify_attached_forms: bool,
    /// Put each pass's counters into the report.
    pub statistics: bool,
    /// Put the wall time of each phase and pass into the report.
    pub timing: bool,
    /// Worker threads for op-local pipelines on large inputs; 0: one per
    /// core. The output does not depend on it.
    pub threads: usize,
    /// Colour the rendered diagnostics (ANSI escapes).
    pub color: bool,
    /// How many errors and warnings to show (by default
    /// [`DiagnosticLimit::DEFAULT_COUNT`] of each); one closing note per
    /// kind counts the rest. It bounds the memory diagnostics take, as
    /// everything else is bounded on a streamed run. Ignored with
    /// `verify_diagnostics`, which checks every diagnostic.
    pub diagnostic_limit: DiagnosticLimit,
    /// Leave the module of a whole-module run to the operating system
    /// instead of freeing it (as compilers do when the process exits right
    /// after writing the output: freeing a large module piece by piece
    /// only delays that). Only the last case's: with `split_input_file`
    /// every earlier case's module is freed, so that the run holds one
    /// case's module at a time. Off by default; an embedder that goes on
    /// running leaves it off.
    pub disable_free: bool,
}

impl Options {
    /// Checks that the options go together; the error is a usage message.
    pub fn check(&self) -> Result<(), String> {
        if self.timeline_axis.is_some() && self.emit != Emit::TimelineSvg {
            // Only the SVG has a choice of axis: a trace already puts every
            // core on the viewer's one clock.
            return Err(format!(
                "--timeline-axis applies to --emit=timeline-svg only, not --emit={}",
                self.emit.name()
            ));
        }
        Ok(())
    }

    fn instrumentation(&self) -> Instrumentation {
        Instrumentation {
            print_ir_after_all: self.print_ir_after_all,
            print_ir_after_failure: self.print_ir_after_failure,
            no_verify: false,
            rederive_attached: self.verify_attached_forms,
        }
    }

    /// The limit diagnostics are collected under.
    fn limit(&self) -> DiagnosticLimit {
        if self.verify_diagnostics {
            DiagnosticLimit::NONE
        } else {
            self.diagnostic_limit
        }
    }

    fn threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// An input: IR text with the name diagnostics give it, or a file of a
/// source map (which the [`Outcome`] hands back).
#[derive(Debug)]
pub enum Input {
    /// Named text.
    Text {
        /// The name in locations (`k.apir`, `<stdin>`).
        name: String,
        /// The IR text.
        text: String,
    },
    /// A file already in a source map.
    Source {
        /// The source map.
        sources: SourceMap,
        /// The file to process.
        file: FileId,
    },
}

impl Input {
    /// Named text (taken without copying when given a `String`).
    pub fn text(name: impl Into<String>, text: impl Into<String>) -> Input {
        Input::Text {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// Everything a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The output (`apir-opt` writes it to stdout, or to `-o` on success).
    /// A failed case has none, except with a JSON emit, which still gives
    /// its document with the diagnostics in it.
    pub output: Vec<u8>,
    /// The diagnostics to show, every case's in order: the ones produced,
    /// or with [`Options::verify_diagnostics`] the mismatches between them
    /// and the expectations. Their locations refer to [`Outcome::sources`].
    pub diagnostics: Diagnostics,
    /// What [`Options::diagnostic_limit`] left out of `diagnostics`
    /// (whose closing notes say the same in words).
    pub omitted: Omitted,
    /// The sources the diagnostics refer to: the input's (or, for a
    /// pipeline error, the pipeline text as a file named `<pipeline>`).
    pub sources: SourceMap,
    /// IR dumps, statistics and timing, as `apir-opt` prints them after
    /// the diagnostics.
    pub report: String,
    /// 0 success, 1 the input has errors, 2 bad usage, 3 internal error.
    pub exit_code: i32,
    /// Whether [`Outcome::render_diagnostics`] colours.
    color: bool,
}

impl Outcome {
    /// Whether the run succeeded (exit code 0).
    pub fn success(&self) -> bool {
        self.exit_code == EXIT_OK
    }

    /// The diagnostics rendered with their source lines and carets (in
    /// colour if [`Options::color`] asked for it), as `apir-opt` prints
    /// them.
    pub fn render_diagnostics(&self) -> String {
        render_all_styled(&self.diagnostics, &self.sources, self.color)
    }

    /// The diagnostics as the JSON emits carry them.
    pub fn json_diagnostics(&self) -> Vec<JsonDiagnostic> {
        json_diagnostics(&self.sources, &self.diagnostics)
    }

    /// A usage error before any input: `diagnostics` refer to `sources`.
    fn usage(diagnostics: Diagnostics, sources: SourceMap) -> Outcome {
        Outcome {
            output: Vec::new(),
            diagnostics,
            omitted: Omitted::default(),
            sources,
            report: String::new(),
            exit_code: EXIT_USAGE,
            // Pipeline text is shown plain.
            color: false,
        }
    }
}

/// Diagnostics as the JSON emits carry them: severity, message, `loc`
/// (`file:line:col`) and located notes.
pub fn json_diagnostics(sources: &SourceMap, diags: &[Diagnostic]) -> Vec<JsonDiagnostic> {
    describe(sources, diags)
        .into_iter()
        .map(|d| JsonDiagnostic {
            severity: d.severity.to_string(),
            message: d.message,
            loc: d.location.map(|l| l.to_string()),
            notes: d
                .notes
                .into_iter()
                .map(|(message, loc)| JsonNote {
                    message,
                    loc: loc.map(|l| l.to_string()),
                })
                .collect(),
        })
        .collect()
}

/// The `--list-passes` text: each pass with its summary and options, then
/// the named pipelines with their expansions.
pub fn list_passes(registry: &Registry) -> String {
    let mut out = String::from("Passes:\n");
    for p in registry.passes {
        out.push_str(&format!("  {:<22} {}\n", p.name, p.summary));
        for o in p.options {
            let key = format!("{}=<value>", o.name);
            out.push_str(&format!(
                "      {key:<26} {} (default {})\n",
                o.help, o.default
            ));
        }
    }
    out.push_str("Named pipelines:\n");
    for p in registry.pipelines {
        out.push_str(&format!(
            "  {:<22} {} = {}\n",
            p.name, p.summary, p.expansion
        ));
    }
    out
}

/// Checks `options`, builds the driver and runs it on `input`: a usage
/// error is an [`Outcome`] like any other.
pub fn run(options: Options, input: Input) -> Outcome {
    match Driver::new(options) {
        Ok(d) => d.run(input),
        Err(usage) => usage,
    }
}

/// Options checked and a pipeline built, ready to run on inputs.
#[derive(Clone, Debug)]
pub struct Driver {
    options: Options,
    registry: Registry,
    pipeline: Pipeline,
    /// The worker threads (`Options::threads`, 0 resolved to the cores
    /// once, not per input or case: the lookup reads several files).
    threads: usize,
}

impl Driver {
    /// Checks `options` and the pipeline with the built-in registry. The
    /// error is the usage error (exit code 2): bad pipeline text or an
    /// unknown pass or option, located in the pipeline text (a file named
    /// `<pipeline>`), or options that do not go together.
    pub fn new(options: Options) -> Result<Driver, Outcome> {
        Driver::with_registry(options, Registry::builtin())
    }

    /// [`Driver::new`] with passes and named pipelines from `registry`.
    pub fn with_registry(options: Options, registry: Registry) -> Result<Driver, Outcome> {
        if let Err(msg) = options.check() {
            return Err(Outcome::usage(
                vec![Diagnostic::error(None, msg)],
                SourceMap::new(),
            ));
        }
        let pipeline_error = |e: PipelineError| {
            let mut sources = SourceMap::new();
            let d = e.diagnostic(&options.pipeline, &mut sources);
            Outcome::usage(vec![d], sources)
        };
        let pipeline = Pipeline::parse(&options.pipeline).map_err(pipeline_error)?;
        // Built once up front so that an unknown pass is a usage error
        // before any input is read.
        registry.build(&pipeline).map_err(pipeline_error)?;
        let threads = options.threads();
        Ok(Driver {
            options,
            registry,
            pipeline,
            threads,
        })
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Processes `input`: each case, then the outputs joined, the
    /// diagnostics to show, the report and the exit code.
    pub fn run(&self, input: Input) -> Outcome {
        let mut output = Vec::new();
        // (Writing into a `Vec` does not fail.)
        let (mut out, _) = self.run_into(input, &mut output);
        out.output = output;
        out
    }

    /// [`Driver::run`], each case's output written into `sink` once the
    /// case is done (joined as [`Driver::run`] joins them), so that no more
    /// than one case's output is held; the [`Outcome`]'s `output` is empty.
    /// A write that fails is returned, and no case after it runs.
    fn run_into(&self, input: Input, sink: &mut dyn Write) -> (Outcome, Option<io::Error>) {
        let opts = &self.options;
        let (sources, file) = match input {
            Input::Text { name, text } => {
                let mut sources = SourceMap::new();
                // The source map takes the text without copying it.
                let file = sources.add(name, text);
                (sources, file)
            }
            Input::Source { sources, file } => (sources, file),
        };
        let text = sources.file(file).text();
        let ranges = if opts.split_input_file {
            split_input(text)
        } else {
            std::iter::once(0..text.len()).collect()
        };
        let mut totals = Totals::default();
        let mut outputs = Joined::new(opts, sink);
        let mut exit = EXIT_OK;
        let mut shown = Bounded::new(opts.limit());
        let cases = ranges.len();
        for (k, range) in ranges.into_iter().enumerate() {
            // (A write that failed ends the run: its outcome is not used.)
            if outputs.failed.is_some() {
                break;
            }
            let last = k + 1 == cases;
            let (result, found) = self.run_case(&sources, file, range.clone(), last, &mut totals);
            match result {
                Ok(out) => outputs.push(&out),
                Err(code) => {
                    if matches!(opts.emit, Emit::Json | Emit::ScheduleJson) && code != EXIT_USAGE {
                        // JSON consumers get the diagnostics in the document too.
                        let arch = self.case_arch(&sources, file, range.clone());
                        let d = json_diagnostics(&sources, &with_omitted_notes(found.clone()));
                        outputs.push(&failure_doc(opts.emit, arch, &d));
                    }
                    if !opts.verify_diagnostics || code == EXIT_INTERNAL || code == EXIT_USAGE {
                        exit = exit.max(code);
                    }
                }
            }
            if !opts.verify_diagnostics {
                shown.append(found);
                continue;
            }
            // Every diagnostic is kept: there is no limit.
            let diags = found.into_parts().0;
            // A malformed expectation is an error, and the diagnostics are
            // still matched against the well-formed ones.
            let (expected, bad) = expect::collect_all(&sources, file, range);
            if !bad.is_empty() {
                shown.extend(bad);
                exit = exit.max(EXIT_INPUT);
            }
            let mismatches = expect::check(&sources, &expected, &diags);
            if !mismatches.is_empty() {
                shown.extend(mismatches);
                exit = exit.max(EXIT_INPUT);
            }
            if diags.iter().any(|d| d.severity == Severity::Internal) {
                exit = EXIT_INTERNAL;
            }
        }
        let failed = outputs.finish();
        let out = Outcome {
            output: Vec::new(),
            omitted: shown.omitted(),
            diagnostics: with_omitted_notes(shown),
            sources,
            report: totals.report(opts),
            exit_code: exit,
            color: opts.color,
        };
        (out, failed)
    }

    /// Whether [`Driver::run_reader`] streams its input from the reader
    /// (bounded memory) rather than reading it whole: an op-local pipeline
    /// without IR dumps, an emit that streams (`ir`, `wire-bin`,
    /// `wire-hex`, `wire-dump`, `json`), no `split_input_file`, no
    /// `verify_diagnostics`.
    pub fn streams_from_reader(&self) -> bool {
        let opts = &self.options;
        if opts.split_input_file || opts.verify_diagnostics {
            return false;
        }
        let Some(emit) = opts.emit.streamed() else {
            return false;
        };
        chunked::can_stream_from_reader(emit)
            && self
                .registry
                .build(&self.pipeline)
                .is_ok_and(|passes| stream::can_stream(&passes, opts.instrumentation()))
    }

    /// Processes an input read from `input`, writing the output to `sink`
    /// (the [`Outcome`]'s `output` stays empty; everything else is as
    /// [`Driver::run`] gives it, which is what happens to the input read
    /// whole). When [`Driver::streams_from_reader`], the input is read in
    /// windows and the output written as it is produced, in memory
    /// independent of the input's size ([`crate::chunked`]). Warnings do
    /// not stop it: `input` is rewound and read again for the lines they
    /// point at, and [`Outcome::sources`] holds an excerpt of the input
    /// ([`SourceMap::add_excerpt`]) that renders them as the whole input
    /// would. If streaming gives up (an error, invalid UTF-8, ...), `input`
    /// is rewound, `sink` restarted, and the input read whole and run by
    /// [`Driver::run`], so diagnostics and output are exactly that path's.
    /// With several threads an input that cannot be cut into parts streams
    /// again on one thread.
    ///
    /// A failed run may leave partial output in `sink`: write the sink's
    /// bytes out only on success, or with a JSON emit (whose document then
    /// holds the diagnostics).
    pub fn run_reader(
        &self,
        name: &str,
        input: &mut dyn ReadAgain,
        sink: &mut dyn OutputSink,
    ) -> Result<Outcome, StreamError> {
        let opts = &self.options;
        let length = input.length();
        if length.past_limit() {
            // Known too long: its first line is all that is read.
            let out = self.unreadable(name, Unreadable::TooLong(first_line(input, length)?));
            sink.write_all(&out.output)
                .and_then(|()| sink.flush())
                .map_err(StreamError::Write)?;
            return Ok(Outcome {
                output: Vec::new(),
                ..out
            });
        }
        if self.streams_from_reader() {
            let build = || self.registry.build(&self.pipeline).ok();
            let emit = opts.emit.streamed().unwrap_or(StreamEmit::Ir);
            let mut threads = self.threads;
            // Whether windows cut at long blank runs (until an error after
            // such a cut says to stream again without).
            let mut cut_long_runs = true;
            // The latest phase diagnosed so far.
            let mut diagnosed: Option<ErrorPhase> = None;
            let result = loop {
                let copts = ChunkOptions {
                    cut_long_runs,
                    ..ChunkOptions::new(StreamOptions {
                        parse: ParseOptions { arch: opts.arch },
                        instrumentation: opts.instrumentation(),
                        emit,
                        timed: opts.timing,
                        threads,
                        part_bytes: chunked::DEFAULT_WINDOW_BYTES,
                        limit: opts.limit(),
                    })
                };
                // A spool rewound for another try knows the input's
                // length: past the limit, the whole-module path says so.
                if input.length().past_limit() {
                    break Err(ChunkError::GiveUp);
                }
                match chunked::run_chunked_named(input, name, sink, &build, copts) {
                    // Perhaps a wrong cut's: its error is not trusted.
                    Err(ChunkError::Uncut) if cut_long_runs => {
                        start_over(input, sink)?;
                        cut_long_runs = false;
                    }
                    Err(ChunkError::Retry) if threads > 1 => {
                        start_over(input, sink)?;
                        threads = 1;
                    }
                    // A verifier or pass error in a part is the input's:
                    // look for what the whole-module path reports first
                    // (if that finds nothing, as for an error of the emit,
                    // stream again on one thread).
                    // (Picking up where the part that failed starts, if
                    // it can: a diagnosis from there that finds nothing
                    // says nothing of the parts before, so only one from
                    // the start counts as done.)
                    Err(ChunkError::Invalid(phase, resume)) if threads > 1 => {
                        start_over(input, sink)?;
                        if resume.is_none() {
                            diagnosed = Some(phase);
                        }
                        if let Some(out) =
                            self.diagnose_reader(name, input, sink, phase, resume, &build)?
                        {
                            return Ok(out);
                        }
                        threads = 1;
                    }
                    other => break other,
                }
            };
            match result {
                Ok(mut out) => {
                    // Warnings point into the input, which was not held:
                    // read again the lines they are shown with.
                    let mut found = Bounded::new(opts.limit());
                    found.extend(std::mem::take(&mut out.report.warnings));
                    found.omit(out.report.omitted);
                    let omitted = found.omitted();
                    let diagnostics = with_omitted_notes(found);
                    let mut sources = SourceMap::new();
                    if !diagnostics.is_empty() {
                        input.rewind().map_err(StreamError::Read)?;
                        let spans = diagnostics.iter().flat_map(|d| {
                            d.span.into_iter().chain(d.notes.iter().filter_map(|n| n.1))
                        });
                        sources
                            .add_excerpt(name, &mut *input, spans)
                            .map_err(StreamError::Read)?;
                    }
                    if emit == StreamEmit::Json {
                        // The document's diagnostics are the run's warnings.
                        let tail = wire::JsonWriter::after(out.ops)
                            .tail(&json_diagnostics(&sources, &diagnostics));
                        sink.write_all(tail.as_bytes())
                            .and_then(|()| sink.flush())
                            .map_err(StreamError::Write)?;
                    }
                    let mut totals = Totals::default();
                    for (name, d) in &out.report.timings {
                        totals.add(name, *d);
                    }
                    if out.parts > 1 {
                        totals.parallel = Some((out.parts, threads));
                    }
                    if opts.statistics {
                        totals.report_text.push_str(&out.report.statistics_text());
                    }
                    return Ok(Outcome {
                        output: Vec::new(),
                        diagnostics,
                        omitted,
                        sources,
                        report: totals.report(opts),
                        exit_code: EXIT_OK,
                        color: opts.color,
                    });
                }
                Err(ChunkError::Read(e)) => return Err(StreamError::Read(e)),
                Err(ChunkError::Write(e)) => return Err(StreamError::Write(e)),
                Err(
                    e @ (ChunkError::GiveUp
                    | ChunkError::Retry
                    | ChunkError::Invalid(..)
                    | ChunkError::Uncut),
                ) => {
                    start_over(input, sink)?;
                    let (upto, resume) = match e {
                        ChunkError::Invalid(phase, resume) => (phase, resume),
                        _ => (ErrorPhase::Emit, None),
                    };
                    if diagnosed.is_none_or(|d| d < upto) {
                        if let Some(out) =
                            self.diagnose_reader(name, input, sink, upto, resume, &build)?
                        {
                            return Ok(out);
                        }
                    }
                }
            }
        }
        let mut out = match read_whole(input)? {
            Ok(text) => match self.run_into(Input::text(name, text), sink) {
                (_, Some(e)) => return Err(StreamError::Write(e)),
                (out, None) => out,
            },
            Err(unreadable) => self.unreadable(name, unreadable),
        };
        sink.write_all(&out.output)
            .and_then(|()| sink.flush())
            .map_err(StreamError::Write)?;
        out.output = Vec::new();
        Ok(out)
    }

    /// After streaming from `input` met an error: the outcome of the
    /// input read whole, found streaming again ([`chunked::diagnose`], or
    /// from `resume` on, [`chunked::diagnose_from`]) and rendered from an
    /// excerpt of the input, with the report (statistics and timing of the
    /// phases and passes that ran) the whole-module path gives, or `None`
    /// (with `input` rewound) if that path must run: no error found that
    /// way, or an input streaming cannot read.
    fn diagnose_reader(
        &self,
        name: &str,
        input: &mut dyn ReadAgain,
        sink: &mut dyn OutputSink,
        upto: ErrorPhase,
        resume: Option<Box<chunked::Checkpoint>>,
        build: &dyn Fn() -> Option<Vec<crate::manager::BuiltPass>>,
    ) -> Result<Option<Outcome>, StreamError> {
        let opts = &self.options;
        // An input past the limit gets the whole-module path's diagnostic
        // for it, not the errors found in its first 4 GiB.
        if input.length().past_limit() {
            return Ok(None);
        }
        let copts = self.diagnose_options();
        let found = match resume {
            Some(from) => {
                input
                    .seek_to(from.offset() as u64)
                    .map_err(StreamError::Read)?;
                chunked::diagnose_from(input, *from, upto, copts)
            }
            None => chunked::diagnose(input, FileId(0), 0, upto, build, copts),
        };
        let found = match found {
            Ok(found) => found,
            Err(ChunkError::Read(e)) => return Err(StreamError::Read(e)),
            Err(ChunkError::Write(e)) => return Err(StreamError::Write(e)),
            Err(
                ChunkError::GiveUp
                | ChunkError::Retry
                | ChunkError::Invalid(..)
                | ChunkError::Uncut,
            ) => None,
        };
        input.rewind().map_err(StreamError::Read)?;
        let Some(found) = found else {
            return Ok(None);
        };
        let mut totals = Totals::default();
        self.add_findings_report(&found, &mut totals);
        let arch = found.arch;
        let emit_failed = found.emit;
        let found = found.diagnostics;
        let code = failure_code(&found);
        let omitted = found.omitted();
        let mut diagnostics = with_omitted_notes(found);
        let mut sources = SourceMap::new();
        let spans = diagnostics
            .iter()
            .flat_map(|d| d.span.into_iter().chain(d.notes.iter().filter_map(|n| n.1)))
            .chain(emit_failed.as_ref().map(|e| e.1))
            .collect::<Vec<_>>();
        sources
            .add_excerpt(name, &mut *input, spans)
            .map_err(StreamError::Read)?;
        let exit_code = match emit_failed {
            Some((e, span)) => {
                diagnostics = vec![self.emit_error(e, Some(span), &sources)];
                EXIT_USAGE
            }
            None => code,
        };
        if opts.emit == Emit::Json && exit_code != EXIT_USAGE {
            // JSON consumers get the diagnostics in the document, as on the
            // whole-module path.
            let doc = failure_doc(opts.emit, arch, &json_diagnostics(&sources, &diagnostics));
            sink.write_all(&doc)
                .and_then(|()| sink.flush())
                .map_err(StreamError::Write)?;
        }
        Ok(Some(Outcome {
            output: Vec::new(),
            exit_code,
            omitted,
            diagnostics,
            sources,
            report: totals.report(opts),
            color: opts.color,
        }))
    }

    /// Adds to `totals` what the whole-module path reports for `found`'s
    /// failure: the times of the phases and passes that ran, and (if
    /// asked for) the statistics, printed only once passes ran.
    fn add_findings_report(&self, found: &chunked::Findings, totals: &mut Totals) {
        for (name, d) in &found.report.timings {
            totals.add(name, *d);
        }
        if self.options.statistics && found.phase >= ErrorPhase::Passes {
            totals.report_text.push_str(&found.report.statistics_text());
        }
    }

    /// A case streaming met an error in, diagnosed streaming
    /// ([`chunked::diagnose`]): its exit code and diagnostics, or `None`
    /// when the whole-module path must run (as [`Driver::diagnose_reader`]).
    fn diagnose_case(
        &self,
        sources: &SourceMap,
        file: FileId,
        range: Range<usize>,
        build: &dyn Fn() -> Option<Vec<crate::manager::BuiltPass>>,
        totals: &mut Totals,
    ) -> Option<(Result<Vec<u8>, i32>, Bounded)> {
        let text = sources.file(file).text().as_bytes();
        let range = range.start.min(text.len())..range.end.min(text.len());
        let copts = self.diagnose_options();
        let mut input = io::Cursor::new(&text[range.clone()]);
        let upto = ErrorPhase::Emit;
        let found = chunked::diagnose(&mut input, file, range.start, upto, build, copts).ok()??;
        self.add_findings_report(&found, totals);
        if let Some((e, span)) = found.emit {
            let mut out = Bounded::new(self.options.limit());
            out.push(self.emit_error(e, Some(span), sources));
            return Some((Err(EXIT_USAGE), out));
        }
        let found = found.diagnostics;
        Some((Err(failure_code(&found)), found))
    }

    /// The error of an emit that cannot write the module (`e`, about the
    /// op at `span` if it is not located yet), as every path words it:
    /// `--emit=NAME: ...`, with no span (exit code 2, a usage error).
    fn emit_error(
        &self,
        e: wire::WireError,
        span: Option<Span>,
        sources: &SourceMap,
    ) -> Diagnostic {
        let e = match (e, span) {
            (wire::WireError::NotEncoded { subject, .. }, Some(span)) => {
                wire::WireError::NotEncoded {
                    subject,
                    location: Some(sources.location(span)),
                }
            }
            (e, _) => e,
        };
        Diagnostic::error(None, format!("--emit={}: {e}", self.options.emit.name()))
    }

    /// How [`chunked::diagnose`] runs for this driver: one thread, timed if
    /// timing was asked for.
    fn diagnose_options(&self) -> ChunkOptions {
        let opts = &self.options;
        ChunkOptions::new(StreamOptions {
            parse: ParseOptions { arch: opts.arch },
            instrumentation: opts.instrumentation(),
            emit: opts.emit.streamed().unwrap_or(StreamEmit::Ir),
            timed: opts.timing,
            threads: 1,
            part_bytes: chunked::DEFAULT_WINDOW_BYTES,
            limit: opts.limit(),
        })
    }

    /// Processes one case: its output or the exit code of its failure,
    /// and every diagnostic produced. `last`: no case follows (only its
    /// module may be left unfreed, [`Options::disable_free`]).
    fn run_case(
        &self,
        sources: &SourceMap,
        file: FileId,
        range: Range<usize>,
        last: bool,
        totals: &mut Totals,
    ) -> (Result<Vec<u8>, i32>, Bounded) {
        let opts = &self.options;
        let limit = opts.limit();
        let bounded = |d: Diagnostics| {
            let mut out = Bounded::new(limit);
            out.extend(d);
            out
        };
        let parse = ParseOptions { arch: opts.arch };
        let instrumentation = opts.instrumentation();
        let build = || self.registry.build(&self.pipeline).ok();
        // Op-local pipelines stream a batch of ops at a time; on an error
        // the case is diagnosed streaming (with the report the whole-module
        // path would give), and if that finds nothing the whole-module
        // path below runs and reports the diagnostics.
        if let (Some(emit), Some(passes)) = (opts.emit.streamed(), build()) {
            if stream::can_stream(&passes, instrumentation) {
                let threads = self.threads;
                let streamed = stream::run_streaming(
                    sources,
                    file,
                    range.clone(),
                    &build,
                    StreamOptions {
                        parse,
                        instrumentation,
                        emit,
                        timed: opts.timing,
                        threads,
                        part_bytes: stream::DEFAULT_PART_BYTES,
                        limit,
                    },
                );
                if let Some(out) = streamed {
                    for (name, d) in &out.report.timings {
                        totals.add(name, *d);
                    }
                    if out.parts > 1 && totals.parallel.is_none_or(|(p, _)| p < out.parts) {
                        totals.parallel = Some((out.parts, threads));
                    }
                    if opts.statistics {
                        totals.report_text.push_str(&out.report.statistics_text());
                    }
                    let mut warnings = bounded(out.report.warnings);
                    warnings.omit(out.report.omitted);
                    return (Ok(out.output), warnings);
                }
                if let Some(found) =
                    self.diagnose_case(sources, file, range.clone(), &build, totals)
                {
                    return found;
                }
            }
        }
        let t = Instant::now();
        let parsed = parse_module(sources, file, range, parse);
        totals.add("parse", t.elapsed());
        let mut module = match parsed {
            Ok(m) => m,
            Err(d) => return (Err(EXIT_INPUT), bounded(d)),
        };
        let t = Instant::now();
        let verified = verify(&module);
        totals.add("verify", t.elapsed());
        if let Err(d) = verified {
            return (Err(EXIT_INPUT), bounded(d));
        }
        let Some(passes) = build() else {
            return (
                Err(EXIT_USAGE),
                bounded(vec![Diagnostic::error(
                    None,
                    "the pipeline no longer builds",
                )]),
            );
        };
        let (report, outcome) = PassManager::new(passes, instrumentation)
            .limited(limit)
            .run_verified(&mut module);
        for (name, d) in &report.timings {
            totals.add(name, *d);
        }
        for dump in &report.dumps {
            totals
                .report_text
                .push_str(&format!("{}\n{}", dump.header, dump.ir));
        }
        if opts.statistics {
            totals.report_text.push_str(&report.statistics_text());
        }
        let mut diags = bounded(report.warnings);
        diags.omit(report.omitted);
        if let Err(d) = outcome {
            let err = Error::Diagnostics(d);
            let code = err.exit_code();
            if let Error::Diagnostics(d) = err {
                diags.extend(d);
            }
            return (Err(code), diags);
        }
        let result = self.emit(&module, sources, &with_omitted_notes(diags.clone()), totals);
        // An earlier case's module is freed: the cases after it would
        // otherwise hold every module before them.
        if opts.disable_free && last {
            std::mem::forget(module);
        }
        match result {
            Ok(out) => (Ok(out), diags),
            Err((code, d)) => (Err(code), bounded(d)),
        }
    }

    /// Renders the emit of a module the pipeline ran on; `diags` are the
    /// warnings so far (for the JSON documents). The error is an exit code
    /// with the diagnostics that replace `diags`.
    fn emit(
        &self,
        module: &apir_ir::Module,
        sources: &SourceMap,
        diags: &[Diagnostic],
        totals: &mut Totals,
    ) -> Result<Vec<u8>, (i32, Diagnostics)> {
        let emit = self.options.emit;
        let t = Instant::now();
        if emit.is_staging() {
            let kernels = match schedule::collect_verified(module, sources) {
                Ok(k) => k,
                Err(mut d) => {
                    let internal = d.iter().any(|d| d.severity == Severity::Internal);
                    for x in &mut d {
                        x.message = format!("--emit={}: {}", emit.name(), x.message);
                    }
                    return Err((if internal { EXIT_INTERNAL } else { EXIT_USAGE }, d));
                }
            };
            let out = match emit {
                Emit::ScheduleJson => {
                    schedule::json(module.arch, &kernels, &json_diagnostics(sources, diags))
                }
                Emit::TraceJson => schedule::trace_json(&kernels),
                _ => timeline::svg(&kernels, self.options.timeline_axis.unwrap_or_default()),
            };
            totals.add("emit", t.elapsed());
            return Ok(out.into_bytes());
        }
        let ops = if emit == Emit::Ir {
            Vec::new()
        } else {
            wire::collect_verified(module, sources)
                .map_err(|e| (EXIT_USAGE, vec![self.emit_error(e, None, sources)]))?
        };
        let out = match emit {
            Emit::Ir => print_module(module).into_bytes(),
            Emit::WireDump => wire::dump(module, &ops).into_bytes(),
            Emit::WireHex => wire::hex_lines(&ops).into_bytes(),
            Emit::WireBin => wire::binary(module.arch, &ops)
                .map_err(|e| (EXIT_INPUT, vec![Diagnostic::error(None, e.to_string())]))?,
            Emit::Json | Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson => {
                wire::json(module.arch, &ops, &json_diagnostics(sources, diags)).into_bytes()
            }
        };
        totals.add("emit", t.elapsed());
        Ok(out)
    }

    /// The arch of a case whose processing failed: the module's own `arch`
    /// attribute (or the option) if its header parses, else the option,
    /// else none (its JSON document says `null`).
    fn case_arch(&self, sources: &SourceMap, file: FileId, range: Range<usize>) -> Option<Arch> {
        let opts = ParseOptions {
            arch: self.options.arch,
        };
        let mut header = StreamParser::new(sources, file, range, opts);
        if header.errors().is_empty() {
            Some(header.module().arch)
        } else {
            opts.arch
        }
    }
}

/// The cases' outputs as one, written as each case is done: a single
/// case's as is; with `split_input_file`, JSON documents as one array (so
/// the output stays JSON), `wire-bin` sections back to back, anything else
/// joined by `// -----` lines.
struct Joined<'a> {
    sink: &'a mut dyn Write,
    /// JSON documents in an array.
    array: bool,
    /// Written between two outputs.
    separator: &'static [u8],
    written: usize,
    /// The first write that failed (nothing is written after it).
    failed: Option<io::Error>,
}

impl<'a> Joined<'a> {
    fn new(opts: &Options, sink: &'a mut dyn Write) -> Self {
        let array = opts.split_input_file && opts.emit.is_json();
        let separator: &[u8] = match opts.emit {
            _ if array => b",\n",
            Emit::WireBin => b"",
            _ => b"// -----\n",
        };
        let mut joined = Joined {
            sink,
            array,
            separator,
            written: 0,
            failed: None,
        };
        if array {
            joined.write(b"[\n");
        }
        joined
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.failed = self.sink.write_all(bytes).err();
        }
    }

    fn push(&mut self, out: &[u8]) {
        if self.written > 0 {
            self.write(self.separator);
        }
        self.written += 1;
        self.write(if self.array {
            out.trim_ascii_end()
        } else {
            out
        });
    }

    /// Closes the array; the first write that failed.
    fn finish(mut self) -> Option<io::Error> {
        if self.array {
            self.write(b"\n]\n");
        }
        self.failed
    }
}

/// The exit code of a run that failed with `found`: 3 if one is an
/// internal error (shown or not), else 1 (as the whole-module path
/// decides).
fn failure_code(found: &Bounded) -> i32 {
    if found.has_internal() {
        EXIT_INTERNAL
    } else {
        EXIT_INPUT
    }
}

/// What a run shows of `found`: the diagnostics kept, then for each kind
/// the limit left some of out, a note saying how many and how to see
/// them.
pub(crate) fn with_omitted_notes(found: Bounded) -> Diagnostics {
    let limit = found.limit();
    let internal = found.omitted_internal();
    let (mut shown, omitted) = found.into_parts();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let among = if internal {
        ", internal errors among them"
    } else {
        ""
    };
    for (n, kind, among, max, flag) in [
        (
            omitted.errors,
            "error",
            among,
            limit.errors,
            "--error-limit",
        ),
        (
            omitted.warnings,
            "warning",
            "",
            limit.warnings,
            "--warning-limit",
        ),
    ] {
        if n == 0 {
            continue;
        }
        let message = match max.unwrap_or_default() {
            // A library limit of none shown: no option asked for it.
            0 => format!("{n} {kind}{} not shown{among}", plural(n)),
            max => format!(
                "{n} more {kind}{} not shown{among} (the limit is {max}; {flag}=0 shows all)",
                plural(n)
            ),
        };
        shown.push(Diagnostic::note(None, message));
    }
    shown
}

/// Rewinds `input` and restarts `sink` for another run over the input
/// (streaming again, or the whole-module path after it).
fn start_over(input: &mut dyn ReadAgain, sink: &mut dyn OutputSink) -> Result<(), StreamError> {
    input.rewind().map_err(StreamError::Read)?;
    sink.restart().map_err(StreamError::Write)
}

/// An input that can be read again from its start: the whole-module path
/// reads it again when streaming gives up ([`Driver::run_reader`]). A file
/// seeks back; standard input can be spooled to a temporary file as it is
/// read (as `apir-opt` does).
pub trait ReadAgain: Read {
    /// Starts reading from the beginning of the input again.
    fn rewind(&mut self) -> io::Result<()>;

    /// Goes on reading from byte `offset` of the input, which is at most
    /// its length (a [`chunked::Checkpoint::offset`] of it). By default it
    /// rewinds and reads the bytes before `offset` again; an input that can
    /// seek should.
    fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.rewind()?;
        let skipped = io::copy(&mut Read::take(&mut *self, offset), &mut io::sink())?;
        if skipped < offset {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the input ended before the offset to go on from",
            ));
        }
        Ok(())
    }

    /// What is known of the input's length without reading it (by default
    /// nothing). [`Driver::run_reader`] rejects an input known to be past
    /// [`MAX_SOURCE_BYTES`] before reading more than its first line, so a
    /// huge file (a sparse one, say) costs no time; an input of unknown
    /// length is read up to one byte past the limit, never further.
    fn length(&mut self) -> Length {
        Length::Unknown
    }
}

/// An input's length as far as it is known before it is read
/// ([`ReadAgain::length`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// Not known (a pipe, a device).
    Unknown,
    /// Exactly this many bytes (a regular file, bytes in memory).
    Exactly(u64),
    /// More than this many bytes (a spool that stopped keeping the input
    /// one byte past the limit).
    MoreThan(u64),
}

impl Length {
    /// The length, if known exactly.
    pub fn exact(self) -> Option<u64> {
        match self {
            Length::Exactly(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the input is known to be longer than [`MAX_SOURCE_BYTES`]
    /// (every tool's input limit).
    pub fn past_limit(self) -> bool {
        match self {
            Length::Unknown => false,
            Length::Exactly(n) => n > MAX_SOURCE_BYTES as u64,
            Length::MoreThan(n) => n >= MAX_SOURCE_BYTES as u64,
        }
    }
}

impl ReadAgain for std::fs::File {
    fn rewind(&mut self) -> io::Result<()> {
        self.seek(SeekFrom::Start(0)).map(|_| ())
    }

    fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.seek(SeekFrom::Start(offset)).map(|_| ())
    }

    fn length(&mut self) -> Length {
        match self.metadata() {
            Ok(m) if m.is_file() => Length::Exactly(m.len()),
            _ => Length::Unknown,
        }
    }
}

impl ReadAgain for io::Cursor<Vec<u8>> {
    fn rewind(&mut self) -> io::Result<()> {
        self.set_position(0);
        Ok(())
    }

    fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.set_position(offset);
        Ok(())
    }

    fn length(&mut self) -> Length {
        Length::Exactly(self.get_ref().len() as u64)
    }
}

impl ReadAgain for io::Cursor<&[u8]> {
    fn rewind(&mut self) -> io::Result<()> {
        self.set_position(0);
        Ok(())
    }

    fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.set_position(offset);
        Ok(())
    }

    fn length(&mut self) -> Length {
        Length::Exactly(self.get_ref().len() as u64)
    }
}

/// Where [`Driver::run_reader`] writes the output: a byte sink that can
/// start over (when streaming gives up and the whole-module path writes
/// the output again).
pub trait OutputSink: Write {
    /// Drops everything written so far.
    fn restart(&mut self) -> io::Result<()>;
}

impl OutputSink for Vec<u8> {
    fn restart(&mut self) -> io::Result<()> {
        self.clear();
        Ok(())
    }
}

/// A regular file as an [`OutputSink`]: the output goes after what the
/// file holds when wrapped, written through as a run produces it (nothing
/// is held in memory), and [`OutputSink::restart`] cuts the file back to
/// the length it had when wrapped, so what it held stays, whether or not
/// the run starts over. A failed run leaves what it wrote: to replace a
/// file all at once, wrap a temporary file beside it and rename it over
/// the destination on success (as `apir-opt` does).
#[derive(Debug)]
pub struct FileSink {
    file: std::fs::File,
    start: u64,
}

impl FileSink {
    /// Wraps `file`, a regular file open for writing (in append mode or
    /// not): the output goes at its end. Anything else (a pipe, a
    /// terminal, `/dev/null`: none can be cut back) is an
    /// [`io::ErrorKind::InvalidInput`] error.
    pub fn new(mut file: std::fs::File) -> io::Result<FileSink> {
        use std::io::Seek;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an output sink that can start over must be a regular file",
            ));
        }
        let start = file.seek(io::SeekFrom::End(0))?;
        Ok(FileSink { file, start })
    }

    /// The file back.
    pub fn into_inner(self) -> std::fs::File {
        self.file
    }
}

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl OutputSink for FileSink {
    fn restart(&mut self) -> io::Result<()> {
        use std::io::Seek;
        self.file.set_len(self.start)?;
        self.file.seek(io::SeekFrom::Start(self.start)).map(|_| ())
    }
}

/// Why [`Driver::run_reader`] could not run: reading the input or writing
/// the output failed. Problems in the input (input that is not UTF-8 or
/// too long included) are diagnostics in the [`Outcome`].
#[derive(Debug)]
pub enum StreamError {
    /// Reading the input failed.
    Read(io::Error),
    /// Writing the output failed.
    Write(io::Error),
}

/// The JSON document of a failed run for a JSON `emit`: no ops (or
/// kernels), the diagnostics, and `arch` if known; nothing for another
/// emit.
fn failure_doc(emit: Emit, arch: Option<Arch>, diagnostics: &[JsonDiagnostic]) -> Vec<u8> {
    match emit {
        Emit::Json => wire::json(arch, &[], diagnostics).into_bytes(),
        Emit::ScheduleJson => schedule::json(arch, &[], diagnostics).into_bytes(),
        _ => Vec::new(),
    }
}

/// An input past [`MAX_SOURCE_BYTES`]: its first line (at most 64 KiB,
/// for the diagnostic's source line) and its length if known.
type TooLong = (String, Option<u64>);

/// An input that is not text the parser can read.
enum Unreadable {
    /// Past the limit.
    TooLong(TooLong),
    /// Not UTF-8 at the first bad byte, with the part of its line shown.
    NotUtf8(BadLine),
}

/// Where the first byte that is not UTF-8 lies and the part of its line
/// shown around it: at most [`BAD_LINE_SHOWN`] bytes either side, each
/// invalid sequence as U+FFFD.
struct BadLine {
    /// The bad byte's offset.
    at: u32,
    /// The shown part's text and offset.
    text: String,
    offset: u32,
    /// The 0-based line and the characters before the shown part on it.
    line: u32,
    column: u32,
}

/// The bytes of the bad byte's line shown on either side of it
/// (project-defined): a line of any length is shown as one screen's worth,
/// not held whole.
const BAD_LINE_SHOWN: usize = 1 << 10;

impl BadLine {
    /// The first bad byte of `bytes` (`at`: all before it is UTF-8) and
    /// its line around it.
    fn of(bytes: &[u8], at: usize) -> BadLine {
        let start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |n| n + 1);
        // From a character's start (all before `at` is UTF-8).
        let mut from = at.saturating_sub(BAD_LINE_SHOWN).max(start);
        while from < at && bytes[from] & 0xc0 == 0x80 {
            from += 1;
        }
        let end = bytes[at..]
            .iter()
            .take(BAD_LINE_SHOWN)
            .position(|&b| b == b'\n')
            .map_or((at + BAD_LINE_SHOWN).min(bytes.len()), |n| at + n);
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        BadLine {
            at: count(at),
            text: String::from_utf8_lossy(&bytes[from..end]).into_owned(),
            offset: count(from),
            line: count(bytes[..start].iter().filter(|&&b| b == b'\n').count()),
            column: count(
                bytes[start..from]
                    .iter()
                    .filter(|&&b| b & 0xc0 != 0x80)
                    .count(),
            ),
        }
    }
}

/// Reads all of `input` as text. An input longer than spans can address
/// ([`MAX_SOURCE_BYTES`]) is not held: its first line and, if known, its
/// length; it is read no further than one byte past the limit (the rest of
/// an endless pipe is never read), and not at all past its first line if
/// its length says so ([`ReadAgain::length`]).
fn read_whole(input: &mut dyn ReadAgain) -> Result<Result<String, Unreadable>, StreamError> {
    let length = input.length();
    if length.past_limit() {
        return first_line(input, length).map(|long| Err(Unreadable::TooLong(long)));
    }
    let mut bytes = Vec::new();
    (&mut *input)
        .take(MAX_SOURCE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(StreamError::Read)?;
    if bytes.len() > MAX_SOURCE_BYTES {
        bytes.truncate(line_end(&bytes));
        let first = String::from_utf8_lossy(&bytes).into_owned();
        return Ok(Err(Unreadable::TooLong((first, None))));
    }
    Ok(String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        Unreadable::NotUtf8(BadLine::of(e.as_bytes(), at))
    }))
}

/// Where the first line of `bytes` ends, at most 64 KiB in.
fn line_end(bytes: &[u8]) -> usize {
    let head = &bytes[..bytes.len().min(1 << 16)];
    head.iter().position(|&b| b == b'\n').unwrap_or(head.len())
}

/// The first line of an input (read from its start) that `length` says is
/// past the limit, and its length if exact.
fn first_line(input: &mut dyn ReadAgain, length: Length) -> Result<TooLong, StreamError> {
    input.rewind().map_err(StreamError::Read)?;
    let mut head = Vec::new();
    (&mut *input)
        .take(1 << 16)
        .read_to_end(&mut head)
        .map_err(StreamError::Read)?;
    head.truncate(line_end(&head));
    Ok((String::from_utf8_lossy(&head).into_owned(), length.exact()))
}

impl Driver {
    /// The whole-module path's outcome for an input it cannot read as
    /// text: past the limit (its first line as the source to point into,
    /// the input not held) or not UTF-8 (at the first bad byte). The
    /// diagnostic, and with a JSON emit the document holding it (with the
    /// `--arch` given, else none).
    fn unreadable(&self, name: &str, input: Unreadable) -> Outcome {
        let opts = &self.options;
        let mut sources = SourceMap::new();
        let (span, message) = match input {
            Unreadable::TooLong((first_line, len)) => {
                let file = sources.add(name, first_line);
                let message = match len {
                    Some(len) => format!("input is {len} bytes; the limit is {MAX_SOURCE_BYTES}"),
                    None => format!(
                        "input is more than {MAX_SOURCE_BYTES} bytes; the limit is {MAX_SOURCE_BYTES}"
                    ),
                };
                (Span::new(file, 0, 0), message)
            }
            Unreadable::NotUtf8(bad) => {
                // The bad byte is a U+FFFD of the window, at its offset in
                // the input.
                let file = sources.add_window(name, &bad.text, bad.offset, bad.line, bad.column);
                (
                    Span::new(file, bad.at, bad.at),
                    "input is not valid UTF-8".to_string(),
                )
            }
        };
        let diagnostics = vec![Diagnostic::error(span, message)];
        let doc = failure_doc(
            opts.emit,
            opts.arch,
            &json_diagnostics(&sources, &diagnostics),
        );
        let mut output = Vec::new();
        if !doc.is_empty() {
            let mut joined = Joined::new(opts, &mut output);
            joined.push(&doc);
            // (Writing into a `Vec` does not fail.)
            let _ = joined.finish();
        }
        Outcome {
            output,
            diagnostics,
            omitted: Omitted::default(),
            sources,
            report: String::new(),
            exit_code: EXIT_INPUT,
            color: opts.color,
        }
    }
}

/// What the cases of one run add up to.
#[derive(Default)]
struct Totals {
    /// Time per phase, summed over the cases, in order of first appearance.
    phases: Vec<(String, Duration)>,
    /// IR dumps and statistics, case after case.
    report_text: String,
    /// The most parts one case was streamed in, and the threads used.
    parallel: Option<(usize, usize)>,
}

impl Totals {
    /// The report text: IR dumps and statistics, then the timing asked for.
    fn report(self, opts: &Options) -> String {
        let mut report = self.report_text;
        if opts.timing {
            report.push_str(&timing_text(&self.phases));
            if let Some((parts, threads)) = self.parallel {
                report.push_str(&format!(
                    "  (streamed in {parts} parts on {threads} threads: each phase's time is summed over the threads)\n"
                ));
            }
        }
        report
    }

    fn add(&mut self, name: &str, d: Duration) {
        match self.phases.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1 += d,
            None => self.phases.push((name.to_string(), d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BadLine, BAD_LINE_SHOWN};

    /// The part of a bad byte's line that is kept is bounded whatever the
    /// line's length, starts at a character, and is located by the whole
    /// input's line and column (in characters).
    #[test]
    fn a_bad_lines_shown_part_is_bounded_and_located() {
        // Two-byte characters (then one byte or none), so that the
        // window's start falls inside one for an odd `lead`; then the bad
        // byte, then more of the line.
        for lead in [0usize, 1, 2999, 3000] {
            let mut bytes = b"first\nsecond\n".to_vec();
            bytes.extend("é".repeat(lead).as_bytes());
            bytes.extend("x".repeat(lead % 2).as_bytes());
            let at = bytes.len();
            bytes.push(0xff);
            bytes.extend("b".repeat(5000).as_bytes());
            bytes.extend(b"\nlast\n");
            let bad = BadLine::of(&bytes, at);
            assert_eq!((bad.at as usize, bad.line), (at, 2));
            assert!(
                bad.text.len() <= 2 * BAD_LINE_SHOWN + 3,
                "{}",
                bad.text.len()
            );
            let from = bad.offset as usize;
            assert!(from <= at && from >= 13);
            // The shown part is the input's bytes from a character on.
            let before = std::str::from_utf8(&bytes[from..at]).unwrap();
            assert!(bad.text.starts_with(before));
            assert_eq!(bad.text[before.len()..].chars().next(), Some('\u{fffd}'));
            // The column counts the characters before the shown part.
            let line_start = 13;
            let skipped = std::str::from_utf8(&bytes[line_start..from]).unwrap();
            assert_eq!(bad.column as usize, skipped.chars().count());
            assert!(!bad.text.contains('\n'));
        }
    }
}
