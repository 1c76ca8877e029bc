//! Joint iteration spaces: the free dims an elementwise op walks, with one
//! count per dim shared by every operand and one step per operand.
//!
//! Operand `k` of an op over the joint space `[(n_0, s_0), .., (n_m, s_m)]`
//! (outermost first, `s_j[k]` its step in dim `j`) visits the free elements
//! `offset_k + i_0 * s_0[k] + .. + i_m * s_m[k]` in row-major order, so
//! element `i` of one operand is element `i` of every other. The rewrites of
//! `canonicalize-ap` are the transformations that keep every operand's
//! sequence: drop a dim of count 1, merge adjacent dims when every operand's
//! steps allow it, split a count into two factors.

use apir_ir::lowering::{check_fit, RoleChoice};
use apir_ir::target::{DescriptorKind, Direction, MemorySet, WindowForm};
use apir_ir::Dim;
use smallvec::SmallVec;

pub use apir_ir::target::descriptor::MAX_NUM;

/// One step per operand, in operand order.
pub type Steps = SmallVec<[i64; 3]>;

/// One dim of a joint iteration space.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JointDim {
    /// Number of indices, shared by every operand.
    pub num: u64,
    /// The step of each operand, in elements of its buffer's dtype.
    pub steps: Steps,
}

impl JointDim {
    /// `num` indices with `steps`.
    pub fn new(num: u64, steps: &[i64]) -> Self {
        JointDim {
            num,
            steps: steps.iter().copied().collect(),
        }
    }
}

/// A joint iteration space, outermost dim first.
pub(crate) type JointSpace = Vec<JointDim>;

/// What each operand's descriptor can hold: its role's descriptor kind and
/// ADDR4 form (the parts of [`RoleChoice`] that [`check_fit`] reads), so it
/// can be part of a memoisation key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// The role's descriptor struct (its slot count is the capacity).
    pub kind: DescriptorKind,
    /// The role's ADDR4 form.
    pub form: WindowForm,
}

impl Target {
    /// The target of a role choice.
    pub fn of(choice: &RoleChoice) -> Self {
        Target {
            kind: choice.kind,
            form: choice.form,
        }
    }

    /// Free slots of the descriptor.
    pub fn slots(self) -> usize {
        usize::from(self.kind.slots())
    }

    /// A role choice with this kind and form, for [`check_fit`] (which reads
    /// nothing else of it).
    pub fn choice(self) -> RoleChoice {
        RoleChoice {
            kind: self.kind,
            dir: Direction::Read,
            mems: MemorySet::SP,
            form: self.form,
        }
    }
}

/// The compacted slots (innermost first, dims of count 1 dropped) of operand
/// `k` over `space`: what `compact-unit-dims` would attach.
pub fn slots(space: &[JointDim], k: usize) -> SmallVec<[Dim; 4]> {
    space
        .iter()
        .rev()
        .filter(|d| d.num != 1)
        .map(|d| Dim::new(d.steps[k], d.num))
        .collect()
}

/// Whether every operand's slots over `space` pass `select-descriptor`'s
/// check ([`check_fit`], the same function), so the two cannot disagree.
/// The start byte matters to that check only for the two-window form, which
/// no elementwise role has; shapes are checked at an aligned start.
pub fn fits(space: &[JointDim], targets: &[Target]) -> bool {
    targets
        .iter()
        .enumerate()
        .all(|(k, t)| check_fit(&slots(space, k), &t.choice(), 0).is_ok())
}

/// The number of fields that cannot hold their value if operand `k` were
/// encoded over `space` with `target`: slots beyond the descriptor's capacity,
/// counts outside `1..=65535`, steps outside i16, and the validator rules the
/// user controls (a broadcast in slot 2 of a 3D or 4D descriptor, a
/// two-window source striding in slot 0 or 1). Zero exactly when
/// [`check_fit`] accepts the slots (a unit test checks this).
pub fn violations(space: &[JointDim], k: usize, target: Target) -> u64 {
    let n = target.slots();
    let mut count = 0u64;
    let mut slot = 0usize;
    // Innermost first, as the slots are numbered.
    for d in space.iter().rev().filter(|d| d.num != 1) {
        let step = d.steps[k];
        if d.num == 0 || d.num > MAX_NUM {
            count += 1;
        }
        if !apir_ir::target::descriptor::step_fits(step) {
            count += 1;
        }
        match target.form {
            WindowForm::TwoWindow if slot < 2 && step != 1 => count += 1,
            WindowForm::Plain if n >= 3 && slot == 2 && step == 0 => count += 1,
            _ => {}
        }
        slot += 1;
    }
    count + slot.saturating_sub(n) as u64
}

