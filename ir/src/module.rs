//! The IR data model.
//!
//! Entities are `u32` ids into arenas owned by the [`Module`]: buffers in a
//! `cranelift-entity` `PrimaryMap`, ops and blocks in [`Arena`]s, which
//! reuse the ids of removed entries. Op data lives in [`Module::ops`];
//! program order (the *layout*) lives apart from it in [`Module::body`] and
//! in each kernel's [`BlockData`], so a scheduling pass can permute order
//! without touching op data. Names are interned in [`Module::symbols`].
//!
//! The layout owns the ops: every stored op is listed exactly once in it,
//! and every op it lists is stored. [`Module`]'s layout methods
//! ([`Module::insert_op`], [`Module::append_op`], [`Module::remove_op`],
//! [`Module::replace_op`], [`Module::replace_ops`], [`Module::retain_ops`],
//! [`Module::move_op`]) keep it so: an op enters storage and the layout
//! together and leaves both together (a kernel with its body), so the
//! stored ops are exactly the reachable ones ([`Module::stored_ops`] ==
//! `walk_ops().len()`). Passes edit the layout only through them. The
//! layout lists stay public for reading and for tests that build malformed
//! modules; the verifier's structural phase ([`crate::verify::structure`])
//! reports any module that breaks the rule, never panicking.

pub use crate::arena::Arena;
use crate::intern::{Interner, Symbol};
use crate::source::Span;
use crate::target::{Arch, Dtype, IsaOp, Memory, OpCode, PlanOp};
use cranelift_entity::{entity_impl, PrimaryMap};
use indexmap::IndexMap;
use smallvec::SmallVec;
use std::hash::BuildHasherDefault;

/// A buffer declared by `mem.sbuf`, `mem.psum` or `mem.hbm`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(u32);
entity_impl!(Buffer, "buf");

/// An operation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u32);
entity_impl!(Op, "op");

/// A region body: an ordered list of ops.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(u32);
entity_impl!(Block, "block");

/// One `[step, num]` pair of an access pattern. Steps are in elements of the
/// buffer's dtype and may be negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim {
    /// Elements between consecutive indices of this dim.
    pub step: i64,
    /// Number of indices.
    pub num: u64,
}

impl Dim {
    /// `[step, num]`.
    pub const fn new(step: i64, num: u64) -> Self {
        Dim { step, num }
    }
}

/// The dims of an access pattern, outermost first.
pub type Dims = SmallVec<[Dim; 5]>;

/// `buf[[s0, n0], ..., [sk, nk]] + offset`: visits the flat elements
/// `offset + i0*s0 + ... + ik*sk` in row-major order (docs/ir.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct AccessPattern {
    /// Start element (flat, in elements of the buffer's dtype).
    pub offset: i64,
    /// Dims, outermost first; for on-chip buffers dim 0 is the partition axis.
    pub dims: Dims,
}

impl AccessPattern {
    /// An access pattern from `(step, num)` pairs and an offset.
    pub fn new(dims: &[(i64, u64)], offset: i64) -> Self {
        AccessPattern {
            offset,
            dims: dims.iter().map(|&(s, n)| Dim::new(s, n)).collect(),
        }
    }

    /// Number of elements visited (`None` on overflow).
    pub fn elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.num))
    }
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attr {
    /// An integer (wide enough for any 64-bit signed or unsigned value).
    Int(i128),
    /// A string.
    Str(Symbol),
    /// `true` / `false`.
    Bool(bool),
    /// `[a, b, ...]`.
    Array(Vec<Attr>),
}

/// The deepest an attribute value's arrays nest (project-defined): the
/// parser reads no deeper, and the verifier rejects a built module whose
/// values do, so every walk over a verified value stays this shallow.
pub const MAX_ARRAY_NESTING: usize = 33;

/// An attribute dictionary, in source order.
pub type Attrs = IndexMap<Symbol, Attr, BuildHasherDefault<rustc_hash::FxHasher>>;

/// A buffer declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferData {
    /// SSA name without the `%`.
    pub name: Symbol,
    /// Memory.
    pub mem: Memory,
    /// Start partition (on-chip; 0 for HBM).
    pub partition: u32,
    /// Byte offset inside each partition (on-chip) or 64-bit byte address (HBM).
    pub base: u64,
    /// Shape: partitions first for on-chip buffers.
    pub shape: SmallVec<[u64; 4]>,
    /// Element type.
    pub dtype: Dtype,
    /// Attributes other than `partition`, `byte` and `addr`, kept and printed.
    pub attrs: Attrs,
    /// Source location.
    pub span: Span,
}

/// `n / d` and `n % d`: by a shift and a mask when `d` is a power of two,
/// as nearly every free size `F` is (a division takes tens of cycles).
///
/// # Panics
/// If `d` is 0, as `/` does.
#[inline(always)]
pub(crate) fn div_rem(n: u64, d: u64) -> (u64, u64) {
    if d.is_power_of_two() {
        (n >> d.trailing_zeros(), n & (d - 1))
    } else {
        (n / d, n % d)
    }
}

impl BufferData {
    /// Partitions the buffer spans (1 for HBM).
    pub fn partitions(&self) -> u64 {
        if self.mem.is_on_chip() {
            self.shape.first().copied().unwrap_or(1)
        } else {
            1
        }
    }

