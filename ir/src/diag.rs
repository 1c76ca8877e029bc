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
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: span.into(),
            notes: Vec::new(),
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

    /// Renders this diagnostic as text: `file:line:col`, the source line and
    /// a caret under the span.
    pub fn render(&self, sources: &SourceMap) -> String {
        render_all(std::slice::from_ref(self), sources)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.severity.as_str(), self.message)
    }
}

/// Adapter so codespan-reporting reads our [`SourceMap`] without copying it.
struct CsFiles<'a>(&'a SourceMap);

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
        Ok(start..end)
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
    if let Some(r) = d.span.and_then(|s| clamp(s).map(|r| (s.file, r))) {
        labels.push(cs::Label::primary(r.0 .0, r.1));
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
    let config = term::Config {
        chars: term::Chars::ascii(),
        ..term::Config::default()
    };
    let files = CsFiles(sources);
    let mut out = term::termcolor::NoColor::new(Vec::new());
    for d in diags {
        // Rendering only fails when a span points outside its file, which
        // `to_codespan` prevents by clamping; fall back to the plain message.
        if term::emit(&mut out, &config, &files, &to_codespan(d, sources)).is_err() {
            use std::io::Write;
            let _ = writeln!(out, "{d}");
        }
    }
    String::from_utf8_lossy(&out.into_inner()).into_owned()
}

/// A list of diagnostics, in the order they were found.
pub type Diagnostics = Vec<Diagnostic>;

/// True if any diagnostic is an error or internal error.
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(|d| d.severity >= Severity::Error)
}
