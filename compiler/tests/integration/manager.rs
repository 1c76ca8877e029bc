//! The pass manager and registry with test passes: verify-after-each,
//! failure reporting, IR dumps, statistics, named pipelines and option
//! checking.

use apir_compiler::{
    Compilation, Error, Instrumentation, NamedPipeline, PassInfo, PassManager, Registry,
};
use apir_ir::{
    Changed, Diagnostic, Diagnostics, LoweredForm, Module, OptionInfo, Pass, PassContext,
};

/// Counts ops; `fail=true` makes it fail with a located error.
struct CountOps {
    fail: bool,
}

impl Pass for CountOps {
    fn name(&self) -> &'static str {
        "count-ops"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        cx.count("ops", "Number of ops seen", m.ops.len() as u64);
        if self.fail {
            let span = m.ops.values().next().map(|o| o.span);
            return Err(vec![Diagnostic::error(span, "count-ops was asked to fail")]);
        }
        Ok(Changed::No)
    }
}

/// Breaks the IR: moves every operand offset far outside its buffer, and
/// says it is op-local (so a driver may stream it). The driver tests use it
/// too.
pub(crate) struct Corrupt;

impl Pass for Corrupt {
    fn name(&self) -> &'static str {
        "corrupt"
    }
    fn run(&mut self, m: &mut Module, _: &mut PassContext) -> Result<Changed, Diagnostics> {
        for op in m.ops.values_mut() {
            for o in op.operands.iter_mut() {
                o.ap.offset = 1 << 40;
            }
        }
        Ok(Changed::Yes)
    }
    fn op_local(&self) -> bool {
        true
    }
}

/// Leaves IR that text cannot say: an attribute key that is not an
/// identifier on every op, and says it is op-local (so a driver streams
/// it). The driver tests use it too.
pub(crate) struct Misspell;

impl Pass for Misspell {
    fn name(&self) -> &'static str {
        "misspell"
    }
    fn run(&mut self, m: &mut Module, _: &mut PassContext) -> Result<Changed, Diagnostics> {
        let key = m.sym("not an identifier");
        for op in m.ops.values_mut() {
            op.attrs.insert(key, apir_ir::Attr::Int(1));
        }
        Ok(Changed::Yes)
    }
    fn op_local(&self) -> bool {
        true
    }
    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(Misspell))
    }
}

/// [`Corrupt`]'s registry entry (the driver tests register it too).
pub(crate) const CORRUPT_INFO: PassInfo = PassInfo {
    name: "corrupt",
    summary: "break the IR",
    options: &[],
    create: |_| Ok(Box::new(Corrupt)),
};

/// [`Misspell`]'s registry entry.
pub(crate) const MISSPELL_INFO: PassInfo = PassInfo {
    name: "misspell",
    summary: "leave IR text cannot say",
    options: &[],
    create: |_| Ok(Box::new(Misspell)),
};

/// Promises to change only lowered forms (with `only=true`, only the fold),
/// and attaches a wrong fold (one channel too many): the incremental
/// re-verification must catch it.
struct BadFold {
    only: bool,
}

impl Pass for BadFold {
    fn name(&self) -> &'static str {
        "bad-fold"
    }
    fn run(&mut self, m: &mut Module, _: &mut PassContext) -> Result<Changed, Diagnostics> {
        let ops: Vec<_> = m.ops.keys().collect();
        for op in ops {
            for i in 0..m.ops[op].operands.len() {
                let fold = apir_ir::lowering::fold_of(m, &m.ops[op].operands[i]);
                if let Ok(Some(mut f)) = fold {
                    f.channels += 1;
                    m.ops[op].operands[i].lowered_mut().fold = Some(f);
                }
            }
        }
        Ok(Changed::Yes)
    }
    fn preserves_logical_ir(&self) -> bool {
        true
    }
    fn attaches(&self) -> Option<LoweredForm> {
        self.only.then_some(LoweredForm::Fold)
    }
}

