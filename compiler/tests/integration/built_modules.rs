//! Modules edited or broken through the `apir-ir` API, handed to the
//! embedding API (`Compilation::from_module`):
//! - a module edited through the layout methods (ops replaced by copies,
//!   so op ids are reused and the op storage has holes, and operands
//!   holding empty lowered forms) lowers to the same IR as the text it
//!   prints;
//! - a module the verifier rejects makes every pipeline return the
//!   verifier's diagnostics, never panic, and the diagnostics render.

use apir_compiler::{wire, Compilation, Error};
use apir_ir::{Block, Buffer, Item, Module, Op, OpKind, Place, SourceMap};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Every top-level op but kernels, last to first, replaced by a copy of
/// itself inserted after it; then the first split in two copies and the
/// second removed; every operand without lowered forms given an empty
/// set of them: the module prints the same, with op ids reused and freed
/// slots in storage.
fn edited(mut m: Module) -> Module {
    let ops: Vec<Op> = m.top_ops().collect();
    for &op in ops.iter().rev() {
        if matches!(m.ops[op].kind, OpKind::Kernel { .. }) {
            continue;
        }
        let copy = m.ops[op].clone();
        let new = m.insert_op_after(op, copy);
        m.remove_op(op);
        assert!(m.ops.contains(new) && !m.ops.contains(op));
    }
    let first = m.top_ops().next();
    if let Some(first) = first {
        if !matches!(m.ops[first].kind, OpKind::Kernel { .. }) {
            let copy = m.ops[first].clone();
            let pieces = m.replace_op(first, [copy.clone(), copy]);
            m.remove_op(pieces[1]);
        }
    }
    // An empty set of lowered forms on every operand without any: what a
    // builder that pre-allocates them leaves, meaning no lowered forms.
    let ops: Vec<Op> = m.walk_ops();
    for op in ops {
        for o in &mut m.ops[op].operands {
            if o.lowered.is_none() {
                o.lowered = Some(Default::default());
            }
        }
    }
    assert_eq!(m.stored_ops(), m.walk_ops().len());
    m
}

#[test]
fn edited_modules_lower_like_their_text() {
    for entry in std::fs::read_dir("tests/corpus").unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let parsed = Compilation::parse(&name, &text, None).unwrap();
        let printed = parsed.ir();
        let mut built = Compilation::from_module(edited(parsed.module));
        assert_eq!(built.ir(), printed, "{name}");
        let mut reference = Compilation::parse(&name, &printed, None).unwrap();
        let a = built.run("lower-to-wire").map(|_| built.ir());
        let b = reference.run("lower-to-wire").map(|_| reference.ir());
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}"),
            (Err(Error::Diagnostics(a)), Err(Error::Diagnostics(b))) => {
                let msgs = |d: &[apir_ir::Diagnostic]| -> Vec<String> {
                    d.iter().map(|d| d.message.clone()).collect()
                };
                assert_eq!(msgs(&a), msgs(&b), "{name}");
            }
            (a, b) => panic!("{name}: {a:?} vs {b:?}"),
        }
        assert_eq!(
            built.module.stored_ops(),
            built.module.walk_ops().len(),
            "{name}"
        );
    }
}

const TEXT: &str = "module @m attributes {arch = \"v2\"} {
  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>
  %y = mem.sbuf {partition = 0, byte = 0x4000} : tile<128x64xf32>
  isa.tensor_copy dst = %y[[64, 128], [1, 64]], src = %x[[64, 128], [1, 64]]
  %h = mem.hbm {addr = 0x40000000} : tensor<4096xf32>
  %g = mem.hbm {addr = 0x40100000} : tensor<4096xf32>
  gpsimd.kernel @k {core = 0, cycles_per_element = 2} {
    gpsimd.read %h[[1, 4096]]
    gpsimd.write %g[[1, 4096]]
  }
}
";

