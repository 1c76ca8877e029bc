//! The op-definition table (docs/ir.md, "Ops"): one row ([`OpDef`]) per op
//! that is not a row of the op-encoder table ([`super::encoders::OPS`]), and
//! one view over every op: [`OpCode`] names any op, and [`OpCode::def`]
//! gives its row, built from the op-encoder table for ISA ops.
//!
//! A row says where the op may appear ([`Parent`]), what follows its name
//! ([`OperandForm`]) and the attributes it interprets, with their types,
//! defaults and help ([`AttrDef`]). The parser, the printer, the verifier
//! (placement, attribute values, the unknown-attribute warnings of
//! [`crate::lint()`]) and the "did you mean" suggestions for op names read
//! it; the staging-plan ops ([`PlanOp`]) are rows of it, and their
//! attributes are the ones [`crate::staging::KernelPlan::read`] decodes.

use super::arch::{Memory, MemorySet};
use super::cost::{DEFAULT_TEXT, PARAM_TABLE};
use super::encoders::{
    AttrInfo, AttrKind, IsaOp, RoleInfo, ACCESSORS, ACCESS_ATTRS, KERNEL_ATTRS, TABLE,
};
use super::sdma::{DATARAM_BASE, DATARAM_END, MAX_DESCRIPTOR_BYTES, QUEUES};

/// The values an attribute takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    /// An integer in `min..=max` (wide enough for any 64-bit bound).
    Int {
        /// Smallest allowed value.
        min: i128,
        /// Largest allowed value.
        max: i128,
    },
    /// `true` or `false`.
    Bool,
    /// Any string.
    Str,
    /// An array of values of the kind.
    List(&'static ValueKind),
}

impl ValueKind {
    /// An integer kind with unsigned bounds.
    pub const fn uint(min: u64, max: u64) -> ValueKind {
        ValueKind::Int {
            min: min as i128,
            max: max as i128,
        }
    }

    /// The kind of an op-encoder table attribute.
    pub const fn of(kind: AttrKind) -> ValueKind {
        match kind {
            AttrKind::Enum(words) => ValueKind::Enum(words),
            AttrKind::Int { min, max } => ValueKind::Int {
                min: min as i128,
                max: max as i128,
            },
            AttrKind::Bool => ValueKind::Bool,
        }
    }
}

/// An attribute an op interprets: its key, its values, its default and a
/// one-line help. The op-encoder table's attributes ([`AttrInfo`]) are seen
/// through [`AttrDef::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrDef {
    /// Key.
    pub name: &'static str,
    /// Allowed values.
    pub kind: ValueKind,
    /// The default, spelled as in IR text; `None` when there is none (the
    /// attribute is required, or its absence means something of its own).
    pub default: Option<&'static str>,
    /// Whether every op of its kind must carry it.
    pub required: bool,
    /// One-line help.
    pub help: &'static str,
}

impl AttrDef {
    /// An op-encoder table attribute (optional, with its default).
    pub const fn of(a: AttrInfo) -> AttrDef {
        AttrDef {
            name: a.name,
            kind: ValueKind::of(a.kind),
            default: Some(a.default),
            required: false,
            help: a.help,
        }
    }

    /// A required attribute (no default).
    pub const fn required(name: &'static str, kind: ValueKind, help: &'static str) -> AttrDef {
        AttrDef {
            name,
            kind,
            default: None,
            required: true,
            help,
        }
    }

    /// An optional attribute without a default.
    pub const fn optional(name: &'static str, kind: ValueKind, help: &'static str) -> AttrDef {
        AttrDef {
            name,
            kind,
            default: None,
            required: false,
            help,
        }
    }
}

/// Room for the attributes of one op-encoder table row (checked when the
/// views are computed: a row that outgrows it does not compile).
const MAX_ISA_ATTRS: usize = 4;