static TEST_PASSES: &[PassInfo] = &[
    PassInfo {
        name: "count-ops",
        summary: "count ops",
        options: &[OptionInfo {
            name: "fail",
            help: "fail on purpose (true|false)",
            default: "false",
        }],
        create: |o| {
            Ok(Box::new(CountOps {
                fail: o.get_or("fail", false)?,
            }))
        },
    },
    CORRUPT_INFO,
    MISSPELL_INFO,
    PassInfo {
        name: "bad-fold",
        summary: "attach a wrong fold",
        options: &[OptionInfo {
            name: "only",
            help: "declare that only the fold is attached (true|false)",
            default: "false",
        }],
        create: |o| {
            Ok(Box::new(BadFold {
                only: o.get_or("only", false)?,
            }))
        },
    },
];

static TEST_PIPELINES: &[NamedPipeline] = &[NamedPipeline {
    name: "twice",
    summary: "count twice",
    expansion: "count-ops,count-ops",
}];

fn registry() -> Registry {
    Registry {
        passes: TEST_PASSES,
        pipelines: TEST_PIPELINES,
    }
}

const TEXT: &str = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %x[[64, 128], [1, 64]]\n}\n";

fn compile(inst: Instrumentation) -> Compilation {
    Compilation::parse("t.apir", TEXT, None)
        .map_err(|e| e.into_error())
        .unwrap()
        .with_registry(registry())
        .with_instrumentation(inst)
}

#[test]
fn named_pipelines_expand_and_statistics_accumulate_per_entry() {
    let mut c = compile(Instrumentation::default());
    let report = c.run("twice,count-ops{fail=false}").unwrap();
    let names: Vec<_> = report.statistics.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ["count-ops", "count-ops", "count-ops{fail=false}"]);
    assert_eq!(report.statistics[0].1["ops"].value, 1);
    assert_eq!(
        report.statistics_text(),
        "===-------------------------------------------------------------------------===\n                          ... Pass statistics report ...\n===-------------------------------------------------------------------------===\n'count-ops'\n  (S) 1 ops - Number of ops seen\n'count-ops'\n  (S) 1 ops - Number of ops seen\n'count-ops{fail=false}'\n  (S) 1 ops - Number of ops seen\n"
    );
}

#[test]
fn a_failing_pass_stops_the_pipeline_with_its_diagnostics() {
    let mut c = compile(Instrumentation {
        print_ir_after_failure: true,
        ..Default::default()
    });
    let (report, outcome) = c.run_pipeline(&"count-ops{fail=true},count-ops".parse_pipeline());
    let err = outcome.unwrap_err();
    let Error::Diagnostics(d) = &err else {
        panic!("{err}")
    };
    assert_eq!(d.len(), 1);
    let info = &c.describe(d)[0];
    let at = info.location.as_ref().expect("located");
    assert_eq!((at.file.as_str(), at.line, at.column), ("t.apir", 3, 3));
    assert_eq!(at.to_string(), "t.apir:3:3");
    assert_eq!(err.exit_code(), 1);
    assert_eq!(report.dumps.len(), 1);
    assert_eq!(
        report.dumps[0].header,
        "// -----// IR Dump After count-ops{fail=true} Failed //----- //"
    );
    assert_eq!(report.dumps[0].ir, TEXT);
    // The second pass never ran.
    assert_eq!(report.statistics.len(), 1);
}

/// A pass that promises to change only lowered forms is re-verified on
/// them; one that promises to attach one form as the lowering math derives
/// it is taken at its word, unless the instrumentation re-derives attached
/// forms, which catches one that breaks the promise.
#[test]
fn a_wrong_lowered_form_after_a_preserving_pass_is_an_internal_error() {
    a_wrong_fold_is_caught("bad-fold", Instrumentation::default());
    let rederive = Instrumentation {
        rederive_attached: true,
        ..Default::default()
    };
    a_wrong_fold_is_caught("bad-fold", rederive);
    a_wrong_fold_is_caught("bad-fold{only=true}", rederive);
    // Taken at its word: the wrong fold stays.
    let mut c = compile(Instrumentation::default());
    c.run("bad-fold{only=true}").unwrap();
    let folds: Vec<_> = c
        .module
        .top_ops()
        .flat_map(|op| c.module.ops[op].operands.iter())
        .map(|o| o.lowered().and_then(|l| l.fold).map(|f| f.channels))
        .collect();
    assert_eq!(folds, [Some(129)]);
}

