//! `schedule-staging`: plans every GpSimd kernel's HBM <-> dataram staging
//! (docs/staging.md).
//!
//! Per kernel it
//! 1. decides per tensor (a connected component of HBM overlap among the
//!    buffers the kernel accesses, [`crate::staging::layout::tensors`])
//!    whether its accesses are staged or indexed, so that the accesses of
//!    one tensor never mix buffered and unbuffered accessors and a written
//!    tensor's staged accesses share one group. An explicit `accessor` is
//!    honoured, or rejected when it cannot work: `stream` on an access that
//!    is not a contiguous in-order sweep (a stream copies storage order),
//!    `stream`/`tcm` on a tensor one of whose writes writes a byte twice (a
//!    staged write flushes each tile once). A staged access is a `stream`
//!    when it is a contiguous sweep and not in place, `tcm` tiles
//!    otherwise. A tensor whose writes repeat a byte (or may: undecided
//!    within [`MAX_FOOTPRINT_RUNS`] runs) is indexed. While staging does
//!    not fit the budget or the copy limit (`schedule-staging{max-copies=N}`,
//!    [`DEFAULT_MAX_COPIES`], shared by the module's kernels in program
//!    order) with the budget split evenly, `auto` tensors
//!    are indexed, last first (the longest staged prefix that fits is found
//!    by bisection); a forced staging that does not fit is an error naming
//!    the budget or the limit;
//! 2. under `pipelined`, searches jointly ([`search`]): per `auto` tensor,
//!    staged or indexed; per staging group, the copy method (SDMA,
//!    VEC_MEMCPY, C_MEMCPY when its parameters can beat VEC_MEMCPY), the
//!    buffer count (1 to 4 for SDMA, or `buffers=N`; one for the core's
//!    synchronous methods) and the buffer size (the split of the budget,
//!    in 512-byte steps); per copy, VEC_MEMCPY for an SDMA group's copies
//!    too small to amortise the DMA fixed cost ([`copy_method`]). The
//!    search estimates each configuration from its tiles; the best
//!    estimates, the even split (two buffers per group, the budget shared
//!    equally) and every `auto` tensor indexed are built and simulated, and
//!    the fastest plan is kept: `auto` never loses to indexing nor to the
//!    even split. `reference` gives each group one 4 KiB buffer, as the
//!    reference stream does, and streams only accesses that sweep their
//!    whole tensor from element 0 (what the runtime's stream does);
//! 3. emits the steps in issue order (the `emit` module; the tile contract is
//!    [`super::staging::layout`]'s): the first tiles of every group are
//!    loaded first, loads run as many tiles ahead as the group has buffers
//!    (one fewer in place), flushes follow each tile, a buffer is written
//!    again only after its flush completed, a tile that reads bytes an
//!    earlier tile of its group wrote is loaded only after that flush
//!    completed, and every outstanding copy is waited for at the end.
//!    `reference` waits for every copy as soon as it is issued (the
//!    runtime's `neuron_memcpy` is synchronous);
//! 4. records in the plan header one line per access saying why it is
//!    staged or indexed as it is (`reasons`).
//!
//! A misspelt kernel or access attribute (`acessor`) is warned about before
//! any pass runs (`apir_ir::lint`), not here.

mod emit;
pub mod search;

use crate::check_coherency::incompatible;
use crate::staging::footprint::{Repeat, Sweep, MAX_FOOTPRINT_RUNS};
use crate::staging::layout::{buffer_range, groups, tensors, tile_iterations, Group};
use crate::staging::sim::{core_copy_ns, dma_ns, Schedule};
use apir_ir::staging::{
    method_name, Accessor, Kernel, KernelPlan, Method, Policy, SimParams, MAX_DEPTH,
};
use apir_ir::target::abi::BUFFER_SIZE_BYTES;
use apir_ir::target::cost::{DEFAULT_TEXT, PARAM_TABLE};
use apir_ir::text::ConstText;
use apir_ir::{
    Changed, Diagnostic, Diagnostics, Module, OptionError, OptionInfo, Pass, PassContext, PassInfo,
    PassOptions,
};
use emit::Buffering;

/// The reference stream's buffer (`BUFFER_SIZE_BYTES`).
const STREAM_BUFFER_BYTES: u64 = BUFFER_SIZE_BYTES as u64;

/// The smallest buffer `pipelined` plans with (project-defined): below it a
/// descriptor's fixed cost (1300 ns) is over 70 times its transfer time.
pub(crate) const MIN_BUFFER_BYTES: u64 = 512;

/// In an SDMA group, a copy of at most 1/`SMALL_COPY_FRACTION` of its
/// buffer that VEC_MEMCPY moves faster than SDMA goes by VEC_MEMCPY
/// (project-defined).
pub const SMALL_COPY_FRACTION: u64 = 8;

/// The method of one copy of `bytes` in a buffer of `buffer` bytes, in a
/// staging group whose method is `group`: in an SDMA group, a copy that
/// VEC_MEMCPY moves faster than SDMA goes by VEC_MEMCPY when it is so
/// small that the DMA fixed cost dominates (at most
/// 1/[`SMALL_COPY_FRACTION`] of its buffer) or when it is an `edge` of the
/// pipeline (a load of the first tile, which the core waits for anyway,
/// or a flush of the last tile, after the last compute), unless the copies
/// are synchronous (`reference`: the runtime always uses its default
/// method, DMA). The planner's cost model and its emitter both use it.
pub fn copy_method(
    p: &SimParams,
    group: Method,
    bytes: u64,
    buffer: u64,
    sync: bool,
    edge: bool,
) -> Method {
    let small = (edge || bytes * SMALL_COPY_FRACTION <= buffer)
        && core_copy_ns(p, Method::VecMemcpy, bytes) < dma_ns(p, bytes);
    if group == Method::Dma && small && !sync {
        Method::VecMemcpy
    } else {
        group
    }
}

/// The buffer count of the even split the search starts from, and of
/// every SDMA group when `buffers` is set to it (project-defined).
pub(crate) const DEFAULT_DEPTH: u32 = 2;

/// A candidate plan of at most this many copies (an upper bound: row
/// pieces) over a kernel of at most [`SIMULATED_TILES`] tiles is simulated
/// whole (project-defined).
pub(crate) const SIMULATED_COPIES: u64 = 1 << 19;

/// A longer candidate is simulated over its first this many tiles of its
/// largest group, and at most [`SIMULATED_ITERATIONS`] iterations, and its
/// makespan extrapolated (project-defined).
pub const SIMULATED_TILES: u64 = 64;

/// Candidates are simulated, best estimate first, until their copies
/// (upper bounds: row pieces; a prefix's share for an extrapolated one)
/// add up to this many, and at least [`MIN_SIMULATED`] of them
/// (project-defined: small kernels try hundreds of candidates, a 1 GiB
/// stream a few).
pub const SIMULATED_WORK: u64 = 1 << 18;

/// See [`SIMULATED_WORK`] (project-defined).
pub const MIN_SIMULATED: usize = 16;

/// Copies (upper bounds) the candidate plans of a module's kernels may lay
/// out and simulate together (project-defined: several kernels' worth of
/// [`SIMULATED_WORK`] and of the local search's bound, a few seconds). Past it a kernel
/// simulates its even split and its all-indexed plan only.
pub const MODULE_SIMULATED_WORK: u64 = 1 << 23;

/// Rounds of local search around the best simulated plan and around the
/// even split, and simulations from each (project-defined).
pub const LOCAL_ROUNDS: usize = 12;

/// See [`LOCAL_ROUNDS`] (project-defined).
pub(crate) const LOCAL_SIMS: usize = 96;

/// Copies (upper bounds) the local search of one kernel may lay out in all
/// (project-defined: four times [`SIMULATED_WORK`]).
pub(crate) const LOCAL_WORK: u64 = 4 * SIMULATED_WORK;

/// See [`SIMULATED_TILES`] (project-defined).
pub const SIMULATED_ITERATIONS: u64 = 1 << 18;

/// How many of the best extrapolated candidates are then simulated whole
/// (project-defined).
pub(crate) const WHOLE_AFTER_PREFIX: usize = 2;

/// Buffers are placed at multiples of this many bytes (project-defined).
pub const BUFFER_ALIGN: u64 = 64;

/// The SDMA queue staging copies use on each core's engine (project-defined:
/// each core drives its own engine; the ring gives the direction).
pub(crate) const STAGING_QUEUE: u8 = 0;

/// The pass and its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleStaging {
    /// Policy.
    pub policy: Policy,
    /// Buffers per SDMA staging group for `pipelined` (`buffers=N`);
    /// `None`: chosen per group by the search (1 to 4).
    pub depth: Option<u32>,
    /// Simulator parameters (also recorded in each plan).
    pub params: SimParams,
    /// The most copies the plans of one module may take together (1 to
    /// [`MAX_COPIES_LIMIT`], [`DEFAULT_MAX_COPIES`] unless set): kernels are
    /// planned in program order, each checked (by its upper bound, one copy
    /// per row piece of each tile) against what the ones before it left
    /// less a share kept for each kernel after it (what its even split
    /// takes, cut to an equal level when those do not all fit, never below
    /// what its forced stagings need) but with at least its own forced
    /// need while what is left allows, and charged the copies its plan has.
    pub max_copies: u64,
}

