#!/usr/bin/env bash
# Side-by-side benchmark of apir-opt against mlir-opt and `wc -l`
# (README.md, "Performance").
#
# Builds the release tools, generates a BENCH_OPS-op module (default
# 1,000,000) with apir-gen in both formats into target/bench/, then times in
# one run, median of BENCH_RUNS runs (default 3):
#   - apir-opt FILE.apir -o target/bench/out.apir       (parse, verify, print)
#   - apir-opt FILE.apir -p lower-to-wire --emit=wire-bin (if this build has it),
#     on one thread per core (the default) and with --threads 1
#   - mlir-opt --allow-unregistered-dialect FILE.mlir   (parse, verify, print)
#   - wc -l FILE.apir                                   (touch every byte)
# and prints ops/s, peak RSS, and the ratios apir vs mlir-opt and vs wc -l.
#
# Environment: MLIR_OPT (path to mlir-opt; default /usr/lib/llvm-22/bin/mlir-opt
# or the one on PATH), BENCH_OPS, BENCH_RUNS, BENCH_SEED, BENCH_ARCH,
# BENCH_NO_HYPERFINE=1 (time with the plain loop even if hyperfine is here).
# Wall times use hyperfine when it is installed (with jq), else a loop of
# timed runs; peak RSS always comes from /usr/bin/time. The cpu column
# (user + system) is the figure to trust when the machine is busy.
#
# Usage: tools/bench.sh            (from anywhere inside the repo)

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OPS="${BENCH_OPS:-1000000}"
RUNS="${BENCH_RUNS:-3}"
SEED="${BENCH_SEED:-1}"
ARCH="${BENCH_ARCH:-v2}"
OUT="$ROOT/target/bench"
BIN="$ROOT/target/release"
APIR="$OUT/gen-$OPS.apir"
MLIR="$OUT/gen-$OPS.mlir"
RESULTS="$OUT/results.txt"

die() { echo "bench.sh: $*" >&2; exit 1; }

