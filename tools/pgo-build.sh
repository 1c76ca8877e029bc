#!/usr/bin/env bash
# Builds apir-opt and apir-dis with profile-guided optimisation (PGO), the
# way a release of the tools is built (README.md, "Performance"):
#
#   1. an instrumented build (`-Cprofile-generate`) into $TARGET/pgo/gen;
#   2. a training run of those binaries (below), which writes profiles;
#   3. `llvm-profdata merge` of the profiles into $TARGET/pgo/apir.profdata
#      (and a copy named by its hash, which the next build reads);
#   4. the release build with them (`-Cprofile-use`) into $TARGET/pgo/use:
#      $TARGET/pgo/use/release/apir-opt and apir-dis.
#
# The code is the same as `cargo build --release`'s and so is every output
# byte; only the compiler's layout and inlining choices differ, taken from
# where the training run spent its time.
#
# The training set covers what the tools are used for, and none of it is
# what tools/bench.sh measures (that is `apir-gen --seed 1`, 1,000,000 ops):
#   - apir-gen modules of other seeds on every arch (v2: 200,000 ops, seed
#     7; v3 and v4: 50,000 ops, seeds 8 and 9; and 20,000 ops with
#     gpsimd kernels, seed 10), through `lower-to-wire` to wire-bin
#     (default threads and --threads 1), wire-hex and json, printed as IR,
#     and the lowered IR read back;
#   - the bundled examples: wire dumps, the staging pipeline's schedule
#     JSON and timeline SVG, and the diagnostics cases;
#   - apir-dis on the wire-bin, wire-hex and json outputs.
#
# Needs `llvm-profdata` of the LLVM major version rustc uses (`rustc -vV`):
# LLVM_PROFDATA if set, else the one of rustup's `llvm-tools` component
# (`rustup component add llvm-tools`), else one on PATH or under
# /usr/lib/llvm-<major>/bin. Without it the script stops (exit 2) before
# building anything and says how to get one.
#
# Environment: CARGO_TARGET_DIR (honoured), RUSTFLAGS (kept, the PGO flags
# added), LLVM_PROFDATA.
#
# Usage: tools/pgo-build.sh        (from anywhere inside the repo)

