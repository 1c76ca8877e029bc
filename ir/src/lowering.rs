//! The math of the lowered forms, shared by the passes that attach them, the
//! verifier that re-checks them and the evaluator that walks them, so the
//! three can never disagree.

use crate::eval::{logical_walk, EvalError, Walk};
use crate::module::{Dim, Fold, Module, Op, OpKind, Operand};
use crate::target::addr4::{Addr4, Form};
use crate::target::arch::partition_start_rule;
use crate::target::descriptor::{step_fits, Descriptor, MAX_NUM};
use crate::target::encoders::{select_by_struct_name, CUSTOM_STRUCT_KEYS, TWO_WINDOW_INDEX_ROLE};
use crate::target::validate::{check_m4d_active_channels, descriptor_valid, Invalid};
use crate::target::{DescriptorKind, Direction, MemorySet, WindowForm};
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
    /// The start byte (the buffer's base plus the element's offset in its
    /// partition) does not fit 64 bits: a buffer the verifier rejects.
    ByteOverflow {
        /// The buffer's base byte.
        base: u64,
        /// The element offset within the partition.
        element: u64,
    },
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
            FoldError::ByteOverflow { base, element } => write!(
                f,
                "the start byte of element {element} past base byte {base:#x} overflows 64 bits"
            ),
        }
    }
}

/// The fold of an on-chip operand's partition axis (fold-partition's
/// contract); `Ok(None)` for HBM operands, which have no partition axis.
pub fn fold_of(m: &Module, o: &Operand) -> Result<Option<Fold>, FoldError> {
    fold_in(&m.buffers[o.buffer], o)
}

/// [`fold_of`] for operand `o` of buffer `b` (its buffer).
#[inline(always)]
fn fold_in(b: &crate::module::BufferData, o: &Operand) -> Result<Option<Fold>, FoldError> {
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
    let free = b.free_elements().filter(|&f| f > 0).unwrap_or(u64::MAX);
    if p.num > 1 && p.step as u64 != free {
        return Err(FoldError::PartitionStep { step: p.step, free });
    }
    let off = u64::try_from(o.ap.offset).map_err(|_| FoldError::NegativeStart(o.ap.offset))?;
    let (row, element) = crate::module::div_rem(off, free);
    let start = u64::from(b.partition) + row;
    if let Some(rule) = partition_start_rule(start, p.num) {
        return Err(FoldError::StartRule {
            start,
            channels: p.num,
            rule,
        });
    }
    let elem = b.dtype.bytes();
    let byte = element
        .checked_mul(u64::from(elem))
        .and_then(|e| e.checked_add(b.base))
        .ok_or(FoldError::ByteOverflow {
            base: b.base,
            element,
        })?;
    // `byte.is_multiple_of(elem)`, by a mask for a power-of-two size.
    if crate::module::div_rem(byte, u64::from(elem)).1 != 0 {
        return Err(FoldError::Misaligned { byte, elem });
    }
    Ok(Some(Fold {
        partition: start as u32,
        byte,
        channels: p.num as u32,
    }))
}

/// The free dims of an operand: all dims for HBM, all but pair 0 on chip.
pub fn free_dims<'a>(m: &Module, o: &'a Operand) -> &'a [Dim] {
    free_part(m.buffers[o.buffer].mem.is_on_chip(), &o.ap.dims)
}

/// The free dims among `dims`, an access pattern's in memory `on_chip` or
/// not: all but pair 0 on chip.
#[inline]
fn free_part(on_chip: bool, dims: &[Dim]) -> &[Dim] {
    if on_chip {
        dims.get(1..).unwrap_or(&[])
    } else {
        dims
    }
}

/// compact-unit-dims' contract: the free dims with `num != 1`, innermost
/// first (slot 0 = innermost), in the original order otherwise.
pub fn slots_of(m: &Module, o: &Operand) -> SmallVec<[Dim; 4]> {
    let mut slots = SmallVec::new();
    push_slots(free_dims(m, o), &mut slots);
    slots
}

