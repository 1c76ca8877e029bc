//! SDMA descriptors, the dataram window and the `neuron_memcpy` methods
//! (docs/hardware.md, "The SDMA descriptor"; recovered from the GpSimd runtime).
//!
//! A staging copy between HBM and a GpSimd core's dataram is a run of
//! `SDMA_CME_BD_DESC` buffer descriptors, 16 bytes each, little-endian:
//!
//! | offset | bytes | field | meaning |
//! | --- | --- | --- | --- |
//! | +0x0 | 2 | `length` | word0 bits 0..15: transfer length **minus one** (1..=65536 bytes) |
//! | +0x2 | 1 | `queue` | word0 bits 16..23: SDMA queue id, `0..QUEUES` |
//! | +0x3 | 1 | `flags` | word0 bit 30 first-of-packet, bit 31 last-of-packet; bits 24..29 reserved, 0 |
//! | +0x4 | 4 | `dram` | word1: dataram address, inside `[DATARAM_BASE, DATARAM_END)` |
//! | +0x8 | 8 | `hbm` | `buf_ptr`: HBM byte address |
//!
//! The reference page gives the struct's size and its three members (`word0`,
//! `word1`, `buf_ptr uint64`) and the dataram window (the `dram_addr >= 0x80000
//! && dram_addr < 0x90000` assertion of `dram_addr_to_soc_addr`). The bit layout
//! inside word0 is project-defined (docs/hardware.md), and so are these rules of
//! [`validate`]:
//!
//! - bits 24..29 of word0 are reserved and must be 0;
//! - the queue id is below [`QUEUES`] (16: the public Neuron driver's
//!   `DMA_MAX_Q_MAX` queues per DMA engine; the reference page names no limit);
//! - not only the start but the whole transfer `[dram, dram + length)` lies in
//!   the dataram window: the reference asserts only the start address, but a
//!   transfer running past `0x90000` would touch memory outside the dataram;
//! - `[hbm, hbm + length)` does not run past the end of the 64-bit address
//!   space (it may end exactly at 2^64).
//!
//! Which ring a descriptor is put on (M2S for HBM -> dataram, S2M for
//! dataram -> HBM) gives the direction; the bytes do not carry it. The layout is
//! the same on every arch. Every offset, mask and limit of the descriptor is
//! written in this module and nowhere else.

use super::descriptor::DecodeError;
use super::validate::Invalid;
use std::fmt;
use std::fmt::Write;

/// First byte address of the dataram (TCM) window in a core's local address
/// space (reference §1, `data_transfer.cpp:160`).
pub const DATARAM_BASE: u32 = 0x8_0000;
/// Size of the dataram window: 64 KiB.
pub const DATARAM_BYTES: u32 = 0x1_0000;
/// One past the last byte address of the dataram window (`0x90000`).
pub const DATARAM_END: u32 = DATARAM_BASE + DATARAM_BYTES;

/// Largest transfer one descriptor moves (pub: the driver limit; the 16-bit
/// `length - 1` field holds exactly this).
pub const MAX_DESCRIPTOR_BYTES: u32 = 0x1_0000;

/// Queue ids are `0..QUEUES` (project-defined limit; the value is the public
/// Neuron driver's `DMA_MAX_Q_MAX` queues per engine).
pub const QUEUES: u32 = 16;

/// Size of one `SDMA_CME_BD_DESC` in bytes.
pub const DESCRIPTOR_SIZE: usize = 16;

/// Byte offset of word0, whose low two bytes hold `length - 1`.
pub const LENGTH_OFFSET: usize = 0;
/// Byte offset of the queue id (word0 bits 16..23).
pub const QUEUE_OFFSET: usize = 2;
/// Byte offset of the flags byte (word0 bits 24..31).
pub const FLAGS_OFFSET: usize = 3;
/// Byte offset of word1, the dataram address.
pub const DRAM_OFFSET: usize = 4;
/// Byte offset of `buf_ptr`, the HBM address.
pub const HBM_OFFSET: usize = 8;

