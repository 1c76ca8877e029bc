//! The pass manager: runs passes in order, verifies after each ([`reverify`]), and records
//! timing, statistics and IR dumps as data for the caller to print. It runs
//! on a whole module ([`PassManager::run`]) or, for the streaming driver
//! ([`crate::stream`]), on one batch of top-level ops after another
//! ([`PassManager::run_batch`]), accumulating over the batches.

use apir_ir::lowering::LoweringTally;
use apir_ir::{
    print_module, verify, Bounded, Changed, Diagnostic, DiagnosticLimit, Diagnostics, LoweredForm,
    Module, Omitted, Op, Pass, PassContext, Statistics,
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
    /// Also re-derive the lowered form a pass attaches ([`Pass::attaches`])
    /// after it, and compare (off by default): see [`reverify`].
    pub rederive_attached: bool,
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
    /// then the warnings passes reported: as many as the manager's
    /// [`DiagnosticLimit`] keeps ([`PassManager::limited`]).
    pub warnings: Diagnostics,
    /// The warnings that limit left out, counted.
    pub omitted: Omitted,
}

/// A pass built from pipeline text, with the entry text it came from.
pub(crate) type BuiltPass = (String, Box<dyn Pass>);

/// What one pass accumulated over the runs of a [`PassManager`].
#[derive(Debug, Default)]
struct Record {
    /// The context the pass counts and warns into, kept across runs.
    cx: PassContext,
    /// Time in the pass.
    time: Duration,
    /// Time re-verifying after the pass; `None` until it was verified.
    verify: Option<Duration>,
    /// Whether the pass ran at least once.
    ran: bool,
}

impl Record {
    /// Nothing recorded, warnings kept up to `limit`.
    fn new(limit: DiagnosticLimit) -> Self {
        Record {
            cx: PassContext::limited(limit),
            ..Record::default()
        }
    }
}

/// A pass that failed on a batch (which pass, and how), as the streaming
/// driver's diagnosis records it.
#[derive(Debug)]
pub struct BatchFailure {
    /// Its index in the pipeline.
    pub pass: usize,
    /// Its errors; if its output did not verify, an internal error saying
    /// so, then the verifier's errors.
    pub diagnostics: Diagnostics,
    /// Whether its output did not verify (rather than the pass reporting
    /// errors).
    pub unverified: bool,
}

/// A built pipeline ready to run: the one loop that runs passes, verifies
/// after each ([`reverify`]), times them and collects their statistics and
/// warnings, whether on a whole module ([`PassManager::run`]) or on the
/// batches of top-level ops of a streaming driver ([`PassManager::run_batch`]).
///
/// `P` is the pass type: `dyn Pass` for passes built by
/// [`crate::Registry::build`], `dyn Pass + Send` for the copies
/// [`PassManager::fork`] makes to run on other threads.
pub struct PassManager<P: ?Sized = dyn Pass> {
    passes: Vec<(String, Box<P>)>,
    instrumentation: Instrumentation,
    timed: bool,
    records: Vec<Record>,
    dumps: Vec<IrDump>,
    /// Warnings about the module itself ([`apir_ir::lint()`]), reported
    /// before every pass's.
    lints: Bounded,
    /// How many warnings each list above keeps.
    limit: DiagnosticLimit,
    /// At each index where the passes attaching fold, slots, kind and
    /// wire follow one another, their counters ([`Pass::lowered_counter`]):
    /// there the manager may attach the four forms in one walk.
    lowering_runs: Vec<Option<LoweringCounters>>,
    /// Op ids the batches run so far numbered ([`PassManager::begin_batch`]):
    /// the whole module numbers the next batch's ops from here.
    numbered: u32,
    /// The first whole-module op id of the current batch: added to the op
    /// of every warning its lints and passes report.
    batch_base: u32,
}

/// `op` of a batch (or part) numbered after `before` op ids of the
/// batches before it, as the whole module numbers it: a batch's ids start
/// from 0.
pub(crate) fn numbered_after(op: Op, before: u32) -> Op {
    Op::from_u32(op.as_u32().saturating_add(before))
}

/// How many lowered forms there are, and so how many passes a run of
/// attaching passes ([`PassManager::lowering_runs`]) holds.
const LOWERED_FORMS: usize = 4;

/// The counters of a run of attaching passes, in pipeline order.
type LoweringCounters = [fn(&LoweringTally, &mut PassContext); LOWERED_FORMS];

