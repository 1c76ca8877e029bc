//! The embedding API: parse IR text or take a module built in code, run a
//! pipeline, and get IR text and diagnostics back as data.
//!
//! ```
//! use apir_compiler::Compilation;
//! let text = "module attributes {arch = \"v2\"} {\n  %x = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %x[[64, 128], [1, 64]]\n}\n";
//! let mut c = Compilation::parse("k.apir", text, None).unwrap();
//! c.run("").unwrap();
//! assert_eq!(c.ir(), text);
//! ```

use crate::manager::{Instrumentation, PassManager, RunReport};
use crate::pipeline::{Pipeline, PipelineError};
use crate::registry::Registry;
use apir_ir::{
    parse_module, print_module, verify, Arch, Diagnostic, Diagnostics, Module, ParseOptions,
    Severity, SourceMap, Span, Subject,
};
use std::fmt;

/// Why a step failed.
#[derive(Clone, Debug)]
pub enum Error {
    /// The input has errors (exit code 1), or an internal error occurred
    /// (exit code 3; see [`Error::is_internal`]).
    Diagnostics(Diagnostics),
    /// The pipeline text is malformed or names an unknown pass (exit code 2).
    Pipeline(PipelineError),
}

impl Error {
    /// Whether this is a compiler bug rather than bad input.
    pub fn is_internal(&self) -> bool {
        matches!(self, Error::Diagnostics(d) if d.iter().any(|d| d.severity == Severity::Internal))
    }

    /// The exit code the tools use for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Pipeline(_) => 2,
            e if e.is_internal() => 3,
            Error::Diagnostics(_) => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Diagnostics(d) => {
                for (i, d) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{d}")?;
                }
                Ok(())
            }
            Error::Pipeline(e) => write!(f, "error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Pipeline(e) => Some(e),
            Error::Diagnostics(_) => None,
        }
    }
}

/// IR text that does not parse or verify: its diagnostics and the sources
/// they point into. Displayed, it is the rendered diagnostics (location,
/// source line, caret).
#[derive(Debug)]
pub struct ParseError {
    /// The problems found (every independent one, not only the first).
    pub diagnostics: Diagnostics,
    /// The text parsed.
    pub sources: SourceMap,
}

impl ParseError {
    /// The diagnostics rendered with source lines and carets.
    pub fn render(&self) -> String {
        apir_ir::render_all(&self.diagnostics, &self.sources)
    }

    /// The diagnostics as data with resolved locations.
    pub fn describe(&self) -> Vec<DiagnosticInfo> {
        describe(&self.sources, &self.diagnostics)
    }

    /// The diagnostics without their sources.
    pub fn into_error(self) -> Error {
        Error::Diagnostics(self.diagnostics)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.render().trim_end())
    }
}

impl std::error::Error for ParseError {}

/// A resolved source position: file name, 1-based line and column (in
/// characters).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file's name as given to the parser.
    pub file: String,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A diagnostic as plain data: severity, message, where it points in the
/// source text and, for problems about an op, which op and operand (the
/// only position a module built in code has).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagnosticInfo {
    /// Error, warning, note or internal error.
    pub severity: Severity,
    /// Message.
    pub message: String,
    /// Source position, if the diagnostic points into source text.
    pub location: Option<Location>,
    /// The op (its id and name) and operand role it concerns, if any.
    pub subject: Option<Subject>,
    /// Notes with their positions.
    pub notes: Vec<(String, Option<Location>)>,
}

/// A module together with the sources its locations refer to.
#[derive(Debug)]
pub struct Compilation {
    /// The module.
    pub module: Module,
    /// Source files (empty for a module built in code).
    pub sources: SourceMap,
    registry: Registry,
    instrumentation: Instrumentation,
}