/// word0 bits holding `length - 1`.
pub const LENGTH_MASK: u32 = 0x0000_FFFF;
/// Shift of the queue id in word0.
pub const QUEUE_SHIFT: u32 = 16;
/// word0 bits holding the queue id.
pub const QUEUE_MASK: u32 = 0xFF << QUEUE_SHIFT;
/// Shift of the flags byte in word0.
pub const FLAGS_SHIFT: u32 = 24;
/// word0 bit: first descriptor of a packet.
pub const FIRST_BIT: u32 = 1 << 30;
/// word0 bit: last descriptor of a packet.
pub const LAST_BIT: u32 = 1 << 31;
/// word0 bits that are reserved and must be 0 (bits 24..29).
pub const RESERVED_MASK: u32 = 0x3F00_0000;

/// The name of the validator in reports.
pub const VALIDATOR: &str = "sdma_desc_valid";

/// The wire struct's name in the reference.
pub const STRUCT_NAME: &str = "SDMA_CME_BD_DESC";

/// One SDMA buffer descriptor, as values (the reserved bits are not kept:
/// [`SdmaDescriptor::decode`] drops them and [`validate`] rejects them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SdmaDescriptor {
    /// Bytes moved, `1..=MAX_DESCRIPTOR_BYTES`.
    pub length: u32,
    /// SDMA queue id.
    pub queue: u8,
    /// First descriptor of a packet.
    pub first: bool,
    /// Last descriptor of a packet.
    pub last: bool,
    /// Dataram byte address (word1).
    pub dram: u32,
    /// HBM byte address (`buf_ptr`).
    pub hbm: u64,
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn rd64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn wrong_length(len: usize) -> String {
    format!("{STRUCT_NAME} is {DESCRIPTOR_SIZE} bytes, got {len}")
}

impl SdmaDescriptor {
    /// word0: `length - 1`, queue id and packet flags.
    ///
    /// # Panics
    ///
    /// If `length` is not in `1..=MAX_DESCRIPTOR_BYTES` (such a length has no
    /// encoding; [`split_transfer`] never produces one).
    pub fn word0(&self) -> u32 {
        assert!(
            (1..=MAX_DESCRIPTOR_BYTES).contains(&self.length),
            "SDMA descriptor length {} is not in 1..={MAX_DESCRIPTOR_BYTES}",
            self.length
        );
        let mut w = (self.length - 1) | (u32::from(self.queue) << QUEUE_SHIFT);
        if self.first {
            w |= FIRST_BIT;
        }
        if self.last {
            w |= LAST_BIT;
        }
        w
    }

    /// The 16 descriptor bytes.
    ///
    /// # Panics
    ///
    /// As [`SdmaDescriptor::word0`], on a length outside
    /// `1..=MAX_DESCRIPTOR_BYTES`.
    ///
    /// ```
    /// use apir_ir::target::sdma::{validate, SdmaDescriptor};
    /// let d = SdmaDescriptor { length: 4096, queue: 0, first: true, last: true,
    ///                          dram: 0x80000, hbm: 0x4000_0000 };
    /// let bytes = d.encode();
    /// assert_eq!(bytes[..8], [0xff, 0x0f, 0x00, 0xc0, 0x00, 0x00, 0x08, 0x00]);
    /// assert_eq!(validate(&bytes), Ok(()));
    /// assert_eq!(SdmaDescriptor::decode(&bytes), Ok(d));
    /// ```
    pub fn encode(&self) -> [u8; DESCRIPTOR_SIZE] {
        let mut out = [0u8; DESCRIPTOR_SIZE];
        out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&self.word0().to_le_bytes());
        out[DRAM_OFFSET..DRAM_OFFSET + 4].copy_from_slice(&self.dram.to_le_bytes());
        out[HBM_OFFSET..HBM_OFFSET + 8].copy_from_slice(&self.hbm.to_le_bytes());
        out
    }

    /// Decodes 16 bytes. Fails only on a wrong length; field validity
    /// (queue range, reserved bits, the dataram window) is [`validate`]'s
    /// business, and reserved bits are dropped here.
    pub fn decode(bytes: &[u8]) -> Result<SdmaDescriptor, DecodeError> {
        if bytes.len() != DESCRIPTOR_SIZE {
            return Err(DecodeError(wrong_length(bytes.len())));
        }
        let w0 = rd32(bytes, LENGTH_OFFSET);
        Ok(SdmaDescriptor {
            length: (w0 & LENGTH_MASK) + 1,
            queue: ((w0 & QUEUE_MASK) >> QUEUE_SHIFT) as u8,
            first: w0 & FIRST_BIT != 0,
            last: w0 & LAST_BIT != 0,
            dram: rd32(bytes, DRAM_OFFSET),
            hbm: rd64(bytes, HBM_OFFSET),
        })
    }

    /// The annotated fields of the encoded descriptor, in byte order.
    ///
    /// # Panics
    ///
    /// As [`SdmaDescriptor::encode`].
    pub fn fields(&self) -> [SdmaField; 5] {
        fields(&self.encode())
    }
}

