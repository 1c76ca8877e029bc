//! Wire output as data: the descriptors `encode-wire` attached, collected in
//! op order then the op table's role order, and rendered as an annotated
//! dump, hex lines, framed binary or JSON (docs/tools.md); and the framed
//! binary read back ([`read_binary`], what `apir-dis` reads).
//!
//! # The `wire-bin` framing (version 2)
//!
//! All integers little-endian. A stream is one or more sections (one per
//! module; `--split-input-file` gives one per case), each a 16-byte header,
//! its records and a 16-byte end marker:
//!
//! | bytes | header field |
//! | --- | --- |
//! | 8 | magic `APIRWIRE` |
//! | 2 | version, 2 |
//! | 1 | arch: 2, 3 or 4 (`v2`, `v3`, `v4`) |
//! | 5 | zero |
//!
//! then one record per descriptor, in op order then the op table's role
//! order:
//!
//! | bytes | record field |
//! | --- | --- |
//! | 4 | op index among the section's ISA ops (program order) |
//! | 1 | kind: `n` for `TENSOR<n>D`, `0x10 + n` for `MEM_PATTERN<n>D` |
//! | 1 | dtype of the operand's buffer (its wire code, [`Dtype::code`]) |
//! | 1 | active channels travelling beside the descriptor (0: none) |
//! | 2 | role length `r` |
//! | `r` | role name, UTF-8 |
//! | 2 | descriptor length `n` |
//! | `n` | the descriptor bytes |
//!
//! then the end marker:
//!
//! | bytes | end marker field |
//! | --- | --- |
//! | 8 | magic `APIRDONE` |
//! | 8 | the section's record count |
//!
//! A stream cut inside a section, even exactly between two records, lacks
//! that section's end marker, so a reader tells a cut section from a
//! shorter one. (A cut exactly between two sections leaves whole
//! sections: sections append, as `--split-input-file`'s cases do.) Neither
//! magic can start a record: their fifth byte (`W`,
//! `D`) is no kind code.

use apir_ir::target::descriptor::{Descriptor, DescriptorBytes};
use apir_ir::target::dump::annotate_into;
use apir_ir::target::{DescriptorKind, Dtype};
use apir_ir::{Arch, Module, Op, OpKind, SourceMap, Subject};
use serde::Serialize;
use std::fmt;

/// Why wire bytes could not be collected, framed or read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// An operand has no descriptor bytes: `encode-wire` has not run.
    NotEncoded {
        /// The op and operand.
        subject: Subject,
        /// `file:line:col` of the op, if it has source text.
        location: Option<String>,
    },
    /// A field too wide for its `wire-bin` framing width (never truncated).
    TooWide {
        /// Which field (`the op index`, `the channel count`, ...).
        field: &'static str,
        /// The op index.
        op: usize,
        /// The operand's role.
        role: String,
    },
    /// The module does not verify: no bytes are collected or framed for
    /// it ([`collect`] and [`append_binary`] verify the module they are
    /// handed, so a module built or edited in code gets its diagnostics,
    /// not the bytes it happens to carry).
    Invalid {
        /// The verifier's diagnostics.
        diagnostics: apir_ir::Diagnostics,
    },
    /// A `wire-bin` stream that cannot be read.
    Malformed {
        /// Byte offset of the problem in the stream.
        offset: usize,
        /// What is wrong there (the message names the offset too).
        message: String,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::NotEncoded { subject, location } => {
                let role = subject.role.as_deref().unwrap_or("");
                match location {
                    Some(loc) => write!(f, "operand `{role}` of `{}` at {loc}", subject.name)?,
                    // A module built in code: the op by its id.
                    None => write!(
                        f,
                        "operand `{role}` of op #{} (`{}`)",
                        subject.op.as_u32(),
                        subject.name
                    )?,
                }
                f.write_str(" has no descriptor bytes: run the `lower-to-wire` pipeline (or `encode-wire`) first")
            }
            WireError::TooWide { field, op, role } => write!(
                f,
                "wire-bin: {field} of op {op}, role `{role}`, does not fit its field"
            ),
            WireError::Invalid { diagnostics } => {
                f.write_str("the module does not verify")?;
                if let Some(first) = diagnostics.first() {
                    write!(f, ": {}", first.message)?;
                }
                match diagnostics.len() {
                    0 | 1 => Ok(()),
                    n => write!(f, " (and {} more)", n - 1),
                }
            }
            WireError::Malformed { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for WireError {}

/// A [`WireError::Malformed`] at `offset`.
fn malformed(offset: usize, message: String) -> WireError {
    WireError::Malformed { offset, message }
}

/// One encoded operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireOperand {
    /// Role name.
    pub role: String,
    /// Descriptor struct.
    pub kind: DescriptorKind,
    /// Element type of the operand's buffer.
    pub dtype: Dtype,
    /// Active channels travelling beside the descriptor.
    pub channels: u32,
    /// The validated bytes.
    pub bytes: DescriptorBytes,
}

/// One op's descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireOp {
    /// Index among the module's ISA ops, in program order.
    pub index: usize,
    /// Text op.
    pub op: &'static str,
    /// Encoder name (`TensorCopy`; `Custom` for `isa.custom`).
    pub encoder: &'static str,
    /// `file:line:col` of the op (empty for ops built in code).
    pub loc: String,
    /// Operands in the op table's role order (source order for `isa.custom`).
    pub operands: Vec<WireOperand>,
}

/// Collects the descriptors of every ISA op, with their source locations.
/// Fails with the verifier's diagnostics if the module does not verify
/// ([`WireError::Invalid`]), and naming the first operand without bytes if
/// `encode-wire` has not run.
pub fn collect(m: &Module, sources: &SourceMap) -> Result<Vec<WireOp>, WireError> {
    apir_ir::verify(m).map_err(invalid)?;
    collect_from(m, sources, Some(&mut apir_ir::Locator::default()), 0)
}

/// [`collect`] for a module the pass manager has just verified.
pub(crate) fn collect_verified(m: &Module, sources: &SourceMap) -> Result<Vec<WireOp>, WireError> {
    collect_from(m, sources, Some(&mut apir_ir::Locator::default()), 0)
}

/// The verifier's diagnostics as [`WireError::Invalid`].
fn invalid(diagnostics: apir_ir::Diagnostics) -> WireError {
    WireError::Invalid { diagnostics }
}

/// [`collect`] with control over locations (`None`: skipped, for raw
/// bytes, which do not show them; a streamed part passes one locator to
/// every batch, so that ops on one line are located from the one before)
/// and the index of the first op.
pub(crate) fn collect_from(
    m: &Module,
    sources: &SourceMap,
    mut locator: Option<&mut apir_ir::Locator>,
    first_index: usize,
) -> Result<Vec<WireOp>, WireError> {
    let mut out = Vec::new();
    for op in m.top_ops() {
        let data = &m.ops[op];
        let Some((encoder, order)) = wire_order(m, op) else {
            continue;
        };
        let loc = if let Some(locator) = locator
            .as_deref_mut()
            .filter(|_| sources.get(data.span.file).is_some())
        {
            locator.location(sources, data.span)
        } else {
            String::new()
        };
        let mut operands = Vec::new();
        for i in order {
            let o = &data.operands[i];
            let (kind, bytes) = encoded(m, op, i, &loc)?;
            let channels = o.lowered().and_then(|l| l.fold).map_or(0, |f| f.channels);
            operands.push(WireOperand {
                role: m.str(o.role).to_string(),
                kind,
                dtype: m.buffers[o.buffer].dtype,
                channels,
                bytes: bytes.clone(),
            });
        }
        out.push(WireOp {
            index: first_index + out.len(),
            op: data.kind.name(),
            encoder,
            loc,
            operands,
        });
    }
    Ok(out)
}

/// The op [`collect_from`] stops at with [`WireError::NotEncoded`]: the
/// first top-level op with an operand that has no descriptor bytes (the
/// error names the op it stands for, [`Module::origin`], which a pass may
/// have removed since).
pub(crate) fn first_not_encoded(m: &Module) -> Option<Op> {
    m.top_ops().find(|&op| {
        wire_order(m, op)
            .is_some_and(|(_, order)| order.into_iter().any(|i| encoded(m, op, i, "").is_err()))
    })
}

/// The descriptor kind and bytes of operand `i` of `op`, or the error naming
/// the operand (at `loc`, if not empty) when `encode-wire` has not run.
fn encoded<'m>(
    m: &'m Module,
    op: Op,
    i: usize,
    loc: &str,
) -> Result<(DescriptorKind, &'m DescriptorBytes), WireError> {
    let l = m.ops[op].operands[i].lowered();
    match (l.and_then(|l| l.kind), l.and_then(|l| l.wire.as_ref())) {
        (Some(kind), Some(bytes)) => Ok((kind, bytes)),
        _ => Err(not_encoded(m, op, i, loc)),
    }
}

/// The error about operand `i` of `op` having no descriptor bytes (at
/// `loc`, if not empty).
#[cold]
fn not_encoded(m: &Module, op: Op, i: usize, loc: &str) -> WireError {
    let data = &m.ops[op];
    WireError::NotEncoded {
        subject: Subject {
            // A piece of a split op is named by the op it was made from.
            op: m.origin(op),
            name: data.kind.name(),
            role: Some(m.str(data.operands[i].role).to_string()),
        },
        location: (!loc.is_empty()).then(|| loc.to_string()),
    }
}

