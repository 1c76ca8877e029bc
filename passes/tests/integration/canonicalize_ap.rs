//! `canonicalize-ap` on whole modules: program order and locations of split
//! ops, op-by-op runs (the streaming driver's way) against whole-module
//! runs, and the memo's lifetime.

use apir_ir::{parse_str, print_module, Item, Module, Pass, PassContext, Statistics};
use apir_passes::CanonicalizeAp;

const TEXT: &str = r#"module @m attributes {arch = "v2"} {
  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x256xf32>
  isa.tensor_tensor dst = %x[[256, 128], [128, 2], [32, 2], [8, 2], [1, 4]], src0 = %x[[256, 128], [128, 2], [32, 2], [8, 2], [1, 4]], src1 = %x[[256, 128], [100, 2], [20, 2], [5, 2], [1, 4]] {op = "add"}
  %y = mem.sbuf {partition = 0, byte = 0x400} : tile<128x256xf32>
  isa.memset dst = %y[[256, 128], [64, 2], [32, 2], [16, 2], [8, 2], [1, 8]] {value = 1}
  isa.transpose dst = %y[[256, 128], [1, 128]], src = %x[[256, 128], [1, 128]]
  isa.tensor_tensor dst = %y[[256, 128], [128, 2], [32, 2], [8, 2], [1, 4]] + 1, src0 = %x[[256, 128], [128, 2], [32, 2], [8, 2], [1, 4]], src1 = %x[[256, 128], [100, 2], [20, 2], [5, 2], [1, 4]] + 2 {op = "add"}
}
"#;

fn parse() -> Module {
    parse_str("m.apir", TEXT, Default::default()).unwrap().0
}

fn run(pass: &mut CanonicalizeAp, m: &mut Module) -> Statistics {
    let mut cx = PassContext::new();
    pass.run(m, &mut cx).unwrap();
    apir_ir::verify(m).unwrap();
    cx.statistics().clone()
}

fn stat(stats: &Statistics, name: &str) -> u64 {
    stats.get(name).map_or(0, |s| s.value)
}

#[test]
fn split_ops_take_the_original_place_and_location() {
    let mut m = parse();
    let spans: Vec<_> = m.top_ops().map(|op| m.ops[op].span).collect();
    let stats = run(&mut CanonicalizeAp::new(false), &mut m);
    assert_eq!(stat(&stats, "ops-split"), 2);
    assert_eq!(stat(&stats, "ops-rewritten"), 1);
    assert_eq!(stat(&stats, "cache-hits"), 1);
    // Buffers stay where they were; each split op's two pieces stand where
    // it stood, at its location.
    let kinds: Vec<&str> = m
        .body
        .iter()
        .map(|item| match item {
            Item::Buffer(_) => "buffer",
            Item::Op(op) => m.ops[*op].kind.name(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "buffer",
            "isa.tensor_tensor",
            "isa.tensor_tensor",
            "buffer",
            "isa.memset",
            "isa.transpose",
            "isa.tensor_tensor",
            "isa.tensor_tensor"
        ]
    );
    let got: Vec<_> = m.top_ops().map(|op| m.ops[op].span).collect();
    assert_eq!(
        got,
        [spans[0], spans[0], spans[1], spans[2], spans[3], spans[3]]
    );
    // The second piece of the last op: offsets moved by the outer steps.
    let last = m.top_ops().last().unwrap();
    let offsets: Vec<i64> = m.ops[last].operands.iter().map(|o| o.ap.offset).collect();
    assert_eq!(offsets, [129, 128, 102]);
}

/// Running the pass op by op on modules that hold the buffers and one op
/// (as the streaming driver does), with one pass value, gives the same ops
/// and statistics as one run on the whole module.
#[test]
fn op_by_op_equals_whole_module() {
    let mut whole = parse();
    let whole_stats = run(&mut CanonicalizeAp::new(false), &mut whole);

    let original = parse();
    let mut pass = CanonicalizeAp::new(false);
    let mut cx = PassContext::new();
    let mut printed = Vec::new();
    for op in original.top_ops() {
        let mut one = original.clone();
        one.retain_ops(None, |o, _| o == op);
        assert_eq!(one.stored_ops(), 1);
        pass.run(&mut one, &mut cx).unwrap();
        printed.extend(
            print_module(&one)
                .lines()
                .filter(|l| l.starts_with("  isa."))
                .map(String::from),
        );
    }
    let expected: Vec<String> = print_module(&whole)
        .lines()
        .filter(|l| l.starts_with("  isa."))
        .map(String::from)
        .collect();
    assert_eq!(printed, expected);
    assert_eq!(cx.statistics(), &whole_stats);
}

#[test]
fn the_memo_lives_with_the_pass_value() {
    let mut pass = CanonicalizeAp::new(false);
    let first = run(&mut pass, &mut parse());
    let second = run(&mut pass, &mut parse());
    assert_eq!(stat(&first, "cache-hits"), 1);
    // Every shape is known to this value now.
    assert_eq!(stat(&second, "cache-hits"), 3);
    // A new value starts empty.
    let fresh = run(&mut CanonicalizeAp::new(false), &mut parse());
    assert_eq!(fresh, first);
}

#[test]
fn statistics_are_absent_without_elementwise_ops() {
    let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.transpose dst = %x[[64, 128], [1, 64]], src = %x[[64, 128], [1, 64]]\n}\n";
    let mut m = parse_str("t.apir", text, Default::default()).unwrap().0;
    let stats = run(&mut CanonicalizeAp::new(true), &mut m);
    assert!(stats.is_empty(), "{stats:?}");
    assert_eq!(print_module(&m), text);
}