/// The module of `TEXT`, its ISA op, kernel, kernel body and read.
fn parsed() -> (Module, Op, Op, Block, Op) {
    let c = Compilation::parse("m.apir", TEXT, None).unwrap();
    let m = c.module;
    let copy = m.top_ops().next().unwrap();
    let kernel = m.top_ops().nth(1).unwrap();
    let OpKind::Kernel { body, .. } = m.ops[kernel].kind else {
        panic!("not a kernel")
    };
    let read = m.blocks[body].ops[0];
    (m, copy, kernel, body, read)
}

#[test]
fn rejected_modules_fail_every_pipeline_without_panicking() {
    let (m, copy, kernel, body, read) = parsed();
    type Breakage = Box<dyn Fn(&mut Module)>;
    let breakages: Vec<(&str, Breakage)> = vec![
        (
            "dangling op",
            Box::new(|m| m.body.push(Item::Op(Op::from_u32(999)))),
        ),
        (
            "removed op listed",
            Box::new(move |m| {
                m.remove_op(copy);
                m.body.push(Item::Op(copy));
            }),
        ),
        (
            "dangling buffer",
            Box::new(move |m| m.ops[copy].operands[0].buffer = Buffer::from_u32(99)),
        ),
        (
            "dangling block",
            Box::new(move |m| {
                let OpKind::Kernel { name, .. } = m.ops[kernel].kind else {
                    unreachable!()
                };
                m.ops[kernel].kind = OpKind::Kernel {
                    name,
                    body: Block::from_u32(99),
                };
            }),
        ),
        (
            "read at the top level",
            Box::new(move |m| m.move_op(read, Place::End(None))),
        ),
        (
            "ISA op in a kernel",
            Box::new(move |m| m.move_op(copy, Place::End(Some(body)))),
        ),
        (
            "kernel in its own body",
            Box::new(move |m| m.move_op(kernel, Place::End(Some(body)))),
        ),
        (
            // Followed round, ten references at each level would print
            // 10^8 ops: each op is printed once.
            "kernel listed in its own body ten times",
            Box::new(move |m| m.blocks[body].ops.extend([kernel; 10])),
        ),
        (
            "op listed twice",
            Box::new(move |m| m.blocks[body].ops.push(read)),
        ),
        (
            "op not listed",
            Box::new(move |m| m.body.retain(|&i| i != Item::Op(copy))),
        ),
        (
            "duplicate kernel name",
            Box::new(move |m| {
                let b = m.new_block();
                let OpKind::Kernel { name, .. } = m.ops[kernel].kind else {
                    unreachable!()
                };
                m.append_op(None, Module::op_data(OpKind::Kernel { name, body: b }, []));
            }),
        ),
        (
            "use before declaration",
            Box::new(|m| {
                let first = m.body.remove(0);
                m.body.push(first);
            }),
        ),
        (
            "symbol from another module",
            Box::new(move |m| {
                // Past every symbol of `m`'s own interner.
                let mut other = Module::new(m.arch);
                let last = (0..10_000).map(|i| other.sym(&format!("s{i}"))).last();
                assert!(last.is_some_and(|s| !m.symbols.contains(s)));
                m.ops[copy].operands[0].role = last.unwrap();
            }),
        ),
    ];
    for (what, brk) in &breakages {
        let mut broken = m.clone();
        brk(&mut broken);
        // A rejected module prints too (marked where it is broken), without
        // a panic or an endless walk of a body that lists its own kernel.
        let printed = catch_unwind(AssertUnwindSafe(|| {
            Compilation::from_module(broken.clone()).ir()
        }));
        let Ok(printed) = printed else {
            panic!("{what}: printing panicked");
        };
        assert!(printed.starts_with("module"), "{what}: {printed}");
        assert!(printed.len() < 100_000, "{what}: {} bytes", printed.len());
        // The wire doors verify the module they are handed.
        let wired = catch_unwind(AssertUnwindSafe(|| {
            let mut out = vec![7u8];
            let appended = wire::append_binary(&broken, &mut out, 0);
            (wire::collect(&broken, &SourceMap::new()), appended, out)
        }));
        let Ok((collected, appended, out)) = wired else {
            panic!("{what}: collecting wire bytes panicked");
        };
        assert!(
            matches!(collected, Err(wire::WireError::Invalid { ref diagnostics }) if !diagnostics.is_empty()),
            "{what}: {collected:?}"
        );
        assert!(
            matches!(appended, Err(wire::WireError::Invalid { .. })),
            "{what}"
        );
        assert_eq!(out, [7], "{what}: appended to a rejected module's output");
        // So do the staging door and the pass manager's batch door.
        let doors = catch_unwind(AssertUnwindSafe(|| {
            let scheduled = apir_compiler::schedule::collect(&broken, &SourceMap::new());
            let mut pm = apir_compiler::manager::PassManager::new(
                apir_compiler::Registry::builtin()
                    .build(&apir_compiler::Pipeline::parse("lower-to-wire").unwrap())
                    .unwrap(),
                Default::default(),
            );
            let batch = pm.run_batch(&mut broken.clone());
            (scheduled.is_err(), batch.is_err())
        }));
        assert_eq!(
            doors.ok(),
            Some((true, true)),
            "{what}: schedule::collect / run_batch"
        );
        for pipeline in ["lower-to-wire", "lower-staging", "all", "check-coherency"] {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mut c = Compilation::from_module(broken.clone());
                let r = c.run(pipeline);
                let rendered = match &r {
                    Err(Error::Diagnostics(d)) => {
                        assert!(c.describe(d).iter().all(|i| !i.message.is_empty()));
                        Some((d.clone(), c.render(d)))
                    }
                    _ => None,
                };
                (r.is_ok(), rendered)
            }));
            let Ok((ok, rendered)) = outcome else {
                panic!("{what}: `{pipeline}` panicked");
            };
            assert!(!ok, "{what}: `{pipeline}` accepted a broken module");
            let Some((diags, text)) = rendered else {
                panic!("{what}: `{pipeline}` failed without diagnostics");
            };
            assert!(!diags.is_empty(), "{what}");
            assert!(
                diags
                    .iter()
                    .all(|d| d.message.contains("op #") || d.message.contains("buffer")),
                "{what}: {diags:#?}"
            );
            assert!(text.contains("error"), "{what}: {text}");
        }
    }
}

