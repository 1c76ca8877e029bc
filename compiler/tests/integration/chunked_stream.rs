//! Streaming from a reader ([`apir_compiler::chunked`], [`Driver::run_reader`])
//! gives exactly what the input read whole gives: the same bytes, the same
//! statistics, and on any error the same diagnostics, however the input is
//! cut into windows, parts and reads: inside ops, inside UTF-8 sequences,
//! between CR and LF, inside kernels longer than a window.

use apir_compiler::chunked::{
    run_chunked, run_chunked_named, ChunkError, ChunkOptions, MAX_WINDOW_BYTES,
};
use apir_compiler::driver::{self, Driver, Emit, Input, Options, ReadAgain};
use apir_compiler::emit::wire::JsonWriter;
use apir_compiler::stream::{ErrorPhase, StreamEmit, StreamOptions};
use apir_compiler::{Pipeline, Registry};
use apir_ir::printer::print_module;
use apir_ir::target::Arch;
use apir_synth::{generate, GenOptions};
use std::io::{self, Read};

/// A reader handing out at most `step` bytes per read (and sometimes
/// fewer), as a pipe does.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
    reads: usize,
    /// The offsets the driver went on from ([`ReadAgain::seek_to`]).
    seeks: Vec<u64>,
}

impl Trickle {
    fn new(data: &str, step: usize) -> Self {
        Trickle {
            data: data.as_bytes().to_vec(),
            at: 0,
            step,
            reads: 0,
            seeks: Vec::new(),
        }
    }
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reads += 1;
        // Every third read is short: a reader owes no full reads.
        let step = if self.reads.is_multiple_of(3) {
            self.step.div_ceil(2)
        } else {
            self.step
        };
        let n = step.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl ReadAgain for Trickle {
    fn rewind(&mut self) -> io::Result<()> {
        self.at = 0;
        Ok(())
    }

    fn seek_to(&mut self, offset: u64) -> io::Result<()> {
        self.at = usize::try_from(offset).map_or(self.data.len(), |o| o.min(self.data.len()));
        self.seeks.push(offset);
        Ok(())
    }
}

fn module(ops: usize, seed: u64, arch: Arch, kernels: usize) -> String {
    print_module(&generate(&GenOptions {
        ops,
        seed,
        arch,
        distinct_shapes: None,
        kernels,
    }))
}

const EMITS: [(StreamEmit, Emit); 5] = [
    (StreamEmit::Ir, Emit::Ir),
    (StreamEmit::WireBin, Emit::WireBin),
    (StreamEmit::WireHex, Emit::WireHex),
    (StreamEmit::WireDump, Emit::WireDump),
    (StreamEmit::Json, Emit::Json),
];

/// What the driver gives for `text` read whole.
fn whole(text: &str, pipeline: &str, emit: Emit, statistics: bool) -> driver::Outcome {
    let options = Options {
        pipeline: pipeline.into(),
        emit,
        statistics,
        threads: 1,
        ..Options::default()
    };
    driver::run(options, Input::text("gen.apir", text))
}

/// What the driver gives for `text` on the whole-module path, which holds
/// the module and runs the passes on all of it (IR dumps on failure turn
/// streaming off), never the streamed diagnosis.
fn held_whole(text: &str, pipeline: &str) -> driver::Outcome {
    let options = Options {
        pipeline: pipeline.into(),
        emit: Emit::WireBin,
        threads: 1,
        print_ir_after_failure: true,
        ..Options::default()
    };
    driver::run(options, Input::text("gen.apir", text))
}

/// Streams `text` from a reader of `step`-byte reads in windows (and parts)
/// of `window` bytes on `threads` threads.
fn chunked(
    text: &str,
    pipeline: &str,
    emit: StreamEmit,
    threads: usize,
    window: usize,
    step: usize,
) -> Result<(Vec<u8>, apir_compiler::chunked::ChunkOutput), ChunkError> {
    chunked_within(
        text,
        pipeline,
        emit,
        threads,
        window,
        step,
        MAX_WINDOW_BYTES,
    )
}

/// [`chunked`] with windows growing to at most `max` bytes.
fn chunked_within(
    text: &str,
    pipeline: &str,
    emit: StreamEmit,
    threads: usize,
    window: usize,
    step: usize,
    max: usize,
) -> Result<(Vec<u8>, apir_compiler::chunked::ChunkOutput), ChunkError> {
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse(pipeline).unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = ChunkOptions {
        window_bytes: window,
        max_window_bytes: max,
        in_flight: 3,
        ..ChunkOptions::new(StreamOptions {
            threads,
            ..StreamOptions::new(emit)
        })
    };
    let mut out = Vec::new();
    let mut input = Trickle::new(text, step);
    // Named as `whole` names it: `wire-dump` shows where each op is.
    run_chunked_named(&mut input, "gen.apir", &mut out, &build, opts).map(|o| (out, o))
}

/// The chunked run of `text` equals the whole-text run: bytes and
/// statistics.
fn same_as_whole(text: &str, pipeline: &str, threads: usize, window: usize, step: usize) {
    same_as_whole_within(text, pipeline, threads, window, step, MAX_WINDOW_BYTES);
}

/// [`same_as_whole`] with windows growing to at most `max` bytes.
fn same_as_whole_within(
    text: &str,
    pipeline: &str,
    threads: usize,
    window: usize,
    step: usize,
    max: usize,
) {
    // Without lowering there are no descriptors: IR only.
    let emits = if pipeline.is_empty() {
        &EMITS[..1]
    } else {
        &EMITS[..]
    };
    for &(semit, emit) in emits {
        let want = whole(text, pipeline, emit, true);
        assert!(want.success(), "{}", want.render_diagnostics());
        let (mut got, out) = chunked_within(text, pipeline, semit, threads, window, step, max)
            .unwrap_or_else(|e| panic!("{emit:?} window {window} step {step}: {e:?}"));
        if semit == StreamEmit::Json {
            // The caller ends the document with the run's warnings.
            let d = driver::json_diagnostics(&want.sources, &want.diagnostics);
            got.extend_from_slice(JsonWriter::after(out.ops).tail(&d).as_bytes());
        }
        assert!(
            got == want.output,
            "{emit:?} on {threads} threads, window {window}, reads of {step}: output differs"
        );
        assert_eq!(out.bytes, text.len());
        let stats = out.report.statistics_text();
        assert_eq!(stats, want.report, "{emit:?} window {window} step {step}");
    }
}

/// Windows of every size from a few bytes (smaller than an op: the window
/// grows) to several ops, reads of odd sizes, one and several threads.
#[test]
fn windows_and_reads_of_any_size_give_the_whole_text_output() {
    let text = module(120, 3, Arch::V2, 0);
    for window in [16, 61, 97, 256, 1000, 4096, 1 << 20] {
        for step in [1, 7, 4093] {
            same_as_whole(&text, "lower-to-wire", 1, window, step);
        }
    }
    for threads in [2, 3] {
        for window in [200, 1000, 4096] {
            same_as_whole(&text, "lower-to-wire", threads, window, 4093);
        }
    }
    same_as_whole(&text, "", 1, 300, 13);
}

/// Kernels span many lines: windows end inside them, parts must not cut
/// them; the statistics of every arch's passes add up the same.
#[test]
fn kernels_longer_than_a_window() {
    for (arch, seed) in [(Arch::V2, 1), (Arch::V3, 2), (Arch::V4, 3)] {
        let text = module(300, seed, arch, 6);
        for (threads, window) in [(1, 64), (1, 700), (2, 700), (2, 3000)] {
            same_as_whole(&text, "lower-to-wire", threads, window, 511);
        }
    }
}

/// CRLF line ends (a window may end between CR and LF: it ends only after
/// a LF), multi-byte UTF-8 in comments (a read or a window may end inside
/// a sequence), comments and blank lines between ops and after the module.
#[test]
fn crlf_utf8_comments_and_blanks() {
    let base = module(80, 5, Arch::V2, 2);
    let mut text = String::new();
    for (i, line) in base.lines().enumerate() {
        if i % 5 == 2 {
            text.push_str("  // crème brûlée ∑ 🚀 — a comment\r\n\r\n");
        }
        text.push_str(line);
        text.push_str("\r\n");
    }
    text.push_str("\r\n// the end ✓\r\n\r\n");
    for window in [23, 64, 150, 4096] {
        for step in [1, 5, 4093] {
            same_as_whole(&text, "lower-to-wire", 1, window, step);
        }
        same_as_whole(&text, "lower-to-wire", 2, window.max(150), 17);
    }
}

/// Several ops on one line, after attribute strings with multi-byte
/// characters and tabs: a window may start partway along a line, and
/// `wire-dump` still shows each op at the whole file's line and column.
#[test]
fn ops_sharing_a_line_are_located_as_in_the_whole_text() {
    let base = module(90, 8, Arch::V2, 0);
    let mut text = String::new();
    let mut joined = 0;
    for (i, line) in base.lines().enumerate() {
        let op = line.trim_start().starts_with("isa.");
        if op && i % 3 == 1 {
            // The next op follows on this line.
            text.push_str(line);
            if !line.ends_with('}') {
                text.push_str(" {colour = \"ré∂ 🚀\"}");
            }
            text.push_str("\t ");
            joined += 1;
        } else if op && i % 7 == 0 {
            text.push('\t');
            text.push_str(line.trim_start());
            text.push('\n');
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    assert!(joined > 20);
    let want = whole(&text, "lower-to-wire", Emit::WireDump, false);
    assert!(want.success(), "{}", want.render_diagnostics());
    let dump = String::from_utf8(want.output.clone()).unwrap();
    // Some op is shown past a multi-byte string on its line.
    let past = |l: &str| {
        l.contains("@ gen.apir:")
            && l.rsplit(':').next().and_then(|c| c.parse::<u32>().ok()) > Some(40)
    };
    assert!(dump.lines().any(past));
    for window in [40, 97, 300, 4096] {
        for step in [1, 7, 4093] {
            same_as_whole(&text, "lower-to-wire", 1, window, step);
        }
        same_as_whole(&text, "lower-to-wire", 2, window.max(150), 17);
    }
}

/// A module with all its ops on one line, several times longer than the
/// largest window: windows end inside the line (after a blank that a
/// letter follows: inside strings holding such text, before the trailing
/// comment, between ops), and every emit is the whole text's, on one
/// thread and several. Windows that end only at line ends gave up on such
/// a line (`ChunkError::GiveUp`), and the driver then held the input.
#[test]
fn a_line_longer_than_the_largest_window_streams() {
    let base = module(150, 11, Arch::V2, 0);
    let mut text = String::new();
    let mut line = String::from(" ");
    for (i, l) in base.lines().enumerate() {
        let op = l.trim_start();
        if !op.starts_with("isa.") {
            if !line.trim().is_empty() && op == "}" {
                text.push_str(&line);
                text.push_str("   // the ops end here, as words do\n");
                line.clear();
            }
            text.push_str(l);
            text.push('\n');
            continue;
        }
        line.push(' ');
        line.push_str(op);
        if i % 4 == 0 && !op.ends_with('}') {
            line.push_str(" {colour = \"a b isa.c  dst = d\"}");
        }
    }
    let long = text.lines().map(str::len).max().unwrap();
    let max = 4096;
    assert!(long > 4 * max, "{long}");
    let runs = [16, 23, 61, 97, 700].map(|w| (1, w, 7)).into_iter().chain([
        (1, 700, 4093),
        (2, 300, 511),
        (3, 1000, 13),
    ]);
    for (threads, window, step) in runs {
        same_as_whole_within(&text, "lower-to-wire", threads, window, step, max);
    }
}

/// A syntax error in a line longer than the largest window: recovery
/// skips the rest of the line window by window, as the parser of the
/// whole input skips it, so streaming stops at the error and the
/// diagnosis finds the whole-module path's errors without holding the
/// line (the closing `}` on the same line is skipped too, and reported
/// missing).
#[test]
fn a_syntax_error_in_a_line_longer_than_the_largest_window_is_diagnosed_streaming() {
    let base = module(200, 5, Arch::V2, 0);
    let (head, ops): (Vec<&str>, Vec<&str>) = base
        .lines()
        .partition(|l| !l.trim_start().starts_with("isa."));
    let head: Vec<&str> = head.into_iter().filter(|l| l.trim() != "}").collect();
    let joined = |ops: &[String]| ops.join(" ");
    let ops: Vec<String> = ops.iter().map(|l| l.trim().to_string()).collect();
    let mut broken = ops.clone();
    broken[20] = broken[20].replacen("]] +", "]] ~", 1);
    broken[150] = broken[150].replacen("dst =", "dst", 1);
    let mut two_lines = broken.clone();
    two_lines[100].insert(0, '\n');
    let max = 4096;
    let cases = [
        // One error, the closing brace on its own line.
        format!("{}\n  {}\n}}\n", head.join("\n"), joined(&broken[..150])),
        // The closing brace on the long line: skipped, so reported missing.
        format!("{}\n  {} }}\n", head.join("\n"), joined(&broken[..150])),
        // Two long lines, an error on each.
        format!("{}\n  {}\n}}\n", head.join("\n"), joined(&two_lines)),
    ];
    for (c, text) in cases.iter().enumerate() {
        let long = text.lines().map(str::len).max().unwrap();
        assert!(long > 2 * max, "case {c}: {long}");
        let want = whole(text, "lower-to-wire", Emit::WireBin, false);
        assert!(!want.success(), "case {c}");
        for window in [64, 300, 1000, 4000] {
            let sopts = StreamOptions::new(StreamEmit::WireBin);
            let found = diagnose_within(text, sopts, window, max, &format!("case {c}"));
            assert_eq!(
                found.diagnostics.kept(),
                want.diagnostics,
                "case {c}, window {window}"
            );
            match chunked_within(
                text,
                "lower-to-wire",
                StreamEmit::WireBin,
                1,
                window,
                511,
                max,
            ) {
                Err(ChunkError::Invalid(ErrorPhase::Syntax, None)) => {}
                other => panic!("case {c}, window {window}: {:?}", other.map(|o| o.1)),
            }
        }
    }
}

/// Diagnostics on a module written on one line of hundreds of KB: the
/// input read again holds pieces of that line around their spans, not the
/// line, and renders them as the input read whole does (the same windows
/// of the line, the same columns past multi-byte characters), for
/// warnings near the line's start and end and close together, and for
/// each kind of error; a kernel defined again far along the line shows
/// its first definition as a note with its line and column.
#[test]
fn diagnostics_on_a_long_line_render_as_read_whole_from_pieces_of_it() {
    let base = module(2500, 7, Arch::V2, 2);
    let lines: Vec<&str> = base.lines().collect();
    let (first, len) = first_kernel(&lines);
    let kernel = lines[first..first + len]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let head: Vec<&str> = lines
        .iter()
        .copied()
        .take_while(|l| l.starts_with("module") || l.starts_with("  %"))
        .collect();
    let body: Vec<String> = lines[head.len()..lines.len() - 1]
        .iter()
        .map(|l| l.trim().to_string())
        .collect();
    let ops: Vec<usize> = (0..body.len())
        .filter(|&i| body[i].starts_with("isa.") && !body[i].ends_with('}'))
        .collect();
    let n = ops.len();
    let with = |edits: &[(usize, &str)]| -> String {
        let mut b = body.clone();
        for &(at, edit) in edits {
            match edit.strip_prefix('+') {
                Some(attr) => b[ops[at]].push_str(attr),
                None => b.insert(ops[at], edit.to_string()),
            }
        }
        format!("{}\n  {}\n}}\n", head.join("\n"), b.join(" "))
    };
    let wide = " {colour = \"é€😀 wide\"}";
    let mut cases = vec![
        // Warnings at the start, close together, far along and near the end.
        with(&[(0, wide), (1, wide), (2, wide), (n / 2, wide), (n - 2, wide)]),
        // A warning on every 40th op, multi-byte characters all along.
        with(&(0..n).step_by(40).map(|i| (i, wide)).collect::<Vec<_>>()),
        // A verifier error far along.
        with(&[(n / 3, wide), (n / 2, "isa.memset dst = %sa[[8192, 128], [1, 70000]]")]),
        // A syntax error far along: the rest of the line is skipped.
        with(&[(n / 3, wide), (2 * n / 3, "isa.memset dst = %sa[[64, 128], [1, 64]")]),
        // A pass error far along.
        with(&[(n / 2, "isa.tensor_copy dst = %sa[[8192, 64], [1, 64]] + 262144, src = %sa[[8192, 64], [1, 64]]")]),
    ];
    cases.push(with(&[(n - 3, kernel.as_str())]));
    for (c, text) in cases.iter().enumerate() {
        let long = text.lines().map(str::len).max().unwrap();
        assert!(long > 250_000, "case {c}: {long}");
        let want = whole(text, "lower-to-wire", Emit::WireBin, false);
        assert!(!want.diagnostics.is_empty(), "case {c}");
        let rendered = want.render_diagnostics();
        if c == 5 {
            assert!(rendered.contains("(line "), "case {c}: {rendered}");
        }
        for threads in [1, 2] {
            let (_, out) = run_reader(text, "lower-to-wire", Emit::WireBin, threads, 4093);
            assert_eq!(out.exit_code, want.exit_code, "case {c}");
            assert_eq!(out.diagnostics, want.diagnostics, "case {c}");
            assert_eq!(out.render_diagnostics(), rendered, "case {c}");
            let file = out.sources.file(apir_ir::FileId(0));
            assert!(file.is_excerpt(), "case {c}");
            // Pieces around at most 50 shown and a few more spans.
            assert!(
                file.text().len() < 60 * 4 * 2048 && file.text().len() < long / 2,
                "case {c}: {} bytes held of a line of {long}",
                file.text().len()
            );
        }
    }
}

/// A window may end inside a string of the module header (the one token
/// that holds blanks): the header is read again from the next window, not
/// reported as an unterminated string.
#[test]
fn a_window_inside_a_header_string_reads_the_header_again() {
    let words = "a b c d e f g h i j k l m n o p q r s t u v w x y z ".repeat(8);
    let text = format!(
        "module attributes {{arch = \"v2\", note = \"{words}\"}} {{ %sa = mem.sbuf {{partition = 0, byte = 0}} : tile<4x4xf32> isa.memset dst = %sa[[4, 4], [1, 4]] }}\n"
    );
    for window in (8..300).step_by(7) {
        same_as_whole_within(&text, "lower-to-wire", 1, window, 4093, 4096);
    }
}

/// Buffers declared among the ops stream on one thread; several threads
/// cannot hand them to parts and ask for one thread.
#[test]
fn buffers_among_ops() {
    let base = module(200, 9, Arch::V2, 0);
    let lines: Vec<&str> = base.lines().collect();
    let at = lines.len() / 2;
    let mut text = lines[..at].join("\n");
    text.push_str("\n  %late = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %late[[64, 128], [1, 64]]\n");
    text.push_str(&lines[at..lines.len() - 3].join("\n"));
    // A use in a later part fails there too (an undefined buffer to that
    // part): the first failure, the declaration, decides.
    text.push_str("\n  isa.memset dst = %late[[64, 128], [1, 64]]\n");
    text.push_str(&lines[lines.len() - 3..].join("\n"));
    text.push('\n');
    same_as_whole(&text, "lower-to-wire", 1, 500, 99);
    match chunked(&text, "lower-to-wire", StreamEmit::WireBin, 2, 500, 99) {
        Err(ChunkError::Retry) => {}
        other => panic!(
            "expected a retry on one thread, got {:?}",
            other.map(|o| o.1)
        ),
    }
    // The driver retries on one thread by itself.
    let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
    let (got, out) = run_reader(&text, "lower-to-wire", Emit::WireBin, 2, 99);
    assert_eq!(out.exit_code, 0);
    assert!(got == want.output);
}

/// A buffer declared among the ops of the first window is read by the
/// window phase, before any part: several threads stream the rest in
/// parts, with no retry on one thread.
#[test]
fn a_buffer_among_the_first_windows_ops_streams_in_parts() {
    let base = module(800, 9, Arch::V2, 0);
    let lines: Vec<&str> = base.lines().collect();
    let first_op = lines
        .iter()
        .position(|l| l.trim_start().starts_with("isa."))
        .unwrap();
    let at = first_op + 30;
    let mut text = lines[..at].join("\n");
    text.push_str("\n  %late = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n");
    text.push_str(&lines[at..lines.len() - 1].join("\n"));
    text.push_str("\n  isa.memset dst = %late[[64, 128], [1, 64]]\n}\n");
    let window = 16384;
    let late = text.find("%late =").unwrap();
    assert!(late > window / 8 && late < window / 2, "{late}");
    assert!(text.len() > 4 * window);
    let (got, out) = chunked(&text, "lower-to-wire", StreamEmit::WireBin, 2, window, 99)
        .unwrap_or_else(|e| panic!("expected parts, got {e:?}"));
    assert!(out.parts > 1, "{} parts", out.parts);
    let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
    assert!(got == want.output);
}

/// With no buffer declared among the first window's ops, the window phase
/// streams only the window's head (the header, the buffers, the first
/// ops) and the parts take the rest: they cover all but a sixteenth of a
/// window, where a whole first window on one thread would leave them
/// about one window less.
#[test]
fn parts_start_after_the_first_windows_head() {
    let text = module(800, 9, Arch::V2, 0);
    // Four and a half windows.
    let window = text.len() * 2 / 9;
    let (got, out) = chunked(&text, "lower-to-wire", StreamEmit::WireBin, 2, window, 4093)
        .unwrap_or_else(|e| panic!("expected parts, got {e:?}"));
    // Every part but the last holds more than a window.
    assert!(
        out.parts * window >= text.len() - window / 8,
        "{} parts of {window} bytes for {} bytes",
        out.parts,
        text.len()
    );
    let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
    assert!(got == want.output);
}

/// Where the first kernel of `lines` begins, and how many lines it has.
fn first_kernel(lines: &[impl AsRef<str>]) -> (usize, usize) {
    let first = lines
        .iter()
        .position(|l| l.as_ref().trim_start().starts_with("gpsimd.kernel @"))
        .expect("a kernel");
    let len = lines[first..]
        .iter()
        .position(|l| l.as_ref() == "  }")
        .expect("its end");
    (first, len + 1)
}

/// Runs the driver on `text` from a reader.
fn run_reader(
    text: &str,
    pipeline: &str,
    emit: Emit,
    threads: usize,
    step: usize,
) -> (Vec<u8>, driver::Outcome) {
    let options = Options {
        pipeline: pipeline.into(),
        emit,
        threads,
        ..Options::default()
    };
    run_reader_with(text, options, step)
}

/// The driver's options for `lower-to-wire` to `emit` on `threads`.
fn lower_to_wire(emit: Emit, threads: usize) -> Options {
    Options {
        pipeline: "lower-to-wire".into(),
        emit,
        threads,
        ..Options::default()
    }
}

/// Runs a driver of `options` on `text` from a reader of `step`-byte
/// reads: the sink's bytes and the outcome.
fn run_reader_with(text: &str, options: Options, step: usize) -> (Vec<u8>, driver::Outcome) {
    let mut sink = Vec::new();
    let out = run_reader_into(text, options, step, &mut sink);
    (sink, out)
}

/// [`run_reader_with`] into `sink`: the outcome.
fn run_reader_into(
    text: &str,
    options: Options,
    step: usize,
    sink: &mut dyn driver::OutputSink,
) -> driver::Outcome {
    let d = Driver::new(options).unwrap();
    let mut input = Trickle::new(text, step);
    d.run_reader("gen.apir", &mut input, sink).unwrap()
}

/// On any error the reader's run gives the whole-text run's outcome: the
/// same diagnostics (at the same lines), exit code and output, wherever
/// the error lies; a JSON emit (read whole) too.
#[test]
fn errors_give_the_whole_text_diagnostics() {
    let base = module(400, 4, Arch::V2, 2);
    let lines: Vec<&str> = base.lines().collect();
    let n = lines.len();
    let mut cases = Vec::new();
    for at in [1, 12, n / 2, n - 2] {
        // A syntax error, an undefined buffer, an op that does not lower.
        for bad in [
            "  isa.memset dst = %sa[[64, 128], [1, 64]",
            "  isa.memset dst = %nope[[64, 128], [1, 64]]",
            "  isa.memset dst = %sa[[8192, 128], [1, 70000]]",
        ] {
            let mut l = lines.clone();
            l.insert(at, bad);
            cases.push(l.join("\n") + "\n");
        }
    }
    // A kernel defined again near the end (another window, another part).
    let (first, len) = first_kernel(&lines);
    let mut l = lines.clone();
    let again: Vec<&str> = lines[first..first + len].to_vec();
    l.splice(n - 1..n - 1, again);
    let twice = l.join("\n") + "\n";
    // Found in small windows and across parts too, not only whole.
    for threads in [1, 2] {
        assert!(chunked(
            &twice,
            "lower-to-wire",
            StreamEmit::WireBin,
            threads,
            512,
            97
        )
        .is_err());
    }
    cases.push(twice);
    // Cut short, nothing after the module, garbage after it.
    cases.push(lines[..n / 2].join("\n"));
    cases.push(String::new());
    cases.push(base.clone() + "  junk\n");
    for text in &cases {
        for emit in [Emit::WireBin, Emit::Ir, Emit::Json] {
            let want = whole(text, "lower-to-wire", emit, false);
            assert!(!want.success());
            for threads in [1, 2] {
                let (got, out) = run_reader(text, "lower-to-wire", emit, threads, 4093);
                assert_eq!(out.exit_code, want.exit_code);
                assert_eq!(out.render_diagnostics(), want.render_diagnostics());
                assert!(got == want.output, "{emit:?}: output differs");
            }
        }
    }
}

/// A file as the sink: the output goes after what the file held where it
/// was wrapped, and a run that starts over (streaming gave up at an error
/// and the whole-module path wrote the output again) cuts the file back
/// to there, not to nothing.
#[test]
fn a_file_sink_starts_over_where_it_was_wrapped() {
    use std::io::{Seek, Write};
    let base = module(400, 4, Arch::V2, 2);
    let lines: Vec<&str> = base.lines().collect();
    let mut bad = lines.clone();
    bad.insert(
        lines.len() - 40,
        "  isa.memset dst = %nope[[64, 128], [1, 64]]",
    );
    let bad = bad.join("\n") + "\n";
    for (text, emit) in [
        (&base, Emit::WireBin),
        (&base, Emit::Ir),
        (&bad, Emit::Json),
    ] {
        let want = whole(text, "lower-to-wire", emit, false);
        for threads in [1, 2] {
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(b"kept\n").unwrap();
            let mut sink = driver::FileSink::new(file).unwrap();
            let out = run_reader_into(text, lower_to_wire(emit, threads), 4093, &mut sink);
            assert_eq!(out.exit_code, want.exit_code);
            let mut file = sink.into_inner();
            Seek::rewind(&mut file).unwrap();
            let mut got = Vec::new();
            file.read_to_end(&mut got).unwrap();
            assert_eq!(&got[..5], b"kept\n");
            assert!(got[5..] == want.output, "{emit:?}, {threads} threads");
        }
    }
    // The erroneous input did start over (streamed, it had begun its JSON
    // document when it gave up).
    let mut sink = Vec::new();
    let mut counting = Restarts(&mut sink, 0);
    run_reader_into(&bad, lower_to_wire(Emit::Json, 1), 4093, &mut counting);
    assert_eq!(counting.1, 1, "the run started over once");
}

/// A sink that counts its restarts.
struct Restarts<'a>(&'a mut Vec<u8>, usize);

impl io::Write for Restarts<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl driver::OutputSink for Restarts<'_> {
    fn restart(&mut self) -> io::Result<()> {
        self.1 += 1;
        self.0.clear();
        Ok(())
    }
}

/// Input that is not UTF-8 is an input error located at its first bad
/// byte, wherever it lies (on a line after multi-byte characters, inside a
/// long line, cut short at the end), shown with its line, the bad byte as
/// U+FFFD with the caret under it; a JSON emit still gives its document.
#[test]
fn not_utf8_is_located() {
    let base = module(300, 2, Arch::V2, 0);
    let mut cases: Vec<Vec<u8>> = [5, base.len() / 2, base.len() - 3]
        .into_iter()
        .map(|at| {
            let mut bytes = base.as_bytes().to_vec();
            bytes[at] = 0xff;
            bytes
        })
        .collect();
    let lines: Vec<&str> = base.lines().collect();
    let with_line = |line: &[u8]| {
        let mut bytes = lines[..3].join("\n").into_bytes();
        bytes.push(b'\n');
        bytes.extend(line);
        bytes.push(b'\n');
        bytes.extend(lines[3..].join("\n").into_bytes());
        bytes
    };
    // After multi-byte characters: columns count characters.
    cases.push(with_line(
        "  // é, ü: caf\u{e9}"
            .as_bytes()
            .iter()
            .chain(b"\xe9 au lait")
            .copied()
            .collect::<Vec<u8>>()
            .as_slice(),
    ));
    // Deep inside a line longer than the part shown.
    let mut long = b"  // ".to_vec();
    long.extend(std::iter::repeat_n(b'a', 5000));
    long.push(0x80);
    long.extend(std::iter::repeat_n(b'b', 5000));
    cases.push(with_line(&long));
    // A sequence cut short at the very end.
    let mut cut = base.as_bytes().to_vec();
    cut.extend(b"// \xe2\x82");
    cases.push(cut);
    for bytes in &cases {
        // Where the contract puts it: the first byte `str::from_utf8`
        // rejects, its line, and the characters before it on that line.
        let at = std::str::from_utf8(bytes).unwrap_err().valid_up_to();
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |n| n + 1);
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let before = std::str::from_utf8(&bytes[line_start..at]).unwrap();
        let column = before.chars().count() + 1;
        for emit in [Emit::WireBin, Emit::Json] {
            for threads in [1, 2] {
                let d = Driver::new(lower_to_wire(emit, threads)).unwrap();
                let mut input = Trickle {
                    data: bytes.clone(),
                    at: 0,
                    step: 1000,
                    reads: 0,
                    seeks: Vec::new(),
                };
                let mut sink = Vec::new();
                let out = d.run_reader("gen.apir", &mut input, &mut sink).unwrap();
                assert_eq!(out.exit_code, driver::EXIT_INPUT);
                let info = apir_compiler::describe(&out.sources, &out.diagnostics);
                assert_eq!(info.len(), 1);
                assert_eq!(info[0].message, "input is not valid UTF-8");
                let loc = info[0].location.as_ref().expect("located");
                assert_eq!((loc.line as usize, loc.column as usize), (line, column));
                // Shown with its line, the caret under the bad byte's U+FFFD.
                let shown = out.render_diagnostics();
                assert!(
                    shown.contains(&format!("--> gen.apir:{line}:{column}")),
                    "{shown}"
                );
                let mut rows = shown
                    .lines()
                    .skip_while(|l| !l.starts_with(&format!("{line} | ")));
                let src = rows.next().expect("the source line");
                let caret = rows.next().expect("the caret line");
                let bad = src.chars().position(|c| c == '\u{fffd}').expect("U+FFFD");
                assert_eq!(caret.chars().position(|c| c == '^'), Some(bad), "{shown}");
                assert!(src.len() < 3000, "the line is shown in part: {}", src.len());
                // Nothing but the JSON document holding the diagnostic.
                if emit == Emit::Json {
                    let doc: serde_json::Value = serde_json::from_slice(&sink).unwrap();
                    assert_eq!(doc["ops"], serde_json::json!([]));
                    assert_eq!(
                        doc["diagnostics"][0]["loc"],
                        format!("gen.apir:{line}:{column}").as_str()
                    );
                } else {
                    assert!(sink.is_empty());
                }
            }
        }
    }
}