/// Whether `select-descriptor` would reject the operand for its shape alone:
/// more slots than its descriptor has, or a count over 65535. These are the
/// two failures `canonicalize-ap` exists to fix; an operand that fails only
/// for another reason (a step outside i16, say) is not its business.
pub fn over_capacity(free: &[Dim], target: Target) -> bool {
    let mut active = 0usize;
    for d in free {
        if d.num != 1 {
            if d.num > MAX_NUM {
                return true;
            }
            active += 1;
        }
    }
    active > target.slots()
}

/// The joint iteration space of operands whose free dims are `free[k]`
/// (outermost first), or `None` if they do not share one.
///
/// When every operand has the same counts, the joint dims are the operands'
/// dims side by side. Otherwise the counts are brought to a common
/// refinement, outermost first: a dim `[s, a * b]` of one operand is split
/// into `[s * b, a], [s, b]` so that its outer count matches the other
/// operands' next dim; a dim of count 1 in some operands becomes a joint
/// dim of count 1 (the others get step 0 there, which is never walked).
/// Operands share no joint space when their element counts differ or when
/// neither of two next counts divides the other (for `6 x 4` against
/// `4 x 6`, element 4 starts a new outer index in one and not the other).
pub fn joint_space(free: &[&[Dim]]) -> Option<JointSpace> {
    let k = free.len();
    if k == 0 {
        return None;
    }
    let total = |dims: &[Dim]| dims.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.num));
    let first = total(free[0])?;
    if first == 0 || free.iter().any(|f| total(f) != Some(first)) {
        return None;
    }
    // Each operand's remaining dims: index of the next dim, and what is left
    // of it after outer parts were split off.
    let mut next = vec![0usize; k];
    let mut head: SmallVec<[Option<Dim>; 3]> = free.iter().map(|f| f.first().copied()).collect();
    let mut out = JointSpace::new();
    loop {
        if head.iter().all(Option::is_none) {
            return Some(out);
        }
        if head.iter().any(|h| h.is_some_and(|d| d.num == 1)) {
            // A unit dim in some operands: walk past it in those only.
            let mut steps = Steps::new();
            for i in 0..k {
                match head[i] {
                    Some(d) if d.num == 1 => {
                        steps.push(d.step);
                        next[i] += 1;
                        head[i] = free[i].get(next[i]).copied();
                    }
                    _ => steps.push(0),
                }
            }
            out.push(JointDim { num: 1, steps });
            continue;
        }
        // Equal totals and no unit heads: every operand has a head here.
        let heads: SmallVec<[Dim; 3]> = head
            .iter()
            .map(|h| h.ok_or(()))
            .collect::<Result<_, _>>()
            .ok()?;
        let m = heads.iter().map(|d| d.num).min()?;
        let mut steps = Steps::new();
        for i in 0..k {
            let d = heads[i];
            if !d.num.is_multiple_of(m) {
                return None;
            }
            let inner = d.num / m;
            if inner == 1 {
                steps.push(d.step);
                next[i] += 1;
                head[i] = free[i].get(next[i]).copied();
            } else {
                steps.push(d.step.checked_mul(i64::try_from(inner).ok()?)?);
                head[i] = Some(Dim::new(d.step, inner));
            }
        }
        out.push(JointDim { num: m, steps });
    }
}

/// Operand `k`'s free dims over `space`, outermost first, dims of count 1
/// dropped: the access pattern written back after a rewrite.
pub(crate) fn operand_dims(space: &[JointDim], k: usize) -> impl Iterator<Item = Dim> + '_ {
    space
        .iter()
        .filter(|d| d.num != 1)
        .map(move |d| Dim::new(d.steps[k], d.num))
}

/// The boundaries of a space: the products of the counts of its outer dims
/// (before each dim but the first, counts of 1 ignored). Every rewrite keeps
/// the elements' order, so merging two dims removes one boundary and
/// splitting a count adds one; comparing boundary sets counts both.
pub fn boundaries(space: &[JointDim]) -> SmallVec<[u64; 8]> {
    let mut out = SmallVec::new();
    let mut acc = 1u64;
    for d in space.iter().filter(|d| d.num != 1) {
        if acc != 1 {
            out.push(acc);
        }
        acc = acc.saturating_mul(d.num);
    }
    out
}

