//! Source files, spans and line/column lookup.
//!
//! A [`Span`] is three `u32`s (file, start, end), so every op and operand can
//! carry one without weighing down the IR. Line and column numbers are computed
//! on demand from a lazily built line index.

use std::io::{self, BufRead};
use std::ops::Range;
use std::sync::OnceLock;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file. The default is [`Span::NONE`], the
/// span of what was built in code rather than read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// The file the range lies in.
    pub file: FileId,
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Default for Span {
    fn default() -> Self {
        Span::NONE
    }
}

impl Span {
    /// No place in any source: the span of a module, buffer, op or operand
    /// built in code ([`crate::Module::op_data`] and the others), in a file
    /// no source map holds, so that a diagnostic about it is shown without
    /// a location (its message names the op or buffer) and a wire or JSON
    /// location is left out, even in a module that was parsed from a file
    /// and then edited.
    pub const NONE: Span = Span {
        file: FileId(u32::MAX),
        start: 0,
        end: 0,
    };

    /// A span in `file` covering `start..end`.
    pub fn new(file: FileId, start: u32, end: u32) -> Self {
        Span { file, start, end }
    }

    /// The smallest span covering both `self` and `other` (same file).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One source file: its display name, its text and a lazily built line index.
///
/// A file is held whole, or as an **excerpt** ([`SourceMap::add_excerpt`]):
/// only the lines some diagnostics point at, read from the input again
/// after a run that streamed it. Spans keep their offsets in the whole file
/// either way, and [`SourceFile::line_col`], [`SourceFile::line_start`] and
/// the rendering of diagnostics give the same answers on every line an
/// excerpt holds as on the whole file.
#[derive(Debug)]
pub struct SourceFile {
    name: String,
    /// The whole text, or an excerpt's lines one after the other.
    text: String,
    /// Where each line starts (a whole file).
    line_starts: OnceLock<Vec<u32>>,
    /// The text as diagnostics show it, if it differs ([`shown_text`]).
    shown: OnceLock<Option<String>>,
    /// The lines held, in file order (an excerpt).
    excerpt: Option<Vec<HeldLine>>,
}

/// One line of a file held in an excerpt, or one piece of a long line
/// (a line longer than [`HOLD_WHOLE`] is held as the pieces around the
/// spans on it, each an entry, in file order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeldLine {
    /// 0-based line number in the file.
    line: u32,
    /// Offset in the file of its first held byte.
    offset: u32,
    /// Offset in the excerpt's text of the same byte; the line runs to the
    /// next held line's `at` (or the text's end), its newline included.
    at: u32,
    /// Characters of the line before `offset` that are not held (0 but
    /// for the first line of a window that starts inside a line, and for
    /// a piece of a long line after its first).
    skipped: u32,
}

impl SourceFile {
    /// The name shown in diagnostics (`k.apir`, `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole text; for an excerpt ([`SourceFile::is_excerpt`]) only the
    /// lines it holds, one after the other, so that offsets into it are not
    /// the file's ([`SourceFile::slice`] takes the file's).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// [`SourceFile::text`] as diagnostics show it ([`shown_text`]): the
    /// same length and line ends, made once per file.
    pub fn shown(&self) -> &str {
        self.shown
            .get_or_init(|| match shown_text(&self.text) {
                std::borrow::Cow::Borrowed(_) => None,
                std::borrow::Cow::Owned(s) => Some(s),
            })
            .as_deref()
            .unwrap_or(&self.text)
    }

    /// Whether this file holds only some of its lines.
    pub fn is_excerpt(&self) -> bool {
        self.excerpt.is_some()
    }

    /// The text of `span` (offsets in the whole file), if the file holds
    /// all of it.
    pub fn slice(&self, span: Span) -> Option<&str> {
        let (start, end) = (self.held(span.start)?, self.held(span.end)?);
        // Both ends held and as far apart as in the file: so is every byte
        // between them.
        (end.checked_sub(start)? == span.end.checked_sub(span.start)? as usize)
            .then(|| self.text.get(start..end))
            .flatten()
    }

    /// The held lines of an excerpt (`None` for a whole file).
    fn held_lines(&self) -> Option<&[HeldLine]> {
        self.excerpt.as_deref()
    }

