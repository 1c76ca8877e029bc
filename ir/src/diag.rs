//! Diagnostics as data, and their rendering with the source line and a caret.
//!
//! Every error a user can cause becomes a [`Diagnostic`] with a [`Span`]; the
//! tools render them through `codespan-reporting`, and the embedding API hands
//! them out as values.

use crate::source::shown_line;
use crate::source::{FileId, SourceMap, Span};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term;
use std::fmt;
use std::ops::Range;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Additional information attached to another diagnostic.
    Note,
    /// Something suspicious that does not stop compilation.
    Warning,
    /// The input is wrong; the tool exits with code 1.
    Error,
    /// A compiler bug (for example a descriptor failing its own validator);
    /// the tool exits with code 3.
    Internal,
}

impl Severity {
    /// The word used in rendered output and in `expected-<word>` comments.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Internal => "internal error",
        }
    }
}

/// The op (and operand) a diagnostic is about. Every diagnostic the
/// verifier and the passes report about an op carries one, so that a module
/// built in code, which has no source text to point into, still gets
/// diagnostics that say where: `op #3 (isa.memset), operand dst`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subject {
    /// The op, as returned by [`crate::Module::add_op`] (`op #N` is
    /// [`crate::Op::as_u32`]). The verifier's rules, the lints, the pass
    /// manager and the emitters name an op a pass made (a piece of a split
    /// op) by the op it was made from ([`crate::Module::origin`]), an op
    /// the module's producer knows, which a pass may have removed since
    /// (look it up with `m.ops.get`, not `m.ops[..]`). The structural
    /// errors ([`crate::verify::structure`]), whose messages name ops by their
    /// stored ids (`op #N`), name the op as stored.
    pub op: crate::Op,
    /// The op's name (`isa.memset`, `gpsimd.kernel`, ...).
    pub name: &'static str,
    /// The operand's role, when the diagnostic is about one operand.
    pub role: Option<String>,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op #{} ({})", self.op.as_u32(), self.name)?;
        if let Some(role) = &self.role {
            write!(f, ", operand {role}")?;
        }
        Ok(())
    }
}

/// The longest message or note a diagnostic holds, in bytes
/// (project-defined): far above any message the tools write, which name a
/// few identifiers of the input, and small enough that a message quoting
/// a name millions of characters long stays a line to read.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `text` if it is at most [`MAX_MESSAGE_BYTES`] long; else its start and
/// its end around a marker that says how many bytes are left out, at most
/// that long in all. Every message and note passes through here.
fn bounded(text: String) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let ceil = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    // The marker is at most 40 bytes: the rest is split 3 : 1.
    let keep = MAX_MESSAGE_BYTES - 40;
    let head = floor(keep * 3 / 4);
    let tail = ceil(text.len() - keep / 4);
    format!(
        "{}…[{} bytes]…{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// One message, optionally located, with optional located notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Severity.
    pub severity: Severity,
    /// The message, one line, no trailing period.
    pub message: String,
    /// Where the problem is; `None` for problems without a source position
    /// (for example a module built through the API).
    pub span: Option<Span>,
    /// Secondary messages, each optionally located.
    pub notes: Vec<(String, Option<Span>)>,
    /// The op and operand the problem concerns, if it concerns one.
    pub subject: Option<Subject>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: bounded(message.into()),
            span: span.into(),
            notes: Vec::new(),
            subject: None,
        }
    }

    /// A warning at `span`.
    pub fn warning(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(span, message)
        }
    }

    /// A note that stands alone at `span`.
    pub fn note(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::error(span, message)
        }
    }

    /// An internal error (compiler bug) at `span`.
    pub fn internal(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Internal,
            ..Diagnostic::error(span, message)
        }
    }

    /// Adds a note, optionally located.
    pub fn with_note(mut self, message: impl Into<String>, span: impl Into<Option<Span>>) -> Self {
        self.notes.push((bounded(message.into()), span.into()));
        self
    }

    /// Says which op (and operand) this is about, unless that is already
    /// said: the innermost statement of the subject wins.
    pub fn about(mut self, op: crate::Op, name: &'static str, role: Option<&str>) -> Self {
        self.set_subject(op, name, role);
        self
    }

    /// [`Diagnostic::about`] in place.
    pub(crate) fn set_subject(&mut self, op: crate::Op, name: &'static str, role: Option<&str>) {
        match &mut self.subject {
            None => {
                self.subject = Some(Subject {
                    op,
                    name,
                    role: role.map(|r| bounded(r.to_string())),
                })
            }
            Some(s) if s.op == op && s.role.is_none() => {
                s.role = role.map(|r| bounded(r.to_string()))
            }
            Some(_) => {}
        }
    }

    /// Renders this diagnostic as text: `file:line:col`, the source line and
    /// a caret under the span.
    pub fn render(&self, sources: &SourceMap) -> String {
        render_all(std::slice::from_ref(self), sources)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.severity.as_str(), self.message)?;
        if let Some(s) = &self.subject {
            write!(f, " [{s}]")?;
        }
        Ok(())
    }
}

/// Adapter so codespan-reporting reads our [`SourceMap`] without copying it.
/// A source line longer than [`LONG_LINE`] bytes is shown as a window around
/// the spans of the diagnostic being rendered (its `focus`), so that
/// rendering costs the window, not the line: a one-line file of 100 KB with
/// a thousand errors renders in time linear in the errors. Line and column
/// numbers stay those of the whole line.
///
/// The text codespan-reporting reads is the text as shown
/// ([`crate::source::SourceFile::shown`]): control characters replaced,
/// length kept, so every offset stays put and an escape sequence in the
/// input never reaches the terminal.
struct CsFiles<'a>(&'a SourceMap, &'a [(u32, Range<usize>)]);

/// Lines longer than this many bytes are shown as a window (see [`CsFiles`]).
pub(crate) const LONG_LINE: usize = 512;

/// Bytes of context shown on each side of the spans in a long line.
pub(crate) const WINDOW_CONTEXT: usize = 80;