impl Compilation {
    /// Parses and verifies IR text. `arch` overrides the module's own.
    pub fn parse(name: &str, text: &str, arch: Option<Arch>) -> Result<Compilation, ParseError> {
        let mut sources = SourceMap::new();
        let file = sources.add(name, text);
        let module = match parse_module(&sources, file, 0..text.len(), ParseOptions { arch }) {
            Ok(m) => m,
            Err(diagnostics) => {
                return Err(ParseError {
                    diagnostics,
                    sources,
                })
            }
        };
        if let Err(diagnostics) = verify(&module) {
            return Err(ParseError {
                diagnostics,
                sources,
            });
        }
        Ok(Compilation::from_parts(module, sources))
    }

    /// Wraps a module built in code (it is verified by [`Compilation::run`]).
    pub fn from_module(module: Module) -> Compilation {
        Compilation::from_parts(module, SourceMap::new())
    }

    /// Wraps a parsed module and its sources.
    pub(crate) fn from_parts(module: Module, sources: SourceMap) -> Compilation {
        Compilation {
            module,
            sources,
            registry: Registry::builtin(),
            instrumentation: Instrumentation::default(),
        }
    }

    /// Uses `registry` instead of the built-in one.
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Sets the pass manager's instrumentation.
    pub fn with_instrumentation(mut self, instrumentation: Instrumentation) -> Self {
        self.instrumentation = instrumentation;
        self
    }

    /// Verifies the module.
    pub fn verify(&self) -> Result<(), Error> {
        verify(&self.module).map_err(Error::Diagnostics)
    }

    /// The module's warnings ([`apir_ir::lint()`]): attributes no op
    /// interprets, with the one most likely meant. [`Compilation::run`]
    /// puts them first in its report's warnings.
    pub fn warnings(&self) -> Diagnostics {
        apir_ir::lint(&self.module)
    }

    /// Runs pipeline text on the module (verifying first and after each
    /// pass); the report's warnings start with the module's own
    /// ([`Compilation::warnings`]).
    pub fn run(&mut self, pipeline: &str) -> Result<RunReport, Error> {
        let p = Pipeline::parse(pipeline).map_err(Error::Pipeline)?;
        let (report, outcome) = self.run_pipeline(&p);
        outcome.map(|()| report)
    }

    /// Runs a parsed pipeline; returns the report (up to a failure) and the
    /// outcome.
    pub fn run_pipeline(&mut self, pipeline: &Pipeline) -> (RunReport, Result<(), Error>) {
        let passes = match self.registry.build(pipeline) {
            Ok(p) => p,
            Err(e) => return (RunReport::default(), Err(Error::Pipeline(e))),
        };
        if let Err(e) = self.verify() {
            return (RunReport::default(), Err(e));
        }
        let (report, outcome) =
            PassManager::new(passes, self.instrumentation).run_verified(&mut self.module);
        (report, outcome.map_err(Error::Diagnostics))
    }

    /// The module as IR text.
    pub fn ir(&self) -> String {
        print_module(&self.module)
    }

    /// Renders diagnostics with source lines and carets.
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        apir_ir::render_all(diags, &self.sources)
    }

    /// Diagnostics as data with resolved locations.
    pub fn describe(&self, diags: &[Diagnostic]) -> Vec<DiagnosticInfo> {
        describe(&self.sources, diags)
    }
}

/// Diagnostics as data with resolved locations (a span outside `sources`,
/// as every span of a module built in code is, has none).
pub fn describe(sources: &SourceMap, diags: &[Diagnostic]) -> Vec<DiagnosticInfo> {
    let loc = |s: Option<Span>| {
        let s = s?;
        let f = sources.get(s.file)?;
        let (line, column) = f.line_col(s.start);
        Some(Location {
            file: f.name().to_string(),
            line,
            column,
        })
    };
    diags
        .iter()
        .map(|d| DiagnosticInfo {
            severity: d.severity,
            message: d.message.clone(),
            location: loc(d.span),
            subject: d.subject.clone(),
            notes: d.notes.iter().map(|(m, s)| (m.clone(), loc(*s))).collect(),
        })
        .collect()
}
