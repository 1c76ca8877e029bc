//! Op splitting: when no single op over any equivalent joint space fits its
//! descriptors, the work is divided among several ops along the outermost
//! dim, in an order that visits the same addresses in the same sequence in
//! every partition.
//!
//! A [`Plan`] is built from the canonical space, outermost dim first:
//! - if the outermost count alone is too long (over 65535) and pieces of at
//!   most 65535 indices fit with the dims inside it, the dim is cut into
//!   runs ([`Plan::Runs`]): op `j` covers indices `j * 65535 ..` of it;
//! - otherwise the dim is peeled ([`Plan::Peel`]): one group of ops per
//!   index, each running the plan of the dims inside it, which is
//!   canonicalized again and split further if it still does not fit.
//!
//! The ops of a plan are counted before any is built; a plan of more than
//! [`MAX_SPLIT_OPS`] ops is refused (the op is left unchanged and
//! `select-descriptor` reports the reference error), so a pathological
//! pattern cannot blow the module up.

use super::space::{fits, JointDim, JointSpace, Steps, Target, MAX_NUM};
use smallvec::SmallVec;

/// The most ops one op may be split into.
///
/// A small hostile input must not push the work into gigabytes: at 65536 a
/// 10 KB module of 32 ops of twenty unmergeable dims each became 2,097,152
/// ops (2.2 GB). At 4096 a 64-op batch of the streaming driver grows to at
/// most 64 x 4096 = 262,144 ops. A plan of more ops is refused and the op
/// left as written, for `select-descriptor`'s reference error.
pub const MAX_SPLIT_OPS: u64 = 4096;

/// Ops that splitting may add to a module beyond [`SPLIT_OPS_PER_OP`] per
/// elementwise op examined, unless `canonicalize-ap{split-budget=N}` says
/// otherwise (project-defined): the amplification a small input can ask
/// for. A 90 KB module of 1,000 ops each split into 4,096 ops asked for
/// 4,096,000 ops (7 GB on the whole-module path); under the budget
/// splitting adds at most 69,536 ops to its 1,000.
pub const DEFAULT_SPLIT_BUDGET: u64 = 1 << 16;

/// Ops that splitting may add per elementwise op examined, on top of the
/// split budget (project-defined): a module where every op splits into
/// five still lowers, at whatever size, and the module grows at most
/// fivefold plus the budget.
pub const SPLIT_OPS_PER_OP: u64 = 4;

/// The module-wide bound on the ops splitting adds, carried in program
/// order: when an op is split into `n` ops (adding `n - 1`), the ops added
/// so far, this split's included, may not exceed the budget plus
/// [`SPLIT_OPS_PER_OP`] for every elementwise op examined so far, this one
/// included. A split past the bound is refused and the op left as written
/// (for `select-descriptor`'s reference error), and later ops are judged
/// on their own: a smaller split further on may still fit.
///
/// A fork starts from nothing and judges its part as if it began the
/// module; [`SplitBudget::join`] then tells whether the one-pass run would
/// have made the same decisions (it would unless the fork refused a split,
/// or the ops before the part leave less room than the fork used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitBudget {
    /// The budget: ops that may be added beyond the per-op allowance.
    pub budget: u64,
    /// Elementwise ops examined so far.
    pub examined: u64,
    /// Ops added by splits so far.
    pub added: u64,
    /// The largest excess ([`SplitBudget::excess`]) right after a split
    /// that was taken; `None` before the first.
    pub peak: Option<i128>,
    /// Whether a split was refused for the bound.
    pub refused: bool,
}

impl SplitBudget {
    /// Nothing examined or added yet, under `budget`.
    pub fn new(budget: u64) -> Self {
        SplitBudget {
            budget,
            examined: 0,
            added: 0,
            peak: None,
            refused: false,
        }
    }

    /// Counts one more elementwise op examined.
    pub fn examine(&mut self) {
        self.examined += 1;
    }

    /// The ops added so far less the per-op allowance of the ops examined:
    /// a split is taken while this stays at most the budget.
    pub fn excess(&self) -> i128 {
        i128::from(self.added) - i128::from(SPLIT_OPS_PER_OP) * i128::from(self.examined)
    }

    /// The most ops the module may hold added by splits now: the budget
    /// plus the per-op allowance of the ops examined.
    pub fn bound(&self) -> u128 {
        u128::from(self.budget) + u128::from(SPLIT_OPS_PER_OP) * u128::from(self.examined)
    }

    /// Whether a split into `ops` ops fits the bound now.
    pub fn fits(&self, ops: u64) -> bool {
        self.after(ops).is_some()
    }

