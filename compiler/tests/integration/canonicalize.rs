//! Property tests of `canonicalize-ap` through `lower-to-wire`: random
//! elementwise ops with up to 8 free dims and counts up to 2^20. After the
//! pipeline either every emitted descriptor validates and, role by role, the
//! concatenated visited addresses of the resulting ops are the original
//! op's, or the pass left the op unchanged and the reference error is
//! reported. Never a panic, never a silent change of semantics.
//!
//! "Concatenated addresses" are compared lane by lane: the evaluator walks
//! an op's partitions outermost, while the ops of a split each walk every
//! partition. Every partition of an operand walks the same free addresses,
//! so each op must walk the original's partitions (memory, first partition,
//! channel count), and the concatenation of the ops' sequences in one
//! partition must be the original's sequence there. With one channel this
//! is the plain concatenation.

use apir_compiler::Compilation;
use apir_ir::lowering::{decoded_walk, role_choice, validate_bytes};
use apir_ir::target::IsaOp;
use apir_ir::{
    logical_walk, print_module, AccessPattern, Address, Arch, Dtype, Memory, Module, OpKind,
};
use apir_passes::canonicalize_ap::split::MAX_SPLIT_OPS;
use proptest::prelude::*;

const REFERENCE: &str = "fold-partition,compact-unit-dims,select-descriptor,encode-wire";
const LOWER: &str = "lower-to-wire";
const ALWAYS: &str =
    "canonicalize-ap{always=true},fold-partition,compact-unit-dims,select-descriptor,encode-wire";

/// The elementwise ops and their roles (all SBUF-capable).
const OPS: &[(&str, &[&str])] = &[
    ("isa.tensor_copy", &["dst", "src"]),
    ("isa.tensor_copy_predicated", &["dst", "src", "predicate"]),
    ("isa.memset", &["dst"]),
    ("isa.reciprocal", &["dst", "src"]),
    ("isa.tensor_tensor", &["dst", "src0", "src1"]),
    ("isa.tensor_scalar", &["dst", "src"]),
];

/// Largest total of visited elements (channels x free elements), so that
/// enumerating addresses stays cheap.
const MAX_ELEMENTS: u64 = 1 << 20;

/// How one operand walks the joint space.
#[derive(Clone, Debug)]
struct OperandParams {
    /// Row-major contiguous steps (every merge allowed) or random ones.
    dense: bool,
    /// Random step choices, one per dim.
    steps: Vec<i64>,
    /// Which allowed merges to write merged (bit i: dims i and i + 1).
    merge_mask: u8,
    /// Insert a unit dim at this position (mod len + 1).
    unit_at: Option<usize>,
    dtype: Dtype,
}

#[derive(Clone, Debug)]
struct Case {
    arch: Arch,
    op: usize,
    channels: u64,
    nums: Vec<u64>,
    operands: Vec<OperandParams>,
}

fn num() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => 1u64..=4,
        4 => 1u64..=64,
        1 => 60000u64..=(1 << 20),
        1 => (14u32..=20).prop_map(|e| 1u64 << e),
    ]
}

fn operand_params() -> impl Strategy<Value = OperandParams> {
    (
        prop::bool::weighted(0.5),
        prop::collection::vec(
            prop_oneof![
                Just(0i64),
                Just(1),
                Just(2),
                Just(3),
                Just(-1),
                Just(-2),
                Just(5),
                Just(64)
            ],
            8,
        ),
        any::<u8>(),
        prop::option::weighted(0.3, 0usize..9),
        prop_oneof![Just(Dtype::U8), Just(Dtype::Bf16), Just(Dtype::F32)],
    )
        .prop_map(|(dense, steps, merge_mask, unit_at, dtype)| OperandParams {
            dense,
            steps,
            merge_mask,
            unit_at,
            dtype,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(Arch::V2), Just(Arch::V3), Just(Arch::V4)],
        0..OPS.len(),
        prop_oneof![Just(1u64), Just(2), Just(32), Just(64), Just(128)],
        prop::collection::vec(num(), 1..=8),
        prop::collection::vec(operand_params(), 3),
    )
        .prop_map(|(arch, op, channels, nums, operands)| Case {
            arch,
            op,
            channels,
            nums,
            operands,
        })
}

/// Reach of free dims past their start (positive steps) and before it
/// (negative steps), in elements.
fn reach(dims: &[(i64, u64)]) -> (u64, u64) {
    let mut pos = 0u64;
    let mut neg = 0u64;
    for &(s, n) in dims {
        let r = s.unsigned_abs().saturating_mul(n - 1);
        if s < 0 {
            neg = neg.saturating_add(r);
        } else {
            pos = pos.saturating_add(r);
        }
    }
    (pos, neg)
}