/// A module built in code can name and key what text cannot spell; the
/// verifier rejects each such module (so that a module it accepts prints
/// to text that parses back), and accepts the same module spelled right.
#[test]
fn what_text_cannot_spell_is_rejected() {
    use apir_ir::target::IsaOp;
    use apir_ir::{AccessPattern, Arch, Attr, Dtype, Memory, OpData};
    let memset = || OpKind::Isa(IsaOp::from_name("isa.memset").unwrap());
    // A module of one buffer and one op, edited by `edit`.
    let build = |edit: &dyn Fn(&mut Module, &mut apir_ir::BufferData, &mut OpData)| {
        let mut m = Module::new(Arch::V2);
        let mut d = m.buffer_data("x", Memory::Sbuf, 0, 0, &[1, 4], Dtype::F32);
        let a = m.operand(
            "dst",
            Buffer::from_u32(0),
            AccessPattern::new(&[(4, 1), (1, 4)], 0),
        );
        let mut op = Module::op_data(memset(), [a]);
        edit(&mut m, &mut d, &mut op);
        m.add_buffer(d);
        m.add_op(op);
        m
    };
    type Edit = Box<dyn Fn(&mut Module, &mut apir_ir::BufferData, &mut OpData)>;
    let custom = |role: &'static str, key: Option<&'static str>| -> Edit {
        Box::new(move |m, _, op| {
            op.kind = OpKind::Custom;
            op.operands[0].role = m.sym(role);
            op.operands[0].struct_name = key.map(|k| m.sym(k));
        })
    };
    let cases: Vec<(&str, Edit, Edit)> = vec![
        (
            "is named \"x y\"",
            Box::new(|m, d, _| d.name = m.sym("x y")),
            Box::new(|m, d, _| d.name = m.sym("x.y-1$")),
        ),
        (
            "is named \"\"",
            Box::new(|m, d, _| d.name = m.sym("")),
            Box::new(|m, d, _| d.name = m.sym("0")),
        ),
        (
            "the module is named \"a b\"",
            Box::new(|m, _, _| m.name = Some(m.sym("a b"))),
            Box::new(|m, _, _| m.name = Some(m.sym("a_b"))),
        ),
        (
            "the module has an attribute `arch`",
            Box::new(|m, _, _| {
                let k = m.sym("arch");
                m.attrs.insert(k, Attr::Int(3));
            }),
            Box::new(|m, _, _| {
                let k = m.sym("archive");
                m.attrs.insert(k, Attr::Int(3));
            }),
        ),
        (
            "has an attribute `partition`",
            Box::new(|m, d, _| {
                let k = m.sym("partition");
                d.attrs.insert(k, Attr::Int(5));
            }),
            Box::new(|m, d, _| {
                let k = m.sym("note");
                d.attrs.insert(k, Attr::Int(5));
            }),
        ),
        (
            "the attribute key \"bad key!\"",
            Box::new(|m, _, op| {
                let k = m.sym("bad key!");
                op.attrs.insert(k, Attr::Int(5));
            }),
            Box::new(|m, _, op| {
                let k = m.sym("value");
                op.attrs.insert(k, Attr::Int(5));
            }),
        ),
        (
            "has the role \"a = b,\"",
            custom("a = b,", Some("NEURON_ISA_TPB_TENSOR1D")),
            custom("a_b", Some("NEURON_ISA_TPB_TENSOR1D")),
        ),
        (
            "has no struct key",
            custom("dst", None),
            custom("dst", Some("NEURON_ISA_TPB_TENSOR1D")),
        ),
        (
            "which only `isa.custom` operands take",
            Box::new(|m, _, op| {
                op.operands[0].struct_name = Some(m.sym("NEURON_ISA_TPB_TENSOR1D"))
            }),
            Box::new(|_, _, _| {}),
        ),
    ];
    for (want, bad, good) in cases {
        let c = Compilation::from_module(build(&*bad));
        let e = c.verify().expect_err(want);
        let text = c.render(match &e {
            Error::Diagnostics(d) => d,
            e => panic!("{want}: {e:?}"),
        });
        assert!(text.contains(want), "{want}: {text}");
        let c = Compilation::from_module(build(&*good));
        c.verify()
            .unwrap_or_else(|e| panic!("{want} (spelled right): {e:?}"));
        let printed = c.ir();
        let back = Compilation::parse("back.apir", &printed, None)
            .unwrap_or_else(|e| panic!("{want} (spelled right): {printed}\n{e}"));
        assert_eq!(back.ir(), printed, "{want}");
    }
}

