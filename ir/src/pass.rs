//! The [`Pass`] trait and the context a pass runs in.

use crate::diag::{Bounded, Diagnostic, DiagnosticLimit, Diagnostics};
use crate::module::Module;
use indexmap::IndexMap;
use std::hash::BuildHasherDefault;

/// A pass's counters by name, in the order first counted.
pub type Statistics = IndexMap<&'static str, Statistic, BuildHasherDefault<rustc_hash::FxHasher>>;

/// Whether a pass changed the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    /// The module was modified.
    Yes,
    /// The module is untouched.
    No,
}

/// A counter a pass reports for `--statistics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statistic {
    /// Value.
    pub value: u64,
    /// One-line description.
    pub description: &'static str,
}

/// What a pass may read and report besides the module: its statistics and
/// non-fatal diagnostics. A fresh context is made per pass run, so nothing
/// leaks between runs.
#[derive(Debug, Default)]
pub struct PassContext {
    stats: Statistics,
    warnings: Bounded,
}

impl PassContext {
    /// A fresh context that keeps every warning.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh context that keeps warnings up to `limit` and counts the
    /// rest ([`Bounded`]).
    pub fn limited(limit: DiagnosticLimit) -> Self {
        PassContext {
            stats: Statistics::default(),
            warnings: Bounded::new(limit),
        }
    }

    /// Adds `n` to the counter `name` (created at 0 with `description`).
    pub fn count(&mut self, name: &'static str, description: &'static str, n: u64) {
        // A pass has a handful of counters, each named by one literal: a
        // scan comparing addresses finds it without hashing or comparing
        // text; the text comparison is the fallback.
        if let Some(s) = self
            .stats
            .iter_mut()
            .find(|(k, _)| std::ptr::eq(**k, name))
            .map(|(_, s)| s)
        {
            s.value += n;
        } else if let Some(s) = self.stats.get_mut(name) {
            s.value += n;
        } else {
            self.stats.insert(
                name,
                Statistic {
                    value: n,
                    description,
                },
            );
        }
    }

    /// Adds `other`'s counters (in its order) and warnings to this
    /// context, as if this context had gone on counting what `other` did.
    pub fn absorb(&mut self, other: PassContext) {
        for (name, s) in other.stats {
            self.count(name, s.description, s.value);
        }
        self.warnings.append(other.warnings);
    }

    /// The counters, in the order first counted.
    pub fn statistics(&self) -> &Statistics {
        &self.stats
    }

    /// Records a warning or note that does not stop the pipeline (kept
    /// if under the context's limit, else counted).
    pub fn warn(&mut self, d: Diagnostic) {
        self.warnings.push(d);
    }

    /// Renames the op of the subject of every warning kept from index
    /// `from` on by `f` ([`Bounded::map_subject_ops`]).
    pub fn map_warning_ops(&mut self, from: usize, f: impl Fn(crate::Op) -> crate::Op) {
        self.warnings.map_subject_ops(from, f);
    }

    /// The warnings kept.
    pub fn warnings(&self) -> &[Diagnostic] {
        self.warnings.kept()
    }

    /// A copy of the warnings (the kept ones and the count of the others).
    pub fn clone_warnings(&self) -> Bounded {
        self.warnings.clone()
    }

    /// Takes the warnings out (the kept ones and the count of the others),
    /// leaving none under the same limit.
    pub fn take_warnings(&mut self) -> Bounded {
        let limit = self.warnings.limit();
        std::mem::replace(&mut self.warnings, Bounded::new(limit))
    }
}

/// A transformation or check over a module. A pass is a plain value: its
/// options are fields set when it is built, and it keeps no global state.
pub trait Pass {
    /// The kebab-case name (matches the pass's file and lit folder).
    fn name(&self) -> &'static str;

    /// Runs on `m`. On error the module may be partially transformed; the pass
    /// manager reports the diagnostics and stops.
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics>;

    /// Whether the pass treats each top-level op (with its region)
    /// independently of the others, so that a driver may run it on a module
    /// holding the buffers and one op at a time. Such a pass must give the
    /// same result, statistics and diagnostics either way.
    ///
    /// Such a pass may carry state from op to op in program order (a
    /// module-wide budget, say): run over the ops in order by one value,
    /// it gives the whole-module result. A driver that runs forks on parts
    /// of the module hands each fork's state back in part order
    /// ([`Pass::part_state`], [`Pass::join`]).
    fn op_local(&self) -> bool {
        false
    }

    /// Whether the pass changes nothing but the lowered forms of operands
    /// (`Operand::lowered`): no op, buffer, access pattern, role, attribute
    /// or program order. After such a pass the pass manager re-verifies
    /// only the lowered forms ([`crate::verify_lowered`]); the rest of the
    /// IR is as verified before the pass. A test holds every pass that says
    /// so to it on the corpus. True by default for a pass that
    /// [`Pass::attaches`] a form.
    fn preserves_logical_ir(&self) -> bool {
        self.attaches().is_some()
    }

