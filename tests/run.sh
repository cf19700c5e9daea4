#!/usr/bin/env bash
# Installs the test clients (npm ci --prefix tests/node), builds cadenza and runs the whole
# test suite twice: a warnings-as-errors build, then an AddressSanitizer +
# UndefinedBehaviorSanitizer build; then builds the libFuzzer
# harnesses with clang (build-fuzz, -Dfuzz=enabled) and runs each for CZ_FUZZ_SECONDS
# (default 20) on its corpus (tests/fuzz/run.sh, docs/testing.md). Prints the Criterion
# totals and ends with "N passed, N failed" (a fuzz harness that ran clean is one pass).
# Run from anywhere; exits non-zero on any failure, a missing clang included.
set -u
cd "$(dirname "$0")/.."
status=0
passed=0
failed=0

setup_build() { # name, meson options...: configures and compiles
    local dir=$1
    shift
    echo "== $dir: meson setup $*"
    if ! meson setup --wipe "$dir" "$@" >"$dir.setup.log" 2>&1 &&
       ! meson setup "$dir" "$@" >"$dir.setup.log" 2>&1; then
        cat "$dir.setup.log"
        return 1
    fi
    meson compile -C "$dir" || return 1
}

run_build() { # name, meson options...: configures, compiles and runs the suites
    setup_build "$@" || return 1
    meson test -C "$1" --print-errorlogs --num-processes 2 || return 1
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

# The independent implementations some tests check against (the official OpenAI client, a
# reference tokenizer, a Jinja renderer): npm packages pinned in tests/node's lock file.
if command -v npm >/dev/null 2>&1; then
    echo "== npm ci --prefix tests/node (the test clients)"
    if ! npm ci --prefix tests/node --no-audit --no-fund >npm-ci.log 2>&1; then
        cat npm-ci.log
        echo "npm: FAIL: cannot install tests/node's packages"
        status=1
        failed=$((failed + 1))
    fi
else
    echo "== no npm: the checks against the OpenAI client, the reference tokenizer and Jinja skip"
fi

# The CUDA backend is compiled (warnings as errors) wherever the toolkit is installed; its
# comparison tests skip without a device. The sanitizer and fuzz builds leave it out.
[ -x /usr/local/cuda/bin/nvcc ] && PATH=$PATH:/usr/local/cuda/bin
if command -v nvcc >/dev/null 2>&1; then
    cuda=enabled
    echo "== CUDA toolkit found ($(command -v nvcc)): build-test compiles the CUDA backend"
else
    cuda=disabled
    echo "== no CUDA toolkit (nvcc): build-test leaves the CUDA backend out"
fi
run_build build-test -Dwerror=true -Dcuda=$cuda || status=1
count build-test
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_build build-asan -Dwerror=true -Dbuildtype=debug -Dcuda=disabled -Db_sanitize=address,undefined \
    -Db_lundef=false "-Dc_args=-fno-sanitize-recover=all -fsanitize=float-cast-overflow" || status=1
count build-asan

# libFuzzer stage: clang is required (CI installs clang and libclang-rt-14-dev)
fuzz_seconds=${CZ_FUZZ_SECONDS:-20}
echo "== fuzz stage: clang and libFuzzer, each harness for $fuzz_seconds s (tests/fuzz/run.sh)"
if ! command -v clang >/dev/null 2>&1; then
    echo "build-fuzz: FAIL: clang is not installed; the fuzz stage needs clang and libFuzzer" \
         "(apt-get install clang libclang-rt-14-dev, as in the README's command)"
    status=1
    failed=$((failed + 1))
elif ! CC=clang setup_build build-fuzz -Dfuzz=enabled -Dtests=disabled -Dcuda=disabled -Dwerror=true \
        -Dbuildtype=debugoptimized; then
    status=1
    failed=$((failed + 1))
else
    # readable stacks in a fuzzer's report when the symbolizer is there (llvm-14)
    if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/bin/llvm-symbolizer-14 ]; then
        export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14
    fi
    tests/fuzz/run.sh build-fuzz "$fuzz_seconds" | tee build-fuzz/fuzz-run.log
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    read -r a b < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' \
                      build-fuzz/fuzz-run.log | tail -n 1)
    passed=$((passed + ${a:-0}))
    failed=$((failed + ${b:-1}))
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # a build or a suite failed outside Criterion's counts
fi
echo "$passed passed, $failed failed"
exit "$status"
