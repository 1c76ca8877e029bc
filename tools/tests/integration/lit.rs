//! Runs the lit suite in `lit-tests/` as part of `cargo test`.
//!
//! The pinned Python tools (`lit`, the `filecheck` port) are installed from
//! `lit-tests/requirements.txt` into a virtualenv under the cargo target dir
//! (`<target>/lit-venv`), re-provisioned only when that file changes. The
//! suite then runs with the directory of the freshly built `apir-opt` first
//! on PATH. Needs only Python 3 (with `venv`) and access to PyPI (or a pip
//! configuration that points elsewhere) on first run.
//!
//! Environment:
//! - `FILECHECK=/path/to/FileCheck` runs the CHECK lines with LLVM's FileCheck
//!   instead of the port (read by `lit-tests/lit.cfg.py`);
//! - `LIT=/path/to/lit` uses an installed `lit` instead of provisioning the
//!   venv (no network needed; with `FILECHECK`, or the `filecheck` port on
//!   `PATH`);
//! - `LIT_OPTS` adds lit options (read by lit itself), e.g. `LIT_OPTS=-a`;
//! - `PYTHON` picks the interpreter that creates the venv (default `python3`).

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The cargo target dir holding `bin_dir` (`<target>/debug` or
/// `<target>/<triple>/debug`): the nearest ancestor with cargo's
/// `CACHEDIR.TAG`, else the parent of `bin_dir`.
fn target_dir(bin_dir: &Path) -> PathBuf {
    bin_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .or_else(|| bin_dir.parent())
        .unwrap_or(bin_dir)
        .to_path_buf()
}

fn venv_bin(venv: &Path, tool: &str) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join(format!("{tool}.exe"))
    } else {
        venv.join("bin").join(tool)
    }
}

fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{what} failed ({}): {cmd:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Creates `venv` and installs `requirements` into it, unless the stamp
/// file says this exact requirements text is installed already.
fn provision(venv: &Path, requirements: &Path) {
    let wanted = fs::read_to_string(requirements)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", requirements.display()));
    let stamp = venv.join("apir-requirements.stamp");
    let lit = venv_bin(venv, "lit");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) && lit.is_file() {
        return;
    }
    // Written to the process's stderr directly (not `eprintln!`, which
    // the test harness captures): the first run fetches packages from PyPI
    // and should say so while it waits.
    let _ = writeln!(
        std::io::stderr(),
        "lit_suite: installing lit and filecheck from PyPI into {} (first run only; needs network access; set LIT=/path/to/lit to skip)",
        venv.display()
    );
    if venv.exists() {
        fs::remove_dir_all(venv)
            .unwrap_or_else(|e| panic!("cannot remove stale {}: {e}", venv.display()));
    }
    let python = std::env::var_os("PYTHON")
        .unwrap_or_else(|| OsString::from(if cfg!(windows) { "python" } else { "python3" }));
    run(
        Command::new(&python).arg("-m").arg("venv").arg(venv),
        "creating the lit venv (on Debian/Ubuntu this needs the python3-venv package)",
    );
    // pip's own progress goes straight to the terminal.
    let status = Command::new(venv_bin(venv, "python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-r",
        ])
        .arg(requirements)
        .stdout(std::io::stderr())
        .stderr(std::io::stderr())
        .status()
        .unwrap_or_else(|e| panic!("cannot run pip: {e}"));
    assert!(
        status.success(),
        "installing lit-tests/requirements.txt failed ({status}); without network access set LIT=/path/to/lit (and FILECHECK) instead"
    );
    assert!(lit.is_file(), "pip did not install {}", lit.display());
    // Written last: an interrupted install is redone next time.
    fs::write(&stamp, &wanted).unwrap_or_else(|e| panic!("cannot write {}: {e}", stamp.display()));
}

