//! `apir-dis`: decode descriptor bytes, print the annotated dump and the
//! decoded access pattern (or, for `--kind SDMA`, the decoded transfer), and
//! run the validators on them.

use apir_compiler::driver::ReadAgain;
use apir_compiler::wire;
use apir_ir::source::shown_line;
use apir_ir::source::MAX_SOURCE_BYTES;
use apir_ir::target::descriptor::Descriptor;
use apir_ir::target::sdma::{self, SdmaDescriptor};
use apir_ir::target::validate::{check_m4d_active_channels, descriptor_failures, Invalid};
use apir_ir::target::{DescriptorKind, Direction, Dtype, MemorySet};
use apir_ir::Arch;
use apir_tools::cli::dis::Args;
use apir_tools::{
    open_once, read_error_message, read_head, read_input, too_long_message, write_stdout,
    OutputFile, EXIT_INPUT, EXIT_OK, EXIT_USAGE,
};
use std::fmt::Write as _;
use std::io::{BufRead, Read};

fn main() {
    apir_tools::cli_main("apir-dis", run)
}

/// Why hex text is not bytes, and where: the 1-based line and column (in
/// characters) of the offending character, and its byte offset.
#[derive(Debug)]
struct HexError {
    line: usize,
    col: usize,
    byte: usize,
    fault: HexFault,
}

#[derive(Debug)]
enum HexFault {
    /// A printable character that is no hex digit.
    NotHex(char),
    /// A control or non-ASCII character: the input is likely raw bytes.
    NotText(char),
    /// An odd number of digits.
    Odd(usize),
}

impl HexError {
    /// The message for a one-line text (`--hex`, a field of apir-opt's
    /// output), the place given as the position along it.
    fn describe(&self) -> String {
        match self.fault {
            HexFault::NotHex(c) => format!("`{c}` at position {} is not a hex digit", self.col),
            HexFault::NotText(c) => format!(
                "the input is not hex text (byte {} is {c:?}); use --binary for raw bytes",
                self.byte + 1
            ),
            HexFault::Odd(n) => format!("{n} hex digits do not make whole bytes"),
        }
    }

    /// The message for the file `name`, located at `name:line:col`.
    fn in_file(&self, name: &str) -> String {
        match self.fault {
            HexFault::NotHex(c) => format!(
                "{name}:{}:{}: error: `{c}` is not a hex digit",
                self.line, self.col
            ),
            HexFault::NotText(_) => {
                format!(
                    "{name}:{}:{}: error: {}",
                    self.line,
                    self.col,
                    self.describe()
                )
            }
            HexFault::Odd(_) => format!("error: `{name}`: {}", self.describe()),
        }
    }
}

/// Hex text to bytes: whitespace is ignored, and so are lines starting with
/// `#` or `//` (comments in a hex file), and a `0x` before the first digit.
fn parse_hex(text: &str) -> Result<Vec<u8>, HexError> {
    let mut digits = Vec::with_capacity(text.len());
    let mut byte = 0;
    let mut first = true;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let start = byte;
        byte += line.len();
        let t = line.trim_start();
        if t.starts_with('#') || t.starts_with("//") {
            continue;
        }
        let mut chars = line.char_indices().enumerate();
        while let Some((col, (at, c))) = chars.next() {
            if c.is_whitespace() {
                continue;
            }
            if first {
                first = false;
                let rest = &line[at..];
                if rest.starts_with("0x") || rest.starts_with("0X") {
                    chars.next();
                    continue;
                }
            }
            let Some(d) = c.to_digit(16) else {
                let fault = if c.is_control() || !c.is_ascii() {
                    HexFault::NotText(c)
                } else {
                    HexFault::NotHex(c)
                };
                return Err(HexError {
                    line: n + 1,
                    col: col + 1,
                    byte: start + at,
                    fault,
                });
            };
            digits.push(d as u8);
        }
    }
    if !digits.len().is_multiple_of(2) {
        return Err(HexError {
            line: 1,
            col: 1,
            byte: 0,
            fault: HexFault::Odd(digits.len()),
        });
    }
    Ok(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
}

/// The `--kind` that selects SDMA descriptors.
const SDMA_KIND: &str = "SDMA";

/// The descriptor bytes from `--hex`, INPUT or stdin; the error is ready to
/// print.
fn input_bytes(args: &Args) -> Result<Vec<u8>, String> {
    match &args.hex {
        Some(h) => parse_hex(h).map_err(|e| format!("error: {}", e.describe())),
        None => match read_input(args.input.as_deref()) {
            Err(e) => Err(e),
            Ok((_, raw)) if args.binary => Ok(raw),
            Ok((name, raw)) => match String::from_utf8(raw) {
                Ok(text) => parse_hex(&text).map_err(|e| e.in_file(&name)),
                Err(_) => Err(format!(
                    "error: `{name}` is not hex text (use --binary for raw bytes)"
                )),
            },
        },
    }
}

fn run(args: Args) -> i32 {
    match args.kind.as_deref() {
        Some(SDMA_KIND) => run_sdma(&args),
        Some(kind) => run_one(&args, kind),
        None => run_stream(&args),
    }
}

/// A dtype name, or the usage error listing the names.
fn dtype_of(name: Option<&str>) -> Result<Dtype, String> {
    let name = name.unwrap_or("f32");
    Dtype::from_name(name).ok_or_else(|| {
        let names: Vec<_> = Dtype::names().collect();
        let hint = apir_ir::diag::did_you_mean(name, names.iter().copied())
            .map_or(String::new(), |c| format!("; did you mean `{c}`?"));
        format!(
            "error: unknown dtype `{name}` (expected one of {}){hint}",
            names.join(", ")
        )
    })
}

/// One descriptor decoded and checked, rendered as text or as JSON.
struct Checked {
    /// The annotated dump, the free dims and every failed check (empty
    /// when JSON was asked for).
    text: String,
    /// The same as JSON (`null` when text was asked for).
    json: serde_json::Value,
    valid: bool,
}