/// Wire bytes come only from a module that verifies: a lowered module
/// edited in code afterwards (an offset moved past its buffer, or bytes
/// overwritten) is refused by `wire::collect` and `wire::append_binary`
/// with the verifier's diagnostics, where it used to hand out the bytes it
/// carried; the module as lowered gives them.
#[test]
fn wire_bytes_only_from_a_module_that_verifies() {
    let (m, copy, ..) = parsed();
    let mut c = Compilation::from_module(m);
    c.run("lower-to-wire").unwrap();
    let good = wire::collect(&c.module, &c.sources).unwrap();
    assert_eq!(good.len(), 1);
    let mut out = Vec::new();
    let done = wire::append_binary(&c.module, &mut out, 0).unwrap();
    assert_eq!((done.ops, done.records), (1, 2));
    type Edit = Box<dyn Fn(&mut Module)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "offset past the buffer",
            Box::new(move |m| m.ops[copy].operands[0].ap.offset = 99_999),
        ),
        (
            "bytes overwritten",
            Box::new(move |m| {
                let l = m.ops[copy].operands[0].lowered.as_mut().unwrap();
                l.wire.as_mut().unwrap().iter_mut().for_each(|b| *b = 0xff);
            }),
        ),
    ];
    for (what, edit) in &edits {
        let mut m = c.module.clone();
        edit(&mut m);
        let err = wire::collect(&m, &c.sources).expect_err(what);
        let wire::WireError::Invalid { diagnostics } = &err else {
            panic!("{what}: {err:?}");
        };
        assert!(!diagnostics.is_empty(), "{what}");
        assert!(
            err.to_string().starts_with("the module does not verify: "),
            "{err}"
        );
        let mut out = vec![1, 2, 3];
        assert!(wire::append_binary(&m, &mut out, 0).is_err(), "{what}");
        assert_eq!(out, [1, 2, 3], "{what}");
    }
}