    /// Elements in one partition's free shape (`F` of docs/ir.md); for HBM, all
    /// elements. `None` on overflow.
    pub fn free_elements(&self) -> Option<u64> {
        let skip = usize::from(self.mem.is_on_chip());
        self.shape
            .iter()
            .skip(skip)
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Elements in the whole buffer. `None` on overflow.
    pub fn elements(&self) -> Option<u64> {
        self.free_elements()?.checked_mul(self.partitions())
    }

    /// Bytes each partition's slice occupies. `None` on overflow.
    pub fn bytes_per_partition(&self) -> Option<u64> {
        self.free_elements()?
            .checked_mul(u64::from(self.dtype.bytes()))
    }
}

/// One access-pattern operand of an op. Two operands are equal when they
/// mean the same: their lowered forms compare through
/// [`Operand::lowered`], so an empty [`Lowered`] equals none.
#[derive(Clone, Debug)]
pub struct Operand {
    /// Role name (`dst`, `src`, ...); for `gpsimd.read`/`write` it is `src`
    /// respectively `dst` and is not printed.
    pub role: Symbol,
    /// The buffer addressed.
    pub buffer: Buffer,
    /// The logical access pattern.
    pub ap: AccessPattern,
    /// For `isa.custom`: the struct-type key given with `as "..."`.
    pub struct_name: Option<Symbol>,
    /// Source location of the operand.
    pub span: Span,
    /// Lowered forms attached by the lowering passes (`None` until the first
    /// of them runs; an empty [`Lowered`] means the same, see
    /// [`Operand::lowered`]). Held inline: every ISA operand of a lowered module
    /// carries them, and a box each would be an allocation per operand.
    pub lowered: Option<Lowered>,
}

/// The partition axis folded into start fields (fold-partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fold {
    /// Start partition.
    pub partition: u32,
    /// Start byte inside the partition.
    pub byte: u64,
    /// Active partitions (the channel count travelling beside a descriptor).
    pub channels: u32,
}

/// Lowered forms of an operand, each attached by one pass and printed after
/// the access pattern (`fold<...>`, `slots<...>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Lowered {
    /// fold-partition: start partition, byte and channel count.
    pub fold: Option<Fold>,
    /// compact-unit-dims: surviving free dims, innermost first (slot 0 =
    /// innermost).
    pub slots: Option<SmallVec<[Dim; 4]>>,
    /// select-descriptor: the descriptor struct of the operand's role.
    pub kind: Option<crate::target::DescriptorKind>,
    /// encode-wire: the descriptor bytes, validated.
    pub wire: Option<crate::target::descriptor::DescriptorBytes>,
}

/// One of an operand's lowered forms ([`Lowered`]'s fields), each attached
/// by one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoweredForm {
    /// `fold<...>` (fold-partition).
    Fold,
    /// `slots<...>` (compact-unit-dims).
    Slots,
    /// `kind<...>` (select-descriptor).
    Kind,
    /// `wire<...>` (encode-wire).
    Wire,
}

impl Lowered {
    /// True when no form is attached: the same as no lowered forms at all,
    /// which is how the printer writes it and every pass and check reads it.
    pub fn is_empty(&self) -> bool {
        self.fold.is_none() && self.slots.is_none() && self.kind.is_none() && self.wire.is_none()
    }
}

impl PartialEq for Operand {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.buffer == other.buffer
            && self.ap == other.ap
            && self.struct_name == other.struct_name
            && self.span == other.span
            && self.lowered() == other.lowered()
    }
}

impl Eq for Operand {}

impl Operand {
    /// The lowered forms, if any pass attached one. An attached but empty
    /// [`Lowered`] (every form `None`, as a module built in code may hold)
    /// reads as none, so the printed text and the module mean the same.
    /// Every reader goes through here rather than the field.
    pub fn lowered(&self) -> Option<&Lowered> {
        self.lowered.as_ref().filter(|l| !l.is_empty())
    }

    /// The lowered forms, created empty on first use.
    pub fn lowered_mut(&mut self) -> &mut Lowered {
        self.lowered.get_or_insert_with(Default::default)
    }
}

/// What an op is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// A row of the op-encoder table.
    Isa(IsaOp),
    /// `isa.custom`: any roles, descriptor kind chosen per operand by string.
    Custom,
    /// `gpsimd.kernel @name {...} { body }`.
    Kernel {
        /// The kernel's symbol name (without `@`).
        name: Symbol,
        /// Its body.
        body: Block,
    },
    /// `gpsimd.read %t[...]` inside a kernel.
    Read,
    /// `gpsimd.write %t[...]` inside a kernel.
    Write,
    /// A staging-plan op inside a kernel (`gpsimd.plan`, `sdma.copy`, ...);
    /// its attributes hold its data.
    Plan(PlanOp),
}

impl OpKind {
    /// The op, as the op-definition table names it
    /// ([`crate::target::ops`]).
    pub fn code(&self) -> OpCode {
        match *self {
            OpKind::Isa(op) => OpCode::Isa(op),
            OpKind::Custom => OpCode::Custom,
            OpKind::Kernel { .. } => OpCode::Kernel,
            OpKind::Read => OpCode::Read,
            OpKind::Write => OpCode::Write,
            OpKind::Plan(p) => OpCode::Plan(p),
        }
    }

    /// The text op name.
    pub fn name(&self) -> &'static str {
        self.code().name()
    }
}

/// Operands of one op (most ops have two or three, held inline).
pub type Operands = SmallVec<[Operand; 3]>;

/// An operation's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpData {
    /// What the op is.
    pub kind: OpKind,
    /// Operands in source order.
    pub operands: Operands,
    /// Attributes in source order.
    pub attrs: Attrs,
    /// Where each attribute's value is written, in `attrs` order (parsed
    /// ops; `None` for ops built in code). Diagnostics about an attribute
    /// point there when it matches `attrs`.
    pub attr_spans: Option<Box<[Span]>>,
    /// Source location (the op name).
    pub span: Span,
}

impl OpData {
    /// Where attribute `i` (in `attrs` order) is written, or the op's span.
    pub(crate) fn attr_span(&self, i: usize) -> Span {
        self.attr_spans
            .as_deref()
            .filter(|s| s.len() == self.attrs.len())
            .and_then(|s| s.get(i).copied())
            .unwrap_or(self.span)
    }
}

/// The ops of a region, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockData {
    /// Ops in order. Read it freely; edit it through [`Module`]'s layout
    /// methods.
    pub ops: Vec<Op>,
}