/// At each index of `passes`, the counters of the run of passes starting
/// there that attach fold, slots, kind and wire in that order, if each
/// gives one.
fn lowering_runs<P: Pass + ?Sized>(passes: &[(String, Box<P>)]) -> Vec<Option<LoweringCounters>> {
    const ORDER: [LoweredForm; LOWERED_FORMS] = [
        LoweredForm::Fold,
        LoweredForm::Slots,
        LoweredForm::Kind,
        LoweredForm::Wire,
    ];
    (0..passes.len())
        .map(|i| {
            let run = passes.get(i..i + LOWERED_FORMS)?;
            let mut counters = Vec::with_capacity(LOWERED_FORMS);
            for ((_, p), form) in run.iter().zip(ORDER) {
                if p.attaches() != Some(form) {
                    return None;
                }
                counters.push(p.lowered_counter()?);
            }
            counters.try_into().ok()
        })
        .collect()
}

impl<P: Pass + ?Sized> PassManager<P> {
    /// A manager running `passes` (as built by [`crate::Registry::build`]).
    pub fn new(passes: Vec<(String, Box<P>)>, instrumentation: Instrumentation) -> Self {
        let records = passes.iter().map(|_| Record::default()).collect();
        PassManager {
            lowering_runs: lowering_runs(&passes),
            passes,
            instrumentation,
            timed: true,
            records,
            dumps: Vec::new(),
            lints: Bounded::default(),
            limit: DiagnosticLimit::NONE,
            numbered: 0,
            batch_base: 0,
        }
    }

    /// Keeps warnings up to `limit` (every one by default) and counts the
    /// rest ([`RunReport::omitted`]): the lint warnings, and each pass's,
    /// each list bounded as it accumulates, so a run over many batches
    /// holds at most that many per pass. The report keeps the first ones
    /// of all of them in order, as one list under `limit` would.
    /// Accumulated warnings are dropped.
    pub fn limited(mut self, limit: DiagnosticLimit) -> Self {
        self.limit = limit;
        self.lints = Bounded::new(limit);
        self.records
            .iter_mut()
            .for_each(|r| *r = Record::new(limit));
        self
    }

    /// Whether to read the clock around every pass and verifier run (on by
    /// default). Without it the reported times are zero: a driver that
    /// runs the passes once per small batch of ops skips the clock unless
    /// timing was asked for.
    pub fn timed(mut self, timed: bool) -> Self {
        self.timed = timed;
        self
    }

