//! The pass registry: one explicit list of every pass, and the named
//! pipelines. Each pass declares itself in its own file (its name,
//! summary, options and constructor: `INFO` on the pass type); the list
//! only names the declarations. Nothing registers itself at link time.

use crate::manager::BuiltPass;
use crate::pipeline::{Pipeline, PipelineError};
use apir_ir::PassOptions;

/// A registered pass: its name, summary, options and constructor, as the
/// pass declares itself in its own file (`INFO` on the pass type).
pub use apir_ir::PassInfo;

/// A named pipeline: a name standing for a fixed list of passes.
#[derive(Clone, Copy, Debug)]
pub struct NamedPipeline {
    /// Name.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// Pipeline text it expands to.
    pub expansion: &'static str,
}

/// A set of passes and named pipelines that pipelines are built from.
#[derive(Clone, Copy, Debug)]
pub struct Registry {
    /// Passes.
    pub passes: &'static [PassInfo],
    /// Named pipelines.
    pub pipelines: &'static [NamedPipeline],
}

/// Every pass apir ships, in pipeline order; each declares itself (name,
/// summary, options with their help and defaults, constructor) in its own
/// file.
pub static PASSES: &[PassInfo] = &[
    apir_passes::CanonicalizeAp::INFO,
    apir_passes::FoldPartition::INFO,
    apir_passes::CompactUnitDims::INFO,
    apir_passes::SelectDescriptor::INFO,
    apir_passes::EncodeWire::INFO,
    apir_passes::ScheduleStaging::INFO,
    apir_passes::CheckCoherency::INFO,
];

/// The named pipelines apir ships.
pub static NAMED_PIPELINES: &[NamedPipeline] = &[
    NamedPipeline {
        name: "lower-to-wire",
        summary: "Lower every ISA operand to checked descriptor bytes",
        expansion: "canonicalize-ap,fold-partition,compact-unit-dims,select-descriptor,encode-wire",
    },
    NamedPipeline {
        name: "lower-staging",
        summary: "Plan every GpSimd kernel's staging and prove it coherent",
        expansion: "schedule-staging,check-coherency",
    },
    NamedPipeline {
        name: "all",
        summary: "lower-to-wire, then lower-staging",
        expansion: "lower-to-wire,lower-staging",
    },
];

impl Registry {
    /// The registry of everything apir ships.
    pub fn builtin() -> Registry {
        Registry {
            passes: PASSES,
            pipelines: NAMED_PIPELINES,
        }
    }

    /// The pass called `name`.
    pub fn pass(&self, name: &str) -> Option<&'static PassInfo> {
        self.passes.iter().find(|p| p.name == name)
    }

    /// The named pipeline called `name`.
    pub fn pipeline(&self, name: &str) -> Option<&'static NamedPipeline> {
        self.pipelines.iter().find(|p| p.name == name)
    }

    /// Builds the passes of `pipeline`, expanding named pipelines. Errors
    /// point at the entry in the pipeline text.
    pub fn build(&self, pipeline: &Pipeline) -> Result<Vec<BuiltPass>, PipelineError> {
        let mut out = Vec::new();
        self.build_into(pipeline, 0, &mut out)?;
        Ok(out)
    }

    fn build_into(
        &self,
        pipeline: &Pipeline,
        depth: usize,
        out: &mut Vec<BuiltPass>,
    ) -> Result<(), PipelineError> {
        for e in &pipeline.entries {
            let range = e.offset..e.offset + e.name.len();
            if let Some(named) = self.pipeline(&e.name) {
                if !e.options.is_empty() {
                    return Err(PipelineError {
                        message: format!("named pipeline `{}` takes no options", e.name),
                        range,
                    });
                }
                if depth > 8 {
                    return Err(PipelineError {
                        message: format!("named pipeline `{}` expands recursively", e.name),
                        range,
                    });
                }
                let inner = Pipeline::parse(named.expansion).map_err(|err| PipelineError {
                    message: format!("named pipeline `{}` is malformed: {}", e.name, err.message),
                    range: range.clone(),
                })?;
                // Errors inside an expansion point at the name that expanded.
                self.build_into(&inner, depth + 1, out)
                    .map_err(|err| PipelineError {
                        range: range.clone(),
                        ..err
                    })?;
                continue;
            }
            let Some(info) = self.pass(&e.name) else {
                let mut names: Vec<&str> = self.passes.iter().map(|p| p.name).collect();
                names.extend(self.pipelines.iter().map(|p| p.name));
                let hint = apir_ir::diag::did_you_mean(&e.name, names.iter().copied())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                return Err(PipelineError {
                    message: format!(
                        "unknown pass `{}`{hint}; `--list-passes` lists them",
                        e.name
                    ),
                    range,
                });
            };
            for (i, key) in e.options.keys().enumerate() {
                if !info.options.iter().any(|o| o.name == key) {
                    let known: Vec<_> = info.options.iter().map(|o| o.name).collect();
                    let list = if known.is_empty() {
                        "it takes none".to_string()
                    } else {
                        format!("it takes {}", known.join(", "))
                    };
                    let hint = apir_ir::diag::did_you_mean(key, known.iter().copied())
                        .map(|k| format!("; did you mean `{k}`?"))
                        .unwrap_or_default();
                    return Err(PipelineError {
                        message: format!("pass `{}` has no option `{key}` ({list}){hint}", e.name),
                        range: e.option_ranges.get(i).map_or(range, |r| r.0.clone()),
                    });
                }
            }
            let pass = (info.create)(&PassOptions::new(e.options.clone())).map_err(|err| {
                // At the value of the option at fault, if it was given.
                let at = e
                    .options
                    .get_index_of(&err.key)
                    .and_then(|i| e.option_ranges.get(i))
                    .map_or(range.clone(), |r| r.1.clone());
                PipelineError {
                    message: format!("pass `{}`: {}", e.name, err.message),
                    range: at,
                }
            })?;
            out.push((e.to_string(), pass));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pass's declaration names the pass it builds, and every
    /// declared default builds it.
    #[test]
    fn declarations_build_their_passes() {
        for info in PASSES {
            let pass = (info.create)(&PassOptions::default()).unwrap();
            assert_eq!(pass.name(), info.name);
            for o in info.options {
                let mut given = indexmap::IndexMap::new();
                given.insert(o.name.to_string(), o.default.to_string());
                if (info.name, o.name) == ("schedule-staging", "buffers") {
                    continue; // `auto` is the absence of a value
                }
                let pass = (info.create)(&PassOptions::new(given));
                assert!(pass.is_ok(), "{} {}={}", info.name, o.name, o.default);
            }
        }
    }

    /// `schedule-staging`'s options derive from the cost model's table:
    /// each simulator parameter by name (`_` as `-`), help and default, in
    /// order.
    #[test]
    fn staging_options_derive_from_the_parameter_table() {
        use apir_ir::staging::PARAMS;
        let info = Registry::builtin().pass("schedule-staging").unwrap();
        let opts = &info.options[2..2 + PARAMS.len()];
        for (o, p) in opts.iter().zip(PARAMS) {
            assert_eq!(o.name, p.name.replace('_', "-"));
            assert_eq!(o.help, p.help);
            assert_eq!(o.default, p.default.to_string(), "{}", o.name);
        }
        let last = info.options.last().unwrap();
        assert_eq!(
            (last.name, last.default),
            (
                "max-copies",
                apir_passes::schedule_staging::DEFAULT_MAX_COPIES
                    .to_string()
                    .as_str()
            )
        );
    }
}