/// Where [`Module::insert_op`] and [`Module::move_op`] put an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Last in the module body (`None`) or in a kernel's body block.
    End(Option<Block>),
    /// Just before this op, in the list that holds it.
    Before(Op),
    /// Just after this op, in the list that holds it.
    After(Op),
}

/// A top-level entry of a module, in program order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// A buffer declaration.
    Buffer(Buffer),
    /// An op.
    Op(Op),
}

/// A module: the unit the parser produces, passes transform and the printer
/// writes.
#[derive(Clone, Debug)]
pub struct Module {
    /// `@name`, if given.
    pub name: Option<Symbol>,
    /// The arch the module targets.
    pub arch: Arch,
    /// Module attributes other than `arch`.
    pub attrs: Attrs,
    /// Interned names.
    pub symbols: Interner,
    /// Buffer arena.
    pub buffers: PrimaryMap<Buffer, BufferData>,
    /// Op storage. Ops enter and leave it through the layout methods
    /// ([`Module::insert_op`], [`Module::remove_op`], ...), which keep
    /// every stored op listed exactly once in the layout.
    pub ops: Arena<Op, OpData>,
    /// Region storage (kernel bodies).
    pub blocks: Arena<Block, BlockData>,
    /// Top-level program order. Read it freely; edit it through the layout
    /// methods.
    pub body: Vec<Item>,
    /// Staging plans written by a pass, typed, by kernel op; a plan read
    /// from text is held as plan ops in its kernel's body instead. A kernel
    /// has at most one of the two.
    pub plans: IndexMap<Op, crate::plan::KernelPlan, BuildHasherDefault<rustc_hash::FxHasher>>,
    /// Source location of the `module` keyword.
    pub span: Span,
    /// What the earlier batches of a module produced a batch at a time
    /// declared ([`Module::clear_batch`], [`Module::clear_ops`]), for
    /// [`crate::verify_batch`] to check each later batch against.
    pub(crate) earlier: Earlier,
    /// The op each op [`Module::replace_op`] or [`Module::replace_ops`]
    /// made stands for ([`Module::origin`]), for those whose origin is
    /// another op: the pieces of a split after the first.
    origins: rustc_hash::FxHashMap<Op, Op>,
}

/// What the batches a module was produced in before its current one
/// declared and no longer list: the buffers [`Module::clear_batch`] took
/// out of the body, and the kernels of every batch cleared. Bounded by the
/// module's buffers and kernels, which it keeps anyway.
#[derive(Clone, Debug, Default)]
pub(crate) struct Earlier {
    /// Buffers `0..buffers` were declared by earlier batches (and taken
    /// out of the body when those were cleared); every buffer stored after
    /// them is declared in the body of the batch that uses it.
    pub(crate) buffers: u32,
    /// The names of those buffers.
    pub(crate) buffer_names: rustc_hash::FxHashSet<Symbol>,
    /// The name of the last of them: if buffer `buffers - 1` has another,
    /// the module's buffers were replaced, and none is taken as declared.
    pub(crate) last_name: Option<Symbol>,
    /// The names of the kernels earlier batches defined.
    pub(crate) kernels: rustc_hash::FxHashSet<Symbol>,
}

impl Module {
    /// An empty module for `arch`.
    pub fn new(arch: Arch) -> Self {
        Module {
            name: None,
            arch,
            attrs: Attrs::default(),
            symbols: Interner::new(),
            buffers: PrimaryMap::new(),
            ops: Arena::new(),
            blocks: Arena::new(),
            body: Vec::new(),
            plans: IndexMap::default(),
            span: Span::default(),
            earlier: Earlier::default(),
            origins: Default::default(),
        }
    }

    /// Interns a string in this module's table.
    pub fn sym(&mut self, s: &str) -> Symbol {
        self.symbols.intern(s)
    }

    /// The string of a symbol.
    pub fn str(&self, sym: Symbol) -> &str {
        self.symbols.get(sym)
    }

    /// Declares a buffer at the end of the module body.
    pub fn add_buffer(&mut self, data: BufferData) -> Buffer {
        let b = self.buffers.push(data);
        self.body.push(Item::Buffer(b));
        b
    }

    /// Appends an op to the module body; the same as
    /// [`Module::append_op`]`(None, data)`.
    pub fn add_op(&mut self, data: OpData) -> Op {
        self.append_op(None, data)
    }

    /// Appends an op to a kernel body; the same as
    /// [`Module::append_op`]`(Some(block), data)`.
    ///
    /// # Panics
    /// If `block` is not stored.
    pub fn add_op_to_block(&mut self, block: Block, data: OpData) -> Op {
        self.append_op(Some(block), data)
    }

    /// A new empty block (for a kernel's body).
    pub fn new_block(&mut self) -> Block {
        self.blocks.push(BlockData::default())
    }

    // ---- the layout ----

    /// Drops every op, kernel body and staging plan, keeping the buffers
    /// and their declarations in the body: for a producer that builds and
    /// emits a module a batch of ops at a time, in memory of one batch.
    /// Op and block ids start from 0 again. The kernels' names are
    /// remembered: a later batch that defines one again does not verify
    /// ([`crate::verify_batch`]).
    pub fn clear_ops(&mut self) {
        self.remember_kernels();
        self.body.retain(|item| matches!(item, Item::Buffer(_)));
        self.ops.clear();
        self.blocks.clear();
        self.plans.clear();
        self.origins.clear();
    }