/// Each op-encoder table row's attributes as [`AttrDef`]s, and their count.
static ISA_ATTRS: [([AttrDef; MAX_ISA_ATTRS], usize); TABLE.len()] = {
    const NONE: AttrDef = AttrDef::optional("", ValueKind::Bool, "");
    let mut out = [([NONE; MAX_ISA_ATTRS], 0); TABLE.len()];
    let mut op = 0;
    while op < TABLE.len() {
        let attrs = TABLE[op].attrs;
        assert!(attrs.len() <= MAX_ISA_ATTRS, "raise MAX_ISA_ATTRS");
        let mut a = 0;
        while a < attrs.len() {
            out[op].0[a] = AttrDef::of(attrs[a]);
            a += 1;
        }
        out[op].1 = attrs.len();
        op += 1;
    }
    out
};

/// `attrs` (of length `N`) as [`AttrDef`]s.
const fn defs<const N: usize>(attrs: &[AttrInfo]) -> [AttrDef; N] {
    assert!(attrs.len() == N);
    let mut out = [AttrDef::of(attrs[0]); N];
    let mut i = 0;
    while i < N {
        out[i] = AttrDef::of(attrs[i]);
        i += 1;
    }
    out
}

/// [`KERNEL_ATTRS`] as [`AttrDef`]s.
static KERNEL_DEFS: [AttrDef; KERNEL_ATTRS.len()] = defs(KERNEL_ATTRS);

/// [`ACCESS_ATTRS`] as [`AttrDef`]s.
static ACCESS_DEFS: [AttrDef; ACCESS_ATTRS.len()] = defs(ACCESS_ATTRS);

/// Where an op may appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Parent {
    /// The top level of a module.
    Module,
    /// The body of a `gpsimd.kernel`.
    Kernel,
}

/// What follows an op's name in IR text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandForm {
    /// `ROLE = access-pattern, ...` with the roles of an op-encoder table
    /// row, each exactly once.
    Roles(&'static [RoleInfo]),
    /// `ROLE = access-pattern as "KEY", ...` with any roles (`isa.custom`),
    /// each operand in one of `mems`.
    AnyRoles {
        /// The memories an operand may address.
        mems: MemorySet,
    },
    /// One access pattern without a role; it has role `role` in the IR.
    Access {
        /// The role the operand is given.
        role: &'static str,
        /// The memories the access may address.
        mems: MemorySet,
    },
    /// `@name`, then a body of ops (`gpsimd.kernel`).
    Body,
    /// No operands: only attributes (the staging-plan ops).
    None,
    /// A buffer declaration, `%name = OP {...} : TYPE<...>`.
    Buffer {
        /// The memory declared.
        mem: Memory,
        /// The type's keyword (`tile`, `tensor`).
        type_keyword: &'static str,
    },
}

/// An op of a staging plan (docs/staging.md), each a row of [`OP_DEFS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanOp {
    /// `gpsimd.plan`.
    Header,
    /// `gpsimd.buffer`.
    Buffer,
    /// `sdma.copy`.
    Sdma,
    /// `gpsimd.memcpy`.
    Memcpy,
    /// `sdma.wait`.
    Wait,
    /// `gpsimd.compute`.
    Compute,
}

impl PlanOp {
    /// Every plan op, in the order a plan lists them.
    pub const ALL: [PlanOp; 6] = [
        PlanOp::Header,
        PlanOp::Buffer,
        PlanOp::Sdma,
        PlanOp::Memcpy,
        PlanOp::Wait,
        PlanOp::Compute,
    ];

    /// The op's row.
    pub fn def(self) -> &'static OpDef {
        OpCode::Plan(self).row().unwrap_or(&OP_DEFS[0])
    }

    /// The text op name.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The attributes the op takes.
    pub fn attrs(self) -> &'static [AttrDef] {
        self.def().attrs
    }

    /// The plan op called `name`.
    pub fn from_name(name: &str) -> Option<PlanOp> {
        match OpCode::from_name(name)? {
            OpCode::Plan(p) => Some(p),
            _ => None,
        }
    }
}

