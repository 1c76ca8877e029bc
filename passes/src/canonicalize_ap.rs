//! `canonicalize-ap`: makes elementwise ops fit their descriptors without
//! changing what they touch (beyond the reference compiler, docs/passes.md).
//!
//! The reference compiler rejects an operand whose surviving free dims
//! exceed its descriptor's slots, or whose count exceeds 65535. This pass
//! acts on the ops the op-encoder table marks elementwise, and only when
//! such an operand would otherwise fail (the same test `select-descriptor`
//! applies, [`space::over_capacity`] on the role's kind for the module's
//! arch); every other op is left exactly as written, so what the reference
//! accepts stays byte-identical. With `canonicalize-ap{always=true}` it
//! minimises the dims of every elementwise op instead (an op that fits is
//! rewritten only into one op, and only if no operand ends with more
//! surviving dims than it had).
//!
//! For an op it acts on:
//! 1. The operands' free dims (pair 0, the partition axis, is never
//!    touched) are brought to one joint iteration space
//!    ([`space::joint_space`]); operands that share none leave the op as is.
//! 2. Equality saturation with `egg` ([`rules`]) finds the cheapest
//!    equivalent space: unit dims dropped, adjacent dims merged where every
//!    operand allows it, counts over 65535 split into two factors.
//! 3. If that space fits every operand's descriptor ([`space::fits`], which
//!    is `select-descriptor`'s own check), the operands are rewritten.
//!    Otherwise the op is split along its outermost free dim into several
//!    ops ([`split`]), each keeping the original's location and attributes,
//!    with offsets moved so that the ops, in program order, visit the same
//!    addresses in the same sequence in every partition. A split that would
//!    need more than [`split::MAX_SPLIT_OPS`] ops is refused.
//! 4. If nothing fits, the op is left unchanged and `select-descriptor`
//!    reports the reference error.
//!
//! Results are memoised by shape (the joint space's counts and steps and the
//! operands' descriptor kinds; offsets excluded) in maps owned by the pass
//! value, so a large kernel pays once per distinct pattern. The pass runs
//! before `fold-partition`: an op that already carries lowered forms is left
//! alone (re-running `lower-to-wire` on lowered IR changes nothing).
//!
//! Statistics: `ops-examined`, `ops-rewritten`, `dims-merged`,
//! `counts-split`, `ops-split`, `cache-hits`.

pub mod rules;
pub mod space;
pub mod split;

use apir_ir::lowering::{free_dims, role_choice};
use apir_ir::{
    Changed, Diagnostic, Diagnostics, Dim, Dims, Item, Module, Op, OpData, OpKind, OptionInfo,
    Pass, PassContext, PassInfo,
};
use rules::{canonicalize, SpaceRewrite};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use space::{
    boundaries, fits, joint_space, operand_dims, over_capacity, JointDim, JointSpace, Target,
};
use split::{plan, Plan, SplitBudget, DEFAULT_SPLIT_BUDGET, SPLIT_OPS_PER_OP};
use std::sync::{Arc, Mutex};

/// The targets of an op's operands, in operand order.
type Targets = SmallVec<[Target; 3]>;

/// What the memo is keyed by: everything the outcome depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ShapeKey {
    space: JointSpace,
    targets: Targets,
    /// Whether some operand is over capacity as written (the op must change
    /// or be left for `select-descriptor` to reject).
    needed: bool,
}

/// What to do with every op of one shape.
#[derive(Clone, Debug)]
enum Outcome {
    /// Leave the op as written.
    Keep,
    /// Rewrite the operands over this space.
    Rewrite(JointSpace),
    /// Replace the op by the ops of this plan.
    Split(Plan),
}

#[derive(Clone, Debug)]
struct Entry {
    outcome: Outcome,
    /// Dim boundaries removed and added by canonicalization.
    merged: u64,
    split: u64,
    /// The limit that stopped an e-graph run this outcome rests on, if
    /// one did: the outcome is then the best found, not proven minimal.
    limit: Option<String>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    examined: u64,
    rewritten: u64,
    merged: u64,
    counts_split: u64,
    ops_split: u64,
    cache_hits: u64,
}

/// The cheapest space one e-graph run found, and the limit that stopped
/// the run if one did.
type Searched = (JointSpace, Option<String>);

