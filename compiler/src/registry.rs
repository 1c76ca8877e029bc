//! The pass registry: one explicit table of every pass, and the named
//! pipelines. Nothing registers itself at link time.

use crate::manager::BuiltPass;
use crate::pipeline::{Pipeline, PipelineError};
use apir_ir::{OptionError, OptionInfo, Pass, PassOptions};

/// A registered pass: its name, summary, options and constructor.
#[derive(Clone, Copy)]
pub struct PassInfo {
    /// Kebab-case name, as written in pipelines.
    pub name: &'static str,
    /// One-line summary for `--list-passes`.
    pub summary: &'static str,
    /// Options the pass accepts.
    pub options: &'static [OptionInfo],
    /// Builds the pass from checked options.
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, OptionError>,
}

impl std::fmt::Debug for PassInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassInfo")
            .field("name", &self.name)
            .finish()
    }
}

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

/// Every pass apir ships, in pipeline order.
pub static PASSES: &[PassInfo] = &[
    PassInfo {
        name: "canonicalize-ap",
        summary: "Make elementwise ops fit their descriptors: drop unit dims, merge dims, split long counts, split ops",
        options: &[OptionInfo {
            name: "always",
            help: "minimise the dims of every elementwise op, not only of ops that would otherwise fail (true or false)",
            default: "false",
        }],
        create: |opts| {
            let always = opts.get_or("always", false)?;
            Ok(Box::new(apir_passes::CanonicalizeAp::new(always)))
        },
    },
    PassInfo {
        name: "fold-partition",
        summary: "Fold the partition axis (pair 0) into start partition, byte and channel count",
        options: &[],
        create: |_| Ok(Box::new(apir_passes::FoldPartition)),
    },
    PassInfo {
        name: "compact-unit-dims",
        summary: "Drop free dims with num = 1 and record the surviving slots innermost first",
        options: &[],
        create: |_| Ok(Box::new(apir_passes::CompactUnitDims)),
    },
    PassInfo {
        name: "select-descriptor",
        summary: "Attach each operand's descriptor kind from the op-encoder table and range-check its slots",
        options: &[],
        create: |_| Ok(Box::new(apir_passes::SelectDescriptor)),
    },
    PassInfo {
        name: "encode-wire",
        summary: "Pack descriptor bytes and check them with the arch's validators",
        options: &[],
        create: |_| Ok(Box::new(apir_passes::EncodeWire)),
    },
    PassInfo {
        name: "schedule-staging",
        summary: "Plan each GpSimd kernel's HBM <-> dataram staging: accessors, buffers, SDMA bursts, waits and computes",
        options: SCHEDULE_STAGING_OPTIONS,
        create: |opts| Ok(Box::new(schedule_staging(opts)?)),
    },
    PassInfo {
        name: "check-coherency",
        summary: "Prove each kernel's accessors compatible and its staging plan coherent",
        options: &[],
        create: |_| Ok(Box::new(apir_passes::CheckCoherency)),
    },
];

/// Options of `schedule-staging`: the policy, the depth, and one per
/// simulator parameter (`apir_ir::staging::PARAMS`, `_` spelled `-`).
/// `max-copies` comes last.
static SCHEDULE_STAGING_OPTIONS: &[OptionInfo] = &[
    OptionInfo { name: "policy", help: "pipelined (N-deep buffering, copies overlap compute) or reference (the runtime's accessors)", default: "pipelined" },
    OptionInfo { name: "buffers", help: "buffers per SDMA staging group for pipelined, 1 to 64 (unset: chosen per group, 1 to 4)", default: "auto" },
    OptionInfo { name: "dma-fixed-ns", help: "DMA fixed cost per descriptor, ns", default: "1300" },
    OptionInfo { name: "dma-bytes-per-us", help: "DMA bandwidth per queue, bytes per microsecond", default: "27200" },
    OptionInfo { name: "clock-mhz", help: "core clock, MHz", default: "1400" },
    OptionInfo { name: "index-ns", help: "unbuffered access per element, ns", default: "50" },
    OptionInfo { name: "vec-fixed-ns", help: "VEC_MEMCPY fixed cost per copy, ns", default: "100" },
    OptionInfo { name: "vec-bytes-per-us", help: "VEC_MEMCPY bandwidth, bytes per microsecond", default: "8000" },
    OptionInfo { name: "c-fixed-ns", help: "C_MEMCPY fixed cost per copy, ns", default: "100" },
    OptionInfo { name: "c-bytes-per-us", help: "C_MEMCPY bandwidth, bytes per microsecond", default: "1000" },
    OptionInfo { name: "budget", help: "staging budget in the dataram, bytes (at most 65536)", default: "16384" },
    OptionInfo { name: "max-copies", help: "most copies one kernel's plan may take; past it auto indexes and a forced staging is an error", default: "4194304" },
];

