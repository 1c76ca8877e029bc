//! Modules built through the library API, valid and malformed: the
//! verifier's structural phase (`apir_ir::verify::structure`).
//!
//! - Random valid modules (buffers, ISA ops, `isa.custom`, kernels with
//!   `gpsimd.read`/`write`), edited through the layout methods (insert,
//!   remove, replace, retain, move), verify; their stored ops are exactly
//!   the reachable ones; they print text that parses back, prints
//!   identically and verifies.
//! - The same modules broken one or several ways (dangling op, buffer and
//!   block ids, ids and symbols of another module, ops under the wrong
//!   parent, an op or buffer listed twice or not at all, duplicate buffer
//!   or kernel names, a use before the declaration): `verify` never panics; a module
//!   it accepts round-trips; every structural diagnostic names the op
//!   (`op #N`) or the buffer.
//! - One unit test per kind of breakage: exactly one diagnostic, located,
//!   naming the op or buffer.

use crate::common::{valid_module_with, Picker};
use apir_ir::target::IsaOp;
use apir_ir::verify::structure;
use apir_ir::{
    parse_str, print_module, verify, AccessPattern, Arch, Attr, Block, Buffer, Diagnostics, Dtype,
    Fold, Item, Lowered, Memory, Module, Op, OpKind, ParseOptions, Place, Symbol,
};
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

// ---- checks ----

/// `verify`, which must not panic.
fn verify_no_panic(m: &Module) -> Result<(), Diagnostics> {
    match catch_unwind(AssertUnwindSafe(|| verify(m))) {
        Ok(r) => r,
        Err(_) => panic!("verify panicked on\n{m:#?}"),
    }
}

/// A module that verifies prints text that parses back, prints the same and
/// verifies; it holds exactly the ops it lists.
fn check_accepted(m: &Module) {
    assert_eq!(m.stored_ops(), m.walk_ops().len());
    let text = print_module(m);
    let (reparsed, _) = parse_str("api.apir", &text, ParseOptions::default())
        .unwrap_or_else(|(d, _)| panic!("printed text does not parse: {d:#?}\n{text}"));
    assert_eq!(print_module(&reparsed), text);
    if let Err(d) = verify(&reparsed) {
        panic!("re-parsed module does not verify: {d:#?}\n{text}");
    }
}

/// Every structural diagnostic names the op or the buffer.
fn check_named(diags: &Diagnostics) {
    for d in diags {
        assert!(
            d.message.contains("op #") || d.message.contains("buffer"),
            "names neither an op nor a buffer: {}",
            d.message
        );
        assert!(d.span.is_some(), "not located: {}", d.message);
    }
}

/// A valid module of up to 16 top-level items.
fn module(p: &mut Picker) -> Module {
    valid_module_with(p, 16)
}

// ---- valid edits through the layout methods ----

/// Every listed op with where it is: `None` at the top level, else its
/// kernel's body block.
/// Only stored ops (and kernel bodies that are stored blocks) count: a
/// module broken before may list others.
fn listed(m: &Module) -> Vec<(Op, Option<Block>)> {
    let mut out = Vec::new();
    for (op, body) in tops(m) {
        out.push((op, None));
        if let Some(block) = body.and_then(|b| m.blocks.get(b)) {
            out.extend(
                block
                    .ops
                    .iter()
                    .filter(|&&o| m.ops.contains(o))
                    .map(|&o| (o, body)),
            );
        }
    }
    out
}

/// The stored top-level ops, with their body block if kernels.
fn tops(m: &Module) -> Vec<(Op, Option<Block>)> {
    m.top_ops()
        .filter_map(|op| match m.ops.get(op)?.kind {
            OpKind::Kernel { body, .. } => Some((op, Some(body))),
            _ => Some((op, None)),
        })
        .collect()
}

/// The top-level kernels whose body block is stored.
fn kernels(m: &Module) -> Vec<(Op, Block)> {
    tops(m)
        .into_iter()
        .filter_map(|(op, body)| Some((op, body.filter(|&b| m.blocks.contains(b))?)))
        .collect()
}

/// Edits that keep a valid module valid: remove any op; move a top-level
/// op to the end (every buffer it uses stays declared before it); put a
/// copy of a non-kernel op next to it, or in place of it (a kernel access
/// copied keeps the kernel's element count).
fn edit_validly(p: &mut Picker, m: &mut Module) {
    for _ in 0..p.range(0, 4) {
        let ops = listed(m);
        if ops.is_empty() {
            return;
        }
        let (op, parent) = p.choose(&ops);
        let is_kernel = matches!(m.ops[op].kind, OpKind::Kernel { .. });
        match p.next() % 5 {
            0 => {
                m.remove_op(op).expect("a listed op is stored");
            }
            1 if parent.is_none() => m.move_op(op, Place::End(None)),
            2 if !is_kernel => {
                let copy = m.ops[op].clone();
                let new = if p.chance(50) {
                    m.insert_op_before(op, copy)
                } else {
                    m.insert_op_after(op, copy)
                };
                assert_eq!(m.locate_op(new).map(|l| l.0), Some(parent));
            }
            3 if !is_kernel => {
                let copies = vec![m.ops[op].clone(); p.range(1, 3) as usize];
                let new = m.replace_op(op, copies);
                // The first copy takes the replaced op's id.
                assert_eq!(new[0], op);
            }
            _ => {
                let keep = p.range(1, 3);
                let mut i = 0;
                m.retain_ops(parent, |_, _| {
                    i += 1;
                    i % keep == 0
                });
            }
        }
        assert_eq!(m.stored_ops(), m.walk_ops().len());
    }
}

// ---- breakage ----

/// The ways a module built through the API can break the structural rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The layout lists an op id nothing stores.
    DanglingOp,
    /// The layout lists an op of another module (an id this one does not
    /// store).
    ForeignOp,
    /// An operand names a buffer id this module does not have.
    DanglingBuffer,
    /// A kernel's body is a block id this module does not store.
    DanglingBlock,
    /// A role, buffer name, kernel name or attribute string interned in
    /// another module's table (beyond this one's).
    ForeignSymbol,
    /// A kernel access moved to the top level.
    ReadAtTop,
    /// An ISA op or `isa.custom` moved into a kernel.
    IsaInKernel,
    /// A kernel moved into a kernel (another one, or its own body).
    KernelInKernel,
    /// An op listed a second time.
    Duplicated,
    /// A stored op taken out of the layout.
    Unlisted,
    /// A buffer renamed to another buffer's name.
    DuplicateBufferName,
    /// A kernel renamed to another kernel's name.
    DuplicateKernelName,
    /// A used buffer's declaration moved after every op.
    UseBeforeDeclaration,
    /// A buffer declaration listed a second time.
    DuplicatedBuffer,
    /// A buffer declaration taken out of the layout.
    UnlistedBuffer,
    /// An operand pointed at another (existing) buffer: possibly valid, and
    /// if not, caught by the checks after the structural phase.
    OtherBuffer,
    /// A kernel access without its operand or with a second one, or a
    /// kernel given an operand.
    OperandCount,
}