fn a_wrong_fold_is_caught(pipeline: &str, inst: Instrumentation) {
    let mut c = compile(inst);
    let err = c.run(pipeline).unwrap_err();
    assert_eq!(err.exit_code(), 3);
    let Error::Diagnostics(d) = err else {
        unreachable!()
    };
    assert_eq!(
        d[0].message,
        format!("the IR after `{pipeline}` does not verify (a bug in the pass)")
    );
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d[1].message
            .contains("channels = 129> does not match its access pattern"),
        "{}",
        d[1].message
    );
}

#[test]
fn a_pass_that_breaks_the_ir_is_an_internal_error() {
    let mut c = compile(Instrumentation::default());
    let err = c.run("corrupt").unwrap_err();
    assert!(err.is_internal());
    assert_eq!(err.exit_code(), 3);
    let Error::Diagnostics(d) = err else {
        unreachable!()
    };
    assert_eq!(
        d[0].message,
        "the IR after `corrupt` does not verify (a bug in the pass)"
    );
    assert!(
        d[1].message.starts_with("operand `dst` leaves"),
        "{}",
        d[1].message
    );
}

/// A pass that leaves IR text cannot say (which the per-op rules allow,
/// the structural ones not) is an internal error on a batch as on the
/// whole module: nothing is passed on that does not parse back.
#[test]
fn a_pass_that_misspells_the_ir_is_an_internal_error_on_a_batch_too() {
    let expected = [
        "the IR after `misspell` does not verify (a bug in the pass)",
        "op #0 (`isa.memset`) has the attribute key \"not an identifier\", which is not an identifier (a letter or `_`, then letters, digits, `_`, `.`, `$` or `-`)",
    ];
    let err = compile(Instrumentation::default())
        .run("misspell")
        .unwrap_err();
    assert_eq!(err.exit_code(), 3);
    let Error::Diagnostics(d) = err else {
        unreachable!()
    };
    assert_eq!(d.iter().map(|d| &d.message).collect::<Vec<_>>(), expected);
    let passes = registry()
        .build(&apir_compiler::pipeline::Pipeline::parse("misspell").unwrap())
        .unwrap();
    let mut m = compile(Instrumentation::default()).module;
    let d = PassManager::new(passes, Instrumentation::default())
        .run_batch(&mut m)
        .unwrap_err();
    assert_eq!(d.iter().map(|d| &d.message).collect::<Vec<_>>(), expected);
    assert_eq!(d[0].severity, apir_ir::Severity::Internal);
}

/// `PassManager::run` verifies the module first: one built in code that
/// does not verify is the verifier's diagnostics, never a pass's panic or
/// bytes of an access outside its buffer.
#[test]
fn the_manager_runs_passes_only_on_a_module_that_verifies() {
    use apir_ir::target::IsaOp;
    use apir_ir::{AccessPattern, Buffer, OpKind};
    let passes = || {
        Registry::builtin()
            .build(&apir_compiler::pipeline::Pipeline::parse("lower-to-wire").unwrap())
            .unwrap()
    };
    let memset = IsaOp::from_name("isa.memset").unwrap();
    // An operand on a buffer that is not stored.
    let mut m = Module::new(apir_ir::Arch::V2);
    let dst = m.operand("dst", Buffer::from_u32(7), AccessPattern::new(&[(1, 1)], 0));
    m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
    let (report, outcome) = PassManager::new(passes(), Instrumentation::default()).run(&mut m);
    let d = outcome.unwrap_err();
    assert!(
        d[0].message.contains("buffer #7, which does not exist"),
        "{d:?}"
    );
    assert!(report.timings.is_empty());
    // An access past its partition's end.
    let mut m = Module::new(apir_ir::Arch::V2);
    let data = m.buffer_data(
        "x",
        apir_ir::Memory::Sbuf,
        0,
        0,
        &[1, 64],
        apir_ir::Dtype::F32,
    );
    let x = m.add_buffer(data);
    let dst = m.operand("dst", x, AccessPattern::new(&[(64, 1), (1, 65)], 0));
    m.add_op(Module::op_data(OpKind::Isa(memset), [dst]));
    let (_, outcome) = PassManager::new(passes(), Instrumentation::default()).run(&mut m);
    let d = outcome.unwrap_err();
    assert!(d[0].message.contains("leaves its partition"), "{d:?}");
    assert!(m.ops.values().all(|op| op.operands[0].lowered.is_none()));
}

