//! The hardware model's validators (docs/hardware.md, "Validators"), reading
//! bytes, not IR.
//!
//! The reference keeps one copy per arch and role (`mem4d_valid` for
//! destinations on v2/v3/v4, `tensor4d_valid` for sources on v3/v4, and their
//! 1D..3D twins); here they share one implementation parameterised by arch,
//! role and N. Each failure names the check and the byte offset it read.

use super::addr4::{
    Addr4, ADDRESS_MASK, FORM_SHIFT, OFFSET_MASK, REGION_MASK, REGION_SHIFT, RESERVED_BIT, WINDOWS,
};
use super::arch::{partition_start_rule, Arch, Memory, MemorySet};
use super::descriptor::{
    is_two_window, num_offset, size, step_offset, INDEX_WORD_OFFSET, MAX_SLOTS,
};
use super::dtype::Dtype;
use super::encoders::{DescriptorKind, Direction};
use std::fmt;

/// A failed validator check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The validator and check that failed (`mem4d_valid: num3 != 0`).
    pub check: String,
    /// Byte offset of the field the check read.
    pub offset: usize,
    /// Why, with the values.
    pub reason: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{:#x}: {}: {}", self.offset, self.check, self.reason)
    }
}

fn fail(check: impl Into<String>, offset: usize, reason: impl Into<String>) -> Invalid {
    Invalid {
        check: check.into(),
        offset,
        reason: reason.into(),
    }
}

