//! The equality-saturation core of `canonicalize-ap`, built on `egg`.
//!
//! **Language** ([`SpaceLang`]): a joint iteration space is a `space` node
//! whose children are its dims, outermost first; a `dim` node's children are
//! its count followed by one step per operand; counts and steps are `Int`
//! leaves. So `(space (dim 4 8 16) (dim 8 1 2))` is the space `4 x 8` of two
//! operands with steps `8, 1` and `16, 2`. Dims and integers are
//! hash-consed leaves shared by every space that uses them; only `space`
//! nodes are ever unioned, so the root e-class collects whole equivalent
//! spaces and the cost of each can be computed exactly (a cost over slots
//! is not additive over a list of dims, so a cons-list language would make
//! egg's bottom-up extraction greedy rather than exact).
//!
//! **Analysis** ([`SpaceAnalysis`]): the value of every `Int` and `dim`
//! class, so rules read counts and steps without walking nodes.
//!
//! **Rules**, one function per rule set, each checked by a unit test:
//! - [`drop_unit_rules`]: drop every dim of count 1;
//! - [`merge_rules`]: merge adjacent dims `(n1, s1), (n2, s2)` into
//!   `(n1 * n2, s2)` when `s1[k] == s2[k] * n2` for every operand `k`: all
//!   merges that keep counts within 65535 at once (greedily from either
//!   end), and each merge that makes a longer count on its own;
//! - [`split_count_rules`]: split a count over 65535 into two factors,
//!   `(a * b, s)` to `(a, s * b), (b, s)`, using the largest divisor `D <=
//!   65535` of the count both as the inner and as the outer factor (so a
//!   following merge can absorb either side); a prime count cannot be split.
//!
//! Merges may create counts over 65535 and splits add dims; which is better
//! depends on the whole space, and the e-graph keeps every alternative.
//!
//! **Cost** ([`FitCost`], [`Cost`]): lexicographic: fields over capacity
//! first (slots beyond each operand's descriptor, counts outside 1..=65535,
//! steps outside i16, the validator rules a user controls; see
//! [`super::space::violations`]), then dims, then ops, then the space itself
//! so that ties are broken the same way on every run.
//!
//! **Runner**: always with node and iteration limits ([`NODE_LIMIT`],
//! [`ITER_LIMIT`]) and the simple scheduler, and no wall-clock limit: the
//! outcome of a run (and so what is printed and memoised) depends on the
//! space and the rules only, never on machine load. Saturation comes long
//! before the limits on every space with up to 8 dims. A run stopped by a
//! limit gives the same result every time, but that result is only the best
//! found: [`Canonical::limit`] says which limit stopped it, and the pass
//! warns on every op whose outcome came from such a run rather than passing
//! it off as canonical. The node limit is checked inside each rule too, so
//! one rule cannot run far past it.

#![allow(missing_docs)] // `define_language!` cannot carry variant docs.

use super::space::{violations, JointDim, JointSpace, Steps, Target, MAX_NUM};
use egg::{
    define_language, Analysis, Applier, CostFunction, DidMerge, EGraph, Extractor, Id, PatternAst,
    Rewrite, Runner, SearchMatches, Searcher, SimpleScheduler, StopReason, Subst, Symbol, Var,
};
use smallvec::SmallVec;
use std::time::Duration;

/// Node limit of every run.
pub const NODE_LIMIT: usize = 10_000;
/// The most dims a space given to the e-graph may have (project-defined):
/// far more than any descriptor has slots, and few enough that a rule,
/// which builds spaces of that many dims for each of its dims, stays
/// cheap. A longer space is first reduced by the rules that need no
/// search (drop every unit dim, merge every run that keeps counts within
/// 65535, both in time linear in its dims); if that leaves more, it is
/// the outcome, flagged as not searched ([`Canonical::limit`]).
pub const MAX_SEARCH_DIMS: usize = 64;
/// Iteration limit of every run.
pub const ITER_LIMIT: usize = 24;
/// No wall-clock limit: egg's default (5 s) is lifted, so that only the
/// deterministic node and iteration limits stop a run.
const NO_TIME_LIMIT: Duration = Duration::MAX;

