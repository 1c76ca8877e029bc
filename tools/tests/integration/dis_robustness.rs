//! apir-dis never panics on arbitrary bytes: random byte strings of every
//! length around the descriptor sizes, for every kind and arch, end with exit
//! code 0 (valid) or 1 (invalid or wrong length) and a message, never a
//! panic or a backtrace.

use std::io::Write;
use std::process::{Command, Stdio};

/// splitmix64: a deterministic stream of test bytes.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn random_bytes_never_panic_apir_dis() {
    let bin = env!("CARGO_BIN_EXE_apir-dis");
    let kinds = [
        "TENSOR1D",
        "TENSOR2D",
        "TENSOR3D",
        "TENSOR4D",
        "MEM_PATTERN1D",
        "MEM_PATTERN2D",
        "MEM_PATTERN3D",
        "MEM_PATTERN4D",
    ];
    let mut state = 7u64;
    let mut runs = 0;
    for (k, kind) in kinds.iter().enumerate() {
        for arch in ["v2", "v3", "v4"] {
            for len in [0usize, 7, 8, 12, 16, 20, 21] {
                let bytes: Vec<u8> = (0..len).map(|_| next(&mut state) as u8).collect();
                let mut child = Command::new(bin)
                    .args([
                        "--binary",
                        "--kind",
                        kind,
                        "--arch",
                        arch,
                        "--channels",
                        &((k * 17) % 130).to_string(),
                    ])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("apir-dis runs");
                // A usage error exits before reading: a closed pipe is fine.
                let _ = child.stdin.take().unwrap().write_all(&bytes);
                let out = child.wait_with_output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                // v4 has no MEM_PATTERN4D: a usage error, whatever the bytes.
                if (*kind, arch) == ("MEM_PATTERN4D", "v4") {
                    assert_eq!(code, Some(2), "{stderr}");
                    assert!(stderr.contains("does not exist on v4"), "{stderr}");
                    continue;
                }
                assert!(
                    matches!(code, Some(0) | Some(1)),
                    "{kind} {arch} {bytes:02x?}: exit {code:?}\n{stderr}"
                );
                assert!(
                    !stderr.contains("panicked") && !stderr.contains("internal error"),
                    "{stderr}"
                );
                let text = String::from_utf8_lossy(&out.stdout);
                // A right-length input is decoded and judged; any other is a clear error.
                if code == Some(0) {
                    assert!(text.ends_with("valid\n"), "{text}");
                } else if out.stdout.is_empty() {
                    assert!(stderr.contains("bytes, got"), "{stderr}");
                } else {
                    assert!(text.contains("invalid: +0x"), "{text}");
                }
                runs += 1;
            }
        }
    }
    // Every kind on every arch but MEM_PATTERN4D on v4.
    assert_eq!(runs, (8 * 3 - 1) * 7);
}