/// Operand indices of an op in wire order: the op table's role order
/// (source order for `isa.custom`).
type Order = smallvec::SmallVec<[usize; 4]>;

/// The encoder name and wire order of `op`'s operands; `None` for ops
/// without descriptors.
fn wire_order(m: &Module, op: Op) -> Option<(&'static str, Order)> {
    let order = operand_order(m, op)?;
    let encoder = match m.ops[op].kind {
        OpKind::Isa(isa) => isa.info().encoder(m.arch).map_or("", |e| e.encoder),
        _ => "Custom",
    };
    Some((encoder, order))
}

/// The wire order of `op`'s operands: the op table's role order (source
/// order for `isa.custom`); `None` for ops without descriptors.
fn operand_order(m: &Module, op: Op) -> Option<Order> {
    let data = &m.ops[op];
    let n = data.operands.len();
    match data.kind {
        OpKind::Isa(isa) => {
            // A verified op has each of its row's roles once: operand `i`
            // goes to its role's place. Anything else is sorted.
            if in_row_order(isa, &data.operands) {
                return Some((0..n).collect());
            }
            let mut order = Order::new();
            order.resize(n, usize::MAX);
            let placed = data
                .operands
                .iter()
                .enumerate()
                .all(|(i, o)| match isa.role_of(o.role) {
                    Some((k, _)) if k < n && order[k] == usize::MAX => {
                        order[k] = i;
                        true
                    }
                    _ => false,
                });
            if !placed {
                order = (0..n).collect();
                order.sort_by_key(|&i| {
                    isa.role_of(data.operands[i].role)
                        .map_or(usize::MAX, |r| r.0)
                });
            }
            Some(order)
        }
        OpKind::Custom => Some((0..n).collect()),
        _ => None,
    }
}

/// Whether operand `k` of `operands` has the row's role `k`, for every `k`
/// (the printer's order, and the order nearly every op is written in): the
/// wire order is then the source order.
fn in_row_order(isa: apir_ir::target::IsaOp, operands: &[apir_ir::Operand]) -> bool {
    operands
        .iter()
        .enumerate()
        .all(|(k, o)| isa.role_of(o.role).is_some_and(|(r, _)| r == k))
}

/// The `wire-bin` framing's magic.
pub(crate) const WIRE_BIN_MAGIC: &[u8; 8] = b"APIRWIRE";

/// The `wire-bin` framing's version.
pub(crate) const WIRE_BIN_VERSION: u16 = 2;

/// Bytes of a section header.
pub const WIRE_BIN_HEADER: usize = 16;

/// The magic of a section's end marker.
pub(crate) const WIRE_BIN_END_MAGIC: &[u8; 8] = b"APIRDONE";

/// Bytes of a section's end marker.
pub const WIRE_BIN_END: usize = 16;

/// The arch's number in a section header (2, 3 or 4).
fn arch_code(arch: Arch) -> u8 {
    match arch {
        Arch::V2 => 2,
        Arch::V3 => 3,
        Arch::V4 => 4,
    }
}

/// The kind's byte in a record.
fn kind_code(kind: DescriptorKind) -> u8 {
    match kind {
        DescriptorKind::Tensor(n) => n,
        DescriptorKind::MemPattern(n) => 0x10 | n,
    }
}

/// The section header of a stream of `arch` descriptors: what a producer
/// writes before the records [`append_binary`] appends.
pub fn bin_header(arch: Arch) -> [u8; WIRE_BIN_HEADER] {
    let mut h = [0u8; WIRE_BIN_HEADER];
    h[..8].copy_from_slice(WIRE_BIN_MAGIC);
    h[8..10].copy_from_slice(&WIRE_BIN_VERSION.to_le_bytes());
    h[10] = arch_code(arch);
    h
}

/// The end marker of a section of `records` records: what a producer
/// writes after the last records [`append_binary`] appended, with the sum
/// of their [`Appended::records`].
pub fn bin_end(records: u64) -> [u8; WIRE_BIN_END] {
    let mut e = [0u8; WIRE_BIN_END];
    e[..8].copy_from_slice(WIRE_BIN_END_MAGIC);
    e[8..].copy_from_slice(&records.to_le_bytes());
    e
}

/// Appends one record; a field too wide for its framing width (an op
/// index past 2^32, more than 255 channels, a role or descriptor over 64
/// KiB) is an error, never truncated.
///
/// Inlined into the streaming loop of [`append_binary`]: a call passing
/// seven arguments costs about as much as writing the record. The record
/// goes out as two appends in the order of its fields: the fixed 9-byte
/// head with the role, then the 2-byte length with the bytes.
#[inline(always)]
fn append_record(
    out: &mut Vec<u8>,
    op: usize,
    role: &str,
    kind: DescriptorKind,
    dtype: Dtype,
    channels: u32,
    bytes: &[u8],
) -> Result<(), WireError> {
    let (Ok(op32), Ok(ch), Ok(role_len), Ok(len)) = (
        u32::try_from(op),
        u8::try_from(channels),
        u16::try_from(role.len()),
        u16::try_from(bytes.len()),
    ) else {
        return Err(too_wide(op, role, channels, bytes.len()));
    };
    let [o0, o1, o2, o3] = op32.to_le_bytes();
    let [r0, r1] = role_len.to_le_bytes();
    let head = [o0, o1, o2, o3, kind_code(kind), dtype.code(), ch, r0, r1];
    extend_joined(out, &head, role.as_bytes());
    extend_joined(out, &len.to_le_bytes(), bytes);
    Ok(())
}

/// Hands `$then` the lengths [`extend_joined`] appends at constant length:
/// every role name's of the op table (3 to 6, 8 to 10) and every
/// descriptor's (`4 + 4N`: 8, 12, 16, 20). One list, which a test checks
/// against the table.
macro_rules! with_joined_lengths {
    ($then:ident) => {
        $then!(3 4 5 6 8 9 10 12 16 20)
    };
}

/// `out.extend_from_slice(head); out.extend_from_slice(bytes)`, as one
/// append of constant length when `bytes` has one of the lengths of
/// `with_joined_lengths`: a
/// few moves, where a copy of a length known only at run time is a `memcpy`
/// call, and one capacity check instead of two. Any other length takes the
/// general copies; the bytes appended are the same.
#[inline(always)]
fn extend_joined<const H: usize>(out: &mut Vec<u8>, head: &[u8; H], bytes: &[u8]) {
    /// Room for `head` and the longest constant length.
    const ROOM: usize = 32;
    macro_rules! constant_lengths {
        ($($n:literal)*) => {
            match bytes.len() {
                $($n if H + $n <= ROOM => {
                    if let Ok(b) = <&[u8; $n]>::try_from(bytes) {
                        let mut joined = [0u8; ROOM];
                        joined[..H].copy_from_slice(head);
                        joined[H..H + $n].copy_from_slice(b);
                        return out.extend_from_slice(&joined[..H + $n]);
                    }
                })*
                _ => {}
            }
        };
    }
    with_joined_lengths!(constant_lengths);
    out.extend_from_slice(head);
    out.extend_from_slice(bytes)
}

/// The error of [`append_record`] for a record with a field too wide for
/// its framing width: the first such field in record order (op index,
/// channels, role, descriptor).
#[cold]
#[inline(never)]
fn too_wide(op: usize, role: &str, channels: u32, bytes: usize) -> WireError {
    let field = if u32::try_from(op).is_err() {
        "the op index"
    } else if u8::try_from(channels).is_err() {
        "the channel count"
    } else if u16::try_from(role.len()).is_err() {
        "the role name"
    } else {
        debug_assert!(u16::try_from(bytes).is_err());
        "the descriptor"
    };
    WireError::TooWide {
        field,
        op,
        role: role.to_string(),
    }
}

/// What [`append_binary`] appended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    /// ISA ops (each numbered, whether or not it has operands).
    pub ops: usize,
    /// Records (one per descriptor).
    pub records: u64,
}

/// The records of the ops of `m`, appended to `out` without collecting the
/// ops first, numbered from `first` (no header and no end marker: a
/// streaming caller writes those around the records of every batch); how
/// many ops and records. Fails as [`collect`] does (without a location): on
/// a batch that does not verify ([`apir_ir::verify_batch`]: its buffers and
/// ops, those of earlier batches taken as verified) and on an operand
/// without bytes, having appended nothing.
pub fn append_binary(m: &Module, out: &mut Vec<u8>, first: usize) -> Result<Appended, WireError> {
    apir_ir::verify_batch(m).map_err(invalid)?;
    let at = out.len();
    append_verified(m, out, first).inspect_err(|_| out.truncate(at))
}

