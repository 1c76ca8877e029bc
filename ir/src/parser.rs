//! The IR text parser: a hand-written recursive-descent parser over bytes.
//!
//! It never panics; every error is a [`Diagnostic`] with a span. After an
//! error inside a declaration or op it skips to the next line and goes on, so
//! one run reports every independent syntax error (up to [`MAX_ERRORS`]).
//! The grammar is in `docs/grammar.md`.

use crate::diag::{Diagnostic, Diagnostics};
use crate::intern::Symbol;
use crate::module::{
    AccessPattern, Attr, Attrs, Block, BufferData, Dim, Fold, Item, Lowered, Module, OpData,
    OpKind, Operand, Operands,
};
use crate::source::{FileId, SourceMap, Span, MAX_SOURCE_BYTES};
use crate::target::ops::{self, AttrDef, OpCode, OpDef, OperandForm, Parent, ValueKind};
use crate::target::{Arch, DescriptorKind, Dtype, IsaOp, Memory};
use crate::Buffer;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::ops::Range;

/// Parsing stops after this many errors.
pub const MAX_ERRORS: usize = 50;

/// The line that separates independent cases with `--split-input-file`.
pub(crate) const SPLIT_MARKER: &str = "// -----";

/// Options for [`parse_module`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ParseOptions {
    /// Overrides the module's `arch` attribute (the tools' `--arch`).
    pub arch: Option<Arch>,
}

/// Splits `text` at lines that are exactly `// -----` (surrounding blanks
/// ignored). Each range excludes the marker line, so spans stay true to the
/// whole file.
pub fn split_input(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        // Blanks as the grammar has them (space, tab, CR, LF), not every
        // Unicode space: a no-break space makes the line another line.
        if line.trim_matches([' ', '\t', '\r', '\n']) == SPLIT_MARKER {
            out.push(start..line_start);
            start = line_end;
        }
        line_start = line_end;
    }
    out.push(start..text.len());
    out
}

/// Parses the module in `range` of `file`.
pub fn parse_module(
    sources: &SourceMap,
    file: FileId,
    range: Range<usize>,
    opts: ParseOptions,
) -> Result<Module, Diagnostics> {
    let text = sources.file(file).text();
    if text.len() > MAX_SOURCE_BYTES {
        return Err(vec![Diagnostic::error(
            Span::new(file, 0, 0),
            format!(
                "input is {} bytes; the limit is {MAX_SOURCE_BYTES}",
                text.len()
            ),
        )]);
    }
    let range = range.start.min(text.len())..range.end.min(text.len());
    let mut p = Parser::new(text, file, range.clone(), opts);
    p.module(opts.arch);
    if p.errors.is_empty() {
        Ok(p.module)
    } else {
        Err(p.errors)
    }
}

/// A parser that hands out a module's declarations and ops one at a time,
/// so a driver can process each op and drop it before parsing the next
/// (memory stays proportional to the buffers, not the ops).
///
/// Items are parsed into [`StreamParser::module`]: buffer declarations stay,
/// and the driver may clear `ops`, `blocks` and `body` between items.
pub struct StreamParser<'a> {
    p: Parser<'a>,
    started: bool,
    /// In a window: where the input must resume (absolute offset) once
    /// the window's certain items are handed out.
    resume: Option<usize>,
    /// In a window: error recovery is skipping the rest of a line that
    /// runs past the window's end ([`StreamState::skipping`]).
    skipping: bool,
    /// In a window: an item that blanks and comments follow to the
    /// window's end is handed out when they fill a quarter of it
    /// ([`StreamState::cutting_long_blank_runs`]).
    cut_long_runs: bool,
    /// Some window did so ([`StreamParser::cut_at_a_long_run`]).
    cut_made: bool,
    opts: ParseOptions,
}

/// What a [`StreamParser`] over windows of an input keeps from one window
/// to the next ([`StreamParser::window`], [`StreamParser::into_state`]):
/// the module header, the buffers declared so far and their names. A
/// driver that reads its input in chunks holds this between chunks, so
/// the input is never held whole.
#[derive(Clone, Debug)]
pub struct StreamState {
    module: Module,
    names: FxHashMap<Symbol, Buffer>,
    /// Kernel names defined so far (a name defined again is an error,
    /// whichever window it is in).
    kernels: FxHashMap<Symbol, Span>,
    /// The syntax errors so far, and the names whose declaration had one:
    /// a driver that goes on after an error finds what the parser of the
    /// whole input finds (no more than [`MAX_ERRORS`], no use of a broken
    /// declaration reported again).
    errors: Diagnostics,
    broken: Vec<Symbol>,
    file: FileId,
    opts: ParseOptions,
    started: bool,
    /// The next window begins inside a line that error recovery skips.
    skipping: bool,
    /// See [`StreamState::cutting_long_blank_runs`].
    cut_long_runs: bool,
    /// See [`StreamParser::cut_at_a_long_run`].
    cut_made: bool,
}

impl StreamState {
    /// The state before the first window of `file`: nothing parsed yet.
    pub fn new(file: FileId, opts: ParseOptions) -> Self {
        StreamState {
            module: Module::new(opts.arch.unwrap_or(Arch::V2)),
            names: FxHashMap::default(),
            kernels: FxHashMap::default(),
            errors: Diagnostics::new(),
            broken: Vec::new(),
            file,
            opts,
            started: false,
            skipping: false,
            cut_long_runs: false,
            cut_made: false,
        }
    }

    /// The state with windows that end an item followed by a long run of
    /// blank and comment lines: when such lines run from an item to the
    /// window's end (a line end) and fill at least a quarter of the
    /// window, the item is handed out and the next window starts at the
    /// window's end, where otherwise the item would be undone and read
    /// again with the run, in a window that grows with it. So a run longer
    /// than any window streams too.
    ///
    /// The item might go on after the run (an attribute dictionary, an
    /// operand, an offset, a lowered form or an `as` key on a later line):
    /// the next window then begins with what continues it, which no item
    /// begins with, so that window reports a syntax error there (and the
    /// item cut short may fail to verify before). A driver that stops on
    /// any error and trusts none found once a window has made such a cut
    /// ([`StreamParser::cut_at_a_long_run`]: it reads the input again
    /// without this) loses nothing: its output is the whole parse's, or it
    /// stops.
    pub fn cutting_long_blank_runs(mut self) -> Self {
        self.cut_long_runs = true;
        self
    }

    /// Whether the next window begins inside the rest of a line that error
    /// recovery skips (after a syntax error whose line runs past the
    /// window's end): the window's bytes up to its first line feed are
    /// skipped, as the parser of the whole input skips them, so a window
    /// with no line feed may end at any character, and is skipped whole.
    pub fn skipping(&self) -> bool {
        self.skipping
    }

    /// Whether the module header has been parsed.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The syntax errors of the windows so far.
    pub fn errors(&self) -> &[Diagnostic] {
        &self.errors
    }

    /// The module: its header and buffers, and whatever items the driver
    /// has not cleared.
    pub fn module(&mut self) -> &mut Module {
        &mut self.module
    }

    /// Records kernel `@name`, defined at `span` by a part parsed from a
    /// copy of this state ([`StreamParser::kernel_names`]), so that a
    /// window parsed from this state on reports a second definition as the
    /// parser of the whole input does. False, and nothing recorded, if the
    /// name is defined already.
    pub fn define_kernel(&mut self, name: &str, span: Span) -> bool {
        let name = self.module.symbols.intern(name);
        match self.kernels.entry(name) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(span);
                true
            }
        }
    }

    /// This state for windows that never take an item as ended before a
    /// long run of blank and comment lines; `None` if a window parsed into
    /// it did ([`StreamParser::cut_at_a_long_run`]): an error found after
    /// such a cut may be the cut's, so what was parsed is not trusted.
    pub fn without_long_run_cuts(mut self) -> Option<Self> {
        if self.cut_made {
            return None;
        }
        self.cut_long_runs = false;
        Some(self)
    }
}

impl<'a> StreamParser<'a> {
    /// A parser over `range` of `file`; nothing is parsed yet.
    pub fn new(
        sources: &'a SourceMap,
        file: FileId,
        range: Range<usize>,
        opts: ParseOptions,
    ) -> Self {
        let text = sources.file(file).text();
        let range = range.start.min(text.len())..range.end.min(text.len());
        StreamParser {
            p: Parser::new(text, file, range, opts),
            started: false,
            resume: None,
            skipping: false,
            cut_long_runs: false,
            cut_made: false,
            opts,
        }
        .with_header(opts.arch)
    }

    /// A parser over a window of a streamed input: `text` is the input
    /// from absolute byte `base` on (spans count from the start of the
    /// input), and `last` says whether it runs to the input's end. It
    /// continues from `state` (the module header, if not parsed yet, comes
    /// first).
    ///
    /// Unless `last`, `text` must end with a line feed, or with a blank
    /// that the input follows with a letter (a cut inside a line longer
    /// than a window), and an item is handed out only when it is certain:
    /// when the blanks and comments after it stop before the window's end,
    /// so that more input could not change how it parses (every lookahead
    /// of the grammar either stops at a line end or at a later token of
    /// the same item; one that scans blanks by hand looks for punctuation,
    /// which the letter after such a cut is not). The first item
    /// that is not certain (or the module's closing `}`, which only the end
    /// of the input confirms) is undone, and [`StreamParser::resume_at`]
    /// says where the next window must start.
    pub fn window(state: StreamState, text: &'a str, base: usize, last: bool) -> Self {
        let StreamState {
            module,
            names,
            kernels,
            errors,
            broken,
            file,
            opts,
            started,
            skipping,
            cut_long_runs,
            cut_made,
        } = state;
        let mut p = Parser::new(text, file, 0..text.len(), opts);
        p.module = module;
        p.names = names;
        p.kernels = kernels;
        p.errors = errors;
        p.broken = broken;
        p.base = base;
        p.window = !last;
        let mut sp = StreamParser {
            p,
            started,
            resume: None,
            skipping: false,
            cut_long_runs,
            cut_made,
            opts,
        };
        if skipping {
            // The rest of the line an error was recovered from.
            sp.p.recover();
            if sp.p.window && sp.p.pos >= sp.p.end {
                sp.skipping = true;
                sp.resume = Some(base + sp.p.end);
            }
        }
        if !started {
            sp.started = sp.p.src.len() <= MAX_SOURCE_BYTES && sp.p.header(opts.arch);
            if sp.p.window && sp.p.hit_end {
                // The header may go on in the next window: parse it again.
                sp.p.errors.clear();
                sp.started = false;
                sp.resume = Some(base);
            }
        }
        sp
    }

    /// A parser over a part of a streamed input that begins at an item
    /// boundary, continuing from `state` (whose header was parsed): as
    /// [`StreamParser::fork`], the part ends between two items unless
    /// `last`, and an item cut by its end is an error.
    pub fn part(state: StreamState, text: &'a str, base: usize, last: bool) -> Self {
        let mut sp = StreamParser::window(state, text, base, true);
        sp.p.part = !last;
        sp
    }

    /// The state to continue from in the next window.
    pub fn into_state(self) -> StreamState {
        StreamState {
            module: self.p.module,
            names: self.p.names,
            kernels: self.p.kernels,
            errors: self.p.errors,
            broken: self.p.broken,
            file: self.p.file,
            opts: self.opts,
            started: self.started,
            skipping: self.skipping,
            cut_long_runs: self.cut_long_runs,
            cut_made: self.cut_made,
        }
    }

    /// Whether a window of this input (this one or an earlier one) has
    /// taken an item as ended before a long run of blank and comment lines
    /// ([`StreamState::cutting_long_blank_runs`]): an error found since may
    /// come from that guess.
    pub fn cut_at_a_long_run(&self) -> bool {
        self.cut_made
    }

    /// After [`StreamParser::next_item`] returned `None` in a window that
    /// is not the input's end: the absolute offset where the next window
    /// must start (the first item not handed out). `None` when the input
    /// has ended or parsing cannot go on.
    pub fn resume_at(&self) -> Option<usize> {
        self.resume
    }

    fn with_header(mut self, arch: Option<Arch>) -> Self {
        self.started = self.p.src.len() <= MAX_SOURCE_BYTES && self.p.header(arch);
        self
    }

