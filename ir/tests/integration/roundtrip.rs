//! print -> parse -> print is the identity (docs/ir.md) on modules built through
//! the library API: every attribute kind (strings needing escapes,
//! non-ASCII, integers up to the i128 edges, nested arrays), negative steps
//! and offsets, extreme nums, huge HBM addresses, module names and
//! attributes, `isa.custom` struct keys and kernels. The re-parsed module
//! must also equal the original as data, not just print the same.
//! Modules that pass the verifier still pass it after the round trip.

use crate::common::{plain, Picker};
use apir_ir::target::IsaOp;
use apir_ir::{
    parse_str, print_module, verify, AccessPattern, Arch, Attr, Attrs, Buffer, Dtype, Memory,
    Module, OpKind, ParseOptions,
};
use proptest::prelude::*;
use proptest::sample::Index;

// ---- a syntax-level model of a module, built through the API ----

#[derive(Clone, Debug)]
enum AttrSpec {
    Int(i128),
    Str(String),
    Bool(bool),
    Array(Vec<AttrSpec>),
}

#[derive(Clone, Debug)]
struct BufSpec {
    name: String,
    mem: Memory,
    partition: u32,
    base: u64,
    shape: Vec<u64>,
    dtype: Dtype,
    attrs: Vec<(String, AttrSpec)>,
}

#[derive(Clone, Debug)]
struct ApSpec {
    buffer: Index,
    dims: Vec<(i64, u64)>,
    offset: i64,
}

#[derive(Clone, Debug)]
struct AccessSpec {
    write: bool,
    ap: ApSpec,
    attrs: Vec<(String, AttrSpec)>,
}

#[derive(Clone, Debug)]
enum ItemSpec {
    Buffer(BufSpec),
    Isa {
        op: Index,
        operands: Vec<(String, ApSpec)>,
        attrs: Vec<(String, AttrSpec)>,
    },
    Custom {
        operands: Vec<(String, ApSpec, String)>,
        attrs: Vec<(String, AttrSpec)>,
    },
    Kernel {
        name: String,
        attrs: Vec<(String, AttrSpec)>,
        body: Vec<AccessSpec>,
    },
}

#[derive(Clone, Debug)]
struct ModuleSpec {
    name: Option<String>,
    arch: Arch,
    attrs: Vec<(String, AttrSpec)>,
    /// Ops refer to buffers declared before them, so one comes first.
    first: BufSpec,
    items: Vec<ItemSpec>,
}

/// A `%name` / `@name` body: identifier characters, may start with a digit.
fn sigil_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.$-]{1,8}"
}

/// Attribute keys and roles.
fn ident() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_.$-]{0,8}"
}

/// Strings: arbitrary Unicode (control characters included), and short
/// mixes of what the printer escapes and what the lexer treats specially.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\"\\\\\n\t\r /{}\\[\\]%@=,a-zé€😀\u{0}\u{7f}\u{9b}\u{202e}\u{2028}]{0,12}",
        Just("// -----".to_string()),
        Just(String::new()),
    ]
}

/// Integers across i128; `i128::MIN` has a separate (ignored) test.
fn int_attr() -> impl Strategy<Value = i128> {
    prop_oneof![
        -5i128..5,
        any::<i64>().prop_map(i128::from),
        any::<u64>().prop_map(i128::from),
        (i128::MIN + 1)..=i128::MAX,
        Just(i128::MAX),
        Just(i128::MIN + 1),
    ]
}

fn attr() -> impl Strategy<Value = AttrSpec> {
    let leaf = prop_oneof![
        int_attr().prop_map(AttrSpec::Int),
        text().prop_map(AttrSpec::Str),
        any::<bool>().prop_map(AttrSpec::Bool),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(AttrSpec::Array)
    })
}

fn attrs() -> impl Strategy<Value = Vec<(String, AttrSpec)>> {
    prop::collection::vec((ident(), attr()), 0..3)
}