const KINDS: [Kind; 17] = [
    Kind::DanglingOp,
    Kind::ForeignOp,
    Kind::DanglingBuffer,
    Kind::DanglingBlock,
    Kind::ForeignSymbol,
    Kind::ReadAtTop,
    Kind::IsaInKernel,
    Kind::KernelInKernel,
    Kind::Duplicated,
    Kind::Unlisted,
    Kind::DuplicateBufferName,
    Kind::DuplicateKernelName,
    Kind::UseBeforeDeclaration,
    Kind::DuplicatedBuffer,
    Kind::UnlistedBuffer,
    Kind::OtherBuffer,
    Kind::OperandCount,
];

/// A module with more ops and symbols than `m`: where the foreign ids and
/// symbols come from.
fn other_module(m: &Module) -> Module {
    let mut o = Module::new(m.arch);
    let bd = o.buffer_data("t", Memory::Sbuf, 0, 0, &[1, 1], Dtype::F32);
    let t = o.add_buffer(bd);
    let memset = IsaOp::from_name("isa.memset").expect("in the table");
    for _ in 0..=m.ops.id_bound() + 2 {
        let dst = o.operand("dst", t, AccessPattern::new(&[(1, 1), (1, 1)], 0));
        o.append_op(None, Module::op_data(OpKind::Isa(memset), [dst]));
    }
    o
}

/// A symbol of `other`'s table that `m`'s table does not have, with room
/// for `m` to intern a few more names and still not have it.
fn foreign_symbol(m: &Module, other: &mut Module) -> Symbol {
    let mut i = 0;
    let mut beyond = 0;
    loop {
        let s = other.sym(&format!("foreign{i}"));
        if !m.symbols.contains(s) {
            beyond += 1;
            if beyond == 16 {
                return s;
            }
        }
        i += 1;
    }
}

