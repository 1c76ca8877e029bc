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