    /// The kernels this parser defined itself, in order (not those of the
    /// state it started from), each name with its span: a part of a module
    /// sees only the names before it and its own, so a driver joining
    /// parts checks them across parts
    /// ([`StreamState::define_kernel`]).
    pub fn kernel_names(&self) -> impl Iterator<Item = (&str, Span)> + '_ {
        self.p
            .defined
            .iter()
            .filter_map(|&k| Some((self.p.module.str(k), *self.p.kernels.get(&k)?)))
    }

    /// The module being filled: the header, every buffer so far, and the
    /// items handed out since the driver last cleared them.
    pub fn module(&mut self) -> &mut Module {
        &mut self.p.module
    }

    /// The next item: `Some(Ok(item))` (already pushed to the module's
    /// body), `Some(Err(()))` for an item with errors (recorded, see
    /// [`StreamParser::errors`]), `None` at the end.
    pub fn next_item(&mut self) -> Option<Result<Item, ()>> {
        if !self.started || self.resume.is_some() {
            return None;
        }
        if self.p.window {
            return self.next_in_window();
        }
        let item = self.p.next_item()?;
        if let Ok(item) = item {
            self.p.module.body.push(item);
        }
        Some(item)
    }

    /// [`StreamParser::next_item`] in a window that is not the input's
    /// end: the item if it is certain, else undone (see
    /// [`StreamParser::window`]).
    fn next_in_window(&mut self) -> Option<Result<Item, ()>> {
        let p = &mut self.p;
        let (ops, blocks, buffers, errors, defined, broken) = (
            p.module.ops.id_bound(),
            p.module.blocks.id_bound(),
            p.module.buffers.len(),
            p.errors.len(),
            p.defined.len(),
            p.broken.len(),
        );
        p.hit_end = false;
        let before = p.pos;
        p.ws();
        // Blanks or a comment that run to the window's end are read again
        // from their start: the window may end inside a comment.
        let start = if p.hit_end { before } else { p.pos };
        if p.hit_end && p.src.get(..p.end).is_some_and(|s| s.ends_with(b"\n")) {
            // Unless the window ends at a line end: then they are whole
            // lines of blanks and comments between items, which say
            // nothing about the next item, and the next window starts
            // after them (a run longer than any window streams).
            self.resume = Some(p.base + p.end);
            return None;
        }
        let item = p.next_item();
        if matches!(item, Some(Err(()))) && !p.hit_end && p.pos >= p.end {
            // A syntax error that more input could not change (its parse
            // stopped short of the window's end), whose recovery skips a
            // line that runs past the window: the next window goes on
            // skipping it, so a line longer than any window is never held.
            self.skipping = true;
            self.resume = Some(p.base + p.end);
            return item;
        }
        // The blanks after the item tell whether it ends in this window.
        p.ws();
        if !p.hit_end {
            if let Some(Ok(item)) = item {
                p.module.body.push(item);
            }
            return item;
        }
        // Blank and comment lines from the item to the window's end (a
        // line end) that fill a quarter of it: the item is taken as ended
        // (see `StreamState::cutting_long_blank_runs`), and the next window
        // starts after them. `prev_end` is where they begin. (The end may
        // have been reached by a look past the item, at what follows the
        // blanks after it: then they do not reach the end, and the item is
        // read again.)
        if let Some(Ok(it)) = item {
            let run = p.end.saturating_sub(p.prev_end);
            if self.cut_long_runs
                && p.pos >= p.end
                && p.prev_end >= start
                && run.saturating_mul(4) >= p.end
                && p.src.get(..p.end).is_some_and(|s| s.ends_with(b"\n"))
            {
                p.module.body.push(it);
                self.resume = Some(p.base + p.end);
                self.cut_made = true;
                return item;
            }
        }
        // Undo the item: it is parsed again, whole, from the next window.
        p.errors.truncate(errors);
        p.broken.truncate(broken);
        p.module.ops.truncate(ops);
        p.module.blocks.truncate(blocks);
        for k in p.defined.drain(defined..) {
            p.kernels.remove(&k);
        }
        if p.module.buffers.len() > buffers {
            for (_, b) in p.module.buffers_from(buffers) {
                p.names.remove(&b.name);
            }
            truncate(&mut p.module.buffers, buffers);
            // No name may be remembered for a buffer that is gone.
            p.buffer_memo = empty_buffer_memo();
        }
        self.resume = Some(p.base + start);
        None
    }

    /// Whether the module header has been parsed (in a window, it may
    /// need the next one).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Every syntax error so far.
    pub fn errors(&self) -> &[Diagnostic] {
        &self.p.errors
    }

    /// Skips blanks and comments; true if the next item is a buffer
    /// declaration (`%name = ...`).
    pub fn at_buffer(&mut self) -> bool {
        self.p.ws();
        self.p.peek() == Some(b'%')
    }

    /// The byte offset of the next item (after blanks and comments).
    pub fn position(&mut self) -> usize {
        self.p.ws();
        self.p.pos
    }

    /// A parser for a part of the same module, for drivers that process
    /// parts in parallel: it starts at `range.start`, which must be where a
    /// top-level item begins, with this parser's header and buffers (but no
    /// ops), and hands out the items of `range`. Unless `last`, the part
    /// ends at an item boundary without the module's closing `}`: running
    /// out of input between items ends it cleanly, and a `}` there is an
    /// error. An item cut by the end of the part is an error, so a part
    /// whose items all parse is exactly the items the whole parser would
    /// hand out over that range.
    pub fn fork(&self, range: Range<usize>, last: bool) -> StreamParser<'a> {
        let mut module = self.p.module.clone();
        // The buffers the body declares are the earlier batches' to the
        // part's.
        module.clear_batch();
        module.ops.clear();
        let end = range.end.min(self.p.src.len());
        let start = range.start.min(end);
        StreamParser {
            p: Parser {
                src: &self.p.src[..end],
                text: self.p.text,
                pos: start,
                end,
                file: self.p.file,
                module,
                names: self.p.names.clone(),
                kernels: self.p.kernels.clone(),
                defined: Vec::new(),
                broken: self.p.broken.clone(),
                declaring: None,
                errors: Vec::new(),
                prev_end: start,
                item_start: start,
                part: !last,
                base: self.p.base,
                window: false,
                hit_end: false,
                buffer_memo: self.p.buffer_memo,
                symbol_memo: self.p.symbol_memo,
                op_memo: self.p.op_memo,
            },
            started: self.started,
            resume: None,
            skipping: false,
            cut_long_runs: false,
            cut_made: false,
            opts: self.opts,
        }
    }
}

/// Drops the entries of `map` from `len` on (an item a window undid).
fn truncate<K: cranelift_entity::EntityRef, V>(
    map: &mut cranelift_entity::PrimaryMap<K, V>,
    len: usize,
) {
    if map.len() > len {
        // Through the map's vector, which keeps its allocation: the
        // entries before `len` (all the buffers declared so far) are not
        // moved, so undoing a declaration costs what it drops.
        let mut entries = Vec::from(std::mem::take(map));
        entries.truncate(len);
        *map = entries.into();
    }
}

/// Parses a whole source text given by name (convenience for tests and the
/// embedding API).
pub fn parse_str(
    name: &str,
    text: &str,
    opts: ParseOptions,
) -> Result<(Module, SourceMap), (Diagnostics, SourceMap)> {
    let mut sm = SourceMap::new();
    let f = sm.add(name, text);
    match parse_module(&sm, f, 0..text.len(), opts) {
        Ok(m) => Ok((m, sm)),
        Err(e) => Err((e, sm)),
    }
}

/// Attributes as written, each with the span of its value.
type SpannedAttrs =
    indexmap::IndexMap<Symbol, (Attr, Span), std::hash::BuildHasherDefault<rustc_hash::FxHasher>>;

/// A recoverable parse failure: the diagnostic was recorded already.
struct Failed;
type PResult<T> = Result<T, Failed>;

struct Parser<'a> {
    /// The bytes up to `end` (`src.len() == end`): reading past the range
    /// is impossible, and one bounds check does for both.
    src: &'a [u8],
    /// The same text as `src`, for slicing names without re-validating UTF-8.
    text: &'a str,
    pos: usize,
    end: usize,
    file: FileId,
    module: Module,
    names: FxHashMap<Symbol, Buffer>,
    /// Kernel names seen so far, with where each was first defined (a
    /// streamed module drops its ops, not this).
    kernels: FxHashMap<Symbol, Span>,
    /// The kernel names this parser added to `kernels`, in order.
    defined: Vec<Symbol>,
    /// Names whose declaration had an error: a use of one is not reported
    /// again as an undefined buffer (one typo, one error). A name joins
    /// with an error, so there are at most [`MAX_ERRORS`].
    broken: Vec<Symbol>,
    /// The name of the buffer declaration being parsed.
    declaring: Option<Symbol>,
    errors: Diagnostics,
    /// End of the last token before the current run of blanks.
    prev_end: usize,
    /// Where the current declaration or op began.
    item_start: usize,
    /// A part of a module ([`StreamParser::fork`]): the input ends between
    /// two items, before the module's closing `}`.
    part: bool,
    /// Absolute offset of `src[0]` in the file (a window of a streamed
    /// input starts past 0); spans add it.
    base: usize,
    /// A window of a streamed input that is not its end
    /// ([`StreamParser::window`]): the input goes on past `end`.
    window: bool,
    /// Skipping blanks reached `end` since the flag was last cleared: in a
    /// window, what was parsed since may depend on input not read yet.
    hit_end: bool,
    /// Buffers already found by name, for names of at most eight bytes:
    /// a two-way memo in front of the interner's lookup (which hashes and
    /// compares the name), see [`name_word`].
    buffer_memo: [(u64, Buffer); BUFFER_MEMO],
    /// Symbols already interned (attribute names, string values), found
    /// by a hash of the text's first bytes: a hint in front of the
    /// interner, checked against the table's text before use.
    symbol_memo: [Option<Symbol>; SYMBOL_MEMO],
    /// Text ops already found at the top level, found by a hash of the
    /// input's first sixteen bytes at the op: a hint in front of the
    /// lookup by name, checked against the op's name before use.
    op_memo: [Option<IsaOp>; OP_MEMO],
}

/// Entries of [`Parser::symbol_memo`].
const SYMBOL_MEMO: usize = 64;

/// Entries of [`Parser::op_memo`].
const OP_MEMO: usize = 32;

/// The [`Parser::symbol_memo`] entry for a name: a hash of its length
/// and of its bytes at both ends and in the middle (`bitwise_and` and
/// `bitwise_xor` differ only near the end).
#[inline]
fn symbol_slot(name: &[u8]) -> usize {
    let n = name.len();
    let at = |i: usize| u64::from(name.get(i).copied().unwrap_or(0));
    let key = n as u64
        | at(0) << 8
        | at(1) << 16
        | at(n / 2) << 24
        | at(n.wrapping_sub(2)) << 32
        | at(n.wrapping_sub(1)) << 40;
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SYMBOL_MEMO
}

/// The [`Parser::op_memo`] entry for an op name at `p`: a hash of the
/// sixteen bytes there (the name and what follows it), `None` when fewer
/// are left.
#[inline]
fn op_slot(s: &[u8], p: usize) -> Option<usize> {
    let bytes: [u8; 16] = s.get(p..p + 16)?.try_into().ok()?;
    let lo = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let hi = u64::from_le_bytes(bytes[8..].try_into().ok()?);
    let key = lo ^ hi.rotate_left(29);
    Some((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) as usize % OP_MEMO)
}

/// The end of the identifier characters from `p` on.
#[inline]
fn ident_end(s: &[u8], p: usize) -> usize {
    s.get(p..)
        .and_then(|rest| rest.iter().position(|&b| !is_ident_char(b)))
        .map_or(s.len().max(p), |n| p + n)
}

/// Entries of [`Parser::buffer_memo`].
const BUFFER_MEMO: usize = 64;

/// A memo that remembers nothing (word 0 is no name's).
fn empty_buffer_memo() -> [(u64, Buffer); BUFFER_MEMO] {
    [(0, Buffer::from_u32(0)); BUFFER_MEMO]
}

/// A name of one to eight bytes as a word, its first byte lowest; `None`
/// for a longer one. An identifier has no NUL byte, so different names
/// give different words, and no name gives 0 (an empty memo entry).
#[inline]
fn name_word(name: &[u8]) -> Option<u64> {
    if name.is_empty() || name.len() > 8 {
        return None;
    }
    let mut word = [0u8; 8];
    word[..name.len()].copy_from_slice(name);
    Some(u64::from_le_bytes(word))
}

/// [`name_word`] of the name of `len` bytes at `p` of `s`, read in one
/// load when eight bytes are there.
#[inline]
fn name_word_at(s: &[u8], p: usize, len: usize) -> Option<u64> {
    let Some(chunk) = s.get(p..p + 8) else {
        return name_word(s.get(p..p + len)?);
    };
    if len == 0 || len > 8 {
        return None;
    }
    let bytes: [u8; 8] = chunk.try_into().ok()?;
    let keep = if len == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * len)) - 1
    };
    Some(u64::from_le_bytes(bytes) & keep)
}

/// The memo entry a name's word goes to.
#[inline]
fn memo_slot(word: u64) -> usize {
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % BUFFER_MEMO
}

/// A decimal literal of 1 to 18 digits at `p` that does not run on into
/// letters, digits or `_` (so `0x10` and `12ab` are not taken): its value
/// and end. Anything else is left to [`Parser::int`].
#[inline]
fn plain_decimal(s: &[u8], p: usize) -> Option<(u64, usize)> {
    // Nearly every literal has fewer than eight digits and eight bytes
    // after its start: one word converts it and holds the byte after it.
    if let Some(chunk) = s.get(p..p + 8) {
        let bytes: [u8; 8] = chunk.try_into().ok()?;
        let (n, v) = swar_digits(u64::from_le_bytes(bytes));
        if n < 8 {
            if n == 0 || WORD_CHAR[usize::from(bytes[n])] {
                return None;
            }
            return Some((v, p + n));
        }
    }
    plain_decimal_long(s, p)
}

/// [`plain_decimal`] where the caller requires the byte after the literal
/// to be one that is not a letter, digit or `_` (`,` or `]`): the literal
/// and where it stops, which may be at any byte but a digit when it has
/// fewer than eight digits (the caller's check then rejects what
/// `plain_decimal` would).
#[inline(always)]
fn decimal_before(s: &[u8], p: usize) -> Option<(u64, usize)> {
    if let Some(chunk) = s.get(p..p + 8) {
        let bytes: [u8; 8] = chunk.try_into().ok()?;
        let (n, v) = swar_digits(u64::from_le_bytes(bytes));
        if n < 8 {
            return (n > 0).then_some((v, p + n));
        }
    }
    plain_decimal_long(s, p)
}

/// [`plain_decimal`] for a literal of eight digits or more, or one in the
/// input's last eight bytes.
#[inline(never)]
fn plain_decimal_long(s: &[u8], p: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut q = p;
    // Eight bytes at a time while they are there: one word tells how many
    // digits lead it and converts them (at most 18 digits in all).
    while let Some(chunk) = s.get(q..q + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let (n, value) = swar_digits(word);
        v = v.wrapping_mul(POW10[n]).wrapping_add(value);
        q += n;
        if n < 8 || q - p > 18 {
            break;
        }
    }
    // The input's last few bytes.
    if s.get(q..q + 8).is_none() {
        while let Some(&b) = s.get(q) {
            let d = b.wrapping_sub(b'0');
            if d > 9 || q - p > 18 {
                break;
            }
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
            q += 1;
        }
    }
    if q == p || q - p > 18 || s.get(q).is_some_and(|&b| WORD_CHAR[usize::from(b)]) {
        return None;
    }
    Some((v, q))
}