/// Builds the module of a case: one buffer per operand (each within a third
/// of a partition), the op at partition 0.
fn build(case: &Case) -> Module {
    let (name, roles) = OPS[case.op];
    let mut nums = case.nums.clone();
    // Keep the walk enumerable: halve the largest count until it is.
    let total = |nums: &[u64]| nums.iter().fold(case.channels, |a, &n| a.saturating_mul(n));
    while total(&nums) > MAX_ELEMENTS {
        let i = (0..nums.len()).max_by_key(|&i| nums[i]).unwrap();
        nums[i] = (nums[i] / 2).max(1);
    }
    let mut m = Module::new(case.arch);
    let share = case.arch.bytes_per_partition(Memory::Sbuf) / 3;
    let mut base = 0u64;
    let mut operands = Vec::new();
    for (k, role) in roles.iter().enumerate() {
        let p = &case.operands[k];
        let limit = share / u64::from(p.dtype.bytes()) - 1;
        // Steps over the joint dims.
        let mut steps: Vec<i64> = if p.dense {
            let mut acc = 1i64;
            let mut out = vec![0; nums.len()];
            for i in (0..nums.len()).rev() {
                out[i] = acc;
                acc = acc.saturating_mul(nums[i] as i64);
            }
            out
        } else {
            p.steps[..nums.len()].to_vec()
        };
        // Broadcast the dims reaching farthest until the walk fits its buffer.
        loop {
            let dims: Vec<(i64, u64)> = steps.iter().copied().zip(nums.iter().copied()).collect();
            let (pos, neg) = reach(&dims);
            if pos.saturating_add(neg) <= limit {
                break;
            }
            let i = (0..nums.len())
                .max_by_key(|&i| steps[i].unsigned_abs().saturating_mul(nums[i] - 1))
                .unwrap();
            steps[i] = 0;
        }
        // Written dims: merge where this operand allows and the mask says so.
        let mut dims: Vec<(i64, u64)> = Vec::new();
        for (i, (&s, &n)) in steps.iter().zip(&nums).enumerate() {
            match dims.last_mut() {
                Some(last)
                    if p.merge_mask & (1 << (i % 8)) != 0
                        && last.0 == s.saturating_mul(n as i64) =>
                {
                    *last = (s, last.1 * n);
                }
                _ => dims.push((s, n)),
            }
        }
        if let Some(at) = p.unit_at {
            dims.insert(at % (dims.len() + 1), (5, 1));
        }
        let (pos, neg) = reach(&dims);
        let free = pos + neg + 1;
        let bd = m.buffer_data(
            &format!("b{k}"),
            Memory::Sbuf,
            0,
            base,
            &[128, free],
            p.dtype,
        );
        base += (free * u64::from(p.dtype.bytes())).next_multiple_of(4);
        let b = m.add_buffer(bd);
        let mut ap = vec![(free as i64, case.channels)];
        ap.extend(dims);
        operands.push(m.operand(role, b, AccessPattern::new(&ap, neg as i64)));
    }
    let isa = IsaOp::from_name(name).unwrap();
    m.add_op(Module::op_data(OpKind::Isa(isa), operands));
    m
}

/// Where a walk's lanes are: memory, first partition, partitions walked.
type Lanes = (Memory, u32, u32);

/// One lane of a walk: every partition walks the same free addresses, so
/// the lanes and the sequence of partition 0 describe the whole walk.
fn lane(mut w: apir_ir::Walk) -> Result<(Lanes, Vec<Address>), String> {
    let lanes = (w.mem, w.start_partition, w.channels);
    w.channels = 1;
    Ok((lanes, w.addresses().map_err(|e| e.0)?))
}

/// Every operand's lanes and lane sequence by role index, over the ops of
/// `m` in program order, each walked from its descriptor bytes (which must
/// validate). Every op of a split must walk the original's lanes.
fn lowered_addresses(m: &Module) -> Result<Vec<(Lanes, Vec<Address>)>, String> {
    let mut out: Vec<(Lanes, Vec<Address>)> = Vec::new();
    for op in m.top_ops() {
        for (k, o) in m.ops[op].operands.iter().enumerate() {
            let l = o.lowered().ok_or("operand not lowered")?;
            let (kind, bytes, fold) = (
                l.kind.ok_or("no kind")?,
                l.wire.as_ref().ok_or("no wire bytes")?,
                l.fold.ok_or("no fold")?,
            );
            let choice = role_choice(m, op, k).map_err(|e| e.to_string())?;
            let dtype = m.buffers[o.buffer].dtype;
            validate_bytes(bytes, &choice, dtype, m.arch, fold.channels)
                .map_err(|e| format!("descriptor does not validate: {e}"))?;
            let (lanes, seq) = lane(
                decoded_walk(bytes, kind, m.arch, fold.channels, dtype.bytes())
                    .map_err(|e| e.to_string())?,
            )?;
            match out.get_mut(k) {
                None => out.push((lanes, seq)),
                Some((first, all)) if *first == lanes => all.extend(seq),
                Some((first, _)) => {
                    return Err(format!(
                        "operand {k} walks lanes {lanes:?}, the first op {first:?}"
                    ))
                }
            }
        }
    }
    Ok(out)
}

