//! One insta snapshot per pass per corpus file: the IR after running the
//! registered passes in pipeline order up to and including that pass (or the
//! rendered diagnostics if the prefix fails). `print` is parse + verify +
//! print with no pass.

use apir_compiler::{Compilation, PASSES};

fn stage_output(name: &str, text: &str, passes: &[&str]) -> String {
    let mut c = match Compilation::parse(name, text, None) {
        Ok(c) => c,
        Err((apir_compiler::Error::Diagnostics(d), sources)) => {
            return apir_ir::render_all(&d, &sources)
        }
        Err((e, _)) => return e.to_string(),
    };
    match c.run(&passes.join(",")) {
        Ok(_) => c.ir(),
        Err(apir_compiler::Error::Diagnostics(d)) => c.render(&d),
        Err(e) => e.to_string(),
    }
}

#[test]
fn corpus_after_each_pass() {
    insta::glob!("corpus/*.apir", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let name = format!("corpus/{}", path.file_name().unwrap().to_string_lossy());
        insta::assert_snapshot!("print", stage_output(&name, &text, &[]));
        let mut prefix = Vec::new();
        for p in PASSES {
            prefix.push(p.name);
            insta::assert_snapshot!(p.name, stage_output(&name, &text, &prefix));
        }
    });
}
