//! `check-coherency` proves a plan by address, not by trusting the staging
//! groups: a mutation test models a planner *and* a checker that both group
//! an aliasing chain wrongly (the bug of comparing each access only with a
//! group's first one). The plan such a planner makes serves a read from a
//! tile loaded before another group's write to the same bytes is flushed;
//! the structural proof, which shares the wrong grouping, finds nothing,
//! and the read-after-write / write-after-read proof rejects it.

use apir_ir::staging::Kernel;
use apir_ir::{parse_str, ParseOptions};
use apir_passes::check_coherency::prove;
use apir_passes::staging::footprint::{Footprint, Sweep, MAX_FOOTPRINT_RUNS};
use apir_passes::staging::layout::tensors;
use apir_passes::ScheduleStaging;

/// %c written forward, %b read, %a written backwards; %b overlaps %a and
/// %c, which are disjoint (they only touch).
const CHAIN: &str = r#"module @chain attributes {arch = "v2"} {
  %a = mem.hbm {addr = 0x40001000} : tensor<512xf32>
  %b = mem.hbm {addr = 0x40001400} : tensor<512xf32>
  %c = mem.hbm {addr = 0x40001800} : tensor<512xf32>
  gpsimd.kernel @k {core = 0, cycles_per_element = 2} {
    gpsimd.write %c[[1, 512]]
    gpsimd.read  %b[[1, 512]]
    gpsimd.write %a[[-1, 512]] + 511
  }
}
"#;

fn proof(labels: &[usize]) -> Vec<String> {
    let (m, _) = parse_str("chain.apir", CHAIN, ParseOptions::default()).unwrap();
    let k = Kernel::all(&m).remove(0);
    let sweeps: Vec<Sweep> = k
        .accesses
        .iter()
        .map(|a| Sweep::of(&m, a.buffer, &a.ap))
        .collect();
    let footprints: Vec<Footprint> = sweeps
        .iter()
        .map(|s| s.footprint(MAX_FOOTPRINT_RUNS))
        .collect();
    let plan = ScheduleStaging::default()
        .plan_with_tensors(&m, &k, &sweeps, labels)
        .expect("planned");
    prove(&m, &k, &sweeps, &footprints, &plan, &[], labels)
        .into_iter()
        .map(|d| d.message)
        .collect()
}

#[test]
fn the_right_tensors_give_a_proved_plan() {
    let (m, _) = parse_str("chain.apir", CHAIN, ParseOptions::default()).unwrap();
    let k = Kernel::all(&m).remove(0);
    let labels = tensors(&m, &k);
    assert_eq!(labels, vec![0, 0, 0]);
    assert_eq!(proof(&labels), Vec::<String>::new());
}

#[test]
fn a_stale_tile_across_two_groups_is_rejected() {
    // %a apart from %b and %c: two groups that hold the same HBM bytes.
    let errors = proof(&[0, 0, 1]);
    assert!(!errors.is_empty(), "a plan with a stale tile was proved");
    for e in &errors {
        assert!(
            e.contains("iteration") && e.contains("%a") && e.contains("%b"),
            "not the address proof: {e}"
        );
    }
    // Every access in a group of its own: still rejected.
    assert!(!proof(&[0, 1, 2]).is_empty());
}
