//! The driver as a library: every emit, split input, verify-diagnostics,
//! failures in JSON, usage errors, and streaming against the whole-module
//! path.

use apir_compiler::driver::{
    self, Driver, Emit, Input, Options, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE,
};
use apir_compiler::{wire, Compilation, PassInfo, Registry};
use apir_ir::printer::print_module;
use apir_ir::target::Arch;
use apir_ir::SourceMap;
use apir_synth::{generate, GenOptions};

const BATCHNORM: &str = include_str!("../../../examples/batchnorm.apir");
const RELU: &str = include_str!("../../../examples/relu-kernel.apir");

/// A module with an undefined buffer on line 3.
const BROKEN: &str = "module attributes {arch = \"v3\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<4x4xf32>\n  isa.memset dst = %nope[[4, 4], [1, 4]]\n}\n";

fn options(pipeline: &str, emit: Emit) -> Options {
    Options {
        pipeline: pipeline.into(),
        emit,
        ..Options::default()
    }
}

fn run(opts: Options, text: &str) -> driver::Outcome {
    driver::run(opts, Input::text("k.apir", text))
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("the output is JSON")
}

/// The bytes the library's own functions give after `lower-to-wire`.
fn lowered(text: &str) -> (Compilation, Vec<wire::WireOp>) {
    let mut c = Compilation::parse("k.apir", text, None).unwrap();
    c.run("lower-to-wire").unwrap();
    let ops = wire::collect(&c.module, &c.sources).unwrap();
    (c, ops)
}

#[test]
fn every_wire_emit_on_a_small_module() {
    let (c, ops) = lowered(BATCHNORM);
    let expected = |emit: Emit| -> Vec<u8> {
        match emit {
            Emit::Ir => c.ir().into_bytes(),
            Emit::WireDump => wire::dump(&c.module, &ops).into_bytes(),
            Emit::WireHex => wire::hex_lines(&ops).into_bytes(),
            Emit::WireBin => wire::binary(c.module.arch, &ops).unwrap(),
            Emit::Json => wire::json(c.module.arch, &ops, &[]).into_bytes(),
            _ => unreachable!(),
        }
    };
    for emit in [
        Emit::Ir,
        Emit::WireDump,
        Emit::WireHex,
        Emit::WireBin,
        Emit::Json,
    ] {
        let out = run(options("lower-to-wire", emit), BATCHNORM);
        assert_eq!(
            out.exit_code,
            EXIT_OK,
            "{emit:?}: {}",
            out.render_diagnostics()
        );
        assert!(out.diagnostics.is_empty());
        assert!(out.report.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&out.output),
            String::from_utf8_lossy(&expected(emit)),
            "{emit:?}"
        );
    }
    let doc = json(&run(options("lower-to-wire", Emit::Json), BATCHNORM).output);
    assert_eq!(doc["arch"], "v2");
    assert_eq!(doc["ops"].as_array().unwrap().len(), 3);
    assert_eq!(doc["diagnostics"], serde_json::json!([]));
}