/// Bytes a literal may not run on into: letters, digits and `_`.
static WORD_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// `[step, num]` at `p` as the printer writes it (`[`, an optional `-`, a
/// plain decimal, `,`, an optional blank, a plain decimal, `]`): the pair
/// and where it ends. At most 18 digits each, so the step's magnitude fits
/// i64 either way.
#[inline(always)]
fn printed_pair(s: &[u8], mut p: usize) -> Option<(Dim, usize)> {
    if s.get(p) != Some(&b'[') {
        return None;
    }
    p += 1;
    let neg = s.get(p) == Some(&b'-');
    p += usize::from(neg);
    let (step, q) = decimal_before(s, p)?;
    if s.get(q) != Some(&b',') {
        return None;
    }
    p = q + 1;
    p += usize::from(s.get(p) == Some(&b' '));
    let (num, q) = decimal_before(s, p)?;
    if s.get(q) != Some(&b']') {
        return None;
    }
    let step = step as i64;
    let step = if neg { -step } else { step };
    Some((Dim { step, num }, q + 1))
}

/// The most attributes an op entry kept for reuse ([`crate::Arena::recycle`])
/// keeps room for once it is reused (project-defined): a few, as nearly
/// every op has; an entry with more room gets a new map then, so an op
/// with many attributes leaves no large map behind past the op that
/// reuses its entry (until then the entry holds what its batch held).
const RECYCLED_ATTRS: usize = 8;

/// `spans` set to `at`, in the box it holds when that has the length.
fn set_spans(spans: &mut Option<Box<[Span]>>, at: &[Span]) {
    match spans {
        Some(b) if b.len() == at.len() => b.copy_from_slice(at),
        _ => *spans = Some(Box::from(at)),
    }
}

/// Operand `i` of `out` (one past the last: pushed) set to an empty access
/// of `role` at `span`, ready to be read into: an operand an earlier op
/// left there is reused, its dims' room with it.
#[inline(always)]
fn operand_slot(out: &mut Operands, i: usize, role: Symbol, span: Span) -> &mut Operand {
    if i == out.len() {
        out.push(Operand {
            role,
            buffer: Buffer::from_u32(0),
            ap: AccessPattern::default(),
            struct_name: None,
            span,
            lowered: None,
        });
    } else {
        let o = &mut out[i];
        o.role = role;
        o.buffer = Buffer::from_u32(0);
        o.ap.offset = 0;
        // Room past the inline dims (an operand of many) is not kept.
        if o.ap.dims.spilled() {
            o.ap.dims = Default::default();
        } else {
            o.ap.dims.clear();
        }
        o.struct_name = None;
        o.span = span;
        o.lowered = None;
    }
    &mut out[i]
}

/// Characters that take no room where they are shown (zero-width spaces
/// and joiners, the word joiner, the byte-order mark): named in messages,
/// and spanned with the character after them.
fn zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

/// Most entries [`scan_printed_dict`] takes (more go to the general path).
const PRINTED_DICT: usize = 4;

/// A value of a printed attribute dictionary, as scanned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrintedValue {
    /// A string without escapes: the byte range of its text.
    Str(usize, usize),
    /// A plain decimal of at most 18 digits, maybe negative.
    Int(i128),
    /// `true` or `false`.
    Bool(bool),
}

/// An entry of a printed attribute dictionary, as scanned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct PrintedEntry {
    /// The byte range of the key.
    key: (usize, usize),
    /// The value.
    value: PrintedValue,
    /// The byte range of the value.
    value_at: (usize, usize),
}

impl Default for PrintedValue {
    fn default() -> Self {
        PrintedValue::Bool(false)
    }
}

/// `{key = value, ...}` at `p` as the printer writes it: one to
/// [`PRINTED_DICT`] entries, each `key = value` with one space either side
/// of `=`, separated by `, `, with different keys; each value a string
/// without escapes, a plain decimal (`-` allowed) or `true`/`false`. The
/// entries, how many, and where the dictionary ends. Anything else (other
/// blanks, comments, hex, arrays, escapes, a repeated key, errors) is left
/// to [`Parser::spanned_attr_dict_general`].
fn scan_printed_dict(
    s: &[u8],
    mut p: usize,
) -> Option<([PrintedEntry; PRINTED_DICT], usize, usize)> {
    let mut entries = [PrintedEntry::default(); PRINTED_DICT];
    if s.get(p) != Some(&b'{') {
        return None;
    }
    p += 1;
    let mut n = 0;
    loop {
        if !s.get(p).is_some_and(|&b| is_ident_start(b)) {
            return None;
        }
        let key_end = ident_end(s, p + 1);
        let key = (p, key_end);
        if s.get(key_end..key_end + 3) != Some(b" = ") {
            return None;
        }
        let at = key_end + 3;
        let (value, end) = match *s.get(at)? {
            b'"' => {
                let body = s.get(at + 1..)?;
                let len = body
                    .iter()
                    .position(|&b| matches!(b, b'"' | b'\\' | b'\n'))?;
                if body[len] != b'"' {
                    return None;
                }
                (PrintedValue::Str(at + 1, at + 1 + len), at + len + 2)
            }
            b'-' | b'0'..=b'9' => {
                let neg = s[at] == b'-';
                let (v, end) = plain_decimal(s, at + usize::from(neg))?;
                let v = i128::from(v);
                (PrintedValue::Int(if neg { -v } else { v }), end)
            }
            b't' | b'f' => {
                let word_end = ident_end(s, at);
                match s.get(at..word_end)? {
                    b"true" => (PrintedValue::Bool(true), word_end),
                    b"false" => (PrintedValue::Bool(false), word_end),
                    _ => return None,
                }
            }
            _ => return None,
        };
        // A key given twice is the general path's error.
        let name = s.get(key.0..key.1)?;
        if entries
            .get(..n)?
            .iter()
            .any(|e| s.get(e.key.0..e.key.1) == Some(name))
        {
            return None;
        }
        *entries.get_mut(n)? = PrintedEntry {
            key,
            value,
            value_at: (at, end),
        };
        n += 1;
        match s.get(end) {
            Some(b'}') => return Some((entries, n, end + 1)),
            Some(b',') if s.get(end + 1) == Some(&b' ') => p = end + 2,
            _ => return None,
        }
    }
}

/// Powers of ten up to 10^8.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The number of ASCII digits that lead the eight bytes of `word` (read
/// little-endian: the first byte is the lowest) and their value.
///
/// After subtracting `'0'` from every byte, a byte is a digit when it is at
/// most 9; a byte below `'0'` borrows from the next one up, and a byte at
/// or above `0x8a` carries into it when 0x76 is added, but both only spoil
/// bytes after the first non-digit, which are not used.
#[inline]
fn swar_digits(word: u64) -> (usize, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = word.wrapping_sub(ONES * u64::from(b'0'));
    let bad = (x | x.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    let n = (bad.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The digits to the top bytes, zeros (leading zeros) below them; then
    // pairs, quads and the eight digits combined by multiplication.
    let x = x << (8 * (8 - n));
    let x = (x.wrapping_mul(10) + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
    let x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_ffff_0000_ffff;
    let x = (x.wrapping_mul(10_000) + (x >> 32)) & 0x0000_0000_ffff_ffff;
    (n, x)
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Bytes that continue an identifier: letters, digits, `_ . $ -`.
static IDENT_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'$' | b'-');
        b += 1;
    }
    t
};

#[inline]
fn is_ident_char(b: u8) -> bool {
    IDENT_CHAR[usize::from(b)]
}

/// Whether the parser reads `s` as one identifier (a role, an attribute
/// key): a letter or `_`, then letters, digits, `_ . $ -`. The verifier
/// holds built modules to it, so that what they print parses back.
pub(crate) fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(|&c| is_ident_start(c)) && b.iter().all(|&c| is_ident_char(c))
}

