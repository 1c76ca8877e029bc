//! Helpers shared by the property tests: a choice source for dependent
//! generation, by-construction valid buffers and access patterns, and a
//! span-free, symbol-free view of a module for structural comparison.
//!
//! Not every test uses every helper, hence the `dead_code` allowance.

#![allow(dead_code)]

use apir_ir::target::encoders::{ACCESS_ATTRS, CUSTOM_STRUCT_KEYS, KERNEL_ATTRS};
use apir_ir::target::{AttrKind, DtypeRule, IsaOp};
use apir_ir::{
    AccessPattern, Arch, Attr, Attrs, Buffer, BufferData, Dtype, Item, Memory, Module, Op, OpKind,
};

/// Dependent choices (a buffer, then an access pattern that fits it) drawn
/// from a vector of raw numbers that proptest generates and shrinks. Running
/// out of numbers yields zeros, and every choice maps 0 to its simplest
/// option, so shrinking the vector simplifies the case.
pub struct Picker<'a> {
    raw: &'a [u64],
    pos: usize,
}

impl<'a> Picker<'a> {
    /// Draws from `raw`.
    pub fn new(raw: &'a [u64]) -> Self {
        Picker { raw, pos: 0 }
    }

    /// The next raw number (0 once exhausted).
    pub fn next(&mut self) -> u64 {
        let v = self.raw.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        let span = hi - lo;
        let v = self.next();
        if span == u64::MAX {
            v
        } else {
            lo + v % (span + 1)
        }
    }

    /// A signed number in `lo..=hi`.
    pub fn range_i128(&mut self, lo: i128, hi: i128) -> i128 {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        let span = u64::try_from(hi - lo).expect("range spans at most 2^64 values");
        lo + i128::from(self.range(0, span))
    }

    /// An index below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.range(0, n as u64 - 1) as usize
    }

    /// True with probability `percent`%; 0 maps to false.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 >= 100 - percent
    }

    /// One of `items` (non-empty).
    pub fn choose<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// A number in `0..=max` biased to the edges: small values, values near
    /// `max`, and uniform ones.
    pub fn magnitude(&mut self, max: u64) -> u64 {
        match self.next() % 4 {
            0 | 1 => self.range(0, max.min(4)),
            2 => self.range(0, max),
            _ => max - self.range(0, max.min(2)),
        }
    }

    /// A signed 64-bit number with the extremes likely.
    pub fn any_i64(&mut self) -> i64 {
        match self.next() % 6 {
            0 => 0,
            1 => self.range(0, 8) as i64 - 4,
            2 => i64::MAX,
            3 => i64::MIN,
            _ => self.next() as i64,
        }
    }

    /// `prefix` followed by up to five identifier characters (`[a-z0-9_.$-]`).
    pub fn ident(&mut self, prefix: &str) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_.$-";
        let mut s = prefix.to_string();
        for _ in 0..self.range(0, 5) {
            s.push(char::from(CHARS[self.below(CHARS.len())]));
        }
        s
    }

    /// A string with characters the printer must escape and non-ASCII ones.
    pub fn text(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "\"", "\\", "\n", "\t", "\r", "//", "é", "€", "😀", " ", "0x1", "}", "\0",
        ];
        let mut s = String::new();
        for _ in 0..self.range(0, 6) {
            s.push_str(PIECES[self.below(PIECES.len())]);
        }
        s
    }

    /// An attribute value of any kind (arrays nest at most `depth` deep).
    pub fn attr(&mut self, m: &mut Module, depth: u32) -> Attr {
        match self.next() % if depth == 0 { 3 } else { 4 } {
            0 => Attr::Int(match self.next() % 4 {
                0 => i128::from(self.any_i64()),
                1 => i128::from(self.next()),
                2 => i128::MAX,
                _ => i128::MIN + 1,
            }),
            1 => {
                let s = self.text();
                Attr::Str(m.sym(&s))
            }
            2 => Attr::Bool(self.chance(50)),
            _ => {
                let n = self.range(0, 3);
                Attr::Array((0..n).map(|_| self.attr(m, depth - 1)).collect())
            }
        }
    }

    /// Up to `max` attributes whose keys start with `u` and an underscore,
    /// so they never collide with a key an op interprets.
    pub fn extra_attrs(&mut self, m: &mut Module, max: u64) -> Attrs {
        let mut attrs = Attrs::default();
        for i in 0..self.range(0, max) {
            let key = self.ident(&format!("u{i}_"));
            let key = m.sym(&key);
            let value = self.attr(m, 2);
            attrs.insert(key, value);
        }
        attrs
    }
}