#[test]
fn every_staging_emit_on_a_small_kernel() {
    let out = run(options("lower-staging", Emit::ScheduleJson), RELU);
    assert_eq!(out.exit_code, EXIT_OK, "{}", out.render_diagnostics());
    let doc = json(&out.output);
    assert_eq!(doc["kernels"][0]["name"], "relu");
    assert!(
        doc["kernels"][0]["figures"]["makespan_ns"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    let out = run(options("lower-staging", Emit::TraceJson), RELU);
    assert_eq!(out.exit_code, EXIT_OK);
    assert!(!json(&out.output)["traceEvents"]
        .as_array()
        .unwrap()
        .is_empty());

    for axis in [None, Some(apir_compiler::timeline::Axis::Global)] {
        let opts = Options {
            timeline_axis: axis,
            ..options("lower-staging", Emit::TimelineSvg)
        };
        let out = run(opts, RELU);
        assert_eq!(out.exit_code, EXIT_OK);
        let svg = String::from_utf8(out.output).unwrap();
        roxmltree::Document::parse(&svg).expect("the timeline is XML");
    }

    // Without a plan, a staging emit is a usage error naming the emit, and
    // a usage error gives no document.
    let out = run(options("", Emit::ScheduleJson), RELU);
    assert_eq!(out.exit_code, EXIT_USAGE);
    assert!(out.diagnostics[0]
        .message
        .starts_with("--emit=schedule-json: "));
    assert!(out.output.is_empty());
}

#[test]
fn emit_names_round_trip() {
    for e in Emit::ALL {
        assert_eq!(Emit::from_name(e.name()), Some(e));
    }
    assert_eq!(Emit::from_name("hex"), None);
    assert_eq!(Emit::default(), Emit::Ir);
}

#[test]
fn a_failing_case_in_json_has_its_diagnostics_in_the_document() {
    for emit in [Emit::Json, Emit::ScheduleJson] {
        let out = run(options("lower-to-wire", emit), BROKEN);
        assert_eq!(out.exit_code, EXIT_INPUT);
        let doc = json(&out.output);
        // The arch comes from the module's header.
        assert_eq!(doc["arch"], "v3");
        let diags = doc["diagnostics"].as_array().unwrap();
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0]["severity"], "error");
        assert_eq!(diags[0]["loc"], "k.apir:3:20");
        assert!(diags[0]["message"]
            .as_str()
            .unwrap()
            .contains("undefined buffer `%nope`"));
        // The same diagnostics, as data and as JSON data.
        assert_eq!(out.json_diagnostics().len(), 1);
        assert_eq!(
            out.json_diagnostics()[0].loc.as_deref(),
            Some("k.apir:3:20")
        );
        assert!(out.render_diagnostics().contains("--> k.apir:3:20"));
    }
    // Other emits give nothing for a failed case.
    let out = run(options("lower-to-wire", Emit::WireHex), BROKEN);
    assert_eq!(out.exit_code, EXIT_INPUT);
    assert!(out.output.is_empty());
}

#[test]
fn split_input_file_with_a_json_emit_is_one_array() {
    let text = format!("{BATCHNORM}// -----\n{BROKEN}// -----\n{BATCHNORM}");
    let opts = Options {
        split_input_file: true,
        ..options("lower-to-wire", Emit::Json)
    };
    let out = run(opts, &text);
    assert_eq!(out.exit_code, EXIT_INPUT);
    let doc = json(&out.output);
    let cases = doc.as_array().expect("one array");
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0]["ops"].as_array().unwrap().len(), 3);
    // The same bytes, located in their own case of the one file.
    assert_eq!(
        cases[0]["ops"][2]["operands"],
        cases[2]["ops"][2]["operands"]
    );
    assert_eq!(cases[0]["ops"][0]["loc"], "k.apir:9:3");
    assert_eq!(cases[2]["ops"][0]["loc"], "k.apir:27:3");
    assert_eq!(cases[1]["arch"], "v3");
    assert_eq!(cases[1]["diagnostics"].as_array().unwrap().len(), 1);
    assert_eq!(out.diagnostics.len(), 1);

    // Text outputs are joined by `// -----` lines; a failed case leaves
    // none.
    let opts = Options {
        split_input_file: true,
        ..options("lower-to-wire", Emit::WireHex)
    };
    let out = run(opts, &text);
    let one = wire::hex_lines(&lowered(BATCHNORM).1);
    assert_eq!(
        String::from_utf8(out.output).unwrap(),
        format!("{one}// -----\n{one}")
    );
    // Binary sections follow each other.
    let opts = Options {
        split_input_file: true,
        ..options("lower-to-wire", Emit::WireBin)
    };
    let two = format!("{BATCHNORM}// -----\n{BATCHNORM}");
    let out = run(opts, &two);
    let (c, ops) = lowered(BATCHNORM);
    assert_eq!(
        out.output,
        wire::binary(c.module.arch, &ops).unwrap().repeat(2)
    );
}