    /// Where `text` holds line `k` of the excerpt: its range.
    fn held_range(&self, lines: &[HeldLine], k: usize) -> Range<usize> {
        let start = lines[k].at as usize;
        let end = lines.get(k + 1).map_or(self.text.len(), |l| l.at as usize);
        start..end
    }

    /// Where file offset `offset` lies in `text`, if the file holds it (an
    /// offset at a held line's end is held: a span may end there).
    fn held(&self, offset: u32) -> Option<usize> {
        let Some(lines) = self.held_lines() else {
            return (offset as usize <= self.text.len()).then_some(offset as usize);
        };
        let k = lines
            .partition_point(|l| l.offset <= offset)
            .checked_sub(1)?;
        let r = self.held_range(lines, k);
        let into = (offset - lines[k].offset) as usize;
        (into <= r.len()).then_some(r.start + into)
    }

    /// Where file offset `offset` lies in `text`: where it is held, else the
    /// end of the nearest held line before it (a span outside an excerpt is
    /// shown at the edge of what is held rather than not at all).
    pub(crate) fn local(&self, offset: u32) -> usize {
        if let Some(at) = self.held(offset) {
            return at;
        }
        let Some(lines) = self.held_lines() else {
            return self.text.len();
        };
        match lines.partition_point(|l| l.offset <= offset).checked_sub(1) {
            Some(k) => self.held_range(lines, k).end,
            None => 0,
        }
    }

    /// The 0-based file line of position `local` of `text`.
    pub(crate) fn line_of_local(&self, local: usize) -> u32 {
        match self.held_lines() {
            None => {
                let starts = self.line_starts();
                (starts.partition_point(|&s| s as usize <= local).max(1) - 1) as u32
            }
            Some(lines) => {
                let k = lines.partition_point(|l| l.at as usize <= local);
                lines.get(k.max(1) - 1).map_or(0, |l| l.line)
            }
        }
    }

    /// The range in `text` of 0-based file line `line`, its newline
    /// included, if the file holds that line.
    pub(crate) fn local_line(&self, line: u32) -> Option<Range<usize>> {
        match self.held_lines() {
            None => {
                let starts = self.line_starts();
                let start = *starts.get(line as usize)? as usize;
                let end = starts
                    .get(line as usize + 1)
                    .map_or(self.text.len(), |&e| e as usize);
                Some(start..end)
            }
            Some(lines) => {
                // A long line may be held as several pieces: all of them.
                let (first, last) = pieces_of(lines, line)?;
                Some(self.held_range(lines, first).start..self.held_range(lines, last).end)
            }
        }
    }

    /// The 1-based column (in characters) of position `local` of `text`.
    pub(crate) fn column_of_local(&self, local: usize) -> u32 {
        // Counted from the start of the line, or of the held piece of it
        // that `local` lies in, whose `skipped` counts the characters
        // before it.
        let (start, skipped) = match self.held_lines() {
            None => {
                let line = self.line_of_local(local);
                (self.local_line(line).map_or(0, |r| r.start), 0)
            }
            Some(lines) => {
                let k = lines.partition_point(|l| l.at as usize <= local).max(1) - 1;
                lines.get(k).map_or((0, 0), |l| (l.at as usize, l.skipped))
            }
        };
        let end = local.clamp(start, self.text.len());
        let col = self
            .text
            .get(start..end)
            .map_or(end - start, |s| s.chars().count());
        col as u32 + skipped + 1
    }

    fn line_starts(&self) -> &[u32] {
        self.line_starts.get_or_init(|| {
            let mut starts = vec![0u32];
            starts.extend(
                self.text
                    .bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i as u32 + 1),
            );
            starts
        })
    }

    /// 1-based line and column (in characters) of byte `offset` (in an
    /// excerpt, of the nearest held position if `offset` is not held).
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        if self.is_excerpt() {
            let local = self.local(offset);
            return (self.line_of_local(local) + 1, self.column_of_local(local));
        }
        let starts = self.line_starts();
        let line = match starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = starts[line] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self
            .text
            .get(start..end)
            .map_or(end - start, |s| s.chars().count());
        (line as u32 + 1, col as u32 + 1)
    }

    /// Byte offset where 1-based `line` starts, if the file has (an excerpt:
    /// holds) that line.
    pub fn line_start(&self, line: u32) -> Option<u32> {
        if let Some(lines) = self.held_lines() {
            let line = line.checked_sub(1)?;
            let (k, _) = pieces_of(lines, line)?;
            // A line held from partway along does not hold its start.
            return (lines[k].skipped == 0).then_some(lines[k].offset);
        }
        self.line_starts()
            .get(line.checked_sub(1)? as usize)
            .copied()
    }
}