/// Any op of the IR: a row of the op-encoder table or of [`OP_DEFS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpCode {
    /// A row of the op-encoder table.
    Isa(IsaOp),
    /// `isa.custom`.
    Custom,
    /// `mem.sbuf`, `mem.psum`, `mem.hbm`.
    Buffer(Memory),
    /// `gpsimd.kernel`.
    Kernel,
    /// `gpsimd.read`.
    Read,
    /// `gpsimd.write`.
    Write,
    /// A staging-plan op.
    Plan(PlanOp),
}

impl OpCode {
    /// The op called `name` (ISA ops by the op-encoder table's index).
    pub fn from_name(name: &str) -> Option<OpCode> {
        if let Some(op) = IsaOp::from_name(name) {
            return Some(OpCode::Isa(op));
        }
        OP_DEFS.iter().find(|d| d.name == name).map(|d| d.code)
    }

    /// The row of an op that is not an ISA op.
    fn row(self) -> Option<&'static OpDef> {
        OP_DEFS.iter().find(|d| d.code == self)
    }

    /// The op's definition; for an ISA op, built from its op-encoder row.
    pub fn def(self) -> OpDef {
        match self {
            OpCode::Isa(op) => {
                let info = op.info();
                let (attrs, n) = &ISA_ATTRS[op.index()];
                OpDef {
                    code: self,
                    name: info.name,
                    parent: Parent::Module,
                    operands: OperandForm::Roles(info.roles),
                    attrs: &attrs[..*n],
                }
            }
            _ => *self.row().unwrap_or(&OP_DEFS[0]),
        }
    }

    /// The text op name.
    pub fn name(self) -> &'static str {
        match self {
            OpCode::Isa(op) => op.info().name,
            _ => self.row().map_or("", |d| d.name),
        }
    }

    /// Every op: the op-encoder table's rows, then [`OP_DEFS`].
    pub fn all() -> impl Iterator<Item = OpCode> {
        IsaOp::all()
            .map(OpCode::Isa)
            .chain(OP_DEFS.iter().map(|d| d.code))
    }
}

/// One op: its name, where it may appear, its operand form and the
/// attributes it interprets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpDef {
    /// The op.
    pub code: OpCode,
    /// The text op name (`gpsimd.read`).
    pub name: &'static str,
    /// Where it may appear.
    pub parent: Parent,
    /// What follows its name.
    pub operands: OperandForm,
    /// The attributes it interprets, in the order they are listed.
    pub attrs: &'static [AttrDef],
}