# The script is one block, which bash reads whole before running any of
# it: editing the file while a run is going on cannot change that run.
{
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PGO="$TARGET/pgo"
PROFILES="$PGO/profiles"
TRAIN="$PGO/train"
PROFDATA="$PGO/apir.profdata"

die() { echo "pgo-build.sh: $1" >&2; exit "${2:-1}"; }

# The LLVM major version rustc is built on, and llvm-profdata's.
rustc_llvm="$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')"
[[ -n "$rustc_llvm" ]] || die "cannot tell rustc's LLVM version from 'rustc -vV'"
profdata_major() {
    "$1" --version 2>/dev/null | sed -n 's/.*LLVM version \([0-9]*\).*/\1/p' | head -1
}

find_profdata() {
    local host sysroot candidates=()
    [[ -n "${LLVM_PROFDATA:-}" ]] && candidates+=("$LLVM_PROFDATA")
    host="$(rustc -vV | sed -n 's/^host: //p')"
    sysroot="$(rustc --print sysroot)"
    candidates+=("$sysroot/lib/rustlib/$host/bin/llvm-profdata")
    command -v llvm-profdata >/dev/null && candidates+=("$(command -v llvm-profdata)")
    candidates+=("/usr/lib/llvm-$rustc_llvm/bin/llvm-profdata")
    local c
    for c in "${candidates[@]}"; do
        if [[ -x "$c" && "$(profdata_major "$c")" == "$rustc_llvm" ]]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

if [[ -n "${LLVM_PROFDATA:-}" ]] && [[ "$(profdata_major "$LLVM_PROFDATA")" != "$rustc_llvm" ]]; then
    die "LLVM_PROFDATA=$LLVM_PROFDATA is not an llvm-profdata of LLVM $rustc_llvm (rustc's)" 2
fi
LLVM_PROFDATA="$(find_profdata)" || die "needs llvm-profdata of LLVM $rustc_llvm (rustc's): \
'rustup component add llvm-tools', or set LLVM_PROFDATA to one" 2
echo "== llvm-profdata: $LLVM_PROFDATA (LLVM $rustc_llvm)"

# The release tools (for apir-gen; it is not trained).
cargo build --release --quiet -p apir-tools --bin apir-gen
GEN="$TARGET/release/apir-gen"

rm -rf "$PROFILES" "$TRAIN"
mkdir -p "$PROFILES" "$TRAIN"

# Profile names uncompressed, so that an llvm-profdata built without zlib
# (as some packaged ones are) reads them.
echo "== instrumented build into $PGO/gen"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$PROFILES -Cllvm-args=-enable-name-compression=false" \
    cargo build --release --quiet -p apir-tools --bin apir-opt --bin apir-dis --target-dir "$PGO/gen"
OPT="$PGO/gen/release/apir-opt"
DIS="$PGO/gen/release/apir-dis"

echo "== training run"
"$GEN" --ops 200000 --seed 7 --arch v2 -o "$TRAIN/v2.apir"
"$GEN" --ops 50000 --seed 8 --arch v3 -o "$TRAIN/v3.apir"
"$GEN" --ops 50000 --seed 9 --arch v4 -o "$TRAIN/v4.apir"
"$GEN" --ops 20000 --seed 10 --arch v2 --kernels 20 -o "$TRAIN/kernels.apir"
for a in v2 v3 v4; do
    "$OPT" "$TRAIN/$a.apir" -p lower-to-wire --emit=wire-bin -o "$TRAIN/$a.bin"
    "$DIS" "$TRAIN/$a.bin" > /dev/null
done
"$OPT" "$TRAIN/v2.apir" -p lower-to-wire --emit=wire-bin --threads 1 -o "$TRAIN/v2-1.bin"
"$OPT" "$TRAIN/v2.apir" -o "$TRAIN/v2-printed.apir"
"$OPT" "$TRAIN/v3.apir" -p lower-to-wire -o "$TRAIN/v3-lowered.apir"
"$OPT" "$TRAIN/v3-lowered.apir" -o /dev/null
"$OPT" "$TRAIN/v4.apir" -p lower-to-wire --emit=wire-hex -o "$TRAIN/v4.hex"
# wire-hex carries no element type: the operands that are not f32 fail
# the alignment check (exit 1), which is a path trained too.
"$DIS" "$TRAIN/v4.hex" --arch v4 > /dev/null || [[ $? == 1 ]]
"$OPT" "$TRAIN/v4.apir" -p lower-to-wire --emit=json -o "$TRAIN/v4.json"
"$DIS" "$TRAIN/v4.json" > /dev/null
"$OPT" "$TRAIN/kernels.apir" -p all --emit=wire-bin -o "$TRAIN/kernels.bin"
"$OPT" "$TRAIN/kernels.apir" -p all --emit=schedule-json -o /dev/null
"$OPT" examples/batchnorm.apir -p lower-to-wire --emit=wire-dump -o /dev/null
"$OPT" examples/relu-kernel.apir -p all --emit=schedule-json -o /dev/null
"$OPT" examples/relu-kernel.apir -p all --emit=timeline-svg -o /dev/null
"$OPT" examples/cases.apir --split-input-file --verify-diagnostics > /dev/null

echo "== merging $(find "$PROFILES" -name '*.profraw' | wc -l) profiles into $PROFDATA"
"$LLVM_PROFDATA" merge -o "$PROFDATA" "$PROFILES"
# The profile's path names its content, so that a new profile changes the
# flags and cargo rebuilds rather than keeping a build of an older one.
rm -f "$PGO"/apir-*.profdata
USE="$PGO/apir-$(sha256sum "$PROFDATA" | cut -c1-16).profdata"
cp "$PROFDATA" "$USE"

echo "== release build with the profile into $PGO/use"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$USE" \
    cargo build --release --quiet -p apir-tools --bin apir-opt --bin apir-dis --target-dir "$PGO/use"
rm -rf "$TRAIN"
echo "== built $PGO/use/release/apir-opt and $PGO/use/release/apir-dis"
exit
}
