//! `apir-opt`: parse, verify, run a pass pipeline and print the result.

use apir_compiler::stream::{self, StreamEmit, StreamOptions};
use apir_compiler::{expect, wire};
use apir_compiler::{timing_text, Error, Instrumentation, Pipeline, PipelineError, Registry};
use apir_ir::{
    parse_module, print_module, render_all, render_all_styled, split_input, verify, Arch,
    Diagnostic, ParseOptions, SourceMap, Span,
};
use apir_tools::cli::opt::{Args, Emit, TimelineAxis};
use apir_tools::{
    decode_utf8, read_input, write_output, write_stdout, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK,
    EXIT_USAGE,
};
use clap::ValueEnum;
use std::time::{Duration, Instant};

fn main() {
    apir_tools::cli_main("apir-opt", run)
}

fn list_passes(registry: &Registry) -> String {
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

fn pipeline_error(text: &str, e: &PipelineError) -> String {
    let mut sm = SourceMap::new();
    let f = sm.add("<pipeline>", text.to_string());
    let d = Diagnostic::error(
        Span::new(f, e.range.start as u32, e.range.end as u32),
        e.message.clone(),
    );
    render_all(&[d], &sm)
}

struct Totals {
    phases: Vec<(String, Duration)>,
    report_text: String,
    /// The most parts one case was streamed in, and the threads used.
    parallel: Option<(usize, usize)>,
}

impl Totals {
    fn add(&mut self, name: &str, d: Duration) {
        match self.phases.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1 += d,
            None => self.phases.push((name.to_string(), d)),
        }
    }
}

fn run(args: Args) -> i32 {
    let registry = Registry::builtin();
    if args.list_passes {
        return match write_stdout(list_passes(&registry).as_bytes()) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("{e}");
                EXIT_INPUT
            }
        };
    }
    if args.timeline_axis.is_some() && args.emit != Emit::TimelineSvg {
        // Only the SVG has a choice of axis: a trace already puts every core
        // on the viewer's one clock.
        use clap::CommandFactory;
        let e = Args::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--timeline-axis applies to --emit=timeline-svg only, not --emit={}",
                emit_name(args.emit)
            ),
        );
        let _ = e.print();
        return EXIT_USAGE;
    }
    let pipeline_text = args.pipeline.clone().unwrap_or_default();
    let pipeline = match Pipeline::parse(&pipeline_text) {
        Ok(p) => p,
        Err(e) => {
            eprint!("{}", pipeline_error(&pipeline_text, &e));
            return EXIT_USAGE;
        }
    };
    // Build once up front so an unknown pass is a usage error before any input is read.
    if let Err(e) = registry.build(&pipeline) {
        eprint!("{}", pipeline_error(&pipeline_text, &e));
        return EXIT_USAGE;
    }
    let (name, bytes) = match read_input(args.input.as_deref()) {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_INPUT;
        }
    };
    let text = match decode_utf8(&name, bytes) {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_INPUT;
        }
    };
    let mut sources = SourceMap::new();
    // The source map takes the text without copying it.
    let file = sources.add(name, text);
    let text = sources.file(file).text();
    let ranges = if args.split_input_file {
        split_input(text)
    } else {
        std::iter::once(0..text.len()).collect()
    };
    let instrumentation = Instrumentation {
        print_ir_after_all: args.print_ir_after_all,
        print_ir_after_failure: args.print_ir_after_failure,
        no_verify: false,
    };
    let mut totals = Totals {
        phases: Vec::new(),
        report_text: String::new(),
        parallel: None,
    };
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    let mut exit = EXIT_OK;
    let mut stderr = String::new();
    let color = args.color.enabled();
    for range in ranges {
        let (result, diags) = run_case(
            &args,
            &registry,
            &pipeline,
            &sources,
            file,
            range.clone(),
            instrumentation,
            &mut totals,
        );
        if args.verify_diagnostics {
            match expect::collect(&sources, file, range.clone()) {
                Err(bad) => {
                    stderr.push_str(&render_all_styled(&bad, &sources, color));
                    exit = exit.max(EXIT_INPUT);
                }
                Ok(expected) => {
                    let mismatches = expect::check(&sources, &expected, &diags);
                    if !mismatches.is_empty() {
                        stderr.push_str(&render_all_styled(&mismatches, &sources, color));
                        exit = exit.max(EXIT_INPUT);
                    }
                    if diags
                        .iter()
                        .any(|d| d.severity == apir_ir::Severity::Internal)
                    {
                        exit = EXIT_INTERNAL;
                    }
                }
            }
        } else if !diags.is_empty() {
            stderr.push_str(&render_all_styled(&diags, &sources, color));
        }
        match result {
            Ok(out) => outputs.push(out),
            Err(code) => {
                if matches!(args.emit, Emit::Json | Emit::ScheduleJson) && code != EXIT_USAGE {
                    // JSON consumers get the diagnostics in the document too.
                    let arch = case_arch(&args, &sources, file, range.clone());
                    let d = json_diagnostics(&sources, &diags);
                    outputs.push(if args.emit == Emit::Json {
                        wire::json(arch, &[], &d).into_bytes()
                    } else {
                        apir_compiler::schedule::json(arch, &[], &d).into_bytes()
                    });
                }
                if !args.verify_diagnostics || code == EXIT_INTERNAL || code == EXIT_USAGE {
                    exit = exit.max(code);
                }
            }
        }
    }
    eprint!("{stderr}");
    eprint!("{}", totals.report_text);
    if args.timing {
        eprint!("{}", timing_text(&totals.phases));
        if let Some((parts, threads)) = totals.parallel {
            eprintln!(
                "  (streamed in {parts} parts on {threads} threads: each phase's time is summed over the threads)"
            );
        }
    }
    let separator: &[u8] = if args.emit == Emit::WireBin {
        b""
    } else {
        b"// -----\n"
    };
    let joined = if args.split_input_file
        && matches!(args.emit, Emit::Json | Emit::ScheduleJson | Emit::TraceJson)
    {
        // JSON stays JSON: one array, one document per case.
        let mut all = b"[\n".to_vec();
        for (i, doc) in outputs.iter().enumerate() {
            if i > 0 {
                all.extend_from_slice(b",\n");
            }
            all.extend_from_slice(doc.trim_ascii_end());
        }
        all.extend_from_slice(b"\n]\n");
        all
    } else if outputs.len() == 1 {
        outputs.pop().unwrap_or_default()
    } else {
        outputs.join(separator)
    };
    match &args.output {
        Some(path) if exit == EXIT_OK => {
            if let Err(msg) = write_output(path, &joined) {
                eprintln!("{msg}");
                return EXIT_INPUT;
            }
        }
        Some(_) => {}
        None => {
            if let Err(msg) = write_stdout(&joined) {
                eprintln!("{msg}");
                return EXIT_INPUT;
            }
        }
    }
    exit
}

