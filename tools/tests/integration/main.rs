//! The integration tests of `apir-tools`, in one test binary (one link for
//! the crate instead of one per file): the tools run as processes, the lit
//! suite (`lit_suite`), the manifest checks and the shell scripts.

mod dis_robustness;
mod help_examples;
mod lit;
mod manifest;
mod output_files;
mod scripts;
mod streaming;

/// `bin ARGS` with its standard output and error piped and `input` written
/// to its standard input, in pieces of 4,093 bytes, by a thread (whose
/// result is whether all was written: a child that stops reading ends
/// it with an error).
fn spawn_fed(
    bin: &str,
    args: &[&str],
    input: &[u8],
) -> (
    std::process::Child,
    std::thread::JoinHandle<std::io::Result<()>>,
) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        input
            .chunks(4093)
            .try_for_each(|piece| stdin.write_all(piece))
    });
    (child, feeder)
}
