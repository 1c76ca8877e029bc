//! The op-encoder table (docs/hardware.md, "The op-encoder table"): one row
//! per text op, each naming its encoders per arch, its roles with their
//! descriptor kind and memories, its elementwise flag and the attributes it
//! interprets.
//!
//! The CoreV2/CoreV3 4D producer list is the project's reconstruction of the
//! reference census (22 producers: 18 CoreV2 + 4 CoreV3); it is data here so
//! that a correction is one edit whose effect shows in the snapshots.

use super::arch::{Arch, MemorySet};
use super::dtype::Dtype;
use std::fmt;

/// The encoder generation that packs an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Core {
    /// CoreV2 encoders.
    V2,
    /// CoreV3 encoders.
    V3,
}

/// Whether an operand is read (source) or written (destination).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Source: `TENSOR<n>D` spelling.
    Read,
    /// Destination: `MEM_PATTERN<n>D` spelling (TENSOR4D at v4 for N = 4).
    Write,
}

/// The ADDR4 form a role is encoded with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowForm {
    /// One start address, N {step, num} slots.
    Plain,
    /// Two-window (indirect) form: word +4 holds the `index` operand's ADDR4.
    TwoWindow,
}

/// A descriptor struct: `TENSOR<n>D` or `MEM_PATTERN<n>D`, `n` in 1..=4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DescriptorKind {
    /// `TENSOR<n>D` (source spelling, and the v4 4D destination).
    Tensor(u8),
    /// `MEM_PATTERN<n>D` (destination spelling).
    MemPattern(u8),
}

impl DescriptorKind {
    /// Free slots `N`.
    pub fn slots(self) -> u8 {
        match self {
            DescriptorKind::Tensor(n) | DescriptorKind::MemPattern(n) => n,
        }
    }

    /// The wire struct name (`MEM_PATTERN4D`).
    pub fn name(self) -> &'static str {
        const T: [&str; 4] = ["TENSOR1D", "TENSOR2D", "TENSOR3D", "TENSOR4D"];
        const M: [&str; 4] = [
            "MEM_PATTERN1D",
            "MEM_PATTERN2D",
            "MEM_PATTERN3D",
            "MEM_PATTERN4D",
        ];
        match self {
            DescriptorKind::Tensor(n) => T[(n.clamp(1, 4) - 1) as usize],
            DescriptorKind::MemPattern(n) => M[(n.clamp(1, 4) - 1) as usize],
        }
    }

    /// Whether `arch` has this struct: v4 has no MEM_PATTERN4D (its 4D
    /// destinations use TENSOR4D; ref, CONFIRMED).
    pub fn exists_on(self, arch: Arch) -> bool {
        !matches!((self, arch), (DescriptorKind::MemPattern(4), Arch::V4))
    }

    /// Every kind, TENSOR first.
    pub fn all() -> impl Iterator<Item = DescriptorKind> {
        (1..=4)
            .map(DescriptorKind::Tensor)
            .chain((1..=4).map(DescriptorKind::MemPattern))
    }

    /// Parses a wire struct name (`TENSOR3D`, `MEM_PATTERN2D`).
    pub fn from_name(s: &str) -> Option<DescriptorKind> {
        DescriptorKind::all().find(|k| k.name() == s)
    }
}

impl fmt::Display for DescriptorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The prefix of the string-keyed selector's keys.
pub const CUSTOM_STRUCT_PREFIX: &str = "NEURON_ISA_TPB_";

/// The four keys the string-keyed selector accepts.
pub const CUSTOM_STRUCT_KEYS: [&str; 4] = [
    "NEURON_ISA_TPB_TENSOR1D",
    "NEURON_ISA_TPB_TENSOR2D",
    "NEURON_ISA_TPB_TENSOR3D",
    "NEURON_ISA_TPB_TENSOR4D",
];

/// The string-keyed selector: maps an `isa.custom` struct-type name to the
/// `TENSOR<n>D` struct it names.
pub fn select_by_struct_name(key: &str) -> Option<DescriptorKind> {
    CUSTOM_STRUCT_KEYS
        .iter()
        .position(|k| *k == key)
        .map(|i| DescriptorKind::Tensor(i as u8 + 1))
}

/// A dtype constraint on a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtypeRule {
    /// Any element type.
    Any,
    /// An integer type (gather indices).
    Integer,
}

