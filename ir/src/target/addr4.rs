//! ADDR4: the 32-bit start-address word at +0 of every descriptor
//! (docs/hardware.md, "ADDR4: the start-address word").
//!
//! Fixed by the reference: bits 25..28 (`0x1E000000`) are the region field and
//! the PSUM window base is `1 << 25`; byte +3 `& 0x60 == 0x20` marks the
//! two-window form; `& 0x1FFFFFFF` strips the form bits. Completed by the
//! project: bits 0..24 hold the window offset (`partition * stride + byte`,
//! strides in [`WINDOWS`]), region 0 = SBUF and 1 = PSUM, form 0 = plain and
//! 1 = two-window, bit 31 reserved.
//!
//! Known divergence: the reference says the v4 source check bounds the masked
//! address by `0x3FFFFF`; under this window model that bound would reject
//! every SBUF partition above 15, so apir bounds each region by its own size
//! (partitions x bytes per partition of the arch) instead.

use super::arch::{Arch, Memory};
use std::fmt;

/// Mask of the window-offset field (bits 0..24).
pub const OFFSET_MASK: u32 = 0x01FF_FFFF;
/// Shift of the region field.
pub const REGION_SHIFT: u32 = 25;
/// Mask of the region field in place (bits 25..28; ref).
pub const REGION_MASK: u32 = 0x1E00_0000;
/// Shift of the form field.
pub const FORM_SHIFT: u32 = 29;
/// Mask that strips the form and reserved bits (ref).
pub const ADDRESS_MASK: u32 = 0x1FFF_FFFF;
/// The reserved bit.
pub const RESERVED_BIT: u32 = 1 << 31;
/// Byte +3 mask of the form marker (ref).
pub const FORM_MARKER_MASK: u8 = 0x60;
/// Byte +3 value of the two-window form marker (ref: `desc[+3] |= 0x20`).
pub const TWO_WINDOW_MARKER: u8 = 0x20;

/// The address window of one on-chip memory: region code and partition stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Memory.
    pub mem: Memory,
    /// Region field value.
    pub region: u32,
    /// log2 of the bytes between consecutive partitions in the window
    /// (strides are powers of two, so decoding needs no division).
    pub partition_shift: u32,
}

impl Window {
    /// Bytes between consecutive partitions in the window.
    pub const fn partition_stride(&self) -> u32 {
        1 << self.partition_shift
    }

    /// Splits a window offset into (partition, byte).
    pub const fn split(&self, offset: u32) -> (u32, u32) {
        (
            offset >> self.partition_shift,
            offset & (self.partition_stride() - 1),
        )
    }
}

/// The windows, one per on-chip memory (same on every arch; the per-arch
/// part is the bytes per partition, [`Arch::bytes_per_partition`]).
pub const WINDOWS: [Window; 2] = [
    Window {
        mem: Memory::Sbuf,
        region: 0,
        partition_shift: 18,
    }, // 0x40000
    Window {
        mem: Memory::Psum,
        region: 1,
        partition_shift: 14,
    }, // 0x4000
];

/// The window of `mem`, if it has one.
#[inline]
pub fn window(mem: Memory) -> Option<&'static Window> {
    WINDOWS.iter().find(|w| w.mem == mem)
}

/// The ADDR4 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// One start address.
    Plain,
    /// Data window at +0, index window at +4 (`local_gather` source).
    TwoWindow,
}

/// A decoded ADDR4 word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr4 {
    /// SBUF or PSUM.
    pub mem: Memory,
    /// Start partition.
    pub partition: u32,
    /// Byte inside the partition.
    pub byte: u32,
    /// Form.
    pub form: Form,
}

/// Why a word is not a valid ADDR4 (or an ADDR4 cannot be encoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr4Error(pub String);

impl fmt::Display for Addr4Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Addr4 {
    /// Encodes the word, checking every field against `arch`.
    #[inline(always)]
    pub fn encode(&self, arch: Arch) -> Result<u32, Addr4Error> {
        let w = window(self.mem)
            .ok_or_else(|| Addr4Error(format!("{} has no ADDR4 window", self.mem)))?;
        let parts = arch.partitions(self.mem);
        if self.partition >= parts {
            return Err(Addr4Error(format!(
                "partition {} is outside {}'s {parts} partitions",
                self.partition, self.mem
            )));
        }
        let limit = arch.bytes_per_partition(self.mem);
        if u64::from(self.byte) >= limit {
            return Err(Addr4Error(format!(
                "byte {:#x} is outside {}'s {limit:#x} bytes per partition on {arch}",
                self.byte, self.mem
            )));
        }
        let offset = (self.partition << w.partition_shift) + self.byte;
        let form = match self.form {
            Form::Plain => 0,
            Form::TwoWindow => 1,
        };
        Ok(offset | (w.region << REGION_SHIFT) | (form << FORM_SHIFT))
    }

