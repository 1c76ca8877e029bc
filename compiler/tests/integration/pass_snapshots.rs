//! One insta snapshot per lowering pass per corpus file: the IR after
//! running the passes of `lower-to-wire` in order up to and including that
//! pass (or the rendered diagnostics if the prefix fails). `print` is
//! parsing, verifying and printing with no pass. The staging passes have
//! their own corpus (`staging_snapshots.rs`).

use apir_compiler::{Compilation, Registry};

fn stage_output(name: &str, text: &str, passes: &[&str]) -> String {
    let mut c = match Compilation::parse(name, text, None) {
        Ok(c) => c,
        Err(e) => return e.render(),
    };
    match c.run(&passes.join(",")) {
        Ok(_) => c.ir(),
        Err(apir_compiler::Error::Diagnostics(d)) => c.render(&d),
        Err(e) => e.to_string(),
    }
}

#[test]
fn corpus_after_each_pass() {
    crate::snapshots(|| {
        insta::glob!("../corpus", "*.apir", |path| {
            let text = std::fs::read_to_string(path).unwrap();
            let name = format!("corpus/{}", path.file_name().unwrap().to_string_lossy());
            insta::assert_snapshot!("pass_snapshots__print", stage_output(&name, &text, &[]));
            let mut prefix = Vec::new();
            for p in lowering_passes() {
                prefix.push(p);
                insta::assert_snapshot!(
                    format!("pass_snapshots__{p}"),
                    stage_output(&name, &text, &prefix)
                );
            }
        });
    });
}

/// The passes of the `lower-to-wire` pipeline, in order.
fn lowering_passes() -> Vec<&'static str> {
    Registry::builtin()
        .pipeline("lower-to-wire")
        .expect("lower-to-wire is registered")
        .expansion
        .split(',')
        .collect()
}
