//! `--verify-diagnostics`: checks the diagnostics a run produced against
//! MLIR-style `expected-error@+N {{...}}` comments in the input.
//!
//! Forms: `expected-error`, `expected-warning`, `expected-note`, optionally
//! followed by `@+N`, `@-N`, `@above` or `@below`; the message in `{{ }}` must
//! be a substring of the diagnostic's message. Every expectation must be met
//! by a diagnostic of that severity on that line, and every diagnostic (and
//! located note) must meet an expectation.

use apir_ir::{Diagnostic, Severity, SourceMap, Span};
use std::collections::HashMap;
use std::ops::Range;

/// One expectation found in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// Severity expected.
    pub severity: Severity,
    /// 1-based line the diagnostic must be on.
    pub line: u32,
    /// Substring of the message.
    pub text: String,
    /// Where the comment is.
    pub span: Span,
}

/// Collects the expectations in `range` of the file. Malformed expectation
/// comments are reported as errors.
pub fn collect(
    sources: &SourceMap,
    file: apir_ir::FileId,
    range: Range<usize>,
) -> Result<Vec<Expectation>, Vec<Diagnostic>> {
    match collect_all(sources, file, range) {
        (out, errors) if errors.is_empty() => Ok(out),
        (_, errors) => Err(errors),
    }
}

/// [`collect`], giving both the well-formed expectations and the errors
/// about the malformed ones (so that the diagnostics can still be matched
/// against the former, and one a malformed comment meant shows as
/// unexpected rather than not at all).
pub fn collect_all(
    sources: &SourceMap,
    file: apir_ir::FileId,
    range: Range<usize>,
) -> (Vec<Expectation>, Vec<Diagnostic>) {
    let f = sources.file(file);
    let text = f.text();
    // The last line a diagnostic can be on: the end of input's (after a
    // final newline, the empty line that follows it).
    let last_line = i64::from(f.line_col(text.len() as u32).0);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut pos = range.start;
    let region = &text[range.clone()];
    for line in region.split_inclusive('\n') {
        let line_start = pos;
        pos += line.len();
        let mut search = 0;
        while let Some(i) = line[search..].find("expected-") {
            let at = search + i;
            search = at + 9;
            // Only inside a `//` comment.
            if !line[..at].contains("//") {
                continue;
            }
            let rest = &line[at + 9..];
            let (severity, kw_len) = if rest.starts_with("error") {
                (Severity::Error, 5)
            } else if rest.starts_with("warning") {
                (Severity::Warning, 7)
            } else if rest.starts_with("note") {
                (Severity::Note, 4)
            } else {
                continue;
            };
            let span = Span::new(
                file,
                (line_start + at) as u32,
                (line_start + at + 9 + kw_len) as u32,
            );
            let (this_line, _) = f.line_col(span.start);
            let mut rest = &rest[kw_len..];
            let mut target = this_line as i64;
            if let Some(r) = rest.strip_prefix('@') {
                let end = r
                    .find(|c: char| c.is_whitespace() || c == '{')
                    .unwrap_or(r.len());
                let spec = &r[..end];
                // The diagnostics about the offset point at it (`@` on).
                let at_spec = span.end as usize;
                let spec_span = Span::new(file, at_spec as u32, (at_spec + 1 + end) as u32);
                let digits = spec.get(1..).filter(|d| {
                    (spec.starts_with('+') || spec.starts_with('-'))
                        && !d.is_empty()
                        && d.bytes().all(|b| b.is_ascii_digit())
                });
                let delta = match spec {
                    "above" => Some(-1),
                    "below" => Some(1),
                    // Past 64 bits, it is past the file all the same.
                    _ => digits.map(|_| {
                        spec.parse::<i64>().unwrap_or(if spec.starts_with('-') {
                            i64::MIN
                        } else {
                            i64::MAX
                        })
                    }),
                };
                // An offset that leaves the file never wraps onto a line of it.
                match delta.map(|d| {
                    target
                        .checked_add(d)
                        .filter(|t| (1..=last_line).contains(t))
                }) {
                    Some(Some(t)) => target = t,
                    Some(None) => {
                        errors.push(Diagnostic::error(
                            spec_span,
                            format!(
                                "line offset `@{spec}` points outside the file (line {this_line} of {last_line})"
                            ),
                        ));
                        continue;
                    }
                    None => {
                        errors.push(Diagnostic::error(
                            spec_span,
                            format!(
                                "malformed line offset `@{spec}` (use @+N, @-N, @above or @below)"
                            ),
                        ));
                        continue;
                    }
                }
                rest = &r[end..];
            }
            let rest_trim = rest.trim_start();
            let Some(body) = rest_trim.strip_prefix("{{") else {
                errors.push(Diagnostic::error(
                    span,
                    "expected `{{message}}` after the expectation",
                ));
                continue;
            };
            let Some(end) = body.find("}}") else {
                errors.push(Diagnostic::error(
                    span,
                    "unterminated `{{` in the expectation",
                ));
                continue;
            };
            out.push(Expectation {
                severity,
                line: target as u32,
                text: body[..end].to_string(),
                span,
            });
        }
    }
    (out, errors)
}