impl OpDef {
    /// The interpreted attribute called `name`.
    pub fn attr(&self, name: &str) -> Option<&'static AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// The largest buffering depth a plan may ask for (`gpsimd.plan {buffers}`).
pub const MAX_DEPTH: u64 = 64;

/// Staging policies, as `gpsimd.plan {policy}` and `schedule-staging`
/// spell them.
pub const POLICIES: &[&str] = &["pipelined", "reference"];

/// Copy directions (`sdma.copy {dir}`): HBM -> dataram, dataram -> HBM.
pub const COPY_DIRS: &[&str] = &["m2s", "s2m"];

/// Copy methods: `dma` (an `sdma.copy`), then the core's own
/// (`gpsimd.memcpy {method}`).
pub const COPY_METHODS: &[&str] = &["dma", "vec", "c"];

/// The accessors a plan may choose (every accessor hint but `auto`).
const PLAN_ACCESSORS: &[&str] = ACCESSORS.split_at(1).1;

/// The core's copy methods.
const CORE_METHODS: &[&str] = COPY_METHODS.split_at(1).1;

const U32: ValueKind = ValueKind::uint(0, u32::MAX as u64);
const U64: ValueKind = ValueKind::uint(0, u64::MAX);
const DRAM: ValueKind = ValueKind::uint(DATARAM_BASE as u64, DATARAM_END as u64 - 1);

const PLAN_FIXED: [AttrDef; 3] = [
    AttrDef::required("policy", ValueKind::Enum(POLICIES), "the staging policy"),
    AttrDef::required(
        "buffers",
        ValueKind::uint(1, MAX_DEPTH),
        "buffers per staging group",
    ),
    AttrDef::required(
        "accessors",
        ValueKind::List(&ValueKind::Enum(PLAN_ACCESSORS)),
        "the accessor of each access, in body order",
    ),
];

/// `gpsimd.plan`'s attributes: the fixed ones, one per simulator parameter
/// ([`super::cost::PARAMS`], default and bounds from there), then the
/// reasons.
static PLAN_ATTRS: [AttrDef; PLAN_FIXED.len() + PARAM_TABLE.len() + 1] = {
    let mut out = [AttrDef::optional(
        "reasons",
        ValueKind::List(&ValueKind::Str),
        "why each access got its accessor, in body order",
    ); PLAN_FIXED.len() + PARAM_TABLE.len() + 1];
    let mut i = 0;
    while i < PLAN_FIXED.len() {
        out[i] = PLAN_FIXED[i];
        i += 1;
    }
    let mut i = 0;
    while i < PARAM_TABLE.len() {
        let p = &PARAM_TABLE[i];
        out[PLAN_FIXED.len() + i] = AttrDef {
            name: p.name,
            kind: ValueKind::uint(p.min, p.max),
            default: Some(DEFAULT_TEXT[i].as_str()),
            required: false,
            help: p.help,
        };
        i += 1;
    }
    out
};

const BUFFER_ATTRS: &[AttrDef] = &[
    AttrDef::required("slot", U32, "the buffer's number, 0, 1, ... in order"),
    AttrDef::required(
        "access",
        U32,
        "the access whose staging group owns the buffer",
    ),
    AttrDef::required("dram", DRAM, "first dataram byte address"),
    AttrDef::required(
        "bytes",
        ValueKind::uint(1, (DATARAM_END - DATARAM_BASE) as u64),
        "size in bytes",
    ),
];

const COPY_ID: AttrDef = AttrDef::required("id", U32, "the copy's number, in issue order");
const COPY_DIR: AttrDef = AttrDef::required(
    "dir",
    ValueKind::Enum(COPY_DIRS),
    "m2s (HBM -> dataram) or s2m (dataram -> HBM)",
);
const COPY_ACCESS: AttrDef = AttrDef::required("access", U32, "the access the copy stages");
const COPY_TILE: AttrDef = AttrDef::required("tile", U32, "the tile of that access");
const COPY_SLOT: AttrDef = AttrDef::required("slot", U32, "the buffer the copy uses");
const COPY_HBM: AttrDef = AttrDef::required("hbm", U64, "HBM byte address");
const COPY_DRAM: AttrDef = AttrDef::required("dram", DRAM, "dataram byte address");
const COPY_BYTES: AttrDef = AttrDef::required(
    "bytes",
    ValueKind::uint(1, MAX_DESCRIPTOR_BYTES as u64),
    "bytes moved",
);

const SDMA_ATTRS: &[AttrDef] = &[
    COPY_ID,
    COPY_DIR,
    AttrDef::required(
        "queue",
        ValueKind::uint(0, QUEUES as u64 - 1),
        "the SDMA queue",
    ),
    COPY_ACCESS,
    COPY_TILE,
    COPY_SLOT,
    COPY_HBM,
    COPY_DRAM,
    COPY_BYTES,
];

const MEMCPY_ATTRS: &[AttrDef] = &[
    COPY_ID,
    AttrDef::required(
        "method",
        ValueKind::Enum(CORE_METHODS),
        "the core's copy: vec (VEC_MEMCPY) or c (C_MEMCPY)",
    ),
    COPY_DIR,
    COPY_ACCESS,
    COPY_TILE,
    COPY_SLOT,
    COPY_HBM,
    COPY_DRAM,
    COPY_BYTES,
];

/// The attributes of `mem.sbuf` and `mem.psum`: the first partition and
/// the byte offset inside each partition. Other attributes on a buffer are
/// kept and printed back (docs/ir.md).
pub const ON_CHIP_BUFFER_ATTRS: &[AttrDef] = &[
    AttrDef::required(
        "partition",
        ValueKind::uint(0, u32::MAX as u64),
        "the first partition the buffer occupies",
    ),
    AttrDef::required("byte", U64, "the byte offset inside each of its partitions"),
];

/// The attributes of `mem.hbm`: the 64-bit byte address.
pub const HBM_BUFFER_ATTRS: &[AttrDef] = &[AttrDef::required(
    "addr",
    U64,
    "the tensor's 64-bit byte address",
)];

/// Every op that is not a row of the op-encoder table, by dialect.
pub static OP_DEFS: &[OpDef] = &[
    OpDef {
        code: OpCode::Custom,
        name: "isa.custom",
        parent: Parent::Module,
        operands: OperandForm::AnyRoles {
            mems: MemorySet::SP,
        },
        attrs: &[AttrDef::optional(
            "name",
            ValueKind::Str,
            "the custom op's name",
        )],
    },
    OpDef {
        code: OpCode::Kernel,
        name: "gpsimd.kernel",
        parent: Parent::Module,
        operands: OperandForm::Body,
        attrs: &KERNEL_DEFS,
    },
    OpDef {
        code: OpCode::Read,
        name: "gpsimd.read",
        parent: Parent::Kernel,
        operands: OperandForm::Access {
            role: "src",
            mems: MemorySet::HBM,
        },
        attrs: &ACCESS_DEFS,
    },
    OpDef {
        code: OpCode::Write,
        name: "gpsimd.write",
        parent: Parent::Kernel,
        operands: OperandForm::Access {
            role: "dst",
            mems: MemorySet::HBM,
        },
        attrs: &ACCESS_DEFS,
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Header),
        name: "gpsimd.plan",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: &PLAN_ATTRS,
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Buffer),
        name: "gpsimd.buffer",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: BUFFER_ATTRS,
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Memcpy),
        name: "gpsimd.memcpy",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: MEMCPY_ATTRS,
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Compute),
        name: "gpsimd.compute",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: &[
            AttrDef::required("first", U64, "the first iteration run"),
            AttrDef::required("count", U64, "iterations run"),
        ],
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Sdma),
        name: "sdma.copy",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: SDMA_ATTRS,
    },
    OpDef {
        code: OpCode::Plan(PlanOp::Wait),
        name: "sdma.wait",
        parent: Parent::Kernel,
        operands: OperandForm::None,
        attrs: &[AttrDef::required(
            "copy",
            U32,
            "the SDMA copy the core waits for",
        )],
    },
    OpDef {
        code: OpCode::Buffer(Memory::Sbuf),
        name: "mem.sbuf",
        parent: Parent::Module,
        operands: OperandForm::Buffer {
            mem: Memory::Sbuf,
            type_keyword: "tile",
        },
        attrs: ON_CHIP_BUFFER_ATTRS,
    },
    OpDef {
        code: OpCode::Buffer(Memory::Psum),
        name: "mem.psum",
        parent: Parent::Module,
        operands: OperandForm::Buffer {
            mem: Memory::Psum,
            type_keyword: "tile",
        },
        attrs: ON_CHIP_BUFFER_ATTRS,
    },
    OpDef {
        code: OpCode::Buffer(Memory::Hbm),
        name: "mem.hbm",
        parent: Parent::Module,
        operands: OperandForm::Buffer {
            mem: Memory::Hbm,
            type_keyword: "tensor",
        },
        attrs: HBM_BUFFER_ATTRS,
    },
];

