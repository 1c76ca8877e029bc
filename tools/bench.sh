#!/usr/bin/env bash
# Side-by-side benchmark of apir-opt against mlir-opt and `wc -l`
# (README.md, "Performance"), all measured in one run on one machine.
#
# Builds the release tools, generates with apir-gen a BENCH_OPS-op module
# (default 1,000,000) as apir text and in both MLIR forms:
#   - generic: apir-gen's generic MLIR (SSA operands, one attribute per role)
#   - light:   the lightest MLIR form (one `ap = array<i64: ...>` per op,
#              no SSA operands)
# and a BENCH_BIG-op apir module (default 10x BENCH_OPS, the ops repeated)
# for the memory-does-not-grow check, then times, median of BENCH_RUNS runs
# (default 5) taken in interleaved rounds (each round runs every command
# once, so a slow spell of a shared machine falls on all of them alike):
#   - apir-opt FILE -p lower-to-wire --emit=wire-bin   (streamed; default
#     threads, and --threads 1), on BENCH_OPS and BENCH_BIG ops; and once
#     more over an output file that exists (every other run writes a new
#     file, as a first run does: replacing one can cost the filesystem
#     more, ext4 allocating the new file's blocks at the rename)
#   - apir-opt FILE -o out.apir                        (streamed IR output)
#   - apir-opt FILE -p all --emit=wire-bin             (whole-module path)
#   - mlir-opt --allow-unregistered-dialect on both MLIR forms (parse, print)
#   - wc -l FILE                                        (touch every byte)
#   - lower-to-wire on the module with one warning (on its first op) and
#     on the modules with one verifier error and one syntax error (on
#     their last op), streamed and on the whole-module path (forced by
#     --print-ir-after-failure): the diagnostics are the same, the memory
#     is not
#   - lower-to-wire on the module with a warning on every op that has no
#     attributes (streamed; 50 shown and the rest counted, as the
#     whole-module path, run once untimed, shows them)
#   - --emit=wire-bin with no pipeline (a usage error: nothing is encoded),
#     streamed, and once untimed on the whole-module path
#   - apir-dis on lower-to-wire's wire-bin output
# and prints ops/s, cpu time, peak RSS, the ratios against mlir-opt on both
# forms and against wc -l, the BENCH_OPS vs BENCH_BIG memory, and the
# whole-module path's time and memory per op.
#
# It also builds apir-opt with profile-guided optimisation
# (tools/pgo-build.sh, trained on other inputs than these) when
# llvm-profdata of rustc's LLVM is found, and times that build's
# lower-to-wire too, on default threads and on one, beside the plain
# build's (BENCH_PGO=0 skips it; BENCH_PGO=1 fails without it).
#
# When valgrind is installed it also counts, with callgrind, the
# instructions per op of lower-to-wire on one thread over the first
# BENCH_INSTR_OPS ops (default 100,000; 0 skips): a figure that, unlike the
# times, a busy machine does not move.
#
# Environment: MLIR_OPT (path to mlir-opt; default the newest
# /usr/lib/llvm-*/bin/mlir-opt, else the one on PATH), BENCH_OPS, BENCH_BIG
# (0: skip), BENCH_RUNS, BENCH_INSTR_OPS, BENCH_SEED, BENCH_ARCH, BENCH_PGO
# (auto, 0 or 1; LLVM_PROFDATA is passed on), BENCH_KEEP=1 (keep the
# generated inputs; they are deleted at the end otherwise, the big one is
# over 1 GB), CARGO_TARGET_DIR (honoured).
# Wall times come from the clock around each run, cpu time (user + system)
# and peak RSS from /usr/bin/time; every run's wall time is printed too.
# The cpu column is the figure to trust when the machine is busy.
#
# Usage: tools/bench.sh            (from anywhere inside the repo)