/// Matches `diags` against `expected`. Returns the mismatches as
/// diagnostics (unexpected ones and unmet expectations); empty means success.
pub fn check(
    sources: &SourceMap,
    expected: &[Expectation],
    diags: &[Diagnostic],
) -> Vec<Diagnostic> {
    // Flatten: each diagnostic, and each located note as a note.
    let mut produced: Vec<(Severity, Option<Span>, &str)> = Vec::new();
    for d in diags {
        produced.push((d.severity, d.span, &d.message));
        for (msg, span) in &d.notes {
            if span.is_some() {
                produced.push((Severity::Note, *span, msg));
            }
        }
    }
    let mut met = vec![false; expected.len()];
    // The expectations of each severity and line, in order: a diagnostic
    // is matched against those of its own only (time linear in the
    // diagnostics and expectations, not their product).
    let mut by_line: HashMap<(Severity, u32), Vec<usize>> = HashMap::new();
    for (i, e) in expected.iter().enumerate() {
        by_line.entry((e.severity, e.line)).or_default().push(i);
    }
    let mut out = Vec::new();
    for (sev, span, msg) in produced {
        let line = span.and_then(|s| sources.get(s.file).map(|f| f.line_col(s.start).0));
        let hit = line.and_then(|l| by_line.get(&(sev, l))).and_then(|ids| {
            ids.iter()
                .copied()
                .find(|&i| !met[i] && msg.contains(&expected[i].text))
        });
        match hit {
            Some(i) => met[i] = true,
            None => out.push(Diagnostic::error(
                span,
                format!("unexpected {}: {msg}", sev.as_str()),
            )),
        }
    }
    for (e, ok) in expected.iter().zip(met) {
        if !ok {
            out.push(Diagnostic::error(
                e.span,
                format!(
                    "expected {} \"{}\" on line {} was not produced",
                    e.severity.as_str(),
                    e.text,
                    e.line
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_offsets() {
        let mut sm = SourceMap::new();
        let text = "a\n// expected-error@+1 {{boom}}\nb\nc // expected-warning {{w}}\n// expected-note@-3 {{n}}\n";
        let f = sm.add("t", text);
        let e = collect(&sm, f, 0..text.len()).unwrap();
        let got: Vec<_> = e
            .iter()
            .map(|e| (e.severity, e.line, e.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Severity::Error, 3, "boom"),
                (Severity::Warning, 4, "w"),
                (Severity::Note, 2, "n")
            ]
        );
    }

    #[test]
    fn each_diagnostic_meets_the_first_unmet_expectation_of_its_line() {
        let mut sm = SourceMap::new();
        // Two errors expected on line 1, a warning on line 3, an error on
        // line 3 that no diagnostic meets.
        let text = "x // expected-error {{boom}}\n// expected-error@-1 {{bo}}\ny // expected-warning {{w}}\n// expected-error@-1 {{never}}\n";
        let f = sm.add("t", text);
        let e = collect(&sm, f, 0..text.len()).unwrap();
        let at = |line_start: u32| Span::new(f, line_start, line_start + 1);
        let line3 = text.find("y //").unwrap_or(0) as u32;
        let diags = vec![
            Diagnostic::error(at(0), "boom"),
            Diagnostic::error(at(0), "boom again"),
            Diagnostic::warning(at(line3), "w"),
            // On line 3 but a warning's severity is not an error's.
            Diagnostic::warning(at(line3), "never"),
            Diagnostic::error(at(0), "a third boom"),
        ];
        let got: Vec<String> = check(&sm, &e, &diags)
            .into_iter()
            .map(|d| d.message)
            .collect();
        assert_eq!(
            got,
            vec![
                "unexpected warning: never".to_string(),
                "unexpected error: a third boom".to_string(),
                "expected error \"never\" on line 3 was not produced".to_string(),
            ]
        );
    }

    #[test]
    fn matches_substrings_both_ways() {
        let mut sm = SourceMap::new();
        let text = "x\n// expected-error@-1 {{bad thing}}\n";
        let f = sm.add("t", text);
        let e = collect(&sm, f, 0..text.len()).unwrap();
        let good = vec![Diagnostic::error(
            Span::new(f, 0, 1),
            "a bad thing happened",
        )];
        assert!(check(&sm, &e, &good).is_empty());
        let wrong_line = vec![Diagnostic::error(
            Span::new(f, 3, 4),
            "a bad thing happened",
        )];
        assert_eq!(check(&sm, &e, &wrong_line).len(), 2);
        assert_eq!(check(&sm, &e, &[]).len(), 1);
    }

    #[test]
    fn rejects_malformed() {
        let mut sm = SourceMap::new();
        let text = "// expected-error@x {{a}}\n// expected-error boom\n";
        let f = sm.add("t", text);
        assert_eq!(collect(&sm, f, 0..text.len()).unwrap_err().len(), 2);
    }

    /// Offsets that leave the file are errors: `@+4294967295` on line 2
    /// does not wrap onto line 1, nor does an i64 overflow panic.
    #[test]
    fn offsets_outside_the_file() {
        let mut sm = SourceMap::new();
        let text = "x\n// expected-error@+4294967295 {{a}}\n// expected-error@+9223372036854775807 {{b}}\n// expected-error@-4 {{c}}\n// expected-error@+2 {{d}}\n";
        let f = sm.add("t", text);
        let errors = collect(&sm, f, 0..text.len()).unwrap_err();
        let msgs: Vec<&str> = errors.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "line offset `@+4294967295` points outside the file (line 2 of 6)",
                "line offset `@+9223372036854775807` points outside the file (line 3 of 6)",
                "line offset `@-4` points outside the file (line 4 of 6)",
                "line offset `@+2` points outside the file (line 5 of 6)",
            ]
        );
        // The end of input (after the final newline) is a valid target.
        let ok = "// expected-error@+2 {{z}}\nz\n";
        let g = sm.add("u", ok);
        assert_eq!(collect(&sm, g, 0..ok.len()).unwrap()[0].line, 3);
    }
}