#[test]
fn lit_suite() {
    let apir_opt = PathBuf::from(env!("CARGO_BIN_EXE_apir-opt"));
    let bin_dir = apir_opt
        .parent()
        .expect("binary has a directory")
        .to_path_buf();
    let target = target_dir(&bin_dir);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ is inside the workspace")
        .to_path_buf();
    let lit = match std::env::var_os("LIT") {
        Some(lit) => PathBuf::from(lit),
        None => {
            let venv = target.join("lit-venv");
            provision(&venv, &root.join("lit-tests").join("requirements.txt"));
            venv_bin(&venv, "lit")
        }
    };

    let mut path = vec![bin_dir.clone()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(path).expect("PATH entries contain no separator");

    // Scratch files (%t, Output/) of this run; a directory per process so
    // that two `cargo test` runs sharing a target dir do not clobber each
    // other. Removed after a passing run, kept for inspection otherwise.
    let exec_root = target
        .join("lit")
        .join(format!("run-{}", std::process::id()));

    // FILECHECK and LIT_OPTS pass through the inherited environment.
    let out = Command::new(&lit)
        .args(["-v", "lit-tests"])
        .current_dir(&root)
        .env("PATH", path)
        .env("APIR_LIT_EXEC_ROOT", &exec_root)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", lit.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "lit suite failed ({}); scratch files are in {}\n--- lit stdout ---\n{stdout}\n--- lit stderr ---\n{stderr}",
        out.status,
        exec_root.display()
    );
    let _ = fs::remove_dir_all(&exec_root);
    // Shown with `-- --nocapture`.
    println!("{stdout}{stderr}");
}

/// Every CHECK line means the same to the PyPI `filecheck` port and to
/// LLVM's FileCheck: LLVM reads `[[...]]` as a variable, so a literal `[[`
/// (an access pattern's first pair) must be written `{{\[\[}}`. Allowed:
/// `[[#...]]` (numeric expressions), `[[NAME]]` and `[[NAME:regex]]`.
#[test]
fn check_lines_are_portable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ is inside the workspace")
        .join("lit-tests");
    let mut bad = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("lit-tests is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "apir") {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap_or_default();
            for (n, line) in text.lines().enumerate() {
                let Some(check) = check_directive(line) else {
                    continue;
                };
                let mut rest = check;
                while let Some(i) = rest.find("[[") {
                    let after = &rest[i + 2..];
                    if !is_filecheck_variable(after) {
                        bad.push(format!("{}:{}: {line}", path.display(), n + 1));
                        break;
                    }
                    rest = after;
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "CHECK lines with a literal `[[` (write `{{{{\\[\\[}}}}`):\n{}",
        bad.join("\n")
    );
}

/// The pattern of a `// PREFIX:` / `// PREFIX-NEXT:` ... directive (not
/// a lit keyword such as `RUN:`).
fn check_directive(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("//")?.trim_start();
    let colon = rest.find(':')?;
    let head = &rest[..colon];
    let ok = !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && head.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        // lit's own keywords are not FileCheck patterns.
        && !["RUN", "REQUIRES", "UNSUPPORTED", "XFAIL", "ALLOW_RETRIES", "END"].contains(&head);
    ok.then(|| &rest[colon + 1..])
}

/// Whether text after `[[` starts a FileCheck variable or expression.
fn is_filecheck_variable(after: &str) -> bool {
    if after.starts_with('#') {
        return true;
    }
    let name_len = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(after.len());
    name_len > 0
        && after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && (after[name_len..].starts_with("]]") || after[name_len..].starts_with(':'))
}

/// The generated CHECK blocks (`// @generated-checks begin prefix=P`) are
/// what `tools/update-lit-checks.py` would write today: the script runs, and
/// a block edited by hand or left stale after a change that moves bytes is
/// reported with a diff.
#[test]
fn generated_check_lines_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let bins = Path::new(env!("CARGO_BIN_EXE_apir-opt"))
        .parent()
        .expect("binary directory");
    let out = run(
        Command::new("python3")
            .arg(root.join("tools/update-lit-checks.py"))
            .arg("--check")
            .arg("--bin-dir")
            .arg(bins)
            .arg(root.join("lit-tests")),
        "tools/update-lit-checks.py --check",
    );
    assert!(out.status.success());
}