/// apir-opt's outputs cut short or damaged, and bytes that are none of
/// them, decoded without `--kind`: each is an input error (exit 1) with a
/// message, never a usage error, a panic, a backtrace or partial output;
/// the whole output decodes (exit 0).
#[test]
fn damaged_outputs_are_input_errors() {
    let opt = env!("CARGO_BIN_EXE_apir-opt");
    let dis = env!("CARGO_BIN_EXE_apir-dis");
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/batchnorm.apir");
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for emit in ["wire-bin", "json"] {
        let out = Command::new(opt)
            .args([example, "-p", "lower-to-wire", &format!("--emit={emit}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{emit}");
        let whole = out.stdout;
        assert!(whole.len() > 64, "{emit}");
        let ok = Command::new(dis)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(&whole)?;
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(
            ok.status.code(),
            Some(0),
            "{emit}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        // Cut after every one of the first 40 bytes, then at a few points
        // inside; one byte flipped in the framing.
        let cuts = (0..40).chain([whole.len() / 3, whole.len() / 2, whole.len() - 2]);
        for cut in cuts {
            cases.push((format!("{emit} cut at {cut}"), whole[..cut].to_vec()));
        }
        let mut flipped = whole.clone();
        flipped[2] ^= 0x5a;
        cases.push((format!("{emit} byte 2 flipped"), flipped));
    }
    let bin = Command::new(opt)
        .args([example, "-p", "lower-to-wire", "--emit=wire-bin"])
        .output()
        .unwrap()
        .stdout;
    // Cut exactly where a record ends, and just before the end marker:
    // the cuts a framing without an end marker read as a shorter stream.
    for end in record_ends(&bin) {
        cases.push((
            format!("wire-bin cut after the record ending at {end}"),
            bin[..end].to_vec(),
        ));
    }
    cases.push(("not UTF-8".into(), vec![0xff, 0xfe, 0x00, 0x81, 0x13]));
    cases.push(("prose".into(), b"hello, world\n".to_vec()));
    for (what, bytes) in cases {
        let path = dir.path().join("in.bin");
        std::fs::write(&path, &bytes).unwrap();
        let out = Command::new(dis).arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.starts_with("error: "), "{what}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
            "{what}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{what}: partial output");
        if what.starts_with("wire-bin cut after the record") {
            assert!(stderr.contains("it is cut short after"), "{what}: {stderr}");
        }
    }
}

/// `--json` over apir-opt's output is written a descriptor at a time, and
/// is what serde_json prints for the whole array, for no descriptors, one and
/// many descriptors; the text dump ends with the count.
#[test]
fn json_written_a_descriptor_at_a_time_is_the_whole_array() {
    let opt = env!("CARGO_BIN_EXE_apir-opt");
    let dis = env!("CARGO_BIN_EXE_apir-dis");
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/batchnorm.apir");
    let bin = dir.path().join("all.bin");
    let out = Command::new(opt)
        .args([example, "-p", "lower-to-wire", "--emit=wire-bin", "-o"])
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let whole = std::fs::read(&bin).unwrap();
    // The section header and an end marker counting no records: no
    // descriptors.
    let end_marker = |records: u64| [&b"APIRDONE"[..], &records.to_le_bytes()].concat();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, [&whole[..16], &end_marker(0)].concat()).unwrap();
    // The header, the first record and an end marker counting one: one
    // descriptor.
    let one = dir.path().join("one.bin");
    let first = &whole[..record_ends(&whole)[1]];
    std::fs::write(&one, [first, &end_marker(1)].concat()).unwrap();
    let mut seen = Vec::new();
    for path in [&empty, &one, &bin] {
        let out = Command::new(dis).arg(path).arg("--json").output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            text,
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
        );
        let n = v.as_array().unwrap().len();
        let dump = Command::new(dis).arg(path).output().unwrap();
        let dump = String::from_utf8(dump.stdout).unwrap();
        let plural = if n == 1 { "" } else { "s" };
        assert!(
            dump.ends_with(&format!("{n} descriptor{plural}, 0 invalid\n")),
            "{dump}"
        );
        assert_eq!(
            dump.matches("\n// op ").count() + usize::from(dump.starts_with("// op ")),
            n
        );
        seen.push(n);
    }
    assert_eq!(seen[..2], [0, 1], "{seen:?}");
    assert!(seen[2] > 1, "{seen:?}");
}

/// Where a whole wire-bin stream's records end, read from its framing as
/// the format documents it, not through the decoder under test: a 16-byte
/// header, then per record 4 + 1 + 1 + 1 bytes, a 2-byte role length and
/// the role, a 2-byte descriptor length and the descriptor, then the
/// 16-byte end marker (`APIRDONE`, the record count as 8 bytes). The first
/// end is the header's; the last is where the end marker starts.
fn record_ends(bin: &[u8]) -> Vec<usize> {
    let records_end = bin.len() - 16;
    let mut ends = vec![16usize];
    let mut at = 16;
    while at < records_end {
        let role = u16::from_le_bytes([bin[at + 7], bin[at + 8]]) as usize;
        let len_at = at + 9 + role;
        let n = u16::from_le_bytes([bin[len_at], bin[len_at + 1]]) as usize;
        at = len_at + 2 + n;
        ends.push(at);
    }
    assert_eq!(
        at, records_end,
        "the records do not end where the end marker starts"
    );
    assert_eq!(bin[at..at + 8], *b"APIRDONE");
    let count = u64::from_le_bytes(bin[at + 8..].try_into().unwrap());
    assert_eq!(count as usize, ends.len() - 1, "the end marker's count");
    ends
}