/// Decodes `bytes` as `kind` and runs every validator of `arch` on them
/// (and the active-channel check when `channels` are given), rendered as
/// JSON if `json`, else as text.
fn check(
    kind: DescriptorKind,
    arch: Arch,
    dtype: Dtype,
    channels: Option<u32>,
    bytes: &[u8],
    json: bool,
) -> Result<Checked, String> {
    if !kind.exists_on(arch) {
        return Err(format!(
            "{} does not exist on {} (its 4D destinations use TENSOR4D)",
            kind.name(),
            arch.name()
        ));
    }
    let d = Descriptor::decode(kind, bytes).map_err(|e| e.to_string())?;
    let dir = match kind {
        DescriptorKind::MemPattern(_) => Direction::Write,
        DescriptorKind::Tensor(_) => Direction::Read,
    };
    // Every failed check, not only the first.
    let mut failures: Vec<Invalid> =
        descriptor_failures(bytes, kind, dtype, arch, dir, MemorySet::SP);
    if let Some(ch) = channels {
        if let Err(e) = check_m4d_active_channels(bytes, ch, arch) {
            failures.push(e);
        }
    }
    let n = d.slots();
    let pattern: Vec<(i16, u16)> = (0..n).rev().map(|i| (d.steps[i], d.nums[i])).collect();
    let valid = failures.is_empty();
    if json {
        let json = serde_json::json!({
            "kind": kind.name(),
            "arch": arch.name(),
            "bytes": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "addr4": apir_ir::target::dump::describe_addr4(d.addr, arch),
            "index_addr4": d.index_addr.map(|w| apir_ir::target::dump::describe_addr4(w, arch)),
            "free_dims": pattern.iter().map(|(s, n)| [i64::from(*s), i64::from(*n)]).collect::<Vec<_>>(),
            "valid": valid,
            "failures": failures.iter().map(failure_json).collect::<Vec<_>>(),
        });
        return Ok(Checked {
            text: String::new(),
            json,
            valid,
        });
    }
    // Written straight into one buffer: this runs once per descriptor
    // of a stream.
    let mut text = String::with_capacity(512);
    let _ = writeln!(
        text,
        "{} ({} bytes, {})",
        kind.name(),
        bytes.len(),
        arch.name()
    );
    apir_ir::target::dump::annotate_into(&mut text, &d, arch);
    text.push_str("free dims (outermost first, in elements): [");
    for (i, (s, n)) in pattern.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(text, "{sep}[{s}, {n}]");
    }
    text.push_str("]\n");
    if failures.is_empty() {
        text.push_str("valid\n");
    } else {
        for f in &failures {
            push_failure_line(&mut text, f);
        }
    }
    Ok(Checked {
        text,
        json: serde_json::Value::Null,
        valid,
    })
}

/// `--kind K`: one descriptor from `--hex`, INPUT or stdin.
fn run_one(args: &Args, kind_name: &str) -> i32 {
    let Some(kind) = DescriptorKind::from_name(kind_name) else {
        let mut names: Vec<_> = DescriptorKind::all().map(|k| k.name()).collect();
        names.push(SDMA_KIND);
        let hint = apir_ir::diag::did_you_mean(kind_name, names.iter().copied())
            .map_or(String::new(), |c| format!("; did you mean `{c}`?"));
        apir_tools::report!(
            "error: unknown kind `{kind_name}` (expected one of {}){hint}",
            names.join(", ")
        );
        return EXIT_USAGE;
    };
    let arch = match args.arch {
        Some(arch) => arch,
        None => {
            apir_tools::report!(
                "error: --arch <ARCH> is required for --kind {} (only SDMA descriptors are the same on every arch)",
                kind.name()
            );
            return EXIT_USAGE;
        }
    };
    if !kind.exists_on(arch) {
        apir_tools::report!(
            "error: {} does not exist on {} (its 4D destinations use TENSOR4D)",
            kind.name(),
            arch.name()
        );
        return EXIT_USAGE;
    }
    let dtype = match dtype_of(args.dtype.as_deref()) {
        Ok(d) => d,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_USAGE;
        }
    };
    let bytes = match input_bytes(args) {
        Ok(b) => b,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    let c = match check(kind, arch, dtype, args.channels, &bytes, args.json) {
        Ok(c) => c,
        Err(e) => {
            apir_tools::report!("error: {e}");
            return EXIT_INPUT;
        }
    };
    let out = if args.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&c.json).unwrap_or_default()
        )
    } else {
        c.text
    };
    if let Err(msg) = write_stdout(out.as_bytes()) {
        apir_tools::report!("{msg}");
        return EXIT_INPUT;
    }
    if c.valid {
        EXIT_OK
    } else {
        EXIT_INPUT
    }
}

/// One descriptor of an apir-opt output.
struct Item {
    /// Where it is: `byte N` or `line N`, and its section or document.
    at: String,
    op: u64,
    role: String,
    kind: DescriptorKind,
    arch: Arch,
    dtype: Dtype,
    /// Active channels (`None`: none travel with it).
    channels: Option<u32>,
    bytes: Vec<u8>,
}

/// The channel count that travels with a descriptor (`None` for 0, which
/// apir-opt writes when none does). Any other count is checked as given,
/// however large (the validator reports one past 128).
fn active(channels: u32) -> Option<u32> {
    (channels > 0).then_some(channels)
}

/// Most characters of a value an error about a JSON field quotes.
const JSON_SHOWN: usize = 40;