/// The integer dtypes (usable as gather indices).
pub const INTEGER_DTYPES: [Dtype; 6] = [
    Dtype::U8,
    Dtype::I8,
    Dtype::U16,
    Dtype::I16,
    Dtype::I32,
    Dtype::U32,
];

/// Picks a dtype (an integer one if `integer`).
pub fn pick_dtype(p: &mut Picker, integer: bool) -> Dtype {
    if integer {
        p.choose(&INTEGER_DTYPES)
    } else {
        let all: Vec<Dtype> = Dtype::all().collect();
        p.choose(&all)
    }
}

/// A buffer declaration that fits `mem` on `arch`: partitions within 128,
/// the partition slice within the arch's bytes per partition, the start byte
/// aligned to the dtype; HBM buffers anywhere in the 64-bit address space,
/// often near its end.
pub fn valid_buffer_data(
    p: &mut Picker,
    m: &mut Module,
    name: &str,
    mem: Memory,
    dtype: Dtype,
) -> BufferData {
    let eb = u64::from(dtype.bytes());
    let arch = m.arch;
    if mem.is_on_chip() {
        let total_parts = u64::from(arch.partitions(mem));
        let parts = 1 + p.magnitude(total_parts - 1);
        let start = p.range(0, total_parts - parts);
        let max_elems = arch.bytes_per_partition(mem) / eb;
        let mut shape = vec![parts];
        let mut f = 1u64;
        for _ in 0..p.range(1, 3) {
            let room = max_elems / f;
            let d = 1 + p.magnitude(room.min(64) - 1);
            shape.push(d);
            f *= d;
        }
        let slots = (arch.bytes_per_partition(mem) - f * eb) / eb;
        let base = p.magnitude(slots) * eb;
        m.buffer_data(name, mem, start as u32, base, &shape, dtype)
    } else {
        let mut shape = Vec::new();
        let mut total = 1u64;
        for _ in 0..p.range(1, 3) {
            let d = 1 + p.magnitude(1 << 16);
            shape.push(d);
            total *= d;
        }
        let base = p.magnitude(u64::MAX - total * eb);
        m.buffer_data(name, mem, 0, base, &shape, dtype)
    }
}