/// [`append_binary`] for a batch the pass manager has just verified (the
/// streaming driver's, which drops its part's output on an error).
pub(crate) fn append_verified(
    m: &Module,
    out: &mut Vec<u8>,
    first: usize,
) -> Result<Appended, WireError> {
    let mut done = Appended::default();
    for op in m.top_ops() {
        let data = &m.ops[op];
        let plain = match data.kind {
            OpKind::Isa(isa) => in_row_order(isa, &data.operands),
            OpKind::Custom => true,
            _ => continue,
        };
        let operands = &data.operands[..];
        let index = first + done.ops;
        if plain {
            for (i, o) in operands.iter().enumerate() {
                append_operand(m, out, op, index, i, o)?;
            }
        } else {
            // An ISA op always has an order (`None` is for ops without
            // descriptors, skipped above); were it missing, the operands
            // would go in source order, never be left out.
            let order = operand_order(m, op).unwrap_or_else(|| (0..operands.len()).collect());
            for i in order {
                append_operand(m, out, op, index, i, &operands[i])?;
            }
        }
        done.ops += 1;
        done.records += operands.len() as u64;
    }
    Ok(done)
}

/// The record of operand `i` (`o`) of `op`, the op numbered `index`, or
/// the error that it has no descriptor bytes.
#[inline(always)]
fn append_operand(
    m: &Module,
    out: &mut Vec<u8>,
    op: Op,
    index: usize,
    i: usize,
    o: &apir_ir::Operand,
) -> Result<(), WireError> {
    let Some(apir_ir::Lowered {
        kind: Some(kind),
        wire: Some(bytes),
        fold,
        ..
    }) = o.lowered()
    else {
        return Err(not_encoded(m, op, i, ""));
    };
    append_record(
        out,
        index,
        m.str(o.role),
        *kind,
        m.buffers[o.buffer].dtype,
        fold.map_or(0, |f| f.channels),
        bytes,
    )
}

/// Adds `base` to the op index of every record of `records` (records
/// only, no header, as [`append_binary`] writes them), which a part of a
/// parallel run numbered from 0. Stops at a record it cannot read (none
/// that [`append_binary`] writes).
pub fn rebase_binary(records: &mut [u8], base: usize) {
    let base = u32::try_from(base).unwrap_or(u32::MAX);
    let mut at = 0;
    while let Ok(r) = record_at(records, at) {
        let op = u32::from_le_bytes([
            records[at],
            records[at + 1],
            records[at + 2],
            records[at + 3],
        ]);
        records[at..at + 4].copy_from_slice(&op.saturating_add(base).to_le_bytes());
        at = r.end;
        if at >= records.len() {
            break;
        }
    }
}

/// One descriptor read back from `wire-bin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinRecord {
    /// Op index in its section.
    pub op: u32,
    /// Role name.
    pub role: String,
    /// Descriptor struct.
    pub kind: DescriptorKind,
    /// Element type of the operand.
    pub dtype: Dtype,
    /// Active channels (0: none).
    pub channels: u8,
    /// The descriptor bytes.
    pub bytes: Vec<u8>,
    /// Offset of the record in the stream.
    pub offset: usize,
}

/// One section of a `wire-bin` stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinSection {
    /// Arch of the section's descriptors.
    pub arch: Arch,
    /// Its records.
    pub records: Vec<BinRecord>,
}

/// Bytes [`is_binary`] needs to tell a `wire-bin` stream: its magic's.
pub const WIRE_BIN_MAGIC_LEN: usize = WIRE_BIN_MAGIC.len();

/// Whether `bytes` start like a `wire-bin` stream.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(WIRE_BIN_MAGIC)
}

/// One item of a `wire-bin` stream as [`BinReader`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BinItem {
    /// A section header: the records up to its end marker are of `arch`.
    Section {
        /// The section's arch.
        arch: Arch,
        /// Offset of the header in the stream.
        offset: usize,
    },
    /// A record of the open section.
    Record(BinRecord),
}

/// Why [`BinReader`] stopped.
#[derive(Debug)]
pub enum BinReadError {
    /// The reader failed.
    Read(std::io::Error),
    /// The stream is not `wire-bin` ([`WireError::Malformed`]).
    Wire(WireError),
}