/// The memo a pass value shares with its forks ([`Pass::fork`]).
#[derive(Default)]
struct Memo {
    /// Outcome per shape: inserted once per distinct shape, by whichever
    /// value computed it first.
    outcomes: Mutex<FxHashMap<ShapeKey, Arc<Entry>>>,
    /// Canonical space per (space, targets), for the e-graph runs, with
    /// the limit that stopped the run if one did.
    canonical: Mutex<FxHashMap<(JointSpace, Targets), Searched>>,
}

/// Locks `m`, ignoring poisoning: the maps hold only finished entries.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The canonicalize-ap pass. Build one per pipeline run: its memo lives as
/// long as the value and its forks.
///
/// `cache-hits` counts the ops whose shape some value sharing the memo had
/// already inserted. Each distinct shape is inserted exactly once, so over
/// a value and its forks the hits add up to the examined ops minus the
/// distinct shapes, however the module was divided between them.
pub struct CanonicalizeAp {
    always: bool,
    /// The bound on the ops splitting adds, carried in program order over
    /// everything this value runs on (a fork's starts from nothing, for
    /// [`Pass::join`]).
    budget: SplitBudget,
    rules: Arc<Vec<SpaceRewrite>>,
    /// This value's copy of the entries it has used (no locking on a hit).
    local: FxHashMap<ShapeKey, Arc<Entry>>,
    shared: Arc<Memo>,
}

impl std::fmt::Debug for CanonicalizeAp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CanonicalizeAp")
            .field("always", &self.always)
            .field("budget", &self.budget)
            .field("memoised_shapes", &lock(&self.shared.outcomes).len())
            .finish()
    }
}

impl Default for CanonicalizeAp {
    /// The pass with its options at their declared defaults.
    fn default() -> Self {
        CanonicalizeAp::new(ALWAYS.default == "true").with_split_budget(DEFAULT_SPLIT_BUDGET)
    }
}

impl CanonicalizeAp {
    /// The pass; `always` minimises the dims of every elementwise op, not
    /// only of those that would otherwise fail.
    pub fn new(always: bool) -> Self {
        CanonicalizeAp {
            always,
            budget: SplitBudget::new(DEFAULT_SPLIT_BUDGET),
            rules: Arc::new(rules::rules()),
            local: FxHashMap::default(),
            shared: Arc::default(),
        }
    }

    /// The pass with a split budget of `budget` ops
    /// ([`split::SplitBudget`]; [`split::DEFAULT_SPLIT_BUDGET`] unless told).
    pub fn with_split_budget(mut self, budget: u64) -> Self {
        self.budget = SplitBudget::new(budget);
        self
    }

    /// The operand targets of `op` if it is an elementwise op this pass
    /// looks at (no lowered forms yet, every role known on the arch).
    fn targets(m: &Module, op: Op) -> Option<Targets> {
        let data = &m.ops[op];
        let OpKind::Isa(isa) = data.kind else {
            return None;
        };
        if !isa.info().elementwise || data.operands.iter().any(|o| o.lowered().is_some()) {
            return None;
        }
        (0..data.operands.len())
            .map(|i| role_choice(m, op, i).ok().map(|c| Target::of(&c)))
            .collect()
    }

    /// The outcome for one shape, memoised.
    fn outcome(&mut self, key: ShapeKey, stats: &mut Stats) -> Arc<Entry> {
        if let Some(e) = self.local.get(&key) {
            stats.cache_hits += 1;
            return e.clone();
        }
        let known = lock(&self.shared.outcomes).get(&key).cloned();
        let entry = match known {
            Some(e) => {
                stats.cache_hits += 1;
                e
            }
            None => {
                let computed = Arc::new(self.compute(&key));
                // Another fork may have inserted the shape meanwhile: the
                // first insertion wins and only it counts as a miss.
                let mut outcomes = lock(&self.shared.outcomes);
                match outcomes.entry(key.clone()) {
                    std::collections::hash_map::Entry::Occupied(e) => {
                        stats.cache_hits += 1;
                        e.get().clone()
                    }
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(computed).clone(),
                }
            }
        };
        self.local.insert(key, entry.clone());
        entry
    }

