//! The reference evaluator agrees with the flat-index definition of docs/ir.md,
//! computed independently here, on access patterns that are valid by
//! construction; the verifier accepts exactly those patterns at their edges
//! and rejects them one element further.

use crate::common::{expected_addresses, extent, plan_ap, valid_buffer_data, ApPlan, Picker};
use apir_ir::target::IsaOp;
use apir_ir::{
    logical_addresses, logical_walk, verify, AccessPattern, Arch, BufferData, Dtype, Memory,
    Module, OpKind, Operand,
};
use proptest::prelude::*;

/// A module whose only op addresses a buffer `%x` shaped and placed like
/// `like` (whose name may come from another module) through `ap`:
/// `isa.memset dst` for SBUF/PSUM, a kernel's `gpsimd.read` for HBM.
fn one_operand_module(arch: Arch, like: &BufferData, ap: AccessPattern) -> Module {
    let mut m = Module::new(arch);
    let bd = m.buffer_data(
        "x",
        like.mem,
        like.partition,
        like.base,
        &like.shape,
        like.dtype,
    );
    let b = m.add_buffer(bd);
    if like.mem.is_on_chip() {
        let o = m.operand("dst", b, ap);
        let memset = IsaOp::from_name("isa.memset").expect("isa.memset is in the op table");
        m.add_op(Module::op_data(OpKind::Isa(memset), [o]));
    } else {
        let block = m.new_block();
        let o = m.operand("src", b, ap);
        m.add_op_to_block(block, Module::op_data(OpKind::Read, [o]));
        let name = m.sym("k");
        m.add_op(Module::op_data(OpKind::Kernel { name, body: block }, []));
    }
    m
}

/// The single operand of a [`one_operand_module`].
fn the_operand(m: &Module) -> &Operand {
    m.walk_ops()
        .into_iter()
        .find_map(|op| m.ops[op].operands.first())
        .expect("the module has one operand")
}

/// A random arch and buffer (memory, dtype, placement, shape) on it, and a
/// plan for valid access patterns over it.
fn buffer_and_plan(p: &mut Picker) -> (Arch, BufferData, ApPlan) {
    let arch = p.choose(&Arch::ALL);
    let mem = p.choose(&[Memory::Sbuf, Memory::Psum, Memory::Hbm]);
    let dtype = crate::common::pick_dtype(p, false);
    let mut scratch = Module::new(arch);
    let bd = valid_buffer_data(p, &mut scratch, "x", mem, dtype);
    let plan = plan_ap(p, &bd, 2048);
    (arch, bd, plan)
}

