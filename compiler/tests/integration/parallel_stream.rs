//! The multi-threaded streaming driver gives exactly the one-thread result:
//! the same bytes for every emit, the same statistics and warnings, and the
//! same failure; inputs it cannot cut safely fall back to one thread.

use apir_compiler::stream::{run_streaming, StreamEmit, StreamOptions, StreamOutput};
use apir_compiler::{Pipeline, Registry};
use apir_ir::printer::print_module;
use apir_ir::target::Arch;
use apir_ir::SourceMap;
use apir_synth::{generate, GenOptions};

const EMITS: [StreamEmit; 5] = [
    StreamEmit::Ir,
    StreamEmit::WireBin,
    StreamEmit::WireHex,
    StreamEmit::WireDump,
    StreamEmit::Json,
];

/// Part size small enough to cut the test modules into many parts.
const PART: usize = 4096;

fn run(text: &str, pipeline: &str, emit: StreamEmit, threads: usize) -> Option<StreamOutput> {
    let mut sources = SourceMap::new();
    let file = sources.add("gen.apir", text.to_string());
    let registry = Registry::builtin();
    let pipeline = Pipeline::parse(pipeline).unwrap();
    let build = || registry.build(&pipeline).ok();
    let opts = StreamOptions {
        threads,
        part_bytes: PART,
        ..StreamOptions::new(emit)
    };
    run_streaming(&sources, file, 0..text.len(), &build, opts)
}

fn module(ops: usize, seed: u64, arch: Arch, shapes: Option<usize>, kernels: usize) -> String {
    print_module(&generate(&GenOptions {
        ops,
        seed,
        arch,
        distinct_shapes: shapes,
        kernels,
    }))
}

/// Runs `text` on 1 and on `threads` threads and checks the two agree;
/// returns the parts of the multi-threaded run.
fn same_as_one_thread(text: &str, pipeline: &str, emit: StreamEmit, threads: usize) -> usize {
    let one = run(text, pipeline, emit, 1).expect("one thread streams");
    let many = run(text, pipeline, emit, threads).expect("several threads stream");
    assert_eq!(one.parts, 1);
    assert!(
        one.output == many.output,
        "{emit:?} on {threads} threads differs from one thread"
    );
    assert_eq!(one.report.statistics, many.report.statistics, "{emit:?}");
    assert_eq!(one.report.warnings, many.report.warnings, "{emit:?}");
    let names = |o: &StreamOutput| -> Vec<String> {
        o.report.timings.iter().map(|t| t.0.clone()).collect()
    };
    assert_eq!(names(&one), names(&many));
    many.parts
}

#[test]
fn every_emit_matches_one_thread() {
    for (arch, seed) in [(Arch::V2, 7), (Arch::V3, 8), (Arch::V4, 9)] {
        let text = module(1500, seed, arch, None, 0);
        for emit in EMITS {
            for threads in [2, 3] {
                let parts = same_as_one_thread(&text, "lower-to-wire", emit, threads);
                assert!(parts > 10, "{arch:?} {emit:?}: only {parts} parts");
            }
        }
        // The default pipeline (parse, verify, print) too.
        assert!(same_as_one_thread(&text, "", StreamEmit::Ir, 2) > 10);
    }
}

#[test]
fn memo_statistics_add_up_over_the_parts() {
    // Few distinct shapes, every elementwise op looked up in the memo:
    // canonicalize-ap's forks share one memo, and its cache hits over all
    // parts equal the one-thread count.
    let text = module(3000, 11, Arch::V2, Some(12), 0);
    let pipeline = MEMO_PIPELINE;
    let one = run(&text, pipeline, StreamEmit::WireBin, 1).unwrap();
    let hits = one
        .report
        .statistics
        .iter()
        .find(|(name, _)| name.starts_with("canonicalize-ap"))
        .and_then(|(_, s)| s.get("cache-hits"))
        .map(|s| s.value)
        .unwrap();
    assert!(hits > 0, "the module exercises the memo");
    for threads in [2, 4] {
        assert!(same_as_one_thread(&text, pipeline, StreamEmit::WireBin, threads) > 10);
    }
}

#[test]
fn kernels_are_never_cut() {
    let text = module(1500, 5, Arch::V2, None, 6);
    assert!(text.contains("gpsimd.kernel"));
    assert!(same_as_one_thread(&text, "lower-to-wire", StreamEmit::Ir, 2) > 10);
}

#[test]
fn a_cut_inside_an_op_falls_back_to_one_thread() {
    // Operands continued on the next line at the ops' indentation: every
    // such line looks like an op start, and the part before it ends inside
    // an op.
    let text = module(1500, 3, Arch::V2, None, 0).replace(", src = ", ",\n  src = ");
    assert!(text.matches("\n  src = ").count() > 100);
    for emit in EMITS {
        assert_eq!(same_as_one_thread(&text, "lower-to-wire", emit, 2), 1);
    }
}

/// `text` with `line` inserted before the op line nearest the middle.
fn insert_mid(text: &str, line: &str) -> String {
    let mid = text.len() / 2;
    let at = mid + text[mid..].find("\n  isa.").unwrap() + 1;
    format!("{}{line}\n{}", &text[..at], &text[at..])
}

/// canonicalize-ap looking every elementwise op up in its memo.
const MEMO_PIPELINE: &str =
    "canonicalize-ap{always=true},fold-partition,compact-unit-dims,select-descriptor,encode-wire";