    /// Runs the e-graph and the split planner for one shape.
    fn compute(&self, key: &ShapeKey) -> Entry {
        let targets = &key.targets;
        let rules = &self.rules;
        let shared = &self.shared;
        let mut limit: Option<String> = None;
        let mut canon = |s: &[JointDim]| -> JointSpace {
            let k = (s.to_vec(), targets.clone());
            let known = lock(&shared.canonical).get(&k).cloned();
            let (space, stopped) = known.unwrap_or_else(|| {
                let c = canonicalize(s, targets, rules);
                let found = (c.space.clone(), c.limit());
                lock(&shared.canonical).entry(k).or_insert(found).clone()
            });
            if limit.is_none() {
                limit = stopped;
            }
            space
        };
        let best = canon(&key.space);
        let outcome = if fits(&best, targets) {
            Outcome::Rewrite(best.clone())
        } else if key.needed {
            plan(&key.space, targets, &mut canon).map_or(Outcome::Keep, Outcome::Split)
        } else {
            Outcome::Keep
        };
        let (before, after) = (boundaries(&key.space), boundaries(&best));
        let merged = before.iter().filter(|b| !after.contains(b)).count() as u64;
        let split = after.iter().filter(|b| !before.contains(b)).count() as u64;
        Entry {
            outcome,
            merged,
            split,
            limit,
        }
    }
}

/// Operand `k`'s new dims over `space`: its partition dim (on-chip
/// operands) as written, then its steps over the joint dims.
fn new_dims(m: &Module, data: &OpData, k: usize, space: &[JointDim]) -> Dims {
    let o = &data.operands[k];
    let mut dims = Dims::new();
    if m.buffers[o.buffer].mem.is_on_chip() {
        dims.extend(o.ap.dims.first().copied());
    }
    dims.extend(operand_dims(space, k));
    dims
}

/// The op data of one piece of a split: `data` with every operand over
/// `space` and its offset moved by `delta[k]`. `None` if an offset
/// overflows.
fn piece(m: &Module, data: &OpData, delta: &[i128], space: &[JointDim]) -> Option<OpData> {
    let mut out = data.clone();
    for (k, o) in out.operands.iter_mut().enumerate() {
        o.ap.offset = i64::try_from(i128::from(o.ap.offset) + delta[k]).ok()?;
        o.ap.dims = new_dims(m, data, k, space);
    }
    Some(out)
}

/// `canonicalize-ap{split-budget=...}`.
const SPLIT_BUDGET: OptionInfo = OptionInfo {
    name: "split-budget",
    help: "ops that splitting may add to the module beyond 4 per elementwise op (a split past it is refused and the op left for select-descriptor's error)",
    default: "65536",
};

/// `canonicalize-ap{always=...}`.
const ALWAYS: OptionInfo = OptionInfo {
    name: "always",
    help: "minimise the dims of every elementwise op, not only of ops that would otherwise fail (true or false)",
    default: "false",
};

impl CanonicalizeAp {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "canonicalize-ap",
        summary: "Make elementwise ops fit their descriptors: drop unit dims, merge dims, split long counts, split ops",
        options: &[ALWAYS, SPLIT_BUDGET],
        create: |opts| {
            Ok(Box::new(
                CanonicalizeAp::new(opts.value(&ALWAYS)?)
                    .with_split_budget(opts.value(&SPLIT_BUDGET)?),
            ))
        },
    };
}