impl fmt::Display for BinReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BinReadError::Read(e) => write!(f, "{e}"),
            BinReadError::Wire(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BinReadError {}

/// Bytes [`BinReader`] asks its reader for at a time (project-defined).
const BIN_READ_CHUNK: usize = 64 << 10;

/// Reads a `wire-bin` stream from `R` an item at a time, holding at most
/// one record (at most 128 KiB: two 16-bit lengths) and one read chunk,
/// whatever the stream's length; the items, and the first problem with the
/// byte offset where it is, are what [`read_binary`] gives for the stream
/// read whole. Every section must end with its end marker, whose record
/// count is the section's: a stream cut inside a section is an error,
/// never read as a shorter section. After an error (or the end) it gives
/// `None`.
pub struct BinReader<R> {
    input: R,
    /// `buf[pos..len]` is read and not yet consumed: it starts at byte
    /// `base + pos` of the stream. `buf` past `len` is room for reads.
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    base: usize,
    eof: bool,
    /// The section open (its header's offset and records so far), if any.
    open: Option<(usize, u64)>,
    /// Whether a section was ever opened.
    started: bool,
    done: bool,
}

impl<R: std::io::Read> BinReader<R> {
    /// A reader of the stream `input`.
    pub fn new(input: R) -> Self {
        BinReader {
            input,
            buf: Vec::new(),
            pos: 0,
            len: 0,
            base: 0,
            eof: false,
            open: None,
            started: false,
            done: false,
        }
    }

    /// The unconsumed bytes, at least `n` of them unless the stream ends
    /// sooner.
    fn window(&mut self, n: usize) -> Result<&[u8], BinReadError> {
        while self.len - self.pos < n && !self.eof {
            if self.pos > 0 {
                // What is left moves to the front: the buffer never holds
                // more than a record and a read chunk.
                self.buf.copy_within(self.pos..self.len, 0);
                self.base += self.pos;
                self.len -= self.pos;
                self.pos = 0;
            }
            let room = n.max(BIN_READ_CHUNK);
            if self.buf.len() < room {
                self.buf.resize(room, 0);
            }
            let got = loop {
                match self.input.read(&mut self.buf[self.len..]) {
                    Ok(k) => break k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(BinReadError::Read(e)),
                }
            };
            self.len += got;
            self.eof = got == 0;
        }
        Ok(&self.buf[self.pos..self.len])
    }

    /// The next item, or the error that ends the stream, or `None` at its
    /// end.
    pub fn next_item(&mut self) -> Option<Result<BinItem, BinReadError>> {
        if self.done {
            return None;
        }
        let item = self.read_item();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }

    fn read_item(&mut self) -> Option<Result<BinItem, BinReadError>> {
        loop {
            let at = self.base + self.pos;
            let w = match self.window(WIRE_BIN_HEADER) {
                Ok(w) => w,
                Err(e) => return Some(Err(e)),
            };
            if w.is_empty() {
                return self
                    .open
                    .map(|(start, n)| Err(BinReadError::Wire(unended(start, n, at, true))));
            }
            match self.step(at) {
                Ok(Some(item)) => return Some(Ok(item)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Reads what starts at `at` (the stream's byte `base + pos`, with a
    /// header's worth of bytes in the window unless the stream ends): a
    /// section header or a record, or an end marker (`None`).
    fn step(&mut self, at: usize) -> Result<Option<BinItem>, BinReadError> {
        let bad = |e: WireError| BinReadError::Wire(e);
        let w = &self.buf[self.pos..self.len];
        if w.starts_with(WIRE_BIN_MAGIC) {
            if let Some((start, n)) = self.open {
                return Err(bad(unended(start, n, at, false)));
            }
            let h = w.get(..WIRE_BIN_HEADER).ok_or_else(|| {
                bad(malformed(
                    at,
                    format!("section header at byte {at} is cut short"),
                ))
            })?;
            let arch = section_arch(h, at).map_err(bad)?;
            self.open = Some((at, 0));
            self.started = true;
            self.pos += WIRE_BIN_HEADER;
            return Ok(Some(BinItem::Section { arch, offset: at }));
        }
        if !self.started {
            return Err(bad(malformed(
                at,
                "the input does not start with the wire-bin magic `APIRWIRE`".into(),
            )));
        }
        let Some((start, read)) = self.open else {
            return Err(bad(malformed(
                at,
                format!("byte {at} follows the end marker of its section, but starts no section (`APIRWIRE`)"),
            )));
        };
        if w.starts_with(WIRE_BIN_END_MAGIC) {
            let e = w.get(..WIRE_BIN_END).ok_or_else(|| {
                bad(malformed(
                    at,
                    format!("end marker at byte {at} is cut short"),
                ))
            })?;
            let mut count = [0u8; 8];
            count.copy_from_slice(&e[8..]);
            let count = u64::from_le_bytes(count);
            if count != read {
                return Err(bad(malformed(
                    at,
                    format!("end marker at byte {at} counts {count} records, but the section at byte {start} holds {read}"),
                )));
            }
            self.open = None;
            self.pos += WIRE_BIN_END;
            return Ok(None);
        }
        // A record: its lengths tell how much more to read.
        let short = || bad(malformed(at, format!("record at byte {at} is cut short")));
        let w = self.window(9)?;
        let r = w.get(7..9).ok_or_else(short)?;
        let role_len = usize::from(u16::from_le_bytes([r[0], r[1]]));
        let len_at = 9 + role_len;
        let w = self.window(len_at + 2)?;
        let l = w.get(len_at..len_at + 2).ok_or_else(short)?;
        let end = len_at + 2 + usize::from(u16::from_le_bytes([l[0], l[1]]));
        let w = self.window(end)?;
        let rec = w.get(..end).ok_or_else(short)?;
        let record = parse_record(rec, role_len, at).map_err(bad)?;
        self.pos += end;
        self.open = Some((start, read + 1));
        Ok(Some(BinItem::Record(record)))
    }
}

impl<R: std::io::Read> Iterator for BinReader<R> {
    type Item = Result<BinItem, BinReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_item()
    }
}

/// The arch of the section header `h` (16 bytes, at byte `at`), checking
/// its version and zero bytes.
fn section_arch(h: &[u8], at: usize) -> Result<Arch, WireError> {
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != WIRE_BIN_VERSION {
        return Err(malformed(at, format!(
            "section at byte {at} has framing version {version}; this reader knows version {WIRE_BIN_VERSION}"
        )));
    }
    // The code's arch is the one `arch_code` writes it for.
    let Some(arch) = Arch::ALL.into_iter().find(|&a| arch_code(a) == h[10]) else {
        let codes: Vec<String> = Arch::ALL
            .iter()
            .map(|&a| arch_code(a).to_string())
            .collect();
        let (last, rest) = codes
            .split_last()
            .map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
        return Err(malformed(
            at,
            format!(
                "section at byte {at} names arch code {} (expected {} or {last})",
                h[10],
                rest.join(", ")
            ),
        ));
    };
    // Bytes 11.. are zero in this version: anything else is a stream of
    // another layout, not one to read as this one.
    if let Some(i) = h[11..].iter().position(|&b| b != 0) {
        return Err(malformed(
            at + 11 + i,
            format!(
                "section at byte {at} has {:#04x} at byte {} of its header, which is zero in version {WIRE_BIN_VERSION}",
                h[11 + i],
                11 + i
            ),
        ));
    }
    Ok(arch)
}

/// The record `rec` (exactly its bytes, its role `role_len` long), at
/// byte `at` of the stream.
fn parse_record(rec: &[u8], role_len: usize, at: usize) -> Result<BinRecord, WireError> {
    let op = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
    // The code's kind is the one `kind_code` writes it for.
    let Some(kind) = DescriptorKind::all().find(|&k| kind_code(k) == rec[4]) else {
        return Err(malformed(
            at,
            format!(
                "record at byte {at}: kind code {:#04x} is not a descriptor struct",
                rec[4]
            ),
        ));
    };
    let dtype = Dtype::from_code(rec[5]).ok_or_else(|| {
        malformed(
            at,
            format!("record at byte {at}: dtype code {} is unknown", rec[5]),
        )
    })?;
    let role = std::str::from_utf8(&rec[9..9 + role_len])
        .map_err(|_| malformed(at, format!("record at byte {at}: the role is not UTF-8")))?
        .to_string();
    Ok(BinRecord {
        op,
        role,
        kind,
        dtype,
        channels: rec[6],
        bytes: rec[9 + role_len + 2..].to_vec(),
        offset: at,
    })
}

/// Where the record at `at` ends, checking its lengths against `bytes`.
struct RecordSpan {
    end: usize,
}

fn record_at(bytes: &[u8], at: usize) -> Result<RecordSpan, WireError> {
    let short = || malformed(at, format!("record at byte {at} is cut short"));
    let r = bytes.get(at + 7..at + 9).ok_or_else(short)?;
    let role_len = u16::from_le_bytes([r[0], r[1]]) as usize;
    let len_at = at + 9 + role_len;
    let len = bytes.get(len_at..len_at + 2).ok_or_else(short)?;
    let n = u16::from_le_bytes([len[0], len[1]]) as usize;
    let end = len_at + 2 + n;
    if end > bytes.len() {
        return Err(short());
    }
    Ok(RecordSpan { end })
}

/// Reads a `wire-bin` stream held whole: its sections and their records,
/// or the first problem with the byte offset where it is
/// ([`BinReader`]'s items, gathered).
pub fn read_binary(bytes: &[u8]) -> Result<Vec<BinSection>, WireError> {
    let mut sections: Vec<BinSection> = Vec::new();
    for item in BinReader::new(bytes) {
        match item {
            Ok(BinItem::Section { arch, .. }) => sections.push(BinSection {
                arch,
                records: Vec::new(),
            }),
            Ok(BinItem::Record(r)) => {
                if let Some(s) = sections.last_mut() {
                    s.records.push(r);
                }
            }
            Err(BinReadError::Wire(e)) => return Err(e),
            // A slice reads without failing.
            Err(BinReadError::Read(e)) => return Err(malformed(0, e.to_string())),
        }
    }
    Ok(sections)
}

/// The error of a section opened at `start` that holds `n` records and has
/// no end marker before byte `at`: the stream's end (`at_end`) or the next
/// section's header.
fn unended(start: usize, n: u64, at: usize, at_end: bool) -> WireError {
    let records = if n == 1 { "record" } else { "records" };
    let message = if at_end {
        format!("the stream ends at byte {at} before the end marker (`APIRDONE`) of the section at byte {start}: it is cut short after {n} {records}")
    } else {
        format!("the section at byte {start} has no end marker (`APIRDONE`) before the next section at byte {at}: it is cut short after {n} {records}")
    };
    malformed(at, message)
}

#[cfg(test)]
fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    apir_ir::printer::write_hex(&mut s, bytes);
    s
}

/// `--emit=wire-dump`: a header per descriptor, then one line per field.
pub fn dump(m: &Module, ops: &[WireOp]) -> String {
    dump_for(m.arch, ops)
}

/// [`dump`] of ops of an `arch` module.
pub fn dump_for(arch: Arch, ops: &[WireOp]) -> String {
    let mut out = String::new();
    dump_into(&mut out, arch, ops, None);
    out
}

/// Where a rendered text wrote each op index: the byte offset of its
/// digits and the index written there. Text rendered with indices counted
/// from 0 is written with each shifted by the ops before it
/// ([`write_rebased`]), as [`rebase_binary`] shifts `wire-bin` records.
pub(crate) type IndexMarks = Vec<(usize, usize)>;

/// `index` in decimal onto `out`, noted in `marks`.
#[inline]
fn push_index(out: &mut String, index: usize, marks: &mut Option<&mut IndexMarks>) {
    if let Some(m) = marks {
        m.push((out.len(), index));
    }
    out.push_str(itoa::Buffer::new().format(index));
}

/// [`dump_for`] onto `out`, noting where each op index goes.
pub(crate) fn dump_into(
    out: &mut String,
    arch: Arch,
    ops: &[WireOp],
    mut marks: Option<&mut IndexMarks>,
) {
    let mut num = itoa::Buffer::new();
    for op in ops {
        for o in &op.operands {
            out.push_str("// op ");
            push_index(out, op.index, &mut marks);
            out.push(' ');
            out.push_str(op.op);
            out.push_str(" (");
            out.push_str(op.encoder);
            out.push_str(") ");
            out.push_str(&o.role);
            out.push(' ');
            out.push_str(o.kind.name());
            out.push_str(" channels=");
            out.push_str(num.format(o.channels));
            if !op.loc.is_empty() {
                // The file name as diagnostics show it (`shown_line`): a
                // line end in it as `\n`, an escape as `?`; the header
                // stays one line and nothing reaches the terminal raw.
                out.push_str(" @ ");
                out.push_str(&apir_ir::source::shown_line(&op.loc));
            }
            out.push('\n');
            match Descriptor::decode(o.kind, &o.bytes) {
                Ok(d) => annotate_into(out, &d, arch),
                Err(e) => {
                    use std::fmt::Write as _;
                    let _ = writeln!(out, "<undecodable: {e}>");
                }
            }
        }
    }
}

/// `--emit=wire-hex`: one line per operand: op index, role, kind, channels,
/// lowercase hex.
pub fn hex_lines(ops: &[WireOp]) -> String {
    let mut out = String::new();
    hex_lines_into(&mut out, ops, None);
    out
}

/// [`hex_lines`] onto `out`, noting where each op index goes.
pub(crate) fn hex_lines_into(out: &mut String, ops: &[WireOp], mut marks: Option<&mut IndexMarks>) {
    let mut num = itoa::Buffer::new();
    for op in ops {
        for o in &op.operands {
            push_index(out, op.index, &mut marks);
            out.push(' ');
            out.push_str(&o.role);
            out.push(' ');
            out.push_str(o.kind.name());
            out.push(' ');
            out.push_str(num.format(o.channels));
            out.push(' ');
            apir_ir::printer::write_hex(out, &o.bytes);
            out.push('\n');
        }
    }
}

/// Writes `text`, whose op indices [`IndexMarks`] locates, to `out` with
/// every index shifted by `base`; the rest of the text is written as it
/// is. A mark that does not hold its index's digits (never the case for
/// text the renderers wrote) leaves the text there as it is.
pub(crate) fn write_rebased(
    text: &[u8],
    marks: &[(usize, usize)],
    base: usize,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let (mut num, mut shifted) = (itoa::Buffer::new(), itoa::Buffer::new());
    let mut from = 0;
    for &(at, index) in marks {
        let digits = num.format(index).as_bytes();
        let end = at.saturating_add(digits.len());
        if at < from || text.get(at..end) != Some(digits) {
            debug_assert!(false, "op index mark at byte {at} does not hold {index}");
            continue;
        }
        out.write_all(&text[from..at])?;
        out.write_all(shifted.format(index.saturating_add(base)).as_bytes())?;
        from = end;
    }
    out.write_all(&text[from..])
}

/// `--emit=wire-bin`: a section header, one record per descriptor and the
/// end marker (the framing is the module doc's); fails as [`append_binary`] does on a
/// field too wide for the framing.
pub fn binary(arch: Arch, ops: &[WireOp]) -> Result<Vec<u8>, WireError> {
    let mut out = bin_header(arch).to_vec();
    let mut records = 0u64;
    for op in ops {
        for o in &op.operands {
            append_record(
                &mut out, op.index, &o.role, o.kind, o.dtype, o.channels, &o.bytes,
            )?;
            records += 1;
        }
    }
    out.extend_from_slice(&bin_end(records));
    Ok(out)
}

#[cfg(test)]
#[derive(Serialize)]
struct JsonOperand<'a> {
    role: &'a str,
    kind: &'static str,
    dtype: &'static str,
    channels: u32,
    bytes: String,
}

#[cfg(test)]
#[derive(Serialize)]
struct JsonOp<'a> {
    index: usize,
    op: &'static str,
    encoder: &'static str,
    loc: &'a str,
    operands: Vec<JsonOperand<'a>>,
}

/// A diagnostic in JSON output.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct JsonDiagnostic {
    /// `error`, `warning`, `note` or `internal error`.
    pub severity: String,
    /// Message.
    pub message: String,
    /// `file:line:col` or `null`.
    pub loc: Option<String>,
    /// Secondary messages ("first defined here", "did you mean ..."), each
    /// with its `file:line:col` or `null`; left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<JsonNote>,
}

/// A note of a [`JsonDiagnostic`].
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct JsonNote {
    /// Message.
    pub message: String,
    /// `file:line:col` or `null`.
    pub loc: Option<String>,
}

/// `--emit=json`: `{"arch", "ops": [...], "diagnostics": [...]}`. The
/// arch is `null` when there is none to name (the document of a failure
/// whose module header gives no valid arch, with no `--arch`): the
/// document does not make one up.
pub fn json(
    arch: impl Into<Option<apir_ir::Arch>>,
    ops: &[WireOp],
    diagnostics: &[JsonDiagnostic],
) -> String {
    let mut w = JsonWriter::default();
    let mut s = JsonWriter::head(arch);
    s.push_str(&w.ops(ops));
    s.push_str(&w.tail(diagnostics));
    s
}

/// The [`json`] document written as its ops arrive: [`JsonWriter::head`],
/// then [`JsonWriter::ops`] for each run of ops in order, then
/// [`JsonWriter::tail`] with the run's diagnostics. The pieces joined are
/// the document `serde_json` pretty-prints, byte for byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonWriter {
    ops: usize,
}

