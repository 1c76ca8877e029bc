//! Every lowering pass keeps what each operand touches: the reference
//! evaluator enumerates the same `(memory, partition, byte)` sequence on the
//! logical access pattern and on the lowered forms, on the corpus and on
//! random access patterns. Also checks idempotence.

use apir_compiler::Compilation;
use apir_ir::lowering::{decoded_walk, lowered_walk, role_choice, validate_bytes};
use apir_ir::{
    logical_addresses, print_module, AccessPattern, Address, Arch, Dtype, Memory, Module, OpKind,
    Walk,
};
use proptest::prelude::*;

const LOWERING: &str = "lower-to-wire";

/// The four passes that lower without reshaping ops: random operands that
/// do not fit must meet the reference error here (canonicalize-ap, which
/// would make them fit, has its own property tests).
const FOUR_PASSES: &str = "fold-partition,compact-unit-dims,select-descriptor,encode-wire";

fn o_index(m: &Module, op: apir_ir::Op, o: &apir_ir::Operand) -> usize {
    m.ops[op]
        .operands
        .iter()
        .position(|x| std::ptr::eq(x, o))
        .unwrap()
}

/// Asserts that `walk` visits exactly `expected`, in order (compared as it
/// goes: the corpus's full-tile operands visit a million addresses each).
fn assert_walks(expected: &[Address], walk: &Walk, what: &str) {
    let mut at = 0;
    walk.visit(|a| {
        assert_eq!(expected.get(at), Some(&a), "{what}: address {at}");
        at += 1;
    })
    .unwrap();
    assert_eq!(at, expected.len(), "{what}: the walk stops early");
}

/// Asserts that every ISA operand's lowered walk equals its logical walk.
fn assert_same_addresses(m: &Module) {
    for op in m.top_ops() {
        if !matches!(m.ops[op].kind, OpKind::Isa(_) | OpKind::Custom) {
            continue;
        }
        for o in &m.ops[op].operands {
            assert!(o.lowered().is_some(), "operand was not lowered");
            let logical = logical_addresses(m, o).unwrap();
            let lowered = lowered_walk(m, o).unwrap();
            assert_walks(&logical, &lowered, m.str(o.role));
            // The bytes alone (plus channels and element size) walk the same addresses.
            let l = o.lowered().unwrap();
            let (kind, bytes, fold) = (l.kind.unwrap(), l.wire.as_ref().unwrap(), l.fold.unwrap());
            if kind.slots() == 4
                && apir_ir::target::descriptor::is_two_window(u32::from_le_bytes([
                    bytes[0], bytes[1], bytes[2], bytes[3],
                ]))
            {
                continue; // the gather source walks through its index window
            }
            let elem = m.buffers[o.buffer].dtype.bytes();
            let decoded = decoded_walk(bytes, kind, m.arch, fold.channels, elem).unwrap();
            assert_walks(
                &logical,
                &decoded,
                &format!("decoded bytes of {}", m.str(o.role)),
            );
            // And they pass the arch's validators for the role.
            let choice = role_choice(m, op, o_index(m, op, o)).unwrap();
            validate_bytes(
                bytes,
                &choice,
                m.buffers[o.buffer].dtype,
                m.arch,
                fold.channels,
            )
            .unwrap();
        }
    }
}

#[test]
fn corpus_keeps_addresses_and_is_idempotent() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut c = Compilation::parse(&path.to_string_lossy(), &text, None)
            .map_err(|e| e.into_error())
            .unwrap();
        if c.run(LOWERING).is_err() {
            continue; // files whose diagnostics are the point (start-rule.apir)
        }
        assert_same_addresses(&c.module);
        let once = print_module(&c.module);
        c.run(LOWERING).unwrap();
        assert_eq!(
            print_module(&c.module),
            once,
            "second run changed {}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} corpus files lowered");
}

/// A legal on-chip operand: channels and start partition per the start rule,
/// free dims inside the partition (some unit, some negative).
fn on_chip_case() -> impl Strategy<Value = (Memory, Dtype, u32, Vec<(i64, u64)>, u64)> {
    (
        prop_oneof![Just(Memory::Sbuf), Just(Memory::Psum)],
        prop_oneof![Just(Dtype::F32), Just(Dtype::Bf16), Just(Dtype::U8)],
        prop_oneof![
            Just((0u32, 128u64)),
            Just((64, 64)),
            Just((0, 64)),
            Just((32, 32)),
            Just((96, 1)),
            Just((0, 1))
        ],
        prop::collection::vec((1u64..5, prop::bool::ANY, prop::bool::ANY), 0..6),
    )
        .prop_map(|(mem, dtype, (start, channels), dims)| {
            // Build the free dims row-major over a dense box, then flip some.
            let mut steps = Vec::new();
            let mut stride = 1i64;
            for &(n, _, _) in dims.iter().rev() {
                steps.push(stride);
                stride *= n as i64;
            }
            steps.reverse();
            let free = stride as u64 + 3;
            let mut off = 0u64;
            let mut out = vec![(free as i64, channels)];
            for ((n, unit, neg), step) in dims.into_iter().zip(steps) {
                let n = if unit { 1 } else { n };
                if neg && n > 1 {
                    off += step as u64 * (n - 1);
                    out.push((-step, n));
                } else {
                    out.push((step, n));
                }
            }
            (mem, dtype, start, out, off + free * u64::from(start) + 1)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_operands_keep_addresses((mem, dtype, start, dims, off) in on_chip_case(), arch in prop_oneof![Just(Arch::V2), Just(Arch::V3), Just(Arch::V4)]) {
        let free = dims[0].0 as u64;
        let mut m = Module::new(arch);
        let bd = m.buffer_data("x", mem, 0, 0, &[128, free], dtype);
        let b = m.add_buffer(bd);
        // The op needs two roles; use the same pattern for both.
        let ap = AccessPattern::new(&dims, (off - 1) as i64);
        let dst = m.operand("dst", b, ap.clone());
        let src = m.operand("src", b, ap);
        let copy = apir_ir::target::IsaOp::from_name("isa.tensor_copy").unwrap();
        m.add_op(Module::op_data(OpKind::Isa(copy), [dst, src]));
        apir_ir::verify(&m).unwrap();
        let surviving = dims[1..].iter().filter(|d| d.1 != 1).count();
        let mut c = Compilation::from_module(m);
        if surviving > 4 {
            // More surviving free dims than TENSOR4D has slots: the reference error.
            let err = c.run(FOUR_PASSES).unwrap_err().to_string();
            prop_assert!(err.contains(&format!("Illegal ISA memory access dimension: {}, which must be in range of [1, 4]D tensor for ISA mem pattern", surviving + 1)), "{}", err);
            return Ok(());
        }
        c.run(FOUR_PASSES).unwrap();
        assert_same_addresses(&c.module);
        let op = c.module.top_ops().next().unwrap();
        let fold = c.module.ops[op].operands[0].lowered().unwrap().fold.unwrap();
        prop_assert_eq!((fold.partition, u64::from(fold.channels)), (start, dims[0].1));
        let text = print_module(&c.module);
        let (reparsed, _) = apir_ir::parse_str("t", &text, Default::default()).unwrap();
        prop_assert_eq!(print_module(&reparsed), text);
    }
}
