//! Parser fuzz target: arbitrary bytes (as lossy UTF-8) through the parser,
//! the verifier, the diagnostic renderer and the printer. Nothing may panic,
//! every diagnostic span lies inside the input, and whatever parses
//! satisfies print -> parse -> print = identity.

#![no_main]

use apir_ir::{parse_str, print_module, render_all, verify, Diagnostic, ParseOptions};
use libfuzzer_sys::fuzz_target;

fn check_spans(diags: &[Diagnostic], len: usize) {
    for d in diags {
        for span in d
            .span
            .iter()
            .chain(d.notes.iter().filter_map(|(_, s)| s.as_ref()))
        {
            assert!(
                span.start <= span.end && span.end as usize <= len,
                "span outside the input: {d:?}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_str("fuzz.apir", &text, ParseOptions::default()) {
        Ok((module, sources)) => {
            if let Err(diags) = verify(&module) {
                check_spans(&diags, text.len());
                let _ = render_all(&diags, &sources);
            }
            let printed = print_module(&module);
            let (reparsed, _) = parse_str("printed.apir", &printed, ParseOptions::default())
                .unwrap_or_else(|(d, sm)| {
                    panic!(
                        "printed IR does not parse:\n{printed}\n{}",
                        render_all(&d, &sm)
                    )
                });
            assert_eq!(
                print_module(&reparsed),
                printed,
                "print -> parse -> print is not the identity"
            );
        }
        Err((diags, sources)) => {
            assert!(!diags.is_empty(), "a failed parse reports no diagnostic");
            check_spans(&diags, text.len());
            let _ = render_all(&diags, &sources);
        }
    }
});