/// The lowest and highest flat element `dims` reach from the start element.
pub fn extent(dims: &[(i64, u64)]) -> (i128, i128) {
    let mut lo = 0i128;
    let mut hi = 0i128;
    for &(step, num) in dims {
        let reach = i128::from(step) * i128::from(num - 1);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    (lo, hi)
}

/// A valid access pattern before its offset is fixed: for on-chip buffers
/// the partition pair, then free dims whose walk fits one partition; for HBM
/// (where `partitions == 1` and `f` is the whole buffer) free dims that fit
/// the buffer. Valid offsets are `sp * f + e` for a start partition `sp` in
/// `0..=partitions - n0` and an element `e` in `e_min..=e_max`.
#[derive(Clone, Debug)]
pub struct ApPlan {
    /// `(s0, n0)` for on-chip buffers.
    pub part: Option<(i64, u64)>,
    /// Free dims, outermost first.
    pub free: Vec<(i64, u64)>,
    /// Elements of one partition (HBM: of the whole buffer).
    pub f: u64,
    /// Partitions of the buffer (HBM: 1).
    pub partitions: u64,
}

impl ApPlan {
    /// Partitions walked.
    pub fn n0(&self) -> u64 {
        self.part.map_or(1, |p| p.1)
    }

    /// Lowest valid start element inside a partition.
    pub fn e_min(&self) -> i128 {
        -extent(&self.free).0
    }

    /// Highest valid start element inside a partition.
    pub fn e_max(&self) -> i128 {
        i128::from(self.f) - 1 - extent(&self.free).1
    }

    /// Highest valid start partition (relative to the buffer).
    pub fn sp_max(&self) -> u64 {
        self.partitions - self.n0()
    }

    /// The offset starting at partition `sp`, element `e`.
    pub fn offset(&self, sp: u64, e: i128) -> i64 {
        i64::try_from(i128::from(sp) * i128::from(self.f) + e).expect("offset fits i64")
    }

    /// All dims, partition pair first.
    pub fn dims(&self) -> Vec<(i64, u64)> {
        self.part
            .into_iter()
            .chain(self.free.iter().copied())
            .collect()
    }

    /// The access pattern with `offset`.
    pub fn ap(&self, offset: i64) -> AccessPattern {
        AccessPattern::new(&self.dims(), offset)
    }

    /// The access pattern at a random valid offset.
    pub fn random_ap(&self, p: &mut Picker) -> AccessPattern {
        let sp = p.range(0, self.sp_max());
        let e = p.range_i128(self.e_min(), self.e_max());
        self.ap(self.offset(sp, e))
    }
}

/// Free dims whose walk spans at most `budget` elements and whose element
/// count times `visits` stays within `max_visits`. Steps may be zero or
/// negative; a dim of one index gets any step, extremes included.
pub fn free_dims(
    p: &mut Picker,
    rank: u64,
    mut budget: u64,
    visits: &mut u64,
    max_visits: u64,
) -> Vec<(i64, u64)> {
    let mut dims = Vec::new();
    for _ in 0..rank {
        let num = 1 + p.magnitude((max_visits / *visits).clamp(1, 8) - 1);
        *visits *= num;
        if num == 1 {
            dims.push((p.any_i64(), 1));
            continue;
        }
        let mag = p.magnitude(budget / (num - 1));
        budget -= mag * (num - 1);
        let step = if p.chance(30) {
            -(mag as i64)
        } else {
            mag as i64
        };
        dims.push((step, num));
    }
    dims
}

/// A plan for a valid access pattern over `b` visiting at most `max_visits`
/// elements.
pub fn plan_ap(p: &mut Picker, b: &BufferData, max_visits: u64) -> ApPlan {
    let f = b.free_elements().expect("buffer size fits u64");
    if b.mem.is_on_chip() {
        let partitions = b.partitions();
        let n0 = 1 + p.magnitude(partitions.min(16) - 1);
        let s0 = if n0 > 1 {
            f as i64
        } else {
            match p.next() % 4 {
                0 => 0,
                1 => f as i64,
                2 => i64::MAX,
                _ => p.range(0, 1 << 20) as i64,
            }
        };
        let mut visits = n0;
        let rank = p.range(0, 4);
        let free = free_dims(p, rank, f - 1, &mut visits, max_visits);
        ApPlan {
            part: Some((s0, n0)),
            free,
            f,
            partitions,
        }
    } else {
        let mut visits = 1;
        let rank = p.range(1, 5);
        let free = free_dims(p, rank, f - 1, &mut visits, max_visits);
        ApPlan {
            part: None,
            free,
            f,
            partitions: 1,
        }
    }
}

/// Every `(memory, partition, byte)` an access pattern over `b` visits,
/// computed straight from docs/ir.md: a linear counter over the product of the
/// nums, split into indices innermost-fastest, the flat element
/// `off + sum(i_k * s_k)`, then partition `b.partition + flat / F` and byte
/// `b.base + (flat % F) * elem_bytes` on chip, `b.base + flat * elem_bytes`
/// in HBM.
pub fn expected_addresses(b: &BufferData, ap: &AccessPattern) -> Vec<(Memory, u32, u64)> {
    let f = i128::from(b.free_elements().unwrap());
    let eb = i128::from(b.dtype.bytes());
    let count: u64 = ap.dims.iter().map(|d| d.num).product();
    let mut out = Vec::with_capacity(count as usize);
    for counter in 0..count {
        let mut rest = counter;
        let mut flat = i128::from(ap.offset);
        for d in ap.dims.iter().rev() {
            let i = rest % d.num;
            rest /= d.num;
            flat += i128::from(i) * i128::from(d.step);
        }
        assert!(flat >= 0, "valid patterns visit no negative element");
        if b.mem.is_on_chip() {
            let partition = i128::from(b.partition) + flat / f;
            let byte = i128::from(b.base) + (flat % f) * eb;
            out.push((
                b.mem,
                u32::try_from(partition).unwrap(),
                u64::try_from(byte).unwrap(),
            ));
        } else {
            let byte = i128::from(b.base) + flat * eb;
            out.push((b.mem, 0, u64::try_from(byte).unwrap()));
        }
    }
    out
}

/// Names and tracks the buffers of a generated module, and names its
/// kernels (buffer names and kernel names are unique).
#[derive(Default)]
struct BufferPool {
    buffers: Vec<Buffer>,
    named: usize,
    kernels: std::collections::HashSet<String>,
}

impl BufferPool {
    fn next_name(&mut self) -> String {
        self.named += 1;
        format!("b{}", self.named)
    }

    /// A kernel name starting with `k`, not given before.
    fn kernel_name(&mut self, p: &mut Picker) -> String {
        let base = p.ident("k");
        let mut name = base.clone();
        let mut n = 0;
        while self.kernels.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.kernels.insert(name.clone());
        name
    }

    /// Declares a fresh valid buffer (sometimes with extra attributes).
    fn fresh(&mut self, p: &mut Picker, m: &mut Module, mem: Memory, dtype: Dtype) -> Buffer {
        let name = self.next_name();
        let mut bd = valid_buffer_data(p, m, &name, mem, dtype);
        if p.chance(20) {
            bd.attrs = p.extra_attrs(m, 2);
        }
        let b = m.add_buffer(bd);
        self.buffers.push(b);
        b
    }
}

/// A module that passes the verifier, built through the library API: buffers
/// fitting their memory (some unused, some with extra attributes), ISA ops
/// available on the arch with every role of their table row, `isa.custom`
/// ops, and kernels whose HBM accesses share one element count. Interpreted
/// attributes get allowed values; other attributes anything.
pub fn valid_module(p: &mut Picker) -> Module {
    valid_module_with(p, 8)
}

/// [`valid_module`] with up to `max_items` buffers and ops at the top level.
pub fn valid_module_with(p: &mut Picker, max_items: u64) -> Module {
    let arch = p.choose(&Arch::ALL);
    let mut m = Module::new(arch);
    if p.chance(50) {
        let name = p.ident("m");
        m.name = Some(m.sym(&name));
    }
    m.attrs = p.extra_attrs(&mut m, 2);
    let mut pool = BufferPool::default();
    let ops: Vec<IsaOp> = IsaOp::all()
        .filter(|op| op.info().encoder(arch).is_some())
        .collect();
    for _ in 0..p.range(0, max_items) {
        match p.next() % 5 {
            0 => {
                let mem = p.choose(&[Memory::Sbuf, Memory::Psum, Memory::Hbm]);
                let dtype = pick_dtype(p, false);
                pool.fresh(p, &mut m, mem, dtype);
            }
            1 | 2 => valid_isa_op(p, &mut m, &mut pool, &ops),
            3 => valid_custom_op(p, &mut m, &mut pool),
            _ => valid_kernel(p, &mut m, &mut pool),
        }
    }
    m
}

/// An ISA op with every role of its row, each on a buffer its role allows
/// (reused from the pool or fresh), and allowed values for the attributes it
/// interprets.
fn valid_isa_op(p: &mut Picker, m: &mut Module, pool: &mut BufferPool, ops: &[IsaOp]) {
    let isa = p.choose(ops);
    let info = isa.info();
    let mut operands = Vec::new();
    for role in info.roles {
        let candidates: Vec<Buffer> = pool
            .buffers
            .iter()
            .copied()
            .filter(|&b| {
                role.mems.contains(m.buffers[b].mem) && role.dtype.allows(m.buffers[b].dtype)
            })
            .collect();
        let b = if !candidates.is_empty() && p.chance(50) {
            p.choose(&candidates)
        } else {
            let mems: Vec<Memory> = role.mems.iter().collect();
            let mem = p.choose(&mems);
            let dtype = pick_dtype(p, role.dtype == DtypeRule::Integer);
            pool.fresh(p, m, mem, dtype)
        };
        let ap = plan_ap(p, &m.buffers[b], 256).random_ap(p);
        operands.push(m.operand(role.name, b, ap));
    }
    // Operand order is free.
    if p.chance(20) {
        operands.reverse();
    }
    let mut data = Module::op_data(OpKind::Isa(isa), operands);
    for a in info.attrs {
        if p.chance(50) {
            let v = valid_attr(p, m, a.kind);
            data.attrs.insert(m.sym(a.name), v);
        }
    }
    data.attrs.extend(p.extra_attrs(m, 2));
    m.add_op(data);
}

/// An `isa.custom` op with a `name` and a few on-chip operands, each with a
/// struct-type key (mostly one the selector knows).
fn valid_custom_op(p: &mut Picker, m: &mut Module, pool: &mut BufferPool) {
    let mut operands = Vec::new();
    for i in 0..p.range(0, 3) {
        let mem = p.choose(&[Memory::Sbuf, Memory::Psum]);
        let dtype = pick_dtype(p, false);
        let b = pool.fresh(p, m, mem, dtype);
        let ap = plan_ap(p, &m.buffers[b], 256).random_ap(p);
        let role = p.ident(&format!("r{i}_"));
        let mut o = m.operand(&role, b, ap);
        let key = if p.chance(70) {
            p.choose(&CUSTOM_STRUCT_KEYS).to_string()
        } else {
            p.text()
        };
        o.struct_name = Some(m.sym(&key));
        operands.push(o);
    }
    let mut data = Module::op_data(OpKind::Custom, operands);
    let name = p.text();
    let name = Attr::Str(m.sym(&name));
    data.attrs.insert(m.sym("name"), name);
    data.attrs.extend(p.extra_attrs(m, 1));
    m.add_op(data);
}

/// An allowed value of an interpreted attribute.
pub fn valid_attr(p: &mut Picker, m: &mut Module, kind: AttrKind) -> Attr {
    match kind {
        AttrKind::Enum(values) => {
            let v = p.choose(values);
            Attr::Str(m.sym(v))
        }
        AttrKind::Int { min, max } => Attr::Int(p.range_i128(i128::from(min), i128::from(max))),
        AttrKind::Bool => Attr::Bool(p.chance(50)),
    }
}

/// A `gpsimd.kernel` whose reads and writes address fresh HBM buffers sized
/// to them and all visit the same number of elements.
fn valid_kernel(p: &mut Picker, m: &mut Module, pool: &mut BufferPool) {
    let block = m.new_block();
    let mut count: Option<u64> = None;
    for _ in 0..p.range(0, 3) {
        // The first access fixes the element count; later ones split it into
        // random factors.
        let mut nums = Vec::new();
        match count {
            None => {
                for _ in 0..p.range(1, 3) {
                    nums.push(1 + p.magnitude(7));
                }
                count = Some(nums.iter().product());
            }
            Some(mut rest) => {
                for _ in 0..p.range(0, 2) {
                    let divisors: Vec<u64> =
                        (1..=rest).filter(|&d| rest.is_multiple_of(d)).collect();
                    let d = p.choose(&divisors);
                    nums.push(d);
                    rest /= d;
                }
                nums.push(rest);
            }
        }
        let dims: Vec<(i64, u64)> = nums
            .iter()
            .map(|&n| (p.range(0, 6) as i64 - 2, n))
            .collect();
        let (lo, hi) = extent(&dims);
        let slack = p.magnitude(16);
        let total = (hi - lo) as u64 + 1 + slack;
        let shape: Vec<u64> = if total.is_multiple_of(2) && p.chance(50) {
            vec![2, total / 2]
        } else {
            vec![total]
        };
        let dtype = pick_dtype(p, false);
        let base = p.magnitude(u64::MAX - total * u64::from(dtype.bytes()));
        let name = pool.next_name();
        let bd = m.buffer_data(&name, Memory::Hbm, 0, base, &shape, dtype);
        let b = m.add_buffer(bd);
        let offset = -lo + i128::from(p.range(0, slack));
        let ap = AccessPattern::new(&dims, offset as i64);
        let write = p.chance(50);
        let o = m.operand(if write { "dst" } else { "src" }, b, ap);
        let mut data = Module::op_data(if write { OpKind::Write } else { OpKind::Read }, [o]);
        for a in ACCESS_ATTRS {
            if p.chance(40) {
                let v = valid_attr(p, m, a.kind);
                data.attrs.insert(m.sym(a.name), v);
            }
        }
        m.add_op_to_block(block, data);
    }
    let name = pool.kernel_name(p);
    let mut data = Module::op_data(
        OpKind::Kernel {
            name: m.sym(&name),
            body: block,
        },
        [],
    );
    for a in KERNEL_ATTRS {
        if p.chance(50) {
            let v = valid_attr(p, m, a.kind);
            data.attrs.insert(m.sym(a.name), v);
        }
    }
    data.attrs.extend(p.extra_attrs(m, 1));
    m.add_op(data);
}

/// An attribute with its strings resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlainAttr {
    /// Integer.
    Int(i128),
    /// String.
    Str(String),
    /// Boolean.
    Bool(bool),
    /// Array.
    Array(Vec<PlainAttr>),
}