/// `a, b or c` / `a, b and c`.
fn listing(names: impl Iterator<Item = String>, last: &str) -> String {
    let names: Vec<String> = names.collect();
    match names.split_last() {
        None => String::new(),
        Some((one, [])) => one.clone(),
        Some((tail, head)) => format!("{} {last} {tail}", head.join(", ")),
    }
}

/// Whether `key` is an attribute of some buffer op (`partition`, `byte`,
/// `addr`): the printer writes those from a buffer's fields, so no buffer
/// keeps one as an extra attribute (the parser rejects it on a buffer op
/// that does not take it, the verifier on a buffer built in code).
pub fn is_buffer_attr(key: &str) -> bool {
    OP_DEFS
        .iter()
        .filter(|d| matches!(d.operands, OperandForm::Buffer { .. }))
        .any(|d| d.attr(key).is_some())
}

/// What a kernel body may hold, for messages: `` `gpsimd.read`,
/// `gpsimd.write` and staging-plan ops ``.
pub fn kernel_body_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let names = OP_DEFS
            .iter()
            .filter(|d| d.parent == Parent::Kernel && !matches!(d.code, OpCode::Plan(_)))
            .map(|d| format!("`{}`", d.name))
            .chain(std::iter::once("staging-plan ops".to_string()));
        listing(names, "and")
    })
}