/// `hbm 0x40000000 <-> dram 0x80000, 4096 bytes, queue 0, first, last`. The
/// arrow is two-headed because the ring, not the descriptor, gives the
/// direction.
impl fmt::Display for SdmaDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hbm {:#x} <-> dram {:#x}, {} byte{}, queue {}, {}",
            self.hbm,
            self.dram,
            self.length,
            if self.length == 1 { "" } else { "s" },
            self.queue,
            packet_position(self.first, self.last)
        )
    }
}

fn packet_position(first: bool, last: bool) -> &'static str {
    match (first, last) {
        (true, true) => "first, last",
        (true, false) => "first",
        (false, true) => "last",
        (false, false) => "middle",
    }
}

/// One field of an SDMA descriptor's annotated dump, as its raw wire value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdmaField {
    /// Byte offset.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// Field name: `length`, `queue`, `flags`, `dram` or `hbm`.
    pub name: &'static str,
    /// The bytes read as a little-endian unsigned number (for `length`, the
    /// stored `length - 1`; for `flags`, the whole byte, reserved bits
    /// included).
    pub value: u64,
}

/// The five fields of descriptor bytes, in byte order.
pub fn fields(bytes: &[u8; DESCRIPTOR_SIZE]) -> [SdmaField; 5] {
    let w0 = rd32(bytes, LENGTH_OFFSET);
    let field = |offset, len, name, value| SdmaField {
        offset,
        len,
        name,
        value,
    };
    [
        field(LENGTH_OFFSET, 2, "length", u64::from(w0 & LENGTH_MASK)),
        field(
            QUEUE_OFFSET,
            1,
            "queue",
            u64::from((w0 & QUEUE_MASK) >> QUEUE_SHIFT),
        ),
        field(FLAGS_OFFSET, 1, "flags", u64::from(w0 >> FLAGS_SHIFT)),
        field(DRAM_OFFSET, 4, "dram", u64::from(rd32(bytes, DRAM_OFFSET))),
        field(HBM_OFFSET, 8, "hbm", rd64(bytes, HBM_OFFSET)),
    ]
}

fn describe(f: &SdmaField) -> String {
    match f.name {
        "length" => format!("{} (stored as length - 1 = {:#06x})", f.value + 1, f.value),
        "queue" if f.value >= u64::from(QUEUES) => {
            format!("{} (invalid: queue ids are 0..={})", f.value, QUEUES - 1)
        }
        "flags" => {
            let w = (f.value as u32) << FLAGS_SHIFT;
            let position = packet_position(w & FIRST_BIT != 0, w & LAST_BIT != 0);
            match w & RESERVED_MASK {
                0 => format!("{:#04x} ({position})", f.value),
                r => format!(
                    "{:#04x} ({position}; invalid: reserved bits {:#04x} set)",
                    f.value,
                    r >> FLAGS_SHIFT
                ),
            }
        }
        "dram" if !(u64::from(DATARAM_BASE)..u64::from(DATARAM_END)).contains(&f.value) => {
            format!(
                "{:#010x} (invalid: outside the dataram window [{DATARAM_BASE:#x}, {DATARAM_END:#x}))",
                f.value
            )
        }
        "dram" => format!(
            "{:#010x} (dataram +{:#x})",
            f.value,
            f.value - u64::from(DATARAM_BASE)
        ),
        "hbm" => format!("{:#018x}", f.value),
        _ => f.value.to_string(),
    }
}