/// How far (in bytes) a label may start from the first label of the
/// diagnostic on the same long line and be shown on it; one farther is
/// shown as a note with its line and column (see `to_codespan`).
pub(crate) const LABEL_SPREAD: u32 = 1024;

/// Lines a span may run over (and at most [`LONG_SPAN_BYTES`] long) and be
/// shown whole (see `to_codespan`).
const LONG_SPAN_LINES: u32 = 32;

/// Bytes of its first line a span longer than that shows (see
/// `to_codespan`).
pub(crate) const LONG_SPAN_BYTES: usize = LONG_LINE;

impl<'a> Files<'a> for CsFiles<'a> {
    type FileId = u32;
    type Name = std::borrow::Cow<'a, str>;
    type Source = &'a str;

    fn name(&'a self, id: u32) -> Result<Self::Name, FilesError> {
        Ok(shown_line(
            self.0
                .get(crate::FileId(id))
                .ok_or(FilesError::FileMissing)?
                .name(),
        ))
    }

    fn source(&'a self, id: u32) -> Result<&'a str, FilesError> {
        Ok(self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?
            .shown())
    }

    fn line_index(&'a self, id: u32, byte_index: usize) -> Result<usize, FilesError> {
        let f = self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.line_of_local(byte_index) as usize)
    }

    fn line_range(&'a self, id: u32, line_index: usize) -> Result<Range<usize>, FilesError> {
        let f = self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        let line = u32::try_from(line_index).unwrap_or(u32::MAX);
        let Some(Range { start, end }) = f.local_line(line) else {
            if f.is_excerpt() {
                // A line an excerpt does not hold lies inside a multi-line
                // span and is not shown: empty.
                let at = f.text().len();
                return Ok(at..at);
            }
            return Err(FilesError::LineTooLarge {
                given: line_index,
                max: 0,
            });
        };
        if end - start <= LONG_LINE {
            return Ok(start..end);
        }
        // A long line: the window around the focus spans on it.
        let text = f.text();
        let (lo, hi) = self
            .1
            .iter()
            .filter(|(file, r)| {
                // A zero-width span at the end of input sits on the last line.
                *file == id && (r.start < end || r.start == text.len()) && r.end >= start
            })
            .fold((end, start), |(lo, hi), (_, r)| {
                (lo.min(r.start), hi.max(r.end))
            });
        let (lo, hi) = if lo > hi { (start, start) } else { (lo, hi) };
        let mut a = lo.saturating_sub(WINDOW_CONTEXT).max(start);
        let mut b = (hi + WINDOW_CONTEXT).min(end);
        while !text.is_char_boundary(a) {
            a -= 1;
        }
        while b < text.len() && !text.is_char_boundary(b) {
            b += 1;
        }
        Ok(a..b)
    }

    /// The column in the whole line, whatever window is shown.
    fn column_number(
        &'a self,
        id: u32,
        _line: usize,
        byte_index: usize,
    ) -> Result<usize, FilesError> {
        let f = self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.column_of_local(byte_index) as usize)
    }
}

fn to_codespan(d: &Diagnostic, sources: &SourceMap) -> cs::Diagnostic<u32> {
    let sev = match d.severity {
        Severity::Note => cs::Severity::Note,
        Severity::Warning => cs::Severity::Warning,
        Severity::Error => cs::Severity::Error,
        Severity::Internal => cs::Severity::Bug,
    };
    let mut long = Vec::new();
    // Positions in the file's text (an excerpt's are not the file's),
    // clamped to it. A span over more than LONG_SPAN_LINES lines, or
    // longer than LONG_SPAN_BYTES, is shown on its first line and cut to
    // that many bytes, with a note saying where it ends (codespan-reporting
    // visits every line of a label and underlines every byte, and a span
    // may run over millions of blank lines, or a buffer's line over
    // megabytes).
    let mut clamp = |s: Span| -> Option<Range<usize>> {
        let f = sources.get(s.file)?;
        let start = f.local(s.start);
        let end = f.local(s.end).max(start);
        let (first, last) = (f.line_of_local(start), f.line_of_local(end));
        // Bytes of the file (an excerpt's text skips lines it does not hold).
        let bytes = s.end.saturating_sub(s.start) as usize;
        if last - first <= LONG_SPAN_LINES && bytes <= LONG_SPAN_BYTES {
            return Some(start..end);
        }
        let line = f.local_line(first).unwrap_or(start..start);
        let text = f.text().get(line.clone()).unwrap_or("");
        let line_end = (line.start + text.trim_end_matches(['\r', '\n']).len()).max(start);
        let mut cut = line_end.min(start + LONG_SPAN_BYTES);
        while !f.text().is_char_boundary(cut) {
            cut -= 1;
        }
        // Where its last character is (`end` is one past it).
        let text = f.text();
        let mut at = end.saturating_sub(1).max(start);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let last = f.line_of_local(at);
        long.push(if last == first {
            format!("the span runs on to column {}", f.column_of_local(at))
        } else {
            format!("the span runs on to line {}", last + 1)
        });
        Some(start..cut.max(start))
    };
    let mut labels = Vec::new();
    let mut notes = Vec::new();
    match d.span.and_then(|s| clamp(s).map(|r| (s.file, r))) {
        Some(r) => labels.push(cs::Label::primary(r.0 .0, r.1)),
        // No source to point into (a module built in code): say which op.
        None => notes.extend(
            d.subject
                .as_ref()
                .map(|s| format!("in {}", shown_line(&s.to_string()))),
        ),
    }
    // The first label on each long line, by file and line: a later label
    // on that line farther from it than LABEL_SPREAD bytes is a note that
    // says where it points, so that a long line is shown as one bounded
    // window (which is also all an excerpt holds of it).
    let mut anchors: Vec<(FileId, u32, u32)> = Vec::new();
    let mut far = |s: Span| -> Option<(u32, u32)> {
        let f = sources.get(s.file)?;
        let line = f.line_of_local(f.local(s.start));
        if f.local_line(line).is_none_or(|r| r.len() <= LONG_LINE) {
            return None;
        }
        match anchors.iter().find(|a| a.0 == s.file && a.1 == line) {
            None => {
                anchors.push((s.file, line, s.start));
                None
            }
            Some(a) if a.2.abs_diff(s.start) > LABEL_SPREAD => Some(f.line_col(s.start)),
            Some(_) => None,
        }
    };
    if let Some(s) = d.span {
        far(s);
    }
    for (msg, span) in &d.notes {
        let at = span.and_then(|s| far(s).map(|lc| (s, lc)));
        match (at, span.and_then(|s| clamp(s).map(|r| (s.file, r)))) {
            (Some((_, (line, col))), _) => notes.push(format!(
                "note: {} (line {line}, column {col})",
                shown_line(msg)
            )),
            (None, Some((file, r))) => {
                labels.push(cs::Label::secondary(file.0, r).with_message(shown_line(msg)))
            }
            (None, None) => notes.push(format!("note: {}", shown_line(msg))),
        }
    }
    notes.extend(long);
    // Messages may quote names a module built in code holds: shown as
    // source text is.
    cs::Diagnostic::new(sev)
        .with_message(shown_line(&d.message))
        .with_labels(labels)
        .with_notes(notes)
}