/// A message or note as diagnostics show it: one line, whatever names or
/// strings from the input it quotes. A line feed or carriage return is
/// written `\n` or `\r` (a message is no source text, so no column needs
/// its length kept), and every other control character (but tab) and
/// every bidirectional formatting character is shown as by
/// [`shown_text`]: input text cannot start a line that reads as a
/// diagnostic or a location of its own. Borrowed when there is none. The
/// tools show every name from the input they write on a line of text this
/// way: file names, `apir-dis`'s role names.
pub fn shown_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\n', '\r']) {
        return shown_text(text);
    }
    let escaped = text.replace('\n', "\\n").replace('\r', "\\r");
    std::borrow::Cow::Owned(shown_text(&escaped).into_owned())
}

/// `text` as diagnostics show it, with the same length and the same
/// characters, so that every byte offset and every column stays put:
/// each control character (C0 but tab and line feed, a carriage return
/// not before a line feed, DEL) is `?`, each C1 control (two bytes) is
/// `¿` (two bytes), and each bidirectional formatting character (an
/// embedding, override or isolate, U+202A..U+202E and U+2066..U+2069, or
/// a directional mark, U+200E, U+200F, three bytes; the Arabic letter
/// mark U+061C, two bytes, is `¿`) is U+FFFD `�` (three bytes). No
/// escape sequence or carriage return from the input reaches the
/// terminal, nor a character that shows the text around it in another
/// order than its own. Borrowed when there is none.
pub fn shown_text(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char, next: Option<char>| {
        (c.is_control() && !(matches!(c, '\t' | '\n') || (c == '\r' && next == Some('\n'))))
            || reorders(c)
    };
    let mut it = text.chars().peekable();
    let mut clean = true;
    while let Some(c) = it.next() {
        if hidden(c, it.peek().copied()) {
            clean = false;
            break;
        }
    }
    if clean {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        if !hidden(c, it.peek().copied()) {
            out.push(c);
        } else {
            out.push(match c.len_utf8() {
                1 => '?',
                2 => '¿',
                _ => '\u{FFFD}',
            });
        }
    }
    debug_assert_eq!(out.len(), text.len());
    std::borrow::Cow::Owned(out)
}

/// Whether `c` is a Unicode bidirectional formatting character: an
/// embedding, override or isolate (U+202A..U+202E, U+2066..U+2069) or a
/// directional mark (U+200E, U+200F, U+061C). Shown as they are, they
/// make a terminal show the text around them in another order than the
/// order it has (a "Trojan Source" line), so [`shown_text`] replaces them.
pub(crate) fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The files a compilation reads. Diagnostics refer to them by [`FileId`].
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