/// Every flat element offset operand `k` visits over `space`, in order
/// (relative to its start). For tests and small spaces only.
pub fn offsets(space: &[JointDim], k: usize) -> Vec<i128> {
    let mut out = vec![0i128];
    for d in space {
        let mut next = Vec::with_capacity(out.len() * d.num as usize);
        for &base in &out {
            for i in 0..d.num {
                next.push(base + i128::from(i) * i128::from(d.steps[k]));
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(pairs: &[(i64, u64)]) -> Vec<Dim> {
        pairs.iter().map(|&(s, n)| Dim::new(s, n)).collect()
    }

    fn flat(free: &[Dim]) -> Vec<i128> {
        let space: JointSpace = free
            .iter()
            .map(|d| JointDim::new(d.num, &[d.step]))
            .collect();
        offsets(&space, 0)
    }

    #[test]
    fn same_counts_are_side_by_side() {
        let a = dims(&[(8, 4), (1, 8)]);
        let b = dims(&[(16, 4), (2, 8)]);
        let j = joint_space(&[&a, &b]).unwrap();
        assert_eq!(
            j,
            vec![JointDim::new(4, &[8, 16]), JointDim::new(8, &[1, 2])]
        );
    }

    #[test]
    fn different_counts_are_refined() {
        // dst [1, 512] against src [4, 128], [1, 4]: dst's dim splits.
        let a = dims(&[(1, 512)]);
        let b = dims(&[(4, 128), (1, 4)]);
        let j = joint_space(&[&a, &b]).unwrap();
        assert_eq!(
            j,
            vec![JointDim::new(128, &[4, 4]), JointDim::new(4, &[1, 1])]
        );
        // Both ways at once: 2x12 against 6x4 refines to 2x3x4.
        let a = dims(&[(100, 2), (1, 12)]);
        let b = dims(&[(4, 6), (1, 4)]);
        let j = joint_space(&[&a, &b]).unwrap();
        assert_eq!(
            j,
            vec![
                JointDim::new(2, &[100, 12]),
                JointDim::new(3, &[4, 4]),
                JointDim::new(4, &[1, 1])
            ]
        );
        for (k, f) in [a, b].iter().enumerate() {
            assert_eq!(offsets(&j, k), flat(f));
        }
    }

    #[test]
    fn unit_dims_become_joint_units() {
        let a = dims(&[(7, 1), (1, 4)]);
        let b = dims(&[(1, 4), (9, 1)]);
        let j = joint_space(&[&a, &b]).unwrap();
        assert_eq!(
            j,
            vec![
                JointDim::new(1, &[7, 0]),
                JointDim::new(4, &[1, 1]),
                JointDim::new(1, &[0, 9])
            ]
        );
    }

    #[test]
    fn no_joint_space() {
        // Different element counts.
        assert!(joint_space(&[&dims(&[(1, 4)]), &dims(&[(1, 5)])]).is_none());
        // 6x4 against 4x6: no common refinement.
        assert!(joint_space(&[&dims(&[(4, 6), (1, 4)]), &dims(&[(6, 4), (1, 6)])]).is_none());
        assert!(joint_space(&[]).is_none());
    }

    #[test]
    fn boundaries_count_merges_and_splits() {
        let s = vec![
            JointDim::new(2, &[1]),
            JointDim::new(1, &[0]),
            JointDim::new(3, &[1]),
            JointDim::new(4, &[1]),
        ];
        assert_eq!(boundaries(&s).as_slice(), &[2, 6]);
        assert!(boundaries(&[JointDim::new(5, &[1])]).is_empty());
    }

    /// `violations` is zero exactly when `check_fit` accepts.
    #[test]
    fn violations_agree_with_check_fit() {
        let steps = [0i64, 1, -1, 2, 32767, 32768, -32769];
        let nums = [1u64, 2, 65535, 65536];
        let mut seed = 1u64;
        let mut rnd = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for kind in DescriptorKind::all() {
            for form in [WindowForm::Plain, WindowForm::TwoWindow] {
                let target = Target { kind, form };
                let choice = target.choice();
                for _ in 0..2000 {
                    let len = rnd(7);
                    let space: JointSpace = (0..len)
                        .map(|_| JointDim::new(nums[rnd(nums.len())], &[steps[rnd(steps.len())]]))
                        .collect();
                    let ok = check_fit(&slots(&space, 0), &choice, 0).is_ok();
                    assert_eq!(
                        violations(&space, 0, target) == 0,
                        ok,
                        "{space:?} {kind:?} {form:?}"
                    );
                }
            }
        }
    }
}
