//! The math of the lowered forms, shared by the passes that attach them, the
//! verifier that re-checks them and the evaluator that walks them, so the
//! three can never disagree.

use crate::eval::{logical_walk, EvalError, Walk};
use crate::module::{Dim, Fold, Module, Operand};
use crate::target::arch::partition_start_rule;
use smallvec::SmallVec;

/// Why an operand's partition axis cannot be folded. Each message names the
/// values involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoldError {
    /// `n0 = 0`.
    NoChannels,
    /// `s0 < 0`.
    NegativePartitionStep(i64),
    /// `s0 != F` while `n0 > 1`.
    PartitionStep {
        /// The partition step given.
        step: i64,
        /// The buffer's partition free size.
        free: u64,
    },
    /// `start + channels > 128` or the start rule is broken.
    StartRule {
        /// Start partition.
        start: u64,
        /// Channels.
        channels: u64,
        /// The rule broken.
        rule: &'static str,
    },
    /// The start byte is not a multiple of the element size.
    Misaligned {
        /// Start byte.
        byte: u64,
        /// Element size.
        elem: u32,
    },
    /// The start element lies before the buffer.
    NegativeStart(i64),
}

impl std::fmt::Display for FoldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoldError::NoChannels => write!(f, "the partition axis has num 0 (channels must be 1..=128)"),
            FoldError::NegativePartitionStep(s) => write!(f, "the partition step {s} is negative"),
            FoldError::PartitionStep { step, free } => write!(
                f,
                "the partition step {step} must equal the partition free size {free} (partitions are walked contiguously)"
            ),
            FoldError::StartRule { start, channels, rule } => write!(
                f,
                "{channels} channels starting at partition {start} break the partition start rule: {rule}"
            ),
            FoldError::Misaligned { byte, elem } => write!(
                f,
                "start byte {byte:#x} is not a multiple of the element size {elem}"
            ),
            FoldError::NegativeStart(off) => write!(f, "the start element {off} lies before the buffer"),
        }
    }
}

/// The fold of an on-chip operand's partition axis (fold-partition's
/// contract); `Ok(None)` for HBM operands, which have no partition axis.
pub fn fold_of(m: &Module, o: &Operand) -> Result<Option<Fold>, FoldError> {
    let b = &m.buffers[o.buffer];
    if !b.mem.is_on_chip() {
        return Ok(None);
    }
    let Some(p) = o.ap.dims.first() else {
        return Err(FoldError::NoChannels);
    };
    if p.num == 0 {
        return Err(FoldError::NoChannels);
    }
    if p.step < 0 {
        return Err(FoldError::NegativePartitionStep(p.step));
    }
    let free = b.free_elements().unwrap_or(u64::MAX);
    if p.num > 1 && p.step as u64 != free {
        return Err(FoldError::PartitionStep { step: p.step, free });
    }
    let off = u64::try_from(o.ap.offset).map_err(|_| FoldError::NegativeStart(o.ap.offset))?;
    let start = u64::from(b.partition) + off / free;
    let total = u64::from(m.arch.partitions(b.mem));
    let rule = if start.checked_add(p.num).is_none_or(|e| e > total) {
        Some("start partition + channels must be at most 128")
    } else {
        partition_start_rule(start as u32, p.num as u32)
    };
    if let Some(rule) = rule {
        return Err(FoldError::StartRule { start, channels: p.num, rule });
    }
    let elem = b.dtype.bytes();
    let byte = b.base + (off % free) * u64::from(elem);
    if byte % u64::from(elem) != 0 {
        return Err(FoldError::Misaligned { byte, elem });
    }
    Ok(Some(Fold { partition: start as u32, byte, channels: p.num as u32 }))
}

/// The free dims of an operand: all dims for HBM, all but pair 0 on chip.
pub fn free_dims<'a>(m: &Module, o: &'a Operand) -> &'a [Dim] {
    if m.buffers[o.buffer].mem.is_on_chip() {
        o.ap.dims.get(1..).unwrap_or(&[])
    } else {
        &o.ap.dims
    }
}

/// compact-unit-dims' contract: the free dims with `num != 1`, innermost
/// first (slot 0 = innermost), in the original order otherwise.
pub fn slots_of(m: &Module, o: &Operand) -> SmallVec<[Dim; 4]> {
    free_dims(m, o).iter().rev().filter(|d| d.num != 1).copied().collect()
}

/// The walk of an operand at its current lowering stage: the fold (if
/// attached) gives partitions and start byte, the slots (if attached) give
/// the free dims. Without lowered forms this is [`logical_walk`].
pub fn lowered_walk(m: &Module, o: &Operand) -> Result<Walk, EvalError> {
    let mut w = logical_walk(m, o)?;
    if let Some(l) = o.lowered() {
        if let Some(f) = l.fold {
            w.start_partition = f.partition;
            w.channels = f.channels;
            w.start_byte = f.byte;
        }
        if let Some(slots) = &l.slots {
            w.dims = slots.iter().rev().map(|d| (d.step, d.num)).collect();
        }
    }
    Ok(w)
}
