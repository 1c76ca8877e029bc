//! Descriptor byte layouts (docs/hardware.md, "Descriptor layouts"; ref
//! CONFIRMED): the 4+4N rule.
//!
//! A descriptor with N free slots is `4 + 4N` bytes, little-endian:
//! `[ADDR4 u32 @+0][step_0..step_{N-1} i16 @+4+2i][num_0..num_{N-1} u16 @+(4+2N)+2i]`.
//! Strides first, counts second. Unused slots hold `{step = 1, num = 1}`.
//! In the two-window form (4D only) the u32 at +4 is the index window's ADDR4
//! instead of step_0/step_1. Every offset of every descriptor is computed by
//! the functions of this module and nowhere else.

use super::addr4::{FORM_MARKER_MASK, FORM_SHIFT, TWO_WINDOW_MARKER};
use super::encoders::DescriptorKind;
use smallvec::SmallVec;
use std::fmt;

/// Largest slot count of any descriptor.
pub const MAX_SLOTS: usize = 4;

/// Largest count a `num` field (u16) holds; 0 is not a count.
pub const MAX_NUM: u64 = u16::MAX as u64;

/// Whether `step` fits a `step` field (i16, in elements).
pub fn step_fits(step: i64) -> bool {
    i16::try_from(step).is_ok()
}

/// Size in bytes of a descriptor with `n` slots.
pub const fn size(n: usize) -> usize {
    4 + 4 * n
}

/// Byte offset of `step_i` in a descriptor with `n` slots.
pub const fn step_offset(_n: usize, i: usize) -> usize {
    4 + 2 * i
}

/// Byte offset of `num_i` in a descriptor with `n` slots (count base `4 + 2N`).
pub const fn num_offset(n: usize, i: usize) -> usize {
    4 + 2 * n + 2 * i
}

/// Byte offset of the index window's ADDR4 in the two-window form.
pub const INDEX_WORD_OFFSET: usize = 4;
/// Byte offset of the form marker byte.
pub const FORM_BYTE_OFFSET: usize = 3;

/// Descriptor bytes (at most 20).
pub type DescriptorBytes = SmallVec<[u8; 20]>;

/// A descriptor's fields, as raw wire values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// Struct kind (fixes N).
    pub kind: DescriptorKind,
    /// ADDR4 word at +0.
    pub addr: u32,
    /// Two-window form: the index window's ADDR4 at +4 (then `steps[0]` and
    /// `steps[1]` are not on the wire and read as 1).
    pub index_addr: Option<u32>,
    /// Steps per slot (slot 0 innermost); entries `>= N` are unused.
    pub steps: [i16; MAX_SLOTS],
    /// Nums per slot; entries `>= N` are unused.
    pub nums: [u16; MAX_SLOTS],
}

/// Why bytes cannot be decoded as a descriptor of a kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Whether the word's form bits mark the two-window form.
pub fn is_two_window(addr: u32) -> bool {
    (addr.to_le_bytes()[FORM_BYTE_OFFSET] & FORM_MARKER_MASK) == TWO_WINDOW_MARKER
}

impl Descriptor {
    /// A descriptor with every slot unit-filled.
    pub fn unit(kind: DescriptorKind, addr: u32) -> Self {
        Descriptor {
            kind,
            addr,
            index_addr: None,
            steps: [1; MAX_SLOTS],
            nums: [1; MAX_SLOTS],
        }
    }

    /// Slot count N.
    pub fn slots(&self) -> usize {
        usize::from(self.kind.slots())
    }

    /// Writes the `4 + 4N` bytes into `out` (which must be exactly that long).
    #[inline(always)]
    pub fn write(&self, out: &mut [u8]) {
        let n = self.slots().min(MAX_SLOTS);
        debug_assert_eq!(out.len(), size(n));
        out[0..4].copy_from_slice(&self.addr.to_le_bytes());
        // Strides first, counts second (two arrays, never interleaved).
        let (steps, nums) = out[step_offset(n, 0)..size(n)].split_at_mut(2 * n);
        for (i, (s, c)) in steps
            .chunks_exact_mut(2)
            .zip(nums.chunks_exact_mut(2))
            .enumerate()
        {
            s.copy_from_slice(&self.steps[i].to_le_bytes());
            c.copy_from_slice(&self.nums[i].to_le_bytes());
        }
        if let Some(index) = self.index_addr {
            out[INDEX_WORD_OFFSET..INDEX_WORD_OFFSET + 4].copy_from_slice(&index.to_le_bytes());
        }
    }

    /// The descriptor's bytes.
    pub fn encode(&self) -> DescriptorBytes {
        let len = size(self.slots().min(MAX_SLOTS));
        let mut buf = [0u8; size(MAX_SLOTS)];
        self.write(&mut buf[..len]);
        SmallVec::from_buf_and_len(buf, len)
    }

