#!/usr/bin/env bash
# The staging oracle's table (compiler/tests/integration/staging_oracle.rs): for every
# kernel of its suite, the simulated makespan of the plan `schedule-staging`
# (default options) makes, of the best plan the oracle's brute-force search
# finds (proved by `check-coherency`), their ratio (the goal is <= 1.05; the
# oracle searches every plan shape the planner makes, so the ratio is at
# least 1), the kernel's lower bound and the oracle's ratio to it; then the
# oracle's winning configuration per kernel (accessors, and per staging
# group how its loads and flushes move, buffer count and size, tile
# length), the planner's, and whether the planner's configuration lies in
# the oracle's space; and the size of each search.
#
# Runs `cargo test --release -p apir-compiler --test integration staging_oracle::` with
# APIR_ORACLE_TABLE=1 (one test thread, so the output is not interleaved),
# keeps the whole output in bench-plans/output.txt under the target
# directory ($CARGO_TARGET_DIR, else target/) and prints the table, then the
# tests' verdict (and the goal test's list of misses, and any planner plan
# outside the oracle's space, when those tests fail). With
# APIR_ORACLE_PLANS=1 the output also holds both winning plans of every
# kernel.
#
# Exits with the test run's status: non-zero while a test fails, which
# includes `planner_within_5_percent_of_oracle` while the planner misses the
# goal on some kernel (its message lists every miss).
#
# Usage: tools/bench-plans.sh     (from anywhere inside the repo)

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${CARGO_TARGET_DIR:-$ROOT/target}/bench-plans"
mkdir -p "$OUT"

echo "== building and running the staging oracle (release)"
APIR_ORACLE_TABLE=1 RUST_BACKTRACE=0 cargo test --release -p apir-compiler --test integration staging_oracle:: \
    -- --nocapture --test-threads 1 >"$OUT/output.txt" 2>&1
status=$?

if ! grep -q '^== staging oracle' "$OUT/output.txt"; then
    echo "bench-plans.sh: no table in the test output (exit $status); its tail:" >&2
    tail -n 40 "$OUT/output.txt" >&2
    exit "${status/#0/1}"
fi

{
    echo
    echo "apir staging oracle, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -m)"
    # The table block: from its heading to the total time.
    sed -n '/^== staging oracle/,/^total [0-9.]* s$/p' "$OUT/output.txt"
    echo
    echo "== tests"
    grep -E '^test result:' "$OUT/output.txt" || true
    # The names listed in the last `failures:` block.
    failed=$(awk '/^failures:$/ {n = ""; on = 1; next} on && /^    [a-z_0-9]+$/ {n = n $1 " "} /^test result:/ {on = 0} END {print n}' "$OUT/output.txt")
    if [[ -n "$failed" ]]; then
        echo "failed: $failed"
    fi
    if grep -q 'kernels miss planner makespan' "$OUT/output.txt"; then
        echo
        sed -n '/kernels miss planner makespan/,/^$/p' "$OUT/output.txt"
    fi
    if grep -q "^thread 'planner_plans_lie_in_the_oracle_space'" "$OUT/output.txt"; then
        echo
        echo "planner plans outside the oracle's space:"
        sed -n "/^thread 'planner_plans_lie_in_the_oracle_space'/,/^note:/p" "$OUT/output.txt"
    fi
} | tee "$OUT/results.txt"

if [[ $status -ne 0 ]]; then
    echo "(exit $status; the failing tests' messages are in $OUT/output.txt)"
fi
exit "$status"