define_language! {
    /// Joint iteration spaces: `(space DIM..)`, `(dim NUM STEP..)`, and
    /// integer leaves.
    pub enum SpaceLang {
        "space" = Space(Box<[Id]>),
        "dim" = Dim(Box<[Id]>),
        Int(i64),
    }
}

/// The value of an e-class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer leaf.
    Int(i64),
    /// A dim, with the factorizations [`split_count_rules`] may use.
    Dim(JointDim, Factors),
    /// A space (its value is its nodes).
    Space,
    /// A node that does not make sense (a `dim` without a count, say);
    /// rules leave such classes alone.
    Invalid,
}

/// `(outer, inner)` factor pairs of a count over 65535.
pub(crate) type Factors = SmallVec<[(u64, u64); 2]>;

/// The e-class analysis: the values of counts, steps and dims.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpaceAnalysis;

/// The e-graph of joint spaces.
pub(crate) type SpaceGraph = EGraph<SpaceLang, SpaceAnalysis>;

/// A rewrite rule over joint spaces.
pub(crate) type SpaceRewrite = Rewrite<SpaceLang, SpaceAnalysis>;

/// The factor pairs a count over 65535 may be split into: with `D` the
/// largest divisor of `n` not above 65535, `(n / D, D)` and `(D, n / D)`.
/// None for counts that fit or have no such divisor above 1.
pub fn factors(n: u64) -> Factors {
    let mut out = Factors::new();
    if n <= MAX_NUM {
        return out;
    }
    if let Some(d) = (2..=MAX_NUM).rev().find(|&d| n.is_multiple_of(d)) {
        out.push((n / d, d));
        if n / d != d {
            out.push((d, n / d));
        }
    }
    out
}

impl Analysis<SpaceLang> for SpaceAnalysis {
    type Data = Value;

    fn make(egraph: &mut SpaceGraph, enode: &SpaceLang, _id: Id) -> Value {
        match enode {
            SpaceLang::Int(v) => Value::Int(*v),
            SpaceLang::Space(_) => Value::Space,
            SpaceLang::Dim(children) => {
                let ints: Option<Steps> = children
                    .iter()
                    .map(|&c| match egraph[c].data {
                        Value::Int(v) => Some(v),
                        _ => None,
                    })
                    .collect();
                match ints.as_deref() {
                    Some([num, steps @ ..]) if *num >= 0 && !steps.is_empty() => {
                        let num = *num as u64;
                        Value::Dim(JointDim::new(num, steps), factors(num))
                    }
                    _ => Value::Invalid,
                }
            }
        }
    }

    fn merge(&mut self, a: &mut Value, b: Value) -> DidMerge {
        // Only `space` classes are ever unioned, and they carry no value.
        DidMerge(false, *a != b)
    }
}

/// Adds `space` to the e-graph and returns its class. Counts above
/// `i64::MAX` cannot be represented; callers check [`representable`].
pub(crate) fn add_space(egraph: &mut SpaceGraph, space: &[JointDim]) -> Id {
    let dims: Vec<Id> = space
        .iter()
        .map(|d| {
            let mut children = Vec::with_capacity(1 + d.steps.len());
            children.push(egraph.add(SpaceLang::Int(d.num as i64)));
            children.extend(d.steps.iter().map(|&s| egraph.add(SpaceLang::Int(s))));
            egraph.add(SpaceLang::Dim(children.into()))
        })
        .collect();
    egraph.add(SpaceLang::Space(dims.into()))
}

/// Whether every count of `space` fits the language's integers.
pub fn representable(space: &[JointDim]) -> bool {
    space.iter().all(|d| i64::try_from(d.num).is_ok())
}

