//! The streaming driver: runs an op-local pipeline one top-level op at a
//! time, so memory stays proportional to the buffers and the output rather
//! than the module.
//!
//! Every pass that declares itself [`apir_ir::Pass::op_local`] gives the same result,
//! statistics and diagnostics on a module holding the buffers and one op as
//! on the whole module, and the verifier checks each op with the same rules,
//! so streaming is an implementation detail of success. On the first error
//! of any kind the driver gives up and returns `None`; the caller then runs
//! the whole-module path, which reports exactly the diagnostics it always
//! does.

use crate::manager::{BuiltPass, Instrumentation, RunReport};
use crate::wire::{self, WireOp};
use apir_ir::printer::{print_footer, print_header, print_item};
use apir_ir::{
    verify_buffer, verify_ops, FileId, Item, Module, ParseOptions, PassContext, SourceMap,
    StreamParser,
};
use std::ops::Range;
use std::time::{Duration, Instant};

/// What the streaming driver writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEmit {
    /// IR text.
    Ir,
    /// Annotated wire dump.
    WireDump,
    /// One hex line per operand.
    WireHex,
    /// Raw descriptor bytes.
    WireBin,
    /// The JSON document.
    Json,
}

/// How to stream.
#[derive(Clone, Copy, Debug)]
pub struct StreamOptions {
    /// Parser options (arch override).
    pub parse: ParseOptions,
    /// Instrumentation (IR dumps make streaming impossible; see [`can_stream`]).
    pub instrumentation: Instrumentation,
    /// What to write.
    pub emit: StreamEmit,
    /// Measure per-phase wall time.
    pub timed: bool,
}

/// A successful streaming run.
#[derive(Debug, Default)]
pub struct StreamOutput {
    /// The emitted bytes.
    pub output: Vec<u8>,
    /// Timings (`parse`, `verify`, each pass, `(verify)`, `emit`) and
    /// statistics, as the whole-module path reports them.
    pub report: RunReport,
}

/// Whether `passes` and `inst` allow streaming (every pass op-local, no IR
/// dumps between passes).
pub fn can_stream(passes: &[BuiltPass], inst: Instrumentation) -> bool {
    !inst.print_ir_after_all
        && !inst.print_ir_after_failure
        && passes.iter().all(|(_, p)| p.op_local())
}

fn add_time(phases: &mut Vec<(String, Duration)>, name: &str, d: Duration) {
    match phases.iter_mut().find(|p| p.0 == name) {
        Some(p) => p.1 += d,
        None => phases.push((name.to_string(), d)),
    }
}

/// A stopwatch that reads the clock only when timing was asked for: per-op
/// timing of a million ops would otherwise cost a noticeable share of the run.
struct Clock(bool);

impl Clock {
    fn start(&self) -> Option<Instant> {
        self.0.then(Instant::now)
    }

    fn add(t: Option<Instant>, to: &mut Duration) {
        if let Some(t) = t {
            *to += t.elapsed();
        }
    }
}