    /// Ends a batch of a module produced a batch at a time, as a streaming
    /// driver does: drops every op, kernel body and staging plan, and the
    /// buffer declarations too, so that later batches list only their own
    /// items (and print only those). The buffers stay stored, remembered as
    /// declared by an earlier batch: a later batch may use them, and may
    /// not declare them again. So are the kernels' names. A buffer stored
    /// but declared in no batch so far is not taken for one (nor is any
    /// buffer stored after it): a later batch must declare it before using
    /// it, or it does not verify ([`crate::verify_batch`]). Op and block
    /// ids start from 0 again.
    pub fn clear_batch(&mut self) {
        self.remember_kernels();
        // The buffers stored since the last clear that this batch declares,
        // from the first on, up to the first it does not.
        let from = self.earlier_buffers();
        if from == 0 {
            // (What was remembered of buffers replaced since goes.)
            self.earlier.buffer_names.clear();
            self.earlier.last_name = None;
        }
        if from < self.buffers.len() {
            self.remember_buffers(from);
        }
        self.body.clear();
        self.ops.recycle();
        self.blocks.clear();
        self.plans.clear();
        self.origins.clear();
    }

    /// How many buffers (ids `0..n`) earlier batches declared, as far as
    /// the module still holds them: none if its buffers were replaced
    /// since (fewer than that, or another name where the last was).
    pub(crate) fn earlier_buffers(&self) -> usize {
        let n = self.earlier.buffers as usize;
        let last = n
            .checked_sub(1)
            .map(|i| self.buffers.as_values_slice().get(i));
        match last {
            None => 0,
            Some(Some(d)) if Some(d.name) == self.earlier.last_name => n,
            Some(_) => 0,
        }
    }

    /// Takes the buffers stored from `from` on that the body declares, up
    /// to the first it does not, for declared by an earlier batch: those
    /// whose declaration verifies ([`crate::verify_buffer`]) and whose name
    /// no buffer before took, so that a batch that did not verify cannot
    /// make an invalid buffer one a later batch may use unchecked.
    fn remember_buffers(&mut self, from: usize) {
        let mut listed = vec![false; self.buffers.len() - from];
        for item in &self.body {
            if let Item::Buffer(b) = *item {
                if let Some(l) = (b.as_u32() as usize)
                    .checked_sub(from)
                    .and_then(|i| listed.get_mut(i))
                {
                    *l = true;
                }
            }
        }
        let (mut taken, mut last) = (0, None);
        let mut names = std::mem::take(&mut self.earlier.buffer_names);
        for ((b, d), listed) in self.buffers_from(from).zip(listed) {
            if !(listed && !names.contains(&d.name) && crate::verify_buffer(self, b).is_ok()) {
                break;
            }
            names.insert(d.name);
            (taken, last) = (taken + 1, Some(d.name));
        }
        self.earlier.buffer_names = names;
        // (At most the arena's length: a `u32` id.)
        self.earlier.buffers = (from + taken) as u32;
        if last.is_some() {
            self.earlier.last_name = last;
        }
    }

    /// The buffers from id `from` on, with their ids, in the time of those
    /// (the arena's own iterator would step over the ones before).
    pub(crate) fn buffers_from(&self, from: usize) -> impl Iterator<Item = (Buffer, &BufferData)> {
        let rest = self
            .buffers
            .as_values_slice()
            .get(from..)
            .unwrap_or_default();
        rest.iter()
            .enumerate()
            .map(move |(i, d)| (Buffer::from_u32((from + i) as u32), d))
    }

    /// Adds the names of the kernels the body lists to those of earlier
    /// batches.
    fn remember_kernels(&mut self) {
        // A kernel's body is a stored block (one whose body is not stored
        // does not verify): without blocks there is no kernel to look for.
        if self.blocks.is_empty() {
            return;
        }
        for item in &self.body {
            if let Item::Op(op) = *item {
                if let Some(OpKind::Kernel { name, .. }) = self.ops.get(op).map(|d| d.kind) {
                    self.earlier.kernels.insert(name);
                }
            }
        }
    }

    /// The number of stored ops. In a module that verifies it equals
    /// `walk_ops().len()`: every stored op is in the layout exactly once.
    pub fn stored_ops(&self) -> usize {
        self.ops.len()
    }

    /// Where `op` is listed: its parent (`None` for the module body, else
    /// the kernel body block) and its index there; `None` if the layout
    /// does not list it. A linear search.
    pub fn locate_op(&self, op: Op) -> Option<(Option<Block>, usize)> {
        if let Some(i) = self.body.iter().position(|&item| item == Item::Op(op)) {
            return Some((None, i));
        }
        self.blocks
            .iter()
            .find_map(|(b, d)| d.ops.iter().position(|&o| o == op).map(|i| (Some(b), i)))
    }

    /// Stores `data` as a new op and lists it at `at`. The op takes the
    /// most recently freed op id, if any. Placement rules (which ops may
    /// stand where) are the verifier's to check, not this method's.
    ///
    /// # Panics
    /// If `at` is next to an op the layout does not list, or at the end of
    /// a block that is not stored (nothing changes then).
    pub fn insert_op(&mut self, at: Place, data: OpData) -> Op {
        let (parent, index) = self.slot_for(at);
        let op = self.ops.push(data);
        self.forget_origin(op);
        self.link(parent, index, op);
        op
    }

    /// Stores `data` as a new op, last in `parent` (`None`: the module
    /// body; `Some(block)`: a kernel's body).
    ///
    /// # Panics
    /// If `parent` is a block that is not stored.
    pub fn append_op(&mut self, parent: Option<Block>, data: OpData) -> Op {
        self.insert_op(Place::End(parent), data)
    }

    /// Stores `data` as a new op, listed just before `anchor`.
    ///
    /// # Panics
    /// If the layout does not list `anchor`.
    pub fn insert_op_before(&mut self, anchor: Op, data: OpData) -> Op {
        self.insert_op(Place::Before(anchor), data)
    }

    /// Stores `data` as a new op, listed just after `anchor`.
    ///
    /// # Panics
    /// If the layout does not list `anchor`.
    pub fn insert_op_after(&mut self, anchor: Op, data: OpData) -> Op {
        self.insert_op(Place::After(anchor), data)
    }