impl DtypeRule {
    /// Whether `d` satisfies the rule.
    pub fn allows(self, d: Dtype) -> bool {
        match self {
            DtypeRule::Any => true,
            DtypeRule::Integer => d.is_integer(),
        }
    }
}

/// One operand role of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleInfo {
    /// The role name used in IR text (`dst`, `src`, `ifmap`, ...).
    pub name: &'static str,
    /// Read or written.
    pub dir: Direction,
    /// Free slots of the role's descriptor (the `n` of `T<n>` / `M<n>`).
    pub slots: u8,
    /// Memories the role may address.
    pub mems: MemorySet,
    /// ADDR4 form.
    pub form: WindowForm,
    /// Element type constraint.
    pub dtype: DtypeRule,
}

impl RoleInfo {
    /// The descriptor kind of this role on `arch`: `TENSOR<n>D` for reads,
    /// `MEM_PATTERN<n>D` for writes, except that v4 has no MEM_PATTERN4D and
    /// writes 4D destinations with the TENSOR4D struct (ref, CONFIRMED).
    pub fn kind(&self, arch: Arch) -> DescriptorKind {
        match self.dir {
            Direction::Read => DescriptorKind::Tensor(self.slots),
            Direction::Write => {
                let k = DescriptorKind::MemPattern(self.slots);
                if k.exists_on(arch) {
                    k
                } else {
                    DescriptorKind::Tensor(self.slots)
                }
            }
        }
    }
}

/// The value kinds an interpreted attribute takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    /// An integer in `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// `true` or `false`.
    Bool,
}

/// An attribute an op interprets, with its default and a one-line help.
/// The op-definition table views it as a [`super::ops::AttrDef`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrInfo {
    /// Key.
    pub name: &'static str,
    /// Allowed values.
    pub kind: AttrKind,
    /// The default, spelled as in IR text.
    pub default: &'static str,
    /// One-line help.
    pub help: &'static str,
}

impl AttrInfo {
    /// An attribute with its default and help.
    pub const fn new(
        name: &'static str,
        kind: AttrKind,
        default: &'static str,
        help: &'static str,
    ) -> AttrInfo {
        AttrInfo {
            name,
            kind,
            default,
            help,
        }
    }
}

/// One encoder of an op: its name, generation and the archs it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderVariant {
    /// The encoder's name in the reference (`TensorCopy`).
    pub encoder: &'static str,
    /// The encoder generation.
    pub core: Core,
    /// The archs this encoder serves.
    pub archs: &'static [Arch],
}

/// One text op of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The text op (`isa.tensor_copy`).
    pub name: &'static str,
    /// Roles, in encoding order (wire-bin order).
    pub roles: &'static [RoleInfo],
    /// Elementwise over free dims (a legaliser may merge dims or split the op).
    pub elementwise: bool,
    /// Attributes the op interprets.
    pub attrs: &'static [AttrInfo],
    /// The encoders of this op, per arch.
    pub encoders: &'static [EncoderVariant],
}

impl OpInfo {
    /// The encoder serving `arch`, if the op exists there.
    pub fn encoder(&self, arch: Arch) -> Option<&'static EncoderVariant> {
        self.encoders.iter().find(|e| e.archs.contains(&arch))
    }

    /// The role called `name`.
    pub fn role(&self, name: &str) -> Option<(usize, &'static RoleInfo)> {
        self.roles
            .iter()
            .enumerate()
            .find(|(_, r)| short_eq(r.name, name))
    }

    /// The archs the op exists on.
    pub fn archs(&self) -> impl Iterator<Item = Arch> + '_ {
        Arch::ALL.into_iter().filter(|a| self.encoder(*a).is_some())
    }
}