/// Breaks `m` the `kind` way (somewhere `p` picks); false if `m` has
/// nothing to break that way (no kernel, no second buffer, ...).
fn mutate(p: &mut Picker, m: &mut Module, kind: Kind) -> bool {
    let ops = listed(m);
    let ks = kernels(m);
    let mut other = other_module(m);
    // Somewhere to list an op: a position of the module body or of a
    // kernel body.
    let list_somewhere = |p: &mut Picker, m: &mut Module, op: Op| {
        if !ks.is_empty() && p.chance(40) {
            let (_, body) = p.choose(&ks);
            let list = &mut m.blocks[body].ops;
            let at = p.range(0, list.len() as u64) as usize;
            list.insert(at, op);
        } else {
            let at = p.range(0, m.body.len() as u64) as usize;
            m.body.insert(at, Item::Op(op));
        }
    };
    let with_operands: Vec<Op> = ops
        .iter()
        .map(|&(op, _)| op)
        .filter(|&op| !m.ops[op].operands.is_empty())
        .collect();
    match kind {
        Kind::DanglingOp => {
            let id = m.ops.id_bound() as u64 + p.range(0, 1000);
            list_somewhere(p, m, Op::from_u32(id as u32));
        }
        Kind::ForeignOp => {
            let theirs: Vec<Op> = other.ops.keys().filter(|&o| !m.ops.contains(o)).collect();
            let op = p.choose(&theirs);
            list_somewhere(p, m, op);
        }
        Kind::DanglingBuffer => {
            if with_operands.is_empty() {
                return false;
            }
            let op = p.choose(&with_operands);
            let i = p.below(m.ops[op].operands.len());
            let id = m.buffers.len() as u64 + p.range(0, 1000);
            m.ops[op].operands[i].buffer = Buffer::from_u32(id as u32);
        }
        Kind::DanglingBlock => {
            if ks.is_empty() {
                return false;
            }
            let (k, _) = p.choose(&ks);
            let OpKind::Kernel { name, .. } = m.ops[k].kind else {
                unreachable!()
            };
            let body = Block::from_u32((m.blocks.id_bound() as u64 + p.range(0, 1000)) as u32);
            m.ops[k].kind = OpKind::Kernel { name, body };
        }
        Kind::ForeignSymbol => {
            let s = foreign_symbol(m, &mut other);
            match p.next() % 5 {
                0 if !with_operands.is_empty() => {
                    let op = p.choose(&with_operands);
                    let i = p.below(m.ops[op].operands.len());
                    m.ops[op].operands[i].role = s;
                }
                1 if !ks.is_empty() => {
                    let (k, body) = p.choose(&ks);
                    m.ops[k].kind = OpKind::Kernel { name: s, body };
                }
                2 if !ops.is_empty() => {
                    let (op, _) = p.choose(&ops);
                    let key = m.sym("u_foreign");
                    let v = Attr::Array(vec![Attr::Int(0), Attr::Str(s)]);
                    m.ops[op].attrs.insert(key, v);
                }
                3 if !ops.is_empty() => {
                    let (op, _) = p.choose(&ops);
                    m.ops[op].attrs.insert(s, Attr::Bool(true));
                }
                _ => {
                    if m.buffers.is_empty() {
                        return false;
                    }
                    let b = Buffer::from_u32(p.below(m.buffers.len()) as u32);
                    m.buffers[b].name = s;
                }
            }
        }
        Kind::ReadAtTop => {
            let inner: Vec<Op> = ops
                .iter()
                .filter(|(_, parent)| parent.is_some())
                .map(|&(op, _)| op)
                .collect();
            if inner.is_empty() {
                return false;
            }
            let op = p.choose(&inner);
            let tops: Vec<Op> = m.top_ops().filter(|&o| o != op).collect();
            if tops.is_empty() {
                return false;
            }
            let anchor = p.choose(&tops);
            let at = if p.chance(50) {
                Place::Before(anchor)
            } else {
                Place::After(anchor)
            };
            m.move_op(op, at);
        }
        Kind::IsaInKernel => {
            let isa: Vec<Op> = tops(m)
                .into_iter()
                .map(|(op, _)| op)
                .filter(|&op| matches!(m.ops[op].kind, OpKind::Isa(_) | OpKind::Custom))
                .collect();
            if isa.is_empty() || ks.is_empty() {
                return false;
            }
            let op = p.choose(&isa);
            let (_, body) = p.choose(&ks);
            m.move_op(op, Place::End(Some(body)));
        }
        Kind::KernelInKernel => {
            if ks.is_empty() {
                return false;
            }
            let (k, _) = p.choose(&ks);
            // Possibly its own body: then nothing in the program reaches it.
            let (_, body) = p.choose(&ks);
            m.move_op(k, Place::End(Some(body)));
        }
        Kind::Duplicated => {
            if ops.is_empty() {
                return false;
            }
            let (op, _) = p.choose(&ops);
            list_somewhere(p, m, op);
        }
        Kind::Unlisted => {
            if ops.is_empty() {
                return false;
            }
            let (op, parent) = p.choose(&ops);
            match parent {
                None => m.body.retain(|&i| i != Item::Op(op)),
                Some(b) => m.blocks[b].ops.retain(|&o| o != op),
            }
        }
        Kind::DuplicateBufferName => {
            if m.buffers.len() < 2 {
                return false;
            }
            let a = Buffer::from_u32(p.below(m.buffers.len()) as u32);
            let mut b = Buffer::from_u32(p.below(m.buffers.len() - 1) as u32);
            if b >= a {
                b = Buffer::from_u32(b.as_u32() + 1);
            }
            m.buffers[b].name = m.buffers[a].name;
        }
        Kind::DuplicateKernelName => {
            if ks.len() < 2 {
                return false;
            }
            let i = p.below(ks.len());
            let mut j = p.below(ks.len() - 1);
            if j >= i {
                j += 1;
            }
            let OpKind::Kernel { name, .. } = m.ops[ks[i].0].kind else {
                unreachable!()
            };
            m.ops[ks[j].0].kind = OpKind::Kernel {
                name,
                body: ks[j].1,
            };
        }
        Kind::UseBeforeDeclaration => {
            let used: Vec<Buffer> = listed(m)
                .iter()
                .flat_map(|&(op, _)| m.ops[op].operands.iter().map(|o| o.buffer))
                .filter(|b| b.as_u32() < m.buffers.len() as u32)
                .collect();
            if used.is_empty() {
                return false;
            }
            let b = p.choose(&used);
            m.body.retain(|&i| i != Item::Buffer(b));
            m.body.push(Item::Buffer(b));
        }
        Kind::DuplicatedBuffer | Kind::UnlistedBuffer => {
            let decls: Vec<Item> = m
                .body
                .iter()
                .copied()
                .filter(|i| matches!(i, Item::Buffer(_)))
                .collect();
            if decls.is_empty() {
                return false;
            }
            let decl = p.choose(&decls);
            if kind == Kind::UnlistedBuffer {
                m.body.retain(|&i| i != decl);
            } else {
                let at = p.range(0, m.body.len() as u64) as usize;
                m.body.insert(at, decl);
            }
        }
        Kind::OtherBuffer => {
            if with_operands.is_empty() || m.buffers.is_empty() {
                return false;
            }
            let op = p.choose(&with_operands);
            let i = p.below(m.ops[op].operands.len());
            m.ops[op].operands[i].buffer = Buffer::from_u32(p.below(m.buffers.len()) as u32);
        }
        Kind::OperandCount => {
            let accesses: Vec<Op> = listed(m)
                .iter()
                .map(|&(op, _)| op)
                .filter(|&op| matches!(m.ops[op].kind, OpKind::Read | OpKind::Write))
                .collect();
            if accesses.is_empty() {
                return false;
            }
            let op = p.choose(&accesses);
            match p.below(3) {
                0 => m.ops[op].operands.clear(),
                1 if !m.ops[op].operands.is_empty() => {
                    let again = m.ops[op].operands[0].clone();
                    m.ops[op].operands.push(again);
                }
                _ if !ks.is_empty() && !m.ops[op].operands.is_empty() => {
                    let again = m.ops[op].operands[0].clone();
                    let k = p.choose(&ks).0;
                    m.ops[k].operands.push(again);
                }
                _ => m.ops[op].operands.clear(),
            }
        }
    }
    true
}

/// Whether a module broken the `kind` way always breaks a structural rule
/// (false for breakage the structural phase may not see: another buffer,
/// or a block that still lists nothing).
fn always_structural(kind: Kind) -> bool {
    kind != Kind::OtherBuffer
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Valid modules, edited through the layout methods, verify, hold
    /// exactly the ops they list and round-trip.
    #[test]
    fn valid_modules_verify_and_round_trip(raw in prop::collection::vec(any::<u64>(), 0..400)) {
        let mut p = Picker::new(&raw);
        let mut m = module(&mut p);
        edit_validly(&mut p, &mut m);
        if let Err(d) = verify_no_panic(&m) {
            panic!("does not verify: {d:#?}\n{}", print_module(&m));
        }
        check_accepted(&m);
    }

    /// One structural breakage: `verify` does not panic and rejects the
    /// module with diagnostics that name the op or the buffer, all from
    /// the structural phase.
    #[test]
    fn one_breakage_is_reported(raw in prop::collection::vec(any::<u64>(), 0..400), k in 0..KINDS.len()) {
        let mut p = Picker::new(&raw);
        let mut m = module(&mut p);
        edit_validly(&mut p, &mut m);
        let kind = KINDS[k];
        let broken = mutate(&mut p, &mut m, kind);
        match verify_no_panic(&m) {
            Ok(()) => {
                prop_assert!(!broken || !always_structural(kind), "{kind:?} not reported");
                check_accepted(&m);
            }
            Err(d) => {
                prop_assert!(broken, "an unbroken module is rejected: {d:#?}");
                if always_structural(kind) {
                    prop_assert_eq!(&structure(&m), &d);
                    check_named(&d);
                }
            }
        }
    }

    /// Several breakages: `verify` does not panic; a module it accepts
    /// round-trips; structural diagnostics name the op or the buffer.
    #[test]
    fn several_breakages_never_panic(raw in prop::collection::vec(any::<u64>(), 0..400), kinds in prop::collection::vec(0..KINDS.len(), 1..5)) {
        let mut p = Picker::new(&raw);
        let mut m = module(&mut p);
        for k in kinds {
            mutate(&mut p, &mut m, KINDS[k]);
        }
        match verify_no_panic(&m) {
            Ok(()) => check_accepted(&m),
            Err(d) => {
                let s = structure(&m);
                if !s.is_empty() {
                    prop_assert_eq!(&s, &d);
                    check_named(&d);
                }
            }
        }
    }
}