#[test]
fn print_ir_after_all_dumps_every_pass() {
    let mut c = compile(Instrumentation {
        print_ir_after_all: true,
        ..Default::default()
    });
    let report = c.run("count-ops,twice").unwrap();
    let headers: Vec<_> = report.dumps.iter().map(|d| d.header.as_str()).collect();
    assert_eq!(
        headers,
        ["// -----// IR Dump After count-ops //----- //"; 3]
    );
}

/// Pipeline errors are usage errors pointing at what is wrong: the entry,
/// the option's key, or the option's value.
#[test]
fn pipeline_errors_are_usage_errors_pointing_at_the_entry() {
    let mut c = compile(Instrumentation::default());
    for (text, msg, range) in [
        (
            "count-op",
            "unknown pass `count-op` (did you mean `count-ops`?); `--list-passes` lists them",
            0..8,
        ),
        (
            "count-ops{fails=1}",
            "pass `count-ops` has no option `fails` (it takes fail); did you mean `fail`?",
            10..15,
        ),
        (
            "count-ops{zzz=1}",
            "pass `count-ops` has no option `zzz` (it takes fail)",
            10..13,
        ),
        (
            "corrupt,count-ops{fail=maybe}",
            "pass `count-ops`: invalid value `maybe` for option `fail`",
            23..28,
        ),
        (
            "bad-fold{ only=x }",
            "pass `bad-fold`: invalid value `x` for option `only`",
            15..16,
        ),
        (
            "twice{x=1}",
            "named pipeline `twice` takes no options",
            0..5,
        ),
    ] {
        let err = c.run(text).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let Error::Pipeline(e) = err else { panic!() };
        assert_eq!((e.message.as_str(), e.range), (msg, range), "{text}");
    }
}

trait ParsePipeline {
    fn parse_pipeline(&self) -> apir_compiler::Pipeline;
}
impl ParsePipeline for str {
    fn parse_pipeline(&self) -> apir_compiler::Pipeline {
        apir_compiler::Pipeline::parse(self).unwrap()
    }
}