/// What `apir-opt -p lower-to-wire EMIT` writes for one `isa.memset` of
/// role `dst`, its input written in `dir`.
fn memset_lowered(dir: &std::path::Path, emit: &str) -> Vec<u8> {
    let ir = dir.join("m.apir");
    std::fs::write(
        &ir,
        "module attributes {arch = \"v2\"} {\n  %a = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %a[[64, 128], [1, 64]]\n}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_apir-opt"))
        .args([ir.to_str().unwrap(), "-p", "lower-to-wire", emit])
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

/// Control characters from the input (a role name in wire-bin) or the
/// command line (a file name) reach neither stdout nor stderr: they are
/// shown as `?`, as diagnostics show them.
#[test]
fn control_characters_are_never_written_raw() {
    let opt = env!("CARGO_BIN_EXE_apir-opt");
    let dis = env!("CARGO_BIN_EXE_apir-dis");
    let dir = tempfile::tempdir().unwrap();
    let mut bin = memset_lowered(dir.path(), "--emit=wire-bin");
    let at = bin.windows(3).position(|w| w == b"dst").expect("the role");
    bin[at..at + 3].copy_from_slice(b"\x1b\x07t");
    let file = dir.path().join("m.bin");
    std::fs::write(&file, &bin).unwrap();
    let out = Command::new(dis).arg(&file).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("// op 0 ??t "), "{text}");
    assert!(!out.stdout.iter().any(|&b| b == 0x1b || b == 0x07));
    for tool in [opt, dis] {
        let out = Command::new(tool).arg("no\x1b[31msuch").output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot read `no?[31msuch`"), "{err}");
        assert!(!out.stderr.contains(&0x1b), "{err}");
    }
}

/// A line end in a role name (from a `wire-bin` record or a JSON
/// document) does not forge lines of `apir-dis`'s report: the role is
/// shown on its header's line as diagnostics show a file name (`\n`,
/// `\r`, other control characters as `?`, a bidirectional formatting
/// character as U+FFFD), so the report keeps one header per descriptor
/// and its own summary. `--json` keeps the role as it is.
#[test]
fn line_ends_in_a_role_do_not_forge_lines_of_the_report() {
    let dis = env!("CARGO_BIN_EXE_apir-dis");
    let dir = tempfile::tempdir().unwrap();
    let emit = |what: &str| memset_lowered(dir.path(), what);
    let role = "dst\nvalid\n1 descriptor, 0 invalid\r\n\u{202e}x\ty";
    let shown = "dst\\nvalid\\n1 descriptor, 0 invalid\\r\\n\u{fffd}x\ty";
    // wire-bin: the record's role (after its 2-byte length) replaced, and
    // 200 channels (the byte before the length), which makes it invalid.
    let mut bin = emit("--emit=wire-bin");
    let at = bin.windows(3).position(|w| w == b"dst").expect("the role");
    assert_eq!(bin[at - 2..at], 3u16.to_le_bytes());
    bin[at - 3] = 200;
    let mut record = (role.len() as u16).to_le_bytes().to_vec();
    record.extend_from_slice(role.as_bytes());
    bin.splice(at - 2..at + 3, record);
    // JSON: the operand's role replaced, its channels left valid.
    let mut doc: serde_json::Value = serde_json::from_slice(&emit("--emit=json")).unwrap();
    doc["ops"][0]["operands"][0]["role"] = role.into();
    let json = serde_json::to_vec(&doc).unwrap();
    for (what, input, code, summary) in [
        ("bin", bin, 1, "1 descriptor, 1 invalid"),
        ("json", json, 0, "1 descriptor, 0 invalid"),
    ] {
        let file = dir.path().join(format!("m.{what}"));
        std::fs::write(&file, &input).unwrap();
        let out = Command::new(dis).arg(&file).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(code), "{what}: {text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(&format!("// op 0 {shown} (")),
            "{what}: {text}"
        );
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("// op")).count(),
            1,
            "{what}: {text}"
        );
        let count = |want: &str| lines.iter().filter(|l| l.starts_with(want)).count();
        assert_eq!(count("valid"), usize::from(code == 0), "{what}: {text}");
        assert_eq!(count("1 descriptor"), 1, "{what}: {text}");
        assert_eq!(lines.last(), Some(&summary), "{what}: {text}");
        assert!(!text.contains(['\r', '\u{202e}']), "{what}: {text:?}");
        // The JSON output holds the role itself (serde_json escapes it).
        let out = Command::new(dis).arg(&file).arg("--json").output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{what}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v[0]["role"], role, "{what}");
    }
}