// ---- one diagnostic per kind ----

/// A module built through the API:
///
/// ```text
/// %x = mem.sbuf ... : tile<128x64xf32>      buffer #0
/// %y = mem.sbuf ... : tile<128x64xf32>      buffer #1
/// isa.tensor_copy dst = %y[...], src = %x[...]       op #0
/// %h = mem.hbm ... : tensor<16xf32>          buffer #2
/// %g = mem.hbm ... : tensor<16xf32>          buffer #3
/// gpsimd.kernel @k {                                 op #1
///   gpsimd.read %h[[1, 16]]                          op #2
///   gpsimd.write %g[[1, 16]]                         op #3
/// }
/// gpsimd.kernel @e { }                               op #4
/// ```
struct Fixture {
    m: Module,
    bufs: [Buffer; 4],
    copy: Op,
    kernel: Op,
    body: Block,
    read: Op,
    write: Op,
    empty: Op,
}

fn fixture() -> Fixture {
    let mut m = Module::new(Arch::V2);
    let buf = |m: &mut Module, name: &str, mem: Memory, base: u64, shape: &[u64]| {
        let d = m.buffer_data(name, mem, 0, base, shape, Dtype::F32);
        m.add_buffer(d)
    };
    let x = buf(&mut m, "x", Memory::Sbuf, 0, &[128, 64]);
    let y = buf(&mut m, "y", Memory::Sbuf, 0x4000, &[128, 64]);
    let tile = AccessPattern::new(&[(64, 128), (1, 64)], 0);
    let (dst, src) = (m.operand("dst", y, tile.clone()), m.operand("src", x, tile));
    let isa = IsaOp::from_name("isa.tensor_copy").expect("in the table");
    let copy = m.append_op(None, Module::op_data(OpKind::Isa(isa), [dst, src]));
    let h = buf(&mut m, "h", Memory::Hbm, 0, &[16]);
    let g = buf(&mut m, "g", Memory::Hbm, 0x100, &[16]);
    let body = m.new_block();
    let name = m.sym("k");
    let kernel = m.append_op(None, Module::op_data(OpKind::Kernel { name, body }, []));
    let all = AccessPattern::new(&[(1, 16)], 0);
    let src = m.operand("src", h, all.clone());
    let read = m.append_op(Some(body), Module::op_data(OpKind::Read, [src]));
    let dst = m.operand("dst", g, all);
    let write = m.append_op(Some(body), Module::op_data(OpKind::Write, [dst]));
    let eblock = m.new_block();
    let name = m.sym("e");
    let empty = m.append_op(
        None,
        Module::op_data(OpKind::Kernel { name, body: eblock }, []),
    );
    Fixture {
        m,
        bufs: [x, y, h, g],
        copy,
        kernel,
        body,
        read,
        write,
        empty,
    }
}

/// Exactly one diagnostic, located, naming the op or buffer, containing
/// `want`.
#[track_caller]
fn one(m: &Module, want: &str) {
    let d = verify_no_panic(m).expect_err(want);
    assert_eq!(d.len(), 1, "{want}: {d:#?}");
    assert!(d[0].message.contains(want), "{}", d[0].message);
    check_named(&d);
}

/// [`one`], about `subject` (as `Subject` displays it: `op #N (name)`,
/// then `, operand ROLE` for one operand).
#[track_caller]
fn one_about(m: &Module, want: &str, subject: &str) {
    one(m, want);
    let d = verify_no_panic(m).expect_err(want);
    let got = d[0].subject.as_ref().map(ToString::to_string);
    assert_eq!(got.as_deref(), Some(subject), "{want}");
}

#[test]
fn the_fixture_verifies() {
    let f = fixture();
    assert_eq!(
        [f.copy, f.kernel, f.read, f.write, f.empty].map(|o| o.as_u32()),
        [0, 1, 2, 3, 4]
    );
    verify(&f.m).unwrap();
    check_accepted(&f.m);
}

#[test]
fn dangling_and_foreign_ids() {
    let f = fixture();
    let mut m = f.m.clone();
    m.body.push(Item::Op(Op::from_u32(77)));
    one(&m, "the program lists op #77, which does not exist");
    // An op of another module: an id this one does not store.
    let other = other_module(&f.m);
    let theirs = other.ops.keys().last().unwrap();
    let mut m = f.m.clone();
    m.blocks[f.body].ops.push(theirs);
    one(
        &m,
        &format!(
            "the program lists op #{}, which does not exist",
            theirs.as_u32()
        ),
    );
    // A removed op listed again.
    let mut m = f.m.clone();
    m.remove_op(f.copy);
    verify(&m).unwrap();
    m.body.push(Item::Op(f.copy));
    one(&m, "the program lists op #0, which was removed");
    let mut m = f.m.clone();
    m.ops[f.read].operands[0].buffer = Buffer::from_u32(9);
    one_about(
        &m,
        "operand 0 of op #2 (`gpsimd.read`) uses buffer #9, which does not exist",
        "op #2 (gpsimd.read), operand src",
    );
    let mut m = f.m.clone();
    m.body.insert(0, Item::Buffer(Buffer::from_u32(9)));
    one(&m, "the program lists buffer #9, which does not exist");
    let mut m = f.m.clone();
    let name = m.sym("e");
    m.ops[f.empty].kind = OpKind::Kernel {
        name,
        body: Block::from_u32(9),
    };
    one(
        &m,
        "op #4 (`gpsimd.kernel`) has body block #9, which does not exist",
    );
}