/// Every registered pass keeps the promises that let the pass manager
/// verify less after it, on every corpus file:
/// - one that changes nothing but lowered forms ([`Pass::preserves_logical_ir`])
///   leaves the IR with the lowered forms stripped printing the same, and its
///   output passes the full verifier;
/// - one that attaches a single form ([`Pass::attaches`]) leaves everything
///   but that form as it was;
/// - one that reports [`Changed::No`] left the module untouched.
#[test]
fn passes_keep_the_promises_reverification_relies_on() {
    let registry = Registry::builtin();
    let lowering: Vec<&str> = registry
        .pipeline("lower-to-wire")
        .unwrap()
        .expansion
        .split(',')
        .collect();
    let strip = |m: &Module, form: Option<LoweredForm>| {
        let mut m = m.clone();
        for (_, op) in m.ops.iter_mut() {
            for o in op.operands.iter_mut() {
                match (form, o.lowered.as_mut()) {
                    (None, _) => o.lowered = None,
                    (Some(LoweredForm::Fold), Some(l)) => l.fold = None,
                    (Some(LoweredForm::Slots), Some(l)) => l.slots = None,
                    (Some(LoweredForm::Kind), Some(l)) => l.kind = None,
                    (Some(LoweredForm::Wire), Some(l)) => l.wire = None,
                    (Some(_), None) => {}
                }
                if o.lowered.as_ref() == Some(&apir_ir::Lowered::default()) {
                    o.lowered = None;
                }
            }
        }
        format!("{}{m:?}", apir_ir::print_module(&m))
    };
    let (mut preserving, mut single, mut unchanged) = (0, 0, 0);
    for entry in std::fs::read_dir("tests/corpus").unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut c = Compilation::parse(&path.display().to_string(), &text, None).unwrap();
        // Twice: the second round finds every form attached already.
        for name in lowering.iter().chain(&lowering) {
            let pipeline = apir_compiler::Pipeline::parse(name).unwrap();
            let mut passes = registry.build(&pipeline).unwrap();
            let (_, pass) = &mut passes[0];
            let before = c.module.clone();
            let Ok(changed) = pass.run(&mut c.module, &mut PassContext::new()) else {
                break;
            };
            if changed == Changed::No {
                assert_eq!(
                    format!("{}{before:?}", apir_ir::print_module(&before)),
                    format!("{}{:?}", apir_ir::print_module(&c.module), c.module),
                    "{name} on {path:?} reported no change"
                );
                unchanged += 1;
            }
            if pass.preserves_logical_ir() {
                assert_eq!(
                    strip(&before, None),
                    strip(&c.module, None),
                    "{name} on {path:?}"
                );
                apir_ir::verify(&c.module).unwrap();
                preserving += 1;
            }
            if let Some(form) = pass.attaches() {
                assert!(pass.preserves_logical_ir(), "{name}");
                // What it attached is what the verifier derives.
                apir_ir::verify_lowered_form(&c.module, c.module.top_ops(), form)
                    .unwrap_or_else(|d| panic!("{name} on {path:?}: {d:?}"));
                assert_eq!(
                    strip(&before, Some(form)),
                    strip(&c.module, Some(form)),
                    "{name} on {path:?} changed more than its {form:?}"
                );
                single += 1;
            }
        }
    }
    assert!(
        preserving >= 20,
        "only {preserving} preserving pass runs checked"
    );
    assert!(single >= 20, "only {single} single-form pass runs checked");
    assert!(
        unchanged >= 20,
        "only {unchanged} unchanged pass runs checked"
    );
}

/// Batches through one manager, or through forks absorbed in order, add up
/// to what one whole-module run reports: statistics, timing entries, and
/// the failure of a batch (with the same internal-error wrapping).
#[test]
fn batches_and_forks_accumulate_like_one_run() {
    let build = |text: &str| registry().build(&text.parse_pipeline()).unwrap();
    let mut whole = compile(Instrumentation::default());
    let one = whole.run("count-ops,twice").unwrap();

    let mut pm = PassManager::new(build("count-ops,twice"), Instrumentation::default());
    let mut batch = compile(Instrumentation::default()).module;
    // A module of one op, twice over: each batch counts one op.
    pm.run_batch(&mut batch).unwrap();
    pm.run_batch(&mut batch).unwrap();
    let batches = pm.take_report();
    let names = |r: &apir_compiler::RunReport| -> Vec<String> {
        r.timings.iter().map(|t| t.0.clone()).collect()
    };
    assert_eq!(names(&batches), names(&one));
    assert_eq!(batches.statistics.len(), 3);
    for (name, stats) in &batches.statistics {
        assert_eq!(stats["ops"].value, 2, "{name}");
    }
    // Taken: the manager starts afresh.
    assert!(pm.take_report().timings.is_empty());

    // Copies of the passes cannot be made by these test passes...
    assert!(pm.fork().is_none());
    // ...but a manager of passes that can be is itself one a fork absorbs.
    let mut forked = PassManager::new(
        vec![(
            "counting".to_string(),
            Box::new(Forkable) as Box<dyn Pass + Send>,
        )],
        Instrumentation::default(),
    )
    .timed(false);
    let mut part = forked.fork().unwrap();
    part.run_batch(&mut batch).unwrap();
    forked.run_batch(&mut batch).unwrap();
    assert!(forked.absorb(part));
    let report = forked.take_report();
    assert_eq!(report.statistics[0].1["ops"].value, 2);
    assert_eq!(
        report.timings,
        [
            ("counting".to_string(), std::time::Duration::ZERO),
            ("(verify)".to_string(), std::time::Duration::ZERO)
        ]
    );

    // A batch a pass breaks fails as a whole-module run does.
    let mut pm = PassManager::new(build("corrupt"), Instrumentation::default());
    let d = pm.run_batch(&mut batch).unwrap_err();
    assert_eq!(
        d[0].message,
        "the IR after `corrupt` does not verify (a bug in the pass)"
    );
}