/// Processes one case: returns its output text or the exit code of its
/// failure, plus every diagnostic produced.
#[allow(clippy::too_many_arguments)]
fn run_case(
    args: &Args,
    registry: &Registry,
    pipeline: &Pipeline,
    sources: &SourceMap,
    file: apir_ir::FileId,
    range: std::ops::Range<usize>,
    instrumentation: Instrumentation,
    totals: &mut Totals,
) -> (Result<Vec<u8>, i32>, Vec<Diagnostic>) {
    let opts = ParseOptions { arch: args.arch };
    // Op-local pipelines stream one op at a time; on any error the
    // whole-module path below runs and reports the diagnostics.
    if let Ok(passes) = registry.build(pipeline) {
        let staging = matches!(
            args.emit,
            Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson
        );
        if !staging && stream::can_stream(&passes, instrumentation) {
            let emit = match args.emit {
                Emit::Ir => StreamEmit::Ir,
                Emit::WireDump => StreamEmit::WireDump,
                Emit::WireHex => StreamEmit::WireHex,
                Emit::WireBin => StreamEmit::WireBin,
                Emit::Json => StreamEmit::Json,
                Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson => StreamEmit::Ir,
            };
            let threads = match args.threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => usize::from(n),
            };
            if let Some(out) = stream::run_streaming(
                sources,
                file,
                range.clone(),
                &|| registry.build(pipeline).ok(),
                StreamOptions {
                    parse: opts,
                    instrumentation,
                    emit,
                    timed: args.timing,
                    threads,
                    part_bytes: stream::DEFAULT_PART_BYTES,
                },
            ) {
                for (name, d) in &out.report.timings {
                    totals.add(name, *d);
                }
                if out.parts > 1 && totals.parallel.is_none_or(|(p, _)| p < out.parts) {
                    totals.parallel = Some((out.parts, threads));
                }
                if args.statistics {
                    totals.report_text.push_str(&out.report.statistics_text());
                }
                return (Ok(out.output), out.report.warnings);
            }
        }
    }
    let t = Instant::now();
    let parsed = parse_module(sources, file, range, opts);
    totals.add("parse", t.elapsed());
    let mut module = match parsed {
        Ok(m) => m,
        Err(d) => return (Err(EXIT_INPUT), d),
    };
    let t = Instant::now();
    let verified = verify(&module);
    totals.add("verify", t.elapsed());
    if let Err(d) = verified {
        return (Err(EXIT_INPUT), d);
    }
    let passes = match registry.build(pipeline) {
        Ok(p) => p,
        Err(e) => return (Err(EXIT_USAGE), vec![Diagnostic::error(None, e.message)]),
    };
    let (report, outcome) =
        apir_compiler::PassManager::new(passes, instrumentation).run(&mut module);
    let failure = outcome.err().map(Error::Diagnostics);
    for (name, d) in &report.timings {
        totals.add(name, *d);
    }
    for dump in &report.dumps {
        totals
            .report_text
            .push_str(&format!("{}\n{}", dump.header, dump.ir));
    }
    if args.statistics {
        totals.report_text.push_str(&report.statistics_text());
    }
    let mut diags = report.warnings;
    if let Some(err) = failure {
        let code = err.exit_code();
        if let Error::Diagnostics(d) = err {
            diags.extend(d);
        }
        return (Err(code), diags);
    }
    let t = Instant::now();
    if matches!(
        args.emit,
        Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson
    ) {
        let t = Instant::now();
        let kernels = match apir_compiler::schedule::collect(&module, sources) {
            Ok(k) => k,
            Err(mut d) => {
                let internal = d.iter().any(|d| d.severity == apir_ir::Severity::Internal);
                for x in &mut d {
                    x.message = format!("--emit={}: {}", emit_name(args.emit), x.message);
                }
                return (Err(if internal { EXIT_INTERNAL } else { EXIT_USAGE }), d);
            }
        };
        let out = match args.emit {
            Emit::ScheduleJson => apir_compiler::schedule::json(
                module.arch,
                &kernels,
                &json_diagnostics(sources, &diags),
            ),
            Emit::TraceJson => apir_compiler::schedule::trace_json(&kernels),
            _ => apir_compiler::timeline::svg(
                &kernels,
                match args.timeline_axis.unwrap_or_default() {
                    TimelineAxis::Core => apir_compiler::timeline::Axis::Core,
                    TimelineAxis::Global => apir_compiler::timeline::Axis::Global,
                },
            ),
        };
        totals.add("emit", t.elapsed());
        return (Ok(out.into_bytes()), diags);
    }
    let ops = if args.emit == Emit::Ir {
        Vec::new()
    } else {
        match wire::collect(&module, sources) {
            Ok(ops) => ops,
            Err(msg) => {
                return (
                    Err(EXIT_USAGE),
                    vec![Diagnostic::error(
                        None,
                        format!("--emit={}: {msg}", emit_name(args.emit)),
                    )],
                )
            }
        }
    };
    let out = match args.emit {
        Emit::Ir => print_module(&module).into_bytes(),
        Emit::WireDump => wire::dump(&module, &ops).into_bytes(),
        Emit::WireHex => wire::hex_lines(&ops).into_bytes(),
        Emit::WireBin => match wire::binary(module.arch, &ops) {
            Ok(b) => b,
            Err(msg) => {
                return (
                    Err(EXIT_INPUT),
                    vec![Diagnostic::error(None, msg.to_string())],
                )
            }
        },
        Emit::Json | Emit::ScheduleJson | Emit::TimelineSvg | Emit::TraceJson => {
            wire::json(module.arch, &ops, &json_diagnostics(sources, &diags)).into_bytes()
        }
    };
    totals.add("emit", t.elapsed());
    // The process exits right after writing the output: freeing a
    // million-op module piece by piece would only delay that (as compilers
    // commonly do, the memory is left to the OS).
    std::mem::forget(module);
    (Ok(out), diags)
}

/// The arch of a case whose processing failed: `--arch`, else the module's
/// own `arch` attribute if its header parses, else v2.
fn case_arch(
    args: &Args,
    sources: &SourceMap,
    file: apir_ir::FileId,
    range: std::ops::Range<usize>,
) -> Arch {
    let opts = ParseOptions { arch: args.arch };
    let mut header = apir_ir::StreamParser::new(sources, file, range, opts);
    if header.errors().is_empty() {
        header.module().arch
    } else {
        opts.arch.unwrap_or(Arch::V2)
    }
}

fn emit_name(e: Emit) -> String {
    e.to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

fn json_diagnostics(sources: &SourceMap, diags: &[Diagnostic]) -> Vec<wire::JsonDiagnostic> {
    apir_compiler::describe(sources, diags)
        .into_iter()
        .map(|d| wire::JsonDiagnostic {
            severity: d.severity.to_string(),
            message: d.message,
            loc: d.location.map(|l| l.to_string()),
            notes: d
                .notes
                .into_iter()
                .map(|(message, loc)| wire::JsonNote {
                    message,
                    loc: loc.map(|l| l.to_string()),
                })
                .collect(),
        })
        .collect()
}