/// What is not op-local, or needs the source text, is read whole and gives
/// the same outcome through `run_reader`.
#[test]
fn pipelines_that_read_whole() {
    let text = module(100, 6, Arch::V2, 3);
    for (pipeline, emit) in [
        ("all", Emit::WireBin),
        ("lower-staging", Emit::ScheduleJson),
    ] {
        let d = Driver::new(Options {
            pipeline: pipeline.into(),
            emit,
            ..Options::default()
        })
        .unwrap();
        assert!(!d.streams_from_reader(), "{pipeline} {emit:?}");
        let want = whole(&text, pipeline, emit, false);
        let (got, out) = run_reader(&text, pipeline, emit, 2, 4096);
        assert_eq!(out.exit_code, want.exit_code);
        assert!(got == want.output, "{pipeline} {emit:?}");
    }
}

/// Warnings do not stop streaming: the run from a reader gives the output
/// and exit code of the input read whole, and renders the same warnings
/// byte for byte from an excerpt of the input (read again for just the
/// lines they point at), on buffers and ops, at the start, in the middle
/// and at the end, with CRLF line ends and multi-byte text around them.
#[test]
fn warnings_stream_and_render_as_read_whole() {
    let base = module(400, 8, Arch::V2, 2);
    let lines: Vec<&str> = base.lines().collect();
    let n = lines.len();
    let ops: Vec<usize> = (0..n)
        .filter(|&i| lines[i].starts_with("  isa.") && !lines[i].contains('{'))
        .collect();
    let marked = [ops[0], ops[1], ops[ops.len() / 2], ops[ops.len() - 1]];
    for crlf in [false, true] {
        let nl = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("= mem.sbuf {partition = 0, byte = 0}") {
                // A buffer attribute that looks like a typo.
                text.push_str(&line.replace("byte = 0}", "byte = 0, bytes = 1}"));
            } else if marked.contains(&i) {
                text.push_str(&format!("{line} {{colour = \"ré∂\"}}"));
            } else {
                text.push_str(line);
            }
            text.push_str(nl);
        }
        for (_, emit) in EMITS {
            let want = whole(&text, "lower-to-wire", emit, false);
            assert!(want.success(), "{}", want.render_diagnostics());
            assert_eq!(
                want.diagnostics.len(),
                marked.len() + 1,
                "{}",
                want.render_diagnostics()
            );
            for threads in [1, 2] {
                let d = Driver::new(lower_to_wire(emit, threads)).unwrap();
                assert!(d.streams_from_reader());
                let (got, out) = run_reader(&text, "lower-to-wire", emit, threads, 4093);
                assert_eq!(out.exit_code, 0);
                assert!(
                    got == want.output,
                    "{emit:?} on {threads} threads: output differs"
                );
                assert_eq!(out.diagnostics, want.diagnostics);
                assert_eq!(out.render_diagnostics(), want.render_diagnostics());
                // Only the lines around the warnings were read again.
                let held = out.sources.file(apir_ir::FileId(0));
                assert!(held.is_excerpt());
                assert!(
                    held.text().len() * 10 < text.len(),
                    "{} of {} bytes held",
                    held.text().len(),
                    text.len()
                );
            }
            // In small windows, and in parts on worker threads: the same
            // warnings, in the same order.
            let semit = EMITS.iter().find(|e| e.1 == emit).unwrap().0;
            for (threads, window) in [(1, 700), (2, 2000), (3, 3000)] {
                let (mut got, out) = chunked(&text, "lower-to-wire", semit, threads, window, 511)
                    .unwrap_or_else(|e| panic!("{threads} threads: {e:?}"));
                if semit == StreamEmit::Json {
                    // The document ends with the warnings, rendered by the
                    // caller.
                    let d = driver::json_diagnostics(&want.sources, &want.diagnostics);
                    got.extend_from_slice(JsonWriter::after(out.ops).tail(&d).as_bytes());
                }
                assert!(
                    got == want.output,
                    "{emit:?} {threads} threads: output differs"
                );
                assert_eq!(out.report.warnings, want.diagnostics, "{threads} threads");
                if threads > 1 {
                    assert!(out.parts > 1, "{} parts", out.parts);
                }
            }
        }
    }
}

