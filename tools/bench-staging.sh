#!/usr/bin/env bash
# The staging figures of the README (README.md, "Performance";
# docs/staging.md, "The cost model"), from one run:
#   1. a 1 MiB-per-stream read + write kernel whose copy and compute times are
#      equal (cycles_per_element = 2: 1450.6 ns per 4 KiB copy vs 1462.9 ns
#      of compute per 1024 f32): simulated makespan of `pipelined` vs its
#      lower bound and vs `policy=reference`;
#   2. a transposed 256x256 f32 read: `auto` vs every access `index`;
#   3. planning time (`schedule-staging` pass time from `--timing`, and the
#      whole `apir-opt -p lower-staging` wall time) for streams of 256 MiB and
#      1 GiB, median of BENCH_RUNS (default 3), to show O(bursts log bursts);
#   4. a scale benchmark of `apir-opt FILE -p lower-staging -o OUT`: wall time
#      (median of BENCH_RUNS), peak RSS (max of the runs), plan steps (output
#      lines starting with `sdma.`, `gpsimd.memcpy` or `gpsimd.compute`),
#      peak bytes per plan step and output size, over
#        - one read + write kernel of 1 MiB, 16 MiB, 256 MiB, 1 GiB per stream;
#        - one kernel of 1, 8, 64, 128, 512, 4096, 16384 accesses (one write, the rest
#          reads, 65536 f32 each, own disjoint `mem.hbm` buffers, all `auto`);
#        - 1, 100, 1000, 16000 kernels (one read + one write of their own
#          1024 f32 buffers, cores 0..3 in turn, no bytes shared), and 16000
#          kernels on 4 cores all reading one shared tensor (the race sweep).
#      Peak RSS comes from a python3 helper, one per run, that starts the
#      command (fork + exec), waits for it and reads
#      getrusage(RUSAGE_CHILDREN).ru_maxrss (no GNU time needed). Linux also
#      counts in it the helper's own pages at the exec, so a reading is
#      max(helper floor, apir-opt's peak): the floor is measured (the helper
#      running `true`) and printed, and readings at the floor are shown as
#      "<=floor".
# Needs python3 (reads the schedule JSON, generates the scale inputs,
# measures). Inputs and outputs go to target/bench-staging/; results are
# also written to target/bench-staging/results.txt.
#
# Environment: BENCH_RUNS (default 3) runs per measurement; BENCH_QUICK=1
# leaves out the scale rows of 1 GiB and of 16000 kernels (section 3 still
# plans its 1 GiB stream).
# Exits non-zero if the build or any apir-opt run fails (printing the head of
# its stderr).
#
# Usage: tools/bench-staging.sh     (from anywhere inside the repo)

