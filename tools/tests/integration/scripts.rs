//! The repository's shell scripts: each parses (`bash -n`), and the
//! profile-guided build stops with exit 2, before building anything, when
//! it has no `llvm-profdata` of rustc's LLVM (what `tools/bench.sh` reads
//! as "skip the PGO rows").

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ is inside the workspace")
        .to_path_buf()
}

#[test]
fn every_script_parses() {
    let root = root();
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(root.join("tools"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    scripts.push(root.join(".ci/run"));
    scripts.sort();
    assert!(
        scripts.iter().any(|p| p.ends_with("pgo-build.sh")),
        "{scripts:?}"
    );
    for script in &scripts {
        let out = Command::new("bash")
            .arg("-n")
            .arg(script)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[cfg(unix)]
#[test]
fn pgo_build_without_a_matching_llvm_profdata_stops_with_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // An `llvm-profdata` of an LLVM no rustc is built on.
    let fake = dir.path().join("llvm-profdata");
    std::fs::write(&fake, "#!/bin/sh\necho 'LLVM version 1.0.0'\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = dir.path().join("target");
    let out = Command::new("bash")
        .arg(root().join("tools/pgo-build.sh"))
        .env("LLVM_PROFDATA", &fake)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "LLVM_PROFDATA={} is not an llvm-profdata of LLVM",
            fake.display()
        )),
        "{stderr}"
    );
    assert!(!target.exists(), "nothing is built");
}