/// Renders diagnostics in order, each with its location, source line and caret.
pub fn render_all(diags: &[Diagnostic], sources: &SourceMap) -> String {
    render_all_styled(diags, sources, false)
}

/// [`render_all`], with ANSI colours when `color` is set (for a terminal).
pub fn render_all_styled(diags: &[Diagnostic], sources: &SourceMap, color: bool) -> String {
    if color {
        render_into(
            diags,
            sources,
            term::termcolor::Ansi::new(Vec::new()),
            |w| w.into_inner(),
        )
    } else {
        render_into(
            diags,
            sources,
            term::termcolor::NoColor::new(Vec::new()),
            |w| w.into_inner(),
        )
    }
}

/// codespan-reporting's default colours, with line numbers, borders, note
/// bullets and secondary labels in blue (its default before 0.12 turned
/// them cyan), so that coloured output stays what it was.
fn styles() -> term::Styles {
    let blue = || {
        let mut spec = term::termcolor::ColorSpec::new();
        spec.set_fg(Some(term::termcolor::Color::Blue));
        spec
    };
    term::Styles {
        secondary_label: blue(),
        line_number: blue(),
        source_border: blue(),
        note_bullet: blue(),
        ..term::Styles::default()
    }
}

fn render_into<W: term::termcolor::WriteColor>(
    diags: &[Diagnostic],
    sources: &SourceMap,
    mut out: W,
    bytes: impl FnOnce(W) -> Vec<u8>,
) -> String {
    let config = term::Config {
        chars: term::Chars::ascii(),
        ..term::Config::default()
    };
    let styles = styles();
    for d in diags {
        let cs = to_codespan(d, sources);
        let focus: Vec<(u32, Range<usize>)> = cs
            .labels
            .iter()
            .map(|l| (l.file_id, l.range.clone()))
            .collect();
        let files = CsFiles(sources, &focus);
        // Rendering only fails when a span points outside its file, which
        // `to_codespan` prevents by clamping; fall back to the plain message.
        let mut styled = term::StylesWriter::new(&mut out, &styles);
        if term::emit_to_write_style(&mut styled, &config, &files, &cs).is_err() {
            let _ = writeln!(out, "{}", shown_line(&d.to_string()));
        }
    }
    String::from_utf8_lossy(&bytes(out)).into_owned()
}

/// A list of diagnostics, in the order they were found.
pub type Diagnostics = Vec<Diagnostic>;

/// How many errors and how many warnings a run keeps; the others are only
/// counted ([`Bounded`]). Errors count internal errors too; warnings count
/// notes that stand alone. `None` keeps every one.
///
/// A bound on what is kept is a bound on memory: an input that has a
/// warning on each of its ten million ops gives the first few and a count,
/// not gigabytes of diagnostics held and rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiagnosticLimit {
    /// Errors kept, at most.
    pub errors: Option<usize>,
    /// Warnings kept, at most.
    pub warnings: Option<usize>,
}

impl DiagnosticLimit {
    /// Errors and warnings kept by default, each (project-defined; the
    /// parser also stops at this many syntax errors,
    /// [`crate::parser::MAX_ERRORS`]).
    pub const DEFAULT_COUNT: usize = 50;

    /// Keeps every diagnostic.
    pub const NONE: DiagnosticLimit = DiagnosticLimit {
        errors: None,
        warnings: None,
    };

    /// The limit on diagnostics of `severity`'s class.
    fn of(self, severity: Severity) -> Option<usize> {
        match severity {
            Severity::Error | Severity::Internal => self.errors,
            Severity::Warning | Severity::Note => self.warnings,
        }
    }
}

impl Default for DiagnosticLimit {
    /// [`DiagnosticLimit::DEFAULT_COUNT`] errors and as many warnings.
    fn default() -> Self {
        DiagnosticLimit {
            errors: Some(Self::DEFAULT_COUNT),
            warnings: Some(Self::DEFAULT_COUNT),
        }
    }
}

/// How many diagnostics a [`DiagnosticLimit`] left out, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Omitted {
    /// Errors, internal errors among them.
    pub errors: usize,
    /// Warnings and notes that stand alone.
    pub warnings: usize,
}

impl Omitted {
    /// Whether nothing was left out.
    pub fn is_empty(&self) -> bool {
        self.errors == 0 && self.warnings == 0
    }

    /// Both counts added up (saturating: a count cannot wrap).
    pub fn add(&mut self, other: Omitted) {
        self.errors = self.errors.saturating_add(other.errors);
        self.warnings = self.warnings.saturating_add(other.warnings);
    }
}