/// The error for `field` at `at` (`document 0, ops[3] (op 7),
/// operands[1]`): what it is, missing or its value (shortened, shown as
/// diagnostics show text), and what was `expected`.
fn json_field(at: &str, field: &str, found: Option<&serde_json::Value>, expected: &str) -> String {
    let found = match found {
        None => "missing".to_string(),
        Some(v) => {
            let text = v.to_string();
            let shown: String = text.chars().take(JSON_SHOWN).collect();
            let more = if shown.len() < text.len() { "..." } else { "" };
            format!("{}{more}", apir_ir::source::shown_line(&shown))
        }
    };
    format!("{at}: `{field}` is {found}; expected {expected}")
}

/// What an arch is, for [`json_field`]: one of the arches' names.
fn arch_expected() -> String {
    let names: Vec<String> = Arch::ALL
        .iter()
        .map(|a| format!("\"{}\"", a.name()))
        .collect();
    format!("one of {}", names.join(", "))
}

/// A document's `arch` (`null` in the document of a run that failed before
/// its arch was known, which holds no ops: needed only to decode one).
fn json_arch(d: usize, arch: ArchFact) -> Result<Option<Arch>, String> {
    match arch {
        ArchFact::Null => Ok(None),
        ArchFact::Known(a) => Ok(Some(a)),
        ArchFact::Bad(Some(name)) => Err(json_field(
            &format!("document {d}"),
            "arch",
            Some(&serde_json::Value::String(name)),
            &arch_expected(),
        )),
        ArchFact::Bad(None) => Err(format!(
            "document {d}: `arch` is not a string; expected {}",
            arch_expected()
        )),
    }
}

/// The descriptors of op `op`, at position `pos` of the ops of document
/// `d` of apir-opt's `--emit=json` output, handed to `each` in order.
fn json_op_items(
    d: usize,
    pos: usize,
    arch: Option<Arch>,
    op: &serde_json::Value,
    each: &mut dyn FnMut(Item) -> Result<(), String>,
) -> Result<(), String> {
    let mut at = format!("document {d}, ops[{pos}]");
    let Some(arch) = arch else {
        let msg = format!("document {d}: `arch` is missing or null, and its ops need one");
        return Err(format!("{msg}; expected {}", arch_expected()));
    };
    let index = op
        .get("index")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| json_field(&at, "index", op.get("index"), "an op index (0 or more)"))?;
    at = format!("{at} (op {index})");
    let operands = op
        .get("operands")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| json_field(&at, "operands", op.get("operands"), "an array"))?;
    for (j, o) in operands.iter().enumerate() {
        let at = format!("{at}, operands[{j}]");
        let field = |name: &str, expected: &str| json_field(&at, name, o.get(name), expected);
        let kind = o
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .and_then(DescriptorKind::from_name)
            .ok_or_else(|| {
                let names: Vec<_> = DescriptorKind::all().map(DescriptorKind::name).collect();
                field("kind", &format!("one of {}", names.join(", ")))
            })?;
        let dtype = match o.get("dtype") {
            Some(v) => v.as_str().and_then(Dtype::from_name).ok_or_else(|| {
                field(
                    "dtype",
                    &format!("one of {}", Dtype::names().collect::<Vec<_>>().join(", ")),
                )
            })?,
            None => Dtype::F32,
        };
        // Left out: none travel with it; anything but a count that fits
        // 32 bits is an error, not dropped.
        let channels = match o.get("channels") {
            None => 0,
            Some(v) => v
                .as_u64()
                .and_then(|c| u32::try_from(c).ok())
                .ok_or_else(|| field("channels", "a count from 0 to 4294967295"))?,
        };
        let bytes = parse_hex(
            o.get("bytes")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| field("bytes", "a string of hex digits"))?,
        )
        .map_err(|e| format!("{at}: `bytes`: {}", e.describe()))?;
        each(Item {
            at: format!("document {d}"),
            op: index,
            role: o["role"].as_str().unwrap_or("").to_string(),
            kind,
            arch,
            dtype,
            channels: active(channels),
            bytes,
        })?;
    }
    Ok(())
}

/// The second pass over apir-opt's JSON: each document's `arch` and `ops`
/// checked from the first pass's facts, each op's descriptors written.
struct JsonItems<'a, 'w> {
    facts: &'a Facts,
    /// The arch of the document being read.
    arch: Option<Arch>,
    /// The position of the next op in the document's ops.
    pos: usize,
    w: ItemWriter<'w>,
}

impl json_stream::OnDoc for JsonItems<'_, '_> {
    fn doc(&mut self, d: usize) -> Result<(), String> {
        let fact = self.facts.get(d).unwrap_or_default();
        self.arch = json_arch(d, fact.arch)?;
        self.pos = 0;
        if !fact.ops_array {
            return Err(format!(
                "document {d}: `ops` is missing or not an array; expected an array of ops"
            ));
        }
        Ok(())
    }

    fn op(&mut self, d: usize, op: &serde_json::Value) -> Result<(), String> {
        let w = &mut self.w;
        let pos = self.pos;
        self.pos += 1;
        json_op_items(d, pos, self.arch, op, &mut |item| {
            w.write(&item);
            Ok(())
        })
    }
}

/// apir-opt's `--emit=json` output (one document or an array of them)
/// read as a stream, in memory of the order of one op, not of the input:
/// a first pass checks that it is JSON (parsing every value as
/// `serde_json::Value` does, holding none) and notes what of each
/// document is read before its ops (its `arch`, which of its `ops` keys
/// is the last, as a map keeps the last); a second hands each op of the
/// last `ops` array of each document, parsed as a `Value`, to
/// [`json_op_items`]. The errors are those of the input parsed whole
/// into one `Value`, in the same order.
mod json_stream {
    use apir_ir::Arch;
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    /// What a document's `arch` is (its last, as a map keeps the last).
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub enum ArchFact {
        /// None, `null`, or the document is not an object.
        #[default]
        Null,
        /// An arch's name.
        Known(Arch),
        /// Anything else: a string (its first [`super::JSON_SHOWN`]
        /// characters, for the error to quote), or `None` for another
        /// kind of value.
        Bad(Option<String>),
    }