/// [`slots_of`] from the free dims, onto `slots`.
#[inline]
fn push_slots(free: &[Dim], slots: &mut SmallVec<[Dim; 4]>) {
    for d in free.iter().rev() {
        if d.num != 1 {
            slots.push(*d);
        }
    }
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

/// The role information an operand's descriptor is chosen from: its kind on
/// the module's arch, its direction, allowed memories and ADDR4 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleChoice {
    /// Descriptor struct.
    pub kind: DescriptorKind,
    /// Read or written.
    pub dir: Direction,
    /// Memories the role may address.
    pub mems: MemorySet,
    /// ADDR4 form.
    pub form: WindowForm,
}

impl RoleChoice {
    /// The choice a role of the op-encoder table gives on `arch`.
    #[inline]
    fn of_role(r: &crate::target::RoleInfo, arch: crate::Arch) -> RoleChoice {
        RoleChoice {
            kind: r.kind(arch),
            dir: r.dir,
            mems: r.mems,
            form: r.form,
        }
    }
}

/// Why an operand's descriptor cannot be chosen, built or decoded. Its
/// `Display` is the message the passes and the verifier report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoweringError {
    /// The op's table row has no encoder on the module's arch.
    NotOnArch {
        /// The op.
        op: &'static str,
        /// The module's arch.
        arch: crate::Arch,
        /// The archs it exists on.
        archs: Vec<&'static str>,
    },
    /// The op's table row has no such role.
    UnknownRole {
        /// The op.
        op: &'static str,
        /// The role written.
        role: String,
    },
    /// `isa.custom` names a descriptor struct the selector does not know.
    UnknownStruct {
        /// The operand's role.
        role: String,
        /// The struct key written.
        key: String,
    },
    /// The op has no descriptors (it is not an ISA op).
    NoDescriptors {
        /// The op.
        op: &'static str,
    },
    /// A lowered form or operand the step needs is missing.
    Missing(&'static str),
    /// The attached kind differs from the one the role's row gives.
    KindMismatch {
        /// Attached.
        found: DescriptorKind,
        /// The role's.
        expected: DescriptorKind,
    },
    /// The operand does not fit its descriptor.
    Fit(FitError),
    /// A start byte past the ADDR4 byte field.
    ByteRange {
        /// `byte` or `index byte`.
        what: &'static str,
        /// The byte.
        byte: u64,
    },
    /// The ADDR4 codec refused the address.
    Addr4(crate::target::addr4::Addr4Error),
    /// A two-window source's index window is not aligned to its dtype.
    IndexWindow {
        /// The index window's start byte.
        byte: u64,
        /// The gather source's element type.
        dtype: crate::Dtype,
    },
    /// Descriptor bytes that do not decode.
    Decode(crate::target::descriptor::DecodeError),
}

impl std::fmt::Display for LoweringError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoweringError::NotOnArch { op, arch, archs } => write!(
                f,
                "`{op}` is not available on {arch} (it exists on {})",
                archs.join(", ")
            ),
            LoweringError::UnknownRole { op, role } => write!(f, "`{op}` has no role `{role}`"),
            LoweringError::UnknownStruct { role, key } => write!(
                f,
                "`{}` operand `{role}`: unknown descriptor struct \"{key}\" (expected one of {})",
                crate::target::ops::OpCode::Custom.name(),
                CUSTOM_STRUCT_KEYS.join(", ")
            ),
            LoweringError::NoDescriptors { op } => write!(f, "`{op}` has no descriptors"),
            LoweringError::Missing(what) => f.write_str(what),
            LoweringError::KindMismatch { found, expected } => write!(
                f,
                "kind {} differs from the role's {}",
                found.name(),
                expected.name()
            ),
            LoweringError::Fit(e) => write!(f, "{e}"),
            LoweringError::ByteRange { what, byte } => {
                write!(f, "{what} {byte:#x} does not fit ADDR4")
            }
            LoweringError::Addr4(e) => f.write_str(&e.0),
            LoweringError::IndexWindow { byte, dtype } => write!(
                f,
                "the `{TWO_WINDOW_INDEX_ROLE}` window starts at byte {byte:#x}, but the validator checks it with the gather source's {dtype} size ({} bytes)",
                dtype.bytes()
            ),
            LoweringError::Decode(e) => f.write_str(&e.0),
        }
    }
}

impl std::error::Error for LoweringError {}