/// Whether the parser reads `s` as the name after a sigil (`%name`,
/// `@name`): one or more letters, digits, `_ . $ -`.
pub(crate) fn is_sigil_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_ident_char)
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, file: FileId, range: Range<usize>, opts: ParseOptions) -> Self {
        let end = range.end.min(text.len());
        Parser {
            src: &text.as_bytes()[..end],
            text,
            pos: range.start,
            end,
            file,
            module: Module::new(opts.arch.unwrap_or(Arch::V2)),
            names: FxHashMap::default(),
            kernels: FxHashMap::default(),
            defined: Vec::new(),
            broken: Vec::new(),
            declaring: None,
            errors: Vec::new(),
            prev_end: range.start,
            item_start: range.start,
            part: false,
            base: 0,
            window: false,
            hit_end: false,
            buffer_memo: empty_buffer_memo(),
            symbol_memo: [None; SYMBOL_MEMO],
            op_memo: [None; OP_MEMO],
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        // `base + end` is at most MAX_SOURCE_BYTES: a longer input is
        // rejected before parsing ([`parse_module`]) or while it is read
        // (a streaming reader stops at that size).
        Span::new(
            self.file,
            (self.base + start) as u32,
            (self.base + end) as u32,
        )
    }

    fn here(&self) -> Span {
        // A line end is pointed at, not spanned (the caret stays on its line).
        if matches!(self.src.get(self.pos), Some(b'\n' | b'\r')) {
            return self.span(self.pos, self.pos);
        }
        // A character of no width has no room for a caret: it is spanned
        // with the character after it on its line, which shows where it is.
        let mut chars = self.text.get(self.pos..self.end).unwrap_or("").chars();
        if let Some(c) = chars.next().filter(|&c| zero_width(c)) {
            let next = chars.next().filter(|n| !matches!(n, '\n' | '\r'));
            let end = self.pos + c.len_utf8() + next.map_or(0, char::len_utf8);
            return self.span(self.pos, end);
        }
        let end = self.token_end(self.pos);
        self.span(self.pos, end)
    }

    fn error(&mut self, span: Span, msg: impl Into<String>) -> Failed {
        self.error_diag(Diagnostic::error(span, msg))
    }

    /// Records `d`; the error that reaches [`MAX_ERRORS`] says that the
    /// parser stops there.
    fn error_diag(&mut self, mut d: Diagnostic) -> Failed {
        if self.errors.len() + 1 == MAX_ERRORS {
            d = d.with_note(
                format!("the parser stops at {MAX_ERRORS} syntax errors: no item after this one is read"),
                None,
            );
        }
        self.errors.push(d);
        Failed
    }

    fn too_many_errors(&self) -> bool {
        self.errors.len() >= MAX_ERRORS
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips blanks and `//` comments.
    #[inline]
    fn ws(&mut self) {
        // Most calls find a token right away.
        let Some(&b) = self.src.get(self.pos) else {
            self.hit_end = true;
            return;
        };
        if b > b' ' && b != b'/' {
            return;
        }
        // One space before a token, the commonest blank (`dst = %a`,
        // `, src`): what the loop below does for it. The token is before
        // `end` (`src.len() == end`), so the end is not reached.
        if b == b' ' {
            if let Some(&c) = self.src.get(self.pos + 1) {
                if c > b' ' && c != b'/' {
                    self.prev_end = self.pos;
                    self.pos += 1;
                    return;
                }
            }
        }
        self.ws_from(b);
    }

    /// [`Parser::ws`] at a blank or `/`, `b`, that is not one space before
    /// a token: kept out of line, as it is not the common case.
    #[inline(never)]
    fn ws_from(&mut self, b: u8) {
        if matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'/') {
            self.prev_end = self.pos;
        }
        let s = self.src;
        let mut p = self.pos;
        while let Some(&b) = s.get(p) {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => p += 1,
                b'/' if s.get(p + 1) == Some(&b'/') => {
                    while p < self.end && s[p] != b'\n' {
                        p += 1;
                    }
                }
                _ => break,
            }
        }
        self.pos = p;
        if p >= self.end {
            self.hit_end = true;
        }
    }

    /// End of the "token" starting at `pos`, for spans of unexpected input.
    fn token_end(&self, pos: usize) -> usize {
        if pos >= self.end {
            return pos;
        }
        let b = self.src[pos];
        if is_ident_char(b) || b == b'%' || b == b'@' {
            let mut e = pos + 1;
            while e < self.end && is_ident_char(self.src[e]) {
                e += 1;
            }
            e
        } else {
            // One whole UTF-8 character.
            let mut e = pos + 1;
            while e < self.end && (self.src[e] & 0xC0) == 0x80 {
                e += 1;
            }
            e
        }
    }

    fn found(&self) -> String {
        if self.pos >= self.end {
            return "end of input".to_string();
        }
        // Characters that do not show between backquotes are named.
        match self.src[self.pos] {
            b'\n' | b'\r' => return "end of line".to_string(),
            b' ' => return "a blank".to_string(),
            b'\t' => return "a tab".to_string(),
            b if b.is_ascii_control() => return format!("control character U+{b:04X}"),
            _ => {}
        }
        let e = self.token_end(self.pos);
        let text = String::from_utf8_lossy(&self.src[self.pos..e]);
        if let Some(c) = text
            .chars()
            .next()
            .filter(|&c| c.is_whitespace() || c.is_control() || zero_width(c))
        {
            return format!("the invisible character U+{:04X}", u32::from(c));
        }
        format!("`{text}`")
    }

    fn expected(&mut self, what: &str) -> Failed {
        // A construct that began on an earlier line and is cut short at a line
        // end: point at the end of that line, and let recovery resume at the
        // next line instead of skipping it.
        // The gap must be only blanks and comments: `prev_end` is where the
        // last run of blanks began, and tokens read since without a blank
        // between them (`%a[[1,64]`) leave it behind.
        let gap = self.src.get(self.prev_end..self.pos).unwrap_or_default();
        let only_blanks = gap.split(|&b| b == b'\n').all(|line| {
            let line = line.trim_ascii_start();
            line.is_empty() || line.starts_with(b"//")
        });
        if self.item_start < self.prev_end
            && self.prev_end < self.pos
            && gap.contains(&b'\n')
            && only_blanks
        {
            let at = self.prev_end;
            self.pos = at;
            let span = self.span(at, at);
            return self.error(span, format!("expected {what}, found end of line"));
        }
        let msg = format!("expected {what}, found {}", self.found());
        let span = self.here();
        self.error(span, msg)
    }

    /// Consumes `b` after blanks, or reports `expected`.
    fn expect(&mut self, b: u8, what: &str) -> PResult<()> {
        self.ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    /// [`Parser::expect`] where `b` (not a blank nor `/`) is usually
    /// next or after one space: those two spellings are taken here, as
    /// skipping the blanks would take them, and any other goes to `expect`.
    #[inline(always)]
    fn expect_near(&mut self, b: u8, what: &str) -> PResult<()> {
        let s = self.src;
        let p = self.pos;
        if s.get(p) == Some(&b) {
            self.pos = p + 1;
            return Ok(());
        }
        if s.get(p) == Some(&b' ') && s.get(p + 1) == Some(&b) {
            // What `ws` leaves: the blanks began at `p` and end before
            // the input does.
            self.prev_end = p;
            self.pos = p + 2;
            return Ok(());
        }
        self.expect(b, what)
    }

    /// Consumes `b` after blanks if it is next.
    fn eat(&mut self, b: u8) -> bool {
        self.eat_near(b)
    }

    /// [`Parser::eat`] built into its caller, for the hot paths.
    #[inline(always)]
    fn eat_near(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// An identifier (letters, digits, `_ . $ -`), after blanks.
    fn ident(&mut self, what: &str) -> PResult<(&'a str, Span)> {
        self.ident_inline(what)
    }

    /// [`Parser::ident`] built into its caller, for the hot paths (operand
    /// roles and attribute names).
    #[inline(always)]
    fn ident_inline(&mut self, what: &str) -> PResult<(&'a str, Span)> {
        self.ws();
        match self.peek() {
            Some(b) if is_ident_start(b) => {
                let start = self.pos;
                self.pos = ident_end(self.src, start + 1);
                Ok((self.text(start, self.pos), self.span(start, self.pos)))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn text(&self, start: usize, end: usize) -> &'a str {
        // Identifiers and numbers are ASCII, so these bounds are char bounds.
        self.text.get(start..end).unwrap_or("")
    }

    /// Peeks the identifier at the cursor (after blanks) without consuming it.
    fn peek_ident(&mut self) -> Option<&'a str> {
        self.ws();
        let b = self.peek()?;
        if !is_ident_start(b) {
            return None;
        }
        let mut e = self.pos + 1;
        while e < self.end && is_ident_char(self.src[e]) {
            e += 1;
        }
        Some(self.text(self.pos, e))
    }

    /// A sigil name: `%x` or `@x`.
    fn sigil_name(&mut self, sigil: u8, what: &str) -> PResult<(&'a str, Span)> {
        self.sigil_name_inline(sigil, what)
    }

    /// [`Parser::sigil_name`] built into its caller, for the hot path
    /// (buffer references).
    #[inline(always)]
    fn sigil_name_inline(&mut self, sigil: u8, what: &str) -> PResult<(&'a str, Span)> {
        self.ws();
        let start = self.pos;
        if self.peek() != Some(sigil) {
            return Err(self.expected(what));
        }
        self.pos += 1;
        let name_start = self.pos;
        self.pos = ident_end(self.src, name_start);
        if self.pos == name_start {
            self.pos = start;
            return Err(self.expected(what));
        }
        Ok((self.text(name_start, self.pos), self.span(start, self.pos)))
    }

    /// An integer literal: `-`? (decimal | `0x` hex). Returns the value as
    /// i128 (every IR integer fits) and its span.
    fn int(&mut self, what: &str) -> PResult<(i128, Span)> {
        self.ws();
        let start = self.pos;
        let neg = self.peek() == Some(b'-');
        if neg {
            self.pos += 1;
        }
        let hex = self.src.get(self.pos) == Some(&b'0')
            && matches!(self.src.get(self.pos + 1), Some(b'x') | Some(b'X'))
            && self.pos + 1 < self.end;
        let radix = if hex {
            self.pos += 2;
            16
        } else {
            10
        };
        let digits_start = self.pos;
        // Fast path: plain decimal of at most 19 digits (nearly every literal),
        // accumulated while scanning.
        let mut acc = 0u64;
        while self.pos < self.end
            && self.src[self.pos].is_ascii_digit()
            && self.pos - digits_start < 19
        {
            acc = acc * 10 + u64::from(self.src[self.pos] - b'0');
            self.pos += 1;
        }
        let plain_end = self.pos;
        while self.pos < self.end
            && (self.src[self.pos].is_ascii_alphanumeric() || self.src[self.pos] == b'_')
        {
            self.pos += 1;
        }
        let span = self.span(start, self.pos);
        if self.pos == digits_start {
            self.pos = start;
            return Err(self.expected(what));
        }
        if radix == 10 && plain_end == self.pos {
            let v = i128::from(acc);
            return Ok((if neg { -v } else { v }, span));
        }
        let digits = self.text(digits_start, self.pos);
        match u128::from_str_radix(digits, radix) {
            Ok(v) if v <= i128::MAX as u128 => {
                let v = v as i128;
                Ok((if neg { -v } else { v }, span))
            }
            Ok(v) if neg && v == i128::MIN.unsigned_abs() => Ok((i128::MIN, span)),
            Ok(_) => Err(self.error(span, "integer literal is too large")),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                Err(self.error(span, "integer literal is too large"))
            }
            Err(_) => Err(self.error(
                span,
                format!("invalid integer literal `{}`", self.text(start, self.pos)),
            )),
        }
    }

    /// An integer in `lo..=hi`.
    fn int_in(&mut self, what: &str, lo: i128, hi: i128) -> PResult<(i128, Span)> {
        let (v, span) = self.int(what)?;
        if v < lo || v > hi {
            return Err(self.error(span, format!("{what} {v} is out of range [{lo}, {hi}]")));
        }
        Ok((v, span))
    }

    /// A string literal with `\"`, `\\`, `\n`, `\t` and `\XX` (a byte in
    /// two hex digits; the bytes must make UTF-8 text) escapes; borrowed
    /// from the source when it has none.
    fn string(&mut self, what: &str) -> PResult<(std::borrow::Cow<'a, str>, Span)> {
        self.ws();
        let start = self.pos;
        if self.peek() != Some(b'"') {
            return Err(self.expected(what));
        }
        self.pos += 1;
        let body = &self.src[self.pos..];
        if let Some(n) = body.iter().position(|&b| matches!(b, b'"' | b'\\' | b'\n')) {
            if body[n] == b'"' {
                // The quotes are ASCII, so these are char boundaries.
                let text = self.text(self.pos, self.pos + n);
                self.pos += n + 1;
                return Ok((std::borrow::Cow::Borrowed(text), self.span(start, self.pos)));
            }
        }
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => {
                    // A string is the one token that holds blanks: in a
                    // window that ends inside a line, it may go on in the
                    // next one.
                    if self.pos >= self.end {
                        self.hit_end = true;
                    }
                    let span = self.span(start, self.pos);
                    return Err(self.error(span, "unterminated string literal"));
                }
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    let esc = self
                        .src
                        .get(self.pos + 1)
                        .copied()
                        .filter(|_| self.pos + 1 < self.end);
                    let hex = |at: usize| {
                        self.src
                            .get(at)
                            .filter(|_| at < self.end)
                            .and_then(|&b| char::from(b).to_digit(16))
                    };
                    let c = match esc {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        // `\XX`: the byte of that code, as the printer
                        // writes control characters (a character past
                        // ASCII as the bytes of its UTF-8 encoding).
                        Some(_) if hex(self.pos + 1).is_some() && hex(self.pos + 2).is_some() => {
                            let code = hex(self.pos + 1).unwrap_or(0) * 16
                                + hex(self.pos + 2).unwrap_or(0);
                            out.push(code as u8);
                            self.pos += 3;
                            continue;
                        }
                        _ => {
                            let span =
                                self.span(self.pos, self.token_end(self.pos + 1).max(self.pos + 1));
                            return Err(self.error(
                                span,
                                "unknown escape in string literal (use \\\" \\\\ \\n \\t or \\XX, two hex digits)",
                            ));
                        }
                    };
                    out.push(c);
                    self.pos += 2;
                }
                Some(b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
        let span = self.span(start, self.pos);
        match String::from_utf8(out) {
            Ok(text) => Ok((std::borrow::Cow::Owned(text), span)),
            // The source is UTF-8: only `\XX` escapes of 80 to FF that are
            // no character's UTF-8 bytes get here.
            Err(e) => Err(self.error(
                span,
                format!(
                    "the escapes of this string literal do not make UTF-8 text (only its \
                     first {} bytes are): a `\\XX` escape of 80 to FF is one byte of a \
                     character's UTF-8 encoding",
                    e.utf8_error().valid_up_to()
                ),
            )),
        }
    }

    /// Skips to the start of the next line (error recovery).
    fn recover(&mut self) {
        while self.pos < self.end && self.src[self.pos] != b'\n' {
            self.pos += 1;
        }
    }

    // ---- grammar ----

    /// Parses the whole module.
    fn module(&mut self, arch_override: Option<Arch>) {
        if !self.header(arch_override) {
            return;
        }
        while let Some(item) = self.next_item() {
            if let Ok(item) = item {
                self.module.body.push(item);
            }
        }
    }

    /// Parses `module @name attributes {...} {`; false after an error.
    fn header(&mut self, arch_override: Option<Arch>) -> bool {
        self.ws();
        let kw_start = self.pos;
        match self.peek_ident() {
            Some("module") => {
                let _ = self.ident("`module`");
            }
            _ => {
                self.expected("`module`");
                return false;
            }
        }
        self.module.span = self.span(kw_start, self.pos);
        let header = (|| -> PResult<()> {
            self.ws();
            // What may come next, for the error if none does.
            let mut next = "`@name`, `attributes {...}` or `{` to open the module body";
            if self.peek() == Some(b'@') {
                let (name, _) = self.sigil_name(b'@', "module name")?;
                self.module.name = Some(self.module.symbols.intern(name));
                next = "`attributes {...}` or `{` to open the module body";
            }
            let mut arch_attr = None;
            if self.peek_ident() == Some("attributes") {
                next = "`{` to open the module body";
                self.ident("`attributes`")?;
                let attrs = self.attr_dict()?;
                for (key, (value, span)) in attrs {
                    if self.module.str(key) == "arch" {
                        arch_attr = Some((value, span));
                    } else {
                        self.module.attrs.insert(key, value);
                    }
                }
            }
            let arch = match arch_attr {
                Some((Attr::Str(s), span)) => match Arch::from_name(self.module.str(s)) {
                    Some(a) => Some(a),
                    None => {
                        let msg = format!(
                            "unknown arch \"{}\" (expected \"v2\", \"v3\" or \"v4\")",
                            self.module.str(s)
                        );
                        return Err(self.error(span, msg));
                    }
                },
                Some((_, span)) => {
                    return Err(
                        self.error(span, "`arch` must be a string: \"v2\", \"v3\" or \"v4\"")
                    )
                }
                None => None,
            };
            // The body's `{` first: a header that does not parse (so that
            // its attributes were not read) is that error, not a missing
            // arch.
            self.expect(b'{', next)?;
            match arch_override.or(arch) {
                Some(a) => self.module.arch = a,
                None => {
                    let span = self.module.span;
                    return Err(self.error(
                        span,
                        "module has no arch: add `attributes {arch = \"v2\"}` or pass --arch",
                    ));
                }
            }
            Ok(())
        })();
        header.is_ok()
    }

    /// Parses the next declaration or op of the body. `None` once the
    /// closing `}` (and the end of input after it) has been parsed, or
    /// parsing cannot go on. An item with errors yields `Some(Err(()))` after
    /// recording them and skipping to the next line.
    fn next_item(&mut self) -> Option<Result<Item, ()>> {
        if self.too_many_errors() {
            return None;
        }
        self.ws();
        match self.peek() {
            None if self.part || self.window => None,
            // Whether only blanks follow is for a later window to tell.
            Some(b'}') if self.window => {
                self.hit_end = true;
                None
            }
            Some(b'}') if self.part => {
                let here = self.here();
                self.error(here, "the module closes before the end of this part");
                None
            }
            None => {
                let here = self.here();
                self.error(here, "expected `}` to close the module, found end of input");
                None
            }
            Some(b'}') => {
                self.pos += 1;
                self.ws();
                if self.pos < self.end {
                    let span = self.here();
                    let msg = format!(
                        "expected end of input after the module, found {}",
                        self.found()
                    );
                    self.error(span, msg);
                }
                None
            }
            _ => match self.item() {
                Ok(item) => Some(Ok(item)),
                Err(Failed) => {
                    self.recover();
                    Some(Err(()))
                }
            },
        }
    }

    fn item(&mut self) -> PResult<Item> {
        self.ws();
        self.item_start = self.pos;
        if self.peek() == Some(b'%') {
            let r = self.buffer_decl();
            if let (Err(_), Some(sym)) = (&r, self.declaring.take()) {
                if !self.names.contains_key(&sym) && !self.broken.contains(&sym) {
                    self.broken.push(sym);
                }
            }
            self.declaring = None;
            return r.map(Item::Buffer);
        }
        let op = self.op(None)?;
        Ok(Item::Op(op))
    }

    fn buffer_decl(&mut self) -> PResult<Buffer> {
        let (name, name_span) = self.sigil_name(b'%', "a buffer name")?;
        self.declaring = Some(self.module.symbols.intern(name));
        self.expect(b'=', "`=`")?;
        let (opname, op_span) = self.ident(ops::buffer_ops_text())?;
        let Some(OpCode::Buffer(mem)) = OpCode::from_name(opname) else {
            let msg = format!(
                "unknown buffer op `{opname}` (expected {})",
                ops::buffer_ops_text()
            );
            return Err(self.error(op_span, msg));
        };
        let def = OpCode::Buffer(mem).def();
        self.ws();
        let attrs = if self.peek() == Some(b'{') {
            self.attr_dict()?
        } else {
            Default::default()
        };
        let mut partition = None;
        let mut base = None;
        let mut extra = Attrs::default();
        // The table's attributes of the buffer op: the partition (on chip),
        // then the base (`byte` on chip, `addr` for HBM).
        let (partition_attr, base_attr) = match def.attrs {
            [p, b] => (Some(p), b),
            [b] => (None, b),
            _ => return Err(self.error(op_span, "a buffer op row without its attributes")),
        };
        for (key, (value, span)) in attrs {
            let k = self.module.str(key);
            if let Some(p) = partition_attr.filter(|p| p.name == k) {
                partition = Some(self.table_int(&value, span, p)? as u32);
            } else if k == base_attr.name {
                base = Some(self.table_int(&value, span, base_attr)? as u64);
            } else if ops::is_buffer_attr(k) {
                let msg = format!("`{k}` is not an attribute of `{}`", def.name);
                return Err(self.error(span, msg));
            } else {
                extra.insert(key, value);
            }
        }
        let base_key = base_attr.name;
        // A missing attribute that a kept one is a misspelling of (`partiton`)
        // says so.
        let missing = |p: &Self, want: &str| -> String {
            let close = crate::diag::did_you_mean(want, extra.keys().map(|k| p.module.str(*k)));
            match close {
                Some(k) => format!(
                    "`{}` is missing its `{want}` attribute (`{k}` is not one: did you mean `{want}`?)",
                    mem.op_name()
                ),
                None => format!("`{}` is missing its `{want}` attribute", mem.op_name()),
            }
        };
        if let (Some(p), None) = (partition_attr, partition) {
            let msg = missing(self, p.name);
            return Err(self.error(op_span, msg));
        }
        let Some(base) = base else {
            let msg = missing(self, base_key);
            return Err(self.error(op_span, msg));
        };
        self.expect(b':', "`:` before the buffer type")?;
        let (shape, dtype) = self.buffer_type(mem)?;
        let sym = self.module.symbols.intern(name);
        if let Some(&prev) = self.names.get(&sym) {
            let prev_span = self.module.buffers[prev].span;
            let d = Diagnostic::error(name_span, format!("buffer `%{name}` is already defined"))
                .with_note("first defined here", prev_span);
            return Err(self.error_diag(d));
        }
        let span = name_span.to(self.span(self.pos, self.pos));
        let b = self.module.buffers.push(BufferData {
            name: sym,
            mem,
            partition: partition.unwrap_or(0),
            base,
            shape,
            dtype,
            attrs: extra,
            span,
        });
        self.names.insert(sym, b);
        Ok(b)
    }

    /// An integer attribute within the bounds of its table row.
    fn table_int(&mut self, value: &Attr, span: Span, attr: &AttrDef) -> PResult<i128> {
        let (lo, hi) = match attr.kind {
            ValueKind::Int { min, max } => (min, max),
            _ => (i128::MIN, i128::MAX),
        };
        self.attr_int(value, span, attr.name, lo, hi)
    }

    fn attr_int(
        &mut self,
        value: &Attr,
        span: Span,
        what: &str,
        lo: i128,
        hi: i128,
    ) -> PResult<i128> {
        match value {
            Attr::Int(v) if *v >= lo && *v <= hi => Ok(*v),
            Attr::Int(v) => {
                Err(self.error(span, format!("`{what}` = {v} is out of range [{lo}, {hi}]")))
            }
            _ => Err(self.error(span, format!("`{what}` must be an integer"))),
        }
    }

    /// `tile<128x64xf32>` (on-chip) or `tensor<64xf32>` (HBM).
    fn buffer_type(&mut self, mem: Memory) -> PResult<(SmallVec<[u64; 4]>, Dtype)> {
        let want = match OpCode::Buffer(mem).def().operands {
            OperandForm::Buffer { type_keyword, .. } => type_keyword,
            _ => "",
        };
        let (kw, kw_span) = self.ident(&format!("`{want}<...>`"))?;
        if kw != want {
            let msg = format!(
                "a `{}` buffer has type `{want}<...>`, found `{kw}`",
                mem.op_name()
            );
            return Err(self.error(kw_span, msg));
        }
        self.expect(b'<', "`<`")?;
        let mut shape = SmallVec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b) if b.is_ascii_digit() => {
                    let start = self.pos;
                    while self.pos < self.end && self.src[self.pos].is_ascii_digit() {
                        self.pos += 1;
                    }
                    let span = self.span(start, self.pos);
                    let n = match self.text(start, self.pos).parse::<u64>() {
                        Ok(n) if n > 0 => n,
                        Ok(_) => return Err(self.error(span, "a dimension must be at least 1")),
                        Err(_) => return Err(self.error(span, "dimension is too large")),
                    };
                    shape.push(n);
                    if self.peek() != Some(b'x') {
                        return Err(self.expected("`x` after a dimension"));
                    }
                    self.pos += 1;
                }
                Some(b) if is_ident_start(b) => {
                    let start = self.pos;
                    while self.pos < self.end && self.src[self.pos].is_ascii_alphanumeric() {
                        self.pos += 1;
                    }
                    let name = self.text(start, self.pos);
                    let span = self.span(start, self.pos);
                    let Some(dtype) = Dtype::from_name(name) else {
                        let names: Vec<_> = Dtype::names().collect();
                        let hint = crate::diag::did_you_mean(name, names.iter().copied())
                            .map_or(String::new(), |n| format!("; did you mean `{n}`?"));
                        return Err(self.error(
                            span,
                            format!(
                                "unknown element type `{name}` (expected one of {}){hint}",
                                names.join(", ")
                            ),
                        ));
                    };
                    if shape.is_empty() {
                        return Err(self.error(
                            span,
                            "a buffer type needs at least one dimension before its element type",
                        ));
                    }
                    self.expect(b'>', "`>`")?;
                    return Ok((shape, dtype));
                }
                _ => return Err(self.expected("a dimension or an element type")),
            }
        }
    }

    /// An op; `block` is the enclosing kernel body, if any.
    fn op(&mut self, block: Option<Block>) -> PResult<crate::Op> {
        // The common case first: a text op at the top level, found again.
        let fast = if block.is_none() {
            self.known_top_op()
        } else {
            None
        };
        let (kind, span) = match fast {
            Some((op, span)) => (OpKind::Isa(op), span),
            None => match self.op_kind(block)? {
                (Some(kind), span) => (kind, span),
                (None, span) => return self.kernel(span),
            },
        };
        // The op is built in place, in an entry a batch before left
        // (`Arena::recycle`) when there is one: its memory, heap included,
        // is reused instead of an op moved in and one dropped per op. Its
        // fields are all set here; nothing in between reads the arena.
        let mut ops = std::mem::take(&mut self.module.ops);
        let fresh = || OpData {
            kind,
            operands: Operands::new(),
            attrs: Attrs::default(),
            attr_spans: None,
            span,
        };
        // The closure takes the kind and span by value: read from the
        // caller's stack, an enum's copy there stalls on its stores.
        let this = &mut *self;
        let built = ops.push_with(fresh, move |data| this.op_fill(kind, span, data));
        debug_assert!(self.module.ops.id_bound() == 0);
        self.module.ops = ops;
        let op = built?;
        if let Some(b) = block {
            self.module.blocks[b].ops.push(op);
        }
        Ok(op)
    }

    /// Sets every field of `data` (maybe an earlier op's) to the op whose
    /// name, of `kind`, was read at `span`: its attributes, operands and
    /// attributes after them.
    fn op_fill(&mut self, kind: OpKind, span: Span, data: &mut OpData) -> PResult<()> {
        data.kind = kind;
        data.span = span;
        // An entry reused keeps room for a few attributes and for the
        // inline operands, not more.
        if data.attrs.capacity() > RECYCLED_ATTRS {
            data.attrs = Attrs::default();
        } else {
            data.attrs.clear();
        }
        if data.operands.spilled() {
            data.operands = Operands::new();
        }
        self.ws();
        let mut attrs_given = false;
        if self.peek() == Some(b'{') {
            self.spanned_attr_dict(&mut data.attrs, &mut data.attr_spans)?;
            attrs_given = true;
        }
        // Operands are read into the entry's own, past them pushed; the
        // rest are dropped once the op is read.
        let mut operands = 0;
        match kind {
            OpKind::Plan(_) => {}
            OpKind::Read | OpKind::Write => {
                // The access's role is its row's (it is not written).
                let role = match kind.code().def().operands {
                    OperandForm::Access { role, .. } => role,
                    _ => "",
                };
                let role = self.module.symbols.intern(role);
                let start = self.pos;
                let o = operand_slot(&mut data.operands, 0, role, self.span(start, start));
                operands = 1;
                let (buffer, end) = self.access_pattern(&mut o.ap)?;
                o.buffer = buffer;
                let end = if self.lowered_forms(&mut o.lowered)? {
                    self.pos
                } else {
                    end
                };
                o.span = self.span(start, end);
            }
            _ => {
                // Operands start with a role identifier.
                if self.at_operand() {
                    let custom = kind == OpKind::Custom;
                    loop {
                        self.operand(custom, &mut data.operands, operands)?;
                        operands += 1;
                        if !self.eat_near(b',') {
                            break;
                        }
                    }
                }
            }
        }
        data.operands.truncate(operands);
        self.ws();
        if self.peek() == Some(b'{') {
            if attrs_given {
                let here = self.here();
                return Err(self.error(
                    here,
                    "an op takes one attribute dictionary, before or after its operands",
                ));
            }
            self.spanned_attr_dict(&mut data.attrs, &mut data.attr_spans)?;
        } else if !attrs_given {
            data.attr_spans = None;
        }
        Ok(())
    }

    /// The text op at the cursor (after blanks) if the memo of ops found at
    /// the top level has it: its name is there, not run on into more
    /// identifier characters, so the identifier read there is that name.
    #[inline]
    fn known_top_op(&mut self) -> Option<(IsaOp, Span)> {
        self.ws();
        let p = self.pos;
        let op = self.op_memo[op_slot(self.src, p)?]?;
        let name = op.info().name.as_bytes();
        let end = p + name.len();
        if self.src.get(p..end) != Some(name)
            || self.src.get(end).is_some_and(|&b| is_ident_char(b))
        {
            return None;
        }
        self.pos = end;
        Some((op, self.span(p, end)))
    }

    /// The op name at the cursor and what it is (`None` for a kernel, whose
    /// name and body [`Parser::kernel`] reads).
    fn op_kind(&mut self, block: Option<Block>) -> PResult<(Option<OpKind>, Span)> {
        self.ws();
        let start = self.pos;
        let (name, span) = self.ident("an op")?;
        // The common case first: a table op at the top level.
        let top_isa = IsaOp::from_name(name).filter(|_| block.is_none());
        if let Some(op) = top_isa {
            if let Some(slot) = op_slot(self.src, start) {
                self.op_memo[slot] = Some(op);
            }
        }
        let kind = if let Some(op) = top_isa {
            OpKind::Isa(op)
        } else {
            let Some(code) = OpCode::from_name(name) else {
                return Err(self.unknown_op(name, span));
            };
            let def = code.def();
            let here = if block.is_some() {
                Parent::Kernel
            } else {
                Parent::Module
            };
            if let OperandForm::Buffer { .. } = def.operands {
                return Err(self.unknown_op(name, span));
            }
            if def.parent != here {
                return Err(self.misplaced(&def, span));
            }
            match code {
                OpCode::Kernel => return Ok((None, span)),
                OpCode::Isa(op) => OpKind::Isa(op),
                OpCode::Custom => OpKind::Custom,
                OpCode::Read => OpKind::Read,
                OpCode::Write => OpKind::Write,
                OpCode::Plan(p) => OpKind::Plan(p),
                OpCode::Buffer(_) => return Err(self.unknown_op(name, span)),
            }
        };
        Ok((Some(kind), span))
    }

    /// Whether an operand starts at the cursor (after blanks): an
    /// identifier followed by `=` (a role; blanks, line breaks and comments
    /// may come between, as between any two tokens), not one that starts
    /// a new op (whose name is followed by an operand's role, or by
    /// nothing on its line).
    #[inline]
    fn at_operand(&mut self) -> bool {
        self.ws();
        if !self.peek().is_some_and(is_ident_start) {
            return false;
        }
        let mut e = ident_end(self.src, self.pos);
        // A space then `=` is the printer's spelling; anything else is
        // skipped as `ws` skips it.
        if self.src.get(e..e + 2) == Some(b" =") {
            return true;
        }
        loop {
            match self.src.get(e..self.end).unwrap_or_default() {
                [b' ' | b'\t' | b'\r' | b'\n', ..] => e += 1,
                [b'/', b'/', ..] => {
                    e += self.src[e..self.end]
                        .iter()
                        .position(|&b| b == b'\n')
                        .unwrap_or(self.end - e);
                }
                [b'=', ..] => return true,
                [] => {
                    // Undecided at the end of a window: the item is read
                    // again with more (`StreamParser::next_in_window`).
                    self.hit_end = true;
                    return false;
                }
                _ => return false,
            }
        }
    }

    /// An unknown op, or a buffer op written as an op (a name in the
    /// buffer ops' dialect).
    fn unknown_op(&mut self, name: &str, span: Span) -> Failed {
        if name
            .split_once('.')
            .is_some_and(|(d, _)| d == ops::buffer_dialect())
        {
            return self.error(
                span,
                format!(
                    "`{name}` declares a buffer and needs a name: `%name = {name} {{...}} : type`"
                ),
            );
        }
        let mut d = Diagnostic::error(span, format!("unknown op `{name}`"));
        if let Some(c) = crate::diag::did_you_mean(name, OpCode::all().map(OpCode::name)) {
            d = d.with_note(format!("did you mean `{c}`?"), None);
        }
        self.error_diag(d)
    }

    /// An op outside the parent its row of the op-definition table allows.
    fn misplaced(&mut self, def: &OpDef, span: Span) -> Failed {
        let name = def.name;
        let kernel = OpCode::Kernel.name();
        let msg = match (def.parent, def.operands, def.code) {
            (Parent::Kernel, _, OpCode::Plan(_)) => {
                format!("`{name}` is a staging-plan op and may only appear inside a `{kernel}`")
            }
            (Parent::Kernel, _, _) => format!("`{name}` may only appear inside a `{kernel}`"),
            (Parent::Module, OperandForm::Body, _) => {
                format!("a `{name}` may not be nested in another kernel")
            }
            (Parent::Module, _, _) => format!(
                "`{name}` may not appear inside a `{kernel}` (only {})",
                ops::kernel_body_text()
            ),
        };
        self.error(span, msg)
    }

    fn kernel(&mut self, span: Span) -> PResult<crate::Op> {
        let (text, name_span) = self.sigil_name(b'@', "a kernel name `@name`")?;
        let name = self.module.symbols.intern(text);
        // A second definition is reported and its body still parsed (so
        // that errors inside it are found too).
        if let Some(&first) = self.kernels.get(&name) {
            let d = Diagnostic::error(name_span, format!("kernel `@{text}` is already defined"))
                .with_note("first defined here", first);
            let _ = self.error_diag(d);
        } else {
            self.kernels.insert(name, name_span);
            self.defined.push(name);
        }
        self.ws();
        let (mut attrs, mut attr_spans) = (Attrs::default(), None);
        if self.peek() == Some(b'{') && !self.brace_opens_body() {
            self.spanned_attr_dict(&mut attrs, &mut attr_spans)?;
        }
        self.expect(b'{', "`{` to open the kernel body")?;
        let body = self.module.new_block();
        loop {
            if self.too_many_errors() {
                return Err(Failed);
            }
            self.ws();
            match self.peek() {
                None => {
                    let here = self.here();
                    return Err(self.error(
                        here,
                        "expected `}` to close the kernel body, found end of input",
                    ));
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => {
                    self.item_start = self.pos;
                    if self.op(Some(body)).is_err() {
                        self.recover();
                    }
                }
            }
        }
        Ok(self.module.ops.push(OpData {
            kind: OpKind::Kernel { name, body },
            operands: Operands::new(),
            attrs,
            attr_spans,
            span,
        }))
    }

    /// At a `{`: does it open a kernel body (ops) rather than an attribute
    /// dictionary? A dictionary starts with `key =`, or is `{}` followed by
    /// the body's `{`.
    fn brace_opens_body(&mut self) -> bool {
        let mut hit_end = false;
        let mut skip = |mut e: usize| {
            while e < self.end {
                match self.src[e] {
                    b' ' | b'\t' | b'\r' | b'\n' => e += 1,
                    b'/' if self.src.get(e + 1) == Some(&b'/') => {
                        while e < self.end && self.src[e] != b'\n' {
                            e += 1;
                        }
                    }
                    _ => break,
                }
            }
            hit_end |= e >= self.end;
            e
        };
        let e = skip(self.pos + 1);
        let opens = if e < self.end && self.src[e] == b'}' {
            let after = skip(e + 1);
            !(after < self.end && self.src[after] == b'{')
        } else {
            let mut w = e;
            while w < self.end && is_ident_char(self.src[w]) {
                w += 1;
            }
            let after = skip(w);
            !(w > e && after < self.end && self.src[after] == b'=')
        };
        self.hit_end |= hit_end;
        opens
    }

    /// One `role = AP` operand, read into operand `i` of `out` (one past
    /// the last: pushed; see [`operand_slot`]), in place: an operand with
    /// its lowered forms is a few hundred bytes.
    fn operand(&mut self, custom: bool, out: &mut Operands, i: usize) -> PResult<()> {
        let (role, role_span) = self.ident_inline("an operand role")?;
        let role = self.module.symbols.intern(role);
        self.expect_near(b'=', "`=` after the role")?;
        // The access pattern is read into its place (on an error the op,
        // and this operand with it, is dropped).
        let o = operand_slot(out, i, role, role_span);
        let (buffer, mut end) = self.access_pattern(&mut o.ap)?;
        o.buffer = buffer;
        if self.lowered_forms(&mut o.lowered)? {
            end = self.pos;
        }
        self.ws();
        if self.peek() == Some(b'a') && self.peek_ident() == Some("as") {
            let (_, as_span) = self.ident("`as`")?;
            let (s, _) = self.string("a descriptor struct name")?;
            if !custom {
                return Err(self.error(as_span, "only `isa.custom` operands take `as \"...\"`; other ops' descriptor kinds come from the op-encoder table"));
            }
            o.struct_name = Some(self.module.symbols.intern(&s));
            end = self.pos;
        } else if custom {
            return Err(
                self.expected("`as \"NEURON_ISA_TPB_TENSOR<n>D\"` after an `isa.custom` operand")
            );
        }
        o.span = role_span.to(self.span(end, end));
        Ok(())
    }

    /// `%buf[[s, n], ...] (+|- off)?` into `ap` (whose dims are empty);
    /// returns the buffer and the end offset.
    fn access_pattern(&mut self, ap: &mut AccessPattern) -> PResult<(Buffer, usize)> {
        let (name, name_span) = self.sigil_name_inline(b'%', "a buffer reference `%name`")?;
        let word = name_word_at(self.src, self.pos - name.len(), name.len());
        let memo = word.map(|w| (w, memo_slot(w)));
        // Two ways: a name is looked for in its entry and the one paired
        // with it (`slot ^ 1`).
        let known = match memo {
            Some((w, slot)) if self.buffer_memo[slot].0 == w => Some(self.buffer_memo[slot].1),
            Some((w, slot)) if self.buffer_memo[slot ^ 1].0 == w => {
                Some(self.buffer_memo[slot ^ 1].1)
            }
            _ => self
                .module
                .symbols
                .lookup(name)
                .and_then(|s| self.names.get(&s).copied()),
        };
        let buffer = match known {
            Some(b) => {
                if let Some((w, slot)) = memo {
                    // A name found by lookup takes its entry; the entry's
                    // name moves to the paired one.
                    if self.buffer_memo[slot].0 != w && self.buffer_memo[slot ^ 1].0 != w {
                        self.buffer_memo[slot ^ 1] = self.buffer_memo[slot];
                        self.buffer_memo[slot] = (w, b);
                    }
                }
                b
            }
            // Its declaration was reported already.
            None if self
                .module
                .symbols
                .lookup(name)
                .is_some_and(|s| self.broken.contains(&s)) =>
            {
                return Err(Failed)
            }
            None => return Err(self.error(name_span, format!("use of undefined buffer `%{name}`"))),
        };
        let dims = &mut ap.dims;
        if !self.dims_fast(dims) {
            dims.clear();
            self.expect(b'[', "`[` to start the access pattern")?;
            loop {
                dims.push(self.pair()?);
                if !self.eat(b',') {
                    break;
                }
            }
            self.expect(b']', "`]` to end the access pattern")?;
        }
        let mut end = self.pos;
        self.ws();
        let mut offset = 0i64;
        if let Some(sign @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let hi = if sign == b'-' {
                i128::from(i64::MIN).unsigned_abs() as i128
            } else {
                i64::MAX as i128
            };
            // `+ 123` as the printer writes it, else the general path.
            let at = self.pos + usize::from(self.src.get(self.pos) == Some(&b' '));
            if let Some((v, q)) = plain_decimal(self.src, at) {
                self.pos = q;
                let v = v as i64; // at most 18 digits
                offset = if sign == b'-' { -v } else { v };
                end = q;
            } else {
                let (v, _) = self.int_in("offset", 0, hi)?;
                offset = if sign == b'-' { (-v) as i64 } else { v as i64 };
                end = self.pos;
            }
        }
        ap.offset = offset;
        Ok((buffer, end))
    }

    /// The dims `[[s, n], [s, n], ...]` of an access pattern as the printer
    /// writes them (no blanks but one after each comma, plain decimals),
    /// which is nearly every access pattern, scanned in one go, onto
    /// `dims`. False leaves the cursor where it was (and maybe some dims
    /// in `dims`, to be cleared) for the general path, which accepts every
    /// other spelling and reports every error; both give the same dims.
    #[inline]
    fn dims_fast(&mut self, dims: &mut crate::module::Dims) -> bool {
        self.ws();
        let s = self.src;
        let mut p = self.pos;
        if s.get(p) != Some(&b'[') {
            return false;
        }
        p += 1;
        loop {
            let Some((d, q)) = printed_pair(s, p) else {
                return false;
            };
            dims.push(d);
            p = q;
            match s.get(p) {
                Some(b',') => {
                    p += 1;
                    p += usize::from(s.get(p) == Some(&b' '));
                }
                Some(b']') => {
                    self.pos = p + 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// `[step, num]`: the pair of an access pattern or of `slots<...>`.
    fn pair(&mut self) -> PResult<Dim> {
        if let Some(d) = self.pair_fast() {
            return Ok(d);
        }
        self.expect(b'[', "`[step, num]`")?;
        let (step, _) = self.int_in("step", i64::MIN as i128, i64::MAX as i128)?;
        self.expect(b',', "`,` between step and num")?;
        let (num, _) = self.int_in("num", 0, u64::MAX as i128)?;
        self.expect(b']', "`]` after `[step, num`")?;
        Ok(Dim {
            step: step as i64,
            num: num as u64,
        })
    }

    /// `[step, num]` as the printer writes it ([`printed_pair`]), which is
    /// nearly every pair. `None` leaves the cursor where it was for the
    /// general path, which accepts every other spelling and reports every
    /// error; both give the same value.
    #[inline]
    fn pair_fast(&mut self) -> Option<Dim> {
        self.ws();
        let (d, end) = printed_pair(self.src, self.pos)?;
        self.pos = end;
        Some(d)
    }

    /// Optional lowered forms after an access pattern:
    /// `fold<partition = P, byte = B, channels = C>` then `slots<[s, n], ...>`.
    /// Into `lowered`; whether any were given.
    #[inline(always)]
    fn lowered_forms(&mut self, lowered: &mut Option<Lowered>) -> PResult<bool> {
        self.ws();
        if !matches!(self.peek(), Some(b'f' | b's' | b'k' | b'w')) {
            return Ok(false);
        }
        self.lowered_forms_at(lowered)
    }

    /// [`Parser::lowered_forms`] at a byte that may start one.
    #[inline(never)]
    fn lowered_forms_at(&mut self, lowered: &mut Option<Lowered>) -> PResult<bool> {
        if self.peek_ident() == Some("fold") && self.next_after_ident_is(b'<') {
            self.ident("`fold`")?;
            self.expect(b'<', "`<`")?;
            let mut vals = [0i128; 3];
            for (i, (key, hi)) in [
                ("partition", u32::MAX as i128),
                ("byte", u64::MAX as i128),
                ("channels", u32::MAX as i128),
            ]
            .into_iter()
            .enumerate()
            {
                if i > 0 {
                    self.expect(b',', "`,`")?;
                }
                let (k, kspan) = self.ident(&format!("`{key}`"))?;
                if k != key {
                    return Err(self.error(kspan, format!("expected `{key}` in `fold<partition = .., byte = .., channels = ..>`, found `{k}`")));
                }
                self.expect(b'=', "`=`")?;
                vals[i] = self.int_in(key, 0, hi)?.0;
            }
            self.expect(b'>', "`>` to close `fold<...>`")?;
            lowered.get_or_insert_with(Default::default).fold = Some(Fold {
                partition: vals[0] as u32,
                byte: vals[1] as u64,
                channels: vals[2] as u32,
            });
        }
        if self.peek_ident() == Some("slots") && self.next_after_ident_is(b'<') {
            self.ident("`slots`")?;
            self.expect(b'<', "`<`")?;
            let mut slots = SmallVec::new();
            self.ws();
            if self.peek() != Some(b'>') {
                loop {
                    slots.push(self.pair()?);
                    if !self.eat(b',') {
                        break;
                    }
                }
            }
            self.expect(b'>', "`>` to close `slots<...>`")?;
            lowered.get_or_insert_with(Default::default).slots = Some(slots);
        }
        if self.peek_ident() == Some("kind") && self.next_after_ident_is(b'<') {
            self.ident("`kind`")?;
            self.expect(b'<', "`<`")?;
            let (name, span) = self.ident("a descriptor kind")?;
            let Some(kind) = DescriptorKind::from_name(name) else {
                let names: Vec<_> = DescriptorKind::all().map(|k| k.name()).collect();
                return Err(self.error(
                    span,
                    format!(
                        "unknown descriptor kind `{name}` (expected one of {})",
                        names.join(", ")
                    ),
                ));
            };
            self.expect(b'>', "`>` to close `kind<...>`")?;
            lowered.get_or_insert_with(Default::default).kind = Some(kind);
        }
        if self.peek_ident() == Some("wire") && self.next_after_ident_is(b'<') {
            self.ident("`wire`")?;
            self.expect(b'<', "`<`")?;
            let (hex, span) = self.string("descriptor bytes as a hex string")?;
            let bytes = match decode_hex(&hex) {
                Some(b) if b.len() <= 20 => b,
                _ => {
                    return Err(self.error(
                        span,
                        "expected at most 20 descriptor bytes as an even number of hex digits",
                    ))
                }
            };
            self.expect(b'>', "`>` to close `wire<...>`")?;
            lowered.get_or_insert_with(Default::default).wire = Some(bytes);
        }
        Ok(lowered.is_some())
    }

    /// Whether the identifier at the cursor is directly followed by `b`.
    fn next_after_ident_is(&self, b: u8) -> bool {
        let mut e = self.pos;
        while e < self.end && is_ident_char(self.src[e]) {
            e += 1;
        }
        e < self.end && self.src[e] == b
    }

    /// `{key = value, ...}` as attributes and the span of each value, as an
    /// op keeps them.
    fn spanned_attr_dict(
        &mut self,
        attrs: &mut Attrs,
        spans: &mut Option<Box<[Span]>>,
    ) -> PResult<()> {
        if self.printed_attr_dict(attrs, spans) {
            return Ok(());
        }
        self.spanned_attr_dict_general(attrs, spans)
    }

    /// A dictionary at the cursor as the printer writes it
    /// ([`scan_printed_dict`]), which is nearly every one: its entries
    /// into `attrs` (empty) and their spans into `spans`. False leaves the
    /// parser and both as they were (nothing is interned before the whole
    /// dictionary is scanned) for [`Parser::spanned_attr_dict_general`],
    /// which takes every other spelling and reports every error; both give
    /// the same attributes, spans, symbols and cursor.
    #[inline]
    fn printed_attr_dict(&mut self, attrs: &mut Attrs, spans: &mut Option<Box<[Span]>>) -> bool {
        let Some((entries, n, end)) = scan_printed_dict(self.src, self.pos) else {
            return false;
        };
        // Every step that can give up comes before the first interning.
        let Some(entries) = entries.get(..n) else {
            return false;
        };
        let mut at = [Span::default(); PRINTED_DICT];
        let Some(at) = at.get_mut(..n) else {
            return false;
        };
        attrs.reserve(n);
        for (e, span) in entries.iter().zip(at.iter_mut()) {
            // Interned in the general path's order (key, then a string
            // value), so the symbol memo ends the same.
            let key = self.intern_memo(self.text(e.key.0, e.key.1));
            let value = match e.value {
                PrintedValue::Str(a, b) => Attr::Str(self.intern_memo(self.text(a, b))),
                PrintedValue::Int(v) => Attr::Int(v),
                PrintedValue::Bool(b) => Attr::Bool(b),
            };
            attrs.insert(key, value);
            *span = self.span(e.value_at.0, e.value_at.1);
        }
        // Where the general path's last skip of blanks began: the blank
        // after the last `=`.
        if let Some(last) = entries.last() {
            self.prev_end = last.value_at.0 - 1;
        }
        self.pos = end;
        set_spans(spans, at);
        true
    }

    /// [`Parser::spanned_attr_dict`] for any spelling.
    fn spanned_attr_dict_general(
        &mut self,
        attrs: &mut Attrs,
        spans: &mut Option<Box<[Span]>>,
    ) -> PResult<()> {
        let mut at = SmallVec::<[Span; 4]>::new();
        self.attr_entries(attrs, &mut at)?;
        if at.is_empty() {
            *spans = None;
        } else {
            set_spans(spans, &at);
        }
        Ok(())
    }

    /// `{key = value, ...}`, keeping each value's span.
    fn attr_dict(&mut self) -> PResult<SpannedAttrs> {
        let mut attrs = Attrs::default();
        let mut spans = SmallVec::<[Span; 4]>::new();
        self.attr_entries(&mut attrs, &mut spans)?;
        Ok(attrs
            .into_iter()
            .zip(spans)
            .map(|((k, v), s)| (k, (v, s)))
            .collect())
    }

    /// The entries of `{key = value, ...}` into `attrs` (in source order)
    /// and the span of each value into `spans`; a key given twice is an
    /// error at its second occurrence.
    fn attr_entries(&mut self, attrs: &mut Attrs, spans: &mut SmallVec<[Span; 4]>) -> PResult<()> {
        self.expect_near(b'{', "`{`")?;
        if self.eat_near(b'}') {
            return Ok(());
        }
        loop {
            let (key, key_span) = self.ident_inline("an attribute name")?;
            let sym = self.intern_memo(key);
            self.expect_near(b'=', "`=` after the attribute name")?;
            self.ws();
            let start = self.pos;
            let value = self.attr_value(0)?;
            let span = self.span(start, self.pos);
            if attrs.insert(sym, value).is_some() {
                return Err(self.error(key_span, format!("attribute `{key}` is given twice")));
            }
            spans.push(span);
            if !self.eat_near(b',') {
                break;
            }
        }
        self.expect_near(b'}', "`,` or `}` in the attribute dictionary")?;
        Ok(())
    }

    /// Interns `name`, through [`Parser::symbol_memo`]: a remembered
    /// symbol whose text in the table is `name` is the one interning would
    /// give (the table holds each text once), and any other entry is
    /// replaced by what interning gives.
    #[inline]
    fn intern_memo(&mut self, name: &str) -> Symbol {
        let slot = symbol_slot(name.as_bytes());
        let symbols = &mut self.module.symbols;
        // Two ways, as in the buffer memo.
        for s in [slot, slot ^ 1] {
            if let Some(sym) = self.symbol_memo[s] {
                if symbols.contains(sym)
                    && crate::target::encoders::short_eq(symbols.get(sym), name)
                {
                    return sym;
                }
            }
        }
        let sym = symbols.intern(name);
        self.symbol_memo[slot ^ 1] = self.symbol_memo[slot];
        self.symbol_memo[slot] = Some(sym);
        sym
    }

    fn attr_value(&mut self, depth: usize) -> PResult<Attr> {
        self.ws();
        match self.peek() {
            Some(b'"') => {
                let (s, _) = self.string("a string")?;
                Ok(Attr::Str(self.intern_memo(&s)))
            }
            Some(b'[') => {
                if depth >= crate::module::MAX_ARRAY_NESTING {
                    let here = self.here();
                    return Err(self.error(here, "attribute arrays nest too deeply"));
                }
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Attr::Array(items));
                }
                loop {
                    items.push(self.attr_value(depth + 1)?);
                    if !self.eat(b',') {
                        break;
                    }
                }
                self.expect(b']', "`,` or `]` in the array")?;
                Ok(Attr::Array(items))
            }
            Some(b) if b == b'-' || b.is_ascii_digit() => {
                let (v, _) = self.int("an integer")?;
                Ok(Attr::Int(v))
            }
            _ => match self.peek_ident() {
                Some("true") => {
                    self.ident("")?;
                    Ok(Attr::Bool(true))
                }
                Some("false") => {
                    self.ident("")?;
                    Ok(Attr::Bool(false))
                }
                _ => {
                    Err(self
                        .expected("an attribute value (integer, string, `true`, `false` or array)"))
                }
            },
        }
    }
}

/// Decodes hex text (no separators) into bytes.
pub(crate) fn decode_hex(s: &str) -> Option<crate::target::descriptor::DescriptorBytes> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn split_keeps_offsets() {
        let text = "a\n// -----\nb\n  // -----  \nc";
        let parts: Vec<_> = split_input(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(parts, vec!["a\n", "b\n", "c"]);
        // Only the grammar's blanks around the marker: a no-break space
        // (U+00A0) makes it an ordinary comment line.
        let nbsp = "a\n\u{a0}// -----\nb\n\t// -----\r\nc";
        let parts: Vec<_> = split_input(nbsp).into_iter().map(|r| &nbsp[r]).collect();
        assert_eq!(parts, vec!["a\n\u{a0}// -----\nb\n", "c"]);
    }

    #[test]
    fn arenas_grow_with_ops_not_lines() {
        // Sized by the ops parsed, not guessed from the line count: a
        // guess of one op per line made a file of blank lines reserve
        // about a KiB per line (tens of GB for tens of millions of lines,
        // an allocation failure rather than a result).
        let text = format!(
            "module attributes {{arch = \"v2\"}} {{\n  %a = mem.sbuf {{partition = 0, byte = 0}} : tile<128x64xf32>\n{}  isa.tensor_copy dst = %a[[64, 128], [1, 64]], src = %a[[64, 128], [1, 64]]\n}}\n",
            "\n".repeat(100_000)
        );
        let m = match parse_str("t.apir", &text, ParseOptions::default()) {
            Ok((m, _)) => m,
            Err((d, _)) => panic!("{d:?}"),
        };
        assert_eq!(m.ops.len(), 1);
        assert!(m.ops.capacity() < 64, "{}", m.ops.capacity());
    }

    fn errs(text: &str) -> Vec<String> {
        match parse_str("t.apir", text, ParseOptions::default()) {
            Ok(_) => vec![],
            Err((d, sm)) => d
                .iter()
                .map(|d| format!("{}: {}", sm.location(d.span.unwrap()), d.message))
                .collect(),
        }
    }

    #[test]
    fn names_characters_that_do_not_show() {
        let head =
            "module attributes {arch = \"v2\"} {\n  %x = mem.hbm {addr = 0x40000000} : tensor<4";
        // A line end is named and pointed at where the line ends.
        for (rest, found) in [
            ("\n}\n", "end of line"),
            ("\r\n}\r\n", "end of line"),
            (" x f32>\n}\n", "a blank"),
            ("\tx f32>\n}\n", "a tab"),
            ("\u{a0}xf32>\n}\n", "the invisible character U+00A0"),
            ("\u{feff}xf32>\n}\n", "the invisible character U+FEFF"),
            ("\u{7}xf32>\n}\n", "control character U+0007"),
        ] {
            let want = format!("t.apir:2:46: expected `x` after a dimension, found {found}");
            assert_eq!(errs(&format!("{head}{rest}")), [want], "{rest:?}");
        }
        match parse_str("t.apir", &format!("{head}\n}}\n"), ParseOptions::default()) {
            Err((d, _)) => assert_eq!(d[0].span.map(|s| s.start == s.end), Some(true)),
            Ok(_) => panic!("a cut-short type parsed"),
        }
        // A character of no width is spanned with the one after it, so a
        // caret shows where it is: a byte-order mark before `module` too.
        for text in [
            format!("{head}\u{feff}xf32>\n}}\n"),
            "\u{feff}module {\n}\n".to_string(),
            "module attributes {arch = \"v2\"} {\n  \u{200b}isa.iota\n}\n".to_string(),
        ] {
            match parse_str("t.apir", &text, ParseOptions::default()) {
                Err((d, sm)) => {
                    let span = d[0].span.expect("a span");
                    assert_eq!(span.end - span.start, 4, "{text:?}");
                    let shown = crate::diag::render_all(&d[..1], &sm);
                    assert!(
                        shown.lines().any(|l| l.trim_end().ends_with('^')),
                        "{text:?}: no caret in\n{shown}"
                    );
                }
                Ok(_) => panic!("{text:?} parsed"),
            }
        }
    }

    #[test]
    fn reports_each_bad_line() {
        let e = errs("module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<4x4xf32>\n  isa.bogus dst = %x[[4, 4], [1, 4]]\n  isa.tensor_copy dst = %y[[4, 4], [1, 4]], src = %x[[4, 4], [1, 4]]\n}\n");
        assert_eq!(
            e,
            vec![
                "t.apir:3:3: unknown op `isa.bogus`",
                "t.apir:4:25: use of undefined buffer `%y`"
            ]
        );
    }

    /// The word-at-a-time decimal scan agrees with a byte-at-a-time one
    /// on every length, position and terminator.
    #[test]
    fn plain_decimal_matches_a_digit_loop() {
        fn slow(s: &[u8], p: usize) -> Option<(u64, usize)> {
            let n = s[p..].iter().take_while(|b| b.is_ascii_digit()).count();
            let q = p + n;
            if n == 0
                || n > 18
                || s.get(q)
                    .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return None;
            }
            Some((std::str::from_utf8(&s[p..q]).ok()?.parse().ok()?, q))
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let tails: [&[u8]; 8] = [b"", b"]", b", ", b"x", b"_", b"/", b"\n", b"\xff"];
        for digits in 0..=21 {
            for lead in 0..3 {
                for tail in tails {
                    let mut s: Vec<u8> = b"[, "[..lead].to_vec();
                    s.extend((0..digits).map(|_| b'0' + (next() % 10) as u8));
                    s.extend_from_slice(tail);
                    s.extend((0..(next() % 12)).map(|_| b"0123456789 ],x"[(next() % 14) as usize]));
                    assert_eq!(
                        plain_decimal(&s, lead),
                        slow(&s, lead),
                        "{:?}",
                        String::from_utf8_lossy(&s)
                    );
                    // Followed by `,` or `]`, the literal without the
                    // check of the byte after it is the same literal.
                    for t in [b',', b']'] {
                        let before =
                            |d: Option<(u64, usize)>| d.filter(|&(_, q)| s.get(q) == Some(&t));
                        assert_eq!(
                            before(decimal_before(&s, lead)),
                            before(plain_decimal(&s, lead)),
                            "{:?}",
                            String::from_utf8_lossy(&s)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn integer_forms() {
        let (m, _) = parse_str(
            "t",
            "module attributes {arch = \"v3\"} {\n %h = mem.hbm {addr = 0xFF} : tensor<16xu8>\n}",
            ParseOptions::default(),
        )
        .unwrap();
        let b = m.buffers.values().next().unwrap();
        assert_eq!(b.base, 255);
        assert_eq!(m.arch, Arch::V3);
        assert_eq!(errs("module attributes {arch = \"v2\"} {\n %h = mem.hbm {addr = 0x1FFFFFFFFFFFFFFFFF} : tensor<16xu8>\n}")[0], "t.apir:2:23: `addr` = 590295810358705651711 is out of range [0, 18446744073709551615]");
    }

    #[test]
    fn arch_override_and_missing() {
        assert_eq!(
            errs("module {\n}")[0],
            "t.apir:1:1: module has no arch: add `attributes {arch = \"v2\"}` or pass --arch"
        );
        let (m, _) = parse_str(
            "t",
            "module {}",
            ParseOptions {
                arch: Some(Arch::V4),
            },
        )
        .unwrap();
        assert_eq!(m.arch, Arch::V4);
    }

    /// Every text op's name is an identifier that names that op alone, so
    /// finding the name at the cursor ([`Parser::known_top_op`]) reads the
    /// identifier a lookup by name would.
    #[test]
    fn text_op_names_are_identifiers_of_their_op() {
        for op in IsaOp::all() {
            let name = op.info().name;
            let b = name.as_bytes();
            assert!(is_ident_start(b[0]), "{name}");
            assert!(b.iter().all(|&c| is_ident_char(c)), "{name}");
            assert_eq!(IsaOp::from_name(name), Some(op), "{name}");
        }
    }

    /// A parser over `text` at byte `at`, as if a module's body were there.
    fn parser_at(text: &str, at: usize) -> Parser<'_> {
        let mut p = Parser::new(
            text,
            FileId::default(),
            0..text.len(),
            ParseOptions::default(),
        );
        p.pos = at.min(text.len());
        p.prev_end = 0;
        p.item_start = 0;
        p
    }

    /// What a parser's cursor and records are, to compare two of them.
    fn state(p: &Parser<'_>) -> String {
        format!("{} {} {} {:?}", p.pos, p.prev_end, p.hit_end, p.errors)
    }

    /// Texts around the spellings the fast paths take, and near misses.
    fn near_text() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            " ",
            "  ",
            "\t",
            "\n",
            "\r",
            "=",
            ",",
            "]",
            "[",
            "//",
            "/",
            "x",
            "dst",
            "src0",
            "as",
            "isa.tensor_tensor",
            "isa.tensor_copy",
            "isa.iota",
            "isa.tensor_tensorx",
            "{",
            "}",
            "%sa",
            "%",
            "0",
            "12",
            "0x1f",
            "-",
            "+",
            "1234567",
            "123456789",
            "_",
            "$",
            "é",
            "\"",
        ]);
        prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
    }

    /// The operand start check as two scans: an identifier at the cursor,
    /// and `=` after it and the blanks and comments `ws` skips (which
    /// reaching the end marks, as there).
    fn at_operand_reference(p: &mut Parser<'_>) -> bool {
        if p.peek_ident().is_none() {
            return false;
        }
        let mut e = p.pos;
        while e < p.end && is_ident_char(p.src[e]) {
            e += 1;
        }
        let (pos, prev_end) = (p.pos, p.prev_end);
        p.pos = e;
        p.ws_from(b'x');
        let found = p.peek() == Some(b'=');
        (p.pos, p.prev_end) = (pos, prev_end);
        found
    }

    /// Skipping blanks without the one-space shortcut of [`Parser::ws`].
    fn ws_reference(p: &mut Parser<'_>) {
        let Some(&b) = p.src.get(p.pos) else {
            p.hit_end = true;
            return;
        };
        if b > b' ' && b != b'/' {
            return;
        }
        p.ws_from(b);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The near forms of `expect` and `eat`, the operand check and the
        /// identifier scan leave the parser as the general forms do.
        #[test]
        fn near_forms_match_the_general_ones(text in near_text(), at in 0usize..6) {
            for b in [b'=', b',', b']'] {
                let (mut a, mut g) = (parser_at(&text, at), parser_at(&text, at));
                let ra = a.expect_near(b, "`x`").is_ok();
                let rg = g.expect(b, "`x`").is_ok();
                proptest::prop_assert_eq!((ra, state(&a)), (rg, state(&g)));
                let (mut a, mut g) = (parser_at(&text, at), parser_at(&text, at));
                proptest::prop_assert_eq!((a.eat_near(b), state(&a)), (g.eat(b), state(&g)));
            }
            let (mut a, mut g) = (parser_at(&text, at), parser_at(&text, at));
            a.ws();
            ws_reference(&mut g);
            proptest::prop_assert_eq!(state(&a), state(&g));
            let (mut a, mut g) = (parser_at(&text, at), parser_at(&text, at));
            proptest::prop_assert_eq!(
                (a.at_operand(), state(&a)),
                (at_operand_reference(&mut g), state(&g))
            );
            let s = text.as_bytes();
            for p in 0..=s.len() + 1 {
                let mut e = p;
                while s.get(e).is_some_and(|&b| is_ident_char(b)) {
                    e += 1;
                }
                proptest::prop_assert_eq!(ident_end(s, p), e);
            }
        }
    }

    /// Attribute dictionaries: printed ones of up to six entries (more
    /// than the fast path takes) and ones from pieces of near misses.
    fn dict_text() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec!["op", "func", "value", "k1", "true", "_x", "a.b"]);
        let value = prop::sample::select(vec![
            "\"max\"",
            "\"\"",
            "\"a\\\"b\"",
            "\"a\nb\"",
            "-3",
            "-0",
            "12",
            "123456789012345678",
            "1234567890123456789",
            "0x10",
            "1_0",
            "007",
            "-",
            "true",
            "false",
            "truex",
            "[1]",
            "x",
        ]);
        let printed = prop::collection::vec((key.clone(), value.clone()), 1..7).prop_map(|v| {
            let items: Vec<String> = v.iter().map(|(k, x)| format!("{k} = {x}")).collect();
            format!("{{{}}}", items.join(", "))
        });
        let piece = prop_oneof![
            key,
            value,
            prop::sample::select(vec![
                " = ", "=", " =", "= ", ", ", ",", "}", " ", "\n", "// c\n", "\"", "é", "{",
            ]),
        ];
        let pieces = prop::collection::vec(piece, 0..8).prop_map(|v| format!("{{{}", v.concat()));
        let tail = prop::sample::select(vec!["", " ", "}", "\n", " isa.iota"]);
        (prop_oneof![printed, pieces], tail).prop_map(|(d, t)| format!("{d}{t}"))
    }

    /// A dictionary read by [`Parser::spanned_attr_dict`] (the printed
    /// form's fast path first) and by the general path: the result and
    /// what the parser keeps.
    fn read_dict(text: &str, general: bool) -> String {
        let mut p = parser_at(text, 0);
        // A memo that is not empty, and one name interned already.
        p.intern_memo("op");
        let (mut attrs, mut spans) = (Attrs::default(), None);
        let r = if general {
            p.spanned_attr_dict_general(&mut attrs, &mut spans)
        } else {
            p.spanned_attr_dict(&mut attrs, &mut spans)
        };
        let r = r.ok().map(|()| (attrs, spans));
        format!(
            "{r:?} {} {:?} {:?}",
            state(&p),
            p.module.symbols,
            p.symbol_memo
        )
    }

    #[test]
    fn printed_dicts_take_the_fast_path() {
        for text in [
            "{func = \"sigmoid\"}",
            "{op = \"max\", scalar = -3}",
            "{accumulate = true}",
            "{a = 1, b = false, c = \"\", d = 123456789012345678}",
        ] {
            assert!(scan_printed_dict(text.as_bytes(), 0).is_some(), "{text}");
            assert_eq!(read_dict(text, false), read_dict(text, true), "{text}");
        }
        for text in [
            "{}",
            "{op=\"max\"}",
            "{op = \"a\\\"b\"}",
            "{op = 0x10}",
            "{op = 1, op = 2}",
            "{a = 1, b = 2, c = 3, d = 4, e = 5}",
            "{op = 1,b = 2}",
        ] {
            assert!(scan_printed_dict(text.as_bytes(), 0).is_none(), "{text}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// The printed dictionary's fast path gives what the general path
        /// gives: attributes, spans, errors, symbols, memo and cursor.
        #[test]
        fn printed_dicts_read_as_the_general_path_reads_them(text in dict_text()) {
            proptest::prop_assert_eq!(read_dict(&text, false), read_dict(&text, true), "{}", text);
        }
    }

    /// A module body of op lines from pieces of the common spellings and
    /// near misses of them.
    fn op_lines() -> impl Strategy<Value = String> {
        let name = prop::sample::select(vec![
            "isa.tensor_tensor",
            "isa.tensor_copy",
            "isa.activation",
            "isa.iota",
            "isa.tensor_tensorx",
            "isa.tensor_tensor_",
            "isa.bogus",
            "gpsimd.read",
            "isa.custom",
        ]);
        let blank = prop::sample::select(vec![" ", "", "  ", "\t", " // c\n "]);
        let role = prop::sample::select(vec!["dst", "src", "src0", "src1", "bias", "weird", "as"]);
        // Many buffer names, attribute names and strings: the memos' entries
        // are shared and replaced.
        let buf = prop_oneof![
            prop::sample::select(vec!["%sa", "%sb", "%pa", "%nope", "%broken", "%", "sa"])
                .prop_map(String::from),
            (0..48u32).prop_map(|i| format!("%b{i}")),
        ];
        let num = prop::sample::select(vec!["1", "128", "0x10", "007", "-3", "99999999999", "1_0"]);
        let key = prop_oneof![
            prop::sample::select(vec!["op", "func", "value", "accumulate", "op2"])
                .prop_map(String::from),
            (0..99u32).prop_map(|i| format!("k{i}")),
        ];
        let value = prop::sample::select(vec![
            "\"subtract\"",
            "\"sigmoid\"",
            "\"max\"",
            "\"bitwise_or\"",
            "\"a\\\"b\"",
            "1",
            "true",
            "[1, \"x\"]",
            "\"\"",
        ])
        .prop_map(String::from);
        let value = prop_oneof![value, (0..99u32).prop_map(|i| format!("\"bitwise_v{i}\""))];
        let dims =
            prop::collection::vec((num.clone(), num.clone(), blank.clone()), 1..4).prop_map(|v| {
                let pairs: Vec<String> =
                    v.iter().map(|(s, n, b)| format!("[{s},{b}{n}]")).collect();
                format!("[{}]", pairs.join(", "))
            });
        let offset = prop::sample::select(vec![
            "",
            " + 16",
            "+16",
            " - 0x10",
            " + -1",
            " + 1234567890",
        ]);
        let operand = (role, blank.clone(), buf, dims, offset)
            .prop_map(|(r, b, buf, d, o)| format!("{r}{b}={b}{buf}{d}{o}"));
        let attrs = prop::collection::vec((key, blank.clone(), value), 0..3).prop_map(|v| {
            let items: Vec<String> = v.iter().map(|(k, b, x)| format!("{k}{b}={b}{x}")).collect();
            format!("{{{}}}", items.join(", "))
        });
        let line = (
            name,
            blank.clone(),
            prop::collection::vec(operand, 0..4),
            prop::option::of(attrs),
            proptest::bool::ANY,
        )
            .prop_map(|(n, b, ops, attrs, before)| {
                let attrs = attrs.unwrap_or_default();
                let (pre, post) = if before {
                    (attrs, String::new())
                } else {
                    (String::new(), attrs)
                };
                format!("  {n}{b}{pre} {} {post}\n", ops.join(", "))
            });
        prop::collection::vec(line, 1..12).prop_map(|v| v.concat())
    }

    /// The items of `text`'s module body and the parser's records, with
    /// the memos in front of the lookups kept (`warm`) or emptied before
    /// every item, so that every lookup takes the general path.
    fn parse_with_memos(text: &str, warm: bool) -> (Vec<Result<Item, ()>>, String) {
        let mut p = Parser::new(
            text,
            FileId::default(),
            0..text.len(),
            ParseOptions::default(),
        );
        assert!(p.header(None), "{text}");
        let mut items = Vec::new();
        loop {
            if !warm {
                p.op_memo = [None; OP_MEMO];
                p.symbol_memo = [None; SYMBOL_MEMO];
                p.buffer_memo = empty_buffer_memo();
            }
            let Some(item) = p.next_item() else { break };
            items.push(item);
        }
        let ops: Vec<_> = p.module.ops.values().cloned().collect();
        let record = format!(
            "{ops:?} {:?} {:?} {}",
            p.errors,
            p.module.symbols,
            state(&p)
        );
        (items, record)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Ops found through the memos parse exactly as through the
        /// lookups: the same ops, symbols, errors and cursor.
        #[test]
        fn memos_give_what_the_lookups_give(body in op_lines()) {
            let bufs: String = (0..48)
                .map(|i| format!("  %b{i} = mem.sbuf {{partition = 0, byte = 0}} : tile<1x4xf32>\n"))
                .collect();
            let text = format!(
                "module attributes {{arch = \"v2\"}} {{\n  %sa = mem.sbuf {{partition = 0, byte = 0}} : tile<128x64xf32>\n  %sb = mem.sbuf {{partition = 0, byte = 0x8000}} : tile<128x64xf32>\n  %pa = mem.psum {{partition = 0, byte = 0}} : tile<128x512xf32>\n  %broken = mem.sbuf {{byte = 0}} : tile<1xf32>\n{bufs}{body}}}\n"
            );
            let warm = parse_with_memos(&text, true);
            let cold = parse_with_memos(&text, false);
            proptest::prop_assert_eq!(warm, cold, "{}", text);
        }
    }
}