#[test]
fn foreign_symbols() {
    let f = fixture();
    let mut other = other_module(&f.m);
    let s = foreign_symbol(&f.m, &mut other);
    let mut m = f.m.clone();
    m.ops[f.copy].operands[1].role = s;
    // A role that is not this module's is not named.
    one_about(
        &m,
        "operand 1 of op #0 (`isa.tensor_copy`) has a role or struct symbol from another module",
        "op #0 (isa.tensor_copy)",
    );
    // Nor with a missing buffer besides; and the item-by-item check says
    // the same.
    m.ops[f.copy].operands[1].buffer = Buffer::from_u32(9);
    let whole = verify_no_panic(&m).unwrap_err();
    assert_eq!(whole.len(), 2, "{whole:#?}");
    assert!(whole[1].message.contains("uses buffer #9"));
    let by_op = apir_ir::verify_ops(&m, [f.copy]).unwrap_err();
    for d in whole.iter().chain(&by_op) {
        let subject = d.subject.as_ref().map(ToString::to_string);
        assert_eq!(subject.as_deref(), Some("op #0 (isa.tensor_copy)"), "{d:?}");
    }
    // A struct symbol of another module on an operand whose role is this
    // module's: the role is named, by both.
    let mut m = f.m.clone();
    m.ops[f.copy].operands[1].struct_name = Some(s);
    let want =
        "operand 1 of op #0 (`isa.tensor_copy`) has a role or struct symbol from another module";
    let whole = verify_no_panic(&m).unwrap_err();
    let by_op = apir_ir::verify_ops(&m, [f.copy]).unwrap_err();
    for ds in [&whole, &by_op] {
        let d = ds.iter().find(|d| d.message.contains(want)).expect(want);
        let subject = d.subject.as_ref().map(ToString::to_string);
        assert_eq!(
            subject.as_deref(),
            Some("op #0 (isa.tensor_copy), operand src")
        );
    }
    let mut m = f.m.clone();
    m.buffers[f.bufs[2]].name = s;
    one(&m, "buffer #2 has a name symbol from another module");
    // Found by `several_breakages_never_panic`: a buffer with a foreign
    // name listed twice made the verifier panic formatting its name.
    m.body.push(Item::Buffer(f.bufs[2]));
    let d = verify_no_panic(&m).unwrap_err();
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(d[1].message.contains("buffer #2 is listed twice"));
    check_named(&d);
    let mut m = f.m.clone();
    m.ops[f.kernel].kind = OpKind::Kernel {
        name: s,
        body: f.body,
    };
    one(
        &m,
        "op #1 (`gpsimd.kernel`) has a name symbol from another module",
    );
    let mut m = f.m.clone();
    let key = m.sym("u");
    m.ops[f.write]
        .attrs
        .insert(key, Attr::Array(vec![Attr::Array(vec![Attr::Str(s)])]));
    one(
        &m,
        "op #3 (`gpsimd.write`) has an attribute symbol from another module",
    );
    let mut m = f.m.clone();
    m.buffers[f.bufs[0]].attrs.insert(s, Attr::Int(1));
    one(
        &m,
        "buffer `%x` has an attribute symbol from another module",
    );
}

/// `n` arrays nested around an integer, built without recursion.
fn nested(n: usize) -> Attr {
    let mut a = Attr::Int(7);
    for _ in 0..n {
        a = Attr::Array(vec![a]);
    }
    a
}

/// Drops `a` a level at a time: a value nested as deep as built here
/// would overflow the stack of the derived, recursive drop.
fn unnest(mut a: Attr) {
    while let Attr::Array(mut items) = a {
        a = items.pop().unwrap_or(Attr::Int(0));
    }
}

/// The parser reads attribute arrays nested at most `MAX_ARRAY_NESTING`
/// deep; a built module nested deeper is rejected by `structure`, and the
/// verifier and the printer walk no deeper (a walk to the bottom of a
/// value nested 200,000 deep overflowed the stack: an abort, not a panic).
#[test]
fn attribute_arrays_nest_as_deep_as_text_reads() {
    use apir_ir::module::MAX_ARRAY_NESTING;
    let f = fixture();
    // As deep as text reads: accepted, printed and parsed back.
    let mut m = f.m.clone();
    let key = m.sym("u");
    m.ops[f.write].attrs.insert(key, nested(MAX_ARRAY_NESTING));
    verify_no_panic(&m).unwrap();
    let text = print_module(&m);
    let (back, _) = parse_str("t.apir", &text, ParseOptions::default()).unwrap();
    assert_eq!(print_module(&back), text);
    // One deeper: the text does not parse, and the built module is rejected.
    m.ops[f.write]
        .attrs
        .insert(key, nested(MAX_ARRAY_NESTING + 1));
    let deeper = print_module(&m);
    let (errs, _) = parse_str("t.apir", &deeper, ParseOptions::default()).unwrap_err();
    assert!(
        errs.iter().any(|d| d.message.contains("nest too deeply")),
        "{errs:#?}"
    );
    one(
        &m,
        &format!("op #3 (`gpsimd.write`) has an attribute whose arrays nest more than {MAX_ARRAY_NESTING} deep"),
    );
    // Far deeper, on an op, a buffer and the module: each reported once,
    // and printed with a marker where the printer stops.
    let mut m = f.m.clone();
    let key = m.sym("u");
    m.ops[f.write].attrs.insert(key, nested(200_000));
    m.buffers[f.bufs[0]].attrs.insert(key, nested(200_000));
    m.attrs.insert(key, nested(200_000));
    let d = verify_no_panic(&m).unwrap_err();
    assert_eq!(d.len(), 3, "{d:#?}");
    for (d, who) in d
        .iter()
        .zip(["the module", "buffer `%x`", "op #3 (`gpsimd.write`)"])
    {
        assert!(
            d.message
                .starts_with(&format!("{who} has an attribute whose arrays nest")),
            "{}",
            d.message
        );
    }
    let text = print_module(&m);
    assert_eq!(text.matches("[/* nested too deep to print */]").count(), 3);
    assert!(text.len() < 1_000, "{} bytes", text.len());
    for a in [
        m.ops[f.write].attrs.swap_remove(&key),
        m.buffers[f.bufs[0]].attrs.swap_remove(&key),
        m.attrs.swap_remove(&key),
    ] {
        unnest(a.unwrap());
    }
}

#[test]
fn ops_under_the_wrong_parent() {
    let f = fixture();
    let mut m = f.m.clone();
    m.move_op(f.read, Place::End(None));
    one(&m, "op #2 (`gpsimd.read`) is at the top level");
    let mut m = f.m.clone();
    m.move_op(f.copy, Place::After(f.read));
    one(&m, "op #0 (`isa.tensor_copy`) is inside a `gpsimd.kernel`");
    let mut m = f.m.clone();
    m.move_op(f.empty, Place::End(Some(f.body)));
    one(&m, "op #4 (`gpsimd.kernel`) is inside a `gpsimd.kernel`");
    // A kernel in its own body: nothing in the program reaches it.
    let mut m = f.m.clone();
    m.move_op(f.kernel, Place::End(Some(f.body)));
    one(
        &m,
        "op #1 (`gpsimd.kernel`) is stored but not in the program",
    );
}

