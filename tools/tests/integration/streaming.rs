//! `apir-opt` streams files and standard input: the same output and
//! diagnostics as when the input is read whole, standard input read again
//! (from its spool) for the whole-module path after an error found late,
//! no partial output on stdout or `-o` when the run fails.

use apir_ir::printer::print_module;
use apir_ir::target::Arch;
use apir_synth::{generate, GenOptions};
use apir_tools::{OutputFile, ReadAgain, SpillBuffer, Spooled};
use std::io::{Read, Write};
use std::process::Command;

const OPT: &str = env!("CARGO_BIN_EXE_apir-opt");

/// A module of a few MiB: several windows and parts.
fn module() -> String {
    print_module(&generate(&GenOptions {
        ops: 30_000,
        seed: 11,
        arch: Arch::V2,
        distinct_shapes: None,
        kernels: 3,
    }))
}

/// Runs apir-opt with `args`, `stdin` on its standard input.
fn opt(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let (child, feeder) = super::spawn_fed(OPT, args, stdin);
    let out = child.wait_with_output().unwrap();
    // A run that stops reading early fails the feeding: what it printed
    // is the result.
    let _ = feeder.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// stdin and a file give the same bytes, on one thread and several.
#[test]
fn stdin_and_files_stream_the_same_bytes() {
    let text = module();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.apir");
    std::fs::write(&file, &text).unwrap();
    let path = file.to_str().unwrap();
    for emit in ["--emit=wire-bin", "--emit=ir", "--emit=wire-hex"] {
        let (code, want, err) = opt(&[path, "-p", "lower-to-wire", emit, "--threads", "1"], b"");
        assert_eq!(code, 0, "{err}");
        for threads in ["1", "2", "3"] {
            let (code, got, err) = opt(
                &["-p", "lower-to-wire", emit, "--threads", threads],
                text.as_bytes(),
            );
            assert_eq!(code, 0, "{err}");
            assert!(
                got == want,
                "{emit} on {threads} threads from stdin differs"
            );
        }
    }
}

/// An error near the end of stdin: the whole-module path reads the input
/// again from the spool and reports exactly what it reports for the file
/// (but for the name), and stdout stays empty.
#[test]
fn a_late_error_on_stdin_is_reported_as_for_the_whole_input() {
    let mut text = module();
    let at = text.len() - 200;
    let line = text[..at].rfind('\n').unwrap() + 1;
    text.insert_str(line, "  isa.memset dst = %nope[[64, 128], [1, 64]]\n");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.apir");
    std::fs::write(&file, &text).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, from_file) = opt(&[path, "-p", "lower-to-wire", "--emit=wire-bin"], b"");
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(
        from_file.contains("undefined buffer `%nope`"),
        "{from_file}"
    );
    for threads in ["1", "2"] {
        let (code, out, from_stdin) = opt(
            &[
                "-p",
                "lower-to-wire",
                "--emit=wire-bin",
                "--threads",
                threads,
            ],
            text.as_bytes(),
        );
        assert_eq!(code, 1);
        assert!(out.is_empty(), "partial output on stdout");
        assert_eq!(from_stdin, from_file.replace(path, "<stdin>"));
    }
    // `-o` is not written.
    let dest = dir.path().join("out.bin");
    let (code, _, _) = opt(
        &[
            path,
            "-p",
            "lower-to-wire",
            "--emit=wire-bin",
            "-o",
            dest.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 1);
    assert!(!dest.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".apir-out-"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind");
}

/// The spool gives back everything read, then the rest, after a rewind,
/// as often as asked, and from any offset.
#[test]
fn the_spool_reads_again() {
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let mut s = Spooled::new(&data[..]);
    let mut head = vec![0; 12_345];
    s.read_exact(&mut head).unwrap();
    assert_eq!(head, data[..12_345]);
    for _ in 0..2 {
        s.rewind().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        assert!(all == data);
    }
    // And from any offset on (where a diagnosis picks up).
    for at in [0, 1, 12_345, 99_999, 100_000] {
        s.seek_to(at as u64).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest == data[at..], "from {at}");
    }
    // Asked before the input was read to its end, it reads the rest into
    // the spool first.
    let mut s = Spooled::new(&data[..]);
    s.read_exact(&mut head).unwrap();
    s.seek_to(50_000).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest == data[50_000..]);
}