/// Streams `range` of `file` through `passes` and renders `emit`. `None` on
/// any error (see the module docs). Timings are measured only when `timed`.
pub fn run_streaming(
    sources: &SourceMap,
    file: FileId,
    range: Range<usize>,
    passes: &mut [BuiltPass],
    opts: StreamOptions,
) -> Option<StreamOutput> {
    let StreamOptions {
        parse: opts,
        instrumentation: inst,
        emit,
        timed,
    } = opts;
    let clock = Clock(timed);
    let mut phases: Vec<(String, Duration)> = vec![
        ("parse".into(), Duration::ZERO),
        ("verify".into(), Duration::ZERO),
    ];
    for (name, _) in passes.iter() {
        add_time(&mut phases, name, Duration::ZERO);
    }
    let t = clock.start();
    let mut sp = StreamParser::new(sources, file, range, opts);
    Clock::add(t, &mut phases[0].1);
    if !sp.errors().is_empty() {
        return None;
    }
    let mut text = String::new();
    let mut bytes = Vec::new();
    let mut json_ops: Vec<WireOp> = Vec::new();
    let mut op_index = 0usize;
    if emit == StreamEmit::Ir {
        print_header(sp.module(), &mut text);
    }
    let mut cxs: Vec<PassContext> = passes.iter().map(|_| PassContext::new()).collect();
    let mut pass_time = vec![Duration::ZERO; passes.len()];
    let (mut verify_time, mut reverify_time, mut emit_time) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    loop {
        let t = clock.start();
        let next = sp.next_item();
        Clock::add(t, &mut phases[0].1);
        let item = match next {
            None => break,
            Some(Ok(item)) => item,
            Some(Err(())) => return None,
        };
        let m: &mut Module = sp.module();
        let t = clock.start();
        let verified = match item {
            Item::Buffer(b) => verify_buffer(m, b),
            Item::Op(op) => verify_ops(m, [op]),
        };
        Clock::add(t, &mut verify_time);
        verified.ok()?;
        if let Item::Op(_) = item {
            for (i, (_, pass)) in passes.iter_mut().enumerate() {
                let t = clock.start();
                let result = pass.run(m, &mut cxs[i]);
                Clock::add(t, &mut pass_time[i]);
                result.ok()?;
                if !inst.no_verify {
                    let t = clock.start();
                    let v = if pass.preserves_logical_ir() {
                        apir_ir::verify_lowered(m, m.top_ops())
                    } else {
                        verify_ops(m, m.top_ops())
                    };
                    Clock::add(t, &mut reverify_time);
                    v.ok()?;
                }
            }
        }
        let t = clock.start();
        match emit {
            StreamEmit::Ir => {
                for &item in &m.body {
                    print_item(m, item, &mut text);
                }
            }
            StreamEmit::WireBin | StreamEmit::WireHex | StreamEmit::WireDump | StreamEmit::Json => {
                let ops = wire::collect_from(
                    m,
                    sources,
                    emit != StreamEmit::WireBin && emit != StreamEmit::WireHex,
                    op_index,
                )
                .ok()?;
                op_index += ops.len();
                match emit {
                    StreamEmit::WireBin => bytes.extend(wire::binary(&ops)),
                    StreamEmit::WireHex => text.push_str(&wire::hex_lines(&ops)),
                    StreamEmit::WireDump => text.push_str(&wire::dump(m, &ops)),
                    _ => json_ops.extend(ops),
                }
            }
        }
        Clock::add(t, &mut emit_time);
        // The item is done: keep buffer declarations, drop ops.
        m.body.clear();
        m.ops.clear();
        m.blocks.clear();
    }
    if !sp.errors().is_empty() {
        return None;
    }
    let t = clock.start();
    let output = match emit {
        StreamEmit::Ir => {
            print_footer(&mut text);
            text.into_bytes()
        }
        StreamEmit::WireBin => bytes,
        StreamEmit::Json => wire::json(sp.module().arch, &json_ops, &[]).into_bytes(),
        _ => text.into_bytes(),
    };
    Clock::add(t, &mut emit_time);
    phases[1].1 += verify_time;
    let mut report = RunReport::default();
    for (i, (name, _)) in passes.iter().enumerate() {
        add_time(&mut phases, name, pass_time[i]);
        report.warnings.extend(cxs[i].take_warnings());
        if !cxs[i].statistics().is_empty() {
            report
                .statistics
                .push((name.clone(), cxs[i].statistics().clone()));
        }
    }
    if !passes.is_empty() && !inst.no_verify {
        add_time(&mut phases, "(verify)", reverify_time);
    }
    add_time(&mut phases, "emit", emit_time);
    report.timings = phases;
    Some(StreamOutput { output, report })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compilation, Pipeline, Registry};

    /// Streaming and the whole-module path produce the same bytes and
    /// statistics on the corpus, for every emit mode.
    #[test]
    fn streaming_matches_the_module_path() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut sources = SourceMap::new();
            let file = sources.add("c.apir", text.clone());
            let registry = Registry::builtin();
            let pipeline = Pipeline::parse("lower-to-wire").unwrap();
            let mut whole = match Compilation::parse("c.apir", &text, None) {
                Ok(c) => c,
                Err(_) => continue,
            };
            let run = whole.run("lower-to-wire");
            for emit in [
                StreamEmit::Ir,
                StreamEmit::WireBin,
                StreamEmit::WireHex,
                StreamEmit::WireDump,
                StreamEmit::Json,
            ] {
                let mut passes = registry.build(&pipeline).unwrap();
                let opts = StreamOptions {
                    parse: ParseOptions::default(),
                    instrumentation: Instrumentation::default(),
                    emit,
                    timed: false,
                };
                let streamed = run_streaming(&sources, file, 0..text.len(), &mut passes, opts);
                match (&run, streamed) {
                    (Err(_), None) => {}
                    (Ok(report), Some(s)) => {
                        let ops = wire::collect(&whole.module, &whole.sources).unwrap();
                        let expected = match emit {
                            StreamEmit::Ir => whole.ir().into_bytes(),
                            StreamEmit::WireBin => wire::binary(&ops),
                            StreamEmit::WireHex => wire::hex_lines(&ops).into_bytes(),
                            StreamEmit::WireDump => wire::dump(&whole.module, &ops).into_bytes(),
                            StreamEmit::Json => {
                                wire::json(whole.module.arch, &ops, &[]).into_bytes()
                            }
                        };
                        assert_eq!(
                            String::from_utf8_lossy(&s.output),
                            String::from_utf8_lossy(&expected),
                            "{} {emit:?}",
                            path.display()
                        );
                        assert_eq!(s.report.statistics, report.statistics, "{}", path.display());
                    }
                    (whole, streamed) => panic!(
                        "{}: module path {:?}, streaming {:?}",
                        path.display(),
                        whole.is_ok(),
                        streamed.is_some()
                    ),
                }
            }
            files += 1;
        }
        assert!(files >= 5);
    }
}
