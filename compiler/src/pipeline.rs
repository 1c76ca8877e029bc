//! Textual pass pipelines, MLIR style: `pass-a,pass-b{key=value,key2=value}`.
//!
//! Options are separated by commas or blanks inside the braces and print
//! back comma-separated, so print -> parse -> print is the identity.

use indexmap::IndexMap;
use std::fmt;

/// One entry of a pipeline: a pass or named-pipeline name and its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineEntry {
    /// Pass or named pipeline name.
    pub name: String,
    /// Byte offset of the name in the pipeline text.
    pub offset: usize,
    /// Options in the order given.
    pub options: IndexMap<String, String>,
    /// Byte ranges of each option's key and value in the pipeline text, in
    /// the order of `options` (empty for entries built in code).
    pub option_ranges: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

/// A parsed pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Pipeline {
    /// Entries in order.
    pub entries: Vec<PipelineEntry>,
}

/// An error in pipeline text, at a byte range of it: a syntax error
/// ([`Pipeline::parse`]), or a pass, named pipeline or option that the
/// registry does not know or a value it does not take
/// ([`crate::Registry::build`]; the message says which, with a "did you
/// mean" hint when a name is close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineError {
    /// Message.
    pub message: String,
    /// Byte range in the pipeline text.
    pub range: std::ops::Range<usize>,
}

impl PipelineError {
    /// The error as a diagnostic pointing into `pipeline`, the text it was
    /// found in, which `sources` gets as a file named `<pipeline>`.
    pub fn diagnostic(
        &self,
        pipeline: &str,
        sources: &mut apir_ir::SourceMap,
    ) -> apir_ir::Diagnostic {
        let f = sources.add("<pipeline>", pipeline.to_string());
        let clamp = |at: usize| u32::try_from(at.min(pipeline.len())).unwrap_or(u32::MAX);
        apir_ir::Diagnostic::error(
            apir_ir::Span::new(f, clamp(self.range.start), clamp(self.range.end)),
            self.message.clone(),
        )
    }

    /// The error rendered as the tools show it: `<pipeline>:line:col`, the
    /// line of the pipeline text and a caret under the range.
    pub fn render(&self, pipeline: &str) -> String {
        let mut sources = apir_ir::SourceMap::new();
        let d = self.diagnostic(pipeline, &mut sources);
        d.render(&sources)
    }
}

impl fmt::Display for PipelineError {
    /// The message alone ([`PipelineError::render`] shows where).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PipelineError {}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl Pipeline {
    /// Parses pipeline text. Empty text is the empty pipeline.
    pub fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        let s = text.as_bytes();
        let mut i = 0;
        let mut entries = Vec::new();
        let skip = |i: &mut usize| {
            while *i < s.len() && s[*i].is_ascii_whitespace() {
                *i += 1;
            }
        };
        // `at` is a character's start; the range ends at one too, so it
        // covers a character `found` names whole.
        let err = |msg: String, at: usize, len: usize| {
            let mut end = (at + len).min(s.len()).max(at);
            while !text.is_char_boundary(end) {
                end += 1;
            }
            PipelineError {
                message: msg,
                range: at..end,
            }
        };
        let found = |i: usize| -> String {
            match text[i..].chars().next() {
                Some(c) => format!("`{c}`"),
                None => "end of pipeline".into(),
            }
        };
        skip(&mut i);
        if i == s.len() {
            return Ok(Pipeline::default());
        }
        loop {
            skip(&mut i);
            let start = i;
            while i < s.len() && is_name_char(s[i]) {
                i += 1;
            }
            if i == start {
                return Err(err(
                    format!("expected a pass name, found {}", found(i)),
                    i,
                    1,
                ));
            }
            let name = text[start..i].to_string();
            let mut options = IndexMap::new();
            let mut option_ranges = Vec::new();
            skip(&mut i);
            if i < s.len() && s[i] == b'{' {
                let open = i;
                i += 1;
                loop {
                    while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == b',') {
                        i += 1;
                    }
                    if i == s.len() {
                        return Err(err(
                            format!("unclosed `{{` in the options of `{name}`"),
                            open,
                            1,
                        ));
                    }
                    if s[i] == b'}' {
                        i += 1;
                        break;
                    }
                    let kstart = i;
                    while i < s.len() && is_name_char(s[i]) {
                        i += 1;
                    }
                    if i == kstart {
                        return Err(err(
                            format!("expected an option name, found {}", found(i)),
                            i,
                            1,
                        ));
                    }
                    let key = text[kstart..i].to_string();
                    if i >= s.len() || s[i] != b'=' {
                        return Err(err(
                            format!("expected `=` after option `{key}`, found {}", found(i)),
                            i,
                            1,
                        ));
                    }
                    i += 1;
                    let vstart = i;
                    while i < s.len()
                        && !matches!(s[i], b',' | b'}' | b'{')
                        && !s[i].is_ascii_whitespace()
                    {
                        i += 1;
                    }
                    if i == vstart {
                        return Err(err(format!("option `{key}` has no value"), vstart, 1));
                    }
                    let value = text[vstart..i].to_string();
                    option_ranges.push((kstart..vstart - 1, vstart..i));
                    if options.insert(key.clone(), value).is_some() {
                        return Err(err(
                            format!("option `{key}` is given twice"),
                            kstart,
                            key.len(),
                        ));
                    }
                }
            }
            entries.push(PipelineEntry {
                name,
                offset: start,
                options,
                option_ranges,
            });
            skip(&mut i);
            if i == s.len() {
                break;
            }
            if s[i] != b',' {
                return Err(err(
                    format!("expected `,` between passes, found {}", found(i)),
                    i,
                    1,
                ));
            }
            i += 1;
        }
        Ok(Pipeline { entries })
    }
}