/// Picks the descriptor of operand `idx` of `op` (select-descriptor's
/// contract): the op-encoder table row for the module's arch, or for
/// `isa.custom` the string-keyed selector. Errors name the op, role and
/// values.
#[inline]
pub fn role_choice(m: &Module, op: Op, idx: usize) -> Result<RoleChoice, LoweringError> {
    // A table op on its arch with a role of its row, as nearly every
    // operand is, answers from the row at once; every other case (and
    // every error) is [`role_choice_general`], which gives this same
    // answer for this case too.
    let data = &m.ops[op];
    if let OpKind::Isa(isa) = data.kind {
        if isa.on_arch(m.arch) {
            if let Some((_, r)) = isa.role_of(data.operands[idx].role) {
                return Ok(RoleChoice::of_role(r, m.arch));
            }
        }
    }
    role_choice_general(m, op, idx)
}

/// [`role_choice`] for every op kind, kept out of line.
#[inline(never)]
fn role_choice_general(m: &Module, op: Op, idx: usize) -> Result<RoleChoice, LoweringError> {
    let data = &m.ops[op];
    let o = &data.operands[idx];
    // Only an error names the role: the text is looked up there.
    let role = || m.str(o.role).to_string();
    match data.kind {
        OpKind::Isa(isa) => {
            let info = isa.info();
            if !isa.on_arch(m.arch) {
                return Err(LoweringError::NotOnArch {
                    op: info.name,
                    arch: m.arch,
                    archs: info.archs().map(|a| a.name()).collect(),
                });
            }
            let (_, r) = isa
                .role_of(o.role)
                .ok_or_else(|| LoweringError::UnknownRole {
                    op: info.name,
                    role: role(),
                })?;
            Ok(RoleChoice::of_role(r, m.arch))
        }
        OpKind::Custom => {
            let key = o.struct_name.map(|s| m.str(s)).unwrap_or("");
            let kind = select_by_struct_name(key).ok_or_else(|| LoweringError::UnknownStruct {
                role: role(),
                key: key.to_string(),
            })?;
            Ok(RoleChoice {
                kind,
                dir: Direction::Read,
                mems: MemorySet::SP,
                form: WindowForm::Plain,
            })
        }
        _ => Err(LoweringError::NoDescriptors {
            op: data.kind.name(),
        }),
    }
}

/// The exact reference error for an operand with too many active dims.
pub(crate) fn illegal_dimension_message(active: usize, slots: u8) -> String {
    format!("Illegal ISA memory access dimension: {active}, which must be in range of [1, {slots}]D tensor for ISA mem pattern")
}

/// Why compacted slots do not fit their descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FitError {
    /// More active dims than the descriptor's N + 1: the reference's error.
    TooManyDims {
        /// `1 + surviving free dims`.
        active: usize,
        /// The descriptor's slot count N.
        slots: u8,
    },
    /// Any other range or validator rule, with the values.
    Other(String),
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::TooManyDims { active, slots } => {
                f.write_str(&illegal_dimension_message(*active, *slots))
            }
            FitError::Other(msg) => f.write_str(msg),
        }
    }
}

/// Checks that compacted `slots` fit descriptor `choice` (select-descriptor's
/// range checks): active dims within N + 1, steps in i16, nums in
/// 1..=65535, and the rules the validators would enforce that the user
/// controls (step 0 in slot 2; a two-window source striding in slot 0 or 1).
#[inline(always)]
pub fn check_fit(slots: &[Dim], choice: &RoleChoice, start_byte: u64) -> Result<(), FitError> {
    let n = choice.kind.slots();
    let active = 1 + slots.len();
    if active > usize::from(n) + 1 {
        return Err(FitError::TooManyDims { active, slots: n });
    }
    for (i, d) in slots.iter().enumerate() {
        if !step_fits(d.step) {
            return Err(FitError::Other(format!(
                "step {} in slot {i} is outside the signed 16-bit range -32768..=32767",
                d.step
            )));
        }
        if d.num == 0 || d.num > MAX_NUM {
            return Err(FitError::Other(format!(
                "num {} in slot {i} is outside 1..=65535",
                d.num
            )));
        }
    }
    if choice.form == WindowForm::TwoWindow {
        // The validator checks the data window as its own dtype.
        let word = u64::from(crate::target::validate::two_window_data_dtype().bytes());
        if !start_byte.is_multiple_of(word) {
            return Err(FitError::Other(format!(
                "the gather data window starts at byte {start_byte:#x}, but the validator checks it as a {word}-byte type (dtype {})",
                crate::target::validate::TWO_WINDOW_DATA_DTYPE_CODE
            )));
        }
        if let Some((i, d)) = slots.iter().enumerate().take(2).find(|(_, d)| d.step != 1) {
            return Err(FitError::Other(format!(
                "the two-window (gather) source has no stride fields for slots 0 and 1, but slot {i} has step {}; only step 1 is possible there",
                d.step
            )));
        }
    } else if crate::target::validate::zero_step_rejected(choice.kind, 2)
        && slots.get(2).is_some_and(|d| d.step == 0)
    {
        return Err(FitError::Other(format!(
            "slot 2 has step 0 (a broadcast), which the hardware validator rejects for {} (step2 must be nonzero)",
            choice.kind.name()
        )));
    }
    Ok(())
}