/// Diagnostics collected under a [`DiagnosticLimit`]: the first errors and
/// the first warnings, in the order pushed, up to the limit of each; the
/// rest counted in [`Bounded::omitted`].
///
/// Collections made apart and joined in order keep what one collection of
/// everything would: [`Bounded::append`] of the parts of a list, each
/// collected under the same limit, keeps the same diagnostics and counts
/// the same omitted as pushing the whole list. That is what lets a
/// streaming run, which bounds each list it accumulates, report exactly
/// what the whole-module path reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bounded {
    limit: Option<DiagnosticLimit>,
    kept: Diagnostics,
    errors: usize,
    warnings: usize,
    omitted: Omitted,
    /// Whether an internal error is among the omitted errors.
    omitted_internal: bool,
}

impl Bounded {
    /// Nothing collected yet, under `limit`.
    pub fn new(limit: DiagnosticLimit) -> Self {
        Bounded {
            limit: Some(limit),
            ..Bounded::default()
        }
    }

    /// `diagnostics`, all kept (no limit).
    pub fn all(diagnostics: Diagnostics) -> Self {
        let mut b = Bounded::default();
        b.extend(diagnostics);
        b
    }

    /// The limit (a [`Bounded::default`] has none).
    pub fn limit(&self) -> DiagnosticLimit {
        self.limit.unwrap_or(DiagnosticLimit::NONE)
    }

    /// How many more warnings (and notes that stand alone) this keeps
    /// before it counts them instead; `usize::MAX` without a limit.
    pub fn warning_room(&self) -> usize {
        self.limit()
            .of(Severity::Warning)
            .map_or(usize::MAX, |max| max.saturating_sub(self.warnings))
    }

    /// Keeps `d` if its class is under the limit, else counts it.
    pub fn push(&mut self, d: Diagnostic) {
        let error = matches!(d.severity, Severity::Error | Severity::Internal);
        let held = if error { self.errors } else { self.warnings };
        if self.limit().of(d.severity).is_some_and(|max| held >= max) {
            if error {
                self.omitted.errors = self.omitted.errors.saturating_add(1);
                self.omitted_internal |= d.severity == Severity::Internal;
            } else {
                self.omitted.warnings = self.omitted.warnings.saturating_add(1);
            }
            return;
        }
        if error {
            self.errors += 1;
        } else {
            self.warnings += 1;
        }
        self.kept.push(d);
    }

    /// Counts `omitted` as left out here (what an earlier limit dropped
    /// from a list pushed here).
    pub fn omit(&mut self, omitted: Omitted) {
        self.omitted.add(omitted);
    }

    /// What `other` collected, as if pushed here after what this holds:
    /// its kept diagnostics pushed in order, its omitted counted.
    pub fn append(&mut self, other: Bounded) {
        self.extend(other.kept);
        self.omit(other.omitted);
        self.omitted_internal |= other.omitted_internal;
    }

    /// The diagnostics kept, in order.
    pub fn kept(&self) -> &[Diagnostic] {
        &self.kept
    }

    /// What the limit left out.
    pub fn omitted(&self) -> Omitted {
        self.omitted
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.omitted.is_empty()
    }

    /// Whether an error was pushed.
    pub fn has_errors(&self) -> bool {
        self.errors > 0 || self.omitted.errors > 0
    }

    /// Whether an internal error was pushed, kept or not.
    pub fn has_internal(&self) -> bool {
        self.omitted_internal || self.kept.iter().any(|d| d.severity == Severity::Internal)
    }

    /// Whether an internal error is among the omitted errors.
    pub fn omitted_internal(&self) -> bool {
        self.omitted_internal
    }

    /// Renames the op of the subject of every diagnostic kept from index
    /// `from` on by `f` (nothing else changes): a streaming driver numbers
    /// a batch's ops as the whole module does.
    pub fn map_subject_ops(&mut self, from: usize, f: impl Fn(crate::Op) -> crate::Op) {
        for d in self.kept.iter_mut().skip(from) {
            if let Some(s) = &mut d.subject {
                s.op = f(s.op);
            }
        }
    }

    /// The diagnostics kept and the counts left out.
    pub fn into_parts(self) -> (Diagnostics, Omitted) {
        (self.kept, self.omitted)
    }
}

impl Extend<Diagnostic> for Bounded {
    fn extend<I: IntoIterator<Item = Diagnostic>>(&mut self, iter: I) {
        for d in iter {
            self.push(d);
        }
    }
}