#[test]
fn verify_diagnostics_pass_and_mismatch() {
    let good = "module attributes {arch = \"v2\"} {\n  // expected-error@+1 {{undefined buffer `%nope`}}\n  isa.memset dst = %nope[[4, 4], [1, 4]]\n}\n";
    let opts = Options {
        verify_diagnostics: true,
        ..options("lower-to-wire", Emit::Ir)
    };
    let out = run(opts.clone(), good);
    assert_eq!(out.exit_code, EXIT_OK, "{}", out.render_diagnostics());
    assert!(out.diagnostics.is_empty());

    // A wrong expectation: the error is unexpected and the expectation unmet.
    let wrong = good.replace("undefined buffer", "unknown buffer");
    let out = run(opts.clone(), &wrong);
    assert_eq!(out.exit_code, EXIT_INPUT);
    let msgs: Vec<&str> = out.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0].starts_with("unexpected error: use of undefined buffer `%nope`"));
    assert_eq!(
        msgs[1],
        "expected error \"unknown buffer `%nope`\" on line 3 was not produced"
    );

    // An expectation on a line outside the file is an error of its own.
    let outside = good.replace("@+1", "@+9");
    let out = run(opts.clone(), &outside);
    assert_eq!(out.exit_code, EXIT_INPUT);
    assert_eq!(
        out.diagnostics[0].message,
        "line offset `@+9` points outside the file (line 2 of 5)"
    );

    // Cases are checked one by one: the second case's expectation is met
    // by its own error only.
    let split = format!("{good}// -----\n{BATCHNORM}// -----\n{good}");
    let out = run(
        Options {
            split_input_file: true,
            ..opts
        },
        &split,
    );
    assert_eq!(out.exit_code, EXIT_OK, "{}", out.render_diagnostics());
}

#[test]
fn usage_errors_come_before_any_input() {
    let err = Driver::new(options("fold-partition,no-such-pass", Emit::Ir)).unwrap_err();
    assert_eq!(err.exit_code, EXIT_USAGE);
    let text = err.render_diagnostics();
    assert!(text.contains("--> <pipeline>:1:16"), "{text}");
    assert!(text.contains("no-such-pass"), "{text}");

    let opts = Options {
        timeline_axis: Some(apir_compiler::timeline::Axis::Core),
        ..options("", Emit::Json)
    };
    assert_eq!(
        opts.check().unwrap_err(),
        "--timeline-axis applies to --emit=timeline-svg only, not --emit=json"
    );
    let out = run(opts, BATCHNORM);
    assert_eq!(out.exit_code, EXIT_USAGE);
    assert!(out.output.is_empty());

    // The wire emits need encoded bytes.
    let out = run(options("", Emit::WireHex), BATCHNORM);
    assert_eq!(out.exit_code, EXIT_USAGE);
    assert!(out.diagnostics[0].message.starts_with("--emit=wire-hex: "));
}

#[test]
fn report_and_sources() {
    let mut sources = SourceMap::new();
    sources.add("other.apir", "");
    let file = sources.add("bn.apir", BATCHNORM);
    let opts = Options {
        statistics: true,
        timing: true,
        print_ir_after_all: true,
        ..options("fold-partition,compact-unit-dims", Emit::Ir)
    };
    let out = Driver::new(opts)
        .unwrap()
        .run(Input::Source { sources, file });
    assert_eq!(out.exit_code, EXIT_OK);
    assert_eq!(out.sources.file(file).name(), "bn.apir");
    let report = &out.report;
    let dump = report
        .find("// -----// IR Dump After fold-partition //----- //")
        .unwrap();
    let stats = report.find("... Pass statistics report ...").unwrap();
    let timing = report.find("... Execution time report ...").unwrap();
    assert!(dump < stats && stats < timing, "{report}");
    for phase in ["parse", "verify", "fold-partition", "(verify)", "emit"] {
        assert!(report[timing..].contains(phase), "{phase}: {report}");
    }
}

#[test]
fn list_passes_names_every_pass_and_pipeline() {
    let registry = Registry::builtin();
    let text = driver::list_passes(&registry);
    assert!(text.starts_with("Passes:\n"));
    for p in registry.passes {
        assert!(text.contains(&format!("  {} ", p.name)), "{}", p.name);
    }
    for p in registry.pipelines {
        assert!(text.contains(&format!("{} = {}", p.summary, p.expansion)));
    }
}