    /// What the first pass notes of a document.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct DocFact {
        pub arch: ArchFact,
        /// How many `ops` keys it has.
        pub ops_keys: u32,
        /// Whether the last `ops` is an array.
        pub ops_array: bool,
    }

    impl DocFact {
        /// Whether the document stops the second pass before its ops (so
        /// that no later document's facts are needed).
        fn stops(&self) -> bool {
            matches!(self.arch, ArchFact::Bad(_)) || !self.ops_array
        }
    }

    /// A visitor's methods for JSON's booleans and numbers, each giving
    /// `$v` (parsed as `serde_json::Value` parses them: a number out of
    /// range is an error).
    macro_rules! numbers {
        ($t:ty, $v:expr) => {
            fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
                Ok($v)
            }
            fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
                Ok($v)
            }
        };
    }

    /// Every value of the input parsed as `serde_json::Value` parses it
    /// (strings unescaped and checked, numbers in range), none kept.
    struct Skip;

    impl<'de> DeserializeSeed<'de> for Skip {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(SkipVisitor)
        }
    }

    struct SkipVisitor;

    impl<'de> Visitor<'de> for SkipVisitor {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        numbers!((), ());
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_none<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            Skip.deserialize(d)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Skip)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_key_seed(Skip)?.is_some() {
                map.next_value_seed(Skip)?;
            }
            Ok(())
        }
    }

    /// A value, checked as [`Skip`] does, and what kind it is.
    #[derive(PartialEq)]
    enum Kind {
        Null,
        Str(String),
        Array,
        Other,
    }

    struct KindOf;

    impl<'de> DeserializeSeed<'de> for KindOf {
        type Value = Kind;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Kind, D::Error> {
            d.deserialize_any(KindVisitor)
        }
    }

    struct KindVisitor;

    impl<'de> Visitor<'de> for KindVisitor {
        type Value = Kind;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        numbers!(Kind, Kind::Other);
        fn visit_str<E>(self, v: &str) -> Result<Kind, E> {
            Ok(Kind::Str(v.to_string()))
        }
        fn visit_unit<E>(self) -> Result<Kind, E> {
            Ok(Kind::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Kind, A::Error> {
            SkipVisitor.visit_seq(seq).map(|()| Kind::Array)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Kind, A::Error> {
            SkipVisitor.visit_map(map).map(|()| Kind::Other)
        }
    }

    /// A document's facts (the first pass).
    struct DocFacts;

    impl<'de> DeserializeSeed<'de> for DocFacts {
        type Value = DocFact;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<DocFact, D::Error> {
            d.deserialize_any(DocFactsVisitor)
        }
    }

    struct DocFactsVisitor;

    impl<'de> Visitor<'de> for DocFactsVisitor {
        type Value = DocFact;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        numbers!(DocFact, DocFact::default());
        fn visit_str<E>(self, _: &str) -> Result<DocFact, E> {
            Ok(DocFact::default())
        }
        fn visit_unit<E>(self) -> Result<DocFact, E> {
            Ok(DocFact::default())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<DocFact, A::Error> {
            SkipVisitor.visit_seq(seq).map(|()| DocFact::default())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DocFact, A::Error> {
            let mut fact = DocFact::default();
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "arch" => {
                        fact.arch = match map.next_value_seed(KindOf)? {
                            Kind::Null => ArchFact::Null,
                            Kind::Str(s) => Arch::from_name(&s).map_or_else(
                                || {
                                    let mut s = s;
                                    if let Some((at, _)) =
                                        s.char_indices().nth(super::JSON_SHOWN + 1)
                                    {
                                        s.truncate(at);
                                    }
                                    ArchFact::Bad(Some(s))
                                },
                                ArchFact::Known,
                            ),
                            Kind::Array | Kind::Other => ArchFact::Bad(None),
                        }
                    }
                    "ops" => {
                        fact.ops_keys = fact.ops_keys.saturating_add(1);
                        fact.ops_array = map.next_value_seed(KindOf)? == Kind::Array;
                    }
                    _ => map.next_value_seed(Skip)?,
                }
            }
            Ok(fact)
        }
    }

    /// The documents' facts, in runs of documents alike: the memory of the
    /// runs, not of the documents (an array of many documents, as
    /// `--split-input-file` writes, is a few runs).
    #[derive(Debug, Default)]
    pub struct Facts {
        /// Each run's first document and its facts, in document order.
        runs: Vec<(u64, DocFact)>,
        /// Documents in all.
        len: u64,
    }

    impl Facts {
        fn push(&mut self, fact: DocFact) {
            if self.runs.last().is_none_or(|r| r.1 != fact) {
                self.runs.push((self.len, fact));
            }
            self.len += 1;
        }

        /// Document `d`'s facts.
        pub fn get(&self, d: usize) -> Option<DocFact> {
            let d = d as u64;
            if d >= self.len {
                return None;
            }
            let run = self.runs.partition_point(|r| r.0 <= d);
            self.runs.get(run.checked_sub(1)?).map(|r| r.1.clone())
        }

        fn last(&self) -> Option<&DocFact> {
            self.runs.last().map(|r| &r.1)
        }
    }

    /// The facts of every document of the input (the first pass).
    pub struct FactsOf;

    impl<'de> DeserializeSeed<'de> for FactsOf {
        type Value = Facts;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Facts, D::Error> {
            d.deserialize_any(FactsVisitor)
        }
    }

    struct FactsVisitor;

    impl<'de> Visitor<'de> for FactsVisitor {
        type Value = Facts;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Facts, A::Error> {
            // Up to the first document that stops the second pass; the
            // rest is only checked.
            let mut docs = Facts::default();
            while docs.last().is_none_or(|d| !d.stops()) {
                match seq.next_element_seed(DocFacts)? {
                    Some(doc) => docs.push(doc),
                    None => return Ok(docs),
                }
            }
            while seq.next_element_seed(Skip)?.is_some() {}
            Ok(docs)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Facts, A::Error> {
            let mut docs = Facts::default();
            docs.push(DocFactsVisitor.visit_map(map)?);
            Ok(docs)
        }
    }

    /// What the second pass does with document `d`'s facts (before its
    /// ops: `Err` stops the pass with that error) and with each op of it.
    pub trait OnDoc {
        /// Document `d` begins: whether its facts let its ops be read.
        fn doc(&mut self, d: usize) -> Result<(), String>;
        /// Op `op` of document `d`.
        fn op(&mut self, d: usize, op: &serde_json::Value) -> Result<(), String>;
    }

    /// Why the second pass stopped.
    pub enum Stopped<E> {
        /// `on`'s error.
        On(String),
        /// The deserializer's: a read that failed (the syntax was checked
        /// by the first pass, over the same input).
        Parse(E),
    }

    /// Runs the second pass over the input behind `de`, whose documents'
    /// facts are `facts`.
    pub fn each_op<'de, D: Deserializer<'de>>(
        de: D,
        facts: &Facts,
        on: &mut dyn OnDoc,
    ) -> Result<(), Stopped<D::Error>> {
        let mut stopped = None;
        let seed = Docs {
            facts,
            on,
            stopped: &mut stopped,
        };
        let parsed = seed.deserialize(de);
        match (stopped, parsed) {
            (Some(msg), _) => Err(Stopped::On(msg)),
            (None, Ok(())) => Ok(()),
            (None, Err(e)) => Err(Stopped::Parse(e)),
        }
    }

    struct Docs<'a> {
        facts: &'a Facts,
        on: &'a mut dyn OnDoc,
        stopped: &'a mut Option<String>,
    }

    impl Docs<'_> {
        /// Stops with `msg`.
        fn stop<E: de::Error>(&mut self, msg: String) -> E {
            *self.stopped = Some(msg);
            E::custom("stopped")
        }
    }

    impl<'de> DeserializeSeed<'de> for Docs<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Docs<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("apir-opt's JSON")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            let mut d = 0;
            loop {
                if self.facts.get(d).is_some() {
                    if let Err(msg) = self.on.doc(d) {
                        return Err(self.stop(msg));
                    }
                }
                let doc = Doc {
                    d,
                    fact: self.facts.get(d).unwrap_or_default(),
                    on: &mut *self.on,
                    stopped: &mut *self.stopped,
                };
                if seq.next_element_seed(doc)?.is_none() {
                    return Ok(());
                }
                d += 1;
            }
        }
        fn visit_map<A: MapAccess<'de>>(mut self, map: A) -> Result<(), A::Error> {
            if let Err(msg) = self.on.doc(0) {
                return Err(self.stop(msg));
            }
            let fact = self.facts.get(0).unwrap_or_default();
            Doc {
                d: 0,
                fact,
                on: self.on,
                stopped: self.stopped,
            }
            .visit_map(map)
        }
    }

    /// One document: its last `ops` array's ops handed on, the rest
    /// skipped.
    struct Doc<'a> {
        d: usize,
        fact: DocFact,
        on: &'a mut dyn OnDoc,
        stopped: &'a mut Option<String>,
    }

    impl<'de> DeserializeSeed<'de> for Doc<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Doc<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a document")
        }
        numbers!((), ());
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
            SkipVisitor.visit_seq(seq)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut ops = 0;
            while let Some(key) = map.next_key::<String>()? {
                if key == "ops" {
                    ops += 1u32;
                    if ops == self.fact.ops_keys && self.fact.ops_array {
                        map.next_value_seed(Ops {
                            d: self.d,
                            on: &mut *self.on,
                            stopped: &mut *self.stopped,
                        })?;
                        continue;
                    }
                }
                map.next_value_seed(Skip)?;
            }
            Ok(())
        }
    }

    /// The last `ops` array of document `d`: each op parsed as a `Value`
    /// and handed on.
    struct Ops<'a> {
        d: usize,
        on: &'a mut dyn OnDoc,
        stopped: &'a mut Option<String>,
    }

    impl<'de> DeserializeSeed<'de> for Ops<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    impl<'de> Visitor<'de> for Ops<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of ops")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(op) = seq.next_element::<serde_json::Value>()? {
                if let Err(msg) = self.on.op(self.d, &op) {
                    *self.stopped = Some(msg);
                    return Err(de::Error::custom("stopped"));
                }
            }
            Ok(())
        }
    }
}
use json_stream::{ArchFact, Facts};