impl Pass for CanonicalizeAp {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn op_local(&self) -> bool {
        true
    }

    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(CanonicalizeAp {
            always: self.always,
            budget: SplitBudget::new(self.budget.budget),
            rules: self.rules.clone(),
            local: FxHashMap::default(),
            shared: self.shared.clone(),
        }))
    }

    fn part_state(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.budget))
    }

    fn join(&mut self, part: Option<Box<dyn std::any::Any + Send>>) -> bool {
        part.and_then(|p| p.downcast::<SplitBudget>().ok())
            .is_some_and(|p| self.budget.join(&p))
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut stats = Stats::default();
        // Each split op and its pieces, in program order.
        let mut splits: Vec<(Op, Vec<OpData>)> = Vec::new();
        for index in 0..m.body.len() {
            let Item::Op(op) = m.body[index] else {
                continue;
            };
            let Some(targets) = Self::targets(m, op) else {
                continue;
            };
            stats.examined += 1;
            self.budget.examine();
            let data = &m.ops[op];
            let needed = data
                .operands
                .iter()
                .zip(&targets)
                .any(|(o, &t)| over_capacity(free_dims(m, o), t));
            if !needed && !self.always {
                continue;
            }
            let free: SmallVec<[&[Dim]; 3]> =
                data.operands.iter().map(|o| free_dims(m, o)).collect();
            let Some(space) = joint_space(&free) else {
                continue;
            };
            drop(free);
            let key = ShapeKey {
                space,
                targets,
                needed,
            };
            let entry = self.outcome(key, &mut stats);
            let data = &m.ops[op];
            if let Some(limit) = &entry.limit {
                cx.warn(
                    Diagnostic::warning(
                        data.span,
                        format!(
                            "`{}`: the search for its smallest form stopped at the {limit}; \
                         the form used is the best found, not proven minimal",
                            data.kind.name()
                        ),
                    )
                    .about(op, data.kind.name(), None),
                );
            }
            match &entry.outcome {
                Outcome::Keep => {}
                Outcome::Rewrite(space) => {
                    let dims: SmallVec<[Dims; 3]> = (0..data.operands.len())
                        .map(|k| new_dims(m, data, k, space))
                        .collect();
                    if dims
                        .iter()
                        .zip(&data.operands)
                        .all(|(d, o)| *d == o.ap.dims)
                    {
                        continue;
                    }
                    // An op that fits (always=true) is only rewritten if no
                    // operand ends with more surviving dims than it had: the
                    // common refinement may split one operand's dim to match
                    // another's, which minimises nothing.
                    if !needed
                        && dims.iter().zip(&data.operands).any(|(d, o)| {
                            d.iter().filter(|d| d.num != 1).count()
                                > o.ap.dims.iter().filter(|d| d.num != 1).count()
                        })
                    {
                        continue;
                    }
                    for (o, d) in m.ops[op].operands.iter_mut().zip(dims) {
                        o.ap.dims = d;
                    }
                    stats.rewritten += 1;
                    stats.merged += entry.merged;
                    stats.counts_split += entry.split;
                }
                Outcome::Split(plan) => {
                    // Judged before the pieces are built (a refused split
                    // costs nothing), counted once they are (a split whose
                    // offsets overflow is not one).
                    let ops = plan.ops().unwrap_or(u64::MAX);
                    let added = self.budget.added;
                    if !self.budget.fits(ops) {
                        self.budget.refuse();
                        let b = &self.budget;
                        cx.warn(Diagnostic::warning(
                            data.span,
                            format!(
                                "`{}`: not split into {ops} ops: the module would then hold {} ops \
                                 added by splitting, over the split budget ({}) plus \
                                 {SPLIT_OPS_PER_OP} for each of the {} elementwise ops so far ({}); \
                                 raise the budget with `canonicalize-ap{{split-budget=N}}`",
                                data.kind.name(),
                                u128::from(added) + u128::from(ops - 1),
                                b.budget,
                                b.examined,
                                b.bound(),
                            ),
                        )
                        .about(op, data.kind.name(), None));
                        continue;
                    }
                    let pieces: Option<Vec<OpData>> = plan
                        .pieces(data.operands.len())
                        .iter()
                        .map(|(delta, space)| piece(m, data, delta, space))
                        .collect();
                    let Some(pieces) = pieces.filter(|p| !p.is_empty()) else {
                        continue;
                    };
                    let taken = self.budget.take(ops);
                    debug_assert!(taken, "the split fitted a moment ago");
                    splits.push((op, pieces));
                    stats.ops_split += 1;
                    stats.merged += entry.merged;
                    stats.counts_split += entry.split;
                }
            }
        }
        // The pieces take each split op's place (the first piece its id),
        // in one pass over the body.
        m.replace_ops(None, splits);
        if stats.examined > 0 {
            // Always all six, in this order, so that a driver running the
            // pass op by op reports the same statistics.
            cx.count(
                "ops-examined",
                "Number of elementwise ops examined",
                stats.examined,
            );
            cx.count(
                "ops-rewritten",
                "Number of ops whose access patterns were rewritten in place",
                stats.rewritten,
            );
            cx.count(
                "dims-merged",
                "Number of adjacent dims merged",
                stats.merged,
            );
            cx.count(
                "counts-split",
                "Number of counts over 65535 split into two factors",
                stats.counts_split,
            );
            cx.count(
                "ops-split",
                "Number of ops split into several ops",
                stats.ops_split,
            );
            cx.count(
                "cache-hits",
                "Number of ops whose shape was already memoised",
                stats.cache_hits,
            );
        }
        let changed = stats.rewritten + stats.ops_split > 0;
        Ok(if changed { Changed::Yes } else { Changed::No })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_budget_option_says_what_the_code_does() {
        assert_eq!(
            SPLIT_BUDGET.default.parse::<u64>(),
            Ok(DEFAULT_SPLIT_BUDGET)
        );
        assert!(SPLIT_BUDGET
            .help
            .contains(&format!("beyond {SPLIT_OPS_PER_OP} per elementwise op")));
        assert_eq!(
            CanonicalizeAp::default().budget.budget,
            DEFAULT_SPLIT_BUDGET
        );
    }
}