/// Bytewise string equality, usable in constants.
const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Room for the distinct role names and the roles of one op (checked when
/// the tables are computed: a table that outgrows them does not compile).
const MAX_ROLE_NAMES: usize = 32;
const MAX_ROLES: usize = 8;

/// The distinct role names of [`TABLE`] in table order, and their count.
const ROLE_NAMES: ([&str; MAX_ROLE_NAMES], usize) = {
    let mut names = [""; MAX_ROLE_NAMES];
    let mut n = 0;
    let mut op = 0;
    while op < TABLE.len() {
        let roles = TABLE[op].roles;
        let mut r = 0;
        while r < roles.len() {
            let mut k = 0;
            while k < n && !const_str_eq(names[k], roles[r].name) {
                k += 1;
            }
            if k == n {
                assert!(n < MAX_ROLE_NAMES, "raise MAX_ROLE_NAMES");
                names[n] = roles[r].name;
                n += 1;
            }
            r += 1;
        }
        op += 1;
    }
    (names, n)
};

/// For each row of [`TABLE`], the archs it has an encoder on, one bit per
/// arch (`1 << arch as u8`): what [`IsaOp::on_arch`] reads instead of
/// searching the row's encoders.
static ON_ARCH: [u8; TABLE.len()] = {
    let mut masks = [0u8; TABLE.len()];
    let mut op = 0;
    while op < TABLE.len() {
        let encoders = TABLE[op].encoders;
        let mut e = 0;
        while e < encoders.len() {
            let archs = encoders[e].archs;
            let mut a = 0;
            while a < archs.len() {
                masks[op] |= 1 << archs[a] as u8;
                a += 1;
            }
            e += 1;
        }
        op += 1;
    }
    masks
};

/// For each row of [`TABLE`], each role's index in [`ROLE_NAMES`].
static ROLE_IDS: [[u8; MAX_ROLES]; TABLE.len()] = {
    let mut ids = [[u8::MAX; MAX_ROLES]; TABLE.len()];
    let mut op = 0;
    while op < TABLE.len() {
        let roles = TABLE[op].roles;
        assert!(roles.len() <= MAX_ROLES, "raise MAX_ROLES");
        let mut r = 0;
        while r < roles.len() {
            let mut k = 0;
            while !const_str_eq(ROLE_NAMES.0[k], roles[r].name) {
                k += 1;
            }
            ids[op][r] = k as u8;
            r += 1;
        }
        op += 1;
    }
    ids
};

/// For each row of [`TABLE`], the index in the row of each role name of
/// [`ROLE_NAMES`] (`u8::MAX`: the row has no such role): [`ROLE_IDS`]
/// turned round, so that [`IsaOp::role_of`] is one load.
static ROLE_AT: [[u8; MAX_ROLE_NAMES]; TABLE.len()] = {
    let mut at = [[u8::MAX; MAX_ROLE_NAMES]; TABLE.len()];
    let mut op = 0;
    while op < TABLE.len() {
        let mut r = 0;
        while r < TABLE[op].roles.len() {
            let id = ROLE_IDS[op][r] as usize;
            // The first role of that name, as a search finds it.
            if at[op][id] == u8::MAX {
                at[op][id] = r as u8;
            }
            r += 1;
        }
        op += 1;
    }
    at
};

/// Every role name of the table, each once, in table order. Every
/// [`crate::Interner`] interns them first, in this order, so a role name's
/// symbol is its index here in every module and a role is found by
/// comparing integers ([`IsaOp::role_of`]).
pub fn role_names() -> &'static [&'static str] {
    static NAMES: [&str; MAX_ROLE_NAMES] = ROLE_NAMES.0;
    &NAMES[..ROLE_NAMES.1]
}

/// Equality of short names (roles, attribute keys) without a call to the
/// C library's `memcmp`, which dominates for strings of a few bytes.
#[inline]
pub fn short_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// Index of a row in [`OPS`]; what an ISA op in the IR stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IsaOp(u16);

impl IsaOp {
    /// The row's index in [`OPS`].
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The table row.
    pub fn info(self) -> &'static OpInfo {
        &OPS[self.0 as usize]
    }

    /// Looks up a text op name.
    pub fn from_name(name: &str) -> Option<IsaOp> {
        static INDEX: std::sync::OnceLock<rustc_hash::FxHashMap<&'static str, IsaOp>> =
            std::sync::OnceLock::new();
        INDEX
            .get_or_init(|| IsaOp::all().map(|op| (op.info().name, op)).collect())
            .get(name)
            .copied()
    }

    /// Whether the row has an encoder on `arch` (the same answer as
    /// `self.info().encoder(arch).is_some()`, from a table).
    #[inline]
    pub fn on_arch(self, arch: Arch) -> bool {
        ON_ARCH[usize::from(self.0)] & (1 << arch as u8) != 0
    }

    /// The role whose name is `sym` (a symbol of any module: role names
    /// have the same symbol everywhere, see [`role_names`]); the same answer
    /// as [`OpInfo::role`] on the symbol's text.
    pub fn role_of(self, sym: crate::Symbol) -> Option<(usize, &'static RoleInfo)> {
        let i = *ROLE_AT[usize::from(self.0)].get(sym.index() as usize)?;
        let roles = self.info().roles;
        roles.get(usize::from(i)).map(|r| (usize::from(i), r))
    }

    /// Every row.
    pub fn all() -> impl Iterator<Item = IsaOp> {
        (0..OPS.len()).map(|i| IsaOp(i as u16))
    }
}