impl Default for ScheduleStaging {
    fn default() -> Self {
        ScheduleStaging {
            policy: Policy::Pipelined,
            depth: None,
            params: SimParams::default(),
            max_copies: DEFAULT_MAX_COPIES,
        }
    }
}

/// The options that come before the simulator parameters.
const FIXED_OPTIONS: [OptionInfo; 2] = [
    OptionInfo {
        name: "policy",
        help: "pipelined (N-deep buffering, copies overlap compute) or reference (the runtime's accessors)",
        default: Policy::Pipelined.name(),
    },
    OptionInfo {
        name: "buffers",
        help: BUFFERS_HELP.as_str(),
        default: "auto",
    },
];

/// The `buffers` option's help, with the bounds from their constants.
static BUFFERS_HELP: ConstText<96> = ConstText::joined(&[
    "buffers per SDMA staging group for pipelined, 1 to ",
    MAX_DEPTH_TEXT.as_str(),
    " (unset: chosen per group, 1 to ",
    SEARCH_BUFFERS_TEXT.as_str(),
    ")",
]);
static MAX_DEPTH_TEXT: ConstText<20> = ConstText::decimal(MAX_DEPTH);
static SEARCH_BUFFERS_TEXT: ConstText<20> = ConstText::decimal(search::MAX_SEARCH_BUFFERS);

/// Each simulator parameter's option name: its name with `_` spelled `-`.
static PARAM_OPTION_NAMES: [ConstText<32>; PARAM_TABLE.len()] = {
    let mut out = [ConstText::EMPTY; PARAM_TABLE.len()];
    let mut i = 0;
    while i < PARAM_TABLE.len() {
        out[i] = ConstText::replaced(PARAM_TABLE[i].name, b'_', b'-');
        i += 1;
    }
    out
};

/// [`DEFAULT_MAX_COPIES`] as pipeline text.
static MAX_COPIES_DEFAULT: ConstText<20> = ConstText::decimal(DEFAULT_MAX_COPIES);

/// The options of `schedule-staging`: the policy, the depth, one per
/// simulator parameter (from the cost model's table,
/// [`apir_ir::target::cost::PARAMS`]: name, help and default), then
/// `max-copies`.
static OPTIONS: [OptionInfo; FIXED_OPTIONS.len() + PARAM_TABLE.len() + 1] = {
    let mut out = [FIXED_OPTIONS[0]; FIXED_OPTIONS.len() + PARAM_TABLE.len() + 1];
    let mut i = 0;
    while i < FIXED_OPTIONS.len() {
        out[i] = FIXED_OPTIONS[i];
        i += 1;
    }
    let mut i = 0;
    while i < PARAM_TABLE.len() {
        out[FIXED_OPTIONS.len() + i] = OptionInfo {
            name: PARAM_OPTION_NAMES[i].as_str(),
            help: PARAM_TABLE[i].help,
            default: DEFAULT_TEXT[i].as_str(),
        };
        i += 1;
    }
    out[FIXED_OPTIONS.len() + PARAM_TABLE.len()] = OptionInfo {
        name: "max-copies",
        help: MAX_COPIES_HELP.as_str(),
        default: MAX_COPIES_DEFAULT.as_str(),
    };
    out
};

/// The `max-copies` option's help, with its bound from the constant.
static MAX_COPIES_HELP: ConstText<256> = ConstText::joined(&[
    "most copies the module's kernel plans take together, 1 to ",
    MAX_COPIES_LIMIT_TEXT.as_str(),
    " (each kernel, in program order, within what the ones before it left less a share kept for each later one); past it auto indexes and a forced staging is an error naming what the others took",
]);
static MAX_COPIES_LIMIT_TEXT: ConstText<20> = ConstText::decimal(MAX_COPIES_LIMIT);

/// The largest `max-copies` (project-defined): 4 Mi copies, whose plan
/// takes about 1 GiB to plan and prove (its `schedule-json` about 5 GB),
/// so that copy ids, tile counts and the proof's row pieces
/// ([`crate::check_coherency`] lays out four times this many) stay far
/// from what one machine holds.
pub const MAX_COPIES_LIMIT: u64 = 1 << 22;

impl ScheduleStaging {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "schedule-staging",
        summary: "Plan each GpSimd kernel's HBM <-> dataram staging: accessors, buffers, SDMA bursts, waits and computes",
        options: &OPTIONS,
        create: |opts| Ok(Box::new(ScheduleStaging::from_options(opts)?)),
    };

    /// The pass with the options given in pipeline text, each checked.
    pub(crate) fn from_options(opts: &PassOptions) -> Result<ScheduleStaging, OptionError> {
        let [policy_opt, buffers_opt] = &FIXED_OPTIONS;
        let mut pass = ScheduleStaging::default();
        let p = opts.raw(policy_opt.name).unwrap_or(policy_opt.default);
        pass.policy = Policy::from_name(p).ok_or_else(|| {
            OptionError::new(
                policy_opt.name,
                format!("invalid value `{p}` for option `policy` (pipelined or reference)"),
            )
        })?;
        if let Some(text) = opts.raw(buffers_opt.name) {
            if pass.policy == Policy::Reference {
                return Err(OptionError::new(
                    buffers_opt.name,
                    "option `buffers` applies to policy=pipelined (the reference stream has one buffer)",
                ));
            }
            let depth: u64 = text.parse().map_err(|_| {
                OptionError::new(
                    buffers_opt.name,
                    format!("invalid value `{text}` for option `buffers`"),
                )
            })?;
            if !(1..=MAX_DEPTH).contains(&depth) {
                return Err(OptionError::new(
                    buffers_opt.name,
                    format!("option `buffers` must be in [1, {MAX_DEPTH}], found {depth}"),
                ));
            }
            pass.depth = Some(depth as u32);
        }
        let max_copies_opt = &OPTIONS[OPTIONS.len() - 1];
        let max_copies: u64 = opts.value(max_copies_opt)?;
        if !(1..=MAX_COPIES_LIMIT).contains(&max_copies) {
            return Err(OptionError::new(
                max_copies_opt.name,
                format!(
                    "option `max-copies` must be in [1, {MAX_COPIES_LIMIT}], found {max_copies}"
                ),
            ));
        }
        pass.max_copies = max_copies;
        let param_opts = &OPTIONS[FIXED_OPTIONS.len()..FIXED_OPTIONS.len() + PARAM_TABLE.len()];
        for (p, o) in PARAM_TABLE.iter().zip(param_opts) {
            let v: u64 = opts.value(o)?;
            if !(p.min..=p.max).contains(&v) {
                return Err(OptionError::new(
                    o.name,
                    format!(
                        "option `{}` must be in [{}, {}], found {v}",
                        o.name, p.min, p.max
                    ),
                ));
            }
            *(p.field)(&mut pass.params) = v;
        }
        Ok(pass)
    }
}

impl Pass for ScheduleStaging {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut diags = Diagnostics::new();
        let mut plans = Vec::new();
        let mut memo = Memo::default();
        // The kernels share one bound on the tiles their searches lay out
        // and one on the plans they simulate.
        let work = ModuleWork::new();
        // `max-copies` bounds the plans of the whole module: each kernel,
        // in program order, plans within what the kernels before it left,
        // less the shares kept for the kernels after it.
        let kernels: Vec<Kernel> = Kernel::all(m)
            .into_iter()
            .filter(|k| !k.accesses.is_empty())
            .collect();
        let demands: Vec<Demand> = kernels.iter().map(|k| self.demand(m, k)).collect();
        let shares = kept_shares(&demands, self.max_copies);
        let mut after = vec![0u64; kernels.len()];
        let mut kept = 0u64;
        for (i, share) in shares.iter().enumerate().rev() {
            after[i] = kept;
            kept = kept.saturating_add(*share);
        }
        let mut left = self.max_copies;
        for ((kernel, reserved), demand) in kernels.iter().zip(after).zip(&demands) {
            // A kernel keeps its own forced need while what is left allows
            // (when the needs together do not fit, they are met in program
            // order).
            let mine = left.saturating_sub(reserved).max(demand.need.min(left));
            let share = Share {
                left: mine,
                took: self.max_copies - left,
                kept: left - mine,
            };
            match self.plan_memo(m, kernel, &mut memo, share, &work) {
                Ok(plan) => {
                    left = left.saturating_sub(plan.copies().count() as u64);
                    plans.push((kernel.op, plan));
                }
                Err(d) => diags.extend(
                    d.into_iter()
                        .map(|d| d.about(kernel.op, m.ops[kernel.op].kind.name(), None)),
                ),
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let changed = if plans.is_empty() {
            Changed::No
        } else {
            Changed::Yes
        };
        for (op, plan) in plans {
            cx.count("kernels-planned", "kernels given a staging plan", 1);
            for a in &plan.accessors {
                let (name, what) = match a {
                    Accessor::Stream => ("accesses-streamed", "accesses staged as a stream"),
                    Accessor::Tcm => ("accesses-tiled", "accesses staged in TCM tiles"),
                    Accessor::Index => ("accesses-indexed", "accesses left unbuffered"),
                };
                cx.count(name, what, 1);
            }
            let (dma, core) = plan.copies().fold((0, 0), |(d, c), x| {
                if x.method == Method::Dma {
                    (d + 1, c)
                } else {
                    (d, c + 1)
                }
            });
            cx.count("sdma-copies", "SDMA copies emitted", dma);
            cx.count("core-copies", "VEC_MEMCPY / C_MEMCPY copies emitted", core);
            plan.write(m, op);
        }
        Ok(changed)
    }
}

/// The candidate treatment of one tensor under `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Treatment {
    Staged,
    Index,
}