#[test]
fn ops_listed_twice_or_not_at_all() {
    let f = fixture();
    let mut m = f.m.clone();
    m.blocks[f.body].ops.insert(0, f.write);
    one(&m, "op #3 (`gpsimd.write`) is listed twice in the program");
    let mut m = f.m.clone();
    m.body.push(Item::Op(f.kernel));
    one(&m, "op #1 (`gpsimd.kernel`) is listed twice in the program");
    let mut m = f.m.clone();
    m.blocks[f.body].ops.retain(|&o| o != f.read);
    one(&m, "op #2 (`gpsimd.read`) is stored but not in the program");
    // A kernel missing from the program: once, not once per body op.
    let mut m = f.m.clone();
    m.body.retain(|&i| i != Item::Op(f.kernel));
    one(
        &m,
        "op #1 (`gpsimd.kernel`) is stored but not in the program",
    );
}

#[test]
fn duplicate_names_and_late_declarations() {
    let f = fixture();
    let mut m = f.m.clone();
    m.buffers[f.bufs[3]].name = m.buffers[f.bufs[2]].name;
    one(&m, "buffer `%h` is declared twice (buffers #2 and #3)");
    let mut m = f.m.clone();
    let name = m.sym("k");
    let OpKind::Kernel { body, .. } = m.ops[f.empty].kind else {
        unreachable!()
    };
    m.ops[f.empty].kind = OpKind::Kernel { name, body };
    one(&m, "kernel `@k` is declared twice (op #1 and op #4)");
    let mut m = f.m.clone();
    let h = f.bufs[2];
    m.body.retain(|&i| i != Item::Buffer(h));
    m.body.push(Item::Buffer(h));
    one_about(
        &m,
        "operand 0 of op #2 (`gpsimd.read`) uses buffer `%h` before its declaration",
        "op #2 (gpsimd.read), operand src",
    );
    let mut m = f.m.clone();
    m.body.retain(|&i| i != Item::Buffer(h));
    one(&m, "buffer `%h` is stored but not declared in the program");
}

/// Fields a module built in code can set but text cannot say: the verifier
/// rejects each (a module it accepts prints to text that means the same),
/// and accepts the module with the field as text would read it.
#[test]
fn fields_text_cannot_say() {
    use apir_ir::staging::{Accessor, KernelPlan, Policy};
    let f = fixture();
    // An HBM buffer has no partition: its buffer op has no `partition`.
    let mut m = f.m.clone();
    m.buffers[f.bufs[2]].partition = 3;
    one(
        &m,
        "buffer `%h` in HBM has partition 3: HBM is not partitioned",
    );
    // A typed plan gives one reason per accessor, or none.
    let plan = |reasons: &[&str]| KernelPlan {
        policy: Policy::Pipelined,
        depth: 1,
        accessors: vec![Accessor::Index, Accessor::Index],
        params: Default::default(),
        reasons: reasons.iter().map(|r| r.to_string()).collect(),
        slots: Vec::new(),
        steps: Vec::new(),
    };
    for bad in [&["only one"][..], &["a", "b", "c"]] {
        let mut m = f.m.clone();
        m.plans.insert(f.kernel, plan(bad));
        let d = verify_no_panic(&m).expect_err("reasons");
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(
            d[0].message.contains(&format!(
                "`gpsimd.plan` gives {} reasons for 2 accessors",
                bad.len()
            )),
            "{}",
            d[0].message
        );
        assert!(d[0].span.is_some());
    }
    for good in [&[][..], &["first \"one\"", "second"]] {
        let mut m = f.m.clone();
        m.plans.insert(f.kernel, plan(good));
        verify(&m).unwrap_or_else(|d| panic!("{good:?}: {d:#?}"));
        check_accepted(&m);
    }
}

/// An operand holding an empty `Lowered` (every form `None`) means what an
/// operand without lowered forms means: it verifies, including on a
/// `gpsimd.read` (which carries none), and prints as the same text.
#[test]
fn an_empty_lowered_is_no_lowered_forms() {
    let f = fixture();
    let text = print_module(&f.m);
    let mut m = f.m.clone();
    for op in [f.copy, f.read, f.write] {
        for o in &mut m.ops[op].operands {
            o.lowered = Some(Default::default());
            assert!(o.lowered().is_none());
        }
    }
    verify(&m).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(print_module(&m), text);
    check_accepted(&m);
    // And it compares equal to the operand without any.
    for op in [f.copy, f.read, f.write] {
        assert_eq!(m.ops[op].operands, f.m.ops[op].operands);
    }
    let mut lowered = m.clone();
    lowered.ops[f.copy].operands[0].lowered_mut().kind =
        Some(apir_ir::target::DescriptorKind::Tensor(2));
    assert_ne!(lowered.ops[f.copy].operands, f.m.ops[f.copy].operands);
}

/// Sizes near 2^64 are reported, never wrapped: an on-chip buffer of
/// `u64::MAX` partitions starting at partition 1 (whose partition end wraps
/// to 0 in 64 bits) does not fit, and its operand's walk far past its
/// partition is not let through; a base byte near 2^64 under an attached
/// fold is reported, not overflowed. The same from text.
#[test]
fn sizes_near_two_to_the_64() {
    let memset = IsaOp::from_name("isa.memset").expect("in the table");
    let mut m = Module::new(Arch::V2);
    let d = m.buffer_data("x", Memory::Sbuf, 1, 0, &[u64::MAX, 4], Dtype::F32);
    let x = m.add_buffer(d);
    let dst = m.operand("dst", x, AccessPattern::new(&[(4, 1), (1, 1000)], 124));
    m.append_op(None, Module::op_data(OpKind::Isa(memset), [dst]));
    let d = verify_no_panic(&m).expect_err("a buffer of 2^64 - 1 partitions");
    assert!(
        d[0].message
            .contains("partitions 1..18446744073709551616 exceed the 128 partitions"),
        "{d:#?}"
    );
    let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 1, byte = 0} : tile<18446744073709551615x4xf32>\n  isa.memset dst = %x[[4, 1], [1, 1000]] + 124\n}\n";
    let parsed = catch_unwind(|| parse_str("big.apir", text, ParseOptions::default()));
    match parsed.expect("parsing does not panic") {
        Err((d, _)) => assert!(d[0].message.contains("exceed the 128 partitions"), "{d:#?}"),
        Ok((m, _)) => {
            let d = verify_no_panic(&m).expect_err("does not fit");
            assert!(d[0].message.contains("exceed the 128 partitions"), "{d:#?}");
        }
    }

    let mut m = Module::new(Arch::V2);
    let d = m.buffer_data("y", Memory::Sbuf, 0, u64::MAX - 3, &[1, 4], Dtype::F32);
    let y = m.add_buffer(d);
    let mut dst = m.operand("dst", y, AccessPattern::new(&[(4, 1), (1, 1)], 1));
    dst.lowered = Some(Lowered {
        fold: Some(Fold {
            partition: 0,
            byte: 0,
            channels: 1,
        }),
        ..Default::default()
    });
    m.append_op(None, Module::op_data(OpKind::Isa(memset), [dst]));
    let d = verify_no_panic(&m).expect_err("a base byte near 2^64");
    assert!(
        d.iter().any(|d| d.message.contains("does not fit SBUF")),
        "{d:#?}"
    );
    let err = apir_ir::lowering::fold_of(&m, &m.ops[m.top_ops().next().unwrap()].operands[0])
        .expect_err("the start byte overflows");
    assert_eq!(
        err,
        apir_ir::lowering::FoldError::ByteOverflow {
            base: u64::MAX - 3,
            element: 1
        }
    );
}