/// Builds the descriptor of operand `idx` of `op` from its lowered forms
/// (encode-wire's contract). Requires fold, slots and kind to be attached.
pub fn descriptor_of(m: &Module, op: Op, idx: usize) -> Result<Descriptor, LoweringError> {
    descriptor_with(m, op, idx, &role_choice(m, op, idx)?)
}

/// [`descriptor_of`] for a caller that already holds the operand's
/// [`role_choice`].
pub fn descriptor_with(
    m: &Module,
    op: Op,
    idx: usize,
    choice: &RoleChoice,
) -> Result<Descriptor, LoweringError> {
    let data = &m.ops[op];
    let o = &data.operands[idx];
    let l = o
        .lowered()
        .ok_or(LoweringError::Missing("the operand has no lowered forms"))?;
    let (fold, slots, kind) =
        match (l.fold, &l.slots, l.kind) {
            (Some(f), Some(s), Some(k)) => (f, s, k),
            _ => return Err(LoweringError::Missing(
                "the operand needs fold-partition, compact-unit-dims and select-descriptor first",
            )),
        };
    if choice.kind != kind {
        return Err(LoweringError::KindMismatch {
            found: kind,
            expected: choice.kind,
        });
    }
    check_fit(slots, choice, fold.byte).map_err(LoweringError::Fit)?;
    if choice.form == WindowForm::TwoWindow {
        check_index_window(m, op, idx)?;
    }
    build_descriptor(m, op, idx, choice, fold, slots)
}

/// The descriptor of operand `idx` of `op` from its fold and slots, which
/// fit `choice` ([`check_fit`], and [`check_index_window`] for a
/// two-window source): the ADDR4 word(s) and the slots' steps and nums.
fn build_descriptor(
    m: &Module,
    op: Op,
    idx: usize,
    choice: &RoleChoice,
    fold: Fold,
    slots: &[Dim],
) -> Result<Descriptor, LoweringError> {
    let mem = m.buffers[m.ops[op].operands[idx].buffer].mem;
    let mut d = descriptor_in(mem, m.arch, choice, fold, slots)?;
    if choice.form == WindowForm::TwoWindow {
        // Word +4 is the `index` operand's plain ADDR4.
        let (index, f) = index_window(m, op)?;
        let ib = u32::try_from(f.byte).map_err(|_| LoweringError::ByteRange {
            what: "index byte",
            byte: f.byte,
        })?;
        let iaddr = Addr4 {
            mem: m.buffers[index.buffer].mem,
            partition: f.partition,
            byte: ib,
            form: Form::Plain,
        };
        d.index_addr = Some(iaddr.encode(m.arch).map_err(LoweringError::Addr4)?);
    }
    Ok(d)
}