/// An input with errors is diagnosed streaming, in memory independent of
/// its size, with what the whole-module path reports: its syntax errors
/// (no more than the parser's limit, none for a broken declaration's
/// uses); else every verifier error; else the warnings and the errors of
/// the first pass that fails anywhere (fold-partition before
/// select-descriptor, wherever each error lies). The same in windows of
/// any size, and through `run_reader`, rendered from an excerpt.
#[test]
fn errors_are_diagnosed_streaming_as_read_whole() {
    let lines = module_lines_with_u(300, 11, 2);
    let n = lines.len();
    let ops: Vec<usize> = (0..n)
        .filter(|&i| lines[i].starts_with("  isa.") && !lines[i].contains('{'))
        .collect();
    let (early, mid, late) = (ops[2], ops[ops.len() / 2], ops[ops.len() - 3]);
    let select = "  isa.iota dst = %u[[140000, 1], [1, 70000]]";
    let fold =
        "  isa.tensor_copy dst = %sa[[8192, 64], [1, 64]] + 262144, src = %sa[[8192, 64], [1, 64]]";
    let verify = "  isa.memset dst = %sa[[8192, 128], [1, 70000]]";
    let syntax = "  isa.memset dst = %sa[[64, 128], [1, 64]";
    let warn = |l: &str| format!("{l} {{colour = \"red\"}}");
    let with = |edits: &[(usize, String)]| with_lines(&lines, edits);
    let mut cases = vec![
        // Warnings, then two select-descriptor errors far apart.
        with(&[
            (early, warn(&lines[early])),
            (mid, select.into()),
            (late, select.into()),
        ]),
        // A select-descriptor error early, a fold-partition error late.
        with(&[
            (early, select.into()),
            (late, fold.into()),
            (mid, warn(&lines[mid])),
        ]),
        // A pass error early, verifier errors later: only the verifier's.
        with(&[
            (early, select.into()),
            (mid, verify.into()),
            (late, verify.into()),
        ]),
        // A verifier error early, a syntax error late: only the syntax error.
        with(&[(early, verify.into()), (late, syntax.into())]),
        // A broken buffer declaration, used later: one error.
        with(&[
            (
                1,
                "  %bad = mem.sbuf {partition = 0, byte = 0} : tile<128x8xbogus>".into(),
            ),
            (late, "  isa.memset dst = %bad[[8, 128], [1, 8]]".into()),
        ]),
        // More syntax errors than the parser reports.
        with(
            &(0..60)
                .map(|k| (ops[k * 3], syntax.to_string()))
                .collect::<Vec<_>>(),
        ),
    ];
    // A kernel defined again near the end.
    let (first, len) = first_kernel(&lines);
    let again: Vec<(usize, String)> = (0..len)
        .map(|k| (late, lines[first + len - 1 - k].clone()))
        .collect();
    cases.push(with(&again));
    for (c, text) in cases.iter().enumerate() {
        let want = whole(text, "lower-to-wire", Emit::WireBin, false);
        assert!(!want.success(), "case {c}");
        assert!(want
            .diagnostics
            .iter()
            .any(|d| d.severity == apir_ir::Severity::Error));
        if c == 5 {
            assert_eq!(want.diagnostics.len(), apir_ir::parser::MAX_ERRORS);
        }
        for window in [256, 1000, 4096, 1 << 20] {
            let sopts = StreamOptions::new(StreamEmit::WireBin);
            let found = diagnose_all(text, sopts, window, &format!("case {c}"));
            assert_eq!(
                found.diagnostics.kept(),
                want.diagnostics,
                "case {c}, window {window}"
            );
        }
        // Streaming stops at the error and says so: on one thread, and in
        // parts for a verifier or pass error (the driver then diagnoses
        // before trying one thread); a syntax error in a part may be a cut
        // where no item begins, and asks for one thread first.
        for threads in [1, 2] {
            match chunked(
                text,
                "lower-to-wire",
                StreamEmit::WireBin,
                threads,
                2000,
                511,
            ) {
                Err(ChunkError::Invalid(phase, resume)) => {
                    assert_eq!(phase > ErrorPhase::Syntax, c < 4, "case {c}: {phase:?}");
                    // Only a part's error leaves a point to go on from
                    // (one before the parts, in the first window's head,
                    // leaves none either).
                    assert!(resume.is_none() || threads > 1, "case {c}");
                }
                Err(ChunkError::Retry) if threads > 1 && c >= 4 => {}
                other => panic!("case {c}, {threads} threads: {:?}", other.map(|o| o.1)),
            }
        }
        for (_, emit) in EMITS {
            let want = whole(text, "lower-to-wire", emit, false);
            for threads in [1, 2] {
                let (got, out) = run_reader(text, "lower-to-wire", emit, threads, 4093);
                assert_eq!(out.exit_code, want.exit_code, "case {c}");
                assert_eq!(out.diagnostics, want.diagnostics, "case {c}");
                assert_eq!(
                    out.render_diagnostics(),
                    want.render_diagnostics(),
                    "case {c}"
                );
                if emit == Emit::Json {
                    // The document holds the diagnostics.
                    assert!(!got.is_empty(), "case {c}");
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want.output),
                        "case {c}"
                    );
                } else {
                    assert!(got.is_empty() && want.output.is_empty(), "case {c}");
                }
                assert!(
                    out.sources.file(apir_ir::FileId(0)).is_excerpt(),
                    "case {c}"
                );
            }
        }
    }
}

/// The lines of a generated module of `ops` ops (v2) with one more buffer
/// declared first: `%u`, one partition of 140,000 bytes, for nums past
/// 65535 (a select-descriptor error: `isa.iota dst = %u[[140000, 1],
/// [1, 70000]]`).
fn module_lines_with_u(ops: usize, seed: u64, kernels: usize) -> Vec<String> {
    let mut lines: Vec<String> = module(ops, seed, Arch::V2, kernels)
        .lines()
        .map(str::to_string)
        .collect();
    lines.insert(
        1,
        "  %u = mem.sbuf {partition = 0, byte = 0} : tile<1x140000xu8>".into(),
    );
    lines
}