/// A buffer declaration without span or symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainBuffer {
    pub name: String,
    pub mem: Memory,
    pub partition: u32,
    pub base: u64,
    pub shape: Vec<u64>,
    pub dtype: Dtype,
    pub attrs: Vec<(String, PlainAttr)>,
}

/// An operand without span or symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainOperand {
    pub role: String,
    pub buffer: String,
    pub dims: Vec<(i64, u64)>,
    pub offset: i64,
    pub struct_name: Option<String>,
}

/// An op without span or symbols; kernels carry their body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainOp {
    pub name: &'static str,
    pub kernel: Option<String>,
    pub operands: Vec<PlainOperand>,
    pub attrs: Vec<(String, PlainAttr)>,
    pub body: Vec<PlainOp>,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlainItem {
    Buffer(PlainBuffer),
    Op(PlainOp),
}

/// A module as plain data, comparable across modules (which intern the same
/// names as different symbols) and independent of the printer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainModule {
    pub name: Option<String>,
    pub arch: Arch,
    pub attrs: Vec<(String, PlainAttr)>,
    pub items: Vec<PlainItem>,
}

fn plain_attr(m: &Module, a: &Attr) -> PlainAttr {
    match a {
        Attr::Int(v) => PlainAttr::Int(*v),
        Attr::Str(s) => PlainAttr::Str(m.str(*s).to_string()),
        Attr::Bool(b) => PlainAttr::Bool(*b),
        Attr::Array(items) => PlainAttr::Array(items.iter().map(|a| plain_attr(m, a)).collect()),
    }
}