/// [`build_descriptor`] without a two-window source's word +4 (the
/// `index` operand's ADDR4, which only that function reads): the
/// descriptor of an operand in memory `mem` on `arch`.
#[inline]
fn descriptor_in(
    mem: crate::target::Memory,
    arch: crate::Arch,
    choice: &RoleChoice,
    fold: Fold,
    slots: &[Dim],
) -> Result<Descriptor, LoweringError> {
    let byte = u32::try_from(fold.byte).map_err(|_| LoweringError::ByteRange {
        what: "byte",
        byte: fold.byte,
    })?;
    let form = match choice.form {
        WindowForm::Plain => Form::Plain,
        WindowForm::TwoWindow => Form::TwoWindow,
    };
    let addr = Addr4 {
        mem,
        partition: fold.partition,
        byte,
        form,
    }
    .encode(arch)
    .map_err(LoweringError::Addr4)?;
    let mut d = Descriptor::unit(choice.kind, addr);
    for (i, s) in slots.iter().enumerate() {
        d.steps[i] = s.step as i16;
        d.nums[i] = s.num as u16;
    }
    Ok(d)
}

/// The operand whose ADDR4 fills word +4 of `op`'s two-window source, and
/// its fold.
pub(crate) fn index_window(m: &Module, op: Op) -> Result<(&Operand, Fold), LoweringError> {
    let index = m.ops[op]
        .operands
        .iter()
        .find(|x| m.str(x.role) == TWO_WINDOW_INDEX_ROLE)
        .ok_or(LoweringError::Missing(
            "the two-window form needs an `index` operand",
        ))?;
    let fold = index
        .lowered()
        .and_then(|l| l.fold)
        .ok_or(LoweringError::Missing("the `index` operand is not folded"))?;
    Ok((index, fold))
}

/// The validator checks the index window (word +4) of a two-window source
/// with the source's dtype: its start byte must be a multiple of that size.
/// A user-controlled rule, so select-descriptor reports it before encoding.
pub fn check_index_window(m: &Module, op: Op, idx: usize) -> Result<(), LoweringError> {
    let (_, fold) = index_window(m, op)?;
    let dtype = m.buffers[m.ops[op].operands[idx].buffer].dtype;
    if !fold.byte.is_multiple_of(u64::from(dtype.bytes())) {
        return Err(LoweringError::IndexWindow {
            byte: fold.byte,
            dtype,
        });
    }
    Ok(())
}

/// Runs the arch's validators for a role on descriptor bytes: `mem<N>d_valid`
/// or `tensor<N>d_valid`, then `check_m4d_active_channels`.
pub fn validate_bytes(
    bytes: &[u8],
    choice: &RoleChoice,
    dtype: crate::Dtype,
    arch: crate::Arch,
    channels: u32,
) -> Result<(), Invalid> {
    descriptor_valid(bytes, choice.kind, dtype, arch, choice.dir, choice.mems)?;
    check_m4d_active_channels(bytes, channels, arch)
}

/// The walk a descriptor describes, decoded from its bytes alone (plus the
/// channel count travelling beside it and the element size): the evaluator's
/// view of wire bytes.
pub fn decoded_walk(
    bytes: &[u8],
    kind: DescriptorKind,
    arch: crate::Arch,
    channels: u32,
    elem_bytes: u32,
) -> Result<Walk, LoweringError> {
    let d = Descriptor::decode(kind, bytes).map_err(LoweringError::Decode)?;
    let a = Addr4::decode(d.addr & !(3 << crate::target::addr4::FORM_SHIFT), arch)
        .map_err(LoweringError::Addr4)?;
    let n = d.slots();
    Ok(Walk {
        mem: a.mem,
        start_partition: a.partition,
        channels,
        start_byte: u64::from(a.byte),
        elem_bytes,
        dims: (0..n)
            .rev()
            .map(|i| (i64::from(d.steps[i]), u64::from(d.nums[i])))
            .collect(),
    })
}

/// What [`lower_all_forms`] attached, in the counts the four attaching
/// passes report: each pass's statistics follow from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoweringTally {
    /// Operands given every form (each folded, compacted, selected and
    /// encoded).
    pub operands: u64,
    /// Free dims with num = 1 that compacting dropped.
    pub unit_dims_dropped: u64,
    /// Operands given a 4-slot descriptor kind.
    pub four_d: u64,
    /// Descriptor bytes encoded.
    pub bytes: u64,
}

