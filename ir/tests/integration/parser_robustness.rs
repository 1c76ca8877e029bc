//! The parser, verifier and diagnostic renderer never panic (ARCHITECTURE.md,
//! "No panics on input"): on byte-level mutations of the examples and of a
//! seed using every part of the grammar, on token soup, and on arbitrary
//! strings. Every diagnostic points inside the file and renders with its
//! message; whatever parses also round-trips through the printer and
//! verifies the same way after.

use apir_ir::{
    parse_module, parse_str, print_module, render_all, split_input, verify, Arch, Diagnostic,
    FileId, ParseOptions, SourceMap,
};
use proptest::prelude::*;
use proptest::sample::Index;

const FILE: &str = "fuzz.apir";

/// A valid input touching every part of the grammar: module name and
/// attributes of every kind, the three memories, attributes before and after
/// operands, negative steps, `+`/`-` offsets, `isa.custom` struct keys,
/// kernels with and without attributes, comments, and a split marker
/// followed by an empty case.
const SEED: &str = r#"// Seed for mutation.
module @seed attributes {arch = "v3", note = "a \"quoted\" \\ é\n\t", n = -42, h = 0x10, f = [1, [true, false], "s"]} {
  %a = mem.sbuf {partition = 0, byte = 0, tag = "x"} : tile<128x4x8xbf16>
  %b = mem.psum {partition = 0, byte = 0x800} : tile<64x128xf32>
  %i = mem.sbuf {partition = 32, byte = 0x100} : tile<32x16xi32>
  %h = mem.hbm {addr = 0xFFFFFFFFFFFF0000} : tensor<16x16xu8>
  isa.tensor_copy {note = 1} dst = %b[[128, 64], [1, 128]], src = %a[[32, 64], [-8, 4], [1, 8]] + 24
  isa.local_gather dst = %a[[32, 32], [1, 32]], src = %a[[32, 32], [1, 32]], index = %i[[16, 32], [1, 16]]
  isa.custom dst = %a[[32, 1], [1, 32]] as "NEURON_ISA_TPB_TENSOR2D", src = %b[[128, 1], [1, 128]] - 0 as "NEURON_ISA_TPB_TENSOR4D" {name = "my_op"}
  gpsimd.kernel @k {core = 1} {
    gpsimd.read %h[[16, 16], [1, 16]] {accessor = "stream"}
    gpsimd.write %h[[-1, 256]] + 255 // reversed
  }
  gpsimd.kernel @e {} {
  }
}
// -----
// An empty case for `--split-input-file`.
"#;

const SEEDS: [&str; 3] = [
    include_str!("../../../examples/batchnorm.apir"),
    include_str!("../../../examples/relu-kernel.apir"),
    SEED,
];

/// Tokens the grammar knows, plus near misses.
const TOKENS: &[&str] = &[
    "module",
    "@m",
    "attributes",
    "{",
    "}",
    "arch",
    "=",
    "\"v2\"",
    "\"v4\"",
    "\"v9\"",
    ",",
    "%x",
    "%y",
    "%",
    "@",
    "mem.sbuf",
    "mem.psum",
    "mem.hbm",
    "mem.dram",
    "partition",
    "byte",
    "addr",
    "0",
    "1",
    "128",
    "0x2000",
    "0x",
    "-1",
    "-",
    "+",
    "18446744073709551616",
    "99999999999999999999999999999999999999999",
    ":",
    "tile",
    "tensor",
    "<",
    ">",
    "128x64xf32",
    "4x",
    "x",
    "f32",
    "i32",
    "f99",
    "isa.tensor_copy",
    "isa.custom",
    "isa.memset",
    "isa.matmul_sparse",
    "isa.tensor_cpy",
    "dst",
    "src",
    "index",
    "[",
    "]",
    "[[1, 2]]",
    "[[2048, 128], [1, 2048]]",
    "as",
    "\"NEURON_ISA_TPB_TENSOR2D\"",
    "gpsimd.kernel",
    "gpsimd.read",
    "gpsimd.write",
    "@k",
    "true",
    "false",
    "\"esc\\\"aped\\n\"",
    "\"bad\\q\"",
    "\"\\é\"",
    "\"unterminated",
    "//",
    "// -----\n",
    "\n",
    " ",
    "\t",
    "\r",
    "é",
    "\\",
    "name",
    "\u{0}",
];

const HEADER: &str = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  %y = mem.hbm {addr = 0x1000} : tensor<64xf32>\n";