# The script is one block, which bash reads whole before running any of
# it: editing the file while a run is going on cannot change that run.
{
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OPS="${BENCH_OPS:-1000000}"
BIG="${BENCH_BIG:-$((OPS * 10))}"
RUNS="${BENCH_RUNS:-5}"
INSTR_OPS="${BENCH_INSTR_OPS:-100000}"
SEED="${BENCH_SEED:-1}"
ARCH="${BENCH_ARCH:-v2}"
PGO_MODE="${BENCH_PGO:-auto}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET/bench"
BIN="$TARGET/release"
APIR="$OUT/gen-$OPS.apir"
APIR_BIG="$OUT/gen-$BIG.apir"
APIR_WARN="$OUT/gen-$OPS-warning.apir"
APIR_ERR="$OUT/gen-$OPS-error.apir"
APIR_SYN="$OUT/gen-$OPS-syntax.apir"
APIR_WARNS="$OUT/gen-$OPS-warnings.apir"
MLIR="$OUT/gen-$OPS.mlir"
LIGHT="$OUT/gen-$OPS-light.mlir"
RESULTS="$OUT/results.txt"
APIR_INSTR="$OUT/gen-$OPS-first-ops.apir"

die() { echo "bench.sh: $*" >&2; exit 1; }

[[ "$OPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_OPS must be a positive integer, got '$OPS'"
[[ "$BIG" =~ ^[0-9]+$ ]] || die "BENCH_BIG must be a non-negative integer, got '$BIG'"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer, got '$RUNS'"
[[ "$INSTR_OPS" =~ ^[0-9]+$ ]] || die "BENCH_INSTR_OPS must be a non-negative integer, got '$INSTR_OPS'"
[[ "$PGO_MODE" =~ ^(auto|0|1)$ ]] || die "BENCH_PGO must be auto, 0 or 1, got '$PGO_MODE'"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed for peak RSS (Debian package: time)"
if [[ "$BIG" != 0 ]] && (( BIG % OPS != 0 )); then
    die "BENCH_BIG must be a multiple of BENCH_OPS (the big module repeats its ops)"
fi

if [[ -z "${MLIR_OPT:-}" ]]; then
    MLIR_OPT="$(ls -1 /usr/lib/llvm-*/bin/mlir-opt 2>/dev/null | sort -V | tail -1 || true)"
    [[ -n "$MLIR_OPT" ]] || MLIR_OPT="$(command -v mlir-opt || true)"
fi
HAVE_MLIR=0
if [[ -n "$MLIR_OPT" && -x "$MLIR_OPT" ]]; then
    HAVE_MLIR=1
fi

cleanup() {
    if [[ -z "${BENCH_KEEP:-}" ]]; then
        rm -f "$APIR" "$APIR_BIG" "$APIR_WARN" "$APIR_ERR" "$APIR_SYN" "$APIR_WARNS" "$APIR_INSTR" "$MLIR" "$LIGHT" "$OUT"/out* "$OUT"/kept.bin "$OUT"/split-*.apir
    fi
}
trap cleanup EXIT

mkdir -p "$OUT"
echo "== building release tools into $BIN"
cargo build --release --quiet -p apir-tools --bin apir-opt --bin apir-gen
HAVE_PGO=0
PGO_BIN="$TARGET/pgo/use/release"
if [[ "$PGO_MODE" != 0 ]]; then
    echo "== building apir-opt with profile-guided optimisation (tools/pgo-build.sh)"
    pgo_status=0
    "$ROOT/tools/pgo-build.sh" || pgo_status=$?
    if [[ $pgo_status == 0 ]]; then
        HAVE_PGO=1
    elif [[ $pgo_status == 2 && "$PGO_MODE" == auto ]]; then
        echo "== no llvm-profdata for rustc's LLVM: the PGO rows are skipped"
    else
        die "tools/pgo-build.sh failed (exit $pgo_status)"
    fi
fi

echo "== generating $OPS ops (seed $SEED, arch $ARCH) into $OUT"
"$BIN/apir-gen" --ops "$OPS" --seed "$SEED" --arch "$ARCH" -o "$APIR"
if [[ $HAVE_MLIR == 1 ]]; then
    "$BIN/apir-gen" --ops "$OPS" --seed "$SEED" --arch "$ARCH" --format mlir -o "$MLIR"
    "$BIN/apir-gen" --ops "$OPS" --seed "$SEED" --arch "$ARCH" --format mlir-light -o "$LIGHT"
fi
if [[ "$BIG" != 0 ]]; then
    # The same buffers, the ops repeated: the two runs lower the same ops,
    # so their memory is compared on equal terms.
    need=$(( $(stat -c %s "$APIR") * BIG / OPS / 1024 ))
    avail=$(df -Pk "$OUT" | awk 'NR == 2 {print $4}')
    (( avail > need + 1048576 )) || die "the $BIG-op input needs $((need / 1024)) MiB; $OUT has $((avail / 1024)) MiB free"
    {
        sed '$d' "$APIR"
        for _ in $(seq 2 $((BIG / OPS))); do
            grep -v -e '^module' -e '^  %' -e '^}' "$APIR"
        done
        echo "}"
    } > "$APIR_BIG"
fi
# One warning on the first op; one verifier error (an access past its
# partition), or one syntax error (a `]` missing), on the last op.
awk '!done && /^  isa\./ { sub(/$/, " {colour = \"red\"}"); done = 1 } { print }' "$APIR" > "$APIR_WARN"
{
    sed '$d' "$APIR"
    first_buffer=$(grep -m1 -o '^  %[a-z0-9_]*' "$APIR" | tr -d ' ')
    echo "  isa.memset dst = $first_buffer[[1, 1], [1, 1]] + 99999999999"
    echo "}"
} > "$APIR_ERR"
{
    sed '$d' "$APIR"
    first_buffer=$(grep -m1 -o '^  %[a-z0-9_]*' "$APIR" | tr -d ' ')
    echo "  isa.memset dst = $first_buffer[[1, 1], [1, 1]"
    echo "}"
} > "$APIR_SYN"
# A warning on every op without attributes.
sed -E '/^  isa\..*[^}]$/ s/$/ {colour = 1}/' "$APIR" > "$APIR_WARNS"
for f in "$APIR" "$MLIR" "$LIGHT" "$APIR_BIG" "$APIR_WARN" "$APIR_ERR" "$APIR_SYN" "$APIR_WARNS"; do
    [[ -f "$f" ]] && echo "   $(du -h "$f" | cut -f1) $f"
done

# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.6f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# The commands are registered first and then timed in interleaved rounds
# (round r runs every command once, in order), so that a slow spell of this
# shared machine falls on every command alike instead of on whichever one
# happened to be running: the ratios are what this script is for.
NAMES=()

# measure NAME CMD...: registers CMD under NAME and runs it once, untimed
# (a warm-up for the page cache), which must succeed.
measure() {
    local name="$1"; shift
    echo "== $name: $*" >&2
    if ! "$@" >/dev/null 2>"$OUT/$name.err"; then
        echo "   failed (see $OUT/$name.err):" >&2
        head -5 "$OUT/$name.err" >&2
        return 1
    fi
    printf -v "CMD_$name" '%q ' "$@"
    NAMES+=("$name")
}

# time_rounds: RUNS rounds over the registered commands; then sets
# T_<NAME> (median wall seconds), L_<NAME> (least wall seconds),
# C_<NAME> (median cpu seconds, user + system) and M_<NAME> (peak RSS
# KiB, the largest of the runs).
time_rounds() {
    local name cmd t0 t1 r
    for r in $(seq "$RUNS"); do
        echo "== round $r of $RUNS" >&2
        for name in "${NAMES[@]}"; do
            cmd="CMD_$name"
            # Every run writes a new output file, as the first run of a
            # command does (the "replace" row times the other case).
            rm -f "$OUT"/out*
            t0=$(date +%s%N)
            eval "/usr/bin/time -f '%U %S %M' -o \"\$OUT/\$name.rss\" ${!cmd}" >/dev/null 2>>"$OUT/$name.err"
            t1=$(date +%s%N)
            awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f\n", (b - a) / 1e9}' >> "$OUT/$name.times"
            tail -1 "$OUT/$name.rss" | awk '{printf "%.2f\n", $1 + $2}' >> "$OUT/$name.cpu"
            tail -1 "$OUT/$name.rss" | awk '{print $3}' >> "$OUT/$name.peak"
        done
    done
    for name in "${NAMES[@]}"; do
        printf -v "T_$name" '%s' "$(median < "$OUT/$name.times")"
        printf -v "L_$name" '%s' "$(sort -g "$OUT/$name.times" | head -1)"
        printf -v "C_$name" '%s' "$(median < "$OUT/$name.cpu")"
        printf -v "M_$name" '%s' "$(sort -g "$OUT/$name.peak" | tail -1)"
        local t="T_$name" c="C_$name" m="M_$name"
        echo "   $name: median $(printf '%.3f' "${!t}") s over $RUNS runs (cpu $(printf '%.3f' "${!c}") s), peak RSS $((${!m} / 1024)) MiB; runs: $(tr '\n' ' ' < "$OUT/$name.times")" >&2
    done
}

rm -f "$OUT"/*.times "$OUT"/*.cpu "$OUT"/*.peak
measure wire "$BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin -o "$OUT/out.bin"
measure wire1 "$BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin --threads 1 -o "$OUT/out1.bin"
# The same run over an output file that exists (kept between runs).
measure replace "$BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin -o "$OUT/kept.bin"
cmp -s "$OUT/out.bin" "$OUT/out1.bin" || die "--threads 1 and the default thread count wrote different bytes"
if [[ $HAVE_PGO == 1 ]]; then
    measure wire_pgo "$PGO_BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin -o "$OUT/out-pgo.bin"
    measure wire1_pgo "$PGO_BIN/apir-opt" "$APIR" -p lower-to-wire --emit=wire-bin --threads 1 -o "$OUT/out-pgo1.bin"
    cmp -s "$OUT/out.bin" "$OUT/out-pgo.bin" || die "the PGO build wrote different bytes"
    cmp -s "$OUT/out.bin" "$OUT/out-pgo1.bin" || die "the PGO build on one thread wrote different bytes"
fi
measure ir "$BIN/apir-opt" "$APIR" -o "$OUT/out.apir"
measure whole "$BIN/apir-opt" "$APIR" -p all --emit=wire-bin -o "$OUT/out-all.bin"
HAVE_BIG=0
if [[ "$BIG" != 0 ]]; then
    measure big "$BIN/apir-opt" "$APIR_BIG" -p lower-to-wire --emit=wire-bin -o "$OUT/out-big.bin"
    HAVE_BIG=1
fi
if [[ $HAVE_MLIR == 1 ]]; then
    measure mlir "$MLIR_OPT" --allow-unregistered-dialect "$MLIR" -o "$OUT/out.mlir"
    measure light "$MLIR_OPT" --allow-unregistered-dialect "$LIGHT" -o "$OUT/out-light.mlir"
else
    echo "== mlir-opt not found (set MLIR_OPT, or install it: apt-get install mlir-22-tools," \
         "binary /usr/lib/llvm-22/bin/mlir-opt); its rows are skipped"
fi
measure wc wc -l "$APIR"
measure warn "$BIN/apir-opt" "$APIR_WARN" -p lower-to-wire --emit=wire-bin -o "$OUT/out-warn.bin"
measure warn_whole "$BIN/apir-opt" "$APIR_WARN" -p lower-to-wire --emit=wire-bin --print-ir-after-failure -o "$OUT/out-warn-whole.bin"
cmp -s "$OUT/out-warn.bin" "$OUT/out-warn-whole.bin" || die "the warning's input gave different bytes streamed and whole"
cmp -s "$OUT/warn.err" "$OUT/warn_whole.err" || die "the warning was reported differently streamed and whole"
# A run that fails as it must (exit code 1), under sh (which /usr/bin/time
# waits for, with the run's peak memory).
FAILS=(sh -c '"$@"; [ $? -eq 1 ]' fails)
measure err "${FAILS[@]}" "$BIN/apir-opt" "$APIR_ERR" -p lower-to-wire --emit=wire-bin -o "$OUT/out-err.bin"
measure err_whole "${FAILS[@]}" "$BIN/apir-opt" "$APIR_ERR" -p lower-to-wire --emit=wire-bin --print-ir-after-failure -o "$OUT/out-err.bin"
cmp -s "$OUT/err.err" "$OUT/err_whole.err" || die "the error was reported differently streamed and whole"
measure syn "${FAILS[@]}" "$BIN/apir-opt" "$APIR_SYN" -p lower-to-wire --emit=wire-bin -o "$OUT/out-syn.bin"
measure syn_whole "${FAILS[@]}" "$BIN/apir-opt" "$APIR_SYN" -p lower-to-wire --emit=wire-bin --print-ir-after-failure -o "$OUT/out-syn.bin"
cmp -s "$OUT/syn.err" "$OUT/syn_whole.err" || die "the syntax error was reported differently streamed and whole"
measure warns "$BIN/apir-opt" "$APIR_WARNS" -p lower-to-wire --emit=wire-bin -o "$OUT/out-warns.bin"
echo "== warns on the whole-module path, once, untimed" >&2
/usr/bin/time -f '%M' -o "$OUT/warns_whole.rss" "$BIN/apir-opt" "$APIR_WARNS" -p lower-to-wire --emit=wire-bin \
    --print-ir-after-failure -o "$OUT/out-warns-whole.bin" 2> "$OUT/warns_whole.err"
cmp -s "$OUT/warns.err" "$OUT/warns_whole.err" || die "the warnings were reported differently streamed and whole"
M_warns_whole=$(tail -1 "$OUT/warns_whole.rss")
# A run that fails with a usage error (exit code 2).
FAILS2=(sh -c '"$@"; [ $? -eq 2 ]' fails)
measure noenc "${FAILS2[@]}" "$BIN/apir-opt" "$APIR" --emit=wire-bin -o "$OUT/out-noenc.bin"
echo "== no pipeline on the whole-module path, once, untimed" >&2
/usr/bin/time -f '%M' -o "$OUT/noenc_whole.rss" "${FAILS2[@]}" "$BIN/apir-opt" "$APIR" --emit=wire-bin \
    --print-ir-after-failure -o "$OUT/out-noenc-whole.bin" 2> "$OUT/noenc_whole.err" \
    || die "the whole-module path did not give the usage error"
cmp -s "$OUT/noenc.err" "$OUT/noenc_whole.err" || die "the usage error was reported differently streamed and whole"
M_noenc_whole=$(tail -1 "$OUT/noenc_whole.rss")
# --split-input-file on the whole-module path: one case of SPLIT_OPS ops,
# then SPLIT_CASES of them; once each, untimed. Each case's module is
# freed before the next case is read, so the peak memory is one case's.
SPLIT_OPS=$(( OPS / 50 > 0 ? OPS / 50 : 1 ))
SPLIT_CASES=20
SPLIT_ONE="$OUT/split-1.apir"
SPLIT_MANY="$OUT/split-$SPLIT_CASES.apir"
"$BIN/apir-gen" --ops "$SPLIT_OPS" --seed "$SEED" --arch "$ARCH" -o "$SPLIT_ONE"
for k in $(seq "$SPLIT_CASES"); do
    (( k > 1 )) && echo "// -----"
    cat "$SPLIT_ONE"
done > "$SPLIT_MANY"
for n in 1 "$SPLIT_CASES"; do
    /usr/bin/time -f '%M' -o "$OUT/split$n.rss" "$BIN/apir-opt" "$OUT/split-$n.apir" --split-input-file \
        -p all --emit=wire-bin -o "$OUT/out-split.bin" 2> "$OUT/split$n.err" \
        || die "--split-input-file on $n cases failed: $(cat "$OUT/split$n.err")"
done
M_split1=$(tail -1 "$OUT/split1.rss")
M_splitn=$(tail -1 "$OUT/split$SPLIT_CASES.rss")
# apir-dis over the lower-to-wire output (kept apart: out* files go
# between rounds).
cp "$OUT/out.bin" "$OUT/dis-in.bin"
measure dis "$BIN/apir-dis" "$OUT/dis-in.bin"
WARNS=$(grep -o '^note: [0-9]* more warnings' "$OUT/warns.err" | grep -o '[0-9]*' || echo 0)
WARNS=$((WARNS + $(grep -c '^warning' "$OUT/warns.err")))
time_rounds

# Instructions per op of lower-to-wire on one thread, counted by callgrind
# on the first INSTR_OPS ops: unlike times, the same on a busy machine, so
# two builds compare by it across runs.
INSTR_LINE=""
if [[ "$INSTR_OPS" != 0 ]] && command -v valgrind >/dev/null; then
    echo "== instructions: callgrind on the first $INSTR_OPS ops" >&2
    awk -v n="$INSTR_OPS" '/^  isa\./ { if (++ops > n) next } /^}/ { next } { print } END { print "}" }' \
        "$APIR" > "$APIR_INSTR"
    # A run that fails (valgrind exits with apir-opt's status) gives no
    # count: the line is left out, the bench goes on.
    counted=$(( INSTR_OPS < OPS ? INSTR_OPS : OPS ))
    # count BINARY: its instructions per op, or nothing if the run failed.
    count() {
        if valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$APIR_INSTR" \
            -p lower-to-wire --emit=wire-bin --threads 1 -o /dev/null 2> "$OUT/instr.err"; then
            awk -v n="$counted" '/refs:/ {gsub(",", "", $NF); printf "%.0f", $NF / n}' "$OUT/instr.err"
        else
            echo "   the counted run of $1 failed (see $OUT/instr.err): no instruction count" >&2
        fi
    }
    per_op=$(count "$BIN/apir-opt")
    if [[ -n "$per_op" ]]; then
        INSTR_LINE="lower-to-wire on one thread: $per_op instructions per op (callgrind, first $counted ops)"
        if [[ $HAVE_PGO == 1 ]]; then
            per_op=$(count "$PGO_BIN/apir-opt")
            [[ -n "$per_op" ]] && INSTR_LINE="$INSTR_LINE; the PGO build: $per_op"
        fi
    fi
    rm -f "$APIR_INSTR"
fi

ops_per_s() { awk -v n="$2" -v t="$1" 'BEGIN {printf "%.0f", n / t}'; }
# a / b, or "n/a" when b is 0 (a cpu time under the 10 ms /usr/bin/time shows)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 == 0) printf "n/a"; else printf "%.2f", a / b}'; }

{
    echo
    echo "apir bench: $OPS ops, seed $SEED, arch $ARCH, median of $RUNS runs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [[ $HAVE_MLIR == 1 ]] && echo "mlir-opt: $MLIR_OPT ($("$MLIR_OPT" --version | grep -o 'LLVM version [0-9.]*' | head -1))"
    printf '%-52s %9s %12s %8s %12s\n' "command" "wall s" "ops/s" "cpu s" "peak RSS MiB"
    row() { printf '%-52s %9.3f %12s %8.3f %12d\n' "$1" "$2" "$(ops_per_s "$2" "$5")" "$4" "$(($3 / 1024))"; }
    row "apir-opt -p lower-to-wire --emit=wire-bin" "$T_wire" "$M_wire" "$C_wire" "$OPS"
    row "  the same with --threads 1" "$T_wire1" "$M_wire1" "$C_wire1" "$OPS"
    row "  the same replacing an existing output file" "$T_replace" "$M_replace" "$C_replace" "$OPS"
    if [[ $HAVE_PGO == 1 ]]; then
        row "  the same, PGO build" "$T_wire_pgo" "$M_wire_pgo" "$C_wire_pgo" "$OPS"
        row "  the same, PGO build, --threads 1" "$T_wire1_pgo" "$M_wire1_pgo" "$C_wire1_pgo" "$OPS"
    fi
    [[ $HAVE_BIG == 1 ]] && row "  the same on $BIG ops" "$T_big" "$M_big" "$C_big" "$BIG"
    row "apir-opt (parse, verify, print IR)" "$T_ir" "$M_ir" "$C_ir" "$OPS"
    row "apir-opt -p all --emit=wire-bin (whole module)" "$T_whole" "$M_whole" "$C_whole" "$OPS"
    if [[ $HAVE_MLIR == 1 ]]; then
        row "mlir-opt, generic form (SSA operands)" "$T_mlir" "$M_mlir" "$C_mlir" "$OPS"
        row "mlir-opt, light form (one array per op)" "$T_light" "$M_light" "$C_light" "$OPS"
    fi
    row "wc -l (apir file)" "$T_wc" "$M_wc" "$C_wc" "$OPS"
    echo
    if [[ $HAVE_MLIR == 1 ]]; then
        echo "lower-to-wire vs mlir-opt, generic form: $(ratio "$T_mlir" "$T_wire")x the ops/s ($(ratio "$C_mlir" "$C_wire")x by cpu time), $(ratio "$M_wire" "$M_mlir")x the peak memory (target: >= 10x)"
        echo "lower-to-wire vs mlir-opt, light form:   $(ratio "$T_light" "$T_wire")x the ops/s ($(ratio "$C_light" "$C_wire")x by cpu time), $(ratio "$M_wire" "$M_light")x the peak memory (target: >= 10x)"
        echo "lower-to-wire on one thread vs mlir-opt: $(ratio "$T_mlir" "$T_wire1")x (generic), $(ratio "$T_light" "$T_wire1")x (light) the ops/s"
    fi
    echo "lower-to-wire vs wc -l: $(ratio "$T_wire" "$T_wc")x the time (target: <= 12x); $(ratio "$L_wire" "$L_wc")x by the fastest runs (wc -l took $(printf '%.3f' "$L_wc")-$(sort -g "$OUT/wc.times" | tail -1 | xargs printf '%.3f') s); replacing an existing output: $(ratio "$T_replace" "$T_wc")x"
    if [[ $HAVE_PGO == 1 ]]; then
        echo "the PGO build: $(ratio "$T_wire_pgo" "$T_wc")x wc -l's time ($(ratio "$L_wire_pgo" "$L_wc")x by the fastest runs); $(ratio "$T_wire" "$T_wire_pgo")x the plain build's speed ($(ratio "$C_wire" "$C_wire_pgo")x by cpu, $(ratio "$T_wire1" "$T_wire1_pgo")x on one thread)"
        if [[ $HAVE_MLIR == 1 ]]; then
            echo "the PGO build vs mlir-opt: $(ratio "$T_mlir" "$T_wire_pgo")x (generic), $(ratio "$T_light" "$T_wire_pgo")x (light) the ops/s"
        fi
    fi
    if [[ -n "$INSTR_LINE" ]]; then echo "$INSTR_LINE"; fi
    echo "peak memory of lower-to-wire: $((M_wire / 1024)) MiB on $OPS ops (target: <= 48 MiB)"
    if [[ $HAVE_BIG == 1 ]]; then
        echo "memory on $BIG ops vs $OPS ops: $((M_big / 1024)) MiB vs $((M_wire / 1024)) MiB = $(ratio "$M_big" "$M_wire")x (target: within 1.10x); time $(ratio "$T_big" "$T_wire")x for $((BIG / OPS))x the ops"
    fi
    echo "one warning: $(printf '%.3f' "$T_warn") s and $((M_warn / 1024)) MiB streamed, $(printf '%.3f' "$T_warn_whole") s and $((M_warn_whole / 1024)) MiB whole; one verifier error: $(printf '%.3f' "$T_err") s and $((M_err / 1024)) MiB streamed, $(printf '%.3f' "$T_err_whole") s and $((M_err_whole / 1024)) MiB whole; one syntax error: $(printf '%.3f' "$T_syn") s and $((M_syn / 1024)) MiB streamed, $(printf '%.3f' "$T_syn_whole") s and $((M_syn_whole / 1024)) MiB whole (the same diagnostics)"
    echo "a warning on each of $WARNS ops: $(printf '%.3f' "$T_warns") s and $((M_warns / 1024)) MiB streamed ($((M_warns_whole / 1024)) MiB whole, once; 50 shown, the rest counted, the same diagnostics)"
    echo "--emit=wire-bin with no pipeline (usage error): $(printf '%.3f' "$T_noenc") s and $((M_noenc / 1024)) MiB streamed ($((M_noenc_whole / 1024)) MiB whole, once; the same diagnostics)"
    echo "--split-input-file, whole-module path (-p all): $SPLIT_CASES cases of $SPLIT_OPS ops $((M_splitn / 1024)) MiB vs one case $((M_split1 / 1024)) MiB = $(ratio "$M_splitn" "$M_split1")x the peak memory"
    echo "apir-dis on the $OPS-op wire-bin: $(printf '%.3f' "$T_dis") s (cpu $(printf '%.3f' "$C_dis") s), $((M_dis / 1024)) MiB"
    echo "whole-module path (-p all): $(awk -v t="$T_whole" -v n="$OPS" 'BEGIN {printf "%.0f", t * 1e9 / n}') ns and $(awk -v m="$M_whole" -v n="$OPS" 'BEGIN {printf "%.0f", m * 1024 / n}') bytes of peak RSS per op"
} | tee "$RESULTS"
echo "(written to $RESULTS)"
exit
}