/// The annotated dump of descriptor bytes, one line per field,
/// `+0xNN | bytes | field = value`, in the format of
/// [`dump`](super::dump) (the bytes column is wide enough for the 8-byte
/// `hbm` field). Reserved bits and out-of-range values are shown and marked
/// `invalid`, so the dump shows the bytes as they are.
///
/// ```
/// use apir_ir::target::sdma::annotate;
/// let bytes = [0xff, 0x0f, 0, 0xc0, 0, 0, 8, 0, 0, 0, 0, 0x40, 0, 0, 0, 0];
/// assert_eq!(
///     annotate(&bytes).unwrap(),
///     "+0x00 | ff 0f                   | length = 4096 (stored as length - 1 = 0x0fff)\n\
///      +0x02 | 00                      | queue = 0\n\
///      +0x03 | c0                      | flags = 0xc0 (first, last)\n\
///      +0x04 | 00 00 08 00             | dram = 0x00080000 (dataram +0x0)\n\
///      +0x08 | 00 00 00 40 00 00 00 00 | hbm = 0x0000000040000000\n"
/// );
/// ```
pub fn annotate(bytes: &[u8]) -> Result<String, DecodeError> {
    let bytes: &[u8; DESCRIPTOR_SIZE] = bytes
        .try_into()
        .map_err(|_| DecodeError(wrong_length(bytes.len())))?;
    let mut out = String::new();
    for f in fields(bytes) {
        let hex: Vec<String> = bytes[f.offset..f.offset + f.len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let _ = writeln!(
            out,
            "+{:#04x} | {:<23} | {} = {}",
            f.offset,
            hex.join(" "),
            f.name,
            describe(&f)
        );
    }
    Ok(out)
}

fn fail(offset: usize, reason: String) -> Invalid {
    Invalid {
        check: VALIDATOR.to_string(),
        offset,
        reason,
    }
}

/// Checks descriptor bytes: the length is 16; the queue id is below
/// [`QUEUES`]; the reserved bits of word0 are 0; the dataram address lies in
/// `[DATARAM_BASE, DATARAM_END)` and so does the transfer's last byte; the HBM
/// range ends at 2^64 at the latest. Reports the first failure in byte order,
/// with the offset of the field it read (the end-of-window check reports the
/// dataram address, +0x4).
pub fn validate(bytes: &[u8]) -> Result<(), Invalid> {
    if bytes.len() != DESCRIPTOR_SIZE {
        return Err(fail(0, wrong_length(bytes.len())));
    }
    let w0 = rd32(bytes, LENGTH_OFFSET);
    let length = (w0 & LENGTH_MASK) + 1;
    let queue = (w0 & QUEUE_MASK) >> QUEUE_SHIFT;
    if queue >= QUEUES {
        return Err(fail(
            QUEUE_OFFSET,
            format!("queue {queue} is not a queue id (0..={})", QUEUES - 1),
        ));
    }
    if w0 & RESERVED_MASK != 0 {
        return Err(fail(
            FLAGS_OFFSET,
            format!(
                "reserved bits 24..29 of word0 are not 0 ({:#010x})",
                w0 & RESERVED_MASK
            ),
        ));
    }
    let dram = rd32(bytes, DRAM_OFFSET);
    if !(DATARAM_BASE..DATARAM_END).contains(&dram) {
        return Err(fail(
            DRAM_OFFSET,
            format!(
                "dataram address {dram:#x} is outside the dataram window [{DATARAM_BASE:#x}, {DATARAM_END:#x})"
            ),
        ));
    }
    let dram_end = u64::from(dram) + u64::from(length);
    if dram_end > u64::from(DATARAM_END) {
        return Err(fail(
            DRAM_OFFSET,
            format!(
                "the transfer [{dram:#x}, {dram_end:#x}) runs past the end of the dataram window ({DATARAM_END:#x})"
            ),
        ));
    }
    let hbm = rd64(bytes, HBM_OFFSET);
    // The range may end exactly at 2^64 (its last byte is u64::MAX).
    if hbm.checked_add(u64::from(length) - 1).is_none() {
        return Err(fail(
            HBM_OFFSET,
            format!(
                "HBM address {hbm:#x} with {length} bytes runs past the end of the 64-bit address space"
            ),
        ));
    }
    Ok(())
}

/// Why [`split_transfer`] cannot describe a transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitError {
    /// The queue id is not below [`QUEUES`].
    Queue(u8),
    /// The dataram side `[dram, dram + bytes)` is not inside the dataram
    /// window.
    Dataram {
        /// Dataram start address.
        dram: u32,
        /// Transfer size in bytes.
        bytes: u64,
    },
    /// `[hbm, hbm + bytes)` runs past the end of the 64-bit address space
    /// (ending exactly at 2^64 is fine).
    HbmOverflow {
        /// HBM start address.
        hbm: u64,
        /// Transfer size in bytes.
        bytes: u64,
    },
    /// The per-descriptor limit asked of [`split_transfer_at`] is not in
    /// `1..=MAX_DESCRIPTOR_BYTES`.
    PieceSize(u32),
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::Queue(q) => {
                write!(f, "queue {q} is not a queue id (0..={})", QUEUES - 1)
            }
            SplitError::Dataram { dram, bytes } => write!(
                f,
                "{bytes} bytes at dataram address {dram:#x} do not fit in the dataram window [{DATARAM_BASE:#x}, {DATARAM_END:#x})"
            ),
            SplitError::HbmOverflow { hbm, bytes } => write!(
                f,
                "HBM address {hbm:#x} with {bytes} bytes runs past the end of the 64-bit address space"
            ),
            SplitError::PieceSize(n) => write!(
                f,
                "{n} bytes per descriptor is not in 1..={MAX_DESCRIPTOR_BYTES}"
            ),
        }
    }
}

