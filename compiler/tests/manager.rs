//! The pass manager and registry with test passes: verify-after-each,
//! failure reporting, IR dumps, statistics, named pipelines and option
//! checking.

use apir_compiler::{Compilation, Error, Instrumentation, NamedPipeline, PassInfo, Registry};
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, OptionInfo, Pass, PassContext};

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

/// Breaks the IR: moves every operand offset far outside its buffer.
struct Corrupt;

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
}

/// Promises to change only lowered forms, and attaches a wrong fold (one
/// channel too many): the incremental re-verification must catch it.
struct BadFold;

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
    PassInfo {
        name: "corrupt",
        summary: "break the IR",
        options: &[],
        create: |_| Ok(Box::new(Corrupt)),
    },
    PassInfo {
        name: "bad-fold",
        summary: "attach a wrong fold",
        options: &[],
        create: |_| Ok(Box::new(BadFold)),
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
        .map_err(|e| e.0)
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
    assert_eq!(c.describe(d)[0].location.as_deref(), Some("t.apir:3:3"));
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

#[test]
fn a_wrong_lowered_form_after_a_preserving_pass_is_an_internal_error() {
    let mut c = compile(Instrumentation::default());
    let err = c.run("bad-fold").unwrap_err();
    assert_eq!(err.exit_code(), 3);
    let Error::Diagnostics(d) = err else {
        unreachable!()
    };
    assert_eq!(
        d[0].message,
        "the IR after `bad-fold` does not verify (a bug in the pass)"
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
            "pass `count-ops` has no option `fails` (it takes fail)",
            0..9,
        ),
        (
            "corrupt,count-ops{fail=maybe}",
            "pass `count-ops`: invalid value `maybe` for option `fail`",
            8..17,
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

/// Every registered pass that promises to change nothing but lowered forms
/// (and so is re-verified incrementally) keeps that promise on every corpus
/// file: with the lowered forms stripped, the IR before and after it prints
/// the same; and its output passes the full verifier.
#[test]
fn passes_that_preserve_logical_ir_do() {
    let registry = Registry::builtin();
    let lowering: Vec<&str> = registry
        .pipeline("lower-to-wire")
        .unwrap()
        .expansion
        .split(',')
        .collect();
    let strip = |m: &Module| {
        let mut m = m.clone();
        for (_, op) in m.ops.iter_mut() {
            for o in op.operands.iter_mut() {
                o.lowered = None;
            }
        }
        apir_ir::print_module(&m)
    };
    let mut checked = 0;
    for entry in std::fs::read_dir("tests/corpus").unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut c = Compilation::parse(&path.display().to_string(), &text, None).unwrap();
        for name in &lowering {
            let pipeline = apir_compiler::Pipeline::parse(name).unwrap();
            let mut passes = registry.build(&pipeline).unwrap();
            let (_, pass) = &mut passes[0];
            let before = c.module.clone();
            if pass.run(&mut c.module, &mut PassContext::new()).is_err() {
                break;
            }
            if pass.preserves_logical_ir() {
                assert_eq!(strip(&before), strip(&c.module), "{name} on {path:?}");
                apir_ir::verify(&c.module).unwrap();
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} pass runs checked");
}
