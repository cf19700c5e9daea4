#!/usr/bin/env bash
# Builds cadenza and runs the whole test suite twice: a warnings-as-errors build, then
# an AddressSanitizer + UndefinedBehaviorSanitizer build. Prints the Criterion totals
# and ends with "N passed, N failed". Run from anywhere; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
status=0
passed=0
failed=0

run_build() { # name, meson options...
    local dir=$1
    shift
    echo "== $dir: meson setup $*"
    if ! meson setup --wipe "$dir" "$@" >"$dir.setup.log" 2>&1 &&
       ! meson setup "$dir" "$@" >"$dir.setup.log" 2>&1; then
        cat "$dir.setup.log"
        return 1
    fi
    meson compile -C "$dir" || return 1
    meson test -C "$dir" --print-errorlogs --num-processes 2 || return 1
}

count() { # sums the suites' totals in a meson test log: Criterion's synthesis lines and
          # the "N passed, N failed" line of the command-line suite (tests/cli.sh)
    local log=$1/meson-logs/testlog.txt t=0 f=0 a b c
    if [ -f "$log" ]; then
        while read -r a b c; do
            t=$((t + a))
            f=$((f + b + c))
        done < <(sed -n 's/.*Tested: \([0-9]*\) | Passing: [0-9]* | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3/p' "$log")
        while read -r a b; do
            t=$((t + a + b))
            f=$((f + b))
        done < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$log")
    fi
    passed=$((passed + t - f))
    failed=$((failed + f))
}

run_build build-test -Dwerror=true -Dbuildtype=debugoptimized || status=1
count build-test
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_build build-asan -Dwerror=true -Dbuildtype=debug -Db_sanitize=address,undefined \
    -Db_lundef=false -Dc_args=-fno-sanitize-recover=all || status=1
count build-asan
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # a build or a suite failed outside Criterion's counts
fi
echo "$passed passed, $failed failed"
exit "$status"
