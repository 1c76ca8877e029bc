//! The IR data model.
//!
//! Entities are `u32` ids into arenas owned by the [`Module`]
//! (`cranelift-entity`'s `PrimaryMap`). Op data lives in [`Module::ops`];
//! program order lives apart from it in [`Module::body`] and in each kernel's
//! [`BlockData`], so a scheduling pass can permute order without touching op
//! data. Names are interned in [`Module::symbols`].

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

/// One access-pattern operand of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// of them runs).
    pub lowered: Option<Box<Lowered>>,
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

impl Operand {
    /// The lowered forms, if any pass attached one.
    pub fn lowered(&self) -> Option<&Lowered> {
        self.lowered.as_deref()
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

/// Operands of one op (most ops have two or three).
pub type Operands = SmallVec<[Operand; 2]>;

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
    pub fn attr_span(&self, i: usize) -> Span {
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
    /// Ops in order.
    pub ops: Vec<Op>,
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
    /// Op arena.
    pub ops: PrimaryMap<Op, OpData>,
    /// Region arena.
    pub blocks: PrimaryMap<Block, BlockData>,
    /// Top-level program order.
    pub body: Vec<Item>,
    /// Staging plans written by a pass, typed, by kernel op; a plan read
    /// from text is held as plan ops in its kernel's body instead. A kernel
    /// has at most one of the two.
    pub plans: IndexMap<Op, crate::plan::KernelPlan, BuildHasherDefault<rustc_hash::FxHasher>>,
    /// Source location of the `module` keyword.
    pub span: Span,
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
            ops: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            body: Vec::new(),
            plans: IndexMap::default(),
            span: Span::default(),
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

    /// Appends an op to the module body.
    pub fn add_op(&mut self, data: OpData) -> Op {
        let op = self.ops.push(data);
        self.body.push(Item::Op(op));
        op
    }

    /// Appends an op to a kernel body.
    pub fn add_op_to_block(&mut self, block: Block, data: OpData) -> Op {
        let op = self.ops.push(data);
        self.blocks[block].ops.push(op);
        op
    }

    /// A new empty block.
    pub fn new_block(&mut self) -> Block {
        self.blocks.push(BlockData::default())
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
    /// program order.
    pub fn visit_op(&self, op: Op, f: &mut impl FnMut(Op)) {
        f(op);
        if let OpKind::Kernel { body, .. } = self.ops[op].kind {
            for &inner in &self.blocks[body].ops {
                self.visit_op(inner, f);
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