/// The batch producer `wire::append_binary` is for (docs/embedding.md): a
/// module parsed a batch at a time, each batch lowered and appended, then
/// cleared (its buffers stay stored, no longer listed). Every batch
/// verifies as a batch and appends its records, and the records of all
/// batches are those of the module lowered whole; a batch edited to be
/// invalid is refused.
#[test]
fn append_binary_takes_a_module_a_batch_at_a_time() {
    use apir_compiler::manager::{Instrumentation, PassManager};
    use apir_compiler::{Pipeline, Registry};
    use apir_ir::{ParseOptions, StreamParser};
    let text = std::fs::read_to_string("../examples/batchnorm.apir").unwrap();
    let mut sources = SourceMap::new();
    let file = sources.add("bn.apir", text.clone());
    let mut sp = StreamParser::new(&sources, file, 0..text.len(), ParseOptions::default());
    let pipeline = Pipeline::parse("lower-to-wire").unwrap();
    let passes = Registry::builtin().build(&pipeline).unwrap();
    let mut pm = PassManager::new(passes, Instrumentation::default());
    let mut records = Vec::new();
    let (mut first, mut batches) = (0, 0);
    loop {
        // One op per batch, with the buffers declared before it.
        let mut got = false;
        while let Some(item) = sp.next_item() {
            match item.expect("parses") {
                Item::Op(_) => {
                    got = true;
                    break;
                }
                Item::Buffer(_) => {}
            }
        }
        if !got {
            break;
        }
        let m = sp.module();
        pm.run_batch(m).expect("lowers");
        if batches == 1 {
            // An invalid batch is refused, nothing appended.
            let mut broken = m.clone();
            let op = broken.top_ops().next().unwrap();
            broken.ops[op].operands[0].ap.offset = 1 << 40;
            let before = records.len();
            let e = wire::append_binary(&broken, &mut records, first).unwrap_err();
            assert!(matches!(e, wire::WireError::Invalid { .. }), "{e:?}");
            assert_eq!(records.len(), before);
        }
        let done = wire::append_binary(m, &mut records, first)
            .unwrap_or_else(|e| panic!("batch {batches}: {e}"));
        first += done.ops;
        batches += 1;
        m.clear_batch();
    }
    assert!(batches > 2, "{batches} batches");
    let mut whole = Compilation::parse("bn.apir", &text, None).unwrap();
    whole.run("lower-to-wire").unwrap();
    let mut expected = Vec::new();
    wire::append_binary(&whole.module, &mut expected, 0).unwrap();
    assert_eq!(records, expected);
}