fn plain_attrs(m: &Module, attrs: &Attrs) -> Vec<(String, PlainAttr)> {
    attrs
        .iter()
        .map(|(k, v)| (m.str(*k).to_string(), plain_attr(m, v)))
        .collect()
}

fn plain_op(m: &Module, op: Op) -> PlainOp {
    let data = &m.ops[op];
    let (kernel, body) = match data.kind {
        OpKind::Kernel { name, body } => (
            Some(m.str(name).to_string()),
            m.blocks[body].ops.iter().map(|&o| plain_op(m, o)).collect(),
        ),
        _ => (None, Vec::new()),
    };
    PlainOp {
        name: data.kind.name(),
        kernel,
        operands: data
            .operands
            .iter()
            .map(|o| PlainOperand {
                role: m.str(o.role).to_string(),
                buffer: m.str(m.buffers[o.buffer].name).to_string(),
                dims: o.ap.dims.iter().map(|d| (d.step, d.num)).collect(),
                offset: o.ap.offset,
                struct_name: o.struct_name.map(|s| m.str(s).to_string()),
            })
            .collect(),
        attrs: plain_attrs(m, &data.attrs),
        body,
    }
}

/// `m` as plain data.
pub fn plain(m: &Module) -> PlainModule {
    PlainModule {
        name: m.name.map(|s| m.str(s).to_string()),
        arch: m.arch,
        attrs: plain_attrs(m, &m.attrs),
        items: m
            .body
            .iter()
            .map(|item| match *item {
                Item::Buffer(b) => {
                    let d = &m.buffers[b];
                    PlainItem::Buffer(PlainBuffer {
                        name: m.str(d.name).to_string(),
                        mem: d.mem,
                        partition: d.partition,
                        base: d.base,
                        shape: d.shape.to_vec(),
                        dtype: d.dtype,
                        attrs: plain_attrs(m, &d.attrs),
                    })
                }
                Item::Op(op) => PlainItem::Op(plain_op(m, op)),
            })
            .collect(),
    }
}
