//! Byte-level replay of staging plans on kernels whose HBM buffers alias in
//! chains.
//!
//! What this proves: for random GpSimd kernels over 2-4 `mem.hbm` buffers
//! placed so that neighbours overlap partially or just touch (mixed dtypes,
//! forward, reversed, strided, transposed, scattered and broadcast access
//! patterns, 1-3 writes, random accessor hints, random `schedule-staging`
//! options), every plan that `lower-staging` (or `schedule-staging{...},
//! check-coherency`) accepts, executed on bytes, computes what the kernel
//! computes: each read access observes, at each iteration, the value the
//! direct execution of the kernel reads, and HBM ends up byte for byte as the
//! direct execution leaves it. The plan is executed in several legal orders
//! of its asynchronous SDMA copies (eager: at issue; lazy: as late as the
//! waits allow; and seeded random orders, copies landing between iterations
//! of a compute too), since a plan must be correct in every one of them. It
//! also proves that every kernel the test itself judges valid for planning
//! (no two writes touch a common byte, no staged hint on a tensor a write
//! hits twice, `stream` only on forward contiguous patterns) and that carries
//! no hint is planned by `lower-staging` (docs/staging.md: every valid
//! kernel is planned).
//!
//! Why it is independent of the planner: the only apir API used is
//! `Compilation::parse`, `run` and `ir` (and the rendered diagnostics). The
//! test parses the printed plan with its own small attribute parser, derives
//! tensors, staging groups, tile lengths and tile layouts from the kernel
//! text it generated and the written contract (docs/staging.md, the plan op table
//! of docs/grammar.md, the tile contract of the staging layout), and executes
//! copies, waits and computes with its own executor. Nothing from
//! `apir_passes::staging`, `apir_ir::staging` or `KernelPlan` is used.
//!
//! Failure messages carry the kernel text, the pipeline, the order that
//! failed, the first mismatching access/iteration or HBM byte, the test's
//! view of the staging groups, notes where a copy disagrees with the layout
//! contract, and an excerpt of the printed plan. When a plan does not follow
//! the contract, the message also says which grouping of its accesses (and
//! which bytes-per-iteration rule) its copies do follow, and whether the
//! plan, read that way, still computes the kernel: a contract mismatch and
//! a data bug read differently. Set `APIR_REPLAY_STATS=1`
//! to print how many plans were replayed and rejected.

use apir_compiler::Compilation;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

/// The dtype table (ir/src/target/dtype.rs): name and bytes per element.
const DTYPES: [(&str, u64); 11] = [
    ("f32", 4),
    ("i32", 4),
    ("u32", 4),
    ("bf16", 2),
    ("f16", 2),
    ("i16", 2),
    ("u16", 2),
    ("u8", 1),
    ("i8", 1),
    ("f8e4m3", 1),
    ("f8e5m2", 1),
];

const DRAM_BASE: u64 = 0x80000;
const DRAM_END: u64 = 0x90000;
const DEFAULT_PIPELINE: &str = "lower-staging";

#[derive(Clone, Debug)]
struct Buf {
    addr: u64,
    elems: u64,
    dtype: &'static str,
    eb: u64,
}

impl Buf {
    fn start(&self) -> u128 {
        u128::from(self.addr)
    }
    fn end(&self) -> u128 {
        u128::from(self.addr) + u128::from(self.elems) * u128::from(self.eb)
    }
}

#[derive(Clone, Debug)]
struct Access {
    buf: usize,
    write: bool,
    /// `(step, num)`, outermost first.
    dims: Vec<(i64, u64)>,
    offset: i64,
    hint: Option<&'static str>,
}

#[derive(Clone, Debug)]
struct Kernel {
    /// Buffers in declaration order; buffer `i` is `%t{i}`.
    bufs: Vec<Buf>,
    accesses: Vec<Access>,
}

/// The flat elements an AP visits, in order (innermost dim fastest).
fn ap_elements(dims: &[(i64, u64)], offset: i64) -> Vec<i64> {
    let mut out = vec![offset];
    for &(s, n) in dims {
        let mut next = Vec::with_capacity(out.len() * n as usize);
        for &b in &out {
            for i in 0..n as i64 {
                next.push(b + i * s);
            }
        }
        out = next;
    }
    out
}

fn ap_text(dims: &[(i64, u64)], offset: i64) -> String {
    let pairs: Vec<String> = dims.iter().map(|(s, n)| format!("[{s}, {n}]")).collect();
    let mut t = format!("[{}]", pairs.join(", "));
    if offset > 0 {
        write!(t, " + {offset}").unwrap();
    } else if offset < 0 {
        write!(t, " - {}", -offset).unwrap();
    }
    t
}

impl Kernel {
    fn access_text(&self, i: usize) -> String {
        let a = &self.accesses[i];
        let op = if a.write {
            "gpsimd.write"
        } else {
            "gpsimd.read"
        };
        let mut t = format!("{op} %t{}{}", a.buf, ap_text(&a.dims, a.offset));
        if let Some(h) = a.hint {
            write!(t, " {{accessor = \"{h}\"}}").unwrap();
        }
        t
    }

    fn text(&self) -> String {
        let mut t = String::from("module @replay attributes {arch = \"v2\"} {\n");
        for (i, b) in self.bufs.iter().enumerate() {
            writeln!(
                t,
                "  %t{i} = mem.hbm {{addr = {:#x}}} : tensor<{}x{}>",
                b.addr, b.elems, b.dtype
            )
            .unwrap();
        }
        t.push_str("  gpsimd.kernel @k {core = 0, cycles_per_element = 2} {\n");
        for i in 0..self.accesses.len() {
            writeln!(t, "    {}", self.access_text(i)).unwrap();
        }
        t.push_str("  }\n}\n");
        t
    }

    fn all_auto(&self) -> bool {
        self.accesses.iter().all(|a| a.hint.is_none())
    }
}

/// What the test derives from a kernel by itself.
struct Facts {
    /// Iterations.
    e: usize,
    /// Per access, the HBM byte address of element `e`.
    addrs: Vec<Vec<u64>>,
    /// Per access, bytes per element.
    eb: Vec<u64>,
    /// Per buffer, its tensor (connected component of overlap among the
    /// accessed buffers); `usize::MAX` for a buffer no access uses.
    tensor: Vec<usize>,
}

impl Facts {
    fn new(k: &Kernel) -> Result<Facts, String> {
        let mut addrs = Vec::new();
        let mut eb = Vec::new();
        for (i, a) in k.accesses.iter().enumerate() {
            let b = &k.bufs[a.buf];
            let mut v = Vec::new();
            for el in ap_elements(&a.dims, a.offset) {
                if el < 0 || el as u64 >= b.elems {
                    return Err(format!(
                        "generator bug: access {i} visits element {el} outside %t{}",
                        a.buf
                    ));
                }
                v.push(b.addr + el as u64 * b.eb);
            }
            addrs.push(v);
            eb.push(b.eb);
        }
        let e = addrs.first().map_or(0, Vec::len);
        if addrs.iter().any(|v| v.len() != e) {
            return Err("generator bug: element counts differ".into());
        }
        // Tensors: union-find over the accessed buffers.
        let n = k.bufs.len();
        let accessed: Vec<bool> = (0..n)
            .map(|b| k.accesses.iter().any(|a| a.buf == b))
            .collect();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], x: usize) -> usize {
            let mut r = x;
            while p[r] != r {
                r = p[r];
            }
            p[x] = r;
            r
        }
        for i in 0..n {
            for j in i + 1..n {
                let (a, b) = (&k.bufs[i], &k.bufs[j]);
                if accessed[i] && accessed[j] && a.start() < b.end() && b.start() < a.end() {
                    let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                    parent[ri] = rj;
                }
            }
        }
        let tensor = (0..n)
            .map(|b| {
                if accessed[b] {
                    find(&mut parent, b)
                } else {
                    usize::MAX
                }
            })
            .collect();
        Ok(Facts {
            e,
            addrs,
            eb,
            tensor,
        })
    }

    fn tensor_of(&self, k: &Kernel, access: usize) -> usize {
        self.tensor[k.accesses[access].buf]
    }

    /// Whether access `i` writes some byte twice.
    fn writes_a_byte_twice(&self, i: usize) -> bool {
        let mut seen = HashSet::new();
        self.addrs[i]
            .iter()
            .any(|&a| (0..self.eb[i]).any(|b| !seen.insert(a + b)))
    }

    /// Whether access `i` visits storage contiguously in increasing order.
    fn forward_contiguous(&self, i: usize) -> bool {
        self.addrs[i].windows(2).all(|w| w[1] == w[0] + self.eb[i])
    }
}