/// The largest `max-copies` (2^32 copies: a copy's id is a u32).
const MAX_COPIES_LIMIT: u64 = 1 << 32;

fn schedule_staging(opts: &PassOptions) -> Result<apir_passes::ScheduleStaging, OptionError> {
    use apir_ir::staging::{Policy, MAX_DEPTH, PARAMS};
    let mut pass = apir_passes::ScheduleStaging::default();
    if let Some(p) = opts.raw("policy") {
        pass.policy = Policy::from_name(p).ok_or_else(|| {
            OptionError::new(
                "policy",
                format!("invalid value `{p}` for option `policy` (pipelined or reference)"),
            )
        })?;
    }
    if pass.policy == Policy::Reference && opts.raw("buffers").is_some() {
        return Err(OptionError::new(
            "buffers",
            "option `buffers` applies to policy=pipelined (the reference stream has one buffer)",
        ));
    }
    if opts.raw("buffers").is_some() {
        let depth: u64 = opts.get_or("buffers", 2)?;
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(OptionError::new(
                "buffers",
                format!("option `buffers` must be in [1, {MAX_DEPTH}], found {depth}"),
            ));
        }
        pass.depth = Some(depth as u32);
    }
    let max_copies: u64 = opts.get_or(
        "max-copies",
        apir_passes::schedule_staging::DEFAULT_MAX_COPIES,
    )?;
    if !(1..=MAX_COPIES_LIMIT).contains(&max_copies) {
        return Err(OptionError::new(
            "max-copies",
            format!("option `max-copies` must be in [1, {MAX_COPIES_LIMIT}], found {max_copies}"),
        ));
    }
    pass.max_copies = max_copies;
    for p in PARAMS {
        let key = p.name.replace('_', "-");
        let slot = (p.field)(&mut pass.params);
        let v: u64 = opts.get_or(&key, *slot)?;
        if !(p.min..=p.max).contains(&v) {
            return Err(OptionError::new(
                &key,
                format!(
                    "option `{key}` must be in [{}, {}], found {v}",
                    p.min, p.max
                ),
            ));
        }
        *slot = v;
    }
    Ok(pass)
}

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

    /// `schedule-staging`'s option list spells out `apir_ir::staging::PARAMS`
    /// (a static table cannot be computed from another): same names (`_`
    /// as `-`), help and defaults, in the same order.
    #[test]
    fn staging_options_follow_the_parameter_table() {
        use apir_ir::staging::{SimParams, PARAMS};
        let opts = &SCHEDULE_STAGING_OPTIONS[2..2 + PARAMS.len()];
        for (o, p) in opts.iter().zip(PARAMS) {
            assert_eq!(o.name, p.name.replace('_', "-"));
            assert_eq!(o.help.split(" (").next(), p.help.split(" (").next());
            let mut d = SimParams::default();
            assert_eq!(o.default, (p.field)(&mut d).to_string(), "{}", o.name);
        }
        let last = SCHEDULE_STAGING_OPTIONS.last().unwrap();
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