impl std::error::Error for SplitError {}

/// The descriptors of one transfer of `bytes` bytes between HBM address `hbm`
/// and dataram address `dram` on queue `queue`: pieces of at most
/// [`MAX_DESCRIPTOR_BYTES`], in address order, the first flagged `first` and
/// the last flagged `last`. Zero bytes give no descriptor. Every descriptor
/// returned passes [`validate`]; a transfer that cannot be described so is an
/// error.
///
/// Since the dataram window is exactly [`MAX_DESCRIPTOR_BYTES`] long, a
/// transfer that fits in the window is always one descriptor; the split
/// matters with a smaller per-descriptor limit ([`split_transfer_at`]).
pub fn split_transfer(
    hbm: u64,
    dram: u32,
    bytes: u64,
    queue: u8,
) -> Result<Vec<SdmaDescriptor>, SplitError> {
    split_transfer_at(hbm, dram, bytes, queue, MAX_DESCRIPTOR_BYTES)
}

/// The number of descriptors [`split_transfer`] makes for `bytes` bytes.
pub fn descriptor_count(bytes: u64) -> u64 {
    bytes.div_ceil(u64::from(MAX_DESCRIPTOR_BYTES))
}

/// [`split_transfer`] with at most `max_bytes` (`1..=MAX_DESCRIPTOR_BYTES`)
/// per descriptor, for a cost model that overrides the driver limit.
pub fn split_transfer_at(
    hbm: u64,
    dram: u32,
    bytes: u64,
    queue: u8,
    max_bytes: u32,
) -> Result<Vec<SdmaDescriptor>, SplitError> {
    if !(1..=MAX_DESCRIPTOR_BYTES).contains(&max_bytes) {
        return Err(SplitError::PieceSize(max_bytes));
    }
    if u32::from(queue) >= QUEUES {
        return Err(SplitError::Queue(queue));
    }
    let in_window = (DATARAM_BASE..DATARAM_END).contains(&dram)
        && u64::from(dram) + bytes <= u64::from(DATARAM_END);
    if !in_window {
        return Err(SplitError::Dataram { dram, bytes });
    }
    if bytes > 0 && hbm.checked_add(bytes - 1).is_none() {
        return Err(SplitError::HbmOverflow { hbm, bytes });
    }
    Ok(pieces(hbm, dram, bytes, queue, max_bytes))
}

/// The split itself, for inputs already checked (both ranges fit their
/// address spaces, `max_bytes >= 1`).
fn pieces(hbm: u64, dram: u32, bytes: u64, queue: u8, max_bytes: u32) -> Vec<SdmaDescriptor> {
    let count = bytes.div_ceil(u64::from(max_bytes));
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut done = 0u64;
    while done < bytes {
        let length = (bytes - done).min(u64::from(max_bytes)) as u32;
        out.push(SdmaDescriptor {
            length,
            queue,
            first: done == 0,
            last: done + u64::from(length) == bytes,
            // `done < bytes` and both ranges were checked to fit.
            dram: dram + done as u32,
            hbm: hbm + done,
        });
        done += u64::from(length);
    }
    out
}

/// How `neuron_memcpy` moves bytes (reference §6: the `NeuronMemcpyMethod`
/// enum and its 3-entry `data_transfer_method_table`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemcpyMethod {
    /// `C_MEMCPY = 0`: `c_memcpy_data_transfer`, a C loop on the core.
    CMemcpy,
    /// `VEC_MEMCPY = 1`: `vec_memcpy_data_transfer`, vector loads and stores
    /// on the core.
    VecMemcpy,
    /// `DMA = 2`: `dma_data_transfer`, SDMA descriptors on the M2S / S2M
    /// rings. The default.
    Dma,
}