/// An op built in code and added to a module parsed from a file has no
/// place in that file: a diagnostic about it is shown without a location
/// (naming the op), its wire location is left out, and the parsed op's
/// stay where they are.
#[test]
fn an_op_built_into_a_parsed_module_is_located_nowhere() {
    use apir_ir::target::IsaOp;
    use apir_ir::AccessPattern;
    let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %x[[64, 128], [1, 64]]\n}\n";
    let memset = IsaOp::from_name("isa.memset").unwrap();
    let built = |free: u64| {
        let mut c = Compilation::parse("k.apir", text, None).unwrap();
        let x = c.module.buffer_by_name("x").unwrap();
        let dst = c
            .module
            .operand("dst", x, AccessPattern::new(&[(64, 128), (1, free)], 0));
        c.module
            .append_op(None, Module::op_data(OpKind::Isa(memset), [dst]));
        c
    };
    // One element past its partition.
    let mut c = built(65);
    let Err(Error::Diagnostics(d)) = c.run("lower-to-wire") else {
        panic!("an access past its partition lowers")
    };
    let info = c.describe(&d);
    assert_eq!(info[0].location, None);
    let shown = c.render(&d);
    assert!(
        shown.contains("in op #1 (isa.memset), operand dst"),
        "{shown}"
    );
    assert!(!shown.contains("k.apir"), "{shown}");
    let mut c = built(64);
    c.run("lower-to-wire").unwrap();
    let locs: Vec<String> = wire::collect(&c.module, &c.sources)
        .unwrap()
        .into_iter()
        .map(|op| op.loc)
        .collect();
    assert_eq!(locs, ["k.apir:3:3", ""]);
}

/// A built op that `canonicalize-ap` splits into pieces the later passes
/// reject: every error names the op the builder added (the pieces after
/// the first have ids the builder never saw), and so does the emitter's
/// error about a piece without descriptor bytes.
#[test]
fn errors_about_the_pieces_of_a_split_name_the_op_built() {
    use apir_ir::target::IsaOp;
    use apir_ir::{AccessPattern, Arch, Dtype, Memory};
    let memset = IsaOp::from_name("isa.memset").unwrap();
    let build = || {
        let mut m = Module::new(Arch::V2);
        // One partition, starting at partition 1: no access to it lowers.
        let u = m.buffer_data("u", Memory::Sbuf, 1, 0, &[1, 256], Dtype::U8);
        let u = m.add_buffer(u);
        let v = m.buffer_data("v", Memory::Sbuf, 0, 0, &[128, 64], Dtype::U8);
        let v = m.add_buffer(v);
        let dst = m.operand("dst", v, AccessPattern::new(&[(64, 128), (1, 64)], 0));
        let first = m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
        // Six free dims: canonicalize-ap splits it into 4 ops of 4.
        let dims = [(256, 1), (1, 4), (64, 2), (16, 2), (4, 2), (1, 2)];
        let dst = m.operand("dst", u, AccessPattern::new(&dims, 0));
        let split = m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
        (m, first, split)
    };
    let (m, _, split) = build();
    let mut c = Compilation::from_module(m);
    let Err(Error::Diagnostics(d)) = c.run("lower-to-wire") else {
        panic!("a partition start of 1 lowers")
    };
    assert_eq!(d.len(), 4, "{d:?}");
    assert!(c.module.top_ops().count() == 5);
    for info in c.describe(&d) {
        let subject = info.subject.expect("a subject");
        assert_eq!((subject.op, subject.role.as_deref()), (split, Some("dst")));
    }
    // A piece the verifier rejects (an offset past the buffer, set in
    // code after the split): the verifier, run by `verify`, by any
    // pipeline and by the emitters, names the op built too.
    let (m, _, split) = build();
    let mut c = Compilation::from_module(m);
    c.run("canonicalize-ap").unwrap();
    let last = c.module.top_ops().last().unwrap();
    assert_ne!(last, split);
    c.module.ops[last].operands[0].ap.offset = 1 << 20;
    let Err(Error::Diagnostics(d)) = c.verify() else {
        panic!("an offset past the buffer verifies")
    };
    assert_eq!(d[0].subject.as_ref().map(|s| s.op), Some(split), "{d:?}");
    let Err(Error::Diagnostics(d)) = c.run("lower-to-wire") else {
        panic!("an offset past the buffer lowers")
    };
    assert_eq!(d[0].subject.as_ref().map(|s| s.op), Some(split), "{d:?}");
    let Err(wire::WireError::Invalid { diagnostics }) = wire::collect(&c.module, &c.sources) else {
        panic!("an offset past the buffer is collected")
    };
    assert_eq!(diagnostics[0].subject.as_ref().map(|s| s.op), Some(split));
    // Pieces without descriptor bytes (canonicalize-ap alone split them;
    // the first, which keeps the op's id, taken out): the emitter names
    // the op built too.
    let (m, first, split) = build();
    let mut c = Compilation::from_module(m);
    c.run("canonicalize-ap").unwrap();
    let pieces: Vec<Op> = c.module.top_ops().filter(|&o| o != first).collect();
    assert_eq!(pieces.len(), 4);
    assert_eq!(pieces[0], split);
    c.module.retain_ops(None, |o, _| o != first && o != split);
    let Err(wire::WireError::NotEncoded { subject, location }) =
        wire::collect(&c.module, &c.sources)
    else {
        panic!("pieces without bytes are collected")
    };
    assert_eq!((subject.op, location), (split, None));
}