/// The descriptor of line `n` (0-based) of apir-opt's `--emit=wire-hex`
/// lines (`op role kind channels hex`), of `arch` and `dtype`; `None` for
/// a blank or comment line.
fn hex_line_item(n: usize, line: &str, arch: Arch, dtype: Dtype) -> Option<Result<Item, String>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with("//") {
        return None;
    }
    let bad = || {
        format!(
            "line {}: expected `OP ROLE KIND CHANNELS HEX` (apir-opt --emit=wire-hex), found `{line}`",
            n + 1
        )
    };
    let item = || -> Result<Item, String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [op, role, kind, channels, hex] = f[..] else {
            return Err(bad());
        };
        let kind = DescriptorKind::from_name(kind).ok_or_else(bad)?;
        let op: u64 = op.parse().map_err(|_| bad())?;
        let channels: u32 = channels.parse().map_err(|_| bad())?;
        let bytes = parse_hex(hex).map_err(|e| format!("line {}: {}", n + 1, e.describe()))?;
        Ok(Item {
            at: format!("line {}", n + 1),
            op,
            role: role.to_string(),
            kind,
            arch,
            dtype,
            channels: active(channels),
            bytes,
        })
    };
    Some(item())
}

/// What one reading of a text input tells, as the checks of the text held
/// whole would: its length, whether it is UTF-8, and (when it is) its
/// first character that is not white space and whether the line it starts
/// has five fields (apir-opt's `wire-hex`).
#[derive(Default)]
struct TextFacts {
    bytes: u64,
    utf8: bool,
    first: Option<char>,
    fields: usize,
    /// The first line is read to its end (or the input's).
    first_line_done: bool,
}