    /// The ops added once a split into `ops` ops is taken, if that fits.
    fn after(&self, ops: u64) -> Option<u64> {
        self.added
            .checked_add(ops.saturating_sub(1))
            .filter(|&a| u128::from(a) <= self.bound())
    }

    /// Counts a split refused for the bound.
    pub fn refuse(&mut self) {
        self.refused = true;
    }

    /// Takes a split into `ops` ops if it fits the bound (counting it);
    /// else counts it refused. Whether it was taken.
    pub fn take(&mut self, ops: u64) -> bool {
        let Some(added) = self.after(ops) else {
            self.refuse();
            return false;
        };
        self.added = added;
        self.peak = Some(self.peak.map_or(self.excess(), |p| p.max(self.excess())));
        true
    }

    /// Takes in what a fork counted over the next part, as if this value
    /// had judged the part's splits itself. False if its decisions may
    /// differ: it refused a split (which the ops before might have made
    /// room for), or with the ops before counted a split it took would be
    /// over the bound. On false nothing is taken in.
    pub fn join(&mut self, part: &SplitBudget) -> bool {
        if part.refused {
            return false;
        }
        let before = self.excess();
        let Some(added) = self.added.checked_add(part.added) else {
            return false;
        };
        if let Some(p) = part.peak {
            if before + p > i128::from(self.budget) {
                return false;
            }
            self.peak = Some(self.peak.map_or(before + p, |q| q.max(before + p)));
        }
        self.examined += part.examined;
        self.added = added;
        true
    }
}

/// How one op's work is divided among ops, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One op over this space.
    Op(JointSpace),
    /// For each index `i` in `0..num` of the outermost dim, in order: the
    /// ops of `body`, with every operand's offset moved by `i * steps[k]`.
    Peel {
        /// The peeled dim's steps, one per operand.
        steps: Steps,
        /// The peeled dim's count.
        num: u64,
        /// What runs at each index.
        body: Box<Plan>,
    },
    /// The outermost dim cut into runs: each `(first, plan)` runs `plan` with
    /// every operand's offset moved by `first * steps[k]`.
    Runs {
        /// The cut dim's steps, one per operand.
        steps: Steps,
        /// First index of each run and the plan of the run.
        runs: Vec<(u64, Plan)>,
    },
}

/// One op of a plan: each operand's offset change and the op's space.
pub type Piece = (SmallVec<[i128; 3]>, JointSpace);

impl Plan {
    /// The number of ops the plan issues (`None` on overflow).
    pub fn ops(&self) -> Option<u64> {
        match self {
            Plan::Op(_) => Some(1),
            Plan::Peel { num, body, .. } => body.ops()?.checked_mul(*num),
            Plan::Runs { runs, .. } => runs
                .iter()
                .try_fold(0u64, |acc, (_, p)| acc.checked_add(p.ops()?)),
        }
    }

    /// Every op of the plan, in program order, for `operands` operands.
    pub fn pieces(&self, operands: usize) -> Vec<Piece> {
        let mut out = Vec::new();
        self.walk(&SmallVec::from_elem(0, operands), &mut out);
        out
    }

    fn walk(&self, base: &SmallVec<[i128; 3]>, out: &mut Vec<Piece>) {
        let moved = |steps: &Steps, i: u64| -> SmallVec<[i128; 3]> {
            base.iter()
                .zip(steps)
                .map(|(b, &s)| b + i128::from(i) * i128::from(s))
                .collect()
        };
        match self {
            Plan::Op(space) => out.push((base.clone(), space.clone())),
            Plan::Peel { steps, num, body } => {
                for i in 0..*num {
                    body.walk(&moved(steps, i), out);
                }
            }
            Plan::Runs { steps, runs } => {
                for (first, plan) in runs {
                    plan.walk(&moved(steps, *first), out);
                }
            }
        }
    }
}

/// Plans the ops that do the work of `space` for operands encoded with
/// `targets`; `canon` gives the canonical form of a space (memoised by the
/// pass). `None` if no plan of at most [`MAX_SPLIT_OPS`] ops has every op
/// fit.
pub fn plan(
    space: &[JointDim],
    targets: &[Target],
    canon: &mut dyn FnMut(&[JointDim]) -> JointSpace,
) -> Option<Plan> {
    let best = canon(space);
    if fits(&best, targets) {
        return Some(Plan::Op(best));
    }
    let (outer, inner) = best.split_first()?;
    if outer.num > MAX_NUM {
        if let Some(p) = runs(outer, inner, targets, canon) {
            return Some(p);
        }
    }
    let body = plan(inner, targets, canon)?;
    let ops = body.ops()?.checked_mul(outer.num)?;
    (ops <= MAX_SPLIT_OPS).then(|| Plan::Peel {
        steps: outer.steps.clone(),
        num: outer.num,
        body: Box::new(body),
    })
}