/// `value` as pretty JSON, every line after the first indented by
/// `indent` (JSON text holds no raw newline inside a string).
fn pretty_at<T: Serialize + ?Sized>(value: &T, indent: &str) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
        .replace('\n', &format!("\n{indent}"))
}

impl JsonWriter {
    /// A writer that has written `ops` ops (the ops of a streamed run).
    pub fn after(ops: usize) -> Self {
        JsonWriter { ops }
    }

    /// The document up to its first op.
    pub fn head(arch: impl Into<Option<apir_ir::Arch>>) -> String {
        format!(
            "{{\n  \"arch\": {},\n  \"ops\": [",
            pretty_at(&arch.into().map(|a| a.name()), "")
        )
    }

    /// The next ops of the document.
    pub fn ops(&mut self, ops: &[WireOp]) -> String {
        let mut s = String::new();
        self.ops_into(&mut s, ops, None);
        s
    }

    /// [`JsonWriter::ops`] onto `out`, noting where each op index goes.
    pub(crate) fn ops_into(
        &mut self,
        out: &mut String,
        ops: &[WireOp],
        mut marks: Option<&mut IndexMarks>,
    ) {
        for op in ops {
            if self.ops > 0 {
                out.push(',');
            }
            out.push_str("\n    ");
            json_op_into(out, op, &mut marks);
            self.ops += 1;
        }
    }

    /// What goes between this writer's ops and a run of `ops` more that a
    /// writer of their own (one that had written none) rendered: `,` when
    /// both have ops. The run's ops count as written.
    pub(crate) fn join(&mut self, ops: usize) -> &'static str {
        let sep = if self.ops > 0 && ops > 0 { "," } else { "" };
        self.ops += ops;
        sep
    }

    /// The rest of the document: the end of the ops, then `diagnostics`.
    pub fn tail(&self, diagnostics: &[JsonDiagnostic]) -> String {
        let mut s = String::new();
        if self.ops > 0 {
            s.push_str("\n  ");
        }
        s.push_str("],\n  \"diagnostics\": ");
        s.push_str(&pretty_at(diagnostics, "  "));
        s.push_str("\n}\n");
        s
    }
}

/// An op as the document shows it (the form [`json_op_into`] writes).
#[cfg(test)]
fn json_op(op: &WireOp) -> JsonOp<'_> {
    JsonOp {
        index: op.index,
        op: op.op,
        encoder: op.encoder,
        loc: &op.loc,
        operands: op
            .operands
            .iter()
            .map(|o| JsonOperand {
                role: &o.role,
                kind: o.kind.name(),
                dtype: o.dtype.name(),
                channels: o.channels,
                bytes: hex(&o.bytes),
            })
            .collect(),
    }
}

/// `s` as a JSON string, escaped as `serde_json` escapes it.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&pretty_at(s, ""));
    }
}