/// The largest source file accepted: spans are 32-bit offsets.
pub const MAX_SOURCE_BYTES: usize = u32::MAX as usize - 1;

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
            shown: OnceLock::new(),
            excerpt: None,
        });
        id
    }

    /// Adds an excerpt of a file and returns its id: the lines of the text
    /// `input` reads that diagnostics with spans `spans` (offsets in that
    /// text) need to render as they would on the whole file. Reading stops
    /// after the last line needed, so memory is those lines, not the file.
    ///
    /// Held for each span: the line before its first, its first five
    /// lines, its last three and the line after (codespan-reporting shows a
    /// multi-line span's first four lines and last two, and a line between
    /// two shown lines). A line between held lines that a rendering still
    /// asks for is shown as not held: the diagnostic's plain message.
    ///
    /// # Errors
    /// Reading fails, or a held line is not UTF-8.
    pub fn add_excerpt(
        &mut self,
        name: impl Into<String>,
        input: impl io::Read,
        spans: impl IntoIterator<Item = Span>,
    ) -> io::Result<FileId> {
        let (text, lines) = excerpt(input, spans)?;
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.into(),
            text,
            line_starts: OnceLock::new(),
            shown: OnceLock::new(),
            excerpt: Some(lines),
        });
        Ok(id)
    }

    /// Adds a window of a file and returns its id: `text` is the file's
    /// bytes from offset `offset` on, which lies on 0-based line `line`,
    /// `column` characters after the line's start (0 for a window that
    /// starts a line). Every offset in the window has the whole file's
    /// line and column ([`SourceFile::line_col`], [`SourceMap::location`]);
    /// what a streaming run that reads its input window by window uses to
    /// locate what it writes.
    pub fn add_window(
        &mut self,
        name: impl Into<String>,
        text: &str,
        offset: u32,
        line: u32,
        column: u32,
    ) -> FileId {
        let mut lines = vec![HeldLine {
            line,
            offset,
            at: 0,
            skipped: column,
        }];
        let mut next = line;
        for (i, _) in text.bytes().enumerate().filter(|&(_, b)| b == b'\n') {
            next = next.saturating_add(1);
            let at = u32::try_from(i + 1).unwrap_or(u32::MAX);
            lines.push(HeldLine {
                line: next,
                offset: offset.saturating_add(at),
                at,
                skipped: 0,
            });
        }
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.into(),
            text: text.to_string(),
            line_starts: OnceLock::new(),
            shown: OnceLock::new(),
            excerpt: Some(lines),
        });
        id
    }

    /// The file with id `id`.
    ///
    /// # Panics
    /// If `id` was not returned by this map's [`SourceMap::add`].
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The file with id `id`, if any.
    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    /// All files, in id order.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    /// `file:line:col` of the start of `span`.
    pub fn location(&self, span: Span) -> String {
        Locator::default().location(self, span)
    }
}

/// Locates spans one after another, as an emitter walking ops in program
/// order does: a span starting on the line of the one located before it,
/// at or after it, is located from there, in time linear in the text
/// between the two, rather than from its line's start. Ops packed on one
/// long line are then located in time linear in the line rather than
/// quadratic. Any other span is located as [`SourceFile::line_col`] does,
/// with the same answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Locator {
    /// The last span start located: file, offset, line, column.
    last: Option<(FileId, u32, u32, u32)>,
}

impl Locator {
    /// 1-based line and column of the start of `span`, as
    /// [`SourceFile::line_col`] gives them; `None` if `map` does not hold
    /// the file.
    pub fn line_col(&mut self, map: &SourceMap, span: Span) -> Option<(u32, u32)> {
        let f = map.get(span.file)?;
        let at = span.start;
        let from_last = self.last.and_then(|(file, off, line, col)| {
            if file != span.file || at < off {
                return None;
            }
            let between = f.slice(Span::new(file, off, at))?;
            (!between.contains('\n')).then(|| (line, col + between.chars().count() as u32))
        });
        let (line, col) = from_last.unwrap_or_else(|| f.line_col(at));
        self.last = Some((span.file, at, line, col));
        Some((line, col))
    }

    /// `file:line:col` of the start of `span` ([`SourceMap::location`]).
    pub fn location(&mut self, map: &SourceMap, span: Span) -> String {
        let Some((l, c)) = self.line_col(map, span) else {
            return "<unknown>".to_string();
        };
        let name = map.file(span.file).name();
        let mut num = itoa::Buffer::new();
        let mut s = String::with_capacity(name.len() + 12);
        s.push_str(name);
        s.push(':');
        s.push_str(num.format(l));
        s.push(':');
        s.push_str(num.format(c));
        s
    }
}

/// The entries of `lines` holding 0-based line `line`: the first and the
/// last (the same but for a long line held as pieces).
fn pieces_of(lines: &[HeldLine], line: u32) -> Option<(usize, usize)> {
    let first = lines.partition_point(|l| l.line < line);
    let last = lines.partition_point(|l| l.line <= line).checked_sub(1)?;
    (first <= last).then_some((first, last))
}