/// The candidate `name` is most likely a misspelling of, if any: equal but
/// for case, or within two edits (Damerau-Levenshtein) of a name longer
/// than two characters, or very close by Jaro-Winkler (above 0.88). The
/// one place "did you mean" suggestions are decided.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let chars = name.chars().count();
    candidates
        .into_iter()
        .filter(|c| *c != name)
        // Only names of nearly the same length can be suggested: the
        // distances, which take time in the product of the lengths, are
        // measured for those alone (a name of millions of characters
        // is compared with none).
        .filter(|c| could_suggest(chars, c.chars().count()))
        .filter_map(|c| closeness(name, &lower, c).map(|score| (score, c)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// How close `candidate` is to `name` (`lower` is it in lower case) by
/// [`did_you_mean`]'s rules, lower being closer; `None` if it is not to
/// be suggested.
fn closeness(name: &str, lower: &str, candidate: &str) -> Option<f64> {
    if candidate.to_ascii_lowercase() == lower {
        return Some(0.0);
    }
    let d = strsim::damerau_levenshtein(name, candidate);
    let jw = strsim::jaro_winkler(name, candidate);
    (d <= 2 && candidate.len() > 2 && name.len() > 2 || jw > 0.88).then_some(d as f64 - jw)
}

/// Whether a candidate of `b` characters could be suggested for a name of
/// `a` by [`did_you_mean`]'s rules: the same name but for case, or within
/// two edits, needs lengths within 2 of each other; a Jaro-Winkler
/// similarity above 0.88 needs the Jaro similarity, at most
/// `(m/a + m/b + 1) / 3` for `m = min(a, b)` matching characters, to be
/// such that the prefix bonus (at most `0.4 * (1 - jaro)`) lifts it above
/// 0.88.
fn could_suggest(a: usize, b: usize) -> bool {
    if a.abs_diff(b) <= 2 {
        return true;
    }
    if a == 0 || b == 0 {
        // The Jaro similarity of an empty and a non-empty name is 0.
        return false;
    }
    let (a, b) = (a as f64, b as f64);
    let m = a.min(b);
    let jaro = (m / a + m / b + 1.0) / 3.0;
    // A bound, with room for rounding: it may let through a candidate
    // the rules then turn down, never the other way round.
    jaro + 0.4 * (1.0 - jaro) > 0.88 - 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::shown_text;
    use crate::FileId;
    use proptest::prelude::*;

    /// A list of diagnostics with these severities, each message its index.
    fn numbered(severities: &[Severity]) -> Diagnostics {
        severities
            .iter()
            .enumerate()
            .map(|(i, &severity)| Diagnostic {
                severity,
                ..Diagnostic::error(None, i.to_string())
            })
            .collect()
    }

    fn severity() -> impl Strategy<Value = Severity> {
        prop_oneof![
            Just(Severity::Note),
            Just(Severity::Warning),
            Just(Severity::Error),
            Just(Severity::Internal),
        ]
    }

    fn limit() -> impl Strategy<Value = DiagnosticLimit> {
        let one = prop_oneof![Just(None), (0usize..6).prop_map(Some)];
        (one.clone(), one).prop_map(|(errors, warnings)| DiagnosticLimit { errors, warnings })
    }

    proptest! {
        /// What a limit keeps, from the contract: the first `errors` of the
        /// errors and internal errors and the first `warnings` of the rest,
        /// in their order; the others counted by kind.
        #[test]
        fn a_limit_keeps_the_first_of_each_kind(
            sev in proptest::collection::vec(severity(), 0..40),
            limit in limit(),
        ) {
            let all = numbered(&sev);
            let mut b = Bounded::new(limit);
            b.extend(all.clone());
            let (mut errors, mut warnings) = (0, 0);
            let mut want = Vec::new();
            let mut omitted = Omitted::default();
            for d in all {
                let error = d.severity >= Severity::Error;
                let seen = if error { &mut errors } else { &mut warnings };
                let max = if error { limit.errors } else { limit.warnings };
                *seen += 1;
                if max.is_none_or(|m| *seen <= m) {
                    want.push(d);
                } else if error {
                    omitted.errors += 1;
                } else {
                    omitted.warnings += 1;
                }
            }
            prop_assert_eq!(b.kept(), &want[..]);
            prop_assert_eq!(b.omitted(), omitted);
            prop_assert_eq!(
                b.has_internal(),
                sev.contains(&Severity::Internal)
            );
        }

        /// Parts collected apart under one limit, then appended in order,
        /// keep and count what collecting the whole list does: a streamed
        /// run's bounded lists add up to the whole-module run's.
        #[test]
        fn appended_parts_keep_what_the_whole_keeps(
            sev in proptest::collection::vec(severity(), 0..40),
            cuts in proptest::collection::vec(0usize..40, 0..5),
            limit in limit(),
        ) {
            let all = numbered(&sev);
            let mut whole = Bounded::new(limit);
            whole.extend(all.clone());
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(all.len())).collect();
            cuts.push(0);
            cuts.push(all.len());
            cuts.sort_unstable();
            let mut joined = Bounded::new(limit);
            for w in cuts.windows(2) {
                let mut part = Bounded::new(limit);
                part.extend(all[w[0]..w[1]].iter().cloned());
                joined.append(part);
            }
            prop_assert_eq!(joined, whole);
        }
    }

    /// A long line is shown as a window around the diagnostic's span, with
    /// the line and column of the whole line: rendering a thousand errors
    /// on one 100 KB line costs the windows, not the line a thousand times.
    #[test]
    fn long_lines_render_as_a_window() {
        let mut sources = SourceMap::new();
        let text = format!("{}BAD{}\n", "x".repeat(100_000), "y".repeat(1000));
        let file = sources.add("long.apir", text);
        let at = Span::new(file, 100_000, 100_003);
        let diags: Vec<Diagnostic> = (0..1000)
            .map(|_| Diagnostic::error(at, "bad token"))
            .collect();
        let out = render_all(&diags, &sources);
        assert!(out.len() < 1000 * 1000, "{} bytes", out.len());
        let first: Vec<&str> = out.lines().take(5).collect();
        assert_eq!(first[1], "  --> long.apir:1:100001");
        assert!(first[3].contains("xBADy"), "{first:?}");
        assert!(first[4].trim_end().ends_with("^^^"), "{first:?}");
        // A zero-width span at the end of a long last line without a newline.
        let eof_text = format!("{}%u = ", " ".repeat(600));
        let len = eof_text.len() as u32;
        let eof = sources.add("eof.apir", eof_text);
        let out = render_all(
            &[Diagnostic::error(Span::new(eof, len, len), "end")],
            &sources,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[3].ends_with("%u = "), "{lines:?}");
        assert!(lines[4].trim_end().ends_with('^'), "{lines:?}");
        // Short lines are shown whole.
        let short = sources.add("short.apir", "a bad b\n");
        let out = render_all(
            &[Diagnostic::error(Span::new(short, 2, 5), "bad")],
            &sources,
        );
        assert!(out.contains("1 | a bad b"), "{out}");
    }

    /// A line end in a message or note (a string quoted from the input)
    /// is written `\n` / `\r`: the message stays one line, and no line of
    /// the output but the renderer's own reads as a location.
    #[test]
    fn line_ends_in_messages_are_escaped() {
        let mut sources = SourceMap::new();
        let file = sources.add("a.apir", "x y\n");
        let fake = "X\n  --> elsewhere.apir:99:1\r\n\nwarning: nothing to see";
        let d = Diagnostic::error(Span::new(file, 0, 1), format!("unknown struct \"{fake}\""))
            .with_note(format!("near {fake}"), Some(Span::new(file, 2, 3)))
            .with_note(format!("also {fake}"), None);
        let out = render_all(&[d], &sources);
        assert!(!out.contains("elsewhere.apir:99:1\n"), "{out}");
        let starts = |l: &&str| l.trim_start().starts_with("-->");
        assert_eq!(out.lines().filter(starts).count(), 1, "{out}");
        assert!(!out.lines().any(|l| l.starts_with("warning")), "{out}");
        assert!(
            out.lines().next().unwrap().ends_with(
                "unknown struct \"X\\n  --> elsewhere.apir:99:1\\r\\n\\nwarning: nothing to see\""
            ),
            "{out}"
        );
        // So is a file name (a path may hold a line feed).
        let mut sources = SourceMap::new();
        let file = sources.add("a\n  --> fake.apir:9:9\n", "x\n");
        let out = render_all(&[Diagnostic::error(Span::new(file, 0, 1), "bad")], &sources);
        assert_eq!(out.lines().filter(starts).count(), 1, "{out}");
        assert!(out.contains("--> a\\n  --> fake.apir:9:9\\n:1:1"), "{out}");
        assert_eq!(shown_line("a\tb"), "a\tb");
        assert!(matches!(shown_line("plain"), std::borrow::Cow::Borrowed(_)));
    }

    /// Control characters of the source, of file names and of messages
    /// are shown as `?` (`¿` for the two-byte C1 controls): nothing but
    /// line ends reaches the terminal (not a lone carriage return either),
    /// and the caret stays under its span, at the column the header gives.
    #[test]
    fn control_characters_are_shown_as_question_marks() {
        let mut sources = SourceMap::new();
        let text = "a\u{1b}[2Jb\u{9b}c\u{7f}\u{7}\r BAD \u{1b}]0;x\u{7}\r\n";
        let file = sources.add("c\u{1b}[2Jtl.apir", text);
        let at = text.find("BAD").unwrap() as u32;
        let d = Diagnostic::error(Span::new(file, at, at + 3), "bad `\u{1b}[31m` \r!")
            .with_note("here \u{85}", Some(Span::new(file, 0, 1)));
        let out = render_all(&[d], &sources);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        let lines: Vec<&str> = out.lines().collect();
        // (A carriage return in a message is written `\r`: it stays one line.)
        assert_eq!(lines[0], "error: bad `?[31m` \\r!");
        assert_eq!(lines[1], "  --> c?[2Jtl.apir:1:13");
        assert_eq!(lines[3], "1 | a?[2Jb¿c??? BAD ?]0;x?");
        // Columns in characters: the header's, the caret's, the text's.
        let column = |line: &str, pat: &str| line[..line.find(pat).unwrap()].chars().count();
        assert_eq!(column(lines[3], "BAD") - "1 | ".len() + 1, 13);
        assert_eq!(column(lines[4], "^"), column(lines[3], "BAD"), "{lines:?}");
        assert!(out.contains("here ¿"), "{out}");
        // A carriage return before a line feed is a line end, kept.
        assert_eq!(shown_text("a\r\nb\tc"), "a\r\nb\tc");
        assert!(matches!(shown_text("plain"), std::borrow::Cow::Borrowed(_)));
    }

    /// Bidirectional formatting characters (overrides, embeddings,
    /// isolates, marks) of the source, of file names and of messages are
    /// shown as U+FFFD (`¿` for the two-byte Arabic letter mark): a
    /// terminal shows the line in its own order, and the caret stays
    /// under its span.
    #[test]
    fn bidirectional_controls_are_replaced() {
        let mut sources = SourceMap::new();
        let text = "a \"\u{202e}x\u{2066}\" y\u{200f}\u{61c} BAD\n";
        let file = sources.add("b\u{202e}di.apir", text);
        let at = text.find("BAD").unwrap() as u32;
        let d = Diagnostic::error(Span::new(file, at, at + 3), "bad `\u{2067}q\u{2069}`")
            .with_note("here \u{202a}", Some(Span::new(file, 0, 1)));
        let out = render_all(&[d], &sources);
        let reorders = |c: char| matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(!out.chars().any(reorders), "{out:?}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "error: bad `\u{fffd}q\u{fffd}`");
        assert_eq!(lines[1], "  --> b\u{fffd}di.apir:1:13");
        assert_eq!(lines[3], "1 | a \"\u{fffd}x\u{fffd}\" y\u{fffd}¿ BAD");
        let column = |line: &str, pat: &str| line[..line.find(pat).unwrap()].chars().count();
        assert_eq!(column(lines[3], "BAD") - "1 | ".len() + 1, 13);
        assert_eq!(column(lines[4], "^"), column(lines[3], "BAD"), "{lines:?}");
        assert!(out.contains("here \u{fffd}"), "{out}");
        assert_eq!(shown_text("\u{200e}\u{2068}é"), "\u{fffd}\u{fffd}é");
    }

    /// A span longer than [`LONG_SPAN_BYTES`] (a buffer declaration on a
    /// line of megabytes) is shown cut to that many bytes of its first
    /// line, with a note of the column where it ends: each diagnostic costs
    /// a window, not the span.
    #[test]
    fn long_spans_are_cut_with_a_note() {
        let mut sources = SourceMap::new();
        let text = format!("  %x = mem.sbuf {{note = [{}]}}\n", "1, ".repeat(200_000));
        let end = text.len() as u32 - 1;
        let file = sources.add("wide.apir", text);
        let diags: Vec<Diagnostic> = (0..50)
            .map(|_| Diagnostic::error(Span::new(file, 2, end), "does not fit"))
            .collect();
        let out = render_all(&diags, &sources);
        assert!(out.len() < 50 * 4 * LONG_SPAN_BYTES, "{} bytes", out.len());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "  --> wide.apir:1:3");
        assert!(
            lines[3].starts_with("1 |   %x = mem.sbuf {note = [1, 1,"),
            "{lines:?}"
        );
        let carets = lines[4].matches('^').count();
        assert_eq!(carets, LONG_SPAN_BYTES, "{lines:?}");
        // The column of its last character (`end` is one past it).
        assert_eq!(lines[6], format!("  = the span runs on to column {end}"));
        // A span as long on several lines says the line where it ends.
        let text = format!("{}\nb\n", "a".repeat(2 * LONG_SPAN_BYTES));
        let end = text.len() as u32 - 1;
        let file = sources.add("two.apir", text);
        let out = render_all(&[Diagnostic::error(Span::new(file, 0, end), "x")], &sources);
        assert!(out.contains("= the span runs on to line 2"), "{out}");
        assert_eq!(out.matches('^').count(), LONG_SPAN_BYTES, "{out}");
    }

    /// A text of lines of a few characters (some multi-byte, some lines
    /// over [`LONG_LINE`] bytes), with or without a final newline.
    fn text_strategy() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let line = prop_oneof![
            8 => proptest::collection::vec(prop_oneof![Just('a'), Just(' '), Just('é'), Just('%')], 0..12)
                .prop_map(|c| c.into_iter().collect::<String>()),
            1 => (500usize..700).prop_map(|n| "xé".repeat(n / 3)),
        ];
        (proptest::collection::vec(line, 0..80), any::<bool>()).prop_map(|(lines, nl)| {
            let mut t = lines.join("\n");
            if nl {
                t.push('\n');
            }
            t
        })
    }

    /// A span between two character boundaries of `text` (or past its end).
    fn span_in(text: &str, file: crate::FileId, a: usize, b: usize) -> Span {
        let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        bounds.push(text.len());
        bounds.push(text.len() + 3);
        let (x, y) = (bounds[a % bounds.len()], bounds[b % bounds.len()]);
        Span::new(file, x.min(y) as u32, x.max(y) as u32)
    }

    /// A reader that hands out at most `.1` bytes a read.
    struct Trickle<'a>(&'a [u8], usize);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    proptest::proptest! {
        /// Diagnostics rendered from an excerpt of the file (the lines their
        /// spans need, read again) are the ones rendered from the whole
        /// file, byte for byte, and every span's line and column agree.
        #[test]
        fn an_excerpt_renders_as_the_whole_file(
            text in text_strategy(),
            picks in proptest::collection::vec(
                (proptest::collection::vec((0usize..10_000, 0usize..10_000), 1..4), 0u8..3),
                1..5,
            ),
            read in 1usize..40,
        ) {
            let mut whole = SourceMap::new();
            let file = whole.add("w.apir", text.clone());
            let diags: Vec<Diagnostic> = picks
                .iter()
                .map(|(spans, sev)| {
                    let mut d = match sev {
                        0 => Diagnostic::error(span_in(&text, file, spans[0].0, spans[0].1), "bad"),
                        1 => Diagnostic::warning(span_in(&text, file, spans[0].0, spans[0].1), "odd"),
                        _ => Diagnostic::error(None, "nowhere"),
                    };
                    for (k, &(a, b)) in spans.iter().enumerate().skip(1) {
                        d = d.with_note(format!("note {k}"), span_in(&text, file, a, b));
                    }
                    d
                })
                .collect();
            let spans: Vec<Span> = diags
                .iter()
                .flat_map(|d| d.span.into_iter().chain(d.notes.iter().filter_map(|n| n.1)))
                .collect();
            let mut part = SourceMap::new();
            let id = part
                .add_excerpt("w.apir", text.as_bytes(), spans.iter().copied())
                .unwrap();
            // Read in short pieces, lines and the runs of lines passed
            // over end across the reader's refills: the same excerpt.
            let mut pieces = SourceMap::new();
            pieces
                .add_excerpt("w.apir", Trickle(text.as_bytes(), read), spans.iter().copied())
                .unwrap();
            proptest::prop_assert_eq!(pieces.file(id).text(), part.file(id).text());
            proptest::prop_assert_eq!(render_all(&diags, &pieces), render_all(&diags, &whole));
            proptest::prop_assert_eq!(id, file);
            proptest::prop_assert!(part.file(id).is_excerpt());
            proptest::prop_assert_eq!(render_all(&diags, &part), render_all(&diags, &whole));
            for s in &spans {
                for o in [s.start, s.end] {
                    proptest::prop_assert_eq!(part.file(id).line_col(o), whole.file(id).line_col(o));
                }
                let (w, e) = (whole.file(id), part.file(id));
                // A span of at most five lines is held whole.
                let lines = w.line_col(s.end).0 - w.line_col(s.start).0;
                match e.slice(*s) {
                    Some(held) => proptest::prop_assert_eq!(Some(held), w.slice(*s)),
                    None => proptest::prop_assert!(lines >= 5 || w.slice(*s).is_none()),
                }
                let line = w.line_col(s.start).0;
                proptest::prop_assert_eq!(e.line_start(line), w.line_start(line));
            }
        }
    }

    /// An excerpt holds the lines around its spans and reads no further
    /// than the last of them.
    #[test]
    fn an_excerpt_holds_only_the_lines_it_needs() {
        struct Counted<'a>(&'a [u8], usize);
        impl std::io::Read for Counted<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len() - self.1);
                buf[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
                self.1 += n;
                Ok(n)
            }
        }
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        let at = |line: usize| text.match_indices('\n').nth(line - 1).unwrap().0 as u32 + 1;
        let mut sm = SourceMap::new();
        let mut input = Counted(text.as_bytes(), 0);
        let spans = [
            Span::new(FileId(0), at(10), at(10) + 4),
            Span::new(FileId(0), at(500), at(500)),
        ];
        let id = sm.add_excerpt("e.apir", &mut input, spans).unwrap();
        let f = sm.file(id);
        let held: Vec<&str> = f.text().lines().collect();
        assert_eq!(
            held,
            [
                "line 8", "line 9", "line 10", "line 11", "line 12", "line 13", "line 14",
                "line 498", "line 499", "line 500", "line 501", "line 502", "line 503", "line 504",
            ]
        );
        assert!(input.1 < 64 << 10, "read {} bytes", input.1);
        assert_eq!(f.line_col(at(10) + 2), (11, 3));
        assert_eq!(f.slice(spans[0]), Some("line"));
        assert_eq!(
            f.slice(Span::new(FileId(0), at(10), at(16))),
            None,
            "not held"
        );
        assert_eq!(f.line_start(499), Some(at(498)));
        assert_eq!(f.line_start(100), None);
    }

    /// A span over more lines than [`LONG_SPAN_LINES`] is shown on its
    /// first line with a note saying where it ends, so rendering does not
    /// visit every line it covers (a million, here); shorter spans are
    /// shown whole, first and last lines.
    #[test]
    fn spans_over_many_lines_show_their_first() {
        let mut sources = SourceMap::new();
        let text = format!("isa.memset dst =\n{}%x[[1, 1]]\n", "\n".repeat(1_000_000));
        let len = text.len() as u32;
        let file = sources.add("tall.apir", text);
        let out = render_all(
            &[Diagnostic::error(Span::new(file, 11, len - 1), "bad")],
            &sources,
        );
        assert!(out.len() < 1000, "{out}");
        assert!(out.contains("1 | isa.memset dst ="), "{out}");
        assert!(out.contains("the span runs on to line 1000002"), "{out}");
        let short = sources.add("short.apir", "a\nb\nc\nd\n");
        let out = render_all(
            &[Diagnostic::error(Span::new(short, 0, 7), "bad")],
            &sources,
        );
        assert!(out.contains("4 |") && !out.contains("runs on"), "{out}");
    }

    #[test]
    fn suggestions_catch_case_and_small_edits_only() {
        let kinds = ["TENSOR4D", "MEM_PATTERN4D", "SDMA"];
        assert_eq!(did_you_mean("tensor4d", kinds), Some("TENSOR4D"));
        assert_eq!(did_you_mean("TENSOR4", kinds), Some("TENSOR4D"));
        assert_eq!(did_you_mean("scr", ["dst", "src"]), Some("src"));
        assert_eq!(did_you_mean("rleu", ["relu", "gelu", "exp"]), Some("relu"));
        assert_eq!(did_you_mean("bogus", ["dst", "src"]), None);
        assert_eq!(did_you_mean("src", ["dst", "src"]), None, "not itself");
    }

    /// Coloured output draws line numbers, borders, note bullets and
    /// secondary labels in blue, the error in red.
    #[test]
    fn colours() {
        let mut sources = SourceMap::new();
        let file = sources.add("c.apir", "a bad b\nsecond\n");
        let d = Diagnostic::error(Span::new(file, 2, 5), "bad")
            .with_note("here", Span::new(file, 8, 14))
            .with_note("plain", None);
        let out = render_all_styled(&[d], &sources, true);
        let blue = "\x1b[34m";
        for part in ["-->", "1", "|", "=", "------"] {
            assert!(out.contains(&format!("{blue}{part}")), "{part}: {out:?}");
        }
        assert!(out.contains("\x1b[31m^^^"), "{out:?}");
        assert!(!out.contains("\x1b[36m"), "{out:?}");
    }

    /// [`did_you_mean`]'s rules with every candidate measured.
    fn suggestion_measuring_all<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
        let lower = name.to_ascii_lowercase();
        candidates
            .iter()
            .copied()
            .filter(|c| *c != name)
            .filter_map(|c| closeness(name, &lower, c).map(|score| (score, c)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, c)| c)
    }

    proptest! {
        /// Leaving out the candidates whose length rules them out changes
        /// no suggestion.
        #[test]
        fn length_bound_keeps_every_suggestion(
            name in "[abcé]{0,14}",
            candidates in proptest::collection::vec("[abcé]{0,14}", 1..8),
        ) {
            let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
            prop_assert_eq!(
                did_you_mean(&name, refs.iter().copied()),
                suggestion_measuring_all(&name, &refs)
            );
        }
    }

    #[test]
    fn suggestions_for_near_names_and_none_for_a_very_long_one() {
        let ops = ["isa.tensor_copy", "isa.memset", "isa.matmul"];
        assert_eq!(did_you_mean("isa.tensor_cpy", ops), Some("isa.tensor_copy"));
        assert_eq!(did_you_mean("ISA.MEMSET", ops), Some("isa.memset"));
        let long = format!("isa.{}", "n".repeat(1 << 20));
        assert_eq!(did_you_mean(&long, ops), None);
        assert!(!could_suggest(long.len(), ops[0].len()));
    }

    #[test]
    fn long_messages_keep_their_ends() {
        let name = format!("a{}z", "n".repeat(1 << 20));
        let d = Diagnostic::error(None, format!("unknown op `{name}`"))
            .with_note(format!("`{name}` here"), None);
        for text in [&d.message, &d.notes[0].0] {
            assert!(text.len() <= MAX_MESSAGE_BYTES, "{}", text.len());
            assert!(text.contains("bytes]…"), "{text}");
        }
        assert!(d.message.starts_with("unknown op `ann"));
        assert!(d.message.ends_with("nnz`"));
        // The bytes kept and the bytes said to be left out add up to the
        // message.
        let whole = format!("unknown op `{name}`");
        let (head, rest) = d.message.split_once("…[").unwrap_or_default();
        let (count, tail) = rest.split_once(" bytes]…").unwrap_or_default();
        assert_eq!(
            head.len() + count.parse::<usize>().unwrap_or(0) + tail.len(),
            whole.len()
        );
        assert!(whole.starts_with(head) && whole.ends_with(tail));
        // So is the role a diagnostic names.
        let about = Diagnostic::error(None, "m").about(
            <crate::Op as cranelift_entity::EntityRef>::new(0),
            "isa.memset",
            Some(&name),
        );
        let role = about.subject.and_then(|s| s.role).unwrap_or_default();
        assert!(
            role.len() <= MAX_MESSAGE_BYTES && role.starts_with("ann"),
            "{}",
            role.len()
        );
        // Multi-byte characters are cut whole; short messages are kept.
        let wide = Diagnostic::error(None, "é".repeat(1000));
        assert!(wide.message.len() <= MAX_MESSAGE_BYTES);
        assert_eq!(Diagnostic::error(None, "short").message, "short");
    }
}