/// Asserts every span of `diags` lies inside the file and the rendering
/// shows every message.
fn check_diagnostics(diags: &[Diagnostic], text: &str, sources: &SourceMap) {
    for d in diags {
        assert!(!d.message.is_empty(), "empty diagnostic message");
        let spans = d
            .span
            .iter()
            .chain(d.notes.iter().filter_map(|(_, s)| s.as_ref()));
        for span in spans {
            assert_eq!(span.file, FileId(0), "{d:?}");
            assert!(
                span.start <= span.end && span.end as usize <= text.len(),
                "span {}..{} outside the {}-byte file: {d:?}",
                span.start,
                span.end,
                text.len()
            );
        }
    }
    let rendered = render_all(diags, sources);
    for d in diags {
        // Control characters are shown replaced, line ends escaped.
        assert!(
            rendered.contains(&*apir_ir::source::shown_line(&d.message)),
            "rendering lost `{}`:\n{rendered}",
            d.message
        );
        if d.span.is_some() {
            assert!(
                rendered.contains(FILE),
                "rendering of a located diagnostic names no file:\n{rendered}"
            );
        }
    }
}

/// Verifier diagnostics of a parsed module point at the op, operand or
/// buffer at fault: located, non-empty spans.
fn check_verifier_diagnostics(diags: &[Diagnostic], text: &str, sources: &SourceMap) {
    for d in diags {
        let span = d
            .span
            .unwrap_or_else(|| panic!("unlocated verifier diagnostic {d:?}"));
        assert!(span.start < span.end, "empty span for {d:?} in:\n{text}");
    }
    check_diagnostics(diags, text, sources);
}

fn verify_messages(m: &apir_ir::Module) -> Vec<String> {
    verify(m)
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.message)
        .collect()
}

/// Parses `text` whole and split at `// -----` (with an arch override),
/// verifies what parses, and checks diagnostics and round trips.
fn check(text: &str) {
    match parse_str(FILE, text, ParseOptions::default()) {
        Ok((m, sources)) => {
            if let Err(diags) = verify(&m) {
                check_verifier_diagnostics(&diags, text, &sources);
            }
            let printed = print_module(&m);
            let reparsed = match parse_str("printed.apir", &printed, ParseOptions::default()) {
                Ok((r, _)) => r,
                Err((d, sm)) => panic!(
                    "printed IR does not parse:\n{printed}\n{}\nfrom input:\n{text:?}",
                    render_all(&d, &sm)
                ),
            };
            assert_eq!(
                print_module(&reparsed),
                printed,
                "print -> parse -> print changed the text; input:\n{text:?}"
            );
            assert_eq!(
                verify_messages(&reparsed),
                verify_messages(&m),
                "the verifier disagrees after a round trip:\n{printed}"
            );
        }
        Err((diags, sources)) => {
            assert!(!diags.is_empty(), "a failed parse reports no diagnostic");
            check_diagnostics(&diags, text, &sources);
        }
    }
    let mut sources = SourceMap::new();
    let file = sources.add(FILE, text);
    for range in split_input(text) {
        match parse_module(
            &sources,
            file,
            range,
            ParseOptions {
                arch: Some(Arch::V4),
            },
        ) {
            Ok(m) => {
                if let Err(diags) = verify(&m) {
                    check_verifier_diagnostics(&diags, text, &sources);
                }
            }
            Err(diags) => check_diagnostics(&diags, text, &sources),
        }
    }
}

/// One byte-level edit.
#[derive(Clone, Debug)]
enum Mutation {
    Insert(Index, Vec<u8>),
    Replace(Index, Vec<u8>),
    Delete(Index, usize),
    Truncate(Index),
    Duplicate { from: Index, len: usize, to: Index },
}