    /// Removes `op` from the layout and from storage, and returns its data
    /// (`None` if it was not stored). A kernel goes with its staging plan,
    /// its body block and every op of that body, recursively; the data
    /// returned names a body block that no longer exists. The id is freed:
    /// the next op stored takes it.
    pub fn remove_op(&mut self, op: Op) -> Option<OpData> {
        if let Some((parent, index)) = self.locate_op(op) {
            self.unlink(parent, index);
        }
        self.free_op(op)
    }

    /// Replaces `old` by ops made of `new`, listed in order where `old`
    /// stood; `old` is removed as by [`Module::remove_op`]. The first new
    /// op takes `old`'s id. Returns the new ops (for example a split op's
    /// pieces).
    ///
    /// # Panics
    /// If the layout does not list `old` (nothing changes then).
    pub fn replace_op(&mut self, old: Op, new: impl IntoIterator<Item = OpData>) -> Vec<Op> {
        let Some((parent, index)) = self.locate_op(old) else {
            panic!("cannot replace {old}: the layout does not list it");
        };
        self.unlink(parent, index);
        let origin = self.origin(old);
        self.free_op(old);
        let ops: Vec<Op> = new.into_iter().map(|d| self.ops.push(d)).collect();
        self.made_from(&ops, origin);
        match parent {
            None => drop(
                self.body
                    .splice(index..index, ops.iter().map(|&o| Item::Op(o))),
            ),
            Some(b) => {
                if let Some(block) = self.blocks.get_mut(b) {
                    drop(block.ops.splice(index..index, ops.iter().copied()));
                }
            }
        }
        ops
    }

    /// [`Module::replace_op`] for many ops of one list (`parent`, as in
    /// [`Module::append_op`]) at once, in time linear in the list: each
    /// `(old, new)` in order is removed and its new ops stored (the first
    /// taking `old`'s id), then the list is rebuilt in one pass.
    ///
    /// # Panics
    /// If an `old` op is given twice or is not listed in `parent` (checked
    /// before anything changes).
    pub fn replace_ops(
        &mut self,
        parent: Option<Block>,
        edits: impl IntoIterator<Item = (Op, Vec<OpData>)>,
    ) {
        let edits: Vec<(Op, Vec<OpData>)> = edits.into_iter().collect();
        if edits.is_empty() {
            return;
        }
        let mut at: rustc_hash::FxHashMap<Op, usize> = Default::default();
        at.reserve(edits.len());
        for (i, (old, _)) in edits.iter().enumerate() {
            assert!(at.insert(*old, i).is_none(), "{old} is replaced twice");
        }
        let mut list = self.take_list(parent);
        let mut found = vec![false; edits.len()];
        for item in &list {
            if let Item::Op(op) = item {
                if let Some(&i) = at.get(op) {
                    found[i] = true;
                }
            }
        }
        if let Some(i) = found.iter().position(|f| !f) {
            self.put_list(parent, list);
            panic!(
                "cannot replace {}: it is not listed in {}",
                edits[i].0,
                parent.map_or("the module body".to_string(), |b| b.to_string())
            );
        }
        let mut new: Vec<Option<Vec<Op>>> = Vec::with_capacity(edits.len());
        let mut added = 0;
        for (old, data) in edits {
            let origin = self.origin(old);
            self.free_op(old);
            added += data.len();
            let ops: Vec<Op> = data.into_iter().map(|d| self.ops.push(d)).collect();
            self.made_from(&ops, origin);
            new.push(Some(ops));
        }
        let mut out = Vec::with_capacity(list.len() - new.len() + added);
        for item in list.drain(..) {
            match item {
                Item::Op(op) => match at.get(&op) {
                    // A second listing of a replaced op (a malformed layout)
                    // is dropped.
                    Some(&i) => out.extend(new[i].take().into_iter().flatten().map(Item::Op)),
                    None => out.push(item),
                },
                Item::Buffer(_) => out.push(item),
            }
        }
        self.put_list(parent, out);
    }

    /// Removes, as by [`Module::remove_op`], every stored op listed in
    /// `parent` (as in [`Module::append_op`]) for which `keep` is false, in
    /// time linear in the list. Buffer declarations stay.
    pub fn retain_ops(&mut self, parent: Option<Block>, mut keep: impl FnMut(Op, &OpData) -> bool) {
        let mut list = self.take_list(parent);
        let mut gone = Vec::new();
        list.retain(|item| match *item {
            Item::Op(op) => match self.ops.get(op) {
                Some(d) if !keep(op, d) => {
                    gone.push(op);
                    false
                }
                _ => true,
            },
            Item::Buffer(_) => true,
        });
        for &op in &gone {
            self.free_op(op);
        }
        self.put_list(parent, list);
    }

    /// Moves `op` to `to`, keeping its id and data (and a kernel's body).
    /// Placement rules are the verifier's to check.
    ///
    /// # Panics
    /// If the layout does not list `op`, or `to` is next to `op` itself, next
    /// to an op the layout does not list, or at the end of a block that is
    /// not stored (nothing changes then).
    pub fn move_op(&mut self, op: Op, to: Place) {
        let Some((parent, index)) = self.locate_op(op) else {
            panic!("cannot move {op}: the layout does not list it");
        };
        if let Place::Before(a) | Place::After(a) = to {
            assert_ne!(a, op, "cannot move {op} next to itself");
        }
        // Panics before anything changes.
        self.slot_for(to);
        self.unlink(parent, index);
        let (parent, index) = self.slot_for(to);
        self.link(parent, index, op);
    }

    /// The list and index `at` designates.
    fn slot_for(&self, at: Place) -> (Option<Block>, usize) {
        match at {
            Place::End(None) => (None, self.body.len()),
            Place::End(Some(b)) => match self.blocks.get(b) {
                Some(d) => (Some(b), d.ops.len()),
                None => panic!("{b} is not stored"),
            },
            Place::Before(a) | Place::After(a) => {
                let Some((parent, index)) = self.locate_op(a) else {
                    panic!("{a} is not in the layout");
                };
                (parent, index + usize::from(matches!(at, Place::After(_))))
            }
        }
    }