/// `tensor_start_addr_valid(word, dtype, arch, sbuf_ok, psum_ok)`: the region
/// of `word & 0x1FFFFFFF` is SBUF (if allowed) or PSUM (if allowed); the
/// partition and byte lie inside that memory on `arch`; the byte is a multiple
/// of the dtype size. `at` is the word's byte offset, for the report.
#[inline]
pub fn tensor_start_addr_valid(
    word: u32,
    dtype: Dtype,
    arch: Arch,
    sbuf_ok: bool,
    psum_ok: bool,
    at: usize,
) -> Result<(), Invalid> {
    const CHECK: &str = "tensor_start_addr_valid";
    let w = word & ADDRESS_MASK;
    let region = (w & REGION_MASK) >> REGION_SHIFT;
    let Some(win) = WINDOWS.iter().find(|x| x.region == region) else {
        return Err(fail(
            CHECK,
            at + 3,
            format!("region {region} is neither SBUF (0) nor PSUM (1)"),
        ));
    };
    let allowed = match win.mem {
        Memory::Sbuf => sbuf_ok,
        Memory::Psum => psum_ok,
        Memory::Hbm => false,
    };
    if !allowed {
        return Err(fail(
            CHECK,
            at + 3,
            format!("the operand may not address {}", win.mem),
        ));
    }
    let (partition, byte) = win.split(w & OFFSET_MASK);
    if partition >= arch.partitions(win.mem) {
        return Err(fail(
            CHECK,
            at,
            format!("partition {partition} is outside {}", win.mem),
        ));
    }
    let limit = arch.bytes_per_partition(win.mem);
    if u64::from(byte) >= limit {
        return Err(fail(
            CHECK,
            at,
            format!(
                "byte {byte:#x} is outside {}'s {limit:#x} bytes per partition on {arch}",
                win.mem
            ),
        ));
    }
    // Element sizes are powers of two.
    if byte & (dtype.bytes() - 1) != 0 {
        return Err(fail(
            CHECK,
            at,
            format!(
                "byte {byte:#x} is not a multiple of the {dtype} size {}",
                dtype.bytes()
            ),
        ));
    }
    Ok(())
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The common case of [`descriptor_valid`] in a few integer operations: a
/// plain-form descriptor whose every check passes. `false` means "not this
/// fast case", never "invalid"; the full checks then decide. A property test
/// holds the two to the same verdict on random bytes.
#[inline]
pub fn plain_descriptor_ok(
    bytes: &[u8],
    n: usize,
    dtype: Dtype,
    arch: Arch,
    mems: MemorySet,
) -> bool {
    if !(1..=MAX_SLOTS).contains(&n) || bytes.len() != size(n) {
        return false;
    }
    let word0 = rd32(bytes, 0);
    // Reserved bit and form bits clear: plain form.
    if word0 & (RESERVED_BIT | (3 << FORM_SHIFT)) != 0 {
        return false;
    }
    // WINDOWS is indexed by region code (checked by a test in addr4).
    let region = (word0 & REGION_MASK) >> REGION_SHIFT;
    let Some(win) = WINDOWS.get(region as usize) else {
        return false;
    };
    if !mems.contains(win.mem) {
        return false;
    }
    let (partition, byte) = win.split(word0 & OFFSET_MASK);
    if partition >= arch.partitions(win.mem)
        || u64::from(byte) >= arch.bytes_per_partition(win.mem)
        || byte & (dtype.bytes() - 1) != 0
    {
        return false;
    }
    if n >= 3 && rd16(bytes, step_offset(n, 2)) == 0 {
        return false;
    }
    // All counts nonzero: the u16 lanes of one word, missing lanes set to
    // 0xFFFF, tested with the classic has-zero-lane bit trick.
    let mut x = u64::MAX << (16 * n - 1) << 1;
    for (i, c) in bytes[num_offset(n, 0)..size(n)].chunks_exact(2).enumerate() {
        x |= u64::from(u16::from_le_bytes([c[0], c[1]])) << (16 * i);
    }
    (x.wrapping_sub(0x0001_0001_0001_0001) & !x & 0x8000_8000_8000_8000) == 0
}

/// The shared body of `mem<N>d_valid` (destination) and `tensor<N>d_valid`
/// (source) for `arch`: the first failed check, as the reference reports.
pub fn descriptor_valid(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    dir: Direction,
    mems: MemorySet,
) -> Result<(), Invalid> {
    if plain_descriptor_ok(bytes, usize::from(kind.slots()), dtype, arch, mems) {
        return Ok(());
    }
    first_failure(bytes, kind, dtype, arch, dir, mems)
}

/// The full checks of [`descriptor_valid`], kept out of line: only a
/// descriptor off the fast path gets here.
#[cold]
#[inline(never)]
fn first_failure(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    dir: Direction,
    mems: MemorySet,
) -> Result<(), Invalid> {
    let mut first = None;
    run_checks(bytes, kind, dtype, arch, dir, mems, |e| {
        first = Some(e);
        false
    });
    first.map_or(Ok(()), Err)
}

/// Every check of [`descriptor_valid`] that fails, in byte order of the
/// checks, instead of only the first (for `apir-dis`).
pub fn descriptor_failures(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    dir: Direction,
    mems: MemorySet,
) -> Vec<Invalid> {
    let mut all = Vec::new();
    run_checks(bytes, kind, dtype, arch, dir, mems, |e| {
        all.push(e);
        true
    });
    all
}

/// The dtype code the reference validates a two-window (gather) source's
/// data window with, whatever the operand's own dtype.
pub const TWO_WINDOW_DATA_DTYPE_CODE: u8 = 9;

/// The dtype a two-window source's data window is validated as
/// ([`TWO_WINDOW_DATA_DTYPE_CODE`]).
pub fn two_window_data_dtype() -> Dtype {
    Dtype::from_code(TWO_WINDOW_DATA_DTYPE_CODE).unwrap_or(Dtype::U32)
}

/// Whether the validators reject step 0 in `slot` of a `kind` descriptor
/// (a broadcast): slot 2 of 3D and 4D descriptors (`step2 is 0`).
pub fn zero_step_rejected(kind: DescriptorKind, slot: usize) -> bool {
    kind.slots() >= 3 && slot == 2
}

/// Runs the checks, handing each failure to `report`; stops when it returns
/// false. Nothing is allocated unless a check fails.
#[inline]
fn run_checks(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    dir: Direction,
    mems: MemorySet,
    mut report: impl FnMut(Invalid) -> bool,
) {
    macro_rules! bad {
        ($e:expr) => {
            if !report($e) {
                return;
            }
        };
    }
    macro_rules! check {
        ($e:expr) => {
            if let Err(e) = $e {
                if !report(e) {
                    return;
                }
            }
        };
    }
    let n = usize::from(kind.slots());
    let name = validator_name(dir, n);
    let wrap = |e: Invalid| fail(format!("{name}: {}", e.check), e.offset, e.reason);
    if !(1..=MAX_SLOTS).contains(&n) || bytes.len() != size(n) {
        let msg = format!(
            "{} is {} bytes, got {}",
            kind.name(),
            size(n.clamp(1, MAX_SLOTS)),
            bytes.len()
        );
        report(fail(name, 0, msg));
        return;
    }
    let (sbuf_ok, psum_ok) = (mems.contains(Memory::Sbuf), mems.contains(Memory::Psum));
    let word0 = rd32(bytes, 0);
    if word0 & RESERVED_BIT != 0 {
        bad!(fail(name, 3, "reserved bit 31 of ADDR4 is set"));
    }
    let form = (word0 >> FORM_SHIFT) & 3;
    if form >= 2 {
        bad!(fail(name, 3, format!("ADDR4 form {form} is invalid")));
    }
    if is_two_window(word0) {
        if n != MAX_SLOTS {
            let msg = format!(
                "the two-window form exists only for 4D descriptors, not {}",
                kind.name()
            );
            report(fail(name, 3, msg));
            return;
        }
        // Data window: checked with dtype code 9, as in the reference.
        let data_dtype = two_window_data_dtype();
        check!(tensor_start_addr_valid(word0, data_dtype, arch, sbuf_ok, psum_ok, 0).map_err(wrap));
        let flags = bytes[INDEX_WORD_OFFSET + 3] & 0xE0;
        if flags != 0 {
            bad!(fail(
                name,
                INDEX_WORD_OFFSET + 3,
                format!("second-window flags {flags:#04x} are set")
            ));
        }
        let word1 = rd32(bytes, INDEX_WORD_OFFSET);
        check!(
            tensor_start_addr_valid(word1, dtype, arch, sbuf_ok, psum_ok, INDEX_WORD_OFFSET)
                .map_err(wrap)
        );
        return;
    }
    check!(tensor_start_addr_valid(word0, dtype, arch, sbuf_ok, psum_ok, 0).map_err(wrap));
    if zero_step_rejected(kind, 2) && rd16(bytes, step_offset(n, 2)) == 0 {
        bad!(fail(name, step_offset(n, 2), "step2 is 0"));
    }
    // One slice for the count array keeps the sweep free of bounds checks.
    let nums = &bytes[num_offset(n, 0)..num_offset(n, 0) + 2 * n];
    for (i, c) in nums.chunks_exact(2).enumerate() {
        if c[0] == 0 && c[1] == 0 {
            bad!(fail(name, num_offset(n, i), format!("num{i} is 0")));
        }
    }
}

/// The reference's name of the validator for a role and slot count.
pub fn validator_name(dir: Direction, n: usize) -> &'static str {
    const MEM: [&str; 4] = ["mem1d_valid", "mem2d_valid", "mem3d_valid", "mem4d_valid"];
    const TENSOR: [&str; 4] = [
        "tensor1d_valid",
        "tensor2d_valid",
        "tensor3d_valid",
        "tensor4d_valid",
    ];
    let i = n.clamp(1, 4) - 1;
    match dir {
        Direction::Write => MEM[i],
        Direction::Read => TENSOR[i],
    }
}