/// One tensor (HBM buffer) of a kernel and its accesses.
struct Tensor {
    accesses: Vec<usize>,
    /// Whether `auto` may choose (no access carries a hint deciding it).
    free: bool,
    written: bool,
    candidates: Vec<Treatment>,
}

impl ScheduleStaging {
    /// Plans one kernel (with all of `max-copies` to itself).
    pub fn plan(&self, m: &Module, kernel: &Kernel) -> Result<KernelPlan, Diagnostics> {
        self.plan_memo(
            m,
            kernel,
            &mut Memo::default(),
            self.whole(),
            &ModuleWork::new(),
        )
    }

    /// All of `max-copies`, nothing kept for other kernels.
    fn whole(&self) -> Share {
        Share {
            left: self.max_copies,
            took: 0,
            kept: 0,
        }
    }

    /// The copies a kernel asks of `max-copies` before it is planned, each
    /// by the upper bound [`ScheduleStaging::fitted`] checks, at the even
    /// split (or one buffer a group, when the search chooses buffer counts
    /// and that takes fewer): what its forced stagings need (every `auto`
    /// tensor indexed; zero when it forces none) and what staging the
    /// tensors it may stage takes, as many of them as fit the budget and
    /// the whole limit, found as [`ScheduleStaging::plan_inner`] finds them
    /// (at least the need).
    /// Nothing is kept for a forced staging over the whole limit: it fails
    /// however the limit is shared.
    fn demand(&self, m: &Module, kernel: &Kernel) -> Demand {
        let sweeps = Sweep::of_kernel(m, kernel);
        let labels = tensors(m, kernel);
        let Ok(tensors) = self.tensors(m, kernel, &sweeps, &labels) else {
            return Demand::default();
        };
        let searched = self.policy == Policy::Pipelined && self.depth.is_none();
        // The copies of a choice, `None` when it does not fit the budget.
        let copies = |choice: &[Treatment]| -> Option<u64> {
            if choice.iter().all(|&c| c == Treatment::Index) {
                return Some(0);
            }
            let acc = self.accessors(kernel, &sweeps, &tensors, choice);
            let gs = groups(kernel, &sweeps, &acc, &labels);
            [false, true][..1 + usize::from(searched)]
                .iter()
                .map(|&one| self.sizes(kernel, &gs, one))
                .filter(|s| s.fit.is_ok())
                .map(|s| copy_bound(kernel, &sweeps, &gs, &s.bufs))
                .min()
        };
        let first = FirstChoice::of(&tensors);
        // The copies of a choice that fits the budget and the whole limit.
        let fit = |c: &[Treatment]| copies(c).filter(|&n| n <= self.max_copies);
        let need = fit(&first.keeping(0)).unwrap_or(0);
        // The longest prefix of free staged tensors that fits.
        let want = match fit(&first.choice) {
            Some(n) => Some(n),
            None => fit(&first.keeping(first.longest(|c| fit(c).is_some()))),
        };
        let want = want.map_or(need, |w| w.max(need));
        Demand { need, want }
    }