/// Lines an excerpt holds whole at most this long (project-defined); a
/// longer line (a module written on one line) is held as pieces: its first
/// [`PIECE_REACH`] bytes, and that many on each side of every span start
/// and end on it. Rendering shows a long line as a window around the
/// labels of one diagnostic, which lie within
/// [`crate::diag::LABEL_SPREAD`] of each other on it, with their context:
/// always inside one piece, so it renders as the whole line does.
pub(crate) const HOLD_WHOLE: usize = 64 << 10;

/// Bytes held on each side of a span's start or end in a line held as
/// pieces, and from the start of such a line (see [`HOLD_WHOLE`]).
pub(crate) const PIECE_REACH: u64 = 2048;

const _: () = assert!(
    PIECE_REACH
        >= crate::diag::LABEL_SPREAD as u64
            + crate::diag::LONG_SPAN_BYTES as u64
            + crate::diag::WINDOW_CONTEXT as u64
            + 8
        && PIECE_REACH > crate::diag::LONG_LINE as u64
        && (HOLD_WHOLE as u64) > 4 * PIECE_REACH
);

/// A line, or a piece of one, as read: 0-based line, file offset of its
/// first byte, characters of the line before it, its bytes.
struct Piece {
    line: u32,
    offset: u64,
    skipped: u32,
    bytes: Vec<u8>,
}

/// Reads one line of `input` from file offset `at` (line `line`), holding
/// it whole if it is at most [`HOLD_WHOLE`] bytes long, else the pieces of
/// it within `reach` (sorted, disjoint byte ranges of the file) or within
/// [`PIECE_REACH`] of its start. Pieces begin and end at character
/// boundaries. Returns the pieces, the line's length and whether the
/// input ended on it (no line feed after it).
fn read_line(
    input: &mut impl BufRead,
    line: u32,
    at: u64,
    reach: &[(u64, u64)],
) -> io::Result<(Vec<Piece>, u64, bool)> {
    let mut whole: Vec<u8> = Vec::new();
    let mut pieces: Option<Vec<Piece>> = None;
    // Characters of the line before the bytes fed to pieces so far, and
    // whether the last piece is open to the next byte.
    let mut chars = 0u32;
    let mut open = false;
    let mut n = 0u64;
    let is_char_start = |b: u8| (b & 0xC0) != 0x80;
    // Feeds `bytes` (the line's bytes from file offset `from` on) to
    // `pieces`: the parts within the line's first PIECE_REACH bytes or
    // within `reach`, widened to whole characters.
    let mut feed = |pieces: &mut Vec<Piece>, bytes: &[u8], from: u64| {
        let end = from + bytes.len() as u64;
        let first = reach.partition_point(|r| r.1 <= from);
        let mut kept: Vec<(usize, usize)> = std::iter::once(&(at, at + PIECE_REACH))
            .chain(reach[first..].iter().take_while(|r| r.0 < end))
            .filter_map(|&(lo, hi)| {
                let (lo, hi) = (lo.max(from), hi.min(end));
                (lo < hi).then(|| ((lo - from) as usize, (hi - from) as usize))
            })
            .collect();
        kept.sort_unstable();
        let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(kept.len() + 1);
        let was_open = open;
        if was_open {
            // The character the last piece ended inside of goes on into it.
            let cont = bytes.iter().take_while(|&&b| !is_char_start(b)).count();
            if cont > 0 {
                ranges.push((0, cont));
            }
        }
        for (x, y) in kept {
            match ranges.last_mut() {
                Some(r) if x <= r.1 => r.1 = r.1.max(y),
                _ => ranges.push((x, y)),
            }
        }
        let mut done = 0usize;
        for (mut x, mut y) in ranges {
            let continues = was_open && x == 0 && !pieces.is_empty();
            if !continues {
                while x < y && !is_char_start(bytes[x]) {
                    x += 1;
                }
            }
            while y < bytes.len() && !is_char_start(bytes[y]) {
                y += 1;
            }
            x = x.max(done);
            if x >= y {
                continue;
            }
            match pieces.last_mut() {
                Some(p) if continues => p.bytes.extend_from_slice(&bytes[x..y]),
                _ => pieces.push(Piece {
                    line,
                    offset: from + x as u64,
                    skipped: chars
                        + bytes[..x].iter().filter(|&&b| is_char_start(b)).count() as u32,
                    bytes: bytes[x..y].to_vec(),
                }),
            }
            done = y;
        }
        open = done == bytes.len() && done > 0;
        chars += bytes.iter().filter(|&&b| is_char_start(b)).count() as u32;
    };
    let ended = loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            break true;
        }
        let (take, ends) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        match &mut pieces {
            None if whole.len() + take <= HOLD_WHOLE => whole.extend_from_slice(&buf[..take]),
            None => {
                let mut held = Vec::new();
                feed(&mut held, &whole, at);
                feed(&mut held, &buf[..take], at + whole.len() as u64);
                whole = Vec::new();
                pieces = Some(held);
            }
            Some(held) => feed(held, &buf[..take], at + n),
        }
        n += take as u64;
        input.consume(take);
        if ends {
            break false;
        }
    };
    let pieces = pieces.unwrap_or_else(|| {
        vec![Piece {
            line,
            offset: at,
            skipped: 0,
            bytes: whole,
        }]
    });
    Ok((pieces, n, ended))
}

