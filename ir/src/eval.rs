//! The reference evaluator of access-pattern semantics (docs/ir.md).
//!
//! An operand, at whatever lowering stage, is turned into a [`Walk`]: a start
//! `(memory, partition, byte)`, a number of partitions walked one after the
//! other, and free dims in elements. [`Walk::visit`] enumerates the visited
//! addresses in order. [`logical_walk`] builds the walk of a logical AP
//! straight from the flat-element definition; later lowering stages (folded,
//! compacted, decoded from wire bytes) build theirs from their own fields, and
//! tests compare the sequences.

use crate::module::{Module, Operand};
use crate::target::Memory;
use smallvec::SmallVec;
use std::fmt;

/// One visited byte address (of the first byte of an element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    /// Memory.
    pub mem: Memory,
    /// Partition (0 for HBM).
    pub partition: u32,
    /// Byte inside the partition (on-chip) or absolute byte address (HBM).
    pub byte: u64,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mem.is_on_chip() {
            write!(f, "{}[p{}]+{:#x}", self.mem, self.partition, self.byte)
        } else {
            write!(f, "{}@{:#x}", self.mem, self.byte)
        }
    }
}

/// Why an operand cannot be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

/// A normalised walk: partitions `start_partition .. start_partition +
/// channels` outermost, then the free dims row-major, each element at
/// `start_byte + sum(i_k * step_k) * elem_bytes` inside its partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// Memory.
    pub mem: Memory,
    /// First partition (0 for HBM).
    pub start_partition: u32,
    /// Partitions walked (1 for HBM).
    pub channels: u32,
    /// Byte of the first element inside its partition (HBM: absolute address).
    pub start_byte: u64,
    /// Element size in bytes.
    pub elem_bytes: u32,
    /// Free dims `(step in elements, num)`, outermost first.
    pub dims: SmallVec<[(i64, u64); 5]>,
}

impl Walk {
    /// Number of addresses visited (`None` on overflow).
    pub fn len(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(u64::from(self.channels), |a, d| a.checked_mul(d.1))
    }