    fn link(&mut self, parent: Option<Block>, index: usize, op: Op) {
        match parent {
            None => self.body.insert(index, Item::Op(op)),
            Some(b) => self.blocks[b].ops.insert(index, op),
        }
    }

    fn unlink(&mut self, parent: Option<Block>, index: usize) {
        match parent {
            None => drop(self.body.remove(index)),
            Some(b) => drop(self.blocks[b].ops.remove(index)),
        }
    }

    /// The list of `parent`, taken out (as items) for editing.
    fn take_list(&mut self, parent: Option<Block>) -> Vec<Item> {
        match parent {
            None => std::mem::take(&mut self.body),
            Some(b) => match self.blocks.get_mut(b) {
                Some(d) => std::mem::take(&mut d.ops)
                    .into_iter()
                    .map(Item::Op)
                    .collect(),
                None => panic!("{b} is not stored"),
            },
        }
    }

    /// Puts back a list [`Module::take_list`] took (dropped if its block
    /// was freed meanwhile).
    fn put_list(&mut self, parent: Option<Block>, list: Vec<Item>) {
        match parent {
            None => self.body = list,
            Some(b) => {
                if let Some(d) = self.blocks.get_mut(b) {
                    d.ops = list
                        .into_iter()
                        .filter_map(|i| match i {
                            Item::Op(op) => Some(op),
                            Item::Buffer(_) => None,
                        })
                        .collect();
                }
            }
        }
    }

    /// Frees `op`'s storage (not its listing); a kernel's plan, body
    /// block and body ops go too, recursively. `op`'s own id is freed
    /// last, so the next op stored takes it.
    fn free_op(&mut self, op: Op) -> Option<OpData> {
        self.forget_origin(op);
        let mut blocks = Vec::new();
        if let Some(OpKind::Kernel { body, .. }) = self.ops.get(op).map(|d| d.kind) {
            self.plans.shift_remove(&op);
            blocks.push(body);
        }
        while let Some(b) = blocks.pop() {
            let Some(block) = self.blocks.remove(b) else {
                continue;
            };
            for inner in block.ops {
                // A body that lists its own kernel (a malformed layout)
                // does not free it twice.
                if inner == op {
                    continue;
                }
                self.forget_origin(inner);
                if let Some(d) = self.ops.remove(inner) {
                    if let OpKind::Kernel { body, .. } = d.kind {
                        self.plans.shift_remove(&inner);
                        blocks.push(body);
                    }
                }
            }
        }
        self.ops.remove(op)
    }

    /// The op `op` stands for in what the module was built or parsed
    /// with: for an op [`Module::replace_op`] or [`Module::replace_ops`]
    /// made (a piece of a split op), the op it replaced, or that op's own
    /// origin; `op` itself for every other op. The pieces after the first
    /// take ids the module's producer did not give out for them (new ids,
    /// or ids of ops removed since), and how many ops share the module or
    /// the batch decides which; so the verifier's rules, the lints, the
    /// pass manager and the emitters name an op's origin in the
    /// diagnostics they report about it ([`crate::Subject`]). The origin
    /// may no longer be stored (a pass may remove the first piece, which
    /// keeps its id), and its id may even be another op's since.
    pub fn origin(&self, op: Op) -> Op {
        self.origins.get(&op).copied().unwrap_or(op)
    }

    /// Says that `ops`, just stored by a replacement, stand for `origin`.
    fn made_from(&mut self, ops: &[Op], origin: Op) {
        for &op in ops {
            if op != origin {
                self.origins.insert(op, origin);
            }
        }
    }

    /// Forgets what `op` stood for (its id is freed, or taken again).
    fn forget_origin(&mut self, op: Op) {
        if !self.origins.is_empty() {
            self.origins.remove(&op);
        }
    }

