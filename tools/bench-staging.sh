#!/usr/bin/env bash
# The staging figures of the README (quality.md, "Performance targets";
# staging.md, "Cost model and simulator"), from one run:
#   1. a 1 MiB-per-stream read + write kernel whose copy and compute times are
#      equal (cycles_per_element = 2: 1450.6 ns per 4 KiB copy vs 1462.9 ns
#      of compute per 1024 f32): simulated makespan of `pipelined` vs its
#      lower bound and vs `policy=reference`;
#   2. a transposed 256x256 f32 read: `auto` vs every access `index`;
#   3. planning time (`schedule-staging` pass time from `--timing`, and the
#      whole `apir-opt -p lower-staging` wall time) for streams of 256 MiB and
#      1 GiB, median of BENCH_RUNS (default 3), to show O(bursts log bursts).
# Needs python3 (reads the schedule JSON).
#
# Usage: tools/bench-staging.sh     (from anywhere inside the repo)

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS="${BENCH_RUNS:-3}"
OUT="$ROOT/target/bench-staging"
OPT="$ROOT/target/release/apir-opt"
mkdir -p "$OUT"
echo "== building release apir-opt"
cargo build --release --quiet -p apir-tools --bin apir-opt

kernel() { # NAME ELEMENTS READ_AP WRITE_AP CYCLES [HINT]
    cat > "$OUT/$1.apir" <<EOF
module @$1 attributes {arch = "v2"} {
  %in  = mem.hbm {addr = 0x100000000} : tensor<$2xf32>
  %out = mem.hbm {addr = 0x200000000} : tensor<$2xf32>
  gpsimd.kernel @$1 {core = 0, cycles_per_element = $5} {
    gpsimd.read  %in$3${6:-}
    gpsimd.write %out$4${6:-}
  }
}
EOF
}

# figures FILE PIPELINE -> "makespan lower_bound stall descriptors"
figures() {
    "$OPT" "$1" -p "$2" --emit=schedule-json | python3 -c '
import json, sys
f = json.load(sys.stdin)["kernels"][0]["figures"]
print(f["makespan_ns"], f["lower_bound_ns"], f["stall_ns"], f["descriptors"])'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.6f\n", (a[NR/2]+a[NR/2+1])/2}'; }

kernel mib 262144 "[[1, 262144]]" "[[1, 262144]]" 2
read -r P_MS P_LB P_ST P_D < <(figures "$OUT/mib.apir" lower-staging)
read -r R_MS R_LB R_ST R_D < <(figures "$OUT/mib.apir" "schedule-staging{policy=reference},check-coherency")

kernel transposed 65536 "[[1, 256], [256, 256]]" "[[1, 65536]]" 2
kernel transposed_index 65536 "[[1, 256], [256, 256]]" "[[1, 65536]]" 2 ' {accessor = "index"}'
read -r T_MS _ _ _ < <(figures "$OUT/transposed.apir" lower-staging)
read -r I_MS _ _ _ < <(figures "$OUT/transposed_index.apir" lower-staging)

# plan_time NAME -> "pass_s wall_s" medians
plan_time() {
    local pass="" wall="" t0 t1
    for _ in $(seq "$RUNS"); do
        t0=$(date +%s%N)
        "$OPT" "$OUT/$1.apir" -p lower-staging --timing -o "$OUT/$1.out.apir" 2>"$OUT/$1.timing"
        t1=$(date +%s%N)
        wall+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", (b - a) / 1e9}')"$'\n'
        pass+="$(awk '$NF == "schedule-staging" {print $1}' "$OUT/$1.timing")"$'\n'
    done
    echo "$(printf '%s' "$pass" | median) $(printf '%s' "$wall" | median)"
}
kernel stream256m 67108864 "[[1, 67108864]]" "[[1, 67108864]]" 2
kernel stream1g 268435456 "[[1, 268435456]]" "[[1, 268435456]]" 2
read -r S256_P S256_W < <(plan_time stream256m)
read -r S1G_P S1G_W < <(plan_time stream1g)

{
    echo
    echo "apir staging bench, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -m)"
    echo "1 MiB per stream, copy = compute (simulated):"
    echo "  pipelined makespan $P_MS ns, lower bound $P_LB ns: $(ratio "$P_MS" "$P_LB")x the bound (target <= 1.10x); stall $P_ST ns; $P_D descriptors"
    echo "  reference makespan $R_MS ns: pipelined is $(ratio "$R_MS" "$P_MS")x faster (target >= 2x)"
    echo "transposed 256x256 f32 read (simulated):"
    echo "  auto $T_MS ns vs index $I_MS ns: $(ratio "$I_MS" "$T_MS")x faster than per-element indexing (target >= 1x)"
    echo "planning (median of $RUNS, release build):"
    echo "  256 MiB per stream (131,072 descriptors): schedule-staging $S256_P s, apir-opt -p lower-staging $S256_W s"
    echo "  1 GiB per stream (524,288 descriptors):   schedule-staging $S1G_P s, apir-opt -p lower-staging $S1G_W s"
    echo "  1 GiB / 256 MiB pass time: $(ratio "$S1G_P" "$S256_P")x for 4x the bursts"
} | tee "$OUT/results.txt"