/// Reads `input` to its end once, in bounded memory, for its
/// [`TextFacts`].
fn text_facts(mut input: impl Read) -> std::io::Result<TextFacts> {
    let mut facts = TextFacts {
        utf8: true,
        ..TextFacts::default()
    };
    let mut buf = vec![0u8; 64 << 10];
    // A UTF-8 sequence cut by the read's end, carried to the next.
    let mut carry: Vec<u8> = Vec::new();
    let mut in_field = false;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        facts.bytes += n as u64;
        if !facts.utf8 {
            continue;
        }
        carry.extend_from_slice(&buf[..n]);
        let valid = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => {
                facts.utf8 = false;
                continue;
            }
        };
        if !facts.first_line_done {
            let text = std::str::from_utf8(&carry[..valid]).unwrap_or_default();
            for c in text.chars() {
                if facts.first.is_none() {
                    if c.is_whitespace() {
                        continue;
                    }
                    facts.first = Some(c);
                }
                if c == '\n' {
                    facts.first_line_done = true;
                    break;
                }
                let field = !c.is_whitespace();
                facts.fields += usize::from(field && !in_field);
                in_field = field;
            }
        }
        carry.drain(..valid);
    }
    facts.utf8 &= carry.is_empty();
    Ok(facts)
}

/// Without `--kind`: every descriptor of apir-opt's `wire-bin`, `json` or
/// `wire-hex` output.
fn run_stream(args: &Args) -> i32 {
    if args.channels.is_some() {
        apir_tools::report!("error: --channels applies to one descriptor given with --kind; apir-opt's outputs carry each descriptor's channels");
        return EXIT_USAGE;
    }
    let mut input = match open_once(args.input.as_deref()) {
        Ok(x) => x,
        Err(e) => {
            apir_tools::report!("{e}");
            return EXIT_INPUT;
        }
    };
    let name = input.name.clone();
    if let Some(msg) = input.known_too_long() {
        apir_tools::report!("{msg}");
        return EXIT_INPUT;
    }
    // Enough of the input to tell framed wire-bin, which is decoded as it
    // is read, from text, which is read in passes.
    let head = match read_head(&mut input, wire::WIRE_BIN_MAGIC_LEN) {
        Ok(h) => h,
        Err(e) => {
            apir_tools::report!("{e}");
            return EXIT_INPUT;
        }
    };
    if wire::is_binary(&head) {
        if args.arch.is_some() || args.dtype.is_some() {
            apir_tools::report!("error: `{name}` is framed wire-bin, which names each descriptor's arch and dtype: leave out --arch and --dtype");
            return EXIT_USAGE;
        }
        let stream = std::io::Cursor::new(head).chain(input.reader);
        return finish_stream(|out| dis_binary(&name, stream, out, args.json));
    }
    // Text is read once for what the checks of the whole text need, then
    // again (a file from its start, stdin from its spool) for the
    // descriptors: `wire-hex` a line at a time, JSON in two more passes
    // (`json_stream`).
    let mut src = match input.read_again(head) {
        Ok(src) => Capped {
            inner: src,
            read: 0,
        },
        Err(e) => {
            apir_tools::report!("{}", read_error_message(&name, &e));
            return EXIT_INPUT;
        }
    };
    let facts = match text_facts(&mut src) {
        Ok(f) => f,
        Err(e) => {
            apir_tools::report!("{}", read_error_message(&name, &e));
            return EXIT_INPUT;
        }
    };
    if facts.bytes > MAX_SOURCE_BYTES as u64 {
        apir_tools::report!("{}", too_long_message(&name, None));
        return EXIT_INPUT;
    }
    if !facts.utf8 {
        apir_tools::report!("error: `{name}` is neither framed wire-bin nor text; give --kind (and --binary) to decode one descriptor's raw bytes");
        return EXIT_INPUT;
    }
    let again = |src: &mut Capped<Box<dyn ReadAgain>>| {
        src.rewind()
            .map_err(|e| DisError::Input(read_error_message(&name, &e)))
    };
    if matches!(facts.first, Some('{' | '[')) {
        if args.arch.is_some() || args.dtype.is_some() {
            apir_tools::report!("error: `{name}` is apir-opt JSON, which names each descriptor's arch and dtype: leave out --arch and --dtype");
            return EXIT_USAGE;
        }
        return finish_stream(|out| {
            again(&mut src)?;
            // A read that fails is a read error, as when the text was
            // read whole before it was parsed.
            let not_json = |e: serde_json::Error| {
                if e.is_io() {
                    DisError::Input(read_error_message(&name, &std::io::Error::from(e)))
                } else {
                    DisError::Input(format!("error: `{name}`: the input is not valid JSON: {e}"))
                }
            };
            let facts = {
                let mut de =
                    serde_json::Deserializer::from_reader(std::io::BufReader::new(&mut src));
                let facts = serde::de::DeserializeSeed::deserialize(json_stream::FactsOf, &mut de)
                    .map_err(not_json)?;
                de.end().map_err(not_json)?;
                facts
            };
            again(&mut src)?;
            let mut on = JsonItems {
                facts: &facts,
                arch: None,
                pos: 0,
                w: ItemWriter::new(out, args.json),
            };
            let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(&mut src));
            match json_stream::each_op(&mut de, &facts, &mut on) {
                Ok(()) => {}
                Err(json_stream::Stopped::On(msg)) => {
                    return Err(DisError::Input(format!("error: `{name}`: {msg}")))
                }
                Err(json_stream::Stopped::Parse(e)) => return Err(not_json(e)),
            }
            on.w.finish().map_err(DisError::Write)
        });
    }
    if facts.fields != 5 {
        apir_tools::report!("error: `{name}` is not apir-opt's wire-bin, wire-hex or json output; give --kind (and --arch) to decode one descriptor's hex");
        return EXIT_INPUT;
    }
    let Some(arch) = args.arch else {
        apir_tools::report!("error: wire-hex lines do not name their arch: give --arch (and --dtype if the operands are not f32)");
        return EXIT_USAGE;
    };
    let dtype = match dtype_of(args.dtype.as_deref()) {
        Ok(dtype) => dtype,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_USAGE;
        }
    };
    finish_stream(|out| {
        again(&mut src)?;
        let mut w = ItemWriter::new(out, args.json);
        let mut lines = std::io::BufReader::new(&mut src);
        let mut line = String::new();
        for n in 0.. {
            line.clear();
            let got = lines
                .read_line(&mut line)
                .map_err(|e| DisError::Input(read_error_message(&name, &e)))?;
            if got == 0 {
                break;
            }
            let text = line.strip_suffix('\n').unwrap_or(&line);
            let text = text.strip_suffix('\r').unwrap_or(text);
            match hex_line_item(n, text, arch, dtype) {
                None => {}
                Some(Ok(item)) => w.write(&item),
                Some(Err(e)) => return Err(DisError::Input(format!("error: `{name}`: {e}"))),
            }
        }
        w.finish().map_err(DisError::Write)
    })
}