/// Bytes to insert: any byte (possibly breaking UTF-8, repaired later),
/// digits, punctuation the grammar uses, known tokens, any character.
fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        prop::sample::select(b"0123456789".to_vec()).prop_map(|b| vec![b]),
        prop::sample::select(b"[]{}<>%@=,+-:\"\\/ \n\tx".to_vec()).prop_map(|b| vec![b]),
        prop::sample::select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
        any::<char>().prop_map(|c| c.to_string().into_bytes()),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), chunk()).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        3 => (any::<Index>(), chunk()).prop_map(|(at, bytes)| Mutation::Replace(at, bytes)),
        3 => (any::<Index>(), 1usize..16).prop_map(|(at, len)| Mutation::Delete(at, len)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), 1usize..64, any::<Index>()).prop_map(|(from, len, to)| Mutation::Duplicate { from, len, to }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Insert(at, chunk) => {
            let at = at.index(len + 1);
            bytes.splice(at..at, chunk.iter().copied());
        }
        Mutation::Replace(_, _) | Mutation::Delete(_, _) | Mutation::Duplicate { .. }
            if len == 0 => {}
        Mutation::Replace(at, chunk) => {
            let at = at.index(len);
            let end = (at + chunk.len()).min(len);
            bytes.splice(at..end, chunk.iter().copied());
        }
        Mutation::Delete(at, n) => {
            let at = at.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Truncate(at) => bytes.truncate(at.index(len + 1)),
        Mutation::Duplicate { from, len: n, to } => {
            let from = from.index(len);
            let slice = bytes[from..(from + n).min(len)].to_vec();
            let to = to.index(len + 1);
            bytes.splice(to..to, slice);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutated_inputs_never_panic(seed in prop::sample::select(SEEDS.to_vec()), mutations in prop::collection::vec(mutation(), 1..5)) {
        let mut bytes = seed.as_bytes().to_vec();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        // The parser takes &str; invalid sequences become U+FFFD.
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn token_soup_never_panics(
        header in any::<bool>(),
        tokens in prop::collection::vec((prop::sample::select(TOKENS), prop::sample::select(&[" ", "", "\n"][..])), 0..60),
    ) {
        let mut text = if header { HEADER.to_string() } else { String::new() };
        for (t, sep) in tokens {
            text.push_str(t);
            text.push_str(sep);
        }
        check(&text);
    }
}

/// Integer literals: in and out of every range the grammar and verifier
/// check, decimal and hex.
fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..300).prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| format!("{v:#x}")),
        any::<u32>().prop_map(|v| format!("{v:#X}")),
        Just(u128::MAX.to_string()),
        Just(format!("{}0", u128::MAX)),
        Just("0x".to_string()),
        Just("-0".to_string()),
    ]
}

/// Byte ranges of the alphanumeric runs that start with a digit (decimal and
/// hex literals, and dims like `128x64x`).
fn number_runs(text: &str) -> Vec<std::ops::Range<usize>> {
    let b = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let start = i;
            while i < b.len() && (b[i].is_ascii_hexdigit() || b[i] == b'x') {
                i += 1;
            }
            runs.push(start..i);
        } else {
            i += 1;
        }
    }
    runs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Mostly well-formed input with odd numbers: exercises the range checks
    /// of the parser and the verifier's bounds rules rather than syntax
    /// recovery.
    #[test]
    fn replaced_numbers_never_panic(
        seed in prop::sample::select(SEEDS.to_vec()),
        edits in prop::collection::vec((any::<Index>(), literal()), 1..4),
    ) {
        let mut text = seed.to_string();
        for (at, lit) in edits {
            let runs = number_runs(&text);
            if runs.is_empty() {
                break;
            }
            text.replace_range(at.get(&runs).clone(), &lit);
        }
        check(&text);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn arbitrary_module_bodies_never_panic(body in "\\PC{0,200}") {
        check(&format!("module attributes {{arch = \"v2\"}} {{\n{body}\n}}\n"));
    }
}

/// The unmutated seeds parse and verify (so mutations start from valid IR).
#[test]
fn seeds_are_valid() {
    for seed in SEEDS {
        let first = split_input(seed)[0].clone();
        let (m, _) = parse_str(FILE, &seed[first], ParseOptions::default())
            .unwrap_or_else(|(d, sm)| panic!("{}", render_all(&d, &sm)));
        if let Err(d) = verify(&m) {
            panic!("{:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>());
        }
        check(seed);
    }
}

/// Regression: the span of an unknown-escape error covers the backslash
/// and the next *byte*, so when the escaped character is multi-byte the
/// span ends inside it (here 37..39 with `é` at 38..40). Slicing the source
/// with the span (`&text[start..end]`) then panics. Expected: the span ends
/// on a character boundary (after the whole `é`).
#[test]
fn escape_error_span_ends_on_a_char_boundary() {
    let text = "module attributes {arch = \"v2\", a = \"\\é\"} {\n}\n";
    let Err((diags, _)) = parse_str(FILE, text, ParseOptions::default()) else {
        panic!("an unknown escape must not parse");
    };
    for d in &diags {
        let span = d.span.unwrap();
        assert!(
            text.is_char_boundary(span.start as usize) && text.is_char_boundary(span.end as usize),
            "{}..{} of {text:?}: {}",
            span.start,
            span.end,
            d.message
        );
    }
}