use crate::manager::{CORRUPT_INFO, MISSPELL_INFO};

static CORRUPT: &[PassInfo] = &[CORRUPT_INFO, MISSPELL_INFO];

/// `driver` on `text` given as text and read from a reader: each run's
/// exit code and output (what a reader's run writes goes to its sink).
fn from_text_and_reader(driver: &Driver, text: &str) -> [(i32, Vec<u8>); 2] {
    let from_text = driver.run(Input::text("k.apir", text));
    let mut sink = Vec::new();
    let mut reader = std::io::Cursor::new(text.as_bytes());
    let from_reader = driver.run_reader("k.apir", &mut reader, &mut sink).unwrap();
    [
        (from_text.exit_code, from_text.output),
        (from_reader.exit_code, sink),
    ]
}

/// A pass that leaves invalid IR (breaking a per-op rule or a structural
/// one) is an internal error (exit 3), streaming or not, from text or from
/// a reader, on one thread or several, whatever `verify_diagnostics` says.
#[test]
fn a_pass_that_breaks_the_ir_exits_3() {
    let registry = Registry {
        passes: CORRUPT,
        pipelines: &[],
    };
    for pass in ["corrupt", "misspell"] {
        for (verify_diagnostics, threads) in [(false, 1), (true, 1), (false, 2)] {
            let opts = Options {
                verify_diagnostics,
                threads,
                ..options(pass, Emit::Json)
            };
            let driver = Driver::with_registry(opts, registry).unwrap();
            // (`--verify-diagnostics` reads the whole input first.)
            assert_eq!(driver.streams_from_reader(), !verify_diagnostics);
            for (code, output) in from_text_and_reader(&driver, BATCHNORM) {
                assert_eq!(code, EXIT_INTERNAL, "{pass}");
                let doc = json(&output);
                assert_eq!(
                    doc["diagnostics"][0]["message"],
                    format!("the IR after `{pass}` does not verify (a bug in the pass)")
                );
                assert_eq!(doc["diagnostics"][0]["severity"], "internal error");
            }
        }
    }
}

