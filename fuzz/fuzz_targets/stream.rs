//! Streaming against reading whole: arbitrary text through `lower-to-wire`
//! (or no pipeline) streamed from a reader in small windows and reads, on one
//! to three threads, gives exactly the bytes, warnings and statistics that
//! the same text read whole gives. A streamed run may stop without an
//! answer (`GiveUp`: the caller runs the whole-module path; `Retry`: it
//! streams again on one thread; `Uncut`: again without cuts at long blank
//! runs), but it never succeeds where the whole text fails; where it stops
//! at an error, a diagnosis from the start and one from the part that
//! failed find the whole text's diagnostics or nothing, never an error the
//! whole text does not have.
#![no_main]

use apir_compiler::chunked::{
    diagnose, diagnose_from, run_chunked_named, ChunkError, ChunkOptions,
};
use apir_compiler::driver::{self, Emit, Input, Options};
use apir_compiler::emit::wire::JsonWriter;
use apir_compiler::stream::{StreamEmit, StreamOptions};
use apir_compiler::{Pipeline, Registry};
use apir_ir::FileId;
use libfuzzer_sys::fuzz_target;
use std::io::Read;

/// Hands out at most `step` bytes per read, and half that every third
/// read, as a pipe may.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
    reads: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads += 1;
        let step = if self.reads.is_multiple_of(3) {
            self.step.div_ceil(2)
        } else {
            self.step
        };
        let n = step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

const EMITS: [(StreamEmit, Emit); 5] = [
    (StreamEmit::WireBin, Emit::WireBin),
    (StreamEmit::Ir, Emit::Ir),
    (StreamEmit::WireDump, Emit::WireDump),
    (StreamEmit::WireHex, Emit::WireHex),
    (StreamEmit::Json, Emit::Json),
];

fuzz_target!(|data: &[u8]| {
    // Three bytes of settings, then the text.
    let [a, b, c, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let window = 8 + usize::from(*a) * 4;
    let step = 1 + usize::from(*b);
    let threads = 1 + usize::from(c & 3) % 3;
    let (semit, emit) = EMITS[usize::from(c >> 2) % EMITS.len()];
    let pipeline = if c & 0x40 != 0 || semit != StreamEmit::Ir {
        "lower-to-wire"
    } else {
        ""
    };
    let whole = driver::run(
        Options {
            pipeline: pipeline.into(),
            emit,
            statistics: true,
            threads: 1,
            ..Options::default()
        },
        Input::text("fuzz.apir", text),
    );
    let registry = Registry::builtin();
    let parsed = Pipeline::parse(pipeline).expect("a named pipeline parses");
    let build = || registry.build(&parsed).ok();
    let opts = ChunkOptions {
        window_bytes: window,
        in_flight: threads + 1,
        cut_long_runs: c & 0x80 != 0,
        ..ChunkOptions::new(StreamOptions {
            threads,
            ..StreamOptions::new(semit)
        })
    };
    let mut out = Vec::new();
    let mut input = Trickle {
        data: text.as_bytes(),
        step,
        reads: 0,
    };
    match run_chunked_named(&mut input, "fuzz.apir", &mut out, &build, opts) {
        Ok(streamed) => {
            assert!(
                whole.success(),
                "streamed run succeeded where the whole text fails:\n{}",
                whole.render_diagnostics()
            );
            // The run's warnings, which the caller renders (and a limit's
            // closing note, which it adds): the whole text's.
            let warnings = if whole.omitted.is_empty() {
                assert_eq!(
                    streamed.report.warnings, whole.diagnostics,
                    "streamed warnings differ from the whole text's"
                );
                &streamed.report.warnings
            } else {
                &whole.diagnostics
            };
            if semit == StreamEmit::Json {
                // The caller ends the document with them.
                let d = driver::json_diagnostics(&whole.sources, warnings);
                out.extend_from_slice(JsonWriter::after(streamed.ops).tail(&d).as_bytes());
            }
            assert!(
                out == whole.output,
                "{emit:?}, window {window}, reads of {step}, {threads} threads: output differs"
            );
            assert_eq!(streamed.bytes, text.len());
            assert_eq!(streamed.report.statistics_text(), whole.report);
        }
        // An error met: what the driver does next is a diagnosis, from the
        // start or from the part that failed, which must find the whole
        // text's diagnostics or nothing (then the input streams again on
        // one thread). An op that a part's end cuts short may fail to
        // verify, but never makes a diagnosis report an error the whole
        // text does not have.
        Err(ChunkError::Invalid(phase, resume)) => {
            let diagnose_opts = ChunkOptions {
                window_bytes: window,
                ..ChunkOptions::new(StreamOptions::new(semit))
            };
            let mut from_start = Trickle {
                data: text.as_bytes(),
                step,
                reads: 0,
            };
            let mut found = vec![diagnose(
                &mut from_start,
                FileId(0),
                0,
                phase,
                &build,
                diagnose_opts,
            )];
            if let Some(from) = resume {
                let mut rest = Trickle {
                    data: &text.as_bytes()[from.offset()..],
                    step,
                    reads: 0,
                };
                found.push(diagnose_from(&mut rest, *from, phase, diagnose_opts));
            }
            for (k, f) in found.into_iter().enumerate() {
                let what = if k == 0 {
                    "from the start"
                } else {
                    "from the part"
                };
                match f {
                    Ok(Some(f)) => {
                        assert!(
                            !whole.success(),
                            "a diagnosis {what} finds an error the whole text does not have: {:?}",
                            f.diagnostics.kept()
                        );
                        // An emit error is worded by the caller, and a
                        // limit's closing note too.
                        if f.emit.is_none() && whole.omitted.is_empty() {
                            assert_eq!(
                                f.diagnostics.kept(),
                                &whole.diagnostics[..],
                                "a diagnosis {what} finds other diagnostics than the whole text"
                            );
                        }
                    }
                    Ok(None) | Err(ChunkError::GiveUp | ChunkError::Uncut) => {}
                    Err(e) => panic!("a diagnosis {what} failed: {e:?}"),
                }
            }
        }
        Err(ChunkError::GiveUp | ChunkError::Retry | ChunkError::Uncut) => {}
        Err(ChunkError::Read(e) | ChunkError::Write(e)) => panic!("in-memory I/O failed: {e}"),
    }
});