/// A warning about an op of a module built in code says which op, as its
/// errors do: an attribute the op does not interpret (a lint) and a split
/// `canonicalize-ap` refuses for its budget (a pass's warning) name the
/// op the builder added, and render as `in op #N`.
#[test]
fn warnings_about_a_built_op_name_it() {
    use apir_ir::target::IsaOp;
    use apir_ir::{AccessPattern, Arch, Attr, Dtype, Memory};
    let memset = IsaOp::from_name("isa.memset").unwrap();
    let mut m = Module::new(Arch::V2);
    let v = m.buffer_data("v", Memory::Sbuf, 0, 0, &[128, 256], Dtype::U8);
    let v = m.add_buffer(v);
    // Five free dims that do not merge: a split into 8 ops, over the
    // budget of 0 plus 4 for the one elementwise op so far.
    let dims = [(256, 128), (0, 8), (64, 2), (16, 2), (4, 2), (1, 2)];
    let dst = m.operand("dst", v, AccessPattern::new(&dims, 0));
    let refused = m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
    let dst = m.operand("dst", v, AccessPattern::new(&[(256, 128), (1, 64)], 0));
    let mut data = Module::op_data(OpKind::Isa(memset), [dst]);
    let key = m.sym("valeu");
    data.attrs.insert(key, Attr::Int(1));
    let misspelt = m.add_op(data);
    let mut c = Compilation::from_module(m);
    let report = c.run("canonicalize-ap{split-budget=0}").unwrap();
    let named: Vec<(String, Option<Op>)> = report
        .warnings
        .iter()
        .map(|d| (d.message.clone(), d.subject.as_ref().map(|s| s.op)))
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert!(
        named[0].0.starts_with("unknown attribute `valeu`"),
        "{named:?}"
    );
    assert_eq!(named[0].1, Some(misspelt));
    assert!(named[1].0.contains("not split into"), "{named:?}");
    assert_eq!(named[1].1, Some(refused));
    let shown = c.render(&report.warnings);
    assert!(shown.contains("in op #0 (isa.memset)"), "{shown}");
    assert!(shown.contains("in op #1 (isa.memset)"), "{shown}");
    // The op with the misspelt attribute split (a budget that allows it):
    // each piece keeps the attribute, and each warning about it names the
    // op built, in the lints of the module and of the next pipeline.
    let mut m = Module::new(Arch::V2);
    let v = m.buffer_data("v", Memory::Sbuf, 0, 0, &[128, 256], Dtype::U8);
    let v = m.add_buffer(v);
    let dst = m.operand("dst", v, AccessPattern::new(&dims, 0));
    let mut data = Module::op_data(OpKind::Isa(memset), [dst]);
    data.attrs.insert(m.sym("valeu"), Attr::Int(1));
    let split = m.add_op(data);
    let mut c = Compilation::from_module(m);
    c.run("canonicalize-ap").unwrap();
    assert!(c.module.top_ops().count() > 1);
    let lints = c.warnings();
    assert_eq!(lints.len(), c.module.top_ops().count());
    let report = c.run("fold-partition").unwrap();
    for d in lints.iter().chain(&report.warnings) {
        assert_eq!(d.subject.as_ref().map(|s| s.op), Some(split), "{d:?}");
    }
}