/// Why decoding apir-opt's output stopped.
enum DisError {
    /// The input: a message ready to print.
    Input(String),
    /// A damaged `wire-bin` stream, read up to the damage: a message
    /// ready to print.
    Damaged(String),
    /// Writing the output.
    Write(std::io::Error),
}

/// Runs `write` on the output (standard output, written as each
/// descriptor is judged and held in bounded memory, then a temporary file,
/// until the whole output is made, as apir-opt's is: a run that fails
/// writes nothing) and gives the exit code: 0 when every descriptor is
/// valid, 1 when one is not or the input is bad.
fn finish_stream(write: impl FnOnce(&mut OutputFile) -> Result<usize, DisError>) -> i32 {
    let mut out = match OutputFile::create(std::path::Path::new("-")) {
        Ok(o) => o,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    let invalid = match write(&mut out) {
        Ok(n) => n,
        Err(DisError::Input(msg) | DisError::Damaged(msg)) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
        Err(DisError::Write(e)) => {
            apir_tools::report!("{}", out.error(&e));
            return EXIT_INPUT;
        }
    };
    if let Err(msg) = out.commit() {
        apir_tools::report!("{msg}");
        return EXIT_INPUT;
    }
    if invalid == 0 {
        EXIT_OK
    } else {
        EXIT_INPUT
    }
}

/// A reader that reads at most one byte past the input limit and counts
/// what it read: a stream longer than the limit, endless ones included, is
/// reported as too long, as when it was read whole.
struct Capped<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = (MAX_SOURCE_BYTES as u64 + 1).saturating_sub(self.read);
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        let got = self.inner.read(&mut buf[..n])?;
        self.read += got as u64;
        Ok(got)
    }
}

impl Capped<Box<dyn ReadAgain>> {
    /// Starts over from the input's start.
    fn rewind(&mut self) -> std::io::Result<()> {
        self.inner.rewind()?;
        self.read = 0;
        Ok(())
    }
}

/// Decodes and checks the records of the `wire-bin` stream `input` as
/// they are read ([`wire::BinReader`]: memory independent of the stream's
/// length), writing each to `out`; gives how many are invalid. The errors
/// are those of the stream read whole first: past the input limit, then a
/// read error, then the first damaged record (the rest of a damaged
/// stream is read, and dropped, to tell).
fn dis_binary(
    name: &str,
    input: impl Read,
    out: &mut dyn std::io::Write,
    json: bool,
) -> Result<usize, DisError> {
    let mut src = Capped {
        inner: input,
        read: 0,
    };
    let decoded = decode_binary(name, &mut src, out, json);
    if let Err(DisError::Damaged(_)) = decoded {
        if let Err(e) = std::io::copy(&mut src, &mut std::io::sink()) {
            return Err(DisError::Input(read_error_message(name, &e)));
        }
    }
    if src.read > MAX_SOURCE_BYTES as u64 {
        return Err(DisError::Input(too_long_message(name, None)));
    }
    decoded
}

/// [`dis_binary`]'s decoding, stopping at the first error.
fn decode_binary(
    name: &str,
    input: impl Read,
    out: &mut dyn std::io::Write,
    json: bool,
) -> Result<usize, DisError> {
    let mut w = ItemWriter::new(out, json);
    // The open section: its index and arch.
    let mut section: Option<(usize, Arch)> = None;
    for item in wire::BinReader::new(input) {
        match item {
            Ok(wire::BinItem::Section { arch, .. }) => {
                section = Some((section.map_or(0, |(i, _)| i + 1), arch));
            }
            Ok(wire::BinItem::Record(r)) => {
                // A record follows a section header (the reader says so).
                let Some((si, arch)) = section else { continue };
                w.write(&Item {
                    at: format!("section {si}, byte {}", r.offset),
                    op: u64::from(r.op),
                    role: r.role,
                    kind: r.kind,
                    arch,
                    dtype: r.dtype,
                    channels: active(u32::from(r.channels)),
                    bytes: r.bytes,
                });
            }
            Err(wire::BinReadError::Wire(e)) => {
                return Err(DisError::Damaged(format!("error: `{name}`: {e}")))
            }
            Err(wire::BinReadError::Read(e)) => {
                return Err(DisError::Input(read_error_message(name, &e)))
            }
        }
    }
    w.finish().map_err(DisError::Write)
}

