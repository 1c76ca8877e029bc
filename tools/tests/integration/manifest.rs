//! The workspace's declared `rust-version` is true: every crate inherits
//! it, and it is no lower than the highest `rust-version` among the locked
//! dependencies (read from `cargo metadata`, offline).
//!
//! The metadata is filtered to the host platform: a build downloads only
//! the packages its platform needs, and an unfiltered `cargo metadata
//! --offline` fails on the first package locked for another platform only
//! (`wasm-bindgen`'s, `winapi`'s) that is not in the local registry cache.

use std::process::Command;

/// `major.minor.patch`, a missing part read as 0 (`1.95` is `1.95.0`).
fn version(v: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.resize(parts.len().max(3), 0);
    parts
}

/// The host's target triple, as `rustc -vV` prints it.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

#[test]
fn rust_version_covers_every_locked_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ is inside the workspace");
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut declared: Option<String> = None;
    let mut highest = (Vec::new(), String::new());
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().unwrap_or_default();
        let rv = p["rust_version"].as_str();
        if members.contains(&p["id"].as_str().unwrap_or_default()) {
            let rv = rv.unwrap_or_else(|| panic!("crate {name} declares no rust-version"));
            match &declared {
                None => declared = Some(rv.to_string()),
                Some(d) => assert_eq!(
                    d, rv,
                    "crate {name} does not inherit the workspace's rust-version"
                ),
            }
        } else if let Some(rv) = rv {
            if version(rv) > highest.0 {
                highest = (version(rv), format!("{name} {rv}"));
            }
        }
    }
    let declared = declared.expect("the workspace has crates");
    assert!(
        version(&declared) >= highest.0,
        "rust-version {declared} is below what {} needs",
        highest.1
    );
}