/// A buffer built in code keeps no attribute under the key of any buffer
/// op's field (`partition`, `byte`, `addr`), not only its own op's: the
/// parser rejects `partition` on `mem.hbm` and `addr` on `mem.sbuf` too.
#[test]
fn no_buffer_keeps_a_field_key_of_another_buffer_op() {
    let f = fixture();
    for (b, key) in [
        (f.bufs[2], "partition"),
        (f.bufs[2], "byte"),
        (f.bufs[2], "addr"),
        (f.bufs[0], "addr"),
        (f.bufs[0], "byte"),
    ] {
        let mut m = f.m.clone();
        let k = m.sym(key);
        m.buffers[b].attrs.insert(k, Attr::Int(3));
        one(&m, &format!("an attribute `{key}`"));
        // Its text is what the parser rejects.
        let text = print_module(&m);
        assert!(
            parse_str("attr.apir", &text, ParseOptions::default()).is_err(),
            "{key}: {text}"
        );
    }
    let mut m = f.m.clone();
    let k = m.sym("note");
    m.buffers[f.bufs[2]].attrs.insert(k, Attr::Int(3));
    verify(&m).unwrap();
    check_accepted(&m);
}

/// The item-by-item entry points and the op walk, handed ids the module
/// does not store or a kernel that lists itself, report or stop: they do
/// not index out of range or recurse without end.
#[test]
fn item_by_item_checks_and_walks_on_broken_layouts() {
    use apir_ir::{verify_buffer, verify_ops};
    let f = fixture();
    let d = verify_ops(&f.m, [Op::from_u32(55)]).expect_err("no op #55");
    assert_eq!(d[0].message, "op #55 does not exist");
    let d = verify_buffer(&f.m, Buffer::from_u32(9)).expect_err("no buffer #9");
    assert_eq!(d[0].message, "buffer #9 does not exist");
    let mut m = f.m.clone();
    m.ops[f.read].operands[0].buffer = Buffer::from_u32(9);
    let d = verify_ops(&m, [f.kernel]).expect_err("a dangling buffer");
    assert_eq!(
        d[0].message,
        "operand 0 of op #2 (`gpsimd.read`) uses buffer #9, which does not exist"
    );
    assert_eq!(
        d[0].subject.as_ref().map(ToString::to_string).as_deref(),
        Some("op #2 (gpsimd.read), operand src")
    );
    let mut m = f.m.clone();
    m.ops[f.copy].operands[1].buffer = Buffer::from_u32(9);
    assert!(verify_ops(&m, [f.copy]).is_err());
    // A kernel whose body lists the kernel itself.
    let mut m = f.m.clone();
    m.blocks[f.body].ops.push(f.kernel);
    let walked = m.walk_ops();
    assert_eq!(walked.len(), f.m.walk_ops().len() + 1, "{walked:?}");
    assert!(verify_no_panic(&m).is_err());
    let d = verify_ops(&m, [f.kernel]).expect_err("a kernel inside a kernel");
    assert_eq!(
        d[0].message,
        "op #1 (`gpsimd.kernel`) is a kernel inside a kernel"
    );
    // Symbols of another module, which the op rules would look up.
    let mut other = other_module(&f.m);
    let s = foreign_symbol(&f.m, &mut other);
    let mut m = f.m.clone();
    m.ops[f.copy].operands[1].role = s;
    let d = catch_unwind(AssertUnwindSafe(|| verify_ops(&m, [f.copy])))
        .expect("no panic")
        .expect_err("a foreign role");
    assert_eq!(
        d[0].message,
        "operand 1 of op #0 (`isa.tensor_copy`) has a role or struct symbol from another module"
    );
    let mut m = f.m.clone();
    m.ops[f.copy].attrs.insert(s, Attr::Int(1));
    let d = catch_unwind(AssertUnwindSafe(|| verify_ops(&m, [f.copy])))
        .expect("no panic")
        .expect_err("a foreign attribute key");
    assert!(d[0].message.contains("from another module"), "{d:#?}");
    verify_ops(&f.m, f.m.top_ops().collect::<Vec<_>>()).unwrap();
    for b in f.bufs {
        verify_buffer(&f.m, b).unwrap();
    }
}