/// The buffer ops, for messages: `` `mem.sbuf`, `mem.psum` or `mem.hbm` ``.
pub fn buffer_ops_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let names = OP_DEFS
            .iter()
            .filter(|d| matches!(d.operands, OperandForm::Buffer { .. }))
            .map(|d| format!("`{}`", d.name));
        listing(names, "or")
    })
}

/// The dialect of a buffer op (`mem`), whose unknown ops are taken for
/// buffer declarations missing their name.
pub fn buffer_dialect() -> &'static str {
    OP_DEFS
        .iter()
        .find(|d| matches!(d.operands, OperandForm::Buffer { .. }))
        .and_then(|d| d.name.split_once('.'))
        .map_or("", |(dialect, _)| dialect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_op_once_with_unique_attributes() {
        let names: Vec<&str> = OpCode::all().map(OpCode::name).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for code in OpCode::all() {
            let def = code.def();
            assert_eq!(def.code, code);
            assert_eq!(OpCode::from_name(def.name), Some(code));
            let attrs: BTreeSet<&str> = def.attrs.iter().map(|a| a.name).collect();
            assert_eq!(attrs.len(), def.attrs.len(), "{}", def.name);
            for a in def.attrs {
                assert!(!(a.required && a.default.is_some()), "{}", a.name);
                assert!(!a.help.is_empty(), "{} {}", def.name, a.name);
            }
        }
        for p in PlanOp::ALL {
            assert_eq!(PlanOp::from_name(p.name()), Some(p));
            assert_eq!(p.def().parent, Parent::Kernel);
        }
        for mem in [Memory::Sbuf, Memory::Psum, Memory::Hbm] {
            let def = OpCode::Buffer(mem).def();
            assert!(matches!(def.operands, OperandForm::Buffer { mem: m, .. } if m == mem));
            assert_eq!(def.name, mem.op_name());
        }
    }

    #[test]
    fn plan_header_lists_the_parameters_with_their_defaults() {
        let names: Vec<&str> = PlanOp::Header.attrs().iter().map(|a| a.name).collect();
        assert_eq!(
            names.join(", "),
            "policy, buffers, accessors, dma_fixed_ns, dma_bytes_per_us, clock_mhz, index_ns, vec_fixed_ns, vec_bytes_per_us, c_fixed_ns, c_bytes_per_us, budget, reasons"
        );
        let budget = PlanOp::Header.def().attr("budget").unwrap();
        assert_eq!(budget.default, Some("16384"));
        assert_eq!(budget.kind, ValueKind::uint(1, 65536));
    }

    #[test]
    fn message_texts() {
        assert_eq!(
            kernel_body_text(),
            "`gpsimd.read`, `gpsimd.write` and staging-plan ops"
        );
        assert_eq!(buffer_ops_text(), "`mem.sbuf`, `mem.psum` or `mem.hbm`");
        assert_eq!(buffer_dialect(), "mem");
    }
}