# The script is one block, which bash reads whole before running any of
# it: editing the file while a run is going on cannot change that run.
{
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS="${BENCH_RUNS:-3}"
QUICK="${BENCH_QUICK:-0}"
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

# (Plain assignments, not `read < <(...)`: `set -e` does not see a process
# substitution fail.)
kernel mib 262144 "[[1, 262144]]" "[[1, 262144]]" 2
figs=$(figures "$OUT/mib.apir" lower-staging)
read -r P_MS P_LB P_ST P_D <<<"$figs"
figs=$(figures "$OUT/mib.apir" "schedule-staging{policy=reference},check-coherency")
read -r R_MS R_LB R_ST R_D <<<"$figs"

kernel transposed 65536 "[[1, 256], [256, 256]]" "[[1, 65536]]" 2
kernel transposed_index 65536 "[[1, 256], [256, 256]]" "[[1, 65536]]" 2 ' {accessor = "index"}'
figs=$(figures "$OUT/transposed.apir" lower-staging)
read -r T_MS _ _ _ <<<"$figs"
figs=$(figures "$OUT/transposed_index.apir" lower-staging)
read -r I_MS _ _ _ <<<"$figs"

# plan_time NAME -> "pass_s wall_s" medians
plan_time() {
    local pass="" wall="" t0 t1
    for _ in $(seq "$RUNS"); do
        t0=$(date +%s%N)
        if ! "$OPT" "$OUT/$1.apir" -p lower-staging --timing -o "$OUT/$1.out.apir" 2>"$OUT/$1.timing"; then
            echo "error: apir-opt -p lower-staging failed on $OUT/$1.apir; stderr:" >&2
            head -n 20 "$OUT/$1.timing" >&2
            return 1
        fi
        t1=$(date +%s%N)
        wall+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", (b - a) / 1e9}')"$'\n'
        pass+="$(awk '$NF == "schedule-staging" {print $1}' "$OUT/$1.timing")"$'\n'
    done
    echo "$(printf '%s' "$pass" | median) $(printf '%s' "$wall" | median)"
}
kernel stream256m 67108864 "[[1, 67108864]]" "[[1, 67108864]]" 2
kernel stream1g 268435456 "[[1, 268435456]]" "[[1, 268435456]]" 2
figs=$(plan_time stream256m)
read -r S256_P S256_W <<<"$figs"
figs=$(plan_time stream1g)
read -r S1G_P S1G_W <<<"$figs"

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

# ---------------------------------------------------------------------------
# 4. Scale benchmark.

# Inputs (generation is not timed). Streams: the `kernel` template above.
for mib in 1 16 256 1024; do
    kernel "scale_stream_${mib}m" $((mib * 262144)) "[[1, $((mib * 262144))]]" "[[1, $((mib * 262144))]]" 2
done
python3 - "$OUT" <<'PY'
import sys
out = sys.argv[1]

def accesses(n, elements=65536):
    """One kernel, n accesses: n - 1 reads then one write, each over its own
    buffer; buffers 2x their size apart (disjoint, not even adjacent)."""
    name = f"scale_access_{n}"
    step = elements * 4 * 2
    with open(f"{out}/{name}.apir", "w") as f:
        f.write(f'module @{name} attributes {{arch = "v2"}} {{\n')
        for i in range(n):
            f.write(f"  %b{i} = mem.hbm {{addr = {0x100000000 + i * step:#x}}} : tensor<{elements}xf32>\n")
        f.write(f"  gpsimd.kernel @{name} {{core = 0, cycles_per_element = 2}} {{\n")
        for i in range(1, n):
            f.write(f"    gpsimd.read  %b{i}[[1, {elements}]]\n")
        f.write(f"    gpsimd.write %b0[[1, {elements}]]\n")
        f.write("  }\n}\n")

def kernels(n, shared=False, elements=1024):
    """n kernels on cores 0, 1, 2, 3, 0, ...: each reads its own input (or,
    if shared, one tensor all of them read) and writes its own output.
    Inputs and outputs sit in separate regions, 2x their size apart, so no
    two kernels touch a common byte except the shared reads."""
    name = f"scale_kernels_{n}" + ("_shared" if shared else "")
    step = elements * 4 * 2
    with open(f"{out}/{name}.apir", "w") as f:
        w = f.write
        w(f'module @{name} attributes {{arch = "v2"}} {{\n')
        if shared:
            w(f"  %shared = mem.hbm {{addr = 0x100000000}} : tensor<{elements}xf32>\n")
        for i in range(n):
            if not shared:
                w(f"  %in{i} = mem.hbm {{addr = {0x100000000 + i * step:#x}}} : tensor<{elements}xf32>\n")
            w(f"  %out{i} = mem.hbm {{addr = {0x200000000 + i * step:#x}}} : tensor<{elements}xf32>\n")
            w(f"  gpsimd.kernel @k{i} {{core = {i % 4}, cycles_per_element = 2}} {{\n")
            w(f"    gpsimd.read  {'%shared' if shared else f'%in{i}'}[[1, {elements}]]\n")
            w(f"    gpsimd.write %out{i}[[1, {elements}]]\n")
            w("  }\n")
        w("}\n")

for n in (1, 8, 64, 128, 512, 4096, 16384):
    accesses(n)
for n in (1, 100, 1000, 16000):
    kernels(n)
kernels(16000, shared=True)
PY

# The helper: runs argv[2:] (stdin and stdout /dev/null, stderr to argv[1])
# and prints "wall_s peak_rss_kib exit_code" (exit code -N: killed by signal
# N). One python process per run, so RUSAGE_CHILDREN covers that one
# command. Linux counts in a process's ru_maxrss the pages of the process it
# was exec'd from, so the helper keeps its own footprint small: `python3 -I
# -S`, os.fork + os.execv rather than subprocess (whose imports, and vfork,
# which hands the child all of the parent's pages, raise the floor from about
# 5 MiB to 11-14 MiB).
MEASURE_PY='
import os, resource, sys, time
argv = sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status = os.waitpid(pid, 0)
wall = time.perf_counter() - t0
print(f"{wall:.6f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {os.waitstatus_to_exitcode(status)}")
'
measure() { # STDERR_FILE CMD... -> "wall_s peak_rss_kib exit_code"
    python3 -I -S -c "$MEASURE_PY" "$@"
}

m=$(measure "$OUT/floor.stderr" "$(type -P true)")
read -r _ FLOOR_KIB _ <<<"$m"

SCALE_ROWS=()
declare -A WALL STEPS RSS
# scale_case NAME LABEL: measures `apir-opt NAME.apir -p lower-staging -o
# NAME.out.apir` RUNS times and adds a table row.
scale_case() {
    local name=$1 label=$2 in="$OUT/$1.apir" out="$OUT/$1.out.apir" err="$OUT/$1.stderr"
    local walls="" peak=0 w r rc m
    echo "== $label" >&2
    for _ in $(seq "$RUNS"); do
        m=$(measure "$err" "$OPT" "$in" -p lower-staging -o "$out")
        read -r w r rc <<<"$m"
        if [[ "$rc" != 0 ]]; then
            echo "error: apir-opt -p lower-staging failed (exit $rc) on $in; stderr:" >&2
            head -n 20 "$err" >&2
            exit 1
        fi
        walls+="$w"$'\n'
        if ((r > peak)); then peak=$r; fi
    done
    local wall steps size
    wall=$(printf '%s' "$walls" | median)
    steps=$(grep -cE '^[[:space:]]*(sdma\.|gpsimd\.memcpy|gpsimd\.compute)' "$out" || true)
    size=$(wc -c <"$out")
    WALL[$name]=$wall STEPS[$name]=$steps RSS[$name]=$peak
    SCALE_ROWS+=("$(awk -v label="$label" -v wall="$wall" -v kib="$peak" -v floor="$FLOOR_KIB" \
        -v steps="$steps" -v size="$size" 'BEGIN {
            at = (kib <= floor + 512) ? "<=" : ""
            per = steps > 0 ? sprintf("%s%.0f", at, kib * 1024 / steps) : "-"
            printf "| %s | %.3f | %s%.1f | %d | %s | %d |", label, wall, at, kib / 1024, steps, per, size
        }')")
}

for mib in 1 16 256 1024; do
    if [[ "$QUICK" == 1 && $mib == 1024 ]]; then continue; fi
    if ((mib < 1024)); then what="$mib MiB"; else what="1 GiB"; fi
    scale_case "scale_stream_${mib}m" "stream, $what per stream (read + write)"
done
for n in 1 8 64 128 512 4096 16384; do
    if ((n == 1)); then what="1 access"; else what="$n accesses"; fi
    scale_case "scale_access_$n" "1 kernel, $what (65536 f32 each)"
done
for n in 1 100 1000 16000; do
    if [[ "$QUICK" == 1 && $n == 16000 ]]; then continue; fi
    if ((n == 1)); then what="1 kernel"; else what="$n kernels"; fi
    scale_case "scale_kernels_$n" "$what, own buffers, cores 0..3"
done
if [[ "$QUICK" != 1 ]]; then
    scale_case scale_kernels_16000_shared "16000 kernels, cores 0..3, all read one shared tensor"
fi

{
    echo "scale: apir-opt FILE -p lower-staging -o OUT (release build; wall: median of $RUNS; peak RSS: max of $RUNS)"
    echo "  targets (not asserted): 1 GiB stream: <= 2 s, <= 256 MiB peak; time linear in accesses"
    echo "  peak RSS floor of the python3 helper: $(awk -v k="$FLOOR_KIB" 'BEGIN {printf "%.1f", k / 1024}') MiB (readings at it are marked <=)"
    echo
    echo "| case | wall s | peak RSS MiB | plan steps | peak bytes / step | output bytes |"
    echo "| --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${SCALE_ROWS[@]}"
    echo
    acc=$(awk -v a="${WALL[scale_access_16384]}" -v b="${WALL[scale_access_512]}" 'BEGIN {printf "%.2f", a / b}')
    if [[ -n "${WALL[scale_stream_1024m]:-}" ]]; then
        gib=$(awk -v w="${WALL[scale_stream_1024m]}" -v k="${RSS[scale_stream_1024m]}" -v s="${STEPS[scale_stream_1024m]}" \
            'BEGIN {printf "%.0f bytes and %.0f ns per plan step (%d steps)", k * 1024 / s, w * 1e9 / s, s}')
    else
        gib="skipped (BENCH_QUICK=1)"
    fi
    echo "time(16384 accesses) / time(512 accesses) = ${acc}x for 32x the accesses; 1 GiB stream: $gib"
} | tee -a "$OUT/results.txt"
exit
}