/// `--emit=wire-dump` shows the input's file name in its `// op N ... @
/// file:line:col` headers as diagnostics show it (a line end as `\n`, an
/// escape as `?`): streamed or not, one line per header, and nothing from
/// the name reaches the terminal. The JSON `loc` keeps the name itself.
#[test]
fn a_file_name_in_wire_dump_headers_is_shown_as_diagnostics_show_it() {
    let opt = env!("CARGO_BIN_EXE_apir-opt");
    let dir = tempfile::tempdir().unwrap();
    let name = "we\nird\u{1b}[2J\r.apir";
    let ir = dir.path().join(name);
    std::fs::write(
        &ir,
        "module attributes {arch = \"v2\"} {\n  %a = mem.sbuf {partition = 0, byte = 0} : tile<128x64xf32>\n  isa.memset dst = %a[[64, 128], [1, 64]]\n}\n",
    )
    .unwrap();
    let shown = format!("{}/we\\nird?[2J\\r.apir", dir.path().display());
    // Streamed, and whole-module (`--split-input-file` does not stream).
    for extra in [None, Some("--split-input-file")] {
        let out = Command::new(opt)
            .arg(&ir)
            .args(["-p", "lower-to-wire", "--emit=wire-dump"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{extra:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let header =
            format!("// op 0 isa.memset (Memset) dst MEM_PATTERN4D channels=128 @ {shown}:3:3");
        assert_eq!(
            text.lines().next(),
            Some(header.as_str()),
            "{extra:?}: {text}"
        );
        assert!(
            text.lines().skip(1).all(|l| l.starts_with("+0x")),
            "{extra:?}: {text}"
        );
        assert!(!text.contains(['\u{1b}', '\r']), "{extra:?}: {text:?}");
    }
    let out = Command::new(opt)
        .arg(&ir)
        .args(["-p", "lower-to-wire", "--emit=json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ops"][0]["loc"], format!("{}:3:3", ir.display()));
}

/// `apir-opt -p lower-to-wire --emit=wire-bin` of the batchnorm example:
/// one section.
fn batchnorm_wire_bin() -> Vec<u8> {
    batchnorm_lowered("--emit=wire-bin")
}

/// `apir-opt -p lower-to-wire EMIT` of the batchnorm example.
fn batchnorm_lowered(emit: &str) -> Vec<u8> {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/batchnorm.apir");
    let out = Command::new(env!("CARGO_BIN_EXE_apir-opt"))
        .args([example, "-p", "lower-to-wire", emit])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    out.stdout
}

/// `apir-dis ARGS` fed `input` ([`super::spawn_fed`]).
fn fed_dis(
    args: &[&str],
    input: &[u8],
) -> (
    std::process::Child,
    std::thread::JoinHandle<std::io::Result<()>>,
) {
    super::spawn_fed(env!("CARGO_BIN_EXE_apir-dis"), args, input)
}

/// A `wire-bin` stream many read chunks long (here 6,000 sections, fed
/// through a pipe) is decoded whole: every descriptor of every section,
/// numbered by its section; the same stream cut one byte before its end,
/// or with a byte of its last section damaged, is an input error with no
/// partial output, although every section before it was decoded.
#[test]
fn a_long_wire_bin_stream_is_decoded_whole_and_a_late_damage_fails_it() {
    let one = batchnorm_wire_bin();
    let per_section = record_ends(&one).len() - 1;
    let sections = 6_000;
    let long = one.repeat(sections);
    assert!(long.len() > 1 << 20, "{} bytes", long.len());
    let run = |bytes: &[u8]| {
        let (child, feeder) = fed_dis(&[], bytes);
        let out = child.wait_with_output().unwrap();
        let _ = feeder.join().unwrap();
        out
    };
    let out = run(&long);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let n = per_section * sections;
    assert!(
        text.ends_with(&format!("{n} descriptors, 0 invalid\n")),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    assert_eq!(text.matches("// op ").count(), n);
    // Offsets are the stream's: the last section's first record follows
    // its header.
    let last = long.len() - one.len();
    assert!(text.contains(&format!("(section {}, byte {},", sections - 1, last + 16)));
    let mut damaged = long.clone();
    damaged[last + 20] = 0x7f;
    for (what, bytes) in [("cut", &long[..long.len() - 1]), ("damaged", &damaged[..])] {
        let out = run(bytes);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.starts_with("error: `<stdin>`: "), "{what}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "byte {}",
                if what == "cut" {
                    long.len() - 16
                } else {
                    last + 16
                }
            )),
            "{what}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{what}: partial output");
    }
}

/// `apir-dis` holds no more of a `wire-bin` stream than a record and a
/// read, no more of `wire-hex` text than a line and a read, and no more of
/// JSON than an op and a run of documents alike (standard input is spooled
/// to a temporary file, to be read again). Each input below is a few
/// thousand descriptors (a few MB of output, more than a pipe holds)
/// followed by 16 to 40 MiB that decode to nothing: empty sections, comment
/// lines, ops without operands, documents without ops. Its peak memory,
/// read once every pass is over (when the child, blocked on writing its
/// output, has written its first byte), stays below 16 MiB, as no reader
/// of the whole input could.
#[cfg(target_os = "linux")]
#[test]
fn inputs_are_not_held_whole() {
    use std::io::Read;
    let one = batchnorm_wire_bin();
    // The section header, and an end marker counting no records.
    let empty = [&one[..16], b"APIRDONE", &0u64.to_le_bytes()].concat();
    let bin = [one.repeat(500), empty.repeat((40 << 20) / empty.len())].concat();
    let line = "0 dst MEM_PATTERN4D 128 0000000201000100010001000002010001000100\n";
    let hex = [
        line.repeat(3000),
        "// nothing to decode\n".repeat((40 << 20) / 21),
    ]
    .concat()
    .into_bytes();
    let op = r#"{"index": 0, "operands": [{"role": "dst", "kind": "MEM_PATTERN4D", "dtype": "f32", "channels": 128, "bytes": "0000000201000100010001000002010001000100"}]}"#;
    let ops = vec![op; 3000].join(", ");
    let empty_op = r#", {"index": 1, "operands": []}"#;
    let json = format!(
        r#"{{"arch": "v2", "ops": [{ops}{}]}}"#,
        empty_op.repeat((16 << 20) / empty_op.len())
    );
    let empty_doc = r#", {"arch": "v2", "ops": []}"#;
    let docs = format!(
        r#"[{{"arch": "v2", "ops": [{ops}]}}{}]"#,
        empty_doc.repeat((16 << 20) / empty_doc.len())
    );
    let inputs: [(&[u8], &[&str], usize); 4] = [
        (&bin, &[], 500 * (record_ends(&one).len() - 1)),
        (&hex, &["--arch", "v2"], 3000),
        (json.as_bytes(), &[], 3000),
        (docs.as_bytes(), &[], 3000),
    ];
    for (input, args, n) in inputs {
        let (mut child, feeder) = fed_dis(args, input);
        // The output is written once the input is read and decoded: its
        // first byte says every pass is over, and the rest keeps the child
        // alive, blocked on the pipe, until it is read.
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        stdout.read_exact(&mut first).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let peak_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        let mut text = first.to_vec();
        stdout.read_to_end(&mut text).unwrap();
        feeder.join().unwrap().unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.len() > 1 << 20,
            "{args:?}: {} bytes of output",
            text.len()
        );
        assert!(
            text.ends_with(&format!("{n} descriptors, 0 invalid\n")),
            "{args:?}: {}",
            &text[text.len().saturating_sub(200)..]
        );
        assert!(
            peak_kib < 16 << 10,
            "{args:?}: {peak_kib} KiB at its peak for a {} MiB input",
            input.len() >> 20
        );
    }
}