/// Counts ops and can be copied.
struct Forkable;

impl Pass for Forkable {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        cx.count("ops", "Number of ops seen", m.ops.len() as u64);
        Ok(Changed::No)
    }
    fn op_local(&self) -> bool {
        true
    }
    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(Forkable))
    }
}

/// The built-in passes that attach a form attach what the verifier
/// re-derives on generated modules too (every op-encoder, every arch,
/// kernels among the ops): re-deriving after every pass finds nothing,
/// and the lowered IR is the same as without it.
#[test]
fn attached_forms_are_the_verifiers_derivation_on_generated_modules() {
    use apir_ir::target::Arch;
    use apir_synth::{generate, GenOptions};
    let rederive = Instrumentation {
        rederive_attached: true,
        ..Default::default()
    };
    for (seed, arch) in [(1, Arch::V2), (2, Arch::V3), (3, Arch::V4), (4, Arch::V2)] {
        let m = generate(&GenOptions {
            ops: 400,
            seed,
            arch,
            distinct_shapes: Some(40),
            kernels: 2,
        });
        let mut checked = Compilation::from_module(m.clone()).with_instrumentation(rederive);
        checked
            .run("lower-to-wire")
            .unwrap_or_else(|e| panic!("seed {seed} on {arch}: {e}"));
        let mut trusted = Compilation::from_module(m);
        trusted.run("lower-to-wire").unwrap();
        assert_eq!(checked.ir(), trusted.ir(), "seed {seed} on {arch}");
        // Every ISA operand went through every attaching pass.
        let m = &checked.module;
        let mut lowered = 0;
        for op in m.top_ops() {
            if !matches!(
                m.ops[op].kind,
                apir_ir::OpKind::Isa(_) | apir_ir::OpKind::Custom
            ) {
                continue;
            }
            for o in &m.ops[op].operands {
                let l = o.lowered().expect("lowered forms");
                assert!(
                    l.slots.is_some() && l.kind.is_some() && l.wire.is_some(),
                    "seed {seed}"
                );
                lowered += 1;
            }
        }
        assert!(lowered >= 400, "seed {seed}: {lowered} operands lowered");
    }
}