fn original_addresses(m: &Module) -> Vec<(Lanes, Vec<Address>)> {
    let op = m.top_ops().next().unwrap();
    m.ops[op]
        .operands
        .iter()
        .map(|o| lane(logical_walk(m, o).unwrap()).unwrap())
        .collect()
}

fn run(m: &Module, pipeline: &str) -> (Compilation, Result<(), String>) {
    let mut c = Compilation::from_module(m.clone());
    let r = c.run(pipeline).map(|_| ()).map_err(|e| e.to_string());
    (c, r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn lowered_ops_visit_what_the_original_visits(case in case()) {
        let m = build(&case);
        prop_assert!(apir_ir::verify(&m).is_ok(), "generator made an invalid module: {:?}", apir_ir::verify(&m).err());
        let original = original_addresses(&m);
        let before = print_module(&m);

        let (refc, reference) = run(&m, REFERENCE);
        let (canon, canon_result) = run(&m, "canonicalize-ap");
        prop_assert!(canon_result.is_ok(), "{:?}", canon_result);
        let unchanged = print_module(&canon.module) == before;
        if reference.is_ok() {
            // What the reference accepts is left byte-identical.
            prop_assert!(unchanged, "a fitting op was rewritten:\n{}", print_module(&canon.module));
        }

        let mut default_ir = None;
        for (pipeline, mode) in [(LOWER, "default"), (ALWAYS, "always")] {
            let (lowered, result) = run(&m, pipeline);
            match result {
                Ok(()) => {
                    let ir = print_module(&lowered.module);
                    if mode == "default" && reference.is_ok() {
                        prop_assert_eq!(&ir, &print_module(&refc.module));
                    }
                    if default_ir.as_ref() == Some(&ir) {
                        continue; // the same ops as the default mode, checked
                    }
                    let got = lowered_addresses(&lowered.module);
                    prop_assert!(got.is_ok(), "{mode}: {:?}\n{}", got.err(), ir);
                    prop_assert_eq!(got.unwrap(), original.clone(), "{}: addresses differ:\n{}", mode, ir);
                    prop_assert!(lowered.module.top_ops().count() as u64 <= MAX_SPLIT_OPS);
                    default_ir = Some(ir);
                }
                Err(err) => {
                    // Nothing fitted: the op is as written and the error is
                    // the reference's.
                    prop_assert_eq!(Some(&err), reference.as_ref().err(), "{}", mode);
                    if mode == "default" {
                        prop_assert!(unchanged, "the pass changed an op it could not make fit");
                    }
                }
            }
        }
    }
}

/// The generator reaches every outcome: ops that fit as written, ops
/// rewritten in place, ops split, and ops left for the reference error.
#[test]
fn generator_covers_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut fits, mut rewritten, mut split, mut rejected) = (0, 0, 0, 0);
    for _ in 0..300 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let m = build(&case);
        let (reference, _) = (run(&m, REFERENCE).1, ());
        let (canon, _) = run(&m, "canonicalize-ap");
        let ops = canon.module.top_ops().count();
        let changed = print_module(&canon.module) != print_module(&m);
        match (reference.is_ok(), changed, ops) {
            (true, _, _) => fits += 1,
            (false, true, 1) => rewritten += 1,
            (false, true, _) => split += 1,
            (false, false, _) => rejected += 1,
        }
    }
    assert!(
        fits >= 10 && rewritten >= 10 && split >= 10 && rejected >= 3,
        "fits {fits}, rewritten {rewritten}, split {split}, rejected {rejected}"
    );
}