impl fmt::Display for PipelineEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.options.is_empty() {
            f.write_str("{")?;
            for (i, (k, v)) in self.options.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{k}={v}")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for text in ["a", "a,b", "a{x=1},b{y=2,z=three}", ""] {
            assert_eq!(Pipeline::parse(text).unwrap().to_string(), text);
        }
        let p = Pipeline::parse(" a { x=1  y=2 } , b ").unwrap();
        assert_eq!(p.to_string(), "a{x=1,y=2},b");
        assert_eq!(p.entries[1].offset, 18);
    }

    #[test]
    fn errors_point_into_the_text() {
        let e = Pipeline::parse("a,,b").unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.range.clone()),
            ("expected a pass name, found `,`", 2..3)
        );
        let e = Pipeline::parse("a{x}").unwrap_err();
        assert_eq!(e.message, "expected `=` after option `x`, found `}`");
        let e = Pipeline::parse("a{x=1").unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.range.clone()),
            ("unclosed `{` in the options of `a`", 1..2)
        );
        let e = Pipeline::parse("a b").unwrap_err();
        assert_eq!(e.message, "expected `,` between passes, found `b`");
        let e = Pipeline::parse("a{x=1,x=2}").unwrap_err();
        assert_eq!(e.message, "option `x` is given twice");
        let e = Pipeline::parse("a{x=}").unwrap_err();
        assert_eq!(e.message, "option `x` has no value");
        // A range covers the whole character it points at.
        for (text, range) in [("é", 0..2), ("a,日本", 2..5), ("a{x=1}é", 6..8)] {
            let e = Pipeline::parse(text).unwrap_err();
            assert_eq!(e.range, range, "{text}: {}", e.message);
            assert!(!text[e.range].is_empty());
        }
    }

    /// An error shows as its message, or rendered into the pipeline text
    /// with a caret under its range, as the tools print it; an unknown
    /// pass is one too.
    #[test]
    fn errors_render_into_the_pipeline_text() {
        let text = "fold-partition,lower-to-wir";
        let e = crate::Registry::builtin()
            .build(&Pipeline::parse(text).unwrap())
            .err()
            .expect("an unknown pass");
        assert_eq!(e.to_string(), e.message);
        assert!(e.message.starts_with("unknown pass `lower-to-wir`"), "{e}");
        let shown = e.render(text);
        assert!(shown.contains("<pipeline>:1:16"), "{shown}");
        let caret = shown
            .lines()
            .find(|l| l.contains('^'))
            .expect("a caret line");
        let (col, width) = (caret.find('^').unwrap(), caret.matches('^').count());
        let line = shown.lines().find(|l| l.ends_with(text)).expect("the text");
        assert_eq!(&line[col..col + width], "lower-to-wir", "{shown}");
        // A range past the text (an error built by hand) is clamped.
        let far = PipelineError {
            message: "m".into(),
            range: 100..200,
        };
        assert!(
            far.render("ab").contains("<pipeline>:1:3"),
            "{}",
            far.render("ab")
        );
    }
}