/// Writes the dump of descriptors one at a time (`json`: one JSON array,
/// as `serde_json::to_string_pretty` prints it, an element at a time),
/// counting them and the invalid ones; [`ItemWriter::finish`] writes the
/// end (the array's close, or the summary line). A write that fails stops
/// the writing, not the reading: the error is [`ItemWriter::finish`]'s,
/// so that an error in the input read on is reported first, as when the
/// input was read whole before anything was written.
struct ItemWriter<'a> {
    out: &'a mut dyn std::io::Write,
    json: bool,
    count: usize,
    invalid: usize,
    failed: Option<std::io::Error>,
}

impl<'a> ItemWriter<'a> {
    fn new(out: &'a mut dyn std::io::Write, json: bool) -> Self {
        ItemWriter {
            out,
            json,
            count: 0,
            invalid: 0,
            failed: None,
        }
    }

    /// Decodes, checks and writes `it` (nothing once a write failed).
    fn write(&mut self, it: &Item) {
        if self.failed.is_none() {
            if let Err(e) = self.write_one(it) {
                self.failed = Some(e);
            }
        }
    }

    fn write_one(&mut self, it: &Item) -> std::io::Result<()> {
        let out = &mut *self.out;
        let checked = check(
            it.kind,
            it.arch,
            it.dtype,
            it.channels,
            &it.bytes,
            self.json,
        );
        self.invalid += usize::from(checked.as_ref().map_or(true, |c| !c.valid));
        let first = self.count == 0;
        self.count += 1;
        if self.json {
            let doc = match checked {
                Ok(c) => {
                    let mut j = c.json;
                    j["op"] = it.op.into();
                    j["role"] = it.role.clone().into();
                    j["dtype"] = it.dtype.name().into();
                    j["channels"] = it.channels.unwrap_or(0).into();
                    j["at"] = it.at.clone().into();
                    j
                }
                Err(e) => serde_json::json!({
                    "op": it.op, "role": it.role, "kind": it.kind.name(), "arch": it.arch.name(),
                    "at": it.at, "valid": false,
                    "failures": [{"check": "decode", "offset": 0, "reason": e}],
                }),
            };
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
            out.write_all(if first { b"[\n" } else { b",\n" })?;
            // An element of the array, indented one level: a JSON string
            // holds no raw newline, so every newline starts a line.
            out.write_all(b"  ")?;
            return out.write_all(text.replace('\n', "\n  ").as_bytes());
        }
        // The role comes from the input's bytes: shown on one line as
        // diagnostics show a file name (a line end as `\n` or `\r`, any
        // other control character as `?`), so it can neither send an
        // escape sequence to the terminal nor forge a line of the report.
        write!(
            out,
            "// op {} {} ({}, {}",
            it.op,
            shown_line(&it.role),
            it.at,
            it.dtype.name()
        )?;
        match it.channels {
            Some(c) => writeln!(out, ", channels={c})")?,
            None => writeln!(out, ")")?,
        }
        match checked {
            Ok(c) => out.write_all(c.text.as_bytes()),
            Err(e) => writeln!(out, "invalid: {e}"),
        }
    }

    /// Writes the end, and gives how many descriptors are invalid, or the
    /// first write's error.
    fn finish(self) -> std::io::Result<usize> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.json {
            self.out
                .write_all(if self.count == 0 { b"[]\n" } else { b"\n]\n" })?;
        } else {
            writeln!(
                self.out,
                "{} descriptor{}, {} invalid",
                self.count,
                if self.count == 1 { "" } else { "s" },
                self.invalid
            )?;
        }
        Ok(self.invalid)
    }
}

fn failure_json(f: &Invalid) -> serde_json::Value {
    serde_json::json!({"check": f.check, "offset": f.offset, "reason": f.reason})
}

fn push_failure_line(out: &mut String, f: &Invalid) {
    let _ = writeln!(out, "invalid: +{:#x} {}: {}", f.offset, f.check, f.reason);
}

/// `--kind SDMA`: decode a 16-byte SDMA_CME_BD_DESC, print its dump and
/// transfer, run the SDMA validator.
fn run_sdma(args: &Args) -> i32 {
    for (given, flag) in [
        (args.dtype.is_some(), "--dtype"),
        (args.channels.is_some(), "--channels"),
    ] {
        if given {
            apir_tools::report!("error: {flag} does not apply to --kind {SDMA_KIND}");
            return EXIT_USAGE;
        }
    }
    let bytes = match input_bytes(args) {
        Ok(b) => b,
        Err(msg) => {
            apir_tools::report!("{msg}");
            return EXIT_INPUT;
        }
    };
    let (d, dump) = match (SdmaDescriptor::decode(&bytes), sdma::annotate(&bytes)) {
        (Ok(d), Ok(dump)) => (d, dump),
        (Err(e), _) | (_, Err(e)) => {
            apir_tools::report!("error: {e}");
            return EXIT_INPUT;
        }
    };
    let failure = sdma::validate(&bytes).err();
    let out = if args.json {
        let doc = serde_json::json!({
            "kind": SDMA_KIND,
            "bytes": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "length": d.length,
            "queue": d.queue,
            "first": d.first,
            "last": d.last,
            "dram": d.dram,
            "hbm": d.hbm,
            "valid": failure.is_none(),
            "failures": failure.iter().map(failure_json).collect::<Vec<_>>(),
        });
        format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        )
    } else {
        let mut s = format!("{SDMA_KIND} ({} bytes)\n{dump}transfer: {d}\n", bytes.len());
        match &failure {
            None => s.push_str("valid\n"),
            Some(f) => push_failure_line(&mut s, f),
        }
        s
    };
    if let Err(msg) = write_stdout(out.as_bytes()) {
        apir_tools::report!("{msg}");
        return EXIT_INPUT;
    }
    if failure.is_none() {
        EXIT_OK
    } else {
        EXIT_INPUT
    }
}