/// A few ops that would each need more than [`MAX_SPLIT_OPS`] pieces (the
/// fuzzer's module of twenty unmergeable `[1, 2]` dims, 2^16 pieces on
/// 4-slot roles) keep the module bounded: `canonicalize-ap` leaves them as
/// written and `lower-to-wire` reports `select-descriptor`'s error for each,
/// while an op of exactly `MAX_SPLIT_OPS` pieces beside them is split.
#[test]
fn ops_over_the_split_cap_stay_bounded() {
    const HOSTILE: u64 = 4;
    const DIMS: usize = 20;
    // 4 slots per role: 16 dims peeled, one op per index of each.
    let needed = 1u64 << (DIMS - 4);
    assert!(needed > MAX_SPLIT_OPS);
    // An offset as printed.
    let off = |i: u64| {
        if i == 0 {
            String::new()
        } else {
            format!(" + {i}")
        }
    };
    let unit = vec!["[1, 2]"; DIMS].join(", ");
    let hostile: String = (0..HOSTILE)
        .map(|i| {
            let ap = format!("%x[[256, 128], {unit}]{}", off(i));
            format!("  isa.tensor_copy dst = {ap}, src = {ap}\n")
        })
        .collect();
    // An outer dim of n (step 1) over four unmergeable dims: n ops of four
    // dims each on the 4-slot `dst`.
    let inner = "[64, 2], [16, 2], [4, 2], [1, 2]";
    let memset = |dims: &str, i: u64| {
        format!(
            "  isa.memset dst = %u[[8192, 1], {dims}]{} {{value = 1}}\n",
            off(i)
        )
    };
    let text = |body: &str| {
        format!(
            "module @bounded attributes {{arch = \"v2\"}} {{\n  \
             %x = mem.sbuf {{partition = 0, byte = 0}} : tile<128x256xf32>\n  \
             %u = mem.sbuf {{partition = 0, byte = 0x400}} : tile<1x8192xu8>\n\
             {hostile}{body}}}\n"
        )
    };
    let at_cap = memset(&format!("[1, {MAX_SPLIT_OPS}], {inner}"), 0);
    let over_cap = memset(&format!("[1, {}], {inner}", MAX_SPLIT_OPS + 1), 0);
    let input = text(&format!("{at_cap}{over_cap}"));
    let c = Compilation::parse("bounded.apir", &input, None).unwrap();
    assert_eq!(c.ir(), input, "the input is in printed form");
    let ops = c.module.top_ops().count() as u64;
    assert_eq!(ops, HOSTILE + 2);

    let mut canon = Compilation::parse("bounded.apir", &input, None).unwrap();
    let report = canon.run("canonicalize-ap").unwrap();
    let stat = |name: &str| {
        report
            .statistics
            .iter()
            .find(|(pass, _)| pass.starts_with("canonicalize-ap"))
            .and_then(|(_, stats)| stats.get(name))
            .map_or(0, |s| s.value)
    };
    assert_eq!(stat("ops-examined"), HOSTILE + 2);
    assert_eq!(stat("ops-split"), 1);
    // The op at the cap becomes MAX_SPLIT_OPS ops, offsets moved by the
    // peeled index; every other op is exactly as written.
    let pieces: String = (0..MAX_SPLIT_OPS).map(|i| memset(inner, i)).collect();
    assert_eq!(canon.ir(), text(&format!("{pieces}{over_cap}")));
    let after = canon.module.top_ops().count() as u64;
    assert_eq!(after, HOSTILE + MAX_SPLIT_OPS + 1);
    assert!(after <= ops * MAX_SPLIT_OPS);

    // The pipeline reports the reference error for each op left as written,
    // and nothing for the pieces.
    let mut lowered = Compilation::parse("bounded.apir", &input, None).unwrap();
    let err = lowered.run(LOWER).unwrap_err();
    assert_eq!(err.exit_code(), 1);
    let illegal = |dims: usize, op: u64, kind: &str, role: &str| {
        format!(
            "error: Illegal ISA memory access dimension: {dims}, which must be in range of \
             [1, 4]D tensor for ISA mem pattern [op #{op} ({kind}), operand {role}]"
        )
    };
    let mut expected: Vec<String> = (0..HOSTILE)
        .flat_map(|op| ["dst", "src"].map(|role| illegal(DIMS + 1, op, "isa.tensor_copy", role)))
        .collect();
    expected.push(illegal(6, HOSTILE + 1, "isa.memset", "dst"));
    assert_eq!(err.to_string(), expected.join("\n"));
    // The same as the reference pipeline's on the input, less the op at the
    // cap.
    let mut reference = Compilation::parse("bounded.apir", &input, None).unwrap();
    let reference = reference.run(REFERENCE).unwrap_err().to_string();
    let at_cap_op = format!("[op #{HOSTILE} (isa.memset)");
    let reference: Vec<&str> = reference
        .lines()
        .filter(|l| !l.contains(&at_cap_op))
        .collect();
    assert_eq!(reference, expected);
}