/// `lines` with each `(at, line)` of `edits` inserted before line `at`
/// (of `lines`), as a text.
fn with_lines(lines: &[String], edits: &[(usize, String)]) -> String {
    let mut l = lines.to_vec();
    // Later lines first, so that earlier indices stay true.
    let mut edits = edits.to_vec();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (at, text) in edits {
        l.insert(at, text);
    }
    l.join("\n") + "\n"
}

/// Streams `text` through `pipeline` on two threads in parts of about
/// 2,000 bytes, which must fail with an error of the input in a part past
/// the first (`None` if it asks for one thread instead: a syntax error
/// that may be a cut's); then what a diagnosis from the input's start
/// finds, and what one from the attempt's checkpoint finds.
fn diagnosed_from_the_part(
    text: &str,
    pipeline: &str,
) -> Option<(
    apir_compiler::chunked::Findings,
    apir_compiler::chunked::Findings,
)> {
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse(pipeline).unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = |threads| ChunkOptions {
        window_bytes: 2000,
        in_flight: 3,
        ..ChunkOptions::new(StreamOptions {
            threads,
            ..StreamOptions::new(StreamEmit::WireBin)
        })
    };
    let (phase, from) = match run_chunked(
        &mut Trickle::new(text, 511),
        &mut Vec::new(),
        &build,
        opts(2),
    ) {
        Err(ChunkError::Invalid(phase, Some(from))) => (phase, from),
        Err(ChunkError::Retry) => return None,
        other => panic!("{:?}", other.map(|o| o.ops)),
    };
    assert!(from.offset() > 0, "no part before");
    let all = apir_compiler::chunked::diagnose(
        &mut Trickle::new(text, 511),
        apir_ir::FileId(0),
        0,
        phase,
        &build,
        opts(1),
    )
    .unwrap()
    .expect("an error found from the start");
    let mut input = Trickle::new(text, 511);
    input.at = from.offset();
    let resumed = apir_compiler::chunked::diagnose_from(&mut input, *from, phase, opts(1))
        .unwrap()
        .expect("an error found from the part");
    Some((all, resumed))
}

/// After a multi-threaded attempt stops at a verifier or pass error in a
/// part, a diagnosis that picks up at that part's start
/// ([`apir_compiler::chunked::diagnose_from`]) finds what a diagnosis of
/// the whole input finds, and what the whole-module path reports: errors
/// after the part (of an earlier phase too), warnings of the parts before
/// it, statistics, and a kernel defined again after it, named with where
/// the parts before defined it.
#[test]
fn a_diagnosis_from_the_failing_part_finds_what_the_whole_input_gives() {
    let lines = module_lines_with_u(1500, 21, 3);
    let ops: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("  isa.") && !lines[i].contains('{'))
        .collect();
    let at = |f: f64| ops[((ops.len() - 1) as f64 * f) as usize];
    let select = "  isa.iota dst = %u[[140000, 1], [1, 70000]]".to_string();
    let verify = "  isa.memset dst = %sa[[8192, 128], [1, 70000]]".to_string();
    let syntax = "  isa.memset dst = %sa[[64, 128], [1, 64]".to_string();
    let warn = |f: f64| format!("{} {{colour = \"red\"}}", lines[at(f)]);
    let with = |edits: &[(usize, String)]| with_lines(&lines, edits);
    let (first, len) = first_kernel(&lines);
    let kernel_again = |f: f64| -> Vec<(usize, String)> {
        (0..len)
            .map(|k| (at(f), lines[first + len - 1 - k].clone()))
            .collect()
    };
    let mut cases = Vec::new();
    for f in [0.2, 0.6, 0.97] {
        cases.push(with(&[(at(f), verify.clone())]));
        cases.push(with(&[(at(0.1), warn(0.1)), (at(f), select.clone())]));
    }
    // A pass error, then a verifier error and warnings after it.
    cases.push(with(&[
        (at(0.3), select.clone()),
        (at(0.5), warn(0.5)),
        (at(0.8), verify.clone()),
    ]));
    // A verifier error, then a syntax error: only the syntax error.
    cases.push(with(&[
        (at(0.4), verify.clone()),
        (at(0.9), syntax.clone()),
    ]));
    // A verifier error, then a kernel of the parts before defined again.
    let mut again = kernel_again(0.9);
    again.push((at(0.5), verify));
    cases.push(with(&again));
    // Syntax errors alone: one inside a part is looked for from there; one
    // on a part's first or last line may be a cut's, and the one-thread
    // run decides (`Retry`).
    let syntax_cases = cases.len();
    for f in [0.25, 0.45, 0.65, 0.85] {
        cases.push(with(&[(at(f), syntax.clone())]));
    }
    let mut syntax_resumed = 0;
    for (c, text) in cases.iter().enumerate() {
        let want = whole(text, "lower-to-wire", Emit::WireBin, true);
        assert!(!want.success(), "case {c}");
        let Some((all, resumed)) = diagnosed_from_the_part(text, "lower-to-wire") else {
            assert!(c >= syntax_cases, "case {c}: no point to go on from");
            continue;
        };
        if c >= syntax_cases {
            assert_eq!(all.phase, ErrorPhase::Syntax, "case {c}");
            syntax_resumed += 1;
        }
        assert_eq!(resumed.diagnostics.kept(), want.diagnostics, "case {c}");
        // And what the module held whole reports (no streaming at all).
        assert_eq!(
            resumed.diagnostics.kept(),
            held_whole(text, "lower-to-wire").diagnostics,
            "case {c}"
        );
        assert_eq!(
            resumed.diagnostics.kept(),
            all.diagnostics.kept(),
            "case {c}"
        );
        assert_eq!(resumed.diagnostics.omitted(), all.diagnostics.omitted());
        assert_eq!(resumed.phase, all.phase, "case {c}");
        assert_eq!(resumed.arch, all.arch, "case {c}");
        assert_eq!(
            resumed.report.statistics_text(),
            all.report.statistics_text(),
            "case {c}"
        );
        let names = |f: &apir_compiler::chunked::Findings| -> Vec<String> {
            f.report.timings.iter().map(|t| t.0.clone()).collect()
        };
        assert_eq!(names(&resumed), names(&all), "case {c}");
    }
    assert!(
        syntax_resumed >= 2,
        "{syntax_resumed} syntax errors looked for from their part"
    );
}

/// The driver diagnoses an error late in a large input from the part it
/// lies in: it goes back to that part's start, not to the input's, and
/// reports what the module parsed (and verified) whole reports, as one
/// thread does: a syntax error, and a verifier error naming its op by the
/// number the whole module gives it (after an op early on that
/// `canonicalize-ap` splits: its pieces are not the input's ops).
#[test]
fn the_driver_diagnoses_a_late_error_from_its_part() {
    // More than a default window past the first window's head: parts.
    let base = module(16_000, 5, Arch::V2, 1);
    let split = "  isa.memset dst = %sa[[8192, 1], [0, 2000], [64, 2], [16, 2], [4, 2], [1, 2]] {value = 1}";
    let pipeline = "canonicalize-ap{split-budget=4000},fold-partition,compact-unit-dims,select-descriptor,encode-wire";
    for bad in [
        "  isa.memset dst = %sa[[8192, 128], [1, 70000]]",
        "  isa.memset dst = %sa[[8192, 128], [1, 64]",
    ] {
        let text = insert_at(&insert_at(&base, 0.01, split), 0.97, bad);
        assert!(
            text.len() > chunked_window() * 5 / 4,
            "{} bytes",
            text.len()
        );
        // The reference: the module parsed whole, and verified.
        let want = match apir_ir::parse_str("gen.apir", &text, apir_ir::ParseOptions::default()) {
            Ok((m, _)) => apir_ir::verify(&m).unwrap_err(),
            Err((errors, _)) => errors,
        };
        assert_eq!(want.len(), 1, "{bad}");
        let mut seeks = Vec::new();
        for threads in [1, 2] {
            let d = Driver::new(Options {
                pipeline: pipeline.into(),
                emit: Emit::WireBin,
                threads,
                ..Options::default()
            })
            .unwrap();
            let mut input = Trickle::new(&text, 4093);
            let out = d
                .run_reader("gen.apir", &mut input, &mut Vec::new())
                .unwrap();
            assert_eq!(out.exit_code, 1);
            assert_eq!(out.diagnostics, want[..], "{bad}: {threads} threads");
            seeks.push(input.seeks);
        }
        match seeks[..] {
            [ref one, ref two] if one.is_empty() && two.len() == 1 => {
                assert!(
                    two[0] as usize >= chunked_window(),
                    "{bad}: went on from {}",
                    two[0]
                );
            }
            _ => panic!("{bad}: went on from {seeks:?}"),
        }
    }
    // The split happens (the pipeline's budget allows it): the streamed
    // runs above met ops that are not the input's.
    let d = Driver::new(Options {
        pipeline: pipeline.into(),
        emit: Emit::WireBin,
        statistics: true,
        ..Options::default()
    })
    .unwrap();
    let clean = insert_at(&base, 0.01, split);
    let out = d
        .run_reader("gen.apir", &mut Trickle::new(&clean, 4093), &mut Vec::new())
        .unwrap();
    assert!(out.success());
    assert!(out.report.contains("split"), "{}", out.report);
}

/// A pass error after an op that `canonicalize-ap` splits names its op
/// by the number the module parsed whole gives it (the split's pieces are
/// not the input's ops), however it is found: the passes run on the
/// module parsed whole, the text path of the driver, a diagnosis from the
/// start and one from the failing part.
#[test]
fn a_pass_error_after_a_split_names_the_op_as_the_whole_module_does() {
    let pipeline = "canonicalize-ap{split-budget=4000},fold-partition,compact-unit-dims,select-descriptor,encode-wire";
    let base = with_lines(&module_lines_with_u(1500, 12, 0), &[]);
    let split = "  isa.memset dst = %sa[[8192, 1], [0, 2000], [64, 2], [16, 2], [4, 2], [1, 2]] {value = 1}";
    let select = "  isa.iota dst = %u[[140000, 1], [1, 70000]]";
    let text = insert_at(&insert_at(&base, 0.3, split), 0.9, select);
    let registry = Registry::builtin();
    let pl = Pipeline::parse(pipeline).unwrap();
    // The reference: the passes on the module parsed whole.
    let (mut m, _) =
        apir_ir::parse_str("gen.apir", &text, apir_ir::ParseOptions::default()).unwrap();
    apir_ir::verify(&m).unwrap();
    let (_, run) =
        apir_compiler::manager::PassManager::new(registry.build(&pl).unwrap(), Default::default())
            .run(&mut m);
    let want = run.unwrap_err();
    assert!(want.iter().all(|d| d.subject.is_some()), "{want:?}");
    assert_eq!(
        whole(&text, pipeline, Emit::WireBin, false).diagnostics,
        want[..]
    );
    let (all, resumed) = diagnosed_from_the_part(&text, pipeline).expect("a point to go on from");
    assert_eq!(all.phase, ErrorPhase::Passes);
    assert_eq!(all.diagnostics.kept(), want);
    assert_eq!(resumed.diagnostics.kept(), want);
    assert_eq!(
        resumed.report.statistics_text(),
        all.report.statistics_text()
    );
}

/// Errors about the pieces of a split op name the op that was split, in
/// the whole module and in a diagnosis in windows of any size: the ids a
/// pass gives the pieces depend on how many ops share the batch (or the
/// module), which the input does not fix.
#[test]
fn errors_about_the_pieces_of_a_split_name_the_op_split() {
    let text = "module attributes {arch = \"v2\"} {
  %u = mem.sbuf {partition = 1, byte = 0} : tile<1x256xu8>
  %v = mem.sbuf {partition = 0, byte = 0} : tile<128x64xu8>
  isa.memset dst = %v[[64, 128], [1, 64]] {value = 0}
  isa.memset dst = %u[[256, 1], [1, 4], [64, 2], [16, 2], [4, 2], [1, 2]] {value = 1}
  isa.memset dst = %v[[64, 128], [1, 64]] {value = 0}
  isa.memset dst = %u[[256, 1], [1, 8], [64, 2], [16, 2], [4, 2], [1, 2]] {value = 2}
  isa.memset dst = %u[[256, 1], [1, 8]] {value = 3}
}
";
    let want = whole(text, "lower-to-wire", Emit::WireBin, false);
    assert!(!want.success());
    // Ops 1 and 3 are split into 4 and 8 pieces, op 4 is not: every piece
    // breaks the partition start rule, and each error names its input op.
    let named: Vec<u32> = want
        .diagnostics
        .iter()
        .map(|d| d.subject.as_ref().expect("a subject").op.as_u32())
        .collect();
    assert_eq!(named, [[1; 4].as_slice(), &[3; 8], &[4]].concat());
    for window in [8, 64, 150, 400, 4096] {
        let found = diagnose_all(
            text,
            StreamOptions::new(StreamEmit::WireBin),
            window,
            "split",
        );
        assert_eq!(
            found.diagnostics.kept(),
            &want.diagnostics[..],
            "window {window}"
        );
    }
}

/// Takes out the first piece of every op `canonicalize-ap` split (the one
/// that kept the op's id, at offset 0 here), so that the emit's error about
/// the next piece names an op no longer stored.
struct DropFirstPieces;

impl apir_ir::Pass for DropFirstPieces {
    fn name(&self) -> &'static str {
        "drop-first-pieces"
    }
    fn run(
        &mut self,
        m: &mut apir_ir::Module,
        _: &mut apir_ir::PassContext,
    ) -> Result<apir_ir::Changed, apir_ir::Diagnostics> {
        let split: Vec<apir_ir::Op> = m.top_ops().filter(|&o| m.origin(o) != o).collect();
        let origins: std::collections::HashSet<apir_ir::Op> =
            split.iter().map(|&o| m.origin(o)).collect();
        m.retain_ops(None, |o, _| !origins.contains(&o));
        Ok(apir_ir::Changed::Yes)
    }
}