    /// The pass names as written in the pipeline.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.passes.iter().map(|(n, _)| n.as_str())
    }

    /// The instrumentation the manager runs with.
    pub fn instrumentation(&self) -> Instrumentation {
        self.instrumentation
    }

    /// Verifies `m` ([`apir_ir::verify()`]), then runs every pass on it:
    /// after each pass only what that pass could have broken is checked
    /// ([`reverify`]). Returns the report of this run (up to the failure,
    /// if any) and the outcome: a module that does not verify is the
    /// verifier's diagnostics, and no pass runs; after a pass's failure
    /// the module is left as the failing pass left it. Anything earlier
    /// runs accumulated in the manager is discarded first; what the passes
    /// keep themselves (such as `canonicalize-ap`'s memo and split budget)
    /// is theirs, so build the passes afresh for each module.
    pub fn run(&mut self, m: &mut Module) -> (RunReport, Result<(), Diagnostics>) {
        if let Err(d) = verify(m) {
            return (RunReport::default(), Err(d));
        }
        self.run_verified(m)
    }

    /// [`PassManager::run`] on a module the caller has just verified
    /// ([`crate::Compilation`] and the driver do, timing it apart).
    pub(crate) fn run_verified(&mut self, m: &mut Module) -> (RunReport, Result<(), Diagnostics>) {
        let limit = self.limit;
        self.records
            .iter_mut()
            .for_each(|r| *r = Record::new(limit));
        self.dumps.clear();
        self.lints = Bounded::new(limit);
        (self.numbered, self.batch_base) = (0, 0);
        self.lint_with(|l| l.module(m));
        let outcome = self.run_passes(m, true, self.passes.len());
        (self.take_report(), outcome.map_err(|f| f.diagnostics))
    }

    /// Records warnings about the module itself, as a streaming driver
    /// finds them item by item ([`apir_ir::lint_buffer`],
    /// [`apir_ir::lint_ops`]): the report lists them, in the order given,
    /// before every pass's warnings, as [`PassManager::run`] does.
    pub fn lint(&mut self, warnings: Diagnostics) {
        let from = self.lints.kept().len();
        self.lints.extend(warnings);
        self.number_lints_from(from);
    }

    /// Numbers the ops of the lints kept from index `from` on as the whole
    /// module does ([`PassManager::begin_batch`]).
    fn number_lints_from(&mut self, from: usize) {
        let base = self.batch_base;
        if base > 0 {
            self.lints
                .map_subject_ops(from, |op| numbered_after(op, base));
        }
    }

    /// [`PassManager::lint`] of the warnings `find` finds: only as many are
    /// built as the report still keeps under its limit, the rest are
    /// counted ([`apir_ir::Lints::within`]); the report is the same.
    pub fn lint_with(&mut self, find: impl FnOnce(&mut apir_ir::Lints)) {
        let mut found = apir_ir::Lints::within(self.lints.warning_room());
        find(&mut found);
        let (kept, omitted) = found.into_parts();
        let from = self.lints.kept().len();
        self.lints.extend(kept);
        self.number_lints_from(from);
        self.lints.omit(apir_ir::Omitted {
            errors: 0,
            warnings: omitted,
        });
    }

    /// Says that the next batch's ops (linted with
    /// [`PassManager::lint_with`], run with [`PassManager::run_batch`])
    /// take `ids` op ids after those of the batches begun before: the
    /// warnings about them name their ops as the whole module numbers them
    /// (a batch's own ids, which start from 0, plus the ids before it), as
    /// a streaming driver reports them. A manager whose batches are not
    /// begun (a producer of batches in code, whose op ids are its batch's)
    /// leaves the ids as they are.
    pub(crate) fn begin_batch(&mut self, ids: u32) {
        self.batch_base = self.numbered;
        self.numbered = self.numbered.saturating_add(ids);
    }

    /// Runs every pass on `m`, a module holding the buffers declared so
    /// far and one batch of top-level ops, as a streaming driver does with
    /// op-local passes ([`Pass::op_local`]). The batch is verified first
    /// ([`apir_ir::verify_batch`]: its structure against what earlier
    /// batches declared, the buffers it declares and its ops; the
    /// verifier's diagnostics if it does not verify); after a pass that may
    /// have changed anything the batch is verified again the same way.
    /// Statistics, warnings and times accumulate over the batches until
    /// [`PassManager::take_report`]. On failure the diagnostics are those
    /// [`PassManager::run`] would give for the batch, its ops numbered as
    /// the batch numbers them (the streaming drivers number them as the
    /// whole module does; the warnings of a batch they run are numbered
    /// so already). The module's lint
    /// warnings are the caller's to find and hand over
    /// ([`PassManager::lint`]), as it finds them item by item.
    pub fn run_batch(&mut self, m: &mut Module) -> Result<(), Diagnostics> {
        apir_ir::verify_batch(m)?;
        self.run_verified_batch(m)
    }

    /// [`PassManager::run_batch`] on a batch the caller has just verified
    /// (the streaming driver verifies item by item as it parses).
    pub(crate) fn run_verified_batch(&mut self, m: &mut Module) -> Result<(), Diagnostics> {
        self.run_passes(m, false, self.passes.len())
            .map_err(|f| f.diagnostics)
    }

    /// [`PassManager::run_verified_batch`] with the first `upto` passes
    /// only, and on failure which pass failed and how. A streaming driver
    /// that looks for the pass [`PassManager::run`] would stop at runs each
    /// batch up to the earliest pass that failed so far, then
    /// [`PassManager::forget_from`] the passes after it.
    pub(crate) fn run_batch_upto(
        &mut self,
        m: &mut Module,
        upto: usize,
    ) -> Result<(), BatchFailure> {
        self.run_passes(m, false, upto)
    }

    /// Drops what the passes from index `from` on accumulated (times,
    /// statistics, warnings), as if they had not run.
    pub fn forget_from(&mut self, from: usize) {
        for r in self.records.iter_mut().skip(from) {
            *r = Record::new(self.limit);
        }
    }

    /// The warnings accumulated since the last report, in the order the
    /// report will list them (the module's lint warnings, then each pass's
    /// in pipeline order), without taking them.
    pub fn warnings(&self) -> Bounded {
        let mut out = self.lints.clone();
        for r in &self.records {
            out.append(r.cx.clone_warnings());
        }
        out
    }

    /// What the runs since the last report accumulated: each pass that ran
    /// with its time and its verifier's (`(verify)`), statistics of the
    /// passes that counted anything in pipeline order, warnings in pipeline
    /// order, and the IR dumps. The manager starts afresh.
    pub fn take_report(&mut self) -> RunReport {
        let mut report = RunReport {
            dumps: std::mem::take(&mut self.dumps),
            ..RunReport::default()
        };
        (self.numbered, self.batch_base) = (0, 0);
        let mut warnings = std::mem::replace(&mut self.lints, Bounded::new(self.limit));
        for ((name, _), r) in self.passes.iter().zip(&mut self.records) {
            let mut r = std::mem::replace(r, Record::new(self.limit));
            if !r.ran {
                continue;
            }
            report.timings.push((name.clone(), r.time));
            if let Some(v) = r.verify {
                report.timings.push(("(verify)".to_string(), v));
            }
            warnings.append(r.cx.take_warnings());
            if !r.cx.statistics().is_empty() {
                report
                    .statistics
                    .push((name.clone(), r.cx.statistics().clone()));
            }
        }
        (report.warnings, report.omitted) = warnings.into_parts();
        report
    }

    /// A manager running copies of these passes ([`Pass::fork`]) with the
    /// same instrumentation and timing, and nothing accumulated: one per
    /// part of a module run on other threads, whose results
    /// [`PassManager::absorb`] adds up. `None` if a pass cannot be copied.
    pub fn fork(&self) -> Option<PassManager<dyn Pass + Send>> {
        let passes = self
            .passes
            .iter()
            .map(|(name, p)| p.fork().map(|p| (name.clone(), p)))
            .collect::<Option<Vec<_>>>()?;
        Some(
            PassManager::new(passes, self.instrumentation)
                .timed(self.timed)
                .limited(self.limit),
        )
    }

    /// Adds what `other` (a [`PassManager::fork`] of this manager)
    /// accumulated, as if this manager had run its batches after its own:
    /// statistics, warnings, times and dumps, and each pass's program-order
    /// state ([`Pass::join`]). False if a pass says its fork's results may
    /// differ from the ones a run over the whole module gives: the caller
    /// must then drop this run and run the module on one thread.
    #[must_use]
    pub fn absorb<Q: Pass + ?Sized>(&mut self, mut other: PassManager<Q>) -> bool {
        let mut same = true;
        for ((_, p), (_, q)) in self.passes.iter_mut().zip(&mut other.passes) {
            same &= p.join(q.part_state());
        }
        // The fork numbered its batches from 0: its ops follow this
        // manager's.
        let before = self.numbered;
        let shift = |op: Op| numbered_after(op, before);
        other.lints.map_subject_ops(0, shift);
        self.numbered = self.numbered.saturating_add(other.numbered);
        for (r, mut o) in self.records.iter_mut().zip(other.records) {
            o.cx.map_warning_ops(0, shift);
            r.cx.absorb(o.cx);
            r.time += o.time;
            r.verify = match (r.verify, o.verify) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            r.ran |= o.ran;
        }
        self.dumps.extend(other.dumps);
        self.lints.append(other.lints);
        same
    }

    /// The one loop: each of the first `upto` passes in order, timed, then
    /// re-verified by [`reverify`] (over the whole module with `whole`,
    /// else its top-level ops), stopping at the first failure.
    fn run_passes(&mut self, m: &mut Module, whole: bool, upto: usize) -> Result<(), BatchFailure> {
        let inst = self.instrumentation;
        let clock = |timed: bool| timed.then(Instant::now);
        let elapsed = |t: Option<Instant>| t.map_or(Duration::ZERO, |t| t.elapsed());
        // Nothing observes the passes one by one (their times, the IR
        // after each, a re-derivation after each): a run of the passes
        // that attach the four lowered forms may attach them in one walk.
        let walkable = !self.timed && !inst.print_ir_after_all && !inst.rederive_attached;
        let mut walked: Option<(usize, LoweringTally, LoweringCounters)> = None;
        let passes = self.passes.iter_mut().zip(&mut self.records);
        for (index, ((name, pass), r)) in passes.enumerate().take(upto) {
            if walked.is_none() && walkable && index + LOWERED_FORMS <= upto {
                if let Some(counters) = self.lowering_runs[index] {
                    walked =
                        apir_ir::lowering::lower_all_forms(m).map(|tally| (index, tally, counters));
                }
            }
            if let Some((from, tally, counters)) = walked {
                if let Some(count) = index.checked_sub(from).and_then(|k| counters.get(k)) {
                    // The pass ran, on the forms the walk attached for it,
                    // and after it nothing is re-verified ([`reverify`] of
                    // a pass that attaches one form).
                    count(&tally, &mut r.cx);
                    r.ran = true;
                    if !inst.no_verify {
                        r.verify.get_or_insert(Duration::ZERO);
                    }
                    continue;
                }
            }
            let t = clock(self.timed);
            let warned = r.cx.warnings().len();
            let result = pass.run(m, &mut r.cx);
            r.time += elapsed(t);
            // Warnings about an op a pass made name the op it was made
            // from, numbered as the whole module numbers it.
            if r.cx.warnings().len() > warned {
                let base = self.batch_base;
                r.cx.map_warning_ops(warned, |op| numbered_after(m.origin(op), base));
            }
            r.ran = true;
            let failure = match result {
                // An op the pass made stands for the op it was made from:
                // its errors name that one (the verifier's do already).
                Err(mut diags) => {
                    for s in diags.iter_mut().filter_map(|d| d.subject.as_mut()) {
                        s.op = m.origin(s.op);
                    }
                    Some((diags, false))
                }
                Ok(_) if inst.no_verify => None,
                Ok(changed) => {
                    let t = clock(self.timed);
                    let v = reverify(&**pass, changed, m, whole, inst.rederive_attached);
                    *r.verify.get_or_insert(Duration::ZERO) += elapsed(t);
                    v.err().map(|diags| {
                        let mut out = vec![Diagnostic::internal(
                            None,
                            format!("the IR after `{name}` does not verify (a bug in the pass)"),
                        )];
                        out.extend(diags);
                        (out, true)
                    })
                }
            };
            match failure {
                Some((diagnostics, unverified)) => {
                    if inst.print_ir_after_failure || inst.print_ir_after_all {
                        self.dumps.push(IrDump {
                            header: format!("// -----// IR Dump After {name} Failed //----- //"),
                            ir: print_module(m),
                        });
                    }
                    return Err(BatchFailure {
                        pass: index,
                        diagnostics,
                        unverified,
                    });
                }
                None => {
                    if inst.print_ir_after_all {
                        self.dumps.push(IrDump {
                            header: format!("// -----// IR Dump After {name} //----- //"),
                            ir: print_module(m),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Verifies `m` after `pass` returned `changed`, checking only what the
/// pass could have broken by its own promises:
/// - nothing if it changed nothing (as MLIR skips the verifier after a
///   pass that preserved everything);
/// - after a pass that attaches one lowered form ([`Pass::attaches`]),
///   nothing either unless `rederive` is set, then that form re-derived
///   ([`apir_ir::verify_lowered_form`]). Such a pass promises to attach
///   exactly what the lowering math (`apir_ir::lowering`) derives, so
///   re-deriving it repeats the pass's own computation; a test holds every
///   built-in pass that says so to it, and `rederive` (`apir-opt
///   --verify-attached-forms`) checks any pass, as MLIR's expensive-checks
///   builds verify after every pass;
/// - all lowered forms after a pass that changes only lowered forms
///   ([`Pass::preserves_logical_ir`]);
/// - else everything: with `whole`, the module; otherwise the batch
///   ([`apir_ir::verify_batch`]: its structure and spelling too, not only
///   its ops, in the work of the batch).
pub fn reverify<P: Pass + ?Sized>(
    pass: &P,
    changed: Changed,
    m: &Module,
    whole: bool,
    rederive: bool,
) -> Result<(), Diagnostics> {
    match (changed, pass.attaches()) {
        (Changed::No, _) => Ok(()),
        (Changed::Yes, Some(_)) if !rederive => Ok(()),
        (Changed::Yes, Some(form)) => apir_ir::verify_lowered_form(m, m.top_ops(), form),
        (Changed::Yes, None) if pass.preserves_logical_ir() => {
            apir_ir::verify_lowered(m, m.top_ops())
        }
        (Changed::Yes, None) if whole => verify(m),
        (Changed::Yes, None) => apir_ir::verify_batch(m),
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