    /// Plans one kernel; a kernel shaped like one in `memo` gets its
    /// choice without a search.
    fn plan_memo(
        &self,
        m: &Module,
        kernel: &Kernel,
        memo: &mut Memo,
        share: Share,
        work: &ModuleWork,
    ) -> Result<KernelPlan, Diagnostics> {
        let sweeps = Sweep::of_kernel(m, kernel);
        let mut diags = Diagnostics::new();
        for (a, s) in kernel.accesses.iter().zip(&sweeps) {
            if a.hint == Some(Accessor::Stream) && !s.is_contiguous() {
                diags.push(Diagnostic::error(
                    a.span,
                    "accessor \"stream\" needs a contiguous in-order sweep, and this access is not one: a stream copies storage order (iteration e at start + e), not the access's order, so it would move the wrong elements; use \"tcm\" or \"index\"",
                ));
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let labels = tensors(m, kernel);
        let allowance = Allowance { share, work };
        self.plan_inner(m, kernel, &sweeps, &labels, Some(memo), allowance)
    }

    /// Plans one kernel whose accesses belong to the tensors `labels` (one
    /// label per access, as [`tensors`] gives them; a test may pass others
    /// to model a planner that groups wrongly), with all of `max-copies`
    /// to itself.
    pub fn plan_with_tensors(
        &self,
        m: &Module,
        kernel: &Kernel,
        sweeps: &[Sweep],
        labels: &[usize],
    ) -> Result<KernelPlan, Diagnostics> {
        let work = ModuleWork::new();
        let allowance = Allowance {
            share: self.whole(),
            work: &work,
        };
        self.plan_inner(m, kernel, sweeps, labels, None, allowance)
    }

    fn plan_inner(
        &self,
        m: &Module,
        kernel: &Kernel,
        sweeps: &[Sweep],
        labels: &[usize],
        memo: Option<&mut Memo>,
        Allowance { share, work }: Allowance<'_>,
    ) -> Result<KernelPlan, Diagnostics> {
        let tensors = self.tensors(m, kernel, sweeps, labels)?;
        let left = share.left;
        let cx = Cx {
            m,
            kernel,
            sweeps,
            tensors: &tensors,
            labels,
            share,
            work,
        };
        // The cheapest *legal* choice: when the staging does not fit the
        // budget or the copy limit, `auto` indexes free staged tensors, the
        // last first; a forced staging that does not fit is an error.
        let first = FirstChoice::of(&tensors);
        let mut choice = first.choice.clone();
        // What the fewest staged free tensors that do not fit are over: what
        // limited the choice (the budget, or the copy limit).
        let mut limited = None;
        let mut kept = first.free.len();
        if let Err((over, e)) = self.fitted(&cx, &choice) {
            if let Err((_, e0)) = self.fitted(&cx, &first.keeping(0)) {
                return Err(if first.free.is_empty() { e } else { e0 });
            }
            let mut at_hi = over;
            kept = first.longest(|c| match self.fitted(&cx, c) {
                Ok(_) => true,
                Err((over, _)) => {
                    at_hi = over;
                    false
                }
            });
            limited = Some(at_hi);
            choice = first.keeping(kept);
        }
        let choice = self.unclash(&cx, choice);
        let base = self.fitted(&cx, &choice).map_err(|(_, d)| d)?;
        // Whether the copy limit indexed a tensor here: a choice another
        // kernel of this shape, with another share of the limit, may not
        // make.
        let copy_limited = limited == Some(Over::Copies);
        let limit = match &limited {
            Some(_) if copy_limited => {
                format!(
                    "the copy limit `max-copies={}`{}",
                    self.max_copies,
                    self.taken(share)
                )
            }
            _ => format!("the budget of {} bytes", self.params.budget),
        };
        let limit = if kept > 0 {
            format!("{limit} (tensors earlier in the body keep theirs)")
        } else {
            limit
        };
        // Tensors the budget or the limit forced to indexing stay so.
        let allowed: Vec<Vec<Treatment>> = tensors
            .iter()
            .zip(&choice)
            .map(|(t, &c)| {
                if c == Treatment::Index {
                    vec![Treatment::Index]
                } else {
                    t.candidates.clone()
                }
            })
            .collect();
        if self.policy == Policy::Reference {
            let why = Why {
                allowed,
                best: vec![None; kernel.accesses.len()],
                limit,
                narrowed: false,
                coarse: false,
            };
            let mut plan = self.build(&cx, &base, Vec::new());
            plan.reasons = self.reasons(&cx, &why, &base, &plan);
            return Ok(plan);
        }
        // A kernel shaped like one planned before in this run gets the
        // same choice, if it still fits what the module's copy limit
        // leaves it, stages no tensor this kernel's limit forced to index,
        // and was not shaped by the limit under a smaller share.
        let key = memo.as_ref().map(|_| shape_key(cx));
        if let (Some(memo), Some(key)) = (memo.as_deref(), key.as_ref()) {
            if let Some(hit) = memo.get(key) {
                let acc = self.accessors(kernel, sweeps, &tensors, &hit.treat);
                let gs = groups(kernel, sweeps, &acc, labels);
                let allowed_here = hit.treat.iter().zip(&allowed).all(|(t, a)| a.contains(t));
                // A choice the copy limit shaped is reused only for a share
                // no larger than the one it was made in (a larger share
                // could make another). Within it, it still fits, though a
                // search from this share may start from another buffering
                // and end elsewhere.
                let same_share = hit.shaped_at.is_none_or(|at| left <= at);
                if allowed_here && same_share && self.fits(kernel, sweeps, &gs, &hit.bufs, left) {
                    let f = Fitted {
                        acc,
                        gs,
                        bufs: hit.bufs.clone(),
                    };
                    let why = Why {
                        allowed,
                        best: hit.best.clone(),
                        limit,
                        narrowed: hit.widest > left,
                        coarse: false,
                    };
                    let mut plan = self.build(&cx, &f, Vec::new());
                    plan.reasons = self.reasons(&cx, &why, &f, &plan);
                    return Ok(plan);
                }
            }
        }
        // Whether the module's searches had laid out all they may.
        let coarse_search = work.walk.get() == 0;
        let found = self.search(&cx, &allowed, &base.bufs);
        // Simulated: the even split, every free tensor indexed (so `auto`
        // never loses to indexing), then the search's best estimates while
        // [`SIMULATED_COPIES`] copies last; the fastest plan is kept.
        let indexed: Vec<Treatment> = tensors
            .iter()
            .zip(&choice)
            .map(|(t, &c)| if t.free { Treatment::Index } else { c })
            .collect();
        type Entry = (
            Vec<Treatment>,
            Option<Vec<Buffering>>,
            Option<Vec<Option<usize>>>,
        );
        let mut queue: Vec<Entry> = vec![
            (choice.clone(), Some(base.bufs.clone()), None),
            (indexed, None, None),
        ];
        queue.extend(
            found
                .candidates
                .iter()
                .map(|c| (c.treat.clone(), Some(c.bufs.clone()), Some(c.state.clone()))),
        );
        let mut best: Option<(f64, KernelPlan, Fitted)> = None;
        // The largest copy bound of the candidates the budget allows, tried
        // or ruled out by the copy limit; the choice's even split is one
        // (`fitted` takes one buffer a group when it is over the share).
        let even = self.sizes(kernel, &base.gs, false);
        let mut widest = if even.fit.is_ok() {
            copy_bound(kernel, sweeps, &base.gs, &even.bufs)
        } else {
            0
        };
        let mut tried: Vec<(Vec<Treatment>, Vec<Buffering>)> = Vec::new();
        let mut spent = 0u64;
        // Past the module's simulation bound: the even split and the
        // all-indexed plan only.
        let coarse = work.sim.get() == 0;
        // Candidates too long to simulate whole, by extrapolated makespan.
        let mut partial: Vec<(f64, Fitted)> = Vec::new();
        // The search state of the best plan so far, when it has one.
        let mut best_state: Option<Vec<Option<usize>>> = None;
        let full = |f: Fitted,
                    state: Option<Vec<Option<usize>>>,
                    best: &mut Option<(f64, KernelPlan, Fitted)>,
                    best_state: &mut Option<Vec<Option<usize>>>|
         -> bool {
            let plan = self.build(&cx, &f, Vec::new());
            let ms = Schedule::run(kernel, &plan).figures.makespan_ns;
            let better = best.as_ref().is_none_or(|b| ms < b.0);
            if better {
                *best = Some((ms, plan, f));
                *best_state = state;
            }
            better
        };
        for (k, (treat, bufs, state)) in queue.into_iter().enumerate() {
            let acc = self.accessors(kernel, sweeps, &tensors, &treat);
            let gs = groups(kernel, sweeps, &acc, labels);
            let bufs = bufs.unwrap_or_else(|| self.sizes(kernel, &gs, false).bufs);
            if tried.iter().any(|(t, b)| *t == treat && *b == bufs) {
                continue;
            }
            if !self.fits(kernel, sweeps, &gs, &bufs, left) {
                if self.fits(kernel, sweeps, &gs, &bufs, u64::MAX) {
                    widest = widest.max(copy_bound(kernel, sweeps, &gs, &bufs));
                }
                continue;
            }
            let f = Fitted { acc, gs, bufs };
            // The even split and all-indexed are simulated whole, and so
            // is a candidate whose plan is short; a longer one runs its
            // first SIMULATED_TILES tiles and is extrapolated.
            let longest = f
                .bufs
                .iter()
                .map(|b| b.tile)
                .max()
                .unwrap_or(kernel.elements);
            let prefix = kernel
                .elements
                .min(longest.saturating_mul(SIMULATED_TILES))
                .min(SIMULATED_ITERATIONS.max(longest));
            let bound = copy_bound(kernel, sweeps, &f.gs, &f.bufs);
            widest = widest.max(bound);
            let whole = prefix == kernel.elements && bound <= SIMULATED_COPIES;
            // Work: the copies laid out (a prefix's share of them).
            let cost = if whole {
                bound
            } else {
                bound / (kernel.elements / prefix.max(1)).max(1)
            };
            // Past the work budget, at least MIN_SIMULATED candidates are
            // tried (each at most SIMULATED_COPIES, or a bounded prefix):
            // the work per kernel stays within a constant multiple of the
            // largest plan it may take.
            if k >= 2
                && (coarse
                    || tried.len() >= 2 + MIN_SIMULATED
                        && spent.saturating_add(cost) > SIMULATED_WORK)
            {
                break;
            }
            spent = spent.saturating_add(cost);
            tried.push((treat, f.bufs.clone()));
            if k < 2 || whole {
                full(f, state, &mut best, &mut best_state);
            } else {
                // Two prefixes, so the fill and drain are not scaled up with
                // the steady state: the makespan grows by the slope between
                // them for every further iteration.
                let makespan = |n: u64| {
                    let mut short = kernel.clone();
                    short.elements = n;
                    let scx = Cx {
                        kernel: &short,
                        ..cx
                    };
                    let plan = self.build(&scx, &f, Vec::new());
                    Schedule::run(&short, &plan).figures.makespan_ns
                };
                let half = (prefix / 2).max(1);
                let (ms, ms_half) = (makespan(prefix), makespan(half));
                let slope = (ms - ms_half).max(0.0) / (prefix - half).max(1) as f64;
                let est = ms + slope * (kernel.elements - prefix) as f64;
                partial.push((est, f));
            }
        }
        // The most promising extrapolations are simulated whole.
        partial.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (est, f) in partial.into_iter().take(WHOLE_AFTER_PREFIX) {
            if best.as_ref().is_none_or(|b| est < b.0) {
                full(f, None, &mut best, &mut best_state);
            }
        }
        // Local search on simulated makespans around the best searched
        // plan (`search::Found::neighbors`), while plans stay short enough
        // to simulate whole.
        let mut local_work = 0u64;
        let starts = if coarse {
            [None, None]
        } else {
            [best_state.clone(), found.even.clone()]
        };
        for start in starts {
            // Each start gets its share of the simulations.
            let mut sims = 0;
            let mut cur = start;
            for _ in 0..LOCAL_ROUNDS {
                let Some(state) = cur.take() else { break };
                let mut next = None;
                for st in found.neighbors(&state) {
                    if sims >= LOCAL_SIMS {
                        break;
                    }
                    let c = found.candidate(&st);
                    let acc = self.accessors(kernel, sweeps, &tensors, &c.treat);
                    let gs = groups(kernel, sweeps, &acc, labels);
                    if tried.iter().any(|(t, b)| *t == c.treat && *b == c.bufs) {
                        continue;
                    }
                    if !self.fits(kernel, sweeps, &gs, &c.bufs, left) {
                        if self.fits(kernel, sweeps, &gs, &c.bufs, u64::MAX) {
                            widest = widest.max(copy_bound(kernel, sweeps, &gs, &c.bufs));
                        }
                        continue;
                    }
                    let bound = copy_bound(kernel, sweeps, &gs, &c.bufs);
                    widest = widest.max(bound);
                    let longest = c.bufs.iter().map(|b| b.tile).max().unwrap_or(1);
                    if bound > SIMULATED_COPIES
                        || longest.saturating_mul(SIMULATED_TILES) < kernel.elements
                        || local_work.saturating_add(bound) > LOCAL_WORK
                    {
                        continue;
                    }
                    local_work = local_work.saturating_add(bound);
                    sims += 1;
                    tried.push((c.treat.clone(), c.bufs.clone()));
                    let f = Fitted {
                        acc,
                        gs,
                        bufs: c.bufs,
                    };
                    if full(f, Some(st.clone()), &mut best, &mut best_state) {
                        next = Some(st);
                    }
                }
                cur = next;
            }
        }
        work.sim.set(
            work.sim
                .get()
                .saturating_sub(spent.saturating_add(local_work)),
        );

        let (_, mut plan, f) = match best {
            Some(b) => b,
            None => {
                let plan = self.build(&cx, &base, Vec::new());
                (0.0, plan, base)
            }
        };
        // Whether the copy limit ruled out a candidate the budget allows.
        let narrowed = widest > left;
        let why = Why {
            best: best_staged(&found, kernel.accesses.len()),
            allowed,
            limit,
            narrowed,
            coarse: coarse || coarse_search,
        };
        if let (Some(memo), Some(key)) = (memo, key) {
            if memo.len() < MEMO_ENTRIES {
                let entry = MemoEntry {
                    treat: tensors_treatment(&tensors, &f.acc),
                    bufs: f.bufs.clone(),
                    best: why.best.clone(),
                    widest,
                    shaped_at: (copy_limited || narrowed).then_some(left),
                };
                memo.insert(key, entry);
            }
        }
        plan.reasons = self.reasons(&cx, &why, &f, &plan);
        Ok(plan)
    }

    /// Every valid kernel is planned: a free tensor whose chosen accessors
    /// the reference's matrix would reject is indexed instead (a hinted one
    /// is left for check-coherency to report).
    fn unclash(&self, cx: &Cx, mut choice: Vec<Treatment>) -> Vec<Treatment> {
        let Cx {
            kernel,
            sweeps,
            tensors,
            ..
        } = *cx;
        let acc = self.accessors(kernel, sweeps, tensors, &choice);
        for (ti, t) in tensors.iter().enumerate() {
            let staged = t.accesses.iter().filter(|&&i| acc[i].is_buffered()).count();
            if !t.free || (!t.written && (staged == 0 || staged == t.accesses.len())) {
                continue; // readers only, all staged or all indexed: compatible
            }
            let clash = clashes(
                t.accesses
                    .iter()
                    .map(|&i| (kernel.accesses[i].write, acc[i])),
            );
            if clash {
                choice[ti] = Treatment::Index;
            }
        }
        choice
    }

    /// One line per access saying why it is staged or indexed as it is.
    fn reasons(&self, cx: &Cx, why: &Why, f: &Fitted, plan: &KernelPlan) -> Vec<String> {
        let Why {
            allowed,
            best,
            limit,
            narrowed,
            coarse,
        } = why;
        let Cx {
            kernel,
            tensors,
            labels,
            ..
        } = *cx;
        let p = &self.params;
        let e = kernel.elements.max(1) as f64;
        // Per owning access: copies, bytes and time by method.
        let mut moved: Vec<[(u64, u64, f64); 3]> = vec![[(0, 0, 0.0); 3]; kernel.accesses.len()];
        for c in plan.copies() {
            let k = match c.method {
                Method::Dma => 0,
                Method::VecMemcpy => 1,
                Method::CMemcpy => 2,
            };
            let b = u64::from(c.bytes);
            let x = &mut moved[c.access as usize][k];
            x.0 += 1;
            x.1 += b;
            x.2 += core_copy_ns(p, c.method, b);
        }
        let index_each = p.index_ns as f64;
        // Said of every access whose treatment the search chose.
        let mut not_tried = if *narrowed {
            format!(
                "; not tried: plans over the copy limit `max-copies={}`{}",
                self.max_copies,
                self.taken(cx.share)
            )
        } else {
            String::new()
        };
        if *coarse {
            not_tried.push_str(
                "; chosen from the even split's buffering alone: the kernels before it used up the module's planning work",
            );
        }
        kernel
            .accesses
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let t = labels[i];
                if let Some(gi) = f.gs.iter().position(|g| g.accesses.contains(&i)) {
                    let g = &f.gs[gi];
                    let b = f.bufs[gi];
                    let owner = g.accesses[0];
                    let per = moved[owner];
                    let copies: u64 = per.iter().map(|x| x.0).sum();
                    let bytes: u64 = per.iter().map(|x| x.1).sum();
                    let ns: f64 = per.iter().map(|x| x.2).sum();
                    let methods: Vec<&str> = [Method::Dma, Method::VecMemcpy, Method::CMemcpy]
                        .iter()
                        .zip(&per)
                        .filter(|(_, x)| x.0 > 0)
                        .map(|(m, _)| method_name(*m))
                        .collect();
                    let shared = if owner == i {
                        String::new()
                    } else {
                        format!(", buffers of access {owner}")
                    };
                    let n = b.buffers.min(kernel.elements.div_ceil(b.tile));
                    let tiles = kernel.elements.div_ceil(b.tile);
                    let s = |k: u64, one: &'static str, many: &'static str| {
                        format!("{k} {}", if k == 1 { one } else { many })
                    };
                    let asked = if a.hint.is_some() { " (as written)" } else { "" };
                    format!(
                        "{}{asked}: {} copies, {} of {} B{shared}, {}, {} of {} B on average: {:.1} ns per element vs {} indexed{not_tried}",
                        plan.accessors[i].name(),
                        if methods.is_empty() { "no".to_string() } else { methods.join("+") },
                        s(n, "buffer", "buffers"),
                        b.buffer_bytes(g),
                        s(tiles, "tile", "tiles"),
                        s(copies, "copy", "copies"),
                        bytes / copies.max(1),
                        ns / e,
                        index_each * g.accesses.len() as f64
                    )
                } else if a.hint == Some(Accessor::Index) {
                    "index: as written".to_string()
                } else if tensors[t].candidates == [Treatment::Index] {
                    if self.policy == Policy::Reference {
                        "index: the reference runtime streams only contiguous sweeps of a whole tensor from its first element, and not in place".to_string()
                    } else if a.hint.is_some() || !tensors[t].free {
                        "index: another access of its tensor is indexed as written".to_string()
                    } else {
                        "index: a write to its tensor writes some byte more than once (or may), and a staged write flushes each tile once".to_string()
                    }
                } else if allowed[t] == [Treatment::Index] {
                    format!("index: staging it too does not fit {limit}")
                } else {
                    // Chosen by cost: its best staged option.
                    match best[i] {
                        Some((ns, method, bytes)) => format!(
                            "index: {index_each} ns per element on the core; staged, its copies take at least {:.1} ns per element ({method}, {bytes} B buffers){not_tried}",
                            ns / e,
                        ),
                        None => format!("index: the kernel runs faster with it indexed{not_tried}"),
                    }
                }
            })
            .collect()
    }