/// The emit's error about a piece of a split op whose first piece a pass
/// removed: a diagnosis in windows finds it at the piece, as the module
/// read whole does (the error names the op split, no longer stored).
#[test]
fn an_emit_error_about_a_piece_is_found_when_its_op_is_gone() {
    let text = "module attributes {arch = \"v2\"} {
  %u = mem.sbuf {partition = 0, byte = 0} : tile<128x256xu8>
  isa.memset dst = %u[[256, 128], [0, 8], [64, 2], [16, 2], [4, 2], [1, 2]] {value = 1}
}
";
    let registry = Registry::builtin();
    let canon = Pipeline::parse("canonicalize-ap").unwrap();
    let build = || {
        let mut passes = registry.build(&canon).ok()?;
        passes.push((
            "drop-first-pieces".to_string(),
            Box::new(DropFirstPieces) as Box<dyn apir_ir::Pass>,
        ));
        Some(passes)
    };
    // The whole module.
    let (mut m, sources) =
        apir_ir::parse_str("t.apir", text, apir_ir::ParseOptions::default()).unwrap();
    let (_, run) =
        apir_compiler::manager::PassManager::new(build().unwrap(), Default::default()).run(&mut m);
    run.unwrap();
    let Err(apir_compiler::wire::WireError::NotEncoded { subject, location }) =
        apir_compiler::wire::collect(&m, &sources)
    else {
        panic!("pieces without bytes are collected")
    };
    assert!(!m.ops.contains(subject.op), "{subject}");
    assert_eq!(location.as_deref(), Some("t.apir:3:3"));
    for window in [16, 100, 4096] {
        let opts = ChunkOptions {
            window_bytes: window,
            ..ChunkOptions::new(StreamOptions::new(StreamEmit::WireBin))
        };
        let found = apir_compiler::chunked::diagnose(
            &mut Trickle::new(text, 7),
            apir_ir::FileId(0),
            0,
            ErrorPhase::Emit,
            &build,
            opts,
        )
        .unwrap()
        .unwrap_or_else(|| panic!("window {window}: nothing found"));
        let (e, span) = found.emit.expect("the emit's error");
        let apir_compiler::wire::WireError::NotEncoded { subject: got, .. } = e else {
            panic!("window {window}: {e:?}")
        };
        assert_eq!(got, subject, "window {window}");
        assert_eq!(sources.location(span), "t.apir:3:3", "window {window}");
    }
}

/// The window (and part) size the driver streams with.
fn chunked_window() -> usize {
    apir_compiler::chunked::DEFAULT_WINDOW_BYTES
}