const fn role(name: &'static str, dir: Direction, slots: u8, mems: MemorySet) -> RoleInfo {
    RoleInfo {
        name,
        dir,
        slots,
        mems,
        form: WindowForm::Plain,
        dtype: DtypeRule::Any,
    }
}
const fn dst(slots: u8, mems: MemorySet) -> RoleInfo {
    role("dst", Direction::Write, slots, mems)
}
const fn src(slots: u8, mems: MemorySet) -> RoleInfo {
    role("src", Direction::Read, slots, mems)
}
const fn read(name: &'static str, slots: u8, mems: MemorySet) -> RoleInfo {
    role(name, Direction::Read, slots, mems)
}

use super::arch::MemorySet as M;
use Arch::{V2, V3, V4};

const V2_ONLY: &[Arch] = &[V2];
const V3_V4: &[Arch] = &[V3, V4];
const ALL_ARCHS: &[Arch] = &[V2, V3, V4];

macro_rules! enc {
    (all: $name:literal) => {
        &[EncoderVariant {
            encoder: $name,
            core: Core::V2,
            archs: ALL_ARCHS,
        }]
    };
    (v2_then_v3: $name:literal) => {
        &[
            EncoderVariant {
                encoder: $name,
                core: Core::V2,
                archs: V2_ONLY,
            },
            EncoderVariant {
                encoder: $name,
                core: Core::V3,
                archs: V3_V4,
            },
        ]
    };
    (v3: $name:literal) => {
        &[EncoderVariant {
            encoder: $name,
            core: Core::V3,
            archs: V3_V4,
        }]
    };
}

const COPY_ROLES: &[RoleInfo] = &[dst(4, M::SP), src(4, M::SP)];
const REDUCE_OPS: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "max",
    "min",
    "bitwise_and",
    "bitwise_or",
];
/// `AxisListType` spellings in selector order (X = 0 .. XYZWC = 5).
pub const AXIS_LIST_TYPES: &[&str] = &["X", "XY", "XYZ", "XYZW", "C", "XYZWC"];
const ACT_FUNCS: &[&str] = &[
    "identity", "relu", "gelu", "sigmoid", "tanh", "exp", "silu", "square", "sqrt", "rsqrt",
];

const I32: AttrKind = AttrKind::Int {
    min: i32::MIN as i64,
    max: i32::MAX as i64,
};
const REDUCE_ATTRS: &[AttrInfo] = &[
    AttrInfo::new(
        "op",
        AttrKind::Enum(REDUCE_OPS),
        "\"add\"",
        "the reduction operator",
    ),
    AttrInfo::new(
        "axis",
        AttrKind::Enum(AXIS_LIST_TYPES),
        "\"X\"",
        "the free axes reduced (AxisListType)",
    ),
];
const BINARY_OP_ATTRS: &[AttrInfo] = &[AttrInfo::new(
    "op",
    AttrKind::Enum(REDUCE_OPS),
    "\"add\"",
    "the operator applied elementwise to src0 and src1",
)];
const SCALAR_OP_ATTRS: &[AttrInfo] = &[
    AttrInfo::new(
        "op",
        AttrKind::Enum(REDUCE_OPS),
        "\"multiply\"",
        "the operator applied to each element and the scalar",
    ),
    AttrInfo::new("scalar", I32, "1", "the scalar operand"),
];
const ACT_ATTRS: &[AttrInfo] = &[AttrInfo::new(
    "func",
    AttrKind::Enum(ACT_FUNCS),
    "\"identity\"",
    "the activation function",
)];
const POOL_ATTRS: &[AttrInfo] = &[AttrInfo::new(
    "kind",
    AttrKind::Enum(&["max", "avg"]),
    "\"max\"",
    "max or average pooling",
)];
const MEMSET_ATTRS: &[AttrInfo] = &[AttrInfo::new(
    "value",
    AttrKind::Int {
        min: i32::MIN as i64,
        max: u32::MAX as i64,
    },
    "0",
    "the value written to every element, as a 32-bit pattern",
)];
const IOTA_ATTRS: &[AttrInfo] = &[
    AttrInfo::new("base", I32, "0", "the value of the first element"),
    AttrInfo::new(
        "channel_multiplier",
        I32,
        "0",
        "added to the value per partition",
    ),
];
const ACCUMULATE: AttrInfo = AttrInfo::new(
    "accumulate",
    AttrKind::Bool,
    "false",
    "add into dst instead of overwriting it",
);
const TRANSPOSE_ATTRS: &[AttrInfo] = &[ACCUMULATE];
const MATMUL_ATTRS: &[AttrInfo] = &[ACCUMULATE];

