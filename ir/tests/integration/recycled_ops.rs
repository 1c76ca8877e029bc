//! Ops read into the entries a batch before left (`Arena::recycle`, as the
//! streaming driver does between batches) are the ops a whole-module parse
//! reads: every field, spans and attribute spans included, whatever op held
//! the entry before.

use apir_ir::{
    parse_str, Item, Module, Op, OpData, OpKind, Operand, ParseOptions, SourceMap, StreamParser,
};
use proptest::prelude::*;

const HEADER: &str = r#"module @recycled attributes {arch = "v3"} {
  %a = mem.sbuf {partition = 0, byte = 0} : tile<128x4x8xbf16>
  %b = mem.psum {partition = 0, byte = 0x800} : tile<64x128xf32>
  %i = mem.sbuf {partition = 32, byte = 0x100} : tile<32x16xi32>
  %x = mem.sbuf {partition = 0, byte = 0x2000} : tile<128x2048xf32>
  %h = mem.hbm {addr = 0xFFFFFFFFFFFF0000} : tensor<16x16xu8>
"#;

/// Top-level items that differ in every field an entry keeps: operand
/// counts (past the inline room too), dims past the inline room, lowered forms, `as` keys, attributes
/// before, after or not at all, in the printed and the general spelling,
/// and kernels with reads and writes inside.
const LINES: &[&str] = &[
    "isa.tensor_copy {note = 1} dst = %b[[128, 64], [1, 128]], src = %a[[32, 64], [-8, 4], [1, 8]] + 24",
    "isa.local_gather dst = %a[[32, 32], [1, 32]], src = %a[[32, 32], [1, 32]], index = %i[[16, 32], [1, 16]]",
    "isa.custom dst = %a[[32, 1], [1, 32]] as \"NEURON_ISA_TPB_TENSOR2D\", src = %b[[128, 1], [1, 128]] - 0 as \"NEURON_ISA_TPB_TENSOR4D\" {name = \"my_op\"}",
    "isa.tensor_copy dst = %a[[32, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 8]], src = %a[[32, 1], [1, 8]]",
    "isa.custom a = %a[[32, 1], [1, 32]] as \"NEURON_ISA_TPB_TENSOR2D\", b = %a[[32, 1], [1, 32]] as \"NEURON_ISA_TPB_TENSOR2D\", c = %b[[128, 1], [1, 128]] as \"NEURON_ISA_TPB_TENSOR2D\", d = %b[[128, 1], [1, 128]] + 3 as \"NEURON_ISA_TPB_TENSOR4D\"",
    "isa.tensor_copy dst = %b[[512, 128], [1, 512]] fold<partition = 0, byte = 0x0, channels = 128> slots<[1, 512]> kind<MEM_PATTERN4D> wire<\"0000000201000100010001000002010001000100\">, src = %x[[2048, 128], [4, 512]] + 1 fold<partition = 0, byte = 0x4, channels = 128> slots<[4, 512]> kind<TENSOR4D> wire<\"0400000004000100010001000002010001000100\">",
    "isa.tensor_reduce dst = %x[[6, 128], [1, 1]], src = %x[[2048, 128], [1, 2048]] {op = \"add\", axis = \"X\"}",
    "isa.tensor_reduce dst = %x[[6, 128], [1, 1]], src = %x[[2048, 128], [1, 2048]] {op=\"max\",axis = \"X\"}",
    "isa.tensor_tensor {op = \"max\", a = 1, b = true, c = \"\", d = 5} dst = %x[[2048, 2]], src0 = %x[[2048, 2]], src1 = %x[[2048, 2]]",
    "isa.memset dst = %x[[2048, 1], [1, 4]] {}",
    "isa.iota dst = %x[[2048, 1], [1, 4]]",
    "gpsimd.kernel @k {core = 1} {\n    gpsimd.read %h[[16, 16], [1, 16]] {accessor = \"stream\"}\n    gpsimd.write %h[[-1, 256]] + 255\n  }",
    "gpsimd.kernel @e {\n  }",
];

