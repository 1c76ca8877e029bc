//! `apir-dis`: decode descriptor bytes, print the annotated dump and the
//! decoded access pattern (or, for `--kind SDMA`, the decoded transfer), and
//! run the validators on them.

use apir_ir::target::descriptor::Descriptor;
use apir_ir::target::dump::annotate;
use apir_ir::target::sdma::{self, SdmaDescriptor};
use apir_ir::target::validate::{check_m4d_active_channels, descriptor_failures, Invalid};
use apir_ir::target::{DescriptorKind, Direction, Dtype, MemorySet};
use apir_tools::cli::dis::Args;
use apir_tools::{read_input, write_stdout, EXIT_INPUT, EXIT_OK, EXIT_USAGE};

fn main() {
    apir_tools::cli_main("apir-dis", run)
}

fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: String = text.split_whitespace().collect::<String>();
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
        .unwrap_or(&digits);
    if let Some((i, c)) = digits.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        if c.is_control() || !c.is_ascii() {
            return Err(format!(
                "error: the input is not hex text (byte {} is {:?}); use --binary for raw bytes",
                i + 1,
                c
            ));
        }
        return Err(format!(
            "error: `{c}` at position {} is not a hex digit",
            i + 1
        ));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "error: {} hex digits do not make whole bytes",
            digits.len()
        ));
    }
    Ok((0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or(0))
        .collect())
}

/// The `--kind` that selects SDMA descriptors.
const SDMA_KIND: &str = "SDMA";

/// The descriptor bytes from `--hex`, INPUT or stdin; the error is ready to
/// print.
fn input_bytes(args: &Args) -> Result<Vec<u8>, String> {
    match &args.hex {
        Some(h) => parse_hex(h),
        None => match read_input(args.input.as_deref()) {
            Err(e) => Err(e),
            Ok((_, raw)) if args.binary => Ok(raw),
            Ok((name, raw)) => match String::from_utf8(raw) {
                Ok(text) => parse_hex(&text),
                Err(_) => Err(format!(
                    "error: `{name}` is not hex text (use --binary for raw bytes)"
                )),
            },
        },
    }
}