/// Cuts `outer` into runs of at most 65535 indices, if every run fits as one
/// op with `inner`.
fn runs(
    outer: &JointDim,
    inner: &[JointDim],
    targets: &[Target],
    canon: &mut dyn FnMut(&[JointDim]) -> JointSpace,
) -> Option<Plan> {
    if outer.num.div_ceil(MAX_NUM) > MAX_SPLIT_OPS {
        return None;
    }
    let mut runs = Vec::new();
    let mut first = 0u64;
    while first < outer.num {
        let count = MAX_NUM.min(outer.num - first);
        let mut piece = Vec::with_capacity(1 + inner.len());
        piece.push(JointDim {
            num: count,
            steps: outer.steps.clone(),
        });
        piece.extend_from_slice(inner);
        let best = canon(&piece);
        if !fits(&best, targets) {
            return None;
        }
        runs.push((first, Plan::Op(best)));
        first += count;
    }
    Some(Plan::Runs {
        steps: outer.steps.clone(),
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::super::rules::{canonicalize, rules};
    use super::super::space::offsets;
    use super::*;
    use apir_ir::target::{DescriptorKind, WindowForm};

    fn t(n: u8) -> Target {
        Target {
            kind: DescriptorKind::Tensor(n),
            form: WindowForm::Plain,
        }
    }

    fn d(num: u64, steps: &[i64]) -> JointDim {
        JointDim::new(num, steps)
    }

    fn plan_of(space: &[JointDim], targets: &[Target]) -> Option<Plan> {
        let rules = rules();
        plan(space, targets, &mut |s| {
            canonicalize(s, targets, &rules).space
        })
    }

    /// The pieces' offsets, concatenated, are the space's, per operand.
    fn assert_same_walk(space: &[JointDim], p: &Plan, operands: usize) {
        for k in 0..operands {
            let mut got = Vec::new();
            for (delta, s) in p.pieces(operands) {
                got.extend(offsets(&s, k).into_iter().map(|o| o + delta[k]));
            }
            assert_eq!(got, offsets(space, k), "operand {k}");
        }
    }

    #[test]
    fn too_many_dims_peel_the_outermost() {
        // Three unmergeable dims, one slot: peel twice.
        let s = vec![d(2, &[100, 7]), d(3, &[10, 3]), d(4, &[1, 2])];
        let p = plan_of(&s, &[t(1), t(1)]).unwrap();
        assert_eq!(p.ops(), Some(6));
        assert_same_walk(&s, &p, 2);
        let pieces = p.pieces(2);
        assert_eq!(pieces[1].0.as_slice(), &[10, 3]);
        assert_eq!(pieces[3].0.as_slice(), &[100, 7]);
        assert_eq!(pieces[0].1, vec![d(4, &[1, 2])]);
    }

    #[test]
    fn long_prime_count_is_cut_into_runs() {
        let s = vec![d(65537, &[1])];
        let p = plan_of(&s, &[t(4)]).unwrap();
        assert_eq!(p.ops(), Some(2));
        assert_same_walk(&s, &p, 1);
        assert_eq!(
            p,
            Plan::Runs {
                steps: [1].into_iter().collect(),
                runs: vec![
                    (0, Plan::Op(vec![d(65535, &[1])])),
                    (65535, Plan::Op(vec![d(2, &[1])]))
                ]
            }
        );
    }

    /// Splits of `sizes` ops (0: an op examined, not split), judged in
    /// order by one value: which were taken.
    fn one_value(budget: u64, sizes: &[u64]) -> Vec<bool> {
        let mut b = SplitBudget::new(budget);
        sizes
            .iter()
            .map(|&n| {
                b.examine();
                n > 0 && b.take(n)
            })
            .collect()
    }

    /// The bound read off the contract: the ops added by the splits taken
    /// up to each op, at most the budget plus 4 per op examined so far.
    fn within_contract(budget: u64, sizes: &[u64], taken: &[bool]) -> bool {
        let mut added = 0u128;
        sizes.iter().zip(taken).enumerate().all(|(i, (&n, &t))| {
            if t {
                added += u128::from(n - 1);
            }
            added <= u128::from(budget) + 4 * (i as u128 + 1)
        })
    }

    #[test]
    fn the_split_budget_bounds_the_ops_added() {
        // Budget 10: with 4 per op, 14 after the first op.
        assert_eq!(one_value(10, &[15, 16]), [true, false]);
        assert_eq!(one_value(10, &[16, 0, 0, 9]), [false, false, false, true]);
        // A refusal leaves room for a smaller split after it.
        assert_eq!(one_value(0, &[9, 0, 5]), [false, false, true]);
        assert!(within_contract(0, &[9, 0, 5], &one_value(0, &[9, 0, 5])));
        // Sums past u64 are refused, not wrapped.
        assert_eq!(one_value(u64::MAX, &[u64::MAX, u64::MAX]), [true, false]);
    }

    #[test]
    fn a_fork_joins_only_when_it_decided_as_one_value() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut joined, mut refused) = (0, 0);
        for _ in 0..4000 {
            let budget = next(40);
            let len = 1 + next(12) as usize;
            let sizes: Vec<u64> = (0..len)
                .map(|_| if next(3) == 0 { 0 } else { 1 + next(30) })
                .collect();
            let want = one_value(budget, &sizes);
            assert!(within_contract(budget, &sizes, &want));
            // Cut into parts anywhere; each judged by a fork from nothing.
            let mut main = SplitBudget::new(budget);
            let mut got = Vec::new();
            let mut at = 0;
            let mut same = true;
            while at < len {
                let end = at + 1 + next((len - at) as u64) as usize;
                let mut fork = SplitBudget::new(budget);
                for &n in &sizes[at..end] {
                    fork.examine();
                    got.push(n > 0 && fork.take(n));
                }
                if !main.join(&fork) {
                    same = false;
                    break;
                }
                at = end;
            }
            if same {
                joined += 1;
                assert_eq!(got, want, "budget {budget}, sizes {sizes:?}");
                let mut whole = SplitBudget::new(budget);
                for &n in &sizes {
                    whole.examine();
                    if n > 0 {
                        whole.take(n);
                    }
                }
                assert_eq!((main.examined, main.added), (whole.examined, whole.added));
            } else {
                refused += 1;
            }
        }
        // Both outcomes happen.
        assert!(
            joined > 100 && refused > 100,
            "{joined} joined, {refused} refused"
        );
    }

    #[test]
    fn fitting_space_is_one_op() {
        let s = vec![d(4, &[8]), d(8, &[1])];
        assert_eq!(plan_of(&s, &[t(1)]), Some(Plan::Op(vec![d(32, &[1])])));
    }

    #[test]
    fn too_many_ops_are_refused() {
        // 300 x 300 x 2 unmergeable dims on one slot: 90000 ops.
        let s = vec![d(300, &[1000, 0]), d(300, &[3, 1]), d(2, &[1, 5])];
        assert_eq!(plan_of(&s, &[t(1), t(1)]), None);
        // A step that fits no descriptor is peeled away like any dim: down
        // to single-element ops if need be.
        let s = vec![d(2, &[1]), d(3, &[40000])];
        let p = plan_of(&s, &[t(4)]).unwrap();
        assert_eq!(p.ops(), Some(6));
        assert!(p.pieces(1).iter().all(|(_, s)| s.is_empty()));
        assert_same_walk(&s, &p, 1);
    }

    #[test]
    fn the_cap_is_max_split_ops() {
        // An outer dim over four unmergeable dims on 4 slots: one op per
        // index, accepted up to the cap and refused one past it.
        let inner = [d(2, &[64]), d(2, &[16]), d(2, &[4]), d(2, &[1])];
        let space = |n: u64| [&[d(n, &[1])][..], &inner].concat();
        let p = plan_of(&space(MAX_SPLIT_OPS), &[t(4)]).unwrap();
        assert_eq!(p.ops(), Some(MAX_SPLIT_OPS));
        assert_same_walk(&space(MAX_SPLIT_OPS), &p, 1);
        assert_eq!(plan_of(&space(MAX_SPLIT_OPS + 1), &[t(4)]), None);
        // Peeling twice counts the product: 2 x (MAX_SPLIT_OPS / 2 + 1) is
        // over the cap although each factor is under it.
        let half = MAX_SPLIT_OPS / 2;
        let s = [&[d(2, &[100_000]), d(half + 1, &[1])][..], &inner].concat();
        assert_eq!(plan_of(&s, &[t(4)]), None);
        let s = [&[d(2, &[100_000]), d(half, &[1])][..], &inner].concat();
        assert_eq!(plan_of(&s, &[t(4)]).unwrap().ops(), Some(MAX_SPLIT_OPS));
    }
}
