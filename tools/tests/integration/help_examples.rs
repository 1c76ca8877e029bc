//! Every example in every tool's `--help` runs and succeeds, exactly as
//! printed: each line under `Examples:` is run by `sh` in a scratch
//! directory that holds a link to the repository's `examples/`, with the
//! tools on `PATH` and `HOME` pointing into the scratch directory (so an
//! example that installs into `~` writes there).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The tools and their binaries.
fn tools() -> [(&'static str, &'static str); 4] {
    [
        ("apir-opt", env!("CARGO_BIN_EXE_apir-opt")),
        ("apir-dis", env!("CARGO_BIN_EXE_apir-dis")),
        ("apir-gen", env!("CARGO_BIN_EXE_apir-gen")),
        ("apir-completions", env!("CARGO_BIN_EXE_apir-completions")),
    ]
}

/// The example command lines of a `--help` text: the indented lines after
/// `Examples:` up to the first blank line.
fn examples(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Examples:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn every_help_example_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tools crate sits in the workspace");
    let work: PathBuf = tempfile::tempdir().expect("a scratch directory").keep();
    std::os::unix::fs::symlink(root.join("examples"), work.join("examples"))
        .expect("link examples/");
    let bins = Path::new(env!("CARGO_BIN_EXE_apir-opt"))
        .parent()
        .expect("binaries live in a directory");
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for (tool, bin) in tools() {
        let out = Command::new(bin)
            .arg("--help")
            .output()
            .expect("run --help");
        assert!(out.status.success(), "{tool} --help failed");
        let help = String::from_utf8(out.stdout).expect("help is UTF-8");
        let lines = examples(&help);
        assert!(!lines.is_empty(), "{tool} --help shows no examples");
        for line in lines {
            assert!(
                line.split_whitespace().any(|w| w == tool),
                "{tool} example `{line}` does not run {tool}"
            );
            let out = Command::new("sh")
                .arg("-c")
                .arg(&line)
                .current_dir(&work)
                .env("PATH", &path)
                .env("HOME", &work)
                .output()
                .expect("run sh");
            ran += 1;
            let writes_files =
                line.contains(" -o ") || line.contains('>') || line.contains("-dir ");
            if !out.status.success() || out.stdout.is_empty() && !writes_files {
                failures.push(format!(
                    "{line}\n  exit {:?}, {} bytes on stdout\n  stderr: {}",
                    out.status.code(),
                    out.stdout.len(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        failures.is_empty(),
        "{} of {ran} examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(ran >= 15, "only {ran} examples");
}