fn messages(m: &Module) -> Vec<String> {
    match verify(m) {
        Ok(()) => Vec::new(),
        Err(diags) => diags.into_iter().map(|d| d.message).collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `logical_addresses` visits exactly the flat elements docs/ir.md defines,
    /// mapped to partitions and bytes; the verifier accepts the pattern.
    #[test]
    fn evaluator_matches_flat_index(raw in prop::collection::vec(any::<u64>(), 0..64)) {
        let mut p = Picker::new(&raw);
        let (arch, bd, plan) = buffer_and_plan(&mut p);
        let ap = plan.random_ap(&mut p);
        let m = one_operand_module(arch, &bd, ap.clone());
        prop_assert_eq!(messages(&m), Vec::<String>::new(), "valid pattern {:?} rejected", ap);
        let o = the_operand(&m);
        let b = &m.buffers[o.buffer];
        let expected = expected_addresses(b, &o.ap);
        let got: Vec<_> = logical_addresses(&m, o)
            .expect("a verified operand evaluates")
            .into_iter()
            .map(|a| (a.mem, a.partition, a.byte))
            .collect();
        prop_assert_eq!(got.len() as u64, logical_walk(&m, o).unwrap().len().unwrap());
        prop_assert_eq!(got, expected);
    }

    /// At its extreme start positions a pattern verifies; one element
    /// further (offset shifted past the edge, or one more index along a dim
    /// that walks toward the edge) it is rejected for leaving its partition
    /// or its buffer.
    #[test]
    fn one_past_the_edge_is_rejected(raw in prop::collection::vec(any::<u64>(), 0..64), mode in 0u8..3) {
        let mut p = Picker::new(&raw);
        let (arch, bd, plan) = buffer_and_plan(&mut p);
        let high = plan.offset(plan.sp_max(), plan.e_max());
        let low = plan.offset(0, plan.e_min());
        for edge in [high, low] {
            let m = one_operand_module(arch, &bd, plan.ap(edge));
            prop_assert_eq!(messages(&m), Vec::<String>::new(), "pattern at its edge, offset {}, rejected", edge);
        }
        // Dims whose next index walks past the high (positive step) or low
        // (negative step) edge; the partition pair when it walks whole
        // partitions.
        let mut growable: Vec<(usize, i64)> = Vec::new();
        let base = usize::from(plan.part.is_some());
        if let Some((s0, _)) = plan.part {
            if s0 as u64 == plan.f {
                growable.push((0, high));
            }
        }
        for (i, &(step, _)) in plan.free.iter().enumerate() {
            match step.signum() {
                1 => growable.push((base + i, high)),
                -1 => growable.push((base + i, low)),
                _ => {}
            }
        }
        let (dims, offset) = match mode {
            0 => (plan.dims(), high + 1),
            1 => (plan.dims(), low - 1),
            _ if growable.is_empty() => (plan.dims(), high + 1),
            _ => {
                let (i, offset) = p.choose(&growable);
                let mut dims = plan.dims();
                dims[i].1 += 1;
                (dims, offset)
            }
        };
        let ap = AccessPattern::new(&dims, offset);
        let m = one_operand_module(arch, &bd, ap);
        // Which rule must fire: on chip, a non-negative start is first
        // checked against its partition.
        let f = i128::from(plan.f);
        let off = i128::from(offset);
        let free = if plan.part.is_some() { &dims[1..] } else { &dims[..] };
        let (flo, fhi) = extent(free);
        let leaves_partition = bd.mem.is_on_chip() && off >= 0 && (off % f + flo < 0 || off % f + fhi >= f);
        // Off chip the operand is a kernel's access, which has no written role.
        let who = if bd.mem.is_on_chip() { "operand `dst`" } else { "the access" };
        let want = if leaves_partition { format!("{who} leaves its partition") } else { format!("{who} leaves buffer `%x`") };
        let msgs = messages(&m);
        prop_assert!(
            msgs.len() == 1 && msgs[0].starts_with(&want),
            "pattern {:?} + {} over {:?}: expected one `{}` error, got {:?}", dims, offset, bd.shape, want, msgs
        );
    }
}

/// The worked example shape of docs/ir.md: partitions then free dims, a negative step
/// and a start element in the second partition, checked on PSUM at v4.
#[test]
fn psum_negative_step_example() {
    let mut m = Module::new(Arch::V4);
    let bd = m.buffer_data("x", Memory::Psum, 64, 0x800, &[8, 4, 4], Dtype::Bf16);
    let m = one_operand_module(
        Arch::V4,
        &bd,
        AccessPattern::new(&[(16, 2), (-4, 2), (1, 2)], 16 + 4),
    );
    verify(&m).unwrap();
    let got: Vec<_> = logical_addresses(&m, the_operand(&m))
        .unwrap()
        .into_iter()
        .map(|a| (a.partition, a.byte))
        .collect();
    // offset 20 = partition 1, element 4; free walk 4, 5, 0, 1.
    assert_eq!(
        got,
        vec![
            (65, 0x808),
            (65, 0x80a),
            (65, 0x800),
            (65, 0x802),
            (66, 0x808),
            (66, 0x80a),
            (66, 0x800),
            (66, 0x802)
        ]
    );
}

/// Regression: an on-chip buffer built through the API with a zero-sized free
/// dimension (the parser rejects `0` dimensions, the API does not) makes
/// `verify` panic with "attempt to calculate the remainder with a divisor of
/// zero" (verify.rs, `off % f` in `Verifier::ap`), and `logical_walk` panic
/// with "attempt to divide by zero" (eval.rs, `off / f`). Expected: a
/// diagnostic on the buffer, and an `EvalError`.
#[test]
fn zero_sized_dimension_is_a_diagnostic_not_a_panic() {
    let mut m = Module::new(Arch::V2);
    let bd = m.buffer_data("x", Memory::Sbuf, 0, 0, &[4, 0], Dtype::F32);
    let m = one_operand_module(Arch::V2, &bd, AccessPattern::new(&[(0, 1), (1, 1)], 0));
    assert!(verify(&m).is_err());
    assert!(logical_walk(&m, the_operand(&m)).is_err());
}

/// Regression: an HBM buffer whose last byte is the last byte of the 64-bit
/// address space is rejected ("runs past the end of the 64-bit address
/// space"): the verifier requires `addr + bytes` to fit in a u64, but that
/// sum is the exclusive end, which is 2^64 here. Expected: accepted.
#[test]
fn hbm_buffer_may_end_at_the_top_of_the_address_space() {
    let mut m = Module::new(Arch::V2);
    let bd = m.buffer_data("h", Memory::Hbm, 0, u64::MAX - 63, &[16], Dtype::F32);
    let m = one_operand_module(Arch::V2, &bd, AccessPattern::new(&[(1, 16)], 0));
    verify(&m).unwrap();
    let last = logical_addresses(&m, the_operand(&m))
        .unwrap()
        .last()
        .unwrap()
        .byte;
    assert_eq!(last, u64::MAX - 3);
}

/// The evaluator, a public door too, reports an operand on a buffer its
/// module does not store instead of indexing it.
#[test]
fn an_operand_on_a_buffer_not_stored_is_an_error() {
    let mut m = apir_ir::Module::new(apir_ir::Arch::V2);
    let o = m.operand(
        "dst",
        apir_ir::Buffer::from_u32(99),
        apir_ir::AccessPattern::new(&[(1, 4)], 0),
    );
    let e = apir_ir::logical_walk(&m, &o).unwrap_err();
    assert_eq!(e.0, "buffer #99 does not exist");
}