/// The test's own verdict: `Err(reason)` if the kernel is not valid for
/// planning.
fn planning_validity(k: &Kernel, f: &Facts) -> Result<(), String> {
    let mut writer: HashMap<u64, usize> = HashMap::new();
    for (i, a) in k.accesses.iter().enumerate() {
        if !a.write {
            continue;
        }
        for &addr in &f.addrs[i] {
            for b in 0..f.eb[i] {
                if let Some(&j) = writer.get(&(addr + b)) {
                    if j != i {
                        return Err(format!(
                            "writes {j} and {i} both touch byte {:#x}",
                            addr + b
                        ));
                    }
                }
                writer.insert(addr + b, i);
            }
        }
    }
    for (i, a) in k.accesses.iter().enumerate() {
        if a.write && f.writes_a_byte_twice(i) {
            let t = f.tensor_of(k, i);
            for (j, b) in k.accesses.iter().enumerate() {
                if f.tensor_of(k, j) == t && matches!(b.hint, Some("stream" | "tcm")) {
                    return Err(format!(
                        "access {j} is hinted {:?} on a tensor write {i} writes a byte of twice",
                        b.hint.unwrap()
                    ));
                }
            }
        }
        if a.hint == Some("stream") && !f.forward_contiguous(i) {
            return Err(format!(
                "access {i} is hinted stream but is not forward contiguous"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Bytes and values
// ---------------------------------------------------------------------------

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn mask(eb: u64) -> u64 {
    if eb >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * eb)) - 1
    }
}

/// What write `w` writes at iteration `e` after the iteration read `reads`.
fn computed(e: usize, w: usize, reads: &[u64], eb: u64) -> u64 {
    let mut h = mix(0x5eed_0000 ^ ((e as u64) << 8) ^ w as u64);
    for &v in reads {
        h = mix(h ^ v);
    }
    h & mask(eb)
}

/// HBM as a sparse map over pseudo-random initial bytes.
#[derive(Clone, Default)]
struct Hbm {
    map: HashMap<u64, u8>,
}

impl Hbm {
    fn initial(addr: u64) -> u8 {
        (mix(addr ^ 0x0123_4567_89ab_cdef) >> 17) as u8
    }
    fn get(&self, addr: u64) -> u8 {
        self.map
            .get(&addr)
            .copied()
            .unwrap_or_else(|| Hbm::initial(addr))
    }
    fn set(&mut self, addr: u64, v: u8) {
        self.map.insert(addr, v);
    }
    fn load(&self, addr: u64, eb: u64) -> u64 {
        (0..eb).fold(0u64, |v, b| v | u64::from(self.get(addr + b)) << (8 * b))
    }
    fn store(&mut self, addr: u64, eb: u64, v: u64) {
        for b in 0..eb {
            self.set(addr + b, (v >> (8 * b)) as u8);
        }
    }
}

/// The kernel executed directly: what each read observed, and final HBM.
struct Direct {
    reads: Vec<Vec<u64>>,
    hbm: Hbm,
}

fn execute_direct(k: &Kernel, f: &Facts) -> Direct {
    let mut hbm = Hbm::default();
    let mut reads: Vec<Vec<u64>> = vec![Vec::new(); k.accesses.len()];
    let mut vals = Vec::new();
    for e in 0..f.e {
        vals.clear();
        for (i, a) in k.accesses.iter().enumerate() {
            if !a.write {
                let v = hbm.load(f.addrs[i][e], f.eb[i]);
                reads[i].push(v);
                vals.push(v);
            }
        }
        for (i, a) in k.accesses.iter().enumerate() {
            if a.write {
                hbm.store(f.addrs[i][e], f.eb[i], computed(e, i, &vals, f.eb[i]));
            }
        }
    }
    Direct { reads, hbm }
}

// ---------------------------------------------------------------------------
// The printed plan, parsed by the test
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Int(i128),
    Str(String),
    Bool(bool),
    List(Vec<Val>),
}

struct AttrParser<'a> {
    s: &'a [u8],
    at: usize,
}