/// `op` as `serde_json` pretty-prints it within the document (nested at
/// the ops' depth: every line after the first indented by four blanks),
/// written field by field.
fn json_op_into(out: &mut String, op: &WireOp, marks: &mut Option<&mut IndexMarks>) {
    let mut num = itoa::Buffer::new();
    out.push_str("{\n      \"index\": ");
    push_index(out, op.index, marks);
    out.push_str(",\n      \"op\": ");
    push_json_str(out, op.op);
    out.push_str(",\n      \"encoder\": ");
    push_json_str(out, op.encoder);
    out.push_str(",\n      \"loc\": ");
    push_json_str(out, &op.loc);
    out.push_str(",\n      \"operands\": [");
    for (i, o) in op.operands.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str("        {\n          \"role\": ");
        push_json_str(out, &o.role);
        out.push_str(",\n          \"kind\": ");
        push_json_str(out, o.kind.name());
        out.push_str(",\n          \"dtype\": ");
        push_json_str(out, o.dtype.name());
        out.push_str(",\n          \"channels\": ");
        out.push_str(num.format(o.channels));
        out.push_str(",\n          \"bytes\": \"");
        apir_ir::printer::write_hex(out, &o.bytes);
        out.push_str("\"\n        }");
    }
    if !op.operands.is_empty() {
        out.push_str("\n      ");
    }
    out.push_str("]\n    }");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compilation;

    /// The document as one `serde_json` value: what [`JsonWriter`]'s
    /// pieces must add up to.
    #[derive(Serialize)]
    struct JsonDoc<'a> {
        arch: &'static str,
        ops: Vec<JsonOp<'a>>,
        diagnostics: &'a [JsonDiagnostic],
    }

    /// The document written piece by piece, in runs of any length, is the
    /// whole document `serde_json` pretty-prints: with no op, one op or
    /// many, no diagnostic or several (with notes, quotes and newlines in
    /// their text).
    #[test]
    fn json_pieces_add_up_to_the_document() {
        let c = lowered(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../examples/batchnorm.apir"
            ))
            .unwrap(),
        );
        let ops = collect(&c.module, &c.sources).unwrap();
        assert!(ops.len() >= 3);
        let diags = [
            JsonDiagnostic {
                severity: "warning".into(),
                message: "a \"quoted\"\nmessage".into(),
                loc: Some("k.apir:1:2".into()),
                notes: vec![JsonNote {
                    message: "did you mean `x`?".into(),
                    loc: None,
                }],
            },
            JsonDiagnostic {
                severity: "error".into(),
                message: "ré∂".into(),
                loc: None,
                notes: vec![],
            },
        ];
        for n in [0, 1, ops.len()] {
            for d in [&diags[..0], &diags[..1], &diags[..]] {
                let doc = JsonDoc {
                    arch: c.module.arch.name(),
                    ops: ops[..n].iter().map(json_op).collect(),
                    diagnostics: d,
                };
                let want = serde_json::to_string_pretty(&doc).unwrap() + "\n";
                assert_eq!(json(c.module.arch, &ops[..n], d), want);
                for run in 1..=3 {
                    let mut w = JsonWriter::default();
                    let mut got = JsonWriter::head(c.module.arch);
                    for chunk in ops[..n].chunks(run) {
                        got.push_str(&w.ops(chunk));
                    }
                    assert_eq!(w, JsonWriter::after(n));
                    got.push_str(&JsonWriter::after(n).tail(d));
                    assert_eq!(got, want, "{n} ops in runs of {run}");
                }
            }
        }
    }

    /// The random-access reader `wire-bin` was read with before
    /// [`BinReader`]: the stream held whole, each field read where its
    /// offset says. Kept as the reference the streaming reader is checked
    /// against.
    fn reference_read(bytes: &[u8]) -> Result<Vec<BinSection>, WireError> {
        let mut sections: Vec<BinSection> = Vec::new();
        // The byte where the section being read began, until its end marker.
        let mut open: Option<usize> = None;
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at..].starts_with(WIRE_BIN_MAGIC) {
                if let (Some(start), Some(section)) = (open, sections.last()) {
                    return Err(unended(
                        start,
                        section.records.len() as u64,
                        at,
                        at == bytes.len(),
                    ));
                }
                let h = bytes.get(at..at + WIRE_BIN_HEADER).ok_or_else(|| {
                    malformed(at, format!("section header at byte {at} is cut short"))
                })?;
                let version = u16::from_le_bytes([h[8], h[9]]);
                if version != WIRE_BIN_VERSION {
                    return Err(malformed(at, format!(
                        "section at byte {at} has framing version {version}; this reader knows version {WIRE_BIN_VERSION}"
                    )));
                }
                let arch = match h[10] {
                    2 => Arch::V2,
                    3 => Arch::V3,
                    4 => Arch::V4,
                    c => {
                        return Err(malformed(
                            at,
                            format!(
                                "section at byte {at} names arch code {c} (expected 2, 3 or 4)"
                            ),
                        ))
                    }
                };
                // Bytes 11.. are zero in this version: anything else is a
                // stream of another layout, not one to read as this one.
                if let Some(i) = h[11..].iter().position(|&b| b != 0) {
                    return Err(malformed(
                        at + 11 + i,
                        format!(
                            "section at byte {at} has {:#04x} at byte {} of its header, which is zero in version {WIRE_BIN_VERSION}",
                            h[11 + i],
                            11 + i
                        ),
                    ));
                }
                sections.push(BinSection {
                    arch,
                    records: Vec::new(),
                });
                open = Some(at);
                at += WIRE_BIN_HEADER;
                continue;
            }
            let Some(section) = sections.last_mut() else {
                return Err(malformed(
                    at,
                    "the input does not start with the wire-bin magic `APIRWIRE`".into(),
                ));
            };
            let Some(start) = open else {
                return Err(malformed(
                    at,
                    format!("byte {at} follows the end marker of its section, but starts no section (`APIRWIRE`)"),
                ));
            };
            if bytes[at..].starts_with(WIRE_BIN_END_MAGIC) {
                let e = bytes.get(at..at + WIRE_BIN_END).ok_or_else(|| {
                    malformed(at, format!("end marker at byte {at} is cut short"))
                })?;
                let mut count = [0u8; 8];
                count.copy_from_slice(&e[8..]);
                let count = u64::from_le_bytes(count);
                let read = section.records.len() as u64;
                if count != read {
                    return Err(malformed(
                        at,
                        format!("end marker at byte {at} counts {count} records, but the section at byte {start} holds {read}"),
                    ));
                }
                open = None;
                at += WIRE_BIN_END;
                continue;
            }
            let span = record_at(bytes, at)?;
            let op = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            let kind = match bytes[at + 4] {
                n @ 1..=4 => DescriptorKind::Tensor(n),
                c @ 0x11..=0x14 => DescriptorKind::MemPattern(c & 0x0f),
                c => {
                    return Err(malformed(
                        at,
                        format!(
                            "record at byte {at}: kind code {c:#04x} is not a descriptor struct"
                        ),
                    ))
                }
            };
            let dtype = Dtype::from_code(bytes[at + 5]).ok_or_else(|| {
                malformed(
                    at,
                    format!(
                        "record at byte {at}: dtype code {} is unknown",
                        bytes[at + 5]
                    ),
                )
            })?;
            let role_len = u16::from_le_bytes([bytes[at + 7], bytes[at + 8]]) as usize;
            let role = std::str::from_utf8(&bytes[at + 9..at + 9 + role_len])
                .map_err(|_| malformed(at, format!("record at byte {at}: the role is not UTF-8")))?
                .to_string();
            let data = at + 9 + role_len + 2;
            section.records.push(BinRecord {
                op,
                role,
                kind,
                dtype,
                channels: bytes[at + 6],
                bytes: bytes[data..span.end].to_vec(),
                offset: at,
            });
            at = span.end;
        }
        if let (Some(start), Some(section)) = (open, sections.last()) {
            return Err(unended(
                start,
                section.records.len() as u64,
                bytes.len(),
                true,
            ));
        }
        Ok(sections)
    }

    /// A reader handing out `step` bytes a read, fewer every third read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            let step = if self.reads.is_multiple_of(3) {
                1
            } else {
                self.step
            };
            let n = step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// `BinReader`'s items through reads of `step` bytes, gathered into
    /// sections as `read_binary` gathers them.
    fn streamed(bytes: &[u8], step: usize) -> Result<Vec<BinSection>, WireError> {
        let mut sections: Vec<BinSection> = Vec::new();
        let reader = BinReader::new(Trickle {
            data: bytes,
            step,
            reads: 0,
        });
        for item in reader {
            match item {
                Ok(BinItem::Section { arch, .. }) => sections.push(BinSection {
                    arch,
                    records: Vec::new(),
                }),
                Ok(BinItem::Record(r)) => sections.last_mut().unwrap().records.push(r),
                Err(BinReadError::Wire(e)) => return Err(e),
                Err(BinReadError::Read(e)) => panic!("{e}"),
            }
        }
        Ok(sections)
    }

    /// Streamed in reads of any size, a `wire-bin` stream gives what the
    /// random-access reader gives for it held whole: the same sections and
    /// records, or the same error at the same offset, on every truncation,
    /// every single-byte corruption, glued and reordered sections, and
    /// records whose role and bytes are long (a record larger than a read
    /// chunk).
    #[test]
    fn streamed_reads_give_what_the_stream_held_whole_gives() {
        let c = lowered(TEXT);
        let bin = binary(c.module.arch, &collect(&c.module, &c.sources).unwrap()).unwrap();
        let mut inputs: Vec<Vec<u8>> =
            vec![Vec::new(), bin.clone(), [bin.clone(), bin.clone()].concat()];
        for n in 0..bin.len() {
            inputs.push(bin[..n].to_vec());
        }
        for i in 0..bin.len() {
            for v in [0x00u8, 0x7f, 0xff, b'A'] {
                let mut b = bin.clone();
                b[i] = v;
                inputs.push(b);
            }
        }
        // The end marker before the header, and a stray section header.
        let end = &bin[bin.len() - WIRE_BIN_END..];
        inputs.push([end, &bin[..]].concat());
        inputs.push([&bin[..], &bin[..WIRE_BIN_HEADER]].concat());
        inputs.push([&bin[..bin.len() - WIRE_BIN_END], &bin[..]].concat());
        // A record longer than a read chunk: a 60,000-byte role and a
        // 60,000-byte descriptor.
        let mut big = bin[..WIRE_BIN_HEADER].to_vec();
        append_record(
            &mut big,
            7,
            &"r".repeat(60_000),
            DescriptorKind::Tensor(2),
            Dtype::F32,
            3,
            &[0xab; 60_000],
        )
        .unwrap();
        big.extend_from_slice(&bin_end(1));
        inputs.push(big.clone());
        inputs.push(big[..big.len() - 20].to_vec());
        let (mut ok, mut bad) = (0, 0);
        for input in &inputs {
            let want = reference_read(input);
            assert_eq!(read_binary(input), want);
            for step in [1, 5, 17, 4096, usize::MAX] {
                assert_eq!(
                    streamed(input, step),
                    want,
                    "{} bytes in reads of {step}",
                    input.len()
                );
            }
            if want.is_ok() {
                ok += 1;
            } else {
                bad += 1;
            }
        }
        assert!(ok > 10 && bad > 100, "{ok} read, {bad} rejected");
        assert_eq!(
            reference_read(&big).unwrap()[0].records[0].bytes.len(),
            60_000
        );
    }

    /// An op written field by field is the op `serde_json` pretty-prints
    /// at the ops' depth, whatever its strings hold (quotes, backslashes,
    /// control characters, newlines, non-ASCII) and however many operands
    /// it has (none too).
    #[test]
    fn json_ops_are_written_as_serde_json_prints_them() {
        let c = lowered(TEXT);
        let ops = collect(&c.module, &c.sources).unwrap();
        let strange = [
            "",
            "plain:1:2",
            "a \"quoted\" \\path\\",
            "tab\there\nnew line\r\u{0}\u{1f}\u{7f}",
            "ré∂ 🦀",
        ];
        for (i, text) in strange.iter().enumerate() {
            for n in 0..=2 {
                let mut op = ops[0].clone();
                op.index = i * 1_000_003;
                op.loc = (*text).to_string();
                op.operands.truncate(n);
                for o in &mut op.operands {
                    o.role = format!("{text}{n}");
                    o.channels = u32::MAX;
                }
                let mut got = String::new();
                json_op_into(&mut got, &op, &mut None);
                assert_eq!(
                    got,
                    pretty_at(&json_op(&op), "    "),
                    "{text:?}, {n} operands"
                );
            }
        }
    }

    /// Text rendered with indices from 0 and written shifted by `base` is
    /// the text rendered with indices from `base`, for every renderer and
    /// bases whose digits are more, as many or no more than the indices'.
    #[test]
    fn rebased_text_is_the_text_rendered_from_its_base() {
        let c = lowered(TEXT);
        let ops = collect(&c.module, &c.sources).unwrap();
        let from = |base: usize| -> Vec<WireOp> {
            (0..12)
                .map(|i| WireOp {
                    index: base + i,
                    ..ops[i % ops.len()].clone()
                })
                .collect()
        };
        type Render = fn(&mut String, &[WireOp], Option<&mut IndexMarks>);
        let renders: [(&str, Render); 3] = [
            ("hex", hex_lines_into),
            ("dump", |out, ops, marks| {
                dump_into(out, Arch::V3, ops, marks)
            }),
            ("json", |out, ops, marks| {
                JsonWriter::default().ops_into(out, ops, marks)
            }),
        ];
        for (name, render) in renders {
            let mut text = String::new();
            let mut marks = IndexMarks::new();
            render(&mut text, &from(0), Some(&mut marks));
            assert!(marks.len() >= 12, "{name}");
            for base in [0, 1, 7, 95, 1_000, usize::MAX / 2] {
                let mut want = String::new();
                render(&mut want, &from(base), None);
                let mut got = Vec::new();
                write_rebased(text.as_bytes(), &marks, base, &mut got).unwrap();
                assert_eq!(String::from_utf8(got).unwrap(), want, "{name} from {base}");
            }
        }
    }

    fn lowered(text: &str) -> Compilation {
        let mut c = Compilation::parse("w.apir", text, None)
            .map_err(|e| e.to_string())
            .unwrap();
        c.run("lower-to-wire").unwrap();
        c
    }

    const TEXT: &str = "module attributes {arch = \"v3\"} {
  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x2048xbf16>
  %p = mem.psum {partition = 0, byte = 0} : tile<128x512xf32>
  isa.tensor_copy src = %x[[2048, 128], [4, 512]] + 1, dst = %p[[512, 128], [1, 512]]
  isa.memset dst = %p[[512, 64], [1, 512]]
}
";

    /// What `binary` writes, `read_binary` reads back: arch, op indices,
    /// roles, kinds, dtypes, channels and bytes, in wire order; two
    /// sections one after the other read as two; `append_binary` and
    /// `rebase_binary` give the same records as `binary`.
    /// One record's fields.
    type Fields<'a> = (u32, &'a str, DescriptorKind, Dtype, u8, &'a [u8]);

    #[test]
    fn binary_reads_back() {
        let c = lowered(TEXT);
        let ops = collect(&c.module, &c.sources).unwrap();
        let bin = binary(c.module.arch, &ops).unwrap();
        assert!(is_binary(&bin));
        let sections = read_binary(&bin).unwrap();
        assert_eq!(sections.len(), 1);
        assert_eq!(sections[0].arch, Arch::V3);
        let want: Vec<Fields> = ops
            .iter()
            .flat_map(|op| {
                op.operands.iter().map(move |o| {
                    (
                        op.index as u32,
                        o.role.as_str(),
                        o.kind,
                        o.dtype,
                        o.channels as u8,
                        &o.bytes[..],
                    )
                })
            })
            .collect();
        let got: Vec<Fields> = sections[0]
            .records
            .iter()
            .map(|r| {
                (
                    r.op,
                    r.role.as_str(),
                    r.kind,
                    r.dtype,
                    r.channels,
                    &r.bytes[..],
                )
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(got.len(), 3);
        // tensor_copy's dst (the f32 PSUM tile) comes first in wire order,
        // then its src, the bf16 tile.
        assert_eq!((got[0].1, got[0].3), ("dst", Dtype::F32));
        assert_eq!((got[1].1, got[1].3), ("src", Dtype::Bf16));
        // Two sections.
        let mut two = bin.clone();
        two.extend_from_slice(&bin);
        assert_eq!(read_binary(&two).unwrap().len(), 2);
        // Streaming: records from append_binary, renumbered by rebase.
        let mut recs = Vec::new();
        append_binary(&c.module, &mut recs, 0).unwrap();
        assert_eq!(recs, bin[WIRE_BIN_HEADER..bin.len() - WIRE_BIN_END]);
        rebase_binary(&mut recs, 7);
        let mut shifted = bin_header(Arch::V3).to_vec();
        shifted.extend_from_slice(&recs);
        shifted.extend_from_slice(&bin_end(3));
        let ops7: Vec<u32> = read_binary(&shifted).unwrap()[0]
            .records
            .iter()
            .map(|r| r.op)
            .collect();
        assert_eq!(ops7, [7, 7, 8]);
    }

    /// Every section ends with its end marker: a stream cut at any byte
    /// inside a section, between two records included, is an error (a cut
    /// exactly between two sections leaves the first, whole), as is
    /// an end marker whose count is not the section's, one with no
    /// section open, and bytes after it that start no section. The marker
    /// is written here from the module doc's table, byte by byte.
    #[test]
    fn a_stream_cut_anywhere_is_an_error() {
        let c = lowered(TEXT);
        let ops = collect(&c.module, &c.sources).unwrap();
        let bin = binary(c.module.arch, &ops).unwrap();
        let mut marker = b"APIRDONE".to_vec();
        marker.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bin[bin.len() - 16..], marker[..]);
        let two = [&bin[..], &bin[..]].concat();
        assert_eq!(read_binary(&two).unwrap().len(), 2);
        for cut in 1..two.len() {
            if cut == bin.len() {
                assert_eq!(read_binary(&two[..cut]).unwrap().len(), 1);
                continue;
            }
            let err = read_binary(&two[..cut]).unwrap_err();
            assert!(matches!(err, WireError::Malformed { .. }), "{cut}: {err}");
        }
        // Cut exactly after the last record of the first section, and
        // just before the second one's header.
        let records_end = bin.len() - 16;
        let msg = read_binary(&bin[..records_end]).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("the stream ends at byte {records_end} before the end marker (`APIRDONE`) of the section at byte 0: it is cut short after 3 records")),
            "{msg}"
        );
        let glued = [&bin[..records_end], &bin[..]].concat();
        let msg = read_binary(&glued).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("the section at byte 0 has no end marker (`APIRDONE`) before the next section at byte {records_end}")),
            "{msg}"
        );
        // A count that is not the section's.
        let mut miscounted = bin.clone();
        miscounted[records_end + 8] = 2;
        let msg = read_binary(&miscounted).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("end marker at byte {records_end} counts 2 records, but the section at byte 0 holds 3")),
            "{msg}"
        );
        // Records after the end marker, and a second end marker.
        let first_record = WIRE_BIN_HEADER;
        let trailing = [&bin[..], &bin[first_record..records_end]].concat();
        let msg = read_binary(&trailing).unwrap_err().to_string();
        assert!(
            msg.contains(&format!(
                "byte {} follows the end marker of its section",
                bin.len()
            )),
            "{msg}"
        );
        let twice = [&bin[..], &marker[..]].concat();
        assert!(read_binary(&twice).is_err());
        // A stream of the framing before the end marker (version 1).
        let mut old = bin[..records_end].to_vec();
        old[8] = 1;
        let msg = read_binary(&old).unwrap_err().to_string();
        assert!(
            msg.contains("has framing version 1; this reader knows version 2"),
            "{msg}"
        );
    }

    /// The record layout of the module doc, written field by field with
    /// no shortcut: what [`append_record`] must write, and the error it
    /// must give (the first field too wide, in record order).
    fn reference_record(
        out: &mut Vec<u8>,
        op: usize,
        role: &str,
        kind: DescriptorKind,
        dtype: Dtype,
        channels: u32,
        bytes: &[u8],
    ) -> Result<(), WireError> {
        let too_wide = |field: &'static str| WireError::TooWide {
            field,
            op,
            role: role.to_string(),
        };
        let op32 = u32::try_from(op).map_err(|_| too_wide("the op index"))?;
        let ch = u8::try_from(channels).map_err(|_| too_wide("the channel count"))?;
        let role_len = u16::try_from(role.len()).map_err(|_| too_wide("the role name"))?;
        let len = u16::try_from(bytes.len()).map_err(|_| too_wide("the descriptor"))?;
        out.extend_from_slice(&op32.to_le_bytes());
        out.push(kind_code(kind));
        out.push(dtype.code());
        out.push(ch);
        out.extend_from_slice(&role_len.to_le_bytes());
        out.extend_from_slice(role.as_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(bytes);
        Ok(())
    }

    /// Every role name of the op table and every descriptor is appended
    /// at a constant length: records are two appends each.
    #[test]
    fn role_names_and_descriptors_are_joined_at_constant_lengths() {
        macro_rules! as_array {
            ($($n:literal)*) => {
                [$($n),*]
            };
        }
        let joined: &[usize] = &with_joined_lengths!(as_array);
        for name in apir_ir::target::encoders::role_names() {
            assert!(joined.contains(&name.len()), "role `{name}`");
        }
        for n in 1..=apir_ir::target::descriptor::MAX_SLOTS {
            assert!(joined.contains(&(4 + 4 * n)), "{n}D descriptor");
        }
    }

    /// [`extend_joined`] appends exactly the head and bytes given, at every
    /// length (the constant-length ones and the others), with heads of the
    /// record's two widths and of 0 and 30 bytes, to empty and non-empty
    /// vectors and across a reallocation.
    #[test]
    fn joined_copies_append_the_bytes_given() {
        fn check<const H: usize>(src: &[u8]) {
            let head: [u8; H] = std::array::from_fn(|i| 0xa0 ^ i as u8);
            for n in 0..=70 {
                for before in [0usize, 1, 7, 64] {
                    for cap in [0usize, before, before + H + n] {
                        let mut got = Vec::with_capacity(cap);
                        got.extend_from_slice(&src[200 - before..200]);
                        let mut want = got.clone();
                        extend_joined(&mut got, &head, &src[..n]);
                        want.extend_from_slice(&head);
                        want.extend_from_slice(&src[..n]);
                        assert_eq!(got, want, "{H} + {n} bytes after {before}");
                    }
                }
            }
        }
        let src: Vec<u8> = (0u8..=255).collect();
        check::<0>(&src);
        check::<2>(&src);
        check::<9>(&src);
        check::<30>(&src);
    }

    /// [`append_record`] writes what the record layout says and fails as it
    /// does, on every kind, with roles and descriptors of every length up
    /// to past the framing widths, and op indices and channel counts at
    /// their limits.
    #[test]
    fn records_follow_the_layout() {
        let kinds =
            (1..=4).flat_map(|n| [DescriptorKind::Tensor(n), DescriptorKind::MemPattern(n)]);
        let long = "r".repeat(70_000);
        let data: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        let roles = [0, 1, 3, 4, 5, 6, 10, 17, 65_535, 65_536];
        let lens = [0, 1, 8, 12, 16, 19, 20, 21, 65_535, 65_536];
        let ops = [0usize, 7, u32::MAX as usize, u32::MAX as usize + 1];
        for kind in kinds {
            for dtype in [Dtype::F32, Dtype::Bf16, Dtype::I32] {
                for &r in &roles {
                    for &n in &lens {
                        for &op in &ops {
                            for ch in [0u32, 128, 255, 256] {
                                let role = &long[..r];
                                let bytes = &data[..n];
                                let mut got = vec![9u8];
                                let mut want = got.clone();
                                let g = append_record(&mut got, op, role, kind, dtype, ch, bytes);
                                let w =
                                    reference_record(&mut want, op, role, kind, dtype, ch, bytes);
                                assert_eq!(g, w, "{kind} {r} {n} {op} {ch}");
                                if w.is_ok() {
                                    assert_eq!(got, want, "{kind} {r} {n} {op} {ch}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The streamed records of [`append_binary`] are those of [`binary`]
    /// over [`collect`]: on the examples, on ops whose operands are written
    /// out of role order, on `isa.custom` ops, numbered from any first
    /// index.
    #[test]
    fn streamed_records_are_the_collected_ones() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
        let mut texts: Vec<String> = ["batchnorm.apir", "relu-kernel.apir"]
            .iter()
            .map(|f| std::fs::read_to_string(format!("{dir}/{f}")).unwrap())
            .collect();
        texts.push(TEXT.to_string());
        texts.push("module attributes {arch = \"v2\"} {
  %s = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>
  %b = mem.sbuf {partition = 0, byte = 0x400} : tile<128x8xf32>
  isa.activation bias = %b[[8, 128], [1, 1]], src = %s[[64, 128], [1, 64]], dst = %s[[64, 128], [1, 64]]
  isa.custom zz = %s[[64, 128], [1, 4]] as \"NEURON_ISA_TPB_TENSOR1D\", a = %s[[64, 64], [1, 8]] as \"NEURON_ISA_TPB_TENSOR1D\"
  isa.tensor_tensor src1 = %s[[64, 128], [1, 64]], dst = %s[[64, 128], [1, 64]], src0 = %s[[64, 128], [1, 64]] {op = \"add\"}
}
".to_string());
        for text in &texts {
            let c = lowered(text);
            let ops = collect(&c.module, &c.sources).unwrap();
            for first in [0, 5] {
                let renumbered: Vec<WireOp> = ops
                    .iter()
                    .cloned()
                    .map(|mut op| {
                        op.index += first;
                        op
                    })
                    .collect();
                let want = binary(c.module.arch, &renumbered).unwrap();
                let mut got = vec![1, 2, 3];
                let n = append_binary(&c.module, &mut got, first).unwrap();
                assert_eq!(n.ops, ops.len());
                let records: usize = ops.iter().map(|op| op.operands.len()).sum();
                assert_eq!(n.records, records as u64);
                assert_eq!(got[..3], [1, 2, 3]);
                // The records only: the section's header and end marker
                // are the streaming caller's.
                assert_eq!(
                    got[3..],
                    want[WIRE_BIN_HEADER..want.len() - WIRE_BIN_END],
                    "{text}"
                );
                assert_eq!(want[want.len() - WIRE_BIN_END..], bin_end(n.records));
            }
        }
        // Not lowered: the error names the first operand in wire order
        // (the activation's `dst`, written last), as `collect`'s does.
        let text = texts.last().unwrap();
        let c = Compilation::parse("w.apir", text, None).unwrap();
        let err = append_binary(&c.module, &mut Vec::new(), 0).unwrap_err();
        // Without a location the message names the op by its id: op #0
        // here, op #2 once the ops before it are lowered.
        assert!(
            err.to_string()
                .starts_with("operand `dst` of op #0 (`isa.activation`) has no descriptor bytes"),
            "{err}"
        );
        let mut m = lowered(text).module;
        let third = m.top_ops().nth(2).unwrap();
        m.ops[third]
            .operands
            .iter_mut()
            .for_each(|o| o.lowered = None);
        let e = append_binary(&m, &mut Vec::new(), 0).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "operand `dst` of op #2 (`isa.tensor_tensor`) has no descriptor bytes"
            ),
            "{e}"
        );
        let WireError::NotEncoded { subject, location } = err else {
            panic!("{err:?}")
        };
        assert_eq!(
            (subject.name, subject.role.as_deref(), location),
            ("isa.activation", Some("dst"), None)
        );
        let Err(WireError::NotEncoded { subject: s2, .. }) = collect(&c.module, &c.sources) else {
            panic!("collected an unlowered module")
        };
        assert_eq!(s2, subject);
    }

    /// A role name longer than 255 bytes (an `isa.custom` operand may be
    /// called anything) reads back whole.
    #[test]
    fn long_role_names_are_not_truncated() {
        let role = "r".repeat(300);
        let text = format!(
            "module attributes {{arch = \"v2\"}} {{\n  %s = mem.sbuf {{partition = 0, byte = 0}} : tile<128x6xf32>\n  isa.custom {role} = %s[[6, 128], [1, 1]] as \"NEURON_ISA_TPB_TENSOR1D\"\n}}\n"
        );
        let c = lowered(&text);
        let bin = binary(c.module.arch, &collect(&c.module, &c.sources).unwrap()).unwrap();
        assert_eq!(read_binary(&bin).unwrap()[0].records[0].role, role);
    }

    /// Every truncation and every single-byte corruption of a stream is
    /// either read or rejected with a message naming a byte offset; none
    /// panics.
    #[test]
    fn damaged_streams_are_rejected_not_panicked_on() {
        let c = lowered(TEXT);
        let bin = binary(c.module.arch, &collect(&c.module, &c.sources).unwrap()).unwrap();
        assert_eq!(read_binary(&[]).unwrap(), []);
        for n in 1..bin.len() {
            let e = read_binary(&bin[..n]).unwrap_err();
            let WireError::Malformed { offset, message } = &e else {
                panic!("{e:?}")
            };
            assert!(*offset <= n, "{e}");
            assert!(message.contains("byte") || message.contains("magic"), "{e}");
        }
        for i in 0..bin.len() {
            for v in [0x00u8, 0x7f, 0xff] {
                let mut b = bin.clone();
                b[i] = v;
                let _ = read_binary(&b);
            }
        }
        assert!(read_binary(b"not a wire stream").is_err());
        let mut v3 = bin.clone();
        v3[8] = 3;
        assert!(read_binary(&v3)
            .unwrap_err()
            .to_string()
            .contains("version 3"));
        // The header's zero bytes are checked.
        for i in 11..WIRE_BIN_HEADER {
            let mut b = bin.clone();
            b[i] = 1;
            assert_eq!(
                read_binary(&b).unwrap_err().to_string(),
                format!("section at byte 0 has 0x01 at byte {i} of its header, which is zero in version 2")
            );
        }
    }
}