/// The space a `space` node stands for (`None` if a child is not a dim).
pub fn decode(egraph: &SpaceGraph, dims: &[Id]) -> Option<JointSpace> {
    dims.iter()
        .map(|&c| match &egraph[c].data {
            Value::Dim(d, _) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

/// Matches every e-class holding a `space` node (the variadic node has no
/// fixed-arity pattern; the appliers look at each space whole).
#[derive(Clone, Copy, Debug)]
struct AnySpace;

impl Searcher<SpaceLang, SpaceAnalysis> for AnySpace {
    fn search_eclass_with_limit(
        &self,
        egraph: &SpaceGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, SpaceLang>> {
        let has_space = egraph[eclass]
            .nodes
            .iter()
            .any(|n| matches!(n, SpaceLang::Space(_)));
        (limit > 0 && has_space).then(|| SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

/// Rewrites every space of a matched class with a pure function from a
/// space to the equivalent spaces it yields, and unions them in.
struct Rewriter {
    rewrite: fn(&SpaceGraph, &[Id]) -> Vec<JointSpace>,
}

impl Applier<SpaceLang, SpaceAnalysis> for Rewriter {
    fn apply_one(
        &self,
        egraph: &mut SpaceGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<SpaceLang>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let nodes: Vec<Box<[Id]>> = egraph[eclass]
            .nodes
            .iter()
            .filter_map(|n| match n {
                SpaceLang::Space(dims) => Some(dims.clone()),
                _ => None,
            })
            .collect();
        let mut changed = Vec::new();
        for dims in nodes {
            for space in (self.rewrite)(egraph, &dims) {
                // The runner checks its limits between rules; one rule over
                // a large class could otherwise add far more than the node
                // limit.
                if egraph.total_size() > NODE_LIMIT {
                    return changed;
                }
                let id = add_space(egraph, &space);
                if egraph.union(eclass, id) {
                    changed.push(id);
                }
            }
        }
        changed
    }
}

fn rule(name: &str, rewrite: fn(&SpaceGraph, &[Id]) -> Vec<JointSpace>) -> SpaceRewrite {
    // Both halves are built here and take no variables, so this cannot fail.
    Rewrite::new(name, AnySpace, Rewriter { rewrite })
        .unwrap_or_else(|e| unreachable!("rule {name}: {e}"))
}

/// `space` without its dims of count 1, if it has any.
pub(crate) fn drop_units(space: &[JointDim]) -> Option<JointSpace> {
    space
        .iter()
        .any(|d| d.num == 1)
        .then(|| space.iter().filter(|d| d.num != 1).cloned().collect())
}

/// `space` with dims `i` and `i + 1` merged, if every operand allows it
/// (`outer.steps[k] == inner.steps[k] * inner.num`) and the count fits.
pub(crate) fn merge_at(space: &[JointDim], i: usize) -> Option<JointSpace> {
    let (outer, inner) = (space.get(i)?, space.get(i + 1)?);
    let joins = outer
        .steps
        .iter()
        .zip(&inner.steps)
        .all(|(&so, &si)| i128::from(si) * i128::from(inner.num) == i128::from(so));
    let num = outer.num.checked_mul(inner.num)?;
    if !joins || i64::try_from(num).is_err() {
        return None;
    }
    let mut out = Vec::with_capacity(space.len() - 1);
    out.extend_from_slice(&space[..i]);
    out.push(JointDim {
        num,
        steps: inner.steps.clone(),
    });
    out.extend_from_slice(&space[i + 2..]);
    Some(out)
}

/// `space` with dim `i` split into `(outer, inner)` counts: `(a * b, s)`
/// becomes `(a, s * b), (b, s)`. `None` if a step overflows.
pub fn split_at(space: &[JointDim], i: usize, outer: u64, inner: u64) -> Option<JointSpace> {
    let d = space.get(i)?;
    if outer.checked_mul(inner) != Some(d.num) {
        return None;
    }
    let b = i64::try_from(inner).ok()?;
    let steps: Option<Steps> = d.steps.iter().map(|s| s.checked_mul(b)).collect();
    let mut out = Vec::with_capacity(space.len() + 1);
    out.extend_from_slice(&space[..i]);
    out.push(JointDim {
        num: outer,
        steps: steps?,
    });
    out.push(JointDim {
        num: inner,
        steps: d.steps.clone(),
    });
    out.extend_from_slice(&space[i + 1..]);
    Some(out)
}

/// Drops every dim of count 1 (all at once: dropping them one by one would
/// only add every subset to the e-graph).
pub fn drop_unit_rules() -> Vec<SpaceRewrite> {
    vec![rule("drop-unit-dims", |g, dims| {
        decode(g, dims)
            .and_then(|s| drop_units(&s))
            .into_iter()
            .collect()
    })]
}

/// `space` with every pair of dims that line up merged while the merged
/// count stays within 65535, greedily from the outermost dim (or from the
/// innermost), if any such merge applies. A merge that keeps counts within
/// 65535 never costs a slot or a field, so no grouping in between is worth
/// keeping; the fewest dims under that bound is what the greedy pass gives.
pub fn merge_runs(space: &[JointDim], inner_first: bool) -> Option<JointSpace> {
    let fits = |m: &JointSpace| m[0].num <= MAX_NUM;
    let mut out: JointSpace = Vec::with_capacity(space.len());
    let mut merged = false;
    if inner_first {
        for d in space.iter().rev() {
            if let Some(first) = out.last_mut() {
                if let Some(m) = merge_at(&[d.clone(), first.clone()], 0).filter(fits) {
                    *first = m.into_iter().next()?;
                    merged = true;
                    continue;
                }
            }
            out.push(d.clone());
        }
        out.reverse();
    } else {
        for d in space {
            if let Some(last) = out.last_mut() {
                if let Some(m) = merge_at(&[last.clone(), d.clone()], 0).filter(fits) {
                    *last = m.into_iter().next()?;
                    merged = true;
                    continue;
                }
            }
            out.push(d.clone());
        }
    }
    merged.then_some(out)
}

/// Merges adjacent dims whose steps line up in every operand. Merges that
/// keep counts within 65535 are made all at once ([`merge_runs`], from
/// either end); a merge that makes a count longer than 65535 is made pair
/// by pair, since it may be the wrong one (the split rules may then factor
/// the long count differently). Making every pair on its own would add
/// every grouping of a long run of dims to the e-graph.
pub fn merge_rules() -> Vec<SpaceRewrite> {
    vec![
        rule("merge-runs-outer-first", |g, dims| {
            decode(g, dims)
                .and_then(|s| merge_runs(&s, false))
                .into_iter()
                .collect()
        }),
        rule("merge-runs-inner-first", |g, dims| {
            decode(g, dims)
                .and_then(|s| merge_runs(&s, true))
                .into_iter()
                .collect()
        }),
        rule("merge-into-long-count", |g, dims| {
            let Some(s) = decode(g, dims) else {
                return Vec::new();
            };
            // The count is looked at before the merged space is built.
            (0..s.len().saturating_sub(1))
                .filter(|&i| {
                    s[i].num
                        .checked_mul(s[i + 1].num)
                        .is_some_and(|n| n > MAX_NUM)
                })
                .filter_map(|i| merge_at(&s, i))
                .collect()
        }),
    ]
}

/// Splits counts over 65535 into two factors.
pub fn split_count_rules() -> Vec<SpaceRewrite> {
    vec![rule("split-long-count", |g, dims| {
        let mut out = Vec::new();
        let Some(s) = decode(g, dims) else {
            return out;
        };
        for (i, &id) in dims.iter().enumerate() {
            if let Value::Dim(_, fs) = &g[id].data {
                out.extend(fs.iter().filter_map(|&(a, b)| split_at(&s, i, a, b)));
            }
        }
        out
    })]
}

/// Every rule of `canonicalize-ap`.
pub fn rules() -> Vec<SpaceRewrite> {
    let mut all = drop_unit_rules();
    all.extend(merge_rules());
    all.extend(split_count_rules());
    all
}

/// The lexicographic cost of a joint space: fields over capacity, then
/// dims, then ops, then the space itself (a deterministic tie-break).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    /// Fields that cannot hold their value, summed over operands
    /// ([`violations`]); zero exactly when every operand fits.
    pub over: u64,
    /// Dims (including dims of count 1).
    pub dims: u64,
    /// Ops needed to do the work.
    pub ops: u64,
    /// The space, compared last so that ties are broken deterministically.
    pub space: JointSpace,
}

impl Cost {
    /// The cost of one op over `space` for operands encoded with `targets`.
    pub fn of(space: &[JointDim], targets: &[Target]) -> Cost {
        Cost {
            over: targets
                .iter()
                .enumerate()
                .map(|(k, &t)| violations(space, k, t))
                .sum(),
            dims: space.len() as u64,
            ops: 1,
            space: space.to_vec(),
        }
    }

    /// The cost of a leaf (`Int`, `dim`): nothing.
    fn leaf() -> Cost {
        Cost {
            over: 0,
            dims: 0,
            ops: 0,
            space: Vec::new(),
        }
    }
}

/// The extraction cost: [`Cost::of`] each `space` node for the op's
/// operand targets.
pub struct FitCost<'a> {
    /// The e-graph the nodes live in (to read dim values).
    pub egraph: &'a SpaceGraph,
    /// Each operand's descriptor.
    pub targets: &'a [Target],
}

impl CostFunction<SpaceLang> for FitCost<'_> {
    type Cost = Cost;

    fn cost<C>(&mut self, enode: &SpaceLang, _costs: C) -> Cost
    where
        C: FnMut(Id) -> Cost,
    {
        match enode {
            SpaceLang::Space(dims) => match decode(self.egraph, dims) {
                Some(space) => Cost::of(&space, self.targets),
                None => Cost {
                    over: u64::MAX,
                    ..Cost::leaf()
                },
            },
            _ => Cost::leaf(),
        }
    }
}

/// The result of one equality-saturation run.
#[derive(Clone, Debug)]
pub struct Canonical {
    /// The cheapest equivalent space found.
    pub space: JointSpace,
    /// Its cost.
    pub cost: Cost,
    /// Why the runner stopped.
    pub stop: Option<StopReason>,
}

impl Canonical {
    /// If the run stopped at a limit rather than saturating, which limit:
    /// the space is then the best found, not proven the cheapest.
    pub fn limit(&self) -> Option<String> {
        match &self.stop {
            Some(StopReason::NodeLimit(_)) => Some(format!("node limit ({NODE_LIMIT} e-nodes)")),
            Some(StopReason::IterationLimit(_)) => {
                Some(format!("iteration limit ({ITER_LIMIT} iterations)"))
            }
            Some(StopReason::TimeLimit(_)) => Some("time limit".to_string()),
            Some(StopReason::Other(why)) => Some(why.clone()),
            Some(StopReason::Saturated) | None => None,
        }
    }
}

/// Runs `rules` on `space` (with the limits above) and extracts the
/// cheapest equivalent space for `targets`. A space whose counts the
/// language cannot represent is returned as is.
pub fn canonicalize(space: &[JointDim], targets: &[Target], rules: &[SpaceRewrite]) -> Canonical {
    if space.len() > MAX_SEARCH_DIMS {
        // Dropping every unit dim is what the search does first, and no
        // space it reaches without doing so is cheaper.
        let dropped = drop_units(space).unwrap_or_else(|| space.to_vec());
        if dropped.len() <= MAX_SEARCH_DIMS {
            return canonicalize(&dropped, targets, rules);
        }
        let reduced = merge_runs(&dropped, false).unwrap_or(dropped);
        let why = format!("a space of {} dims, reduced without search", space.len());
        if reduced.len() <= MAX_SEARCH_DIMS {
            // Merged from the outermost dim on: the search starts from one
            // of the groupings it would have kept.
            return Canonical {
                stop: Some(StopReason::Other(why)),
                ..canonicalize(&reduced, targets, rules)
            };
        }
        return Canonical {
            cost: Cost::of(&reduced, targets),
            space: reduced,
            stop: Some(StopReason::Other(why)),
        };
    }
    if !representable(space) {
        return Canonical {
            space: space.to_vec(),
            cost: Cost::of(space, targets),
            stop: None,
        };
    }
    let (runner, root) = saturate_limited(space, rules);
    let egraph = &runner.egraph;
    let root = egraph.find(root);
    let extractor = Extractor::new(egraph, FitCost { egraph, targets });
    let (cost, best) = match extractor.find_best_node(root) {
        SpaceLang::Space(dims) => match decode(egraph, dims) {
            Some(best) => (extractor.find_best_cost(root), best),
            None => (Cost::of(space, targets), space.to_vec()),
        },
        _ => (Cost::of(space, targets), space.to_vec()),
    };
    Canonical {
        space: best,
        cost,
        stop: runner.stop_reason,
    }
}

/// Adds `space` to a fresh e-graph and runs `rules` on it under the node
/// and iteration limits (no time limit), with the deterministic simple scheduler; the
/// pass and the rule-set tests share this set-up. Returns the runner and the
/// root class.
fn saturate_limited(
    space: &[JointDim],
    rules: &[SpaceRewrite],
) -> (Runner<SpaceLang, SpaceAnalysis>, Id) {
    let mut egraph = SpaceGraph::new(SpaceAnalysis);
    let root = add_space(&mut egraph, space);
    let runner = Runner::new(SpaceAnalysis)
        .with_egraph(egraph)
        .with_node_limit(NODE_LIMIT)
        .with_iter_limit(ITER_LIMIT)
        .with_time_limit(NO_TIME_LIMIT)
        .with_scheduler(SimpleScheduler)
        .run(rules);
    (runner, root)
}

#[cfg(test)]
mod tests {
    use super::super::space::offsets;
    use super::*;
    use apir_ir::target::{DescriptorKind, WindowForm};

    fn t4() -> Target {
        Target {
            kind: DescriptorKind::Tensor(4),
            form: WindowForm::Plain,
        }
    }

    fn t(n: u8) -> Target {
        Target {
            kind: DescriptorKind::Tensor(n),
            form: WindowForm::Plain,
        }
    }

    fn d(num: u64, steps: &[i64]) -> JointDim {
        JointDim::new(num, steps)
    }

    /// Runs `rules` on `space` and returns every space in the root class,
    /// after checking each visits what `space` visits, operand by operand.
    fn saturate(space: &[JointDim], rules: &[SpaceRewrite]) -> Vec<JointSpace> {
        let (runner, root) = saturate_limited(space, rules);
        assert!(matches!(runner.stop_reason, Some(StopReason::Saturated)));
        let g = &runner.egraph;
        let mut out: Vec<JointSpace> = g[root]
            .nodes
            .iter()
            .map(|n| match n {
                SpaceLang::Space(dims) => decode(g, dims).unwrap(),
                other => panic!("{other:?} in the root class"),
            })
            .collect();
        for s in &out {
            for k in 0..space[0].steps.len() {
                assert_eq!(offsets(s, k), offsets(space, k), "{s:?} != {space:?}");
            }
        }
        out.sort();
        out
    }

    #[test]
    fn rule_sets_build_with_distinct_names() {
        let names: Vec<String> = rules().iter().map(|r| r.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "drop-unit-dims",
                "merge-runs-outer-first",
                "merge-runs-inner-first",
                "merge-into-long-count",
                "split-long-count"
            ]
        );
        assert_eq!(drop_unit_rules().len(), 1);
        assert_eq!(merge_rules().len(), 3);
        assert_eq!(split_count_rules().len(), 1);
    }

    #[test]
    fn drop_unit_rules_drop_every_unit_dim() {
        let s = vec![d(1, &[5, 0]), d(3, &[2, 1]), d(1, &[7, 7]), d(2, &[1, 3])];
        let got = saturate(&s, &drop_unit_rules());
        let mut want = vec![vec![d(3, &[2, 1]), d(2, &[1, 3])], s];
        want.sort();
        assert_eq!(got, want);
        // Only units: the empty space.
        let got = saturate(&[d(1, &[4])], &drop_unit_rules());
        assert!(got.contains(&Vec::new()));
    }

    #[test]
    fn merge_rules_merge_only_when_every_operand_allows() {
        // Operand 0 is contiguous over both dims, operand 1 is not.
        let s = vec![d(4, &[8, 100]), d(8, &[1, 1])];
        assert_eq!(saturate(&s, &merge_rules()), vec![s.clone()]);
        // Both contiguous: the merged form joins the class.
        let s = vec![d(4, &[8, 16]), d(8, &[1, 2])];
        assert_eq!(
            saturate(&s, &merge_rules()),
            vec![s.clone(), vec![d(32, &[1, 2])]]
        );
        // Two runs separated by a gap, for two operands: both merged at once.
        let s = vec![d(2, &[8, 0]), d(2, &[4, 0]), d(2, &[3, 0]), d(3, &[1, 0])];
        assert_eq!(
            saturate(&s, &merge_rules()),
            vec![s.clone(), vec![d(4, &[4, 0]), d(6, &[1, 0])]]
        );
    }

    #[test]
    fn merge_rules_stop_runs_at_long_counts_and_try_each_long_merge() {
        // 2 x 40000 x 2, contiguous: every merge makes a count over 65535,
        // so the runs merge nothing and each long merge is tried on its own.
        let s = vec![d(2, &[80000]), d(40000, &[2]), d(2, &[1])];
        let got = saturate(&s, &merge_rules());
        assert_eq!(
            got,
            vec![
                vec![d(2, &[80000]), d(40000, &[2]), d(2, &[1])],
                vec![d(2, &[80000]), d(80000, &[1])],
                vec![d(80000, &[2]), d(2, &[1])],
                vec![d(160000, &[1])],
            ]
        );
        // Greedy runs from either end differ when the bound cuts a run.
        let s = vec![d(200, &[60000]), d(300, &[200]), d(200, &[1])];
        assert_eq!(
            merge_runs(&s, false),
            Some(vec![d(60000, &[200]), d(200, &[1])])
        );
        assert_eq!(
            merge_runs(&s, true),
            Some(vec![d(200, &[60000]), d(60000, &[1])])
        );
    }

    #[test]
    fn long_runs_do_not_swamp_the_egraph() {
        // Sixteen broadcast dims: merged at once to 32768 x 2 (65536 would
        // be too long), which is final; no grouping in between is added.
        let s: JointSpace = (0..16).map(|_| d(2, &[0])).collect();
        let c = canonicalize(&s, &[t4()], &rules());
        assert!(
            matches!(c.stop, Some(StopReason::Saturated)),
            "{:?}",
            c.stop
        );
        assert_eq!(c.cost.over, 0);
        assert_eq!(c.space.len(), 2);
    }

    #[test]
    fn split_count_rules_factor_long_counts() {
        // 2^20 = 16 * 65536 has no divisor pair with an inner of 65536; the
        // largest divisor up to 65535 is 32768.
        let s = vec![d(1 << 20, &[1, 0])];
        let got = saturate(&s, &split_count_rules());
        assert!(
            got.contains(&vec![d(32, &[32768, 0]), d(32768, &[1, 0])]),
            "{got:?}"
        );
        assert!(
            got.contains(&vec![d(32768, &[32, 0]), d(32, &[1, 0])]),
            "{got:?}"
        );
        // A prime count stays as it is.
        assert_eq!(
            saturate(&[d(65537, &[1])], &split_count_rules()),
            vec![vec![d(65537, &[1])]]
        );
        // A count that fits is not split.
        assert_eq!(saturate(&[d(65535, &[1])], &split_count_rules()).len(), 1);
    }

    #[test]
    fn factors_are_divisor_pairs() {
        assert_eq!(factors(65535).as_slice(), &[]);
        // 196608 = 4 * 49152: the largest divisor up to 65535 is 49152.
        assert_eq!(factors(65536 * 3).as_slice(), &[(4, 49152), (49152, 4)]);
        assert_eq!(factors(65537).as_slice(), &[]);
        // 65535^2: both factors fit, one pair.
        assert_eq!(factors(65535 * 65535).as_slice(), &[(65535, 65535)]);
        for n in [70000u64, 1 << 20, 3 * 5 * 7 * 11 * 13 * 17] {
            for (a, b) in factors(n) {
                assert_eq!(a * b, n);
            }
        }
    }

    #[test]
    fn extraction_prefers_fitting_then_fewer_dims() {
        // Five dims, all mergeable: one dim.
        let s: JointSpace = (0..5).rev().map(|i| d(2, &[1 << i, 1 << i])).collect();
        let c = canonicalize(&s, &[t4(), t4()], &rules());
        assert_eq!(c.space, vec![d(32, &[1, 1])]);
        assert_eq!(c.cost.over, 0);
        assert!(matches!(c.stop, Some(StopReason::Saturated)));
        // A long count next to a dim it merges with: merge, then split to fit
        // one slot is impossible (two slots needed), but two slots fit.
        let s = vec![d(4, &[100000, 0]), d(100000, &[1, 0])];
        let c = canonicalize(&s, &[t(2), t(2)], &rules());
        assert_eq!(c.cost.over, 0, "{c:?}");
        assert_eq!(c.space.len(), 2);
        for k in 0..2 {
            assert_eq!(offsets(&c.space, k), offsets(&s, k));
        }
    }

    #[test]
    fn extraction_is_deterministic() {
        let s = vec![d(3, &[1 << 20, 0]), d(1 << 20, &[1, 0]), d(1, &[9, 9])];
        let a = canonicalize(&s, &[t4(), t(3)], &rules());
        for _ in 0..5 {
            let b = canonicalize(&s, &[t4(), t(3)], &rules());
            assert_eq!(a.space, b.space);
        }
    }

    #[test]
    fn cost_orders_over_then_dims_then_ops() {
        let fits2 = vec![d(4, &[8]), d(8, &[1])];
        let fits1 = vec![d(32, &[1])];
        let over = vec![d(70000, &[1])];
        let targets = [t(1)];
        assert!(Cost::of(&fits1, &targets) < Cost::of(&fits2, &targets));
        assert!(Cost::of(&fits2, &[t(2)]) < Cost::of(&over, &[t(2)]));
        assert_eq!(Cost::of(&fits2, &targets).over, 1);
        assert_eq!(Cost::of(&over, &targets).over, 1);
    }

    #[test]
    fn spaces_past_the_search_bound_are_reduced_first() {
        // Thousands of unit dims around six that merge: the units are
        // dropped before the search, which then finds what it finds
        // without them.
        let core: JointSpace = (0..6).map(|i| d(2, &[1 << (5 - i)])).collect();
        let mut s: JointSpace = (0..8000).map(|_| d(1, &[7])).collect();
        s.splice(4000..4000, core.iter().cloned());
        let c = canonicalize(&s, &[t4()], &rules());
        let want = canonicalize(&core, &[t4()], &rules());
        assert_eq!(c.space, want.space);
        assert_eq!(c.space, vec![d(64, &[1])]);
        assert!(
            matches!(c.stop, Some(StopReason::Saturated)),
            "{:?}",
            c.stop
        );
        // Many dims that no unit-dropping reduces enough: merged from the
        // outermost while counts stay within 65535, then searched, and
        // the outcome is flagged as not the proven cheapest.
        let s: JointSpace = (0..100).map(|_| d(2, &[0])).collect();
        let c = canonicalize(&s, &[t4()], &rules());
        let why = c.limit().expect("flagged");
        assert!(why.contains("100 dims"), "{why}");
        let count: u128 = c.space.iter().map(|x| u128::from(x.num)).product();
        assert_eq!(count, 1u128 << 100);
        assert!(c.space.len() <= 8, "{}", c.space.len());
        // Past the bound even then: the merged space, unsearched.
        let s: JointSpace = (0..4000u64)
            .map(|i| d(2 + i % 2, &[if i % 2 == 0 { 1 << 40 } else { 5 }]))
            .collect();
        let c = canonicalize(&s, &[t4()], &rules());
        assert!(c.limit().is_some());
        assert_eq!(c.space, s);
    }

    #[test]
    fn a_run_stopped_by_a_limit_says_so() {
        // Ten long, unmergeable dims: every count splits two ways, and the
        // e-graph reaches its node limit before saturating.
        let s: JointSpace = (0..10)
            .map(|i| d(1 << 20, &[(1i64 << 20) * (i + 3)]))
            .collect();
        let c = canonicalize(&s, &[t4()], &rules());
        assert!(
            matches!(c.stop, Some(StopReason::NodeLimit(_))),
            "{:?}",
            c.stop
        );
        let why = c.limit().expect("stopped by a limit");
        assert!(why.contains("10000 e-nodes"), "{why}");
        // The same run stops at the same place every time.
        assert_eq!(canonicalize(&s, &[t4()], &rules()).space, c.space);
        // Eight such dims saturate.
        let c = canonicalize(&s[..8], &[t4()], &rules());
        assert!(
            matches!(c.stop, Some(StopReason::Saturated)),
            "{:?}",
            c.stop
        );
        assert_eq!(c.limit(), None);
    }
}