/// A typed plan says nothing text cannot: a core copy runs on no SDMA
/// queue (`gpsimd.memcpy` has no `queue`), and a copy's tile is one of the
/// kernel's (each holds an iteration at least), as for a plan read from text.
#[test]
fn typed_plans_hold_what_text_says() {
    use apir_ir::staging::{Accessor, Copy, Dir, KernelPlan, Method, Policy, Slot, Step};
    let f = fixture();
    let copy = |queue: u8, tile: u32| Copy {
        dir: Dir::M2s,
        method: Method::VecMemcpy,
        queue,
        access: 0,
        tile,
        slot: 0,
        hbm: 0,
        dram: 0x80000,
        bytes: 64,
    };
    let plan = |c: Copy| KernelPlan {
        policy: Policy::Pipelined,
        depth: 1,
        accessors: vec![Accessor::Index, Accessor::Index],
        params: Default::default(),
        reasons: Vec::new(),
        slots: vec![Slot {
            access: 0,
            dram: 0x80000,
            bytes: 64,
        }],
        steps: vec![Step::Copy(c)],
    };
    // The kernel's accesses walk 16 elements: tiles 0..=15.
    for c in [copy(0, 0), copy(0, 15)] {
        let mut m = f.m.clone();
        m.plans.insert(f.kernel, plan(c));
        verify(&m).unwrap_or_else(|d| panic!("{c:?}: {d:#?}"));
        check_accepted(&m);
        let text = print_module(&m);
        let (back, _) = parse_str("plan.apir", &text, ParseOptions::default()).unwrap();
        let read = KernelPlan::read(&back, back.top_ops().nth(1).unwrap()).unwrap();
        assert_eq!(read.as_deref(), Some(&plan(c)), "{text}");
    }
    for (c, want) in [
        (copy(7, 0), "its queue must be 0, not 7"),
        (
            copy(0, 16),
            "attribute `tile` of `gpsimd.memcpy` must be an integer in [0, 15]",
        ),
        (
            copy(0, u32::MAX),
            "attribute `tile` of `gpsimd.memcpy` must be an integer in [0, 15]",
        ),
    ] {
        let mut m = f.m.clone();
        m.plans.insert(f.kernel, plan(c));
        let d = verify_no_panic(&m).expect_err(want);
        assert!(d.iter().any(|d| d.message.contains(want)), "{want}: {d:#?}");
    }
}

/// A module produced a batch at a time is checked batch by batch against
/// what the batches before declared: a buffer stored since and declared by
/// no batch, a buffer or kernel declared again, a kernel name taken
/// again. What earlier batches declared may be used unlisted.
#[test]
fn batches_are_checked_against_the_batches_before() {
    use apir_ir::verify_batch;
    let f = fixture();
    let [x, y, h, _] = f.bufs;
    let isa = IsaOp::from_name("isa.tensor_copy").expect("in the table");
    let tile = AccessPattern::new(&[(64, 128), (1, 64)], 0);
    let copy = |m: &mut Module, dst: Buffer, src: Buffer| {
        let (d, s) = (
            m.operand("dst", dst, tile.clone()),
            m.operand("src", src, tile.clone()),
        );
        m.add_op(Module::op_data(OpKind::Isa(isa), [d, s]))
    };
    let kernel = |m: &mut Module, name: &str| {
        let body = m.new_block();
        let name = m.sym(name);
        m.add_op(Module::op_data(OpKind::Kernel { name, body }, []))
    };
    let batch_one = || {
        let mut m = f.m.clone();
        verify_batch(&m).unwrap();
        m.clear_batch();
        assert!(m.body.is_empty() && m.stored_ops() == 0);
        m
    };
    let errors = |m: &Module| -> Vec<String> {
        let d = verify_batch(m).expect_err("does not verify");
        check_named(&d);
        d.iter().map(|d| d.message.clone()).collect()
    };

    // The next batch uses batch one's buffers without listing them.
    let mut m = batch_one();
    copy(&mut m, x, y);
    kernel(&mut m, "k2");
    verify_batch(&m).unwrap();

    // A buffer stored since, in no batch's body: never verified, so not
    // taken for an earlier batch's (its geometry would break SBUF's end).
    let mut m = batch_one();
    let past_end = m.buffer_data("z", Memory::Sbuf, 0, 0x2ff00, &[128, 1024], Dtype::F32);
    let z = m.buffers.push(past_end);
    copy(&mut m, z, x);
    assert_eq!(
        errors(&m),
        ["buffer `%z` is stored but not declared in the program"]
    );
    // Nor once the batch that did not declare it is cleared.
    m.clear_batch();
    copy(&mut m, x, z);
    assert_eq!(
        errors(&m),
        ["buffer `%z` is stored but not declared in the program"]
    );
    // Declared by a later batch, it is verified there.
    m.clear_batch();
    m.body.push(Item::Buffer(z));
    let got = errors(&m);
    assert!(
        got.len() == 1 && got[0].starts_with("buffer `%z` does not fit SBUF"),
        "{got:?}"
    );

    // Nor is one a batch declared that did not verify, when the producer
    // clears it all the same: the next batch may not use it unlisted.
    let mut m = batch_one();
    let past_end = m.buffer_data("w", Memory::Sbuf, 0, 0x2ff00, &[128, 1024], Dtype::F32);
    let w = m.add_buffer(past_end);
    assert!(verify_batch(&m).is_err());
    m.clear_batch();
    copy(&mut m, w, x);
    assert_eq!(
        errors(&m),
        ["buffer `%w` is stored but not declared in the program"]
    );
    // Buffers replaced wholesale: what earlier batches declared is gone
    // with them, and nothing stored is taken for it.
    let mut m = batch_one();
    m.buffers = Default::default();
    let again = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
    let x2 = m.buffers.push(again);
    for name in ["a", "b", "c", "d"] {
        let d = m.buffer_data(name, Memory::Sbuf, 0, 0x2ff00, &[128, 1024], Dtype::F32);
        m.buffers.push(d);
    }
    copy(&mut m, x2, x2);
    let got = errors(&m);
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got
        .iter()
        .all(|e| e.ends_with("is stored but not declared in the program")));

    // An earlier batch's buffer declared again, and a new buffer under an
    // earlier batch's name.
    let mut m = batch_one();
    m.body.push(Item::Buffer(h));
    assert_eq!(
        errors(&m),
        ["buffer `%h` is declared again: an earlier batch declared it"]
    );
    let mut m = batch_one();
    let again = m.buffer_data("y", Memory::Sbuf, 0, 0x8000, &[128, 64], Dtype::F32);
    m.add_buffer(again);
    assert_eq!(
        errors(&m),
        ["buffer `%y` (#4) is declared twice: an earlier batch declared it"]
    );

    // A kernel name of an earlier batch, cleared either way.
    let mut m = batch_one();
    let k = kernel(&mut m, "k");
    assert_eq!(
        errors(&m),
        [format!(
            "kernel `@k` (op #{}) is declared twice: an earlier batch declared it",
            k.as_u32()
        )]
    );
    let mut m = f.m.clone();
    m.clear_ops();
    verify_batch(&m).unwrap();
    let k = kernel(&mut m, "e");
    assert_eq!(
        errors(&m),
        [format!(
            "kernel `@e` (op #{}) is declared twice: an earlier batch declared it",
            k.as_u32()
        )]
    );
    // The whole-module verifier takes no batch for declared.
    let m = batch_one();
    assert!(verify(&m).is_err());
}