/// The module of `picks` (indices into [`LINES`]); kernels are renamed so
/// that each is defined once.
fn module_text(picks: &[usize]) -> String {
    let mut text = HEADER.to_string();
    for (n, &i) in picks.iter().enumerate() {
        let line = LINES[i]
            .replace("@k ", &format!("@k{n} "))
            .replace("@e ", &format!("@e{n} "));
        text.push_str("  ");
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str("}\n");
    text
}

/// `a` of module `ma` and `b` of `mb` hold the same op: every field equal,
/// a kernel's body compared op by op (block ids differ).
fn same_op(ma: &Module, a: Op, mb: &Module, b: Op) -> Result<(), String> {
    let (da, db): (&OpData, &OpData) = (&ma.ops[a], &mb.ops[b]);
    let fields = |d: &OpData| {
        let operands: Vec<&Operand> = d.operands.iter().collect();
        format!(
            "{:?} {operands:?} {:?} {:?} {:?}",
            d.span,
            d.attrs,
            d.attr_spans,
            d.operands.len()
        )
    };
    match (da.kind, db.kind) {
        (OpKind::Kernel { name: na, body: ba }, OpKind::Kernel { name: nb, body: bb }) => {
            if ma.str(na) != mb.str(nb) {
                return Err(format!("kernel {} vs {}", ma.str(na), mb.str(nb)));
            }
            let (oa, ob) = (&ma.blocks[ba].ops, &mb.blocks[bb].ops);
            if oa.len() != ob.len() {
                return Err(format!(
                    "kernel bodies of {} and {} ops",
                    oa.len(),
                    ob.len()
                ));
            }
            for (&x, &y) in oa.iter().zip(ob) {
                same_op(ma, x, mb, y)?;
            }
        }
        (ka, kb) if ka != kb => return Err(format!("{ka:?} vs {kb:?}")),
        _ => {}
    }
    let (fa, fb) = (fields(da), fields(db));
    if fa != fb {
        return Err(format!("stream: {fa}\nwhole: {fb}"));
    }
    Ok(())
}

/// Streams `text`, recycling the ops every `every` items as the driver
/// does between batches, and compares each op with the whole parse's.
fn check(text: &str, every: usize) -> Result<(), String> {
    let (whole, _) = parse_str("t.apir", text, ParseOptions::default())
        .map_err(|(d, _)| format!("{:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>()))?;
    let expected: Vec<Op> = whole.top_ops().collect();
    let mut sources = SourceMap::new();
    let file = sources.add("t.apir", text);
    let mut sp = StreamParser::new(&sources, file, 0..text.len(), ParseOptions::default());
    let (mut seen, mut items) = (0, 0);
    while let Some(item) = sp.next_item() {
        let item = item.map_err(|()| format!("{:?}", sp.errors()))?;
        items += 1;
        if let Item::Op(op) = item {
            let want = *expected.get(seen).ok_or("more ops than the whole parse")?;
            same_op(sp.module(), op, &whole, want).map_err(|e| format!("op {seen}: {e}"))?;
            seen += 1;
        }
        if items % every == 0 {
            sp.module().clear_batch();
        }
    }
    if seen != expected.len() {
        return Err(format!("{seen} ops, the whole parse {}", expected.len()));
    }
    Ok(())
}

#[test]
fn every_line_after_every_line_reads_as_a_whole_parse() {
    for a in 0..LINES.len() {
        for b in 0..LINES.len() {
            let text = module_text(&[a, b, a, b]);
            for every in [1, 2, 3] {
                check(&text, every)
                    .unwrap_or_else(|e| panic!("lines {a}, {b}, every {every}: {e}"));
            }
        }
    }
}

proptest! {
    #[test]
    fn recycled_entries_read_as_a_whole_parse(
        picks in prop::collection::vec(0..LINES.len(), 1..24),
        every in 1usize..6,
    ) {
        let text = module_text(&picks);
        prop_assert_eq!(check(&text, every), Ok(()));
    }
}