/// Attaches every lowered form to every operand of `m`'s top-level ISA ops
/// (table ops and `isa.custom`) in one walk, op by op: exactly what
/// fold-partition, compact-unit-dims, select-descriptor and encode-wire
/// attach when run over the module in that order, from the same functions
/// ([`fold_of`], [`slots_of`], [`role_choice`], [`check_fit`],
/// [`check_index_window`], the descriptor [`descriptor_with`] builds and
/// [`validate_bytes`]), each computed once per operand.
///
/// It applies only where that order cannot matter and nothing is to be
/// reported: every such operand starts with no lowered form at all
/// (`Operand::lowered` is `None`), every one is on chip, and none of the
/// four would report an error on any of them. Otherwise it returns `None`
/// with `m` as it was (forms attached to earlier ops are taken off again),
/// and the caller runs the passes one by one, which report what they find.
/// An op's operands are folded before any of them is encoded, as a
/// two-window source's descriptor reads its `index` operand's fold.
///
/// The passes it stands for run on a module that verifies; on one built
/// in code that does not, it declines rather than panics where an op,
/// buffer or symbol it would look up is not the module's.
pub fn lower_all_forms(m: &mut Module) -> Option<LoweringTally> {
    let lowers = |kind: OpKind| matches!(kind, OpKind::Isa(_) | OpKind::Custom);
    let fresh = m.body.iter().all(|item| match *item {
        crate::module::Item::Op(op) => m.ops.get(op).is_some_and(|data| {
            !lowers(data.kind)
                || data.operands.iter().all(|o| {
                    o.lowered.is_none()
                        && m.buffers.get(o.buffer).is_some()
                        && m.symbols.contains(o.role)
                        && o.struct_name.is_none_or(|s| m.symbols.contains(s))
                })
        }),
        crate::module::Item::Buffer(_) => true,
    });
    if !fresh {
        return None;
    }
    let mut tally = LoweringTally::default();
    for at in 0..m.body.len() {
        let crate::module::Item::Op(op) = m.body[at] else {
            continue;
        };
        let done = match lower_table_op(m, op, &mut tally) {
            Table::Lowered => true,
            Table::Declined => false,
            Table::Other => !lowers(m.ops[op].kind) || lower_op(m, op, &mut tally).is_some(),
        };
        if !done {
            // Every operand up to this op had no form: take them off again.
            for &item in &m.body[..=at] {
                if let crate::module::Item::Op(op) = item {
                    if lowers(m.ops[op].kind) {
                        m.ops[op].operands.iter_mut().for_each(|o| o.lowered = None);
                    }
                }
            }
            return None;
        }
    }
    Some(tally)
}

/// What [`lower_table_op`] did with an op.
enum Table {
    /// Every operand has its forms.
    Lowered,
    /// A pass would report something (the forms attached so far are the
    /// caller's to take off).
    Declined,
    /// Not a table op on the module's arch whose operands all have roles of
    /// its row in the plain form: [`lower_op`] decides.
    Other,
}

/// [`lower_op`] on a table op on the module's arch whose every operand has
/// a role of its row with a plain (one-window) ADDR4, nearly every op:
/// the same functions on the op's own operands, each looked up once, and
/// each operand given all four forms before the next (no operand reads
/// another's fold: that is the two-window form's).
fn lower_table_op(m: &mut Module, op: Op, tally: &mut LoweringTally) -> Table {
    let arch = m.arch;
    let Module { ops, buffers, .. } = m;
    let Some(data) = ops.get_mut(op) else {
        return Table::Other;
    };
    let OpKind::Isa(isa) = data.kind else {
        return Table::Other;
    };
    if !isa.on_arch(arch) {
        return Table::Other;
    }
    let mut choices: SmallVec<[RoleChoice; 6]> = SmallVec::new();
    for o in &data.operands {
        match isa.role_of(o.role) {
            Some((_, r)) if r.form == WindowForm::Plain => {
                choices.push(RoleChoice::of_role(r, arch));
            }
            _ => return Table::Other,
        }
    }
    for (o, choice) in data.operands.iter_mut().zip(&choices) {
        let Some(b) = buffers.get(o.buffer) else {
            return Table::Declined;
        };
        // fold-partition's and compact-unit-dims' forms.
        let Ok(Some(fold)) = fold_in(b, o) else {
            return Table::Declined;
        };
        let free = free_part(true, &o.ap.dims);
        let mut slots = SmallVec::new();
        push_slots(free, &mut slots);
        // select-descriptor's checks, in its order.
        if !choice.mems.contains(b.mem) || check_fit(&slots, choice, fold.byte).is_err() {
            return Table::Declined;
        }
        // encode-wire's: the descriptor, its bytes and their validators.
        let Ok(d) = descriptor_in(b.mem, arch, choice, fold, &slots) else {
            return Table::Declined;
        };
        let bytes = d.encode();
        if validate_bytes(&bytes, choice, b.dtype, arch, fold.channels).is_err() {
            return Table::Declined;
        }
        tally.operands += 1;
        tally.unit_dims_dropped += (free.len() - slots.len()) as u64;
        tally.four_d += u64::from(choice.kind.slots() == 4);
        tally.bytes += bytes.len() as u64;
        o.lowered = Some(crate::module::Lowered {
            fold: Some(fold),
            slots: Some(slots),
            kind: Some(choice.kind),
            wire: Some(bytes),
        });
    }
    Table::Lowered
}

