//! `apir-opt`'s command line.

use apir_compiler::driver;
use apir_compiler::timeline::Axis;
use apir_ir::{Arch, DiagnosticLimit};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// The most worker threads `--threads` accepts.
pub(crate) const MAX_THREADS: i64 = 1024;

/// What `apir-opt` prints (`--emit`): the driver's [`driver::Emit`], whose
/// names and help are the possible values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emit(pub driver::Emit);

/// Every emit as a command-line value, in the driver's order.
static EMITS: [Emit; driver::Emit::ALL.len()] = {
    let mut out = [Emit(driver::Emit::Ir); driver::Emit::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = Emit(driver::Emit::ALL[i]);
        i += 1;
    }
    out
};

impl ValueEnum for Emit {
    fn value_variants<'a>() -> &'a [Self] {
        &EMITS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.help()))
    }
}

/// How `--emit=timeline-svg` scales its panels (`--timeline-axis`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TimelineAxis {
    /// One time axis per core: the core's kernels one after another in
    /// issue order, its panels spanning that core's total time.
    #[default]
    Core,
    /// One time axis for all cores: every panel spans the longest core's
    /// time, so cores compare by bar length.
    Global,
}

impl From<TimelineAxis> for Axis {
    fn from(a: TimelineAxis) -> Axis {
        match a {
            TimelineAxis::Core => Axis::Core,
            TimelineAxis::Global => Axis::Global,
        }
    }
}

/// Parse apir IR, verify it, run a pass pipeline and print the result.
#[derive(Parser, Debug)]
#[command(
    name = "apir-opt",
    version,
    after_help = "Examples:\n  apir-opt examples/batchnorm.apir\n  apir-opt examples/batchnorm.apir -p lower-to-wire --emit=wire-dump\n  apir-opt examples/batchnorm.apir -p 'fold-partition,compact-unit-dims' -o out.apir\n  apir-opt examples/cases.apir --split-input-file --verify-diagnostics\n  apir-opt examples/relu-kernel.apir -p lower-staging --emit=timeline-svg -o relu.svg\n  apir-opt --list-passes\n\nExit codes: 0 success, 1 the input has errors, 2 bad usage, 3 internal error."
)]
pub struct Args {
    /// Input file; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
    /// Pass pipeline, e.g. `fold-partition,compact-unit-dims` or a named pipeline.
    #[arg(long = "pass-pipeline", short = 'p', value_name = "PIPELINE")]
    pub pipeline: Option<String>,
    /// Target arch; overrides the module's `arch` attribute.
    #[arg(long, value_parser = crate::arch_parser())]
    pub arch: Option<Arch>,
    /// What to print.
    #[arg(long, value_enum, default_value = "ir")]
    pub emit: Emit,
    /// With `--emit=timeline-svg` only: `core` gives each core its own time
    /// axis (its kernels one after another in issue order), `global` puts
    /// all cores on one axis, at one scale [default: core]. A trace
    /// (`--emit=trace-json`) needs no choice: trace viewers show every core
    /// on one clock.
    #[arg(long, value_enum, value_name = "AXIS")]
    pub timeline_axis: Option<TimelineAxis>,
    /// Output file (written completely or not at all); default stdout.
    #[arg(short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Treat `// -----` lines as boundaries of independent cases.
    #[arg(long)]
    pub split_input_file: bool,
    /// Check `expected-error` / `expected-warning` / `expected-note` comments
    /// against the diagnostics produced.
    #[arg(long)]
    pub verify_diagnostics: bool,
    /// Print the IR after every pass (to stderr).
    #[arg(long)]
    pub print_ir_after_all: bool,
    /// Print the IR after a pass that fails (to stderr).
    #[arg(long)]
    pub print_ir_after_failure: bool,
    /// After each pass that attaches a lowered form (a fold, slots, a
    /// descriptor kind or wire bytes), re-derive the form from the access
    /// pattern and compare; a difference is an internal error. Off by
    /// default: such a pass attaches the lowering math's own result, which
    /// the verifier would re-derive.
    #[arg(long)]
    pub verify_attached_forms: bool,
    /// Print wall time per phase and pass (to stderr); with several
    /// threads, each phase's time is summed over the threads.
    #[arg(long)]
    pub timing: bool,
    /// Worker threads for op-local pipelines on large inputs (0: one per
    /// core). The output is the same for every count.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u16).range(0..=MAX_THREADS))]
    pub threads: u16,
    /// Colour the diagnostics: `auto` (when stderr is a terminal and
    /// `NO_COLOR` is unset), `always` or `never`.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: crate::ColorChoice,
    /// Show at most N errors (0: every one); a closing note counts the
    /// rest. Syntax errors stop at the default count whatever N is.
    #[arg(long, value_name = "N", default_value_t = DiagnosticLimit::DEFAULT_COUNT)]
    pub error_limit: usize,
    /// Show at most N warnings (0: every one); a closing note counts the
    /// rest.
    #[arg(long, value_name = "N", default_value_t = DiagnosticLimit::DEFAULT_COUNT)]
    pub warning_limit: usize,
    /// Print each pass's counters (to stderr).
    #[arg(long)]
    pub statistics: bool,
    /// List the passes and named pipelines, then exit.
    #[arg(long)]
    pub list_passes: bool,
}

impl Args {
    /// The driver's options for this command line (the process exits
    /// right after writing the output, so the module is not freed).
    pub fn driver_options(&self) -> driver::Options {
        driver::Options {
            pipeline: self.pipeline.clone().unwrap_or_default(),
            emit: self.emit.0,
            timeline_axis: self.timeline_axis.map(Axis::from),
            arch: self.arch,
            split_input_file: self.split_input_file,
            verify_diagnostics: self.verify_diagnostics,
            print_ir_after_all: self.print_ir_after_all,
            print_ir_after_failure: self.print_ir_after_failure,
            verify_attached_forms: self.verify_attached_forms,
            statistics: self.statistics,
            timing: self.timing,
            threads: usize::from(self.threads),
            color: self.color.enabled(),
            diagnostic_limit: DiagnosticLimit {
                errors: (self.error_limit > 0).then_some(self.error_limit),
                warnings: (self.warning_limit > 0).then_some(self.warning_limit),
            },
            disable_free: true,
        }
    }
}