    /// Whether the walk visits nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Calls `f` on every visited address in order. Stops with an error if an
    /// address would be negative or overflow.
    pub fn visit(&self, mut f: impl FnMut(Address)) -> Result<(), EvalError> {
        if self.dims.iter().any(|d| d.1 == 0) || self.channels == 0 {
            return Ok(());
        }
        let eb = i128::from(self.elem_bytes);
        let k = self.dims.len();
        let mut idx: SmallVec<[u64; 5]> = SmallVec::from_elem(0, k);
        for p in 0..self.channels {
            let partition = self
                .start_partition
                .checked_add(p)
                .ok_or_else(|| EvalError("partition index overflows".into()))?;
            idx.iter_mut().for_each(|i| *i = 0);
            // Odometer over the free dims, carrying the byte offset along.
            let mut off: i128 = 0;
            loop {
                let byte = i128::from(self.start_byte) + off * eb;
                let byte = u64::try_from(byte).map_err(|_| {
                    EvalError(format!(
                        "address {byte} is outside the {} address range",
                        self.mem
                    ))
                })?;
                f(Address {
                    mem: self.mem,
                    partition,
                    byte,
                });
                let mut d = k;
                loop {
                    if d == 0 {
                        break;
                    }
                    d -= 1;
                    let (step, num) = self.dims[d];
                    idx[d] += 1;
                    off += i128::from(step);
                    if idx[d] < num {
                        break;
                    }
                    off -= i128::from(step) * i128::from(num);
                    idx[d] = 0;
                    if d == 0 {
                        d = usize::MAX;
                        break;
                    }
                }
                if d == usize::MAX || k == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Every visited address, in order.
    pub fn addresses(&self) -> Result<Vec<Address>, EvalError> {
        let mut out = Vec::with_capacity(self.len().unwrap_or(0).min(1 << 20) as usize);
        self.visit(|a| out.push(a))?;
        Ok(out)
    }
}

/// The walk of a logical operand, from the definition in docs/ir.md: the buffer is a
/// flat array, partition `i` starts at flat element `i * F`; pair 0 is the
/// partition axis for on-chip buffers. Fails if the operand breaks the
/// partition-axis rules the walk form needs (step = F or one partition) or
/// starts outside its buffer, or names a buffer `m` does not store.
pub fn logical_walk(m: &Module, o: &Operand) -> Result<Walk, EvalError> {
    let b = m
        .buffers
        .get(o.buffer)
        .ok_or_else(|| EvalError(format!("buffer #{} does not exist", o.buffer.as_u32())))?;
    let f = b
        .free_elements()
        .ok_or_else(|| EvalError("buffer size overflows".into()))?;
    if f == 0 {
        return Err(EvalError("the buffer has a zero-sized dimension".into()));
    }
    let eb = b.dtype.bytes();
    let off = u64::try_from(o.ap.offset)
        .map_err(|_| EvalError(format!("negative start element {}", o.ap.offset)))?;
    let dims = &o.ap.dims;
    if !b.mem.is_on_chip() {
        let start = u128::from(b.base) + u128::from(off) * u128::from(eb);
        let start =
            u64::try_from(start).map_err(|_| EvalError("start address overflows".into()))?;
        return Ok(Walk {
            mem: b.mem,
            start_partition: 0,
            channels: 1,
            start_byte: start,
            elem_bytes: eb,
            dims: dims.iter().map(|d| (d.step, d.num)).collect(),
        });
    }
    let Some(p) = dims.first() else {
        return Err(EvalError("an on-chip operand needs a partition dim".into()));
    };
    if p.num > 1 && u64::try_from(p.step).ok() != Some(f) {
        return Err(EvalError(format!(
            "partition step {} differs from the partition free size {f}",
            p.step
        )));
    }
    let partition = u64::from(b.partition) + off / f;
    let channels = u32::try_from(p.num).map_err(|_| EvalError("too many partitions".into()))?;
    let start_byte = u128::from(b.base) + u128::from(off % f) * u128::from(eb);
    Ok(Walk {
        mem: b.mem,
        start_partition: u32::try_from(partition)
            .map_err(|_| EvalError("partition overflows".into()))?,
        channels,
        start_byte: u64::try_from(start_byte)
            .map_err(|_| EvalError("start byte overflows".into()))?,
        elem_bytes: eb,
        dims: dims[1..].iter().map(|d| (d.step, d.num)).collect(),
    })
}

/// Every address a logical operand visits, in order.
pub fn logical_addresses(m: &Module, o: &Operand) -> Result<Vec<Address>, EvalError> {
    logical_walk(m, o)?.addresses()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{AccessPattern, Module};
    use crate::target::{Arch, Dtype};

    #[test]
    fn walks_partitions_then_free_dims() {
        let mut m = Module::new(Arch::V2);
        let bd = m.buffer_data("x", Memory::Sbuf, 32, 0x100, &[4, 8], Dtype::F32);
        let b = m.add_buffer(bd);
        let o = m.operand("src", b, AccessPattern::new(&[(8, 2), (-2, 3)], 8 + 5));
        let got: Vec<_> = logical_addresses(&m, &o)
            .unwrap()
            .iter()
            .map(|a| (a.partition, a.byte))
            .collect();
        // off 13 = partition 1, element 5; free walk 5, 3, 1.
        assert_eq!(
            got,
            vec![
                (33, 0x114),
                (33, 0x10c),
                (33, 0x104),
                (34, 0x114),
                (34, 0x10c),
                (34, 0x104)
            ]
        );
    }

    #[test]
    fn hbm_is_flat() {
        let mut m = Module::new(Arch::V2);
        let bd = m.buffer_data("h", Memory::Hbm, 0, 0x1000, &[16], Dtype::U16);
        let b = m.add_buffer(bd);
        let o = m.operand("src", b, AccessPattern::new(&[(4, 2), (1, 2)], 1));
        let got: Vec<_> = logical_addresses(&m, &o)
            .unwrap()
            .iter()
            .map(|a| a.byte)
            .collect();
        assert_eq!(got, vec![0x1002, 0x1004, 0x100a, 0x100c]);
    }

    #[test]
    fn rejects_strided_partitions() {
        let mut m = Module::new(Arch::V2);
        let bd = m.buffer_data("x", Memory::Sbuf, 0, 0, &[4, 8], Dtype::F32);
        let b = m.add_buffer(bd);
        let o = m.operand("src", b, AccessPattern::new(&[(16, 2), (1, 8)], 0));
        assert!(logical_walk(&m, &o).is_err());
    }
}
