//! Arbitrary text through parse, verify and the `lower-to-wire` pipeline:
//! nothing panics, and a module that lowers prints IR that parses back and
//! verifies.
#![no_main]

use apir_compiler::Compilation;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(mut c) = Compilation::parse("fuzz.apir", &text, None) else { return };
    if c.run("lower-to-wire").is_ok() {
        let ir = c.ir();
        let again = Compilation::parse("fuzz.apir", &ir, None).map_err(|e| e.into_error()).expect("lowered IR parses and verifies");
        assert_eq!(again.ir(), ir);
    }
});