/// The streaming path and the whole-module path (forced by asking for IR
/// dumps after a failure, which streaming cannot give) produce the same
/// output, statistics and diagnostics, on every streamable emit, on one
/// and on several threads.
#[test]
fn streaming_and_whole_module_agree() {
    let generated = print_module(&generate(&GenOptions {
        ops: 300,
        seed: 11,
        arch: Arch::V3,
        distinct_shapes: None,
        kernels: 0,
    }));
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
    let mut inputs = vec![generated, BATCHNORM.to_string(), BROKEN.to_string()];
    for entry in std::fs::read_dir(corpus).unwrap() {
        inputs.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    for text in &inputs {
        for emit in [
            Emit::Ir,
            Emit::WireDump,
            Emit::WireHex,
            Emit::WireBin,
            Emit::Json,
        ] {
            for threads in [1, 2] {
                let streamed = Options {
                    statistics: true,
                    threads,
                    ..options("lower-to-wire", emit)
                };
                let whole = Options {
                    print_ir_after_failure: true,
                    ..streamed.clone()
                };
                let (a, b) = (run(streamed, text), run(whole, text));
                assert_eq!(a.exit_code, b.exit_code, "{emit:?}");
                assert!(a.output == b.output, "{emit:?} on {threads} threads");
                assert_eq!(a.diagnostics, b.diagnostics, "{emit:?}");
                if a.exit_code == EXIT_OK {
                    assert_eq!(a.report, b.report, "{emit:?}");
                }
            }
        }
    }
}

/// What `schedule::collect` gives is nameable from this crate alone: an
/// embedder keeps a kernel's schedule, figures and bound in its own types
/// without depending on the passes crate, and the simulated makespan is
/// at or above the bound.
#[test]
fn a_schedule_and_its_parts_are_nameable_from_the_compiler_crate() {
    use apir_compiler::schedule::{self, Bound, Event, Figures, KernelSchedule, Schedule};
    let text = std::fs::read_to_string("../examples/relu-kernel.apir").unwrap();
    let mut c = Compilation::parse("relu-kernel.apir", &text, None).unwrap();
    c.run("lower-staging").unwrap();
    let kernels: Vec<KernelSchedule> = schedule::collect(&c.module, &c.sources).unwrap();
    let k = &kernels[0];
    let (sim, bound): (&Schedule, &Bound) = (&k.schedule, &k.bound);
    let figures: Figures = sim.figures;
    let events: &[Event] = &sim.events;
    assert_eq!(events.len(), k.plan.steps.len());
    assert!(
        figures.makespan_ns >= bound.ns,
        "{} < {}",
        figures.makespan_ns,
        bound.ns
    );
}

/// A file sink writes after what the file holds, however the file was
/// opened, and a restart cuts it back to that, not to nothing; what is
/// not a regular file is refused up front.
#[test]
fn a_file_sink_writes_after_what_the_file_holds() {
    use driver::{FileSink, OutputSink};
    use std::io::{Read, Seek, Write};
    let read = |f: &mut std::fs::File| {
        let mut got = String::new();
        f.rewind().unwrap();
        f.read_to_string(&mut got).unwrap();
        got
    };
    let long = "0123456789".repeat(100);
    // Wrapped where writing stopped.
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(b"kept").unwrap();
    let mut sink = FileSink::new(f).unwrap();
    sink.write_all(long.as_bytes()).unwrap();
    sink.restart().unwrap();
    sink.write_all(b"x").unwrap();
    assert_eq!(read(&mut sink.into_inner()), "keptx");
    // Opened again at its start, for writing or for appending.
    let path = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    for append in [false, true] {
        std::fs::write(&path, "precious\n").unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(!append)
                .append(append)
                .open(&path)
                .unwrap()
        };
        let mut sink = FileSink::new(open()).unwrap();
        sink.write_all(b"ab").unwrap();
        assert_eq!(read(&mut open()), "precious\nab", "append: {append}");
        sink.write_all(long.as_bytes()).unwrap();
        sink.restart().unwrap();
        sink.write_all(b"out2").unwrap();
        assert_eq!(read(&mut open()), "precious\nout2", "append: {append}");
    }
    #[cfg(unix)]
    {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let e = FileSink::new(null).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
}

/// The parser stops at `MAX_ERRORS` syntax errors, and the error that
/// reaches it says so (there is no count of the errors after it to give),
/// read whole or streamed from a reader, on one thread or two.
#[test]
fn the_error_the_parser_stops_at_says_so() {
    use apir_ir::parser::MAX_ERRORS;
    let mut text = String::from(
        "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n",
    );
    for _ in 0..MAX_ERRORS + 10 {
        text.push_str("  isa.memset dst = %x[[64, 128], [1, 64]\n");
    }
    text.push_str("}\n");
    let note =
        format!("the parser stops at {MAX_ERRORS} syntax errors: no item after this one is read");
    for threads in [1, 2] {
        let opts = Options {
            threads,
            ..options("lower-to-wire", Emit::Json)
        };
        let driver = Driver::new(opts).unwrap();
        for (code, output) in from_text_and_reader(&driver, &text) {
            assert_eq!(code, driver::EXIT_INPUT);
            let doc = json(&output);
            let diags = doc["diagnostics"].as_array().unwrap();
            assert_eq!(diags.len(), MAX_ERRORS, "{threads} threads");
            let notes = |d: &serde_json::Value| d["notes"].as_array().map_or(0, Vec::len);
            assert!(diags[..MAX_ERRORS - 1].iter().all(|d| notes(d) == 0));
            assert_eq!(diags[MAX_ERRORS - 1]["notes"][0]["message"], note.as_str());
            assert_eq!(
                diags[MAX_ERRORS - 1]["loc"],
                format!("k.apir:{}:41", MAX_ERRORS + 2)
            );
        }
    }
}