fn run(args: Args) -> i32 {
    if args.kind == SDMA_KIND {
        return run_sdma(&args);
    }
    let Some(kind) = DescriptorKind::from_name(&args.kind) else {
        let names: Vec<_> = DescriptorKind::all().map(|k| k.name()).collect();
        eprintln!(
            "error: unknown kind `{}` (expected one of {}) or {SDMA_KIND}",
            args.kind,
            names.join(", ")
        );
        return EXIT_USAGE;
    };
    let arch = match args.arch {
        Some(arch) => arch,
        None => {
            eprintln!(
                "error: --arch <ARCH> is required for --kind {} (only SDMA descriptors are the same on every arch)",
                kind.name()
            );
            return EXIT_USAGE;
        }
    };
    if !kind.exists_on(arch) {
        eprintln!(
            "error: {} does not exist on {} (its 4D destinations use TENSOR4D)",
            kind.name(),
            arch.name()
        );
        return EXIT_USAGE;
    }
    let dtype_name = args.dtype.as_deref().unwrap_or("f32");
    let Some(dtype) = Dtype::from_name(dtype_name) else {
        let names: Vec<_> = Dtype::names().collect();
        eprintln!(
            "error: unknown dtype `{dtype_name}` (expected one of {})",
            names.join(", ")
        );
        return EXIT_USAGE;
    };
    let bytes = match input_bytes(&args) {
        Ok(b) => b,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_INPUT;
        }
    };
    let d = match Descriptor::decode(kind, &bytes) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INPUT;
        }
    };
    let dir = match kind {
        DescriptorKind::MemPattern(_) => Direction::Write,
        DescriptorKind::Tensor(_) => Direction::Read,
    };
    // Every failed check, not only the first.
    let mut failures: Vec<Invalid> =
        descriptor_failures(&bytes, kind, dtype, arch, dir, MemorySet::SP);
    if let Some(ch) = args.channels {
        if let Err(e) = check_m4d_active_channels(&bytes, ch, arch) {
            failures.push(e);
        }
    }
    let n = d.slots();
    let pattern: Vec<(i16, u16)> = (0..n).rev().map(|i| (d.steps[i], d.nums[i])).collect();
    let pattern_text = format!(
        "[{}]",
        pattern
            .iter()
            .map(|(s, n)| format!("[{s}, {n}]"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let out = if args.json {
        let doc = serde_json::json!({
            "kind": kind.name(),
            "arch": arch.name(),
            "bytes": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "addr4": apir_ir::target::dump::describe_addr4(d.addr, arch),
            "index_addr4": d.index_addr.map(|w| apir_ir::target::dump::describe_addr4(w, arch)),
            "free_dims": pattern.iter().map(|(s, n)| [i64::from(*s), i64::from(*n)]).collect::<Vec<_>>(),
            "valid": failures.is_empty(),
            "failures": failures.iter().map(failure_json).collect::<Vec<_>>(),
        });
        format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        )
    } else {
        let mut s = format!("{} ({} bytes, {})\n", kind.name(), bytes.len(), arch.name());
        s.push_str(&annotate(&d, arch));
        s.push_str(&format!(
            "free dims (outermost first, in elements): {pattern_text}\n"
        ));
        if failures.is_empty() {
            s.push_str("valid\n");
        } else {
            for f in &failures {
                s.push_str(&failure_line(f));
            }
        }
        s
    };
    if let Err(msg) = write_stdout(out.as_bytes()) {
        eprintln!("{msg}");
        return EXIT_INPUT;
    }
    if failures.is_empty() {
        EXIT_OK
    } else {
        EXIT_INPUT
    }
}

fn failure_json(f: &Invalid) -> serde_json::Value {
    serde_json::json!({"check": f.check, "offset": f.offset, "reason": f.reason})
}

fn failure_line(f: &Invalid) -> String {
    format!("invalid: +{:#x} {}: {}\n", f.offset, f.check, f.reason)
}

/// `--kind SDMA`: decode a 16-byte SDMA_CME_BD_DESC, print its dump and
/// transfer, run the SDMA validator.
fn run_sdma(args: &Args) -> i32 {
    for (given, flag) in [
        (args.dtype.is_some(), "--dtype"),
        (args.channels.is_some(), "--channels"),
    ] {
        if given {
            eprintln!("error: {flag} does not apply to --kind {SDMA_KIND}");
            return EXIT_USAGE;
        }
    }
    let bytes = match input_bytes(args) {
        Ok(b) => b,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_INPUT;
        }
    };
    let (d, dump) = match (SdmaDescriptor::decode(&bytes), sdma::annotate(&bytes)) {
        (Ok(d), Ok(dump)) => (d, dump),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return EXIT_INPUT;
        }
    };
    let failure = sdma::validate(&bytes).err();
    let out = if args.json {
        let doc = serde_json::json!({
            "kind": SDMA_KIND,
            "bytes": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "length": d.length,
            "queue": d.queue,
            "first": d.first,
            "last": d.last,
            "dram": d.dram,
            "hbm": d.hbm,
            "valid": failure.is_none(),
            "failures": failure.iter().map(failure_json).collect::<Vec<_>>(),
        });
        format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        )
    } else {
        let mut s = format!("{SDMA_KIND} ({} bytes)\n{dump}transfer: {d}\n", bytes.len());
        match &failure {
            None => s.push_str("valid\n"),
            Some(f) => s.push_str(&failure_line(f)),
        }
        s
    };
    if let Err(msg) = write_stdout(out.as_bytes()) {
        eprintln!("{msg}");
        return EXIT_INPUT;
    }
    if failure.is_none() {
        EXIT_OK
    } else {
        EXIT_INPUT
    }
}