/// The role whose ADDR4 fills word +4 of a two-window (gather) source.
pub const TWO_WINDOW_INDEX_ROLE: &str = INDEX_ROLE.name;

const INDEX_ROLE: RoleInfo = RoleInfo {
    dtype: DtypeRule::Integer,
    ..read("index", 2, M::S)
};
const GATHER_SRC: RoleInfo = RoleInfo {
    form: WindowForm::TwoWindow,
    ..src(4, M::S)
};

/// The op-encoder table.
pub static OPS: &[OpInfo] = TABLE;

/// [`OPS`] as a constant, for the tables computed from it at compile time.
#[rustfmt::skip]
pub(crate) const TABLE: &[OpInfo] = &[
    // CoreV2 4D producers (18); TensorCopy, TensorReduce and BNStats are
    // re-encoded by CoreV3 at v3/v4 (three of the 4 CoreV3 producers).
    OpInfo { name: "isa.tensor_copy", roles: COPY_ROLES, elementwise: true, attrs: &[], encoders: enc!(v2_then_v3: "TensorCopy") },
    OpInfo { name: "isa.tensor_copy_predicated", roles: &[dst(4, M::SP), src(4, M::SP), read("predicate", 3, M::S)], elementwise: true, attrs: &[], encoders: enc!(all: "TensorCopyPredicated") },
    OpInfo { name: "isa.shuffle", roles: &[dst(4, M::S), src(4, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "Shuffle") },
    OpInfo { name: "isa.transpose", roles: COPY_ROLES, elementwise: false, attrs: TRANSPOSE_ATTRS, encoders: enc!(all: "Transpose") },
    OpInfo { name: "isa.pool", roles: &[dst(4, M::S), src(4, M::S)], elementwise: false, attrs: POOL_ATTRS, encoders: enc!(all: "Pool") },
    OpInfo { name: "isa.tensor_reduce", roles: COPY_ROLES, elementwise: false, attrs: REDUCE_ATTRS, encoders: enc!(v2_then_v3: "TensorReduce") },
    OpInfo { name: "isa.max8", roles: &[dst(2, M::S), src(4, M::SP)], elementwise: false, attrs: &[], encoders: enc!(all: "Max8") },
    OpInfo { name: "isa.find_index8", roles: &[dst(2, M::S), src(4, M::SP), read("values", 2, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "FindIndex8") },
    OpInfo { name: "isa.match_replace8", roles: &[dst(4, M::S), src(4, M::SP), read("values", 2, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "MatchReplace8") },
    OpInfo { name: "isa.local_gather", roles: &[dst(4, M::S), GATHER_SRC, INDEX_ROLE], elementwise: false, attrs: &[], encoders: enc!(all: "LocalGather") },
    OpInfo { name: "isa.iota", roles: &[dst(4, M::S)], elementwise: false, attrs: IOTA_ATTRS, encoders: enc!(all: "Iota") },
    OpInfo { name: "isa.affine_select", roles: &[dst(4, M::S), src(4, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "AffineSelect") },
    OpInfo { name: "isa.memset", roles: &[dst(4, M::SP)], elementwise: true, attrs: MEMSET_ATTRS, encoders: enc!(all: "Memset") },
    OpInfo { name: "isa.reciprocal", roles: COPY_ROLES, elementwise: true, attrs: &[], encoders: enc!(all: "Reciprocal") },
    OpInfo { name: "isa.rand_get_state", roles: &[dst(4, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "RandGetState") },
    OpInfo { name: "isa.rand_set_state", roles: &[src(4, M::S)], elementwise: false, attrs: &[], encoders: enc!(all: "RandSetState") },
    OpInfo { name: "isa.bn_stats", roles: &[dst(2, M::S), src(4, M::SP)], elementwise: false, attrs: &[], encoders: enc!(v2_then_v3: "BNStats") },
    OpInfo { name: "isa.bn_aggr", roles: &[dst(2, M::S), src(4, M::SP)], elementwise: false, attrs: &[], encoders: enc!(all: "BNAggregate") },
    // The fourth CoreV3 4D producer: the gen3 sparse-matmul ifmap.
    OpInfo { name: "isa.matmul_sparse", roles: &[dst(3, M::P), read("stationary", 3, M::S), read("ifmap", 4, M::S), read("metadata", 2, M::S)], elementwise: false, attrs: MATMUL_ATTRS, encoders: enc!(v3: "MatmultSparse") },
    // 3D-role ops, encoded by their CoreV2 encoders on every arch (proj).
    OpInfo { name: "isa.matmul", roles: &[dst(3, M::P), read("stationary", 3, M::S), read("moving", 3, M::S)], elementwise: false, attrs: MATMUL_ATTRS, encoders: enc!(all: "Matmult") },
    OpInfo { name: "isa.activation", roles: &[dst(3, M::SP), src(3, M::SP), read("bias", 1, M::S)], elementwise: false, attrs: ACT_ATTRS, encoders: enc!(all: "Activation") },
    OpInfo { name: "isa.tensor_tensor", roles: &[dst(3, M::SP), read("src0", 3, M::SP), read("src1", 3, M::SP)], elementwise: true, attrs: BINARY_OP_ATTRS, encoders: enc!(all: "TensorTensor") },
    OpInfo { name: "isa.tensor_scalar", roles: &[dst(3, M::SP), src(3, M::SP)], elementwise: true, attrs: SCALAR_OP_ATTRS, encoders: enc!(all: "TensorScalar") },
];

/// Attributes `gpsimd.kernel` interprets (docs/ir.md, docs/staging.md).
pub const KERNEL_ATTRS: &[AttrInfo] = &[
    AttrInfo::new(
        "core",
        AttrKind::Int { min: 0, max: 255 },
        "0",
        "the GpSimd core that runs the kernel",
    ),
    AttrInfo::new(
        "cycles_per_element",
        AttrKind::Int {
            min: 0,
            max: u32::MAX as i64,
        },
        "1",
        "core cycles each iteration computes",
    ),
];

/// Accessor kinds a `gpsimd.read` / `gpsimd.write` may ask for: `auto`,
/// then the accessors a plan may choose.
pub const ACCESSORS: &[&str] = &["auto", "stream", "tcm", "index"];

/// Attributes `gpsimd.read` / `gpsimd.write` interpret (docs/ir.md,
/// docs/staging.md).
pub const ACCESS_ATTRS: &[AttrInfo] = &[AttrInfo::new(
    "accessor",
    AttrKind::Enum(ACCESSORS),
    "\"auto\"",
    "how the kernel reaches the access's elements (auto: chosen by schedule-staging)",
)];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// `short_eq` is `==`: for every pair of strings of up to 12 bytes that
    /// differ in at most one byte, in any position, and every pair of
    /// lengths.
    #[test]
    fn short_eq_is_equality() {
        let base = "abcdefghijkl";
        for n in 0..=base.len() {
            let a = &base[..n];
            for m in 0..=base.len() {
                assert_eq!(short_eq(a, &base[..m]), n == m, "{a:?} {m}");
            }
            for i in 0..n {
                let mut b = a.as_bytes().to_vec();
                b[i] = b'Z';
                let b = String::from_utf8(b).unwrap();
                assert!(!short_eq(a, &b), "{a:?} {b:?}");
                assert!(short_eq(&b, &b.clone()), "{b:?}");
            }
        }
        assert!(short_eq("é", "é") && !short_eq("é", "è"));
    }

    /// The arch table says what searching each row's encoders says.
    #[test]
    fn on_arch_agrees_with_the_encoders() {
        for op in IsaOp::all() {
            for arch in Arch::ALL {
                assert_eq!(
                    op.on_arch(arch),
                    op.info().encoder(arch).is_some(),
                    "{} on {arch}",
                    op.info().name
                );
            }
        }
    }

    /// A role found by its symbol is the role found by its text, for
    /// every row and every symbol a module's interner may hand out (the
    /// role names, then any other name), and a symbol past the role names
    /// names no role.
    #[test]
    fn role_of_agrees_with_the_role_text() {
        let mut m = crate::Module::new(Arch::V2);
        let others: Vec<_> = ["x", "dst0", "Src", ""].iter().map(|n| m.sym(n)).collect();
        for op in IsaOp::all() {
            for (k, name) in role_names().iter().enumerate() {
                let sym = m.sym(name);
                assert_eq!(sym.index() as usize, k);
                let want = op.info().role(name).map(|(i, r)| (i, r.name));
                assert_eq!(op.role_of(sym).map(|(i, r)| (i, r.name)), want, "{name}");
            }
            for &sym in &others {
                assert!(op.role_of(sym).is_none());
            }
            assert!(op.role_of(crate::Symbol::from_raw(u32::MAX)).is_none());
        }
    }

    /// The reference census: 18 CoreV2 and 4 CoreV3 op-encoders emit 4D.
    #[test]
    fn four_d_producer_census() {
        let mut producers: BTreeSet<(&str, bool)> = BTreeSet::new();
        for op in OPS {
            if op.roles.iter().any(|r| r.slots == 4) {
                for e in op.encoders {
                    producers.insert((e.encoder, e.core == Core::V3));
                }
            }
        }
        let v2 = producers.iter().filter(|p| !p.1).count();
        let v3 = producers.iter().filter(|p| p.1).count();
        assert_eq!((v2, v3), (18, 4), "{producers:?}");
    }

    #[test]
    fn names_are_unique_and_roles_unique_per_op() {
        let names: BTreeSet<_> = OPS.iter().map(|o| o.name).collect();
        assert_eq!(names.len(), OPS.len());
        for op in OPS {
            let roles: BTreeSet<_> = op.roles.iter().map(|r| r.name).collect();
            assert_eq!(roles.len(), op.roles.len(), "{}", op.name);
            assert!(op.roles.iter().all(|r| (1..=4).contains(&r.slots)));
            // Each arch is served by at most one encoder.
            for a in Arch::ALL {
                assert!(op.encoders.iter().filter(|e| e.archs.contains(&a)).count() <= 1);
            }
        }
    }

    #[test]
    fn arch_availability() {
        let sparse = IsaOp::from_name("isa.matmul_sparse").unwrap().info();
        assert!(sparse.encoder(Arch::V2).is_none());
        assert_eq!(sparse.encoder(Arch::V4).unwrap().core, Core::V3);
        let copy = IsaOp::from_name("isa.tensor_copy").unwrap().info();
        assert_eq!(copy.encoder(Arch::V2).unwrap().core, Core::V2);
        assert_eq!(copy.encoder(Arch::V3).unwrap().core, Core::V3);
        // Every other op exists on every arch.
        for op in OPS.iter().filter(|o| o.name != "isa.matmul_sparse") {
            assert_eq!(op.archs().count(), 3, "{}", op.name);
        }
    }

    #[test]
    fn v4_four_d_destinations_use_tensor4d() {
        let copy = IsaOp::from_name("isa.tensor_copy").unwrap().info();
        let (_, d) = copy.role("dst").unwrap();
        assert_eq!(d.kind(Arch::V2), DescriptorKind::MemPattern(4));
        assert_eq!(d.kind(Arch::V3), DescriptorKind::MemPattern(4));
        assert_eq!(d.kind(Arch::V4), DescriptorKind::Tensor(4));
        let bn = IsaOp::from_name("isa.bn_stats").unwrap().info();
        assert_eq!(
            bn.role("dst").unwrap().1.kind(Arch::V4),
            DescriptorKind::MemPattern(2)
        );
    }

    #[test]
    fn string_keyed_selector() {
        assert_eq!(
            select_by_struct_name("NEURON_ISA_TPB_TENSOR3D"),
            Some(DescriptorKind::Tensor(3))
        );
        assert_eq!(select_by_struct_name("NEURON_ISA_TPB_TENSOR5D"), None);
        for k in DescriptorKind::all() {
            assert_eq!(DescriptorKind::from_name(k.name()), Some(k));
        }
    }
}