    /// Top-level ops in program order.
    pub fn top_ops(&self) -> impl Iterator<Item = Op> + '_ {
        self.body.iter().filter_map(|i| match i {
            Item::Op(op) => Some(*op),
            Item::Buffer(_) => None,
        })
    }

    /// Every op in program order, kernels before their bodies.
    pub fn walk_ops(&self) -> Vec<Op> {
        let mut out = Vec::with_capacity(self.ops.len());
        for op in self.top_ops() {
            self.walk_into(op, &mut out);
        }
        out
    }

    fn walk_into(&self, op: Op, out: &mut Vec<Op>) {
        self.visit_op(op, &mut |o| out.push(o));
    }

    /// Calls `f` on `op`, then on every op of its region (kernels), in
    /// program order. Regions nest one level (a kernel's body holds no
    /// kernel), so a kernel listed in a body, which the verifier rejects,
    /// is visited without its own body: a module built in code whose kernel
    /// lists itself is walked in bounded time, not recursed into forever.
    /// Ops and blocks that are not stored (also the verifier's to report)
    /// are skipped.
    pub(crate) fn visit_op(&self, op: Op, f: &mut impl FnMut(Op)) {
        let Some(data) = self.ops.get(op) else { return };
        f(op);
        if let OpKind::Kernel { body, .. } = data.kind {
            for &inner in self.blocks.get(body).map_or(&[][..], |b| &b.ops[..]) {
                if self.ops.get(inner).is_some() {
                    f(inner);
                }
            }
        }
    }

    /// The buffer called `%name`, if declared.
    pub fn buffer_by_name(&self, name: &str) -> Option<Buffer> {
        let sym = self.symbols.lookup(name)?;
        self.buffers
            .iter()
            .find(|(_, b)| b.name == sym)
            .map(|(k, _)| k)
    }

    /// Builds an operand for `role` over `buffer`.
    pub fn operand(&mut self, role: &str, buffer: Buffer, ap: AccessPattern) -> Operand {
        Operand {
            role: self.sym(role),
            buffer,
            ap,
            struct_name: None,
            span: Span::default(),
            lowered: None,
        }
    }

    /// Builds a buffer declaration (no location, no extra attributes).
    pub fn buffer_data(
        &mut self,
        name: &str,
        mem: Memory,
        partition: u32,
        base: u64,
        shape: &[u64],
        dtype: Dtype,
    ) -> BufferData {
        BufferData {
            name: self.sym(name),
            mem,
            partition,
            base,
            shape: shape.iter().copied().collect(),
            dtype,
            attrs: Attrs::default(),
            span: Span::default(),
        }
    }

    /// Builds op data without attributes or location.
    pub fn op_data(kind: OpKind, operands: impl IntoIterator<Item = Operand>) -> OpData {
        OpData {
            kind,
            operands: operands.into_iter().collect(),
            attrs: Attrs::default(),
            attr_spans: None,
            span: Span::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::IsaOp;

    #[test]
    fn div_rem_divides() {
        let ds = (1..=70u64).chain([96, 1 << 20, 3 << 40, 1 << 63, u64::MAX]);
        for d in ds {
            for n in [
                0,
                1,
                d - 1,
                d,
                d.saturating_add(1),
                12_345_678_901,
                u64::MAX,
            ] {
                assert_eq!(div_rem(n, d), (n / d, n % d), "{n} / {d}");
            }
        }
    }

    /// A module with `%x` (SBUF) and `%h` (HBM), and a helper making
    /// `isa.memset` ops with distinct offsets.
    fn base() -> (Module, Buffer, Buffer) {
        let mut m = Module::new(Arch::V2);
        let x = m.buffer_data("x", Memory::Sbuf, 0, 0, &[128, 64], Dtype::F32);
        let x = m.add_buffer(x);
        let h = m.buffer_data("h", Memory::Hbm, 0, 0, &[64], Dtype::F32);
        let h = m.add_buffer(h);
        (m, x, h)
    }

    fn memset(m: &mut Module, x: Buffer, offset: i64) -> OpData {
        let isa = IsaOp::all()
            .find(|o| o.info().name == "isa.memset")
            .unwrap();
        let o = m.operand("dst", x, AccessPattern::new(&[(64, 1), (1, 8)], offset));
        Module::op_data(OpKind::Isa(isa), [o])
    }

    fn read(m: &mut Module, h: Buffer, offset: i64) -> OpData {
        let o = m.operand("src", h, AccessPattern::new(&[(1, 8)], offset));
        Module::op_data(OpKind::Read, [o])
    }

    fn kernel(m: &mut Module, name: &str) -> (OpData, Block) {
        let body = m.new_block();
        let name = m.sym(name);
        (Module::op_data(OpKind::Kernel { name, body }, []), body)
    }

    /// The memset offsets and kernel names of the top level, in order.
    fn order(m: &Module) -> Vec<String> {
        m.top_ops()
            .map(|op| match m.ops[op].kind {
                OpKind::Kernel { name, .. } => format!("@{}", m.str(name)),
                _ => m.ops[op].operands[0].ap.offset.to_string(),
            })
            .collect()
    }

    #[track_caller]
    fn sound(m: &Module) {
        assert_eq!(m.stored_ops(), m.walk_ops().len());
        if let Err(d) = crate::verify(m) {
            panic!("{d:?}\n{}", crate::print_module(m));
        }
    }

    #[test]
    fn insert_and_move_keep_every_op_listed_once() {
        let (mut m, x, h) = base();
        let d = memset(&mut m, x, 1);
        let a = m.append_op(None, d);
        let d = memset(&mut m, x, 3);
        let c = m.append_op(None, d);
        let d = memset(&mut m, x, 2);
        let b = m.insert_op_before(c, d);
        let d = memset(&mut m, x, 4);
        m.insert_op_after(c, d);
        assert_eq!(order(&m), ["1", "2", "3", "4"]);
        let (k, body) = kernel(&mut m, "k");
        let k = m.insert_op_after(a, k);
        let d = read(&mut m, h, 8);
        let r1 = m.append_op(Some(body), d);
        let d = read(&mut m, h, 0);
        let r0 = m.insert_op_before(r1, d);
        assert_eq!(m.blocks[body].ops, [r0, r1]);
        assert_eq!(m.locate_op(r1), Some((Some(body), 1)));
        assert_eq!(m.locate_op(b), Some((None, 4)));
        assert_eq!(order(&m), ["1", "@k", "2", "3", "4"]);
        sound(&m);
        m.move_op(k, Place::End(None));
        m.move_op(a, Place::After(c));
        m.move_op(r0, Place::After(r1));
        assert_eq!(order(&m), ["2", "3", "1", "4", "@k"]);
        assert_eq!(m.blocks[body].ops, [r1, r0]);
        sound(&m);
        // Misuse panics before changing anything.
        for bad in [
            Place::Before(Op::from_u32(99)),
            Place::After(a),
            Place::End(Some(Block::from_u32(9))),
        ] {
            let mut y = m.clone();
            let moved = std::panic::catch_unwind(move || {
                y.move_op(a, bad);
            });
            assert!(moved.is_err());
        }
        let mut y = m.clone();
        let d = memset(&mut y, x, 9);
        let r = std::panic::catch_unwind(move || y.insert_op_before(Op::from_u32(99), d));
        assert!(r.is_err());
    }

    #[test]
    fn removal_frees_the_op_its_kernel_body_and_plan() {
        let (mut m, x, h) = base();
        let d = memset(&mut m, x, 1);
        let a = m.append_op(None, d);
        let (k, body) = kernel(&mut m, "k");
        let k = m.append_op(None, k);
        for i in 0..3 {
            let d = read(&mut m, h, i);
            m.append_op(Some(body), d);
        }
        let plan = crate::staging::KernelPlan {
            policy: crate::staging::Policy::Reference,
            depth: 1,
            accessors: Vec::new(),
            params: Default::default(),
            reasons: Vec::new(),
            slots: Vec::new(),
            steps: Vec::new(),
        };
        m.plans.insert(k, plan);
        assert_eq!((m.stored_ops(), m.blocks.len()), (5, 1));
        let data = m.remove_op(k).expect("stored");
        assert!(matches!(data.kind, OpKind::Kernel { .. }));
        assert_eq!((m.stored_ops(), m.blocks.len()), (1, 0));
        assert!(m.plans.is_empty() && !m.ops.contains(k));
        assert_eq!(m.remove_op(k), None);
        sound(&m);
        // The freed ids are taken again (the kernel's first), the block too.
        let d = memset(&mut m, x, 2);
        assert_eq!(m.append_op(None, d), k);
        let (k2, body2) = kernel(&mut m, "k2");
        assert_eq!(body2, body);
        let k2 = m.insert_op_before(a, k2);
        assert_eq!(m.ops.id_bound(), 5);
        assert_eq!(m.stored_ops(), 3);
        assert_eq!(order(&m), ["@k2", "1", "2"]);
        sound(&m);
        m.remove_op(k2);
        m.remove_op(a);
        assert_eq!(order(&m), ["2"]);
        sound(&m);
    }

    #[test]
    fn pieces_stand_for_the_op_they_replace() {
        let (mut m, x, _) = base();
        let ops: Vec<Op> = (0..3)
            .map(|i| {
                let d = memset(&mut m, x, i * 10);
                m.append_op(None, d)
            })
            .collect();
        assert!(ops.iter().all(|&o| m.origin(o) == o));
        let pieces: Vec<OpData> = (1..4).map(|i| memset(&mut m, x, 10 + i)).collect();
        let new = m.replace_op(ops[1], pieces);
        assert_eq!(
            new.iter().map(|&o| m.origin(o)).collect::<Vec<_>>(),
            [ops[1]; 3]
        );
        // A piece split again still stands for the op first split; so do
        // the pieces of many replacements at once.
        let again = vec![memset(&mut m, x, 121), memset(&mut m, x, 122)];
        let more = vec![memset(&mut m, x, 1), memset(&mut m, x, 2)];
        m.replace_ops(None, vec![(new[2], again), (ops[0], more)]);
        let origins: Vec<Op> = m.top_ops().map(|o| m.origin(o)).collect();
        let want = [ops[0], ops[0], ops[1], ops[1], ops[1], ops[1], ops[2]];
        assert_eq!(origins, want);
        // A freed piece's id, taken by an op stored afresh, is that op's.
        let last = m.top_ops().nth(5).unwrap();
        assert_ne!(m.origin(last), last);
        m.remove_op(last);
        let d = memset(&mut m, x, 99);
        let fresh = m.append_op(None, d);
        assert_eq!(fresh, last);
        assert_eq!(m.origin(fresh), fresh);
        // A batch ends: ids start again, standing for themselves.
        m.clear_batch();
        let d = memset(&mut m, x, 7);
        let first = m.append_op(None, d);
        let d = memset(&mut m, x, 8);
        let second = m.append_op(None, d);
        assert_eq!((m.origin(first), m.origin(second)), (first, second));
    }

    #[test]
    fn replacement_puts_the_pieces_in_place() {
        let (mut m, x, h) = base();
        let ops: Vec<Op> = (0..4)
            .map(|i| {
                let d = memset(&mut m, x, i * 10);
                m.append_op(None, d)
            })
            .collect();
        let pieces: Vec<OpData> = (1..4).map(|i| memset(&mut m, x, 10 + i)).collect();
        let new = m.replace_op(ops[1], pieces);
        assert_eq!(new[0], ops[1]);
        assert_eq!(order(&m), ["0", "11", "12", "13", "20", "30"]);
        sound(&m);
        // Many at once, in one pass; the first piece takes the old id.
        let edits = vec![
            (ops[0], vec![memset(&mut m, x, 1), memset(&mut m, x, 2)]),
            (ops[3], vec![]),
            (ops[2], vec![memset(&mut m, x, 21)]),
        ];
        m.replace_ops(None, edits);
        assert_eq!(order(&m), ["1", "2", "11", "12", "13", "21"]);
        assert_eq!(m.ops[ops[0]].operands[0].ap.offset, 1);
        sound(&m);
        // An op that is not in the list: a panic, nothing changed.
        let mut y = m.clone();
        let d = memset(&mut y, x, 5);
        let r = std::panic::catch_unwind(move || {
            y.replace_ops(None, vec![(ops[1], vec![d]), (ops[3], vec![])]);
            y
        });
        assert!(r.is_err());
        // Inside a kernel.
        let (k, body) = kernel(&mut m, "k");
        m.append_op(None, k);
        let d = read(&mut m, h, 0);
        let r = m.append_op(Some(body), d);
        let pieces = vec![read(&mut m, h, 1), read(&mut m, h, 2)];
        let new = m.replace_op(r, pieces);
        assert_eq!(m.blocks[body].ops, new);
        sound(&m);
        let d = read(&mut m, h, 3);
        m.replace_ops(Some(body), vec![(new[1], vec![d])]);
        let offsets: Vec<i64> = m.blocks[body]
            .ops
            .iter()
            .map(|&o| m.ops[o].operands[0].ap.offset)
            .collect();
        assert_eq!(offsets, [1, 3]);
        sound(&m);
    }

    #[test]
    fn retain_keeps_buffers_and_frees_the_rest() {
        let (mut m, x, h) = base();
        for i in 0..6 {
            let d = memset(&mut m, x, i);
            m.append_op(None, d);
        }
        let (k, body) = kernel(&mut m, "k");
        m.append_op(None, k);
        let d = read(&mut m, h, 0);
        m.append_op(Some(body), d);
        m.retain_ops(None, |_, d| {
            d.operands.first().is_some_and(|o| o.ap.offset % 2 == 1)
        });
        assert_eq!(order(&m), ["1", "3", "5"]);
        assert_eq!(m.body.len(), 5);
        assert_eq!((m.stored_ops(), m.blocks.len()), (3, 0));
        sound(&m);
    }
}