/// A field of apir-opt's JSON that `apir-dis` cannot use is named where it
/// is (document, position in `ops`, op index, operand) with the value
/// found and what was expected, for a field missing, of the wrong type,
/// out of range or of an unknown name, in an op deep in the document.
#[test]
fn json_field_errors_say_where_and_what() {
    let doc: serde_json::Value = serde_json::from_slice(&batchnorm_lowered("--emit=json")).unwrap();
    let ops = doc["ops"].as_array().unwrap().len();
    assert!(ops >= 3, "{ops} ops");
    let (pos, operand) = (ops - 1, 1);
    let index = doc["ops"][pos]["index"].as_u64().unwrap();
    let at = format!("document 0, ops[{pos}] (op {index}), operands[{operand}]");
    let kinds = "one of TENSOR1D, TENSOR2D, TENSOR3D, TENSOR4D, MEM_PATTERN1D, MEM_PATTERN2D, MEM_PATTERN3D, MEM_PATTERN4D";
    let cases: Vec<(serde_json::Value, String)> = vec![
        (
            serde_json::json!(4294967296u64),
            format!("{at}: `channels` is 4294967296; expected a count from 0 to 4294967295"),
        ),
        (
            serde_json::json!(-1),
            format!("{at}: `channels` is -1; expected a count from 0 to 4294967295"),
        ),
        (
            serde_json::json!("TENSOR5D"),
            format!("{at}: `kind` is \"TENSOR5D\"; expected {kinds}"),
        ),
        (
            serde_json::Value::Null,
            format!("{at}: `kind` is missing; expected {kinds}"),
        ),
        (
            serde_json::json!("f64"),
            format!("{at}: `dtype` is \"f64\"; expected one of u8, i8, u16, i16, f16, bf16, f8e4m3, f8e5m2, i32, u32, f32"),
        ),
        (
            serde_json::json!(["a very long array of strings", "that is shortened"]),
            format!("{at}: `bytes` is [\"a very long array of strings\",\"that is...; expected a string of hex digits"),
        ),
    ];
    let fields = ["channels", "channels", "kind", "kind", "dtype", "bytes"];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.json");
    // `apir-dis` on the edited document: it fails (exit 1, no output),
    // and its stderr.
    let dis_error = |edited: &serde_json::Value| -> String {
        std::fs::write(&path, serde_json::to_vec_pretty(edited).unwrap()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_apir-dis"))
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(out.stdout.is_empty());
        stderr
    };
    for ((value, want), field) in cases.into_iter().zip(fields) {
        let mut edited = doc.clone();
        let o = edited["ops"][pos]["operands"][operand]
            .as_object_mut()
            .unwrap();
        if value.is_null() {
            o.remove(field);
        } else {
            o.insert(field.into(), value);
        }
        assert_eq!(
            dis_error(&edited),
            format!("error: `{}`: {want}", path.display()),
            "{field}"
        );
    }
    // The op's own fields, and the document's.
    for (edit, want) in [
        (
            serde_json::json!({"index": -5}),
            format!("document 0, ops[{pos}]: `index` is -5; expected an op index (0 or more)"),
        ),
        (
            serde_json::json!({"arch": "v9"}),
            "document 0: `arch` is \"v9\"; expected one of \"v2\", \"v3\", \"v4\"".to_string(),
        ),
        // A control character is shown escaped, a long name cut short.
        (
            serde_json::json!({"arch": "v\u{1b}[2J"}),
            "document 0: `arch` is \"v\\u001b[2J\"; expected one of \"v2\", \"v3\", \"v4\""
                .to_string(),
        ),
        (
            serde_json::json!({"arch": "v".repeat(100)}),
            format!(
                "document 0: `arch` is \"{}...; expected one of \"v2\", \"v3\", \"v4\"",
                "v".repeat(39)
            ),
        ),
        (
            serde_json::json!({"arch": [2]}),
            "document 0: `arch` is not a string; expected one of \"v2\", \"v3\", \"v4\""
                .to_string(),
        ),
    ] {
        let mut edited = doc.clone();
        let (key, value) = edit.as_object().unwrap().iter().next().unwrap();
        if key == "index" {
            edited["ops"][pos]["index"] = value.clone();
        } else {
            edited[key] = value.clone();
        }
        assert_eq!(
            dis_error(&edited),
            format!("error: `{}`: {want}", path.display())
        );
    }
}
