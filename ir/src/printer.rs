//! The IR text printer. Its output parses back to the same IR, and printing
//! that again gives the same text (print -> parse -> print is the identity).
//!
//! A module the verifier rejects prints too, never panicking: what does
//! not exist is marked (`<unknown symbol>`, `// op #N does not exist`),
//! as are kernels and attribute arrays nested too deep to follow, and such
//! text does not parse back.
//!
//! Canonical choices: two-space indentation; buffer `byte`/`addr` in `0x` hex
//! (`0` when zero); attribute dictionaries after the operands; an offset as
//! ` + N` / ` - N`, omitted when zero.

use crate::module::{
    AccessPattern, Attr, Attrs, Item, Module, Op, OpKind, Operand, MAX_ARRAY_NESTING,
};
use crate::target::ops::{OpCode, OperandForm};
use std::fmt::Write;

/// Prints a module as IR text.
pub fn print_module(m: &Module) -> String {
    // Generous: pages of the reservation that are never written are never
    // touched, while regrowing a large string copies it.
    let mut out = String::with_capacity(256 * (m.ops.len() + m.buffers.len()) + 64);
    print_header(m, &mut out);
    for item in &m.body {
        print_item(m, *item, &mut out);
    }
    print_footer(&mut out);
    out
}

/// Appends the module's first line (`module @name attributes {...} {`).
pub fn print_header(m: &Module, out: &mut String) {
    Printer::new(m, out).header();
}

/// Appends one top-level item (a buffer declaration or an op, with its
/// region), as [`print_module`] prints it.
pub fn print_item(m: &Module, item: Item, out: &mut String) {
    let mut p = Printer::new(m, out);
    match item {
        Item::Buffer(b) => p.buffer(b),
        Item::Op(op) => p.op(op, 1),
    }
}

/// Appends the module's closing line.
pub fn print_footer(out: &mut String) {
    out.push_str("}\n");
}

/// Writes a string literal with the escapes the parser understands: `\"`,
/// `\\`, `\n`, `\t`, and for every other control character (C0, DEL, C1)
/// and bidirectional formatting character the bytes of its UTF-8
/// encoding as `\XX` (two hex digits each), so that IR text never carries
/// one raw (a terminal would act on it, or show the text around it in
/// another order than its own) and reads back as the same string.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || crate::source::reorders(c) => {
                let mut utf8 = [0u8; 4];
                for &b in c.encode_utf8(&mut utf8).as_bytes() {
                    // (Writing into a `String` does not fail.)
                    let _ = write!(out, "\\{b:02X}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends lowercase hex without separators.
pub fn write_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
}

/// The string of `s`, or a marker for a symbol from another module (which
/// the verifier rejects; printing never panics).
fn sym(m: &Module, s: crate::Symbol) -> &str {
    if m.symbols.contains(s) {
        m.str(s)
    } else {
        "<unknown symbol>"
    }
}

/// Kernel bodies followed at most this deep (a verified module nests one
/// deep): a chain of kernels each listed in the one before is not followed
/// to the bottom of the stack.
const MAX_PRINT_DEPTH: usize = 8;

struct Printer<'a> {
    m: &'a Module,
    out: &'a mut String,
    /// The ops printed so far in kernel bodies of this item, kernels
    /// included (empty, and never allocated, unless the item is a kernel):
    /// an op listed again, as a module the verifier rejects may list it,
    /// is marked instead of printed again, so the text stays as long as
    /// the lists.
    printed: rustc_hash::FxHashSet<Op>,
}

impl<'a> Printer<'a> {
    fn new(m: &'a Module, out: &'a mut String) -> Self {
        Printer {
            m,
            out,
            printed: Default::default(),
        }
    }
}