/// `mem<N>d_valid(desc, dtype, psum_ok, sbuf_ok)` for `arch` (destination).
pub fn mem_nd_valid(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    mems: MemorySet,
) -> Result<(), Invalid> {
    descriptor_valid(bytes, kind, dtype, arch, Direction::Write, mems)
}

/// `tensor<N>d_valid(desc, dtype, psum_ok, sbuf_ok)` for `arch` (source).
pub fn tensor_nd_valid(
    bytes: &[u8],
    kind: DescriptorKind,
    dtype: Dtype,
    arch: Arch,
    mems: MemorySet,
) -> Result<(), Invalid> {
    descriptor_valid(bytes, kind, dtype, arch, Direction::Read, mems)
}

/// `check_m4d_active_channels(desc, channels)`: at least one channel; the
/// start partition decoded from word 0 plus `channels` is at most 128; the
/// partition start rule holds.
#[inline(always)]
pub fn check_m4d_active_channels(bytes: &[u8], channels: u32, arch: Arch) -> Result<(), Invalid> {
    const CHECK: &str = "check_m4d_active_channels";
    if bytes.len() < 4 {
        return Err(fail(CHECK, 0, "descriptor is shorter than its ADDR4 word"));
    }
    if channels == 0 {
        return Err(fail(CHECK, 0, "channels is 0"));
    }
    let word = rd32(bytes, 0) & !(3 << FORM_SHIFT);
    let a = Addr4::decode(word, arch).map_err(|e| fail(CHECK, 0, e.0))?;
    if let Some(rule) = partition_start_rule(u64::from(a.partition), u64::from(channels)) {
        return Err(fail(
            CHECK,
            0,
            format!("{channels} channels from partition {}: {rule}", a.partition),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::descriptor::Descriptor;

    #[test]
    fn reports_the_failing_offset() {
        let k = DescriptorKind::MemPattern(4);
        let mut d = Descriptor::unit(k, 0);
        d.nums[3] = 0;
        let e = mem_nd_valid(&d.encode(), k, Dtype::F32, Arch::V2, MemorySet::SP).unwrap_err();
        assert_eq!((e.check.as_str(), e.offset), ("mem4d_valid", 0x12));
        d.nums[3] = 1;
        d.steps[2] = 0;
        let e = mem_nd_valid(&d.encode(), k, Dtype::F32, Arch::V2, MemorySet::SP).unwrap_err();
        assert_eq!(e.offset, 8);
        // 2D has no step2 check.
        let k2 = DescriptorKind::Tensor(2);
        assert!(tensor_nd_valid(
            &Descriptor::unit(k2, 0).encode(),
            k2,
            Dtype::F32,
            Arch::V2,
            MemorySet::S
        )
        .is_ok());
    }

    #[test]
    fn memory_and_alignment() {
        let k = DescriptorKind::Tensor(1);
        let psum = Descriptor::unit(k, 1 << 25).encode();
        assert!(tensor_nd_valid(&psum, k, Dtype::F32, Arch::V3, MemorySet::S).is_err());
        assert!(tensor_nd_valid(&psum, k, Dtype::F32, Arch::V3, MemorySet::SP).is_ok());
        let odd = Descriptor::unit(k, 2).encode();
        assert_eq!(
            tensor_nd_valid(&odd, k, Dtype::F32, Arch::V3, MemorySet::S)
                .unwrap_err()
                .offset,
            0
        );
        assert!(tensor_nd_valid(&odd, k, Dtype::Bf16, Arch::V3, MemorySet::S).is_ok());
    }

    #[test]
    fn failures_lists_every_check() {
        let k = DescriptorKind::MemPattern(4);
        let mut d = Descriptor::unit(k, 1 << 31);
        d.nums = [0, 1, 0, 1];
        d.steps[2] = 0;
        let all = descriptor_failures(
            &d.encode(),
            k,
            Dtype::F32,
            Arch::V2,
            Direction::Write,
            MemorySet::SP,
        );
        let offsets: Vec<_> = all.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, [3, 8, 0xC, 0x10]);
        let first = mem_nd_valid(&d.encode(), k, Dtype::F32, Arch::V2, MemorySet::SP).unwrap_err();
        assert_eq!(first, all[0]);
    }

    #[test]
    fn channels() {
        let d = Descriptor::unit(DescriptorKind::Tensor(4), 32 * 0x40000).encode();
        assert!(check_m4d_active_channels(&d, 32, Arch::V2).is_ok());
        assert!(check_m4d_active_channels(&d, 33, Arch::V2).is_err());
        assert!(check_m4d_active_channels(&d, 0, Arch::V2).is_err());
    }
}