    /// Decodes `bytes` as a `kind` descriptor, branching on the form bits
    /// before reading +4. Fails only on a wrong length; field validity is the
    /// validators' business.
    pub fn decode(kind: DescriptorKind, bytes: &[u8]) -> Result<Descriptor, DecodeError> {
        let n = usize::from(kind.slots());
        if bytes.len() != size(n) {
            return Err(DecodeError(format!(
                "{} is {} bytes, got {}",
                kind.name(),
                size(n),
                bytes.len()
            )));
        }
        let addr = rd32(bytes, 0);
        let mut d = Descriptor::unit(kind, addr);
        for i in 0..n {
            d.steps[i] = rd16(bytes, step_offset(n, i)) as i16;
            d.nums[i] = rd16(bytes, num_offset(n, i));
        }
        if is_two_window(addr) && n == MAX_SLOTS {
            d.index_addr = Some(rd32(bytes, INDEX_WORD_OFFSET));
            d.steps[0] = 1;
            d.steps[1] = 1;
        }
        Ok(d)
    }

    /// The annotated fields, in byte order: `(offset, length, name, value)`.
    pub fn fields(&self) -> Vec<Field> {
        let mut out = Vec::new();
        self.each_field(|offset, len, name, value| {
            out.push(Field {
                offset,
                len,
                name: name.to_string(),
                value,
            });
        });
        out
    }

    /// Calls `f` with each field of [`Descriptor::fields`], in byte order,
    /// without building the list.
    pub(crate) fn each_field(&self, mut f: impl FnMut(usize, usize, FieldName, FieldValue)) {
        let n = self.slots();
        f(0, 4, FieldName::Addr4, FieldValue::Addr(self.addr));
        for i in 0..n {
            if let (Some(index), 0) = (self.index_addr, i) {
                f(
                    INDEX_WORD_OFFSET,
                    4,
                    FieldName::IndexAddr4,
                    FieldValue::Addr(index),
                );
            }
            if self.index_addr.is_some() && i < 2 {
                continue;
            }
            f(
                step_offset(n, i),
                2,
                FieldName::Step(i),
                FieldValue::Step(self.steps[i]),
            );
        }
        for i in 0..n {
            f(
                num_offset(n, i),
                2,
                FieldName::Num(i),
                FieldValue::Num(self.nums[i]),
            );
        }
    }
}

/// The name of a field of [`Descriptor::each_field`]: `addr4`,
/// `index_addr4`, `step<i>` or `num<i>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldName {
    /// The ADDR4 word.
    Addr4,
    /// The two-window form's index ADDR4 word.
    IndexAddr4,
    /// The step of slot `i`.
    Step(usize),
    /// The count of slot `i`.
    Num(usize),
}

impl FieldName {
    /// The name's word and slot: `("step", Some(2))` for `step2`.
    fn parts(self) -> (&'static str, Option<usize>) {
        match self {
            FieldName::Addr4 => ("addr4", None),
            FieldName::IndexAddr4 => ("index_addr4", None),
            FieldName::Step(i) => ("step", Some(i)),
            FieldName::Num(i) => ("num", Some(i)),
        }
    }

    /// The name onto `out`.
    pub(crate) fn write(self, out: &mut String) {
        let (word, i) = self.parts();
        out.push_str(word);
        if let Some(i) = i {
            out.push_str(itoa::Buffer::new().format(i));
        }
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, i) = self.parts();
        f.write_str(word)?;
        match i {
            Some(i) => write!(f, "{i}"),
            None => Ok(()),
        }
    }
}

/// One field of an annotated dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Byte offset.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// Field name (`addr4`, `step2`, `num0`).
    pub name: String,
    /// Value.
    pub value: FieldValue,
}

/// A field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue {
    /// An ADDR4 word.
    Addr(u32),
    /// A signed step.
    Step(i16),
    /// An unsigned count.
    Num(u16),
}

/// The form bits of an ADDR4 word, for dumps.
pub fn form_bits(addr: u32) -> u32 {
    (addr >> FORM_SHIFT) & 3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets from the reference page's table, by hand.
    #[test]
    fn offsets_match_the_reference_table() {
        assert_eq!([size(1), size(2), size(3), size(4)], [8, 12, 16, 20]);
        assert_eq!(
            (0..4).map(|i| step_offset(4, i)).collect::<Vec<_>>(),
            [4, 6, 8, 0xA]
        );
        assert_eq!(
            (0..4).map(|i| num_offset(4, i)).collect::<Vec<_>>(),
            [0xC, 0xE, 0x10, 0x12]
        );
        assert_eq!(
            (0..3).map(|i| num_offset(3, i)).collect::<Vec<_>>(),
            [0xA, 0xC, 0xE]
        );
        assert_eq!(
            (0..2).map(|i| num_offset(2, i)).collect::<Vec<_>>(),
            [8, 0xA]
        );
        assert_eq!(num_offset(1, 0), 6);
    }

    #[test]
    fn decode_rejects_wrong_lengths() {
        for len in [0, 8, 19, 21] {
            assert!(Descriptor::decode(DescriptorKind::Tensor(4), &vec![0; len]).is_err());
        }
    }
}