/// [`lower_all_forms`] on one op: its folds and slots first (a two-window
/// source reads its `index` operand's fold), then each operand's kind and
/// wire; `None` where a pass would report anything (the forms attached so
/// far are the caller's to take off).
fn lower_op(m: &mut Module, op: Op, tally: &mut LoweringTally) -> Option<()> {
    let n = m.ops[op].operands.len();
    for i in 0..n {
        let fold = fold_of(m, &m.ops[op].operands[i]).ok()??;
        // The slots are built in place (a folded operand is on chip).
        let o = &mut m.ops[op].operands[i];
        let l = o.lowered.insert(crate::module::Lowered::default());
        l.fold = Some(fold);
        push_slots(free_part(true, &o.ap.dims), l.slots.insert(SmallVec::new()));
    }
    for i in 0..n {
        let o = &m.ops[op].operands[i];
        let l = o.lowered.as_ref()?;
        let (fold, slots) = (l.fold?, l.slots.as_deref()?);
        let b = &m.buffers[o.buffer];
        // select-descriptor's checks, in its order.
        let choice = role_choice(m, op, i).ok()?;
        if !choice.mems.contains(b.mem) {
            return None;
        }
        let free = free_dims(m, o).len();
        check_fit(slots, &choice, fold.byte).ok()?;
        if choice.form == WindowForm::TwoWindow {
            check_index_window(m, op, i).ok()?;
        }
        // encode-wire's: the descriptor, its bytes and their validators.
        let bytes = build_descriptor(m, op, i, &choice, fold, slots)
            .ok()?
            .encode();
        validate_bytes(&bytes, &choice, b.dtype, m.arch, fold.channels).ok()?;
        tally.operands += 1;
        tally.unit_dims_dropped += (free - slots.len()) as u64;
        tally.four_d += u64::from(choice.kind.slots() == 4);
        tally.bytes += bytes.len() as u64;
        let l = m.ops[op].operands[i].lowered.as_mut()?;
        l.kind = Some(choice.kind);
        l.wire = Some(bytes);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::AccessPattern;
    use crate::target::encoders::role_names;
    use crate::target::{IsaOp, Memory};
    use crate::{Arch, Dtype};

    /// The quick answer of [`role_choice`] is the general one: for every
    /// row, every role name and some other names, on every arch, and for
    /// `isa.custom` and ops without descriptors.
    #[test]
    fn role_choice_agrees_with_the_general_path() {
        for arch in Arch::ALL {
            let mut m = Module::new(arch);
            let data = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
            let x = m.add_buffer(data);
            let ap = || AccessPattern::new(&[(64, 128), (1, 64)], 0);
            let mut names: Vec<&str> = role_names().to_vec();
            names.extend(["x", "dst0", ""]);
            let kinds =
                IsaOp::all()
                    .map(OpKind::Isa)
                    .chain([OpKind::Custom, OpKind::Read, OpKind::Write]);
            for kind in kinds {
                let operands: Vec<_> = names.iter().map(|n| m.operand(n, x, ap())).collect();
                let op = m.add_op(Module::op_data(kind, operands));
                for (i, name) in names.iter().enumerate() {
                    assert_eq!(
                        role_choice(&m, op, i),
                        role_choice_general(&m, op, i),
                        "{} operand {name} on {arch}",
                        kind.name(),
                    );
                }
            }
        }
    }
}