    /// The one lowered form this pass attaches, if it changes nothing else:
    /// it preserves the logical IR (so [`Pass::preserves_logical_ir`] says
    /// so by default), leaves every other lowered form as it found it, and
    /// attaches exactly what the lowering math derives for that form
    /// ([`crate::lowering`]: `fold_of`, `slots_of`, `role_choice`,
    /// `descriptor_of`), as the verifier would re-derive it. After such a
    /// pass the pass manager re-verifies nothing: the form is the verifier's
    /// own derivation, and the others are as verified after the passes that
    /// attached them. Its `rederive_attached` instrumentation re-derives
    /// the form anyway ([`crate::verify_lowered_form`]), which catches a
    /// pass that breaks this promise. A test holds every pass that says so
    /// to it, on the corpus and on generated modules.
    fn attaches(&self) -> Option<crate::LoweredForm> {
        None
    }

    /// For a pass that [attaches](Pass::attaches) a lowered form: how it
    /// counts attaching its form to the operands a
    /// [`LoweringTally`](crate::lowering::LoweringTally) describes, the
    /// statistics its `run` would record on a module whose ISA operands
    /// had no form. When the four passes that attach fold, slots, kind and
    /// wire follow one another in a pipeline and each gives its counter,
    /// the pass manager may attach all four forms in one walk
    /// ([`crate::lowering::lower_all_forms`]) instead of running them, and
    /// hands each pass's counter the tally. `None` (the default): the pass
    /// is always run.
    fn lowered_counter(&self) -> Option<fn(&crate::lowering::LoweringTally, &mut PassContext)> {
        None
    }

    /// A copy of this pass for a driver that runs an op-local pipeline on
    /// several parts of a module at once, one copy per part, on other
    /// threads. The copies may share caches with this value, but the
    /// statistics their contexts report must add up, part by part, to what
    /// one value running over the whole module reports. `None` (the
    /// default) means the pass cannot be copied, and such a driver runs the
    /// module on one thread.
    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        None
    }

    /// What a fork ([`Pass::fork`]) carried in program order over the part
    /// it ran on, for the value it was forked from to [`Pass::join`]; taken
    /// once the part is done. `None` (the default): nothing.
    fn part_state(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }

    /// Takes in, in part order, what a fork carried over its part
    /// ([`Pass::part_state`]), as if this value had run over the part's ops
    /// itself after the parts before it. False if the fork's results may
    /// differ from the ones this value would have given on those ops (the
    /// fork started without the state of the parts before it): the driver
    /// then runs the module on one thread. True (the default) for a pass
    /// that carries nothing from op to op.
    fn join(&mut self, part: Option<Box<dyn std::any::Any + Send>>) -> bool {
        part.is_none()
    }
}

/// An option a pass accepts in pipeline text (`pass{name=value}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionInfo {
    /// Key.
    pub name: &'static str,
    /// One-line help, including the allowed values.
    pub help: &'static str,
    /// Default, as pipeline text.
    pub default: &'static str,
}

/// A pass as its own file declares it (`const INFO: PassInfo` on the pass
/// type): its name, summary, options and constructor. The compiler's
/// registry only lists these declarations.
#[derive(Clone, Copy)]
pub struct PassInfo {
    /// Kebab-case name, as written in pipelines.
    pub name: &'static str,
    /// One-line summary for `--list-passes`.
    pub summary: &'static str,
    /// Options the pass accepts, with their help and defaults.
    pub options: &'static [OptionInfo],
    /// Builds the pass from options checked against `options`.
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, OptionError>,
}

impl std::fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassInfo")
            .field("name", &self.name)
            .finish()
    }
}

impl PassInfo {
    /// The option called `name`.
    pub fn option(&self, name: &str) -> Option<&'static OptionInfo> {
        self.options.iter().find(|o| o.name == name)
    }
}

/// The options given to one pass in pipeline text, already checked against
/// the pass's [`OptionInfo`] list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassOptions {
    values: IndexMap<String, String>,
}

impl PassOptions {
    /// Options from `key = value` pairs.
    pub fn new(values: IndexMap<String, String>) -> Self {
        PassOptions { values }
    }

    /// The raw text of option `key`, if given.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Option `option` parsed as `T`: its value if given, else its declared
    /// default ([`OptionInfo::default`], so that the default is written once,
    /// in the declaration). The error names the option and the bad value.
    pub fn value<T: std::str::FromStr>(&self, option: &OptionInfo) -> Result<T, OptionError> {
        let text = self.raw(option.name).unwrap_or(option.default);
        text.parse().map_err(|_| {
            OptionError::new(
                option.name,
                format!("invalid value `{text}` for option `{}`", option.name),
            )
        })
    }

    /// Option `key` parsed as `T`, or `default` when not given. The error
    /// names the option and the bad value.
    pub fn get_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, OptionError> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                OptionError::new(key, format!("invalid value `{v}` for option `{key}`"))
            }),
        }
    }
}

/// A pass option that cannot be used: which option, and why. Pipeline
/// errors point at the option's value in the pipeline text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The option at fault.
    pub key: String,
    /// What is wrong, naming the option and the value.
    pub message: String,
}

impl OptionError {
    /// An error about option `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        OptionError {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