fn step() -> impl Strategy<Value = i64> {
    prop_oneof![-8i64..8, any::<i64>(), Just(i64::MIN), Just(i64::MAX)]
}

fn num() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..8, any::<u64>(), Just(u64::MAX)]
}

/// Offsets across i64; `i64::MIN` has a separate (ignored) test.
fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        -100i64..100,
        (i64::MIN + 1)..=i64::MAX,
        Just(i64::MAX),
        Just(i64::MIN + 1)
    ]
}

fn ap() -> impl Strategy<Value = ApSpec> {
    (
        any::<Index>(),
        prop::collection::vec((step(), num()), 1..7),
        offset(),
    )
        .prop_map(|(buffer, dims, offset)| ApSpec {
            buffer,
            dims,
            offset,
        })
}

fn dtype() -> impl Strategy<Value = Dtype> {
    prop::sample::select(Dtype::all().collect::<Vec<_>>())
}

fn buffer() -> impl Strategy<Value = BufSpec> {
    (
        sigil_name(),
        prop_oneof![Just(Memory::Sbuf), Just(Memory::Psum), Just(Memory::Hbm)],
        prop_oneof![0u32..129, any::<u32>()],
        prop_oneof![Just(0u64), 0u64..0x40000, any::<u64>(), Just(u64::MAX)],
        prop::collection::vec(prop_oneof![1u64..300, 1u64..=u64::MAX], 1..5),
        dtype(),
        attrs(),
    )
        .prop_map(
            |(name, mem, partition, base, shape, dtype, attrs)| BufSpec {
                name,
                mem,
                // HBM buffers have no partition; the printer does not write one.
                partition: if mem.is_on_chip() { partition } else { 0 },
                base,
                shape,
                dtype,
                attrs,
            },
        )
}

fn item() -> impl Strategy<Value = ItemSpec> {
    prop_oneof![
        buffer().prop_map(ItemSpec::Buffer),
        (
            any::<Index>(),
            prop::collection::vec((ident(), ap()), 0..4),
            attrs()
        )
            .prop_map(|(op, operands, attrs)| ItemSpec::Isa {
                op,
                operands,
                attrs
            }),
        (
            prop::collection::vec((ident(), ap(), text()), 0..4),
            attrs()
        )
            .prop_map(|(operands, attrs)| ItemSpec::Custom { operands, attrs }),
        (
            sigil_name(),
            attrs(),
            prop::collection::vec(
                (any::<bool>(), ap(), attrs()).prop_map(|(write, ap, attrs)| AccessSpec {
                    write,
                    ap,
                    attrs
                }),
                0..4
            )
        )
            .prop_map(|(name, attrs, body)| ItemSpec::Kernel { name, attrs, body }),
    ]
}

fn module_spec() -> impl Strategy<Value = ModuleSpec> {
    (
        prop::option::of(sigil_name()),
        prop::sample::select(Arch::ALL.to_vec()),
        attrs(),
        buffer(),
        prop::collection::vec(item(), 0..10),
    )
        .prop_map(|(name, arch, attrs, first, items)| ModuleSpec {
            name,
            arch,
            attrs,
            first,
            items,
        })
}

// ---- building the module ----

fn build_attr(m: &mut Module, a: &AttrSpec) -> Attr {
    match a {
        AttrSpec::Int(v) => Attr::Int(*v),
        AttrSpec::Str(s) => Attr::Str(m.sym(s)),
        AttrSpec::Bool(b) => Attr::Bool(*b),
        AttrSpec::Array(items) => Attr::Array(items.iter().map(|a| build_attr(m, a)).collect()),
    }
}

/// Attributes, skipping keys the enclosing syntax reserves (`arch` on the
/// module; `partition`, `byte` and `addr` on buffers).
fn build_attrs(m: &mut Module, attrs: &[(String, AttrSpec)], reserved: &[&str]) -> Attrs {
    let mut out = Attrs::default();
    for (k, v) in attrs {
        if reserved.contains(&k.as_str()) {
            continue;
        }
        let key = m.sym(k);
        let value = build_attr(m, v);
        out.insert(key, value);
    }
    out
}