    /// Decodes a word, checking it against `arch`. The exact inverse of
    /// [`Addr4::encode`].
    #[inline(always)]
    pub fn decode(word: u32, arch: Arch) -> Result<Addr4, Addr4Error> {
        if word & RESERVED_BIT != 0 {
            return Err(Addr4Error("reserved bit 31 is set".into()));
        }
        let form = match (word >> FORM_SHIFT) & 3 {
            0 => Form::Plain,
            1 => Form::TwoWindow,
            f => {
                return Err(Addr4Error(format!(
                    "form {f} is invalid (0 = plain, 1 = two-window)"
                )))
            }
        };
        let region = (word & REGION_MASK) >> REGION_SHIFT;
        let w = WINDOWS.iter().find(|w| w.region == region).ok_or_else(|| {
            Addr4Error(format!("region {region} is invalid (0 = SBUF, 1 = PSUM)"))
        })?;
        let offset = word & OFFSET_MASK;
        let (partition, byte) = w.split(offset);
        let parts = arch.partitions(w.mem);
        if partition >= parts {
            return Err(Addr4Error(format!(
                "partition {partition} is outside {}'s {parts} partitions",
                w.mem
            )));
        }
        let limit = arch.bytes_per_partition(w.mem);
        if u64::from(byte) >= limit {
            return Err(Addr4Error(format!(
                "byte {byte:#x} is outside {}'s {limit:#x} bytes per partition on {arch}",
                w.mem
            )));
        }
        Ok(Addr4 {
            mem: w.mem,
            partition,
            byte,
            form,
        })
    }
}

impl fmt::Display for Addr4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let form = match self.form {
            Form::Plain => "plain",
            Form::TwoWindow => "two-window",
        };
        write!(
            f,
            "{} partition {} byte {:#x} ({form})",
            self.mem, self.partition, self.byte
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_facts() {
        // PSUM window base is 1 << 25 (ref).
        let psum0 = Addr4 {
            mem: Memory::Psum,
            partition: 0,
            byte: 0,
            form: Form::Plain,
        };
        assert_eq!(psum0.encode(Arch::V2).unwrap(), 0x0200_0000);
        // The two-window marker is 0x20 in byte +3 (ref).
        let tw = Addr4 {
            mem: Memory::Sbuf,
            partition: 0,
            byte: 0,
            form: Form::TwoWindow,
        };
        assert_eq!(
            tw.encode(Arch::V2).unwrap().to_le_bytes()[3] & FORM_MARKER_MASK,
            TWO_WINDOW_MARKER
        );
        assert_eq!(REGION_MASK, 0x1E00_0000);
        assert_eq!(WINDOWS[0].partition_stride(), 0x40000);
        // The validators' fast path indexes the table by region code.
        assert!(WINDOWS
            .iter()
            .enumerate()
            .all(|(i, w)| w.region as usize == i));
        assert_eq!(WINDOWS[1].partition_stride(), 0x4000);
    }

    #[test]
    fn round_trips_on_every_arch() {
        for arch in Arch::ALL {
            for mem in [Memory::Sbuf, Memory::Psum] {
                for partition in [0, 1, 63, 127] {
                    let last = (arch.bytes_per_partition(mem) - 4) as u32;
                    for byte in [0, 4, last] {
                        for form in [Form::Plain, Form::TwoWindow] {
                            let a = Addr4 {
                                mem,
                                partition,
                                byte,
                                form,
                            };
                            let w = a.encode(arch).unwrap();
                            assert_eq!(Addr4::decode(w, arch).unwrap(), a);
                            assert_eq!(w & ADDRESS_MASK & !(1 << 29), w & !(1 << 29));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn per_arch_byte_bounds() {
        let a = Addr4 {
            mem: Memory::Sbuf,
            partition: 127,
            byte: 0x30000,
            form: Form::Plain,
        };
        assert!(a.encode(Arch::V2).is_err());
        assert!(a.encode(Arch::V3).is_ok());
        assert!(Addr4::decode(a.encode(Arch::V4).unwrap(), Arch::V2).is_err());
        assert!(Addr4::decode(2 << 25, Arch::V2).is_err());
        assert!(Addr4::decode(1 << 31, Arch::V2).is_err());
        assert!(Addr4::decode(2 << 29, Arch::V2).is_err());
    }
}