#[test]
fn a_buffer_among_the_ops_falls_back_to_one_thread() {
    let base = module(1500, 4, Arch::V2, Some(12), 0);
    let text = insert_mid(
        &base,
        "  %late = mem.sbuf {partition = 0, byte = 0x1f000} : tile<128x16xf32>",
    );
    assert_eq!(
        same_as_one_thread(&text, "lower-to-wire", StreamEmit::WireHex, 2),
        1
    );
    // The parts that ran before the fallback leave nothing in the passes of
    // the one-thread run: memo statistics are a fresh run's.
    assert_eq!(
        same_as_one_thread(&text, MEMO_PIPELINE, StreamEmit::WireBin, 2),
        1
    );
    // A buffer defined twice is an error either way (the caller then runs
    // the whole-module path, which reports it).
    let dup = insert_mid(
        &base,
        "  %sa = mem.sbuf {partition = 0, byte = 0x1f000} : tile<128x16xf32>",
    );
    assert!(run(&dup, "lower-to-wire", StreamEmit::WireBin, 1).is_none());
    assert!(run(&dup, "lower-to-wire", StreamEmit::WireBin, 2).is_none());
}

#[test]
fn an_error_in_a_late_part_fails_as_on_one_thread() {
    let base = module(1500, 6, Arch::V2, None, 0);
    let at = base.rfind("\n  isa.").unwrap() + 1;
    for bad in [
        // Syntax.
        "  isa.tensor_copy dst = %sa[[8192, 1], [1, 4]] + 0, src = \n",
        // Verifier: an unknown role.
        "  isa.tensor_copy dst = %sa[[8192, 1], [1, 4]], srcx = %sa[[8192, 1], [1, 4]]\n",
        // A pass: a partition step that is not the free size.
        "  isa.tensor_copy dst = %sa[[3, 2], [1, 4]], src = %sa[[8192, 2], [1, 4]]\n",
    ] {
        let text = format!("{}{bad}{}", &base[..at], &base[at..]);
        assert!(
            run(&text, "lower-to-wire", StreamEmit::WireBin, 1).is_none(),
            "{bad}"
        );
        assert!(
            run(&text, "lower-to-wire", StreamEmit::WireBin, 2).is_none(),
            "{bad}"
        );
    }
}

#[test]
fn small_inputs_stream_on_one_thread() {
    let text = module(10, 1, Arch::V2, None, 0);
    assert!(text.len() < 2 * PART);
    assert_eq!(
        same_as_one_thread(&text, "lower-to-wire", StreamEmit::WireBin, 2),
        1
    );
}

/// A memset of `k` ops' work: a count of `k` outside four unmergeable dims,
/// which canonicalize-ap splits into `k` ops.
fn split_op(k: u64) -> String {
    format!("  isa.memset dst = %sa[[8192, 1], [0, {k}], [64, 2], [16, 2], [4, 2], [1, 2]] {{value = 1}}")
}

/// `text` with `line` inserted before the op line nearest `frac` of the way.
fn insert_at(text: &str, frac: f64, line: &str) -> String {
    let at = (text.len() as f64 * frac) as usize;
    let at = at + text[at..].find("\n  isa.").unwrap() + 1;
    format!("{}{line}\n{}", &text[..at], &text[at..])
}

/// The lower-to-wire passes with canonicalize-ap's split budget at `b`.
fn budget_pipeline(b: u64) -> String {
    format!("canonicalize-ap{{split-budget={b}}},fold-partition,compact-unit-dims,select-descriptor,encode-wire")
}

#[test]
fn the_split_budget_is_judged_in_program_order_on_any_thread_count() {
    let base = module(1500, 12, Arch::V2, None, 0);
    // Accepted on one thread thanks to the ops before it (4 each), but a
    // part's fork, starting from nothing, refuses it: the module streams
    // on one thread and gives the one-thread bytes.
    let late = insert_at(&base, 0.9, &split_op(2000));
    let pipeline = budget_pipeline(0);
    let one = run(&late, &pipeline, StreamEmit::WireBin, 1).expect("fits on one thread");
    let split = |o: &StreamOutput| {
        o.report
            .statistics
            .iter()
            .find(|(name, _)| name.starts_with("canonicalize-ap"))
            .and_then(|(_, s)| s.get("ops-split"))
            .map(|s| s.value)
    };
    assert_eq!(split(&one), Some(1));
    assert_eq!(
        same_as_one_thread(&late, &pipeline, StreamEmit::WireBin, 2),
        1
    );
    // Two splits in different parts, each within the budget on its own,
    // the second over it after the first: one thread refuses the second
    // (and select-descriptor then fails the module). The forks each took
    // theirs, and the join must see that the one-thread run would not.
    let two = insert_at(
        &insert_at(&base, 0.3, &split_op(2000)),
        0.33,
        &split_op(2000),
    );
    let pipeline = budget_pipeline(2000);
    assert!(run(&two, &pipeline, StreamEmit::WireBin, 1).is_none());
    assert!(run(&two, &pipeline, StreamEmit::WireBin, 2).is_none());
    // With room for both, both are taken on any thread count, in parts.
    let roomy = budget_pipeline(4000);
    assert!(same_as_one_thread(&two, &roomy, StreamEmit::WireBin, 2) > 10);
}