/// The reader's buffer for [`SourceMap::add_excerpt`] (project-defined):
/// lines far from every span are counted in it a buffer at a time.
const EXCERPT_READ: usize = 32 << 10;

/// Passes over the lines in `input`'s buffer (the input from `offset`, a
/// line start, on) that end three lines or more before the line holding
/// offset `next`: no span starts or ends on them or on the two lines after
/// them, the most an excerpt holds before a span's line. Returns how many
/// lines and bytes it passed over (none when fewer than three lines of the
/// buffer end at or before `next`: the caller reads the next line).
fn pass_over(input: &mut impl BufRead, offset: u64, next: u64) -> io::Result<(u32, u64)> {
    let buf = input.fill_buf()?;
    let within =
        usize::try_from(next.saturating_sub(offset)).map_or(buf.len(), |n| n.min(buf.len()));
    // The ends of the lines that end at or before `next`, the last three kept.
    let mut last = [0usize; 3];
    let mut count = 0u32;
    for nl in memchr::memchr_iter(b'\n', &buf[..within]) {
        last = [last[1], last[2], nl + 1];
        count += 1;
    }
    if count < 3 {
        return Ok((0, 0));
    }
    // The lines up to the one two before the last kept.
    let bytes = last[0];
    input.consume(bytes);
    Ok((count - 2, bytes as u64))
}