/// A `json` document streamed from a reader is the whole-module path's,
/// byte for byte, on success (warnings in its diagnostics) and on every
/// kind of failure: its arch is the header's, the `--arch` override's, or
/// `v2` when the header does not parse.
#[test]
fn json_documents_stream_as_read_whole() {
    let ok = module(200, 12, Arch::V3, 1);
    // Three ops with an attribute no op interprets: warnings.
    let mut marked = 0;
    let warned: String = ok
        .lines()
        .map(|l| {
            if l.starts_with("  isa.") && !l.contains('{') && marked < 3 {
                marked += 1;
                format!("{l} {{colour = \"ré\"}}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_eq!(marked, 3);
    let verify = ok.replacen(
        "  isa.",
        "  isa.memset dst = %sa[[8192, 128], [1, 70000]]\n  isa.",
        1,
    );
    let syntax = ok.replacen(
        "  isa.",
        "  isa.memset dst = %sa[[64, 128], [1, 64]\n  isa.",
        2,
    );
    let bad_header = ok.replacen("arch = \"v3\"", "arch = \"v9\"", 1);
    let no_header = ok.lines().skip(1).collect::<Vec<_>>().join("\n");
    let cases = [ok, warned, verify, syntax, bad_header, no_header];
    for (c, text) in cases.iter().enumerate() {
        for arch in [None, Some(Arch::V4)] {
            for threads in [1, 2] {
                let options = Options {
                    pipeline: "lower-to-wire".into(),
                    emit: Emit::Json,
                    arch,
                    threads,
                    ..Options::default()
                };
                let want = driver::run(options.clone(), Input::text("gen.apir", text.as_str()));
                let d = Driver::new(options).unwrap();
                assert!(d.streams_from_reader());
                let mut input = Trickle::new(text, 4093);
                let mut sink = Vec::new();
                let out = d.run_reader("gen.apir", &mut input, &mut sink).unwrap();
                assert!(!sink.is_empty(), "case {c}");
                assert_eq!(
                    String::from_utf8_lossy(&sink),
                    String::from_utf8_lossy(&want.output),
                    "case {c}, arch {arch:?}, {threads} threads"
                );
                assert_eq!(out.exit_code, want.exit_code, "case {c}");
                assert_eq!(out.diagnostics, want.diagnostics, "case {c}");
                if c < 2 {
                    assert_eq!(out.exit_code, 0, "case {c}");
                } else {
                    assert_ne!(out.exit_code, 0, "case {c}");
                }
            }
        }
    }
}

/// What [`apir_compiler::chunked::diagnose`] finds in `text` for
/// `lower-to-wire`, looking at every phase, in windows of `window` bytes
/// read 511 at a time; it must find something (`at` says where, on
/// failure).
fn diagnose_all(
    text: &str,
    sopts: StreamOptions,
    window: usize,
    at: &str,
) -> apir_compiler::chunked::Findings {
    diagnose_within(text, sopts, window, MAX_WINDOW_BYTES, at)
}

/// [`diagnose_all`] with windows growing to at most `max` bytes.
fn diagnose_within(
    text: &str,
    sopts: StreamOptions,
    window: usize,
    max: usize,
    at: &str,
) -> apir_compiler::chunked::Findings {
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse("lower-to-wire").unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = ChunkOptions {
        window_bytes: window,
        max_window_bytes: max,
        ..ChunkOptions::new(sopts)
    };
    apir_compiler::chunked::diagnose(
        &mut Trickle::new(text, 511),
        apir_ir::FileId(0),
        0,
        ErrorPhase::Passes,
        &build,
        opts,
    )
    .unwrap_or_else(|e| panic!("{at}, window {window}: {e:?}"))
    .unwrap_or_else(|| panic!("{at}, window {window}: nothing found"))
}

/// An op written over two lines, the second beginning like an op: a part
/// cut there fails with a syntax error that is not the input's, and the
/// driver streams on one thread (a syntax error in a part is not looked
/// for first; looking would find none): the output is the input read
/// whole's.
#[test]
fn a_cut_inside_an_op_streams_again_on_one_thread() {
    let base = module(16_000, 12, Arch::V2, 0);
    let text: String = base
        .lines()
        .map(|l| l.replacen(", src = ", ",\n  src = ", 1) + "\n")
        .collect();
    assert!(text.len() > 2 * apir_compiler::chunked::DEFAULT_WINDOW_BYTES);
    match chunked(&text, "lower-to-wire", StreamEmit::WireBin, 2, 2000, 4093) {
        Err(ChunkError::Retry) => {}
        other => panic!("expected a part to fail, got {:?}", other.map(|o| o.1)),
    }
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse("lower-to-wire").unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = ChunkOptions::new(StreamOptions::new(StreamEmit::WireBin));
    let found = apir_compiler::chunked::diagnose(
        &mut Trickle::new(&text, 4093),
        apir_ir::FileId(0),
        0,
        ErrorPhase::Passes,
        &build,
        opts,
    );
    assert!(matches!(found, Ok(None)), "{found:?}");
    let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
    assert!(want.success());
    let (got, out) = run_reader(&text, "lower-to-wire", Emit::WireBin, 2, 4093);
    assert_eq!(out.exit_code, 0, "{}", out.render_diagnostics());
    assert!(got == want.output);
}

/// Every case of the lit suite that fails is diagnosed streaming, in
/// windows of any size, with exactly the whole-module path's diagnostics
/// (that path forced by `print_ir_after_failure`, which does not stream):
/// syntax errors of every kind, verifier errors, pass errors, kernels.
#[test]
fn every_failing_lit_case_is_diagnosed_as_read_whole() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "apir") {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    files(std::path::Path::new("../lit-tests"), &mut paths);
    paths.sort();
    let registry = Registry::builtin();
    let (mut failing, mut cases) = (0, 0);
    let (mut streamed_reports, mut passes_failed) = (0, 0);
    for path in &paths {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue; // not UTF-8 (a test of that)
        };
        for range in apir_ir::split_input(&text) {
            let case = &text[range];
            cases += 1;
            for (pipeline, emit) in [
                ("lower-to-wire", Emit::WireBin),
                ("", Emit::Ir),
                ("fold-partition,compact-unit-dims", Emit::Ir),
            ] {
                let want = driver::run(
                    Options {
                        pipeline: pipeline.into(),
                        emit,
                        threads: 1,
                        print_ir_after_failure: true,
                        ..Options::default()
                    },
                    Input::text("c.apir", case),
                );
                if want.success() {
                    continue;
                }
                failing += 1;
                // With statistics and timing too: the case is diagnosed
                // streaming, with the report the whole-module path gives
                // (the same phases and passes, the same counters).
                let reported = |whole: bool| Options {
                    pipeline: pipeline.into(),
                    emit,
                    threads: 1,
                    print_ir_after_failure: whole,
                    statistics: true,
                    timing: true,
                    ..Options::default()
                };
                let whole = driver::run(reported(true), Input::text("c.apir", case));
                let held = driver::run(reported(false), Input::text("c.apir", case));
                let d = Driver::new(reported(false)).unwrap();
                let read = d
                    .run_reader("c.apir", &mut Trickle::new(case, 97), &mut Vec::new())
                    .unwrap();
                let at = format!("{} {pipeline:?}:\n{case}", path.display());
                for streamed in [&held, &read] {
                    assert_eq!(streamed.diagnostics, whole.diagnostics, "{at}");
                    assert_eq!(streamed.exit_code, whole.exit_code, "{at}");
                    assert_eq!(
                        report_shape(&streamed.report),
                        report_shape(&whole.report),
                        "{at}"
                    );
                }
                // Read again for the lines shown only, if streamed.
                if d.streams_from_reader() && read.exit_code == driver::EXIT_INPUT {
                    streamed_reports += 1;
                    assert!(read.sources.file(apir_ir::FileId(0)).is_excerpt(), "{at}");
                }
                passes_failed += usize::from(whole.report.contains("Pass statistics report"));
                let pipeline = Pipeline::parse(pipeline).unwrap();
                let build = || registry.build(&pipeline).ok();
                // Looking no further than a phase finds the whole-module
                // path's diagnostics, or nothing if they are of a later
                // phase; looking at every phase always finds them.
                let phases = [ErrorPhase::Syntax, ErrorPhase::Verify, ErrorPhase::Passes];
                let mut first_found = None;
                for (k, upto) in phases.into_iter().enumerate() {
                    for window in [48, 300, 1 << 20] {
                        let opts = ChunkOptions {
                            window_bytes: window,
                            ..ChunkOptions::new(StreamOptions::new(StreamEmit::WireBin))
                        };
                        let mut input = io::Cursor::new(case.as_bytes());
                        let found = apir_compiler::chunked::diagnose(
                            &mut input,
                            apir_ir::FileId(0),
                            0,
                            upto,
                            &build,
                            opts,
                        )
                        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
                        let at = format!("{} {upto:?} window {window}:\n{case}", path.display());
                        match found {
                            Some(found) => {
                                assert_eq!(found.diagnostics.kept(), want.diagnostics, "{at}");
                                first_found.get_or_insert(k);
                            }
                            None => assert!(
                                first_found.is_none() && upto != ErrorPhase::Passes,
                                "nothing found: {at}"
                            ),
                        }
                    }
                }
            }
        }
    }
    assert!(
        cases > 300 && failing > 300,
        "{cases} cases, {failing} failing"
    );
    assert!(
        streamed_reports > 300 && passes_failed > 20,
        "{streamed_reports} reports streamed, {passes_failed} after a pass failed"
    );
}

/// A report without what varies from run to run: the IR dumps before it
/// (`--print-ir-after-failure`), and the times and shares of its timing
/// rows, whose names stay.
fn report_shape(report: &str) -> String {
    let from = report.find("===-").unwrap_or(report.len());
    report[from..]
        .lines()
        .map(|l| match l.find("%)") {
            Some(i) => &l[i + 2..],
            None if l.contains("Total Execution Time") => "Total Execution Time",
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The whole-module path reads all of its input before it parses: an
/// input that is not UTF-8 is reported as such whatever its syntax errors.
/// So `diagnose` reads on to the end after a module header that does not
/// parse, and after the parser's error limit, and gives up on a bad byte
/// found there (the driver then reports it, as that path does).
#[test]
fn diagnosis_stopped_early_still_reads_the_rest() {
    let base = module(300, 13, Arch::V2, 0);
    let bad_header = base.replacen("arch = \"v2\"", "arch = \"v9\"", 1);
    let mut lines: Vec<&str> = base.lines().collect();
    for _ in 0..60 {
        lines.insert(12, "  isa.memset dst = %sa[[64, 128], [1, 64]");
    }
    let many = lines.join("\n") + "\n";
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse("lower-to-wire").unwrap();
    let build = || registry.build(&pipeline).ok();
    for text in [&bad_header, &many] {
        let want = whole(text, "lower-to-wire", Emit::WireBin, false);
        let mut bytes = text.as_bytes().to_vec();
        let at = bytes.len() - 40;
        for (data, utf8) in [
            (bytes.clone(), true),
            (
                {
                    bytes[at] = 0xff;
                    bytes.clone()
                },
                false,
            ),
        ] {
            let opts = ChunkOptions {
                window_bytes: 256,
                ..ChunkOptions::new(StreamOptions::new(StreamEmit::WireBin))
            };
            let mut input = Trickle {
                data,
                at: 0,
                step: 97,
                reads: 0,
                seeks: Vec::new(),
            };
            let found = apir_compiler::chunked::diagnose(
                &mut input,
                apir_ir::FileId(0),
                0,
                ErrorPhase::Syntax,
                &build,
                opts,
            );
            match (found, utf8) {
                (Ok(Some(f)), true) => assert_eq!(f.diagnostics.kept(), want.diagnostics),
                (Err(ChunkError::GiveUp), false) => {}
                (other, _) => panic!(
                    "UTF-8 {utf8}: {:?}",
                    other.map(|f| f.map(|f| f.diagnostics.kept().len()))
                ),
            }
        }
    }
}

/// Per op: an error for each `isa.memset`, and every other op's offsets
/// moved outside their buffers. Op-local, as a pass may be that reports
/// errors on some ops and (a bug) breaks others.
struct MemsetErrorsElseCorrupt;

impl apir_ir::Pass for MemsetErrorsElseCorrupt {
    fn name(&self) -> &'static str {
        "memset-errors"
    }
    fn run(
        &mut self,
        m: &mut apir_ir::Module,
        _: &mut apir_ir::PassContext,
    ) -> Result<apir_ir::Changed, apir_ir::Diagnostics> {
        let mut errors = Vec::new();
        for op in m.ops.values_mut() {
            if op.kind.name() == "isa.memset" {
                errors.push(apir_ir::Diagnostic::error(op.span, "no memset here"));
            } else {
                for o in op.operands.iter_mut() {
                    o.ap.offset = 1 << 40;
                }
            }
        }
        if errors.is_empty() {
            Ok(apir_ir::Changed::Yes)
        } else {
            Err(errors)
        }
    }
    fn op_local(&self) -> bool {
        true
    }
}

static BREAKING: &[apir_compiler::PassInfo] = &[
    apir_compiler::PassInfo {
        name: "corrupt",
        summary: "break the IR",
        options: &[],
        create: |_| Ok(Box::new(crate::manager::Corrupt)),
    },
    apir_compiler::PassInfo {
        name: "memset-errors",
        summary: "an error per memset, every other op broken",
        options: &[],
        create: |_| Ok(Box::new(MemsetErrorsElseCorrupt)),
    },
];

/// A pass whose output does not verify is one internal error, then the
/// verifier's errors of every op, however many batches the ops streamed
/// in; a pass that reports errors on some ops and breaks the others gives
/// its errors only (the whole module's run reports them and verifies
/// nothing). As the whole-module path, streamed from a reader and from
/// text.
#[test]
fn passes_that_fail_in_many_batches_report_as_on_the_whole_module() {
    let registry = Registry {
        passes: BREAKING,
        pipelines: &[],
    };
    let text = module(400, 14, Arch::V2, 0);
    // No limit; the default; no error shown, so that the internal error is
    // among the omitted ones (the exit code and the note still say so).
    let none_shown = apir_ir::DiagnosticLimit {
        errors: Some(0),
        warnings: None,
    };
    let limits = [
        apir_ir::DiagnosticLimit::NONE,
        Default::default(),
        none_shown,
    ];
    for (pipeline, limit) in ["corrupt", "memset-errors"]
        .into_iter()
        .flat_map(|p| limits.map(|l| (p, l)))
    {
        let options = |print_ir_after_failure| Options {
            pipeline: pipeline.into(),
            emit: Emit::WireHex,
            threads: 1,
            print_ir_after_failure,
            diagnostic_limit: limit,
            ..Options::default()
        };
        let whole = Driver::with_registry(options(true), registry)
            .unwrap()
            .run(Input::text("gen.apir", text.as_str()));
        let d = Driver::with_registry(options(false), registry).unwrap();
        assert!(d.streams_from_reader());
        let internal = whole
            .diagnostics
            .iter()
            .filter(|d| d.severity == apir_ir::Severity::Internal);
        // Under the default limit, 50 errors and a note counting the rest.
        let o = whole.omitted;
        let notes = usize::from(o.errors > 0) + usize::from(o.warnings > 0);
        let found = whole.diagnostics.len() - notes + o.errors + o.warnings;
        if limit != apir_ir::DiagnosticLimit::NONE {
            assert!(whole.diagnostics.len() <= 51, "{}", whole.diagnostics.len());
        }
        match pipeline {
            "corrupt" if limit == none_shown => {
                assert_eq!(whole.exit_code, driver::EXIT_INTERNAL);
                assert_eq!(internal.count(), 0);
                let note = &whole.diagnostics.last().expect("a note").message;
                assert_eq!(
                    note,
                    &format!("{} errors not shown, internal errors among them", o.errors)
                );
                assert!(found > 400, "{found}");
            }
            "corrupt" => {
                assert_eq!(whole.exit_code, driver::EXIT_INTERNAL);
                assert_eq!(internal.count(), 1);
                assert!(found > 400, "{found}");
            }
            _ => {
                assert_eq!(whole.exit_code, driver::EXIT_INPUT);
                assert_eq!(internal.count(), 0);
                assert!(found > 10, "{found}");
            }
        }
        let streamed = d.run(Input::text("gen.apir", text.as_str()));
        assert_eq!(streamed.exit_code, whole.exit_code, "{pipeline}");
        assert_eq!(streamed.diagnostics, whole.diagnostics, "{pipeline}");
        let mut input = Trickle::new(&text, 4093);
        let out = d
            .run_reader("gen.apir", &mut input, &mut Vec::new())
            .unwrap();
        assert_eq!(out.exit_code, whole.exit_code, "{pipeline}");
        assert_eq!(out.diagnostics, whole.diagnostics, "{pipeline}");
        assert_eq!(
            out.render_diagnostics(),
            whole.render_diagnostics(),
            "{pipeline}"
        );
    }
}

/// A diagnostic limit keeps, on every path, what the whole-module path
/// keeps under it: the first errors and the first warnings of its
/// diagnostics in its order, and one closing note per kind counting the
/// rest. Streaming bounds each list it accumulates over windows, parts and
/// batches (lint warnings, each pass's warnings, each phase's errors), and
/// the bounded lists add up to the same.
#[test]
fn diagnostic_limits_keep_what_the_whole_module_path_keeps() {
    use apir_ir::DiagnosticLimit;
    let base = module(400, 21, Arch::V2, 2);
    let lines: Vec<&str> = base.lines().collect();
    let plain: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("  isa.") && !lines[i].contains('{'))
        .collect();
    assert!(plain.len() > 150, "{} plain ops", plain.len());
    // Every plain op warns; some lines after plain ops are replaced by
    // `bad` (`every`-th of them).
    let text = |bad: Option<&str>, every: usize| -> String {
        let mut out = String::new();
        for (i, line) in lines.iter().enumerate() {
            out.push_str(line);
            if let Some(k) = plain.iter().position(|&p| p == i) {
                out.push_str(" {colour = 1}");
                if let Some(bad) = bad.filter(|_| k % every == 1) {
                    out.push('\n');
                    out.push_str(bad);
                }
            }
            out.push('\n');
        }
        out
    };
    let cases = [
        // Warnings only.
        text(None, 1),
        // Verifier errors in many batches (the warnings are not reported).
        text(Some("  isa.memset dst = %sa[[8192, 128], [1, 70000]]"), 4),
        // Pass errors in many batches, after the lint warnings.
        text(
            Some("  isa.tensor_copy dst = %sa[[8192, 64], [1, 64]] + 262144, src = %sa[[8192, 64], [1, 64]]"),
            4,
        ),
        // Syntax errors, past the parser's own limit.
        text(Some("  isa.memset dst = %sa[[64, 128], [1, 64]"), 2),
    ];
    let limits = [
        DiagnosticLimit::default(),
        DiagnosticLimit {
            errors: Some(3),
            warnings: Some(2),
        },
        DiagnosticLimit {
            errors: Some(0),
            warnings: None,
        },
        DiagnosticLimit::NONE,
    ];
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse("lower-to-wire").unwrap();
    let build = || registry.build(&pipeline).ok();
    for (c, text) in cases.iter().enumerate() {
        for limit in limits {
            let at = format!("case {c}, {limit:?}");
            let options = |threads: usize, whole: bool| Options {
                pipeline: "lower-to-wire".into(),
                emit: Emit::WireBin,
                threads,
                print_ir_after_failure: whole,
                diagnostic_limit: limit,
                ..Options::default()
            };
            // The whole-module path: every diagnostic found, then limited.
            let want = driver::run(options(1, true), Input::text("gen.apir", text.as_str()));
            assert_eq!(want.success(), c == 0, "{at}");
            let notes =
                usize::from(want.omitted.errors > 0) + usize::from(want.omitted.warnings > 0);
            let kept = want.diagnostics.len() - notes;
            let shown_of = |max: Option<usize>, n: usize| max.map_or(n, |m| n.min(m));
            // The limit is not vacuous here: something is left out
            // unless there is no limit.
            let limited = if c == 0 {
                limit.warnings.is_some()
            } else {
                // The parser stops at its own limit.
                let max = if c == 3 {
                    apir_ir::parser::MAX_ERRORS
                } else {
                    usize::MAX
                };
                limit.errors.is_some_and(|e| e < max)
            };
            if limited {
                assert!(!want.omitted.is_empty(), "{at}");
                let notes = &want.diagnostics[kept..];
                assert!(
                    notes.iter().all(|d| d.severity == apir_ir::Severity::Note
                        && d.span.is_none()
                        && d.message.contains("not shown")),
                    "{at}"
                );
            } else if limit == DiagnosticLimit::NONE {
                assert!(want.omitted.is_empty(), "{at}");
            }
            let errors = want.diagnostics[..kept]
                .iter()
                .filter(|d| d.severity >= apir_ir::Severity::Error)
                .count();
            assert_eq!(
                errors,
                shown_of(limit.errors, errors + want.omitted.errors),
                "{at}"
            );
            assert_eq!(
                kept - errors,
                shown_of(limit.warnings, kept - errors + want.omitted.warnings),
                "{at}"
            );
            // From text held whole, streamed or diagnosed streaming.
            let held = driver::run(options(2, false), Input::text("gen.apir", text.as_str()));
            assert_eq!(held.diagnostics, want.diagnostics, "{at}");
            assert_eq!(held.omitted, want.omitted, "{at}");
            // JSON documents carry the same diagnostics and notes.
            let json = |whole: bool| {
                let o = Options {
                    emit: Emit::Json,
                    ..options(2, whole)
                };
                driver::run(o, Input::text("gen.apir", text.as_str()))
            };
            let (streamed_json, whole_json) = (json(false), json(true));
            assert_eq!(
                String::from_utf8_lossy(&streamed_json.output),
                String::from_utf8_lossy(&whole_json.output),
                "{at}"
            );
            if limited {
                let doc = String::from_utf8_lossy(&whole_json.output);
                assert!(doc.contains("not shown"), "{at}");
            }
            // From a reader, on one thread and in parts.
            for threads in [1, 2] {
                let d = Driver::new(options(threads, false)).unwrap();
                let mut sink = Vec::new();
                let out = d
                    .run_reader("gen.apir", &mut Trickle::new(text, 4093), &mut sink)
                    .unwrap();
                assert_eq!(out.exit_code, want.exit_code, "{at}");
                assert_eq!(out.diagnostics, want.diagnostics, "{at}");
                assert_eq!(out.render_diagnostics(), want.render_diagnostics(), "{at}");
                assert_eq!(out.omitted, want.omitted, "{at}");
            }
            // In small windows and parts: each accumulated list bounded,
            // the same kept and counted.
            let sopts = StreamOptions {
                limit,
                ..StreamOptions::new(StreamEmit::WireBin)
            };
            let kept = &want.diagnostics[..kept];
            if c == 0 {
                for (threads, window) in [(1, 700), (2, 2000), (3, 3000)] {
                    let opts = ChunkOptions {
                        window_bytes: window,
                        in_flight: 3,
                        ..ChunkOptions::new(StreamOptions { threads, ..sopts })
                    };
                    let mut sink = Vec::new();
                    let out = run_chunked(&mut Trickle::new(text, 511), &mut sink, &build, opts)
                        .unwrap_or_else(|e| panic!("{at}, {threads} threads: {e:?}"));
                    assert_eq!(out.report.warnings, kept, "{at}, {threads} threads");
                    assert_eq!(out.report.omitted, want.omitted, "{at}, {threads} threads");
                }
            } else {
                for window in [300, 4096] {
                    let found = diagnose_all(text, sopts, window, &at);
                    assert_eq!(found.diagnostics.kept(), kept, "{at}, window {window}");
                    assert_eq!(
                        found.diagnostics.omitted(),
                        want.omitted,
                        "{at}, window {window}"
                    );
                }
            }
        }
    }
}

/// `text` with `line` inserted before the op line nearest `frac` of the way.
fn insert_at(text: &str, frac: f64, line: &str) -> String {
    let at = (text.len() as f64 * frac) as usize;
    let at = at + text[at..].find("\n  isa.").unwrap() + 1;
    format!("{}{line}\n{}", &text[..at], &text[at..])
}

/// canonicalize-ap's split budget is carried in program order: parts read
/// from a reader and lowered by forks give what one thread gives, or the
/// driver streams the input again on one thread.
#[test]
fn the_split_budget_streams_as_read_whole() {
    let split = |k: u64| {
        format!("  isa.memset dst = %sa[[8192, 1], [0, {k}], [64, 2], [16, 2], [4, 2], [1, 2]] {{value = 1}}")
    };
    let pipeline = |b: u64| {
        format!("canonicalize-ap{{split-budget={b}}},fold-partition,compact-unit-dims,select-descriptor,encode-wire")
    };
    let base = module(1500, 12, Arch::V2, 0);
    // Two splits in different parts, the second over the budget after the
    // first: each fork took its own, and joining them says the one-thread
    // run decides.
    let two = insert_at(&insert_at(&base, 0.3, &split(2000)), 0.33, &split(2000));
    let tight = pipeline(2000);
    let r = chunked(&two, &tight, StreamEmit::WireBin, 2, 4096, 997);
    assert!(matches!(r, Err(ChunkError::Retry)), "{:?}", r.map(|_| ()));
    assert!(matches!(
        chunked(&two, &tight, StreamEmit::WireBin, 1, 4096, 997),
        Err(ChunkError::Invalid(ErrorPhase::Passes, None))
    ));
    for emit in [Emit::WireBin, Emit::Ir] {
        let want = whole(&two, &tight, emit, false);
        assert!(!want.success());
        assert!(want
            .render_diagnostics()
            .contains("not split into 2000 ops"));
        for threads in [1, 2] {
            let (got, out) = run_reader(&two, &tight, emit, threads, 4093);
            assert_eq!(out.render_diagnostics(), want.render_diagnostics());
            assert!(got == want.output);
        }
    }
    // With room for both, the parts are joined as they are.
    same_as_whole(&two, &pipeline(4000), 2, 4096, 997);
    // A split one thread takes thanks to the ops before it, which a fork
    // starting from nothing refuses: the same bytes in the end.
    let late = insert_at(&base, 0.9, &split(2000));
    assert!(chunked(&late, &pipeline(0), StreamEmit::WireBin, 2, 4096, 997).is_err());
    same_as_whole(&late, &pipeline(0), 1, 4096, 997);
    let want = whole(&late, &pipeline(0), Emit::WireBin, false);
    let (got, out) = run_reader(&late, &pipeline(0), Emit::WireBin, 2, 4093);
    assert!(out.success() && got == want.output);
}

/// A run of blank and comment lines many windows long between two ops:
/// several threads look for a part's cut through it as it is read (each
/// line looked at once, not again each time the part grows), and cut the
/// run at a blank or comment line when no op line comes within 16
/// windows, so a run longer than the largest window streams on them too;
/// one thread gives up at the largest window and the driver runs the
/// whole-module path, with the same output.
#[test]
fn a_long_run_of_blank_and_comment_lines() {
    let base = module(60, 5, Arch::V2, 0);
    let lines: Vec<&str> = base.lines().collect();
    let at = lines.len() / 2;
    let run: String = (0..6000)
        .map(|i| match i % 3 {
            0 => "\n",
            1 => "  // a comment line\n",
            _ => "   \n",
        })
        .collect();
    let text = format!(
        "{}\n{run}{}\n",
        lines[..at].join("\n"),
        lines[at..].join("\n")
    );
    assert!(run.len() > 40_000);
    for threads in [1, 2] {
        same_as_whole_within(&text, "lower-to-wire", threads, 256, 1000, 64 << 10);
    }
    // Longer than the largest window: cut inside the run on two threads,
    // and on one the op before it is taken as ended, the windows going on
    // through the run at their size.
    for threads in [1, 2] {
        same_as_whole_within(&text, "lower-to-wire", threads, 256, 1000, 8 << 10);
    }
    for threads in [1, 2] {
        driver_gives_the_whole_output(&text, threads, 1000);
    }
    // After the module's closing `}`: no cut there (the `}` would end a
    // part that is not the last); the run is read to the input's end.
    let trailing = format!("{base}{run}");
    same_as_whole_within(&trailing, "lower-to-wire", 2, 256, 1000, 64 << 10);
}

/// An op that goes on after a run of blank and comment lines longer than
/// a window (its attributes, an operand, an offset, a lowered form or an
/// `as` key on a later line): on one thread the op is taken as ended
/// before the run, so streaming stops with an error (the op cut short does
/// not verify, or what continues it, which no item begins with, starts a
/// window and does not parse), which is not trusted (`Uncut`); streamed
/// again without the cut, the run is held in windows that grow to it, and
/// the output is the whole module's; so is the driver's, which does both.
#[test]
fn an_op_that_goes_on_after_a_long_run_stops_streaming_at_its_continuation() {
    // Longer than the driver's 1 MiB windows, so that its own runs below
    // cut there too.
    let run: String = (0..160_000)
        .map(|i| if i % 2 == 0 { "\n" } else { "  // between\n" })
        .collect();
    assert!(run.len() > 1 << 20);
    let base = module(40, 5, Arch::V2, 0);
    let lowered = whole(&base, "fold-partition", Emit::Ir, false);
    assert!(lowered.success());
    let lowered = String::from_utf8(lowered.output).unwrap();
    let custom = "module attributes {arch = \"v2\"} {\n  %a = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.custom dst = %a[[64, 128], [1, 64]] as \"NEURON_ISA_TPB_TENSOR2D\", src = %a[[64, 128], [1, 64]] as \"NEURON_ISA_TPB_TENSOR2D\"\n}\n";
    // (input, pipeline, where the op is split: the run goes before it,
    // whether the op reads as ended there: else, as `isa.custom` needs its
    // `as`, it is held with the run and streaming gives up at the largest
    // window; whether at the split's last place in the op: the last
    // operand's offset, the op cut short before it still verifies)
    let cases: [(&str, &str, &str, bool, bool); 6] = [
        (&base, "lower-to-wire", " {", true, false),
        (&base, "lower-to-wire", ", src = ", true, false),
        (&base, "lower-to-wire", " + ", true, false),
        (&base, "lower-to-wire", " + ", true, true),
        (&lowered, "", " fold<", true, false),
        (custom, "", " as \"", false, false),
    ];
    for (text, pipeline, split, ended, last) in cases {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .rposition(|l| l.trim_start().starts_with("isa.") && l.contains(split))
            .unwrap_or_else(|| panic!("an op with `{split}`"));
        let cut = if last {
            lines[at].rfind(split)
        } else {
            lines[at].find(split)
        }
        .unwrap();
        let (head, tail) = lines[at].split_at(cut);
        let text = format!(
            "{}\n{head}\n{run}{tail}\n{}\n",
            lines[..at].join("\n"),
            lines[at + 1..].join("\n")
        );
        let want = whole(&text, pipeline, Emit::Ir, false);
        assert!(want.success(), "`{split}`: {}", want.render_diagnostics());
        match chunked_within(&text, pipeline, StreamEmit::Ir, 1, 256, 1000, 8 << 10) {
            Err(ChunkError::Uncut) if ended => {}
            Err(ChunkError::GiveUp) if !ended => {}
            other => panic!("`{split}`: got {:?}", other.map(|o| o.1)),
        }
        // On two threads a part ends inside the run, at a blank or comment
        // line: the op is cut short there, and the next part goes on with
        // those lines and then the op's continuation. The continuation
        // does not parse, an error of the cut's (on the part's first line
        // an item is on), so streaming goes on on one thread; the op cut
        // short may fail to verify, and then a diagnosis from its part,
        // which reads the op whole, finds nothing. Never an error that is
        // not the input's.
        match chunked_within(&text, pipeline, StreamEmit::Ir, 2, 256, 1000, 8 << 10) {
            // The op cut short before its last offset verifies: the error
            // is the continuation's, and the cut's.
            Err(ChunkError::Retry) if last => {}
            Err(ChunkError::Retry | ChunkError::Uncut | ChunkError::GiveUp) if !last => {}
            Err(ChunkError::Invalid(phase, Some(from))) => {
                let opts = ChunkOptions {
                    window_bytes: 256,
                    max_window_bytes: 8 << 10,
                    ..ChunkOptions::new(StreamOptions::new(StreamEmit::Ir))
                };
                let mut input = Trickle::new(&text, 1000);
                input.at = from.offset();
                let found = apir_compiler::chunked::diagnose_from(&mut input, *from, phase, opts);
                assert!(
                    matches!(found, Ok(None) | Err(ChunkError::GiveUp)),
                    "`{split}` on two threads: {phase:?} found from the part: {:?}",
                    found.map(|f| f.map(|f| f.diagnostics.kept().to_vec()))
                );
            }
            Ok((got, _)) => assert!(got == want.output, "`{split}`: output differs"),
            Err(e) => panic!("`{split}` on two threads: {e:?}"),
        }
        let uncut = uncut_whole_output(&text, pipeline);
        assert!(
            uncut == want.output,
            "`{split}`: output differs without cuts"
        );
        let (got, out) = run_reader(&text, pipeline, Emit::Ir, 1, 1000);
        assert_eq!(out.exit_code, 0, "`{split}`");
        assert!(got == want.output, "`{split}`: output differs");
    }
    // Errors just after such a run, and later, and attributes there that
    // the op before takes: as the whole module's.
    let lines: Vec<&str> = base.lines().collect();
    let at = lines.len() / 2;
    for bad in [
        "  isa.bogus dst = %sa[[1, 1]]",
        "  isa.tensor_copy dst = %sa[[1, 1]]",
        "  {op = \"max\"}",
    ] {
        for later in [false, true] {
            let (first, second) = if later {
                (
                    String::new(),
                    format!("{}\n{bad}", lines[at..lines.len() - 1].join("\n")),
                )
            } else {
                (bad.to_string(), lines[at..lines.len() - 1].join("\n"))
            };
            let text = format!("{}\n{run}{first}\n{second}\n}}\n", lines[..at].join("\n"));
            let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
            let (got, out) = run_reader(&text, "lower-to-wire", Emit::WireBin, 1, 4093);
            assert_eq!(out.exit_code, want.exit_code, "{bad}");
            assert_eq!(out.render_diagnostics(), want.render_diagnostics(), "{bad}");
            assert!(got == want.output, "{bad}: output differs");
        }
    }
}

/// The driver on two threads, at its own window size: an op whose last
/// offset comes after a run of comment lines longer than the 16 windows a
/// part looks for an op line in. A part ends inside the run, the next
/// starts with the rest of it and then `+ N`: a syntax error of the cut's,
/// not the input's (which is valid), so the input streams again on one
/// thread and gives the whole module's bytes.
#[test]
fn the_driver_streams_an_op_cut_at_a_blank_run_longer_than_a_part() {
    let base = module(16_000, 3, Arch::V2, 0);
    let lines: Vec<&str> = base.lines().collect();
    let at = (lines.len() * 3 / 4..lines.len())
        .find(|&i| lines[i].trim_start().starts_with("isa.") && !lines[i].contains('{'))
        .expect("an op without attributes");
    let cut = lines[at].rfind(" + ").expect("an offset");
    let (head, tail) = lines[at].split_at(cut);
    // A part reads 16 windows and a sixteenth (16 MiB and 64 KiB) before
    // it looks for a blank cut: the run is longer, so the cut is inside
    // it, and what is left of it in the next part is shorter than a
    // quarter window, which a diagnosis from that part would take as a
    // long run of its own (and so not trust the error after it).
    let run = "\n  // between\n".repeat(((16 << 20) + (160 << 10)) / 14);
    let text = format!(
        "{}\n{head}\n{run}{tail}\n{}\n",
        lines[..at].join("\n"),
        lines[at + 1..].join("\n")
    );
    // Past the first window: among the parts.
    assert!(text.find(&run).unwrap() > chunked_window() * 5 / 4);
    let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
    assert!(want.success(), "{}", want.render_diagnostics());
    let (got, out) = run_reader(&text, "lower-to-wire", Emit::WireBin, 2, 1 << 16);
    assert_eq!(out.exit_code, 0, "{}", out.render_diagnostics());
    assert!(got == want.output, "output differs");
}

/// `text` streamed on one thread in windows of 256 bytes that grow to the
/// default largest, not cut at long blank runs: its `ir` output.
fn uncut_whole_output(text: &str, pipeline: &str) -> Vec<u8> {
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse(pipeline).unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = ChunkOptions {
        window_bytes: 256,
        cut_long_runs: false,
        ..ChunkOptions::new(StreamOptions::new(StreamEmit::Ir))
    };
    let mut out = Vec::new();
    let mut input = Trickle::new(text, 1000);
    run_chunked_named(&mut input, "gen.apir", &mut out, &build, opts)
        .unwrap_or_else(|e| panic!("{e:?}"));
    out
}

/// A kernel whose body holds blank and comment lines and runs past the
/// windows after which a part may be cut at one: a cut there does not
/// parse, and the run is retried on one thread, with the same output.
#[test]
fn a_blank_cut_inside_a_long_kernel_is_retried() {
    let base = module(40, 8, Arch::V2, 1);
    let kernel = base
        .lines()
        .position(|l| l.trim_start().starts_with("gpsimd.kernel"))
        .expect("a kernel");
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    // Blank and comment lines after the kernel's first line: inside its body.
    let filler: Vec<String> = (0..3000)
        .map(|i| {
            if i % 2 == 0 {
                String::new()
            } else {
                "    // inside".to_string()
            }
        })
        .collect();
    lines.splice(kernel + 1..kernel + 1, filler);
    let text = lines.join("\n") + "\n";
    same_as_whole_within(&text, "lower-to-wire", 1, 256, 1000, 64 << 10);
    match chunked_within(
        &text,
        "lower-to-wire",
        StreamEmit::WireBin,
        2,
        256,
        1000,
        64 << 10,
    ) {
        Err(ChunkError::Retry) => {}
        other => panic!("expected a retry, got {:?}", other.map(|o| o.1)),
    }
    driver_gives_the_whole_output(&text, 2, 1000);
}

/// The driver (which retries on one thread, or runs the whole-module
/// path, by itself) writes the whole module's `wire-bin` output for
/// `text` on `threads` threads, read `step` bytes at a time.
fn driver_gives_the_whole_output(text: &str, threads: usize, step: usize) {
    let want = whole(text, "lower-to-wire", Emit::WireBin, false);
    let (got, out) = run_reader(text, "lower-to-wire", Emit::WireBin, threads, step);
    assert_eq!(out.exit_code, 0, "{threads} threads");
    assert!(got == want.output, "{threads} threads");
}

/// A module with many buffers: every part starts from a copy of them, so
/// parts grow with the buffers (5,000: parts of 1.28 MB however small the
/// window, on two threads),
/// and past 65,536 the run stays on one thread; the output is the whole
/// module's either way.
#[test]
fn many_buffers_make_larger_parts_or_one_thread() {
    for (buffers, ops, threaded) in [(5_000usize, 60_000usize, true), (70_000, 1_000, false)] {
        let mut text = String::from("module attributes {arch = \"v2\"} {\n");
        for i in 0..buffers {
            text.push_str(&format!(
                "  %b{i} = mem.sbuf {{partition = 0, byte = 0}} : tile<1x4xf32>\n"
            ));
        }
        for i in 0..ops {
            text.push_str(&format!(
                "  isa.memset dst = %b{}[[4, 1], [1, 4]]\n",
                i % buffers
            ));
        }
        text.push_str("}\n");
        let want = whole(&text, "lower-to-wire", Emit::WireBin, false);
        assert!(want.success(), "{}", want.render_diagnostics());
        let (got, out) = chunked_within(
            &text,
            "lower-to-wire",
            StreamEmit::WireBin,
            2,
            64 << 10,
            1 << 16,
            MAX_WINDOW_BYTES,
        )
        .unwrap_or_else(|e| panic!("{buffers} buffers: {e:?}"));
        assert!(got == want.output, "{buffers} buffers");
        if threaded {
            // About 2.7 MB of ops in parts of 1.28 MB (not of the 64 KiB
            // window, which would make some 40).
            assert!((2..=3).contains(&out.parts), "{} parts", out.parts);
        } else {
            assert_eq!(out.parts, 0);
        }
    }
}

/// An input that says it is past the input limit ([`ReadAgain::length`],
/// as a huge or sparse file does) is rejected having read its first line
/// only, with the diagnostic of the whole-module path, on every emit and
/// pipeline: no window is streamed and nothing is written.
#[test]
fn an_input_known_to_be_past_the_limit_is_read_no_further_than_its_first_line() {
    use apir_compiler::driver::Length;
    use apir_ir::source::MAX_SOURCE_BYTES;
    /// An input of `head` then line ends, `end` bytes in all, claiming
    /// `claims[0]` as its length until it is rewound and `claims[1]` after
    /// (as a pipe's spool learns it); `read`: bytes read since the last
    /// rewind.
    struct Claimed {
        head: &'static [u8],
        end: u64,
        claims: [Length; 2],
        rewound: bool,
        read: u64,
    }
    impl Claimed {
        fn new(head: &'static [u8], end: u64, claims: [Length; 2]) -> Self {
            Claimed {
                head,
                end,
                claims,
                rewound: false,
                read: 0,
            }
        }
    }
    impl Read for Claimed {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let len = (buf.len() as u64).min(self.end - self.read) as usize;
            let buf = &mut buf[..len];
            let head = &self.head[(self.read as usize).min(self.head.len())..];
            let n = head.len().min(buf.len());
            buf[..n].copy_from_slice(&head[..n]);
            buf[n..].fill(b'\n');
            self.read += len as u64;
            Ok(len)
        }
    }
    impl ReadAgain for Claimed {
        fn rewind(&mut self) -> io::Result<()> {
            self.rewound = true;
            self.read = 0;
            Ok(())
        }
        fn length(&mut self) -> Length {
            self.claims[usize::from(self.rewound)]
        }
    }
    let limit = MAX_SOURCE_BYTES as u64;
    for (length, message) in [
        (
            Length::Exactly(1 << 40),
            format!("input is 1099511627776 bytes; the limit is {limit}"),
        ),
        (
            Length::Exactly(limit + 1),
            format!("input is {} bytes; the limit is {limit}", limit + 1),
        ),
        (
            Length::MoreThan(limit),
            format!("input is more than {limit} bytes; the limit is {limit}"),
        ),
    ] {
        for (pipeline, emit) in [("lower-to-wire", Emit::WireBin), ("all", Emit::Json)] {
            let d = Driver::new(Options {
                pipeline: pipeline.into(),
                emit,
                ..Options::default()
            })
            .unwrap();
            const FIRST: &[u8] = b"module attributes {arch = \"v2\"} {\n";
            let mut input = Claimed::new(FIRST, u64::MAX, [length; 2]);
            let mut sink = Vec::new();
            let out = d.run_reader("huge.apir", &mut input, &mut sink).unwrap();
            assert!(
                input.read <= 1 << 16,
                "{length:?}: read {} bytes",
                input.read
            );
            assert_eq!(out.exit_code, 1);
            assert_eq!(out.diagnostics.len(), 1);
            assert_eq!(out.diagnostics[0].message, message);
            let rendered = out.render_diagnostics();
            assert!(rendered.contains("huge.apir:1:1"), "{rendered}");
            if emit == Emit::Json {
                // A JSON consumer gets the document, as for any failure.
                let doc: serde_json::Value = serde_json::from_slice(&sink).unwrap();
                assert_eq!(doc["arch"], serde_json::Value::Null);
                assert_eq!(doc["diagnostics"][0]["message"], message.as_str());
                assert_eq!(doc["diagnostics"][0]["loc"], "huge.apir:1:1");
            } else {
                assert!(sink.is_empty());
            }
        }
    }
    // A pipe's length is known once it is spooled (after the first try):
    // past the limit, that is what is reported, not an error found in its
    // first part (here a syntax error on line 2; the first MiB of the
    // pipe is all that is read).
    for threads in [1, 2] {
        let d = Driver::new(Options {
            pipeline: "lower-to-wire".into(),
            emit: Emit::WireBin,
            threads,
            ..Options::default()
        })
        .unwrap();
        const HEAD: &[u8] = b"module attributes {arch = \"v2\"} {\n  isa.nope\n";
        let claims = [Length::Unknown, Length::MoreThan(limit)];
        let mut input = Claimed::new(HEAD, 1 << 20, claims);
        let out = d.run_reader("pipe", &mut input, &mut Vec::new()).unwrap();
        assert_eq!(out.exit_code, 1);
        let messages: Vec<&str> = out.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [format!(
                "input is more than {limit} bytes; the limit is {limit}"
            )],
            "{threads} threads"
        );
    }
    // Just at the limit it is read (and here fails as text would).
    let d = Driver::new(Options::default()).unwrap();
    let mut input = io::Cursor::new(b"module {\n".to_vec());
    assert_eq!(input.length(), Length::Exactly(9));
    let out = d
        .run_reader("small.apir", &mut input, &mut Vec::new())
        .unwrap();
    assert!(out
        .diagnostics
        .iter()
        .all(|d| !d.message.contains("the limit")));
}

/// The driver's outcome for `text` read from a reader (`Some(threads)`) or
/// read whole (`None`), with statistics and timing asked for.
fn reported(
    text: &str,
    pipeline: &str,
    emit: Emit,
    threads: Option<usize>,
) -> (Vec<u8>, driver::Outcome) {
    let options = Options {
        pipeline: pipeline.into(),
        emit,
        statistics: true,
        timing: true,
        threads: threads.unwrap_or(1),
        ..Options::default()
    };
    match threads {
        None => {
            let out = driver::run(options, Input::text("gen.apir", text));
            (out.output.clone(), out)
        }
        Some(_) => run_reader_with(text, options, 8191),
    }
}

/// An emit that cannot write the module (an operand without descriptor
/// bytes: no pipeline, or one that does not encode) is found streaming,
/// on one thread and in parts, and reported as the input read whole
/// reports it: the same usage error (exit code 2) naming the first such
/// operand at its line, the same report (timing rows, statistics), no
/// output and no JSON document. An error of an earlier phase anywhere in
/// the input is reported instead, as that path does. The input is never
/// held whole: the outcome's source is an excerpt.
#[test]
fn emit_errors_are_diagnosed_streaming_as_read_whole() {
    let plain = module(9_000, 21, Arch::V2, 0);
    assert!(plain.len() > 1 << 20, "more than one window");
    let lowered =
        String::from_utf8(whole(&plain, "lower-to-wire", Emit::Ir, false).output).unwrap();
    assert!(lowered.contains("wire<"));
    let insert = |text: &str, edits: &[(f64, &str)]| -> String {
        let mut lines: Vec<&str> = text.lines().collect();
        let n = lines.len();
        let mut edits = edits.to_vec();
        edits.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (frac, line) in edits {
            lines.insert((n as f64 * frac) as usize, line);
        }
        lines.join("\n") + "\n"
    };
    let bare = "  isa.memset dst = %sa[[8192, 128], [1, 64]]";
    let verify = "  isa.memset dst = %sa[[8192, 128], [1, 70000]]";
    let fold =
        "  isa.tensor_copy dst = %sa[[8192, 64], [1, 64]] + 262144, src = %sa[[8192, 64], [1, 64]]";
    // (text, pipeline, what the whole-module path reports)
    let cases = [
        (plain.clone(), "", "--emit"),
        (plain.clone(), "fold-partition,compact-unit-dims", "--emit"),
        (insert(&lowered, &[(0.7, bare)]), "", "--emit"),
        (
            insert(&lowered, &[(0.3, bare), (0.8, bare)]),
            "canonicalize-ap",
            "--emit",
        ),
        (insert(&lowered, &[(0.3, bare), (0.9, verify)]), "", "70000"),
        (
            insert(&plain, &[(0.85, fold)]),
            "fold-partition",
            "partition",
        ),
    ];
    let mut usage = 0;
    for (c, (text, pipeline, says)) in cases.iter().enumerate() {
        // Every wire emit on one case, `wire-bin` and `json` on the others.
        let emits: &[Emit] = if c == 2 {
            &[Emit::WireBin, Emit::WireHex, Emit::WireDump, Emit::Json]
        } else {
            &[Emit::WireBin, Emit::Json]
        };
        for &emit in emits {
            let (want_out, want) = reported(text, pipeline, emit, None);
            assert!(!want.success(), "case {c}");
            assert!(
                want.render_diagnostics().contains(says),
                "case {c}: {}",
                want.render_diagnostics()
            );
            if want.exit_code == driver::EXIT_USAGE {
                usage += 1;
                assert!(want_out.is_empty(), "case {c}");
            }
            for threads in [1, 2] {
                let (got, out) = reported(text, pipeline, emit, Some(threads));
                let at = format!("case {c}, {emit:?}, {threads} threads");
                assert_eq!(out.exit_code, want.exit_code, "{at}");
                assert_eq!(out.diagnostics, want.diagnostics, "{at}");
                assert_eq!(out.render_diagnostics(), want.render_diagnostics(), "{at}");
                assert!(got == want_out, "{at}: output differs");
                assert_eq!(
                    report_shape(&out.report),
                    report_shape(&want.report),
                    "{at}"
                );
                if want.exit_code == driver::EXIT_USAGE {
                    // The passes ran on the whole module: their statistics.
                    assert!(out.report.contains("Pass statistics"), "{at}");
                }
                assert!(
                    out.sources.file(apir_ir::FileId(0)).is_excerpt(),
                    "{at}: read whole"
                );
            }
        }
    }
    assert_eq!(usage, 4 + 3 * 2);
    // Lowered text needs no pipeline: it streams to the same bytes.
    let (want_out, want) = reported(&lowered, "", Emit::WireBin, None);
    assert!(want.success());
    for threads in [1, 2] {
        let (got, out) = reported(&lowered, "", Emit::WireBin, Some(threads));
        assert!(out.success() && got == want_out);
    }
}

/// The cases of a split input stream and are diagnosed one by one: a case
/// whose emit fails (nothing encoded) reports the usage error the
/// whole-module path (forced by `--print-ir-after-failure`) reports, at
/// its line in the whole file, beside cases that succeed or fail earlier
/// (a syntax error after the emit error in the same case wins).
#[test]
fn emit_errors_in_split_cases_are_reported_as_on_the_whole_module_path() {
    let lowered = String::from_utf8(
        whole(
            &module(300, 23, Arch::V2, 0),
            "lower-to-wire",
            Emit::Ir,
            false,
        )
        .output,
    )
    .unwrap();
    let plain = module(200, 24, Arch::V2, 0);
    let mut syntax: Vec<&str> = plain.lines().collect();
    let n = syntax.len();
    syntax.insert(n - 10, "  isa.memset dst = %sa[[64, 128], [1, 64]");
    let syntax = syntax.join("\n") + "\n";
    let text = [lowered.as_str(), &plain, &lowered, &syntax].join("// -----\n");
    for emit in [Emit::WireBin, Emit::WireHex, Emit::Json] {
        let run = |whole_path: bool| {
            driver::run(
                Options {
                    pipeline: String::new(),
                    emit,
                    split_input_file: true,
                    print_ir_after_failure: whole_path,
                    statistics: true,
                    ..Options::default()
                },
                Input::text("gen.apir", &text),
            )
        };
        let (want, got) = (run(true), run(false));
        assert_eq!(got.exit_code, driver::EXIT_USAGE, "{emit:?}");
        assert_eq!(got.exit_code, want.exit_code, "{emit:?}");
        assert_eq!(got.diagnostics, want.diagnostics, "{emit:?}");
        assert_eq!(
            got.render_diagnostics(),
            want.render_diagnostics(),
            "{emit:?}"
        );
        let shown = got.render_diagnostics();
        assert_eq!(
            shown.matches("has no descriptor bytes").count(),
            1,
            "{shown}"
        );
        assert!(shown.contains("expected"), "{shown}");
        assert_eq!(got.output, want.output, "{emit:?}");
    }
}

/// An op without operands, then one that has only its name before a run
/// of comment lines long enough to end a window at: looking for a role
/// after the first op's name reads the second's name and the blanks after
/// it to the window's end, which says nothing of where the first op ends.
/// Every window size streams every op, as the whole text does.
#[test]
fn a_look_for_a_role_past_the_item_is_no_long_blank_run() {
    let mut text = String::from(
        "module attributes {arch = \"v2\"} {\n  %a = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.custom {name = \"one\"}\n  isa.custom\n",
    );
    for i in 0..40 {
        text.push_str(&format!("  // comment line {i:04} of a long run\n"));
    }
    text.push_str("  isa.custom {name = \"three\"}\n}\n");
    let want = whole(&text, "", Emit::Ir, false);
    assert!(want.success());
    let shown = String::from_utf8(want.output.clone()).unwrap();
    assert_eq!(shown.matches("isa.custom").count(), 3, "{shown}");
    for window in 32..text.len() + 10 {
        let (got, _) = chunked(&text, "", StreamEmit::Ir, 1, window, 7)
            .unwrap_or_else(|e| panic!("window {window}: {e:?}"));
        assert!(
            got == want.output,
            "window {window}: {}",
            String::from_utf8_lossy(&got)
        );
    }
}