    fn tensors(
        &self,
        m: &Module,
        kernel: &Kernel,
        sweeps: &[Sweep],
        labels: &[usize],
    ) -> Result<Vec<Tensor>, Diagnostics> {
        let n = labels.iter().max().map_or(0, |l| l + 1);
        let mut out: Vec<Tensor> = (0..n)
            .map(|_| Tensor {
                accesses: Vec::new(),
                free: true,
                written: false,
                candidates: Vec::new(),
            })
            .collect();
        for (i, &l) in labels.iter().enumerate() {
            out[l].accesses.push(i);
        }
        let mut diags = Diagnostics::new();
        let mut rows_left = MAX_FOOTPRINT_RUNS;
        for t in &mut out {
            let acc = &kernel.accesses;
            t.written = t.accesses.iter().any(|&i| acc[i].write);
            let hints: Vec<Accessor> = t.accesses.iter().filter_map(|&i| acc[i].hint).collect();
            t.free = hints.is_empty();
            let staged_hint = hints.iter().any(|h| h.is_buffered());
            let index_hint = hints.contains(&Accessor::Index);
            // A write that writes some byte twice (a reduction into one
            // element, say) is deterministic when done in iteration order,
            // but a staged write flushes each tile once: the byte would be
            // copied out once per tile. Such tensors are indexed, and so are
            // those whose writes cannot be shown to write each byte once
            // within the footprint limit (shared by the kernel's writes, so
            // many large writes cannot each enumerate millions of rows).
            let repeated = t.accesses.iter().find_map(|&i| {
                if !acc[i].write {
                    return None;
                }
                // Decided without enumerating (a broadcast, nested dims), or
                // by enumerating its rows from the shared budget.
                let r = match sweeps[i].repeated_byte(0) {
                    Repeat::Unknown => {
                        let r = sweeps[i].repeated_byte(rows_left);
                        rows_left = rows_left.saturating_sub(sweeps[i].rows(kernel.elements));
                        r
                    }
                    decided => decided,
                };
                match r {
                    Repeat::Never => None,
                    Repeat::At(at) => Some(Some(at)),
                    Repeat::Unknown => Some(None),
                }
            });
            if let (Some(at), true) = (repeated, staged_hint) {
                let i = t
                    .accesses
                    .iter()
                    .copied()
                    .find(|&i| acc[i].hint.is_some_and(|h| h.is_buffered()))
                    .unwrap_or(t.accesses[0]);
                let name = acc[i].hint.map_or("tcm", |h| h.name());
                diags.push(Diagnostic::error(
                    acc[i].span,
                    match at {
                        Some(at) => format!(
                            "accessor \"{name}\" cannot stage this tensor: a write to it writes HBM byte {at:#x} more than once, and a staged write copies each tile out once, so that byte would be flushed once per tile; use \"index\""
                        ),
                        None => format!(
                            "accessor \"{name}\" cannot stage this tensor: whether a write to it writes some byte twice cannot be decided within {MAX_FOOTPRINT_RUNS} runs, and a staged write must write each byte once; use \"index\""
                        ),
                    },
                ));
                continue;
            }
            let shared = t.written && t.accesses.len() > 1;
            t.candidates = match self.policy {
                Policy::Reference => {
                    // The runtime's own choice: a stream sweeps a whole
                    // tensor from its first element; anything else, and an
                    // in-place tensor (its enforcer refuses a stream writer
                    // beside any other accessor), takes the unbuffered
                    // accessor. Hints are honoured.
                    let whole = t.accesses.iter().all(|&i| {
                        let b = &m.buffers[acc[i].buffer];
                        acc[i].hint.is_some()
                            || (sweeps[i].is_contiguous()
                                && acc[i].ap.offset == 0
                                && b.elements() == Some(kernel.elements))
                    });
                    if index_hint || repeated.is_some() || (!staged_hint && (shared || !whole)) {
                        vec![Treatment::Index]
                    } else {
                        vec![Treatment::Staged]
                    }
                }
                Policy::Pipelined if repeated.is_some() || (index_hint && !staged_hint) => {
                    vec![Treatment::Index]
                }
                Policy::Pipelined if staged_hint => vec![Treatment::Staged],
                Policy::Pipelined => vec![Treatment::Staged, Treatment::Index],
            };
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        Ok(out)
    }

    /// The accessor of each access under a per-tensor treatment.
    fn accessors(
        &self,
        kernel: &Kernel,
        sweeps: &[Sweep],
        tensors: &[Tensor],
        choice: &[Treatment],
    ) -> Vec<Accessor> {
        let mut out = vec![Accessor::Index; kernel.accesses.len()];
        for (t, &c) in tensors.iter().zip(choice) {
            for &i in &t.accesses {
                let a = &kernel.accesses[i];
                out[i] = match (a.hint, c) {
                    (Some(h), _) => h,
                    (None, Treatment::Index) => Accessor::Index,
                    (None, Treatment::Staged) => {
                        let shared = t.written && t.accesses.len() > 1;
                        if self.policy == Policy::Reference && !sweeps[i].is_contiguous() && !shared
                        {
                            Accessor::Index
                        } else if sweeps[i].is_contiguous() && !shared {
                            Accessor::Stream
                        } else {
                            Accessor::Tcm
                        }
                    }
                };
            }
        }
        out
    }

    /// Tile lengths for `groups`: the budget is split evenly between the
    /// buffers of groups that need more than one tile; a group whose whole
    /// iteration space fits one buffer gets one buffer of just that size.
    /// Tiles are balanced under `pipelined`: the same number of tiles,
    /// `ceil(E / ceil(E / T))` iterations each (rounded up to a multiple of
    /// 16 when the buffer allows), so the last tile is not a short one.
    /// With `one`, every group that needs several tiles gets one buffer
    /// (the search chooses buffer counts itself, so when two buffers a
    /// group do not fit, one each may).
    fn sizes(&self, kernel: &Kernel, groups: &[Group], one: bool) -> Sizes {
        let e = kernel.elements;
        let count = |g: &Group| if one { 1 } else { self.buffers_of(g) };
        let whole = |g: &Group| e.saturating_mul(g.bytes_per_iteration);
        let least = |g: &Group| match self.policy {
            Policy::Reference => STREAM_BUFFER_BYTES,
            Policy::Pipelined => {
                align_up(g.bytes_per_iteration.max(MIN_BUFFER_BYTES.min(whole(g))))
            }
        };
        let single = |g: &Group| self.policy == Policy::Pipelined && whole(g) <= least(g);
        let shares: u64 = groups
            .iter()
            .map(|g| if single(g) { 1 } else { count(g) })
            .sum();
        let need: u64 = groups
            .iter()
            .map(|g| least(g) * if single(g) { 1 } else { count(g) })
            .sum();
        let buffer = self.buffer_bytes(shares);
        let fit = if groups.iter().all(|g| buffer >= least(g)) && need <= self.params.budget {
            Ok(())
        } else {
            let each = groups.iter().map(least).max().unwrap_or(0);
            Err((need, shares, each))
        };
        let bufs = groups
            .iter()
            .map(|g| {
                let t = tile_iterations(g, buffer).clamp(1, e.max(1));
                Buffering {
                    method: Method::Dma,
                    vec_edges: false,
                    buffers: if single(g) { 1 } else { count(g) },
                    tile: match self.policy {
                        Policy::Reference => t,
                        Policy::Pipelined => search::balanced(e, t),
                    },
                }
            })
            .collect();
        Sizes { fit, bufs }
    }

    /// Bytes of each buffer when `buffers` buffers share the budget.
    fn buffer_bytes(&self, buffers: u64) -> u64 {
        match self.policy {
            Policy::Reference => STREAM_BUFFER_BYTES,
            Policy::Pipelined => {
                let per = self.params.budget / buffers.max(1);
                per / BUFFER_ALIGN * BUFFER_ALIGN
            }
        }
    }

    /// Buffers a group gets: the depth, plus one for an in-place group
    /// under `pipelined`, whose buffer is refilled only after its flush
    /// completed (with one more buffer its loads still run `depth` tiles
    /// ahead).
    fn buffers_of(&self, g: &Group) -> u64 {
        match self.policy {
            Policy::Reference => 1,
            Policy::Pipelined => self.fixed_buffers(g, self.depth.unwrap_or(DEFAULT_DEPTH)),
        }
    }

    /// The accessors, groups and tile sizes of a treatment per tensor, if
    /// they fit the staging budget and the copy limit; the error says which
    /// does not and by how much.
    fn fitted(&self, cx: &Cx, choice: &[Treatment]) -> Result<Fitted, (Over, Diagnostics)> {
        let Cx {
            m,
            kernel,
            sweeps,
            tensors,
            labels,
            share,
            ..
        } = *cx;
        let left = share.left;
        let acc = self.accessors(kernel, sweeps, tensors, choice);
        let gs = groups(kernel, sweeps, &acc, labels);
        let sizes = self.sizes(kernel, &gs, false);
        // When the search chooses buffer counts, one buffer a group is
        // tried too before giving up.
        let searched = self.policy == Policy::Pipelined && self.depth.is_none();
        let ok = |s: &Sizes| s.fit.is_ok() && copy_bound(kernel, sweeps, &gs, &s.bufs) <= left;
        let sizes = if !ok(&sizes) && searched {
            self.sizes(kernel, &gs, true)
        } else {
            sizes
        };
        if let Err((need, shares, each)) = sizes.fit {
            return Err((Over::Budget, vec![Diagnostic::error(
                m.ops[kernel.op].span,
                format!(
                    "the staging plan of kernel @{} does not fit: it needs {need} bytes of dataram ({} staging group{} with {shares} buffer{} of at least {each} bytes) but the staging budget is {} bytes",
                    kernel.name,
                    gs.len(),
                    if gs.len() == 1 { "" } else { "s" },
                    if shares == 1 { "" } else { "s" },
                    self.params.budget
                ),
            )
            .with_note(
                match self.policy {
                    Policy::Pipelined if searched => "index some accesses (`accessor = \"index\"`) or raise the budget (`schedule-staging{budget=...}`)",
                    Policy::Pipelined => "index some accesses (`accessor = \"index\"`), use fewer buffers (`schedule-staging{buffers=1}`) or raise the budget (`schedule-staging{budget=...}`)",
                    Policy::Reference => "the reference runtime gives every staged access one 4 KiB buffer: index some accesses (`accessor = \"index\"`) or raise the budget (`schedule-staging{budget=...}`)",
                },
                None,
            )]));
        }
        let n = copy_bound(kernel, sweeps, &gs, &sizes.bufs);
        if n > left {
            return Err((Over::Copies, vec![Diagnostic::error(
                m.ops[kernel.op].span,
                format!(
                    "the staging plan of kernel @{} could take up to {n} copies (one per row piece of each tile), over the limit of `schedule-staging{{max-copies={}}}`{}: index the accesses with the most runs (`accessor = \"index\"`){}, raise the budget or raise the limit",
                    kernel.name,
                    self.max_copies,
                    self.taken(share),
                    if left < self.max_copies {
                        " here or in the other kernels"
                    } else {
                        ""
                    }
                ),
            )]));
        }
        Ok(Fitted {
            acc,
            gs,
            bufs: sizes.bufs,
        })
    }

    /// Whether a searched buffering of `gs` fits the budget and the copy
    /// limit.
    fn fits(
        &self,
        kernel: &Kernel,
        sweeps: &[Sweep],
        gs: &[Group],
        bufs: &[Buffering],
        left: u64,
    ) -> bool {
        let bytes: u64 = gs
            .iter()
            .zip(bufs)
            .map(|(g, b)| {
                let n = b.buffers.min(kernel.elements.div_ceil(b.tile)).max(1);
                n * align_up(b.buffer_bytes(g))
            })
            .sum();
        gs.len() == bufs.len()
            && bytes <= self.params.budget
            && copy_bound(kernel, sweeps, gs, bufs) <= left
    }

    /// How much of `max-copies` the kernels before this one took and the
    /// shares kept for the kernels after it, when that is some, for
    /// messages.
    fn taken(&self, share: Share) -> String {
        let Share { left, took, kept } = share;
        let mut parts = Vec::new();
        if took > 0 {
            parts.push(format!("the kernels before this one took {took}"));
        }
        if kept > 0 {
            parts.push(format!("the kernels after it keep {kept}"));
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(", of which {}, {left} left", parts.join(" and "))
    }

    /// Builds the plan of a fitted choice.
    fn build(&self, cx: &Cx, f: &Fitted, reasons: Vec<String>) -> KernelPlan {
        // The most buffers any group has (a group of fewer tiles than its
        // buffer count gets one buffer per tile).
        let depth = f
            .bufs
            .iter()
            .map(|b| b.buffers.min(cx.kernel.elements.div_ceil(b.tile)))
            .max()
            .unwrap_or(1);
        let header = KernelPlan {
            policy: self.policy,
            depth: depth.clamp(1, MAX_DEPTH) as u32,
            accessors: f.acc.clone(),
            params: self.params,
            reasons,
            slots: Vec::new(),
            steps: Vec::new(),
        };
        emit::emit(
            header,
            cx.kernel,
            cx.sweeps,
            &f.gs,
            &f.bufs,
            self.policy == Policy::Reference,
            BUFFER_ALIGN,
        )
    }
}

/// The most copies the plan of `groups` buffered as `bufs` can take.
/// A tile takes at most one copy per row piece its accesses touch (a run
/// never spans two tiles and a buffer is at most 64 KiB), and an access of
/// `R` rows cut into `n` tiles has at most `R + n - 1` row pieces (each of
/// the `n - 1` cuts splits at most one row). The bound is computed in
/// O(accesses), and it bounds the work too: laying out and emitting the
/// tiles enumerates exactly those pieces.
fn copy_bound(kernel: &Kernel, sweeps: &[Sweep], groups: &[Group], bufs: &[Buffering]) -> u64 {
    let e = kernel.elements;
    groups
        .iter()
        .zip(bufs)
        .flat_map(|(g, b)| {
            let n = e.div_ceil(b.tile.max(1)).max(1);
            g.accesses
                .iter()
                .map(move |&a| sweeps[a].rows(e).saturating_add(n - 1))
        })
        .fold(0u64, u64::saturating_add)
}

/// What the reasons of a plan need beyond the plan: each tensor's allowed
/// treatments, each access's best staged option (ns of copies, method,
/// buffer bytes) and what limited the staging.
struct Why {
    allowed: Vec<Vec<Treatment>>,
    best: Vec<Option<(f64, &'static str, u64)>>,
    limit: String,
    /// Whether a candidate plan that fits the budget was not tried because
    /// it could take more copies than the kernel's share of `max-copies`.
    narrowed: bool,
    /// Whether the kernels before used up the module's planning work
    /// ([`ModuleWork`]), so that fewer candidates were costed or simulated.
    coarse: bool,
}

/// Per access, the cheapest staged option of its group in the search
/// (copy time in ns on any lane, method, buffer bytes).
fn best_staged(found: &search::Found, accesses: usize) -> Vec<Option<(f64, &'static str, u64)>> {
    (0..accesses)
        .map(|i| {
            found
                .groups
                .iter()
                .zip(&found.options)
                .filter(|(g, _)| g.accesses.contains(&i))
                .flat_map(|(g, os)| os.iter().map(move |o| (g, o)))
                .min_by(|x, y| x.1.cost.total().total_cmp(&y.1.cost.total()))
                .map(|(g, o)| {
                    // All copies by the core: VEC_MEMCPY's option in effect.
                    let method = if o.cost.m2s + o.cost.s2m == 0.0 && o.buf.method == Method::Dma {
                        Method::VecMemcpy
                    } else {
                        o.buf.method
                    };
                    (o.cost.total(), method_name(method), o.buf.buffer_bytes(g))
                })
        })
        .collect()
}

/// The treatment of each tensor given its accesses' accessors.
fn tensors_treatment(tensors: &[Tensor], acc: &[Accessor]) -> Vec<Treatment> {
    tensors
        .iter()
        .map(|t| {
            if t.accesses.iter().any(|&i| acc[i].is_buffered()) {
                Treatment::Staged
            } else {
                Treatment::Index
            }
        })
        .collect()
}

/// Kernels planned in one run of the pass, by shape.
type Memo = std::collections::HashMap<ShapeKey, MemoEntry>;

/// A kernel's plan, remembered for the kernels of its shape.
struct MemoEntry {
    /// A treatment per tensor.
    treat: Vec<Treatment>,
    /// A buffering per group.
    bufs: Vec<Buffering>,
    /// The best staged option per access.
    best: Vec<Option<(f64, &'static str, u64)>>,
    /// The largest copy bound of the candidates the budget allowed (a
    /// kernel with a smaller share ruled out those above it).
    widest: u64,
    /// The kernel's share of the copy limit when that limit shaped the
    /// choice (indexed a tensor or ruled out a candidate), else `None`.
    shaped_at: Option<u64>,
}

/// Most kernel shapes remembered in one run (project-defined).
pub(crate) const MEMO_ENTRIES: usize = 4096;

/// What a kernel's planning depends on, but for the copies the module's
/// limit leaves it (a hit is checked against those): its iterations, its
/// cost per element, and per access its direction, hint, tensor and walk
/// with addresses relative to its tensor's lowest byte (so kernels over
/// different tensors of the same shapes plan alike).
type ShapeKey = (u64, u64, Vec<(bool, Option<Accessor>, usize, Sweep)>);

fn shape_key(cx: Cx) -> ShapeKey {
    let Cx {
        m,
        kernel,
        sweeps,
        labels,
        ..
    } = cx;
    let n = labels.iter().max().map_or(0, |l| l + 1);
    let mut origin = vec![u128::MAX; n];
    for (a, &l) in kernel.accesses.iter().zip(labels) {
        origin[l] = origin[l].min(buffer_range(m, a.buffer).start);
    }
    let accesses = kernel
        .accesses
        .iter()
        .zip(sweeps)
        .zip(labels)
        .map(|((a, s), &l)| (a.write, a.hint, l, s.rebased(origin[l])))
        .collect();
    (kernel.elements, kernel.cycles_per_element, accesses)
}

/// What one kernel's planning works on.
#[derive(Clone, Copy)]
struct Cx<'a> {
    m: &'a Module,
    kernel: &'a Kernel,
    sweeps: &'a [Sweep],
    tensors: &'a [Tensor],
    labels: &'a [usize],
    /// The copies this kernel's plan may take.
    share: Share,
    /// What the module's kernels may still lay out: in their searches and
    /// in their simulations.
    work: &'a ModuleWork,
}

/// What one kernel's planning may take: its share of the copy limit, and
/// what the module's bounds on work leave.
#[derive(Clone, Copy)]
struct Allowance<'a> {
    share: Share,
    work: &'a ModuleWork,
}

/// Work the kernels of one module share, in program order (a small module
/// of many large kernels must not take seconds per kernel): row pieces
/// their searches may lay out ([`search::MODULE_WALK_PIECES`]) and copies
/// their candidate plans may lay out and simulate
/// ([`MODULE_SIMULATED_WORK`]).
pub(crate) struct ModuleWork {
    pub(crate) walk: std::cell::Cell<u64>,
    pub(crate) sim: std::cell::Cell<u64>,
}

impl ModuleWork {
    fn new() -> Self {
        ModuleWork {
            walk: std::cell::Cell::new(search::MODULE_WALK_PIECES),
            sim: std::cell::Cell::new(MODULE_SIMULATED_WORK),
        }
    }
}

/// Each tensor's first candidate, and the free tensors it stages (those
/// `auto` may index instead), in body order.
struct FirstChoice {
    choice: Vec<Treatment>,
    free: Vec<usize>,
}

impl FirstChoice {
    fn of(tensors: &[Tensor]) -> FirstChoice {
        let choice: Vec<Treatment> = tensors.iter().map(|t| t.candidates[0]).collect();
        let free = (0..tensors.len())
            .filter(|&i| tensors[i].free && choice[i] != Treatment::Index)
            .collect();
        FirstChoice { choice, free }
    }

    /// The choice with the free staged tensors past the first `keep`
    /// indexed.
    fn keeping(&self, keep: usize) -> Vec<Treatment> {
        let mut c = self.choice.clone();
        for &i in &self.free[keep..] {
            c[i] = Treatment::Index;
        }
        c
    }

    /// The most free staged tensors `fits` takes, by bisection (fewer
    /// staged tensors never need more room or copies), given that keeping
    /// all does not fit (0 when keeping none does not fit either): `fits`
    /// is asked only of the choices in between, and the last one it
    /// refused (if any) keeps one more than the answer.
    fn longest(&self, mut fits: impl FnMut(&[Treatment]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.free.len());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(&self.keeping(mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// What a choice that does not fit is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Over {
    /// The staging budget (dataram bytes).
    Budget,
    /// The kernel's share of `max-copies`.
    Copies,
}

/// A kernel's share of the module's `max-copies` (`took + kept + left`
/// is the limit).
#[derive(Clone, Copy, Debug)]
struct Share {
    /// The copies its plan may take: what the kernels before it left, less
    /// the shares kept for the kernels after it (but at least its own
    /// forced need, while what is left allows).
    left: u64,
    /// What the kernels before it took.
    took: u64,
    /// What is kept for the kernels after it.
    kept: u64,
}

/// The copies a kernel asks of `max-copies` ([`ScheduleStaging::demand`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Demand {
    /// What its forced stagings need.
    need: u64,
    /// What staging the tensors it may stage takes, as many as fit the
    /// budget and the whole limit (at least `need`).
    want: u64,
}

/// The share of `max` kept for each kernel while the kernels before it
/// are planned: `max(need, min(want, level))`, at the highest level whose
/// shares add up to at most `max` (every `want` when they fit; every
/// `need` when even those do not). So each kernel gets what its even
/// split takes, or an equal cut of what is left when those do not all
/// fit, and a forced staging what it needs first; a kernel planned takes
/// what it uses, and what it leaves goes on to the later ones.
fn kept_shares(demands: &[Demand], max: u64) -> Vec<u64> {
    let total = |level: u64| -> u128 {
        demands
            .iter()
            .map(|d| u128::from(d.need.max(d.want.min(level))))
            .sum()
    };
    let top = demands.iter().map(|d| d.want).max().unwrap_or(0);
    let level = if total(top) <= u128::from(max) {
        top
    } else {
        // The highest level in [0, top) whose total fits (0 if none does).
        let (mut lo, mut hi) = (0u64, top);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if total(mid) <= u128::from(max) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    };
    demands
        .iter()
        .map(|d| d.need.max(d.want.min(level)))
        .collect()
}

/// A treatment per tensor that fits: each access's accessor, the staging
/// groups and their buffering.
struct Fitted {
    acc: Vec<Accessor>,
    gs: Vec<Group>,
    bufs: Vec<Buffering>,
}

/// Buffer sizing for a kernel's groups.
struct Sizes {
    /// `Err((need, buffers, least bytes per buffer))` when it does not fit.
    fit: Result<(), (u64, u64, u64)>,
    /// Each group's buffering.
    bufs: Vec<Buffering>,
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(BUFFER_ALIGN) * BUFFER_ALIGN
}

/// The default of `schedule-staging{max-copies=N}`, the most copies the
/// plans of one module's kernels may take together (project-defined):
/// 512 Ki copies is a 2 GiB stream in 4 KiB tiles, and a plan that size is
/// planned, proved and emitted in seconds and well under 1 GiB (every
/// emit included). Past it `auto` indexes and a forced staging is an
/// error, so planning time and memory stay proportional to a bounded plan
/// however small the input that asks for more.
pub const DEFAULT_MAX_COPIES: u64 = 1 << 19;

/// Whether two of a tensor's accesses, given by direction (`true`: a
/// write) and accessor, cannot be open together. That depends on the two
/// classes alone, whichever comes first: the accesses are counted by
/// class and each pair of classes is checked once (a class against itself
/// only if it has two accesses), in time linear in the accesses.
fn clashes(accesses: impl Iterator<Item = (bool, Accessor)>) -> bool {
    let mut classes: Vec<((bool, Accessor), usize)> = Vec::new();
    for c in accesses {
        match classes.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => classes.push((c, 1)),
        }
    }
    classes.iter().enumerate().any(|(n, &((aw, x), count))| {
        classes[n..].iter().any(|&((bw, y), _)| {
            let itself = (aw, x) == (bw, y);
            (!itself || count > 1) && incompatible(aw, x, bw, y).is_some()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counting accesses by class finds a clash exactly when some earlier
    /// access and some later one are incompatible, pair by pair.
    #[test]
    fn clashes_are_the_pairwise_ones() {
        use proptest::test_runner::{Config, TestRunner};
        let class = (any::<bool>(), 0usize..3);
        let mut runner = TestRunner::new(Config {
            cases: 512,
            ..Config::default()
        });
        runner
            .run(&proptest::collection::vec(class, 0..8), |accesses| {
                let a: Vec<(bool, Accessor)> = accesses
                    .iter()
                    .map(|&(w, k)| (w, Accessor::ALL[k]))
                    .collect();
                let pairwise = (0..a.len()).any(|j| {
                    (0..j).any(|i| incompatible(a[i].0, a[i].1, a[j].0, a[j].1).is_some())
                });
                prop_assert_eq!(clashes(a.iter().copied()), pairwise, "{:?}", a);
                Ok(())
            })
            .unwrap();
    }
    use proptest::prelude::*;

    proptest! {
        /// The kept shares, against a scan of every level from the
        /// contract: each share is the kernel's `max(need, min(want, L))`
        /// at the highest level `L` (up to the largest `want`) whose shares
        /// add up to at most `max`, or its need when no level fits.
        #[test]
        fn kept_shares_take_the_highest_level_that_fits(
            ds in proptest::collection::vec((0u64..40, 0u64..40), 0..6),
            max in 0u64..150,
        ) {
            let demands: Vec<Demand> = ds
                .iter()
                .map(|&(a, b)| Demand { need: a.min(b), want: a.max(b) })
                .collect();
            let share = |d: &Demand, level: u64| d.need.max(d.want.min(level));
            let top = demands.iter().map(|d| d.want).max().unwrap_or(0);
            let level = (0..=top)
                .rev()
                .find(|&l| demands.iter().map(|d| share(d, l)).sum::<u64>() <= max)
                .unwrap_or(0);
            let expected: Vec<u64> = demands.iter().map(|d| share(d, level)).collect();
            let got = kept_shares(&demands, max);
            prop_assert_eq!(&got, &expected);
            let needs: u64 = demands.iter().map(|d| d.need).sum();
            if needs <= max {
                prop_assert!(got.iter().sum::<u64>() <= max);
            }
            for (g, d) in got.iter().zip(&demands) {
                prop_assert!(d.need <= *g && *g <= d.want);
            }
        }
    }

    #[test]
    fn kept_shares_cut_to_a_level_and_keep_forced_needs() {
        let d = |need, want| Demand { need, want };
        // Everything fits: every kernel keeps its even split.
        assert_eq!(kept_shares(&[d(0, 4), d(0, 4)], 8), vec![4, 4]);
        // An equal cut: 3 of 8 each, then the small one's 1.
        assert_eq!(
            kept_shares(&[d(0, 10), d(0, 10), d(0, 1)], 7),
            vec![3, 3, 1]
        );
        // A forced need is kept whole before the others are cut.
        assert_eq!(kept_shares(&[d(0, 10), d(6, 6)], 8), vec![2, 6]);
        // Needs that do not fit together are kept as they are.
        assert_eq!(kept_shares(&[d(4, 4), d(4, 4)], 6), vec![4, 4]);
        // Sums past u64 do not wrap.
        assert_eq!(
            kept_shares(&[d(0, u64::MAX), d(0, u64::MAX)], 10),
            vec![5, 5]
        );
    }

    /// Past the module's bounds on work a kernel is costed and simulated
    /// at its even split only: the plan is still one `check-coherency`
    /// proves, staged at the even split or indexed, and a kernel whose even
    /// split is the fastest plan still gets it.
    #[test]
    fn past_the_module_work_a_kernel_plans_at_its_even_split() {
        use apir_ir::{Pass, PassContext};
        let text = "module attributes {arch = \"v2\"} {
  %in = mem.hbm {addr = 0x40000000} : tensor<65536xf32>
  %out = mem.hbm {addr = 0x40100000} : tensor<65536xf32>
  %s = mem.hbm {addr = 0x40200000} : tensor<262144xf32>
  gpsimd.kernel @stream {core = 0, cycles_per_element = 2} {
    gpsimd.read %in[[1, 65536]]
    gpsimd.write %out[[1, 65536]]
  }
  gpsimd.kernel @strided {core = 1, cycles_per_element = 1} {
    gpsimd.read %s[[4, 4096]] + 1
    gpsimd.write %s[[4, 4096]] + 1
  }
}
";
        let (mut m, _) =
            apir_ir::parse_str("k.apir", text, apir_ir::ParseOptions::default()).unwrap();
        let pass = ScheduleStaging::default();
        let spent = ModuleWork {
            walk: std::cell::Cell::new(0),
            sim: std::cell::Cell::new(0),
        };
        for k in Kernel::all(&m) {
            let sweeps = Sweep::of_kernel(&m, &k);
            let labels = tensors(&m, &k);
            let allowance = Allowance {
                share: pass.whole(),
                work: &spent,
            };
            let coarse = pass
                .plan_inner(&m, &k, &sweeps, &labels, None, allowance)
                .unwrap();
            let full = pass.plan(&m, &k).unwrap();
            // Its reasons say why fewer candidates were weighed.
            assert!(
                coarse
                    .reasons
                    .iter()
                    .all(|r| r.ends_with("used up the module's planning work")),
                "{:?}",
                coarse.reasons
            );
            assert!(!full.reasons.iter().any(|r| r.contains("planning work")));
            if k.name == "stream" {
                // The even split streams both tensors: the full search
                // finds nothing faster.
                assert_eq!(coarse.accessors, full.accessors, "{}", k.name);
                assert_eq!(coarse.copies().count(), full.copies().count());
            }
            m.plans.insert(k.op, coarse);
        }
        let mut cx = PassContext::new();
        crate::CheckCoherency
            .run(&mut m, &mut cx)
            .expect("plans made past the module's work are proved");
    }

    #[test]
    fn small_copies_of_an_sdma_group_go_by_vec_memcpy() {
        let p = SimParams::default();
        // 128 bytes in a 4 KiB buffer: 116 ns by VEC_MEMCPY, 1304.7 ns by SDMA.
        assert_eq!(
            copy_method(&p, Method::Dma, 128, 4096, false, false),
            Method::VecMemcpy
        );
        // Exactly 1/8 of the buffer still counts as small; one byte more does not.
        assert_eq!(
            copy_method(&p, Method::Dma, 512, 4096, false, false),
            Method::VecMemcpy
        );
        assert_eq!(
            copy_method(&p, Method::Dma, 513, 4096, false, false),
            Method::Dma
        );
        // A whole-buffer copy stays on the ring, unless it is the
        // pipeline's fill or drain (VEC_MEMCPY: 612 ns against 1450.6 ns).
        assert_eq!(
            copy_method(&p, Method::Dma, 4096, 4096, false, false),
            Method::Dma
        );
        assert_eq!(
            copy_method(&p, Method::Dma, 4096, 4096, false, true),
            Method::VecMemcpy
        );
        // 16 KiB is faster by SDMA (1902.4 ns against 2148 ns), edge or not.
        assert_eq!(
            copy_method(&p, Method::Dma, 16384, 16384, false, true),
            Method::Dma
        );
        // Synchronous copies (reference) keep the runtime's default method.
        assert_eq!(
            copy_method(&p, Method::Dma, 128, 4096, true, false),
            Method::Dma
        );
        // When SDMA is cheaper even for a small copy, it stays SDMA.
        let cheap_dma = SimParams {
            dma_fixed_ns: 10,
            ..SimParams::default()
        };
        assert_eq!(
            copy_method(&cheap_dma, Method::Dma, 128, 4096, false, false),
            Method::Dma
        );
        // Other group methods are kept.
        assert_eq!(
            copy_method(&p, Method::VecMemcpy, 4096, 4096, false, false),
            Method::VecMemcpy
        );
    }
}