[[ "$OPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_OPS must be a positive integer, got '$OPS'"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer, got '$RUNS'"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed for peak RSS (Debian package: time)"

if [[ -z "${MLIR_OPT:-}" ]]; then
    if [[ -x /usr/lib/llvm-22/bin/mlir-opt ]]; then
        MLIR_OPT=/usr/lib/llvm-22/bin/mlir-opt
    else
        MLIR_OPT="$(command -v mlir-opt || true)"
    fi
fi
HAVE_MLIR=0
if [[ -n "$MLIR_OPT" && -x "$MLIR_OPT" ]]; then
    HAVE_MLIR=1
fi

mkdir -p "$OUT"
echo "== building release tools"
cargo build --release --quiet -p apir-tools --bin apir-opt --bin apir-gen

echo "== generating $OPS ops (seed $SEED, arch $ARCH) into $OUT"
"$BIN/apir-gen" --ops "$OPS" --seed "$SEED" --arch "$ARCH" -o "$APIR"
"$BIN/apir-gen" --ops "$OPS" --seed "$SEED" --arch "$ARCH" --format mlir -o "$MLIR"
echo "   $(du -h "$APIR" | cut -f1) $APIR"
echo "   $(du -h "$MLIR" | cut -f1) $MLIR"

# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.6f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# measure NAME CMD...: sets T_<NAME> (median seconds) and M_<NAME> (peak RSS KiB).
measure() {
    local name="$1"; shift
    local times="" rss="" cpu="" t0 t1
    echo "== $name: $*" >&2
    # One untimed warm-up run (page cache), which must succeed.
    if ! "$@" >/dev/null 2>"$OUT/$name.err"; then
        echo "   failed (see $OUT/$name.err):" >&2
        head -5 "$OUT/$name.err" >&2
        return 1
    fi
    if [[ -z "${BENCH_NO_HYPERFINE:-}" ]] && command -v hyperfine >/dev/null && command -v jq >/dev/null; then
        hyperfine -N --style basic --runs "$RUNS" --export-json "$OUT/$name.json" \
            "$(printf '%q ' "$@")" >&2
        times="$(jq -r '.results[0].median' "$OUT/$name.json")"
        cpu="$(jq -r '.results[0].user + .results[0].system' "$OUT/$name.json")"
        /usr/bin/time -f '%M' -o "$OUT/$name.rss" "$@" >/dev/null 2>>"$OUT/$name.err"
        rss="$(tail -1 "$OUT/$name.rss")"
    else
        for _ in $(seq "$RUNS"); do
            t0=$(date +%s%N)
            /usr/bin/time -f '%U %S %M' -o "$OUT/$name.rss" "$@" >/dev/null 2>>"$OUT/$name.err"
            t1=$(date +%s%N)
            times+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", (b - a) / 1e9}')"$'\n'
            cpu+="$(tail -1 "$OUT/$name.rss" | awk '{printf "%.2f", $1 + $2}')"$'\n'
            rss+="$(tail -1 "$OUT/$name.rss" | awk '{print $3}')"$'\n'
        done
        times="$(printf '%s' "$times" | median)"
        cpu="$(printf '%s' "$cpu" | median)"
        rss="$(printf '%s' "$rss" | sort -g | tail -1)"
    fi
    printf -v "T_$name" '%s' "$times"
    printf -v "M_$name" '%s' "$rss"
    printf -v "C_$name" '%s' "$cpu"
    echo "   median $(printf '%.3f' "$times") s over $RUNS runs (cpu $(printf '%.3f' "$cpu") s), peak RSS $((rss / 1024)) MiB" >&2
}

measure apir "$BIN/apir-opt" "$APIR" -o "$OUT/out.apir"
HAVE_WIRE=0
if measure wire "$BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin -o "$OUT/out.bin"; then
    HAVE_WIRE=1
else
    echo "== wire: apir-opt -p lower-to-wire --emit=wire-bin failed or is not in this build; row skipped"
fi
HAVE_WIRE1=0
if [[ $HAVE_WIRE == 1 ]] && measure wire1 "$BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin --threads 1 -o "$OUT/out1.bin"; then
    HAVE_WIRE1=1
    cmp -s "$OUT/out.bin" "$OUT/out1.bin" || die "--threads 1 and the default thread count wrote different bytes"
fi
if [[ $HAVE_MLIR == 1 ]]; then
    measure mlir "$MLIR_OPT" --allow-unregistered-dialect "$MLIR" -o "$OUT/out.mlir"
else
    echo "== mlir-opt not found (set MLIR_OPT, or install it: apt-get install mlir-22-tools," \
         "binary /usr/lib/llvm-22/bin/mlir-opt); its row is skipped"
fi
measure wc wc -l "$APIR"

ops_per_s() { awk -v n="$OPS" -v t="$1" 'BEGIN {printf "%.0f", n / t}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

{
    echo
    echo "apir bench: $OPS ops, seed $SEED, arch $ARCH, median of $RUNS runs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
    printf '%-44s %10s %14s %10s %12s\n' "command" "wall s" "ops/s" "cpu s" "peak RSS MiB"
    row() { printf '%-44s %10.3f %14s %10.3f %12d\n' "$1" "$2" "$(ops_per_s "$2")" "$4" "$(($3 / 1024))"; }
    row "apir-opt (parse, verify, print)" "$T_apir" "$M_apir" "$C_apir"
    if [[ $HAVE_WIRE == 1 ]]; then
        row "apir-opt -p lower-to-wire --emit=wire-bin" "$T_wire" "$M_wire" "$C_wire"
    fi
    if [[ $HAVE_WIRE1 == 1 ]]; then
        row "  the same with --threads 1" "$T_wire1" "$M_wire1" "$C_wire1"
    fi
    if [[ $HAVE_MLIR == 1 ]]; then
        row "mlir-opt --allow-unregistered-dialect" "$T_mlir" "$M_mlir" "$C_mlir"
    fi
    row "wc -l (apir file)" "$T_wc" "$M_wc" "$C_wc"
    echo
    if [[ $HAVE_MLIR == 1 ]]; then
        echo "apir-opt vs mlir-opt: $(ratio "$T_mlir" "$T_apir")x the ops/s ($(ratio "$C_mlir" "$C_apir")x by cpu time), $(ratio "$M_apir" "$M_mlir")x the peak memory"
        if [[ $HAVE_WIRE == 1 ]]; then
            echo "lower-to-wire vs mlir-opt: $(ratio "$T_mlir" "$T_wire")x the ops/s ($(ratio "$C_mlir" "$C_wire")x by cpu time), $(ratio "$M_wire" "$M_mlir")x the peak memory (targets: >= 10x, <= 0.3x)"
        fi
        if [[ $HAVE_WIRE1 == 1 ]]; then
            echo "lower-to-wire on one thread vs mlir-opt: $(ratio "$T_mlir" "$T_wire1")x the ops/s"
        fi
    fi
    echo "apir-opt vs wc -l: $(ratio "$T_apir" "$T_wc")x the time"
    if [[ $HAVE_WIRE == 1 ]]; then
        echo "lower-to-wire vs wc -l: $(ratio "$T_wire" "$T_wc")x the time (target: within 20x)"
    fi
} | tee "$RESULTS"
echo "(written to $RESULTS)"