fn build_buffer(m: &mut Module, b: &BufSpec, serial: usize) -> Buffer {
    // The `_N` suffix keeps names unique: names differing in N differ after
    // their last `_`.
    let name = format!("{}_{serial}", b.name);
    let mut data = m.buffer_data(&name, b.mem, b.partition, b.base, &b.shape, b.dtype);
    data.attrs = build_attrs(m, &b.attrs, &["partition", "byte", "addr"]);
    m.add_buffer(data)
}

fn build_operand(
    m: &mut Module,
    role: &str,
    a: &ApSpec,
    buffers: &[Buffer],
) -> apir_ir::module::Operand {
    let b = *a.buffer.get(buffers);
    m.operand(role, b, AccessPattern::new(&a.dims, a.offset))
}

fn build(spec: &ModuleSpec) -> Module {
    let mut m = Module::new(spec.arch);
    m.name = spec.name.as_ref().map(|n| m.sym(n));
    m.attrs = build_attrs(&mut m, &spec.attrs, &["arch"]);
    let mut buffers = vec![build_buffer(&mut m, &spec.first, 0)];
    let ops: Vec<IsaOp> = IsaOp::all().collect();
    for (index, item) in spec.items.iter().enumerate() {
        match item {
            ItemSpec::Buffer(b) => {
                let serial = buffers.len();
                buffers.push(build_buffer(&mut m, b, serial));
            }
            ItemSpec::Isa {
                op,
                operands,
                attrs,
            } => {
                let operands: Vec<_> = operands
                    .iter()
                    .map(|(role, a)| build_operand(&mut m, role, a, &buffers))
                    .collect();
                let mut data = Module::op_data(OpKind::Isa(*op.get(&ops)), operands);
                data.attrs = build_attrs(&mut m, attrs, &[]);
                m.add_op(data);
            }
            ItemSpec::Custom { operands, attrs } => {
                let mut built = Vec::new();
                for (role, a, key) in operands {
                    let mut o = build_operand(&mut m, role, a, &buffers);
                    o.struct_name = Some(m.sym(key));
                    built.push(o);
                }
                let mut data = Module::op_data(OpKind::Custom, built);
                data.attrs = build_attrs(&mut m, attrs, &[]);
                m.add_op(data);
            }
            ItemSpec::Kernel { name, attrs, body } => {
                let block = m.new_block();
                for access in body {
                    let (kind, role) = if access.write {
                        (OpKind::Write, "dst")
                    } else {
                        (OpKind::Read, "src")
                    };
                    let o = build_operand(&mut m, role, &access.ap, &buffers);
                    let mut data = Module::op_data(kind, [o]);
                    data.attrs = build_attrs(&mut m, &access.attrs, &[]);
                    m.add_op_to_block(block, data);
                }
                // Kernel names are unique in a module, as buffer names are:
                // the item's index is the suffix.
                let name = m.sym(&format!("{name}_{index}"));
                let mut data = Module::op_data(OpKind::Kernel { name, body: block }, []);
                data.attrs = build_attrs(&mut m, attrs, &[]);
                m.add_op(data);
            }
        }
    }
    m
}

