//! Diagnostics as data, and their rendering with the source line and a caret.
//!
//! Every error a user can cause becomes a [`Diagnostic`] with a [`Span`]; the
//! tools render them through `codespan-reporting`, and the embedding API hands
//! them out as values.

use crate::source::{SourceMap, Span};
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
    /// [`crate::Op::as_u32`]).
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
            message: message.into(),
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

    /// An internal error (compiler bug) at `span`.
    pub fn internal(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Internal,
            ..Diagnostic::error(span, message)
        }
    }

    /// Adds a note, optionally located.
    pub fn with_note(mut self, message: impl Into<String>, span: impl Into<Option<Span>>) -> Self {
        self.notes.push((message.into(), span.into()));
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
                    role: role.map(str::to_string),
                })
            }
            Some(s) if s.op == op && s.role.is_none() => s.role = role.map(str::to_string),
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
struct CsFiles<'a>(&'a SourceMap, &'a [(u32, Range<usize>)]);

/// Lines longer than this many bytes are shown as a window (see [`CsFiles`]).
const LONG_LINE: usize = 512;

/// Bytes of context shown on each side of the spans in a long line.
const WINDOW_CONTEXT: usize = 80;

impl<'a> Files<'a> for CsFiles<'a> {
    type FileId = u32;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: u32) -> Result<&'a str, FilesError> {
        Ok(self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?
            .name())
    }

    fn source(&'a self, id: u32) -> Result<&'a str, FilesError> {
        Ok(self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?
            .text())
    }

    fn line_index(&'a self, id: u32, byte_index: usize) -> Result<usize, FilesError> {
        let f = self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        Ok(f.line_col(byte_index as u32).0 as usize - 1)
    }

    fn line_range(&'a self, id: u32, line_index: usize) -> Result<Range<usize>, FilesError> {
        let f = self
            .0
            .get(crate::FileId(id))
            .ok_or(FilesError::FileMissing)?;
        let start = f
            .line_start(line_index as u32 + 1)
            .ok_or(FilesError::LineTooLarge {
                given: line_index,
                max: 0,
            })? as usize;
        let end = f
            .line_start(line_index as u32 + 2)
            .map_or(f.text().len(), |e| e as usize);
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
        Ok(f.line_col(byte_index as u32).1 as usize)
    }
}

fn to_codespan(d: &Diagnostic, sources: &SourceMap) -> cs::Diagnostic<u32> {
    let sev = match d.severity {
        Severity::Note => cs::Severity::Note,
        Severity::Warning => cs::Severity::Warning,
        Severity::Error => cs::Severity::Error,
        Severity::Internal => cs::Severity::Bug,
    };
    let clamp = |s: Span| -> Option<Range<usize>> {
        let len = sources.get(s.file)?.text().len();
        let start = (s.start as usize).min(len);
        let end = (s.end as usize).clamp(start, len);
        Some(start..end)
    };
    let mut labels = Vec::new();
    let mut notes = Vec::new();
    match d.span.and_then(|s| clamp(s).map(|r| (s.file, r))) {
        Some(r) => labels.push(cs::Label::primary(r.0 .0, r.1)),
        // No source to point into (a module built in code): say which op.
        None => notes.extend(d.subject.as_ref().map(|s| format!("in {s}"))),
    }
    for (msg, span) in &d.notes {
        match span.and_then(|s| clamp(s).map(|r| (s.file, r))) {
            Some((file, r)) => labels.push(cs::Label::secondary(file.0, r).with_message(msg)),
            None => notes.push(format!("note: {msg}")),
        }
    }
    cs::Diagnostic::new(sev)
        .with_message(&d.message)
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
            let _ = writeln!(out, "{d}");
        }
    }
    String::from_utf8_lossy(&bytes(out)).into_owned()
}

/// A list of diagnostics, in the order they were found.
pub type Diagnostics = Vec<Diagnostic>;

/// The candidate `name` is most likely a misspelling of, if any: equal but
/// for case, or within two edits (Damerau-Levenshtein) of a name longer
/// than two characters, or very close by Jaro-Winkler (above 0.88). The
/// one place "did you mean" suggestions are decided.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| {
            if c.to_ascii_lowercase() == lower {
                return Some((0.0, c));
            }
            let d = strsim::damerau_levenshtein(name, c);
            let jw = strsim::jaro_winkler(name, c);
            (d <= 2 && c.len() > 2 && name.len() > 2 || jw > 0.88).then_some((d as f64 - jw, c))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
