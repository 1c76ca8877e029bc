//! The staging corpus (`tests/staging/*.apir`): per file, insta snapshots of
//! the printed plan and of `--emit=schedule-json` under both policies (or the
//! rendered diagnostics when planning fails), plus the properties every plan
//! of the corpus must have.

use apir_compiler::{schedule, Compilation};

const PIPELINED: &str = "lower-staging";
const REFERENCE: &str = "schedule-staging{policy=reference},check-coherency";

/// Runs `pipeline`; the IR and the schedule JSON, or the diagnostics twice.
fn outputs(name: &str, text: &str, pipeline: &str) -> (String, String) {
    let mut c = match Compilation::parse(name, text, None) {
        Ok(c) => c,
        Err((apir_compiler::Error::Diagnostics(d), sources)) => {
            let r = apir_ir::render_all(&d, &sources);
            return (r.clone(), r);
        }
        Err((e, _)) => return (e.to_string(), e.to_string()),
    };
    match c.run(pipeline) {
        Ok(_) => {
            let kernels =
                schedule::collect(&c.module, &c.sources).expect("every kernel is planned");
            (c.ir(), schedule::json(c.module.arch, &kernels, &[]))
        }
        Err(apir_compiler::Error::Diagnostics(d)) => {
            let r = c.render(&d);
            (r.clone(), r)
        }
        Err(e) => (e.to_string(), e.to_string()),
    }
}

#[test]
fn staging_corpus() {
    insta::glob!("staging/*.apir", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let name = format!("staging/{}", path.file_name().unwrap().to_string_lossy());
        let (ir, json) = outputs(&name, &text, PIPELINED);
        insta::assert_snapshot!("plan", ir);
        insta::assert_snapshot!("schedule-json", json);
        let (ir, json) = outputs(&name, &text, REFERENCE);
        insta::assert_snapshot!("plan-reference", ir);
        insta::assert_snapshot!("schedule-json-reference", json);
    });
}

/// The printed plan parses back to the same plan, and planning twice gives
/// the same plan.
#[test]
fn plans_print_parse_and_replan_identically() {
    for entry in std::fs::read_dir("tests/staging").unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let mut c = Compilation::parse(&name, &text, None).unwrap();
        if c.run(PIPELINED).is_err() {
            continue;
        }
        let once = c.ir();
        let mut again = Compilation::parse(&name, &once, None).unwrap();
        assert_eq!(again.ir(), once, "{name}: print -> parse -> print");
        again.run(PIPELINED).unwrap();
        assert_eq!(again.ir(), once, "{name}: schedule-staging is idempotent");
    }
}

/// The figures the README quotes: on a 1 MiB-per-stream read + write kernel
/// whose copy and compute times are equal, `pipelined` is within 1.10x of
/// the lower bound and at least 2x faster than `reference`.
#[test]
fn pipelined_beats_reference_on_a_mib_stream() {
    let text = "module attributes {arch = \"v2\"} {\n  %in = mem.hbm {addr = 0x40000000} : tensor<262144xf32>\n  %out = mem.hbm {addr = 0x40100000} : tensor<262144xf32>\n  gpsimd.kernel @relu {core = 0, cycles_per_element = 2} {\n    gpsimd.read %in[[1, 262144]]\n    gpsimd.write %out[[1, 262144]]\n  }\n}\n";
    let figures = |pipeline: &str| {
        let mut c = Compilation::parse("mib.apir", text, None).unwrap();
        c.run(pipeline).unwrap();
        let k = schedule::collect(&c.module, &c.sources).unwrap();
        k[0].schedule.figures
    };
    let p = figures(PIPELINED);
    let r = figures(REFERENCE);
    // Equal copy and compute: 256 tiles of 4 KiB each way.
    let compute = 262_144.0 * 2.0 / 1.4;
    assert!((p.lower_bound_ns - compute).abs() < 1.0);
    assert!((p.m2s_busy_ns - compute).abs() / compute < 0.01, "{p:?}");
    assert!(p.makespan_ns <= 1.10 * p.lower_bound_ns, "{p:?}");
    assert!(r.makespan_ns >= 2.0 * p.makespan_ns, "{r:?} vs {p:?}");
    assert_eq!(p.bytes_in, 1 << 20);
    assert_eq!(p.bytes_out, 1 << 20);
}