/// `(method, code, name)`: the one table of memcpy methods.
const METHODS: [(MemcpyMethod, u32, &str); 3] = [
    (MemcpyMethod::CMemcpy, 0, "C_MEMCPY"),
    (MemcpyMethod::VecMemcpy, 1, "VEC_MEMCPY"),
    (MemcpyMethod::Dma, 2, "DMA"),
];

impl MemcpyMethod {
    /// Every method, in code order.
    pub const ALL: [MemcpyMethod; 3] = [
        MemcpyMethod::CMemcpy,
        MemcpyMethod::VecMemcpy,
        MemcpyMethod::Dma,
    ];

    /// `DEFAULT_METHOD` (the reference's `active_neuron_memcpy_method` reads
    /// `02 00 00 00`).
    pub const DEFAULT: MemcpyMethod = MemcpyMethod::Dma;

    fn entry(self) -> &'static (MemcpyMethod, u32, &'static str) {
        &METHODS[self as usize]
    }

    /// The enum value in the reference (`NeuronMemcpyMethod`).
    pub fn code(self) -> u32 {
        self.entry().1
    }

    /// The reference's enumerator name (`C_MEMCPY`, `VEC_MEMCPY`, `DMA`).
    pub fn name(self) -> &'static str {
        self.entry().2
    }

    /// The method with enum value `code` (`MAX_METHODS` = 3 and above: none).
    pub fn from_code(code: u32) -> Option<MemcpyMethod> {
        METHODS.iter().find(|e| e.1 == code).map(|e| e.0)
    }
}