/// Where the passes attaching fold, slots, kind and wire follow one
/// another and nothing observes them one by one, the manager attaches the
/// four forms in one walk (`apir_ir::lowering::lower_all_forms`): the
/// module, the statistics and the outcome are those of the passes run one
/// by one, on the corpus, on the lowering passes' lit cases (errors,
/// gathers, `isa.custom`) and on generated modules, some with an op that
/// fails after many that lower. The walk itself either gives the passes'
/// module or, where they would report anything, leaves the module exactly
/// as it was (forms attached to the ops before the failing one taken off).
#[test]
fn one_walk_attaches_what_the_lowering_passes_attach_one_by_one() {
    use apir_ir::target::Arch;
    use apir_synth::{generate, GenOptions};
    let registry = Registry::builtin();
    let pipeline = apir_compiler::Pipeline::parse("lower-to-wire").unwrap();
    let shown = |m: &Module| format!("{}{m:?}", apir_ir::print_module(m));
    let stats = |s: &apir_ir::Statistics| -> Vec<(String, u64)> {
        s.iter().map(|(k, v)| (k.to_string(), v.value)).collect()
    };

    let mut texts: Vec<(String, String)> = Vec::new();
    let mut dirs = vec!["tests/corpus".to_string()];
    for pass in [
        "fold-partition",
        "compact-unit-dims",
        "select-descriptor",
        "encode-wire",
        "lower-to-wire",
    ] {
        dirs.push(format!("../lit-tests/{pass}"));
    }
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "apir") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (k, range) in apir_ir::split_input(&text).into_iter().enumerate() {
                texts.push((format!("{}#{k}", path.display()), text[range].to_string()));
            }
        }
    }
    for (seed, arch) in [(5, Arch::V2), (6, Arch::V3), (7, Arch::V4)] {
        let m = generate(&GenOptions {
            ops: 300,
            seed,
            arch,
            distinct_shapes: None,
            kernels: 2,
        });
        let text = apir_ir::print_module(&m);
        texts.push((format!("generated {seed}"), text.clone()));
        // The same with an op that breaks the partition start rule (31
        // channels from partition 1) near the end.
        let cut = text.trim_end().rfind('\n').unwrap();
        let bad = "  isa.memset dst = %sa[[8192, 31], [1, 64]] + 8192\n";
        texts.push((
            format!("generated {seed}, failing"),
            format!("{}\n{bad}{}", &text[..cut], &text[cut + 1..]),
        ));
    }

    let (mut walked, mut declined, mut undone) = (0, 0, 0);
    // Walked modules holding a two-window source and an `isa.custom` op:
    // the walk's two paths off the table's plain roles.
    let (mut walked_gather, mut walked_custom) = (0, 0);
    for (name, text) in &texts {
        let Ok(c) = Compilation::parse(name, text, None) else {
            continue;
        };
        if apir_ir::verify(&c.module).is_err() {
            continue;
        }
        // The passes one by one, stopping at the first that fails.
        let mut one = c.module.clone();
        let mut one_stats = Vec::new();
        let mut one_outcome = Ok(());
        let mut after_canonicalize = None;
        for (pass_name, mut pass) in registry.build(&pipeline).unwrap() {
            let mut cx = PassContext::new();
            let result = pass.run(&mut one, &mut cx);
            if !cx.statistics().is_empty() {
                one_stats.push((pass_name.clone(), stats(cx.statistics())));
            }
            if pass_name == "canonicalize-ap" {
                after_canonicalize = Some(one.clone());
            }
            if let Err(d) = result {
                one_outcome = Err(d);
                break;
            }
        }
        // Through the manager, which may walk.
        let mut managed = c.module.clone();
        let mut pm = PassManager::new(
            registry.build(&pipeline).unwrap(),
            Instrumentation::default(),
        )
        .timed(false);
        let (report, outcome) = pm.run(&mut managed);
        let managed_stats: Vec<_> = report
            .statistics
            .iter()
            .map(|(n, s)| (n.clone(), stats(s)))
            .collect();
        assert_eq!(shown(&managed), shown(&one), "{name}: module");
        assert_eq!(managed_stats, one_stats, "{name}: statistics");
        assert_eq!(
            format!("{outcome:?}"),
            format!("{one_outcome:?}"),
            "{name}: outcome"
        );

        // The walk on its own, after canonicalize-ap.
        let Some(mut m) = after_canonicalize else {
            continue;
        };
        let before = shown(&m);
        match apir_ir::lowering::lower_all_forms(&mut m) {
            Some(_) => {
                assert!(one_outcome.is_ok(), "{name}: walked where a pass fails");
                assert_eq!(shown(&m), shown(&one), "{name}: walked module");
                walked += 1;
                walked_gather += usize::from(text.contains("isa.local_gather"));
                walked_custom += usize::from(text.contains("isa.custom"));
            }
            None => {
                assert_eq!(
                    shown(&m),
                    before,
                    "{name}: a declined walk changed the module"
                );
                declined += 1;
                undone += usize::from(name.ends_with("failing"));
            }
        }
    }
    assert!(walked >= 10, "only {walked} modules walked");
    assert!(declined >= 10, "only {declined} modules declined");
    assert_eq!(undone, 3, "the generated modules with a failing op");
    assert!(walked_gather >= 1, "no walked module with a gather");
    assert!(walked_custom >= 1, "no walked module with `isa.custom`");

    // A module built in code with an operand on a buffer it does not store
    // (which the verifier rejects): the walk declines, changing nothing,
    // rather than panicking.
    let mut m = generate(&GenOptions {
        ops: 20,
        seed: 8,
        arch: Arch::V2,
        distinct_shapes: None,
        kernels: 0,
    });
    let last = m.top_ops().last().unwrap();
    m.ops[last].operands[0].buffer = apir_ir::Buffer::from_u32(1 << 20);
    let before = format!("{m:?}");
    assert!(apir_ir::lowering::lower_all_forms(&mut m).is_none());
    assert_eq!(format!("{m:?}"), before);
}