/// Prints `m`, parses the text, and checks that the re-parsed module equals
/// `m` as data and prints the same text. Returns the re-parsed module.
fn assert_round_trip(m: &Module) -> Module {
    let text = print_module(m);
    // No control character but the line ends, and no bidirectional
    // formatting character: a string's are escaped.
    let reorders = |c: char| matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || reorders(c)),
        "printed IR carries a raw control or bidirectional character:\n{text:?}"
    );
    let reparsed = match parse_str("roundtrip.apir", &text, ParseOptions::default()) {
        Ok((r, _)) => r,
        Err((diags, sm)) => panic!(
            "printed IR does not parse:\n{text}\n{}",
            apir_ir::render_all(&diags, &sm)
        ),
    };
    assert_eq!(
        print_module(&reparsed),
        text,
        "print -> parse -> print changed the text"
    );
    assert_eq!(
        plain(&reparsed),
        plain(m),
        "the re-parsed module differs from the original:\n{text}"
    );
    reparsed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any module the grammar can express survives the round trip,
    /// whether or not it verifies.
    #[test]
    fn print_parse_print_is_identity(spec in module_spec()) {
        let m = build(&spec);
        assert_round_trip(&m);
    }

    /// A module that verifies still verifies after the round trip.
    #[test]
    fn verified_modules_verify_after_round_trip(raw in prop::collection::vec(any::<u64>(), 0..400)) {
        let m = crate::common::valid_module(&mut Picker::new(&raw));
        let text = print_module(&m);
        if let Err(diags) = verify(&m) {
            let msgs: Vec<_> = diags.iter().map(|d| d.message.as_str()).collect();
            panic!("generated module does not verify: {msgs:#?}\n{text}");
        }
        let reparsed = assert_round_trip(&m);
        if let Err(diags) = verify(&reparsed) {
            let msgs: Vec<_> = diags.iter().map(|d| d.message.as_str()).collect();
            panic!("re-parsed module does not verify: {msgs:#?}\n{text}");
        }
    }
}

/// Every example file round-trips exactly as data and text after one print.
#[test]
fn examples_round_trip() {
    for (name, text) in [
        (
            "batchnorm.apir",
            include_str!("../../../examples/batchnorm.apir"),
        ),
        (
            "relu-kernel.apir",
            include_str!("../../../examples/relu-kernel.apir"),
        ),
    ] {
        let (m, _) = parse_str(name, text, ParseOptions::default())
            .unwrap_or_else(|(d, sm)| panic!("{}", apir_ir::render_all(&d, &sm)));
        verify(&m).unwrap();
        let reparsed = assert_round_trip(&m);
        verify(&reparsed).unwrap();
    }
}

/// A module with one HBM buffer and one kernel reading `ap`.
fn kernel_module(ap: AccessPattern, attr: Option<Attr>) -> Module {
    let mut m = Module::new(Arch::V2);
    if let Some(a) = attr {
        let k = m.sym("a");
        m.attrs.insert(k, a);
    }
    let bd = m.buffer_data("h", Memory::Hbm, 0, 0x1000, &[16], Dtype::F32);
    let b = m.add_buffer(bd);
    let block = m.new_block();
    let o = m.operand("src", b, ap);
    m.add_op_to_block(block, Module::op_data(OpKind::Read, [o]));
    let name = m.sym("k");
    m.add_op(Module::op_data(OpKind::Kernel { name, body: block }, []));
    m
}

/// The extremes the generators stop one short of, when they are not the
/// known failures below.
#[test]
fn extreme_values_round_trip() {
    let m = kernel_module(
        AccessPattern::new(&[(i64::MIN, u64::MAX), (i64::MAX, 0)], i64::MIN + 1),
        Some(Attr::Int(i128::MAX)),
    );
    assert_round_trip(&m);
}

/// Regression: `Attr::Int(i128::MIN)` prints as `-170141183460469231731687303715884105728`,
/// which the parser rejects ("integer literal is too large": it reads the
/// magnitude as a u128 and requires it to be at most `i128::MAX`).
#[test]
fn i128_min_attribute_round_trips() {
    assert_round_trip(&kernel_module(
        AccessPattern::new(&[(1, 1)], 0),
        Some(Attr::Int(i128::MIN)),
    ));
}

/// Regression: an offset of `i64::MIN` prints as `- 9223372036854775808`, which
/// the parser rejects ("offset 9223372036854775808 is out of range [0,
/// 9223372036854775807]": it reads the magnitude in `0..=i64::MAX`).
#[test]
fn i64_min_offset_round_trips() {
    assert_round_trip(&kernel_module(
        AccessPattern::new(&[(1, 1)], i64::MIN),
        None,
    ));
}