impl AttrParser<'_> {
    fn ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{}` at column {}", c as char, self.at))
        }
    }
    fn ident(&mut self) -> Result<String, String> {
        self.ws();
        let start = self.at;
        while self.at < self.s.len() {
            let c = self.s[self.at];
            let ok = c.is_ascii_alphabetic()
                || c == b'_'
                || (self.at > start && (c.is_ascii_digit() || matches!(c, b'.' | b'$' | b'-')));
            if !ok {
                break;
            }
            self.at += 1;
        }
        if self.at == start {
            return Err(format!("expected an attribute name at column {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }
    fn value(&mut self) -> Result<Val, String> {
        self.ws();
        match self.s.get(self.at) {
            Some(b'"') => {
                self.at += 1;
                let mut out = String::new();
                loop {
                    match self.s.get(self.at) {
                        None => return Err("unterminated string".into()),
                        Some(b'"') => {
                            self.at += 1;
                            return Ok(Val::Str(out));
                        }
                        Some(b'\\') => {
                            let c = *self.s.get(self.at + 1).ok_or("bad escape")?;
                            out.push(match c {
                                b'n' => '\n',
                                b't' => '\t',
                                c => c as char,
                            });
                            self.at += 2;
                        }
                        Some(&c) => {
                            out.push(c as char);
                            self.at += 1;
                        }
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Val::List(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat(b']') {
                        return Ok(Val::List(items));
                    }
                    self.expect(b',')?;
                }
            }
            Some(b't') if self.s[self.at..].starts_with(b"true") => {
                self.at += 4;
                Ok(Val::Bool(true))
            }
            Some(b'f') if self.s[self.at..].starts_with(b"false") => {
                self.at += 5;
                Ok(Val::Bool(false))
            }
            _ => {
                let neg = self.s.get(self.at) == Some(&b'-');
                if neg {
                    self.at += 1;
                }
                let (radix, start) = if self.s[self.at..].starts_with(b"0x") {
                    (16, self.at + 2)
                } else {
                    (10, self.at)
                };
                let mut end = start;
                while end < self.s.len() && (self.s[end] as char).is_digit(radix) {
                    end += 1;
                }
                if end == start {
                    return Err(format!("expected a value at column {}", self.at));
                }
                let digits = std::str::from_utf8(&self.s[start..end]).unwrap();
                let v = i128::from_str_radix(digits, radix)
                    .map_err(|e| format!("bad integer `{digits}`: {e}"))?;
                self.at = end;
                Ok(Val::Int(if neg { -v } else { v }))
            }
        }
    }
    fn dict(&mut self) -> Result<Vec<(String, Val)>, String> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        if self.eat(b'}') {
            return Ok(out);
        }
        loop {
            let k = self.ident()?;
            self.expect(b'=')?;
            out.push((k, self.value()?));
            if self.eat(b'}') {
                break;
            }
            self.expect(b',')?;
        }
        self.ws();
        if self.at != self.s.len() {
            return Err(format!("trailing text at column {}", self.at));
        }
        Ok(out)
    }
}

struct Attrs {
    line: String,
    attrs: Vec<(String, Val)>,
}

impl Attrs {
    fn get(&self, key: &str) -> Result<&Val, String> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("`{}`: no attribute `{key}`", self.line))
    }
    fn int(&self, key: &str) -> Result<i128, String> {
        match self.get(key)? {
            Val::Int(v) => Ok(*v),
            v => Err(format!("`{}`: `{key}` is {v:?}, not an integer", self.line)),
        }
    }
    fn u64(&self, key: &str) -> Result<u64, String> {
        u64::try_from(self.int(key)?).map_err(|_| format!("`{}`: `{key}` is not a u64", self.line))
    }
    fn str(&self, key: &str) -> Result<&str, String> {
        match self.get(key)? {
            Val::Str(s) => Ok(s),
            v => Err(format!("`{}`: `{key}` is {v:?}, not a string", self.line)),
        }
    }
}

#[derive(Clone, Debug)]
struct PlanBuf {
    owner: usize,
    dram: u64,
    bytes: u64,
}

#[derive(Clone, Debug)]
struct Copy {
    id: u64,
    sdma: bool,
    m2s: bool,
    access: usize,
    tile: u64,
    slot: usize,
    hbm: u64,
    dram: u64,
    bytes: u64,
    line: String,
}

#[derive(Clone, Debug)]
enum Step {
    Copy(usize),
    Wait(u64),
    Compute(u64, u64),
}

struct Plan {
    accessors: Vec<String>,
    bufs: Vec<PlanBuf>,
    copies: Vec<Copy>,
    steps: Vec<Step>,
    /// The plan's lines, for messages.
    lines: Vec<String>,
}

const PLAN_OPS: [&str; 6] = [
    "gpsimd.plan",
    "gpsimd.buffer",
    "sdma.copy",
    "gpsimd.memcpy",
    "sdma.wait",
    "gpsimd.compute",
];

fn parse_plan(ir: &str) -> Result<Plan, String> {
    let mut plan = Plan {
        accessors: Vec::new(),
        bufs: Vec::new(),
        copies: Vec::new(),
        steps: Vec::new(),
        lines: Vec::new(),
    };
    let mut headers = 0;
    for raw in ir.lines() {
        let line = raw.trim();
        let Some(op) = PLAN_OPS.iter().find(|op| {
            line.strip_prefix(**op)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        }) else {
            continue;
        };
        plan.lines.push(line.to_string());
        let mut p = AttrParser {
            s: &line.as_bytes()[op.len()..],
            at: 0,
        };
        let a = Attrs {
            line: line.to_string(),
            attrs: p.dict().map_err(|e| format!("`{line}`: {e}"))?,
        };
        match *op {
            "gpsimd.plan" => {
                headers += 1;
                let Val::List(items) = a.get("accessors")? else {
                    return Err(format!("`{line}`: accessors is not a list"));
                };
                for it in items {
                    match it {
                        Val::Str(s) if matches!(s.as_str(), "stream" | "tcm" | "index") => {
                            plan.accessors.push(s.clone())
                        }
                        v => return Err(format!("`{line}`: accessor {v:?}")),
                    }
                }
            }
            "gpsimd.buffer" => {
                if a.u64("slot")? != plan.bufs.len() as u64 {
                    return Err(format!("`{line}`: slots are not numbered in order"));
                }
                plan.bufs.push(PlanBuf {
                    owner: a.u64("access")? as usize,
                    dram: a.u64("dram")?,
                    bytes: a.u64("bytes")?,
                });
            }
            "sdma.copy" | "gpsimd.memcpy" => {
                let dir = a.str("dir")?;
                if dir != "m2s" && dir != "s2m" {
                    return Err(format!("`{line}`: dir {dir:?}"));
                }
                let sdma = *op == "sdma.copy";
                if sdma {
                    a.u64("queue")?;
                } else {
                    a.str("method")?;
                }
                plan.copies.push(Copy {
                    id: a.u64("id")?,
                    sdma,
                    m2s: dir == "m2s",
                    access: a.u64("access")? as usize,
                    tile: a.u64("tile")?,
                    slot: a.u64("slot")? as usize,
                    hbm: a.u64("hbm")?,
                    dram: a.u64("dram")?,
                    bytes: a.u64("bytes")?,
                    line: line.to_string(),
                });
                plan.steps.push(Step::Copy(plan.copies.len() - 1));
            }
            "sdma.wait" => plan.steps.push(Step::Wait(a.u64("copy")?)),
            "gpsimd.compute" => plan
                .steps
                .push(Step::Compute(a.u64("first")?, a.u64("count")?)),
            _ => unreachable!(),
        }
    }
    if headers != 1 {
        return Err(format!("expected one gpsimd.plan, found {headers}"));
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------
// Staging groups and tile layouts, from the contract
// ---------------------------------------------------------------------------

/// A tile's layout: sorted merged HBM runs `[start, end)` and where each run
/// begins in the buffer.
#[derive(Clone, Debug, Default)]
struct Layout {
    runs: Vec<(u128, u128)>,
    offsets: Vec<u64>,
}

impl Layout {
    fn new(mut ranges: Vec<(u128, u128)>) -> Layout {
        ranges.sort_unstable();
        let mut runs: Vec<(u128, u128)> = Vec::new();
        for (s, e) in ranges {
            match runs.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => runs.push((s, e)),
            }
        }
        let mut offsets = Vec::with_capacity(runs.len());
        let mut at = 0u64;
        for r in &runs {
            offsets.push(at);
            at += (r.1 - r.0) as u64;
        }
        Layout { runs, offsets }
    }

    fn len(&self) -> u64 {
        self.runs.iter().map(|r| (r.1 - r.0) as u64).sum()
    }

    /// The offset from the buffer's start of HBM bytes `[h, h + n)`, if they
    /// lie in one run.
    fn locate(&self, h: u64, n: u64) -> Option<u64> {
        let h = u128::from(h);
        let i = self.runs.partition_point(|r| r.1 <= h);
        let r = self.runs.get(i)?;
        (r.0 <= h && h + u128::from(n) <= r.1).then(|| self.offsets[i] + (h - r.0) as u64)
    }
}

#[derive(Debug)]
struct Group {
    /// Accesses in body order; the first owns the group.
    members: Vec<usize>,
    /// Indices into `Plan::bufs`, in slot order.
    slots: Vec<usize>,
    bytes_per_iteration: u64,
    tile_len: u64,
    layouts: Vec<Layout>,
}

struct Setup {
    groups: Vec<Group>,
    /// Per access, its group (`None` for `index`).
    group_of: Vec<Option<usize>>,
}

impl Setup {
    fn describe(&self, plan: &Plan) -> String {
        let mut t = String::new();
        for g in &self.groups {
            let slots: Vec<String> = g
                .slots
                .iter()
                .map(|&s| format!("{s}@{:#x}+{}", plan.bufs[s].dram, plan.bufs[s].bytes))
                .collect();
            writeln!(
                t,
                "  group {:?}: slots [{}], {} bytes/iteration, tile length {}, {} tiles",
                g.members,
                slots.join(", "),
                g.bytes_per_iteration,
                g.tile_len,
                g.layouts.len()
            )
            .unwrap();
        }
        t
    }
}

/// Which accesses of a group count once in its bytes per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dedupe {
    /// The contract: accesses visiting the same byte addresses in the same
    /// order with the same element size.
    SameBytes,
    /// Only for diagnostics: accesses of the same buffer with the same
    /// dims and offset.
    SameAp,
}

/// The plan's accessors: one per access, explicit hints honoured.
fn check_accessors(k: &Kernel, plan: &Plan) -> Result<(), String> {
    let n = k.accesses.len();
    if plan.accessors.len() != n {
        return Err(format!(
            "the plan names {} accessors for {n} accesses",
            plan.accessors.len()
        ));
    }
    for (i, a) in k.accesses.iter().enumerate() {
        if let Some(h) = a.hint {
            if h != plan.accessors[i] {
                return Err(format!(
                    "access {i} (`{}`) asked for {h:?} but the plan gives it {:?}: an explicit choice is honoured or rejected",
                    k.access_text(i),
                    plan.accessors[i]
                ));
            }
        }
    }
    Ok(())
}

/// The staging groups the contract prescribes for the plan's accessors.
fn contract_groups(k: &Kernel, f: &Facts, plan: &Plan) -> Vec<Vec<usize>> {
    let n = k.accesses.len();
    let acc = |i: usize| plan.accessors[i].as_str();
    let mut member_lists: Vec<Vec<usize>> = Vec::new();
    let mut joined = vec![false; n];
    for i in 0..n {
        if joined[i] || acc(i) == "index" {
            continue;
        }
        let mut members = vec![i];
        if acc(i) == "tcm" {
            let t = f.tensor_of(k, i);
            let tcm_here: Vec<usize> = (0..n)
                .filter(|&j| acc(j) == "tcm" && f.tensor_of(k, j) == t)
                .collect();
            if tcm_here.iter().any(|&j| k.accesses[j].write) {
                members = tcm_here;
            }
        }
        for &j in &members {
            joined[j] = true;
        }
        member_lists.push(members);
    }
    member_lists
}

/// Groups, tile lengths and layouts per the contract.
fn setup(k: &Kernel, f: &Facts, plan: &Plan) -> Result<Setup, String> {
    check_accessors(k, plan)?;
    setup_with(k, f, plan, contract_groups(k, f, plan), Dedupe::SameBytes)
}

/// Tile lengths and layouts for the given groups (owner first in each).
fn setup_with(
    k: &Kernel,
    f: &Facts,
    plan: &Plan,
    member_lists: Vec<Vec<usize>>,
    dedupe: Dedupe,
) -> Result<Setup, String> {
    let n = k.accesses.len();
    let mut group_of = vec![None; n];
    let mut groups = Vec::new();
    for (g, members) in member_lists.into_iter().enumerate() {
        for &j in &members {
            group_of[j] = Some(g);
        }
        let owner = members[0];
        let slots: Vec<usize> = (0..plan.bufs.len())
            .filter(|&s| plan.bufs[s].owner == owner)
            .collect();
        if slots.is_empty() {
            return Err(format!(
                "the contract's staging group {members:?} (owner access {owner}) has no gpsimd.buffer"
            ));
        }
        let bytes = plan.bufs[slots[0]].bytes;
        if slots.iter().any(|&s| plan.bufs[s].bytes != bytes) {
            return Err(format!("the buffers of group {members:?} differ in size"));
        }
        // Accesses visiting the same bytes in the same order with the same
        // element size count once.
        let bytes_per_iteration: u64 = members
            .iter()
            .enumerate()
            .filter(|&(x, &j)| {
                !members[..x].iter().any(|&p| match dedupe {
                    Dedupe::SameBytes => f.eb[p] == f.eb[j] && f.addrs[p] == f.addrs[j],
                    Dedupe::SameAp => {
                        let (a, b) = (&k.accesses[p], &k.accesses[j]);
                        a.buf == b.buf && a.dims == b.dims && a.offset == b.offset
                    }
                })
            })
            .map(|(_, &j)| f.eb[j])
            .sum();
        let tile_len = bytes / bytes_per_iteration;
        if tile_len == 0 {
            return Err(format!(
                "group {members:?}: buffers of {bytes} bytes hold no iteration of {bytes_per_iteration} bytes"
            ));
        }
        let mut layouts = Vec::new();
        let mut e0 = 0usize;
        while e0 < f.e {
            let e1 = (e0 + tile_len as usize).min(f.e);
            let mut ranges = Vec::new();
            for &j in &members {
                for e in e0..e1 {
                    let a = u128::from(f.addrs[j][e]);
                    ranges.push((a, a + u128::from(f.eb[j])));
                }
            }
            let l = Layout::new(ranges);
            if l.len() > bytes {
                return Err(format!(
                    "group {members:?}: tile {} needs {} bytes, more than its {bytes}-byte buffer (test's layout)",
                    layouts.len(),
                    l.len()
                ));
            }
            layouts.push(l);
            e0 = e1;
        }
        groups.push(Group {
            members,
            slots,
            bytes_per_iteration,
            tile_len,
            layouts,
        });
    }
    for (s, b) in plan.bufs.iter().enumerate() {
        if !groups.iter().any(|g| g.members[0] == b.owner) {
            return Err(format!(
                "gpsimd.buffer slot {s} is owned by access {}, which by the contract owns no staging group (groups: {:?})",
                b.owner,
                groups.iter().map(|g| &g.members).collect::<Vec<_>>()
            ));
        }
    }
    Ok(Setup { groups, group_of })
}

/// Where copies disagree with the test's layouts (for failure messages).
fn copy_notes(plan: &Plan, s: &Setup) -> Vec<String> {
    let mut notes = Vec::new();
    for c in &plan.copies {
        let note = (|| {
            let g = s
                .groups
                .iter()
                .find(|g| g.members[0] == c.access)
                .ok_or("its access owns no group")?;
            let l = g.layouts.get(c.tile as usize).ok_or("no such tile")?;
            let want_slot = g.slots[c.tile as usize % g.slots.len()];
            if want_slot != c.slot {
                return Err(format!("tile {} should use slot {want_slot}", c.tile));
            }
            let off = l.locate(c.hbm, c.bytes).ok_or_else(|| {
                let runs: Vec<String> = l
                    .runs
                    .iter()
                    .take(6)
                    .map(|r| format!("[{:#x}, {:#x})", r.0, r.1))
                    .collect();
                format!(
                    "its HBM bytes are not one run of the tile's layout {}{}",
                    runs.join(" "),
                    if l.runs.len() > 6 { " ..." } else { "" }
                )
            })?;
            let want = plan.bufs[want_slot].dram + off;
            if want != c.dram {
                return Err(format!("the layout puts hbm {} at dram {want}", c.hbm));
            }
            Ok::<(), String>(())
        })();
        if let Err(e) = note {
            notes.push(format!("{}: {e}", c.line));
            if notes.len() == 3 {
                break;
            }
        }
    }
    notes
}

// ---------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Order {
    /// Every SDMA copy lands when it is issued.
    Eager,
    /// Every SDMA copy lands as late as legal.
    Lazy,
    /// Before each core step and between iterations, pending copies land
    /// with probability `permille`/1000 each.
    Random { seed: u64, permille: u64 },
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
    fn chance(&mut self, permille: u64) -> bool {
        self.next() % 1000 < permille
    }
}

struct Machine<'a> {
    k: &'a Kernel,
    f: &'a Facts,
    plan: &'a Plan,
    s: &'a Setup,
    direct: &'a Direct,
    hbm: Hbm,
    dram: Vec<u8>,
    /// Pending SDMA copies per ring (m2s, s2m), indices into `plan.copies`.
    rings: [VecDeque<usize>; 2],
    landed: Vec<bool>,
    issued: Vec<bool>,
    done: Vec<bool>,
    rng: Option<Rng>,
    permille: u64,
    vals: Vec<u64>,
}

impl Machine<'_> {
    fn dram_index(&self, dram: u64, n: u64, what: &str) -> Result<usize, String> {
        if dram < DRAM_BASE || dram.checked_add(n).is_none_or(|e| e > DRAM_END) {
            return Err(format!(
                "{what}: dataram bytes [{dram:#x}, +{n}) leave the window [0x80000, 0x90000)"
            ));
        }
        Ok((dram - DRAM_BASE) as usize)
    }

    fn land(&mut self, c: usize) -> Result<(), String> {
        let cp = &self.plan.copies[c];
        if u128::from(cp.hbm) + u128::from(cp.bytes) > 1u128 << 64 {
            return Err(format!(
                "{}: HBM range passes the end of the address space",
                cp.line
            ));
        }
        let d = self.dram_index(cp.dram, cp.bytes, &cp.line)?;
        for b in 0..cp.bytes {
            if cp.m2s {
                self.dram[d + b as usize] = self.hbm.get(cp.hbm + b);
            } else {
                self.hbm.set(cp.hbm + b, self.dram[d + b as usize]);
            }
        }
        self.landed[c] = true;
        Ok(())
    }

    fn land_head(&mut self, ring: usize) -> Result<(), String> {
        let c = self.rings[ring].pop_front().expect("a pending copy");
        self.land(c)
    }

    /// Random order: pending copies land, each with the order's probability.
    fn maybe_land(&mut self) -> Result<(), String> {
        let Some(rng) = self.rng.as_mut() else {
            return Ok(());
        };
        let mut picks = Vec::new();
        let mut pending = [self.rings[0].len(), self.rings[1].len()];
        while pending[0] + pending[1] > 0 && rng.chance(self.permille) {
            let r = if pending[0] == 0 {
                1
            } else if pending[1] == 0 {
                0
            } else {
                (rng.next() & 1) as usize
            };
            pending[r] -= 1;
            picks.push(r);
        }
        for r in picks {
            self.land_head(r)?;
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<(), String> {
        while !self.rings[0].is_empty() || !self.rings[1].is_empty() {
            let r = match self.rng.as_mut() {
                _ if self.rings[0].is_empty() => 1,
                _ if self.rings[1].is_empty() => 0,
                Some(rng) => (rng.next() & 1) as usize,
                None => 0,
            };
            self.land_head(r)?;
        }
        Ok(())
    }

    /// Where access `i` finds its element of iteration `e`: `Ok(None)` for
    /// HBM, else the dataram index.
    fn place(&self, i: usize, e: usize) -> Result<Option<(usize, String)>, String> {
        let Some(g) = self.s.group_of[i] else {
            return Ok(None);
        };
        let g = &self.s.groups[g];
        let tile = e / g.tile_len as usize;
        let slot = g.slots[tile % g.slots.len()];
        let addr = self.f.addrs[i][e];
        let off = g.layouts[tile]
            .locate(addr, self.f.eb[i])
            .expect("the layout holds what its accesses touch");
        let dram = self.plan.bufs[slot].dram + off;
        let what = format!("access {i} at iteration {e} (tile {tile}, slot {slot})");
        Ok(Some((self.dram_index(dram, self.f.eb[i], &what)?, what)))
    }

    fn iteration(&mut self, e: usize) -> Result<(), String> {
        if e >= self.f.e {
            return Err(format!("a compute runs iteration {e} of {}", self.f.e));
        }
        if std::mem::replace(&mut self.done[e], true) {
            return Err(format!("iteration {e} runs twice"));
        }
        self.vals.clear();
        let n = self.k.accesses.len();
        for i in (0..n).filter(|&i| !self.k.accesses[i].write) {
            let eb = self.f.eb[i];
            let (v, place) = match self.place(i, e)? {
                None => (
                    self.hbm.load(self.f.addrs[i][e], eb),
                    "HBM (index)".to_string(),
                ),
                Some((d, what)) => (
                    (0..eb as usize).fold(0u64, |v, b| v | u64::from(self.dram[d + b]) << (8 * b)),
                    format!("dataram {:#x} as {what}", d as u64 + DRAM_BASE),
                ),
            };
            let want = self.direct.reads[i][e];
            if v != want {
                return Err(format!(
                    "access {i} (`{}`, {}) at iteration {e} reads {v:#x} from {place}; the kernel reads {want:#x} from HBM {:#x}",
                    self.k.access_text(i),
                    self.plan.accessors[i],
                    self.f.addrs[i][e]
                ));
            }
            self.vals.push(v);
        }
        for i in (0..n).filter(|&i| self.k.accesses[i].write) {
            let eb = self.f.eb[i];
            let v = computed(e, i, &self.vals, eb);
            match self.place(i, e)? {
                None => self.hbm.store(self.f.addrs[i][e], eb, v),
                Some((d, _)) => {
                    for b in 0..eb as usize {
                        self.dram[d + b] = (v >> (8 * b)) as u8;
                    }
                }
            }
        }
        Ok(())
    }

    fn run(&mut self, order: Order) -> Result<(), String> {
        for step in &self.plan.steps {
            self.maybe_land()?;
            match *step {
                Step::Copy(c) => {
                    let cp = &self.plan.copies[c];
                    self.issued[c] = true;
                    if !cp.sdma {
                        self.land(c)?;
                    } else {
                        let ring = usize::from(!cp.m2s);
                        self.rings[ring].push_back(c);
                        if matches!(order, Order::Eager) {
                            while !self.rings[ring].is_empty() {
                                self.land_head(ring)?;
                            }
                        }
                    }
                }
                Step::Wait(id) => {
                    let c = self
                        .plan
                        .copies
                        .iter()
                        .position(|c| c.id == id)
                        .filter(|&c| self.issued[c] && self.plan.copies[c].sdma)
                        .ok_or_else(|| {
                            format!("sdma.wait {{copy = {id}}} names no SDMA copy issued before it")
                        })?;
                    let ring = usize::from(!self.plan.copies[c].m2s);
                    while !self.landed[c] {
                        // Random orders may land the other ring meanwhile.
                        self.maybe_land()?;
                        if !self.landed[c] {
                            self.land_head(ring)?;
                        }
                    }
                }
                Step::Compute(first, count) => {
                    for e in first..first.saturating_add(count) {
                        if e > first {
                            self.maybe_land()?;
                        }
                        self.iteration(usize::try_from(e).unwrap_or(usize::MAX))?;
                    }
                }
            }
        }
        self.drain()?;
        if let Some(e) = self.done.iter().position(|d| !d) {
            return Err(format!("iteration {e} never runs"));
        }
        // Every HBM byte either side wrote.
        let mut keys: Vec<u64> = self
            .hbm
            .map
            .keys()
            .chain(self.direct.hbm.map.keys())
            .copied()
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let bad: Vec<u64> = keys
            .into_iter()
            .filter(|&a| self.hbm.get(a) != self.direct.hbm.get(a))
            .collect();
        if let Some(&a) = bad.first() {
            let a128 = u128::from(a);
            let bufs: Vec<String> = (0..self.k.bufs.len())
                .filter(|&b| self.k.bufs[b].start() <= a128 && a128 < self.k.bufs[b].end())
                .map(|b| format!("%t{b}"))
                .collect();
            let writers: Vec<String> = (0..self.k.accesses.len())
                .filter(|&i| {
                    self.k.accesses[i].write
                        && self.f.addrs[i]
                            .iter()
                            .any(|&x| x <= a && a < x + self.f.eb[i])
                })
                .map(|i| format!("access {i}"))
                .collect();
            return Err(format!(
                "final HBM differs at {} byte(s); first at {a:#x} (in {}; written by {}): the plan leaves {:#04x}, the kernel {:#04x}",
                bad.len(),
                if bufs.is_empty() { "no buffer".to_string() } else { bufs.join(", ") },
                if writers.is_empty() { "no access".to_string() } else { writers.join(", ") },
                self.hbm.get(a),
                self.direct.hbm.get(a)
            ));
        }
        Ok(())
    }
}

fn replay(
    k: &Kernel,
    f: &Facts,
    plan: &Plan,
    s: &Setup,
    direct: &Direct,
    order: Order,
) -> Result<(), String> {
    let (rng, permille) = match order {
        Order::Random { seed, permille } => (Some(Rng(seed)), permille),
        _ => (None, 0),
    };
    let mut m = Machine {
        k,
        f,
        plan,
        s,
        direct,
        hbm: Hbm::default(),
        dram: vec![0xAB; (DRAM_END - DRAM_BASE) as usize],
        rings: [VecDeque::new(), VecDeque::new()],
        landed: vec![false; plan.copies.len()],
        issued: vec![false; plan.copies.len()],
        done: vec![false; f.e],
        rng,
        permille,
        vals: Vec::new(),
    };
    m.run(order)
}

// ---------------------------------------------------------------------------
// Planning through the public API
// ---------------------------------------------------------------------------

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Panics inside the compiler become failure messages, not noise.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) {
                LAST_PANIC.with(|p| *p.borrow_mut() = info.to_string());
            } else {
                prev(info);
            }
        }));
    });
}

enum Planned {
    Plan(String),
    Rejected(String),
}

/// Runs `pipeline` on `text`: the printed IR, a rejection (rendered
/// diagnostics), or `Err` for what is never acceptable (the kernel does not
/// parse, an internal error, a panic).
fn plan(text: &str, pipeline: &str) -> Result<Planned, String> {
    install_panic_hook();
    QUIET.with(|q| q.set(true));
    let out = catch_unwind(AssertUnwindSafe(|| {
        let mut c = match Compilation::parse("replay.apir", text, None) {
            Ok(c) => c,
            Err(e) => return Err(format!("the generated kernel is invalid IR: {e}")),
        };
        match c.run(pipeline) {
            Ok(_) => Ok(Planned::Plan(c.ir())),
            Err(e) if e.is_internal() => Err(format!("internal error: {e}")),
            Err(apir_compiler::Error::Diagnostics(d)) => Ok(Planned::Rejected(c.render(&d))),
            Err(e) => Err(format!("pipeline error: {e}")),
        }
    }));
    QUIET.with(|q| q.set(false));
    out.unwrap_or_else(|_| {
        Err(format!(
            "the compiler panicked: {}",
            LAST_PANIC.with(|p| p.borrow().clone())
        ))
    })
}

#[derive(Default, Debug)]
struct Stats {
    kernels: u64,
    valid_auto: u64,
    replayed: u64,
    replayed_with_sdma: u64,
    replayed_staged: u64,
    rejected: u64,
}

fn excerpt(plan: &Plan) -> String {
    let mut t = String::new();
    for (i, l) in plan.lines.iter().enumerate() {
        if i == 40 {
            writeln!(t, "  ... ({} more lines)", plan.lines.len() - 40).unwrap();
            break;
        }
        writeln!(t, "  {l}").unwrap();
    }
    t
}

fn text_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Plans `k` under each pipeline and replays every accepted plan.
/// The orders every accepted plan is replayed in.
fn orders(seed: u64) -> [Order; 5] {
    [
        Order::Eager,
        Order::Lazy,
        Order::Random {
            seed,
            permille: 100,
        },
        Order::Random {
            seed: seed ^ 1,
            permille: 500,
        },
        Order::Random {
            seed: seed ^ 2,
            permille: 900,
        },
    ]
}

/// For messages only, when the plan does not follow the contract: which
/// grouping of the staged accesses under the plan's buffer owners (and
/// which rule for bytes per iteration) makes every copy fit the layouts,
/// and whether the plan, read that way, computes the kernel.
fn plan_reading(k: &Kernel, f: &Facts, plan: &Plan, direct: &Direct, seed: u64) -> String {
    let n = k.accesses.len();
    if check_accessors(k, plan).is_err() {
        return String::new();
    }
    let mut owners: Vec<usize> = plan.bufs.iter().map(|b| b.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    if owners
        .iter()
        .any(|&o| o >= n || plan.accessors[o] == "index")
    {
        return String::new();
    }
    let rest: Vec<usize> = (0..n)
        .filter(|&j| plan.accessors[j] != "index" && !owners.contains(&j))
        .collect();
    let choices: Vec<Vec<usize>> = rest
        .iter()
        .map(|&j| {
            owners
                .iter()
                .copied()
                .filter(|&o| o < j && plan.accessors[o] == "tcm" && plan.accessors[j] == "tcm")
                .collect()
        })
        .collect();
    let mut pick = vec![0usize; rest.len()];
    for _ in 0..4096 {
        if choices.iter().any(Vec::is_empty) {
            break;
        }
        let groups: Vec<Vec<usize>> = owners
            .iter()
            .map(|&o| {
                let mut g = vec![o];
                g.extend(
                    (0..rest.len())
                        .filter(|&x| choices[x][pick[x]] == o)
                        .map(|x| rest[x]),
                );
                g.sort_unstable();
                g
            })
            .collect();
        for dedupe in [Dedupe::SameBytes, Dedupe::SameAp] {
            let Ok(s) = setup_with(k, f, plan, groups.clone(), dedupe) else {
                continue;
            };
            if !copy_notes(plan, &s).is_empty() {
                continue;
            }
            let outcome = orders(seed)
                .into_iter()
                .map(|o| {
                    replay(k, f, plan, &s, direct, o).map_err(|e| format!("{e} (order {o:?})"))
                })
                .find_map(Result::err)
                .unwrap_or_else(|| "it computes the kernel in every order".to_string());
            return format!(
                "--- the plan's copies fit the layouts of the grouping {groups:?} with bytes per iteration counted by {dedupe:?}:\n{}--- replayed that way: {outcome}\n",
                s.describe(plan)
            );
        }
        // Next assignment.
        let mut x = 0;
        while x < pick.len() {
            pick[x] += 1;
            if pick[x] < choices[x].len() {
                break;
            }
            pick[x] = 0;
            x += 1;
        }
        if x == pick.len() {
            break;
        }
    }
    "--- no grouping of the staged accesses under the plan's buffer owners makes every copy fit the layout contract\n".to_string()
}

/// With `add_default`, a kernel the test must see planned is planned by
/// `lower-staging` too.
fn check_kernel(
    k: &Kernel,
    pipelines: &[String],
    add_default: bool,
    stats: &mut Stats,
) -> Result<(), String> {
    let text = k.text();
    let f = Facts::new(k)?;
    let validity = planning_validity(k, &f);
    let must_plan = validity.is_ok() && k.all_auto();
    stats.kernels += 1;
    stats.valid_auto += u64::from(must_plan);
    let direct = execute_direct(k, &f);
    let mut pipelines = pipelines.to_vec();
    if add_default && must_plan && !pipelines.iter().any(|p| p == DEFAULT_PIPELINE) {
        pipelines.push(DEFAULT_PIPELINE.to_string());
    }
    for p in &pipelines {
        let fail = |msg: String| {
            format!(
                "{msg}\n--- pipeline: {p}\n--- test's verdict: {}\n--- kernel:\n{text}",
                match &validity {
                    Ok(()) => "valid for planning".to_string(),
                    Err(why) => format!("not valid for planning ({why})"),
                }
            )
        };
        let ir = match plan(&text, p).map_err(fail)? {
            Planned::Plan(ir) => ir,
            Planned::Rejected(diags) => {
                if must_plan && p == DEFAULT_PIPELINE {
                    return Err(fail(format!(
                        "lower-staging rejected a valid kernel without hints (docs/staging.md: every valid kernel is planned):\n{diags}"
                    )));
                }
                stats.rejected += 1;
                continue;
            }
        };
        let plan = parse_plan(&ir)
            .map_err(|e| fail(format!("cannot read the printed plan: {e}\n{ir}")))?;
        let seed = text_hash(&text) ^ text_hash(p);
        let s = setup(k, &f, &plan).map_err(|e| {
            fail(format!(
                "{e}\n{}--- plan:\n{}",
                plan_reading(k, &f, &plan, &direct, seed),
                excerpt(&plan)
            ))
        })?;
        for order in orders(seed) {
            replay(k, &f, &plan, &s, &direct, order).map_err(|e| {
                let notes = copy_notes(&plan, &s);
                fail(format!(
                    "{e}\n--- order: {order:?}\n--- test's staging groups:\n{}--- copies that disagree with the test's layouts: {}\n{}--- plan:\n{}",
                    s.describe(&plan),
                    if notes.is_empty() {
                        "none".to_string()
                    } else {
                        format!("\n  {}", notes.join("\n  "))
                    },
                    if notes.is_empty() {
                        String::new()
                    } else {
                        plan_reading(k, &f, &plan, &direct, seed)
                    },
                    excerpt(&plan)
                ))
            })?;
        }
        stats.replayed += 1;
        stats.replayed_with_sdma += u64::from(plan.copies.iter().any(|c| c.sdma));
        stats.replayed_staged += u64::from(!s.groups.is_empty());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Random kernels
// ---------------------------------------------------------------------------

/// An access shape over `r` rows of `c` elements.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Contiguous,
    Rows,
    Strided(i64),
    Transposed(i64),
    Reversed,
    ReversedRows(i64),
    Scattered(i64),
    BroadcastRows,
    BroadcastElems,
}

impl Shape {
    fn injective(self) -> bool {
        !matches!(self, Shape::BroadcastRows | Shape::BroadcastElems)
    }

    fn dims(self, r: u64, c: u64) -> Vec<(i64, u64)> {
        let ci = c as i64;
        let ri = r as i64;
        match self {
            Shape::Contiguous => vec![(1, r * c)],
            Shape::Rows => vec![(ci, r), (1, c)],
            Shape::Strided(g) => vec![(ci + g, r), (1, c)],
            Shape::Transposed(g) => vec![(1, c), (ci + g, r)],
            Shape::Reversed => vec![(-1, r * c)],
            Shape::ReversedRows(g) => vec![(-(ci + g), r), (-1, c)],
            Shape::Scattered(s) => vec![(s, r * c)],
            Shape::BroadcastRows => vec![(0, r), (1, c)],
            Shape::BroadcastElems if ri > 1 => vec![(1, r), (0, c)],
            Shape::BroadcastElems => vec![(0, c)],
        }
    }
}

/// `(dims, offset)` of a pattern whose lowest element is `start`, and its
/// highest element.
fn place_ap(dims: Vec<(i64, u64)>, start: i64) -> (Vec<(i64, u64)>, i64, i64) {
    let down: i64 = dims.iter().map(|&(s, n)| (s * (n as i64 - 1)).min(0)).sum();
    let up: i64 = dims.iter().map(|&(s, n)| (s * (n as i64 - 1)).max(0)).sum();
    let offset = start - down;
    (dims, offset, offset + up)
}

#[derive(Clone, Copy, Debug)]
enum Link {
    /// The next buffer starts where this one ends.
    Touch,
    /// The next buffer starts `permille` of the way into this one, rounded
    /// down to `grain` (0: byte, 1: the next buffer's element, 2: 64 bytes).
    Overlap(u64, u8),
    /// The next buffer starts this many bytes after this one (clamped to
    /// overlap).
    Near(u64),
}

#[derive(Clone, Debug)]
struct RawBuf {
    dtype: usize,
    slack: u64,
    link: Link,
}

#[derive(Clone, Debug)]
struct RawAccess {
    buf: usize,
    write: bool,
    shape: Shape,
    start: i64,
    hint: u8,
    /// Take the bytes of an earlier access (mirrored through this access's
    /// own buffer when the alignment allows).
    mirror: Option<usize>,
    /// Keep a broadcast shape on a write.
    broadcast_write: bool,
}

#[derive(Clone, Debug)]
struct RawKernel {
    rows: u64,
    cols: u64,
    bufs: Vec<RawBuf>,
    accesses: Vec<RawAccess>,
    first_last: bool,
    base: u64,
    perm: u64,
    hinted: bool,
    pipeline: String,
}

fn build(raw: &RawKernel) -> Kernel {
    let (r, c) = (raw.rows, raw.cols);
    let nb = raw.bufs.len();
    let mut acc = raw.accesses.clone();
    // Every buffer is accessed (pigeonhole: there are at least as many
    // accesses as buffers).
    for b in 0..nb {
        acc.iter_mut().for_each(|a| a.buf %= nb);
        if acc.iter().any(|a| a.buf == b) {
            continue;
        }
        let counts: Vec<usize> = (0..nb)
            .map(|x| acc.iter().filter(|a| a.buf == x).count())
            .collect();
        let i = (0..acc.len())
            .rev()
            .find(|&i| counts[acc[i].buf] > 1)
            .unwrap();
        acc[i].buf = b;
    }
    // 1..=3 writes.
    if !acc.iter().any(|a| a.write) {
        let last = acc.len() - 1;
        acc[last].write = true;
    }
    let mut writes = 0;
    for a in &mut acc {
        if a.write {
            writes += 1;
            a.write = writes <= 3;
        }
    }
    // Patterns and buffer sizes.
    let eb: Vec<u64> = raw.bufs.iter().map(|b| DTYPES[b.dtype].1).collect();
    let mut accesses: Vec<Access> = Vec::new();
    let mut top = vec![0i64; nb];
    for a in &acc {
        let shape = if a.write && !a.shape.injective() && !a.broadcast_write {
            Shape::Contiguous
        } else {
            a.shape
        };
        let (dims, offset, hi) = place_ap(shape.dims(r, c), a.start);
        top[a.buf] = top[a.buf].max(hi);
        accesses.push(Access {
            buf: a.buf,
            write: a.write,
            dims,
            offset,
            hint: if raw.hinted {
                match a.hint {
                    3 => Some("tcm"),
                    4 => Some("index"),
                    5 => Some("stream"),
                    _ => None,
                }
            } else {
                None
            },
        });
    }
    let elems: Vec<u64> = (0..nb)
        .map(|b| top[b] as u64 + 1 + raw.bufs[b].slack)
        .collect();
    // Placement in chain order.
    let bytes: Vec<u64> = (0..nb).map(|b| elems[b] * eb[b]).collect();
    let mut addr = vec![0x4000_0000u64 + raw.base * 4; nb];
    let near_cap = if raw.first_last && nb >= 3 {
        (bytes[0] - 1) / (nb as u64 - 1)
    } else {
        u64::MAX
    };
    for b in 1..nb {
        let prev = bytes[b - 1];
        let mut delta = match raw.bufs[b - 1].link {
            Link::Touch => prev,
            Link::Overlap(pm, grain) => {
                let d = prev * pm / 1000;
                let g = match grain {
                    0 => 1,
                    1 => eb[b],
                    _ => 64,
                };
                (d / g * g).min(prev - 1)
            }
            Link::Near(d) => d.min(prev - 1),
        };
        delta = delta.min(near_cap);
        addr[b] = addr[b - 1] + delta;
    }
    // Mirrors: the same bytes in the same order through another name.
    for j in 0..accesses.len() {
        let Some(m) = acc[j].mirror else { continue };
        if j == 0 {
            continue;
        }
        let src = m % j;
        let (sb, jb) = (accesses[src].buf, accesses[j].buf);
        if eb[sb] != eb[jb] {
            continue;
        }
        let diff = i128::from(addr[sb]) - i128::from(addr[jb]);
        if diff % i128::from(eb[jb]) != 0 {
            continue;
        }
        let offset = i128::from(accesses[src].offset) + diff / i128::from(eb[jb]);
        let dims = accesses[src].dims.clone();
        let els = ap_elements(&dims, offset as i64);
        let inside = els.iter().all(|&x| x >= 0 && (x as u64) < elems[jb]);
        let injective = {
            let mut s: Vec<i64> = els.clone();
            s.sort_unstable();
            s.windows(2).all(|w| w[0] != w[1])
        };
        if inside && (!accesses[j].write || injective || acc[j].broadcast_write) {
            accesses[j].dims = dims;
            accesses[j].offset = offset as i64;
        }
    }
    // Declaration order: a permutation of the chain order.
    let mut order: Vec<usize> = (0..nb).collect();
    let mut rng = Rng(raw.perm);
    for i in (1..nb).rev() {
        order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let mut new_index = vec![0; nb];
    for (pos, &b) in order.iter().enumerate() {
        new_index[b] = pos;
    }
    let bufs = order
        .iter()
        .map(|&b| Buf {
            addr: addr[b],
            elems: elems[b],
            dtype: DTYPES[raw.bufs[b].dtype].0,
            eb: eb[b],
        })
        .collect();
    for a in &mut accesses {
        a.buf = new_index[a.buf];
    }
    Kernel { bufs, accesses }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        4 => Just(Shape::Contiguous),
        1 => Just(Shape::Rows),
        2 => (1..=8i64).prop_map(Shape::Strided),
        2 => (0..=4i64).prop_map(Shape::Transposed),
        3 => Just(Shape::Reversed),
        1 => (0..=4i64).prop_map(Shape::ReversedRows),
        1 => (2..=3i64).prop_map(Shape::Scattered),
        1 => Just(Shape::BroadcastRows),
        1 => Just(Shape::BroadcastElems),
    ]
}

fn raw_buf() -> impl Strategy<Value = RawBuf> {
    let dtype = prop_oneof![
        4 => Just(0usize), // f32
        1 => Just(1usize),
        1 => Just(2usize),
        3 => Just(3usize), // bf16
        2 => Just(4usize), // f16
        1 => Just(5usize),
        1 => Just(6usize),
        2 => Just(7usize), // u8
        2 => Just(8usize), // i8
        1 => Just(9usize),
        1 => Just(10usize),
    ];
    let link = prop_oneof![
        2 => Just(Link::Touch),
        5 => (1..1000u64, 0..3u8).prop_map(|(p, g)| Link::Overlap(p, g)),
        1 => (0..64u64).prop_map(Link::Near),
    ];
    (dtype, 0..=16u64, link).prop_map(|(dtype, slack, link)| RawBuf { dtype, slack, link })
}

fn raw_access() -> impl Strategy<Value = RawAccess> {
    (
        0..4usize,
        prop::bool::weighted(0.4),
        shape(),
        0..=8i64,
        0..=5u8,
        prop::option::weighted(0.25, 0..6usize),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(buf, write, shape, start, hint, mirror, broadcast_write)| RawAccess {
                buf,
                write,
                shape,
                start,
                hint,
                mirror,
                broadcast_write,
            },
        )
}

fn pipeline() -> impl Strategy<Value = String> {
    let budget = prop_oneof![
        Just(512u64),
        Just(1024u64),
        Just(2048u64),
        Just(4096u64),
        Just(8192u64),
        Just(16384u64),
        Just(65536u64),
    ];
    prop_oneof![
        4 => Just(DEFAULT_PIPELINE.to_string()),
        5 => (1..=3u32, budget, prop::bool::weighted(0.7), any::<bool>(), prop::bool::weighted(0.2)).prop_map(
            |(buffers, budget, sdma, index_dear, dma_free)| {
                let mut o = vec![format!("buffers={buffers}"), format!("budget={budget}")];
                if sdma {
                    o.push("vec-fixed-ns=1000000,c-fixed-ns=1000000".into());
                }
                if index_dear {
                    o.push("index-ns=5000".into());
                }
                if dma_free {
                    o.push("dma-fixed-ns=0".into());
                }
                format!("schedule-staging{{{}}},check-coherency", o.join(","))
            }
        ),
        1 => any::<bool>().prop_map(|sdma| if sdma {
            "schedule-staging{policy=reference,vec-fixed-ns=1000000,c-fixed-ns=1000000},check-coherency".to_string()
        } else {
            "schedule-staging{policy=reference},check-coherency".to_string()
        }),
    ]
}

fn raw_kernel() -> impl Strategy<Value = RawKernel> {
    (2..=4usize).prop_flat_map(|nb| {
        (
            (1..=16u64, 16..=128u64),
            prop::collection::vec(raw_buf(), nb),
            prop::collection::vec(raw_access(), nb.max(2)..=6),
            any::<bool>(),
            0..64u64,
            any::<u64>(),
            prop::bool::weighted(0.25),
            pipeline(),
        )
            .prop_map(
                |((rows, cols), bufs, accesses, first_last, base, perm, hinted, pipeline)| {
                    RawKernel {
                        rows,
                        cols,
                        bufs,
                        accesses,
                        first_last,
                        base,
                        perm,
                        hinted,
                        pipeline,
                    }
                },
            )
    })
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

fn stats_wanted() -> bool {
    std::env::var_os("APIR_REPLAY_STATS").is_some()
}

#[test]
fn aliasing_chains_replay_like_the_kernel() {
    const CASES: u32 = 256;
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 2048,
        max_shrink_time: 6_000,
        ..Config::default()
    };
    let stats = RefCell::new(Stats::default());
    let mut runner = TestRunner::new(config);
    let result = runner.run(&raw_kernel(), |raw| {
        let k = build(&raw);
        check_kernel(
            &k,
            std::slice::from_ref(&raw.pipeline),
            true,
            &mut stats.borrow_mut(),
        )
        .map_err(TestCaseError::fail)
    });
    let stats = stats.into_inner();
    if stats_wanted() {
        eprintln!("staging_replay: {stats:?}");
    }
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, _)) => panic!("{why}"),
        Err(e) => panic!("{e}"),
    }
    // Not vacuous: most kernels were planned and replayed, many with SDMA
    // copies and staged accesses.
    assert!(
        stats.replayed * 4 >= stats.kernels && stats.replayed_with_sdma * 20 >= stats.kernels,
        "too few plans replayed: {stats:?}"
    );
}

/// Plans `k` under each pipeline and replays the plans; reports every
/// pipeline that fails.
fn check_text(k: &Kernel, pipelines: &[&str]) -> Vec<String> {
    let mut stats = Stats::default();
    let failures: Vec<String> = pipelines
        .iter()
        .filter_map(|p| check_kernel(k, &[p.to_string()], false, &mut stats).err())
        .collect();
    if stats_wanted() {
        eprintln!("staging_replay: {stats:?}");
    }
    failures
}

/// Fails with every failure of `runs` (one entry per kernel and pipeline).
fn assert_replays(runs: Vec<String>, of: usize) {
    if !runs.is_empty() {
        panic!(
            "{} of {of} runs fail:\n\n{}",
            runs.len(),
            runs.join("\n==========\n\n")
        );
    }
}

const PIPELINES: [&str; 6] = [
    DEFAULT_PIPELINE,
    "schedule-staging{buffers=1},check-coherency",
    "schedule-staging{buffers=3,budget=4096},check-coherency",
    "schedule-staging{vec-fixed-ns=1000000,c-fixed-ns=1000000},check-coherency",
    "schedule-staging{buffers=3,budget=8192,vec-fixed-ns=1000000,c-fixed-ns=1000000,index-ns=5000},check-coherency",
    "schedule-staging{policy=reference},check-coherency",
];

fn hbm(addr: u64, elems: u64, dtype: &'static str) -> Buf {
    let eb = DTYPES.iter().find(|d| d.0 == dtype).unwrap().1;
    Buf {
        addr,
        elems,
        dtype,
        eb,
    }
}

fn access(buf: usize, write: bool, dims: &[(i64, u64)], offset: i64) -> Access {
    Access {
        buf,
        write,
        dims: dims.to_vec(),
        offset,
        hint: None,
    }
}

/// The shape: a kernel writes %c forward, reads %b, writes %a
/// backwards; %b overlaps both %a and %c, which are disjoint.
#[test]
fn write_read_write_through_an_aliasing_chain() {
    let k = Kernel {
        bufs: vec![
            hbm(0x4000_0000, 512, "f32"),
            hbm(0x4000_07f0, 1024, "f32"),
            hbm(0x4000_1000, 512, "f32"),
        ],
        accesses: vec![
            access(2, true, &[(1, 512)], 0),
            access(1, false, &[(1, 512)], 2),
            access(0, true, &[(-1, 512)], 511),
        ],
    };
    assert_replays(check_text(&k, &PIPELINES), PIPELINES.len());
}

/// An in-place tensor whose last byte is the last byte of the 64-bit
/// address space.
#[test]
fn in_place_at_the_top_of_the_address_space() {
    let top = |dims: &[(i64, u64)], offset: i64, hint: Option<&'static str>| Kernel {
        bufs: vec![hbm(0xFFFF_FFFF_FFFF_F000, 1024, "f32")],
        accesses: vec![
            Access {
                hint,
                ..access(0, false, dims, offset)
            },
            Access {
                hint,
                ..access(0, true, dims, offset)
            },
        ],
    };
    let mut failures = check_text(&top(&[(1, 1024)], 0, None), &PIPELINES);
    failures.extend(check_text(
        &top(&[(1, 1024)], 0, Some("tcm")),
        &PIPELINES[..5],
    ));
    failures.extend(check_text(&top(&[(-1, 1024)], 1023, None), &PIPELINES));
    assert_replays(failures, 3 * PIPELINES.len() - 1);
}

/// A read and a write through two names of the same bytes, in the same
/// order: one element size per iteration (like an in-place read and write
/// through one name), whatever the names.
#[test]
fn byte_identical_accesses_through_two_names_count_once() {
    let k = Kernel {
        bufs: vec![hbm(0x4000_0000, 2048, "f32"), hbm(0x4000_1000, 1024, "f32")],
        accesses: vec![
            access(0, false, &[(1, 1024)], 1024),
            access(1, true, &[(1, 1024)], 0),
        ],
    };
    assert_replays(check_text(&k, &PIPELINES), PIPELINES.len());
}

/// The replay is not vacuous: a correct SDMA plan of a plain kernel
/// replays, and the same plan broken (a wait dropped, a flush moved, a
/// load's dataram moved) does not, in some order.
#[test]
fn the_replay_catches_broken_plans() {
    let k = Kernel {
        bufs: vec![hbm(0x4000_0000, 4096, "f32"), hbm(0x4010_0000, 4096, "f32")],
        accesses: vec![
            access(0, false, &[(1, 4096)], 0),
            access(1, true, &[(1, 4096)], 0),
        ],
    };
    let f = Facts::new(&k).unwrap();
    let direct = execute_direct(&k, &f);
    let pipeline = "schedule-staging{vec-fixed-ns=1000000,c-fixed-ns=1000000},check-coherency";
    let Ok(Planned::Plan(ir)) = plan(&k.text(), pipeline) else {
        panic!("the plain kernel is planned");
    };
    let orders = [
        Order::Eager,
        Order::Lazy,
        Order::Random {
            seed: 1,
            permille: 500,
        },
    ];
    let replays = |ir: &str| -> Result<(), String> {
        let p = parse_plan(ir)?;
        let s = setup(&k, &f, &p)?;
        orders
            .iter()
            .try_for_each(|&o| replay(&k, &f, &p, &s, &direct, o))
    };
    replays(&ir).unwrap_or_else(|e| panic!("the correct plan fails: {e}\n{ir}"));
    assert!(ir.contains("sdma.wait"), "an SDMA plan:\n{ir}");
    let lines: Vec<&str> = ir.lines().collect();
    let without = |pred: &dyn Fn(&str) -> bool| -> String {
        let i = lines.iter().position(|l| pred(l)).unwrap();
        let mut l = lines.clone();
        l.remove(i);
        l.join("\n")
    };
    let edit = |pred: &dyn Fn(&str) -> bool, key: &str, by: i64| -> String {
        let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let i = lines.iter().position(|l| pred(l)).unwrap();
        let at = out[i].find(&format!("{key} = ")).unwrap() + key.len() + 3;
        let end = at + out[i][at..].find([',', '}']).unwrap();
        let v: i64 = out[i][at..end].parse().unwrap();
        out[i].replace_range(at..end, &(v + by).to_string());
        out.join("\n")
    };
    let broken = [
        ("first wait dropped", without(&|l| l.contains("sdma.wait"))),
        (
            "a flush moved by 4 HBM bytes",
            edit(&|l| l.contains("\"s2m\""), "hbm", 4),
        ),
        (
            "a load moved by 4 dataram bytes",
            edit(&|l| l.contains("\"m2s\""), "dram", 4),
        ),
    ];
    for (what, text) in broken {
        assert!(
            replays(&text).is_err(),
            "{what}: the replay accepts\n{text}"
        );
    }
}