/// The lines of `input` that spans `spans` need (see
/// [`SourceMap::add_excerpt`]), one after the other, and where each lies.
/// A line longer than [`HOLD_WHOLE`] is held as pieces, so memory is
/// bounded by the spans, not by the lines they lie on.
fn excerpt(
    input: impl io::Read,
    spans: impl IntoIterator<Item = Span>,
) -> io::Result<(String, Vec<HeldLine>)> {
    let mut starts: Vec<u32> = Vec::new();
    let mut ends: Vec<u32> = Vec::new();
    for s in spans {
        starts.push(s.start);
        ends.push(s.end.max(s.start));
    }
    starts.sort_unstable();
    ends.sort_unstable();
    // What a line held as pieces keeps around each span start and end.
    let mut reach: Vec<(u64, u64)> = Vec::new();
    let mut around: Vec<u64> = starts.iter().chain(&ends).map(|&o| u64::from(o)).collect();
    around.sort_unstable();
    for o in around {
        let (lo, hi) = (o.saturating_sub(PIECE_REACH), o + PIECE_REACH);
        match reach.last_mut() {
            Some(r) if lo <= r.1 => r.1 = hi,
            _ => reach.push((lo, hi)),
        }
    }
    let (mut next_start, mut next_end) = (0, 0);
    // The lines (or pieces) held, and the last two lines not held (a span
    // that starts or ends on a later line may need them).
    let mut held: Vec<Piece> = Vec::new();
    let mut behind: Vec<(u32, Vec<Piece>)> = Vec::new();
    let mut keep_until: Option<u32> = None;
    let mut input = io::BufReader::with_capacity(EXCERPT_READ, input);
    let (mut line, mut offset, mut ended) = (0u32, 0u64, false);
    while !ended {
        if u32::try_from(offset).is_err() {
            break;
        }
        if keep_until.is_none_or(|k| line > k) {
            // The next span start or end; lines ending three lines or more
            // before its line are passed over.
            let next = starts
                .get(next_start)
                .into_iter()
                .chain(ends.get(next_end))
                .min()
                .map(|&o| u64::from(o));
            let (lines, bytes) = match next {
                Some(next) => pass_over(&mut input, offset, next)?,
                None => (0, 0),
            };
            if lines > 0 {
                behind.clear();
                line = line.saturating_add(lines);
                offset += bytes;
                continue;
            }
        }
        let (pieces, n, last) = read_line(&mut input, line, offset, &reach)?;
        // The last line has no newline after it (it may be empty: after a
        // final newline, or in an empty input); every later offset lies on
        // it too.
        ended = last;
        let end = if ended { u64::MAX } else { offset + n };
        let on_line = |o: u32| u64::from(o) < end;
        let (mut back, mut ahead) = (0u32, None::<u32>);
        while next_start < starts.len() && on_line(starts[next_start]) {
            next_start += 1;
            (back, ahead) = (back.max(1), ahead.max(Some(line.saturating_add(4))));
        }
        while next_end < ends.len() && on_line(ends[next_end]) {
            next_end += 1;
            (back, ahead) = (back.max(2), ahead.max(Some(line.saturating_add(1))));
        }
        if back > 0 {
            // Lines further back than any later span can need are dropped.
            for (l, p) in behind.drain(..) {
                if l + back >= line {
                    held.extend(p);
                }
            }
        }
        keep_until = keep_until.max(ahead);
        if keep_until.is_some_and(|k| line <= k) {
            held.extend(pieces);
        } else {
            if behind.len() == 2 {
                behind.remove(0);
            }
            behind.push((line, pieces));
        }
        let rest = next_start < starts.len() || next_end < ends.len();
        if !rest && keep_until.is_none_or(|k| line >= k) {
            break;
        }
        offset += n;
        line += 1;
    }
    held.sort_unstable_by_key(|h| h.offset);
    let mut text = String::new();
    let mut lines = Vec::with_capacity(held.len());
    for p in held {
        let s = std::str::from_utf8(&p.bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "input is not UTF-8"))?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "excerpt too long");
        let at = u32::try_from(text.len()).map_err(|_| bad())?;
        lines.push(HeldLine {
            line: p.line,
            offset: u32::try_from(p.offset).map_err(|_| bad())?,
            at,
            skipped: p.skipped,
        });
        text.push_str(s);
    }
    Ok((text, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line longer than an excerpt holds whole is held as pieces around
    /// the spans: every span start and end has the whole file's line and
    /// column (past multi-byte characters, at pieces cut inside them), the
    /// text near it is the file's, and the excerpt is a small part of the
    /// line.
    #[test]
    fn a_long_line_is_held_as_pieces_with_the_whole_files_columns() {
        let mut text = String::from("module {\n  ");
        let words = ["ab ", "é€ ", "😀x ", "cd, "];
        let mut i = 0;
        while text.len() < 16 * HOLD_WHOLE {
            text.push_str(words[i % words.len()]);
            i = (i * 7 + 3) % 1009;
        }
        text.push_str("\n}\nlast line\n");
        let mut map = SourceMap::new();
        let whole = map.add("w", text.clone());
        let starts: Vec<u32> = (0..text.len() as u32)
            .step_by(49_999)
            .chain([13, 14, 15, (text.len() - 3) as u32])
            .filter(|&o| text.is_char_boundary(o as usize))
            .collect();
        let spans: Vec<Span> = starts
            .iter()
            .map(|&o| {
                let mut e = (o as usize + 40).min(text.len());
                while !text.is_char_boundary(e) {
                    e += 1;
                }
                Span::new(FileId(1), o, e as u32)
            })
            .collect();
        let part = map
            .add_excerpt("e", text.as_bytes(), spans.iter().copied())
            .unwrap();
        let (w, e) = (map.file(whole), map.file(part));
        assert!(e.is_excerpt());
        assert!(e.text().len() < text.len() / 4, "{} held", e.text().len());
        for s in &spans {
            for o in [s.start, s.end] {
                assert_eq!(e.line_col(o), w.line_col(o), "offset {o}");
            }
            let at = Span::new(FileId(0), s.start, s.end);
            assert_eq!(e.slice(at), w.slice(at), "{s:?}");
        }
        // The long line's first piece holds its start.
        assert_eq!(e.line_start(2), w.line_start(2));
    }

    #[test]
    fn line_col_counts_from_one() {
        let mut sm = SourceMap::new();
        let f = sm.add("a.apir", "ab\ncd\n\nx");
        let file = sm.file(f);
        assert_eq!(file.line_col(0), (1, 1));
        assert_eq!(file.line_col(1), (1, 2));
        assert_eq!(file.line_col(3), (2, 1));
        assert_eq!(file.line_col(7), (4, 1));
        assert_eq!(sm.location(Span::new(f, 4, 5)), "a.apir:2:2");
        assert_eq!(file.line_start(3), Some(6));
        assert_eq!(file.line_start(9), None);
    }

    /// A window gives every offset it holds the whole file's line and
    /// column, whether it starts a line or partway along one (with
    /// multi-byte characters before it and in it).
    #[test]
    fn a_window_locates_as_the_whole_file() {
        let text = "héllo\n  isa.x é = 1\n\nab\ncd";
        let mut whole = SourceMap::new();
        let w = whole.add("f.apir", text);
        for start in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let line = text[..start].matches('\n').count() as u32;
            let line_begin = text[..start].rfind('\n').map_or(0, |i| i + 1);
            let column = text[line_begin..start].chars().count() as u32;
            let mut sm = SourceMap::new();
            let f = sm.add_window("f.apir", &text[start..], start as u32, line, column);
            for at in (start..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                let span = |file| Span::new(file, at as u32, at as u32);
                assert_eq!(
                    sm.location(span(f)),
                    whole.location(span(w)),
                    "window from {start}, offset {at}"
                );
            }
            let first = line + 1;
            let held_start = (column == 0).then_some(start as u32);
            assert_eq!(
                sm.file(f).line_start(first),
                held_start,
                "window from {start}"
            );
        }
    }

    /// A locator gives every span the line and column counted from the
    /// text itself, whether spans come in order (ops on one line, on
    /// several), go back, change file, or point inside a multi-byte
    /// character or past the end; in a whole file and in a window.
    #[test]
    fn a_locator_agrees_with_counting() {
        let text = "ab é isa.x\n\n  héllo wörld x y\nzz\u{1F600}q\n";
        let count = |at: usize| {
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
            let before = &text[..at.min(text.len())];
            let line = before.matches('\n').count() as u32 + 1;
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            (line, before[start..].chars().count() as u32 + 1)
        };
        let mut sm = SourceMap::new();
        let whole = sm.add("f.apir", text);
        let start = 6; // inside line 1, after "ab é "
        let window = sm.add_window("f.apir", &text[start..], start as u32, 0, 5);
        let other = sm.add("g.apir", "x\ny");
        let n = text.len() as u32;
        // In order, with repeats; then backwards; then interleaved.
        let mut order: Vec<u32> = (0..=n).flat_map(|i| [i, i]).collect();
        order.extend((0..=n).rev());
        order.extend((0..=n).map(|i| (i * 7) % (n + 1)));
        for file in [whole, window] {
            let mut loc = Locator::default();
            for (i, &at) in order.iter().enumerate() {
                if file == window && (at as usize) < start {
                    continue;
                }
                let got = loc.line_col(&sm, Span::new(file, at, at)).unwrap();
                let want = if text.is_char_boundary(at as usize) {
                    count(at as usize)
                } else {
                    sm.file(file).line_col(at)
                };
                assert_eq!(got, want, "file {file:?}, offset {at}");
                assert_eq!(got, sm.file(file).line_col(at), "offset {at}");
                // Now and then another file between two spans of this one.
                if i % 5 == 0 {
                    assert_eq!(loc.line_col(&sm, Span::new(other, 2, 2)), Some((2, 1)));
                    assert_eq!(loc.line_col(&sm, Span::new(file, at, at)), Some(got));
                }
            }
            assert_eq!(loc.line_col(&sm, Span::new(FileId(9), 0, 0)), None);
            assert_eq!(loc.location(&sm, Span::new(FileId(9), 0, 0)), "<unknown>");
        }
    }
}