/// A spill buffer keeps its bytes whatever their size, and starts over.
#[test]
fn the_spill_buffer_holds_any_size() {
    use apir_compiler::driver::OutputSink;
    let chunk: Vec<u8> = (0..1_000_003u32).map(|i| (i % 253) as u8).collect();
    let mut b = SpillBuffer::default();
    b.write_all(b"discarded").unwrap();
    b.restart().unwrap();
    let mut want = Vec::new();
    for _ in 0..9 {
        b.write_all(&chunk).unwrap();
        want.extend_from_slice(&chunk);
    }
    assert!(b.into_bytes().unwrap() == want);
    // An output file that starts over holds only what came after.
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("o.bin");
    let mut f = OutputFile::create(&dest).unwrap();
    f.write_all(b"first attempt").unwrap();
    f.restart().unwrap();
    f.write_all(b"second").unwrap();
    f.commit().unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"second");
}

/// A path that is a pipe (`<(...)`, a FIFO) cannot seek: it is spooled as
/// standard input is, so a run that reads its input again (to render a
/// warning's line, or for the whole-module path after a late error) gives
/// what the same bytes in a regular file give, not a read error.
#[test]
fn a_pipe_named_as_the_input_is_read_again_from_its_spool() {
    let mut late_error = module();
    let at = late_error.len() - 200;
    let line = late_error[..at].rfind('\n').unwrap() + 1;
    late_error.insert_str(line, "  isa.memset dst = %nope[[64, 128], [1, 64]]\n");
    // An unknown attribute (a warning) on the first op without any.
    let warning: String = {
        let mut done = false;
        module()
            .lines()
            .map(|l| {
                let mut l = l.to_string();
                if !done && l.starts_with("  isa.") && !l.ends_with('}') {
                    l.push_str(" {colour = 1}");
                    done = true;
                }
                l + "\n"
            })
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("late-error", &late_error), ("warning", &warning)] {
        let file = dir.path().join(format!("{name}.apir"));
        std::fs::write(&file, text).unwrap();
        let path = file.to_str().unwrap();
        let args = ["-p", "lower-to-wire", "--emit=wire-hex"];
        let (code, out, err) = opt(&[&[path][..], &args].concat(), b"");
        assert!(err.contains(&format!("{name}.apir:")), "{name}: {err}");
        let fifo = dir.path().join(format!("{name}.fifo"));
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let feeder = {
            let (fifo, text) = (fifo.clone(), text.clone());
            std::thread::spawn(move || std::fs::write(fifo, text))
        };
        let fifo_path = fifo.to_str().unwrap();
        let (fcode, fout, ferr) = opt(&[&[fifo_path][..], &args].concat(), b"");
        feeder.join().unwrap().unwrap();
        assert_eq!(fcode, code, "{name}: {ferr}");
        assert!(fout == out, "{name}: the outputs differ");
        assert_eq!(ferr.replace(fifo_path, path), err, "{name}");
    }
}

/// Names millions of characters long (an op name, a buffer name): exit 1
/// with a diagnostic of a few lines, whose message keeps the name's ends
/// and says how much it leaves out; on stdin and from a file, streamed and
/// on the whole-module path. (That no suggestion is looked for among names
/// of other lengths is `diag`'s unit tests' to check.)
#[test]
fn very_long_names_get_short_diagnostics() {
    let long = "n".repeat(4 << 20);
    let head = "module attributes {arch = \"v2\"} {\n  %sa = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n";
    let dir = tempfile::tempdir().unwrap();
    for (line, message) in [
        (
            format!("  isa.{long} dst = %sa[[64, 128], [1, 64]]\n"),
            "error: unknown op `isa.nnn",
        ),
        (
            format!("  isa.memset dst = %{long}[[64, 128], [1, 64]]\n"),
            "error: use of undefined buffer `%nnn",
        ),
    ] {
        let text = format!("{head}{line}}}\n");
        let file = dir.path().join("m.apir");
        std::fs::write(&file, &text).unwrap();
        let path = file.to_str().unwrap();
        for (args, stdin) in [
            (
                vec![path, "-p", "lower-to-wire", "--emit=wire-bin"],
                &b""[..],
            ),
            (
                vec!["-", "-p", "lower-to-wire", "--emit=wire-bin"],
                text.as_bytes(),
            ),
            (vec![path, "-p", "all", "--emit=wire-bin"], &b""[..]),
        ] {
            let (code, out, err) = opt(&args, stdin);
            assert_eq!(code, 1, "{args:?}");
            assert!(out.is_empty(), "{args:?}");
            assert!(
                err.starts_with(message),
                "{args:?}: {}",
                &err[..err.len().min(200)]
            );
            assert!(err.contains(" bytes]…"), "{args:?}");
            assert!(
                err.len() < 8 << 10,
                "{args:?}: {} bytes of diagnostics",
                err.len()
            );
        }
    }
}
