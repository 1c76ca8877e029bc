//! The pass manager: runs passes in order, verifies after each ([`reverify`]), and records
//! timing, statistics and IR dumps as data for the caller to print.

use apir_ir::{
    print_module, verify, Changed, Diagnostic, Diagnostics, Module, Pass, PassContext, Statistics,
};
use std::time::{Duration, Instant};

/// What the pass manager records besides running passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instrumentation {
    /// Print the IR after every pass.
    pub print_ir_after_all: bool,
    /// Print the IR after a pass that fails.
    pub print_ir_after_failure: bool,
    /// Skip the verifier between passes (it is on by default).
    pub no_verify: bool,
}

/// One IR dump: the header line and the IR text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrDump {
    /// `// -----// IR Dump After fold-partition //----- //` style header.
    pub header: String,
    /// The IR text.
    pub ir: String,
}

/// What a pipeline run produced besides the module.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Wall time per pass (and per verifier run, named `(verify)`).
    pub timings: Vec<(String, Duration)>,
    /// Counters per pass that reported any, in pipeline order.
    pub statistics: Vec<(String, Statistics)>,
    /// IR dumps requested by the instrumentation.
    pub dumps: Vec<IrDump>,
    /// Warnings about the module before the first pass ([`apir_ir::lint()`]),
    /// then the warnings passes reported.
    pub warnings: Diagnostics,
}

/// A pass built from pipeline text, with the entry text it came from.
pub type BuiltPass = (String, Box<dyn Pass>);

/// A built pipeline ready to run.
pub struct PassManager {
    passes: Vec<BuiltPass>,
    instrumentation: Instrumentation,
}

impl PassManager {
    /// A manager running `passes` (as built by [`crate::Registry::build`]).
    pub fn new(passes: Vec<BuiltPass>, instrumentation: Instrumentation) -> Self {
        PassManager {
            passes,
            instrumentation,
        }
    }

    /// The pass names as written in the pipeline.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.passes.iter().map(|(n, _)| n.as_str())
    }

    /// Runs every pass on `m`. Before the first pass the module's warnings
    /// ([`apir_ir::lint()`]: attributes no op interprets, ...) go first into
    /// the report's warnings, then each pass's. Returns the report (up to
    /// the failure, if any) and the outcome; after a failure the module is
    /// left as the failing pass left it.
    pub fn run(&mut self, m: &mut Module) -> (RunReport, Result<(), Diagnostics>) {
        let mut report = RunReport {
            warnings: apir_ir::lint(m),
            ..RunReport::default()
        };
        let inst = self.instrumentation;
        for (name, pass) in &mut self.passes {
            let mut cx = PassContext::new();
            let t = Instant::now();
            let result = pass.run(m, &mut cx);
            report.timings.push((name.clone(), t.elapsed()));
            report.warnings.extend(cx.take_warnings());
            if !cx.statistics().is_empty() {
                report
                    .statistics
                    .push((name.clone(), cx.statistics().clone()));
            }
            let failure = match result {
                Err(diags) => Some(diags),
                Ok(_) if inst.no_verify => None,
                Ok(changed) => {
                    let t = Instant::now();
                    let v = reverify(&**pass, changed, m, true);
                    report.timings.push(("(verify)".to_string(), t.elapsed()));
                    v.err().map(|diags| {
                        let mut out = vec![Diagnostic::internal(
                            None,
                            format!("the IR after `{name}` does not verify (a bug in the pass)"),
                        )];
                        out.extend(diags);
                        out
                    })
                }
            };
            match failure {
                Some(diags) => {
                    if inst.print_ir_after_failure || inst.print_ir_after_all {
                        report.dumps.push(IrDump {
                            header: format!("// -----// IR Dump After {name} Failed //----- //"),
                            ir: print_module(m),
                        });
                    }
                    return (report, Err(diags));
                }
                None => {
                    if inst.print_ir_after_all {
                        report.dumps.push(IrDump {
                            header: format!("// -----// IR Dump After {name} //----- //"),
                            ir: print_module(m),
                        });
                    }
                }
            }
        }
        (report, Ok(()))
    }
}

/// Verifies `m` after `pass` returned `changed`, checking only what the
/// pass could have broken by its own promises: nothing if it changed
/// nothing (as MLIR skips the verifier after a pass that preserved
/// everything), the one lowered form it attaches ([`Pass::attaches`]), all
/// lowered forms ([`Pass::preserves_logical_ir`]), or else everything:
/// with `whole`, the module; otherwise its top-level ops (a streaming
/// driver, whose buffers were verified as they were declared).
pub fn reverify(
    pass: &dyn Pass,
    changed: Changed,
    m: &Module,
    whole: bool,
) -> Result<(), Diagnostics> {
    match (changed, pass.attaches()) {
        (Changed::No, _) => Ok(()),
        (Changed::Yes, Some(form)) => apir_ir::verify_lowered_form(m, m.top_ops(), form),
        (Changed::Yes, None) if pass.preserves_logical_ir() => {
            apir_ir::verify_lowered(m, m.top_ops())
        }
        (Changed::Yes, None) if whole => verify(m),
        (Changed::Yes, None) => apir_ir::verify_ops(m, m.top_ops()),
    }
}

impl RunReport {
    /// MLIR-style statistics report.
    pub fn statistics_text(&self) -> String {
        let mut out = String::from(
            "===-------------------------------------------------------------------------===\n                          ... Pass statistics report ...\n===-------------------------------------------------------------------------===\n",
        );
        for (pass, stats) in &self.statistics {
            out.push_str(&format!("'{pass}'\n"));
            for (name, s) in stats {
                out.push_str(&format!("  (S) {} {name} - {}\n", s.value, s.description));
            }
        }
        out
    }
}

/// MLIR-style timing report over named phases.
pub fn timing_text(phases: &[(String, Duration)]) -> String {
    let total: Duration = phases.iter().map(|p| p.1).sum();
    let mut out = String::from(
        "===-------------------------------------------------------------------------===\n                         ... Execution time report ...\n===-------------------------------------------------------------------------===\n",
    );
    out.push_str(&format!(
        "  Total Execution Time: {:.4} seconds\n\n  ----Wall Time----  ----Name----\n",
        total.as_secs_f64()
    ));
    for (name, d) in phases {
        let pct = if total.is_zero() {
            0.0
        } else {
            100.0 * d.as_secs_f64() / total.as_secs_f64()
        };
        out.push_str(&format!(
            "  {:>8.4} ({:>5.1}%)  {name}\n",
            d.as_secs_f64(),
            pct
        ));
    }
    out.push_str(&format!("  {:>8.4} (100.0%)  Total\n", total.as_secs_f64()));
    out
}