impl Printer<'_> {
    fn int(&mut self, v: impl itoa::Integer) {
        self.out.push_str(itoa::Buffer::new().format(v));
    }

    fn header(&mut self) {
        let m = self.m;
        self.out.push_str("module");
        if let Some(name) = m.name {
            self.out.push_str(" @");
            self.out.push_str(sym(m, name));
        }
        self.out.push_str(" attributes {arch = \"");
        self.out.push_str(m.arch.name());
        self.out.push('"');
        for (k, v) in &m.attrs {
            self.out.push_str(", ");
            self.out.push_str(sym(m, *k));
            self.out.push_str(" = ");
            self.attr(v);
        }
        self.out.push_str("} {\n");
    }

    fn buffer(&mut self, b: crate::Buffer) {
        let m = self.m;
        let Some(data) = m.buffers.get(b) else {
            let _ = writeln!(self.out, "  // buffer #{} does not exist", b.as_u32());
            return;
        };
        self.out.push_str("  %");
        self.out.push_str(sym(m, data.name));
        self.out.push_str(" = ");
        // The buffer op's row: its attributes (the partition on chip, then
        // the base) and its type keyword.
        let def = OpCode::Buffer(data.mem).def();
        self.out.push_str(def.name);
        self.out.push_str(" {");
        if let [partition, _] = def.attrs {
            self.out.push_str(partition.name);
            self.out.push_str(" = ");
            self.int(data.partition);
            self.out.push_str(", ");
        }
        if let Some(base) = def.attrs.last() {
            self.out.push_str(base.name);
            self.out.push_str(" = ");
        }
        if data.base == 0 {
            self.out.push('0');
        } else {
            let _ = write!(self.out, "{:#x}", data.base);
        }
        for (k, v) in &data.attrs {
            self.out.push_str(", ");
            self.out.push_str(sym(m, *k));
            self.out.push_str(" = ");
            self.attr(v);
        }
        self.out.push_str("} : ");
        if let OperandForm::Buffer { type_keyword, .. } = def.operands {
            self.out.push_str(type_keyword);
        }
        self.out.push('<');
        for d in &data.shape {
            self.int(*d);
            self.out.push('x');
        }
        self.out.push_str(data.dtype.name());
        self.out.push_str(">\n");
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn op(&mut self, op: Op, depth: usize) {
        let m = self.m;
        let Some(data) = m.ops.get(op) else {
            self.indent(depth);
            let _ = writeln!(self.out, "// op #{} does not exist", op.as_u32());
            return;
        };
        self.indent(depth);
        self.out.push_str(data.kind.name());
        match data.kind {
            OpKind::Kernel { name, body } => {
                self.out.push_str(" @");
                self.out.push_str(sym(m, name));
                if !data.attrs.is_empty() {
                    self.out.push(' ');
                    self.attrs(&data.attrs);
                }
                self.out.push_str(" {\n");
                // Kernels nest one deep, and each op is listed once; a
                // module the verifier rejects may break either, and is
                // printed once per op, not followed round.
                self.printed.insert(op);
                let inner = m.blocks.get(body).map_or(&[][..], |b| &b.ops[..]);
                for &inner in inner {
                    if depth >= MAX_PRINT_DEPTH {
                        self.indent(depth + 1);
                        self.out.push_str("// nested too deep to print\n");
                    } else if !self.printed.insert(inner) {
                        self.indent(depth + 1);
                        let _ = writeln!(self.out, "// op #{} is listed again", inner.as_u32());
                    } else {
                        self.op(inner, depth + 1);
                    }
                }
                if let Some(plan) = m.plans.get(&op) {
                    let indent = "  ".repeat(depth + 1);
                    plan.print(&indent, self.out);
                }
                self.indent(depth);
                self.out.push_str("}\n");
                return;
            }
            OpKind::Read | OpKind::Write => {
                for o in &data.operands {
                    self.out.push(' ');
                    self.ap(o);
                }
            }
            OpKind::Plan(_) => {}
            OpKind::Isa(_) | OpKind::Custom => {
                for (i, o) in data.operands.iter().enumerate() {
                    self.out.push_str(if i == 0 { " " } else { ", " });
                    self.operand(o);
                }
            }
        }
        if !data.attrs.is_empty() {
            self.out.push(' ');
            self.attrs(&data.attrs);
        }
        self.out.push('\n');
    }

    fn operand(&mut self, o: &Operand) {
        self.out.push_str(sym(self.m, o.role));
        self.out.push_str(" = ");
        self.ap(o);
        if let Some(s) = o.struct_name {
            self.out.push_str(" as ");
            write_string(self.out, sym(self.m, s));
        }
    }

    fn ap(&mut self, o: &Operand) {
        self.out.push('%');
        let m = self.m;
        // A buffer that does not exist is marked (see the module doc).
        let name = m
            .buffers
            .get(o.buffer)
            .map_or("<unknown buffer>", |d| sym(m, d.name));
        self.out.push_str(name);
        self.pattern(&o.ap);
        if let Some(l) = o.lowered() {
            if let Some(f) = l.fold {
                self.out.push_str(" fold<partition = ");
                self.int(f.partition);
                let _ = write!(self.out, ", byte = {:#x}, channels = ", f.byte);
                self.int(f.channels);
                self.out.push('>');
            }
            if let Some(slots) = &l.slots {
                self.out.push_str(" slots<");
                self.dims(slots);
                self.out.push('>');
            }
            if let Some(kind) = l.kind {
                self.out.push_str(" kind<");
                self.out.push_str(kind.name());
                self.out.push('>');
            }
            if let Some(bytes) = &l.wire {
                self.out.push_str(" wire<\"");
                write_hex(self.out, bytes);
                self.out.push_str("\">");
            }
        }
    }

    fn dims(&mut self, dims: &[crate::Dim]) {
        for (i, d) in dims.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.out.push('[');
            self.int(d.step);
            self.out.push_str(", ");
            self.int(d.num);
            self.out.push(']');
        }
    }

    fn pattern(&mut self, ap: &AccessPattern) {
        self.out.push('[');
        self.dims(&ap.dims);
        self.out.push(']');
        if ap.offset > 0 {
            self.out.push_str(" + ");
            self.int(ap.offset);
        } else if ap.offset < 0 {
            self.out.push_str(" - ");
            self.int(ap.offset.unsigned_abs());
        }
    }

    fn attrs(&mut self, attrs: &Attrs) {
        self.out.push('{');
        for (i, (k, v)) in attrs.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.out.push_str(sym(self.m, *k));
            self.out.push_str(" = ");
            self.attr(v);
        }
        self.out.push('}');
    }

    fn attr(&mut self, a: &Attr) {
        self.attr_at(a, 0);
    }

    /// `a`, met `depth` arrays deep. Arrays nested past
    /// [`MAX_ARRAY_NESTING`] (a module the verifier rejects) are marked, not
    /// followed to the bottom of the stack.
    fn attr_at(&mut self, a: &Attr, depth: usize) {
        match a {
            Attr::Int(v) => self.int(*v),
            Attr::Str(s) => write_string(self.out, sym(self.m, *s)),
            Attr::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Attr::Array(_) if depth >= MAX_ARRAY_NESTING => {
                self.out.push_str("[/* nested too deep to print */]");
            }
            Attr::Array(items) => {
                self.out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.attr_at(v, depth + 1);
                }
                self.out.push(']');
            }
        }
    }
}