impl fmt::Display for MemcpyMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn desc(
        length: u32,
        queue: u8,
        first: bool,
        last: bool,
        dram: u32,
        hbm: u64,
    ) -> SdmaDescriptor {
        SdmaDescriptor {
            length,
            queue,
            first,
            last,
            dram,
            hbm,
        }
    }

    /// The layout by hand: the bit positions of docs/hardware.md, little-endian.
    #[test]
    fn encodes_staging_md_layout() {
        let d = desc(0x1000, 3, true, false, 0x8_1234, 0x0123_4567_89ab_cdef);
        assert_eq!(
            d.encode(),
            [
                0xff, 0x0f, 0x03, 0x40, // length - 1 = 0xfff, queue 3, first
                0x34, 0x12, 0x08, 0x00, // dram 0x81234
                0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // hbm
            ]
        );
        assert_eq!(
            desc(1, 0, false, true, DATARAM_BASE, 0).word0(),
            0x8000_0000
        );
        assert_eq!(
            desc(65536, 15, true, true, DATARAM_BASE, 0).word0(),
            0xC00F_FFFF
        );
    }

    /// Masks cover word0 exactly once and agree with the byte offsets.
    #[test]
    fn masks_partition_word0() {
        let masks = [LENGTH_MASK, QUEUE_MASK, RESERVED_MASK, FIRST_BIT, LAST_BIT];
        let mut seen = 0u32;
        for m in masks {
            assert_eq!(seen & m, 0, "{m:#x} overlaps");
            seen |= m;
        }
        assert_eq!(seen, u32::MAX);
        assert_eq!(QUEUE_SHIFT as usize, 8 * QUEUE_OFFSET);
        assert_eq!(FLAGS_SHIFT as usize, 8 * FLAGS_OFFSET);
        assert_eq!(LENGTH_MASK, (1 << (8 * (QUEUE_OFFSET - LENGTH_OFFSET))) - 1);
        assert_eq!((RESERVED_MASK | FIRST_BIT | LAST_BIT) >> FLAGS_SHIFT, 0xFF);
        assert_eq!(u64::from(LENGTH_MASK) + 1, u64::from(MAX_DESCRIPTOR_BYTES));
        assert_eq!(HBM_OFFSET + 8, DESCRIPTOR_SIZE);
        assert_eq!((DATARAM_BASE, DATARAM_END), (0x80000, 0x90000));
    }

    #[test]
    #[should_panic(expected = "not in 1..=65536")]
    fn zero_length_has_no_encoding() {
        desc(0, 0, true, true, DATARAM_BASE, 0).encode();
    }

    #[test]
    #[should_panic(expected = "not in 1..=65536")]
    fn oversized_length_has_no_encoding() {
        desc(65537, 0, true, true, DATARAM_BASE, 0).encode();
    }

    #[test]
    fn decode_rejects_wrong_lengths() {
        for len in [0, 8, 15, 17, 20] {
            assert_eq!(
                SdmaDescriptor::decode(&vec![0; len]),
                Err(DecodeError(format!(
                    "SDMA_CME_BD_DESC is 16 bytes, got {len}"
                )))
            );
            assert_eq!(validate(&vec![0; len]).unwrap_err().offset, 0);
            assert!(annotate(&vec![0; len]).is_err());
        }
    }

    fn check(bytes: &[u8]) -> (usize, String) {
        let e = validate(bytes).unwrap_err();
        assert_eq!(e.check, "sdma_desc_valid");
        (e.offset, e.reason)
    }

    #[test]
    fn validator_checks_and_offsets() {
        let ok = desc(0x100, 15, true, true, 0x8_ff00, u64::MAX - 0x100 + 1);
        assert_eq!(validate(&ok.encode()), Ok(()));
        // The whole window in one descriptor.
        assert_eq!(
            validate(&desc(65536, 0, true, true, DATARAM_BASE, 0).encode()),
            Ok(())
        );

        let q = desc(4, 16, true, true, DATARAM_BASE, 0).encode();
        assert_eq!(check(&q), (2, "queue 16 is not a queue id (0..=15)".into()));

        let mut r = ok.encode();
        r[3] |= 0x01;
        assert_eq!(
            check(&r),
            (
                3,
                "reserved bits 24..29 of word0 are not 0 (0x01000000)".into()
            )
        );
        r[3] = 0x20;
        assert_eq!(check(&r).0, 3);

        for dram in [0, DATARAM_BASE - 1, DATARAM_END, u32::MAX] {
            let b = desc(1, 0, true, true, dram, 0).encode();
            assert_eq!(check(&b).0, 4, "{dram:#x}");
        }
        assert_eq!(
            check(&desc(0x101, 0, true, true, 0x8_ff00, 0).encode()),
            (
                4,
                "the transfer [0x8ff00, 0x90001) runs past the end of the dataram window (0x90000)"
                    .into()
            )
        );
        assert_eq!(
            check(&desc(2, 0, true, true, DATARAM_BASE, u64::MAX).encode()),
            (
                8,
                "HBM address 0xffffffffffffffff with 2 bytes runs past the end of the 64-bit address space"
                    .into()
            )
        );
        // First failure in byte order: queue before the window.
        assert_eq!(check(&desc(1, 200, true, true, 0, u64::MAX).encode()).0, 2);
    }

    #[test]
    fn dump_marks_invalid_fields() {
        let mut b = desc(0x20, 16, false, false, 0x7_fff0, 5).encode();
        b[3] |= 0x3f;
        assert_eq!(
            annotate(&b).unwrap(),
            "+0x00 | 1f 00                   | length = 32 (stored as length - 1 = 0x001f)\n\
             +0x02 | 10                      | queue = 16 (invalid: queue ids are 0..=15)\n\
             +0x03 | 3f                      | flags = 0x3f (middle; invalid: reserved bits 0x3f set)\n\
             +0x04 | f0 ff 07 00             | dram = 0x0007fff0 (invalid: outside the dataram window [0x80000, 0x90000))\n\
             +0x08 | 05 00 00 00 00 00 00 00 | hbm = 0x0000000000000005\n"
        );
        let f = desc(65536, 1, false, true, 0x8_0010, 0).fields();
        assert_eq!(
            f.map(|f| (f.offset, f.len, f.name, f.value)),
            [
                (0, 2, "length", 0xffff),
                (2, 1, "queue", 1),
                (3, 1, "flags", 0x80),
                (4, 4, "dram", 0x8_0010),
                (8, 8, "hbm", 0),
            ]
        );
    }

    #[test]
    fn display_names_the_packet_position() {
        let d = desc(4096, 2, true, true, DATARAM_BASE, 0x4000_0000);
        assert_eq!(
            d.to_string(),
            "hbm 0x40000000 <-> dram 0x80000, 4096 bytes, queue 2, first, last"
        );
        let d = SdmaDescriptor {
            first: false,
            last: false,
            length: 1,
            ..d
        };
        assert_eq!(
            d.to_string(),
            "hbm 0x40000000 <-> dram 0x80000, 1 byte, queue 2, middle"
        );
        let d = SdmaDescriptor { last: true, ..d };
        assert!(d.to_string().ends_with("1 byte, queue 2, last"));
    }

    #[test]
    fn split_limits_and_errors() {
        assert_eq!(split_transfer(0, DATARAM_BASE, 0, 0), Ok(vec![]));
        assert_eq!(
            split_transfer(0x1000, DATARAM_BASE, 65536, 1),
            Ok(vec![desc(65536, 1, true, true, DATARAM_BASE, 0x1000)])
        );
        assert_eq!(
            split_transfer(0, DATARAM_BASE, 65537, 0),
            Err(SplitError::Dataram {
                dram: DATARAM_BASE,
                bytes: 65537
            })
        );
        assert_eq!(
            split_transfer(0, DATARAM_END, 0, 0),
            Err(SplitError::Dataram {
                dram: DATARAM_END,
                bytes: 0
            })
        );
        assert_eq!(
            split_transfer(0, DATARAM_BASE, 1, 16),
            Err(SplitError::Queue(16))
        );
        assert_eq!(
            split_transfer(u64::MAX, DATARAM_BASE, 1, 0),
            Ok(vec![desc(1, 0, true, true, DATARAM_BASE, u64::MAX)])
        );
        assert_eq!(split_transfer(u64::MAX, DATARAM_BASE, 0, 0), Ok(vec![]));
        assert_eq!(
            split_transfer(u64::MAX, DATARAM_BASE, 2, 0),
            Err(SplitError::HbmOverflow {
                hbm: u64::MAX,
                bytes: 2
            })
        );
        for bad in [0, MAX_DESCRIPTOR_BYTES + 1] {
            assert_eq!(
                split_transfer_at(0, DATARAM_BASE, 1, 0, bad),
                Err(SplitError::PieceSize(bad))
            );
        }
        assert_eq!(
            split_transfer_at(0x10, 0x8_0100, 10, 3, 4),
            Ok(vec![
                desc(4, 3, true, false, 0x8_0100, 0x10),
                desc(4, 3, false, false, 0x8_0104, 0x14),
                desc(2, 3, false, true, 0x8_0108, 0x18),
            ])
        );
    }

    proptest! {
        /// The split at the full driver limit over transfers far larger than
        /// the dataram window (only reachable through `pieces`, which skips
        /// the window check): pieces of at most 64 KiB, contiguous on both
        /// sides, flags on the ends only.
        #[test]
        fn pieces_cover_large_transfers(
            hbm in 0u64..1 << 48,
            dram in 0u32..1 << 20,
            bytes in 0u64..1 << 22,
            queue in 0u8..16,
        ) {
            let ds = pieces(hbm, dram, bytes, queue, MAX_DESCRIPTOR_BYTES);
            prop_assert_eq!(ds.len() as u64, bytes.div_ceil(65536));
            prop_assert_eq!(ds.len() as u64, descriptor_count(bytes));
            let mut at = 0u64;
            for (i, d) in ds.iter().enumerate() {
                prop_assert!(d.length >= 1 && d.length <= 65536);
                prop_assert_eq!(d.hbm, hbm + at);
                prop_assert_eq!(u64::from(d.dram), u64::from(dram) + at);
                prop_assert_eq!((d.first, d.last), (i == 0, i + 1 == ds.len()));
                prop_assert_eq!(d.queue, queue);
                // All but the last are full.
                if i + 1 < ds.len() {
                    prop_assert_eq!(d.length, 65536);
                }
                at += u64::from(d.length);
            }
            prop_assert_eq!(at, bytes);
        }
    }

    #[test]
    fn memcpy_methods_match_the_reference_enum() {
        assert_eq!(
            MemcpyMethod::ALL.map(|m| (m.code(), m.name())),
            [(0, "C_MEMCPY"), (1, "VEC_MEMCPY"), (2, "DMA")]
        );
        assert_eq!(MemcpyMethod::DEFAULT.code(), 2);
        for m in MemcpyMethod::ALL {
            assert_eq!(MemcpyMethod::from_code(m.code()), Some(m));
        }
        assert_eq!(MemcpyMethod::from_code(3), None);
        assert_eq!(MemcpyMethod::VecMemcpy.to_string(), "VEC_MEMCPY");
    }
}
